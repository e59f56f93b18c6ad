// The controller: the one owner of live state.
//
// Mutations arrive as commands from API threads and are applied on the controller thread, in
// arrival order. Each loop turn applies every pending command, folds in executor events, runs a
// scheduling pass, commits all resulting changes in one store transaction, and only then answers
// the callers and tells the executor what to start or stop (persist, then act, then acknowledge).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <thread>

#include "control/commands.h"
#include "control/events.h"
#include "control/event_bus.h"
#include "control/principals.h"
#include "control/role_sessions.h"
#include "control/state.h"
#include "sched/sched.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/status.h"
#include "core/thread_annotations.h"

#include "exec/executor.h"
#include "store/event_log.h"
#include "store/store.h"

namespace ty::control {

// Where the controller's side effects go: the durable store, the event log that reads the events
// it commits, and the executor that runs attempts. Built by the composition root (cli/serve.cpp:
// SQLite and the local executor; tests: tests/testing/'s fakes). All three are required.
struct Ports {
  std::unique_ptr<store::Store> store;
  std::unique_ptr<store::EventLog> events;
  std::unique_ptr<exec::Executor> executor;
};

class Controller {
 public:
  // Loads durable state from ports.store and re-adopts running attempts through ports.executor.
  // REQUIRES: config.sandbox is resolved ("bwrap" or "none": the composition root probes
  // bubblewrap); config.data_dir exists (attempt, pool and bucket paths are built under it).
  static StatusOr<std::unique_ptr<Controller>> Open(const Config& config, const Clock& clock, Ports ports);
  ~Controller();

  // Two ways to drive the turns, chosen once:
  //  - Start() runs them on a loop thread (the server): commands from any thread wait for the
  //    turn that commits them;
  //  - without Start(), each command runs its own turn on the calling thread, and Step() runs a
  //    turn with no command (tests: with a ManualClock, every turn happens when the test says).
  void Start();     // starts the loop thread
  void Shutdown();  // stops accepting commands, finishes the current turn, joins
  // Runs one turn on the caller's thread: the queued commands, executor events, timers and a
  // scheduling pass, then the commit and the actions. REQUIRES: Start() was not called.
  void Step() EXCLUDES(turn_mu_, queue_mu_);
  // Asks for a turn soon (the executor calls it when a supervisor reports). Any thread.
  void Wake() EXCLUDES(queue_mu_);

  const Config& config() const { return config_; }
  std::string Arn(const std::string& service, const std::string& resource) const;

  // Runs f(const State&) under the shared lock and returns its result. f sees committed state
  // only: while a turn's commit is in flight (its changes are in memory, not yet durable) this
  // waits for it.
  template <typename F>
  auto Read(F&& f) const EXCLUDES(state_mu_) {
    ReaderLock lock(state_mu_);
    committed_cv_.wait(lock, [&]() REQUIRES_SHARED(state_mu_) { return !in_flight_.active; });
    return f(static_cast<const State&>(state_));
  }
  // Read() for what describes one service job (the job, its attempts' training jobs, its queue's
  // ARN): waits for an in-flight commit only when that commit changes one of those, so a Describe
  // does not wait for another job's fsync. REQUIRES: f reads nothing else that a turn changes.
  template <typename F>
  auto ReadServiceJob(const std::string& job_id, F&& f) const EXCLUDES(state_mu_) {
    ReaderLock lock(state_mu_);
    committed_cv_.wait(lock, [&]() REQUIRES_SHARED(state_mu_) {
      return !in_flight_.active || !in_flight_.Touches(state_, job_id);
    });
    return f(static_cast<const State&>(state_));
  }

  // ---- Batch: service environments and job queues. Commands come decoded (api/decode.h). ----
  StatusOr<ServiceEnvironment> CreateServiceEnvironment(const CreateServiceEnvironmentCommand& cmd);
  StatusOr<ServiceEnvironment> UpdateServiceEnvironment(const UpdateServiceEnvironmentCommand& cmd);
  Status DeleteServiceEnvironment(const DeleteServiceEnvironmentCommand& cmd);
  StatusOr<JobQueue> CreateJobQueue(const CreateJobQueueCommand& cmd);
  StatusOr<JobQueue> UpdateJobQueue(const UpdateJobQueueCommand& cmd);
  Status DeleteJobQueue(const DeleteJobQueueCommand& cmd);

  // ---- Batch: scheduling policies ----
  StatusOr<SchedulingPolicy> CreateSchedulingPolicy(const CreateSchedulingPolicyCommand& cmd);
  StatusOr<SchedulingPolicy> UpdateSchedulingPolicy(const UpdateSchedulingPolicyCommand& cmd);
  Status DeleteSchedulingPolicy(const DeleteSchedulingPolicyCommand& cmd);
  static const SchedulingPolicy* FindPolicy(const State& s, const std::string& arn);
  // The kind of a queue whose scheduling policy is `arn` ("" none): a policy that does not exist
  // counts as a fair-share policy with the defaults.
  static QueueKind KindOfPolicy(const State& s, const std::string& arn);
  // The weight of a fair share in a policy's shareDistribution: its exact entry, else the longest
  // matching '*' prefix, else 1.
  static double ShareWeight(const std::vector<ShareAttributes>& share_distribution, const std::string& share);

