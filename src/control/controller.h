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
#include <thread>

#include "control/commands.h"
#include "control/events.h"
#include "control/state.h"
#include "sched/sched.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/status.h"

namespace ty::store {
class Store;
class EventLog;
struct Write;
}
#include "exec/executor.h"

namespace ty::control {

class Controller {
 public:
  // Opens (or creates) the data directory, loads durable state, re-adopts running attempts.
  static StatusOr<std::unique_ptr<Controller>> Open(const Config& config, const Clock& clock,
                                                    const std::string& self_exe);
  ~Controller();

  void Start();     // starts the loop thread
  void Shutdown();  // stops accepting commands, finishes the current turn, joins

  const Config& config() const { return config_; }
  std::string Arn(const std::string& service, const std::string& resource) const;

  // Runs f(const State&) under the shared lock and returns its result.
  template <typename F>
  auto Read(F&& f) const {
    std::shared_lock lock(state_mu_);
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
  StatusOr<QuotaShare> CreateQuotaShare(const CreateQuotaShareCommand& cmd);
  StatusOr<QuotaShare> UpdateQuotaShare(const UpdateQuotaShareCommand& cmd);
  Status DeleteQuotaShare(const DeleteQuotaShareCommand& cmd);
  static const QuotaShare* FindQuotaShareByArn(const State& s, const std::string& arn);

  // ---- Batch: service jobs ----
  StatusOr<ServiceJob> SubmitServiceJob(const SubmitServiceJobCommand& cmd);
  Status TerminateServiceJob(const TerminateServiceJobCommand& cmd);
  StatusOr<ServiceJob> UpdateServiceJob(const UpdateServiceJobCommand& cmd);

  // ---- SageMaker ----
  StatusOr<TrainingJob> CreateTrainingJob(const CreateTrainingJobCommand& cmd);
  Status StopTrainingJob(const std::string& name);
  // A spot interruption of a managed spot job's running instances (`trainyard admin interrupt`):
  // they get a notice and spot_notice_seconds, then the job waits for spot capacity again.
  Status InterruptTrainingJob(const std::string& name);
  // ResourceConfig.KeepAlivePeriodInSeconds of a job whose warm pool is Available; 0 releases it.
  StatusOr<TrainingJob> UpdateTrainingJob(const UpdateTrainingJobCommand& cmd);

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

  // Path of one instance's log of a training job ("" when unknown).
  std::string LogPath(const std::string& training_job, int instance) const;

  // The resolved sandbox mode, "bwrap" or "none" (what CheckTrainingRequest checks against).
  const std::string& sandbox() const { return sandbox_; }

 private:
  class Turn;  // the changes of one loop turn (defined in controller.cpp)
  using Command = std::function<void(Turn&)>;
  // Called once the command's turn is over, with the outcome of its commit: a caller whose
  // change could not be stored is answered with that error instead of its result.
  using Ack = std::function<void(const Status& commit)>;

  Controller(Config config, const Clock& clock);

  // Queues a command and waits until its turn has been committed. The command sets *result.
  template <typename T>
  StatusOr<T> Execute(std::function<StatusOr<T>(Turn&)> fn);
  Status ExecuteStatus(std::function<Status(Turn&)> fn);

  void Loop();
  void RunTurn(std::deque<std::pair<Command, Ack>>& batch);
  void LoadState();
  void ReadoptAttempts();

  // Steps of a turn (controller thread, exclusive lock held).
  void AdmitSubmitted(Turn& t);
  void ApplyExecutorEvents(Turn& t);
  void ApplyEvent(Turn& t, const exec::AttemptEvent& e);
  // Adds what a preempted attempt that ended at `end` threw away to the job's loss counters.
  void CountPreemptionLoss(ServiceJob& job, const TrainingJob& tj, EpochMs end) const;
  void EnforceTimeouts(Turn& t);
  // Spot (spot.cpp). Interrupt: notice, then the run ends and the job waits for spot capacity.
  void Interrupt(Turn& t, TrainingJob& tj, const std::string& why);
  // The configured random interruption rates over the last `elapsed_ms`.
  void InjectSpotInterruptions(Turn& t, EpochMs elapsed_ms);
  // Ends the billing of tj's current run at `end` (its seconds priced at the run's market).
  void CloseRun(TrainingJob& tj, EpochMs end) const;
  // Prices the run about to start: its market, on-demand price and price per instance-hour.
  void PriceRun(TrainingJob& tj, bool spot) const;
  void SchedulePass(Turn& t);
  sched::FairShare FairShareOf(Turn& t, const JobQueue& q, size_t prefix);
  bool IsQuotaQueue(const JobQueue& q) const;
  void ScheduleQuotaQueue(Turn& t, const JobQueue& q);
  void StartServiceJob(Turn& t, ServiceJobState& js, const std::string& environment);
  void StartPendingTrainingJobs(Turn& t);
  void TailMetrics(Turn& t);
  // Reads at most max_bytes more of each instance's log of tj (whole lines) into its
  // MetricDefinitions series; kMetricTailBytesPerTurn keeps one chatty job from holding a turn.
  void TailJobMetrics(Turn& t, TrainingJob& tj, int64_t max_bytes);
  static constexpr int64_t kMetricTailBytesPerTurn = 8 << 20;
  struct Tail;
  void TailSystemMetrics(Turn& t, const TrainingJob& tj, Tail& tail);
  // Forgets where the metrics of a job's logs were read to (its run ended), storing what is unsaved.
  void DropTail(Turn& t, const std::string& name);
  // Launches tj's run on `spot` or on-demand capacity of tj.instance_type.
  void LaunchTrainingJob(Turn& t, TrainingJob& tj, bool spot);
  // The capacity a RUNNABLE service job is offered in this pass: its own type, or the first rung
  // of its capacity ladder with free capacity (remembered in placement_rung).
  std::string PlacementKey(ServiceJobState& js);
  void FinishServiceJobAttempt(Turn& t, ServiceJobState& js, const TrainingJob& tj);
  // True when the lost run of tj is started again under its RetryStrategy (the job stays InProgress).
  bool RestartAfterInfrastructureFailure(Turn& t, TrainingJob& tj, const exec::AttemptEvent& e);
  // MaxRuntimeInSeconds less the time tj's runs have already used (may be <= 0).
  int64_t RemainingRuntimeSeconds(const TrainingJob& tj, EpochMs now) const;
  void SetJobStatus(Turn& t, ServiceJobState& js, JobStatus status, const std::string& reason);
  // Records js's wait code; a new blocked code ("CAPACITY:...", "MISCONFIGURATION:...") is a
  // "Batch Job Queue Blocked" event whose statusReason is `reason` (the code when empty).
  void SetWaitCode(Turn& t, ServiceJobState& js, const std::string& code, const std::string& reason);
  // Alarms (alarms.cpp): evaluates every [[alarms]] rule; a change of state is an event.
  void EvaluateAlarms(Turn& t);
  // A service job reached SUCCEEDED or FAILED (for failure_ratio).
  void NoteEnding(const ServiceJob& job, EpochMs at);
  // Renders the turn's event triggers into store writes (sequence numbers from next_event_seq_).
  void RenderEvents(Turn& t, std::vector<store::Write>* writes);
  // [events] retention_days and max_events: deletes the oldest events (once a minute at most).
  void PruneEvents(EpochMs now);
  // Counts a status change of js to `to` in the metrics (called before the change).
  void CountTransition(Turn& t, const ServiceJobState& js, JobStatus to);
  // A "SageMaker Training Job State Change" event for a new SecondaryStatus.
  void TrainingJobEvent(Turn& t, const std::string& name, const std::string& secondary, const std::string& message,
                        EpochMs at);
  void AddTransition(Turn& t, TrainingJob& tj, const std::string& secondary, const std::string& message, EpochMs at);
  void ReleaseCapacity(TrainingJob& tj);
  // [logs] retention_days: deletes the instance logs of training jobs that ended longer ago
  // than that (once a minute at most).
  void SweepLogs(EpochMs now);
  // Warm pools (warm_pools.cpp). On launch: takes over a matching Available pool or starts a new
  // one (KeepAlivePeriodInSeconds > 0); returns the transition message saying which.
  std::string AttachWarmPool(Turn& t, TrainingJob& tj);
  // Frees Available pools of `type` until `count` instances are free on the host: pools that no
  // waiting job matches first, oldest first.
  void SetPoolOrigin(WarmPool& p, const TrainingJob& tj) const;
  void MakeRoom(Turn& t, const std::string& type, int64_t count, const std::string& for_job);
  // On the job's final status: keeps its pool Available or terminates it (creation rules, quota).
  void SettleWarmPool(Turn& t, TrainingJob& tj);
  void TerminateWarmPool(Turn& t, const std::string& id, const std::string& reason);
  void ExpireWarmPools(Turn& t);
  std::string WarmPoolDir(const std::string& id) const { return data_dir_ + "/pools/" + id; }
  // Moves a training job to Stopping for `cause` and,
  // when it was launched, asks the executor to stop it after the commit.
  // grace_seconds < 0: [executor] stop_grace_seconds.
  void RequestStop(Turn& t, TrainingJob& tj, StopCause cause, const std::string& message, int grace_seconds = -1);
  // [server] data_dir_reserve_mib (docs/configuration.md, "Disk reserve"): checks the data dir's
  // free space (one statvfs per tick); under the reserve, reclaims finished attempts' scratch,
  // holds back every start (disk_low_) and stops the running job that uses most of the data dir.
  void CheckDiskReserve(Turn& t);
  // Removes the workspaces (not the logs) of attempts whose training job is final; returns how many.
  size_t ReclaimFinishedScratch();
  // Why nothing starts while disk_low_ (a job's wait reason).
  std::string DiskReserveReason() const;
  std::string BuildAttemptSpec(const TrainingJob& tj) const;
  std::string FileSystemPath(const std::string& id) const;  // [file_systems] entry, or ""

  // ---- constant after construction ----
  Config config_;
  const Clock& clock_;
  std::string data_dir_;
  std::string sandbox_;  // resolved: "bwrap" or "none"
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<exec::Executor> executor_;
  std::unique_ptr<store::EventLog> event_log_;
  EventRenderer event_renderer_;

  // ---- guarded by state_mu_ (exclusive on the controller thread when writing) ----
  mutable std::shared_mutex state_mu_;
  State state_;

  // ---- controller-thread only ----
  // A turn whose commit failed (a full disk): its changes are in state_ but not in the store, and
  // its actions (starts, stops) were not taken. Each later turn writes them again and acts on
  // them once a commit succeeds. Null when every turn is stored.
  std::unique_ptr<Turn> unsaved_;
  // The data dir's free space was under the reserve at the last check (starts are held back).
  bool disk_low_ = false;
  int64_t disk_free_bytes_ = -1;  // at the last check; -1: not known
  std::set<std::string> scratch_reclaimed_;  // final training jobs whose workspace is gone
  std::map<std::string, std::unique_ptr<Tail>> tails_;  // training job name -> metric tail state
  EpochMs last_tick_ = 0;
  EpochMs last_log_sweep_ = 0;
  std::set<std::string> logs_swept_;  // training jobs whose logs the retention sweep deleted
  OffsetClock* adjustable_clock_ = nullptr;  // set before Start(); null: the clock can't be moved
  std::vector<exec::AttemptEvent> deferred_events_;  // events made by the controller itself
  uint64_t chaos_state_ = 0;  // random spot interruptions (splitmix64 state, from config.chaos_seed)
  std::multiset<EpochMs> backoff_ends_;
  uint64_t last_event_seq_ = 0;
  struct Ending {
    EpochMs at;
    std::string queue;
    bool failed;
  };
  std::deque<Ending> endings_;  // jobs that ended within the longest failure_ratio window
  int64_t failure_window_ms_ = 0;  // that window (0: no failure_ratio rule); constant
  EpochMs last_alarm_check_ = 0;  // the newest event's sequence number
  EpochMs last_event_prune_ = 0;  // ends of pending capacity-failure backoffs (in memory)

  // ---- guarded by queue_mu_ ----
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::pair<Command, Ack>> commands_;
  bool wake_ = false;
  bool stopping_ = false;
  bool accepting_ = true;

  std::thread thread_;
};

}  // namespace ty::control
