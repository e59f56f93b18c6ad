// A bounded, in-memory history of each queue's share standings (share_standings.h), sampled by
// the controller every [console] share_history_interval_seconds on its own clock. Not stored: a
// restarted server starts with none. Served by POST /trainyard/v1/share-history (docs/console.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "core/clock.h"

namespace ty::control {

// One share at one sample: what share_standings.h's ShareStanding says of it, in instances.
struct ShareSample {
  std::string share;
  int64_t in_use = 0;
  double entitlement = 0;
  double borrowed = 0;
  double lent = 0;
};

// One queue at one time; shares in name order.
struct QueueSample {
  EpochMs at = 0;
  std::vector<ShareSample> shares;
};

// Per queue, the newest kMaxSamples samples, oldest first. Not thread-safe: it lives in State,
// written by the controller thread under the exclusive lock and read under the shared one.
class ShareHistory {
 public:
  static constexpr size_t kMaxSamples = 1440;  // a day at the default one-minute interval

  // Appends a sample of `queue`, dropping its oldest past kMaxSamples.
  void Add(const std::string& queue, QueueSample sample) {
    std::deque<QueueSample>& ring = by_queue_[queue];
    ring.push_back(std::move(sample));
    while (ring.size() > kMaxSamples) ring.pop_front();
  }
  // Forgets a queue (it was deleted).
  void Forget(const std::string& queue) { by_queue_.erase(queue); }
  // The samples of `queue`, oldest first; null when it has none.
  const std::deque<QueueSample>* Of(const std::string& queue) const {
    auto it = by_queue_.find(queue);
    return it == by_queue_.end() ? nullptr : &it->second;
  }
  const std::map<std::string, std::deque<QueueSample>>& queues() const { return by_queue_; }

 private:
  std::map<std::string, std::deque<QueueSample>> by_queue_;
};

}  // namespace ty::control
