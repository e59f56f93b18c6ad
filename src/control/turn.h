// The changes of one controller turn: what to persist, what to do after the commit.
// Private to control/.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include <re2/re2.h>

#include <future>
#include <ios>
#include <optional>
#include <tuple>
#include <memory>

#include "control/audit.h"
#include "control/controller.h"
#include "control/system_metrics.h"

namespace ty::control {

class Controller::Turn {
 public:
  explicit Turn(EpochMs now) : now(now) {}

  // Takes in an earlier turn whose commit failed: its dirty entities are written again with this
  // turn's (a deletion or re-creation in this turn wins), its events and actions come first.
  void CarryOver(Turn& older);

  const EpochMs now;

  // Dirty entities, persisted (from State) at the end of the turn.
  std::set<std::string> environments, deleted_environments;
  std::set<std::string> queues, deleted_queues;
  std::set<std::string> policies, deleted_policies;
  std::set<std::string> quota_shares, deleted_quota_shares;
  std::set<std::pair<std::string, int>> job_definitions;  // name, revision (never deleted)
  std::set<std::string> compute_environments, deleted_compute_environments;
  std::set<uint64_t> container_jobs;  // by seq (never deleted)
  std::set<uint64_t> jobs;
  std::set<std::string> training_jobs;
  std::set<std::string> metric_series;
  std::set<std::string> system_series;
  std::set<std::pair<std::string, EpochMs>> cloudwatch;  // CloudWatch series hours to write (series key, hour)
  std::set<std::string> warm_pools, deleted_warm_pools;
  std::set<std::string> tuning_jobs, deleted_tuning_jobs;  // by State::tuning_jobs key
  bool meta = false;
  std::set<std::string> alarms;  // alarm states to persist
  std::set<std::string> principals;  // store keys "iam/..." to write (deleted when gone from State)
  std::set<std::string> event_bus;   // store keys "eventbus/..." likewise (event_bus.h)
  // Events to store with this turn's changes, in the order they happened.
  std::vector<EventTrigger> events;
  // API call records (store key, document) to store with this turn's changes.
  std::vector<std::pair<std::string, std::string>> audit;

  // Jobs submitted during this turn stay SUBMITTED until the next one.
  std::set<uint64_t> submitted_now;
  std::set<uint64_t> container_submitted_now;  // container jobs likewise
  // Something changed that may let a job start.
  bool reschedule = false;
  // Trials the tuning jobs may still start in this turn (tuning.h, kTrialStartsPerTurn).
  int trial_starts_left = kTrialStartsPerTurn;

