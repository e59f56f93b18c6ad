#include "control/controller.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cassert>

#include <filesystem>

#include "control/ladder.h"
#include "control/share_standings.h"
#include "control/system_metrics.h"
#include "control/turn.h"
#include "core/strings.h"
#include "exec/executor.h"
#include "store/event_log.h"
#include "store/store.h"

namespace ty::control {

namespace fs = std::filesystem;

namespace {

// A job definition revision's kMeta key; the revision is zero-padded so keys sort by name, then
// revision.
std::string JobDefinitionKey(const std::string& name, int revision) {
  char rev[16];
  std::snprintf(rev, sizeof rev, "%010d", revision);
  return "job-definition/" + name + ":" + rev;
}

std::string NameFromArnOrName(const std::string& s) {
  auto slash = s.rfind('/');
  return StartsWith(s, "arn:") && slash != std::string::npos ? s.substr(slash + 1) : s;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Construction, loading, the loop.

Controller::Controller(Config config, const Clock& clock, Ports ports)
    : config_(std::move(config)),
      clock_(clock),
      store_(std::move(ports.store)),
      executor_(std::move(ports.executor)),
      event_log_(std::move(ports.events)) {
  for (const auto& a : config_.alarms)
    if (a.rule == "failure_ratio") failure_window_ms_ = std::max(failure_window_ms_, a.window_seconds * 1000);
}

Controller::~Controller() { Shutdown(); }

std::string Controller::Arn(const std::string& service, const std::string& resource) const {
  return "arn:aws:" + service + ":" + config_.region + ":" + config_.account_id + ":" + resource;
}

StatusOr<std::unique_ptr<Controller>> Controller::Open(const Config& config, const Clock& clock, Ports ports) {
  if (!ports.store || !ports.events || !ports.executor) return InvalidArgument("the controller needs a store, an event log and an executor");
  if (config.sandbox != "bwrap" && config.sandbox != "none")
    return InvalidArgument("executor.sandbox must be resolved to bwrap or none before the controller opens, not " + config.sandbox);
  std::unique_ptr<Controller> c(new Controller(config, clock, std::move(ports)));
  c->data_dir_ = fs::absolute(config.data_dir).lexically_normal().string();
  c->sandbox_ = config.sandbox;
  std::error_code ec;
  {
    // No other thread exists yet; the locks are taken for what loading and re-adopting require.
    MutexLock turn(c->turn_mu_);
    WriterLock lock(c->state_mu_);
    c->last_event_seq_ = c->event_log_->LastPublished();
    c->LoadState();
    c->state_.cloudwatch.set_max_series(static_cast<size_t>(config.cloudwatch.max_series));
    c->state_.cloudwatch.set_max_bytes(static_cast<size_t>(config.cloudwatch.max_series_bytes));
    // Workspaces of pools that ended while the server was down between the commit and the removal.
    for (const auto& entry : fs::directory_iterator(fs::path(c->data_dir_) / "pools", ec)) {
      if (c->state_.warm_pools.count(entry.path().filename().string())) continue;
      std::error_code rm;
      fs::remove_all(entry.path(), rm);
    }
    c->ReadoptAttempts();
    c->ReadoptContainerAttempts();
  }
  return c;
}

void Controller::LoadState() {
  State s;  // built here, then moved in whole

  auto must = [](Status st) {
    if (!st.ok()) {
      spdlog::critical("cannot load state: {}", st.message());
      std::abort();
    }
  };
  must(store_->LoadAll(store::Kind::kServiceEnvironment, [&](const std::string&, const std::string& doc) {
    ServiceEnvironment e;
    if (DecodeDoc(doc, &e)) s.environments[e.name] = e;
  }));
  must(store_->LoadAll(store::Kind::kJobQueue, [&](const std::string&, const std::string& doc) {
    JobQueue q;
    if (DecodeDoc(doc, &q)) s.queues[q.name] = q;
  }));
  must(store_->LoadAll(store::Kind::kSchedulingPolicy, [&](const std::string&, const std::string& doc) {
    SchedulingPolicy p;
    if (DecodeDoc(doc, &p)) s.policies[p.name] = p;
  }));
  for (auto& [name, q] : s.queues) q.kind = KindOfPolicy(s, q.scheduling_policy_arn);
  must(store_->LoadAll(store::Kind::kQuotaShare, [&](const std::string& key, const std::string& doc) {
    QuotaShare q;
    if (DecodeDoc(doc, &q)) s.quota_shares[key] = q;
  }));
  must(store_->LoadAll(store::Kind::kServiceJob, [&](const std::string&, const std::string& doc) {
    ServiceJobState js;
    if (!DecodeServiceJobRow(doc, &js.job, &js.service_environment, &js.history)) return;
    uint64_t seq = js.job.seq;
    s.job_seq_by_id[js.job.id] = seq;
    if (!js.job.client_token.empty()) s.job_seq_by_token[js.job.client_token] = seq;
    s.by_queue_status[js.job.queue][js.job.status].insert(seq);
    if (IsActive(js.job.status)) s.environment_in_use[js.service_environment] += js.job.instance_count;
    if (!IsTerminal(js.job.status) && !ShareOf(js.job).empty()) ++s.unfinished_by_share[js.job.queue][ShareOf(js.job)];
    s.next_seq = std::max(s.next_seq, seq + 1);
    ServiceJobState& stored = s.jobs.emplace(seq, std::move(js)).first->second;
    if (stored.job.status == JobStatus::kRunnable) s.IndexRunnable(stored);  // the index points at the stored job
  }));
  must(store_->LoadAll(store::Kind::kTrainingJob, [&](const std::string&, const std::string& doc) {
    TrainingJob t;
    if (!DecodeDoc(doc, &t)) return;
    s.next_seq = std::max(s.next_seq, t.seq + 1);
    bool live = IsLive(t.status);
    if (live && t.launched) s.host_in_use[CapacityKey(t.instance_type, t.on_spot)] += t.instance_count;
    s.AddTrainingJob(t);
  }));
  must(store_->LoadAll(store::Kind::kWarmPool, [&](const std::string&, const std::string& doc) {
    WarmPool p;
    if (!DecodeDoc(doc, &p)) return;
    s.next_seq = std::max(s.next_seq, p.seq + 1);
    if (p.status == WarmPoolStatus::kAvailable) s.warm_pool_held[p.instance_type] += p.instance_count;
    s.warm_pools[p.id] = p;
  }));
  must(store_->LoadAll(store::Kind::kMetricSeries, [&](const std::string& key, const std::string& doc) {
    MetricSeries series;
    if (DecodeMetricSeries(doc, &series)) s.metric_series.emplace(key, std::move(series));
  }));
  must(store_->LoadAll(store::Kind::kMeta, [&](const std::string& key, const std::string& doc) {
    if (StartsWith(key, "tuning-job/")) {
      TuningJob tuning;
      if (DecodeTuningJob(doc, &tuning)) {
        s.next_seq = std::max(s.next_seq, tuning.seq + 1);
        s.tuning_jobs[key.substr(11)] = std::move(tuning);
      }
      return;
    }
    if (StartsWith(key, "compute-environment/")) {
      ComputeEnvironment e;
      if (DecodeDoc(doc, &e)) {
        s.next_seq = std::max(s.next_seq, e.seq + 1);
        s.compute_environments[e.name] = std::move(e);
      }
      return;
    }
    if (StartsWith(key, "container-job/")) {
      ContainerJob j;
      if (DecodeDoc(doc, &j)) LoadContainerJob(s, std::move(j));
      return;
    }
    if (StartsWith(key, "job-definition/")) {
      JobDefinition d;
      if (DecodeDoc(doc, &d)) {
        s.next_seq = std::max(s.next_seq, d.seq + 1);
        s.job_definitions[d.name][d.revision] = std::move(d);
      }
      return;
    }
    if (StartsWith(key, "cloudwatch/")) {
      s.cloudwatch.LoadHour(doc);
      return;
    }
    if (!StartsWith(key, "alarm/")) return;
    AlarmState a;
    if (DecodeAlarmDoc(doc, &a)) s.alarms[key.substr(6)] = std::move(a);
  }));
  // failure_ratio looks back over the jobs that ended within its window.
  if (failure_window_ms_ > 0) {
    std::vector<const ServiceJob*> ended;
    for (const auto& [seq, js] : s.jobs)
      if ((js.job.status == JobStatus::kSucceeded || js.job.status == JobStatus::kFailed) && js.job.stopped_at > 0)
        ended.push_back(&js.job);
    std::sort(ended.begin(), ended.end(), [](const ServiceJob* a, const ServiceJob* b) { return a->stopped_at < b->stopped_at; });
    for (const ServiceJob* j : ended) NoteEnding(*j, j->stopped_at);
  }
  LoadPrincipals(s);
  LoadEventBus(s);
  must(store_->LoadAll(store::Kind::kSystemMetrics, [&](const std::string& key, const std::string& doc) {
    SystemSeries series;
    if (DecodeSystemSeries(doc, &series)) s.system_series[key] = std::move(series);
  }));
  spdlog::info("loaded {} environments, {} queues, {} service jobs, {} training jobs", s.environments.size(),
               s.queues.size(), s.jobs.size(), s.training_jobs.size());
  state_ = std::move(s);
}

void Controller::Start() {
  {
    MutexLock lock(queue_mu_);
    loop_running_ = true;
  }
  thread_ = std::thread([this] { Loop(); });
}

void Controller::Shutdown() {
  {
    MutexLock lock(queue_mu_);
    stopping_ = true;
    accepting_ = false;
    queue_cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  executor_.reset();  // stops its listener; attempts keep running under their supervisors
}

void Controller::Wake() {
  MutexLock lock(queue_mu_);
  wake_ = true;
  queue_cv_.notify_one();
}

void Controller::Loop() {
  EpochMs wake_at = clock_.now_ms() + 500;
  while (true) {
    std::deque<std::pair<Command, Ack>> batch;
    {
      MutexLock lock(queue_mu_);
      // A turn at least every 500 ms (timers), and at the next deadline before that (an arrival
      // batch closing, a backoff ending); a spurious wake-up only runs one early.
      const EpochMs wait_ms = std::clamp<EpochMs>(wake_at - clock_.now_ms(), 0, 500);
      if (commands_.empty() && !wake_ && !stopping_) queue_cv_.wait_for(queue_mu_, std::chrono::milliseconds(wait_ms));
      batch.swap(commands_);
      wake_ = false;
      if (stopping_ && batch.empty()) break;
    }
    MutexLock turn(turn_mu_);
    RunTurn(batch);
    wake_at = NextDeadline();
  }
}

EpochMs Controller::NextDeadline() {
  EpochMs at = last_tick_ + 500;
  if (!backoff_ends_.empty()) at = std::min(at, *backoff_ends_.begin());
  ReaderLock lock(state_mu_);
  for (const auto& [queue, closes] : state_.batch_closes)
    if (closes > state_.last_pass_at) at = std::min(at, closes);  // not yet passed since it closed
  return at;
}

void Controller::Step() {
  MutexLock turn(turn_mu_);
  std::deque<std::pair<Command, Ack>> batch;
  {
    MutexLock lock(queue_mu_);
    assert(!loop_running_);
    batch.swap(commands_);
    wake_ = false;
  }
  RunTurn(batch);
}

void Controller::RenderEvents(Turn& t, std::vector<store::Write>* writes) {
  if (!event_renderer_ || !config_.events_enabled) {
    t.events.clear();
    return;
  }
  for (const EventTrigger& e : t.events) {
    const uint64_t seq = ++last_event_seq_;
    writes->push_back({store::Kind::kEvent, store::EventLog::Key(seq), event_renderer_(state_, e, seq)});
  }
}

void Controller::SampleShareHistory(EpochMs now) {
  if (now < next_share_sample_) return;
  const int64_t interval = config_.console.share_history_interval_seconds * 1000;
  // The next sample falls on the same grid, however late this tick came (or however far the
  // clock jumped).
  next_share_sample_ = next_share_sample_ == 0 ? now + interval
                                               : next_share_sample_ + interval * ((now - next_share_sample_) / interval + 1);
  const Holdings held = ActiveHoldings(state_);
  for (const QueueStanding& q : ShareStandings(state_, held))
    if (q.kind != QueueKind::kFifo) state_.share_history.Add(q.queue, SampleOf(q, now));
  std::vector<std::string> gone;
  for (const auto& [queue, samples] : state_.share_history.queues())
    if (!state_.queues.count(queue)) gone.push_back(queue);
  for (const auto& queue : gone) state_.share_history.Forget(queue);
}

void Controller::PruneEvents(EpochMs now) {
  if (now - last_event_prune_ < 60000) return;
  last_event_prune_ = now;
  const int64_t before = config_.events_retention_days > 0 ? now - config_.events_retention_days * 86400000 : 0;
  auto gone = event_log_->Prune(static_cast<uint64_t>(config_.events_max), before);
  if (!gone.ok()) spdlog::warn("event retention: {}", gone.status().message());
  const int64_t audit_before = config_.audit_retain_days > 0 ? now - config_.audit_retain_days * 86400000 : 0;
  auto audit_gone = event_log_->PruneAudit(static_cast<uint64_t>(config_.audit_max_records), audit_before);
  if (!audit_gone.ok()) spdlog::warn("audit retention: {}", audit_gone.status().message());
}

// ------------------------------------------------------------------------------------------
// Audit records (control/audit.h).

namespace {
thread_local PendingAudit* current_audit = nullptr;  // the calling API thread's AuditScope
}  // namespace

AuditScope::AuditScope(PendingAudit* pending) { current_audit = pending; }
AuditScope::~AuditScope() { current_audit = nullptr; }

PendingAudit* AuditScope::Take() {
  PendingAudit* p = current_audit;
  if (!p || p->taken) return nullptr;
  p->taken = true;
  return p;
}

void Controller::AddAudit(Turn& t, const std::string& key, EpochMs at, std::string doc) {
  EventTrigger e;
  e.kind = EventTrigger::Kind::kApiCall;
  e.data = doc;
  e.at = at;
  t.events.push_back(std::move(e));
  t.audit.emplace_back(key, std::move(doc));
}

Status Controller::RecordAudit(const std::string& key, EpochMs at, std::string doc) {
  return ExecuteStatus([&](Turn& t) {
    AddAudit(t, key, at, std::move(doc));
    return Status::Ok();
  });
}

Status Controller::ExecuteStatus(std::function<Status(Turn&)> fn) {
  auto r = Execute<bool>([&](Turn& t) -> StatusOr<bool> {
    Status st = fn(t);
    if (!st.ok()) return st;
    return true;
  });
  return r.status();
}

bool Controller::InFlight::Touches(const State& s, const std::string& job_id) const {
  if (queues) return true;
  const uint64_t* seq = s.SeqOfJob(job_id);
  if (!seq) return false;  // unknown (a job this turn created is known)
  if (jobs.count(*seq)) return true;
  for (const auto& a : s.jobs.at(*seq).job.attempts)
    if (training_jobs.count(a.training_job_name)) return true;
  return false;
}

int64_t HostCapacity(const Config& config, const State& s, const std::string& key) {
  const int64_t configured = config.CapacityOf(key);
  if (!s.cluster) return configured;
  auto it = s.cluster->instances.find(key);
  return it == s.cluster->instances.end() ? 0 : std::min(configured, it->second);
}

void Controller::TakeClusterCapacity(Turn& t, std::shared_ptr<const exec::CapacityReport> cluster) {
  // The same view as last turn is most turns; otherwise the nodes' details change every turn a
  // job starts or ends, and only the offered counts matter to the passes.
  if (cluster == state_.cluster) return;
  const bool changed = !cluster != !state_.cluster || (cluster && cluster->instances != state_.cluster->instances);
  state_.cluster = std::move(cluster);
  if (changed) t.reschedule = true;
}

void Controller::RunTurn(std::deque<std::pair<Command, Ack>>& batch) {
  // Before the lock: the executor parses its attempts' status files and hands its latest view of
  // its cluster, and on a tick the metric tails read their jobs' new log lines and the data dir's
  // free space is measured.
  const std::vector<exec::AttemptEvent> polled = executor_->Poll();
  std::shared_ptr<const exec::CapacityReport> cluster = executor_->Capacity();
  Turn t(clock_.now_ms());
  int64_t disk_free = -1;
  if (t.now - last_tick_ >= 500) {
    PrefetchTails();
    disk_free = MeasureDiskFree();
  }
  Status committed;
  std::vector<store::Write> writes;
  std::vector<std::string> swept_logs;
  bool ticked = false;
  uint64_t events_before = 0;
  {
    WriterLock lock(state_mu_);
    for (auto& [cmd, ack] : batch) cmd(t);
    AdmitSubmitted(t);
    AdmitContainerJobs(t);
    ApplyExecutorEvents(t, polled);
    TakeClusterCapacity(t, std::move(cluster));
    // A capacity-failure backoff ended: its job may be placed again (on the turn Loop woke for it).
    if (!backoff_ends_.empty() && *backoff_ends_.begin() <= t.now) {
      backoff_ends_.erase(backoff_ends_.begin(), backoff_ends_.upper_bound(t.now));
      t.reschedule = true;
    }
    if (t.now - last_tick_ >= 500) {
      ticked = true;
      if (last_tick_ != 0) InjectSpotInterruptions(t, t.now - last_tick_);
      last_tick_ = t.now;
      CheckDiskReserve(t, disk_free);
      EnforceTimeouts(t);
      EnforceContainerTimeouts(t);
      EvaluateAlarms(t);
      FireScheduledRules(t);
      TailMetrics(t);
      SweepLogs(t.now, &swept_logs);
      // Fair-share order moves as usage decays: look again while such queues have work waiting.
      // Quota-share queues are looked at again too: a warm pool released by a reclaim frees its
      // instances without an event of its own.
      for (const auto& [name, q] : state_.queues)
        if (q.kind != QueueKind::kFifo && !state_.JobsIn(name, JobStatus::kRunnable).empty()) t.reschedule = true;
    }
    ExpireWarmPools(t);
    RunTuningJobs(t);
    StartPendingTrainingJobs(t);
    SchedulePass(t);
    ScheduleContainerJobs(t);
    if (ticked) {
      SampleShareHistory(t.now);
      SampleBatchMetrics(t);
    }
    if (unsaved_) {
      t.CarryOver(*unsaved_);
      unsaved_.reset();
    }

    for (const auto& n : t.environments)
      if (auto it = state_.environments.find(n); it != state_.environments.end())
        writes.push_back({store::Kind::kServiceEnvironment, n, EncodeDoc(it->second)});
    for (const auto& n : t.deleted_environments) writes.push_back({store::Kind::kServiceEnvironment, n, ""});
    for (const auto& n : t.queues)
      if (auto it = state_.queues.find(n); it != state_.queues.end())
        writes.push_back({store::Kind::kJobQueue, n, EncodeDoc(it->second)});
    for (const auto& n : t.deleted_queues) writes.push_back({store::Kind::kJobQueue, n, ""});
    for (const auto& n : t.policies)
      if (auto it = state_.policies.find(n); it != state_.policies.end())
        writes.push_back({store::Kind::kSchedulingPolicy, n, EncodeDoc(it->second)});
    for (const auto& n : t.deleted_policies) writes.push_back({store::Kind::kSchedulingPolicy, n, ""});
    for (const auto& n : t.quota_shares)
      if (auto it = state_.quota_shares.find(n); it != state_.quota_shares.end())
        writes.push_back({store::Kind::kQuotaShare, n, EncodeDoc(it->second)});
    for (const auto& n : t.deleted_quota_shares) writes.push_back({store::Kind::kQuotaShare, n, ""});
    for (uint64_t seq : t.jobs) {
      auto found = state_.jobs.find(seq);
      if (found == state_.jobs.end()) continue;
      const ServiceJobState& js = found->second;
      writes.push_back({store::Kind::kServiceJob, js.job.id, EncodeServiceJobRow(js.job, js.service_environment, js.history)});
    }
    for (const auto& n : t.training_jobs)
      if (auto it = state_.training_jobs.find(n); it != state_.training_jobs.end())
        writes.push_back({store::Kind::kTrainingJob, n, EncodeDoc(it->second)});
    for (const auto& n : t.warm_pools)
      if (auto it = state_.warm_pools.find(n); it != state_.warm_pools.end())
        writes.push_back({store::Kind::kWarmPool, n, EncodeDoc(it->second)});
    for (const auto& n : t.deleted_warm_pools) writes.push_back({store::Kind::kWarmPool, n, ""});
    for (const auto& n : t.tuning_jobs)
      if (auto it = state_.tuning_jobs.find(n); it != state_.tuning_jobs.end())
        writes.push_back({store::Kind::kMeta, "tuning-job/" + n, EncodeTuningJob(it->second)});
    for (const auto& n : t.deleted_tuning_jobs) writes.push_back({store::Kind::kMeta, "tuning-job/" + n, ""});
    for (const auto& n : t.compute_environments)
      if (auto it = state_.compute_environments.find(n); it != state_.compute_environments.end())
        writes.push_back({store::Kind::kMeta, "compute-environment/" + n, EncodeDoc(it->second)});
    for (const auto& n : t.deleted_compute_environments) writes.push_back({store::Kind::kMeta, "compute-environment/" + n, ""});
    for (uint64_t seq : t.container_jobs)
      if (auto it = state_.container_jobs.find(seq); it != state_.container_jobs.end()) {
        char key[48];
        std::snprintf(key, sizeof key, "container-job/%020llu", static_cast<unsigned long long>(seq));
        writes.push_back({store::Kind::kMeta, key, EncodeDoc(it->second)});
      }
    for (const auto& [name, revision] : t.job_definitions)
      if (auto it = state_.job_definitions.find(name); it != state_.job_definitions.end())
        if (auto rev = it->second.find(revision); rev != it->second.end())
          writes.push_back({store::Kind::kMeta, JobDefinitionKey(name, revision), EncodeDoc(rev->second)});
    for (const auto& n : t.alarms) {  // deleted when gone from the state
      auto found = state_.alarms.find(n);
      writes.push_back({store::Kind::kMeta, "alarm/" + n, found == state_.alarms.end() ? "" : EncodeAlarmDoc(found->second)});
    }
    for (const auto& n : t.system_series)
      if (auto it = state_.system_series.find(n); it != state_.system_series.end())
        writes.push_back({store::Kind::kSystemMetrics, n, EncodeSystemSeries(it->second)});
    for (const auto& n : t.metric_series)
      if (auto it = state_.metric_series.find(n); it != state_.metric_series.end())
        writes.push_back({store::Kind::kMetricSeries, n, EncodeMetricSeries(it->second)});
    for (const auto& [series, hour] : t.cloudwatch)
      writes.push_back({store::Kind::kMeta, CloudWatchMetrics::DocKey(series, hour), state_.cloudwatch.EncodeHour(series, hour)});
    WritePrincipals(t, &writes);
    WriteEventBus(t, &writes);
    for (auto& [key, doc] : t.audit) writes.push_back({store::Kind::kAudit, key, doc});
    events_before = last_event_seq_;
    RenderEvents(t, &writes);
    in_flight_.active = true;
    in_flight_.jobs = t.jobs;
    in_flight_.training_jobs = t.training_jobs;
    in_flight_.queues = !t.queues.empty() || !t.deleted_queues.empty();
  }
  // The commit (an fsync) runs outside the lock: readers of what this turn did not change go on.
  committed = store_->Commit(writes);
  {
    WriterLock lock(state_mu_);
    in_flight_ = InFlight();
    if (!committed.ok()) {
      // Typically a full disk (SQLITE_FULL, an I/O error). Exiting would not help: a restart
      // finds the same disk. The state in memory is ahead of the store; the turn is kept and
      // written again with the next ones, and nothing it decided is acted on or acknowledged
      // until then. CheckDiskReserve frees space.
      last_event_seq_ = events_before;
      spdlog::error("store commit failed: {}; {} writes are kept for the next turn", committed.message(), writes.size());
      unsaved_ = std::make_unique<Turn>(t.now);
      unsaved_->CarryOver(t);
      committed = Unavailable("the change could not be stored (" + committed.message() +
                              "); it may still take effect once the server can store it: describe the resource "
                              "before retrying");
    }
  }
  committed_cv_.notify_all();
  // Housekeeping that touches only files and the event log's own connection, outside the lock.
  for (const auto& name : swept_logs) executor_->DiscardLogs(name);
  if (ticked) PruneEvents(t.now);
  // A new key or policy is in force before its creator hears of it.
  if (committed.ok() && !t.principals.empty()) PublishDirectory();
  for (auto& [cmd, ack] : batch) ack(committed);
  if (!committed.ok()) return;  // the next turn (at most 500 ms away) tries again
  if (!t.events.empty()) event_log_->Published(last_event_seq_);
  // A resumed run's earlier files go before it starts again.
  for (const auto& id : t.discards)
    if (Status st = executor_->Discard(id); !st.ok()) spdlog::warn("cannot clear the earlier run of {}: {}", id, st.message());
  for (auto& [id, spec] : t.starts) {
    Status st = executor_->Start(id, spec);
    if (!st.ok()) {
      spdlog::error("cannot start attempt {}: {}", id, st.message());
      exec::AttemptEvent e;
      e.attempt_id = id;
      // The host could not bring the instances up: a capacity failure (Batch's service job retries), which a
      // service job retries without consuming its attempts.
      e.phase = exec::Phase::kExited;
      e.exit_code = 1;
      e.at = clock_.now_ms();
      e.failure_reason = "CapacityError: the host could not start the instances: " + st.message();
      e.failure_kind = exec::FailureKind::kCapacity;
      deferred_events_.push_back(e);
      MutexLock qlock(queue_mu_);
      wake_ = true;
    }
  }
  // The stop is committed (the job is Stopping); one the executor could not deliver is logged, and
  // a restart asks again (ReadoptAttempts).
  for (auto& [id, grace] : t.stops)
    if (Status st = executor_->Stop(id, grace); !st.ok()) spdlog::warn("cannot stop attempt {}: {}", id, st.message());
  for (auto& [id, grace] : t.interrupts)
    if (Status st = executor_->Interrupt(id, grace); !st.ok()) spdlog::warn("cannot interrupt attempt {}: {}", id, st.message());
  for (const auto& dir : t.remove_dirs) {
    // The pool's workspace and persistent cache end with it (SageMaker's managed warm pools).
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec) spdlog::warn("cannot remove {}: {}", dir, ec.message());
  }
  if (!t.submitted_now.empty() || t.reschedule) {
    MutexLock lock(queue_mu_);
    wake_ = true;
  }
}

// ------------------------------------------------------------------------------------------
// Lookups.

const TrainingJob* State::FindTrainingJob(const std::string& name) const {
  auto it = training_jobs.find(name);
  if (it != training_jobs.end()) return &it->second;
  auto lower = training_job_by_lower.find(ToLower(name));
  return lower == training_job_by_lower.end() ? nullptr : &training_jobs.at(lower->second);
}

void State::AddTrainingJob(TrainingJob tj) {
  training_job_by_lower[ToLower(tj.name)] = tj.name;
  if (IsLive(tj.status)) live_training_jobs.emplace(tj.seq, tj.name);
  std::string name = tj.name;
  training_jobs[name] = std::move(tj);
}

const JobQueue* Controller::FindQueue(const State& s, const std::string& name_or_arn) {
  auto it = s.queues.find(NameFromArnOrName(name_or_arn));
  if (it == s.queues.end()) return nullptr;
  if (StartsWith(name_or_arn, "arn:") && it->second.arn != name_or_arn) return nullptr;
  return &it->second;
}

const ServiceEnvironment* Controller::FindEnvironment(const State& s, const std::string& name_or_arn) {
  auto it = s.environments.find(NameFromArnOrName(name_or_arn));
  if (it == s.environments.end()) return nullptr;
  if (StartsWith(name_or_arn, "arn:") && it->second.arn != name_or_arn) return nullptr;
  return &it->second;
}

// ------------------------------------------------------------------------------------------
// Service environments.

StatusOr<ServiceEnvironment> Controller::CreateServiceEnvironment(const CreateServiceEnvironmentCommand& cmd) {
  ServiceEnvironment e;
  e.name = cmd.name;
  e.type = "SAGEMAKER_TRAINING";
  e.state = cmd.state;
  e.tags = cmd.tags;
  e.capacity_limits = cmd.capacity_limits;
  e.arn = Arn("batch", "service-environment/" + e.name);
  return Execute<ServiceEnvironment>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<ServiceEnvironment> {
    if (state_.environments.count(e.name))
      return AlreadyExists("Service environment " + e.name + " already exists");
    if (state_.environments.size() >= 50)
      return LimitExceeded("at most 50 service environments may exist");
    e.seq = state_.next_seq++;
    state_.environments[e.name] = e;
    t.environments.insert(e.name);
    t.reschedule = true;
    return e;
  });
}

StatusOr<ServiceEnvironment> Controller::UpdateServiceEnvironment(const UpdateServiceEnvironmentCommand& cmd) {
  const std::string& id = cmd.environment;
  const std::optional<ResourceState>& new_state = cmd.state;
  return Execute<ServiceEnvironment>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<ServiceEnvironment> {
    const ServiceEnvironment* found = FindEnvironment(state_, id);
    if (!found) return NotFound("Service environment " + id + " does not exist");
    ServiceEnvironment& e = state_.environments[found->name];
    if (new_state) e.state = *new_state;
    if (cmd.capacity_limits) e.capacity_limits = *cmd.capacity_limits;
    t.environments.insert(e.name);
    t.reschedule = true;
    return e;
  });
}

Status Controller::DeleteServiceEnvironment(const DeleteServiceEnvironmentCommand& cmd) {
  const std::string& id = cmd.environment;
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    const ServiceEnvironment* e = FindEnvironment(state_, id);
    if (!e) return NotFound("Service environment " + id + " does not exist");
    if (e->state != ResourceState::kDisabled)
      return FailedPrecondition("Service environment " + e->name + " must be DISABLED before it is deleted");
    for (const auto& [qn, q] : state_.queues)
      for (const auto& o : q.service_environment_order)
        if (o.service_environment == e->name)
          return FailedPrecondition("Service environment " + e->name + " is still associated with job queue " + qn);
    if (state_.environment_in_use[e->name] > 0)
      return FailedPrecondition("Service environment " + e->name + " still has active training jobs");
    std::string name = e->name;
    state_.environments.erase(name);
    state_.environment_in_use.erase(name);
    t.deleted_environments.insert(name);
    return Status::Ok();
  });
}

