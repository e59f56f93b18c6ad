// Hyperparameter tuning jobs (docs/tuning.md): what the controller keeps of one, and the pure
// reads of it that Describe, List, events and /metrics share, so that every reader counts the
// trials the same way.
//
// A tuning job owns its trials' records (which training job each suggestion became); the trials'
// progress is read from those training jobs and their MetricDefinitions series at every read, so
// the counters and the best trial are consistent with the trials by construction (nothing is
// counted twice or cached). The search itself (tune::Search) is the controller's, made once per
// tuning job from `search` and the warm-start parents' trials, and holds nothing of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "tune/search.h"

namespace ty::control {

struct State;

// Trials through a Batch job queue (docs/tuning.md, "Trials in a job queue"): a trainyard
// extension carried in the tuning job's tags, so boto3 sends it unchanged.
inline constexpr const char* kJobQueueTag = "trainyard:job-queue";
inline constexpr const char* kShareIdentifierTag = "trainyard:share-identifier";
inline constexpr const char* kQuotaShareNameTag = "trainyard:quota-share-name";
inline constexpr const char* kSchedulingPriorityTag = "trainyard:scheduling-priority";
struct TrialQueue {
  std::string queue;  // name or ARN as given; "": the trials are plain training jobs
  std::string share_identifier;
  std::string quota_share_name;
  std::optional<int> scheduling_priority;  // 0..9999
};
// The extension's tags, their form only (the queue and its shares are checked in the creating
// turn): the share tags and the priority need the queue tag; the priority is 0..9999.
StatusOr<TrialQueue> ParseTrialQueue(const Tags& tags);

// At most this many trials start in one controller turn, across all tuning jobs: the turn's work
// (a suggestion and a training job each) is bounded whatever their MaxParallelTrainingJobs, and
// the rest start in the turns that follow, which come at once (docs/tuning.md, "Limits").
inline constexpr int kTrialStartsPerTurn = 8;

enum class TuningJobStatus { kInProgress, kCompleted, kFailed, kStopping, kStopped };
const char* ToWire(TuningJobStatus s);
std::optional<TuningJobStatus> ParseTuningJobStatus(const std::string& s);
inline bool IsLive(TuningJobStatus s) { return s == TuningJobStatus::kInProgress || s == TuningJobStatus::kStopping; }

// One suggestion of the search and the training job it became. Stored with the tuning job in the
// commit that creates the training job, so a restart finds every trial that was started.
struct TuningTrial {
  int index = 0;             // suggestion order, 0-based (the name's NNN is index + 1)
  std::string training_job;  // <tuning-job>-<NNN>-<8 hex>
  tune::Assignment assignment;
  int resource = 0;  // Hyperband: the epochs it was given
  int parent = -1;
  bool stopped_early = false;  // stopped because Search::ShouldStop said so
  // Through a job queue: its service job, whose latest attempt `training_job` names (the
  // trial's name until the first attempt starts); each attempt's training job, in order.
  std::string service_job_id;
  std::vector<std::string> attempts;
};

struct TuningJob {
  std::string name;
  std::string arn;
  uint64_t seq = 0;  // creation order
  std::string request_json;  // CreateHyperParameterTuningJob as accepted (Describe echoes parts of it)
  // The CreateTrainingJob request each trial starts from: the definition's members, its static
  // hyperparameters, no TrainingJobName. Trials add the name and their tuned hyperparameters.
  std::string training_request_json;
  TrainingSpec training_spec;  // training_request_json decoded (not stored: decoded on load)
  std::string objective_metric;  // HyperParameterTuningJobObjective.MetricName
  // Hyperband: the static hyperparameter that carries each trial's resource ("epochs", ...).
  std::string resource_hyperparameter;
  tune::SearchConfig search;  // RandomSeed drawn at creation when absent, and stored
  int64_t max_runtime_seconds = 0;  // ResourceLimits.MaxRuntimeInSeconds; 0: none
  std::vector<std::string> warm_start_parents;  // tuning job names
  std::string warm_start_type;                  // IdenticalDataAndAlgorithm | TransferLearning | ""
  Tags tags;
  std::string owner;
  TrialQueue queue;  // from the tags

  TuningJobStatus status = TuningJobStatus::kInProgress;
  std::string failure_reason;
  tune::Completion completion = tune::Completion::kNone;  // why the search ended, once it has
  bool stop_requested = false;                            // StopHyperParameterTuningJob or MaxRuntimeInSeconds
  bool runtime_exceeded = false;                          // MaxRuntimeInSeconds ended it
  EpochMs creation_time = 0;
  EpochMs last_modified_time = 0;
  EpochMs end_time = 0;
  EpochMs converged_time = 0;
  std::vector<TuningTrial> trials;
};

// The search's view of the trials as of `s`: each trial's state from its training job (Stopping
// is still running), its objective metric's values from the job's MetricDefinitions series (the
// k-th value is epoch k), its final objective from FinalMetricDataList.
std::vector<tune::Trial> TrialsOf(const TuningJob& tuning, const State& s);

// The trial's training job now: its service job's latest attempt for a trial in a job queue.
std::string CurrentTrainingJob(const TuningTrial& rec, const State& s);

// TrainingJobStatusCounters and ObjectiveStatusCounters (SageMaker's), from `trials`.
struct TuningCounters {
  int completed = 0, in_progress = 0, retryable_error = 0, non_retryable_error = 0, stopped = 0;
  int objective_succeeded = 0, objective_pending = 0, objective_failed = 0;
};
TuningCounters CountTrials(const std::vector<tune::Trial>& trials);

// The objective status of one trial: "Succeeded" (finished with an objective value; a trial
// stopped early counts), "Pending" (running), "Failed".
const char* ObjectiveStatusOf(const tune::Trial& trial);

// The index of the best trial with an objective (ties: the earlier trial), or nullopt.
std::optional<int> BestTrialOf(const std::vector<tune::Trial>& trials, tune::Goal goal);

// The stored document of a tuning job, and back (false: not one).
std::string EncodeTuningJob(const TuningJob& tuning);
bool DecodeTuningJob(const std::string& doc, TuningJob* out);

// A trial's CheckpointConfig.S3Uri: <definition's S3Uri>/<trial name>, so that trials do not
// restore each other's state; a Hyperband promotion (parent >= 0) continues in its parent's.
// "" when the definition has no CheckpointConfig.
std::string TrialCheckpointUri(const TuningJob& tuning, int index);

// <tuning-job>-<NNN>-<8 hex>: SageMaker's trial names. The hex part is derived from the tuning
// job's ARN and the index, so the name is the same in any process.
std::string TrialName(const TuningJob& tuning, int index);

}  // namespace ty::control
