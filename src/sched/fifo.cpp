#include <algorithm>
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

Decisions ScheduleFifo(const Snapshot& snap) {
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
    const Job* head = nullptr;  // the job that blocks this queue, once found
    for (const Job& job : q.runnable) {
      if (!q.enabled || !any_env_enabled) {
        d.waits.push_back({job.seq, WaitKind::kQueueDisabled,
                           !q.enabled ? "job queue '" + q.name + "' is disabled"
                                      : "every service environment of job queue '" + q.name + "' is disabled"});
        continue;
      }
      if (head) {
        d.waits.push_back({job.seq, WaitKind::kBehind, "queued behind job #" + std::to_string(head->seq)});
        continue;
      }
      bool ever = std::any_of(q.environments.begin(), q.environments.end(),
                              [&](int e) { return CanEverFit(job, envs[e], host); });
      if (!ever) {
        // Such a job would block the queue forever; it waits aside with its reason, and the jobs
        // behind it go on (see docs/design/decisions.md).
        d.waits.push_back({job.seq, WaitKind::kMisconfiguration, kMaxResourceReason});
        continue;
      }
      bool started = false;
      for (int e : q.environments) {
        Environment& env = envs[e];
        HostCapacity* h = host.Find(job.instance_type);
        if (env.enabled && env.in_use + job.instance_count <= env.max_instances && h &&
            h->free >= job.instance_count) {
          env.in_use += job.instance_count;
          h->free -= job.instance_count;
          d.starts.push_back({job.seq, e});
          started = true;
          break;
        }
      }
      if (!started) {
        head = &job;
        d.waits.push_back({job.seq, WaitKind::kCapacity, CapacityText(job, envs, q, host)});
      }
    }
  }
  return d;
}

}  // namespace ty::sched
