// GET /metrics: the Prometheus text exposition format (version 0.0.4). Counters and histograms
// come from the controller's Telemetry; gauges are computed from State at scrape time, under the
// shared lock, from indexes and the jobs that hold capacity (never from all jobs).
// Reference: docs/metrics.md.
#include "api/metrics.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "control/controller.h"
#include "control/share_standings.h"

namespace ty::api {

using control::Histogram;
using control::JobDuration;
using control::State;
using Labels = std::vector<std::pair<std::string, std::string>>;

namespace {

std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

class Writer {
 public:
  void Family(const std::string& name, const char* type, const char* help) {
    out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void Sample(const std::string& name, const Labels& labels, double v) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        if (i) out_ += ',';
        out_ += labels[i].first + "=\"" + Escape(labels[i].second) + "\"";
      }
      out_ += '}';
    }
    out_ += ' ' + Number(v) + '\n';
  }
  void Hist(const std::string& name, const Labels& labels, const Histogram& h) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds->size(); ++i) {
      if (!h.buckets.empty()) cumulative += h.buckets[i];
      Labels l = labels;
      l.emplace_back("le", Number((*h.bounds)[i]));
      Sample(name + "_bucket", l, static_cast<double>(cumulative));
    }
    Labels l = labels;
    l.emplace_back("le", "+Inf");
    Sample(name + "_bucket", l, static_cast<double>(h.count));
    Sample(name + "_sum", labels, h.sum);
    Sample(name + "_count", labels, static_cast<double>(h.count));
  }
  // A family whose samples were written to their own Writer (so that families computed in one
  // pass over the state each stay under their own TYPE line).
  void Family(const std::string& name, const char* type, const char* help, Writer& samples) {
    Family(name, type, help);
    out_ += samples.Take();
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// A counter family over one label.
template <typename V>
void Counter(Writer& w, const std::string& name, const char* help, const char* label, const std::map<std::string, V>& m) {
  w.Family(name, "counter", help);
  for (const auto& [k, v] : m) w.Sample(name, {{label, k}}, static_cast<double>(v));
}

// "<type>" / "<type>#spot" -> (type, market label).
std::pair<std::string, std::string> SplitKey(const std::string& key) {
  CapacityKeyParts k = SplitCapacityKey(key);
  return {k.type, k.spot ? "spot" : "on_demand"};
}

struct DurationFamily {
  JobDuration d;
  const char* name;
  const char* help;
};
constexpr DurationFamily kDurations[] = {
    {JobDuration::kSubmittedToRunnable, "trainyard_job_submitted_to_runnable_seconds",
     "Time from submission to RUNNABLE (AWS/Batch JobSubmittedToRunnableDuration)."},
    {JobDuration::kSubmittedToFirstScheduled, "trainyard_job_submitted_to_first_scheduled_seconds",
     "Time from submission to the first SCHEDULED (AWS/Batch JobSubmittedToFirstScheduledDuration)."},
    {JobDuration::kRunnableToScheduled, "trainyard_job_attempt_runnable_to_scheduled_seconds",
     "Per attempt, time from RUNNABLE to SCHEDULED, again after each preemption (AWS/Batch JobAttemptRunnableToScheduledDuration)."},
    {JobDuration::kScheduledToStarting, "trainyard_job_attempt_scheduled_to_starting_seconds",
     "Per attempt, time from SCHEDULED to STARTING (AWS/Batch JobAttemptScheduledToStartingDuration)."},
    {JobDuration::kStartingToRunning, "trainyard_job_attempt_starting_to_running_seconds",
     "Per attempt, time from STARTING to RUNNING (AWS/Batch JobAttemptStartingToRunningDuration)."},
    {JobDuration::kExecution, "trainyard_job_attempt_execution_seconds",
     "Per attempt, time from RUNNING to the end of the attempt (AWS/Batch JobAttemptExecutionDuration)."},
    {JobDuration::kAttempt, "trainyard_job_attempt_seconds",
     "Per attempt, time from STARTING to the end of the attempt, final or back to RUNNABLE (AWS/Batch JobAttemptDuration)."},
};

constexpr JobStatus kStatuses[] = {JobStatus::kSubmitted, JobStatus::kPending,  JobStatus::kRunnable,
                                   JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning,
                                   JobStatus::kSucceeded, JobStatus::kFailed};

std::string Render(const Config& config, const State& s) {
  Writer w;
  const control::Telemetry& m = s.telemetry;

  // ---- counters (since the server started) ----
  Counter(w, "trainyard_jobs_submitted_total", "Service jobs submitted (AWS/Batch JobsSubmitted).", "queue", m.submitted);
  w.Family("trainyard_jobs_transitions_total", "counter",
           "Service jobs moved to a status (AWS/Batch JobsMovedTo<Status>).");
  for (const auto& [key, v] : m.transitions)
    w.Sample("trainyard_jobs_transitions_total", {{"queue", key.first}, {"status", JobStatusName(key.second)}},
             static_cast<double>(v));
  Counter(w, "trainyard_jobs_retried_total",
          "Attempts that ended and sent their job back to RUNNABLE, preemptions excepted (AWS/Batch JobsRetried).",
          "queue", m.retried);
  Counter(w, "trainyard_jobs_preempted_total", "Attempts preempted by quota management (AWS/Batch JobsPreempted).",
          "queue", m.preempted);
  Counter(w, "trainyard_jobs_terminated_total",
          "Service jobs FAILED by TerminateServiceJob or a job-state time-limit action (AWS/Batch JobsTerminated).",
          "queue", m.terminated);
  Counter(w, "trainyard_preemption_lost_gpu_seconds_total",
          "GPU-seconds of work preemptions threw away (since each preempted attempt's last checkpoint).", "queue",
          m.preemption_lost_gpu_seconds);
  Counter(w, "trainyard_preemption_lost_instance_seconds_total",
          "Instance-seconds of work preemptions threw away (since each preempted attempt's last checkpoint).", "queue",
          m.preemption_lost_instance_seconds);
  Counter(w, "trainyard_spot_interruptions_total", "Spot interruptions of managed spot training jobs.", "instance_type",
          m.spot_interruptions);
  Counter(w, "trainyard_spot_interruption_lost_gpu_seconds_total",
          "GPU-seconds of work spot interruptions threw away (since each interrupted run's last checkpoint).",
          "instance_type", m.interruption_lost_gpu_seconds);
  Counter(w, "trainyard_spot_interruption_lost_instance_seconds_total",
          "Instance-seconds of work spot interruptions threw away (since each interrupted run's last checkpoint).",
          "instance_type", m.interruption_lost_instance_seconds);

  // ---- histograms ----
  for (const auto& f : kDurations) {
    w.Family(f.name, "histogram", f.help);
    for (auto it = m.durations.lower_bound({f.d, ""}); it != m.durations.end() && it->first.first == f.d; ++it)
      w.Hist(f.name, {{"queue", it->first.second}}, it->second);
  }
  w.Family("trainyard_scheduler_pass_duration_seconds", "histogram", "Latency of the controller's scheduling passes.");
  w.Hist("trainyard_scheduler_pass_duration_seconds", {}, m.schedule_pass);
  w.Family("trainyard_scheduler_last_pass_timestamp_seconds", "gauge",
           "When the last scheduling pass ran (Unix time, the server's clock).");
  w.Sample("trainyard_scheduler_last_pass_timestamp_seconds", {}, static_cast<double>(s.last_pass_at) / 1000.0);

  // ---- gauges: jobs ----
  w.Family("trainyard_jobs", "gauge", "Service jobs per queue and current status.");
  for (const auto& [queue, by_status] : s.by_queue_status) {
    if (!s.queues.count(queue)) continue;  // a deleted queue's finished jobs
    for (JobStatus st : kStatuses) {
      auto it = by_status.find(st);
      w.Sample("trainyard_jobs", {{"queue", queue}, {"status", JobStatusName(st)}},
               static_cast<double>(it == by_status.end() ? 0 : it->second.size()));
    }
  }

  // What active service jobs hold, walked once (bounded by the host's capacity), and where each
  // queue's shares stand (control/share_standings.h: the same figures as QueueStandings).
  const control::Holdings held = control::ActiveHoldings(s);
  const auto& env_by_key = held.by_environment;
  const std::vector<control::QueueStanding> standings = control::ShareStandings(s, held);

  // ---- gauges: host capacity ----
  w.Family("trainyard_host_instances", "gauge",
           "Instances the host offers, per instance type and market: the catalogue's count, no more than the "
           "executor's cluster reports.");
  for (const auto& it : config.instance_types)
    for (bool spot : {false, true})
      if (!spot || it.spot_count > 0)
        w.Sample("trainyard_host_instances", {{"instance_type", it.name}, {"market", spot ? "spot" : "on_demand"}},
                 static_cast<double>(control::HostCapacity(config, s, CapacityKey(it.name, spot))));
  auto in_use = [&](const std::string& key) {
    auto it = s.host_in_use.find(key);
    return it == s.host_in_use.end() ? int64_t{0} : it->second;
  };
  auto warm = [&](const std::string& type) {
    auto it = s.warm_pool_held.find(type);
    return it == s.warm_pool_held.end() ? int64_t{0} : it->second;
  };
  w.Family("trainyard_host_instances_in_use", "gauge",
           "Instances held by launched training jobs (service-job attempts and direct CreateTrainingJob).");
  for (const auto& it : config.instance_types)
    for (bool spot : {false, true})
      if (!spot || it.spot_count > 0)
        w.Sample("trainyard_host_instances_in_use", {{"instance_type", it.name}, {"market", spot ? "spot" : "on_demand"}},
                 static_cast<double>(in_use(CapacityKey(it.name, spot))));
  w.Family("trainyard_host_instances_idle", "gauge",
           "Instances neither in use nor kept by an Available warm pool, per instance type and market.");
  for (const auto& it : config.instance_types)
    for (bool spot : {false, true})
      if (!spot || it.spot_count > 0)
        w.Sample("trainyard_host_instances_idle", {{"instance_type", it.name}, {"market", spot ? "spot" : "on_demand"}},
                 static_cast<double>(std::max<int64_t>(
                     0, control::HostCapacity(config, s, CapacityKey(it.name, spot)) - in_use(CapacityKey(it.name, spot)) -
                            (spot ? 0 : warm(it.name)))));
  w.Family("trainyard_warm_pool_instances", "gauge",
           "Instances kept idle by Available managed warm pools, per instance type (on-demand).");
  for (const auto& it : config.instance_types)
    w.Sample("trainyard_warm_pool_instances", {{"instance_type", it.name}}, static_cast<double>(warm(it.name)));
  w.Family("trainyard_warm_pools", "gauge", "Managed warm pools per status (InUse, Available).");
  {
    std::map<std::string, int64_t> by_status = {{"InUse", 0}, {"Available", 0}};
    for (const auto& [id, p] : s.warm_pools) ++by_status[ToWire(p.status)];
    for (const auto& [st, n] : by_status) w.Sample("trainyard_warm_pools", {{"status", st}}, static_cast<double>(n));
  }

  // ---- gauges: hyperparameter tuning (docs/tuning.md) ----
  w.Family("trainyard_tuning_jobs", "gauge", "Hyperparameter tuning jobs per HyperParameterTuningJobStatus.");
  {
    std::map<std::string, int64_t> by_status;
    for (auto st : {control::TuningJobStatus::kInProgress, control::TuningJobStatus::kCompleted, control::TuningJobStatus::kFailed,
                    control::TuningJobStatus::kStopping, control::TuningJobStatus::kStopped})
      by_status[control::ToWire(st)] = 0;
    for (const auto& [key, t] : s.tuning_jobs) ++by_status[control::ToWire(t.status)];
    for (const auto& [st, n] : by_status) w.Sample("trainyard_tuning_jobs", {{"status", st}}, static_cast<double>(n));
  }
  w.Family("trainyard_tuning_trials", "gauge",
           "Trials of live (InProgress or Stopping) tuning jobs per TrainingJobStatusCounters state.");
  {
    control::TuningCounters sum;
    for (const auto& [key, t] : s.tuning_jobs) {
      if (!control::IsLive(t.status)) continue;
      const control::TuningCounters c = control::CountTrials(control::TrialsOf(t, s));
      sum.completed += c.completed;
      sum.in_progress += c.in_progress;
      sum.non_retryable_error += c.non_retryable_error;
      sum.stopped += c.stopped;
    }
    w.Sample("trainyard_tuning_trials", {{"state", "InProgress"}}, static_cast<double>(sum.in_progress));
    w.Sample("trainyard_tuning_trials", {{"state", "Completed"}}, static_cast<double>(sum.completed));
    w.Sample("trainyard_tuning_trials", {{"state", "NonRetryableError"}}, static_cast<double>(sum.non_retryable_error));
    w.Sample("trainyard_tuning_trials", {{"state", "Stopped"}}, static_cast<double>(sum.stopped));
  }

  // ---- gauges: service environments ----
  w.Family("trainyard_service_environment_max_instances", "gauge",
           "A service environment's capacity limit per capacity unit (NUM_INSTANCES or an instance type).");
  for (const auto& [name, e] : s.environments)
    for (const auto& l : e.capacity_limits)
      w.Sample("trainyard_service_environment_max_instances", {{"service_environment", name}, {"capacity_unit", l.capacity_unit}},
               static_cast<double>(l.max_capacity));
  w.Family("trainyard_service_environment_instances_in_use", "gauge",
           "Instances held by a service environment's SCHEDULED, STARTING and RUNNING jobs, per instance type and market.");
  for (const auto& [k, n] : env_by_key) {
    auto [type, market] = SplitKey(k.second);
    w.Sample("trainyard_service_environment_instances_in_use",
             {{"service_environment", k.first}, {"instance_type", type}, {"market", market}}, static_cast<double>(n));
  }
  w.Family("trainyard_service_environment_instances_idle", "gauge",
           "A service environment's capacity limit less what its jobs hold, per capacity unit (not below 0).");
  for (const auto& [name, e] : s.environments)
    for (const auto& l : e.capacity_limits) {
      int64_t used = 0;
      if (l.capacity_unit == "NUM_INSTANCES") {
        auto it = s.environment_in_use.find(name);
        used = it == s.environment_in_use.end() ? 0 : it->second;
      } else {
        for (const auto& [k, n] : env_by_key)
          if (k.first == name && SplitKey(k.second).first == l.capacity_unit) used += n;
      }
      w.Sample("trainyard_service_environment_instances_idle", {{"service_environment", name}, {"capacity_unit", l.capacity_unit}},
               static_cast<double>(std::max<int64_t>(0, l.max_capacity - used)));
    }

  // ---- gauges: shares ----
  {
    // Each family's samples, each written under its own TYPE line.
    Writer held_w, usage_w, weight_w, weighted_w, ratio_w, entitled_w, quota_used, quota_borrowed, quota_lent, unassigned;
    for (const control::QueueStanding& q : standings) {
      for (const control::ShareStanding& st : q.shares) {
        const Labels l = {{"queue", q.queue}, {"share", st.share}};
        if (st.in_use > 0) held_w.Sample("trainyard_share_instances_in_use", l, static_cast<double>(st.in_use));
        if (const auto& f = st.fair) {
          if (f->usage) {
            usage_w.Sample("trainyard_fairshare_usage_instance_seconds", l, *f->usage);
            weight_w.Sample("trainyard_fairshare_weight_factor", l, f->weight_factor);
            weighted_w.Sample("trainyard_fairshare_weighted_usage_instances", l, *f->weighted_usage);
          }
          ratio_w.Sample("trainyard_fairshare_entitlement_ratio", l, f->entitlement_ratio);
          entitled_w.Sample("trainyard_fairshare_entitlement_instances", l, f->entitlement_instances);
        }
        for (const auto& [type, e] : st.quota_types) {
          const Labels lt = {{"queue", q.queue}, {"share", st.share}, {"instance_type", type}};
          quota_used.Sample("trainyard_quota_share_instances_in_use", lt, static_cast<double>(e.in_use));
          quota_borrowed.Sample("trainyard_quota_share_borrowed_instances", lt, static_cast<double>(e.borrowed));
          quota_lent.Sample("trainyard_quota_share_lent_instances", lt, static_cast<double>(e.lent));
        }
      }
      for (const auto& [type, n] : q.unassigned_lent)
        unassigned.Sample("trainyard_quota_unassigned_lent_instances", {{"queue", q.queue}, {"instance_type", type}},
                          static_cast<double>(n));
    }
    w.Family("trainyard_share_instances_in_use", "gauge",
             "Instances held by a share's (fair-share identifier or quota share) SCHEDULED, STARTING and RUNNING jobs.",
             held_w);
    w.Family("trainyard_share_unfinished_jobs", "gauge", "A share's jobs that are not finished (the queue's active shares).");
    for (const auto& [queue, shares] : s.unfinished_by_share)
      for (const auto& [share, n] : shares)
        w.Sample("trainyard_share_unfinished_jobs", {{"queue", queue}, {"share", share}}, static_cast<double>(n));
    w.Family("trainyard_fairshare_usage_instance_seconds", "gauge",
             "A fair share's decayed usage (instance-seconds) as of the last scheduling pass of its queue.", usage_w);
    w.Family("trainyard_fairshare_weight_factor", "gauge",
             "A fair share's weightFactor from the queue's shareDistribution (lower: larger entitlement).", weight_w);
    w.Family("trainyard_fairshare_weighted_usage_instances", "gauge",
             "A fair share's standing in the scheduler's order, lowest first: (4 x decayed usage / shareDecaySeconds "
             "+ instances held) x weightFactor.", weighted_w);
    w.Family("trainyard_fairshare_entitlement_ratio", "gauge",
             "The fraction of its queue's capacity a fair share is entitled to now: 1/weightFactor over the sum of "
             "1/weightFactor of the queue's active shares (0 when not active).", ratio_w);
    w.Family("trainyard_fairshare_entitlement_instances", "gauge",
             "A fair share's entitlement ratio times the NUM_INSTANCES limits of its queue's service environments.",
             entitled_w);

    // ---- gauges: quota shares ----
    w.Family("trainyard_quota_share_limit_instances", "gauge",
             "A quota share's capacity limit per instance type (its entitlement).");
    for (const auto& [key, qs] : s.quota_shares)
      for (const auto& l : qs.capacity_limits)
        w.Sample("trainyard_quota_share_limit_instances",
                 {{"queue", qs.queue}, {"share", qs.name}, {"instance_type", l.capacity_unit}},
                 static_cast<double>(l.max_capacity));
    w.Family("trainyard_quota_share_instances_in_use", "gauge",
             "Instances a quota share's SCHEDULED, STARTING and RUNNING jobs hold, per instance type.", quota_used);
    w.Family("trainyard_quota_share_borrowed_instances", "gauge",
             "Instances a quota share holds above its own limit (borrowed from other shares), per instance type.",
             quota_borrowed);
    w.Family("trainyard_quota_share_lent_instances", "gauge",
             "Instances of a lending quota share's idle limit that other shares borrow, per instance type "
             "(borrowing attributed to lenders in proportion to their idle limits).", quota_lent);
    w.Family("trainyard_quota_unassigned_lent_instances", "gauge",
             "Instances quota shares borrow beyond all lending shares' idle limits (the queue's capacity that no "
             "share's limit covers), per queue and instance type.", unassigned);
  }
  // ---- running instances: the newest system-metrics sample of each ----
  {
    static const std::array<const char*, kSystemMetricNames.size()> kFamilies = {
        "trainyard_instance_cpu_utilization_percent", "trainyard_instance_memory_utilization_percent",
        "trainyard_instance_disk_utilization_percent", "trainyard_instance_gpu_utilization_percent",
        "trainyard_instance_gpu_memory_utilization_percent"};
    static const std::array<const char*, kSystemMetricNames.size()> kHelp = {
        "CPU use of a running instance's processes (SageMaker's CPUUtilization: 100 per core).",
        "Resident memory of a running instance's processes over the host's memory, percent (MemoryUtilization).",
        "Use of the file system holding a running instance's /opt/ml, percent (DiskUtilization).",
        "GPU use of a running instance's GPUs (GPUUtilization: 100 per GPU).",
        "GPU memory use of a running instance's GPUs (GPUMemoryUtilization: 100 per GPU)."};
    std::array<Writer, kSystemMetricNames.size()> per;
    for (const auto& [seq, name] : s.live_training_jobs) {
      auto it = s.system_series.find(name);
      if (it == s.system_series.end()) continue;
      for (const auto& [host, samples] : it->second) {
        if (samples.empty()) continue;
        for (size_t m = 0; m < kSystemMetricNames.size(); ++m) {
          if (!samples.back().values[m]) continue;
          per[m].Sample(kFamilies[m], {{"training_job", name}, {"host", name + "/" + host}}, *samples.back().values[m]);
        }
      }
    }
    for (size_t m = 0; m < kSystemMetricNames.size(); ++m) w.Family(kFamilies[m], "gauge", kHelp[m], per[m]);
  }
  // ---- alarms ----
  bool any_metric_alarm = false;
  for (const auto& [name, st] : s.alarms) any_metric_alarm = any_metric_alarm || st.metric.has_value();
  if (!config.alarms.empty() || any_metric_alarm) {
    w.Family("trainyard_alarm_active", "gauge",
             "1 while an alarm is in ALARM, 0 otherwise; rule \"metric\" for PutMetricAlarm's (docs/alarms.md).");
    for (const auto& a : config.alarms) {
      auto st = s.alarms.find(a.name);
      w.Sample("trainyard_alarm_active", {{"alarm", a.name}, {"rule", a.rule}},
               st != s.alarms.end() && st->second.value == "ALARM" ? 1 : 0);
    }
    for (const auto& [name, st] : s.alarms)
      if (st.metric) w.Sample("trainyard_alarm_active", {{"alarm", name}, {"rule", "metric"}}, st.value == "ALARM" ? 1 : 0);
  }
  if (!config.alarms.empty()) {
    w.Family("trainyard_alarm_pending", "gauge",
             "1 while an alarm rule's condition holds but has not yet held for its `seconds` (it is still OK).");
    for (const auto& a : config.alarms) {
      auto st = s.alarms.find(a.name);
      w.Sample("trainyard_alarm_pending", {{"alarm", a.name}, {"rule", a.rule}},
               st != s.alarms.end() && st->second.value == "OK" && st->second.condition_since != 0 ? 1 : 0);
    }
  }
  return w.Take();
}

}  // namespace

