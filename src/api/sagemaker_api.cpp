// SageMaker (json 1.1) training-job operations, and trainyard's log reader.
#include <algorithm>
#include <cmath>
#include <climits>
#include <fstream>
#include <map>
#include <set>
#include <string_view>

#include "api/decode.h"
#include "api/encode.h"
#include "api/operations.h"
#include "api/service_model.h"
#include "control/controller.h"
#include "core/strings.h"
#include "core/training_spec_json.h"

namespace ty::api {

using nlohmann::json;
using control::Controller;
using control::State;

namespace {

double Seconds(EpochMs ms) { return static_cast<double>(ms) / 1000.0; }

// Whole seconds, rounded up; at least 1 once anything ran.
int64_t WholeSeconds(double s) { return s <= 0 ? 0 : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(s - 1e-9))); }

double SavingsPercent(double billable, double training) {
  return training > 0 ? std::round((1.0 - billable / training) * 1000.0) / 10.0 : 0.0;
}

// WarmPoolStatus, or null when the job has none. While Available, the retained time runs on.
json EncodeWarmPool(const TrainingJob& tj, EpochMs now) {
  if (tj.warm_pool_status == WarmPoolStatus::kNone) return nullptr;
  int64_t retained = tj.warm_pool_status == WarmPoolStatus::kAvailable
                         ? std::max<EpochMs>(0, now - tj.warm_pool_available_since) / 1000
                         : tj.warm_pool_retained_seconds;
  json w = {{"Status", ToWire(tj.warm_pool_status)}, {"ResourceRetainedBillableTimeInSeconds", retained}};
  if (!tj.reused_by_job.empty()) w["ReusedByJob"] = tj.reused_by_job;
  return w;
}

// SageMaker's tag list: [{"Key", "Value"}], in key order.
json EncodeTagList(const Tags& tags) {
  json list = json::array();
  for (const auto& [k, v] : tags) list.push_back({{"Key", k}, {"Value", v}});
  return list;
}

// ListTags: a page of a resource's tags in key order; NextToken is the first key of the next page.
Response ListTags(Controller& c, const json& req) {
  auto tags = c.TagsOf("sagemaker", req.value("ResourceArn", ""));
  if (!tags.ok()) return tags.status();
  const size_t max = req.value("MaxResults", 50);  // the model's minimum is 50, and a resource has at most 50
  const std::string token = req.value("NextToken", "");
  json out = {{"Tags", json::array()}};
  for (auto it = tags->lower_bound(token); it != tags->end(); ++it) {
    if (out["Tags"].size() == max) {
      out["NextToken"] = it->first;
      break;
    }
    out["Tags"].push_back({{"Key", it->first}, {"Value", it->second}});
  }
  return out;
}

