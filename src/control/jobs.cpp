// Service jobs: submit, terminate, update, admission and the scheduling pass.
#include <spdlog/spdlog.h>

#include <chrono>

#include "control/controller.h"
#include "control/ladder.h"
#include "control/turn.h"
#include "control/warm_pool_rules.h"
#include "core/strings.h"
#include "sched/quota.h"
#include "sched/sched.h"

namespace ty::control {

namespace {
// When the job last entered `status` (0: never).
EpochMs LastEntered(const ServiceJobState& js, const char* status) {
  for (auto it = js.history.rbegin(); it != js.history.rend(); ++it)
    if (it->first == status) return it->second;
  return 0;
}

// How a wait reason names another job: its id and name, as users know it ("#<seq>" for a job that
// is gone, which a pass over the current state never names).
std::string JobReference(const State& s, uint64_t seq) {
  auto it = s.jobs.find(seq);
  if (it == s.jobs.end()) return "#" + std::to_string(seq);
  return it->second.job.id + " (" + it->second.job.name + ")";
}
}  // namespace

// Metrics of a status change (docs/metrics.md). Before the change is applied.
void Controller::CountTransition(Turn& t, const ServiceJobState& js, JobStatus to) {
  const ServiceJob& job = js.job;
  Telemetry& m = state_.telemetry;
  const JobStatus from = job.status;
  ++m.transitions[{job.queue, to}];
  if (to == JobStatus::kRunnable && (from == JobStatus::kSubmitted || from == JobStatus::kPending))
    m.ObserveDuration(JobDuration::kSubmittedToRunnable, job.queue, t.now - job.created_at);
  if (to == JobStatus::kScheduled) {
    if (job.scheduled_at == 0) m.ObserveDuration(JobDuration::kSubmittedToFirstScheduled, job.queue, t.now - job.created_at);
    m.ObserveDuration(JobDuration::kRunnableToScheduled, job.queue, t.now - js.RunnableSince());
  }
  if (to == JobStatus::kStarting && from == JobStatus::kScheduled)
    m.ObserveDuration(JobDuration::kScheduledToStarting, job.queue, t.now - LastEntered(js, "SCHEDULED"));
  if (to == JobStatus::kRunning && from == JobStatus::kStarting)
    m.ObserveDuration(JobDuration::kStartingToRunning, job.queue, t.now - LastEntered(js, "STARTING"));
  // The end of an attempt: a final status, or back to RUNNABLE.
  if (IsTerminal(to) || to == JobStatus::kRunnable) {
    if (from == JobStatus::kRunning)
      m.ObserveDuration(JobDuration::kExecution, job.queue, t.now - LastEntered(js, "RUNNING"));
    if (from == JobStatus::kStarting || from == JobStatus::kRunning)
      m.ObserveDuration(JobDuration::kAttempt, job.queue, t.now - LastEntered(js, "STARTING"));
  }
  if (to == JobStatus::kFailed && job.is_terminated) ++m.terminated[job.queue];
}

void Controller::SetJobStatus(Turn& t, ServiceJobState& js, JobStatus status, const std::string& reason) {
  ServiceJob& job = js.job;
  const bool was_terminal = IsTerminal(job.status);
  if (job.status != status) {
    CountTransition(t, js, status);
    state_.by_queue_status[job.queue][job.status].erase(job.seq);
    state_.by_queue_status[job.queue][status].insert(job.seq);
    if (job.status == JobStatus::kRunnable) state_.UnindexRunnable(job);
    if (status == JobStatus::kRunnable) state_.IndexRunnable(js);
    if (IsActive(job.status) && !IsActive(status)) {
      state_.environment_in_use[js.service_environment] -= job.instance_count;
      t.reschedule = true;
    }
    job.status = status;
    js.history.emplace_back(JobStatusName(status), t.now);
    EventTrigger e;
    e.kind = EventTrigger::Kind::kServiceJobStateChange;
    e.job_seq = job.seq;
    e.status = JobStatusName(status);
    e.reason = reason;
    e.at = t.now;
    t.events.push_back(std::move(e));
  }
  job.status_reason = reason;
  if (status == JobStatus::kScheduled && job.scheduled_at == 0) job.scheduled_at = t.now;
  if (IsTerminal(status)) {
    job.stopped_at = t.now;
    if (!was_terminal) NoteEnding(job, t.now);
    if (!was_terminal && !ShareOf(job).empty()) {
      auto& shares = state_.unfinished_by_share[job.queue];
      if (--shares[ShareOf(job)] <= 0) shares.erase(ShareOf(job));
    }
  }
  if (status != JobStatus::kRunnable) {
    js.wait_reason.clear();
    js.wait_code.clear();
  }
  t.jobs.insert(job.seq);
}

void Controller::SetWaitCode(Turn& t, ServiceJobState& js, const std::string& code, const std::string& reason) {
  if (js.wait_code == code) return;
  js.wait_code = code;
  if (code.empty()) return;
  EventTrigger e;
  e.kind = EventTrigger::Kind::kJobQueueBlocked;
  e.job_seq = js.job.seq;
  e.status = JobStatusName(js.job.status);
  e.reason = reason.empty() ? code : reason;
  e.at = t.now;
  t.events.push_back(std::move(e));
}

StatusOr<ServiceJob> Controller::SubmitServiceJob(const SubmitServiceJobCommand& cmd) {
  ServiceJob job;
  job.name = cmd.name;
  job.owner = cmd.owner;
  const std::string& queue_ref = cmd.queue;
  job.payload = cmd.payload;
  job.spec = cmd.training.spec;
  job.instance_type = job.spec.instance_type;
  job.instance_count = std::max<int64_t>(1, job.spec.instance_count);
  job.managed_spot = job.spec.managed_spot;
  job.max_runtime_ms = job.spec.max_runtime_seconds * 1000;
  if (cmd.scheduling_priority) {
    job.scheduling_priority = *cmd.scheduling_priority;
    job.has_scheduling_priority = true;
  }
  job.share_identifier = cmd.share_identifier;
  job.quota_share_name = cmd.quota_share_name;
  job.retry_strategy_json = cmd.retry_strategy_json;
  job.timeout_config_json = cmd.timeout_config_json;
  job.preemption_configuration_json = cmd.preemption_configuration_json;
  job.retry_strategy = cmd.retry_strategy;
  job.timeout = cmd.timeout;
  job.preemption = cmd.preemption;
  job.tags = cmd.tags;
  job.client_token = cmd.client_token;
  job.request_hash = cmd.request_hash;
  job.capacity_ladder = cmd.capacity_ladder;
  job.fallback_after_interruptions = cmd.fallback_after_interruptions;

  return Execute<ServiceJob>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<ServiceJob> {
    if (!job.client_token.empty()) {
      if (auto it = state_.job_seq_by_token.find(job.client_token); it != state_.job_seq_by_token.end()) {
        const ServiceJob& prior = state_.jobs.at(it->second).job;
        if (prior.request_hash == job.request_hash) return prior;  // same request: same answer
        return InvalidArgument("clientToken " + job.client_token +
                               " was already used with different request parameters");
      }
    }
    auto q = CheckPlacement(queue_ref, job.share_identifier, job.quota_share_name, job.managed_spot, kSubmitFields);
    if (!q.ok()) return q.status();
    if ((*q)->kind == QueueKind::kQuotaShare && !job.capacity_ladder.empty())
      return InvalidArgument(std::string("tags: ") + kLadderTag + ": job queue " + (*q)->name +
                             " shares capacity by quota shares of fixed instance types; a capacity ladder needs a FIFO "
                             "or fair-share queue (docs/spot.md)");
    return AddServiceJob(t, std::move(job), **q);
  });
}