// ------------------------------------------------------------------------------------------
// Job queues.

namespace {
StatusOr<std::vector<ServiceEnvironmentOrder>> ResolveOrder(const State& s, const std::vector<EnvironmentRef>& order) {
  std::vector<ServiceEnvironmentOrder> out;
  std::set<int> orders;
  std::set<std::string> names;
  for (size_t i = 0; i < order.size(); ++i) {
    std::string where = "serviceEnvironmentOrder[" + std::to_string(i) + "]";
    const std::string& ref = order[i].environment;
    const int o = order[i].order;
    const ServiceEnvironment* e = Controller::FindEnvironment(s, ref);
    if (!e) return InvalidArgument(where + ".serviceEnvironment: service environment " + ref + " does not exist");
    if (!orders.insert(o).second) return InvalidArgument(where + ".order " + std::to_string(o) + " is used twice");
    if (!names.insert(e->name).second) return InvalidArgument(where + ": service environment " + e->name + " is listed twice");
    out.push_back({o, e->name});
  }
  if (out.empty()) return InvalidArgument("serviceEnvironmentOrder must name at least one service environment");
  if (out.size() > 3) return InvalidArgument("serviceEnvironmentOrder may name at most 3 service environments");
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.order < b.order; });
  return out;
}

// Quota-management queues use exactly one service environment with instance-type capacity units
// (and that environment serves no other queue); other queues use NUM_INSTANCES environments.
Status CheckEnvironmentUnits(const State& s, const std::vector<ServiceEnvironmentOrder>& order, bool quota) {
  for (const auto& o : order) {
    const ServiceEnvironment& e = s.environments.at(o.service_environment);
    bool instance_units = !e.capacity_limits.empty() && e.capacity_limits[0].capacity_unit != "NUM_INSTANCES";
    if (quota && !instance_units)
      return InvalidArgument("serviceEnvironmentOrder: a quota-share job queue needs a service environment with "
                             "instance-type capacity units; " + e.name + " uses NUM_INSTANCES");
    if (!quota && instance_units)
      return InvalidArgument("serviceEnvironmentOrder: service environment " + e.name +
                             " uses instance-type capacity units, which need a quota-share scheduling policy");
  }
  if (quota && order.size() != 1)
    return InvalidArgument("serviceEnvironmentOrder: a quota-share job queue uses exactly one service environment");
  return Status::Ok();
}

}  // namespace