// for_event: an event's detail, which carries the job's Tags too (SageMaker's training job state-change events).
json EncodeDescribe(const TrainingJob& tj, EpochMs now, bool for_event = false) {
  const json req = EchoTrainingRequest(json::parse(tj.request_json, nullptr, false), tj.spec);
  json j;
  if (for_event && !tj.tags.empty()) j["Tags"] = EncodeTagList(tj.tags);
  j["TrainingJobName"] = tj.name;
  j["TrainingJobArn"] = tj.arn;
  if (!tj.tuning_job_arn.empty()) j["TuningJobArn"] = tj.tuning_job_arn;
  for (const char* k : {"HyperParameters", "AlgorithmSpecification", "RoleArn", "InputDataConfig", "OutputDataConfig",
                        "ResourceConfig", "VpcConfig", "StoppingCondition", "EnableNetworkIsolation",
                        "EnableInterContainerTrafficEncryption", "EnableManagedSpotTraining", "CheckpointConfig",
                        "DebugHookConfig", "ExperimentConfig", "TensorBoardOutputConfig", "Environment",
                        "RetryStrategy", "ProfilerConfig"})
    if (req.contains(k)) j[k] = req[k];
  if (!j.contains("StoppingCondition")) j["StoppingCondition"] = {{"MaxRuntimeInSeconds", 86400}};
  if (!j.contains("EnableNetworkIsolation")) j["EnableNetworkIsolation"] = false;
  if (!j.contains("EnableInterContainerTrafficEncryption")) j["EnableInterContainerTrafficEncryption"] = false;
  if (!j.contains("EnableManagedSpotTraining")) j["EnableManagedSpotTraining"] = false;
  j["TrainingJobStatus"] = ToWire(tj.status);
  j["SecondaryStatus"] = ToWire(tj.secondary_status);
  if (!tj.failure_reason.empty()) j["FailureReason"] = tj.failure_reason;
  j["ModelArtifacts"] = {{"S3ModelArtifacts", tj.model_artifacts}};
  j["CreationTime"] = Seconds(tj.creation_time);
  if (tj.training_start_time) j["TrainingStartTime"] = Seconds(tj.training_start_time);
  if (tj.training_end_time) j["TrainingEndTime"] = Seconds(tj.training_end_time);
  j["LastModifiedTime"] = Seconds(tj.last_modified_time);
  json transitions = json::array();
  for (const auto& t : tj.transitions) {
    json tr = {{"Status", ToWire(t.status)}, {"StartTime", Seconds(t.start)}, {"StatusMessage", t.message}};
    if (t.end) tr["EndTime"] = Seconds(t.end);
    transitions.push_back(tr);
  }
  j["SecondaryStatusTransitions"] = transitions;
  json metrics = json::array();
  for (const auto& m : tj.final_metrics)
    metrics.push_back({{"MetricName", m.name}, {"Value", m.value}, {"Timestamp", Seconds(m.timestamp)}});
  j["FinalMetricDataList"] = metrics;
  // Both count the time spent downloading, training and uploading, over every run; a spot run's
  // billable time is scaled by the spot price over the on-demand price (SageMaker's managed spot training), so
  // the savings are (1 - BillableTimeInSeconds / TrainingTimeInSeconds) × 100.
  if (tj.training_end_time) {
    j["TrainingTimeInSeconds"] = WholeSeconds(tj.RunSeconds(0, INT64_MAX, now));
    j["BillableTimeInSeconds"] = WholeSeconds(tj.BillableSeconds(now));
  }
  // trainyard extensions: spot interruptions, and what the current (or last) run holds.
  if (tj.spec.managed_spot || tj.interruptions > 0) {
    j["SpotInterruptions"] = tj.interruptions;
    j["InterruptionLossInstanceSeconds"] = static_cast<double>(tj.interruption_lost_instance_ms) / 1000.0;
  }
  if (tj.launched || !tj.capacity_ladder.empty()) {
    json in_use = {{"InstanceType", tj.instance_type}, {"InstanceCount", tj.instance_count},
                   {"Market", tj.on_spot ? "spot" : "on-demand"}};
    if (!tj.capacity_ladder.empty()) {
      in_use["CapacityLadder"] = tj.capacity_ladder;
      in_use["Rung"] = tj.rung + 1;
    }
    j["CapacityInUse"] = in_use;
  }
  if (json w = EncodeWarmPool(tj, now); !w.is_null()) j["WarmPoolStatus"] = w;
  // trainyard extensions: where the job's instances came from and why its pool ended.
  if (!tj.reused_from_job.empty()) j["WarmPoolReusedFromJob"] = tj.reused_from_job;
  if (!tj.warm_pool_end_reason.empty()) j["WarmPoolEndReason"] = tj.warm_pool_end_reason;
  return j;
}

json EncodeSummary(const TrainingJob& tj, EpochMs now) {
  json j = {{"TrainingJobName", tj.name},
            {"TrainingJobArn", tj.arn},
            {"CreationTime", Seconds(tj.creation_time)},
            {"LastModifiedTime", Seconds(tj.last_modified_time)},
            {"TrainingJobStatus", ToWire(tj.status)},
            {"SecondaryStatus", ToWire(tj.secondary_status)}};
  if (tj.training_end_time) j["TrainingEndTime"] = Seconds(tj.training_end_time);
  if (json w = EncodeWarmPool(tj, now); !w.is_null()) j["WarmPoolStatus"] = w;
  return j;
}

