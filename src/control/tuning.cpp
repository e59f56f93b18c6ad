// Hyperparameter tuning jobs: creation, the step of each turn that starts, stops and completes
// trials, StopHyperParameterTuningJob, and the pure reads in tuning.h (docs/tuning.md).
#include "control/tuning.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "control/controller.h"
#include "control/turn.h"
#include "core/strings.h"

namespace ty::control {

using nlohmann::json;

namespace {

constexpr const char* kTuningStatusNames[] = {"InProgress", "Completed", "Failed", "Stopping", "Stopped"};

const char* StrategyName(tune::Strategy s) {
  switch (s) {
    case tune::Strategy::kGrid: return "Grid";
    case tune::Strategy::kRandom: return "Random";
    case tune::Strategy::kBayesian: return "Bayesian";
    case tune::Strategy::kHyperband: return "Hyperband";
  }
  return "Bayesian";
}

const char* ScalingName(tune::Scaling s) {
  switch (s) {
    case tune::Scaling::kAuto: return "Auto";
    case tune::Scaling::kLinear: return "Linear";
    case tune::Scaling::kLogarithmic: return "Logarithmic";
    case tune::Scaling::kReverseLogarithmic: return "ReverseLogarithmic";
  }
  return "Auto";
}

const char* KindName(tune::Range::Kind k) {
  switch (k) {
    case tune::Range::Kind::kInteger: return "Integer";
    case tune::Range::Kind::kContinuous: return "Continuous";
    case tune::Range::Kind::kCategorical: return "Categorical";
  }
  return "Continuous";
}

template <typename E, size_t N>
E EnumOf(const std::string& name, const E (&values)[N], const char* (*spell)(E), E fallback) {
  for (E v : values)
    if (name == spell(v)) return v;
  return fallback;
}

const char* CompletionName(tune::Completion c) {
  switch (c) {
    case tune::Completion::kNone: return "";
    case tune::Completion::kExhausted: return "exhausted";
    case tune::Completion::kTargetReached: return "target";
    case tune::Completion::kBestNotImproving: return "not-improving";
    case tune::Completion::kConverged: return "converged";
  }
  return "";
}

json EncodeConfig(const tune::SearchConfig& c) {
  json ranges = json::array();
  for (const auto& r : c.ranges)
    ranges.push_back({{"name", r.name}, {"kind", KindName(r.kind)}, {"min", r.min}, {"max", r.max},
                      {"scaling", ScalingName(r.scaling)}, {"values", r.values}});
  json j = {{"strategy", StrategyName(c.strategy)},
            {"goal", c.goal == tune::Goal::kMinimize ? "Minimize" : "Maximize"},
            {"ranges", ranges},
            {"seed", c.seed},
            {"max_trials", c.max_trials},
            {"max_parallel", c.max_parallel},
            {"min_resource", c.min_resource},
            {"max_resource", c.max_resource},
            {"early_stopping", c.early_stopping},
            {"best_not_improving", c.best_not_improving},
            {"complete_on_convergence", c.complete_on_convergence}};
  if (c.target_objective) j["target_objective"] = *c.target_objective;
  return j;
}

tune::SearchConfig DecodeConfig(const json& j) {
  static constexpr tune::Strategy kStrategies[] = {tune::Strategy::kGrid, tune::Strategy::kRandom,
                                                   tune::Strategy::kBayesian, tune::Strategy::kHyperband};
  static constexpr tune::Scaling kScalings[] = {tune::Scaling::kAuto, tune::Scaling::kLinear, tune::Scaling::kLogarithmic,
                                                tune::Scaling::kReverseLogarithmic};
  static constexpr tune::Range::Kind kKinds[] = {tune::Range::Kind::kInteger, tune::Range::Kind::kContinuous,
                                                 tune::Range::Kind::kCategorical};
  tune::SearchConfig c;
  c.strategy = EnumOf(j.value("strategy", ""), kStrategies, StrategyName, tune::Strategy::kBayesian);
  c.goal = j.value("goal", "") == "Minimize" ? tune::Goal::kMinimize : tune::Goal::kMaximize;
  for (const auto& r : j.value("ranges", json::array())) {
    tune::Range range;
    range.name = r.value("name", "");
    range.kind = EnumOf(r.value("kind", ""), kKinds, KindName, tune::Range::Kind::kContinuous);
    range.min = r.value("min", 0.0);
    range.max = r.value("max", 0.0);
    range.scaling = EnumOf(r.value("scaling", ""), kScalings, ScalingName, tune::Scaling::kAuto);
    range.values = r.value("values", std::vector<std::string>{});
    c.ranges.push_back(std::move(range));
  }
  c.seed = j.value("seed", uint64_t{0});
  c.max_trials = j.value("max_trials", 0);
  c.max_parallel = j.value("max_parallel", 1);
  c.min_resource = j.value("min_resource", 1);
  c.max_resource = j.value("max_resource", 0);
  c.early_stopping = j.value("early_stopping", false);
  c.best_not_improving = j.value("best_not_improving", 0);
  c.complete_on_convergence = j.value("complete_on_convergence", false);
  if (j.contains("target_objective") && j["target_objective"].is_number()) c.target_objective = j["target_objective"].get<double>();
  return c;
}

// FNV-1a, 32 bits: the trial name's hex part (a name, not a secret).
uint32_t Fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 16777619u;
  }
  return h;
}

}  // namespace

