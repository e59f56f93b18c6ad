#include "api/decode.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <thread>

#include "api/service_model.h"
#include "control/ladder.h"
#include "api/training_request.h"
#include "control/warm_pool_rules.h"
#include "core/strings.h"
#include "core/training_spec_json.h"
#include "exec/attempt_spec.h"

namespace ty::api {

using nlohmann::json;
using namespace ty::control;

namespace {

// Reads an optional member; the request was validated against the model, so its type is right,
// and a member of another type reads as absent rather than throwing.
template <typename T>
T Get(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

bool Present(const json& req, const char* key) { return req.contains(key) && !req[key].is_null(); }

// The request's `state` (ENABLED when absent). The models hold it to the enum.
StatusOr<ResourceState> StateOf(const json& req) {
  const std::string text = Get<std::string>(req, "state", "ENABLED");
  auto state = ParseResourceState(text);
  if (!state) return InvalidArgument("state must be ENABLED or DISABLED, not '" + text + "'");
  return *state;
}

// One tag key: its length and characters (SageMaker's TagKey shape), and not "aws:...".
Status CheckTagKey(const std::string& key, const std::string& where) {
  TY_RETURN_IF_ERROR(ServiceModel::SageMaker().ValidateShape("TagKey", key, where + " key"));
  if (ToLower(key.substr(0, 4)) == "aws:")
    return InvalidArgument(where + ": tag key '" + key + "' uses the prefix 'aws:', which is reserved for AWS");
  return Status::Ok();
}

// The rules AWS holds every resource's tags to, beyond what a model states (Batch's model gives
// lengths only): at most 50 in one request; keys of 1 to 128 and values of at most 256 Unicode
// letters, digits, spaces and _ . : / = + - @ (SageMaker's TagKey and TagValue shapes state the
// set and are used for both services); and the "aws:" prefix, in any case, reserved for AWS.
// `where` names the member in messages ("tags", "Tags").
Status CheckTags(const Tags& tags, const std::string& where) {
  if (tags.size() > 50)
    return InvalidArgument(where + ": " + std::to_string(tags.size()) + " tags given; at most 50 are allowed");
  const ServiceModel& sm = ServiceModel::SageMaker();
  for (const auto& [k, v] : tags) {
    TY_RETURN_IF_ERROR(CheckTagKey(k, where));
    TY_RETURN_IF_ERROR(sm.ValidateShape("TagValue", v, where + "." + k));
  }
  return Status::Ok();
}

// A Batch request's tags: a map of strings, held to CheckTags.
StatusOr<Tags> ReadTags(const json& req) {
  Tags tags;
  if (auto it = req.find("tags"); it != req.end() && it->is_object())
    for (auto& [k, v] : it->items())
      if (v.is_string()) tags[k] = v.get<std::string>();
  TY_RETURN_IF_ERROR(CheckTags(tags, "tags"));
  return tags;
}

// ---- Service environments ----

// Either one NUM_INSTANCES limit, or 1..5 limits in instance-type units (quota management).
StatusOr<std::vector<CapacityLimit>> DecodeCapacityLimits(const json& limits) {
  std::set<std::string> units;
  std::vector<CapacityLimit> out;
  if (!limits.is_array()) return InvalidArgument("capacityLimits must be a list");
  for (size_t i = 0; i < limits.size(); ++i) {
    const json& l = limits[i];
    std::string unit = l.is_object() ? Get<std::string>(l, "capacityUnit", "") : "";
    int64_t max = l.is_object() ? Get<int64_t>(l, "maxCapacity", -1) : -1;
    std::string where = "capacityLimits[" + std::to_string(i) + "]";
    if (unit != "NUM_INSTANCES" && !StartsWith(unit, "ml."))
      return InvalidArgument(where + ".capacityUnit must be NUM_INSTANCES or an instance type such as ml.m5.large");
    if (max < 0) return InvalidArgument(where + ".maxCapacity is required and must be >= 0");
    if (!units.insert(unit).second) return InvalidArgument(where + ".capacityUnit " + unit + " is listed twice");
    out.push_back({unit, max});
  }
  if (units.count("NUM_INSTANCES") && limits.size() != 1)
    return InvalidArgument("capacityLimits: a NUM_INSTANCES limit can't be combined with instance-type limits");
  if (limits.empty() || limits.size() > 5) return InvalidArgument("capacityLimits must hold 1 to 5 limits");
  return out;
}

// ---- Job queues ----

StatusOr<std::vector<TimeLimitAction>> DecodeTimeLimitActions(const json& actions) {
  std::vector<TimeLimitAction> out;
  if (!actions.is_array()) return InvalidArgument("jobStateTimeLimitActions must be a list");
  for (size_t i = 0; i < actions.size(); ++i) {
    std::string where = "jobStateTimeLimitActions[" + std::to_string(i) + "]";
    const json& a = actions[i];
    if (!a.is_object()) return InvalidArgument(where + " must be an object");
    if (Get<std::string>(a, "action", "") != "TERMINATE")
      return InvalidArgument(where + ".action must be TERMINATE for SAGEMAKER_TRAINING job queues");
    if (Get<std::string>(a, "state", "") != "RUNNABLE") return InvalidArgument(where + ".state must be RUNNABLE");
    static const std::set<std::string> kReasons = {"CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
                                                   "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
                                                   "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"};
    std::string reason = Get<std::string>(a, "reason", "");
    if (!kReasons.count(reason))
      return InvalidArgument(where + ".reason must be one of CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY, "
                             "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE, MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED");
    int64_t secs = Get<int64_t>(a, "maxTimeSeconds", 0);
    if (secs < 600 || secs > 86400) return InvalidArgument(where + ".maxTimeSeconds must be between 600 and 86400");
    out.push_back({reason, secs});
  }
  return out;
}

std::vector<EnvironmentRef> DecodeOrder(const json& order) {
  std::vector<EnvironmentRef> out;
  if (!order.is_array()) return out;
  for (const auto& o : order)
    if (o.is_object()) out.push_back({Get<int>(o, "order", 0), Get<std::string>(o, "serviceEnvironment", "")});
  return out;
}

// ---- Scheduling policies ----

bool ValidShareIdentifier(const std::string& id) {
  std::string core = EndsWith(id, "*") ? id.substr(0, id.size() - 1) : id;
  if (core.empty() || core.size() > 255) return false;
  for (char c : core)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// Two share identifiers overlap when one could match a job the other also matches.
bool Overlap(const std::string& a, const std::string& b) {
  bool wa = EndsWith(a, "*"), wb = EndsWith(b, "*");
  std::string pa = wa ? a.substr(0, a.size() - 1) : a;
  std::string pb = wb ? b.substr(0, b.size() - 1) : b;
  if (!wa && !wb) return pa == pb;
  if (wa && wb) return StartsWith(pa, pb) || StartsWith(pb, pa);
  return wa ? StartsWith(pb, pa) : StartsWith(pa, pb);
}

StatusOr<FairSharePolicy> DecodeFairshare(const json& fs) {
  if (!fs.is_object()) return InvalidArgument("fairsharePolicy must be an object");
  FairSharePolicy p;
  p.share_decay_seconds = Get<int64_t>(fs, "shareDecaySeconds", 0);
  if (p.share_decay_seconds < 0 || p.share_decay_seconds > 604800)
    return InvalidArgument("fairsharePolicy.shareDecaySeconds must be between 0 and 604800, not " +
                           std::to_string(p.share_decay_seconds));
  p.compute_reservation = Get<int64_t>(fs, "computeReservation", 0);
  if (p.compute_reservation < 0 || p.compute_reservation > 99)
    return InvalidArgument("fairsharePolicy.computeReservation must be between 0 and 99, not " +
                           std::to_string(p.compute_reservation));
  json dist = Get<json>(fs, "shareDistribution", json::array());
  if (!dist.is_array()) return InvalidArgument("fairsharePolicy.shareDistribution must be a list");
  if (dist.size() > 500) return InvalidArgument("fairsharePolicy.shareDistribution may hold at most 500 shares");
  for (size_t i = 0; i < dist.size(); ++i) {
    std::string where = "fairsharePolicy.shareDistribution[" + std::to_string(i) + "]";
    if (!dist[i].is_object()) return InvalidArgument(where + " must be an object");
    std::string id = Get<std::string>(dist[i], "shareIdentifier", "");
    if (!ValidShareIdentifier(id))
      return InvalidArgument(where + ".shareIdentifier '" + id +
                             "' must be 1 to 255 letters, digits or underscores, optionally followed by '*'");
    double w = Get<double>(dist[i], "weightFactor", 1.0);
    if (!(w >= 0.0001 && w <= 999.9999))
      return InvalidArgument(where + ".weightFactor must be between 0.0001 and 999.9999");
    for (size_t j = 0; j < i; ++j) {
      const std::string& other = p.share_distribution[j].share_identifier;
      if (Overlap(id, other))
        return InvalidArgument(where + ".shareIdentifier '" + id + "' overlaps shareDistribution[" + std::to_string(j) +
                               "] '" + other + "': share identifiers and their '*' prefixes must not overlap");
    }
    p.share_distribution.push_back({id, w});
  }
  return p;
}

// ---- Quota shares ----

StatusOr<QuotaShareFields> DecodeShareFields(const json& req) {
  QuotaShareFields f;
  if (Present(req, "capacityLimits") && req["capacityLimits"].is_array()) {
    f.capacity_limits.emplace();
    for (const auto& l : req["capacityLimits"])
      f.capacity_limits->push_back(l.is_object() ? CapacityLimit{Get<std::string>(l, "capacityUnit", ""),
                                                                 Get<int64_t>(l, "maxCapacity", -1)}
                                                 : CapacityLimit{"", -1});
  }
  if (Present(req, "resourceSharingConfiguration") && req["resourceSharingConfiguration"].is_object()) {
    const json& rs = req["resourceSharingConfiguration"];
    QuotaShareFields::Sharing s;
    if (Present(rs, "strategy") && rs["strategy"].is_string()) {
      const std::string text = rs["strategy"].get<std::string>();
      s.strategy = ParseShareStrategy(text);
      if (!s.strategy)
        return InvalidArgument("resourceSharingConfiguration.strategy must be RESERVE, LEND or LEND_AND_BORROW, not '" +
                               text + "'");
    }
    if (Present(rs, "borrowLimit") && rs["borrowLimit"].is_number_integer()) s.borrow_limit = rs["borrowLimit"].get<int64_t>();
    f.resource_sharing = s;
  }
  if (Present(req, "preemptionConfiguration") && req["preemptionConfiguration"].is_object()) {
    const json& pc = req["preemptionConfiguration"];
    if (Present(pc, "inSharePreemption") && pc["inSharePreemption"].is_string()) {
      const std::string text = pc["inSharePreemption"].get<std::string>();
      if (text != "ENABLED" && text != "DISABLED")
        return InvalidArgument("preemptionConfiguration.inSharePreemption must be ENABLED or DISABLED, not '" + text + "'");
      f.in_share_preemption = text == "ENABLED";
    }
  }
  if (Present(req, "state") && req["state"].is_string()) f.state = ParseResourceState(req["state"].get<std::string>());
  return f;
}

// ---- Service jobs ----

// SubmitServiceJob.retryStrategy (ServiceJobRetryStrategy): attempts 1..10, at most 5
// evaluateOnExit entries of {action RETRY|EXIT (the model's enum), onStatusReason glob of at
// most 512 characters}. The service-job shape has no onReason or onExitCode: a SageMaker attempt
// ends with a status reason, not a container exit.
Status CheckRetryStrategy(const json& req) {
  if (!req.contains("retryStrategy") || req["retryStrategy"].is_null()) return Status::Ok();
  const json& rs = req["retryStrategy"];
  if (!rs.is_object()) return InvalidArgument("retryStrategy must be an object");
  const json attempts = rs.contains("attempts") ? rs["attempts"] : json();
  if (!attempts.is_number_integer() || attempts.get<int64_t>() < 1 || attempts.get<int64_t>() > 10)
    return InvalidArgument("retryStrategy.attempts is required and must be an integer between 1 and 10, not " +
                           (attempts.is_null() ? std::string("absent") : attempts.dump()));
  if (!rs.contains("evaluateOnExit") || rs["evaluateOnExit"].is_null()) return Status::Ok();
  const json& rules = rs["evaluateOnExit"];
  if (!rules.is_array()) return InvalidArgument("retryStrategy.evaluateOnExit must be a list");
  if (rules.size() > 5)
    return InvalidArgument("retryStrategy.evaluateOnExit may have at most 5 entries, not " + std::to_string(rules.size()));
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::string where = "retryStrategy.evaluateOnExit[" + std::to_string(i) + "]";
    const json& r = rules[i];
    if (!r.is_object()) return InvalidArgument(where + " must be an object");
    for (const auto& [key, value] : r.items())
      if (key != "action" && key != "onStatusReason")
        return InvalidArgument(where + "." + key + " is not a field of a service job's evaluateOnExit entry "
                               "(ServiceJobEvaluateOnExit has action and onStatusReason only)");
    if (!r.contains("action") || !r["action"].is_string())
      return InvalidArgument(where + ".action is required: RETRY or EXIT");
    std::string action = ToUpper(r["action"].get<std::string>());
    if (action != "RETRY" && action != "EXIT")
      return InvalidArgument(where + ".action must be RETRY or EXIT, not '" + r["action"].get<std::string>() + "'");
    if (r.contains("onStatusReason")) {
      if (!r["onStatusReason"].is_string()) return InvalidArgument(where + ".onStatusReason must be a string");
      if (r["onStatusReason"].get<std::string>().size() > 512)
        return InvalidArgument(where + ".onStatusReason may be at most 512 characters long");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<CreateServiceEnvironmentCommand> DecodeCreateServiceEnvironment(const json& req) {
  CreateServiceEnvironmentCommand c;
  c.name = Get<std::string>(req, "serviceEnvironmentName", "");
  const std::string type = Get<std::string>(req, "serviceEnvironmentType", "");
  auto state = StateOf(req);
  if (!state.ok()) return state.status();
  c.state = *state;
  auto tags = ReadTags(req);
  if (!tags.ok()) return tags.status();
  c.tags = *std::move(tags);
  auto limits = DecodeCapacityLimits(Get<json>(req, "capacityLimits", json::array()));
  if (!limits.ok()) return limits.status();
  c.capacity_limits = *std::move(limits);
  if (type != "SAGEMAKER_TRAINING") return InvalidArgument("serviceEnvironmentType must be SAGEMAKER_TRAINING");
  return c;
}

StatusOr<UpdateServiceEnvironmentCommand> DecodeUpdateServiceEnvironment(const json& req) {
  UpdateServiceEnvironmentCommand c;
  c.environment = Get<std::string>(req, "serviceEnvironment", "");
  if (Present(req, "capacityLimits")) {
    auto limits = DecodeCapacityLimits(req["capacityLimits"]);
    if (!limits.ok()) return limits.status();
    c.capacity_limits = *std::move(limits);
  }
  if (Present(req, "state")) {
    auto state = StateOf(req);
    if (!state.ok()) return state.status();
    c.state = *state;
  }
  return c;
}

StatusOr<DeleteServiceEnvironmentCommand> DecodeDeleteServiceEnvironment(const json& req) {
  return DeleteServiceEnvironmentCommand{Get<std::string>(req, "serviceEnvironment", "")};
}

StatusOr<CreateJobQueueCommand> DecodeCreateJobQueue(const json& req) {
  CreateJobQueueCommand c;
  c.name = Get<std::string>(req, "jobQueueName", "");
  auto state = StateOf(req);
  if (!state.ok()) return state.status();
  c.state = *state;
  c.priority = Get<int>(req, "priority", 0);
  const std::string type = Get<std::string>(req, "jobQueueType", "");
  c.scheduling_policy_arn = Get<std::string>(req, "schedulingPolicyArn", "");
  auto tags = ReadTags(req);
  if (!tags.ok()) return tags.status();
  c.tags = *std::move(tags);
  const json actions = Get<json>(req, "jobStateTimeLimitActions", json::array());
  const bool has_compute = req.contains("computeEnvironmentOrder") && !req["computeEnvironmentOrder"].empty();
  if (type == "ECS" || (type.empty() && has_compute)) {
    // A queue of compute environments for container jobs (SubmitJob).
    if (Present(req, "serviceEnvironmentOrder") && !req["serviceEnvironmentOrder"].empty())
      return InvalidArgument("serviceEnvironmentOrder is for SAGEMAKER_TRAINING job queues; an ECS queue takes computeEnvironmentOrder");
    if (!actions.empty()) return InvalidArgument("jobStateTimeLimitActions are not supported on ECS job queues by this server");
    c.job_queue_type = "ECS";
    c.compute_environment_order = DecodeComputeOrder(req["computeEnvironmentOrder"]);
    return c;
  }
  if (type != "SAGEMAKER_TRAINING")
    return InvalidArgument("jobQueueType must be SAGEMAKER_TRAINING or ECS (EKS and ECS_FARGATE are not supported)");
  if (has_compute)
    return InvalidArgument("computeEnvironmentOrder is not supported for SAGEMAKER_TRAINING job queues; use serviceEnvironmentOrder");
  auto typed = DecodeTimeLimitActions(actions);
  if (!typed.ok()) return typed.status();
  c.time_limit_actions = *std::move(typed);
  c.time_limit_actions_json = actions.dump();
  if (auto tag = c.tags.find("trainyard:minRuntimeSeconds"); tag != c.tags.end() &&
      (tag->second.empty() || tag->second.find_first_not_of("0123456789") != std::string::npos))
    return InvalidArgument("tags.trainyard:minRuntimeSeconds must be a whole number of seconds, not '" + tag->second + "'");
  c.service_environment_order = DecodeOrder(Get<json>(req, "serviceEnvironmentOrder", json::array()));
  return c;
}

StatusOr<UpdateJobQueueCommand> DecodeUpdateJobQueue(const json& req) {
  UpdateJobQueueCommand c;
  c.queue = Get<std::string>(req, "jobQueue", "");
  if (req.contains("computeEnvironmentOrder") && !req["computeEnvironmentOrder"].empty())
    c.compute_environment_order = DecodeComputeOrder(req["computeEnvironmentOrder"]);
  if (Present(req, "jobStateTimeLimitActions")) {
    auto typed = DecodeTimeLimitActions(req["jobStateTimeLimitActions"]);
    if (!typed.ok()) return typed.status();
    c.time_limit_actions = *std::move(typed);
    c.time_limit_actions_json = req["jobStateTimeLimitActions"].dump();
  }
  if (Present(req, "state")) {
    auto state = StateOf(req);
    if (!state.ok()) return state.status();
    c.state = *state;
  }
  if (Present(req, "priority")) c.priority = Get<int>(req, "priority", 0);
  if (Present(req, "schedulingPolicyArn")) c.scheduling_policy_arn = Get<std::string>(req, "schedulingPolicyArn", "");
  if (Present(req, "serviceEnvironmentOrder")) c.service_environment_order = DecodeOrder(req["serviceEnvironmentOrder"]);
  return c;
}

StatusOr<DeleteJobQueueCommand> DecodeDeleteJobQueue(const json& req) {
  return DeleteJobQueueCommand{Get<std::string>(req, "jobQueue", "")};
}

StatusOr<CreateSchedulingPolicyCommand> DecodeCreateSchedulingPolicy(const json& req) {
  CreateSchedulingPolicyCommand c;
  c.name = Get<std::string>(req, "name", "");
  if (!IsBatchName(c.name)) return InvalidArgument("name must be 1 to 128 letters, digits, hyphens or underscores");
  if (Present(req, "fairsharePolicy") && Present(req, "quotaSharePolicy"))
    return InvalidArgument("a scheduling policy holds either fairsharePolicy or quotaSharePolicy, not both");
  if (Present(req, "quotaSharePolicy")) {
    c.quotashare_json = req["quotaSharePolicy"].dump();
  } else {
    json fs = Present(req, "fairsharePolicy") ? req["fairsharePolicy"] : json::object();
    auto typed = DecodeFairshare(fs);
    if (!typed.ok()) return typed.status();
    c.fairshare = *std::move(typed);
    c.fairshare_json = fs.dump();
  }
  auto tags = ReadTags(req);
  if (!tags.ok()) return tags.status();
  c.tags = *std::move(tags);
  return c;
}

StatusOr<UpdateSchedulingPolicyCommand> DecodeUpdateSchedulingPolicy(const json& req) {
  UpdateSchedulingPolicyCommand c;
  c.arn = Get<std::string>(req, "arn", "");
  if (Present(req, "fairsharePolicy") && Present(req, "quotaSharePolicy"))
    return InvalidArgument("a scheduling policy holds either fairsharePolicy or quotaSharePolicy, not both");
  if (Present(req, "fairsharePolicy")) {
    auto typed = DecodeFairshare(req["fairsharePolicy"]);
    if (!typed.ok()) return typed.status();
    c.fairshare = *std::move(typed);
    c.fairshare_json = req["fairsharePolicy"].dump();
  }
  if (Present(req, "quotaSharePolicy")) c.quotashare_json = req["quotaSharePolicy"].dump();
  return c;
}

StatusOr<DeleteSchedulingPolicyCommand> DecodeDeleteSchedulingPolicy(const json& req) {
  return DeleteSchedulingPolicyCommand{Get<std::string>(req, "arn", "")};
}

StatusOr<CreateQuotaShareCommand> DecodeCreateQuotaShare(const json& req) {
  CreateQuotaShareCommand c;
  c.queue = Get<std::string>(req, "jobQueue", "");
  c.name = Get<std::string>(req, "quotaShareName", "");
  if (!IsBatchName(c.name))
    return InvalidArgument("quotaShareName must be 1 to 128 letters, digits, hyphens or underscores");
  auto tags = ReadTags(req);
  if (!tags.ok()) return tags.status();
  c.tags = *std::move(tags);
  auto fields = DecodeShareFields(req);
  if (!fields.ok()) return fields.status();
  c.fields = *std::move(fields);
  return c;
}

StatusOr<UpdateQuotaShareCommand> DecodeUpdateQuotaShare(const json& req) {
  auto fields = DecodeShareFields(req);
  if (!fields.ok()) return fields.status();
  return UpdateQuotaShareCommand{Get<std::string>(req, "quotaShareArn", ""), *std::move(fields)};
}

StatusOr<DeleteQuotaShareCommand> DecodeDeleteQuotaShare(const json& req) {
  return DeleteQuotaShareCommand{Get<std::string>(req, "quotaShareArn", "")};
}

StatusOr<SubmitServiceJobCommand> DecodeSubmitServiceJob(const json& req, const HostFacts& host, const json* parsed) {
  SubmitServiceJobCommand c;
  c.name = Get<std::string>(req, "jobName", "");
  c.queue = Get<std::string>(req, "jobQueue", "");
  if (Get<std::string>(req, "serviceJobType", "") != "SAGEMAKER_TRAINING")
    return InvalidArgument("serviceJobType must be SAGEMAKER_TRAINING");
  c.payload = Get<std::string>(req, "serviceRequestPayload", "");
  if (static_cast<int64_t>(c.payload.size()) > host.config.max_submit_payload_bytes)
    return InvalidArgument("serviceRequestPayload is " + std::to_string(c.payload.size()) +
                           " bytes; the limit is " + std::to_string(host.config.max_submit_payload_bytes));
  json own;
  if (!parsed) own = json::parse(c.payload, nullptr, false);
  const json& payload = parsed ? *parsed : own;
  if (payload.is_discarded() || !payload.is_object())
    return InvalidArgument("serviceRequestPayload must be a JSON object (a CreateTrainingJob request)");
  auto training = AcceptTrainingRequest(payload, host.config, host.sandbox);
  if (!training.ok()) return training.status();
  c.training = *std::move(training);
  c.training.spec.instance_count = std::max<int64_t>(1, c.training.spec.instance_count);
  if (Present(req, "schedulingPriority")) {
    if (!req["schedulingPriority"].is_number_integer())
      return InvalidArgument("schedulingPriority must be an integer between 0 and 9999");
    const int64_t priority = req["schedulingPriority"].get<int64_t>();
    if (priority < 0 || priority > 9999)
      return InvalidArgument("schedulingPriority must be between 0 and 9999, not " + std::to_string(priority));
    c.scheduling_priority = static_cast<int>(priority);
  }
  c.share_identifier = Get<std::string>(req, "shareIdentifier", "");
  c.quota_share_name = Get<std::string>(req, "quotaShareName", "");
  auto dump_if = [&](const char* key) { return Present(req, key) ? req[key].dump() : std::string(); };
  c.retry_strategy_json = dump_if("retryStrategy");
  c.timeout_config_json = dump_if("timeoutConfig");
  c.preemption_configuration_json = dump_if("preemptionConfiguration");
  auto tags = ReadTags(req);
  if (!tags.ok()) return tags.status();
  c.tags = *std::move(tags);
  c.client_token = Get<std::string>(req, "clientToken", "");
  {
    json canonical = req;
    canonical.erase("clientToken");
    c.request_hash = Sha256Hex(canonical.dump());
  }
  TY_RETURN_IF_ERROR(CheckRetryStrategy(req));
  if (!c.retry_strategy_json.empty()) {
    RetryStrategy rs;
    if (!ParseRetryStrategy(c.retry_strategy_json, &rs)) return InvalidArgument("retryStrategy must be an object");
    c.retry_strategy = std::move(rs);
  }
  const TrainingSpec& spec = c.training.spec;
  TY_RETURN_IF_ERROR(CheckTags(spec.tags, "serviceRequestPayload.Tags"));
  {
    // The capacity ladder: the service job's tags, over those of its payload.
    Tags tags = spec.tags;
    for (const auto& [k, v] : c.tags) tags[k] = v;
    auto ladder = ParseLadder(tags, {spec.instance_type, spec.managed_spot}, spec.instance_count, host.config);
    if (!ladder.ok()) return InvalidArgument("tags: " + ladder.status().message());
    if (!ladder->rungs.empty() && spec.keep_alive_seconds > 0)
      return InvalidArgument("serviceRequestPayload.ResourceConfig.KeepAlivePeriodInSeconds: a job with a capacity ladder "
                             "(tag " + std::string(kLadderTag) + ") cannot use warm pools");
    c.capacity_ladder = LadderText(*ladder);
    c.fallback_after_interruptions = ladder->fallback_after_interruptions;
  }
  if (!c.timeout_config_json.empty()) {
    const json& tc = req["timeoutConfig"];
    const json secs = tc.is_object() && tc.contains("attemptDurationSeconds") ? tc["attemptDurationSeconds"] : json();
    if (!secs.is_null() && (!secs.is_number_integer() || secs.get<int64_t>() < 60))
      return InvalidArgument("timeoutConfig.attemptDurationSeconds must be an integer of at least 60, not " + secs.dump());
    TimeoutConfig tc_typed;
    if (!ParseTimeoutConfig(c.timeout_config_json, &tc_typed)) return InvalidArgument("timeoutConfig must be an object");
    c.timeout = tc_typed;
  }
  if (!c.preemption_configuration_json.empty()) {
    PreemptionConfig pc;
    if (!ParsePreemptionConfig(c.preemption_configuration_json, &pc))
      return InvalidArgument("preemptionConfiguration must be an object");
    c.preemption = pc;
  }
  return c;
}

StatusOr<TagResourceCommand> DecodeTagResource(const json& req) {
  TagResourceCommand c;
  c.service = "batch";
  c.arn = Get<std::string>(req, "resourceArn", "");
  auto tags = ReadTags(req);
  if (!tags.ok()) return tags.status();
  c.tags = *std::move(tags);
  return c;
}

StatusOr<UntagResourceCommand> DecodeUntagResource(const json& req) {
  UntagResourceCommand c;
  c.service = "batch";
  c.arn = Get<std::string>(req, "resourceArn", "");
  // tagKeys comes from the query string, which model validation of the body does not see.
  const json keys = Get<json>(req, "tagKeys", json());
  TY_RETURN_IF_ERROR(ServiceModel::Batch().ValidateShape("TagKeysList", keys.is_null() ? json::array() : keys, "tagKeys"));
  for (const auto& k : keys) {
    TY_RETURN_IF_ERROR(CheckTagKey(k.get<std::string>(), "tagKeys"));
    c.keys.push_back(k.get<std::string>());
  }
  return c;
}

StatusOr<TagResourceCommand> DecodeAddTags(const json& req) {
  TagResourceCommand c;
  c.service = "sagemaker";
  c.arn = Get<std::string>(req, "ResourceArn", "");
  const json list = Get<json>(req, "Tags", json::array());
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string key = list[i].value("Key", ""), where = "Tags[" + std::to_string(i) + "]";
    if (!c.tags.emplace(key, list[i].value("Value", "")).second)
      return InvalidArgument(where + ": tag key '" + key + "' is given more than once");
  }
  TY_RETURN_IF_ERROR(CheckTags(c.tags, "Tags"));
  return c;
}

StatusOr<UntagResourceCommand> DecodeDeleteTags(const json& req) {
  UntagResourceCommand c;
  c.service = "sagemaker";
  c.arn = Get<std::string>(req, "ResourceArn", "");
  for (const auto& k : Get<json>(req, "TagKeys", json::array())) {
    TY_RETURN_IF_ERROR(CheckTagKey(k.get<std::string>(), "TagKeys"));
    c.keys.push_back(k.get<std::string>());
  }
  return c;
}

StatusOr<TerminateServiceJobCommand> DecodeTerminateServiceJob(const json& req) {
  return TerminateServiceJobCommand{Get<std::string>(req, "jobId", ""), Get<std::string>(req, "reason", "")};
}

StatusOr<UpdateServiceJobCommand> DecodeUpdateServiceJob(const json& req) {
  UpdateServiceJobCommand c;
  c.job_id = Get<std::string>(req, "jobId", "");
  const int64_t priority = Get<int64_t>(req, "schedulingPriority", 0);
  if (priority < 0 || priority > 9999)
    return InvalidArgument("schedulingPriority must be between 0 and 9999, not " + std::to_string(priority));
  c.scheduling_priority = static_cast<int>(priority);
  return c;
}

StatusOr<CreateTrainingJobCommand> DecodeCreateTrainingJob(const json& req, const HostFacts& host) {
  auto request = AcceptTrainingRequest(req, host.config, host.sandbox);
  if (!request.ok()) return request.status();
  CreateTrainingJobCommand c;
  c.request = *std::move(request);
  c.request.json = req.dump();
  const TrainingSpec& spec = c.request.spec;
  TY_RETURN_IF_ERROR(CheckTags(spec.tags, "Tags"));
  auto ladder = ParseLadder(spec.tags, {spec.instance_type, spec.managed_spot}, spec.instance_count, host.config);
  if (!ladder.ok()) return InvalidArgument("Tags: " + ladder.status().message());
  c.capacity_ladder = LadderText(*ladder);
  c.fallback_after_interruptions = ladder->fallback_after_interruptions;
  return c;
}

StatusOr<UpdateTrainingJobCommand> DecodeUpdateTrainingJob(const json& req) {
  UpdateTrainingJobCommand c;
  c.name = Get<std::string>(req, "TrainingJobName", "");
  for (const char* k : {"ProfilerConfig", "ProfilerRuleConfigurations", "RemoteDebugConfig"})
    if (Present(req, k))
      return InvalidArgument(std::string(k) + ": profiler and remote debugging are not available on this server; "
                             "only ResourceConfig.KeepAlivePeriodInSeconds can be updated");
  if (!req.contains("ResourceConfig") || !req["ResourceConfig"].is_object())
    return InvalidArgument("ResourceConfig is required: only ResourceConfig.KeepAlivePeriodInSeconds can be updated here");
  const json& rc = req["ResourceConfig"];
  if (!rc.contains("KeepAlivePeriodInSeconds") || !rc["KeepAlivePeriodInSeconds"].is_number_integer())
    return InvalidArgument("ResourceConfig.KeepAlivePeriodInSeconds is required");
  c.keep_alive_seconds = rc["KeepAlivePeriodInSeconds"].get<int64_t>();
  if (c.keep_alive_seconds < 0 || c.keep_alive_seconds > kMaxKeepAliveSeconds)
    return InvalidArgument("ResourceConfig.KeepAlivePeriodInSeconds must be between 0 and " +
                           std::to_string(kMaxKeepAliveSeconds) + ", not " + std::to_string(c.keep_alive_seconds));
  return c;
}


// ---- CreateHyperParameterTuningJob (docs/tuning.md, "Validation") ----

namespace {

// SageMaker's resource limits for automatic model tuning (its developer guide, "Resource Limits
// for Automatic Model Tuning"; docs/tuning.md, "Limits"): training jobs per tuning job (750 for
// every strategy), parallel training jobs per tuning job (100, the most AWS raises it to), metrics
// defined per tuning job (20). The service model gives only their minimums.
constexpr int64_t kMaxTrainingJobsPerTuningJob = 750;
constexpr int64_t kMaxParallelTrainingJobsPerTuningJob = 100;
constexpr size_t kMaxTuningMetricDefinitions = 20;

// A range bound: the model types MinValue / MaxValue as strings; they must read as numbers.
StatusOr<double> RangeBound(const json& range, const char* key, const std::string& where) {
  const std::string text = Get<std::string>(range, key, "");
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !std::isfinite(v))
    return InvalidArgument(where + "." + key + " must be a number, not '" + text.substr(0, 64) + "'");
  return v;
}

StatusOr<std::vector<tune::Range>> DecodeRanges(const json& ranges, const std::string& where) {
  std::vector<tune::Range> out;
  if (!ranges.is_object()) return out;
  if (Present(ranges, "AutoParameters") && !ranges["AutoParameters"].empty())
    return InvalidArgument(where + ".AutoParameters: Autotune's automatic ranges are not supported here; give the ranges");
  auto scaling = [](const json& r) {
    const std::string s = Get<std::string>(r, "ScalingType", "Auto");
    return s == "Linear" ? tune::Scaling::kLinear
           : s == "Logarithmic" ? tune::Scaling::kLogarithmic
           : s == "ReverseLogarithmic" ? tune::Scaling::kReverseLogarithmic
                                       : tune::Scaling::kAuto;
  };
  const std::pair<const char*, tune::Range::Kind> kinds[] = {{"IntegerParameterRanges", tune::Range::Kind::kInteger},
                                                             {"ContinuousParameterRanges", tune::Range::Kind::kContinuous}};
  for (const auto& [member, kind] : kinds) {
    const json list = Get<json>(ranges, member, json::array());
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = where + "." + member + "[" + std::to_string(i) + "]";
      tune::Range r;
      r.name = Get<std::string>(list[i], "Name", "");
      r.kind = kind;
      auto lo = RangeBound(list[i], "MinValue", at);
      if (!lo.ok()) return lo.status();
      auto hi = RangeBound(list[i], "MaxValue", at);
      if (!hi.ok()) return hi.status();
      r.min = *lo;
      r.max = *hi;
      r.scaling = scaling(list[i]);
      out.push_back(std::move(r));
    }
  }
  const json cats = Get<json>(ranges, "CategoricalParameterRanges", json::array());
  for (size_t i = 0; i < cats.size(); ++i) {
    tune::Range r;
    r.name = Get<std::string>(cats[i], "Name", "");
    r.kind = tune::Range::Kind::kCategorical;
    for (const auto& v : Get<json>(cats[i], "Values", json::array())) r.values.push_back(v.is_string() ? v.get<std::string>() : v.dump());
    out.push_back(std::move(r));
  }
  return out;
}

// The epochs-like static hyperparameters Hyperband reads its MaxResource from (AWS's list).
constexpr const char* kEpochHyperparameters[] = {"epochs", "numepochs", "n-epochs", "n_epochs", "num_epochs"};

}  // namespace

StatusOr<CreateTuningJobCommand> DecodeCreateHyperParameterTuningJob(const json& req, const HostFacts& host,
                                                                    uint64_t drawn_seed) {
  CreateTuningJobCommand c;
  c.name = Get<std::string>(req, "HyperParameterTuningJobName", "");
  c.request_json = req.dump();
  if (Present(req, "Autotune")) return InvalidArgument("Autotune is not supported here; give the tuning job's configuration");
  if (Present(req, "TrainingJobDefinitions"))
    return InvalidArgument("TrainingJobDefinitions: tuning over several training definitions is not supported here; "
                           "give one TrainingJobDefinition");
  if (!Present(req, "TrainingJobDefinition")) return InvalidArgument("TrainingJobDefinition is required");
  const json config = Get<json>(req, "HyperParameterTuningJobConfig", json::object());
  const json def = Get<json>(req, "TrainingJobDefinition", json::object());

  // Strategy, and what goes with it.
  const std::string strategy = Get<std::string>(config, "Strategy", "");
  tune::SearchConfig& s = c.search;
  s.strategy = strategy == "Grid" ? tune::Strategy::kGrid
               : strategy == "Random" ? tune::Strategy::kRandom
               : strategy == "Hyperband" ? tune::Strategy::kHyperband
                                         : tune::Strategy::kBayesian;
  const std::string early = Get<std::string>(config, "TrainingJobEarlyStoppingType", "Off");
  s.early_stopping = early == "Auto";
  if (s.strategy == tune::Strategy::kHyperband && s.early_stopping)
    return InvalidArgument("HyperParameterTuningJobConfig.TrainingJobEarlyStoppingType must be Off with the Hyperband "
                           "strategy, which stops trials itself");
  const json strategy_config = Get<json>(config, "StrategyConfig", json());
  if (!strategy_config.is_null() && s.strategy != tune::Strategy::kHyperband)
    return InvalidArgument("HyperParameterTuningJobConfig.StrategyConfig applies only to the Hyperband strategy, not " + strategy);

  // Objective.
  if (!Present(config, "HyperParameterTuningJobObjective"))
    return InvalidArgument("HyperParameterTuningJobConfig.HyperParameterTuningJobObjective is required");
  const json objective = config["HyperParameterTuningJobObjective"];
  s.goal = Get<std::string>(objective, "Type", "") == "Minimize" ? tune::Goal::kMinimize : tune::Goal::kMaximize;
  c.objective_metric = Get<std::string>(objective, "MetricName", "");
  const json spec = Get<json>(def, "AlgorithmSpecification", json::object());
  if (const json metrics = Get<json>(spec, "MetricDefinitions", json::array()); metrics.size() > kMaxTuningMetricDefinitions)
    return InvalidArgument("TrainingJobDefinition.AlgorithmSpecification.MetricDefinitions: at most " +
                           std::to_string(kMaxTuningMetricDefinitions) + " metrics per tuning job (SageMaker's limit), not " +
                           std::to_string(metrics.size()));
  {
    bool defined = false;
    for (const auto& m : Get<json>(spec, "MetricDefinitions", json::array()))
      if (Get<std::string>(m, "Name", "") == c.objective_metric) defined = true;
    if (!defined)
      return InvalidArgument("HyperParameterTuningJobConfig.HyperParameterTuningJobObjective.MetricName '" + c.objective_metric +
                             "' must be one of TrainingJobDefinition.AlgorithmSpecification.MetricDefinitions' names");
  }
  if (Present(def, "TuningObjective") || Present(def, "HyperParameterRanges") || Present(def, "DefinitionName"))
    return InvalidArgument("TrainingJobDefinition: TuningObjective, HyperParameterRanges and DefinitionName belong to "
                           "TrainingJobDefinitions, which is not supported here");
  if (Present(def, "HyperParameterTuningResourceConfig"))
    return InvalidArgument("TrainingJobDefinition.HyperParameterTuningResourceConfig is not supported here; give ResourceConfig");

  // Ranges.
  auto ranges = DecodeRanges(Get<json>(config, "ParameterRanges", json::object()), "HyperParameterTuningJobConfig.ParameterRanges");
  if (!ranges.ok()) return ranges.status();
  s.ranges = *std::move(ranges);
  if (s.ranges.empty()) return InvalidArgument("HyperParameterTuningJobConfig.ParameterRanges must name at least one hyperparameter to tune");
  constexpr size_t kMaxRanges = 30;
  if (s.ranges.size() > kMaxRanges)
    return InvalidArgument("HyperParameterTuningJobConfig.ParameterRanges: at most " + std::to_string(kMaxRanges) +
                           " hyperparameters can be tuned, not " + std::to_string(s.ranges.size()));
  if (Status st = tune::ValidateRanges(s.ranges); !st.ok())
    return InvalidArgument("HyperParameterTuningJobConfig.ParameterRanges: " + st.message());
  const json statics = Get<json>(def, "StaticHyperParameters", json::object());
  for (const auto& r : s.ranges)
    if (statics.is_object() && statics.contains(r.name))
      return InvalidArgument("TrainingJobDefinition.StaticHyperParameters: '" + r.name +
                             "' is also a tuned hyperparameter; a hyperparameter is either static or tuned");

  // Resource limits: SageMaker's own caps (docs/tuning.md, "Limits"), which also bound what one
  // tuning job can ask of the controller.
  const json limits = Get<json>(config, "ResourceLimits", json::object());
  const bool has_max = Present(limits, "MaxNumberOfTrainingJobs");
  for (const auto& [member, cap] : {std::pair<const char*, int64_t>{"MaxNumberOfTrainingJobs", kMaxTrainingJobsPerTuningJob},
                                    {"MaxParallelTrainingJobs", kMaxParallelTrainingJobsPerTuningJob}}) {
    if (!Present(limits, member)) continue;
    const int64_t v = Get<int64_t>(limits, member, 1);
    if (v < 1 || v > cap)
      return InvalidArgument(std::string("HyperParameterTuningJobConfig.ResourceLimits.") + member + " must be between 1 and " +
                             std::to_string(cap) + " (SageMaker's limit per tuning job), not " + std::to_string(v));
  }
  s.max_parallel = static_cast<int>(Get<int64_t>(limits, "MaxParallelTrainingJobs", 1));
  s.max_trials = has_max ? static_cast<int>(Get<int64_t>(limits, "MaxNumberOfTrainingJobs", 1)) : 0;
  c.max_runtime_seconds = Get<int64_t>(limits, "MaxRuntimeInSeconds", 0);
  if (s.strategy == tune::Strategy::kGrid) {
    for (const auto& r : s.ranges)
      if (r.kind != tune::Range::Kind::kCategorical)
        return InvalidArgument("HyperParameterTuningJobConfig.ParameterRanges: the Grid strategy takes categorical ranges only; '" +
                               r.name + "' is not one");
    auto size = tune::GridSize(s.ranges);
    if (!size.ok()) return InvalidArgument("HyperParameterTuningJobConfig.ParameterRanges: " + size.status().message());
    if (has_max && s.max_trials > *size)
      return InvalidArgument("ResourceLimits.MaxNumberOfTrainingJobs (" + std::to_string(s.max_trials) +
                             ") must not exceed the grid's " + std::to_string(*size) + " combinations");
    if (!has_max && *size > kMaxTrainingJobsPerTuningJob)
      return InvalidArgument("HyperParameterTuningJobConfig.ParameterRanges: the grid's " + std::to_string(*size) +
                             " combinations are more than SageMaker's limit of " +
                             std::to_string(kMaxTrainingJobsPerTuningJob) + " training jobs per tuning job");
    if (!has_max) s.max_trials = static_cast<int>(*size);
  } else if (!has_max) {
    return InvalidArgument("ResourceLimits.MaxNumberOfTrainingJobs is required with the " + strategy + " strategy");
  }
  if (s.max_parallel > s.max_trials)
    return InvalidArgument("ResourceLimits.MaxParallelTrainingJobs (" + std::to_string(s.max_parallel) +
                           ") must not exceed MaxNumberOfTrainingJobs (" + std::to_string(s.max_trials) + ")");

  // Hyperband's resource: MaxResource, else the epochs-like static hyperparameter.
  if (s.strategy == tune::Strategy::kHyperband) {
    const json hb = strategy_config.is_object() ? Get<json>(strategy_config, "HyperbandStrategyConfig", json::object()) : json::object();
    for (const char* name : kEpochHyperparameters)
      if (statics.is_object() && statics.contains(name) && c.resource_hyperparameter.empty()) c.resource_hyperparameter = name;
    s.min_resource = static_cast<int>(Get<int64_t>(hb, "MinResource", 1));
    if (Present(hb, "MaxResource")) {
      s.max_resource = static_cast<int>(std::min<int64_t>(Get<int64_t>(hb, "MaxResource", 1), 1 << 20));
    } else if (!c.resource_hyperparameter.empty()) {
      const std::string text = statics[c.resource_hyperparameter].is_string() ? statics[c.resource_hyperparameter].get<std::string>() : "";
      if (text.empty() || text.size() > 7 || text.find_first_not_of("0123456789") != std::string::npos)
        return InvalidArgument("TrainingJobDefinition.StaticHyperParameters." + c.resource_hyperparameter +
                               " must be a whole number when Hyperband takes its MaxResource from it, not '" + text.substr(0, 32) + "'");
      s.max_resource = std::stoi(text);
    } else {
      return InvalidArgument("HyperbandStrategyConfig.MaxResource is required unless a static hyperparameter epochs, "
                             "numepochs, n-epochs, n_epochs or num_epochs gives it");
    }
    if (s.min_resource > s.max_resource)
      return InvalidArgument("HyperbandStrategyConfig.MinResource (" + std::to_string(s.min_resource) +
                             ") must not exceed MaxResource (" + std::to_string(s.max_resource) + ")");
    if (c.resource_hyperparameter.empty()) c.resource_hyperparameter = "epochs";
  }

  // Completion criteria.
  const json criteria = Get<json>(config, "TuningJobCompletionCriteria", json::object());
  if (Present(criteria, "TargetObjectiveMetricValue")) s.target_objective = criteria["TargetObjectiveMetricValue"].get<double>();
  if (Present(criteria, "BestObjectiveNotImproving"))
    s.best_not_improving = static_cast<int>(Get<int64_t>(criteria["BestObjectiveNotImproving"], "MaxNumberOfTrainingJobsNotImproving", 0));
  if (Present(criteria, "ConvergenceDetected"))
    s.complete_on_convergence = Get<std::string>(criteria["ConvergenceDetected"], "CompleteOnConvergence", "") == "Enabled";
  if (s.complete_on_convergence && s.strategy != tune::Strategy::kBayesian && s.strategy != tune::Strategy::kRandom)
    return InvalidArgument("TuningJobCompletionCriteria.ConvergenceDetected applies to the Bayesian and Random strategies, not " + strategy);
  s.seed = Present(config, "RandomSeed") ? static_cast<uint64_t>(Get<int64_t>(config, "RandomSeed", 0)) : drawn_seed;

  // Warm start.
  if (Present(req, "WarmStartConfig")) {
    const json ws = req["WarmStartConfig"];
    c.warm_start_type = Get<std::string>(ws, "WarmStartType", "");
    std::set<std::string> seen;
    for (const auto& p : Get<json>(ws, "ParentHyperParameterTuningJobs", json::array())) {
      const std::string parent = Get<std::string>(p, "HyperParameterTuningJobName", "");
      if (parent.empty()) return InvalidArgument("WarmStartConfig.ParentHyperParameterTuningJobs: each entry needs a HyperParameterTuningJobName");
      if (!seen.insert(ToLower(parent)).second)
        return InvalidArgument("WarmStartConfig.ParentHyperParameterTuningJobs names " + parent + " twice");
      if (ToLower(parent) == ToLower(c.name)) return InvalidArgument("WarmStartConfig: a tuning job cannot be its own parent");
      c.warm_start_parents.push_back(parent);
    }
  }

  // The trials' CreateTrainingJob request: checked as CreateTrainingJob checks one, with a trial's
  // longest name and each tuned hyperparameter at a value of its range.
  json training = json::object();
  for (const char* k : {"RoleArn", "InputDataConfig", "OutputDataConfig", "ResourceConfig", "VpcConfig", "StoppingCondition",
                        "EnableNetworkIsolation", "EnableInterContainerTrafficEncryption", "EnableManagedSpotTraining",
                        "CheckpointConfig", "RetryStrategy", "Environment"})
    if (Present(def, k)) training[k] = def[k];
  training["AlgorithmSpecification"] = spec;
  training["HyperParameters"] = statics.is_object() ? statics : json::object();
  if (!Present(def, "ResourceConfig")) return InvalidArgument("TrainingJobDefinition.ResourceConfig is required");
  c.training_request_json = training.dump();
  DecodeTrainingSpec(training, &c.training_spec);
  json probe = training;
  probe["TrainingJobName"] = c.name + "-001-00000000";
  for (const auto& r : s.ranges)
    probe["HyperParameters"][r.name] = r.kind == tune::Range::Kind::kCategorical ? r.values.front() : std::to_string(r.min);
  if (s.strategy == tune::Strategy::kHyperband) probe["HyperParameters"][c.resource_hyperparameter] = std::to_string(s.max_resource);
  if (auto probed = AcceptTrainingRequest(probe, host.config, host.sandbox); !probed.ok())
    return InvalidArgument("TrainingJobDefinition: " + probed.status().message());
  // SageMaker's Tags: a list of {Key, Value} (Batch's map-shaped `tags` is not this API's).
  const json tag_list = Get<json>(req, "Tags", json::array());
  for (size_t i = 0; i < tag_list.size(); ++i) {
    const std::string key = Get<std::string>(tag_list[i], "Key", "");
    if (!c.tags.emplace(key, Get<std::string>(tag_list[i], "Value", "")).second)
      return InvalidArgument("Tags[" + std::to_string(i) + "]: tag key '" + key + "' is given more than once");
  }
  TY_RETURN_IF_ERROR(CheckTags(c.tags, "Tags"));
  auto queue = ParseTrialQueue(c.tags);  // trials through a job queue (docs/tuning.md)
  if (!queue.ok()) return queue.status();
  c.queue = *std::move(queue);
  return c;
}

}  // namespace ty::api

// ---- Job definitions (docs/user-guide.md, "Job definitions") ----

namespace ty::api {
namespace {

bool IsDefinitionName(const std::string& s) { return IsBatchJobName(s); }

// A resourceRequirements value: a whole number of at least `min` (EC2 resources take no fractions).
StatusOr<int64_t> ResourceValue(const std::string& type, const std::string& value, int64_t min, const std::string& where) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty() || n < min)
    return InvalidArgument(where + ": " + type + " must be a whole number of at least " + std::to_string(min) +
                           " for EC2 resources, not '" + value + "'");
  return n;
}

// The retry conditions' patterns: up to 512 characters, letters, digits, spaces, periods and
// colons (onExitCode: digits only), optionally ending in '*'.
Status CheckRetryPattern(const std::string& p, bool exit_code, const std::string& where) {
  if (p.size() > 512) return InvalidArgument(where + ": at most 512 characters are allowed");
  for (size_t i = 0; i < p.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(p[i]);
    if (c == '*' && i + 1 == p.size()) continue;
    bool ok = exit_code ? std::isdigit(c) != 0 : (std::isalnum(c) || c == ' ' || c == '.' || c == ':');
    if (!ok)
      return InvalidArgument(where + ": '" + p + "' may hold only " +
                             (exit_code ? std::string("digits") : std::string("letters, digits, spaces, periods and colons")) +
                             ", optionally ending in '*'");
  }
  return Status::Ok();
}

Status CheckContainerProperties(const json& c) {
  // Members of other platforms or job types, refused rather than ignored.
  static constexpr const char* kFargateOnly[] = {"networkConfiguration", "fargatePlatformConfiguration", "ephemeralStorage",
                                                 "runtimePlatform"};
  for (const char* m : kFargateOnly)
    if (c.contains(m))
      return InvalidArgument(std::string("containerProperties.") + m + ": applies to Fargate resources only; platformCapabilities is EC2");
  if (c.contains("instanceType"))
    return InvalidArgument("containerProperties.instanceType: applies to multi-node parallel jobs only");
  if (c.contains("repositoryCredentials") || c.contains("secrets") || c.contains("logConfiguration") ||
      c.contains("executionRoleArn") || c.contains("enableExecuteCommand"))
    return InvalidArgument("containerProperties: repositoryCredentials, secrets, logConfiguration, executionRoleArn and "
                           "enableExecuteCommand are not supported by this server");
  const std::string image = c.value("image", "");
  if (image.empty()) return InvalidArgument("containerProperties.image: an image is required for a container job definition");
  if (image.size() > 255) return InvalidArgument("containerProperties.image: at most 255 characters are allowed");
  for (unsigned char ch : image)
    if (!(std::isalnum(ch) || std::string_view("-_.:/@").find(static_cast<char>(ch)) != std::string_view::npos))
      return InvalidArgument("containerProperties.image: '" + image +
                             "' may hold only letters, digits, hyphens, underscores, colons, periods, forward slashes and @");
  if (c.contains("vcpus") && c["vcpus"].get<int64_t>() < 1)
    return InvalidArgument("containerProperties.vcpus: at least 1 vCPU must be given");
  if (c.contains("memory") && c["memory"].get<int64_t>() < 4)
    return InvalidArgument("containerProperties.memory: at least 4 MiB of memory must be given");
  std::set<std::string> seen;
  const json reqs = c.value("resourceRequirements", json::array());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::string where = "containerProperties.resourceRequirements[" + std::to_string(i) + "]";
    const std::string type = reqs[i].value("type", "");
    const std::string value = reqs[i].value("value", "");
    if (!seen.insert(type).second) return InvalidArgument(where + ": " + type + " is given more than once");
    if (type == "VCPU") {
      if (c.contains("vcpus")) return InvalidArgument(where + ": VCPU and containerProperties.vcpus can't both be given");
      TY_RETURN_IF_ERROR(ResourceValue(type, value, 1, where).status());
    } else if (type == "MEMORY") {
      if (c.contains("memory")) return InvalidArgument(where + ": MEMORY and containerProperties.memory can't both be given");
      TY_RETURN_IF_ERROR(ResourceValue(type, value, 4, where).status());
    } else if (type == "GPU") {
      TY_RETURN_IF_ERROR(ResourceValue(type, value, 1, where).status());
    } else {
      return InvalidArgument(where + ": type " + type + " is not supported (VCPU, MEMORY or GPU)");
    }
  }
  const json env = c.value("environment", json::array());
  std::set<std::string> env_names;
  for (size_t i = 0; i < env.size(); ++i) {
    const std::string name = env[i].value("name", "");
    const std::string where = "containerProperties.environment[" + std::to_string(i) + "]";
    if (name.empty()) return InvalidArgument(where + ".name: a name is required");
    if (const std::string rule = exec::ReservedEnvironmentRule(name); !rule.empty())
      return InvalidArgument(where + ".name: " + name + " is reserved: " + rule);
    if (!env_names.insert(name).second) return InvalidArgument(where + ".name: " + name + " is given more than once");
  }
  const std::string role = c.value("jobRoleArn", "");
  if (c.contains("jobRoleArn") && !(StartsWith(role, "arn:aws:iam::") && role.find(":role/") != std::string::npos))
    return InvalidArgument("containerProperties.jobRoleArn: '" + role + "' is not an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)");
  std::set<std::string> volumes;
  const json vols = c.value("volumes", json::array());
  for (size_t i = 0; i < vols.size(); ++i) {
    const std::string where = "containerProperties.volumes[" + std::to_string(i) + "]";
    const std::string name = vols[i].value("name", "");
    if (name.empty() || name.size() > 255 ||
        !std::all_of(name.begin(), name.end(), [](unsigned char ch) { return std::isalnum(ch) || ch == '-' || ch == '_'; }))
      return InvalidArgument(where + ".name: '" + name + "' must be 1 to 255 letters, digits, hyphens and underscores");
    if (!volumes.insert(name).second) return InvalidArgument(where + ".name: " + name + " is given more than once");
    if (vols[i].contains("efsVolumeConfiguration") || vols[i].contains("s3filesVolumeConfiguration"))
      return InvalidArgument(where + ": only host volumes are supported by this server");
    const std::string source = vols[i].contains("host") ? vols[i]["host"].value("sourcePath", "") : "";
    if (!source.empty() && source[0] != '/')
      return InvalidArgument(where + ".host.sourcePath: '" + source + "' must be an absolute path");
  }
  const json mounts = c.value("mountPoints", json::array());
  for (size_t i = 0; i < mounts.size(); ++i) {
    const std::string where = "containerProperties.mountPoints[" + std::to_string(i) + "]";
    const std::string source = mounts[i].value("sourceVolume", "");
    const std::string path = mounts[i].value("containerPath", "");
    if (!volumes.count(source))
      return InvalidArgument(where + ".sourceVolume: '" + source + "' names no volume of containerProperties.volumes");
    if (path.empty() || path[0] != '/')
      return InvalidArgument(where + ".containerPath: '" + path + "' must be an absolute path");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<control::RegisterJobDefinitionCommand> DecodeRegisterJobDefinition(const json& req) {
  control::RegisterJobDefinitionCommand c;
  c.name = req.value("jobDefinitionName", "");
  if (!IsDefinitionName(c.name))
    return InvalidArgument("jobDefinitionName: '" + c.name +
                           "' must be up to 128 letters (upper and lower case), digits, hyphens and underscores, "
                           "starting with a letter or digit");
  c.type = req.value("type", "");
  if (c.type != "container")
    return InvalidArgument("type: only 'container' job definitions are supported by this server, not '" + c.type + "'");
  static constexpr const char* kOtherTypes[] = {"nodeProperties", "eksProperties", "ecsProperties", "consumableResourceProperties"};
  for (const char* m : kOtherTypes)
    if (req.contains(m)) return InvalidArgument(std::string(m) + ": not allowed in a job definition of type container");
  if (!req.contains("containerProperties"))
    return InvalidArgument("containerProperties: required in a job definition of type container");
  for (const auto& p : req.value("platformCapabilities", json::array()))
    if (p != "EC2")
      return InvalidArgument("platformCapabilities: only EC2 is supported by this server, not " + p.dump());
  TY_RETURN_IF_ERROR(CheckContainerProperties(req["containerProperties"]));
  if (req.contains("schedulingPriority")) {
    int64_t p = req["schedulingPriority"].get<int64_t>();
    if (p < 0 || p > 9999) return InvalidArgument("schedulingPriority: must be from 0 to 9999, not " + std::to_string(p));
  }
  if (req.contains("retryStrategy")) {
    const json& r = req["retryStrategy"];
    if (r.contains("attempts")) {
      int64_t a = r["attempts"].get<int64_t>();
      if (a < 1 || a > 10) return InvalidArgument("retryStrategy.attempts: must be from 1 to 10, not " + std::to_string(a));
    }
    const json conds = r.value("evaluateOnExit", json::array());
    if (conds.size() > 5)
      return InvalidArgument("retryStrategy.evaluateOnExit: at most 5 conditions are allowed, " + std::to_string(conds.size()) + " given");
    for (size_t i = 0; i < conds.size(); ++i) {
      const std::string where = "retryStrategy.evaluateOnExit[" + std::to_string(i) + "]";
      const std::string action = ToUpper(conds[i].value("action", ""));
      if (action != "RETRY" && action != "EXIT") return InvalidArgument(where + ".action: must be RETRY or EXIT");
      if (conds[i].contains("onExitCode"))
        TY_RETURN_IF_ERROR(CheckRetryPattern(conds[i].value("onExitCode", ""), true, where + ".onExitCode"));
      for (const char* m : {"onReason", "onStatusReason"})
        if (conds[i].contains(m))
          TY_RETURN_IF_ERROR(CheckRetryPattern(conds[i].value(m, ""), false, where + "." + m));
    }
  }
  if (req.contains("timeout") && req["timeout"].contains("attemptDurationSeconds")) {
    int64_t s = req["timeout"]["attemptDurationSeconds"].get<int64_t>();
    if (s < 60) return InvalidArgument("timeout.attemptDurationSeconds: must be at least 60 seconds, not " + std::to_string(s));
  }
  auto tags = ReadTags(req);
  if (!tags.ok()) return tags.status();
  c.tags = std::move(*tags);
  json spec = json::object();
  for (const char* m : {"parameters", "containerProperties", "retryStrategy", "timeout", "propagateTags",
                        "platformCapabilities", "schedulingPriority"})
    if (req.contains(m)) spec[m] = req[m];
  c.spec_json = spec.dump();
  if (!ParseContainerTemplate(c.spec_json, &c.container))
    return InvalidArgument("containerProperties: the job definition does not decode");
  return c;
}

StatusOr<control::DeregisterJobDefinitionCommand> DecodeDeregisterJobDefinition(const json& req) {
  control::DeregisterJobDefinitionCommand c;
  c.job_definition = req.value("jobDefinition", "");
  if (c.job_definition.empty()) return InvalidArgument("jobDefinition: a name:revision or an ARN is required");
  return c;
}

}  // namespace ty::api

// ---- Compute environments and container jobs (docs/batch-jobs.md) ----

namespace ty::api {

namespace {

// A whole number in a tag (trainyard:memoryMiB, trainyard:gpus); -1 when absent.
StatusOr<int64_t> WholeTag(const Tags& tags, const char* key) {
  auto it = tags.find(key);
  if (it == tags.end()) return int64_t{-1};
  if (it->second.empty() || it->second.size() > 12 || it->second.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgument(std::string("tags.") + key + " must be a whole number, not '" + it->second + "'");
  return std::stoll(it->second);
}

}  // namespace

StatusOr<CreateComputeEnvironmentCommand> DecodeCreateComputeEnvironment(const json& req) {
  CreateComputeEnvironmentCommand c;
  c.name = Get<std::string>(req, "computeEnvironmentName", "");
  if (!IsBatchName(c.name))
    return InvalidArgument("computeEnvironmentName must be 1 to 128 letters, digits, hyphens or underscores");
  c.type = Get<std::string>(req, "type", "");
  if (c.type != "MANAGED" && c.type != "UNMANAGED") return InvalidArgument("type must be MANAGED or UNMANAGED");
  auto state = StateOf(req);
  if (!state.ok()) return state.status();
  c.state = *state;
  if (Present(req, "eksConfiguration"))
    return InvalidArgument("eksConfiguration: Amazon EKS compute environments are not supported by this server");
  auto tags = ReadTags(req);
  if (!tags.ok()) return tags.status();
  c.tags = *std::move(tags);
  const json resources = Get<json>(req, "computeResources", json());
  if (c.type == "MANAGED") {
    if (!resources.is_object()) return InvalidArgument("computeResources is required for a MANAGED compute environment");
    const int64_t max = Get<int64_t>(resources, "maxvCpus", -1);
    if (max < 1 || max > 100000) return InvalidArgument("computeResources.maxvCpus must be from 1 to 100000");
    c.vcpus = max;
    c.compute_resources_json = resources.dump();
  } else {
    if (resources.is_object()) return InvalidArgument("computeResources: an UNMANAGED compute environment takes none");
    c.unmanaged_vcpus = Get<int64_t>(req, "unmanagedvCpus", 0);
    if (c.unmanaged_vcpus < 0 || c.unmanaged_vcpus > 100000) return InvalidArgument("unmanagedvCpus must be from 0 to 100000");
    // What this host has, unless the environment says less.
    const int64_t host = std::max<int64_t>(1, std::thread::hardware_concurrency());
    c.vcpus = c.unmanaged_vcpus > 0 ? c.unmanaged_vcpus : host;
  }
  auto memory = WholeTag(c.tags, "trainyard:memoryMiB");
  if (!memory.ok()) return memory.status();
  auto gpus = WholeTag(c.tags, "trainyard:gpus");
  if (!gpus.ok()) return gpus.status();
  c.memory_mib = *memory >= 0 ? *memory : c.vcpus * 4096;
  c.gpus = *gpus >= 0 ? *gpus : 0;
  return c;
}

StatusOr<UpdateComputeEnvironmentCommand> DecodeUpdateComputeEnvironment(const json& req) {
  UpdateComputeEnvironmentCommand c;
  c.compute_environment = Get<std::string>(req, "computeEnvironment", "");
  if (Present(req, "state")) {
    auto state = StateOf(req);
    if (!state.ok()) return state.status();
    c.state = *state;
  }
  const json resources = Get<json>(req, "computeResources", json());
  if (resources.is_object() && Present(resources, "maxvCpus")) {
    const int64_t max = Get<int64_t>(resources, "maxvCpus", -1);
    if (max < 1 || max > 100000) return InvalidArgument("computeResources.maxvCpus must be from 1 to 100000");
    c.vcpus = max;
  }
  if (Present(req, "unmanagedvCpus")) {
    const int64_t n = Get<int64_t>(req, "unmanagedvCpus", -1);
    if (n < 1 || n > 100000) return InvalidArgument("unmanagedvCpus must be from 1 to 100000");
    c.vcpus = n;
  }
  return c;
}

StatusOr<DeleteComputeEnvironmentCommand> DecodeDeleteComputeEnvironment(const json& req) {
  return DeleteComputeEnvironmentCommand{Get<std::string>(req, "computeEnvironment", "")};
}

std::vector<EnvironmentRef> DecodeComputeOrder(const json& order) {
  std::vector<EnvironmentRef> out;
  if (!order.is_array()) return out;
  for (const auto& o : order)
    if (o.is_object()) out.push_back({Get<int>(o, "order", 0), Get<std::string>(o, "computeEnvironment", "")});
  return out;
}

namespace {

// containerOverrides.resourceRequirements / a definition's: VCPU, MEMORY (MiB) and GPU as whole numbers.
Status DecodeResources(const json& list, const std::string& where, SubmitJobCommand& c) {
  if (!list.is_array()) return Status::Ok();
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const std::string type = Get<std::string>(list[i], "type", "");
    const std::string value = Get<std::string>(list[i], "value", "");
    if (value.empty() || value.size() > 9 || value.find_first_not_of("0123456789") != std::string::npos)
      return InvalidArgument(at + ".value must be a whole number, not '" + value + "'");
    const int64_t n = std::stoll(value);
    if (type == "VCPU") {
      if (n < 1) return InvalidArgument(at + ": VCPU must be at least 1");
      c.vcpus = n;
    } else if (type == "MEMORY") {
      if (n < 4) return InvalidArgument(at + ": MEMORY must be at least 4 MiB");
      c.memory_mib = n;
    } else if (type == "GPU") {
      c.gpus = n;
    } else {
      return InvalidArgument(at + ".type must be VCPU, MEMORY or GPU");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<SubmitJobCommand> DecodeSubmitJob(const json& req) {
  SubmitJobCommand c;
  c.name = Get<std::string>(req, "jobName", "");
  if (!IsBatchJobName(c.name))
    return InvalidArgument("jobName must be 1 to 128 letters, digits, hyphens or underscores, starting with a letter or digit");
  c.queue = Get<std::string>(req, "jobQueue", "");
  c.job_definition = Get<std::string>(req, "jobDefinition", "");
  if (c.queue.empty()) return InvalidArgument("jobQueue is required");
  if (c.job_definition.empty()) return InvalidArgument("jobDefinition is required");
  for (const char* unsupported : {"nodeOverrides", "eksPropertiesOverride", "ecsPropertiesOverride", "consumableResourcePropertiesOverride"})
    if (Present(req, unsupported))
      return InvalidArgument(std::string(unsupported) + " is not supported by this server (container jobs on compute environments only)");
  if (Present(req, "arrayProperties")) {
    const int64_t size = Get<int64_t>(req["arrayProperties"], "size", 0);
    if (size < 2 || size > 10000) return InvalidArgument("arrayProperties.size must be from 2 to 10000");
    c.array_size = size;
  }
  const json deps = Get<json>(req, "dependsOn", json::array());
  if (deps.size() > 20) return InvalidArgument("dependsOn: at most 20 dependencies are allowed");
  for (size_t i = 0; i < deps.size(); ++i) {
    JobDependency d{Get<std::string>(deps[i], "jobId", ""), Get<std::string>(deps[i], "type", "")};
    const std::string where = "dependsOn[" + std::to_string(i) + "]";
    if (!d.type.empty() && d.type != "N_TO_N" && d.type != "SEQUENTIAL")
      return InvalidArgument(where + ".type must be N_TO_N or SEQUENTIAL");
    if (d.type == "SEQUENTIAL" && !d.job_id.empty())
      return InvalidArgument(where + ": a SEQUENTIAL dependency names no jobId (it orders the array's own children)");
    if (d.type != "SEQUENTIAL" && d.job_id.empty()) return InvalidArgument(where + ".jobId is required");
    c.depends_on.push_back(d);
  }
  const json parameters = Get<json>(req, "parameters", json::object());
  for (auto& [k, v] : parameters.items())
    if (v.is_string()) c.parameters[k] = v.get<std::string>();
  const json over = Get<json>(req, "containerOverrides", json::object());
  if (over.is_object()) {
    if (Present(over, "command")) c.command = Get<std::vector<std::string>>(over, "command", {});
    const json env = Get<json>(over, "environment", json::array());
    for (size_t i = 0; i < env.size(); ++i) {
      const std::string name = Get<std::string>(env[i], "name", "");
      const std::string where = "containerOverrides.environment[" + std::to_string(i) + "]";
      if (name.empty()) return InvalidArgument(where + ".name is required");
      if (const std::string rule = exec::ReservedEnvironmentRule(name); !rule.empty())
        return InvalidArgument(where + ".name: " + name + " is reserved: " + rule);
      c.environment[name] = Get<std::string>(env[i], "value", "");
    }
    if (Present(over, "vcpus")) {
      const int64_t n = Get<int64_t>(over, "vcpus", 0);
      if (n < 1) return InvalidArgument("containerOverrides.vcpus must be at least 1");
      c.vcpus = n;
    }
    if (Present(over, "memory")) {
      const int64_t n = Get<int64_t>(over, "memory", 0);
      if (n < 4) return InvalidArgument("containerOverrides.memory must be at least 4 MiB");
      c.memory_mib = n;
    }
    TY_RETURN_IF_ERROR(DecodeResources(Get<json>(over, "resourceRequirements", json()),
                                       "containerOverrides.resourceRequirements", c));
  }
  if (Present(req, "retryStrategy")) {
    const json& r = req["retryStrategy"];
    if (Present(r, "attempts")) {
      const int64_t n = Get<int64_t>(r, "attempts", 0);
      if (n < 1 || n > 10) return InvalidArgument("retryStrategy.attempts must be from 1 to 10");
      c.retry_attempts = static_cast<int>(n);
    }
    if (Present(r, "evaluateOnExit")) {
      const json rules = r["evaluateOnExit"];
      if (rules.size() > 5) return InvalidArgument("retryStrategy.evaluateOnExit: at most 5 conditions are allowed");
      std::vector<ContainerExitRule> out;
      for (size_t i = 0; i < rules.size(); ++i) {
        const std::string where = "retryStrategy.evaluateOnExit[" + std::to_string(i) + "]";
        ContainerExitRule rule;
        const std::string action = ToUpper(Get<std::string>(rules[i], "action", ""));
        if (action != "RETRY" && action != "EXIT") return InvalidArgument(where + ".action must be RETRY or EXIT");
        rule.retry = action == "RETRY";
        rule.on_exit_code = Get<std::string>(rules[i], "onExitCode", "");
        rule.on_reason = Get<std::string>(rules[i], "onReason", "");
        rule.on_status_reason = Get<std::string>(rules[i], "onStatusReason", "");
        if (rule.on_exit_code.size() > 512 || rule.on_exit_code.find_first_not_of("0123456789*") != std::string::npos)
          return InvalidArgument(where + ".onExitCode may hold only digits and a trailing '*'");
        out.push_back(rule);
      }
      c.evaluate_on_exit = std::move(out);
    }
  }
  if (Present(req, "timeout")) {
    const int64_t s = Get<int64_t>(req["timeout"], "attemptDurationSeconds", 0);
    if (s < 60) return InvalidArgument("timeout.attemptDurationSeconds must be at least 60");
    c.attempt_duration_seconds = s;
  }
  c.share_identifier = Get<std::string>(req, "shareIdentifier", "");
  if (Present(req, "schedulingPriorityOverride")) {
    const int64_t p = Get<int64_t>(req, "schedulingPriorityOverride", -1);
    if (p < 0 || p > 9999) return InvalidArgument("schedulingPriorityOverride must be from 0 to 9999");
    c.scheduling_priority = static_cast<int>(p);
  }
  if (Present(req, "propagateTags")) c.propagate_tags = Get<bool>(req, "propagateTags", false);
  auto tags = ReadTags(req);
  if (!tags.ok()) return tags.status();
  c.tags = *std::move(tags);
  return c;
}

StatusOr<StopJobCommand> DecodeStopJob(const json& req, bool terminate) {
  StopJobCommand c;
  c.job_id = Get<std::string>(req, "jobId", "");
  c.reason = Get<std::string>(req, "reason", "");
  c.terminate = terminate;
  if (c.job_id.empty()) return InvalidArgument("jobId is required");
  if (c.reason.empty()) return InvalidArgument("reason is required");
  return c;
}

}  // namespace ty::api