  // ---- Batch: quota shares ----
  // Job definitions (job_definitions.cpp). Register adds the name's next revision, ACTIVE;
  // Deregister makes one revision INACTIVE (kept, and described with that status).
  StatusOr<JobDefinition> RegisterJobDefinition(const RegisterJobDefinitionCommand& cmd);
  Status DeregisterJobDefinition(const DeregisterJobDefinitionCommand& cmd);
  // The revision `ref` names: "name:revision" or its ARN (a ref of another region or account, or
  // a bare name, names none). REQUIRES: the state lock is held (shared at least).
  static const JobDefinition* FindJobDefinition(const State& s, const std::string& ref);
  StatusOr<QuotaShare> CreateQuotaShare(const CreateQuotaShareCommand& cmd);
  StatusOr<QuotaShare> UpdateQuotaShare(const UpdateQuotaShareCommand& cmd);
  Status DeleteQuotaShare(const DeleteQuotaShareCommand& cmd);
  static const QuotaShare* FindQuotaShareByArn(const State& s, const std::string& arn);

  // ---- Batch: compute environments and container jobs (compute_environments.cpp,
  // container_jobs.cpp; docs/batch-jobs.md) ----
  StatusOr<ComputeEnvironment> CreateComputeEnvironment(const CreateComputeEnvironmentCommand& cmd);
  StatusOr<ComputeEnvironment> UpdateComputeEnvironment(const UpdateComputeEnvironmentCommand& cmd);
  Status DeleteComputeEnvironment(const DeleteComputeEnvironmentCommand& cmd);
  static const ComputeEnvironment* FindComputeEnvironment(const State& s, const std::string& name_or_arn);
  // A container queue's computeEnvironmentOrder resolved to names, sorted by order (1 to 3, each
  // existing and named once).
  static StatusOr<std::vector<ComputeEnvironmentOrder>> ResolveComputeOrder(const State& s,
                                                                            const std::vector<EnvironmentRef>& order);
  // The revision a SubmitJob names: as FindJobDefinition, or a bare name's latest ACTIVE revision.
  static const JobDefinition* FindSubmittableDefinition(const State& s, const std::string& ref);
  // Queued SUBMITTED; dependencies, the definition and the queue are checked in the turn
  // (ClientException: InvalidArgument). An array job is stored once, whatever its size.
  StatusOr<ContainerJob> SubmitJob(const SubmitJobCommand& cmd);
  // CancelJob: only a job that has not started (else nothing changes); TerminateJob: also a
  // STARTING or RUNNING one, whose attempt is stopped. Either way FAILED with the reason; on an
  // array parent, every child not ended yet.
  Status StopJob(const StopJobCommand& cmd);
  // An array parent's children per status, those not made yet included (DescribeJobs).
  static std::map<JobStatus, int64_t> ArrayStatusSummary(const State& s, const ContainerJob& parent);

  // ---- Batch: service jobs ----
  StatusOr<ServiceJob> SubmitServiceJob(const SubmitServiceJobCommand& cmd);
  Status TerminateServiceJob(const TerminateServiceJobCommand& cmd);
  // TerminateServiceJobs: each as TerminateServiceJob, all in one turn (one commit); the outcome
  // of each, in order. Not OK only when the turn could not be stored.
  StatusOr<std::vector<Status>> TerminateServiceJobs(const std::vector<TerminateServiceJobCommand>& cmds);
  StatusOr<ServiceJob> UpdateServiceJob(const UpdateServiceJobCommand& cmd);

  // ---- Tags (tags.cpp) of what has an ARN: service environments, job queues, scheduling
  // policies, quota shares and service jobs (Batch); training and tuning jobs (SageMaker). InvalidArgument
  // for an ARN of another service, region or account, or of a kind trainyard does not tag;
  // NotFound when no such resource exists; LimitExceeded past 50 tags on the resource. ----
  Status TagResource(const TagResourceCommand& cmd);
  Status UntagResource(const UntagResourceCommand& cmd);
  StatusOr<Tags> TagsOf(const std::string& service, const std::string& arn) const;

  // ---- SageMaker ----
  StatusOr<TrainingJob> CreateTrainingJob(const CreateTrainingJobCommand& cmd);
  Status StopTrainingJob(const std::string& name);
  // A spot interruption of a managed spot job's running instances (`trainyard admin interrupt`):
  // they get a notice and spot_notice_seconds, then the job waits for spot capacity again.
  Status InterruptTrainingJob(const std::string& name);
  // ResourceConfig.KeepAlivePeriodInSeconds of a job whose warm pool is Available; 0 releases it.
  StatusOr<TrainingJob> UpdateTrainingJob(const UpdateTrainingJobCommand& cmd);

  // ---- SageMaker: hyperparameter tuning jobs (tuning.cpp; docs/tuning.md) ----
  // AlreadyExists for a taken name; NotFound for a warm-start parent that does not exist;
  // InvalidArgument for a live parent or a configuration the search refuses. Nothing is stored
  // on refusal. The first trials are created in the same turn.
  StatusOr<TuningJob> CreateTuningJob(const CreateTuningJobCommand& cmd);
  // Stops its running trials; the tuning job is Stopping until they have ended, then Stopped.
  Status StopTuningJob(const std::string& name);
  // Only an ended tuning job that no live tuning job warm-starts from (AlreadyExists otherwise:
  // ResourceInUse). Its training jobs stay.
  Status DeleteTuningJob(const std::string& name);

  // ---- CloudWatch metrics (cloudwatch.cpp; docs/metrics.md, "The CloudWatch API") ----
  // Stores every datum in one turn, or none: LimitExceeded when the new series would pass the cap.
  Status PutMetricData(const std::vector<CwDatum>& data);