// Timestamps arrive as epoch seconds (numbers) from boto3; ISO strings are not sent by it.
EpochMs TimeArg(const json& req, const char* key, EpochMs fallback) {
  auto it = req.find(key);
  if (it == req.end() || !it->is_number()) return fallback;
  return static_cast<EpochMs>(std::llround(it->get<double>() * 1000.0));
}

Response ListTrainingJobs(Controller& c, const json& req) {
  EpochMs created_after = TimeArg(req, "CreationTimeAfter", INT64_MIN);
  EpochMs created_before = TimeArg(req, "CreationTimeBefore", INT64_MAX);
  EpochMs modified_after = TimeArg(req, "LastModifiedTimeAfter", INT64_MIN);
  EpochMs modified_before = TimeArg(req, "LastModifiedTimeBefore", INT64_MAX);
  std::string contains = ToLower(req.value("NameContains", ""));
  std::string status = req.value("StatusEquals", "");
  std::string sort_by = req.value("SortBy", "CreationTime");
  bool ascending = req.value("SortOrder", "Descending") == "Ascending";
  size_t max = req.value("MaxResults", 10);
  std::string token = req.value("NextToken", "");
  size_t offset = 0;
  if (!token.empty()) {
    if (token.find_first_not_of("0123456789") != std::string::npos) return InvalidArgument("NextToken is not valid");
    offset = std::stoull(token);
  }
  std::string warm = req.value("WarmPoolStatusEquals", "");
  const EpochMs now = c.Now();
  return c.Read([&](const State& s) -> Response {
    std::vector<const TrainingJob*> jobs;
    for (const auto& [name, tj] : s.training_jobs) {
      if (tj.creation_time <= created_after || tj.creation_time >= created_before) continue;
      if (tj.last_modified_time <= modified_after || tj.last_modified_time >= modified_before) continue;
      if (!contains.empty() && ToLower(name).find(contains) == std::string::npos) continue;
      if (!status.empty() && ToWire(tj.status) != status) continue;
      if (!warm.empty() && ToWire(tj.warm_pool_status) != warm) continue;
      jobs.push_back(&tj);
    }
    // Total order: the sort key, then creation sequence.
    std::sort(jobs.begin(), jobs.end(), [&](const TrainingJob* a, const TrainingJob* b) {
      auto key = [&](const TrainingJob* t) {
        if (sort_by == "Name") return std::make_tuple(t->name, int64_t{0}, t->seq);
        if (sort_by == "Status") return std::make_tuple(std::string(ToWire(t->status)), int64_t{0}, t->seq);
        return std::make_tuple(std::string(), t->creation_time, t->seq);
      };
      return ascending ? key(a) < key(b) : key(b) < key(a);
    });
    json list = json::array();
    for (size_t i = offset; i < jobs.size() && list.size() < max; ++i) list.push_back(EncodeSummary(*jobs[i], now));
    json out = {{"TrainingJobSummaries", list}};
    if (offset + max < jobs.size()) out["NextToken"] = std::to_string(offset + max);
    return out;
  });
}

}  // namespace

json EncodeTrainingJobEventDetail(const TrainingJob& tj, EpochMs now) { return EncodeDescribe(tj, now, true); }

