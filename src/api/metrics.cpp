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
#include <optional>
#include <set>
#include <tuple>

#include "control/controller.h"
#include "sched/sched.h"

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

  // What active service jobs hold, walked once: they are bounded by the host's capacity.
  std::map<std::pair<std::string, std::string>, int64_t> env_by_key;      // (environment, capacity key)
  std::map<std::pair<std::string, std::string>, int64_t> share_held;      // (queue, share)
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> quota_held;  // (queue, share, type)
  for (const auto& [queue, by_status] : s.by_queue_status)
    for (JobStatus st : {JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning}) {
      auto it = by_status.find(st);
      if (it == by_status.end()) continue;
      for (uint64_t seq : it->second) {
        const control::ServiceJobState& js = s.jobs.at(seq);
        const ServiceJob& j = js.job;
        const std::string key =
            j.attempt_capacity_key.empty() ? CapacityKey(j.instance_type, j.managed_spot) : j.attempt_capacity_key;
        env_by_key[{js.service_environment, key}] += j.instance_count;
        if (!control::ShareOf(j).empty()) share_held[{queue, control::ShareOf(j)}] += j.instance_count;
        if (!j.quota_share_name.empty()) quota_held[{queue, j.quota_share_name, j.instance_type}] += j.instance_count;
      }
    }

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
  w.Family("trainyard_share_instances_in_use", "gauge",
           "Instances held by a share's (fair-share identifier or quota share) SCHEDULED, STARTING and RUNNING jobs.");
  for (const auto& [k, n] : share_held)
    w.Sample("trainyard_share_instances_in_use", {{"queue", k.first}, {"share", k.second}}, static_cast<double>(n));
  w.Family("trainyard_share_unfinished_jobs", "gauge", "A share's jobs that are not finished (the queue's active shares).");
  for (const auto& [queue, shares] : s.unfinished_by_share)
    for (const auto& [share, n] : shares)
      w.Sample("trainyard_share_unfinished_jobs", {{"queue", queue}, {"share", share}}, static_cast<double>(n));
  // Fair-share queues: every queue with a scheduling policy that is not a quota-share policy
  // (as SchedulePass decides), with its policy's shareDistribution and shareDecaySeconds.
  struct FairSharePolicy {
    std::vector<ShareAttributes> distribution;
    int64_t decay_seconds = 0;
  };
  auto fair_share_policy = [&](const std::string& queue) -> std::optional<FairSharePolicy> {
    auto q = s.queues.find(queue);
    if (q == s.queues.end() || q->second.kind != QueueKind::kFairShare) return std::nullopt;
    const SchedulingPolicy* p = control::Controller::FindPolicy(s, q->second.scheduling_policy_arn);
    FairSharePolicy out;
    if (p && p->fairshare) {
      out.distribution = p->fairshare->share_distribution;
      out.decay_seconds = p->fairshare->share_decay_seconds;
    }
    return out;
  };
  {
    // Each family's samples, each written under its own TYPE line.
    Writer uw, ww, wu;
    for (const auto& [queue, shares] : s.share_usage) {
      const FairSharePolicy policy = fair_share_policy(queue).value_or(FairSharePolicy{});
      for (const auto& [share, u] : shares) {
        const Labels l = {{"queue", queue}, {"share", share}};
        const double weight = control::Controller::ShareWeight(policy.distribution, share);
        auto h = share_held.find({queue, share});
        uw.Sample("trainyard_fairshare_usage_instance_seconds", l, u.usage);
        ww.Sample("trainyard_fairshare_weight_factor", l, weight);
        wu.Sample("trainyard_fairshare_weighted_usage_instances", l,
                  sched::ShareOrderKey(u.usage, h == share_held.end() ? 0 : h->second, 0, weight, policy.decay_seconds));
      }
    }
    w.Family("trainyard_fairshare_usage_instance_seconds", "gauge",
             "A fair share's decayed usage (instance-seconds) as of the last scheduling pass of its queue.", uw);
    w.Family("trainyard_fairshare_weight_factor", "gauge",
             "A fair share's weightFactor from the queue's shareDistribution (lower: larger entitlement).", ww);
    w.Family("trainyard_fairshare_weighted_usage_instances", "gauge",
             "A fair share's standing in the scheduler's order, lowest first: (4 x decayed usage / shareDecaySeconds "
             "+ instances held) x weightFactor.", wu);
  }
  {
    // Entitlement: an active share's inverse weight over the sum of the inverse weights of the
    // queue's active shares (those with unfinished jobs), times the NUM_INSTANCES limits of the
    // queue's service environments. Known shares that are not active are entitled to 0.
    Writer rw, iw;
    for (const auto& [queue, q] : s.queues) {
      const std::optional<FairSharePolicy> policy = fair_share_policy(queue);
      if (!policy) continue;
      std::map<std::string, double> inverse;  // share -> 1 / weightFactor; 0 when not active
      if (auto u = s.share_usage.find(queue); u != s.share_usage.end())
        for (const auto& [share, usage] : u->second) inverse[share] = 0;
      double sum = 0;
      if (auto a = s.unfinished_by_share.find(queue); a != s.unfinished_by_share.end())
        for (const auto& [share, n] : a->second)
          if (n > 0 && !share.empty()) {
            // weightFactor is validated to 0.0001..999.9999, so the inverse is finite.
            inverse[share] = 1.0 / control::Controller::ShareWeight(policy->distribution, share);
            sum += inverse[share];
          }
      int64_t capacity = 0;
      for (const auto& o : q.service_environment_order)
        if (auto e = s.environments.find(o.service_environment); e != s.environments.end())
          for (const auto& l : e->second.capacity_limits)
            if (l.capacity_unit == "NUM_INSTANCES") capacity += l.max_capacity;
      for (const auto& [share, inv] : inverse) {
        const Labels l = {{"queue", queue}, {"share", share}};
        const double ratio = sum > 0 ? inv / sum : 0;
        rw.Sample("trainyard_fairshare_entitlement_ratio", l, ratio);
        iw.Sample("trainyard_fairshare_entitlement_instances", l, ratio * static_cast<double>(capacity));
      }
    }
    w.Family("trainyard_fairshare_entitlement_ratio", "gauge",
             "The fraction of its queue's capacity a fair share is entitled to now: 1/weightFactor over the sum of "
             "1/weightFactor of the queue's active shares (0 when not active).", rw);
    w.Family("trainyard_fairshare_entitlement_instances", "gauge",
             "A fair share's entitlement ratio times the NUM_INSTANCES limits of its queue's service environments.", iw);
  }

  // ---- gauges: quota shares ----
  w.Family("trainyard_quota_share_limit_instances", "gauge",
           "A quota share's capacity limit per instance type (its entitlement).");
  for (const auto& [key, qs] : s.quota_shares)
    for (const auto& l : qs.capacity_limits)
      w.Sample("trainyard_quota_share_limit_instances", {{"queue", qs.queue}, {"share", qs.name}, {"instance_type", l.capacity_unit}},
               static_cast<double>(l.max_capacity));
  {
    // Per (queue, share, type): every share's limits, 0 included, and whatever active jobs hold
    // (also of a deleted share or a type the share has no limit for).
    struct Ledger {
      int64_t limit = 0, used = 0, lent = 0;
      bool lends = false;  // LEND or LEND_AND_BORROW (RESERVE keeps its idle limit)
      int64_t Borrowed() const { return std::max<int64_t>(0, used - limit); }
      int64_t Idle() const { return lends ? std::max<int64_t>(0, limit - used) : 0; }
    };
    using Key = std::tuple<std::string, std::string, std::string>;  // (queue, share, type)
    std::map<Key, Ledger> ledger;
    for (const auto& [key, qs] : s.quota_shares)
      for (const auto& l : qs.capacity_limits) {
        Ledger& e = ledger[{qs.queue, qs.name, l.capacity_unit}];
        e.limit = l.max_capacity;
        e.lends = qs.strategy != ShareStrategy::kReserve;
      }
    for (const auto& [k, n] : quota_held) ledger[k].used = n;
    // Lending: per (queue, type), what the shares borrow is attributed to the lending shares'
    // idle limits in proportion to them (largest remainder, ties to the share first by name);
    // what exceeds all idle limits came from the queue's capacity that no share's limit covers.
    std::map<std::pair<std::string, std::string>, int64_t> unassigned;  // (queue, type)
    {
      std::map<std::pair<std::string, std::string>, std::vector<Ledger*>> by_type;
      for (auto& [k, e] : ledger) by_type[{std::get<0>(k), std::get<2>(k)}].push_back(&e);  // share-name order
      for (auto& [qt, shares] : by_type) {
        int64_t borrowed = 0, idle = 0;
        for (const Ledger* e : shares) {
          borrowed += e->Borrowed();
          idle += e->Idle();
        }
        const int64_t lent = std::min(borrowed, idle);
        std::vector<std::pair<int64_t, size_t>> remainders;  // (remainder, position in name order)
        int64_t given = 0;
        for (size_t i = 0; i < shares.size(); ++i) {
          if (shares[i]->Idle() == 0) continue;
          shares[i]->lent = lent * shares[i]->Idle() / idle;
          given += shares[i]->lent;
          remainders.push_back({lent * shares[i]->Idle() % idle, i});
        }
        std::stable_sort(remainders.begin(), remainders.end(),
                         [](const auto& a, const auto& b) { return a.first > b.first; });
        for (size_t i = 0; given < lent; ++i, ++given) ++shares[remainders[i].second]->lent;
        unassigned[qt] = borrowed - lent;
      }
    }
    Writer used, borrowed, lent;
    for (const auto& [k, e] : ledger) {
      const auto& [queue, share, type] = k;
      const Labels l = {{"queue", queue}, {"share", share}, {"instance_type", type}};
      used.Sample("trainyard_quota_share_instances_in_use", l, static_cast<double>(e.used));
      borrowed.Sample("trainyard_quota_share_borrowed_instances", l, static_cast<double>(e.Borrowed()));
      lent.Sample("trainyard_quota_share_lent_instances", l, static_cast<double>(e.lent));
    }
    w.Family("trainyard_quota_share_instances_in_use", "gauge",
             "Instances a quota share's SCHEDULED, STARTING and RUNNING jobs hold, per instance type.", used);
    w.Family("trainyard_quota_share_borrowed_instances", "gauge",
             "Instances a quota share holds above its own limit (borrowed from other shares), per instance type.", borrowed);
    w.Family("trainyard_quota_share_lent_instances", "gauge",
             "Instances of a lending quota share's idle limit that other shares borrow, per instance type "
             "(borrowing attributed to lenders in proportion to their idle limits).", lent);
    w.Family("trainyard_quota_unassigned_lent_instances", "gauge",
             "Instances quota shares borrow beyond all lending shares' idle limits (the queue's capacity that no "
             "share's limit covers), per queue and instance type.");
    for (const auto& [qt, n] : unassigned)
      w.Sample("trainyard_quota_unassigned_lent_instances", {{"queue", qt.first}, {"instance_type", qt.second}},
               static_cast<double>(n));
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
  if (!config.alarms.empty()) {
    w.Family("trainyard_alarm_active", "gauge", "1 while an alarm rule is in ALARM, 0 while OK (docs/alarms.md).");
    for (const auto& a : config.alarms) {
      auto st = s.alarms.find(a.name);
      w.Sample("trainyard_alarm_active", {{"alarm", a.name}, {"rule", a.rule}},
               st != s.alarms.end() && st->second.value == "ALARM" ? 1 : 0);
    }
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
  w.Family("trainyard_webhook_skipped_total", "counter", "Events retention deleted before a webhook got them.");
  for (const auto& h : webhooks) w.Sample("trainyard_webhook_skipped_total", {{"webhook", h.name}}, static_cast<double>(h.skipped));
  w.Family("trainyard_webhook_backlog_events", "gauge", "Stored events a webhook has not handled yet (newest sequence minus its cursor).");
  for (const auto& h : webhooks)
    w.Sample("trainyard_webhook_backlog_events", {{"webhook", h.name}},
             static_cast<double>(latest_seq > h.cursor ? latest_seq - h.cursor : 0));
  return w.Take();
}

}  // namespace ty::api