  // ---- CloudWatch alarms (alarms.cpp; docs/alarms.md, "CloudWatch alarms") ----
  // Creates the alarm (INSUFFICIENT_DATA until evaluated) or replaces its definition, keeping its
  // state. InvalidArgument for a configuration-file rule's name; LimitExceeded past max_alarms.
  Status PutMetricAlarm(const std::string& name, MetricAlarmDefinition definition);
  // All or nothing: NotFound for a name that is no alarm, InvalidArgument for a rule's.
  Status DeleteAlarms(const std::vector<std::string>& names);
  // Sets the state (an event and history, as an evaluation would) until the next evaluation.
  Status SetAlarmState(const std::string& name, const std::string& value, const std::string& reason,
                       const std::string& reason_data);
  // Enable/DisableAlarmActions: names that are no API alarm are ignored, as AWS does.
  Status SetAlarmActions(const std::vector<std::string>& names, bool enabled);

  // ---- Principals (principals.cpp; docs/security.md, "Users and keys") ----
  StatusOr<IamUser> CreateUser(const CreateUserCommand& cmd);
  // Refused while the user holds access keys or policies (IAM's DeleteConflict).
  Status DeleteUser(const std::string& name);
  StatusOr<IamUser> TagUser(const TagUserCommand& cmd);
  StatusOr<IamAccessKey> CreateAccessKey(const CreateAccessKeyCommand& cmd);
  // `user` "" : whoever holds the key.
  Status DeleteAccessKey(const std::string& user, const std::string& id);
  StatusOr<IamPolicy> CreatePolicy(const CreatePolicyCommand& cmd);
  Status DeletePolicy(const std::string& name_or_arn);
  StatusOr<IamUser> AttachPolicy(const AttachPolicyCommand& cmd);
  // Roles (docs/security.md, "Roles for jobs"). DeleteRole is refused while policies are attached.
  StatusOr<IamRole> CreateRole(const CreateRoleCommand& cmd);
  Status DeleteRole(const std::string& name);
  StatusOr<IamRole> AttachRolePolicy(const AttachRolePolicyCommand& cmd);
  // Replaces a role's trust policy; applies to the next AssumeRole and the next job started.
  StatusOr<IamRole> UpdateAssumeRolePolicy(const UpdateAssumeRolePolicyCommand& cmd);
  // The users, keys and policies as of the last commit (never null). Any thread; what it returns
  // stays valid and unchanged while held. A key or policy change is in it once acknowledged.
  std::shared_ptr<const PrincipalDirectory> directory() const EXCLUDES(directory_mu_);
  // The temporary credentials of running jobs' roles (role_sessions.h). Any thread.
  RoleSessions& role_sessions() { return role_sessions_; }
  // Where jobs reach this server (its listener, once bound) and the CA bundle they trust it with
  // ("" without TLS): a role job's environment points the AWS SDKs there. Set before Start().
  void SetJobEndpoint(const std::string& url, const std::string& ca_bundle) {
    job_endpoint_ = url;
    job_ca_bundle_ = ca_bundle;
  }
  // ---- EventBridge (event_bus.cpp; docs/events.md, "EventBridge API") ----
  // A name of a configuration-file webhook is refused (it is listed as a rule, read-only).
  StatusOr<EventRule> PutRule(const PutRuleCommand& cmd);  // creates or updates, as AWS
  Status DeleteRule(const std::string& name);                // refused while it has targets
  Status SetRuleEnabled(const std::string& name, bool enabled);
  Status PutTargets(const PutTargetsCommand& cmd);
  Status RemoveTargets(const RemoveTargetsCommand& cmd);
  StatusOr<EventConnection> CreateConnection(const CreateConnectionCommand& cmd);
  Status DeleteConnection(const std::string& name);  // refused while an API destination uses it
  StatusOr<ApiDestination> CreateApiDestination(const CreateApiDestinationCommand& cmd);
  Status DeleteApiDestination(const std::string& name);  // refused while a rule targets it
  // Stores users' events in the event log (FailedPrecondition when events are off).
  Status PutEvents(const PutEventsCommand& cmd);

  // Audit (docs/security.md, "Audit"): stores one API call's record, rendered, in a turn of its
  // own, and returns once it is committed. For calls that reached no command (those that did are
  // stored with the command's commit: control/audit.h).
  Status RecordAudit(const std::string& key, EpochMs at, std::string doc);

  // Events (docs/events.md). The renderer is installed before Start(); without one (or with
  // [events] enabled = false) no events are stored.
  void SetEventRenderer(EventRenderer renderer) { event_renderer_ = std::move(renderer); }
  store::EventLog* events() const { return event_log_.get(); }

  // The controller's clock (the offset one under `serve --clock=offset`).
  EpochMs Now() const { return clock_.now_ms(); }
  // Test-only: moves the server's clock on. FailedPrecondition unless the server runs with an
  // adjustable clock (SetAdjustableClock). REQUIRES: seconds > 0.
  StatusOr<EpochMs> AdvanceClock(int64_t seconds);
  void SetAdjustableClock(OffsetClock* clock) { adjustable_clock_ = clock; }

  // Resolves a queue / environment given by name or ARN. Call under Read().
  static const JobQueue* FindQueue(const State& s, const std::string& name_or_arn);
  static const ServiceEnvironment* FindEnvironment(const State& s, const std::string& name_or_arn);

  // One instance's log of a training job, for the Logs API's readers (Executor::OpenLog); null
  // when there is none. Any thread; takes no lock.
  std::unique_ptr<exec::LogFile> OpenLog(const std::string& training_job, int instance) const;
  // Complete lines of one instance's log of a training job from byte `offset` (Executor::ReadLog).
  // Any thread; takes no lock.
  exec::Executor::LogChunk ReadLog(const std::string& training_job, int instance, int64_t offset,
                                   int64_t max_bytes) const;
  // A Batch container attempt's log (its only instance's), by the executor's attempt id (the last
  // segment of the attempt's container.logStreamName); null when there is none. Any thread; no lock.
  std::unique_ptr<exec::LogFile> OpenContainerLog(const std::string& attempt_id) const;

