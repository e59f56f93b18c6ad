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

const AlarmConfig* ConfiguredRule(const Config& c, const std::string& name) {
  for (const auto& a : c.alarms)
    if (a.name == name) return &a;
  return nullptr;
}

// The event data of a configuration-file rule: the rule's settings and the queue it watches.
json RuleAlarmEventData(const AlarmConfig& a) {
  json rule = {{"rule", a.rule}, {"queue", a.queue}};
  if (a.rule == "runnable_longer_than" || a.rule == "warm_pool_expiring" || a.rule == "idle_capacity_while_waiting")
    rule["seconds"] = a.seconds;
  if (a.rule == "failure_ratio" || a.rule == "idle_capacity_while_waiting") rule["threshold"] = a.threshold;
  if (a.rule == "failure_ratio") {
    rule["windowSeconds"] = a.window_seconds;
    rule["minJobs"] = a.min_jobs;
  }
  if (!a.instance_type.empty()) rule["instanceType"] = a.instance_type;
  return json{{"configuration", rule}, {"queue", a.queue}};
}

// The event data of a metric alarm: its configuration as CloudWatch's state-change event shows
// it, and the job queue it watches (a JobQueueName dimension), for the event log's queue filter.
json MetricAlarmEventData(const MetricAlarmDefinition& d) {
  auto metric = [](const CwMetricId& m) {
    json dims = json::object();
    for (const auto& [n, v] : m.dims) dims[n] = v;
    return json{{"namespace", m.ns}, {"name", m.name}, {"dimensions", dims}};
  };
  json metrics = json::array();
  std::string queue;
  auto note_queue = [&queue](const CwMetricId& m) {
    for (const auto& [n, v] : m.dims)
      if (n == "JobQueueName" && queue.empty()) queue = v;
  };
  if (d.metrics.empty()) {
    metrics.push_back({{"id", "m1"}, {"metricStat", {{"metric", metric(d.metric)}, {"period", d.period}, {"stat", d.statistic}}},
                       {"returnData", true}});
    note_queue(d.metric);
  }
  for (const auto& q : d.metrics) {
    json m = {{"id", q.id}, {"returnData", q.return_data}};
    if (!q.label.empty()) m["label"] = q.label;
    if (q.expression.empty()) {
      m["metricStat"] = {{"metric", metric(q.metric)}, {"period", q.period / 1000}, {"stat", q.stat}};
      note_queue(q.metric);
    } else {
      m["expression"] = q.expression;
    }
    metrics.push_back(std::move(m));
  }
  return {{"configuration", {{"description", d.description}, {"metrics", metrics}}}, {"queue", queue}};
}


}  // namespace

void Controller::NoteEnding(const ServiceJob& job, EpochMs at) {
  if (failure_window_ms_ == 0) return;
  // A job its user terminated did not fail unexpectedly.
  endings_.push_back({at, job.queue, job.status == JobStatus::kFailed && !job.is_terminated});
}

void Controller::EvaluateAlarms(Turn& t) {
  if (t.now - last_alarm_check_ < 1000) return;
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
    ChangeAlarmState(t, a.name, st, value, f.reason, f.found.dump());
  }
  EvaluateMetricAlarms(t);
}

void Controller::EvaluateMetricAlarms(Turn& t) {
  // Once a minute, as CloudWatch does: at the first check in each minute of the clock.
  if (t.now / kCwMinute == last_metric_alarm_minute_) return;
  last_metric_alarm_minute_ = t.now / kCwMinute;
  for (auto& [name, st] : state_.alarms) {
    if (!st.metric) continue;
    AlarmVerdict v = EvaluateMetricAlarm(state_, *st.metric, st.value, t.now);
    if (v.value == st.value) continue;
    ChangeAlarmState(t, name, st, v.value, v.reason, v.reason_data);
  }
}

void Controller::ChangeAlarmState(Turn& t, const std::string& name, AlarmState& st, const std::string& value,
                                  const std::string& reason, const std::string& reason_data) {
  // What CloudWatch's state-change event carries: the alarm's configuration, built from its
  // definition (a metric alarm) or its configuration-file rule.
  const AlarmConfig* rule = st.metric ? nullptr : ConfiguredRule(config_, name);
  json data = st.metric ? MetricAlarmEventData(*st.metric) : rule ? RuleAlarmEventData(*rule) : json::object();
  data["reasonData"] = reason_data;
  data["previous"] = {{"reason", st.reason}, {"timestamp", st.since}};
  EventTrigger e;
  e.kind = EventTrigger::Kind::kAlarmStateChange;
  e.name = name;
  e.status = value;
  e.previous = st.value;
  e.reason = reason;
  e.data = data.dump();
  e.at = t.now;
  t.events.push_back(std::move(e));
  const std::string old = st.value;
  st.value = value;
  st.since = t.now;
  st.reason = reason;
  st.reason_data = reason_data;
  json new_state = {{"stateValue", value}, {"stateReason", reason}};
  if (!reason_data.empty()) new_state["stateReasonData"] = reason_data;
  st.Record({t.now, "StateUpdate", "Alarm updated from " + old + " to " + value,
             json{{"version", "1.0"},
                  {"oldState", {{"stateValue", old}, {"stateReason", data["previous"]["reason"]}}},
                  {"newState", new_state}}
                 .dump()});
  if (st.metric && st.metric->actions_enabled) {
    const auto& actions = value == "ALARM" ? st.metric->alarm_actions
                          : value == "OK"  ? st.metric->ok_actions
                                           : st.metric->insufficient_data_actions;
    for (const std::string& arn : actions)
      st.Record({t.now, "Action", "Failed to execute action " + arn,
                 json{{"actionState", "Failed"}, {"stateUpdateTimestamp", t.now}, {"notificationResource", arn},
                      {"error", "This server runs no alarm actions (SNS, Auto Scaling, EC2, Systems Manager); an "
                                "EventBridge rule on the alarm's state-change event delivers it instead"}}
                     .dump()});
  }
  t.alarms.insert(name);
}

