#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

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
  const HostCapacity* h = host.Find(job.instance_type);
  return job.instance_count <= env.max_instances && h && job.instance_count <= h->total;
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

namespace {

// Places jobs of one queue on its environments; shared by FIFO and fair-share order.
class Placer {
 public:
  Placer(std::vector<Environment>& envs, HostIndex& host, const Queue& q, Decisions& d, int64_t reserve)
      : envs_(envs), host_(host), q_(q), d_(d), reserve_(reserve) {}

  enum class Outcome { kStarted, kBlocked, kNever };

  Outcome Try(const Job& job) {
    bool ever = std::any_of(q_.environments.begin(), q_.environments.end(),
                            [&](int e) { return CanEverFit(job, envs_[e], host_); });
    if (!ever) {
      // Such a job would block the queue forever; it waits aside with its reason, and the jobs
      // behind it go on (see docs/design/decisions.md).
      if (misconfigured_reason_ < 0) misconfigured_reason_ = d_.AddReason(kMaxResourceReason);
      d_.waits.push_back({job.seq, WaitKind::kMisconfiguration, static_cast<uint32_t>(misconfigured_reason_)});
      return Outcome::kNever;
    }
    for (int e : q_.environments) {
      Environment& env = envs_[e];
      HostCapacity* h = host_.Find(job.instance_type);
      if (env.enabled && env.in_use + job.instance_count <= env.max_instances - reserve_ && h &&
          h->free >= job.instance_count) {
        env.in_use += job.instance_count;
        h->free -= job.instance_count;
        d_.starts.push_back({job.seq, e});
        return Outcome::kStarted;
      }
    }
    std::string why = CapacityText(job, envs_, q_, host_);
    if (reserve_ > 0) why += "; " + std::to_string(reserve_) + " instances are reserved for shares not active yet";
    d_.waits.push_back({job.seq, WaitKind::kCapacity, d_.AddReason(std::move(why))});
    return Outcome::kBlocked;
  }

 private:
  std::vector<Environment>& envs_;
  HostIndex& host_;
  const Queue& q_;
  Decisions& d_;
  int64_t reserve_;
  int64_t misconfigured_reason_ = -1;
};

void ScheduleFifoQueue(const Queue& q, Placer& placer, Decisions& d) {
  const Job* head = nullptr;
  uint32_t behind = 0;
  for (const Job& job : q.runnable) {
    if (head) {
      d.waits.push_back({job.seq, WaitKind::kBehind, behind});
      continue;
    }
    if (placer.Try(job) == Placer::Outcome::kBlocked) {
      head = &job;
      behind = d.AddReason("queued behind job #" + std::to_string(head->seq));
    }
  }
}

// How many waiting jobs behind a blocked fair-share queue are listed in dispatch order (the
// snapshot shows the first 100 of a queue).
constexpr size_t kOrderedBehind = 128;

void ScheduleFairShareQueue(const Queue& q, Placer& placer, Decisions& d) {
  std::vector<Share> shares = q.fair_share->shares;  // held grows as jobs are placed
  std::vector<size_t> next(shares.size(), 0);
  const Job* head = nullptr;
  uint32_t behind = 0;
  size_t ordered_behind = 0;
  while (true) {
    // The runnable share with the lowest (usage + held) x weight; ties: lower weight, then the
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
      double ka = ShareKey(a), kb = ShareKey(b);
      if (ka != kb ? ka < kb
                   : a.weight_factor != b.weight_factor ? a.weight_factor < b.weight_factor
                                                        : a.runnable[next[i]].seq < b.runnable[next[static_cast<size_t>(best)]].seq)
        best = static_cast<int>(i);
    }
    if (best < 0) break;
    size_t bi = static_cast<size_t>(best);
    const Job& job = shares[bi].runnable[next[bi]++];  // stays valid: shares is not resized
    if (head) {
      d.waits.push_back({job.seq, WaitKind::kBehind, behind});
      if (++ordered_behind < kOrderedBehind) continue;
      // Past the front of the queue the order of waiting jobs no longer matters: list the rest
      // share by share instead of choosing among all shares for each one.
      for (size_t i = 0; i < shares.size(); ++i)
        for (; next[i] < shares[i].runnable.size(); ++next[i])
          d.waits.push_back({shares[i].runnable[next[i]].seq, WaitKind::kBehind, behind});
      break;
    }
    Placer::Outcome o = placer.Try(job);
    if (o == Placer::Outcome::kStarted) shares[bi].held += job.instance_count;
    if (o == Placer::Outcome::kBlocked) {
      head = &job;
      behind = d.AddReason("waiting: share '" + shares[bi].identifier + "' goes first, with job #" +
                           std::to_string(head->seq));
    }
  }
}

}  // namespace

Decisions Schedule(const Snapshot& snap) {
  Decisions d;
  std::vector<Environment> envs = snap.environments;  // in_use is updated as we place jobs
  HostIndex host;
  for (const auto& h : snap.host) host.by_type[h.instance_type] = h;

  std::vector<size_t> order(snap.queues.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Queue& qa = snap.queues[a];
    const Queue& qb = snap.queues[b];
    if (qa.priority != qb.priority) return qa.priority > qb.priority;
    return qa.seq < qb.seq;
  });

  for (size_t qi : order) {
    const Queue& q = snap.queues[qi];
    bool any_env_enabled = std::any_of(q.environments.begin(), q.environments.end(),
                                       [&](int e) { return envs[e].enabled; });
    if (!q.enabled || !any_env_enabled) {
      uint32_t why = d.AddReason(!q.enabled ? "job queue '" + q.name + "' is disabled"
                                            : "every service environment of job queue '" + q.name + "' is disabled");
      auto park = [&](const std::vector<Job>& jobs) {
        for (const Job& job : jobs) d.waits.push_back({job.seq, WaitKind::kQueueDisabled, why});
      };
      park(q.runnable);
      if (q.fair_share)
        for (const auto& sh : q.fair_share->shares) park(sh.runnable);
      continue;
    }
    int64_t reserve = 0;
    if (q.fair_share && q.fair_share->compute_reservation > 0) {
      // (r/100)^activeShares of the capacity is held back for shares that are not active yet.
      int active = 0;
      for (const auto& sh : q.fair_share->shares)
        if (sh.held > 0 || !sh.runnable.empty()) ++active;
      int64_t max = 0;
      for (int e : q.environments) max = std::max(max, envs[e].max_instances);
      reserve = static_cast<int64_t>(
          std::floor(static_cast<double>(max) * std::pow(q.fair_share->compute_reservation / 100.0, active)));
    }
    Placer placer(envs, host, q, d, reserve);
    if (q.fair_share) {
      ScheduleFairShareQueue(q, placer, d);
    } else {
      ScheduleFifoQueue(q, placer, d);
    }
  }
  return d;
}

}  // namespace ty::sched