namespace {
// The training jobs a trial ran as, in order: its service job's attempts (its records' copy when
// the service job is gone), or its one training job.
std::vector<std::string> TrialAttempts(const TuningTrial& rec, const State& s) {
  if (rec.service_job_id.empty()) return {rec.training_job};
  if (const ServiceJobState* js = s.FindJob(rec.service_job_id)) {
    std::vector<std::string> out;
    for (const ServiceJobAttempt& a : js->job.attempts) out.push_back(a.training_job_name);
    return out;
  }
  return rec.attempts;
}

// A trial's objective values numbered by epoch across the training jobs it ran as (docs/tuning.md,
// "Epochs across attempts"). The k-th value an attempt prints is the epoch k after the one the
// attempt started from: the first attempt of a fresh trial starts from nothing, that of a
// promotion after its parent's last epoch (`start_after`), a later attempt after the last epoch
// before it. An attempt that restored a checkpoint may repeat epochs its predecessor reported after
// saving it, and nothing says how many while it runs; once it has completed a trial with a
// resource (Hyperband's epoch count, which the script trains up to), its values are known to end
// at that epoch: they are numbered back from it and replace what earlier attempts reported there.
std::vector<std::pair<int, double>> EpochValues(const TuningJob& tuning, const State& s, const std::vector<std::string>& attempts,
                                                int start_after, bool last_completed, int resource, bool promoted) {
  std::vector<std::pair<int, double>> out;
  int before = start_after;  // the epoch the next attempt starts after
  for (size_t i = 0; i < attempts.size(); ++i) {
    const MetricTrack* track = nullptr;
    if (auto series = s.metric_series.find(attempts[i]); series != s.metric_series.end())
      track = series->second.Find(tuning.objective_metric);
    if (!track || track->points.empty()) continue;
    const int reported = static_cast<int>(track->points.back().index) + 1;
    const bool resumed = i > 0 || promoted;
    if (resumed && i + 1 == attempts.size() && last_completed && resource > 0 && reported <= resource) {
      before = resource - reported;
      while (!out.empty() && out.back().first > before) out.pop_back();
    }
    for (const MetricPoint& p : track->points) out.emplace_back(before + static_cast<int>(p.index) + 1, p.value);
    before += reported;
  }
  return out;
}

// A trial that is a service job follows it: pending (Running to the search) until the job ends,
// however often it waits RUNNABLE or is preempted; then as its last attempt ended (Stopped when
// it was terminated before any attempt). Its objective's values run on across the attempts, so
// an attempt that resumed from a checkpoint continues the epochs; the final one is the last
// attempt's.
tune::Trial QueuedTrial(const TuningJob& tuning, const TuningTrial& rec, const State& s, int start_after, tune::Trial trial) {
  const std::vector<std::string> attempts = TrialAttempts(rec, s);
  const ServiceJobState* js = s.FindJob(rec.service_job_id);
  const TrainingJob* last = attempts.empty() ? nullptr : s.FindTrainingJob(attempts.back());
  trial.intermediate = EpochValues(tuning, s, attempts, start_after, last && last->status == TrainingJobStatus::kCompleted,
                                   rec.resource, rec.parent >= 0);
  if (js && !IsTerminal(js->job.status)) {
    trial.state = tune::Trial::State::kRunning;
    return trial;
  }
  if (!last) {
    trial.state = js && js->job.is_terminated ? tune::Trial::State::kStopped : tune::Trial::State::kFailed;
    return trial;
  }
  switch (last->status) {
    case TrainingJobStatus::kCompleted: trial.state = tune::Trial::State::kCompleted; break;
    case TrainingJobStatus::kStopped: trial.state = tune::Trial::State::kStopped; break;
    case TrainingJobStatus::kFailed: trial.state = tune::Trial::State::kFailed; break;
    default: trial.state = tune::Trial::State::kRunning; return trial;  // the job is gone, its attempt not yet
  }
  for (const MetricValue& m : last->final_metrics)
    if (m.name == tuning.objective_metric) trial.final_objective = m.value;
  return trial;
}
}  // namespace

const char* ToWire(TuningJobStatus s) { return kTuningStatusNames[static_cast<int>(s)]; }

std::optional<TuningJobStatus> ParseTuningJobStatus(const std::string& s) {
  for (int i = 0; i < 5; ++i)
    if (s == kTuningStatusNames[i]) return static_cast<TuningJobStatus>(i);
  return std::nullopt;
}