std::string RenderMetrics(const control::Controller& c) {
  return c.Read([&](const State& s) { return Render(c.config(), s); });
}

std::string RenderEventMetrics(uint64_t latest_seq, const std::vector<obs::WebhookStats>& webhooks) {
  Writer w;
  w.Family("trainyard_events_latest_sequence", "gauge", "The sequence number of the newest stored event.");
  w.Sample("trainyard_events_latest_sequence", {}, static_cast<double>(latest_seq));
  if (webhooks.empty()) return w.Take();
  w.Family("trainyard_webhook_delivered_total", "counter", "Events a webhook acknowledged with a 2xx answer.");
  for (const auto& h : webhooks) w.Sample("trainyard_webhook_delivered_total", {{"webhook", h.name}}, static_cast<double>(h.delivered));
  w.Family("trainyard_webhook_failed_attempts_total", "counter", "Webhook POSTs that failed (no answer, or not 2xx); each is retried.");
  for (const auto& h : webhooks)
    w.Sample("trainyard_webhook_failed_attempts_total", {{"webhook", h.name}}, static_cast<double>(h.failed_attempts));
  w.Family("trainyard_webhook_dropped_total", "counter",
           "Events a webhook gave up after its retry policy (EventBridge targets' MaximumRetryAttempts, MaximumEventAgeInSeconds).");
  for (const auto& h : webhooks) w.Sample("trainyard_webhook_dropped_total", {{"webhook", h.name}}, static_cast<double>(h.dropped));
  w.Family("trainyard_webhook_skipped_total", "counter", "Events retention deleted before a webhook got them.");
  for (const auto& h : webhooks) w.Sample("trainyard_webhook_skipped_total", {{"webhook", h.name}}, static_cast<double>(h.skipped));
  w.Family("trainyard_webhook_backlog_events", "gauge", "Stored events a webhook has not handled yet (newest sequence minus its cursor).");
  for (const auto& h : webhooks)
    w.Sample("trainyard_webhook_backlog_events", {{"webhook", h.name}},
             static_cast<double>(latest_seq > h.cursor ? latest_seq - h.cursor : 0));
  return w.Take();
}

}  // namespace ty::api
