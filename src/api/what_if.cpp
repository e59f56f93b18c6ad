// WhatIf: a job queue's recent history replayed through the simulator (what_if.h,
// docs/simulate.md "What if").
#include "api/what_if.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <future>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "api/handlers.h"
#include "control/controller.h"
#include "core/config.h"

namespace ty::api {

namespace what_if {

namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

template <class Map>
std::string JoinKeys(const Map& m) {
  std::vector<std::string> names;
  for (const auto& [name, v] : m) names.push_back(name);
  return Join(names);
}

const char* KindName(sim::Policy p) {
  return p == sim::Policy::kFairShare ? "fair-share" : p == sim::Policy::kQuota ? "quota-share" : "FIFO";
}

// The instances one environment offers: its NUM_INSTANCES limit, or its per-type limits each
// within what the host has of that type.
int64_t EnvironmentCapacity(const ServiceEnvironment& e, const Config& config) {
  int64_t typed = 0;
  for (const auto& l : e.capacity_limits) {
    if (l.capacity_unit == "NUM_INSTANCES") return std::max<int64_t>(0, l.max_capacity);
    typed += std::max<int64_t>(0, std::min(l.max_capacity, config.CapacityOf(l.capacity_unit)));
  }
  return typed;
}

}  // namespace

StatusOr<QueueHistory> ReadQueueHistory(const control::State& s, const Config& config, const std::string& queue_ref,
                                        EpochMs start, EpochMs end, int64_t max_jobs) {
  const JobQueue* q = control::Controller::FindQueue(s, queue_ref);
  if (!q) return NotFound("Requested resource not found: job queue " + queue_ref);
  if (q->job_queue_type != "SAGEMAKER_TRAINING")
    return InvalidArgument("JobQueue " + q->name + " is of type " + q->job_queue_type +
                           ": WhatIf replays the service jobs of a SAGEMAKER_TRAINING queue");
  QueueHistory h;
  h.queue = q->name;
  h.start = start;
  h.end = end;
  h.policy = q->kind == QueueKind::kFairShare    ? sim::Policy::kFairShare
             : q->kind == QueueKind::kQuotaShare ? sim::Policy::kQuota
                                                 : sim::Policy::kFifo;

  // The jobs first: the limit is checked before anything is copied.
  std::vector<uint64_t> seqs;
  if (auto by_status = s.by_queue_status.find(q->name); by_status != s.by_queue_status.end())
    for (const auto& [status, set] : by_status->second)
      for (uint64_t seq : set) {
        const EpochMs created = s.jobs.at(seq).job.created_at;
        if (created >= start && created < end) seqs.push_back(seq);
      }
  if (static_cast<int64_t>(seqs.size()) > max_jobs)
    return InvalidArgument("the window holds " + std::to_string(seqs.size()) + " service jobs of job queue " + q->name +
                           ", more than [console] what_if_max_jobs (" + std::to_string(max_jobs) +
                           ") allows: ask for fewer HistoryHours");
  std::set<std::string> types;
  for (uint64_t seq : seqs) {
    const control::ServiceJobState& js = s.jobs.at(seq);
    const ServiceJob& j = js.job;
    HistoryJob hj;
    hj.seq = seq;
    hj.share = control::ShareOf(j);
    hj.priority = j.scheduling_priority;
    hj.instances = std::max<int64_t>(1, j.instance_count);
    hj.submitted = j.created_at;
    hj.finished = IsTerminal(j.status);
    hj.lost_ms = j.preemption_lost_instance_ms / hj.instances;
    hj.runtime_bound_ms = j.max_runtime_ms > 0 ? j.max_runtime_ms : 86'400'000;
    // Its spans of held capacity, from its status history.
    EpochMs open = -1;  // the start of the span it holds now; -1: none
    for (const auto& [name, at] : js.history) {
      const std::optional<JobStatus> st = ParseJobStatus(name);
      const bool active = st && IsActive(*st);
      if (active && open < 0) open = std::min(at, end);
      if (!active && open >= 0) {
        hj.held.emplace_back(open, std::min(at, end));
        open = -1;
      }
    }
    if (open >= 0) hj.held.emplace_back(open, end);
    if (hj.finished && hj.held.empty()) {
      ++h.never_ran;
      continue;
    }
    types.insert(CapacityKey(j.instance_type, j.managed_spot));
    h.jobs.push_back(std::move(hj));
  }
  std::stable_sort(h.jobs.begin(), h.jobs.end(),
                   [](const HistoryJob& a, const HistoryJob& b) { return a.submitted < b.submitted; });
  h.instance_types.assign(types.begin(), types.end());

  // Capacity: its environments' limits, and no more than the host has of the types its jobs use.
  std::set<std::string> envs;
  for (const auto& o : q->service_environment_order) {
    envs.insert(o.service_environment);
    if (const ServiceEnvironment* e = control::Controller::FindEnvironment(s, o.service_environment))
      h.capacity += EnvironmentCapacity(*e, config);
  }
  if (h.policy != sim::Policy::kQuota) {
    int64_t host = 0;
    for (const auto& key : h.instance_types) host += config.CapacityOf(key);
    if (host > 0) h.capacity = std::min(h.capacity, host);
  }
  for (const auto& [name, other] : s.queues) {
    if (name == q->name) continue;
    for (const auto& o : other.service_environment_order)
      if (envs.count(o.service_environment)) {
        h.other_queues.push_back(name);
        break;
      }
  }

  if (h.policy == sim::Policy::kFairShare) {
    const SchedulingPolicy* p = control::Controller::FindPolicy(s, q->scheduling_policy_arn);
    const FairSharePolicy fs = p && p->fairshare ? *p->fairshare : FairSharePolicy{};
    h.decay_seconds = fs.share_decay_seconds;
    h.compute_reservation = static_cast<int>(fs.compute_reservation);
    for (const HistoryJob& j : h.jobs) h.weights[j.share] = control::Controller::ShareWeight(fs.share_distribution, j.share);
  } else if (h.policy == sim::Policy::kQuota) {
    for (const auto& [key, share] : s.quota_shares) {
      if (share.queue != q->name) continue;
      sim::ShareSpec spec;
      spec.name = share.name;
      for (const auto& l : share.capacity_limits) spec.gpus += std::max<int64_t>(0, l.max_capacity);
      spec.strategy = share.strategy == ShareStrategy::kReserve ? sim::Strategy::kReserve
                      : share.strategy == ShareStrategy::kLend  ? sim::Strategy::kLend
                                                                : sim::Strategy::kLendAndBorrow;
      spec.borrow_limit_percent = share.borrow_limit;
      spec.in_share_preemption = share.in_share_preemption;
      h.quotas[share.name] = spec;
    }
    if (auto tag = q->tags.find("trainyard:minRuntimeSeconds"); tag != q->tags.end())
      h.min_runtime_s = std::max<int64_t>(0, std::atoll(tag->second.c_str()));
  }
  return h;
}

Status CheckChanges(const QueueHistory& h, const Changes& changes) {
  if (!changes.weights.empty() && h.policy != sim::Policy::kFairShare)
    return InvalidArgument(std::string("ShareWeights applies to a fair-share queue; job queue ") + h.queue + " is a " +
                           KindName(h.policy) + " queue");
  for (const auto& [share, w] : changes.weights)
    if (!h.weights.count(share))
      return InvalidArgument("ShareWeights." + share + ": no job of share '" + share +
                             "' is in the window (its shares: " + JoinKeys(h.weights) + ")");
  if (!changes.quotas.empty() && h.policy != sim::Policy::kQuota)
    return InvalidArgument(std::string("QuotaLimits applies to a quota-share queue; job queue ") + h.queue + " is a " +
                           KindName(h.policy) + " queue");
  for (const auto& [share, n] : changes.quotas)
    if (!h.quotas.count(share))
      return InvalidArgument("QuotaLimits." + share + ": not a quota share of job queue " + h.queue +
                             " (its shares: " + JoinKeys(h.quotas) + ")");
  return Status::Ok();
}

Replay ToReplay(const QueueHistory& h, const Changes& changes) {
  Replay r;
  sim::ClusterSpec& c = r.cluster;
  c.gpus = changes.capacity.value_or(h.capacity);
  c.policy = h.policy;
  // The server gives the scheduler a runtime bound (one day by default) that is rarely tight
  // enough to backfill under; the replay gives none, so a head that does not fit blocks.
  c.exact_runtime = false;
  c.decay_seconds = h.decay_seconds;
  c.compute_reservation = h.compute_reservation;
  c.min_runtime_s = h.min_runtime_s;
  // Each share is a team of the trace, mapped to itself.
  if (h.policy == sim::Policy::kFairShare) {
    for (const auto& [share, weight] : h.weights) {
      auto w = changes.weights.find(share);
      sim::ShareSpec spec;
      spec.name = share;
      spec.weight_factor = w == changes.weights.end() ? weight : w->second;
      c.shares[share] = spec;
      c.teams[share] = {share, 0};
    }
  } else if (h.policy == sim::Policy::kQuota) {
    c.shares = h.quotas;
    for (const auto& [share, n] : changes.quotas) c.shares[share].gpus = n;
    // A job of a share deleted since: a share of no quota, which borrows what is idle.
    for (const HistoryJob& j : h.jobs)
      if (!c.shares.count(j.share)) c.shares[j.share] = sim::ShareSpec{j.share};
    for (const auto& [share, spec] : c.shares) c.teams[share] = {share, 0};
    if (!c.shares.empty()) c.default_team.share = c.shares.begin()->first;
  }
  r.trace.reserve(h.jobs.size());
  for (const HistoryJob& j : h.jobs) {
    sim::TraceJob t;
    t.id = std::to_string(j.seq);
    t.submit_s = (j.submitted - h.start) / 1000;
    int64_t ms = j.runtime_bound_ms;  // still waiting: what the scheduler assumes of it
    if (!j.held.empty()) {
      ms = -j.lost_ms;
      for (const auto& [a, b] : j.held) ms += b - a;
    }
    t.duration_s = std::max<int64_t>(0, std::llround(static_cast<double>(ms) / 1000.0));
    t.gpus = j.instances;
    t.team = j.share.empty() ? "(none)" : j.share;
    t.priority = j.priority;
    r.trace.push_back(std::move(t));
  }
  return r;
}

namespace {

double Clipped(double a, double b, double lo, double hi) { return std::max(0.0, std::min(b, hi) - std::max(a, lo)); }

void Add(FiguresByShare& out, const std::string& share, std::optional<double> wait, double instance_seconds) {
  for (Figures* f : {&out.shares[share], &out.total}) {
    ++f->jobs;
    if (wait) f->waits_s.push_back(*wait);
    f->instance_seconds += instance_seconds;
  }
}

void SortWaits(FiguresByShare& out) {
  for (auto& [share, f] : out.shares) std::sort(f.waits_s.begin(), f.waits_s.end());
  std::sort(out.total.waits_s.begin(), out.total.waits_s.end());
}

}  // namespace

FiguresByShare ActualFigures(const QueueHistory& h) {
  FiguresByShare out;
  for (const HistoryJob& j : h.jobs) {
    const EpochMs first = j.held.empty() ? h.end : j.held.front().first;
    double held = 0;
    for (const auto& [a, b] : j.held)
      held += Clipped(static_cast<double>(a), static_cast<double>(b), static_cast<double>(h.start), static_cast<double>(h.end));
    Add(out, j.share, static_cast<double>(first - j.submitted) / 1000.0, held / 1000.0 * static_cast<double>(j.instances));
  }
  SortWaits(out);
  return out;
}

FiguresByShare SimulatedFigures(const QueueHistory& h, const Replay& replay, const sim::Result& result,
                                int64_t* never_started) {
  FiguresByShare out;
  const auto spans = sim::HeldSpans(result);
  const double window_s = static_cast<double>(h.end - h.start) / 1000.0;
  for (size_t i = 0; i < h.jobs.size(); ++i) {
    const sim::TraceJob& t = replay.trace[i];
    const sim::JobResult& res = result.jobs[i];
    std::optional<double> wait;
    if (res.start_s >= 0) wait = static_cast<double>(res.start_s - t.submit_s);
    else ++*never_started;
    double held = 0;
    for (const auto& [a, b] : spans[i]) held += Clipped(static_cast<double>(a), static_cast<double>(b), 0.0, window_s);
    Add(out, h.jobs[i].share, wait, held * static_cast<double>(t.gpus));
  }
  SortWaits(out);
  return out;
}

std::optional<double> Percentile(const std::vector<double>& sorted, int p) {
  if (sorted.empty()) return std::nullopt;
  const size_t rank = (static_cast<size_t>(p) * sorted.size() + 99) / 100;
  return sorted[std::max<size_t>(rank, 1) - 1];
}

}  // namespace what_if