std::string TrialName(const TuningJob& tuning, int index) {
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", Fnv1a(tuning.arn + "/" + std::to_string(index)));
  char number[16];
  std::snprintf(number, sizeof number, "%03d", index + 1);
  return tuning.name + "-" + number + "-" + hex;
}

StatusOr<TrialQueue> ParseTrialQueue(const Tags& tags) {
  TrialQueue q;
  auto tag = [&](const char* key) {
    auto it = tags.find(key);
    return it == tags.end() ? std::string() : it->second;
  };
  q.queue = tag(kJobQueueTag);
  q.share_identifier = tag(kShareIdentifierTag);
  q.quota_share_name = tag(kQuotaShareNameTag);
  const bool has_priority = tags.count(kSchedulingPriorityTag) > 0;
  if (q.queue.empty()) {
    for (const char* key : {kShareIdentifierTag, kQuotaShareNameTag, kSchedulingPriorityTag})
      if (tags.count(key))
        return InvalidArgument(std::string("Tags: ") + key + " needs the tag " + kJobQueueTag +
                               " (the job queue the trials go through)");
    if (tags.count(kJobQueueTag)) return InvalidArgument(std::string("Tags: ") + kJobQueueTag + " must name a job queue");
    return q;
  }
  if (has_priority) {
    const std::string text = tag(kSchedulingPriorityTag);
    if (text.empty() || text.size() > 4 || text.find_first_not_of("0123456789") != std::string::npos)
      return InvalidArgument(std::string("Tags: ") + kSchedulingPriorityTag +
                             " must be an integer between 0 and 9999, not '" + text.substr(0, 32) + "'");
    q.scheduling_priority = std::stoi(text);
  }
  return q;
}

std::string TrialCheckpointUri(const TuningJob& tuning, int index) {
  const auto& checkpoint = tuning.training_spec.checkpoint;
  if (!checkpoint || checkpoint->s3_uri.empty()) return "";
  std::string uri = checkpoint->s3_uri;
  // A promotion continues its parent's lineage: the first trial of the chain names the prefix.
  while (index >= 0 && static_cast<size_t>(index) < tuning.trials.size() && tuning.trials[static_cast<size_t>(index)].parent >= 0 &&
         tuning.trials[static_cast<size_t>(index)].parent < index)
    index = tuning.trials[static_cast<size_t>(index)].parent;
  while (EndsWith(uri, "/")) uri.pop_back();
  return uri + "/" + TrialName(tuning, index);
}


std::string CurrentTrainingJob(const TuningTrial& rec, const State& s) {
  std::vector<std::string> attempts = TrialAttempts(rec, s);
  return attempts.empty() ? rec.training_job : attempts.back();
}

std::vector<tune::Trial> TrialsOf(const TuningJob& tuning, const State& s) {
  std::vector<tune::Trial> out;
  out.reserve(tuning.trials.size());
  for (const TuningTrial& rec : tuning.trials) {
    tune::Trial trial;
    trial.index = rec.index;
    trial.assignment = rec.assignment;
    trial.resource = rec.resource;
    trial.parent = rec.parent;
    trial.stopped_early = rec.stopped_early;
    // A promotion continues its parent's epochs (the parent comes first: parent < index).
    int start_after = 0;
    if (rec.parent >= 0 && static_cast<size_t>(rec.parent) < out.size() && !out[static_cast<size_t>(rec.parent)].intermediate.empty())
      start_after = out[static_cast<size_t>(rec.parent)].intermediate.back().first;
    if (!rec.service_job_id.empty()) {
      out.push_back(QueuedTrial(tuning, rec, s, start_after, std::move(trial)));
      continue;
    }
    const TrainingJob* tj = s.FindTrainingJob(rec.training_job);
    if (!tj) {
      trial.state = tune::Trial::State::kFailed;  // its training job is gone: it can tell nothing
      out.push_back(std::move(trial));
      continue;
    }
    switch (tj->status) {
      case TrainingJobStatus::kCompleted: trial.state = tune::Trial::State::kCompleted; break;
      case TrainingJobStatus::kFailed: trial.state = tune::Trial::State::kFailed; break;
      case TrainingJobStatus::kStopped: trial.state = tune::Trial::State::kStopped; break;
      default: trial.state = tune::Trial::State::kRunning; break;
    }
    trial.intermediate = EpochValues(tuning, s, {tj->name}, start_after, tj->status == TrainingJobStatus::kCompleted,
                                     rec.resource, rec.parent >= 0);
    if (trial.state != tune::Trial::State::kRunning)
      for (const MetricValue& m : tj->final_metrics)
        if (m.name == tuning.objective_metric) trial.final_objective = m.value;
    out.push_back(std::move(trial));
  }
  return out;
}

const char* ObjectiveStatusOf(const tune::Trial& trial) {
  if (trial.state == tune::Trial::State::kRunning) return "Pending";
  const bool counts = trial.state == tune::Trial::State::kCompleted || trial.stopped_early;
  return counts && tune::ObjectiveOf(trial) ? "Succeeded" : "Failed";
}