StatusOr<JobQueue> Controller::CreateJobQueue(const CreateJobQueueCommand& cmd) {
  JobQueue q;
  q.name = cmd.name;
  q.state = cmd.state;
  q.priority = cmd.priority;
  q.job_queue_type = "SAGEMAKER_TRAINING";
  q.scheduling_policy_arn = cmd.scheduling_policy_arn;
  q.tags = cmd.tags;
  q.job_state_time_limit_actions_json = cmd.time_limit_actions_json;
  q.time_limit_actions = cmd.time_limit_actions;
  q.arn = Arn("batch", "job-queue/" + q.name);
  const std::vector<EnvironmentRef>& order = cmd.service_environment_order;
  q.job_queue_type = cmd.job_queue_type;
  return Execute<JobQueue>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<JobQueue> {
    if (state_.queues.count(q.name)) return AlreadyExists("Job queue " + q.name + " already exists");
    if (state_.queues.size() >= 50) return LimitExceeded("at most 50 job queues may exist");
    if (q.job_queue_type == "ECS") {  // a container queue (compute_environments.cpp)
      auto ces = ResolveComputeOrder(state_, cmd.compute_environment_order);
      if (!ces.ok()) return ces.status();
      q.compute_environment_order = *ces;
      if (!q.scheduling_policy_arn.empty()) {
        const SchedulingPolicy* p = FindPolicy(state_, q.scheduling_policy_arn);
        if (!p || p->fairshare_policy_json.empty())
          return InvalidArgument("schedulingPolicyArn: " + q.scheduling_policy_arn +
                                 " is not a fair-share scheduling policy of this server");
        q.scheduling_policy_arn = p->arn;
      }
      q.kind = KindOfPolicy(state_, q.scheduling_policy_arn);
      q.seq = state_.next_seq++;
      state_.queues[q.name] = q;
      t.queues.insert(q.name);
      t.reschedule = true;
      return q;
    }
    auto resolved = ResolveOrder(state_, order);
    if (!resolved.ok()) return resolved.status();
    q.service_environment_order = *resolved;
    if (!q.scheduling_policy_arn.empty()) {
      const SchedulingPolicy* p = FindPolicy(state_, q.scheduling_policy_arn);
      if (!p) return InvalidArgument("schedulingPolicyArn: scheduling policy " + q.scheduling_policy_arn + " does not exist");
      q.scheduling_policy_arn = p->arn;
    }
    q.kind = KindOfPolicy(state_, q.scheduling_policy_arn);
    TY_RETURN_IF_ERROR(CheckEnvironmentUnits(state_, q.service_environment_order, q.kind == QueueKind::kQuotaShare));
    q.seq = state_.next_seq++;
    state_.queues[q.name] = q;
    t.queues.insert(q.name);
    t.reschedule = true;
    return q;
  });
}