namespace {

using nlohmann::json;

// Milliseconds of precision: the figures are seconds and hours, never finer than the clock.
double Round3(double x) { return std::round(x * 1000.0) / 1000.0; }

json Encode(const what_if::Figures& f, int64_t capacity, double window_s) {
  auto opt = [](std::optional<double> v) { return v ? json(Round3(*v)) : json(nullptr); };
  std::optional<double> mean;
  if (!f.waits_s.empty())
    mean = std::accumulate(f.waits_s.begin(), f.waits_s.end(), 0.0) / static_cast<double>(f.waits_s.size());
  const double capacity_s = static_cast<double>(capacity) * window_s;
  return {{"Jobs", f.jobs},
          {"MeanWaitSeconds", opt(mean)},
          {"P50WaitSeconds", opt(what_if::Percentile(f.waits_s, 50))},
          {"P90WaitSeconds", opt(what_if::Percentile(f.waits_s, 90))},
          {"InstanceHours", Round3(f.instance_seconds / 3600.0)},
          {"UtilizationPercent", capacity_s > 0 ? Round3(f.instance_seconds / capacity_s * 100.0) : 0.0}};
}

constexpr int64_t kMaxInstances = 1'000'000;

// The request's members, each checked for its type and range (names are checked against the
// queue's history later, by CheckChanges).
Status ReadRequest(const json& req, std::string* queue, int64_t* hours, what_if::Changes* changes) {
  if (!req.is_object()) return InvalidArgument("the request body must be a JSON object");
  static const std::set<std::string> kMembers = {"JobQueue", "HistoryHours", "ShareWeights", "QuotaLimits", "Capacity"};
  for (const auto& [key, v] : req.items())
    if (!kMembers.count(key))
      return InvalidArgument("unknown member " + key + "; WhatIf takes JobQueue, HistoryHours, ShareWeights, QuotaLimits and Capacity");
  if (!req.contains("JobQueue") || !req["JobQueue"].is_string() || req["JobQueue"].get<std::string>().empty())
    return InvalidArgument("JobQueue is required: the name or ARN of a job queue");
  *queue = req["JobQueue"].get<std::string>();
  if (req.contains("HistoryHours")) {
    const json& v = req["HistoryHours"];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 720)
      return InvalidArgument("HistoryHours must be an integer from 1 to 720");
    *hours = v.get<int64_t>();
  }
  if (req.contains("ShareWeights")) {
    if (!req["ShareWeights"].is_object())
      return InvalidArgument("ShareWeights must be an object of share identifier -> weightFactor");
    for (const auto& [share, v] : req["ShareWeights"].items()) {
      if (!v.is_number() || v.get<double>() < 0.0001 || v.get<double>() > 999.9999)
        return InvalidArgument("ShareWeights." + share + " must be a number from 0.0001 to 999.9999 (a weightFactor: lower gets more)");
      changes->weights[share] = v.get<double>();
    }
  }
  if (req.contains("QuotaLimits")) {
    if (!req["QuotaLimits"].is_object()) return InvalidArgument("QuotaLimits must be an object of quota share -> instances");
    for (const auto& [share, v] : req["QuotaLimits"].items()) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxInstances)
        return InvalidArgument("QuotaLimits." + share + " must be an integer from 0 to " + std::to_string(kMaxInstances) +
                               " (instances)");
      changes->quotas[share] = v.get<int64_t>();
    }
  }
  if (req.contains("Capacity")) {
    const json& v = req["Capacity"];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxInstances)
      return InvalidArgument("Capacity must be an integer from 1 to " + std::to_string(kMaxInstances) + " (instances)");
    changes->capacity = v.get<int64_t>();
  }
  return Status::Ok();
}

}  // namespace

