// The Store port and the event log on PostgreSQL (postgres_store.cpp; docs/operations.md,
// "PostgreSQL"), selected by [store] url, and the leader lease of several servers over one
// database (leader_lease.cpp; docs/operations.md, "High availability"). `url` is a libpq
// connection string or URI ("postgresql://user@host:5432/trainyard", "host=/run/postgresql
// dbname=trainyard"); a password is better kept in ~/.pgpass or PGPASSFILE than in the URL.
// Errors never repeat a password.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace ty::store {

class Store;
class EventLog;

struct PostgresOptions {
  // > 0: every commit first checks, in its own transaction, that the leader lease still holds this
  // term (the fencing token). A commit of a server that was deposed is refused: kFailedPrecondition
  // "... fenced: term T no longer leads ...", and nothing of it is stored.
  int64_t fence_term = 0;
  // Called (on the committing thread) with that refusal.
  std::function<void(const Status&)> on_fenced;
};

// Connects, then runs the schema migrations this binary knows under an advisory lock (servers
// starting together migrate one at a time); a database migrated by a newer binary is refused
// (kFailedPrecondition naming both versions). A commit is answered after PostgreSQL flushed it.
StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url, PostgresOptions options = {});
// The event log over the same database, on a connection of its own (any thread).
StatusOr<std::unique_ptr<EventLog>> OpenPostgresEventLog(const std::string& url);

// One server's view of the lease, as the database (and its clock) saw it.
struct LeaseHolder {
  int64_t term = 0;  // 0: nobody has led yet
  std::string id, name, address;
  int64_t expires_in_ms = 0;  // < 0: expired that long ago
  int64_t held_ms = 0;        // since the term began
};

struct ServerRow {
  std::string id, name, address, role;  // role: "leader", "follower" or "stopped"
  int64_t term = 0;                     // the term it leads, or the last one it saw
  int64_t last_seen_ms_ago = 0;         // its last heartbeat, by the database's clock
  int64_t up_ms = 0;
};

// The leader lease: one row in the database, taken by one server at a time for a term. Times are
// the database's (now()), so the servers' clocks never have to agree. Not thread-safe: one thread
// (the server's lease loop) uses it.
class LeaderLease {
 public:
  virtual ~LeaderLease() = default;
  // Takes the lease when it has expired (or was released): the new term, and how long it had been
  // expired (the time without a leader, as far as the database knows). term 0: another server holds it.
  struct Taken {
    int64_t term = 0;
    int64_t leaderless_ms = 0;
  };
  virtual StatusOr<Taken> TryAcquire(int64_t lease_ms) = 0;
  // Extends this server's lease of `term` by lease_ms from now. False when the database holds
  // another term: this server was deposed (its lease had run out and another took it).
  virtual StatusOr<bool> Renew(int64_t term, int64_t lease_ms) = 0;
  // Ends the lease of `term` now (a clean stop): a follower takes over at its next try.
  virtual Status Release(int64_t term) = 0;
  // Records this server in the server list (role "leader", "follower" or "stopped").
  virtual Status Heartbeat(const std::string& role, int64_t term) = 0;
  virtual StatusOr<LeaseHolder> Holder() = 0;
  // The servers heard from in the last hour, by name.
  virtual StatusOr<std::vector<ServerRow>> Servers() = 0;
};

// `id` is unique to this process; `name` and `address` are what others are told.
StatusOr<std::unique_ptr<LeaderLease>> OpenLeaderLease(const std::string& url, const std::string& id,
                                                       const std::string& name, const std::string& address);

}  // namespace ty::store