  // The resolved sandbox mode, "bwrap" or "none" (what CheckTrainingRequest checks against).
  const std::string& sandbox() const { return sandbox_; }

 private:
  class Turn;  // the changes of one loop turn (defined in controller.cpp)
  using Command = std::function<void(Turn&)>;
  // Called once the command's turn is over, with the outcome of its commit: a caller whose
  // change could not be stored is answered with that error instead of its result.
  using Ack = std::function<void(const Status& commit)>;

  Controller(Config config, const Clock& clock, Ports ports);

  // Queues a command and waits until its turn has been committed. The command sets *result.
  template <typename T>
  StatusOr<T> Execute(std::function<StatusOr<T>(Turn&)> fn);
  Status ExecuteStatus(std::function<Status(Turn&)> fn);

  void Loop();
  // When a turn next has work that falls due by the clock: the next tick (500 ms after the last),
  // a fair-share arrival batch closing, or a capacity-failure backoff ending. Loop waits at most
  // until then instead of a whole tick.
  EpochMs NextDeadline() REQUIRES(turn_mu_);
  void RunTurn(std::deque<std::pair<Command, Ack>>& batch) REQUIRES(turn_mu_) EXCLUDES(queue_mu_);
  void LoadState() REQUIRES(turn_mu_, state_mu_);
  void ReadoptAttempts() REQUIRES(turn_mu_, state_mu_);

