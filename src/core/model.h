// Domain types: the resources trainyard manages, as the controller holds them in memory.
//
// These are plain values. Wire encoding lives in api/; durable encoding (JSON documents) in
// model.cpp, so that nlohmann::json stays out of this widely included header.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/training_spec.h"  // also Tags

namespace ty {

// The state of a service environment, job queue or quota share (AWS ServiceEnvironmentState,
// JQState, QuotaShareState): a disabled one takes no new work.
enum class ResourceState { kEnabled, kDisabled };
// The wire and stored spelling ("ENABLED", "DISABLED"), and back (nullopt: not a state).
const char* ToWire(ResourceState s);
std::optional<ResourceState> ParseResourceState(std::string_view s);

// QuotaShare.resourceSharingConfiguration.strategy: whether a share lends its idle capacity to
// other shares of its queue, and whether it borrows theirs.
enum class ShareStrategy { kReserve, kLend, kLendAndBorrow };
// The wire and stored spelling ("RESERVE", "LEND", "LEND_AND_BORROW"), and back.
const char* ToWire(ShareStrategy s);
std::optional<ShareStrategy> ParseShareStrategy(std::string_view s);

struct CapacityLimit {
  std::string capacity_unit;  // "NUM_INSTANCES" or an instance type
  int64_t max_capacity = 0;
};

// ---- Typed request fields, decoded once at the API edge (api/decode.cpp) and, for what is
// stored as JSON text, once again when the state is loaded. ----

// One evaluateOnExit entry of a service job's retryStrategy (ServiceJobEvaluateOnExit).
struct ExitRule {
  enum class Action { kRetry, kExit };
  Action action = Action::kRetry;
  std::optional<std::string> on_status_reason;  // a glob; absent: any reason matches
};

// SubmitServiceJob.retryStrategy: attempts 1..10, at most 5 rules.
struct RetryStrategy {
  int attempts = 1;
  std::vector<ExitRule> evaluate_on_exit;
};

// SubmitServiceJob.timeoutConfig.
struct TimeoutConfig {
  int64_t attempt_duration_seconds = 0;  // 0: none
};

// SubmitServiceJob.preemptionConfiguration.
struct PreemptionConfig {
  int64_t retries_before_termination = -1;  // preemptionRetriesBeforeTermination; -1: unlimited
};

// One entry of a fair-share policy's shareDistribution (AWS ShareAttributes).
struct ShareAttributes {
  std::string share_identifier;  // an identifier, or a prefix ending in '*'
  double weight_factor = 1.0;
};

// A scheduling policy's fairsharePolicy.
struct FairSharePolicy {
  int64_t share_decay_seconds = 0;
  int64_t compute_reservation = 0;
  std::vector<ShareAttributes> share_distribution;
};

// A job queue's jobStateTimeLimitActions entry. SAGEMAKER_TRAINING queues allow only the state
// RUNNABLE and the action TERMINATE, so those are not held.
struct TimeLimitAction {
  std::string reason;  // the wait code it matches, e.g. CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY
  int64_t max_time_seconds = 0;
};

struct ServiceEnvironment {
  std::string name;
  std::string arn;
  std::string type = "SAGEMAKER_TRAINING";
  ResourceState state = ResourceState::kEnabled;
  std::string status = "VALID";   // CREATING | UPDATING | DELETING | DELETED | VALID | INVALID
  std::vector<CapacityLimit> capacity_limits;
  Tags tags;
  uint64_t seq = 0;  // creation order; tie-breaker
};

// A scheduling policy: exactly one of a fair-share or a quota-share policy, kept as given
// (validated) in its wire form.
struct SchedulingPolicy {
  std::string name;
  std::string arn;
  std::string fairshare_policy_json;   // "" when absent
  std::string quotashare_policy_json;  // "" when absent
  // fairshare_policy_json, parsed (set when that is not ""; not stored: DecodeDoc parses it).
  std::optional<FairSharePolicy> fairshare;
  Tags tags;
  uint64_t seq = 0;
};

// One evaluateOnExit entry of a container job's retryStrategy: globs on the attempt's exit code,
// container reason and status reason (absent: any matches).
struct ContainerExitRule {
  bool retry = true;  // action RETRY, else EXIT
  std::string on_exit_code, on_reason, on_status_reason;  // "" absent
};

// What a container job takes from its job definition unless its SubmitJob overrides it: the
// definition's members decoded once, when it is registered or loaded, so that a submit reads
// typed values (ParseContainerTemplate). Numbers given as strings ("2") read as numbers, as AWS
// reads resourceRequirements' values; members of the wrong type read as absent.
struct ContainerTemplate {
  std::string image;                               // containerProperties.image
  std::string job_role_arn;                        // containerProperties.jobRoleArn
  std::vector<std::string> command;                // containerProperties.command
  std::map<std::string, std::string> environment;  // containerProperties.environment
  std::map<std::string, std::string> parameters;   // parameters (Ref::name substitutions)
  int64_t vcpus = 1;                               // vcpus, or resourceRequirements VCPU
  int64_t memory_mib = 2048;                       // memory, or resourceRequirements MEMORY
  int64_t gpus = 0;                                // resourceRequirements GPU
  int retry_attempts = 1;                          // retryStrategy.attempts
  std::vector<ContainerExitRule> evaluate_on_exit;  // retryStrategy.evaluateOnExit
  int64_t attempt_duration_seconds = 0;            // timeout.attemptDurationSeconds; 0: none
  int scheduling_priority = 0;                     // schedulingPriority
  bool propagate_tags = false;                     // propagateTags
};

// One revision of a Batch job definition (RegisterJobDefinition; docs/user-guide.md, "Job
// definitions"). Registering a name again adds the next revision; DeregisterJobDefinition makes
// one INACTIVE and it is kept, as AWS keeps it. Only type "container" is accepted.
struct JobDefinition {
  std::string name;
  int revision = 0;  // 1, 2, ... per name
  std::string arn;   // arn:aws:batch:<region>:<account>:job-definition/<name>:<revision>
  bool active = true;  // status ACTIVE, else INACTIVE
  std::string type;    // "container"
  // The accepted request's members that describe the job (parameters, containerProperties,
  // retryStrategy, timeout, propagateTags, platformCapabilities, schedulingPriority), as given,
  // a JSON object, echoed by DescribeJobDefinitions.
  std::string spec_json;
  ContainerTemplate container;  // spec_json, decoded (not stored: DecodeDoc decodes it)
  Tags tags;
  uint64_t seq = 0;
};

// A compute environment for Batch container jobs (CreateComputeEnvironment; docs/batch-jobs.md).
// What it offers on this host: vCPUs (computeResources.maxvCpus, or unmanagedvCpus), memory and
// GPUs (tags trainyard:memoryMiB and trainyard:gpus; EC2's own members are echoed, not acted on).
struct ComputeEnvironment {
  std::string name;
  std::string arn;
  std::string type = "MANAGED";  // MANAGED | UNMANAGED
  ResourceState state = ResourceState::kEnabled;
  std::string status = "VALID";
  int64_t vcpus = 0;
  int64_t memory_mib = 0;
  int64_t gpus = 0;
  std::string compute_resources_json;  // computeResources as given ("" absent), echoed by Describe
  int64_t unmanaged_vcpus = 0;
  Tags tags;
  uint64_t seq = 0;
};

struct ComputeEnvironmentOrder {
  int order = 0;
  std::string compute_environment;  // name
};

// A quota share of a quota-management job queue.
struct QuotaShare {
  std::string name;
  std::string arn;
  std::string queue;                          // job queue name
  std::vector<CapacityLimit> capacity_limits; // instance-type units
  ShareStrategy strategy = ShareStrategy::kLendAndBorrow;
  int64_t borrow_limit = -1;                  // percent of its own limit; -1 unlimited
  // preemptionConfiguration.inSharePreemption (stored as "ENABLED" / "DISABLED"): a job may
  // preempt a lower-priority job of its own share.
  bool in_share_preemption = false;
  ResourceState state = ResourceState::kEnabled;
  Tags tags;
  uint64_t seq = 0;
};

struct ServiceEnvironmentOrder {
  int order = 0;
  std::string service_environment;  // name (resolved from name or ARN at create time)
};

// How a job queue shares its capacity, from its scheduling policy: none (FIFO), a fair-share
// policy, or a quota-share policy. Fixed when the queue is created: neither a queue's policy type
// nor a policy's type can change.
enum class QueueKind { kFifo, kFairShare, kQuotaShare };

struct JobQueue {
  std::string name;
  std::string arn;
  ResourceState state = ResourceState::kEnabled;
  std::string status = "VALID";
  std::string status_reason = "JobQueue Healthy";
  int priority = 0;
  std::string job_queue_type = "SAGEMAKER_TRAINING";
  std::string scheduling_policy_arn;  // empty: FIFO
  // Derived from the policy when the queue is created, and again when it is loaded (not stored).
  QueueKind kind = QueueKind::kFifo;
  std::vector<ServiceEnvironmentOrder> service_environment_order;
  std::vector<ComputeEnvironmentOrder> compute_environment_order;  // container queues (type ECS)
  std::string job_state_time_limit_actions_json;  // stored as given ("[]" when absent)
  std::vector<TimeLimitAction> time_limit_actions;  // that, parsed (not stored: DecodeDoc parses it)
  Tags tags;
  uint64_t seq = 0;
};

enum class JobStatus { kSubmitted, kPending, kRunnable, kScheduled, kStarting, kRunning, kSucceeded, kFailed };
const char* JobStatusName(JobStatus s);
std::optional<JobStatus> ParseJobStatus(std::string_view s);
inline bool IsTerminal(JobStatus s) { return s == JobStatus::kSucceeded || s == JobStatus::kFailed; }
inline bool IsActive(JobStatus s) {  // holds capacity
  return s == JobStatus::kScheduled || s == JobStatus::kStarting || s == JobStatus::kRunning;
}


struct ContainerAttempt {
  bool has_exit_code = false;  // the container ran and exited
  int exit_code = 0;
  std::string reason;  // container.reason
  std::string log_stream_name;
  EpochMs started_at = 0;
  EpochMs stopped_at = 0;
  std::string status_reason;
};

struct JobDependency {
  std::string job_id;
  std::string type;  // "" (the whole job), "N_TO_N" or "SEQUENTIAL"
};

// A Batch container job (SubmitJob; docs/batch-jobs.md). An array job's parent is one record;
// its children are records of their own ("<parent id>:<index>"), made only as each is released.
struct ContainerJob {
  std::string id;
  std::string arn;
  std::string name;
  std::string queue;  // queue name
  uint64_t seq = 0;
  JobStatus status = JobStatus::kSubmitted;
  std::string status_reason;
  EpochMs created_at = 0;
  EpochMs started_at = 0;
  EpochMs stopped_at = 0;
  std::string job_definition;  // its ARN
  std::string image;           // containerProperties.image (BuildContainerSpec hands it to exec::UseContainerImage)
  std::vector<std::string> command;  // Ref:: already substituted
  std::map<std::string, std::string> environment;
  int64_t vcpus = 1;
  int64_t memory_mib = 2048;
  int64_t gpus = 0;
  std::string job_role_arn;
  int retry_attempts = 1;
  std::vector<ContainerExitRule> evaluate_on_exit;
  int64_t attempt_duration_seconds = 0;  // 0: none
  std::string share_identifier;
  int scheduling_priority = 0;
  Tags tags;
  bool propagate_tags = false;
  std::vector<JobDependency> depends_on;
  std::string owner;
  // Arrays: a parent has array_size > 0; a child names its parent and index.
  int64_t array_size = 0;
  int64_t next_index = 0;  // a parent's children below this index have been made
  std::string parent_id;
  int64_t array_index = -1;
  std::vector<ContainerAttempt> attempts;
  std::string compute_environment;  // where the current attempt holds capacity
  std::string credentials_token;    // "" without jobRoleArn
  std::string stop_reason;          // CancelJob / TerminateJob / timeout of the running attempt
  bool released = false;            // its dependencies are met (it or its children may run)
};

struct ServiceJobAttempt {
  std::string training_job_arn;
  std::string training_job_name;
  EpochMs started_at = 0;
  EpochMs stopped_at = 0;
  std::string status_reason;
};

struct ServiceJob {
  std::string id;
  std::string arn;
  std::string name;
  std::string queue;  // queue name
  uint64_t seq = 0;   // submit order, the last tie-breaker everywhere
  JobStatus status = JobStatus::kSubmitted;
  std::string status_reason;
  EpochMs created_at = 0;
  EpochMs scheduled_at = 0;
  EpochMs started_at = 0;
  EpochMs stopped_at = 0;
  int scheduling_priority = 0;
  bool has_scheduling_priority = false;
  std::string share_identifier;
  std::string quota_share_name;
  std::string retry_strategy_json;           // "" when absent
  std::string timeout_config_json;           // "" when absent
  std::string preemption_configuration_json; // "" when absent
  // The three above, parsed (each set when its text is not ""; not stored: DecodeDoc parses them).
  std::optional<RetryStrategy> retry_strategy;
  std::optional<TimeoutConfig> timeout;
  std::optional<PreemptionConfig> preemption;
  Tags tags;
  std::string owner;         // the submitting principal's ARN (trainyard:JobOwner); "" before users existed
  std::string payload;       // serviceRequestPayload, verbatim (only echoed; see `spec`)
  // The payload decoded (a tuning trial's: the tuning job's training definition with the trial's
  // values). Stored only for trials; any other job's is decoded from its payload on load.
  TrainingSpec spec;
  std::string client_token;  // "" when absent
  std::string request_hash;  // sha256 of the submit request, for idempotency checks
  bool is_terminated = false;
  std::string terminate_reason;  // set when TerminateServiceJob arrives for an active job
  std::vector<ServiceJobAttempt> attempts;
  // Preemptions (quota shares): attempts ended to give capacity to another job. They do not
  // count against retryStrategy.attempts.
  int64_t preempted_attempt_count = 0;
  std::string preempted_for;  // the job an attempt that is stopping now yields to
  // Work thrown away by its preemptions: instances × time from each preempted attempt's last
  // checkpoint (or its start) to its end, and the same in GPU-milliseconds (instance-ms × the
  // catalogue's GPUs per instance; 0 for a type without GPUs).
  int64_t preemption_lost_instance_ms = 0;
  int64_t preemption_lost_gpu_ms = 0;
  // Attempts whose training job could not get capacity (FailureReason CapacityError, or a spot job
  // that never launched before MaxWaitTimeInSeconds): retried without consuming retryStrategy.attempts.
  int64_t capacity_failed_attempt_count = 0;
  // Derived from the payload at submit time.
  std::string instance_type;
  int64_t instance_count = 1;
  int64_t max_runtime_ms = 0;  // StoppingCondition.MaxRuntimeInSeconds; 0: AWS's default, one day
  bool managed_spot = false;   // EnableManagedSpotTraining: it holds spot capacity ("<type>#spot")
  // The capacity ladder (docs/spot.md): acceptable rungs in order of preference ("" none), and
  // the capacity key the current attempt runs on ("" before the first).
  std::string capacity_ladder;
  int fallback_after_interruptions = 2;
  std::string attempt_capacity_key;
  // The hyperparameter tuning job it is a trial of ("" none): its attempts' TuningJobArn.
  std::string tuning_job_arn;
};

// SageMaker's TrainingJobStatus. InProgress and Stopping are live: the job may still run.
enum class TrainingJobStatus { kInProgress, kCompleted, kFailed, kStopping, kStopped };
// The wire and stored spelling ("InProgress", ...), and back (nullopt: not a status).
const char* ToWire(TrainingJobStatus s);
std::optional<TrainingJobStatus> ParseTrainingJobStatus(std::string_view s);
inline bool IsLive(TrainingJobStatus s) {
  return s == TrainingJobStatus::kInProgress || s == TrainingJobStatus::kStopping;
}

// SageMaker's SecondaryStatus, the phase within a TrainingJobStatus (and of each transition).
enum class SecondaryStatus {
  kStarting,
  kLaunchingMLInstances,
  kPreparingTrainingStack,
  kDownloading,
  kDownloadingTrainingImage,
  kTraining,
  kUploading,
  kStopping,
  kStopped,
  kMaxRuntimeExceeded,
  kCompleted,
  kFailed,
  kInterrupted,
  kMaxWaitTimeExceeded,
  kUpdating,
  kRestarting,
  kPending,
};
// The wire and stored spelling ("Starting", "MaxRuntimeExceeded", ...), and back.
const char* ToWire(SecondaryStatus s);
std::optional<SecondaryStatus> ParseSecondaryStatus(std::string_view s);
// Downloading, Training or Uploading: the phases a run is billed for.
inline bool IsRunPhase(SecondaryStatus s) {
  return s == SecondaryStatus::kDownloading || s == SecondaryStatus::kTraining || s == SecondaryStatus::kUploading;
}

// A managed warm pool's status (WarmPoolStatus.Status); kNone: a training job with no pool.
// A pool itself is only ever InUse or Available: a terminated pool is deleted.
enum class WarmPoolStatus { kNone, kInUse, kAvailable, kReused, kTerminated };
// The wire and stored spelling ("" for kNone, "InUse", ...), and back.
const char* ToWire(WarmPoolStatus s);
std::optional<WarmPoolStatus> ParseWarmPoolStatus(std::string_view s);

struct StatusTransition {
  SecondaryStatus status = SecondaryStatus::kStarting;
  EpochMs start = 0;
  EpochMs end = 0;  // 0: open
  std::string message;
};

struct MetricValue {
  std::string name;
  double value = 0;
  EpochMs timestamp = 0;
};

// SageMaker's per-instance system metrics (SageMaker's per-host training metrics), in the order a SystemSample
// holds them.
inline constexpr std::array<const char*, 5> kSystemMetricNames = {
    "CPUUtilization", "MemoryUtilization", "DiskUtilization", "GPUUtilization", "GPUMemoryUtilization"};

// One sample of one instance's system metrics (docs/metrics.md, "System metrics").
struct SystemSample {
  EpochMs timestamp = 0;
  std::array<std::optional<double>, kSystemMetricNames.size()> values;  // empty: not measured (no GPU)
};

// A training job's system metrics per host ("algo-<n>"), each oldest first.
using SystemSeries = std::map<std::string, std::vector<SystemSample>>;

// Why a training job is being stopped (or, for kInterrupt, why its run is ending while the job
// stays InProgress). kNone: no stop was asked for.
enum class StopCause {
  kNone,
  kUser,         // StopTrainingJob
  kTerminate,    // TerminateServiceJob of its service job
  kTimeout,      // the service job's attemptDurationSeconds
  kPreempt,      // a quota-share preemption
  kPending,      // MaxPendingTimeInSeconds
  kMaxWait,      // MaxWaitTimeInSeconds (managed spot)
  kDiskReserve,  // the data dir ran short of space
  kInterrupt,    // a spot interruption
};
// Its stored spelling ("" for kNone, then "user", "terminate", ...), and back.
const char* StopCauseName(StopCause c);
std::optional<StopCause> ParseStopCause(std::string_view s);

struct TrainingJob {
  std::string name;
  std::string arn;
  // The request it was made from, as accepted: a CreateTrainingJob request, its service job's
  // serviceRequestPayload or its tuning job's training definition. Kept only to be echoed
  // (EchoTrainingRequest, core/training_spec_json.h); the controller reads `spec`.
  std::string request_json;
  // What the job runs: the request decoded, then given its ladder rung, tuning trial values or
  // updated keep-alive. Stored beside request_json (a row stored before specs were has none, and
  // its request_json, which the controller then edited, is decoded instead).
  TrainingSpec spec;
  // Its tags: the request's Tags, then as AddTags and DeleteTags change them (spec.tags keeps
  // them as they were made).
  Tags tags;
  TrainingJobStatus status = TrainingJobStatus::kInProgress;
  SecondaryStatus secondary_status = SecondaryStatus::kStarting;
  std::vector<StatusTransition> transitions;
  std::string failure_reason;
  EpochMs creation_time = 0;
  EpochMs training_start_time = 0;
  EpochMs training_end_time = 0;
  EpochMs last_modified_time = 0;
  std::vector<MetricValue> final_metrics;
  std::string model_artifacts;  // S3ModelArtifacts
  std::string instance_type;
  int64_t instance_count = 1;
  std::string service_job_id;  // "" for jobs created directly through CreateTrainingJob
  std::string owner;           // the creating principal's ARN (its service job's submitter); "" unknown
  std::string tuning_job_arn;  // the hyperparameter tuning job it is a trial of ("" none): DescribeTrainingJob's TuningJobArn
  int attempt_number = 0;      // 1-based for service-job attempts
  uint64_t seq = 0;
  bool launched = false;       // handed to the executor
  bool stop_requested = false;
  StopCause stop_cause = StopCause::kNone;
  int stop_grace_seconds = 0;
  EpochMs last_checkpoint_time = 0;  // when the attempt last completed a checkpoint; 0: never
  // Managed spot (docs/spot.md): spec.managed_spot and spec.max_wait_seconds are the request's;
  // on_spot: the current (or last) run holds spot capacity. A spot interruption sets stop_cause
  // kInterrupt while the job stays InProgress; once the run has ended the job waits (not
  // launched) for spot capacity again.
  // The capacity ladder ("" none; docs/spot.md) and the rung the current run is on: instance_type
  // and on_spot follow the rung.
  std::string capacity_ladder;
  int fallback_after_interruptions = 2;
  int rung = 0;
  bool on_spot = false;
  int interruptions = 0;
  // Work the interruptions threw away: instances × time from each interrupted run's last
  // checkpoint (or its launch) to its end.
  EpochMs run_launched_at = 0;
  // The bearer token a role job's attempts fetch their role's credentials with (GET
  // /trainyard/v1/credentials); "" when the job runs with no role. Kept so that an attempt
  // re-adopted after a restart, which holds it in its environment, still can.
  std::string credentials_token;
  int64_t interruption_lost_instance_ms = 0;
  // Billing: runs that ended are summed in billed_seconds / cost_usd up to billed_until; the
  // current run is priced at run_price_per_hour (per instance) against run_on_demand_per_hour.
  double billed_seconds = 0;
  double cost_usd = 0;
  double on_demand_cost_usd = 0;
  EpochMs billed_until = 0;
  double run_price_per_hour = 0;
  double run_on_demand_per_hour = 0;

