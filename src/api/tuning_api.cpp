// SageMaker's hyperparameter tuning operations (json 1.1; docs/tuning.md): decode, call the
// controller, encode. Counters and the best trial come from control/tuning.h's reads of the
// trials as they are at the read, so every reply is consistent with the trials it lists.
#include <algorithm>
#include <cmath>
#include <random>

#include "api/decode.h"
#include "api/encode.h"
#include "api/operations.h"
#include "control/controller.h"
#include "core/strings.h"

namespace ty::api {

using nlohmann::json;
using control::Controller;
using control::State;
using control::TuningJob;

namespace {

double Seconds(EpochMs ms) { return static_cast<double>(ms) / 1000.0; }

const char* GoalName(tune::Goal g) { return g == tune::Goal::kMinimize ? "Minimize" : "Maximize"; }

json EncodeCounters(const control::TuningCounters& c) {
  return {{"TrainingJobStatusCounters",
           {{"Completed", c.completed},
            {"InProgress", c.in_progress},
            {"RetryableError", c.retryable_error},
            {"NonRetryableError", c.non_retryable_error},
            {"Stopped", c.stopped}}},
          {"ObjectiveStatusCounters",
           {{"Succeeded", c.objective_succeeded}, {"Pending", c.objective_pending}, {"Failed", c.objective_failed}}}};
}

// HyperParameterTrainingJobSummary of one trial.
json EncodeTrial(const State& s, const TuningJob& tuning, const control::TuningTrial& rec, const tune::Trial& trial) {
  json hps = json::object();
  for (const auto& [k, v] : rec.assignment) hps[k] = v;
  if (rec.resource > 0 && !tuning.resource_hyperparameter.empty()) hps[tuning.resource_hyperparameter] = std::to_string(rec.resource);
  const std::string current = control::CurrentTrainingJob(rec, s);  // a queued trial's latest attempt
  json j = {{"TrainingJobName", current},
            {"TuningJobName", tuning.name},
            {"TunedHyperParameters", hps},
            {"ObjectiveStatus", control::ObjectiveStatusOf(trial)}};
  if (const TrainingJob* tj = s.FindTrainingJob(current)) {
    j["TrainingJobArn"] = tj->arn;
    j["CreationTime"] = Seconds(tj->creation_time);
    j["TrainingJobStatus"] = ToWire(tj->status);
    if (tj->training_start_time) j["TrainingStartTime"] = Seconds(tj->training_start_time);
    if (tj->training_end_time) j["TrainingEndTime"] = Seconds(tj->training_end_time);
    if (!tj->failure_reason.empty()) j["FailureReason"] = tj->failure_reason;
  } else if (trial.state == tune::Trial::State::kRunning) {
    j["TrainingJobStatus"] = "InProgress";  // a queued trial waiting for its first attempt
  }
  if (std::string(control::ObjectiveStatusOf(trial)) == "Succeeded")
    j["FinalHyperParameterTuningJobObjectiveMetric"] = {
        {"Type", GoalName(tuning.search.goal)}, {"MetricName", tuning.objective_metric}, {"Value", *tune::ObjectiveOf(trial)}};
  return j;
}

json EncodeDescribe(const State& s, const TuningJob& tuning, EpochMs now, bool for_event = false) {
  const json req = json::parse(tuning.request_json, nullptr, false);
  const std::vector<tune::Trial> trials = control::TrialsOf(tuning, s);
  json j;
  if (for_event && !tuning.tags.empty()) {
    j["Tags"] = json::array();
    for (const auto& [k, v] : tuning.tags) j["Tags"].push_back({{"Key", k}, {"Value", v}});
  }
  j["HyperParameterTuningJobName"] = tuning.name;
  j["HyperParameterTuningJobArn"] = tuning.arn;
  json config = req.value("HyperParameterTuningJobConfig", json::object());
  config["RandomSeed"] = tuning.search.seed;  // the one the search runs with, drawn when the request gave none
  j["HyperParameterTuningJobConfig"] = config;
  if (req.contains("TrainingJobDefinition")) j["TrainingJobDefinition"] = req["TrainingJobDefinition"];
  if (req.contains("WarmStartConfig")) j["WarmStartConfig"] = req["WarmStartConfig"];
  j["HyperParameterTuningJobStatus"] = control::ToWire(tuning.status);
  j["CreationTime"] = Seconds(tuning.creation_time);
  if (tuning.end_time) j["HyperParameterTuningEndTime"] = Seconds(tuning.end_time);
  j["LastModifiedTime"] = Seconds(tuning.last_modified_time);
  j.update(EncodeCounters(control::CountTrials(trials)));
  const std::optional<int> best = control::BestTrialOf(trials, tuning.search.goal);
  if (best) j["BestTrainingJob"] = EncodeTrial(s, tuning, tuning.trials[static_cast<size_t>(*best)], trials[static_cast<size_t>(*best)]);
  // With a warm start: the best over this job's trials and its parents'.
  if (!tuning.warm_start_parents.empty()) {
    std::optional<std::pair<double, json>> overall;
    if (best) overall.emplace(*tune::ObjectiveOf(trials[static_cast<size_t>(*best)]), j["BestTrainingJob"]);
    for (const std::string& name : tuning.warm_start_parents) {
      const TuningJob* parent = s.FindTuningJob(name);
      if (!parent) continue;
      const auto parent_trials = control::TrialsOf(*parent, s);
      const auto pb = control::BestTrialOf(parent_trials, tuning.search.goal);
      if (!pb) continue;
      const double v = *tune::ObjectiveOf(parent_trials[static_cast<size_t>(*pb)]);
      const bool better = overall && (tuning.search.goal == tune::Goal::kMaximize ? v > overall->first : v < overall->first);
      if (!overall || better)
        overall.emplace(v, EncodeTrial(s, *parent, parent->trials[static_cast<size_t>(*pb)], parent_trials[static_cast<size_t>(*pb)]));
    }
    if (overall) j["OverallBestTrainingJob"] = overall->second;
  }
  // Trials with an objective since the best one: the ones that did not improve on it.
  int not_improving = 0;
  if (best)
    for (const tune::Trial& t : trials)
      if (t.index > *best && std::string(control::ObjectiveStatusOf(t)) == "Succeeded") ++not_improving;
  json details = {{"NumberOfTrainingJobsObjectiveNotImproving", not_improving}};
  if (tuning.converged_time) details["ConvergenceDetectedTime"] = Seconds(tuning.converged_time);
  j["TuningJobCompletionDetails"] = details;
  const EpochMs until = tuning.end_time ? tuning.end_time : now;
  j["ConsumedResources"] = {{"RuntimeInSeconds", std::max<int64_t>(0, (until - tuning.creation_time) / 1000)}};
  if (!tuning.failure_reason.empty()) j["FailureReason"] = tuning.failure_reason;
  return j;
}

EpochMs TimeArg(const json& req, const char* key, EpochMs fallback) {
  auto it = req.find(key);
  if (it == req.end() || !it->is_number()) return fallback;
  return static_cast<EpochMs>(std::llround(it->get<double>() * 1000.0));
}

StatusOr<size_t> Offset(const json& req) {
  const std::string token = req.value("NextToken", "");
  if (token.empty()) return size_t{0};
  if (token.size() > 12 || token.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgument("NextToken is not a token this server returned");
  return static_cast<size_t>(std::stoull(token));
}

// What both List calls take: StatusEquals, SortBy, SortOrder, MaxResults and NextToken (an offset).
struct ListArgs {
  std::string status;
  std::string sort_by;
  bool ascending = false;
  size_t max = 10;
  size_t offset = 0;
};

StatusOr<ListArgs> ListArgsOf(const json& req) {
  ListArgs a;
  a.status = req.value("StatusEquals", "");
  a.sort_by = req.value("SortBy", "CreationTime");
  a.ascending = req.value("SortOrder", "Descending") == "Ascending";
  a.max = req.value("MaxResults", 10);
  auto offset = Offset(req);
  if (!offset.ok()) return offset.status();
  a.offset = *offset;
  return a;
}

Response ListTuningJobs(Controller& c, const json& req) {
  const EpochMs created_after = TimeArg(req, "CreationTimeAfter", INT64_MIN);
  const EpochMs created_before = TimeArg(req, "CreationTimeBefore", INT64_MAX);
  const EpochMs modified_after = TimeArg(req, "LastModifiedTimeAfter", INT64_MIN);
  const EpochMs modified_before = TimeArg(req, "LastModifiedTimeBefore", INT64_MAX);
  const std::string contains = ToLower(req.value("NameContains", ""));
  auto args = ListArgsOf(req);
  if (!args.ok()) return args.status();
  return c.Read([&](const State& s) -> Response {
    std::vector<const TuningJob*> jobs;
    for (const auto& [key, t] : s.tuning_jobs) {
      if (t.creation_time <= created_after || t.creation_time >= created_before) continue;
      if (t.last_modified_time <= modified_after || t.last_modified_time >= modified_before) continue;
      if (!contains.empty() && key.find(contains) == std::string::npos) continue;
      if (!args->status.empty() && control::ToWire(t.status) != args->status) continue;
      jobs.push_back(&t);
    }
    std::sort(jobs.begin(), jobs.end(), [&](const TuningJob* a, const TuningJob* b) {
      auto key = [&](const TuningJob* t) {
        if (args->sort_by == "Name") return std::make_tuple(t->name, int64_t{0}, t->seq);
        if (args->sort_by == "Status") return std::make_tuple(std::string(control::ToWire(t->status)), int64_t{0}, t->seq);
        return std::make_tuple(std::string(), t->creation_time, t->seq);
      };
      return args->ascending ? key(a) < key(b) : key(b) < key(a);
    });
    json list = json::array();
    for (size_t i = args->offset; i < jobs.size() && list.size() < args->max; ++i) {
      const TuningJob& t = *jobs[i];
      const json req_config = json::parse(t.request_json, nullptr, false).value("HyperParameterTuningJobConfig", json::object());
      json row = {{"HyperParameterTuningJobName", t.name},
                  {"HyperParameterTuningJobArn", t.arn},
                  {"HyperParameterTuningJobStatus", control::ToWire(t.status)},
                  {"Strategy", req_config.value("Strategy", "Bayesian")},
                  {"CreationTime", Seconds(t.creation_time)},
                  {"LastModifiedTime", Seconds(t.last_modified_time)},
                  {"ResourceLimits", req_config.value("ResourceLimits", json::object())}};
      if (t.end_time) row["HyperParameterTuningEndTime"] = Seconds(t.end_time);
      row.update(EncodeCounters(control::CountTrials(control::TrialsOf(t, s))));
      list.push_back(std::move(row));
    }
    json out = {{"HyperParameterTuningJobSummaries", list}};
    if (args->offset + args->max < jobs.size()) out["NextToken"] = std::to_string(args->offset + args->max);
    return out;
  });
}

Response ListTrials(Controller& c, const json& req) {
  const std::string name = req.value("HyperParameterTuningJobName", "");
  auto args = ListArgsOf(req);
  if (!args.ok()) return args.status();
  return c.Read([&](const State& s) -> Response {
    const TuningJob* tuning = s.FindTuningJob(name);
    if (!tuning) return NotFound("Requested resource not found: hyperparameter tuning job " + name);
    const std::vector<tune::Trial> trials = control::TrialsOf(*tuning, s);
    std::vector<json> rows;
    for (size_t i = 0; i < trials.size(); ++i) {
      json row = EncodeTrial(s, *tuning, tuning->trials[i], trials[i]);
      if (!args->status.empty() && row.value("TrainingJobStatus", "") != args->status) continue;
      row["_index"] = i;
      rows.push_back(std::move(row));
    }
    // Total orders; trials without an objective sort after those with one (SageMaker lists them last).
    std::stable_sort(rows.begin(), rows.end(), [&](const json& a, const json& b) {
      const size_t ia = a["_index"], ib = b["_index"];
      if (args->sort_by == "FinalObjectiveMetricValue") {
        const bool ha = a.contains("FinalHyperParameterTuningJobObjectiveMetric");
        const bool hb = b.contains("FinalHyperParameterTuningJobObjectiveMetric");
        if (ha != hb) return ha;
        if (!ha) return ia < ib;
        const double va = a["FinalHyperParameterTuningJobObjectiveMetric"]["Value"];
        const double vb = b["FinalHyperParameterTuningJobObjectiveMetric"]["Value"];
        if (va != vb) return args->ascending ? va < vb : va > vb;
        return ia < ib;
      }
      auto key = [&](const json& r, size_t i) {
        if (args->sort_by == "Name") return std::make_pair(r.value("TrainingJobName", ""), i);
        if (args->sort_by == "Status") return std::make_pair(r.value("TrainingJobStatus", ""), i);
        return std::make_pair(std::string(), i);  // creation order is suggestion order
      };
      return args->ascending ? key(a, ia) < key(b, ib) : key(b, ib) < key(a, ia);
    });
    json list = json::array();
    for (size_t i = args->offset; i < rows.size() && list.size() < args->max; ++i) {
      rows[i].erase("_index");
      list.push_back(std::move(rows[i]));
    }
    json out = {{"TrainingJobSummaries", list}};
    if (args->offset + args->max < rows.size()) out["NextToken"] = std::to_string(args->offset + args->max);
    return out;
  });
}

}  // namespace

json EncodeTuningJobEventDetail(const State& s, const TuningJob& tuning, EpochMs now) {
  return EncodeDescribe(s, tuning, now, true);
}

namespace {

Response CreateTuningJob(const OperationCall& x) {
  // A seed for requests without RandomSeed, drawn here and stored with the job: its
  // suggestions are then as reproducible after a restart as with one.
  std::random_device rd;
  const uint64_t seed = (static_cast<uint64_t>(rd()) << 31 ^ rd()) & 0x7fffffff;
  auto cmd = DecodeCreateHyperParameterTuningJob(x.request, {x.controller.config(), x.controller.sandbox()}, seed);
  if (!cmd.ok()) return cmd.status();
  cmd->owner = x.caller;
  auto tuning = x.controller.CreateTuningJob(*cmd);
  if (!tuning.ok()) return tuning.status();
  return json{{"HyperParameterTuningJobArn", tuning->arn}};
}

// The training jobs a tuning job starts: its definition (or each of its definitions), each trial
// named after the tuning job.
std::vector<TrainingDefinition> TuningDefinitions(const json& request, const json&) {
  std::vector<TrainingDefinition> out;
  auto name_it = request.find("HyperParameterTuningJobName");
  const std::string name = name_it != request.end() && name_it->is_string() ? name_it->get<std::string>() : "";
  if (auto d = request.find("TrainingJobDefinition"); d != request.end() && d->is_object())
    out.push_back({&*d, name, "TrainingJobDefinition."});
  if (auto ds = request.find("TrainingJobDefinitions"); ds != request.end() && ds->is_array())
    for (size_t i = 0; i < ds->size(); ++i)
      if ((*ds)[i].is_object()) out.push_back({&(*ds)[i], name, "TrainingJobDefinitions[" + std::to_string(i) + "]."});
  return out;
}

Response DescribeTuningJob(Controller& c, const json& req) {
  const std::string name = req.value("HyperParameterTuningJobName", "");
  const EpochMs now = c.Now();
  return c.Read([&](const State& s) -> Response {
    const TuningJob* tuning = s.FindTuningJob(name);
    if (!tuning) return NotFound("Requested resource not found: hyperparameter tuning job " + name);
    return EncodeDescribe(s, *tuning, now);
  });
}

Response StopTuningJob(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(c.StopTuningJob(req.value("HyperParameterTuningJobName", "")));
  return json::object();
}

Response DeleteTuningJob(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(c.DeleteTuningJob(req.value("HyperParameterTuningJobName", "")));
  return json::object();
}

}  // namespace

std::vector<Operation> TuningOperationRows() {
  using RK = ResourceKind;
  const OperationAccess tuning_job{.resource = RK::kTuningJob, .field = "HyperParameterTuningJobName"};
  const std::vector<AuditMember> tuning_audit = {
      {"HyperParameterTuningJobName", "AWS::SageMaker::HyperParameterTuningJob"}};
  return {
      {.name = "CreateHyperParameterTuningJob", .handle = CreateTuningJob,
       .access = {.resource = RK::kTuningJob, .field = "HyperParameterTuningJobName",
                  .training_definitions = TuningDefinitions},
       .audit = tuning_audit},
      {.name = "DescribeHyperParameterTuningJob", .handle = Plain<DescribeTuningJob>, .access = tuning_job,
       .audit = tuning_audit},
      {.name = "ListHyperParameterTuningJobs", .handle = Plain<ListTuningJobs>,
       .access = {.list_member = "HyperParameterTuningJobSummaries",
                  .item_action = "sagemaker:DescribeHyperParameterTuningJob", .item = RK::kTuningJob,
                  .item_name = "HyperParameterTuningJobName", .item_arn = "HyperParameterTuningJobArn"}},
      {.name = "ListTrainingJobsForHyperParameterTuningJob", .handle = Plain<ListTrials>, .access = tuning_job,
       .audit = tuning_audit},
      {.name = "StopHyperParameterTuningJob", .handle = Plain<StopTuningJob>, .access = tuning_job,
       .audit = tuning_audit},
      {.name = "DeleteHyperParameterTuningJob", .handle = Plain<DeleteTuningJob>, .access = tuning_job,
       .audit = tuning_audit},
  };
}

}  // namespace ty::api
