// Webhook delivery (docs/events.md): one thread per configured webhook walks the event log from
// its durable cursor and POSTs each matching event, in order, at least once. A failed delivery is
// retried with backoff (1 s, doubling, to max_backoff_seconds) until it succeeds; the cursor moves
// only past delivered (or unwanted) events, and is saved, so neither a receiver that is down nor a
// server restart loses an event. The threads only read the log, so a dead webhook never slows
// the controller. The set of deliveries may change while it runs (Sync): EventBridge rules and
// targets made through the API come and go.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "core/status.h"
#include "obs/event_access.h"
#include "obs/outbound.h"

namespace ty::store {
class EventLog;
}

namespace ty::obs {

struct WebhookStats {
  std::string name;
  uint64_t cursor = 0;          // the last event handled (delivered or not wanted)
  uint64_t delivered = 0;       // since the server started
  uint64_t failed_attempts = 0; // POSTs that did not get a 2xx
  uint64_t skipped = 0;         // events pruned before they could be delivered
  uint64_t dropped = 0;         // events given up (max_attempts, max_event_age_seconds)
  std::string last_error;
};

class WebhookDispatcher {
 public:
  // `access` decides which events a delivery with an owner (an EventBridge rule's) may send; null:
  // such deliveries send nothing. It must outlive the dispatcher.
  WebhookDispatcher(store::EventLog& log, std::vector<WebhookConfig> hooks, const EventAccess* access = nullptr);
  ~WebhookDispatcher();

  // Checks the filters (patterns), loads each cursor and starts the threads. A webhook seen for
  // the first time starts after the newest stored event.
  Status Start();
  // Makes the running deliveries exactly `hooks` (by name): starts the new ones as Start() does,
  // stops the ones no longer named (their cursors stay, so a name used again goes on from where
  // it stopped), and restarts one whose configuration changed from its own cursor. Nothing
  // changes when a filter is invalid. Any thread; calls are serialized.
  Status Sync(std::vector<WebhookConfig> hooks);
  void Stop();
  std::vector<WebhookStats> Stats() const;
  // The addresses deliveries with an owner may connect to; from the next request on. Any thread.
  void SetOutboundRules(OutboundRules rules);

 private:
  struct Hook;
  void Run(Hook& h);
  // Sleeps up to `ms`; false when the dispatcher or `h` is stopping.
  bool Pause(Hook& h, int64_t ms);
  Status Prepare(Hook& h);
  // Stops `h`'s thread (joined now when `wait`) and keeps it in retiring_ until it is joined.
  void Halt(std::unique_ptr<Hook> h, bool wait);

  store::EventLog& log_;
  std::vector<WebhookConfig> initial_;  // constant after construction
  std::mutex sync_mu_;                   // serializes Start, Sync and Stop
  mutable std::mutex hooks_mu_;          // guards hooks_ (Stats reads it from other threads)
  std::vector<std::unique_ptr<Hook>> hooks_;
  std::vector<std::unique_ptr<Hook>> retiring_;  // stopped, maybe not ended yet; guarded by sync_mu_
  const EventAccess* access_;           // constant after construction
  mutable std::mutex rules_mu_;
  OutboundRules rules_;                  // guarded by rules_mu_
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace ty::obs