namespace {

Response CreateTrainingJob(const OperationCall& x) {
  auto cmd = DecodeCreateTrainingJob(x.request, {x.controller.config(), x.controller.sandbox()});
  if (!cmd.ok()) return cmd.status();
  cmd->owner = x.caller;
  auto tj = x.controller.CreateTrainingJob(*cmd);
  if (!tj.ok()) return tj.status();
  return json{{"TrainingJobArn", tj->arn}};
}

// The training job the request starts: the request itself.
std::vector<TrainingDefinition> CreateTrainingJobDefinitions(const json& request, const json&) {
  auto name = request.find("TrainingJobName");
  return {{&request, name != request.end() && name->is_string() ? name->get<std::string>() : "", ""}};
}

Response DescribeTrainingJob(Controller& c, const json& req) {
  std::string name = req.value("TrainingJobName", "");
  const EpochMs now = c.Now();
  return c.Read([&](const State& s) -> Response {
    const TrainingJob* tj = s.FindTrainingJob(name);
    if (!tj) return NotFound("Requested resource not found: training job " + name);
    return EncodeDescribe(*tj, now);
  });
}

Response UpdateTrainingJob(Controller& c, const json& req) {
  auto cmd = DecodeUpdateTrainingJob(req);
  if (!cmd.ok()) return cmd.status();
  auto tj = c.UpdateTrainingJob(*cmd);
  if (!tj.ok()) return tj.status();
  return json{{"TrainingJobArn", tj->arn}};
}

Response AddTags(Controller& c, const json& req) {
  auto cmd = DecodeAddTags(req);
  if (!cmd.ok()) return cmd.status();
  TY_RETURN_IF_ERROR(c.TagResource(*cmd));
  return json{{"Tags", EncodeTagList(cmd->tags)}};
}

Response DeleteTags(Controller& c, const json& req) {
  auto cmd = DecodeDeleteTags(req);
  if (!cmd.ok()) return cmd.status();
  TY_RETURN_IF_ERROR(c.UntagResource(*cmd));
  return json::object();
}

Response StopTrainingJob(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(c.StopTrainingJob(req.value("TrainingJobName", "")));
  return json::object();
}

OperationTable SageMakerTable() {
  using RK = ResourceKind;
  const OperationAccess training_job{.resource = RK::kTrainingJob, .field = "TrainingJobName"};
  const OperationAccess tagged{.resource = RK::kTaggedResource, .field = "ResourceArn"};
  const std::vector<AuditMember> training_job_audit = {{"TrainingJobName", "AWS::SageMaker::TrainingJob"}};
  const std::vector<AuditMember> tagged_audit = {{"ResourceArn", "ARN"}};
  std::vector<Operation> rows = {
      {.name = "CreateTrainingJob", .handle = CreateTrainingJob,
       .access = {.resource = RK::kTrainingJob, .field = "TrainingJobName",
                  // Team policies may bound a job's size.
                  .request_keys = {{"trainyard:InstanceCount", "ResourceConfig.InstanceCount"}},
                  .training_definitions = CreateTrainingJobDefinitions},
       .audit = training_job_audit},
      {.name = "DescribeTrainingJob", .handle = Plain<DescribeTrainingJob>, .access = training_job,
       .audit = training_job_audit},
      {.name = "ListTrainingJobs", .handle = Plain<ListTrainingJobs>,
       .access = {.list_member = "TrainingJobSummaries", .item_action = "sagemaker:DescribeTrainingJob",
                  .item = RK::kTrainingJob, .item_name = "TrainingJobName", .item_arn = "TrainingJobArn"}},
      {.name = "UpdateTrainingJob", .handle = Plain<UpdateTrainingJob>, .access = training_job,
       .audit = training_job_audit},
      {.name = "StopTrainingJob", .handle = Plain<StopTrainingJob>, .access = training_job,
       .audit = training_job_audit},
      {.name = "AddTags", .handle = Plain<AddTags>, .access = tagged, .audit = tagged_audit},
      {.name = "DeleteTags", .handle = Plain<DeleteTags>, .access = tagged, .audit = tagged_audit},
      {.name = "ListTags", .handle = Plain<ListTags>, .access = tagged, .audit = tagged_audit},
  };
  for (Operation& row : TuningOperationRows()) rows.push_back(std::move(row));
  return OperationTable(Api::kSageMaker, "sagemaker", &ServiceModel::SageMaker(), std::move(rows));
}

}  // namespace

const OperationTable& SageMakerOperations() {
  static const OperationTable kTable = SageMakerTable();
  return kTable;
}