StatusOr<JobQueue> Controller::UpdateJobQueue(const UpdateJobQueueCommand& cmd) {
  const std::string& id = cmd.queue;
  return Execute<JobQueue>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<JobQueue> {
    const JobQueue* found = FindQueue(state_, id);
    if (!found) return NotFound("Job queue " + id + " does not exist");
    JobQueue updated = *found;
    if (cmd.state) updated.state = *cmd.state;
    if (cmd.priority) updated.priority = *cmd.priority;
    if (cmd.scheduling_policy_arn) {
      const std::string& arn = *cmd.scheduling_policy_arn;
      if (updated.scheduling_policy_arn.empty())
        return InvalidArgument("schedulingPolicyArn: a job queue created without a scheduling policy can't have one added");
      const SchedulingPolicy* p = FindPolicy(state_, arn);
      if (!p) return InvalidArgument("schedulingPolicyArn: scheduling policy " + arn + " does not exist");
      const SchedulingPolicy* current = FindPolicy(state_, updated.scheduling_policy_arn);
      if (current && p->fairshare_policy_json.empty() != current->fairshare_policy_json.empty())
        return InvalidArgument("schedulingPolicyArn: the policy type of a queue can't be switched");
      updated.scheduling_policy_arn = p->arn;
    }
    const bool container_queue = updated.job_queue_type == "ECS";
    if (cmd.compute_environment_order) {
      if (!container_queue)
        return InvalidArgument("computeEnvironmentOrder is not supported for SAGEMAKER_TRAINING job queues");
      auto resolved = ResolveComputeOrder(state_, *cmd.compute_environment_order);
      if (!resolved.ok()) return resolved.status();
      updated.compute_environment_order = *resolved;
    }
    if (container_queue && (cmd.service_environment_order || cmd.time_limit_actions))
      return InvalidArgument("an ECS job queue takes computeEnvironmentOrder, not serviceEnvironmentOrder or jobStateTimeLimitActions");
    if (cmd.service_environment_order) {
      auto resolved = ResolveOrder(state_, *cmd.service_environment_order);
      if (!resolved.ok()) return resolved.status();
      updated.service_environment_order = *resolved;
    }
    if (cmd.time_limit_actions) {
      updated.job_state_time_limit_actions_json = cmd.time_limit_actions_json;
      updated.time_limit_actions = *cmd.time_limit_actions;
    }
    state_.queues[updated.name] = updated;
    t.queues.insert(updated.name);
    t.reschedule = true;
    return updated;
  });
}

