// The virtual-time loop: submits and completions are events; after each batch of events at one
// virtual time, scheduling passes of the production library decide what starts and what is
// preempted. Nothing here reads a clock or iterates an unordered container.
#include <algorithm>
#include <cassert>
#include <deque>
#include <map>
#include <queue>
#include <set>
#include <tuple>

#include "sched/quota.h"
#include "sched/sched.h"
#include "sim/sim.h"

namespace ty::sim {

namespace {

// Virtual epoch of the snapshots: sched/ treats a time of 0 as "not known".
constexpr int64_t kEpochMs = 1'000'000'000'000;
constexpr int64_t Ms(int64_t s) { return kEpochMs + s * 1000; }
const std::string kType = "gpu";

// A pass that preempts is followed by another at the same time (victims leave at once, with no
// stop grace); this bounds that chain.
constexpr int kMaxPassesPerInstant = 16;
// Jobs offered per (share, priority, size) beyond what could possibly start or preempt.
constexpr int64_t kOfferMargin = 8;

struct JobState {
  int share = 0;
  int team = 0;
  int priority = 0;
  int64_t gpus = 1;
  int64_t remaining_s = 0;      // work left, after what checkpoints saved
  int64_t attempt_start = -1;   // start of the current attempt
  int64_t attempt_restart = 0;  // restart cost at the head of the current attempt
  uint64_t attempt = 0;         // attempts started; tells stale completion events apart
  uint64_t start_order = 0;
  size_t running_pos = 0;
  bool running = false;
};

// Runnable jobs of one share by (priority descending, size): each a sorted list of job indices,
// which are submit order. A deque: passes read the first jobs of each class, jobs arrive at its
// end and start from near its front, so the list is read contiguously and rarely moved.
using ClassKey = std::pair<int, int64_t>;  // (-priority, gpus)
using Class = std::deque<uint32_t>;
using Classes = std::map<ClassKey, Class>;

class Engine {
 public:
  Engine(const ClusterSpec& c, const std::vector<TraceJob>& trace) : c_(c), trace_(trace) {}

  Result Run();

 private:
  void Start(uint32_t i, int64_t t);
  void Preempt(uint32_t i, int64_t t);
  void Complete(uint32_t i, int64_t t);
  void MakeRunnable(uint32_t i);
  void Passes(int64_t t);
  bool SchedulePass(int64_t t);  // FIFO / fair share; true: something started
  bool QuotaPass(int64_t t);      // true: it preempted (run another pass)
  bool QuotaPassIsMoot() const;
  // The first `n` runnable jobs of share `s` in dispatch order.
  void FirstRunnable(size_t s, size_t n, std::vector<uint32_t>& out) const;
  int64_t LastCheckpoint(const JobState& j, int64_t t) const;
  // Quota: a started job's entry in the snapshot, and what it learns as time passes (the instant
  // it may be preempted, its checkpoints) up to `t`.
  void AddRunningEntry(uint32_t i, int64_t t);
  void AgeRunningEntries(int64_t t);
  // The timeline records, per instant, only the teams whose held or wanted GPUs changed.
  void TeamChanged(int team);