Response HandleAdvanceClock(Controller& c, const json& req) {
  if (!req.contains("seconds") || !req["seconds"].is_number_integer() || req["seconds"].get<int64_t>() <= 0)
    return InvalidArgument("seconds is required and must be a positive whole number of seconds");
  auto now = c.AdvanceClock(req["seconds"].get<int64_t>());
  if (!now.ok()) return now.status();
  return json{{"now", Seconds(*now)}};
}

Response HandleInterrupt(Controller& c, const json& req) {
  if (!req.contains("TrainingJobName") || !req["TrainingJobName"].is_string())
    return InvalidArgument("TrainingJobName is required and must be a string");
  Status st = c.InterruptTrainingJob(req["TrainingJobName"].get<std::string>());
  if (!st.ok()) return st;
  return json::object();
}

Response HandleDescribeCapacity(Controller& c, const json& req) {
  if (!req.is_object()) return InvalidArgument("The request body must be a JSON object");
  if (!req.empty()) return InvalidArgument("Unknown member " + req.begin().key().substr(0, 64) + " (DescribeCapacity takes none)");
  const Config& config = c.config();
  return c.Read([&](const State& s) -> Response {
    json rows = json::array();
    for (const InstanceTypeSpec& t : config.instance_types)
      for (bool spot : {false, true}) {
        if (spot && t.spot_count == 0) continue;
        const std::string key = CapacityKey(t.name, spot);
        const int64_t offered = control::HostCapacity(config, s, key);
        auto in_use = s.host_in_use.find(key);
        auto warm = spot ? s.warm_pool_held.end() : s.warm_pool_held.find(t.name);
        const int64_t used = in_use == s.host_in_use.end() ? 0 : in_use->second;
        const int64_t held = warm == s.warm_pool_held.end() ? 0 : warm->second;
        json row = {{"CapacityKey", key},        {"InstanceType", t.name}, {"ManagedSpot", spot},
                    {"Configured", t.Capacity(spot)}, {"Offered", offered},  {"InUse", used},
                    {"WarmPoolHeld", held},       {"Free", std::max<int64_t>(0, offered - used - held)}};
        if (s.cluster) {
          auto it = s.cluster->instances.find(key);
          row["Reported"] = it == s.cluster->instances.end() ? 0 : it->second;
        }
        if (!t.slurm_partition.empty()) row["SlurmPartition"] = t.slurm_partition;
        if (!t.slurm_constraint.empty()) row["SlurmConstraint"] = t.slurm_constraint;
        if (t.slurm_whole_node) row["SlurmWholeNode"] = true;
        rows.push_back(std::move(row));
      }
    json out = {{"Source", s.cluster ? "executor" : "configured"}, {"Capacity", std::move(rows)}};
    if (s.cluster) {
      out["ReportedAt"] = static_cast<double>(s.cluster->at) / 1000.0;
      if (!s.cluster->problem.empty()) out["Problem"] = s.cluster->problem;
      json nodes = json::array();
      for (const exec::NodeReport& n : s.cluster->nodes)
        nodes.push_back({{"NodeName", n.name},
                         {"State", n.state},
                         {"Partitions", n.partitions},
                         {"Features", n.features},
                         {"Usable", n.usable},
                         {"Cpus", n.cpus},
                         {"CpusAllocated", n.cpus_alloc},
                         {"Gpus", n.gpus},
                         {"GpusAllocated", n.gpus_alloc},
                         {"MemoryMiB", n.memory_mib},
                         {"MemoryAllocatedMiB", n.memory_alloc_mib},
                         {"Why", n.why}});
      out["Nodes"] = std::move(nodes);
    }
    return out;
  });
}

