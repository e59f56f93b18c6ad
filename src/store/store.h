// The Store port: durable state as documents, one table per kind.
//
// The controller is the single writer. It keeps live state in memory and commits every
// transition (as whole documents) before acting on it; Commit() is one transaction, so a batch
// of changes from one controller turn becomes durable together or not at all.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace ty::store {

enum class Kind { kServiceEnvironment, kJobQueue, kServiceJob, kTrainingJob, kMetricSeries, kMeta, kSchedulingPolicy, kQuotaShare, kWarmPool,
                  // Events (docs/events.md): key = the sequence number, zero-padded to 20 digits.
                  kEvent,
                  kSystemMetrics,
                  // API call records (docs/security.md, "Audit"): key = the time in epoch ms,
                  // zero-padded to 20 digits, '/', the request id; written with the call's own commit.
                  kAudit };

struct Write {
  Kind kind;
  std::string key;
  std::string doc;  // empty: delete the key
};

class Store {
 public:
  virtual ~Store() = default;
  // Applies all writes in one durable transaction.
  virtual Status Commit(const std::vector<Write>& writes) = 0;
  // Calls fn for every document of a kind, in key order.
  virtual Status LoadAll(Kind kind,
                         const std::function<void(const std::string& key, const std::string& doc)>& fn) = 0;
  // Schema version after migrations.
  virtual int SchemaVersion() const = 0;
};

// SQLite in WAL mode. `synchronous_full` trades throughput for durability across power loss
// (NORMAL already survives a killed process).
StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, bool synchronous_full);

}  // namespace ty::store
