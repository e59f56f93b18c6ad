#include "sched/containers.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sched/sched.h"

namespace ty::sched {

ContainerUsage DecayedContainerUsage(const ContainerUsage& usage, const ContainerResources& held, int64_t dt_ms,
                                     int64_t decay_seconds) {
  return {DecayedUsage(usage.vcpu_seconds, held.vcpus, dt_ms, decay_seconds),
          DecayedUsage(usage.memory_mib_seconds, held.memory_mib, dt_ms, decay_seconds),
          DecayedUsage(usage.gpu_seconds, held.gpus, dt_ms, decay_seconds)};
}

double DominantShare(const ContainerUsage& usage, const ContainerResources& held, const ContainerResources& next,
                     const ContainerResources& capacity, double weight_factor, int64_t decay_seconds) {
  double dominant = 0;
  auto resource = [&](double used, int64_t holds, int64_t wants, int64_t total) {
    if (total <= 0) return;  // the queue has none of it: no share of it to weigh (Mesos does the same)
    const double key = ShareOrderKey(used, holds, 0.5 * static_cast<double>(wants), 1.0, decay_seconds);
    dominant = std::max(dominant, key / static_cast<double>(total));
  };
  resource(usage.vcpu_seconds, held.vcpus, next.vcpus, capacity.vcpus);
  resource(usage.memory_mib_seconds, held.memory_mib, next.memory_mib, capacity.memory_mib);
  resource(usage.gpu_seconds, held.gpus, next.gpus, capacity.gpus);
  return dominant * weight_factor;
}

ContainerPass::ContainerPass(ContainerSnapshot snapshot) : s_(std::move(snapshot)) {
  order_.resize(s_.queues.size());
  std::iota(order_.begin(), order_.end(), size_t{0});
  std::sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
    const ContainerQueue& qa = s_.queues[a];
    const ContainerQueue& qb = s_.queues[b];
    if (qa.priority != qb.priority) return qa.priority > qb.priority;
    return qa.seq < qb.seq;
  });
}

int ContainerPass::RoomFor(size_t q, const ContainerCandidate& c) const {
  for (int e : s_.queues[q].environments) {
    const ComputeEnvironmentState& env = s_.environments[static_cast<size_t>(e)];
    if (!env.enabled) continue;
    ContainerResources room = env.capacity;
    room -= env.in_use;
    room.vcpus -= reserve_[static_cast<size_t>(e)];
    if (c.size.FitsIn(room)) return e;
  }
  return -1;
}

bool ContainerPass::Advance(size_t q, size_t sh) {
  const std::vector<ContainerCandidate>& runnable = s_.queues[q].shares[sh].runnable;
  ShareCursor& cur = cursors_[sh];
  for (; cur.next < runnable.size(); ++cur.next, cur.made = 0)
    if (RoomFor(q, runnable[cur.next]) >= 0) return true;
  return false;
}

void ContainerPass::BeginQueue() {
  const ContainerQueue& q = s_.queues[order_[at_]];
  cursors_.assign(q.shares.size(), ShareCursor{});
  reserve_.assign(s_.environments.size(), 0);
  capacity_ = {};
  for (int e : q.environments) capacity_ += s_.environments[static_cast<size_t>(e)].capacity;
  if (q.fair_share && q.compute_reservation > 0) {
    int active = 0;
    for (const ContainerShare& sh : q.shares)
      if (!(sh.held == ContainerResources{}) || !sh.runnable.empty()) ++active;
    const double ratio = std::pow(q.compute_reservation / 100.0, active);
    for (int e : q.environments)
      reserve_[static_cast<size_t>(e)] =
          static_cast<int64_t>(std::floor(static_cast<double>(s_.environments[static_cast<size_t>(e)].capacity.vcpus) * ratio));
  }
}

std::optional<ContainerStart> ContainerPass::Next() {
  last_.reset();
  for (; at_ < order_.size(); ++at_, began_ = false) {
    const size_t q = order_[at_];
    ContainerQueue& queue = s_.queues[q];
    if (!queue.enabled) continue;
    if (!began_) {
      BeginQueue();
      began_ = true;
    }
    // The share with the lowest dominant share that has a job with room; ties by name.
    int best = -1;
    double best_key = 0;
    for (size_t i = 0; i < queue.shares.size(); ++i) {
      if (!Advance(q, i)) continue;
      const ContainerShare& sh = queue.shares[i];
      const double key = DominantShare(sh.usage, sh.held, sh.runnable[cursors_[i].next].size, capacity_,
                                       sh.weight_factor, queue.decay_seconds);
      if (best < 0 || key < best_key ||
          (key == best_key && sh.identifier < queue.shares[static_cast<size_t>(best)].identifier)) {
        best = static_cast<int>(i);
        best_key = key;
      }
    }
    if (best < 0) continue;
    const size_t sh = static_cast<size_t>(best);
    ShareCursor& cur = cursors_[sh];
    const ContainerCandidate& c = queue.shares[sh].runnable[cur.next];
    const int e = RoomFor(q, c);
    last_ = Taken{q, sh, cur.next, e};
    s_.environments[static_cast<size_t>(e)].in_use += c.size;
    queue.shares[sh].held += c.size;
    if (++cur.made >= std::max<int64_t>(1, c.count)) {
      ++cur.next;
      cur.made = 0;
    }
    return ContainerStart{c.seq, q, sh, e};
  }
  return std::nullopt;
}

void ContainerPass::Skip() {
  if (!last_) return;  // nothing proposed since the last Skip(): the contract was not kept; no effect
  const Taken t = *last_;
  last_.reset();
  const ContainerCandidate& c = s_.queues[t.queue].shares[t.share].runnable[t.candidate];
  s_.environments[static_cast<size_t>(t.environment)].in_use -= c.size;
  s_.queues[t.queue].shares[t.share].held -= c.size;
  cursors_[t.share] = ShareCursor{t.candidate + 1, 0};
}

std::vector<ContainerStart> ScheduleContainers(const ContainerSnapshot& snapshot) {
  std::vector<ContainerStart> out;
  ContainerPass pass(snapshot);
  while (auto s = pass.Next()) out.push_back(*s);
  return out;
}

}  // namespace ty::sched
