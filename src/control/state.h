// The controller's live state. Owned by the controller; read by API handlers under a shared
// lock (Controller::Read), written only on the controller thread under the exclusive lock.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/cloudwatch_metrics.h"
#include "control/metric_series.h"
#include "control/event_bus.h"
#include "control/metric_alarms.h"
#include "control/principals.h"
#include "control/share_history.h"
#include "control/telemetry.h"
#include "control/tuning.h"
#include "core/config.h"
#include "core/model.h"
#include "exec/executor.h"
#include "sched/containers.h"

namespace ty::control {

// The share a job belongs to: its fair-share identifier or its quota share ("" for FIFO queues).
inline const std::string& ShareOf(const ServiceJob& j) {
  return j.share_identifier.empty() ? j.quota_share_name : j.share_identifier;
}

struct ServiceJobState {
  ServiceJob job;
  std::string service_environment;  // where it holds capacity while active
  std::vector<std::pair<std::string, EpochMs>> history;  // status transitions (trainyard extension)
  std::string wait_reason;          // why it waits (RUNNABLE only), from the last scheduling pass
  // The AWS reason code of that wait when it has one ("CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
  // for the head of a queue that waits for capacity, "MISCONFIGURATION:..." for a job that can
  // never fit); what jobStateTimeLimitActions match against.
  std::string wait_code;
  // When the last scheduling pass expects it to start (front jobs only; 0: not known).
  EpochMs estimated_start = 0;
  // The last quota pass made it wait on preemptions: the next pass offers it capacity first, so
  // that what its victims free goes to it (in memory; a restart only costs that precedence).
  bool nominated = false;
  // The quota pass (State::quota_passes) that last wrote wait_reason; a later pass that did not
  // offer the job explains it through its class instead (State::WaitReasonOf).
  uint64_t reason_pass = 0;
  // The capacity-ladder rung the scheduling pass placed it on (-1: no ladder, its own type).
  int placement_rung = -1;
  // After a capacity failure the job is not placed again before this time (backoff; in memory).
  EpochMs not_before = 0;
  // The arrival batch it joined on an idle fair-share queue closes at this time: it is not
  // placed before, so that the jobs of the batch are weighed together (in memory).
  EpochMs batch_until = 0;

  // True while a capacity-failure backoff holds the job back; says so in its wait reason.
  bool BackingOff(EpochMs now) {
    if (not_before <= now) return false;
    wait_reason = "retrying after a capacity failure, not before " + std::to_string(not_before) + " (epoch ms)";
    wait_code = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY";
    return true;
  }

  // When the job last became RUNNABLE (its creation when it never was).
  EpochMs RunnableSince() const {
    EpochMs since = job.created_at;
    for (const auto& [status, at] : history)
      if (status == "RUNNABLE") since = at;
    return since;
  }
};

struct State {
  State() = default;
  // runnable_by_share points into `jobs`: a copy would point into the original (a move keeps
  // the map's nodes, and so the pointers).
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  State(State&&) = default;
  State& operator=(State&&) = default;

