// API call records (docs/security.md, "Audit") as the controller sees them: documents to store
// in the commit of the command a call made, so that a change and its record become durable
// together. Their shape belongs to api/ (api/audit.h), which renders them.
#pragma once

#include <functional>
#include <string>

#include "core/model.h"
#include "core/status.h"

namespace ty::control {

// One call's record, waiting for its outcome. `render` turns the outcome into the stored document;
// it is called once, on the thread that finishes the record (the controller thread, under the
// state lock, when a command carries it), so it must be cheap and must not block or take locks.
struct PendingAudit {
  std::string key;  // store::EventLog::AuditKey(at, request id)
  EpochMs at = 0;
  std::function<std::string(const Status& outcome)> render;
  bool taken = false;  // a command carries it (set by Controller::Execute)
};

// While an AuditScope lives on an API thread, the first command that thread queues takes its
// record (Controller::Execute): the command's turn stores it, rendered with the command's outcome,
// in the same commit as the command's changes. A call that queues no command (refused, or failed
// before reaching the controller) leaves it untaken; the API layer then stores it itself
// (Controller::RecordAudit). Scopes do not nest.
class AuditScope {
 public:
  explicit AuditScope(PendingAudit* pending);
  ~AuditScope();
  AuditScope(const AuditScope&) = delete;
  AuditScope& operator=(const AuditScope&) = delete;

  // The calling thread's record, if one waits untaken; it is marked taken. Null otherwise.
  static PendingAudit* Take();
};

}  // namespace ty::control