  // Seconds spent downloading, training and uploading in [from, to) (0, INT64_MAX: all runs).
  double RunSeconds(EpochMs from, EpochMs to, EpochMs now) const;
  // BillableTimeInSeconds / cost so far: closed runs plus the open part of the current one.
  double BillableSeconds(EpochMs now) const;
  double CostUsd(EpochMs now) const;
  double OnDemandCostUsd(EpochMs now) const;
  // Managed warm pools (docs/warm-pools.md); the keep-alive is spec.keep_alive_seconds, which
  // UpdateTrainingJob changes.
  std::string warm_pool_id;         // the pool this job runs on or left behind ("" none)
  WarmPoolStatus warm_pool_status = WarmPoolStatus::kNone;
  std::string reused_by_job;        // WarmPoolStatus.ReusedByJob
  std::string reused_from_job;      // the job whose pool this one took over ("" cold start)
  EpochMs warm_pool_available_since = 0;
  int64_t warm_pool_retained_seconds = 0;  // final ResourceRetainedBillableTimeInSeconds
  std::string warm_pool_end_reason;        // why the pool ended (trainyard extension)
};

// A managed warm pool: instances (here: their prepared workspaces under <data>/pools/<id>) kept
// after a training job for the next matching one. Status InUse while a job runs on it, Available
// while it waits; a terminated pool is deleted (its jobs keep the history).
struct WarmPool {
  std::string id;
  uint64_t seq = 0;                 // creation order; tie-breaker everywhere
  WarmPoolStatus status = WarmPoolStatus::kInUse;  // kInUse | kAvailable
  std::string owner_job;            // the job running on it, or the last one that did
  std::string instance_type;
  int64_t instance_count = 1;
  std::string match_key;            // canonical JSON of the matching criteria (SageMaker's warm-pool matching criteria)
  EpochMs created_at = 0;           // the chain's start: the 28-day lifetime counts from here
  EpochMs available_since = 0;
  EpochMs expires_at = 0;           // while Available
  // Where its latest job came from: a quota-share queue's pool counts against its share.
  std::string queue, quota_share, environment;
};

// The typed forms of wire text that is stored as given (a service job's retryStrategy,
// timeoutConfig and preemptionConfiguration, a policy's fairsharePolicy, a queue's
// jobStateTimeLimitActions). The text was validated when its request was accepted, so members
// of a wrong type read as absent. "" parses to the defaults. False: not JSON of the right shape.
bool ParseRetryStrategy(const std::string& text, RetryStrategy* out);
bool ParseTimeoutConfig(const std::string& text, TimeoutConfig* out);
bool ParsePreemptionConfig(const std::string& text, PreemptionConfig* out);
bool ParseFairSharePolicy(const std::string& text, FairSharePolicy* out);
// A job definition's spec_json (JobDefinition) decoded. False: not a JSON object.
bool ParseContainerTemplate(const std::string& spec_json, ContainerTemplate* out);
bool ParseTimeLimitActions(const std::string& text, std::vector<TimeLimitAction>* out);

// Durable encodings (JSON documents). Decode errors return false.
std::string EncodeDoc(const ServiceEnvironment& v);
std::string EncodeDoc(const SchedulingPolicy& v);
std::string EncodeDoc(const QuotaShare& v);
bool DecodeDoc(const std::string& doc, QuotaShare* v);
bool DecodeDoc(const std::string& doc, SchedulingPolicy* v);
std::string EncodeDoc(const JobQueue& v);
std::string EncodeDoc(const ServiceJob& v);
// A service job's stored row: {"job": <EncodeDoc>, "service_environment", "history": [[status, at]]}.
using StatusHistory = std::vector<std::pair<std::string, EpochMs>>;
std::string EncodeServiceJobRow(const ServiceJob& job, const std::string& service_environment, const StatusHistory& history);
bool DecodeServiceJobRow(const std::string& doc, ServiceJob* job, std::string* service_environment, StatusHistory* history);
std::string EncodeDoc(const TrainingJob& v);
bool DecodeDoc(const std::string& doc, ServiceEnvironment* v);
bool DecodeDoc(const std::string& doc, JobQueue* v);
bool DecodeDoc(const std::string& doc, ServiceJob* v);
bool DecodeDoc(const std::string& doc, TrainingJob* v);
std::string EncodeDoc(const JobDefinition& v);
bool DecodeDoc(const std::string& doc, JobDefinition* v);
std::string EncodeDoc(const ComputeEnvironment& v);
bool DecodeDoc(const std::string& doc, ComputeEnvironment* v);
std::string EncodeDoc(const ContainerJob& v);
bool DecodeDoc(const std::string& doc, ContainerJob* v);
std::string EncodeDoc(const WarmPool& v);
bool DecodeDoc(const std::string& doc, WarmPool* v);

}  // namespace ty
