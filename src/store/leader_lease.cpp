// The leader lease on PostgreSQL (store/postgres.h; docs/operations.md, "High availability").
//
// The lease is the row `leader` (id 1): its term is the fencing token. Taking it increments the
// term, and only when it has expired; renewing it needs the term (and holder) unchanged. A leader
// whose lease ran out but was not taken may renew it: nobody else led meanwhile. Every leader
// commit checks its term in the commit's own transaction (trainyard_fence, postgres_store.cpp),
// so a deposed leader that has not noticed yet stores nothing.
#include <cstdlib>

#include "store/pg_connection.h"
#include "store/postgres.h"

namespace ty::store {
namespace {

int64_t Int(const PGresult* r, int row, int col) { return std::strtoll(PQgetvalue(r, row, col), nullptr, 10); }

class PostgresLeaderLease final : public LeaderLease {
 public:
  PostgresLeaderLease(std::string id, std::string name, std::string address)
      : id_(std::move(id)), name_(std::move(name)), address_(std::move(address)) {}

  Status Open(const std::string& url) { return db_.Open(url, "lease"); }

  StatusOr<Taken> TryAcquire(int64_t lease_ms) override {
    const std::string ms = std::to_string(lease_ms);
    pg::Result r;
    // One statement: the row lock orders it against a renewal, another taker and every fenced
    // commit (FOR SHARE in trainyard_fence).
    TY_RETURN_IF_ERROR(db_.Query(
        "UPDATE leader l SET term = l.term + 1, holder = $1, name = $2, address = $3, acquired_at = now(),"
        " expires_at = now() + make_interval(secs => $4::bigint / 1000.0)"
        " FROM (SELECT expires_at AS old FROM leader WHERE id = 1) o"
        " WHERE l.id = 1 AND l.expires_at <= now()"
        " RETURNING l.term, GREATEST(0, (EXTRACT(EPOCH FROM now() - o.old) * 1000))::bigint",
        {&id_, &name_, &address_, &ms}, &r));
    Taken t;
    if (PQntuples(r.get()) == 1) {
      t.term = Int(r.get(), 0, 0);
      t.leaderless_ms = Int(r.get(), 0, 1);
    }
    return t;
  }

  StatusOr<bool> Renew(int64_t term, int64_t lease_ms) override {
    const std::string t = std::to_string(term), ms = std::to_string(lease_ms);
    pg::Result r;
    // The row is written (so locked) whoever holds it, and the answer says whether this server
    // still does: the renewal is ordered after any transaction that read the row, as a takeover is.
    TY_RETURN_IF_ERROR(db_.Query(
        "UPDATE leader SET expires_at = CASE WHEN term = $1::bigint AND holder = $2"
        " THEN now() + make_interval(secs => $3::bigint / 1000.0) ELSE expires_at END"
        " WHERE id = 1 RETURNING term = $1::bigint AND holder = $2",
        {&t, &id_, &ms}, &r));
    return PQntuples(r.get()) == 1 && pg::Text(r.get(), 0, 0) == "t";
  }

  Status Release(int64_t term) override {
    const std::string t = std::to_string(term);
    return db_.Query("UPDATE leader SET expires_at = now() WHERE id = 1 AND term = $1::bigint AND holder = $2", {&t, &id_});
  }

  Status Heartbeat(const std::string& role, int64_t term) override {
    const std::string t = std::to_string(term);
    TY_RETURN_IF_ERROR(db_.Query(
        "INSERT INTO servers (id, name, address, role, term, started_at, last_seen)"
        " VALUES ($1, $2, $3, $4, $5::bigint, now(), now())"
        " ON CONFLICT (id) DO UPDATE SET role = EXCLUDED.role, term = EXCLUDED.term, last_seen = now()",
        {&id_, &name_, &address_, &role, &t}));
    // Servers silent for an hour are forgotten (at most once a minute).
    if (++beats_ % 60 == 1) return db_.Query("DELETE FROM servers WHERE last_seen < now() - interval '1 hour'", {});
    return Status::Ok();
  }

  StatusOr<LeaseHolder> Holder() override {
    pg::Result r;
    TY_RETURN_IF_ERROR(db_.Query(
        "SELECT term, holder, name, address, (EXTRACT(EPOCH FROM expires_at - now()) * 1000)::bigint,"
        " (EXTRACT(EPOCH FROM now() - acquired_at) * 1000)::bigint FROM leader WHERE id = 1",
        {}, &r));
    LeaseHolder h;
    if (PQntuples(r.get()) != 1) return h;
    h.term = Int(r.get(), 0, 0);
    h.id = pg::Text(r.get(), 0, 1);
    h.name = pg::Text(r.get(), 0, 2);
    h.address = pg::Text(r.get(), 0, 3);
    h.expires_in_ms = Int(r.get(), 0, 4);
    h.held_ms = Int(r.get(), 0, 5);
    return h;
  }

  StatusOr<std::vector<ServerRow>> Servers() override {
    pg::Result r;
    TY_RETURN_IF_ERROR(db_.Query(
        "SELECT id, name, address, role, term, (EXTRACT(EPOCH FROM now() - last_seen) * 1000)::bigint,"
        " (EXTRACT(EPOCH FROM now() - started_at) * 1000)::bigint FROM servers ORDER BY name, id",
        {}, &r));
    std::vector<ServerRow> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      ServerRow s;
      s.id = pg::Text(r.get(), i, 0);
      s.name = pg::Text(r.get(), i, 1);
      s.address = pg::Text(r.get(), i, 2);
      s.role = pg::Text(r.get(), i, 3);
      s.term = Int(r.get(), i, 4);
      s.last_seen_ms_ago = Int(r.get(), i, 5);
      s.up_ms = Int(r.get(), i, 6);
      out.push_back(std::move(s));
    }
    return out;
  }

 private:
  const std::string id_, name_, address_;
  pg::Connection db_;
  int64_t beats_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<LeaderLease>> OpenLeaderLease(const std::string& url, const std::string& id,
                                                       const std::string& name, const std::string& address) {
  auto lease = std::make_unique<PostgresLeaderLease>(id, name, address);
  Status st = lease->Open(url);
  if (!st.ok()) return st;
  return std::unique_ptr<LeaderLease>(std::move(lease));
}

}  // namespace ty::store
