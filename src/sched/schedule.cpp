#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <queue>

#include "sched/sched.h"

namespace ty::sched {

namespace {

struct HostIndex {
  std::map<std::string, HostCapacity> by_type;
  HostCapacity* Find(const std::string& t) {
    auto it = by_type.find(t);
    return it == by_type.end() ? nullptr : &it->second;
  }
};

// A job fits an environment when the environment can hold it at all and the host offers enough
// instances of its type in total.
bool CanEverFit(const Job& job, const Environment& env, HostIndex& host) {
  if (job.instance_count > env.max_instances) return false;
  auto fits_host = [&](const std::string& type) {
    const HostCapacity* h = host.Find(type);
    return h && job.instance_count <= h->total;
  };
  return fits_host(job.instance_type) || std::any_of(job.rungs.begin(), job.rungs.end(), fits_host);
}

std::string CapacityText(const Job& job, const std::vector<Environment>& envs, const Queue& q,
                         HostIndex& host) {
  std::string out = "waiting for capacity:";
  for (int e : q.environments) {
    const Environment& env = envs[e];
    out += " service environment '" + env.name + "' has " + std::to_string(env.max_instances - env.in_use) +
           " of " + std::to_string(env.max_instances) + " instances free;";
  }
  const HostCapacity* h = host.Find(job.instance_type);
  out += " host has " + std::to_string(h ? h->free : 0) + " free " + job.instance_type + "; job needs " +
         std::to_string(job.instance_count);
  return out;
}

}  // namespace

double DecayedUsage(double usage, int64_t held, int64_t dt_ms, int64_t decay_seconds) {
  double tau = static_cast<double>(decay_seconds > 0 ? decay_seconds : 600);
  double dt = static_cast<double>(std::max<int64_t>(0, dt_ms)) / 1000.0;
  double keep = std::exp(-dt / tau);
  return usage * keep + static_cast<double>(held) * tau * (1.0 - keep);
}

// How much a fair share's past usage weighs against what it holds now (see FairShareQueue).
constexpr double kHistoryWeight = 4.0;

double ShareOrderKey(double decayed_usage, int64_t held, double candidate, double weight_factor,
                     int64_t decay_seconds) {
  const double tau = static_cast<double>(decay_seconds > 0 ? decay_seconds : 600);
  return (kHistoryWeight * decayed_usage / tau + static_cast<double>(held) + candidate) * weight_factor;
}

namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

std::string InSeconds(int64_t at, int64_t now) {
  if (at == kNever) return "at a time not yet known";
  return "in about " + std::to_string(std::max<int64_t>(0, (at - now + 999) / 1000)) + " s";
}

// Capacity held back for a blocked head job: jobs that touch its environment or instance type
// may start only if their runtime bound ends before `at`, or if they fit in what is left over
// at `at` once the head has started (EASY backfill).
struct Hold {
  uint64_t job_seq;
  int env;
  std::string type;
  int64_t at;
  int64_t extra_env;
  int64_t extra_host;
};

struct QueueContext {
  const Queue& q;
  int64_t reserve = 0;            // compute reservation of a fair-share queue
  int64_t misconfigured_reason = -1;
  // Waiting jobs in dispatch order with the index of their wait, for the snapshot.
  std::vector<std::pair<const Job*, size_t>> front;
  void Front(const Job& job, const Decisions& d) {
    if (front.size() < kEstimatedPerQueue) front.emplace_back(&job, d.waits.size() - 1);
  }
};

// One pass: places jobs queue by queue on the shared environments and host.
class Pass {
 public:
  Pass(const Snapshot& snap, Decisions& d) : snap_(snap), d_(d), envs_(snap.environments) {
    for (const auto& h : snap.host) host_.by_type[h.instance_type] = h;
  }

  enum class Outcome { kStarted, kBlocked, kHeld, kNever };

  void Run();

 private:
  int64_t EndOf(const Job& job) const {
    return job.max_runtime_ms > 0 ? snap_.now_ms + job.max_runtime_ms : kNever;
  }

  bool Fits(const Job& job, const std::string& type, int e, const QueueContext& qc) {
    const Environment& env = envs_[e];
    HostCapacity* h = host_.Find(type);
    return env.enabled && env.in_use + job.instance_count <= env.max_instances - qc.reserve && h &&
           h->free >= job.instance_count;
  }

