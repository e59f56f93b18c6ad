// The Store port and the event log on PostgreSQL (postgres_store.cpp; docs/operations.md,
// "PostgreSQL"), selected by [store] url. `url` is a libpq connection string or URI
// ("postgresql://user@host:5432/trainyard", "host=/run/postgresql dbname=trainyard"); a password
// is better kept in ~/.pgpass or PGPASSFILE than in the URL. Errors never repeat a password.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

namespace ty::store {

class Store;
class EventLog;

// Connects, then runs the schema migrations this binary knows under an advisory lock (servers
// starting together migrate one at a time); a database migrated by a newer binary is refused
// (kFailedPrecondition naming both versions). A commit is answered after PostgreSQL flushed it.
StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url);
// The event log over the same database, on a connection of its own (any thread).
StatusOr<std::unique_ptr<EventLog>> OpenPostgresEventLog(const std::string& url);

}  // namespace ty::store