TuningCounters CountTrials(const std::vector<tune::Trial>& trials) {
  TuningCounters c;
  for (const tune::Trial& trial : trials) {
    switch (trial.state) {
      case tune::Trial::State::kRunning: ++c.in_progress; break;
      case tune::Trial::State::kCompleted: ++c.completed; break;
      case tune::Trial::State::kFailed: ++c.non_retryable_error; break;
      case tune::Trial::State::kStopped: ++c.stopped; break;
    }
    const std::string objective = ObjectiveStatusOf(trial);
    if (objective == "Pending") ++c.objective_pending;
    else if (objective == "Succeeded") ++c.objective_succeeded;
    else ++c.objective_failed;
  }
  return c;
}

std::optional<int> BestTrialOf(const std::vector<tune::Trial>& trials, tune::Goal goal) {
  std::optional<int> best;
  double best_value = 0;
  for (const tune::Trial& trial : trials) {
    if (std::string(ObjectiveStatusOf(trial)) != "Succeeded") continue;
    const double v = *tune::ObjectiveOf(trial);
    const bool better = goal == tune::Goal::kMaximize ? v > best_value : v < best_value;
    if (!best || better) {
      best = trial.index;
      best_value = v;
    }
  }
  return best;
}

std::string EncodeTuningJob(const TuningJob& t) {
  json trials = json::array();
  for (const TuningTrial& r : t.trials) {
    json assignment = json::array();
    for (const auto& [k, v] : r.assignment) assignment.push_back({k, v});
    trials.push_back({{"index", r.index},
                      {"training_job", r.training_job},
                      {"assignment", assignment},
                      {"resource", r.resource},
                      {"parent", r.parent},
                      {"stopped_early", r.stopped_early},
                      {"service_job_id", r.service_job_id},
                      {"attempts", r.attempts}});
  }
  json j = {{"name", t.name},
            {"arn", t.arn},
            {"seq", t.seq},
            {"request_json", t.request_json},
            {"training_request_json", t.training_request_json},
            {"objective_metric", t.objective_metric},
            {"resource_hyperparameter", t.resource_hyperparameter},
            {"search", EncodeConfig(t.search)},
            {"max_runtime_seconds", t.max_runtime_seconds},
            {"warm_start_parents", t.warm_start_parents},
            {"warm_start_type", t.warm_start_type},
            {"tags", t.tags},
            {"owner", t.owner},
            {"trial_queue", {{"queue", t.queue.queue},
                             {"share_identifier", t.queue.share_identifier},
                             {"quota_share_name", t.queue.quota_share_name},
                             {"scheduling_priority", t.queue.scheduling_priority ? *t.queue.scheduling_priority : -1}}},
            {"status", ToWire(t.status)},
            {"failure_reason", t.failure_reason},
            {"completion", CompletionName(t.completion)},
            {"stop_requested", t.stop_requested},
            {"runtime_exceeded", t.runtime_exceeded},
            {"creation_time", t.creation_time},
            {"last_modified_time", t.last_modified_time},
            {"end_time", t.end_time},
            {"converged_time", t.converged_time},
            {"trials", trials}};
  return j.dump();
}