Status Controller::DeleteJobQueue(const DeleteJobQueueCommand& cmd) {
  const std::string& id = cmd.queue;
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    const JobQueue* q = FindQueue(state_, id);
    if (!q) return NotFound("Job queue " + id + " does not exist");
    if (q->state != ResourceState::kDisabled) return FailedPrecondition("Job queue " + q->name + " must be DISABLED before it is deleted");
    std::string name = q->name;
    if (auto cq = state_.container_by_queue_status.find(name); cq != state_.container_by_queue_status.end())
      for (const auto& [st, seqs] : cq->second)
        if (!IsTerminal(st) && !seqs.empty())
          return FailedPrecondition("Job queue " + name + " still has container jobs in " + JobStatusName(st) +
                                    "; cancel or terminate them first");
    for (JobStatus st : {JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning})
      if (!state_.JobsIn(name, st).empty())
        return FailedPrecondition("Job queue " + name + " still has jobs in " + JobStatusName(st) +
                                  "; terminate them first");
    // Jobs that never started fail with the queue.
    for (JobStatus st : {JobStatus::kSubmitted, JobStatus::kPending, JobStatus::kRunnable}) {
      std::vector<uint64_t> seqs(state_.JobsIn(name, st).begin(), state_.JobsIn(name, st).end());
      for (uint64_t seq : seqs) {
        auto& js = state_.jobs.at(seq);
        js.job.is_terminated = true;
        SetJobStatus(t, js, JobStatus::kFailed, "Job queue " + name + " was deleted");
      }
    }
    state_.queues.erase(name);
    t.deleted_queues.insert(name);
    return Status::Ok();
  });
}

}  // namespace ty::control