Response HandleCostReport(Controller& c, const json& req) {
  if (req.contains("JobQueue") && !req["JobQueue"].is_string()) return InvalidArgument("JobQueue must be a string");
  const std::string queue = req.value("JobQueue", "");
  const EpochMs now = c.Now();
  return c.Read([&](const State& s) -> Response {
    struct Sum {
      int64_t jobs = 0, interruptions = 0;
      double instance_hours = 0, cost = 0, on_demand = 0, lost_hours = 0;
    };
    std::map<std::pair<std::string, std::string>, Sum> shares;
    Sum total;
    json jobs = json::array();
    for (const auto& [name, tj] : s.training_jobs) {
      if (!tj.training_start_time) continue;  // never ran: nothing to pay for
      std::string q, share, service_job;
      if (const control::ServiceJobState* js = tj.service_job_id.empty() ? nullptr : s.FindJob(tj.service_job_id)) {
        q = js->job.queue;
        share = control::ShareOf(js->job);
        service_job = js->job.id;
      }
      if (!queue.empty() && q != queue) continue;
      const double training = tj.RunSeconds(0, INT64_MAX, now), billable = tj.BillableSeconds(now);
      const double cost = tj.CostUsd(now), on_demand = tj.OnDemandCostUsd(now);
      json row = {{"TrainingJobName", tj.name},
                  {"TrainingJobStatus", ToWire(tj.status)},
                  {"JobQueue", q},
                  {"Share", share},
                  {"InstanceType", tj.instance_type},
                  {"InstanceCount", tj.instance_count},
                  {"ManagedSpot", tj.spec.managed_spot},
                  {"SpotInterruptions", tj.interruptions},
                  {"InterruptionLossInstanceSeconds", static_cast<double>(tj.interruption_lost_instance_ms) / 1000.0},
                  {"TrainingTimeInSeconds", WholeSeconds(training)},
                  {"BillableTimeInSeconds", WholeSeconds(billable)},
                  {"CostUsd", cost},
                  {"OnDemandCostUsd", on_demand},
                  {"SavingsPercent", SavingsPercent(billable, training)}};
      if (!service_job.empty()) row["ServiceJobId"] = service_job;
      jobs.push_back(row);
      for (Sum* sum : {&shares[{q, share}], &total}) {
        ++sum->jobs;
        sum->instance_hours += training * static_cast<double>(tj.instance_count) / 3600.0;
        sum->cost += cost;
        sum->on_demand += on_demand;
        sum->interruptions += tj.interruptions;
        sum->lost_hours += static_cast<double>(tj.interruption_lost_instance_ms) / 3'600'000.0;
      }
    }
    auto encode = [](const Sum& sum) {
      return json{{"Jobs", sum.jobs},
                  {"InstanceHours", sum.instance_hours},
                  {"CostUsd", sum.cost},
                  {"OnDemandCostUsd", sum.on_demand},
                  {"SpotInterruptions", sum.interruptions},
                  {"InterruptionLossInstanceHours", sum.lost_hours},
                  {"SavingsPercent", sum.on_demand > 0 ? std::round((1.0 - sum.cost / sum.on_demand) * 1000.0) / 10.0 : 0.0}};
    };
    json by_share = json::array();
    for (const auto& [key, sum] : shares) {
      json row = encode(sum);
      row["JobQueue"] = key.first;
      row["Share"] = key.second;
      by_share.push_back(row);
    }
    return json{{"Jobs", jobs}, {"Shares", by_share}, {"Total", encode(total)}};
  });
}