  void LoadPrincipals(State& s) REQUIRES(turn_mu_, state_mu_);
  void WritePrincipals(const Turn& t, std::vector<store::Write>* writes) REQUIRES(turn_mu_, state_mu_);
  void LoadEventBus(State& s) REQUIRES(turn_mu_, state_mu_);
  void WriteEventBus(const Turn& t, std::vector<store::Write>* writes) REQUIRES(turn_mu_, state_mu_);
  // Rebuilds directory_ from state_ (after a commit that changed the principals).
  void PublishDirectory() REQUIRES(turn_mu_) EXCLUDES(state_mu_, directory_mu_);
  // Steps of a turn (controller thread, exclusive lock held).
  void AdmitSubmitted(Turn& t) REQUIRES(turn_mu_, state_mu_);
  // The events the controller made itself, then `polled` (read from the executor before the lock).
  void ApplyExecutorEvents(Turn& t, const std::vector<exec::AttemptEvent>& polled) REQUIRES(turn_mu_, state_mu_);
  void ApplyEvent(Turn& t, const exec::AttemptEvent& e) REQUIRES(turn_mu_, state_mu_);
  // Keeps the executor's view of its cluster for this turn's passes; capacity that changed is looked
  // at again (a node back from down offers its instances). A lowered capacity preempts nothing.
  void TakeClusterCapacity(Turn& t, std::shared_ptr<const exec::CapacityReport> cluster) REQUIRES(turn_mu_, state_mu_);
  // Adds what a preempted attempt that ended at `end` threw away to the job's loss counters.
  void CountPreemptionLoss(ServiceJob& job, const TrainingJob& tj, EpochMs end) const REQUIRES(turn_mu_, state_mu_);
  void EnforceTimeouts(Turn& t) REQUIRES(turn_mu_, state_mu_);
  // Spot (spot.cpp). Interrupt: notice, then the run ends and the job waits for spot capacity.
  void Interrupt(Turn& t, TrainingJob& tj, const std::string& why) REQUIRES(turn_mu_, state_mu_);
  // The configured random interruption rates over the last `elapsed_ms`.
  void InjectSpotInterruptions(Turn& t, EpochMs elapsed_ms) REQUIRES(turn_mu_, state_mu_);
  // Ends the billing of tj's current run at `end` (its seconds priced at the run's market).
  void CloseRun(TrainingJob& tj, EpochMs end) const REQUIRES(turn_mu_, state_mu_);
  // Prices the run about to start: its market, on-demand price and price per instance-hour.
  void PriceRun(TrainingJob& tj, bool spot) const REQUIRES(turn_mu_, state_mu_);
  void SchedulePass(Turn& t) REQUIRES(turn_mu_, state_mu_);
  // Container jobs (container_jobs.cpp).
  void SetContainerStatus(Turn& t, ContainerJob& j, JobStatus to, const std::string& reason) REQUIRES(turn_mu_, state_mu_);
  void IndexContainer(ContainerJob& j) REQUIRES(turn_mu_, state_mu_);
  void UnindexContainer(const ContainerJob& j) REQUIRES(turn_mu_, state_mu_);
  // Dependencies of `j` met (release), failed (fail, transitively) or still waiting.
  void EvaluateDependencies(Turn& t, ContainerJob& j) REQUIRES(turn_mu_, state_mu_);
  void ContainerJobEnded(Turn& t, const ContainerJob& j) REQUIRES(turn_mu_, state_mu_);
  void AdmitContainerJobs(Turn& t) REQUIRES(turn_mu_, state_mu_);
  void ScheduleContainerJobs(Turn& t) REQUIRES(turn_mu_, state_mu_);
  // The next child of a released array parent that may start (made here), or null.
  ContainerJob* NextChild(Turn& t, ContainerJob& parent) REQUIRES(turn_mu_, state_mu_);
  void StartContainerAttempt(Turn& t, ContainerJob& j, const std::string& environment) REQUIRES(turn_mu_, state_mu_);
  exec::AttemptSpec BuildContainerSpec(const ContainerJob& j) const REQUIRES(turn_mu_, state_mu_);
  // A role job's environment: the container credentials provider's URI and bearer `token`, and
  // AWS_ENDPOINT_URL and the region of this server (docs/security.md, "Roles for jobs"); nothing
  // when `token` is "" (no role) or the server has no job endpoint.
  void AddRoleEnvironment(exec::AttemptSpec& spec, const std::string& token) const;
  // True when `e` is a container attempt's (applied here).
  bool ApplyContainerEvent(Turn& t, const exec::AttemptEvent& e) REQUIRES(turn_mu_, state_mu_);
  void EnforceContainerTimeouts(Turn& t) REQUIRES(turn_mu_, state_mu_);
  void ReadoptContainerAttempts() REQUIRES(turn_mu_, state_mu_);
  static void LoadContainerJob(State& s, ContainerJob j);
  std::set<uint64_t> container_pending_admit_;  // SUBMITTED container jobs, admitted next turn
  // `offered` gains every job the pass is offered (seq, job), so that its decisions find them without a lookup in `jobs`.
  sched::FairShare FairShareOf(Turn& t, const JobQueue& q, size_t prefix,
                               std::vector<std::pair<uint64_t, ServiceJobState*>>& offered) REQUIRES(turn_mu_, state_mu_);
  bool IsQuotaQueue(const JobQueue& q) const REQUIRES(turn_mu_, state_mu_);
  void ScheduleQuotaQueue(Turn& t, const JobQueue& q) REQUIRES(turn_mu_, state_mu_);
  // A quota-share job waits for `reason` (its code and, for a job that can never run, its status reason).
  void SetQuotaWait(Turn& t, ServiceJobState& js, const std::string& reason) REQUIRES(turn_mu_, state_mu_);
  // How the fields of a placement are spelled in refusals: SubmitServiceJob's members, or the
  // tags of a tuning job whose trials go through a queue.
  struct PlacementFields {
    const char* queue;
    const char* share_identifier;
    const char* quota_share_name;
    const char* managed_spot;
  };
  static constexpr PlacementFields kSubmitFields{"jobQueue", "shareIdentifier", "quotaShareName",
                                                 "serviceRequestPayload.EnableManagedSpotTraining"};
  static constexpr PlacementFields kTrialQueueFields{
      "Tags: trainyard:job-queue", "Tags: trainyard:share-identifier", "Tags: trainyard:quota-share-name",
      "TrainingJobDefinition.EnableManagedSpotTraining"};
  // SubmitServiceJob's rules for where a job may go: the queue exists, is a SAGEMAKER_TRAINING
  // queue and ENABLED; a share identifier exactly on fair-share queues, an ENABLED quota share
  // exactly on quota-share queues (and no managed spot there). Changes nothing.
  StatusOr<const JobQueue*> CheckPlacement(const std::string& queue_ref, const std::string& share_identifier,
                                           const std::string& quota_share_name, bool managed_spot,
                                           const PlacementFields& fields) const REQUIRES(turn_mu_, state_mu_);
  // Adds a checked job to `q` as SUBMITTED (its id, ARN and seq drawn here).
  ServiceJob AddServiceJob(Turn& t, ServiceJob job, const JobQueue& q) REQUIRES(turn_mu_, state_mu_);
  void StartServiceJob(Turn& t, ServiceJobState& js, const std::string& environment) REQUIRES(turn_mu_, state_mu_);
  void StartPendingTrainingJobs(Turn& t) REQUIRES(turn_mu_, state_mu_);
  // Tuning jobs (tuning.cpp): each live one's step, once per turn, after the executor's events
  // and the metric tails and before pending training jobs are launched.
  void RunTuningJobs(Turn& t) REQUIRES(turn_mu_, state_mu_);
  // MaxRuntimeInSeconds, StopHyperParameterTuningJob, early stopping, completion, then new
  // trials up to MaxParallelTrainingJobs.
  void StepTuningJob(Turn& t, TuningJob& tuning) REQUIRES(turn_mu_, state_mu_);
  // The one place a trial starts: its training job, created in this turn and stored in its
  // commit with the trial's record. (Routing trials through a Batch queue goes here.)
  // With a job queue (TuningJob::queue, docs/tuning.md "Trials in a job queue") the trial is a
  // service job in that queue, and its training jobs are that job's attempts. Refused (the queue
  // or share went away): nothing changes, and the caller fails the tuning job.
  Status StartTrial(Turn& t, TuningJob& tuning, const tune::Suggestion& suggestion) REQUIRES(turn_mu_, state_mu_);
  // Stops a running trial (its training job; in a job queue, terminates its service job).
  void StopTrial(Turn& t, const TuningTrial& rec, const std::string& message) REQUIRES(turn_mu_, state_mu_);
  // A trial's records brought up to date with its service job: the current attempt's training job.
  void FollowQueuedTrials(Turn& t, TuningJob& tuning) REQUIRES(turn_mu_, state_mu_);
  // The tuning job's search, made on first use after a start (a failure fails the tuning job: null).
  tune::Search* SearchOf(Turn& t, TuningJob& tuning) REQUIRES(turn_mu_, state_mu_);
  std::vector<tune::Trial> WarmStartTrials(const TuningJob& tuning) const REQUIRES(turn_mu_, state_mu_);
  void SetTuningStatus(Turn& t, TuningJob& tuning, TuningJobStatus status) REQUIRES(turn_mu_, state_mu_);
  void TuningJobEvent(Turn& t, const TuningJob& tuning, const std::string& reason) REQUIRES(turn_mu_, state_mu_);
  void TailMetrics(Turn& t) REQUIRES(turn_mu_, state_mu_);
  // Reads at most max_bytes more of each instance's log of tj (whole lines) into its
  // MetricDefinitions series; kMetricTailBytesPerTurn keeps one chatty job from holding a turn.
  void TailJobMetrics(Turn& t, TrainingJob& tj, int64_t max_bytes) REQUIRES(turn_mu_, state_mu_);
  static constexpr int64_t kMetricTailBytesPerTurn = 8 << 20;
  struct Tail;
  struct TailRead;  // new lines of one job's files, read ahead (turn.h)
  // Before the lock: reads the new lines of the logs and system metrics files of the jobs the
  // last tick tailed (tailing_) into their Tail::prefetched. Controller thread, no state_ access.
  void PrefetchTails() REQUIRES(turn_mu_);
  void TailSystemMetrics(Turn& t, const TrainingJob& tj, Tail& tail, const TailRead& read) REQUIRES(turn_mu_, state_mu_);
  // Forgets where the metrics of a job's logs were read to (its run ended), storing what is unsaved.
  void DropTail(Turn& t, const std::string& name) REQUIRES(turn_mu_, state_mu_);
  // Launches tj's run on `spot` or on-demand capacity of tj.instance_type.
  void LaunchTrainingJob(Turn& t, TrainingJob& tj, bool spot) REQUIRES(turn_mu_, state_mu_);
  void FinishServiceJobAttempt(Turn& t, ServiceJobState& js, const TrainingJob& tj) REQUIRES(turn_mu_, state_mu_);
  // True when the lost run of tj is started again under its RetryStrategy (the job stays InProgress).
  bool RestartAfterInfrastructureFailure(Turn& t, TrainingJob& tj, const exec::AttemptEvent& e) REQUIRES(turn_mu_, state_mu_);
  // MaxRuntimeInSeconds less the time tj's runs have already used (may be <= 0).
  int64_t RemainingRuntimeSeconds(const TrainingJob& tj, EpochMs now) const REQUIRES(turn_mu_, state_mu_);
  void SetJobStatus(Turn& t, ServiceJobState& js, JobStatus status, const std::string& reason) REQUIRES(turn_mu_, state_mu_);
  // TerminateServiceJob's change within a turn (NotFound when no job has that id or ARN).
  Status Terminate(Turn& t, const TerminateServiceJobCommand& cmd) REQUIRES(turn_mu_, state_mu_);
  // Records js's wait code; a new blocked code ("CAPACITY:...", "MISCONFIGURATION:...") is a
  // "Batch Job Queue Blocked" event whose statusReason is `reason` (the code when empty).
  void SetWaitCode(Turn& t, ServiceJobState& js, const std::string& code, const std::string& reason) REQUIRES(turn_mu_, state_mu_);
  // [console] share_history_interval_seconds: on a tick at or past the next sample time, one
  // sample of every queue's share standings into State::share_history (a clock jump over several
  // intervals takes one); queues deleted since are forgotten. Controller thread, after the pass.
  void SampleShareHistory(EpochMs now) REQUIRES(turn_mu_, state_mu_);
  // Once a minute: each queue's AWS/Batch metrics since the last sample into the CloudWatch store
  // (cloudwatch.cpp; docs/metrics.md, "The CloudWatch API").
  void SampleBatchMetrics(Turn& t) REQUIRES(turn_mu_, state_mu_);
  // Alarms (alarms.cpp): evaluates every [[alarms]] rule about once a second, and every metric
  // alarm once a minute; a change of state is an event.
  void EvaluateAlarms(Turn& t) REQUIRES(turn_mu_, state_mu_);
  void EvaluateMetricAlarms(Turn& t) REQUIRES(turn_mu_, state_mu_);
  // EventBridge rules with a rate() schedule (event_bus.cpp): a "Scheduled Event" for each rule
  // whose next period the clock has reached since the last tick (one, however far it moved).
  void FireScheduledRules(Turn& t) REQUIRES(turn_mu_, state_mu_);
  // Moves alarm `name` to `value`: its state, a StateUpdate history item, an event (whose data is
  // the alarm's configuration, from its definition or its configuration-file rule), and an Action
  // history item per action of the new state (actions are not run: docs/alarms.md).
  void ChangeAlarmState(Turn& t, const std::string& name, AlarmState& st, const std::string& value,
                        const std::string& reason, const std::string& reason_data) REQUIRES(turn_mu_, state_mu_);
  // A service job reached SUCCEEDED or FAILED (for failure_ratio).
  void NoteEnding(const ServiceJob& job, EpochMs at) REQUIRES(turn_mu_, state_mu_);
  // Renders the turn's event triggers into store writes (sequence numbers from next_event_seq_).
  void RenderEvents(Turn& t, std::vector<store::Write>* writes) REQUIRES(turn_mu_, state_mu_);
  // [events] retention_days and max_events, [audit] retain_days and max_records: deletes the
  // oldest events and audit records (once a minute at most).
  void PruneEvents(EpochMs now) REQUIRES(turn_mu_);
  // Adds an audit record to the turn's writes and, as an "AWS API Call via CloudTrail" event, to its events.
  static void AddAudit(Turn& t, const std::string& key, EpochMs at, std::string doc);
  // Counts a status change of js to `to` in the metrics (called before the change).
  void CountTransition(Turn& t, const ServiceJobState& js, JobStatus to) REQUIRES(turn_mu_, state_mu_);
  // A "SageMaker Training Job State Change" event for a new SecondaryStatus.
  void TrainingJobEvent(Turn& t, const std::string& name, SecondaryStatus secondary, const std::string& message,
                        EpochMs at) REQUIRES(turn_mu_, state_mu_);
  void AddTransition(Turn& t, TrainingJob& tj, SecondaryStatus secondary, const std::string& message, EpochMs at)
      REQUIRES(turn_mu_, state_mu_);
  void ReleaseCapacity(TrainingJob& tj) REQUIRES(turn_mu_, state_mu_);
  // [logs] retention_days: the instance logs of training jobs that ended longer ago than that
  // (once a minute at most), added to *jobs for the turn to discard (Executor::DiscardLogs)
  // outside the lock.
  void SweepLogs(EpochMs now, std::vector<std::string>* jobs) REQUIRES(turn_mu_, state_mu_);
  // Warm pools (warm_pools.cpp). On launch: takes over a matching Available pool or starts a new
  // one (KeepAlivePeriodInSeconds > 0); returns the transition message saying which.
  std::string AttachWarmPool(Turn& t, TrainingJob& tj) REQUIRES(turn_mu_, state_mu_);
  // Frees Available pools of `type` until `count` instances are free on the host: pools that no
  // waiting job matches first, oldest first.
  void SetPoolOrigin(WarmPool& p, const TrainingJob& tj) const REQUIRES(turn_mu_, state_mu_);
  void MakeRoom(Turn& t, const std::string& type, int64_t count, const std::string& for_job) REQUIRES(turn_mu_, state_mu_);
  // On the job's final status: keeps its pool Available or terminates it (creation rules, quota).
  void SettleWarmPool(Turn& t, TrainingJob& tj) REQUIRES(turn_mu_, state_mu_);
  void TerminateWarmPool(Turn& t, const std::string& id, const std::string& reason) REQUIRES(turn_mu_, state_mu_);
  void ExpireWarmPools(Turn& t) REQUIRES(turn_mu_, state_mu_);
  std::string WarmPoolDir(const std::string& id) const { return data_dir_ + "/pools/" + id; }
  // Moves a training job to Stopping for `cause` and,
  // when it was launched, asks the executor to stop it after the commit.
  // grace_seconds < 0: [executor] stop_grace_seconds.
  void RequestStop(Turn& t, TrainingJob& tj, StopCause cause, const std::string& message, int grace_seconds = -1) REQUIRES(turn_mu_, state_mu_);
  // [server] data_dir_reserve_mib (docs/configuration.md, "Disk reserve"): folds in the data
  // dir's free space, measured before the lock (one statvfs per tick, MeasureDiskFree: -1 when
  // unknown or no reserve is set); under the reserve, reclaims finished attempts' scratch, holds
  // back every start (disk_low_) and stops the running job that uses most of the data dir.
  void CheckDiskReserve(Turn& t, int64_t free_bytes) REQUIRES(turn_mu_, state_mu_);
  int64_t MeasureDiskFree() const;
  // Removes the workspaces (not the logs) of attempts whose training job is final; returns how many.
  size_t ReclaimFinishedScratch() REQUIRES(turn_mu_, state_mu_);
  // Why nothing starts while disk_low_ (a job's wait reason).
  std::string DiskReserveReason() const;
  exec::AttemptSpec BuildAttemptSpec(const TrainingJob& tj) const REQUIRES(turn_mu_, state_mu_);
  // Whom a job's reads and writes of the embedded store are decided as, with that principal's
  // policies as they are now (JobPrincipalOf); nullopt: unrestricted.
  std::optional<exec::DataAccess> JobDataAccess(const TrainingJob& tj, const std::string& role_arn) const;
  // A session for tj's role when its RoleArn names one of the account's roles (the attempt
  // starts or is re-adopted); none otherwise.
  void MintRoleSession(TrainingJob& tj, EpochMs now) REQUIRES(turn_mu_, state_mu_);
  // Whether tj's owner may have it run as its RoleArn now (MayRunAsRole with SageMaker's
  // principal): checked each time an attempt starts, so a trial, a retry or a queued job started
  // long after it was submitted is judged on its owner's current policies.
  Status TrainingJobRole(const TrainingJob& tj, EpochMs now) const;
  // An attempt whose role was refused: it is not started, gets no credentials and ends at once
  // (next turn) as failed, its reason naming the refusal.
  void RefuseAttempt(const std::string& attempt_id, const Status& why, EpochMs now) REQUIRES(turn_mu_);
  std::string FileSystemPath(const std::string& id) const;  // [file_systems] entry, or ""