  // Whether starting `job` on host capacity `type` in environment `e` now leaves every hold
  // intact.
  bool Respects(const Job& job, const std::string& type, int e, int64_t end) const {
    for (const Hold& h : holds_) {
      bool env = h.env == e, held_type = h.type == type;
      if (!env && !held_type) continue;
      if (h.at != kNever && end <= h.at) continue;  // done before the head can start
      if ((env && job.instance_count > h.extra_env) || (held_type && job.instance_count > h.extra_host)) return false;
    }
    return true;
  }

  void Consume(const Job& job, const std::string& type, int e, int64_t end) {
    for (Hold& h : holds_) {
      if (h.at != kNever && end <= h.at) continue;
      if (h.env == e) h.extra_env -= job.instance_count;
      if (h.type == type) h.extra_host -= job.instance_count;
    }
  }

  bool CapacityLeft(const QueueContext& qc) const {
    for (int e : qc.q.environments)
      if (envs_[e].enabled && envs_[e].in_use < envs_[e].max_instances - qc.reserve) return true;
    return false;
  }

  // A job held back until its not_before_ms waits aside, like a misconfigured one: it is not
  // the head and reserves nothing. Returns true when it is held.
  bool HeldBack(const Job& job, QueueContext& qc) {
    if (job.not_before_ms <= snap_.now_ms) return false;
    d_.waits.push_back({job.seq, WaitKind::kNotBefore,
                        d_.AddReason("held back until " + std::to_string(job.not_before_ms) + " (epoch ms), " +
                                     InSeconds(job.not_before_ms, snap_.now_ms))});
    qc.Front(job, d_);
    return true;
  }

  Outcome Try(const Job& job, QueueContext& qc) {
    const Queue& q = qc.q;
    if (HeldBack(job, qc)) return Outcome::kNever;
    bool ever = std::any_of(q.environments.begin(), q.environments.end(),
                            [&](int e) { return CanEverFit(job, envs_[e], host_); });
    if (!ever) {
      // Such a job would block the queue forever; it waits aside with its reason, and the jobs
      // behind it go on (see docs/design/decisions.md).
      if (qc.misconfigured_reason < 0) qc.misconfigured_reason = d_.AddReason(kMaxResourceReason);
      d_.waits.push_back({job.seq, WaitKind::kMisconfiguration, static_cast<uint32_t>(qc.misconfigured_reason)});
      qc.Front(job, d_);
      return Outcome::kNever;
    }
    int64_t end = EndOf(job);
    bool fits_now = false;
    // A ladder job tries its rungs in order of preference in each environment: the environment
    // order decides where it runs, the rung order what on.
    const size_t rungs = std::max<size_t>(1, job.rungs.size());
    for (int e : q.environments) {
      for (size_t r = 0; r < rungs; ++r) {
        const std::string& type = job.rungs.empty() ? job.instance_type : job.rungs[r];
        if (!Fits(job, type, e, qc)) continue;
        fits_now = true;
        if (!Respects(job, type, e, end)) continue;
        Consume(job, type, e, end);
        envs_[e].in_use += job.instance_count;
        host_.Find(type)->free -= job.instance_count;
        d_.starts.push_back({job.seq, e, job.rungs.empty() ? -1 : static_cast<int>(r)});
        started_.push_back({e, type, job.instance_count, end == kNever ? 0 : end});
        return Outcome::kStarted;
      }
    }
    return fits_now ? Outcome::kHeld : Outcome::kBlocked;
  }

