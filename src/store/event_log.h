// The event log (docs/events.md): reads of the events the controller commits with its state, and
// where each consumer has got to. Events are written by the controller's own store transaction
// (store::Kind::kEvent), so an event exists exactly when the state change it describes does.
// This class has its own SQLite connection and may be used from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ty::store {

struct StoredEvent {
  uint64_t seq = 0;
  std::string doc;  // {"seq","at","queue","share","tags","event":{EventBridge envelope}}
};

class EventLog {
 public:
  // The SQLite implementation (sqlite_event_log.cpp, in ty_store_sqlite), over the store's database.
  static StatusOr<std::unique_ptr<EventLog>> Open(const std::string& db_path);
  virtual ~EventLog() = default;

  // The store key of an event: its sequence number, zero-padded so that keys sort as numbers.
  static std::string Key(uint64_t seq) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%020llu", static_cast<unsigned long long>(seq));
    return buf;
  }

  // Up to `limit` events with seq > after, in sequence order.
  virtual Status Read(uint64_t after, size_t limit, std::vector<StoredEvent>* out) = 0;
  // The newest stored sequence number (0: none yet), as read from the database.
  virtual StatusOr<uint64_t> NewestStored() = 0;
  // The oldest sequence number still kept (0: none).
  virtual StatusOr<uint64_t> OldestStored() = 0;

  // The controller has committed events up to `seq`: wakes the waiters.
  virtual void Published(uint64_t seq) = 0;
  virtual uint64_t LastPublished() const = 0;
  // Waits until an event newer than `after` is published, `deadline` passes or Close() is called.
  // Returns LastPublished().
  virtual uint64_t WaitNewer(uint64_t after, std::chrono::steady_clock::time_point deadline) = 0;
  // Wakes every waiter for good (the server is stopping).
  virtual void Close() = 0;
  virtual bool closed() const = 0;

  // A consumer's cursor: the last sequence number it has been given (0 when it has none).
  virtual StatusOr<uint64_t> LoadCursor(const std::string& consumer, bool* found) = 0;
  virtual Status SaveCursor(const std::string& consumer, uint64_t seq) = 0;

  // Deletes the oldest events beyond the newest `keep`, and those stored before `before_ms`
  // (their "at"). Returns how many went.
  virtual StatusOr<int64_t> Prune(uint64_t keep, int64_t before_ms) = 0;

  // API call records (store::Kind::kAudit, docs/security.md "Audit"), committed by the controller
  // like events and read here on the same connection. Keys sort by time (AuditKey).
  static std::string AuditKey(int64_t at_ms, const std::string& request_id) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%020lld", static_cast<long long>(at_ms < 0 ? 0 : at_ms));
    return std::string(buf) + "/" + request_id;
  }
  // Up to `limit` records with lowest <= key < below, newest first.
  virtual Status ReadAudit(const std::string& lowest, const std::string& below, size_t limit,
                           std::vector<std::pair<std::string, std::string>>* out) = 0;
  // Deletes the records older than `before_ms` and the oldest beyond the newest `keep`. Returns
  // how many went.
  virtual StatusOr<int64_t> PruneAudit(uint64_t keep, int64_t before_ms) = 0;
};

}  // namespace ty::store