// ---- Commands ----

namespace {

Status IsRule(const std::string& name) {
  return InvalidArgument("The alarm " + name + " is a rule of the configuration file ([[alarms]] name = \"" + name +
                         "\"): change it there, not through the API");
}

}  // namespace

Status Controller::PutMetricAlarm(const std::string& name, MetricAlarmDefinition definition) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    if (ConfiguredRule(config_, name)) return IsRule(name);
    auto found = state_.alarms.find(name);
    const bool exists = found != state_.alarms.end() && found->second.metric;
    if (!exists) {
      int64_t count = 0;
      for (const auto& [n, a] : state_.alarms) count += a.metric ? 1 : 0;
      if (count >= config_.cloudwatch.max_alarms)
        return Status(Code::kLimitExceeded, "This server keeps at most " + std::to_string(config_.cloudwatch.max_alarms) +
                                                " alarms ([cloudwatch] max_alarms); delete one first");
    }
    AlarmState& st = state_.alarms[name];
    if (!exists) {
      st = AlarmState();
      st.value = "INSUFFICIENT_DATA";
      st.reason = "Unchecked: Initial alarm creation";
      st.since = t.now;
    } else {
      definition.tags = st.metric->tags;  // tags are set on creation only, as AWS does
    }
    st.metric = std::move(definition);
    st.configured_at = t.now;
    json created = MetricAlarmEventData(*st.metric)["configuration"];
    created["threshold"] = st.metric->threshold;
    created["comparisonOperator"] = st.metric->comparison;
    created["evaluationPeriods"] = st.metric->evaluation_periods;
    st.Record({t.now, "ConfigurationUpdate", "Alarm \"" + name + "\" " + (exists ? "updated" : "created"),
               json{{"version", "1.0"}, {"type", exists ? "Update" : "Create"},
                    {exists ? "updatedAlarm" : "createdAlarm", created}}
                   .dump()});
    t.alarms.insert(name);
    return Status::Ok();
  });
}

Status Controller::DeleteAlarms(const std::vector<std::string>& names) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    for (const auto& n : names) {
      if (ConfiguredRule(config_, n)) return IsRule(n);
      auto found = state_.alarms.find(n);
      if (found == state_.alarms.end() || !found->second.metric) return NotFound("The alarm " + n + " does not exist.");
    }
    for (const auto& n : names) {
      state_.alarms.erase(n);
      t.alarms.insert(n);
    }
    return Status::Ok();
  });
}

Status Controller::SetAlarmState(const std::string& name, const std::string& value, const std::string& reason,
                                 const std::string& reason_data) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    auto found = state_.alarms.find(name);
    const AlarmConfig* rule = ConfiguredRule(config_, name);
    if (found == state_.alarms.end() ? !rule : (!found->second.metric && !rule))
      return NotFound("The alarm " + name + " does not exist.");
    if (rule && value == "INSUFFICIENT_DATA")
      return InvalidArgument("The value for parameter StateValue is invalid: the configuration-file rule " + name +
                             " is OK or ALARM, never INSUFFICIENT_DATA");
    AlarmState& st = state_.alarms[name];
    if (st.value == value) {  // the same state: the reason changes, as AWS records it
      st.reason = reason;
      st.reason_data = reason_data;
      t.alarms.insert(name);
      return Status::Ok();
    }
    ChangeAlarmState(t, name, st, value, reason, reason_data);
    return Status::Ok();
  });
}

Status Controller::SetAlarmActions(const std::vector<std::string>& names, bool enabled) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    for (const auto& n : names) {
      auto found = state_.alarms.find(n);
      if (found == state_.alarms.end() || !found->second.metric || found->second.metric->actions_enabled == enabled) continue;
      found->second.metric->actions_enabled = enabled;
      t.alarms.insert(n);
    }
    return Status::Ok();
  });
}

}  // namespace ty::control