StatusOr<const JobQueue*> Controller::CheckPlacement(const std::string& queue_ref, const std::string& share_identifier,
                                                     const std::string& quota_share_name, bool managed_spot,
                                                     const PlacementFields& f) const {
  const JobQueue* q = FindQueue(state_, queue_ref);
  const std::string queue_field = f.queue;
  if (!q) return InvalidArgument(queue_field + ": job queue " + queue_ref + " does not exist");
  if (q->job_queue_type != "SAGEMAKER_TRAINING")
    return InvalidArgument(queue_field + ": job queue " + q->name + " is not a SAGEMAKER_TRAINING queue");
  if (q->state != ResourceState::kEnabled)
    return InvalidArgument(queue_field + ": job queue " + q->name + " is DISABLED and accepts no new jobs");
  const std::string share_field = f.share_identifier, quota_field = f.quota_share_name;
  const bool fair = q->kind == QueueKind::kFairShare;
  const bool quota = q->kind == QueueKind::kQuotaShare;
  if (!share_identifier.empty() && !fair)
    return InvalidArgument(share_field + ": job queue " + q->name + " has no fair-share scheduling policy, so " +
                           share_field + " is not allowed");
  if (share_identifier.empty() && fair)
    return InvalidArgument(share_field + " is required: job queue " + q->name + " has a fair-share scheduling policy");
  if (!quota_share_name.empty() && !quota)
    return InvalidArgument(quota_field + ": job queue " + q->name + " has no quota-share scheduling policy, so " +
                           quota_field + " is not allowed");
  if (quota && managed_spot)
    return InvalidArgument(std::string(f.managed_spot) + ": job queue " + q->name +
                           " shares capacity by quota shares, which count on-demand instances; submit managed "
                           "spot jobs to a FIFO or fair-share queue (docs/spot.md)");
  if (quota) {
    if (quota_share_name.empty())
      return InvalidArgument(quota_field + " is required: job queue " + q->name + " has a quota-share scheduling policy");
    auto share = state_.quota_shares.find(q->name + "/" + quota_share_name);
    if (share == state_.quota_shares.end())
      return InvalidArgument(quota_field + ": quota share " + quota_share_name + " does not exist in job queue " + q->name);
    if (share->second.state != ResourceState::kEnabled)
      return InvalidArgument(quota_field + ": quota share " + quota_share_name + " is DISABLED");
  }
  if (!share_identifier.empty()) {
    if (share_identifier.size() > 255 || share_identifier.find('*') != std::string::npos)
      return InvalidArgument(share_field + " must be at most 255 characters and hold no '*'");
    // At most 500 active shares per queue (a share is active while it has unfinished jobs).
    if (auto active = state_.unfinished_by_share.find(q->name);
        active != state_.unfinished_by_share.end() && !active->second.count(share_identifier) && active->second.size() >= 500)
      return LimitExceeded(share_field + ": job queue " + q->name + " already has 500 active shares");
  }
  return q;
}

ServiceJob Controller::AddServiceJob(Turn& t, ServiceJob job, const JobQueue& q) {
  job.queue = q.name;
  job.seq = state_.next_seq++;
  job.id = NewUuid();
  job.arn = Arn("batch", "service-job/" + job.id);
  job.created_at = t.now;
  job.status = JobStatus::kSubmitted;
  ServiceJobState js;
  js.job = job;
  js.history.emplace_back("SUBMITTED", t.now);
  state_.job_seq_by_id[job.id] = job.seq;
  if (!job.client_token.empty()) state_.job_seq_by_token[job.client_token] = job.seq;
  state_.by_queue_status[job.queue][JobStatus::kSubmitted].insert(job.seq);
  ++state_.telemetry.submitted[job.queue];
  if (!ShareOf(job).empty()) ++state_.unfinished_by_share[job.queue][ShareOf(job)];
  state_.jobs.emplace(job.seq, std::move(js));
  t.jobs.insert(job.seq);
  t.submitted_now.insert(job.seq);
  return job;
}