  const ClusterSpec& c_;
  const std::vector<TraceJob>& trace_;
  Result r_;
  std::vector<JobState> jobs_;
  std::vector<std::string> share_names_;
  std::vector<const ShareSpec*> share_specs_;  // nullptr: fair share without an entry (weight 1)
  std::vector<Classes> runnable_;              // per share
  std::vector<int64_t> runnable_count_;        // per share
  std::vector<int64_t> share_held_;
  std::vector<double> share_usage_;            // fair share: decayed instance-seconds
  std::vector<int32_t> team_held_, team_demand_;
  std::vector<char> team_changed_;             // per team: changed at this instant
  std::vector<int> changed_teams_;
  std::vector<uint32_t> running_;              // job indices, any order
  std::set<uint32_t> nominated_;               // quota: promised capacity by the last pass
  // Quota: the snapshot every pass reads. Its running entries are kept in step with running_
  // (same positions) as jobs start and stop, not rebuilt per pass.
  sched::QuotaSnapshot quota_snap_;
  // Quota: when a running attempt's entry changes with time alone: (time, job, attempt, what).
  enum Due : uint8_t { kMayBePreempted, kCheckpointed };
  using DueEntry = std::tuple<int64_t, uint32_t, uint64_t, Due>;
  std::priority_queue<DueEntry, std::vector<DueEntry>, std::greater<>> dues_;
  bool completed_in_batch_ = false;            // the events at this instant
  std::vector<uint32_t> submitted_in_batch_;
  int64_t used_ = 0;
  uint64_t start_order_ = 0;
  using Event = std::tuple<int64_t, uint32_t, uint64_t>;  // (end, job, attempt)
  std::priority_queue<Event, std::vector<Event>, std::greater<>> ends_;
};

int64_t Engine::LastCheckpoint(const JobState& j, int64_t t) const {
  if (c_.checkpoint_interval_s <= 0) return -1;
  const int64_t work = t - j.attempt_start - j.attempt_restart;
  if (work < c_.checkpoint_interval_s) return -1;
  return j.attempt_start + j.attempt_restart + work / c_.checkpoint_interval_s * c_.checkpoint_interval_s;
}

void Engine::TeamChanged(int team) {
  if (team_changed_[static_cast<size_t>(team)]) return;
  team_changed_[static_cast<size_t>(team)] = true;
  changed_teams_.push_back(team);
}

void Engine::MakeRunnable(uint32_t i) {
  JobState& j = jobs_[i];
  Class& cls = runnable_[static_cast<size_t>(j.share)][{-j.priority, j.gpus}];
  cls.insert(std::lower_bound(cls.begin(), cls.end(), i), i);
  ++runnable_count_[static_cast<size_t>(j.share)];
}

void Engine::Start(uint32_t i, int64_t t) {
  JobState& j = jobs_[i];
  assert(!j.running);
  auto& cls = runnable_[static_cast<size_t>(j.share)];
  auto it = cls.find({-j.priority, j.gpus});
  it->second.erase(std::lower_bound(it->second.begin(), it->second.end(), i));
  if (it->second.empty()) cls.erase(it);
  --runnable_count_[static_cast<size_t>(j.share)];
  JobResult& res = r_.jobs[i];
  if (res.start_s < 0) res.start_s = t;
  j.running = true;
  j.attempt_start = t;
  j.attempt_restart = res.preemptions > 0 ? c_.restart_cost_s : 0;
  j.start_order = ++start_order_;
  ++j.attempt;
  j.running_pos = running_.size();
  running_.push_back(i);
  used_ += j.gpus;
  share_held_[static_cast<size_t>(j.share)] += j.gpus;
  team_held_[static_cast<size_t>(j.team)] += static_cast<int32_t>(j.gpus);
  TeamChanged(j.team);
  ends_.emplace(t + j.attempt_restart + j.remaining_s, i, j.attempt);
  if (c_.policy == Policy::kQuota) AddRunningEntry(i, t);
  // The production library never places more than the capacity; a violation is a bug there or
  // here, never a property of the input.
  assert(used_ <= c_.gpus);
  r_.decisions.push_back({t, i, Decision::kStart});
}

void Engine::Preempt(uint32_t i, int64_t t) {
  JobState& j = jobs_[i];
  JobResult& res = r_.jobs[i];
  const int64_t ran = t - j.attempt_start;
  const int64_t restart = std::min(ran, j.attempt_restart);
  const int64_t work = ran - restart;
  const int64_t saved = c_.checkpoint_interval_s > 0 ? work / c_.checkpoint_interval_s * c_.checkpoint_interval_s : 0;
  j.remaining_s -= saved;
  res.held_s += ran;
  res.restart_s += restart;
  res.lost_work_s += work - saved;
  ++res.preemptions;
  r_.decisions.push_back({t, i, Decision::kPreempt});
  Complete(i, t);  // gives the capacity back
  res.end_s = -1;
  MakeRunnable(i);
}

void Engine::Complete(uint32_t i, int64_t t) {
  JobState& j = jobs_[i];
  j.running = false;
  ++j.attempt;  // its pending completion event, if any, is stale now
  uint32_t last = running_.back();
  running_[j.running_pos] = last;
  jobs_[last].running_pos = j.running_pos;
  running_.pop_back();
  if (c_.policy == Policy::kQuota) {
    auto& entries = quota_snap_.running;
    if (j.running_pos + 1 != entries.size()) entries[j.running_pos] = std::move(entries.back());
    entries.pop_back();
  }
  used_ -= j.gpus;
  share_held_[static_cast<size_t>(j.share)] -= j.gpus;
  team_held_[static_cast<size_t>(j.team)] -= static_cast<int32_t>(j.gpus);
  TeamChanged(j.team);
  r_.jobs[i].end_s = t;
}

void Engine::AddRunningEntry(uint32_t i, int64_t t) {
  const JobState& j = jobs_[i];
  sched::QuotaRunningJob& rj = quota_snap_.running.emplace_back();
  rj.seq = i + uint64_t{1};
  rj.share = j.share;
  rj.instance_type = kType;
  rj.instance_count = j.gpus;
  rj.priority = j.priority;
  rj.start_order = j.start_order;
  rj.preempting = false;
  rj.preemptible = c_.min_runtime_s <= 0;
  rj.end_ms = c_.exact_runtime ? Ms(t + j.attempt_restart + j.remaining_s) : 0;
  rj.started_ms = Ms(t);
  rj.last_checkpoint_ms = 0;
  if (!rj.preemptible) dues_.emplace(t + c_.min_runtime_s, i, j.attempt, kMayBePreempted);
  if (c_.checkpoint_interval_s > 0) dues_.emplace(t + j.attempt_restart + c_.checkpoint_interval_s, i, j.attempt, kCheckpointed);
}

void Engine::AgeRunningEntries(int64_t t) {
  while (!dues_.empty() && std::get<0>(dues_.top()) <= t) {
    const auto [due, i, attempt, what] = dues_.top();
    dues_.pop();
    const JobState& j = jobs_[i];
    if (!j.running || j.attempt != attempt) continue;  // that attempt has ended
    sched::QuotaRunningJob& rj = quota_snap_.running[j.running_pos];
    if (what == kMayBePreempted) {
      rj.preemptible = true;
    } else {
      const int64_t cp = LastCheckpoint(j, t);
      rj.last_checkpoint_ms = Ms(cp);
      dues_.emplace(cp + c_.checkpoint_interval_s, i, attempt, kCheckpointed);
    }
  }
}

void Engine::FirstRunnable(size_t s, size_t n, std::vector<uint32_t>& out) const {
  // A k-way merge over the share's classes, in (priority descending, submit order).
  using Head = std::tuple<int, uint32_t, Class::const_iterator, Class::const_iterator>;
  auto later = [](const Head& a, const Head& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) > std::tie(std::get<0>(b), std::get<1>(b));
  };
  std::priority_queue<Head, std::vector<Head>, decltype(later)> heads(later);
  for (const auto& [key, set] : runnable_[s])
    if (!set.empty()) heads.emplace(key.first, *set.begin(), set.begin(), set.end());
  while (out.size() < n && !heads.empty()) {
    auto [p, idx, it, end] = heads.top();
    heads.pop();
    out.push_back(idx);
    if (++it != end) heads.emplace(p, *it, it, end);
  }
}

bool Engine::SchedulePass(int64_t t) {
  const int64_t free = c_.gpus - used_;
  if (free <= 0) return false;  // nothing can start: the pass would only explain waits
  ++r_.passes;
  sched::Snapshot snap;
  snap.now_ms = Ms(t);
  snap.environments.push_back({"sim", true, c_.gpus, used_});
  snap.host.push_back({kType, c_.gpus, free});
  if (c_.exact_runtime)
    for (uint32_t i : running_) {
      const JobState& j = jobs_[i];
      snap.running.push_back({0, kType, j.gpus, Ms(j.attempt_start + j.attempt_restart + j.remaining_s)});
    }
  auto job = [&](uint32_t i) {
    const JobState& j = jobs_[i];
    const int64_t bound = (j.remaining_s + (r_.jobs[i].preemptions > 0 ? c_.restart_cost_s : 0)) * 1000;
    return sched::Job{i + uint64_t{1}, kType, j.gpus, c_.exact_runtime ? std::max<int64_t>(bound, 1) : 0};
  };
  // As the controller: FIFO starts at most `free` jobs; a margin lets it skip misconfigured ones.
  const size_t prefix = static_cast<size_t>(free) + 64;
  sched::Queue q;
  q.name = "sim";
  q.environments = {0};
  std::vector<uint32_t> ids;
  if (c_.policy == Policy::kFifo) {
    FirstRunnable(0, prefix, ids);
    for (uint32_t i : ids) q.runnable.push_back(job(i));
    q.truncated = static_cast<int64_t>(ids.size()) < runnable_count_[0];
  } else {
    sched::FairShare fs;
    fs.compute_reservation = c_.compute_reservation;
    fs.decay_seconds = c_.decay_seconds;
    auto weight = [&](size_t s) { return share_specs_[s] ? share_specs_[s]->weight_factor : 1.0; };
    for (size_t s = 0; s < share_names_.size(); ++s) {
      if (runnable_count_[s] == 0) continue;
      sched::Share sh{share_names_[s], weight(s), share_usage_[s], share_held_[s], {}};
      ids.clear();
      FirstRunnable(s, prefix, ids);
      for (uint32_t i : ids) sh.runnable.push_back(job(i));
      fs.shares.push_back(std::move(sh));
    }
    // Shares that hold capacity but wait for nothing still count as active.
    for (size_t s = 0; s < share_names_.size(); ++s)
      if (runnable_count_[s] == 0 && share_held_[s] > 0)
        fs.shares.push_back({share_names_[s], weight(s), share_usage_[s], share_held_[s], {}});
    q.fair_share = std::move(fs);
  }
  snap.queues.push_back(std::move(q));
  const sched::Decisions d = sched::Schedule(snap);
  for (const auto& s : d.starts) Start(static_cast<uint32_t>(s.job_seq - 1), t);
  return !d.starts.empty();
}

bool Engine::QuotaPass(int64_t t) {
  ++r_.passes;
  const int64_t free = c_.gpus - used_;
  // The snapshot's buffers are kept between passes (a pass allocates little of its own).
  sched::QuotaSnapshot& snap = quota_snap_;
  if (snap.shares.empty()) {
    snap.capacity[kType] = c_.gpus;
    snap.ceiling[kType] = c_.gpus;
    for (size_t s = 0; s < share_names_.size(); ++s) {
      const ShareSpec& spec = *share_specs_[s];
      sched::QuotaShareSpec q;
      q.name = spec.name;
      q.limit[kType] = spec.gpus;
      q.strategy = spec.strategy == Strategy::kReserve ? sched::SharingStrategy::kReserve
                   : spec.strategy == Strategy::kLend  ? sched::SharingStrategy::kLend
                                                       : sched::SharingStrategy::kLendAndBorrow;
      q.borrow_limit_percent = spec.borrow_limit_percent;
      q.in_share_preemption = spec.in_share_preemption;
      snap.shares.push_back(std::move(q));
    }
  }
  snap.now_ms = Ms(t);
  for (size_t s = 0; s < share_names_.size(); ++s) {
    const ShareSpec& spec = *share_specs_[s];
    sched::QuotaShareSpec& q = snap.shares[s];
    q.runnable.clear();
    // A job of a class starts or preempts only inside the share's remaining quota, on idle
    // capacity, or (in-share preemption) on what its own share holds; the jobs of a class behind
    // that many (plus a margin, for capacity that victims leave over) fare as the ones before
    // them, and are offered in a later pass, as the controller's FIFO prefix does. The property
    // test checks that this changes no decision (SimTest.OfferLimitsChangeNoDecision).
    const int64_t room = std::max<int64_t>(0, spec.gpus - share_held_[s]) + free +
                         (spec.in_share_preemption ? share_held_[s] : 0);
    // The class says the job's priority and size: the jobs' own state is not read.
    for (const auto& [key, set] : runnable_[s]) {
      int64_t n = c_.exhaustive ? INT64_MAX : room / key.second + kOfferMargin;
      for (auto it = set.begin(); it != set.end() && n > 0; ++it, --n)
        q.runnable.push_back({*it + uint64_t{1}, kType, key.second, -key.first, 0, false});
    }
  }
  // The jobs promised capacity by the last pass are offered whatever their place in their class.
  for (uint32_t i : nominated_) {
    const JobState& j = jobs_[i];
    if (j.running) continue;
    auto& runnable = snap.shares[static_cast<size_t>(j.share)].runnable;
    auto it = std::find_if(runnable.begin(), runnable.end(), [&](const sched::QuotaJob& q) { return q.seq == i + uint64_t{1}; });
    if (it != runnable.end()) {
      it->nominated = true;
    } else {
      runnable.push_back({i + uint64_t{1}, kType, j.gpus, j.priority, 0, true});
    }
  }
  AgeRunningEntries(t);
  // A runtime bound for the estimates when the runtime is known.
  if (c_.exact_runtime)
    for (auto& sh : snap.shares)
      for (auto& qj : sh.runnable) {
        const uint32_t i = static_cast<uint32_t>(qj.seq - 1);
        qj.max_runtime_ms = (jobs_[i].remaining_s + (r_.jobs[i].preemptions > 0 ? c_.restart_cost_s : 0)) * 1000 + 1;
      }
  const sched::QuotaDecisions d = sched::ScheduleQuotaShares(snap);
  nominated_.clear();
  for (uint64_t seq : d.promised) nominated_.insert(static_cast<uint32_t>(seq - 1));
  // Victims leave first (their capacity is what the promised jobs wait for), then starts.
  for (const auto& p : d.preemptions) {
    const uint32_t i = static_cast<uint32_t>(p.victim_seq - 1);
    if (jobs_[i].running) Preempt(i, t);
  }
  for (const auto& s : d.starts) Start(static_cast<uint32_t>(s.job_seq - 1), t);
  return !d.preemptions.empty();
}

// After the last pass nothing could start or preempt (a chain of passes ends with one that did not
// preempt, and no GPU is free or it would have been given). When the only news since is jobs
// submitted to shares already at their quota, a pass would decide nothing again: such a job
// cannot reclaim (it is not inside its quota), borrow (nothing is idle) or preempt in-share.
bool Engine::QuotaPassIsMoot() const {
  if (c_.exhaustive || completed_in_batch_ || used_ < c_.gpus || !nominated_.empty() || c_.min_runtime_s > 0) return false;
  for (uint32_t i : submitted_in_batch_) {
    const JobState& j = jobs_[i];
    const ShareSpec& spec = *share_specs_[static_cast<size_t>(j.share)];
    if (spec.in_share_preemption || share_held_[static_cast<size_t>(j.share)] + j.gpus <= spec.gpus) return false;
  }
  return true;
}

void Engine::Passes(int64_t t) {
  int64_t waiting = 0;
  for (int64_t n : runnable_count_) waiting += n;
  if (waiting == 0) return;  // nothing to decide (preemption is always for a waiting job)
  if (c_.policy == Policy::kQuota && QuotaPassIsMoot()) return;
  for (int k = 0; k < kMaxPassesPerInstant; ++k) {
    if (c_.policy == Policy::kQuota) {
      if (!QuotaPass(t)) return;
    } else {
      SchedulePass(t);
      return;
    }
  }
}

Result Engine::Run() {
  // Teams and shares, in name order.
  std::set<std::string> teams, shares;
  for (const auto& j : trace_) teams.insert(j.team);
  r_.teams.assign(teams.begin(), teams.end());
  if (c_.policy == Policy::kQuota) {
    for (const auto& [name, s] : c_.shares) shares.insert(name);
  } else {
    for (const auto& team : teams) shares.insert(c_.TeamOf(team).share);
  }
  share_names_.assign(shares.begin(), shares.end());
  for (const auto& name : share_names_) {
    auto it = c_.shares.find(name);
    share_specs_.push_back(it == c_.shares.end() ? nullptr : &it->second);
  }
  const size_t ns = share_names_.size(), nt = r_.teams.size();
  runnable_.resize(ns);
  runnable_count_.assign(ns, 0);
  share_held_.assign(ns, 0);
  share_usage_.assign(ns, 0.0);
  team_held_.assign(nt, 0);
  team_demand_.assign(nt, 0);
  team_changed_.assign(nt, false);
  std::map<std::string, int> team_index;
  for (size_t k = 0; k < nt; ++k) team_index[r_.teams[k]] = static_cast<int>(k);
  std::map<std::string, int> share_index;
  for (size_t k = 0; k < ns; ++k) share_index[share_names_[k]] = static_cast<int>(k);

  jobs_.resize(trace_.size());
  r_.jobs.resize(trace_.size());
  r_.team_of_job.resize(trace_.size());
  std::map<std::string, TeamSpec> spec_of_team;
  for (const auto& team : teams) spec_of_team[team] = c_.TeamOf(team);
  for (size_t i = 0; i < trace_.size(); ++i) {
    const TraceJob& tj = trace_[i];
    JobState& j = jobs_[i];
    const TeamSpec& ts = spec_of_team[tj.team];
    j.team = team_index[tj.team];
    j.share = share_index[ts.share];
    j.priority = c_.policy == Policy::kFifo ? 0 : tj.priority >= 0 ? tj.priority : ts.priority;
    j.gpus = tj.gpus;
    j.remaining_s = tj.duration_s;
    r_.team_of_job[i] = j.team;
  }

  size_t next = 0;
  int64_t last_t = trace_.empty() ? 0 : trace_.front().submit_s;
  while (next < trace_.size() || !ends_.empty()) {
    int64_t t = next < trace_.size() ? trace_[next].submit_s : INT64_MAX;
    if (!ends_.empty()) t = std::min(t, std::get<0>(ends_.top()));
    if (c_.policy == Policy::kFairShare)
      for (size_t s = 0; s < ns; ++s)
        share_usage_[s] = sched::DecayedUsage(share_usage_[s], share_held_[s], (t - last_t) * 1000, c_.decay_seconds);
    last_t = t;
    completed_in_batch_ = false;
    submitted_in_batch_.clear();
    while (!ends_.empty() && std::get<0>(ends_.top()) == t) {
      auto [end, i, attempt] = ends_.top();
      ends_.pop();
      if (jobs_[i].attempt != attempt || !jobs_[i].running) continue;
      JobResult& res = r_.jobs[i];
      res.held_s += t - jobs_[i].attempt_start;
      res.restart_s += jobs_[i].attempt_restart;
      jobs_[i].remaining_s = 0;
      Complete(i, t);
      r_.decisions.push_back({t, i, Decision::kEnd});
      completed_in_batch_ = true;
      team_demand_[static_cast<size_t>(jobs_[i].team)] -= static_cast<int32_t>(jobs_[i].gpus);
      TeamChanged(jobs_[i].team);
    }
    while (next < trace_.size() && trace_[next].submit_s == t) {
      MakeRunnable(static_cast<uint32_t>(next));
      submitted_in_batch_.push_back(static_cast<uint32_t>(next));
      team_demand_[static_cast<size_t>(jobs_[next].team)] += static_cast<int32_t>(jobs_[next].gpus);
      TeamChanged(jobs_[next].team);
      ++next;
    }
    Passes(t);
    r_.timeline.Begin(t, used_);
    for (int team : changed_teams_) {
      r_.timeline.Change(team, team_held_[static_cast<size_t>(team)], team_demand_[static_cast<size_t>(team)]);
      team_changed_[static_cast<size_t>(team)] = false;
    }
    changed_teams_.clear();
  }
  return std::move(r_);
}

}  // namespace

Result Simulate(const ClusterSpec& cluster, const std::vector<TraceJob>& trace) {
  return Engine(cluster, trace).Run();
}

std::vector<std::vector<std::pair<int64_t, int64_t>>> HeldSpans(const Result& result) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> spans(result.jobs.size());
  for (const Decision& d : result.decisions) {
    auto& job = spans[d.job];
    if (d.kind == Decision::kStart) {
      job.emplace_back(d.t_s, d.t_s);
    } else {
      // A preemption or an end closes the attempt its start opened.
      assert(!job.empty());
      job.back().second = d.t_s;
    }
  }
  return spans;
}

}  // namespace ty::sim