Response HandleWhatIf(control::Controller& c, const nlohmann::json& req) {
  std::string queue;
  int64_t hours = 24;
  what_if::Changes changes;
  TY_RETURN_IF_ERROR(ReadRequest(req, &queue, &hours, &changes));
  const EpochMs end = c.Now(), start = end - hours * 3'600'000;
  const int64_t max_jobs = c.config().console.what_if_max_jobs;
  // Only the copy of the history holds the lock; the replays run outside it.
  StatusOr<what_if::QueueHistory> read = c.Read([&](const control::State& s) {
    return what_if::ReadQueueHistory(s, c.config(), queue, start, end, max_jobs);
  });
  if (!read.ok()) return read.status();
  const what_if::QueueHistory& h = *read;
  TY_RETURN_IF_ERROR(what_if::CheckChanges(h, changes));
  const int64_t capacity = changes.capacity.value_or(h.capacity);
  if (capacity <= 0)
    return InvalidArgument("job queue " + h.queue + " has no capacity to replay (its service environments offer 0 instances): give Capacity");

  const what_if::Replay baseline = what_if::ToReplay(h, {});
  const what_if::Replay simulated = what_if::ToReplay(h, changes);
  int64_t baseline_never = 0, simulated_never = 0;
  what_if::FiguresByShare actual = what_if::ActualFigures(h), base, sim;
  if (!h.jobs.empty()) {
    // The two replays are independent: the changed one runs beside the baseline (a deep backlog of
    // 100,000 jobs takes seconds each).
    auto changed = std::async(std::launch::async, [&] { return sim::Simulate(simulated.cluster, simulated.trace); });
    base = what_if::SimulatedFigures(h, baseline, sim::Simulate(baseline.cluster, baseline.trace), &baseline_never);
    sim = what_if::SimulatedFigures(h, simulated, changed.get(), &simulated_never);
  }

  const double window_s = static_cast<double>(end - start) / 1000.0;
  json shares = json::array();
  for (const auto& [share, f] : actual.shares)
    shares.push_back({{"Share", share},
                      {"Actual", Encode(f, h.capacity, window_s)},
                      {"Simulated", Encode(sim.shares[share], capacity, window_s)},
                      {"Baseline", Encode(base.shares[share], h.capacity, window_s)}});
  json notes = json::array();
  notes.push_back(std::string("replayed through the ") + what_if::KindName(h.policy) + " policy on " + std::to_string(h.capacity) + " instances (Simulated: " + std::to_string(capacity) +
                  "); the instance types of its jobs (" + what_if::Join(h.instance_types) + ") are one pool");
  int64_t waiting = 0, running = 0;
  for (const auto& j : h.jobs) {
    if (j.held.empty()) ++waiting;
    else if (!j.finished && j.held.back().second == h.end) ++running;
  }
  if (waiting)
    notes.push_back(std::to_string(waiting) + " jobs still wait: what happened counts their wait up to EndTime (a lower bound); "
                    "the replays run them for their runtime bound (MaxRuntimeInSeconds, one day when absent) once started");
  if (running)
    notes.push_back(std::to_string(running) + " jobs still run: the replays run them for the time they have held capacity so far");
  if (h.never_ran) notes.push_back(std::to_string(h.never_ran) + " jobs ended without running (terminated or failed while waiting): left out");
  if (baseline_never || simulated_never)
    notes.push_back(std::to_string(baseline_never) + " jobs (Baseline) and " + std::to_string(simulated_never) +
                    " (Simulated) could never start (larger than the capacity or what their quota allows): no wait counted");
  if (!h.other_queues.empty())
    notes.push_back("queues " + what_if::Join(h.other_queues) +
                    " share its service environments; the replay gives this queue their whole capacity");
  return json{{"JobQueue", h.queue},
              {"Window", {{"StartTime", static_cast<double>(start) / 1000.0}, {"EndTime", static_cast<double>(end) / 1000.0}}},
              {"Jobs", static_cast<int64_t>(h.jobs.size())},
              {"Capacity", {{"Current", h.capacity}, {"Simulated", capacity}}},
              {"Shares", std::move(shares)},
              {"Totals",
               {{"Actual", Encode(actual.total, h.capacity, window_s)},
                {"Simulated", Encode(sim.total, capacity, window_s)},
                {"Baseline", Encode(base.total, h.capacity, window_s)}}},
              {"Notes", std::move(notes)}};
}

}  // namespace ty::api