Status Controller::TerminateServiceJob(const TerminateServiceJobCommand& cmd) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status { return Terminate(t, cmd); });
}

StatusOr<std::vector<Status>> Controller::TerminateServiceJobs(const std::vector<TerminateServiceJobCommand>& cmds) {
  return Execute<std::vector<Status>>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<std::vector<Status>> {
    std::vector<Status> out;
    for (const auto& cmd : cmds) out.push_back(Terminate(t, cmd));
    return out;
  });
}

Status Controller::Terminate(Turn& t, const TerminateServiceJobCommand& cmd) {
  const std::string& id = cmd.job_id;
  const std::string& reason = cmd.reason;
  ServiceJobState* js = state_.FindJob(id);
  if (!js) return NotFound("jobId: service job " + id + " does not exist");
  ServiceJob& job = js->job;
  if (IsTerminal(job.status)) return Status::Ok();  // as AWS: terminating a finished job succeeds
  job.is_terminated = true;
  if (!IsActive(job.status)) {
    SetJobStatus(t, *js, JobStatus::kFailed, reason);
    return Status::Ok();
  }
  job.terminate_reason = reason.empty() ? "Terminated by user" : reason;
  t.jobs.insert(job.seq);
  if (!job.attempts.empty()) {
    auto it = state_.training_jobs.find(job.attempts.back().training_job_name);
    if (it != state_.training_jobs.end()) {
      TrainingJob& tj = it->second;
      if (!tj.stop_requested && tj.status == TrainingJobStatus::kInProgress)
        RequestStop(t, tj, StopCause::kTerminate, "Stopping the training job: " + job.terminate_reason);
    }
  }
  return Status::Ok();
}

StatusOr<ServiceJob> Controller::UpdateServiceJob(const UpdateServiceJobCommand& cmd) {
  const std::string& id = cmd.job_id;
  const int priority = cmd.scheduling_priority;
  return Execute<ServiceJob>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<ServiceJob> {
    ServiceJobState* js = state_.FindJob(id);
    if (!js) return InvalidArgument("jobId: service job " + id + " does not exist");
    if (IsTerminal(js->job.status))
      return InvalidArgument("jobId: service job " + id + " is " + JobStatusName(js->job.status) + " and can no longer be updated");
    const bool runnable = js->job.status == JobStatus::kRunnable;
    if (runnable) state_.UnindexRunnable(js->job);  // its place in its share's order moves
    js->job.scheduling_priority = priority;
    js->job.has_scheduling_priority = true;
    if (runnable) state_.IndexRunnable(*js);
    t.jobs.insert(js->job.seq);
    t.reschedule = true;
    return js->job;
  });
}


void Controller::AdmitSubmitted(Turn& t) {
  for (auto& [qname, by_status] : state_.by_queue_status) {
    auto it = by_status.find(JobStatus::kSubmitted);
    if (it == by_status.end() || it->second.empty()) continue;
    std::vector<uint64_t> seqs;
    for (uint64_t seq : it->second)
      if (!t.submitted_now.count(seq)) seqs.push_back(seq);
    if (seqs.empty()) continue;
    // Arrival batches: jobs that reach an idle fair-share queue within [scheduler] batch_ms of
    // the first are placed together, so that share and schedulingPriority order them rather than
    // the order in which they were admitted (as AWS's scheduler batches arrivals briefly).
    EpochMs batch_until = 0;
    auto q = state_.queues.find(qname);
    if (config_.scheduler_batch_ms > 0 && q != state_.queues.end() && q->second.kind == QueueKind::kFairShare) {
      EpochMs& closes = state_.batch_closes[qname];
      if (closes <= t.now) {
        bool idle = state_.JobsIn(qname, JobStatus::kRunnable).empty();
        for (JobStatus st : {JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning})
          idle = idle && state_.JobsIn(qname, st).empty();
        if (idle) closes = t.now + config_.scheduler_batch_ms;
      }
      if (closes > t.now) batch_until = closes;
    }
    for (uint64_t seq : seqs) {
      ServiceJobState& js = state_.jobs.at(seq);
      js.batch_until = batch_until;
      SetJobStatus(t, js, JobStatus::kRunnable, "");
    }
    t.reschedule = true;
  }
}

namespace {

// The host capacity a job waits for: its instance type, on the spot market for managed spot jobs.
std::string HostKeyOf(const ServiceJob& j) {
  return j.attempt_capacity_key.empty() ? CapacityKey(j.instance_type, j.managed_spot) : j.attempt_capacity_key;
}

// A training job's runtime bound: MaxRuntimeInSeconds, one day when absent (as on SageMaker).
int64_t RuntimeBoundMs(const ServiceJob& j) { return j.max_runtime_ms > 0 ? j.max_runtime_ms : 86'400'000; }

// A service job as sched/ sees it. A capacity ladder's rungs go with it, all of them: every new
// attempt starts from the top (docs/spot.md), and the pass picks the first rung with room.
sched::Job SchedJobOf(const ServiceJob& j, EpochMs not_before) {
  sched::Job out{j.seq, CapacityKey(j.instance_type, j.managed_spot), j.instance_count, RuntimeBoundMs(j), not_before, {}};
  if (!j.capacity_ladder.empty()) {
    for (const Rung& r : LadderFromText(j.capacity_ladder, j.fallback_after_interruptions).rungs) out.rungs.push_back(r.Key());
    out.instance_type = out.rungs.front();
  }
  return out;
}

// The earliest time the job may be placed: after its capacity-failure backoff and its arrival batch.
EpochMs NotBefore(const ServiceJobState& js) { return std::max(js.not_before, js.batch_until); }


// When an active job gives its capacity back at the latest: its runtime bound from when its
// attempt started (or was scheduled); within the grace once it is being stopped or overdue.
EpochMs LatestEnd(const ServiceJob& j, EpochMs now, int64_t grace_ms, bool stopping) {
  if (stopping) return now + grace_ms;
  EpochMs since = !j.attempts.empty() && j.attempts.back().started_at ? j.attempts.back().started_at
                  : j.scheduled_at                                   ? j.scheduled_at
                                                                     : now;
  return std::max(since + RuntimeBoundMs(j), now + grace_ms);
}
}  // namespace

