// Managed warm pools: attach on launch, settle on exit, expiry, release on demand, updates.
// The rules are in warm_pool_rules.h; what a pool keeps on disk is the executor's business
// (docs/warm-pools.md).
#include <spdlog/spdlog.h>

#include <set>

#include "control/controller.h"
#include "control/turn.h"
#include "control/warm_pool_rules.h"

namespace ty::control {

// A pool counts where its latest job came from (a quota share's pool counts against that share).
void Controller::SetPoolOrigin(WarmPool& p, const TrainingJob& tj) const {
  p.queue = p.quota_share = p.environment = "";
  if (tj.service_job_id.empty()) return;
  if (const ServiceJobState* js = state_.FindJob(tj.service_job_id)) {
    p.queue = js->job.queue;
    p.quota_share = js->job.quota_share_name;
    p.environment = js->service_environment;
  }
}

std::string Controller::AttachWarmPool(Turn& t, TrainingJob& tj) {
  if (tj.spec.keep_alive_seconds <= 0) return "Launching requested ML instances on this host (cold start).";
  const std::string key = WarmPoolMatchKey(tj.spec, tj.owner);
  // The oldest matching Available pool: creation order is total.
  WarmPool* match = nullptr;
  for (auto& [id, p] : state_.warm_pools)
    if (p.status == WarmPoolStatus::kAvailable && p.match_key == key && (!match || p.seq < match->seq)) match = &p;
  if (match) {
    WarmPool& p = *match;
    if (TrainingJob* prev = state_.FindTrainingJob(p.owner_job)) {
      prev->warm_pool_status = WarmPoolStatus::kReused;
      prev->reused_by_job = tj.name;
      prev->warm_pool_retained_seconds = std::max<EpochMs>(0, t.now - p.available_since) / 1000;
      prev->last_modified_time = t.now;
      t.training_jobs.insert(prev->name);
    }
    state_.warm_pool_held[p.instance_type] -= p.instance_count;
    std::string from = p.owner_job;
    p.status = WarmPoolStatus::kInUse;
    p.owner_job = tj.name;
    p.available_since = p.expires_at = 0;
    SetPoolOrigin(p, tj);
    t.warm_pools.insert(p.id);
    tj.warm_pool_id = p.id;
    tj.warm_pool_status = WarmPoolStatus::kInUse;
    tj.reused_from_job = from;
    return "Reusing the warm pool of training job " + from + ": its prepared instances are kept.";
  }
  WarmPool p;
  p.seq = state_.next_seq++;
  p.id = "wp-" + std::to_string(p.seq);
  p.instance_type = tj.instance_type;
  p.instance_count = tj.instance_count;
  p.match_key = key;
  p.created_at = t.now;
  p.owner_job = tj.name;
  SetPoolOrigin(p, tj);
  tj.warm_pool_id = p.id;
  t.warm_pools.insert(p.id);
  state_.warm_pools[p.id] = std::move(p);
  return "Launching requested ML instances on this host (cold start; a warm pool is kept for " +
         std::to_string(tj.spec.keep_alive_seconds) + " s afterwards).";
}

void Controller::MakeRoom(Turn& t, const std::string& type, int64_t count, const std::string& for_job) {
  const int64_t total = HostCapacity(config_, state_, type);
  auto short_of_room = [&]() REQUIRES(state_mu_) { return total - state_.host_in_use[type] - state_.warm_pool_held[type] < count; };
  if (!short_of_room()) return;
  // Pools that a waiting job would take over go last: the oldest of the others first.
  std::set<std::string> wanted;
  auto want = [&](const TrainingSpec& spec, const std::string& owner) {
    if (spec.keep_alive_seconds > 0) wanted.insert(WarmPoolMatchKey(spec, owner));
  };
  for (const auto& [seq, name] : state_.live_training_jobs) {
    const TrainingJob& w = state_.training_jobs.at(name);
    if (!w.launched && w.name != for_job) want(w.spec, w.owner);
  }
  for (const auto& [qname, q] : state_.queues)
    for (uint64_t seq : state_.JobsIn(qname, JobStatus::kRunnable)) {
      const ServiceJob& j = state_.jobs.at(seq).job;
      want(j.spec, j.owner);
    }
  while (short_of_room()) {
    const WarmPool* victim = nullptr;
    auto rank = [&](const WarmPool& p) { return std::make_pair(wanted.count(p.match_key) > 0, p.seq); };
    for (const auto& [id, p] : state_.warm_pools)
      if (p.status == WarmPoolStatus::kAvailable && p.instance_type == type && (!victim || rank(p) < rank(*victim))) victim = &p;
    if (!victim) return;  // the scheduler counted pools as free; nothing else holds them
    TerminateWarmPool(t, victim->id, "Released: its instances were needed by training job " + for_job + ".");
  }
}

void Controller::SettleWarmPool(Turn& t, TrainingJob& tj) {
  auto it = state_.warm_pools.find(tj.warm_pool_id);
  if (tj.warm_pool_id.empty() || it == state_.warm_pools.end()) return;
  WarmPool& p = it->second;
  std::string why;
  switch (ClassifyPoolOutcome(tj.status, tj.failure_reason, tj.training_start_time != 0, tj.stop_cause)) {
    case PoolOutcome::kKept:
      break;
    case PoolOutcome::kNotStarted:
      why = "Not kept: the job was stopped before its instances were prepared.";
      break;
    case PoolOutcome::kPreempted:
      why = "Not kept: the job was preempted, so its instances are needed elsewhere.";
      break;
    case PoolOutcome::kInfrastructure:
      why = "Not kept: the job failed with an infrastructure error, which may leave the instances unhealthy.";
      break;
  }
  const EpochMs expires = WarmPoolExpiry(t.now, tj.spec.keep_alive_seconds, p.created_at);
  if (why.empty() && expires <= t.now)
    why = "Not kept: the warm pool reached its maximum lifetime of 28 days.";
  const InstanceTypeSpec* spec = config_.FindInstanceType(p.instance_type);
  int64_t quota = spec ? spec->WarmPoolQuota() : 0;
  if (why.empty() && state_.warm_pool_held[p.instance_type] + p.instance_count > quota)
    why = "Not kept: the warm pool quota for " + p.instance_type + " (" + std::to_string(quota) +
          " instances, [[instance_types]] warm_pool_quota) is in use.";
  if (!why.empty()) {
    TerminateWarmPool(t, p.id, why);
    return;
  }
  p.status = WarmPoolStatus::kAvailable;
  p.owner_job = tj.name;
  p.available_since = t.now;
  p.expires_at = expires;
  state_.warm_pool_held[p.instance_type] += p.instance_count;
  tj.warm_pool_status = WarmPoolStatus::kAvailable;
  tj.warm_pool_available_since = t.now;
  t.warm_pools.insert(p.id);
  t.training_jobs.insert(tj.name);
}

void Controller::TerminateWarmPool(Turn& t, const std::string& id, const std::string& reason) {
  auto it = state_.warm_pools.find(id);
  if (it == state_.warm_pools.end()) return;
  WarmPool& p = it->second;
  if (TrainingJob* owner = state_.FindTrainingJob(p.owner_job)) {
    owner->warm_pool_status = WarmPoolStatus::kTerminated;
    owner->warm_pool_end_reason = reason;
    if (p.status == WarmPoolStatus::kAvailable)
      owner->warm_pool_retained_seconds = std::max<EpochMs>(0, t.now - p.available_since) / 1000;
    owner->last_modified_time = t.now;
    t.training_jobs.insert(owner->name);
  }
  if (p.status == WarmPoolStatus::kAvailable) state_.warm_pool_held[p.instance_type] -= p.instance_count;
  spdlog::info("warm pool {} of {} terminated: {}", id, p.owner_job, reason);
  t.remove_dirs.push_back(WarmPoolDir(id));
  t.deleted_warm_pools.insert(id);
  t.warm_pools.erase(id);
  state_.warm_pools.erase(it);
  t.reschedule = true;
}

void Controller::ExpireWarmPools(Turn& t) {
  std::vector<std::pair<std::string, std::string>> due;
  for (const auto& [id, p] : state_.warm_pools) {
    if (p.status != WarmPoolStatus::kAvailable || p.expires_at > t.now) continue;
    bool lifetime = p.expires_at >= p.created_at + kWarmPoolMaxLifetimeMs;
    due.emplace_back(id, lifetime ? "Terminated: the warm pool reached its maximum lifetime of 28 days."
                                  : "Terminated: the keep-alive period ended.");
  }
  for (const auto& [id, why] : due) TerminateWarmPool(t, id, why);
}

StatusOr<TrainingJob> Controller::UpdateTrainingJob(const UpdateTrainingJobCommand& cmd) {
  const std::string& name = cmd.name;
  const int64_t keep = cmd.keep_alive_seconds;
  return Execute<TrainingJob>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<TrainingJob> {
    TrainingJob* tj = state_.FindTrainingJob(name);
    if (!tj) return NotFound("Requested resource not found: training job " + name);
    if (tj->warm_pool_status != WarmPoolStatus::kAvailable)
      return InvalidArgument("ResourceConfig.KeepAlivePeriodInSeconds can only be updated while the job's warm pool "
                             "is Available; the warm pool of " + tj->name + " is " +
                             (tj->warm_pool_status == WarmPoolStatus::kNone ? "absent" : ToWire(tj->warm_pool_status)));
    WarmPool& p = state_.warm_pools.at(tj->warm_pool_id);
    tj->spec.keep_alive_seconds = keep;
    tj->last_modified_time = t.now;
    t.training_jobs.insert(tj->name);
    if (keep == 0) {
      TerminateWarmPool(t, p.id, "Terminated: released by UpdateTrainingJob (KeepAlivePeriodInSeconds = 0).");
    } else {
      // The keep-alive counts from when the pool became Available, as the first one did.
      p.expires_at = WarmPoolExpiry(p.available_since, keep, p.created_at);
      t.warm_pools.insert(p.id);
      ExpireWarmPools(t);
    }
    return *tj;
  });
}

StatusOr<EpochMs> Controller::AdvanceClock(int64_t seconds) {
  if (!adjustable_clock_)
    return FailedPrecondition("the server's clock can only be moved when it was started with --clock=offset "
                              "(a test-only mode)");
  if (seconds <= 0) return InvalidArgument("seconds must be a positive number of seconds");
  // Inside a turn, so that the jump and everything it makes due (expiries) land in one commit.
  return Execute<EpochMs>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<EpochMs> {
    adjustable_clock_->advance_ms(seconds * 1000);
    t.reschedule = true;
    return adjustable_clock_->now_ms();
  });
}

}  // namespace ty::control