  Principals principals;  // users, access keys, managed policies (principals.h)
  EventBus event_bus;     // EventBridge rules, targets, connections, API destinations (event_bus.h)
  std::map<std::string, ServiceEnvironment> environments;  // by name
  std::map<std::string, JobQueue> queues;                  // by name
  std::map<std::string, SchedulingPolicy> policies;        // by name
  std::map<std::string, QuotaShare> quota_shares;          // by "<queue>/<share>"
  // Job definitions: name -> revision -> that revision (every one registered, INACTIVE ones too).
  std::map<std::string, std::map<int, JobDefinition>> job_definitions;
  // Batch container jobs (compute_environments.cpp, container_jobs.cpp; docs/batch-jobs.md).
  std::map<std::string, ComputeEnvironment> compute_environments;  // by name
  using ContainerUse = sched::ContainerResources;
  std::map<std::string, ContainerUse> compute_in_use;  // compute environment -> held by running attempts
  std::map<uint64_t, ContainerJob> container_jobs;     // by seq: jobs, array parents and made children
  std::unordered_map<std::string, uint64_t> container_seq_by_id;  // "<id>" and "<parent id>:<index>"
  // queue -> status -> seqs of its jobs and array parents (children are listed through their parent).
  std::map<std::string, std::map<JobStatus, std::set<uint64_t>>> container_by_queue_status;
  // What a scheduling pass offers: queue -> share ("" FIFO) -> (-priority, seq) of each RUNNABLE job
  // and each released array parent with children left to make. Invariant: kept by every status
  // change (IndexContainer); a pass reads the front of each share only.
  std::map<std::string, std::map<std::string, std::set<std::pair<int, uint64_t>>>> container_runnable;
  // job id -> seqs of the jobs whose dependsOn names it and that still wait.
  std::unordered_map<std::string, std::vector<uint64_t>> container_dependents;
  std::unordered_map<std::string, uint64_t> container_attempts;  // running attempt id -> seq
  // queue -> share ("" FIFO) -> what its attempts hold and its usage decayed as of `at`: the
  // dominant-share order of ScheduleContainerJobs (sched/containers.h). Changed as attempts start
  // and end and decayed at each pass, from the turn's time. In memory, as service shares' usage
  // (share_usage): after a restart the running attempts are counted again and usage starts at 0.
  struct ContainerShareUse {
    ContainerUse held;
    sched::ContainerUsage usage;
    EpochMs at = 0;
  };
  std::map<std::string, std::map<std::string, ContainerShareUse>> container_share_use;
  // Array parent seq -> its made children by index, and their count per status (the children not
  // made yet are counted from the parent: ArrayStatusSummary).
  std::unordered_map<uint64_t, std::map<int64_t, uint64_t>> array_children;
  std::unordered_map<uint64_t, std::map<JobStatus, int64_t>> array_counts;
  const ContainerJob* FindContainerJob(const std::string& id_or_arn) const {
    auto it = container_seq_by_id.find(id_or_arn);
    if (it == container_seq_by_id.end() && id_or_arn.rfind("arn:", 0) == 0) {
      const size_t slash = id_or_arn.rfind('/');
      if (slash != std::string::npos) it = container_seq_by_id.find(id_or_arn.substr(slash + 1));
      if (it != container_seq_by_id.end() && container_jobs.at(it->second).arn != id_or_arn) return nullptr;
    }
    return it == container_seq_by_id.end() ? nullptr : &container_jobs.at(it->second);
  }

