// What both stores share (sqlite_store.cpp, postgres_store.cpp, their event logs): the table of
// each Kind, and the waiting on newly published events. Internal to src/store.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "store/event_log.h"

namespace ty::store {

// The table of each store::Kind, in the enum's order.
inline constexpr std::array<const char*, 12> kTables = {"service_environments", "job_queues",   "service_jobs",
                                                        "training_jobs",        "metric_series", "meta",
                                                        "scheduling_policies",  "quota_shares",  "warm_pools",
                                                        "events",               "system_metrics", "audit"};

// The part of an event log that is the same over every database: the newest published sequence
// number, and the streams waiting for a newer one.
class PublishingEventLog : public EventLog {
 public:
  void Published(uint64_t seq) override {
    {
      std::lock_guard lock(wait_mu_);
      if (seq > published_) published_ = seq;
    }
    cv_.notify_all();
  }
  uint64_t LastPublished() const override {
    std::lock_guard lock(wait_mu_);
    return published_;
  }
  uint64_t WaitNewer(uint64_t after, std::chrono::steady_clock::time_point deadline) override {
    std::unique_lock lock(wait_mu_);
    cv_.wait_until(lock, deadline, [&] { return closed_ || published_ > after; });
    return published_;
  }
  void Close() override {
    {
      std::lock_guard lock(wait_mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  bool closed() const override {
    std::lock_guard lock(wait_mu_);
    return closed_;
  }

 private:
  mutable std::mutex wait_mu_;
  std::condition_variable cv_;
  uint64_t published_ = 0;
  bool closed_ = false;
};

}  // namespace ty::store