bool DecodeTuningJob(const std::string& doc, TuningJob* out) {
  json j = json::parse(doc, nullptr, false);
  if (!j.is_object()) return false;
  try {
    TuningJob t;
    t.name = j.at("name").get<std::string>();
    t.arn = j.value("arn", "");
    t.seq = j.value("seq", uint64_t{0});
    t.request_json = j.value("request_json", "{}");
    t.training_request_json = j.value("training_request_json", "{}");
    if (!DecodeTrainingSpec(t.training_request_json, &t.training_spec)) return false;
    t.objective_metric = j.value("objective_metric", "");
    t.resource_hyperparameter = j.value("resource_hyperparameter", "");
    t.search = DecodeConfig(j.value("search", json::object()));
    t.max_runtime_seconds = j.value("max_runtime_seconds", int64_t{0});
    t.warm_start_parents = j.value("warm_start_parents", std::vector<std::string>{});
    t.warm_start_type = j.value("warm_start_type", "");
    t.tags = j.value("tags", Tags{});
    t.owner = j.value("owner", "");
    const json tq = j.value("trial_queue", json::object());
    t.queue.queue = tq.value("queue", "");
    t.queue.share_identifier = tq.value("share_identifier", "");
    t.queue.quota_share_name = tq.value("quota_share_name", "");
    if (const int p = tq.value("scheduling_priority", -1); p >= 0) t.queue.scheduling_priority = p;
    t.status = ParseTuningJobStatus(j.value("status", "")).value_or(TuningJobStatus::kFailed);
    t.failure_reason = j.value("failure_reason", "");
    const std::string completion = j.value("completion", "");
    for (auto c : {tune::Completion::kExhausted, tune::Completion::kTargetReached, tune::Completion::kBestNotImproving,
                   tune::Completion::kConverged})
      if (completion == CompletionName(c)) t.completion = c;
    t.stop_requested = j.value("stop_requested", false);
    t.runtime_exceeded = j.value("runtime_exceeded", false);
    t.creation_time = j.value("creation_time", EpochMs{0});
    t.last_modified_time = j.value("last_modified_time", EpochMs{0});
    t.end_time = j.value("end_time", EpochMs{0});
    t.converged_time = j.value("converged_time", EpochMs{0});
    for (const auto& r : j.value("trials", json::array())) {
      TuningTrial trial;
      trial.index = r.value("index", 0);
      trial.training_job = r.value("training_job", "");
      for (const auto& kv : r.value("assignment", json::array()))
        trial.assignment.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
      trial.resource = r.value("resource", 0);
      trial.parent = r.value("parent", -1);
      trial.stopped_early = r.value("stopped_early", false);
      trial.service_job_id = r.value("service_job_id", "");
      trial.attempts = r.value("attempts", std::vector<std::string>{});
      t.trials.push_back(std::move(trial));
    }
    *out = std::move(t);
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

// ------------------------------------------------------------------------------------------
// The controller's side.

const TuningJob* State::FindTuningJob(const std::string& name) const {
  auto it = tuning_jobs.find(ToLower(name));
  return it == tuning_jobs.end() ? nullptr : &it->second;
}

StatusOr<TuningJob> Controller::CreateTuningJob(const CreateTuningJobCommand& cmd) {
  TuningJob tuning;
  tuning.name = cmd.name;
  tuning.arn = Arn("sagemaker", "hyper-parameter-tuning-job/" + ToLower(cmd.name));
  tuning.request_json = cmd.request_json;
  tuning.training_request_json = cmd.training_request_json;
  tuning.training_spec = cmd.training_spec;
  tuning.objective_metric = cmd.objective_metric;
  tuning.resource_hyperparameter = cmd.resource_hyperparameter;
  tuning.search = cmd.search;
  tuning.max_runtime_seconds = cmd.max_runtime_seconds;
  tuning.warm_start_parents = cmd.warm_start_parents;
  tuning.warm_start_type = cmd.warm_start_type;
  tuning.tags = cmd.tags;
  tuning.owner = cmd.owner;
  tuning.queue = cmd.queue;
  return Execute<TuningJob>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<TuningJob> {
    if (state_.FindTuningJob(tuning.name))
      return AlreadyExists("A hyperparameter tuning job with this name already exists (" + tuning.arn + ")");
    for (const std::string& parent : tuning.warm_start_parents) {
      const TuningJob* p = state_.FindTuningJob(parent);
      if (!p) return NotFound("WarmStartConfig.ParentHyperParameterTuningJobs: hyperparameter tuning job " + parent + " not found");
      if (IsLive(p->status))
        return InvalidArgument("WarmStartConfig.ParentHyperParameterTuningJobs: " + parent + " is " + ToWire(p->status) +
                               "; a parent must have ended (Completed, Stopped or Failed)");
    }
    if (!tuning.queue.queue.empty()) {
      // The queue and its shares, as SubmitServiceJob checks them, in the tags' words.
      const bool spot = tuning.training_spec.managed_spot;
      auto q = CheckPlacement(tuning.queue.queue, tuning.queue.share_identifier, tuning.queue.quota_share_name, spot,
                              kTrialQueueFields);
      if (!q.ok()) return q.status();
    }
    // The search refuses what it cannot run (a grid too large, Hyperband's resources...): nothing is stored then.
    auto search = tune::Search::Create(tuning.search, WarmStartTrials(tuning));
    if (!search.ok()) return InvalidArgument(search.status().message());
    tuning.seq = state_.next_seq++;
    tuning.creation_time = tuning.last_modified_time = t.now;
    searches_[ToLower(tuning.name)] = std::move(*search);
    const std::string key = ToLower(tuning.name);
    state_.tuning_jobs[key] = tuning;
    t.tuning_jobs.insert(key);
    TuningJobEvent(t, state_.tuning_jobs[key], "");
    StepTuningJob(t, state_.tuning_jobs[key]);  // the first trials start in the creating turn
    return state_.tuning_jobs[key];
  });
}

Status Controller::StopTuningJob(const std::string& name) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    auto it = state_.tuning_jobs.find(ToLower(name));
    if (it == state_.tuning_jobs.end()) return NotFound("Requested resource not found: hyperparameter tuning job " + name);
    TuningJob& tuning = it->second;
    if (tuning.status != TuningJobStatus::kInProgress)
      return FailedPrecondition("The hyperparameter tuning job " + tuning.name + " is " + ToWire(tuning.status) +
                                " and cannot be stopped");
    tuning.stop_requested = true;
    StepTuningJob(t, tuning);
    return Status::Ok();
  });
}