  // The head of a queue could not start. Reserves capacity for it at the earliest time the
  // runtime bounds of running jobs free enough, unless an earlier queue already holds that
  // environment or type. Returns the reason the head waits; *about is the job it names, if any.
  std::string Reserve(const Job& head, Outcome o, QueueContext& qc, std::optional<uint64_t>* about) {
    if (o == Outcome::kHeld) {
      const Hold* by = nullptr;
      for (const Hold& h : holds_)
        if (!by && (h.type == head.instance_type || std::count(qc.q.environments.begin(), qc.q.environments.end(), h.env)))
          by = &h;
      if (by) *about = by->job_seq;
      return "waiting: the free capacity is reserved for job " + std::string(by ? Decisions::kJobMark : "(unknown)") +
             ", expected to start " + InSeconds(by ? by->at : kNever, snap_.now_ms);
    }
    std::string why = CapacityText(head, envs_, qc.q, host_);
    if (qc.reserve > 0) why += "; " + std::to_string(qc.reserve) + " instances are reserved for shares not active yet";
    if (!qc.q.backfill) return why;
    for (const Hold& h : holds_)
      if (h.type == head.instance_type) return why;
    Hold best{head.seq, -1, head.instance_type, kNever, 0, 0};
    for (int e : qc.q.environments) {
      const Environment& env = envs_[e];
      if (!env.enabled || !CanEverFit(head, env, host_) || !host_.Find(head.instance_type)) continue;
      if (std::any_of(holds_.begin(), holds_.end(), [&](const Hold& h) { return h.env == e; })) continue;
      if (best.env < 0) best.env = e;
      std::vector<const Running*> releases;
      for (const std::vector<Running>* list : {&snap_.running, static_cast<const std::vector<Running>*>(&started_)})
        for (const Running& r : *list)
          if (r.end_ms > 0 && (r.environment == e || r.instance_type == head.instance_type)) releases.push_back(&r);
      std::sort(releases.begin(), releases.end(), [](const Running* a, const Running* b) { return a->end_ms < b->end_ms; });
      int64_t env_free = env.max_instances - qc.reserve - env.in_use;
      int64_t host_free = host_.Find(head.instance_type)->free;
      for (size_t i = 0; i < releases.size(); ++i) {
        const Running& r = *releases[i];
        if (r.environment == e) env_free += r.instance_count;
        if (r.instance_type == head.instance_type) host_free += r.instance_count;
        bool last_at_this_time = i + 1 == releases.size() || releases[i + 1]->end_ms != r.end_ms;
        if (last_at_this_time && env_free >= head.instance_count && host_free >= head.instance_count) {
          if (r.end_ms < best.at) best = {head.seq, e, head.instance_type, r.end_ms, env_free - head.instance_count,
                                          host_free - head.instance_count};
          break;
        }
      }
    }
    if (best.env < 0) return why;
    holds_.push_back(best);
    d_.reservations.push_back({head.seq, best.env, head.instance_type, best.at});
    return why + "; capacity is reserved for it, expected " + InSeconds(best.at, snap_.now_ms);
  }

  uint32_t BehindReason(const Job& head, const QueueContext& qc, const std::string* share) {
    std::string text = share ? "waiting: share '" + *share + "' goes first, with job " + Decisions::kJobMark
                             : std::string("queued behind job ") + Decisions::kJobMark;
    if (qc.q.backfill) text += "; a job starts ahead of it only when it cannot delay it";
    return d_.AddReason(std::move(text), head.seq);
  }

  // Offers one job that waits behind the head: with backfill it may start now.
  void Behind(const Job& job, QueueContext& qc, uint32_t behind) {
    if (HeldBack(job, qc)) return;
    if (qc.q.backfill && CapacityLeft(qc)) {
      Outcome o = Try(job, qc);
      if (o == Outcome::kStarted || o == Outcome::kNever) return;
    }
    d_.waits.push_back({job.seq, WaitKind::kBehind, behind});
    qc.Front(job, d_);
  }

  // The head could not start: records its wait and returns the reason the jobs behind it get.
  uint32_t Head(const Job& job, Outcome o, QueueContext& qc, const std::string* share = nullptr) {
    std::optional<uint64_t> about;
    std::string why = Reserve(job, o, qc, &about);
    d_.waits.push_back({job.seq, o == Outcome::kHeld ? WaitKind::kReserved : WaitKind::kCapacity,
                        d_.AddReason(std::move(why), about)});
    qc.Front(job, d_);
    return BehindReason(job, qc, share);
  }

  void FifoQueue(QueueContext& qc);
  void FairShareQueue(QueueContext& qc);
  void Estimate(const QueueContext& qc);