  // ---- constant after construction ----
  Config config_;
  const Clock& clock_;
  std::string data_dir_;
  std::string sandbox_;  // "bwrap" when the executor sandboxes its instances, else "none"
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<exec::Executor> executor_;
  std::unique_ptr<store::EventLog> event_log_;
  EventRenderer event_renderer_;

  // ---- guarded by state_mu_ (exclusive on the controller thread when writing) ----
  // A turn changes state_ under the exclusive lock, releases it, and commits; readers take it
  // shared. Between the release and the end of the commit state_ holds changes that are not yet
  // durable, named by in_flight_: Read() waits them out, ReadServiceJob() only when they touch
  // its job. Nothing writes state_ during a commit (the turn's thread is the one committing).
  mutable SharedMutex state_mu_;
  State state_ GUARDED_BY(state_mu_);
  struct InFlight {
    bool active = false;
    std::set<uint64_t> jobs;                   // service jobs, by seq
    std::set<std::string> training_jobs;       // by name
    bool queues = false;                       // a queue was changed or deleted
    bool Touches(const State& s, const std::string& job_id) const;
  };
  InFlight in_flight_ GUARDED_BY(state_mu_);
  mutable std::condition_variable_any committed_cv_;  // in_flight_ was cleared

  // ---- controller-thread only: the thread running a turn (it holds turn_mu_) ----
  // A turn whose commit failed (a full disk): its changes are in state_ but not in the store, and
  // its actions (starts, stops) were not taken. Each later turn writes them again and acts on
  // them once a commit succeeds. Null when every turn is stored.
  std::unique_ptr<Turn> unsaved_ GUARDED_BY(turn_mu_);
  // The data dir's free space was under the reserve at the last check (starts are held back).
  bool disk_low_ GUARDED_BY(turn_mu_) = false;
  int64_t disk_free_bytes_ GUARDED_BY(turn_mu_) = -1;  // at the last check; -1: not known
  std::set<std::string> scratch_reclaimed_ GUARDED_BY(turn_mu_);  // final training jobs whose workspace is gone
  std::map<std::string, std::unique_ptr<Tail>> tails_ GUARDED_BY(turn_mu_);
  // Each live tuning job's search (made from its stored config and parents; holds no state of its own).
  std::map<std::string, std::unique_ptr<tune::Search>> searches_ GUARDED_BY(turn_mu_);  // training job name -> metric tail state
  // The tuning job (State::tuning_jobs key) that last started a trial: the next turn offers its
  // trial starts to the jobs after it first, so that one job's backlog cannot starve another's.
  std::string tuning_start_cursor_ GUARDED_BY(turn_mu_);
  // Per tuning job: the trials' states when its completion criteria were last asked (they depend
  // on nothing else), so a turn in which no trial ended does not ask again.
  std::map<std::string, std::vector<std::pair<int, std::optional<double>>>> completion_checked_ GUARDED_BY(turn_mu_);
  std::vector<std::pair<std::string, int>> tailing_ GUARDED_BY(turn_mu_);     // the jobs the last tick tailed: name, instances
  EpochMs last_tick_ GUARDED_BY(turn_mu_) = 0;  // the last turn that ran the timers (at most one per 500 ms)
  EpochMs last_log_sweep_ GUARDED_BY(turn_mu_) = 0;
  std::set<std::string> logs_swept_ GUARDED_BY(turn_mu_);  // training jobs whose logs the retention sweep deleted
  OffsetClock* adjustable_clock_ = nullptr;  // set before Start(); null: the clock can't be moved
  std::vector<exec::AttemptEvent> deferred_events_ GUARDED_BY(turn_mu_);  // events made by the controller itself
  uint64_t chaos_state_ GUARDED_BY(turn_mu_) = 0;  // random spot interruptions (splitmix64 state, from config.chaos_seed)
  std::multiset<EpochMs> backoff_ends_ GUARDED_BY(turn_mu_);  // ends of pending capacity-failure backoffs (in memory)
  uint64_t last_event_seq_ GUARDED_BY(turn_mu_) = 0;  // the newest event's sequence number (rendered, maybe not yet published)
  struct Ending {
    EpochMs at;
    std::string queue;
    bool failed;
  };
  std::deque<Ending> endings_ GUARDED_BY(turn_mu_);  // jobs that ended within the longest failure_ratio window
  int64_t failure_window_ms_ = 0;  // that window (0: no failure_ratio rule); constant
  EpochMs last_alarm_check_ GUARDED_BY(turn_mu_) = 0;  // when EvaluateAlarms last ran
  EpochMs last_metric_alarm_minute_ GUARDED_BY(turn_mu_) = -1;  // the minute metric alarms were last evaluated in
  EpochMs next_share_sample_ GUARDED_BY(turn_mu_) = 0;
  EpochMs next_batch_sample_ GUARDED_BY(turn_mu_) = 0;  // when SampleBatchMetrics samples next (0: at the first tick)
  // The telemetry counters as the last AWS/Batch sample saw them, by (queue, AWS metric name).
  std::map<std::pair<std::string, std::string>, int64_t> batch_sampled_ GUARDED_BY(turn_mu_);  // when SampleShareHistory samples next (0: at the first tick)
  EpochMs last_event_prune_ GUARDED_BY(turn_mu_) = 0;  // when PruneEvents last ran (once a minute at most)

  RoleSessions role_sessions_;  // its own lock
  std::string job_endpoint_, job_ca_bundle_;  // set before Start(), read-only after
  // ---- guarded by directory_mu_ (held only to copy the pointer) ----
  mutable Mutex directory_mu_;
  std::shared_ptr<const PrincipalDirectory> directory_ GUARDED_BY(directory_mu_);

  // ---- guarded by queue_mu_ ----
  Mutex queue_mu_;
  std::condition_variable_any queue_cv_;  // waits with queue_mu_ held
  std::deque<std::pair<Command, Ack>> commands_ GUARDED_BY(queue_mu_);
  bool wake_ GUARDED_BY(queue_mu_) = false;
  bool stopping_ GUARDED_BY(queue_mu_) = false;
  bool accepting_ GUARDED_BY(queue_mu_) = true;
  bool loop_running_ GUARDED_BY(queue_mu_) = false;  // Start() was called: only the loop thread runs turns

  // Held for the whole of a turn: one turn at a time, whichever thread runs it (the loop thread,
  // or Step()'s caller). Members marked "controller-thread only" are touched only under it.
  Mutex turn_mu_ ACQUIRED_BEFORE(state_mu_);
  std::thread thread_;
};

}  // namespace ty::control