Status Controller::DeleteTuningJob(const std::string& name) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    auto it = state_.tuning_jobs.find(ToLower(name));
    if (it == state_.tuning_jobs.end()) return NotFound("Requested resource not found: hyperparameter tuning job " + name);
    if (IsLive(it->second.status))
      return AlreadyExists("The hyperparameter tuning job " + it->second.name + " is " + ToWire(it->second.status) +
                           "; stop it and wait for it to end before deleting it");
    for (const auto& [key, other] : state_.tuning_jobs)
      if (IsLive(other.status))
        for (const std::string& parent : other.warm_start_parents)
          if (ToLower(parent) == it->first)
            return AlreadyExists("The hyperparameter tuning job " + it->second.name + " is a warm-start parent of " +
                                 other.name + ", which is " + ToWire(other.status));
    // Its training jobs stay (SageMaker deletes the tuning job only).
    t.deleted_tuning_jobs.insert(it->first);
    t.tuning_jobs.erase(it->first);
    searches_.erase(it->first);
    state_.tuning_jobs.erase(it);
    return Status::Ok();
  });
}

std::vector<tune::Trial> Controller::WarmStartTrials(const TuningJob& tuning) const {
  std::vector<tune::Trial> out;
  for (const std::string& parent : tuning.warm_start_parents) {
    const TuningJob* p = state_.FindTuningJob(parent);
    if (!p) continue;
    for (tune::Trial trial : TrialsOf(*p, state_)) {
      if (trial.state == tune::Trial::State::kRunning) continue;
      trial.index = static_cast<int>(out.size());
      trial.parent = -1;
      out.push_back(std::move(trial));
    }
  }
  return out;
}

tune::Search* Controller::SearchOf(Turn& t, TuningJob& tuning) {
  const std::string key = ToLower(tuning.name);
  if (auto it = searches_.find(key); it != searches_.end()) return it->second.get();
  auto search = tune::Search::Create(tuning.search, WarmStartTrials(tuning));
  if (!search.ok()) {
    // Accepted once, refused now (a stored configuration this build's search cannot run).
    tuning.failure_reason = "The search cannot be resumed: " + search.status().message();
    SetTuningStatus(t, tuning, TuningJobStatus::kFailed);
    return nullptr;
  }
  return (searches_[key] = std::move(*search)).get();
}

void Controller::SetTuningStatus(Turn& t, TuningJob& tuning, TuningJobStatus status) {
  if (tuning.status == status) return;
  tuning.status = status;
  tuning.last_modified_time = t.now;
  if (!IsLive(status)) {
    tuning.end_time = t.now;
    searches_.erase(ToLower(tuning.name));
    completion_checked_.erase(ToLower(tuning.name));
  }
  t.tuning_jobs.insert(ToLower(tuning.name));
  TuningJobEvent(t, tuning, tuning.failure_reason);
}

void Controller::TuningJobEvent(Turn& t, const TuningJob& tuning, const std::string& reason) {
  EventTrigger e;
  e.kind = EventTrigger::Kind::kTuningJobStateChange;
  e.name = tuning.name;
  e.status = ToWire(tuning.status);
  e.reason = reason;
  e.at = t.now;
  t.events.push_back(std::move(e));
}

void Controller::RunTuningJobs(Turn& t) {
  // Every live job is stepped; the jobs after the one that last started a trial come first, so
  // the turn's trial starts (Turn::trial_starts_left) go round the jobs that wait for them.
  auto first = state_.tuning_jobs.upper_bound(tuning_start_cursor_);
  std::vector<TuningJob*> order;
  for (auto it = first; it != state_.tuning_jobs.end(); ++it) order.push_back(&it->second);
  for (auto it = state_.tuning_jobs.begin(); it != first; ++it) order.push_back(&it->second);
  for (TuningJob* tuning : order)
    if (IsLive(tuning->status)) StepTuningJob(t, *tuning);
}