  std::map<uint64_t, ServiceJobState> jobs;                // by submit sequence
  std::unordered_map<std::string, uint64_t> job_seq_by_id;
  std::unordered_map<std::string, uint64_t> job_seq_by_token;  // clientToken -> job
  // queue name -> status -> job seqs, for listing and scheduling in submit order.
  std::map<std::string, std::map<JobStatus, std::set<uint64_t>>> by_queue_status;
  // A RUNNABLE job's place in its share's dispatch order: schedulingPriority descending, then
  // submit order (a total order: seqs are unique).
  struct DispatchKey {
    int priority;
    uint64_t seq;
    // The job itself (not part of the order): a pass reads its jobs without a lookup by seq.
    // Stable: map nodes do not move, and a job leaves the index before it leaves `jobs`.
    ServiceJobState* js = nullptr;
    bool operator<(const DispatchKey& o) const { return priority != o.priority ? priority > o.priority : seq < o.seq; }
  };
  // Fair-share queue -> share identifier -> its RUNNABLE jobs in dispatch order, so that a
  // scheduling pass reads only the first jobs of each share however deep the queue is.
  // Invariants: a job is here iff it is RUNNABLE and has a share identifier, under its current
  // schedulingPriority; a share with no RUNNABLE job has no entry. Kept by IndexRunnable and
  // UnindexRunnable, which every change of a job's status or priority goes through.
  std::map<std::string, std::map<std::string, std::set<DispatchKey>>> runnable_by_share;
  // A RUNNABLE quota-share job's class: its schedulingPriority, instance type and count. The jobs
  // of one class and share fare alike in a quota pass, so the pass offers each class only as many
  // jobs as could start or preempt, plus a margin (ScheduleQuotaQueue); those behind wait for the
  // same reason as the last one offered (`tail_reason`, written by pass `tail_pass`).
  struct QuotaClass {
    int priority;
    std::string instance_type;
    int64_t instance_count;
    bool operator<(const QuotaClass& o) const {
      if (priority != o.priority) return priority > o.priority;
      if (instance_type != o.instance_type) return instance_type < o.instance_type;
      return instance_count < o.instance_count;
    }
  };
  struct QuotaClassJobs {
    std::set<uint64_t> seqs;  // submit order
    std::string tail_reason;
    uint64_t tail_pass = 0;
  };
  // Quota-share queue -> quota share -> class -> its RUNNABLE jobs. Invariants as
  // runnable_by_share's: a job is here iff it is RUNNABLE and has a quota share name, under its
  // current schedulingPriority; empty entries are erased. Kept by IndexRunnable and UnindexRunnable.
  using QuotaClasses = std::map<QuotaClass, QuotaClassJobs>;
  std::map<std::string, std::map<std::string, QuotaClasses>> quota_runnable;
  uint64_t quota_passes = 0;  // quota passes run since the start (in memory)
  // Quota-share queue -> the jobs its last pass promised capacity (ServiceJobState::nominated).
  std::map<std::string, std::vector<uint64_t>> quota_nominated;
  std::map<std::string, TrainingJob> training_jobs;        // by name
  // Training job names are unique regardless of case (ARNs carry them lower-cased, as AWS's do).
  std::unordered_map<std::string, std::string> training_job_by_lower;
  // Training jobs that are InProgress or Stopping, by creation order: the only ones a turn visits.
  std::set<std::pair<uint64_t, std::string>> live_training_jobs;
  // MetricDefinitions series (control/metric_series.h: at most kMaxMetricPointsPerMetric points
  // per metric), by training job name.
  std::map<std::string, MetricSeries> metric_series;
  // System metrics sampled on each instance (control/system_metrics.h), by training job name.
  std::map<std::string, SystemSeries> system_series;
  // CloudWatch metrics put by users (control/cloudwatch_metrics.h; kMeta "cloudwatch/...").
  CloudWatchMetrics cloudwatch;
  std::map<std::string, int64_t> host_in_use;              // instance type -> instances held
  // The executor's latest view of what its cluster can hold (Executor::Capacity), taken once per
  // turn; null: the configuration's counts stand (the local executor). Not stored: a restarted
  // server asks again. Read it through HostCapacity.
  std::shared_ptr<const exec::CapacityReport> cluster;
  // Managed warm pools, by id (InUse and Available ones; terminated pools are deleted).
  std::map<std::string, WarmPool> warm_pools;
  // instance type -> instances held by Available warm pools. Not part of host_in_use: a pool
  // yields its instances to a job that needs them (docs/warm-pools.md).
  std::map<std::string, int64_t> warm_pool_held;
  std::map<std::string, int64_t> environment_in_use;       // environment -> instances held
  // Fair-share usage per queue and share: decayed instance-seconds as of `at`. Rebuilt from zero
  // after a restart (see docs/design/decisions.md).
  struct ShareUsage {
    double usage = 0;
    EpochMs at = 0;
  };
  std::map<std::string, std::map<std::string, ShareUsage>> share_usage;
  // The first RUNNABLE jobs of each queue in dispatch order, from the last scheduling pass.
  std::map<std::string, std::vector<uint64_t>> front_of_queue;
  // queue -> share -> number of its jobs that are not finished (the queue's active shares).
  std::map<std::string, std::map<std::string, int64_t>> unfinished_by_share;
  uint64_t next_seq = 1;
  EpochMs last_pass_at = 0;
  // Fair-share queue -> when its latest arrival batch closes ([scheduler] batch_ms; in memory).
  std::map<std::string, EpochMs> batch_closes;
  std::map<std::string, AlarmState> alarms;  // by name: [[alarms]] rules and PutMetricAlarm's (metric_alarms.h)
  // Hyperparameter tuning jobs (control/tuning.h), by lower-cased name (names are unique
  // regardless of case); stored as kMeta documents "tuning-job/<lower-cased name>".
  std::map<std::string, TuningJob> tuning_jobs;
  const TuningJob* FindTuningJob(const std::string& name) const;
  // Counters and histograms for GET /metrics (in memory: zero after a restart).
  Telemetry telemetry;
  // Each queue's share standings, one sample per [console] share_history_interval_seconds
  // (share_history.h; in memory: empty after a restart).
  ShareHistory share_history;