double Controller::ShareWeight(const std::vector<ShareAttributes>& distribution, const std::string& share) {
  double weight = 1.0;
  size_t best = 0;
  for (const auto& e : distribution) {
    const std::string& id = e.share_identifier;
    const double w = e.weight_factor;
    if (id == share) return w;
    if (EndsWith(id, "*") && StartsWith(share, id.substr(0, id.size() - 1)) && id.size() > best) {
      best = id.size();
      weight = w;
    }
  }
  return weight;
}

sched::FairShare Controller::FairShareOf(Turn& t, const JobQueue& q, size_t prefix,
                                         std::vector<std::pair<uint64_t, ServiceJobState*>>& offered) {
  const SchedulingPolicy* p = FindPolicy(state_, q.scheduling_policy_arn);
  const FairSharePolicy fs = p && p->fairshare ? *p->fairshare : FairSharePolicy{};
  const int64_t decay = fs.share_decay_seconds;
  const std::vector<ShareAttributes>& distribution = fs.share_distribution;
  sched::FairShare out;
  out.compute_reservation = static_cast<int>(fs.compute_reservation);
  out.decay_seconds = decay;

  std::map<std::string, int64_t> held;
  for (JobStatus st : {JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning})
    for (uint64_t seq : state_.JobsIn(q.name, st)) {
      const ServiceJob& j = state_.jobs.at(seq).job;
      held[j.share_identifier] += j.instance_count;
    }
  // Runnable jobs per share, in dispatch order (State::runnable_by_share): the pass reads only
  // each share's first `prefix` ready jobs, so its cost does not grow with the queue's depth.
  static const std::map<std::string, std::set<State::DispatchKey>> kNoRunnable;
  auto by_share = state_.runnable_by_share.find(q.name);
  const auto& runnable = by_share == state_.runnable_by_share.end() ? kNoRunnable : by_share->second;
  auto& usage = state_.share_usage[q.name];
  for (const auto& [share, h] : held) usage[share];
  for (const auto& [share, jobs] : runnable) usage[share];
  for (auto it = usage.begin(); it != usage.end();) {
    auto& u = it->second;
    int64_t h = held.count(it->first) ? held[it->first] : 0;
    if (u.at) u.usage = sched::DecayedUsage(u.usage, h, t.now - u.at, decay);
    u.at = t.now;
    // Forget shares whose usage has decayed away and that have nothing to do.
    bool idle = h == 0 && !runnable.count(it->first);
    it = idle && u.usage < 1e-3 ? usage.erase(it) : std::next(it);
  }
  for (const auto& [share, jobs] : runnable) {
    sched::Share sh;
    sh.identifier = share;
    sh.weight_factor = ShareWeight(distribution, share);
    sh.decayed_usage = usage[share].usage;
    sh.held = held.count(share) ? held[share] : 0;
    size_t ready = 0;
    for (auto key = jobs.begin(); key != jobs.end() && ready < prefix; ++key) {
      ServiceJobState& js = *key->js;
      offered.emplace_back(js.job.seq, &js);
      const EpochMs not_before = NotBefore(js);
      if (not_before <= t.now) ++ready;
      sh.runnable.push_back(SchedJobOf(js.job, not_before));
    }
    out.shares.push_back(std::move(sh));
  }
  // Shares that hold capacity but wait for nothing still count as active (compute reservation).
  for (const auto& [share, h] : held)
    if (!runnable.count(share)) out.shares.push_back({share, ShareWeight(distribution, share), usage[share].usage, h, {}});
  return out;
}

