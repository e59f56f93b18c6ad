// AWS Batch (rest-json) operations for service environments, job queues and service jobs.
#include <algorithm>
#include <charconv>

#include "api/decode.h"
#include "api/errors.h"
#include "api/encode.h"
#include "api/operations.h"
#include "api/service_model.h"
#include "control/controller.h"
#include "core/strings.h"
#include "core/training_spec_json.h"

namespace ty::api {

using nlohmann::json;
using control::Controller;
using control::ServiceJobState;
using control::State;

json EncodeTags(const Tags& tags) {
  json j = json::object();
  for (const auto& [k, v] : tags) j[k] = v;
  return j;
}

namespace {

json EncodeEnvironment(const ServiceEnvironment& e) {
  json limits = json::array();
  for (const auto& l : e.capacity_limits) limits.push_back({{"maxCapacity", l.max_capacity}, {"capacityUnit", l.capacity_unit}});
  json j = {{"serviceEnvironmentName", e.name}, {"serviceEnvironmentArn", e.arn},
            {"serviceEnvironmentType", e.type}, {"state", ToWire(e.state)},
            {"status", e.status},               {"capacityLimits", limits}};
  if (!e.tags.empty()) j["tags"] = EncodeTags(e.tags);
  return j;
}

json EncodeQueue(const State& s, const JobQueue& q) {
  json order = json::array();
  for (const auto& o : q.service_environment_order) {
    auto it = s.environments.find(o.service_environment);
    order.push_back({{"order", o.order},
                     {"serviceEnvironment", it == s.environments.end() ? o.service_environment : it->second.arn}});
  }
  json compute = json::array();
  for (const auto& o : q.compute_environment_order) {
    auto it = s.compute_environments.find(o.compute_environment);
    compute.push_back({{"order", o.order},
                       {"computeEnvironment", it == s.compute_environments.end() ? o.compute_environment : it->second.arn}});
  }
  json j = {{"jobQueueName", q.name},        {"jobQueueArn", q.arn},
            {"state", ToWire(q.state)},      {"status", q.status},
            {"statusReason", q.status_reason}, {"priority", q.priority},
            {"computeEnvironmentOrder", compute}, {"serviceEnvironmentOrder", order},
            {"jobQueueType", q.job_queue_type},
            {"jobStateTimeLimitActions", json::parse(q.job_state_time_limit_actions_json.empty() ? "[]" : q.job_state_time_limit_actions_json)}};
  if (!q.scheduling_policy_arn.empty()) j["schedulingPolicyArn"] = q.scheduling_policy_arn;
  if (!q.tags.empty()) j["tags"] = EncodeTags(q.tags);
  return j;
}

json EncodePolicy(const SchedulingPolicy& p) {
  json j = {{"name", p.name}, {"arn", p.arn}};
  if (!p.fairshare_policy_json.empty()) j["fairsharePolicy"] = json::parse(p.fairshare_policy_json);
  if (!p.quotashare_policy_json.empty()) j["quotaSharePolicy"] = json::parse(p.quotashare_policy_json);
  if (!p.tags.empty()) j["tags"] = EncodeTags(p.tags);
  return j;
}

json EncodeQuotaShare(const State& s, const QuotaShare& q) {
  json limits = json::array();
  for (const auto& l : q.capacity_limits) limits.push_back({{"maxCapacity", l.max_capacity}, {"capacityUnit", l.capacity_unit}});
  json sharing = {{"strategy", ToWire(q.strategy)}};
  if (q.strategy == ShareStrategy::kLendAndBorrow) sharing["borrowLimit"] = q.borrow_limit;
  auto queue = s.queues.find(q.queue);
  json j = {{"quotaShareName", q.name}, {"quotaShareArn", q.arn},
            {"jobQueueArn", queue == s.queues.end() ? q.queue : queue->second.arn},
            {"capacityLimits", limits}, {"resourceSharingConfiguration", sharing},
            {"preemptionConfiguration", {{"inSharePreemption", q.in_share_preemption ? "ENABLED" : "DISABLED"}}},
            {"state", ToWire(q.state)}, {"status", "VALID"}};
  if (!q.tags.empty()) j["tags"] = EncodeTags(q.tags);
  return j;
}

json EncodeJobDefinition(const JobDefinition& d) {
  json j = json::parse(d.spec_json, nullptr, false);
  if (!j.is_object()) j = json::object();
  j["jobDefinitionName"] = d.name;
  j["jobDefinitionArn"] = d.arn;
  j["revision"] = d.revision;
  j["status"] = d.active ? "ACTIVE" : "INACTIVE";
  j["type"] = d.type;
  j["containerOrchestrationType"] = "ECS";
  if (!j.contains("platformCapabilities")) j["platformCapabilities"] = json::array({"EC2"});
  if (!j.contains("parameters")) j["parameters"] = json::object();
  j["tags"] = EncodeTags(d.tags);
  return j;
}

// DescribeJobDefinitions: the revisions named (name, name:revision or ARN) in jobDefinitions, or
// those of jobDefinitionName, or every one; held to `status` when given; paged in name, then
// revision order (the token is the next page's first "name:revision").
Response DescribeJobDefinitions(Controller& c, const json& req) {
  std::vector<std::string> wanted = req.value("jobDefinitions", std::vector<std::string>{});
  const std::string by_name = req.value("jobDefinitionName", "");
  const std::string status = req.value("status", "");
  if (!status.empty() && status != "ACTIVE" && status != "INACTIVE")
    return InvalidArgument("status: must be ACTIVE or INACTIVE, not '" + status + "'");
  if (!wanted.empty() && !by_name.empty())
    return InvalidArgument("jobDefinitions and jobDefinitionName can't both be given");
  if (wanted.size() > 100) return InvalidArgument("jobDefinitions: at most 100 are allowed");
  const int64_t max = req.value("maxResults", int64_t{100});
  if (max < 1 || max > 1000) return InvalidArgument("maxResults: must be from 1 to 1000");
  const std::string token = req.value("nextToken", "");
  std::string token_name;
  int token_rev = 0;
  if (!token.empty()) {
    auto colon = token.rfind(':');
    if (colon == std::string::npos || colon == 0) return InvalidArgument("nextToken: '" + token + "' is not a token this server gave");
    token_name = token.substr(0, colon);
    auto [end, ec] = std::from_chars(token.data() + colon + 1, token.data() + token.size(), token_rev);
    if (ec != std::errc() || end != token.data() + token.size() || token_rev < 1)
      return InvalidArgument("nextToken: '" + token + "' is not a token this server gave");
  }
  return c.Read([&](const State& s) -> Response {
    std::vector<const JobDefinition*> found;
    auto take = [&](const JobDefinition& d) {
      if (status.empty() || (status == "ACTIVE") == d.active) found.push_back(&d);
    };
    auto take_name = [&](const std::string& name) {
      if (auto it = s.job_definitions.find(name); it != s.job_definitions.end())
        for (const auto& [rev, d] : it->second) take(d);
    };
    if (!wanted.empty()) {
      for (const auto& w : wanted) {
        if (const JobDefinition* d = Controller::FindJobDefinition(s, w)) take(*d);
        else if (!StartsWith(w, "arn:") && w.find(':') == std::string::npos) take_name(w);
      }
    } else if (!by_name.empty()) {
      take_name(by_name);
    } else {
      for (const auto& [name, revisions] : s.job_definitions)
        for (const auto& [rev, d] : revisions) take(d);
    }
    json list = json::array();
    json out = json::object();
    for (const JobDefinition* d : found) {
      if (!token.empty() && std::make_pair(d->name, d->revision) < std::make_pair(token_name, token_rev)) continue;
      if (static_cast<int64_t>(list.size()) == max) {
        out["nextToken"] = d->name + ":" + std::to_string(d->revision);
        break;
      }
      list.push_back(EncodeJobDefinition(*d));
    }
    out["jobDefinitions"] = std::move(list);
    return out;
  });
}

// ---- Compute environments and container jobs (docs/batch-jobs.md) ----

json EncodeComputeEnvironment(const State&, const ComputeEnvironment& e) {
  json j = {{"computeEnvironmentName", e.name}, {"computeEnvironmentArn", e.arn}, {"type", e.type},
            {"state", ToWire(e.state)},        {"status", e.status},           {"statusReason", "ComputeEnvironment Healthy"},
            {"containerOrchestrationType", "ECS"}, {"tags", EncodeTags(e.tags)}};
  if (!e.compute_resources_json.empty()) j["computeResources"] = json::parse(e.compute_resources_json, nullptr, false);
  if (e.type == "UNMANAGED") j["unmanagedvCpus"] = e.unmanaged_vcpus;
  return j;
}


json EncodeContainerAttempt(const ContainerAttempt& a) {
  json container = {{"logStreamName", a.log_stream_name}};
  if (a.has_exit_code) container["exitCode"] = a.exit_code;
  if (!a.reason.empty()) container["reason"] = a.reason;
  json j = {{"container", container}, {"startedAt", a.started_at}, {"statusReason", a.status_reason}};
  if (a.stopped_at) j["stoppedAt"] = a.stopped_at;
  return j;
}

json EncodeArrayProperties(const State& s, const ContainerJob& j) {
  if (j.array_size > 0) {
    json summary = json::object();
    for (const auto& [st, n] : Controller::ArrayStatusSummary(s, j)) summary[JobStatusName(st)] = n;
    return {{"size", j.array_size}, {"statusSummary", summary}};
  }
  if (j.array_index >= 0) return {{"index", j.array_index}};
  return json();
}

std::string QueueArn(const State& s, const std::string& queue) {
  auto q = s.queues.find(queue);
  return q == s.queues.end() ? queue : q->second.arn;
}

json EncodeContainerJob(const State& s, const ContainerJob& j) {
  json env = json::array();
  for (const auto& [k, v] : j.environment) env.push_back({{"name", k}, {"value", v}});
  json resources = json::array({{{"type", "VCPU"}, {"value", std::to_string(j.vcpus)}},
                                {{"type", "MEMORY"}, {"value", std::to_string(j.memory_mib)}}});
  if (j.gpus > 0) resources.push_back({{"type", "GPU"}, {"value", std::to_string(j.gpus)}});
  json container = {{"image", j.image}, {"command", j.command}, {"environment", env}, {"resourceRequirements", resources}};
  if (!j.job_role_arn.empty()) container["jobRoleArn"] = j.job_role_arn;
  json attempts = json::array();
  for (const auto& a : j.attempts) attempts.push_back(EncodeContainerAttempt(a));
  if (!j.attempts.empty()) {
    const json last = EncodeContainerAttempt(j.attempts.back())["container"];
    for (auto& [k, v] : last.items()) container[k] = v;
  }
  json rules = json::array();
  for (const auto& r : j.evaluate_on_exit) {
    json rule = {{"action", r.retry ? "RETRY" : "EXIT"}};
    if (!r.on_exit_code.empty()) rule["onExitCode"] = r.on_exit_code;
    if (!r.on_reason.empty()) rule["onReason"] = r.on_reason;
    if (!r.on_status_reason.empty()) rule["onStatusReason"] = r.on_status_reason;
    rules.push_back(rule);
  }
  json deps = json::array();
  for (const auto& d : j.depends_on) {
    json dep = json::object();
    if (!d.job_id.empty()) dep["jobId"] = d.job_id;
    if (!d.type.empty()) dep["type"] = d.type;
    deps.push_back(dep);
  }
  json out = {{"jobArn", j.arn},       {"jobName", j.name},
              {"jobId", j.id},         {"jobQueue", QueueArn(s, j.queue)},
              {"status", JobStatusName(j.status)},
              {"createdAt", j.created_at},
              {"jobDefinition", j.job_definition},
              {"dependsOn", deps},     {"container", container},
              {"attempts", attempts},  {"retryStrategy", {{"attempts", j.retry_attempts}, {"evaluateOnExit", rules}}},
              {"tags", EncodeTags(j.tags)}, {"propagateTags", j.propagate_tags},
              {"platformCapabilities", json::array({"EC2"})}};
  if (!j.status_reason.empty()) out["statusReason"] = j.status_reason;
  if (j.started_at) out["startedAt"] = j.started_at;
  if (j.stopped_at) out["stoppedAt"] = j.stopped_at;
  if (j.attempt_duration_seconds > 0) out["timeout"] = {{"attemptDurationSeconds", j.attempt_duration_seconds}};
  if (!j.share_identifier.empty()) {
    out["shareIdentifier"] = j.share_identifier;
    out["schedulingPriority"] = j.scheduling_priority;
  }
  if (json a = EncodeArrayProperties(s, j); !a.is_null()) out["arrayProperties"] = a;
  return out;
}

json EncodeContainerSummary(const State& s, const ContainerJob& j) {
  json out = {{"jobArn", j.arn}, {"jobId", j.id}, {"jobName", j.name}, {"createdAt", j.created_at},
              {"status", JobStatusName(j.status)}, {"jobDefinition", j.job_definition}};
  if (!j.status_reason.empty()) out["statusReason"] = j.status_reason;
  if (j.started_at) out["startedAt"] = j.started_at;
  if (j.stopped_at) out["stoppedAt"] = j.stopped_at;
  if (!j.attempts.empty()) {
    const ContainerAttempt& a = j.attempts.back();
    json c = json::object();
    if (a.has_exit_code) c["exitCode"] = a.exit_code;
    if (!a.reason.empty()) c["reason"] = a.reason;
    out["container"] = c;
  }
  if (json a = EncodeArrayProperties(s, j); !a.is_null()) out["arrayProperties"] = a;
  return out;
}

Response DescribeJobs(Controller& c, const json& req) {
  const std::vector<std::string> ids = req.value("jobs", std::vector<std::string>{});
  if (ids.size() > 100) return InvalidArgument("jobs: at most 100 job ids may be given");
  return c.Read([&](const State& s) -> Response {
    json list = json::array();
    for (const auto& id : ids)
      if (const ContainerJob* j = s.FindContainerJob(id)) list.push_back(EncodeContainerJob(s, *j));
    return json{{"jobs", list}};
  });
}

// ListJobs: a queue's jobs and array parents (children through arrayJobId), by status, or with one
// filter (JOB_NAME, BEFORE_CREATED_AT, AFTER_CREATED_AT: every status). Paged by submit order (an
// array's children by index); the token is the next item's seq or index.
Response ListJobs(Controller& c, const json& req) {
  const std::string queue_ref = req.value("jobQueue", "");
  const std::string array_id = req.value("arrayJobId", "");
  const std::string status_name = req.value("jobStatus", "");
  if (!req.value("multiNodeJobId", "").empty())
    return InvalidArgument("multiNodeJobId: multi-node parallel jobs are not supported by this server");
  if (queue_ref.empty() == array_id.empty())
    return InvalidArgument("ListJobs takes exactly one of jobQueue and arrayJobId");
  const int64_t max = req.value("maxResults", int64_t{100});
  if (max < 1 || max > 1000) return InvalidArgument("maxResults must be from 1 to 1000");
  const std::string token = req.value("nextToken", "");
  if (!token.empty() && (token.size() > 19 || token.find_first_not_of("0123456789") != std::string::npos))
    return InvalidArgument("nextToken: '" + token + "' is not a token this server gave");
  const uint64_t from = token.empty() ? 0 : std::stoull(token);
  std::optional<JobStatus> wanted;
  if (!status_name.empty()) wanted = ParseJobStatus(status_name);
  const json filters = req.value("filters", json::array());
  if (filters.size() > 1) return InvalidArgument("filters: only one filter may be given");
  std::string fname, fvalue;
  if (!filters.empty()) {
    fname = filters[0].value("name", "");
    const auto values = filters[0].value("values", std::vector<std::string>{});
    if (fname != "JOB_NAME" && fname != "BEFORE_CREATED_AT" && fname != "AFTER_CREATED_AT" && fname != "JOB_DEFINITION")
      return InvalidArgument("filters[0].name must be JOB_NAME, JOB_DEFINITION, BEFORE_CREATED_AT or AFTER_CREATED_AT");
    if (values.size() != 1) return InvalidArgument("filters[0].values must hold exactly one value");
    fvalue = values[0];
    if ((fname == "BEFORE_CREATED_AT" || fname == "AFTER_CREATED_AT") &&
        (fvalue.empty() || fvalue.size() > 15 || fvalue.find_first_not_of("0123456789") != std::string::npos))
      return InvalidArgument("filters[0].values: " + fname + " takes epoch milliseconds");
  }
  // With a filter every status is listed; else jobStatus, RUNNING when absent (as AWS).
  if (!fname.empty()) wanted.reset();
  else if (!wanted) wanted = JobStatus::kRunning;
  auto matches = [&](const ContainerJob& j) {
    if (wanted && j.status != *wanted) return false;
    if (fname == "JOB_NAME") {
      return EndsWith(fvalue, "*") ? StartsWith(j.name, fvalue.substr(0, fvalue.size() - 1)) : j.name == fvalue;
    }
    if (fname == "JOB_DEFINITION")
      return j.job_definition == fvalue || (StartsWith(j.job_definition, "arn:") &&
                                            j.job_definition.substr(j.job_definition.rfind('/') + 1).rfind(fvalue, 0) == 0);
    if (fname == "BEFORE_CREATED_AT") return j.created_at < std::stoll(fvalue);
    if (fname == "AFTER_CREATED_AT") return j.created_at > std::stoll(fvalue);
    return true;
  };
  return c.Read([&](const State& s) -> Response {
    json list = json::array();
    std::string next;
    if (!array_id.empty()) {
      const ContainerJob* parent = s.FindContainerJob(array_id);
      if (!parent || parent->array_size == 0) return InvalidArgument("arrayJobId: " + array_id + " is not an array job");
      // Children not made yet are listed as what they are: PENDING or RUNNABLE with the parent.
      auto made = s.array_children.find(parent->seq);
      for (int64_t i = static_cast<int64_t>(from); i < parent->array_size; ++i) {
        const ContainerJob* child = nullptr;
        if (made != s.array_children.end())
          if (auto it = made->second.find(i); it != made->second.end()) child = &s.container_jobs.at(it->second);
        ContainerJob unmade;
        if (!child) {
          unmade.id = parent->id + ":" + std::to_string(i);
          unmade.arn = parent->arn + ":" + std::to_string(i);
          unmade.name = parent->name;
          unmade.created_at = parent->created_at;
          unmade.job_definition = parent->job_definition;
          unmade.array_index = i;
          unmade.status = IsTerminal(parent->status) ? JobStatus::kFailed
                          : parent->released         ? JobStatus::kRunnable
                                                     : JobStatus::kPending;
          child = &unmade;
        }
        if (!matches(*child)) continue;
        if (static_cast<int64_t>(list.size()) == max) {
          next = std::to_string(i);
          break;
        }
        list.push_back(EncodeContainerSummary(s, *child));
      }
    } else {
      const JobQueue* q = Controller::FindQueue(s, queue_ref);
      if (!q) return InvalidArgument("jobQueue: job queue " + queue_ref + " does not exist");
      std::vector<uint64_t> seqs;
      if (auto by = s.container_by_queue_status.find(q->name); by != s.container_by_queue_status.end())
        for (const auto& [st, set] : by->second)
          if (!wanted || st == *wanted)
            for (uint64_t seq : set)
              if (seq >= from) seqs.push_back(seq);
      std::sort(seqs.begin(), seqs.end());
      for (uint64_t seq : seqs) {
        const ContainerJob& j = s.container_jobs.at(seq);
        if (!matches(j)) continue;
        if (static_cast<int64_t>(list.size()) == max) {
          next = std::to_string(seq);
          break;
        }
        list.push_back(EncodeContainerSummary(s, j));
      }
    }
    json out = {{"jobSummaryList", list}};
    if (!next.empty()) out["nextToken"] = next;
    return out;
  });
}

json EncodeResourceId(const std::string& arn) { return {{"name", "TrainingJobArn"}, {"value", arn}}; }

json CapacityUsage(const ServiceJob& j) {
  return json::array({{{"capacityUnit", j.instance_type}, {"quantity", j.instance_count}}});
}

void PutIf(json& j, const char* key, EpochMs v) {
  if (v) j[key] = v;
}

json EncodeJobSummary(const State& s, const ServiceJobState& js) {
  const ServiceJob& job = js.job;
  json j = {{"jobArn", job.arn},   {"jobId", job.id},          {"jobName", job.name},
            {"serviceJobType", "SAGEMAKER_TRAINING"},          {"status", JobStatusName(job.status)},
            {"createdAt", job.created_at}, {"capacityUsage", CapacityUsage(job)}};
  if (!job.status_reason.empty()) j["statusReason"] = job.status_reason;
  // A RUNNABLE job's statusReason says why it waits, from the last scheduling pass.
  if (const std::string& wait = s.WaitReasonOf(js); job.status == JobStatus::kRunnable && !wait.empty()) j["statusReason"] = wait;
  PutIf(j, "scheduledAt", job.scheduled_at);
  PutIf(j, "startedAt", job.started_at);
  PutIf(j, "stoppedAt", job.stopped_at);
  if (!job.share_identifier.empty()) j["shareIdentifier"] = job.share_identifier;
  if (!job.quota_share_name.empty()) j["quotaShareName"] = job.quota_share_name;
  if (!job.attempts.empty()) j["latestAttempt"] = {{"serviceResourceId", EncodeResourceId(job.attempts.back().training_job_arn)}};
  return j;
}

// Work thrown away by preemptions (docs/scheduling.md, "Checkpoints and work lost"), in hours:
// instance-hours, and GPU-hours (instance-hours × the catalogue's GPUs per instance; 0 for
// types without GPUs).
json PreemptionLoss(int64_t instance_ms, int64_t gpu_ms) {
  return {{"instanceHours", static_cast<double>(instance_ms) / 3.6e6}, {"gpuHours", static_cast<double>(gpu_ms) / 3.6e6}};
}

// for_event: the detail of an event (Batch's service job events): no tags, payload or status history.
json EncodeJobDetail(const State& s, const ServiceJobState& js, bool for_event = false) {
  const ServiceJob& job = js.job;
  json j = EncodeJobSummary(s, js);
  auto q = s.queues.find(job.queue);
  j["jobQueue"] = q == s.queues.end() ? job.queue : q->second.arn;
  // startedAt is a required member in the model, yet AWS leaves it out until the job starts (a 0
  // would read as 1970-01-01 in every SDK); EncodeJobSummary puts it in once it is known.
  j["isTerminated"] = job.is_terminated;
  // A tuning trial's payload is its tuning job's training definition; its spec has the trial's values.
  if (!for_event)
    j["serviceRequestPayload"] =
        job.tuning_job_arn.empty() ? job.payload : EchoTrainingRequest(json::parse(job.payload, nullptr, false), job.spec).dump();
  if (job.has_scheduling_priority) j["schedulingPriority"] = job.scheduling_priority;
  if (!job.retry_strategy_json.empty()) j["retryStrategy"] = json::parse(job.retry_strategy_json);
  if (!job.timeout_config_json.empty()) j["timeoutConfig"] = json::parse(job.timeout_config_json);
  if (!job.preemption_configuration_json.empty())
    j["preemptionConfiguration"] = json::parse(job.preemption_configuration_json);
  if (!job.tags.empty() && !for_event) j["tags"] = EncodeTags(job.tags);
  json attempts = json::array();
  for (const auto& a : job.attempts) {
    json aj = {{"serviceResourceId", EncodeResourceId(a.training_job_arn)}};
    PutIf(aj, "startedAt", a.started_at);
    PutIf(aj, "stoppedAt", a.stopped_at);
    if (!a.status_reason.empty()) aj["statusReason"] = a.status_reason;
    attempts.push_back(aj);
  }
  j["attempts"] = attempts;
  if (job.preempted_attempt_count > 0) {
    json recent = json::array();
    for (const auto& a : job.attempts) {
      if (a.status_reason.rfind("Preempted", 0) != 0) continue;
      json aj = {{"serviceResourceId", EncodeResourceId(a.training_job_arn)}, {"statusReason", a.status_reason}};
      PutIf(aj, "startedAt", a.started_at);
      PutIf(aj, "stoppedAt", a.stopped_at);
      recent.push_back(aj);
    }
    while (recent.size() > 5) recent.erase(recent.begin());
    j["preemptionSummary"] = {{"preemptedAttemptCount", job.preempted_attempt_count}, {"recentPreemptedAttempts", recent}};
  }
  // trainyard extensions (clients ignore members they do not know).
  if (job.preemption_lost_instance_ms > 0) j["trainyardPreemptionLoss"] = PreemptionLoss(job.preemption_lost_instance_ms, job.preemption_lost_gpu_ms);
  if (!for_event) {
    json history = json::array();
    for (const auto& [st, at] : js.history) history.push_back({{"status", st}, {"at", at}});
    j["trainyardStatusHistory"] = history;
  }
  if (const std::string& wait = s.WaitReasonOf(js); !wait.empty()) j["trainyardWaitReason"] = wait;
  return j;
}

// Pagination over an ordered sequence of string keys: the token is the first key of the next page.
template <typename It, typename Key, typename Emit>
std::string Paginate(It begin, It end, Key key, const std::string& token, size_t max, Emit emit) {
  size_t n = 0;
  for (It it = begin; it != end; ++it) {
    if (!token.empty() && key(*it) < token) continue;
    if (n == max) return key(*it);
    emit(*it);
    ++n;
  }
  return "";
}

Response DescribePolicies(Controller& c, const json& req) {
  std::vector<std::string> arns = req.value("arns", std::vector<std::string>{});
  return c.Read([&](const State& s) -> Response {
    json list = json::array();
    for (const auto& a : arns)
      if (const SchedulingPolicy* p = Controller::FindPolicy(s, a)) list.push_back(EncodePolicy(*p));
    return json{{"schedulingPolicies", list}};
  });
}

Response ListPolicies(Controller& c, const json& req) {
  size_t max = req.value("maxResults", 100);
  std::string token = req.value("nextToken", "");
  return c.Read([&](const State& s) -> Response {
    json list = json::array();
    std::string next = Paginate(s.policies.begin(), s.policies.end(), [](auto& p) { return p.first; }, token, max,
                                [&](auto& p) { list.push_back({{"arn", p.second.arn}}); });
    json out = {{"schedulingPolicies", list}};
    if (!next.empty()) out["nextToken"] = next;
    return out;
  });
}

// Describe* of named resources: the ones asked for by name or ARN, else every one, paginated.
template <typename Map, typename Find, typename Encode>
Response DescribeNamed(Controller& c, const json& req, const char* wanted_key, const char* list_key, Map State::*map,
                       Find find, Encode encode) {
  std::vector<std::string> wanted = req.value(wanted_key, std::vector<std::string>{});
  size_t max = req.value("maxResults", 100);
  std::string token = req.value("nextToken", "");
  return c.Read([&](const State& s) -> Response {
    json list = json::array();
    std::string next;
    if (!wanted.empty()) {
      for (const auto& w : wanted)
        if (const auto* item = find(s, w)) list.push_back(encode(s, *item));
    } else {
      const Map& all = s.*map;
      next = Paginate(all.begin(), all.end(), [](auto& p) { return p.first; }, token, max,
                      [&](auto& p) { list.push_back(encode(s, p.second)); });
    }
    json out = {{list_key, list}};
    if (!next.empty()) out["nextToken"] = next;
    return out;
  });
}

Response DescribeEnvironments(Controller& c, const json& req) {
  return DescribeNamed(c, req, "serviceEnvironments", "serviceEnvironments", &State::environments,
                       Controller::FindEnvironment,
                       [](const State&, const ServiceEnvironment& e) { return EncodeEnvironment(e); });
}

Response DescribeQueues(Controller& c, const json& req) {
  return DescribeNamed(c, req, "jobQueues", "jobQueues", &State::queues, Controller::FindQueue, EncodeQueue);
}

Response DescribeComputeEnvironments(Controller& c, const json& req) {
  return DescribeNamed(c, req, "computeEnvironments", "computeEnvironments", &State::compute_environments,
                       Controller::FindComputeEnvironment, EncodeComputeEnvironment);
}

Response ListServiceJobs(Controller& c, const json& req) {
  std::string queue_ref = req.value("jobQueue", "");
  std::string status_name = req.value("jobStatus", "");
  size_t max = req.value("maxResults", 100);
  std::string token = req.value("nextToken", "");
  json filters = req.value("filters", json::array());
  // trainyard:tag (docs/api-coverage.md): keeps the jobs carrying every given tag, beside at most
  // one of AWS's filters, whose rules (statuses, order) then apply.
  static const std::string kTagFilter = "trainyard:tag";
  std::vector<std::pair<std::string, std::string>> tags;
  bool tag_filter = false;
  json aws_filters = json::array();
  for (const auto& f : filters) {
    if (f.value("name", "") != kTagFilter) {
      aws_filters.push_back(f);
      continue;
    }
    if (tag_filter) return InvalidArgument("filters: " + kTagFilter + " may be given only once (list every tag in its values)");
    tag_filter = true;
    const auto values = f.value("values", std::vector<std::string>{});
    if (values.empty()) return InvalidArgument("filters: " + kTagFilter + " needs at least one value key=value");
    for (const std::string& v : values) {
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        return InvalidArgument("filters: " + kTagFilter + " values must be key=value with a non-empty key, not '" +
                               v.substr(0, 128) + "'");
      tags.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    }
  }
  if (aws_filters.size() > 1) return InvalidArgument("filters: only one filter may be given at a time");
  std::string fname;
  std::vector<std::string> fvalues;
  if (!aws_filters.empty()) {
    fname = aws_filters[0].value("name", "");
    fvalues = aws_filters[0].value("values", std::vector<std::string>{});
    static const std::set<std::string> kNames = {"JOB_NAME", "BEFORE_CREATED_AT", "AFTER_CREATED_AT",
                                                  "SHARE_IDENTIFIER", "QUOTA_SHARE_NAME"};
    if (!kNames.count(fname))
      return InvalidArgument("filters[0].name must be one of JOB_NAME, BEFORE_CREATED_AT, AFTER_CREATED_AT, SHARE_IDENTIFIER, QUOTA_SHARE_NAME, " + kTagFilter);
    if (fvalues.size() != 1) return InvalidArgument("filters[0].values must hold exactly one value");
    if ((fname == "BEFORE_CREATED_AT" || fname == "AFTER_CREATED_AT") &&
        fvalues[0].find_first_not_of("0123456789") != std::string::npos)
      return InvalidArgument("filters[0].values: " + fname + " takes epoch milliseconds");
  }
  // trainyard:tag alone is ruled as SHARE_IDENTIFIER is: jobStatus applies (without it, every
  // status), newest first.
  if (fname.empty() && tag_filter) fname = kTagFilter;
  if (queue_ref.empty()) return InvalidArgument("jobQueue is required");
  uint64_t after_seq = 0;
  if (!token.empty()) {
    if (token.find_first_not_of("0123456789") != std::string::npos) return InvalidArgument("nextToken is not valid");
    after_seq = std::stoull(token);
  }
  return c.Read([&](const State& s) -> Response {
    const JobQueue* q = Controller::FindQueue(s, queue_ref);
    if (!q) return InvalidArgument("jobQueue: job queue " + queue_ref + " does not exist");
    // Which statuses: the filter rules of ListServiceJobs.
    bool status_applies = fname.empty() || fname == "SHARE_IDENTIFIER" || fname == "QUOTA_SHARE_NAME" || fname == kTagFilter;
    std::vector<JobStatus> statuses;
    if (status_applies && !status_name.empty()) {
      statuses.push_back(*ParseJobStatus(status_name));
    } else if (fname.empty()) {
      statuses.push_back(JobStatus::kRunning);  // no status and no filter: RUNNING only
    } else {
      for (int i = 0; i < 8; ++i) statuses.push_back(static_cast<JobStatus>(i));
    }
    auto matches = [&](const ServiceJob& j) {
      for (const auto& [key, value] : tags)
        if (auto t = j.tags.find(key); t == j.tags.end() || t->second != value) return false;
      if (fname.empty() || fname == kTagFilter) return true;
      const std::string& v = fvalues[0];
      if (fname == "JOB_NAME") {
        std::string name = ToLower(j.name), pat = ToLower(v);
        return EndsWith(pat, "*") ? StartsWith(name, pat.substr(0, pat.size() - 1)) : name == pat;
      }
      if (fname == "BEFORE_CREATED_AT") return j.created_at < std::stoll(v);
      if (fname == "AFTER_CREATED_AT") return j.created_at > std::stoll(v);
      if (fname == "SHARE_IDENTIFIER") return j.share_identifier == v;
      return j.quota_share_name == v;
    };
    std::vector<uint64_t> seqs;
    for (JobStatus st : statuses) {
      const auto& set = s.JobsIn(q->name, st);
      seqs.insert(seqs.end(), set.begin(), set.end());
    }
    const bool newest_first = !fname.empty();
    std::sort(seqs.begin(), seqs.end());
    if (newest_first) std::reverse(seqs.begin(), seqs.end());
    json list = json::array();
    std::string next;
    for (uint64_t seq : seqs) {
      if (after_seq && (newest_first ? seq > after_seq : seq < after_seq)) continue;
      const ServiceJobState& js = s.jobs.at(seq);
      if (!matches(js.job)) continue;
      if (list.size() == max) {
        next = std::to_string(seq);
        break;
      }
      list.push_back(EncodeJobSummary(s, js));
    }
    json out = {{"jobSummaryList", list}};
    if (!next.empty()) out["nextToken"] = next;
    return out;
  });
}

Response Snapshot(Controller& c, const json& req) {
  std::string queue_ref = req.value("jobQueue", "");
  return c.Read([&](const State& s) -> Response {
    const JobQueue* q = Controller::FindQueue(s, queue_ref);
    if (!q) return InvalidArgument("jobQueue: job queue " + queue_ref + " does not exist");
    json front = json::array();
    // Dispatch order from the last scheduling pass; jobs admitted since then follow in submit order.
    std::vector<uint64_t> order;
    std::set<uint64_t> listed;
    if (auto it = s.front_of_queue.find(q->name); it != s.front_of_queue.end())
      for (uint64_t seq : it->second)
        if (s.jobs.at(seq).job.status == JobStatus::kRunnable && listed.insert(seq).second) order.push_back(seq);
    for (uint64_t seq : s.JobsIn(q->name, JobStatus::kRunnable)) {
      if (order.size() >= 100) break;
      if (listed.insert(seq).second) order.push_back(seq);
    }
    for (uint64_t seq : order) {
      if (front.size() == 100) break;
      const ServiceJobState& js = s.jobs.at(seq);
      json item = {{"jobArn", js.job.arn}, {"earliestTimeAtPosition", js.RunnableSince()}};
      if (const std::string& wait = s.WaitReasonOf(js); !wait.empty()) item["trainyardWaitReason"] = wait;
      if (js.estimated_start > 0) item["trainyardEstimatedStartTime"] = js.estimated_start;
      front.push_back(item);
    }
    std::map<std::string, int64_t> usage;
    std::map<std::string, std::map<std::string, int64_t>> by_share;  // share -> instance type -> count
    for (JobStatus st : {JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning})
      for (uint64_t seq : s.JobsIn(q->name, st)) {
        const ServiceJob& j = s.jobs.at(seq).job;
        usage[j.instance_type] += j.instance_count;
        if (!j.share_identifier.empty()) by_share[j.share_identifier][j.instance_type] += j.instance_count;
      }
    auto capacity = [](const std::map<std::string, int64_t>& m) {
      json out = json::array();
      for (const auto& [unit, qty] : m) out.push_back({{"capacityUnit", unit}, {"quantity", qty}});
      return out;
    };
    EpochMs at = s.last_pass_at;  // 0 before the first scheduling pass: the lastUpdatedAt members are left out
    json utilization = {{"totalCapacityUsage", capacity(usage)}};
    PutIf(utilization, "lastUpdatedAt", at);
    if (q->kind != QueueKind::kFifo) {
      // The 20 shares that hold the most, largest first (ties by name).
      std::vector<std::pair<int64_t, std::string>> top;
      for (const auto& [share, m] : by_share) {
        int64_t n = 0;
        for (const auto& [unit, qty] : m) n += qty;
        top.emplace_back(-n, share);
      }
      std::sort(top.begin(), top.end());
      if (top.size() > 20) top.resize(20);
      json shares = json::array();
      for (const auto& [neg, share] : top)
        shares.push_back({{"shareIdentifier", share}, {"capacityUsage", capacity(by_share[share])}});
      auto active = s.unfinished_by_share.find(q->name);
      utilization["fairshareUtilization"] = {
          {"activeShareCount", active == s.unfinished_by_share.end() ? 0 : static_cast<int64_t>(active->second.size())},
          {"topCapacityUtilization", shares}};
    }
    json out = {{"frontOfQueue", {{"jobs", front}}}};
    PutIf(out["frontOfQueue"], "lastUpdatedAt", at);
    bool quota = false;
    for (const auto& [key, share] : s.quota_shares) quota |= share.queue == q->name;
    if (quota) {
      // Per quota share: its first waiting job in dispatch order, and what it holds now.
      std::map<std::string, std::map<std::string, int64_t>> held;
      for (JobStatus st : {JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning})
        for (uint64_t seq : s.JobsIn(q->name, st)) {
          const ServiceJob& j = s.jobs.at(seq).job;
          held[j.quota_share_name][j.instance_type] += j.instance_count;
        }
      json fronts = json::object();
      for (uint64_t seq : order) {
        const ServiceJobState& js = s.jobs.at(seq);
        const std::string& share = js.job.quota_share_name;
        if (share.empty() || fronts.contains(share)) continue;
        fronts[share] = json::array({{{"jobArn", js.job.arn}, {"earliestTimeAtPosition", js.RunnableSince()}}});
      }
      json top = json::array();
      for (const auto& [share, m] : held) top.push_back({{"quotaShareName", share}, {"capacityUsage", capacity(m)}});
      out["frontOfQuotaShares"] = {{"quotaShares", fronts}};
      PutIf(out["frontOfQuotaShares"], "lastUpdatedAt", at);
      utilization["quotaShareUtilization"] = {{"topCapacityUtilization", top}};
    }
    out["queueUtilization"] = utilization;
    // trainyard extension: the Available warm pools this queue's jobs left, the instances they
    // hold, and until when (docs/warm-pools.md). They give the instances back when needed.
    json pools = json::array();
    for (const auto& [id, p] : s.warm_pools) {
      if (p.status != WarmPoolStatus::kAvailable || p.queue != q->name) continue;
      json w = {{"trainingJobName", p.owner_job}, {"instanceType", p.instance_type},
                {"instanceCount", p.instance_count}, {"expiresAt", p.expires_at}};
      if (!p.quota_share.empty()) w["quotaShareName"] = p.quota_share;
      pools.push_back(w);
    }
    if (!pools.empty()) out["trainyardWarmPools"] = pools;
    // trainyard extension: what preemptions threw away across this queue's jobs.
    int64_t lost_instance_ms = 0, lost_gpu_ms = 0;
    for (const auto& [seq, js] : s.jobs)
      if (js.job.queue == q->name) lost_instance_ms += js.job.preemption_lost_instance_ms, lost_gpu_ms += js.job.preemption_lost_gpu_ms;
    out["trainyardPreemptionLoss"] = PreemptionLoss(lost_instance_ms, lost_gpu_ms);
    return out;
  });
}

// TerminateServiceJobs: up to 50 jobs in one turn, each answered on its own (AWS: jobs that do not
// exist count as terminated; the call succeeds whatever happens to each job).
Response TerminateServiceJobs(Controller& c, const json& req) {
  const std::string reason = req.value("reason", "");
  std::vector<control::TerminateServiceJobCommand> cmds;
  for (const auto& id : req.value("jobs", std::vector<std::string>{})) cmds.push_back({id, reason});
  auto outcomes = c.TerminateServiceJobs(cmds);
  if (!outcomes.ok()) return outcomes.status();
  json successful = json::array(), errors = json::array();
  for (size_t i = 0; i < cmds.size(); ++i) {
    const Status& st = (*outcomes)[i];
    if (st.ok() || st.code() == Code::kNotFound) {
      successful.push_back(cmds[i].job_id);
    } else {
      WireError e = ToWireError(Protocol::kBatchRestJson, st);
      errors.push_back({{"job", cmds[i].job_id}, {"code", e.type}, {"message", e.message}});
    }
  }
  return json{{"successful", successful}, {"errors", errors}};
}

}  // namespace

json EncodeServiceJobEventDetail(const State& s, const ServiceJobState& js) { return EncodeJobDetail(s, js, true); }

namespace {
// The small replies of mutating operations.
Response Reply(const StatusOr<ServiceEnvironment>& e) {
  if (!e.ok()) return e.status();
  return json{{"serviceEnvironmentName", e->name}, {"serviceEnvironmentArn", e->arn}};
}
Response Reply(const StatusOr<JobQueue>& q) {
  if (!q.ok()) return q.status();
  return json{{"jobQueueName", q->name}, {"jobQueueArn", q->arn}};
}
Response Reply(const StatusOr<SchedulingPolicy>& p) {
  if (!p.ok()) return p.status();
  return json{{"name", p->name}, {"arn", p->arn}};
}
Response Reply(const StatusOr<JobDefinition>& d) {
  if (!d.ok()) return d.status();
  return json{{"jobDefinitionName", d->name}, {"jobDefinitionArn", d->arn}, {"revision", d->revision}};
}
Response Reply(const StatusOr<QuotaShare>& q) {
  if (!q.ok()) return q.status();
  return json{{"quotaShareName", q->name}, {"quotaShareArn", q->arn}};
}
Response Reply(const StatusOr<ServiceJob>& j) {
  if (!j.ok()) return j.status();
  return json{{"jobArn", j->arn}, {"jobName", j->name}, {"jobId", j->id}};
}
Response Reply(const StatusOr<ComputeEnvironment>& e) {
  if (!e.ok()) return e.status();
  return json{{"computeEnvironmentName", e->name}, {"computeEnvironmentArn", e->arn}};
}
Response Reply(const StatusOr<ContainerJob>& j) {
  if (!j.ok()) return j.status();
  return json{{"jobArn", j->arn}, {"jobName", j->name}, {"jobId", j->id}};
}
Response Reply(const Status& st) {
  if (!st.ok()) return st;
  return json::object();
}

// Decodes the request into a command and, when it decodes, hands it to `run` (a controller call).
template <typename Cmd, typename Run>
Response Decoded(const StatusOr<Cmd>& cmd, Run run) {
  if (!cmd.ok()) return cmd.status();
  return Reply(run(*cmd));
}

// A row's handler that decodes the request with `Decode` and runs the command with the
// controller's `Run`, answering its small reply.
template <auto Decode, auto Run>
Response Command(const OperationCall& x) {
  return Decoded(Decode(x.request), [&](const auto& cmd) { return (x.controller.*Run)(cmd); });
}

std::string Text(const json& req, const char* member) {
  auto it = req.find(member);
  return it != req.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Response UpdateSchedulingPolicy(const OperationCall& x) {
  auto cmd = DecodeUpdateSchedulingPolicy(x.request);
  if (!cmd.ok()) return cmd.status();
  auto p = x.controller.UpdateSchedulingPolicy(*cmd);
  if (!p.ok()) return p.status();
  return json::object();
}

Response SubmitJob(const OperationCall& x) {
  return Decoded(DecodeSubmitJob(x.request), [&](auto cmd) {
    cmd.owner = x.caller;
    return x.controller.SubmitJob(cmd);
  });
}

Response DescribeQuotaShare(Controller& c, const json& req) {
  std::string arn = req.value("quotaShareArn", "");
  return c.Read([&](const State& s) -> Response {
    const QuotaShare* q = Controller::FindQuotaShareByArn(s, arn);
    if (!q) return InvalidArgument("quotaShareArn: quota share " + arn + " does not exist");
    return EncodeQuotaShare(s, *q);
  });
}

Response ListQuotaShares(Controller& c, const json& req) {
  std::string queue_ref = req.value("jobQueue", "");
  return c.Read([&](const State& s) -> Response {
    const JobQueue* q = Controller::FindQueue(s, queue_ref);
    if (!q) return InvalidArgument("jobQueue: job queue " + queue_ref + " does not exist");
    json list = json::array();
    for (const auto& [key, share] : s.quota_shares)
      if (share.queue == q->name) list.push_back(EncodeQuotaShare(s, share));
    return json{{"quotaShares", list}};
  });
}

// `x.carried` is serviceRequestPayload, parsed once for authorization and for this handler.
Response SubmitServiceJob(const OperationCall& x) {
  const json& req = x.request;
  // The job name is the training job's name when the payload has none, and shows in paths.
  const json name = req.value("jobName", json());
  if (name.is_string() && !IsBatchJobName(name.get<std::string>()))
    return InvalidArgument("jobName " + name.dump() +
                           " must be up to 128 letters (upper and lower case), digits, hyphens and underscores, "
                           "starting with a letter or digit");
  // Beyond AWS: the payload is checked against CreateTrainingJob's shape now, not at dispatch.
  if (!x.carried.is_object())
    return InvalidArgument("serviceRequestPayload must be a JSON object holding a CreateTrainingJob request");
  const ServiceModel& sm = ServiceModel::SageMaker();
  const ServiceModel::Operation* op_ctj = sm.FindOperation("CreateTrainingJob");
  TY_RETURN_IF_ERROR(sm.ValidateShape(op_ctj->input_shape, x.carried, "serviceRequestPayload"));
  return Decoded(DecodeSubmitServiceJob(req, {x.controller.config(), x.controller.sandbox()}, &x.carried), [&](auto cmd) {
    cmd.owner = x.caller;
    return x.controller.SubmitServiceJob(cmd);
  });
}

// The training job a submit starts: its payload, named after the service job.
std::vector<TrainingDefinition> SubmitServiceJobDefinitions(const json& request, const json& carried) {
  if (!carried.is_object()) return {};
  return {{&carried, Text(request, "jobName"), "serviceRequestPayload."}};
}

Response DescribeServiceJob(Controller& c, const json& req) {
  std::string id = req.value("jobId", "");
  return c.ReadServiceJob(id, [&](const State& s) -> Response {
    const ServiceJobState* js = s.FindJob(id);
    if (!js) return InvalidArgument("jobId: service job " + id + " does not exist");
    return EncodeJobDetail(s, *js);
  });
}

Response ListTagsForResource(Controller& c, const json& req) {
  auto tags = c.TagsOf("batch", req.value("resourceArn", ""));
  if (!tags.ok()) return tags.status();
  return json{{"tags", EncodeTags(*tags)}};
}

Response StopJob(const OperationCall& x, bool terminate) {
  return Decoded(DecodeStopJob(x.request, terminate), [&](const auto& cmd) { return x.controller.StopJob(cmd); });
}

// CloudTrail's resource types of what Batch requests name.
constexpr std::string_view kQueueType = "AWS::Batch::JobQueue";
constexpr std::string_view kServiceJobType = "AWS::Batch::ServiceJob";
constexpr std::string_view kContainerJobType = "AWS::Batch::Job";
constexpr std::string_view kEnvironmentType = "AWS::Batch::ServiceEnvironment";
constexpr std::string_view kComputeType = "AWS::Batch::ComputeEnvironment";
constexpr std::string_view kQuotaShareType = "AWS::Batch::QuotaShare";
constexpr std::string_view kPolicyType = "AWS::Batch::SchedulingPolicy";
constexpr std::string_view kDefinitionType = "AWS::Batch::JobDefinition";

OperationTable BatchTable() {
  using RK = ResourceKind;
  using C = Controller;
  const OperationAccess environment{.resource = RK::kServiceEnvironment, .field = "serviceEnvironment"};
  const OperationAccess queue{.resource = RK::kJobQueue, .field = "jobQueue"};
  const OperationAccess policy{.resource = RK::kSchedulingPolicy, .field = "arn"};
  const OperationAccess quota_share{.resource = RK::kQuotaShare, .field = "quotaShareArn"};
  const OperationAccess compute{.resource = RK::kComputeEnvironment, .field = "computeEnvironment"};
  const OperationAccess container_job{.resource = RK::kContainerJob, .field = "jobId"};
  const OperationAccess service_job{.resource = RK::kServiceJob, .field = "jobId"};
  const OperationAccess tagged{.resource = RK::kTaggedResource, .field = "resourceArn"};
  const std::vector<AuditMember> environment_audit = {{"serviceEnvironment", kEnvironmentType}};
  const std::vector<AuditMember> queue_audit = {{"jobQueue", kQueueType}};
  const std::vector<AuditMember> policy_audit = {{"arn", kPolicyType}};
  const std::vector<AuditMember> quota_share_audit = {{"quotaShareArn", kQuotaShareType}};
  const std::vector<AuditMember> compute_audit = {{"computeEnvironment", kComputeType}};
  const std::vector<AuditMember> container_job_audit = {{"jobId", kContainerJobType}};
  const std::vector<AuditMember> service_job_audit = {{"jobId", kServiceJobType}};
  const std::vector<AuditMember> tagged_audit = {{"resourceArn", "ARN"}};
  return OperationTable(Api::kBatch, "batch", &ServiceModel::Batch(), {
      // ---- Service environments ----
      {.name = "CreateServiceEnvironment",
       .handle = Command<DecodeCreateServiceEnvironment, &C::CreateServiceEnvironment>,
       .access = {.resource = RK::kServiceEnvironment, .field = "serviceEnvironmentName"},
       .audit = {{"serviceEnvironmentName", kEnvironmentType}}},
      {.name = "DescribeServiceEnvironments", .handle = Plain<DescribeEnvironments>,
       .access = {.list_member = "serviceEnvironments", .item_action = "batch:DescribeServiceEnvironments",
                  .item = RK::kServiceEnvironment, .item_arn = "serviceEnvironmentArn"},
       .audit = {{"serviceEnvironments", kEnvironmentType}}},
      {.name = "UpdateServiceEnvironment",
       .handle = Command<DecodeUpdateServiceEnvironment, &C::UpdateServiceEnvironment>, .access = environment,
       .audit = environment_audit},
      {.name = "DeleteServiceEnvironment",
       .handle = Command<DecodeDeleteServiceEnvironment, &C::DeleteServiceEnvironment>, .access = environment,
       .audit = environment_audit},
      // ---- Job queues ----
      {.name = "CreateJobQueue", .handle = Command<DecodeCreateJobQueue, &C::CreateJobQueue>,
       .access = {.resource = RK::kJobQueue, .field = "jobQueueName"}, .audit = {{"jobQueueName", kQueueType}}},
      {.name = "DescribeJobQueues", .handle = Plain<DescribeQueues>,
       .access = {.list_member = "jobQueues", .item_action = "batch:DescribeJobQueues", .item = RK::kJobQueue,
                  .item_arn = "jobQueueArn"},
       .audit = {{"jobQueues", kQueueType}}},
      {.name = "UpdateJobQueue", .handle = Command<DecodeUpdateJobQueue, &C::UpdateJobQueue>, .access = queue,
       .audit = queue_audit},
      {.name = "DeleteJobQueue", .handle = Command<DecodeDeleteJobQueue, &C::DeleteJobQueue>, .access = queue,
       .audit = queue_audit},
      {.name = "GetJobQueueSnapshot", .handle = Plain<Snapshot>, .access = queue, .audit = queue_audit},
      // ---- Scheduling policies ----
      {.name = "CreateSchedulingPolicy", .handle = Command<DecodeCreateSchedulingPolicy, &C::CreateSchedulingPolicy>,
       .access = {.resource = RK::kSchedulingPolicy, .field = "name"}, .audit = {{"name", kPolicyType}}},
      {.name = "UpdateSchedulingPolicy", .handle = UpdateSchedulingPolicy, .access = policy, .audit = policy_audit},
      {.name = "DeleteSchedulingPolicy", .handle = Command<DecodeDeleteSchedulingPolicy, &C::DeleteSchedulingPolicy>,
       .access = policy, .audit = policy_audit},
      {.name = "DescribeSchedulingPolicies", .handle = Plain<DescribePolicies>,
       .access = {.resource = RK::kSchedulingPolicies, .field = "arns"}, .audit = {{"arns", kPolicyType}}},
      {.name = "ListSchedulingPolicies", .handle = Plain<ListPolicies>,
       .access = {.list_member = "schedulingPolicies", .item_action = "batch:DescribeSchedulingPolicies",
                  .item = RK::kSchedulingPolicy, .item_arn = "arn"}},
      // ---- Quota shares ----
      {.name = "CreateQuotaShare", .handle = Command<DecodeCreateQuotaShare, &C::CreateQuotaShare>,
       .access = {.resource = RK::kNewQuotaShare, .field = "jobQueue"},
       .audit = {{"jobQueue", kQueueType}, {"quotaShareName", kQuotaShareType}}},
      {.name = "UpdateQuotaShare", .handle = Command<DecodeUpdateQuotaShare, &C::UpdateQuotaShare>,
       .access = quota_share, .audit = quota_share_audit},
      {.name = "DeleteQuotaShare", .handle = Command<DecodeDeleteQuotaShare, &C::DeleteQuotaShare>,
       .access = quota_share, .audit = quota_share_audit},
      {.name = "DescribeQuotaShare", .handle = Plain<DescribeQuotaShare>, .access = quota_share,
       .audit = quota_share_audit},
      {.name = "ListQuotaShares", .handle = Plain<ListQuotaShares>,
       .access = {.resource = RK::kJobQueue, .field = "jobQueue", .list_member = "quotaShares",
                  .item_action = "batch:DescribeQuotaShare", .item = RK::kQuotaShare, .item_arn = "quotaShareArn"},
       .audit = queue_audit},
      // ---- Service jobs ----
      // Placeable: trainyard:candidate-regions may send it to another region (docs/regions.md).
      {.name = "SubmitServiceJob", .handle = SubmitServiceJob,
       .access = {.resource = RK::kJobQueue, .field = "jobQueue",
                  // serviceType SAGEMAKER_TRAINING, the only one served: the payload is a
                  // CreateTrainingJob request, whose roles and data are the submitter's to pass.
                  .carries = {"serviceRequestPayload", Api::kSageMaker, "CreateTrainingJob"},
                  // Team policies condition a submit on the share it charges and on its size.
                  .request_keys = {{"batch:ShareIdentifier", "shareIdentifier"},
                                   {"trainyard:QuotaShare", "quotaShareName"},
                                   {"trainyard:InstanceCount", "ResourceConfig.InstanceCount", true}},
                  .training_definitions = SubmitServiceJobDefinitions},
       .audit = {{"jobQueue", kQueueType}, {"jobName", kServiceJobType}}, .placeable = true},
      {.name = "DescribeServiceJob", .handle = Plain<DescribeServiceJob>, .access = service_job,
       .audit = service_job_audit},
      {.name = "ListServiceJobs", .handle = Plain<ListServiceJobs>,
       .access = {.list_member = "jobSummaryList", .item_action = "batch:DescribeServiceJob", .item = RK::kServiceJob,
                  .item_name = "jobId", .item_arn = "jobArn"},
       .audit = queue_audit},
      {.name = "TerminateServiceJob", .handle = Command<DecodeTerminateServiceJob, &C::TerminateServiceJob>,
       .access = service_job, .audit = service_job_audit},
      {.name = "TerminateServiceJobs", .handle = Plain<TerminateServiceJobs>,
       .access = {.resource = RK::kServiceJobs, .field = "jobs"}, .audit = {{"jobs", kServiceJobType}}},
      {.name = "UpdateServiceJob", .handle = Command<DecodeUpdateServiceJob, &C::UpdateServiceJob>,
       .access = service_job, .audit = service_job_audit},
      // ---- Job definitions, compute environments and container jobs (docs/batch-jobs.md) ----
      {.name = "RegisterJobDefinition", .handle = Command<DecodeRegisterJobDefinition, &C::RegisterJobDefinition>,
       .access = {.resource = RK::kJobDefinition, .field = "jobDefinitionName"},
       .audit = {{"jobDefinitionName", kDefinitionType}}},
      {.name = "DeregisterJobDefinition",
       .handle = Command<DecodeDeregisterJobDefinition, &C::DeregisterJobDefinition>,
       .access = {.resource = RK::kJobDefinition, .field = "jobDefinition"},
       .audit = {{"jobDefinition", kDefinitionType}}},
      {.name = "DescribeJobDefinitions", .handle = Plain<DescribeJobDefinitions>,
       .audit = {{"jobDefinitions", kDefinitionType}, {"jobDefinitionName", kDefinitionType}}},
      {.name = "CreateComputeEnvironment",
       .handle = Command<DecodeCreateComputeEnvironment, &C::CreateComputeEnvironment>,
       .access = {.resource = RK::kComputeEnvironment, .field = "computeEnvironmentName"},
       .audit = {{"computeEnvironmentName", kComputeType}}},
      {.name = "UpdateComputeEnvironment",
       .handle = Command<DecodeUpdateComputeEnvironment, &C::UpdateComputeEnvironment>, .access = compute,
       .audit = compute_audit},
      {.name = "DeleteComputeEnvironment",
       .handle = Command<DecodeDeleteComputeEnvironment, &C::DeleteComputeEnvironment>, .access = compute,
       .audit = compute_audit},
      {.name = "DescribeComputeEnvironments", .handle = Plain<DescribeComputeEnvironments>,
       .access = {.list_member = "computeEnvironments", .item_action = "batch:DescribeComputeEnvironments",
                  .item = RK::kComputeEnvironment, .item_arn = "computeEnvironmentArn"},
       .audit = {{"computeEnvironments", kComputeType}}},
      // The queue, then the job definition's revision, as on AWS; the job runs as the roles the
      // definition registered, so those are checked like roles the request names.
      {.name = "SubmitJob", .handle = SubmitJob,
       .access = {.resource = RK::kJobQueue, .field = "jobQueue", .also = RK::kSubmittedJobDefinition,
                  .also_field = "jobDefinition", .definition_roles = "jobDefinition"},
       .audit = {{"jobQueue", kQueueType}, {"jobName", kContainerJobType}, {"jobDefinition", kDefinitionType}}},
      {.name = "DescribeJobs", .handle = Plain<DescribeJobs>,
       .access = {.list_member = "jobs", .item_action = "batch:DescribeJobs", .item = RK::kContainerJob,
                  .item_name = "jobId", .item_arn = "jobArn"},
       .audit = {{"jobs", kContainerJobType}}},
      {.name = "ListJobs", .handle = Plain<ListJobs>,
       .access = {.list_member = "jobSummaryList", .item_action = "batch:ListJobs", .item = RK::kContainerJob,
                  .item_name = "jobId", .item_arn = "jobArn"},
       .audit = {{"jobQueue", kQueueType}, {"arrayJobId", kContainerJobType}}},
      {.name = "CancelJob", .handle = [](const OperationCall& x) { return StopJob(x, false); },
       .access = container_job, .audit = container_job_audit},
      {.name = "TerminateJob", .handle = [](const OperationCall& x) { return StopJob(x, true); },
       .access = container_job, .audit = container_job_audit},
      // ---- Tags of any Batch resource ----
      {.name = "TagResource", .handle = Command<DecodeTagResource, &C::TagResource>, .access = tagged,
       .audit = tagged_audit},
      {.name = "UntagResource", .handle = Command<DecodeUntagResource, &C::UntagResource>, .access = tagged,
       .audit = tagged_audit},
      {.name = "ListTagsForResource", .handle = Plain<ListTagsForResource>, .access = tagged, .audit = tagged_audit},
  });
}

}  // namespace

const OperationTable& BatchOperations() {
  static const OperationTable kTable = BatchTable();
  return kTable;
}

}  // namespace ty::api