  // The service job named by its id or its ARN (AWS takes either as jobId; the SageMaker Python
  // SDK's queue helpers send the ARN). An ARN must be the job's own, region and account included.
  const ServiceJobState* FindJob(const std::string& id_or_arn) const {
    const uint64_t* seq = SeqOfJob(id_or_arn);
    return seq ? &jobs.at(*seq) : nullptr;
  }
  ServiceJobState* FindJob(const std::string& id_or_arn) {
    return const_cast<ServiceJobState*>(static_cast<const State*>(this)->FindJob(id_or_arn));
  }
  const uint64_t* SeqOfJob(const std::string& id_or_arn) const {
    auto it = job_seq_by_id.find(id_or_arn);
    if (it != job_seq_by_id.end()) return &it->second;
    if (id_or_arn.rfind("arn:", 0) != 0) return nullptr;
    const size_t slash = id_or_arn.rfind('/');
    if (slash == std::string::npos) return nullptr;
    it = job_seq_by_id.find(id_or_arn.substr(slash + 1));
    if (it == job_seq_by_id.end() || jobs.at(it->second).job.arn != id_or_arn) return nullptr;
    return &it->second;
  }
  const TrainingJob* FindTrainingJob(const std::string& name) const;
  TrainingJob* FindTrainingJob(const std::string& name) {
    return const_cast<TrainingJob*>(static_cast<const State*>(this)->FindTrainingJob(name));
  }
  void AddTrainingJob(TrainingJob tj);

  // Adds a RUNNABLE job to runnable_by_share or quota_runnable (nothing for a FIFO queue's job).
  void IndexRunnable(ServiceJobState& js) {
    const ServiceJob& j = js.job;
    if (!j.share_identifier.empty()) runnable_by_share[j.queue][j.share_identifier].insert({j.scheduling_priority, j.seq, &js});
    if (!j.quota_share_name.empty()) quota_runnable[j.queue][j.quota_share_name][ClassOf(j)].seqs.insert(j.seq);
  }
  // Takes a job out of those indices: before it leaves RUNNABLE or its priority changes.
  void UnindexRunnable(const ServiceJob& j) {
    if (!j.quota_share_name.empty()) {
      auto q = quota_runnable.find(j.queue);
      if (q == quota_runnable.end()) return;
      auto share = q->second.find(j.quota_share_name);
      if (share == q->second.end()) return;
      auto c = share->second.find(ClassOf(j));
      if (c == share->second.end()) return;
      c->second.seqs.erase(j.seq);
      if (c->second.seqs.empty()) share->second.erase(c);
      if (share->second.empty()) q->second.erase(share);
      if (q->second.empty()) quota_runnable.erase(q);
      return;
    }
    if (j.share_identifier.empty()) return;
    auto q = runnable_by_share.find(j.queue);
    if (q == runnable_by_share.end()) return;
    auto share = q->second.find(j.share_identifier);
    if (share == q->second.end()) return;
    share->second.erase({j.scheduling_priority, j.seq});
    if (share->second.empty()) q->second.erase(share);
    if (q->second.empty()) runnable_by_share.erase(q);
  }

  static QuotaClass ClassOf(const ServiceJob& j) { return {j.scheduling_priority, j.instance_type, j.instance_count}; }
  const QuotaClassJobs* FindQuotaClass(const ServiceJob& j) const {
    auto q = quota_runnable.find(j.queue);
    if (q == quota_runnable.end()) return nullptr;
    auto share = q->second.find(j.quota_share_name);
    if (share == q->second.end()) return nullptr;
    auto c = share->second.find(ClassOf(j));
    return c == share->second.end() ? nullptr : &c->second;
  }

  // Why a RUNNABLE job waits, as of the last scheduling pass: its own reason, or for a quota-share
  // job the last pass did not offer, its class's (QuotaClass).
  const std::string& WaitReasonOf(const ServiceJobState& js) const {
    if (js.job.quota_share_name.empty() || js.job.status != JobStatus::kRunnable) return js.wait_reason;
    const QuotaClassJobs* c = FindQuotaClass(js.job);
    return c && c->tail_pass > js.reason_pass ? c->tail_reason : js.wait_reason;
  }

  const std::set<uint64_t>& JobsIn(const std::string& queue, JobStatus s) const {
    static const std::set<uint64_t> kEmpty;
    auto q = by_queue_status.find(queue);
    if (q == by_queue_status.end()) return kEmpty;
    auto it = q->second.find(s);
    return it == q->second.end() ? kEmpty : it->second;
  }
};

// The instances of a capacity key ("type", "type#spot") the host offers now: the configured count,
// and no more than the executor's cluster reports (a key its report leaves out offers none). May be
// below what is in use (a node went down under running jobs): nothing new starts until it is back.
int64_t HostCapacity(const Config& config, const State& s, const std::string& key);

}  // namespace ty::control