void Controller::SchedulePass(Turn& t) {
  // An arrival batch that closed since the last pass lets its jobs be placed.
  for (const auto& [queue, closes] : state_.batch_closes)
    if (closes > state_.last_pass_at && closes <= t.now) t.reschedule = true;
  if (!t.reschedule && state_.last_pass_at != 0) return;
  state_.last_pass_at = t.now;
  // The pass's latency, for GET /metrics (trainyard_scheduler_pass_duration_seconds).
  struct Timer {
    Histogram& h;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    ~Timer() { h.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()); }
  } timer{state_.telemetry.schedule_pass};

  if (disk_low_) {
    // Nothing starts while the data dir is under its reserve (CheckDiskReserve): every waiting
    // job says why, and the pass after the space comes back places them.
    const std::string reason = DiskReserveReason();
    const uint64_t pass = ++state_.quota_passes;
    for (const auto& [qname, q] : state_.queues) {
      if (auto classes = state_.quota_runnable.find(qname); classes != state_.quota_runnable.end()) {
        for (auto& [share, by_class] : classes->second)
          for (auto& [cls, jobs] : by_class) {
            jobs.tail_reason = reason;
            jobs.tail_pass = pass;
          }
        continue;
      }
      for (uint64_t seq : state_.JobsIn(qname, JobStatus::kRunnable)) state_.jobs.at(seq).wait_reason = reason;
    }
    return;
  }

  sched::Snapshot snap;
  snap.now_ms = t.now;
  std::map<std::string, int> env_index;
  for (const auto& [name, e] : state_.environments) {
    env_index[name] = static_cast<int>(snap.environments.size());
    int64_t max = 0;
    for (const auto& l : e.capacity_limits)
      if (l.capacity_unit == "NUM_INSTANCES") max = l.max_capacity;
    snap.environments.push_back({name, e.state == ResourceState::kEnabled, max, state_.environment_in_use[name]});
  }
  int64_t free_total = 0;
  for (const auto& it : config_.instance_types) {
    for (bool spot : {false, true}) {
      if (spot && it.spot_count == 0) continue;
      std::string key = CapacityKey(it.name, spot);
      const int64_t used = state_.host_in_use[key];
      const int64_t capacity = HostCapacity(config_, state_, key);
      snap.host.push_back({key, capacity, capacity - used});
      free_total += std::max<int64_t>(0, capacity - used);
    }
  }
  // What holds capacity, and until when at the latest: backfill and estimates build on it.
  const int64_t grace_ms = int64_t{config_.stop_grace_seconds} * 1000;
  for (const auto& [qname, q] : state_.queues)
    for (JobStatus st : {JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning})
      for (uint64_t seq : state_.JobsIn(qname, st)) {
        const ServiceJobState& js = state_.jobs.at(seq);
        const ServiceJob& j = js.job;
        auto e = env_index.find(js.service_environment);
        const TrainingJob* tj = j.attempts.empty() ? nullptr : state_.FindTrainingJob(j.attempts.back().training_job_name);
        snap.running.push_back({e == env_index.end() ? -1 : e->second, HostKeyOf(j), j.instance_count,
                                LatestEnd(j, t.now, grace_ms, tj && tj->stop_requested)});
      }
  // FIFO can start at most free_total jobs per pass; a margin lets it skip misconfigured ones.
  const size_t prefix = static_cast<size_t>(free_total) + 64;
  std::vector<const JobQueue*> queue_refs;
  // The jobs offered, sorted by seq once the snapshot is built (no allocation per job).
  std::vector<std::pair<uint64_t, ServiceJobState*>> offered;
  auto job_at = [&](uint64_t seq) REQUIRES(state_mu_) -> ServiceJobState& {
    auto it = std::lower_bound(offered.begin(), offered.end(), std::pair<uint64_t, ServiceJobState*>{seq, nullptr});
    return it != offered.end() && it->first == seq ? *it->second : state_.jobs.at(seq);
  };
  for (const auto& [name, q] : state_.queues) {
    if (q.kind == QueueKind::kQuotaShare) continue;  // scheduled by ScheduleQuotaQueue
    sched::Queue sq;
    sq.name = name;
    sq.priority = q.priority;
    sq.seq = q.seq;
    sq.enabled = q.state == ResourceState::kEnabled;
    // trainyard extension: the queue tag "trainyard:backfill" = "false" makes the head block the
    // queue, as on AWS.
    if (auto tag = q.tags.find("trainyard:backfill"); tag != q.tags.end()) sq.backfill = tag->second != "false";
    for (const auto& o : q.service_environment_order)
      if (auto it = env_index.find(o.service_environment); it != env_index.end()) sq.environments.push_back(it->second);
    if (q.kind == QueueKind::kFairShare) {
      sq.fair_share = FairShareOf(t, q, prefix, offered);
    } else {
      size_t ready = 0;
      for (uint64_t seq : state_.JobsIn(name, JobStatus::kRunnable)) {
        if (ready >= prefix) {
          sq.truncated = true;
          break;
        }
        ServiceJobState& js = state_.jobs.at(seq);
        offered.emplace_back(seq, &js);
        const EpochMs not_before = NotBefore(js);
        if (not_before <= t.now) ++ready;
        sq.runnable.push_back(SchedJobOf(js.job, not_before));
      }
    }
    snap.queues.push_back(std::move(sq));
  }

  std::sort(offered.begin(), offered.end());
  sched::Decisions d = sched::Schedule(snap);

  state_.front_of_queue.clear();
  for (const auto& f : d.fronts) {
    auto& front = state_.front_of_queue[f.queue];
    for (const auto& fj : f.jobs) {
      front.push_back(fj.job_seq);
      job_at(fj.job_seq).estimated_start = fj.estimated_start_ms;
    }
  }
  // The reasons that name another job name it by its id and name (once per reason, not per job).
  std::map<uint32_t, std::string> named_reasons;
  // The callback runs inside NamedReason, under this turn's state_mu_ (which the analysis cannot
  // carry into a lambda passed to a template).
  for (const auto& [reason, seq] : d.reason_jobs)
    named_reasons[reason] =
        d.NamedReason(reason, [&](uint64_t other) NO_THREAD_SAFETY_ANALYSIS { return JobReference(state_, other); });
  for (const auto& w : d.waits) {
    ServiceJobState& js = job_at(w.job_seq);
    if (w.kind == sched::WaitKind::kNotBefore) {
      // Held back by the controller: a backoff says so (BackingOff), a batch in its own words.
      if (!js.BackingOff(t.now)) {
        js.wait_reason = "waiting for its arrival batch to close at " + std::to_string(js.batch_until) +
                         " (epoch ms): jobs that arrive together are weighed together";
        SetWaitCode(t, js, "", js.wait_reason);
      }
      continue;
    }
    auto named = named_reasons.find(w.reason);
    const std::string& reason = named == named_reasons.end() ? d.ReasonOf(w) : named->second;
    if (js.wait_reason != reason) js.wait_reason = reason;
    SetWaitCode(t, js,
                w.kind == sched::WaitKind::kMisconfiguration ? "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"
                : w.kind == sched::WaitKind::kCapacity || w.kind == sched::WaitKind::kReserved
                    ? "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
                    : "",
                js.wait_reason);
    if (w.kind == sched::WaitKind::kMisconfiguration && js.job.status_reason != js.wait_reason) {
      js.job.status_reason = js.wait_reason;
      t.jobs.insert(w.job_seq);
    }
  }
  for (const auto& s : d.starts) {
    ServiceJobState& js = job_at(s.job_seq);
    js.placement_rung = s.rung;
    StartServiceJob(t, js, snap.environments[s.environment].name);
  }
  // sched::kArbitrationOrder: the quota-share queues come after the queues above, on what they
  // left of the host (StartServiceJob has counted it in host_in_use).
  static_assert(sched::kArbitrationOrder[1] == sched::Participant::kQueues &&
                sched::kArbitrationOrder[2] == sched::Participant::kQuotaQueues);
  for (const auto& [name, q] : state_.queues)
    if (IsQuotaQueue(q)) ScheduleQuotaQueue(t, q);
}