void Controller::StepTuningJob(Turn& t, TuningJob& tuning) {
  tune::Search* search = SearchOf(t, tuning);
  if (!search) return;
  std::vector<tune::Trial> trials = TrialsOf(tuning, state_);
  FollowQueuedTrials(t, tuning);
  auto stop_running = [&](const std::string& message) REQUIRES(turn_mu_, state_mu_) {
    for (const TuningTrial& rec : tuning.trials) StopTrial(t, rec, message);
  };
  auto running = [&]() REQUIRES(turn_mu_, state_mu_) {
    for (const TuningTrial& rec : tuning.trials) {
      if (const ServiceJobState* js = rec.service_job_id.empty() ? nullptr : state_.FindJob(rec.service_job_id);
          js && !IsTerminal(js->job.status))
        return true;
      if (const TrainingJob* tj = state_.FindTrainingJob(rec.training_job); tj && IsLive(tj->status)) return true;
    }
    return false;
  };

  if (tuning.status == TuningJobStatus::kInProgress && !tuning.stop_requested && tuning.max_runtime_seconds > 0 &&
      t.now - tuning.creation_time >= tuning.max_runtime_seconds * 1000) {
    tuning.stop_requested = true;
    tuning.runtime_exceeded = true;
  }
  if (tuning.stop_requested) {
    if (tuning.status == TuningJobStatus::kInProgress) {
      stop_running(tuning.runtime_exceeded ? "Stopping: the hyperparameter tuning job reached its MaxRuntimeInSeconds."
                                           : "Stopping: its hyperparameter tuning job is being stopped.");
      SetTuningStatus(t, tuning, TuningJobStatus::kStopping);
    }
    if (!running()) SetTuningStatus(t, tuning, TuningJobStatus::kStopped);
    return;
  }

  // Early stopping (the median rule, or the end of a Hyperband rung): the trial ends Stopped and
  // counts with the objective it reached.
  const bool stops_trials = tuning.search.early_stopping || tuning.search.strategy == tune::Strategy::kHyperband;
  if (stops_trials)
    for (TuningTrial& rec : tuning.trials) {
      tune::Trial& trial = trials[static_cast<size_t>(rec.index)];
      if (trial.state != tune::Trial::State::kRunning || rec.stopped_early) continue;
      const TrainingJob* tj = state_.FindTrainingJob(rec.training_job);
      if (!tj || tj->status != TrainingJobStatus::kInProgress) continue;
      if (!search->ShouldStop(trial, trials)) continue;
      rec.stopped_early = trial.stopped_early = true;
      t.tuning_jobs.insert(ToLower(tuning.name));
      StopTrial(t, rec, "Stopping: the tuning job's early stopping stopped this trial.");
    }

  // The criteria read only the trials' states and objectives: asked again only when one changed.
  std::vector<std::pair<int, std::optional<double>>> outcome;
  outcome.reserve(trials.size());
  for (const tune::Trial& trial : trials) outcome.emplace_back(static_cast<int>(trial.state), tune::ObjectiveOf(trial));
  auto checked = completion_checked_.find(ToLower(tuning.name));
  if (tuning.completion == tune::Completion::kNone && (checked == completion_checked_.end() || checked->second != outcome)) {
    completion_checked_[ToLower(tuning.name)] = std::move(outcome);
    const tune::Completion done = search->Complete(trials);
    if (done != tune::Completion::kNone) {
      tuning.completion = done;
      if (done == tune::Completion::kConverged) tuning.converged_time = t.now;
      t.tuning_jobs.insert(ToLower(tuning.name));
      if (done != tune::Completion::kExhausted) stop_running("Stopping: the tuning job's completion criteria are met.");
    }
  }
  if (tuning.completion != tune::Completion::kNone) {
    if (!running()) SetTuningStatus(t, tuning, TuningJobStatus::kCompleted);
    return;
  }
  // Next is asked only when a trial could start: with every slot taken it has nothing to say, and
  // a Bayesian search would fit its model for nothing on every turn.
  auto free_slot = [&] {
    const auto live = std::count_if(trials.begin(), trials.end(),
                                    [](const tune::Trial& x) { return x.state == tune::Trial::State::kRunning; });
    const bool under_max = tuning.search.max_trials <= 0 || static_cast<int>(trials.size()) < tuning.search.max_trials;
    return live < tuning.search.max_parallel && under_max;
  };
  // At most Turn::trial_starts_left trials start in this turn, across all tuning jobs: asking the
  // search and creating a training job is the costly part of a step, and MaxParallelTrainingJobs
  // (up to 100) must not decide how long the turn holds the state lock.
  while (t.trial_starts_left > 0 && free_slot()) {
    auto suggestion = search->Next(trials);
    if (!suggestion) break;
    if (Status st = StartTrial(t, tuning, *suggestion); !st.ok()) {
      // The queue or its share went away since the tuning job was created: no trial can start.
      tuning.failure_reason = "A trial could not be submitted: " + st.message();
      stop_running("Stopping: its hyperparameter tuning job failed.");
      SetTuningStatus(t, tuning, TuningJobStatus::kFailed);
      return;
    }
    --t.trial_starts_left;
    tuning_start_cursor_ = ToLower(tuning.name);
    tune::Trial trial;
    trial.index = tuning.trials.back().index;
    trial.assignment = suggestion->assignment;
    trial.resource = suggestion->resource;
    trial.parent = suggestion->parent;
    trials.push_back(std::move(trial));
  }
}

void Controller::StopTrial(Turn& t, const TuningTrial& rec, const std::string& message) {
  if (!rec.service_job_id.empty()) {
    // Terminating its service job stops the attempt that runs, or ends a job still waiting.
    if (const ServiceJobState* js = state_.FindJob(rec.service_job_id); js && !IsTerminal(js->job.status))
      (void)Terminate(t, TerminateServiceJobCommand{rec.service_job_id, message});
    return;
  }
  TrainingJob* tj = state_.FindTrainingJob(rec.training_job);
  if (tj && tj->status == TrainingJobStatus::kInProgress) RequestStop(t, *tj, StopCause::kUser, message);
}