Response HandleMetricSeries(Controller& c, const json& req) {
  if (!req.contains("TrainingJobName") || !req["TrainingJobName"].is_string())
    return InvalidArgument("TrainingJobName is required and must be a string");
  if (req.contains("MetricName") && !req["MetricName"].is_string()) return InvalidArgument("MetricName must be a string");
  for (const char* k : {"StartTime", "EndTime"})
    if (req.contains(k) && !req[k].is_number()) return InvalidArgument(std::string(k) + " must be a number of epoch seconds");
  // Pages of at most MaxResults points (default and most: control::kMaxMetricPointsPerMetric),
  // so no read builds a whole series (docs/metrics.md).
  constexpr int64_t kMaxPage = static_cast<int64_t>(control::kMaxMetricPointsPerMetric);
  int64_t max_results = kMaxPage;
  if (req.contains("MaxResults")) {
    if (!req["MaxResults"].is_number_integer() || req["MaxResults"].get<int64_t>() < 1 || req["MaxResults"].get<int64_t>() > kMaxPage)
      return InvalidArgument("MaxResults must be an integer between 1 and " + std::to_string(kMaxPage));
    max_results = req["MaxResults"].get<int64_t>();
  }
  control::MetricCursor cursor;
  if (req.contains("NextToken")) {
    auto parsed = req["NextToken"].is_string() ? control::ParseMetricCursorToken(req["NextToken"].get<std::string>())
                                               : std::nullopt;
    if (!parsed) return InvalidArgument("NextToken is not a token this server returned");
    cursor = *parsed;
  }
  const std::string name = req["TrainingJobName"], metric = req.value("MetricName", "");
  const EpochMs from = TimeArg(req, "StartTime", INT64_MIN), to = TimeArg(req, "EndTime", INT64_MAX);
  auto page = c.Read([&](const State& s) -> StatusOr<std::pair<std::string, control::MetricPage>> {
    const TrainingJob* tj = s.FindTrainingJob(name);
    if (!tj) return NotFound("Requested resource not found: training job " + name);
    // Every defined metric is listed, in definition order, even before it has a value.
    std::vector<std::string> order;
    for (const auto& d : tj->spec.metric_definitions) {
      const std::string& n = d.name;
      if ((metric.empty() || n == metric) && std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
    }
    if (!metric.empty() && order.empty())
      return NotFound("Requested resource not found: training job " + tj->name + " defines no metric " + metric);
    if (cursor.metric > order.size()) return InvalidArgument("NextToken is not a token this server returned");
    auto it = s.metric_series.find(tj->name);
    return std::make_pair(tj->name, control::PageMetricSeries(it == s.metric_series.end() ? nullptr : &it->second, order,
                                                              from, to, cursor, static_cast<size_t>(max_results)));
  });
  if (!page.ok()) return page.status();
  json series = json::array();
  for (const auto& sr : page->second.series) {
    json points = json::array();
    for (const auto& p : sr.points) points.push_back({{"Timestamp", Seconds(p.timestamp)}, {"Value", p.value}});
    series.push_back({{"MetricName", sr.name}, {"Points", std::move(points)}});
  }
  json out = {{"TrainingJobName", page->first}, {"Series", std::move(series)}};
  if (page->second.next) out["NextToken"] = control::MetricCursorToken(*page->second.next);
  return out;
}

Response HandleSystemMetrics(Controller& c, const json& req) {
  if (!req.contains("TrainingJobName") || !req["TrainingJobName"].is_string())
    return InvalidArgument("TrainingJobName is required and must be a string");
  for (const char* k : {"Host", "MetricName"})
    if (req.contains(k) && !req[k].is_string()) return InvalidArgument(std::string(k) + " must be a string");
  // Epoch seconds; the bound keeps the conversion to milliseconds exact and in range.
  for (const char* k : {"StartTime", "EndTime"})
    if (req.contains(k) && (!req[k].is_number() || !(req[k].get<double>() >= 0 && req[k].get<double>() <= 1e12)))
      return InvalidArgument(std::string(k) + " must be a number of epoch seconds between 0 and 1e12");
  const std::string name = req["TrainingJobName"], host = req.value("Host", ""), metric = req.value("MetricName", "");
  const EpochMs from = TimeArg(req, "StartTime", INT64_MIN), to = TimeArg(req, "EndTime", INT64_MAX);
  if (from > to) return InvalidArgument("StartTime must not be after EndTime");
  int metric_index = -1;
  if (!metric.empty()) {
    std::string names;
    for (size_t k = 0; k < kSystemMetricNames.size(); ++k) {
      if (metric == kSystemMetricNames[k]) metric_index = static_cast<int>(k);
      names += (k ? ", " : "") + std::string(kSystemMetricNames[k]);
    }
    if (metric_index < 0) return InvalidArgument("MetricName must be one of " + names + ", not " + metric);
  }
  return c.Read([&](const State& s) -> Response {
    const TrainingJob* tj = s.FindTrainingJob(name);
    if (!tj) return NotFound("Requested resource not found: training job " + name);
    // Hosts are "<training-job-name>/algo-<n>" (SageMaker's per-host training metrics), listed in instance order.
    int only = 0;
    if (!host.empty()) {
      const std::string prefix = tj->name + "/algo-";
      const std::string n = host.rfind(prefix, 0) == 0 ? host.substr(prefix.size()) : "";
      if (!n.empty() && n.size() <= 6 && n.find_first_not_of("0123456789") == std::string::npos) only = std::stoi(n);
      if (only < 1 || only > tj->instance_count)
        return InvalidArgument("Host must be one of " + prefix + "1 .. " + prefix + std::to_string(tj->instance_count) +
                               ", not " + host);
    }
    const SystemSeries* all = nullptr;
    if (auto it = s.system_series.find(tj->name); it != s.system_series.end()) all = &it->second;
    json series = json::array();
    for (int n = 1; n <= tj->instance_count; ++n) {
      if (only && n != only) continue;
      const std::string algo = "algo-" + std::to_string(n);
      const std::vector<SystemSample>* samples = nullptr;
      if (all)
        if (auto h = all->find(algo); h != all->end()) samples = &h->second;
      if (!samples) continue;
      // A metric is listed for a host once it was measured there at all (GPU metrics only with
      // nvidia-smi), with the points the time window holds.
      for (size_t k = 0; k < kSystemMetricNames.size(); ++k) {
        if (metric_index >= 0 && static_cast<int>(k) != metric_index) continue;
        bool measured = false;
        json points = json::array();
        for (const auto& smp : *samples) {
          if (!smp.values[k]) continue;
          measured = true;
          if (smp.timestamp >= from && smp.timestamp <= to)
            points.push_back({{"Timestamp", Seconds(smp.timestamp)}, {"Value", *smp.values[k]}});
        }
        if (!measured) continue;
        series.push_back({{"Host", tj->name + "/" + algo},
                          {"MetricName", kSystemMetricNames[k]},
                          {"Unit", "Percent"},
                          {"Points", std::move(points)}});
      }
    }
    return json{{"TrainingJobName", tj->name}, {"Namespace", "/aws/sagemaker/TrainingJobs"}, {"Series", series}};
  });
}

Response HandleGetLogs(Controller& c, const json& req) {
  if (!req.contains("trainingJobName") || !req["trainingJobName"].is_string())
    return InvalidArgument("trainingJobName is required and must be a string");
  std::string name = req["trainingJobName"];
  int instance = req.value("instance", 1);
  int64_t offset = req.value("startOffset", int64_t{0});
  int64_t limit = std::clamp<int64_t>(req.value("limitBytes", int64_t{1 << 20}), 1, 8 << 20);
  auto found = c.Read([&](const State& s) -> StatusOr<std::pair<int64_t, bool>> {
    const TrainingJob* tj = s.FindTrainingJob(name);
    if (!tj) return NotFound("Requested resource not found: training job " + name);
    name = tj->name;
    bool done = !IsLive(tj->status);
    return std::make_pair(tj->instance_count, done);
  });
  if (!found.ok()) return found.status();
  if (instance < 1 || instance > found->first)
    return InvalidArgument("instance must be between 1 and " + std::to_string(found->first));
  json events = json::array();
  // Whole lines only: a line being written is returned once it ends.
  const auto chunk = c.ReadLog(name, instance, offset, limit);
  for (size_t begin = 0; begin < chunk.bytes.size();) {
    size_t end = chunk.bytes.find('\n', begin);
    std::string_view line(chunk.bytes.data() + begin, end - begin);
    begin = end + 1;
    auto sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    events.push_back({{"timestamp", std::strtoll(std::string(line.substr(0, sp)).c_str(), nullptr, 10)},
                      {"message", std::string(line.substr(sp + 1))}});
  }
  return json{{"events", events}, {"nextOffset", chunk.next_offset}, {"complete", found->second}};
}

}  // namespace ty::api