bool Controller::IsQuotaQueue(const JobQueue& q) const { return q.kind == QueueKind::kQuotaShare; }

void Controller::StartServiceJob(Turn& t, ServiceJobState& js, const std::string& env) {
  ServiceJob& job = js.job;
  js.service_environment = env;
  state_.environment_in_use[env] += job.instance_count;
  SetJobStatus(t, js, JobStatus::kScheduled, "");

  int attempt = static_cast<int>(job.attempts.size()) + 1;
  const std::string& base = job.spec.training_job_name.empty() ? job.name : job.spec.training_job_name;
  std::string name = attempt == 1 ? base : base + "-attempt-" + std::to_string(attempt);
  if (state_.FindTrainingJob(name)) {
    SetJobStatus(t, js, JobStatus::kFailed,
                 "Received status from SageMaker: ResourceInUse: Training job names must be unique within an "
                 "AWS account and region, and a training job with this name already exists (" + name + ")");
    return;
  }
  TrainingSpec spec = job.spec;
  spec.training_job_name = name;
  Rung rung{job.instance_type, job.managed_spot};
  if (!job.capacity_ladder.empty()) {
    // The attempt runs on the rung the pass placed it on, and carries the whole ladder, so that
    // its restarts after spot interruptions climb it again from the top.
    const Ladder ladder = LadderFromText(job.capacity_ladder, job.fallback_after_interruptions);
    rung = ladder.rungs[static_cast<size_t>(std::max(js.placement_rung, 0))];
    spec = OnRung(std::move(spec), ladder, rung);
  }
  job.attempt_capacity_key = rung.Key();
  TrainingJob tj;
  tj.name = name;
  tj.arn = Arn("sagemaker", "training-job/" + ToLower(name));
  tj.owner = job.owner;
  tj.request_json = job.payload;
  tj.tags = spec.tags;
  tj.creation_time = t.now;
  tj.last_modified_time = t.now;
  tj.instance_type = rung.type;
  tj.instance_count = job.instance_count;
  tj.capacity_ladder = job.capacity_ladder;
  tj.fallback_after_interruptions = job.fallback_after_interruptions;
  if (!job.capacity_ladder.empty()) tj.rung = std::max(js.placement_rung, 0);
  tj.service_job_id = job.id;
  tj.tuning_job_arn = job.tuning_job_arn;
  tj.attempt_number = attempt;
  tj.spec = std::move(spec);
  tj.seq = state_.next_seq++;
  tj.transitions.push_back({SecondaryStatus::kStarting, t.now, 0, "Starting the training job."});
  tj.secondary_status = SecondaryStatus::kStarting;
  job.attempts.push_back({tj.arn, tj.name, 0, 0, ""});
  state_.AddTrainingJob(std::move(tj));
  t.training_jobs.insert(name);
  TrainingJobEvent(t, name, SecondaryStatus::kStarting, "Starting the training job.", t.now);
  TrainingJob& launched = state_.training_jobs.at(name);
  LaunchTrainingJob(t, launched, launched.spec.managed_spot);
}

namespace {
// Jobs offered per quota class beyond those that could start or preempt in a pass: enough that
// the first 100 waiting jobs (the queue's front and its estimates) are the ones a pass offered
// every job would list, and that capacity preempted jobs leave over finds takers.
constexpr int64_t kQuotaOfferMargin = 100;
}  // namespace

void Controller::SetQuotaWait(Turn& t, ServiceJobState& js, const std::string& reason) {
  js.wait_reason = reason;
  js.reason_pass = state_.quota_passes;
  const bool never = StartsWith(reason, "MISCONFIGURATION:");
  SetWaitCode(t, js, never ? reason.substr(0, reason.find(' ')) : "", reason);
  if (never && js.job.status_reason != reason) {
    js.job.status_reason = reason;
    t.jobs.insert(js.job.seq);
  }
}