void Controller::FollowQueuedTrials(Turn& t, TuningJob& tuning) {
  for (TuningTrial& rec : tuning.trials) {
    if (rec.service_job_id.empty()) continue;
    const ServiceJobState* js = state_.FindJob(rec.service_job_id);
    if (!js || js->job.attempts.size() == rec.attempts.size()) continue;
    rec.attempts.clear();
    for (const ServiceJobAttempt& a : js->job.attempts) rec.attempts.push_back(a.training_job_name);
    rec.training_job = rec.attempts.back();
    t.tuning_jobs.insert(ToLower(tuning.name));
  }
}

Status Controller::StartTrial(Turn& t, TuningJob& tuning, const tune::Suggestion& suggestion) {
  const int index = static_cast<int>(tuning.trials.size());
  TuningTrial rec;
  rec.index = index;
  rec.training_job = TrialName(tuning, index);
  rec.assignment = suggestion.assignment;
  rec.resource = suggestion.resource;
  rec.parent = suggestion.parent;

  TrainingSpec spec = tuning.training_spec;
  spec.training_job_name = rec.training_job;
  for (const auto& [k, v] : suggestion.assignment) spec.hyperparameters[k] = v;
  if (suggestion.resource > 0 && !tuning.resource_hyperparameter.empty())
    spec.hyperparameters[tuning.resource_hyperparameter] = std::to_string(suggestion.resource);
  {
    // Its own checkpoint prefix (a promotion: its parent's), read before the record is added.
    tuning.trials.push_back(rec);
    const std::string checkpoint = TrialCheckpointUri(tuning, index);
    tuning.trials.pop_back();
    if (!checkpoint.empty()) spec.checkpoint->s3_uri = checkpoint;
  }
  if (!tuning.queue.queue.empty()) {
    auto q = CheckPlacement(tuning.queue.queue, tuning.queue.share_identifier, tuning.queue.quota_share_name,
                            spec.managed_spot, kTrialQueueFields);
    if (!q.ok()) return q.status();
    if (!tuning.tags.empty()) spec.tags = tuning.tags;
    ServiceJob job;
    job.name = rec.training_job;
    job.owner = tuning.owner;
    job.payload = tuning.training_request_json;
    job.instance_type = spec.instance_type;
    job.instance_count = std::max<int64_t>(1, spec.instance_count);
    job.managed_spot = spec.managed_spot;
    job.max_runtime_ms = spec.max_runtime_seconds * 1000;
    job.spec = spec;
    if (tuning.queue.scheduling_priority) {
      job.scheduling_priority = *tuning.queue.scheduling_priority;
      job.has_scheduling_priority = true;
    }
    job.share_identifier = tuning.queue.share_identifier;
    job.quota_share_name = tuning.queue.quota_share_name;
    job.tags = tuning.tags;
    job.tuning_job_arn = tuning.arn;
    rec.service_job_id = AddServiceJob(t, std::move(job), **q).id;
    tuning.trials.push_back(std::move(rec));
    tuning.last_modified_time = t.now;
    t.tuning_jobs.insert(ToLower(tuning.name));
    t.reschedule = true;
    return Status::Ok();
  }

  TrainingJob tj;
  tj.name = rec.training_job;
  tj.arn = Arn("sagemaker", "training-job/" + ToLower(tj.name));
  tj.owner = tuning.owner;
  tj.request_json = tuning.training_request_json;
  tj.tags = tuning.tags;
  tj.tuning_job_arn = tuning.arn;
  tj.instance_type = spec.instance_type;
  tj.instance_count = spec.instance_count;
  tj.spec = std::move(spec);
  tj.seq = state_.next_seq++;
  tj.creation_time = tj.last_modified_time = t.now;
  tj.transitions.push_back({SecondaryStatus::kStarting, t.now, 0, "Starting the training job."});
  if (state_.FindTrainingJob(tj.name)) {
    // A training job of that name was made by hand: the trial cannot take it. The name is the
    // tuning job's own namespace, so this is a user's doing; the trial fails rather than the job.
    spdlog::warn("tuning job {}: trial name {} is taken by another training job", tuning.name, tj.name);
    tj.name += "-" + std::to_string(tj.seq);
  }
  rec.training_job = tj.name;
  state_.AddTrainingJob(tj);
  t.training_jobs.insert(tj.name);
  TrainingJobEvent(t, tj.name, SecondaryStatus::kStarting, "Starting the training job.", t.now);
  tuning.trials.push_back(std::move(rec));
  tuning.last_modified_time = t.now;
  t.tuning_jobs.insert(ToLower(tuning.name));
  t.reschedule = true;
  return Status::Ok();
}

}  // namespace ty::control