  // Actions, carried out after the commit, in order.
  std::vector<std::string> discards;  // attempts whose earlier run's files go before `starts`
  std::vector<std::pair<std::string, exec::AttemptSpec>> starts;  // attempt id, spec
  std::vector<std::pair<std::string, int>> stops;           // attempt id, grace seconds
  std::vector<std::pair<std::string, int>> interrupts;      // spot interruptions: attempt id, notice seconds
  std::vector<std::string> remove_dirs;                     // workspaces of terminated warm pools
};

inline void Controller::Turn::CarryOver(Turn& older) {
  auto merge = [](std::set<std::string>& dirty, std::set<std::string>& deleted, std::set<std::string>& old_dirty,
                  std::set<std::string>& old_deleted) {
    for (const auto& n : old_dirty)
      if (!deleted.count(n)) dirty.insert(n);
    for (const auto& n : old_deleted)
      if (!dirty.count(n)) deleted.insert(n);
  };
  merge(environments, deleted_environments, older.environments, older.deleted_environments);
  merge(queues, deleted_queues, older.queues, older.deleted_queues);
  merge(policies, deleted_policies, older.policies, older.deleted_policies);
  merge(quota_shares, deleted_quota_shares, older.quota_shares, older.deleted_quota_shares);
  merge(warm_pools, deleted_warm_pools, older.warm_pools, older.deleted_warm_pools);
  merge(tuning_jobs, deleted_tuning_jobs, older.tuning_jobs, older.deleted_tuning_jobs);
  merge(compute_environments, deleted_compute_environments, older.compute_environments,
        older.deleted_compute_environments);
  container_jobs.insert(older.container_jobs.begin(), older.container_jobs.end());
  jobs.insert(older.jobs.begin(), older.jobs.end());
  job_definitions.insert(older.job_definitions.begin(), older.job_definitions.end());
  training_jobs.insert(older.training_jobs.begin(), older.training_jobs.end());
  metric_series.insert(older.metric_series.begin(), older.metric_series.end());
  system_series.insert(older.system_series.begin(), older.system_series.end());
  cloudwatch.insert(older.cloudwatch.begin(), older.cloudwatch.end());
  alarms.insert(older.alarms.begin(), older.alarms.end());
  principals.insert(older.principals.begin(), older.principals.end());
  event_bus.insert(older.event_bus.begin(), older.event_bus.end());
  meta = meta || older.meta;
  reschedule = reschedule || older.reschedule;
  auto before = [](auto& mine, auto& theirs) { mine.insert(mine.begin(), theirs.begin(), theirs.end()); };
  before(events, older.events);
  before(audit, older.audit);
  before(discards, older.discards);
  before(starts, older.starts);
  before(stops, older.stops);
  before(interrupts, older.interrupts);
  before(remove_dirs, older.remove_dirs);
}

template <typename T>
inline StatusOr<T> Controller::Execute(std::function<StatusOr<T>(Turn&)> fn) {
  std::optional<StatusOr<T>> result;
  std::promise<void> done;
  auto fut = done.get_future();
  bool on_this_thread = false;
  {
    MutexLock lock(queue_mu_);
    on_this_thread = !loop_running_;
    if (!accepting_) return Unavailable("the server is shutting down");
    // The caller's audit record, if it has one (AuditScope), is stored with what the command did.
    PendingAudit* audit = AuditScope::Take();
    commands_.emplace_back([&, audit](Turn& t) {
                             result.emplace(fn(t));
                             if (audit) AddAudit(t, audit->key, audit->at, audit->render(result->status()));
                           },
                           [&](const Status& commit) {
                             // What the command changed was not stored: the caller must not take it as done.
                             if (!commit.ok() && result->ok()) result.emplace(commit);
                             done.set_value();
                           });
    queue_cv_.notify_one();
  }
  if (on_this_thread) Step();  // no loop thread: the caller runs the turn (see Start())
  fut.wait();
  return std::move(*result);
}

// New lines of one training job's log and system metrics files, per instance: the values parsed
// from the log (metric index, value, timestamp) and the system samples, with the offsets after
// them. Read without the state lock; folded in under it.
struct Controller::TailRead {
  std::vector<std::vector<std::tuple<size_t, double, EpochMs>>> metric_samples;
  std::vector<std::streamoff> offsets;
  std::vector<std::vector<SystemSample>> system_samples;
  std::vector<std::streamoff> system_offsets;
};

// Where metric extraction stands in one training job's logs.
struct Controller::Tail {
  std::vector<std::pair<std::string, std::unique_ptr<RE2>>> metrics;
  std::vector<std::streamoff> offsets;  // per instance
  // The system metrics files (Executor::SystemMetricsPath): how far each was read; whether
  // State::system_series has samples the store lacks, and when it was last written there.
  std::vector<std::streamoff> system_offsets;  // per instance
  bool system_dirty = false;
  EpochMs system_persisted_at = 0;
  // Likewise for State::metric_series.
  bool metrics_dirty = false;
  EpochMs metrics_persisted_at = 0;
  // New lines read before the turn took the lock (PrefetchTails); null when none were.
  std::unique_ptr<TailRead> prefetched;
};

}  // namespace ty::control