void Controller::ScheduleQuotaQueue(Turn& t, const JobQueue& q) {
  const std::string& env_name = q.service_environment_order.front().service_environment;
  const ServiceEnvironment& env = state_.environments.at(env_name);
  const uint64_t pass = ++state_.quota_passes;
  auto queue_classes = state_.quota_runnable.find(q.name);
  if (queue_classes == state_.quota_runnable.end()) {
    state_.front_of_queue[q.name].clear();
    return;  // nothing waits: nothing to start, preempt or explain
  }
  // Every job of every class of `share` waits for `reason` (lazily: State::WaitReasonOf).
  auto all_wait = [&](State::QuotaClasses& classes, const std::string& reason) {
    for (auto& [cls, jobs] : classes) {
      jobs.tail_reason = reason;
      jobs.tail_pass = pass;
    }
  };
  if (q.state != ResourceState::kEnabled || env.state != ResourceState::kEnabled) {
    for (auto& [share, classes] : queue_classes->second) all_wait(classes, "the job queue or its service environment is disabled");
    return;
  }
  sched::QuotaSnapshot snap;
  snap.now_ms = t.now;
  std::map<std::string, int64_t> queue_used;
  // Per share and type: what its running jobs hold, and what of it is on its way back (preempted).
  std::map<std::pair<std::string, std::string>, int64_t> held, leaving;
  std::vector<uint64_t> active;
  for (JobStatus st : {JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning})
    for (uint64_t seq : state_.JobsIn(q.name, st)) {
      active.push_back(seq);
      const ServiceJob& j = state_.jobs.at(seq).job;
      queue_used[j.instance_type] += j.instance_count;
      held[{j.quota_share_name, j.instance_type}] += j.instance_count;
    }
  // Capacity per type: the environment's limit, and no more than this host can run beside
  // everything outside this queue.
  for (const auto& l : env.capacity_limits) {
    const int64_t offered = HostCapacity(config_, state_, l.capacity_unit);
    int64_t host = offered - (state_.host_in_use[l.capacity_unit] - queue_used[l.capacity_unit]);
    snap.capacity[l.capacity_unit] = std::max<int64_t>(0, std::min(l.max_capacity, host));
    // The ceiling stays the configured count: a node that is down comes back, and a job that fits
    // the catalogue waits for capacity rather than being called misconfigured.
    snap.ceiling[l.capacity_unit] = std::min(l.max_capacity, config_.CapacityOf(l.capacity_unit));
  }
  // trainyard extension: the queue tag "trainyard:minRuntimeSeconds" (default 0, as on AWS).
  EpochMs min_runtime_ms = 0;
  if (auto tag = q.tags.find("trainyard:minRuntimeSeconds"); tag != q.tags.end())
    min_runtime_ms = std::max<int64_t>(0, std::atoll(tag->second.c_str())) * 1000;
  std::map<std::string, int> index;
  for (const auto& [key, share] : state_.quota_shares) {
    if (share.queue != q.name) continue;
    sched::QuotaShareSpec spec;
    spec.name = share.name;
    for (const auto& l : share.capacity_limits) spec.limit[l.capacity_unit] = l.max_capacity;
    spec.strategy = share.strategy == ShareStrategy::kReserve ? sched::SharingStrategy::kReserve
                    : share.strategy == ShareStrategy::kLend  ? sched::SharingStrategy::kLend
                                                              : sched::SharingStrategy::kLendAndBorrow;
    spec.borrow_limit_percent = share.borrow_limit;
    spec.in_share_preemption = share.in_share_preemption;
    index[share.name] = static_cast<int>(snap.shares.size());
    snap.shares.push_back(std::move(spec));
  }
  for (uint64_t seq : active) {
    const ServiceJob& j = state_.jobs.at(seq).job;
    auto it = index.find(j.quota_share_name);
    if (it == index.end() || j.attempts.empty()) continue;
    const TrainingJob* tj = state_.FindTrainingJob(j.attempts.back().training_job_name);
    sched::QuotaRunningJob r;
    r.seq = seq;
    r.share = it->second;
    r.instance_type = j.instance_type;
    r.instance_count = j.instance_count;
    r.priority = j.scheduling_priority;
    r.start_order = tj ? tj->seq : seq;  // attempts are numbered as they start
    r.preempting = tj && tj->stop_cause == StopCause::kPreempt;
    if (r.preempting) leaving[{j.quota_share_name, j.instance_type}] += j.instance_count;
    // A job inside the queue's minimum runtime is not preempted, so preemptions do not thrash.
    EpochMs ran_since = j.attempts.back().started_at ? j.attempts.back().started_at : j.scheduled_at;
    r.end_ms = LatestEnd(j, t.now, int64_t{config_.stop_grace_seconds} * 1000, tj && tj->stop_requested);
    // Work counts from when the attempt was placed (the pass's time, so attempts placed together
    // tie and fall to start order), or from its last checkpoint.
    r.started_ms = tj ? tj->creation_time : ran_since;
    r.last_checkpoint_ms = tj ? tj->last_checkpoint_time : 0;
    r.preemptible = !(tj && tj->stop_requested && tj->stop_cause != StopCause::kPreempt) &&
                    t.now - ran_since >= min_runtime_ms;
    snap.running.push_back(r);
  }

  // The offers: per share and class, the first jobs in submit order. A job of a class starts or
  // preempts only inside its share's remaining quota, on idle capacity (capacity on its way back
  // and warm pools included), or with in-share preemption on what its share holds; the jobs of the
  // class behind that many (plus a margin) would fare as the last one offered, and wait for its
  // reason (State::WaitReasonOf) until a later pass offers them. Jobs promised capacity by the
  // last pass are offered wherever they stand. So a pass reads a few jobs per class, however deep
  // the queue.
  struct Offered {
    State::QuotaClassJobs* jobs;
    std::string share;
    bool truncated;
    std::set<uint64_t>::iterator next;  // the first job not offered
  };
  std::vector<Offered> offered_classes;
  std::unordered_map<uint64_t, size_t> class_of_offer;  // job -> offered_classes index
  std::vector<ServiceJobState*> promised;
  for (auto& [share_name, classes] : queue_classes->second) {
    auto it = index.find(share_name);
    if (it == index.end()) {
      all_wait(classes, "quota share " + share_name + " no longer exists");
      continue;
    }
    const sched::QuotaShareSpec& spec = snap.shares[static_cast<size_t>(it->second)];
    auto& runnable = snap.shares[static_cast<size_t>(it->second)].runnable;
    for (auto& [cls, jobs] : classes) {
      const int64_t limit = spec.limit.count(cls.instance_type) ? spec.limit.at(cls.instance_type) : 0;
      const std::pair<std::string, std::string> key{share_name, cls.instance_type};
      const int64_t own = held.count(key) ? held[key] : 0;
      const int64_t back = leaving.count(key) ? leaving[key] : 0;
      const int64_t cap = snap.capacity.count(cls.instance_type) ? snap.capacity[cls.instance_type] : 0;
      int64_t room = std::max<int64_t>(0, limit - (own - back)) + std::max<int64_t>(0, cap - queue_used[cls.instance_type]);
      for (const auto& [other, n] : leaving)
        if (other.second == cls.instance_type) room += n;
      if (spec.in_share_preemption) room += own;
      int64_t n = room / std::max<int64_t>(1, cls.instance_count) + kQuotaOfferMargin;
      const size_t c = offered_classes.size();
      auto seq_it = jobs.seqs.begin();
      for (; seq_it != jobs.seqs.end() && n > 0; ++seq_it) {
        ServiceJobState& js = state_.jobs.at(*seq_it);
        if (js.BackingOff(t.now)) {
          js.reason_pass = pass;
          continue;
        }
        --n;
        runnable.push_back({*seq_it, js.job.instance_type, js.job.instance_count, js.job.scheduling_priority,
                            RuntimeBoundMs(js.job), js.nominated});
        if (js.nominated) promised.push_back(&js);
        class_of_offer[*seq_it] = c;
      }
      offered_classes.push_back({&jobs, share_name, seq_it != jobs.seqs.end(), seq_it});
    }
  }
  // The jobs promised capacity by the last pass, where they stand behind their class's offers.
  auto& nominated = state_.quota_nominated[q.name];
  for (uint64_t seq : nominated) {
    auto js_it = state_.jobs.find(seq);
    if (js_it == state_.jobs.end() || class_of_offer.count(seq)) continue;
    ServiceJobState& js = js_it->second;
    if (js.job.status != JobStatus::kRunnable || !js.nominated || js.BackingOff(t.now)) continue;
    auto it = index.find(js.job.quota_share_name);
    if (it == index.end()) continue;
    snap.shares[static_cast<size_t>(it->second)].runnable.push_back(
        {seq, js.job.instance_type, js.job.instance_count, js.job.scheduling_priority, RuntimeBoundMs(js.job), true});
    promised.push_back(&js);
  }
  nominated.clear();
  for (ServiceJobState* js : promised) js->nominated = false;
  const auto& runnable = state_.JobsIn(q.name, JobStatus::kRunnable);

  // The Available warm pools of this queue hold their shares' instances until something waiting
  // may use them (sched::IdleHold); another share reclaiming its quota releases them
  // (docs/warm-pools.md). Whether a waiting job would take a pool over is read from its spec.
  std::map<uint64_t, std::string> pool_by_seq;
  std::set<std::string> waiting_keys;
  bool keys_read = false;
  for (const auto& [id, p] : state_.warm_pools) {
    if (p.status != WarmPoolStatus::kAvailable || p.queue != q.name) continue;
    auto it = index.find(p.quota_share);
    if (it == index.end()) continue;
    if (!keys_read) {
      keys_read = true;
      for (uint64_t seq : runnable) {
        const ServiceJob& j = state_.jobs.at(seq).job;
        if (j.spec.keep_alive_seconds > 0) waiting_keys.insert(WarmPoolMatchKey(j.spec, j.owner));
      }
    }
    snap.idle_holds.push_back({p.seq, it->second, p.instance_type, p.instance_count, p.expires_at,
                               waiting_keys.count(p.match_key) > 0});
    pool_by_seq[p.seq] = id;
  }

  sched::QuotaDecisions d = sched::ScheduleQuotaShares(snap);
  for (uint64_t seq : d.promised) {
    state_.jobs.at(seq).nominated = true;
    nominated.push_back(seq);
  }

  std::vector<uint64_t> front;
  for (const auto& f : d.front) {
    front.push_back(f.job_seq);
    state_.jobs.at(f.job_seq).estimated_start = f.estimated_start_ms;
  }
  // Per offered class: the reason of its last job that waits (-1: none waits).
  std::vector<int64_t> last_wait(offered_classes.size(), -1);
  for (const auto& w : d.waits) {
    SetQuotaWait(t, state_.jobs.at(w.job_seq), d.ReasonOf(w));
    if (auto c = class_of_offer.find(w.job_seq); c != class_of_offer.end()) last_wait[c->second] = w.reason;
  }
  // The jobs of a class not offered wait as its last offered job does. A class that can never
  // run says so on each of its jobs (their status reason and event, as AWS's blocked queue).
  for (size_t c = 0; c < offered_classes.size(); ++c) {
    Offered& o = offered_classes[c];
    if (!o.truncated) continue;
    const std::string reason = last_wait[c] >= 0 ? d.reasons[static_cast<size_t>(last_wait[c])]
                                                 : "waiting for capacity: jobs of share '" + o.share +
                                                       "' submitted before it are placed first";
    if (StartsWith(reason, "MISCONFIGURATION:")) {
      for (auto it = o.next; it != o.jobs->seqs.end(); ++it) {
        ServiceJobState& js = state_.jobs.at(*it);
        if (!js.BackingOff(t.now)) SetQuotaWait(t, js, reason);
      }
      continue;
    }
    o.jobs->tail_reason = reason;
    o.jobs->tail_pass = pass;
  }
  state_.front_of_queue[q.name] = front;
  for (const auto& p : d.preemptions) {
    if (auto pool = pool_by_seq.find(p.victim_seq); pool != pool_by_seq.end()) {
      const ServiceJob& for_job = state_.jobs.at(p.for_job_seq).job;
      TerminateWarmPool(t, pool->second, "Released: quota share " + for_job.quota_share_name +
                                             " reclaims its capacity for service job " + for_job.id + ".");
      continue;
    }
    ServiceJobState& victim = state_.jobs.at(p.victim_seq);
    TrainingJob* tj = state_.FindTrainingJob(victim.job.attempts.back().training_job_name);
    if (!tj || tj->stop_requested) continue;
    victim.job.preempted_for = state_.jobs.at(p.for_job_seq).job.id;
    t.jobs.insert(p.victim_seq);
    RequestStop(t, *tj, StopCause::kPreempt,
                std::string(p.in_share ? "Preempted for a higher-priority job of its share: "
                                       : "Preempted to give borrowed capacity back: ") +
                    "service job " + victim.job.preempted_for);
  }
  for (const auto& s : d.starts) StartServiceJob(t, state_.jobs.at(s.job_seq), env_name);
}

}  // namespace ty::control
