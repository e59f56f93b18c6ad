// Alarm rules (docs/alarms.md): evaluated about once a second on the controller's clock, so a
// simulated clock moves them too. Each is OK or ALARM; a change is an event.
#include <nlohmann/json.hpp>
#include <set>

#include "control/controller.h"
#include "control/turn.h"

namespace ty::control {

using nlohmann::json;

namespace {

// The state a rule found: whether its condition holds, why, and what it found (for the event).
struct Finding {
  bool holds = false;
  std::string reason;
  json found = json::object();
};

bool QueueMatches(const AlarmConfig& a, const std::string& queue) { return a.queue.empty() || a.queue == queue; }

}  // namespace

void Controller::NoteEnding(const ServiceJob& job, EpochMs at) {
  if (failure_window_ms_ == 0) return;
  // A job its user terminated did not fail unexpectedly.
  endings_.push_back({at, job.queue, job.status == JobStatus::kFailed && !job.is_terminated});
}

void Controller::EvaluateAlarms(Turn& t) {
  if (config_.alarms.empty() || t.now - last_alarm_check_ < 1000) return;
  last_alarm_check_ = t.now;
  while (!endings_.empty() && endings_.front().at < t.now - failure_window_ms_) endings_.pop_front();

  for (const AlarmConfig& a : config_.alarms) {
    Finding f;
    if (a.rule == "runnable_longer_than") {
      // Jobs RUNNABLE for longer than `seconds`; the longest waiting first in the reason.
      int64_t count = 0;
      EpochMs oldest = 0;
      std::string oldest_id;
      json jobs = json::array();
      for (const auto& [name, q] : state_.queues) {
        if (!QueueMatches(a, name)) continue;
        for (uint64_t seq : state_.JobsIn(name, JobStatus::kRunnable)) {
          const ServiceJobState& js = state_.jobs.at(seq);
          const EpochMs since = js.RunnableSince();
          if (t.now - since <= a.seconds * 1000) continue;
          ++count;
          if (jobs.size() < 10) jobs.push_back({{"jobId", js.job.id}, {"jobName", js.job.name}, {"jobQueue", name},
                                                {"runnableSeconds", (t.now - since) / 1000}});
          if (oldest == 0 || since < oldest) {
            oldest = since;
            oldest_id = js.job.id;
          }
        }
      }
      f.holds = count > 0;
      if (f.holds)
        f.reason = std::to_string(count) + " job(s) RUNNABLE for longer than " + std::to_string(a.seconds) +
                   " s; the longest, " + oldest_id + ", for " + std::to_string((t.now - oldest) / 1000) + " s";
      f.found = {{"jobs", jobs}, {"count", count}};
    } else if (a.rule == "failure_ratio") {
      int64_t ended = 0, failed = 0;
      const EpochMs from = t.now - a.window_seconds * 1000;
      for (const auto& e : endings_) {
        if (e.at < from || !QueueMatches(a, e.queue)) continue;
        ++ended;
        failed += e.failed ? 1 : 0;
      }
      const double ratio = ended > 0 ? static_cast<double>(failed) / static_cast<double>(ended) : 0.0;
      f.holds = ended >= a.min_jobs && ratio > a.threshold;
      char buf[160];
      std::snprintf(buf, sizeof buf, "%lld of %lld jobs that ended in the last %lld s failed (%.1f%%; threshold %.1f%%)",
                    static_cast<long long>(failed), static_cast<long long>(ended), static_cast<long long>(a.window_seconds),
                    ratio * 100, a.threshold * 100);
      f.reason = buf;
      f.found = {{"ended", ended}, {"failed", failed}, {"ratio", ratio}};
    } else if (a.rule == "idle_capacity_while_waiting") {
      // Instances that nothing holds (jobs or Available warm pools), of the capacity the waiting
      // jobs ask for (their instance type and market; the first 10,000 of each queue are looked
      // at), while jobs wait in RUNNABLE.
      int64_t waiting = 0;
      std::set<std::string> wanted;
      for (const auto& [name, q] : state_.queues) {
        if (!QueueMatches(a, name)) continue;
        const auto& runnable = state_.JobsIn(name, JobStatus::kRunnable);
        waiting += static_cast<int64_t>(runnable.size());
        size_t seen = 0;
        for (auto it = runnable.begin(); it != runnable.end() && seen < 10000; ++it, ++seen) {
          const ServiceJob& j = state_.jobs.at(*it).job;
          wanted.insert(CapacityKey(j.instance_type, j.managed_spot));
        }
      }
      int64_t idle = 0;
      json types = json::object();
      for (const std::string& key : wanted) {
        const CapacityKeyParts k = SplitCapacityKey(key);
        if (!a.instance_type.empty() && k.type != a.instance_type) continue;
        auto in_use = state_.host_in_use.find(key);
        int64_t free = HostCapacity(config_, state_, key) - (in_use == state_.host_in_use.end() ? 0 : in_use->second);
        if (!k.spot) {
          auto held = state_.warm_pool_held.find(k.type);
          if (held != state_.warm_pool_held.end()) free -= held->second;
        }
        if (free > 0) {
          idle += free;
          types[key] = free;
        }
      }
      const bool now_holds = waiting > 0 && static_cast<double>(idle) >= a.threshold;
      AlarmState& st = state_.alarms[a.name];
      if (now_holds && st.condition_since == 0) {
        st.condition_since = t.now;
        t.alarms.insert(a.name);
      } else if (!now_holds && st.condition_since != 0) {
        st.condition_since = 0;
        t.alarms.insert(a.name);
      }
      // It must hold for `seconds` (0: at once) before the alarm fires.
      f.holds = now_holds && t.now - st.condition_since >= a.seconds * 1000;
      f.reason = std::to_string(idle) + " instance(s) idle while " + std::to_string(waiting) + " job(s) wait in RUNNABLE";
      f.found = {{"idleInstances", idle}, {"idleByType", types}, {"runnableJobs", waiting}};
    } else if (a.rule == "warm_pool_expiring") {
      json pools = json::array();
      EpochMs soonest = 0;
      for (const auto& [id, p] : state_.warm_pools) {
        if (p.status != WarmPoolStatus::kAvailable || p.expires_at - t.now > a.seconds * 1000) continue;
        if (!QueueMatches(a, p.queue)) continue;
        pools.push_back({{"warmPoolId", id}, {"trainingJobName", p.owner_job}, {"instanceType", p.instance_type},
                         {"expiresInSeconds", std::max<EpochMs>(0, p.expires_at - t.now) / 1000}});
        if (soonest == 0 || p.expires_at < soonest) soonest = p.expires_at;
      }
      f.holds = !pools.empty();
      if (f.holds)
        f.reason = std::to_string(pools.size()) + " warm pool(s) expire within " + std::to_string(a.seconds) +
                   " s; the first, of " + pools[0].value("trainingJobName", "") + ", in " +
                   std::to_string(std::max<EpochMs>(0, soonest - t.now) / 1000) + " s";
      f.found = {{"pools", pools}};
    }

    AlarmState& st = state_.alarms[a.name];
    const std::string value = f.holds ? "ALARM" : "OK";
    if (value == st.value) continue;
    if (!f.holds) f.reason = "resolved: " + f.reason;
    EventTrigger e;
    e.kind = EventTrigger::Kind::kAlarmStateChange;
    e.name = a.name;
    e.status = value;
    e.previous = st.value;
    e.reason = f.reason;
    json rule = {{"rule", a.rule}, {"queue", a.queue}};
    if (a.rule == "runnable_longer_than" || a.rule == "warm_pool_expiring" || a.rule == "idle_capacity_while_waiting")
      rule["seconds"] = a.seconds;
    if (a.rule == "failure_ratio" || a.rule == "idle_capacity_while_waiting") rule["threshold"] = a.threshold;
    if (a.rule == "failure_ratio") {
      rule["windowSeconds"] = a.window_seconds;
      rule["minJobs"] = a.min_jobs;
    }
    if (!a.instance_type.empty()) rule["instanceType"] = a.instance_type;
    e.data = json{{"rule", rule}, {"found", f.found}}.dump();
    e.at = t.now;
    t.events.push_back(std::move(e));
    st.value = value;
    st.since = t.now;
    st.reason = f.reason;
    t.alarms.insert(a.name);
  }
}

}  // namespace ty::control