  const Snapshot& snap_;
  Decisions& d_;
  std::vector<Environment> envs_;  // in_use grows as jobs are placed
  HostIndex host_;
  std::vector<Running> started_;   // this pass's starts, as future releases
  std::vector<Hold> holds_;
  std::vector<const Running*> releases_;  // every bounded release, by end (built for estimates)
};

void Pass::FifoQueue(QueueContext& qc) {
  const Job* head = nullptr;
  uint32_t behind = 0;
  for (const Job& job : qc.q.runnable) {
    if (head) {
      Behind(job, qc, behind);
      continue;
    }
    Outcome o = Try(job, qc);
    if (o == Outcome::kBlocked || o == Outcome::kHeld) {
      head = &job;
      behind = Head(job, o, qc);
    }
  }
}

// How many waiting jobs behind a blocked fair-share queue are offered in dispatch order (the
// snapshot shows the first 100 of a queue).
constexpr size_t kOrderedBehind = 128;

void Pass::FairShareQueue(QueueContext& qc) {
  const std::vector<Share>& shares = qc.q.fair_share->shares;
  std::vector<int64_t> held(shares.size());  // grows as jobs are placed
  for (size_t i = 0; i < shares.size(); ++i) held[i] = shares[i].held;
  std::vector<size_t> next(shares.size(), 0);
  // The order key of a share, lower goes first: (4 x usage / tau + held + n / 2) x weightFactor.
  // usage / tau is what the share held on average over the decay window, in instances, and
  // weighs 4 times what it holds now (including jobs placed in this pass), so a pass splits
  // freed capacity by weight instead of handing it all to one share, and the history still
  // evens out the rounding over time. The candidate job counts for half its size (the
  // Sainte-Lague rule), so that neither a light nor a heavy weight gains from rounding.
  // Tuned by the 3:1 convergence property tests (sched_property_test.cpp); see
  // docs/scheduling.md.
  auto key = [&](size_t i) {
    const double n = static_cast<double>(shares[i].runnable[next[i]].instance_count);
    return ShareOrderKey(shares[i].decayed_usage, held[i], 0.5 * n, shares[i].weight_factor,
                         qc.q.fair_share->decay_seconds);
  };
  const Job* head = nullptr;
  uint32_t behind = 0;
  size_t ordered_behind = 0;
  while (true) {
    // The runnable share with the lowest key; ties: lower weight, then the
    // earlier-submitted head job.
    int best = -1;
    for (size_t i = 0; i < shares.size(); ++i) {
      if (next[i] >= shares[i].runnable.size()) continue;
      if (best < 0) {
        best = static_cast<int>(i);
        continue;
      }
      const Share& a = shares[i];
      const Share& b = shares[static_cast<size_t>(best)];
      double ka = key(i), kb = key(static_cast<size_t>(best));
      if (ka != kb ? ka < kb
                   : a.weight_factor != b.weight_factor ? a.weight_factor < b.weight_factor
                                                        : a.runnable[next[i]].seq < b.runnable[next[static_cast<size_t>(best)]].seq)
        best = static_cast<int>(i);
    }
    if (best < 0) break;
    size_t bi = static_cast<size_t>(best);
    const Job& job = shares[bi].runnable[next[bi]++];
    if (head) {
      size_t before = d_.starts.size();
      Behind(job, qc, behind);
      if (d_.starts.size() > before) held[bi] += job.instance_count;
      if (++ordered_behind < kOrderedBehind) continue;
      // Past the front of the queue the order of waiting jobs no longer matters: offer the rest
      // share by share instead of choosing among all shares for each one.
      for (size_t i = 0; i < shares.size(); ++i)
        for (; next[i] < shares[i].runnable.size(); ++next[i]) Behind(shares[i].runnable[next[i]], qc, behind);
      break;
    }
    Outcome o = Try(job, qc);
    if (o == Outcome::kStarted) held[bi] += job.instance_count;
    if (o == Outcome::kBlocked || o == Outcome::kHeld) {
      head = &job;
      behind = Head(job, o, qc, &shares[bi].identifier);
    }
  }
}

// Starts the queue's first waiting jobs in dispatch order on a simulated timeline where running
// jobs end at their runtime bounds; each job's estimate is when it first fits.
void Pass::Estimate(const QueueContext& qc) {
  QueueFront& out = d_.fronts.emplace_back(QueueFront{qc.q.name, {}});
  for (const auto& [job, wait] : qc.front) out.jobs.push_back({job->seq, wait, 0});
  if (qc.front.empty()) return;
  if (releases_.empty()) {
    for (const std::vector<Running>* list : {&snap_.running, static_cast<const std::vector<Running>*>(&started_)})
      for (const Running& r : *list)
        if (r.end_ms > 0) releases_.push_back(&r);
    std::sort(releases_.begin(), releases_.end(), [](const Running* a, const Running* b) { return a->end_ms < b->end_ms; });
  }
  std::vector<int64_t> env_free(envs_.size());
  for (size_t e = 0; e < envs_.size(); ++e) env_free[e] = envs_[e].max_instances - qc.reserve - envs_[e].in_use;
  std::map<std::string, int64_t> host_free;
  for (const auto& [type, h] : host_.by_type) host_free[type] = h.free;
  // Jobs started on the simulated timeline, as releases: (end, index into `front`).
  std::priority_queue<std::pair<int64_t, size_t>, std::vector<std::pair<int64_t, size_t>>, std::greater<>> mine;
  std::vector<int> placed_env(qc.front.size(), -1);
  auto release = [&](int env, const std::string& type, int64_t n) {
    if (env >= 0) env_free[static_cast<size_t>(env)] += n;
    host_free[type] += n;
  };
  size_t p = 0;
  int64_t now = snap_.now_ms;
  for (size_t k = 0; k < qc.front.size(); ++k) {
    const Job& job = *qc.front[k].first;
    const WaitKind kind = d_.waits[qc.front[k].second].kind;
    if (kind == WaitKind::kMisconfiguration || kind == WaitKind::kNotBefore) continue;
    while (true) {
      int at = -1;
      for (int e : qc.q.environments)
        if (envs_[e].enabled && env_free[static_cast<size_t>(e)] >= job.instance_count &&
            host_free[job.instance_type] >= job.instance_count) {
          at = e;
          break;
        }
      if (at >= 0) {
        out.jobs[k].estimated_start_ms = now;
        env_free[static_cast<size_t>(at)] -= job.instance_count;
        host_free[job.instance_type] -= job.instance_count;
        placed_env[k] = at;
        if (job.max_runtime_ms > 0) mine.push({now + job.max_runtime_ms, k});
        break;
      }
      int64_t a = p < releases_.size() ? releases_[p]->end_ms : kNever;
      int64_t b = mine.empty() ? kNever : mine.top().first;
      if (a == kNever && b == kNever) {
        return;  // the rest stay unknown
      }
      if (a <= b) {
        const Running& r = *releases_[p++];
        release(r.environment, r.instance_type, r.instance_count);
        now = std::max(now, a);
      } else {
        size_t j = mine.top().second;
        mine.pop();
        release(placed_env[j], qc.front[j].first->instance_type, qc.front[j].first->instance_count);
        now = std::max(now, b);
      }
    }
  }
}

void Pass::Run() {
  std::vector<size_t> order(snap_.queues.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Queue& qa = snap_.queues[a];
    const Queue& qb = snap_.queues[b];
    if (qa.priority != qb.priority) return qa.priority > qb.priority;
    return qa.seq < qb.seq;
  });

  std::vector<QueueContext> contexts;
  contexts.reserve(order.size());
  for (size_t qi : order) {
    const Queue& q = snap_.queues[qi];
    bool any_env_enabled = std::any_of(q.environments.begin(), q.environments.end(),
                                       [&](int e) { return envs_[e].enabled; });
    if (!q.enabled || !any_env_enabled) {
      uint32_t why = d_.AddReason(!q.enabled ? "job queue '" + q.name + "' is disabled"
                                             : "every service environment of job queue '" + q.name + "' is disabled");
      auto park = [&](const std::vector<Job>& jobs) {
        for (const Job& job : jobs) d_.waits.push_back({job.seq, WaitKind::kQueueDisabled, why});
      };
      park(q.runnable);
      if (q.fair_share)
        for (const auto& sh : q.fair_share->shares) park(sh.runnable);
      continue;
    }
    QueueContext& qc = contexts.emplace_back(QueueContext{q, 0, -1, {}});
    if (q.fair_share && q.fair_share->compute_reservation > 0) {
      // (r/100)^activeShares of the capacity is held back for shares that are not active yet.
      int active = 0;
      for (const auto& sh : q.fair_share->shares)
        if (sh.held > 0 || !sh.runnable.empty()) ++active;
      int64_t max = 0;
      for (int e : q.environments) max = std::max(max, envs_[e].max_instances);
      qc.reserve = static_cast<int64_t>(
          std::floor(static_cast<double>(max) * std::pow(q.fair_share->compute_reservation / 100.0, active)));
    }
    if (q.fair_share) {
      FairShareQueue(qc);
    } else {
      FifoQueue(qc);
    }
  }
  for (const QueueContext& qc : contexts) Estimate(qc);
}

}  // namespace

Decisions Schedule(const Snapshot& snap) {
  Decisions d;
  Pass(snap, d).Run();
  return d;
}

}  // namespace ty::sched
