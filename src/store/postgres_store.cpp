// The Store port and the event log on PostgreSQL (docs/operations.md, "PostgreSQL"), through
// libpq. The same tables and migrations as SQLite's: one (key, doc) table per kind, keys compared
// byte by byte (COLLATE "C", as SQLite's BINARY), so that LoadAll and the event and audit reads
// see the same order on either store.
#include <libpq-fe.h>

#include <array>
#include <condition_variable>
#include <cstdlib>
#include <mutex>

#include "store/event_log.h"
#include "store/postgres.h"
#include "store/store.h"
#include "store/tables.h"
#include "store/pg_connection.h"

namespace ty::store {
namespace {

using pg::Connection;
using pg::Redacted;
using pg::Result;
using pg::Text;

#define TY_PG_TABLE(name) "CREATE TABLE " name " (key TEXT COLLATE \"C\" PRIMARY KEY, doc TEXT NOT NULL);"

// Versioned migrations, as sqlite_store.cpp's: entry i takes the schema from version i to i+1, and
// the numbering is the same on both stores. Never edit a shipped entry; append a new one.
const std::vector<const char*>& Migrations() {
  static const std::vector<const char*> m = {
      TY_PG_TABLE("service_environments") TY_PG_TABLE("job_queues") TY_PG_TABLE("service_jobs")
          TY_PG_TABLE("training_jobs") TY_PG_TABLE("metric_series") TY_PG_TABLE("meta"),
      TY_PG_TABLE("scheduling_policies"),
      TY_PG_TABLE("quota_shares"),
      TY_PG_TABLE("warm_pools"),
      TY_PG_TABLE("events") TY_PG_TABLE("event_cursors"),
      TY_PG_TABLE("system_metrics"),
      TY_PG_TABLE("audit"),
      // 8: several servers, one leader (docs/operations.md, "High availability"). The lease is one
      // row; its term is the fencing token every leader's commit checks (trainyard_fence) in the
      // commit's own transaction. A takeover updates the row, so it waits for a commit that has
      // read it and is seen by one that reads it after.
      "CREATE TABLE leader (id INTEGER PRIMARY KEY CHECK (id = 1), term BIGINT NOT NULL, holder TEXT NOT NULL,"
      " name TEXT NOT NULL, address TEXT NOT NULL, acquired_at TIMESTAMPTZ NOT NULL, expires_at TIMESTAMPTZ NOT NULL);"
      "INSERT INTO leader VALUES (1, 0, '', '', '', now(), now());"
      "CREATE TABLE servers (id TEXT COLLATE \"C\" PRIMARY KEY, name TEXT NOT NULL, address TEXT NOT NULL,"
      " role TEXT NOT NULL, term BIGINT NOT NULL, started_at TIMESTAMPTZ NOT NULL, last_seen TIMESTAMPTZ NOT NULL);"
      "CREATE FUNCTION trainyard_fence(t BIGINT) RETURNS void LANGUAGE plpgsql AS $$ BEGIN"
      " PERFORM 1 FROM leader WHERE id = 1 AND term = t FOR SHARE;"
      " IF NOT FOUND THEN RAISE EXCEPTION 'fenced: term % no longer leads (the database holds term %)', t,"
      " (SELECT term FROM leader WHERE id = 1) USING ERRCODE = 'TYF01'; END IF; END $$;",
  };
  return m;
}

// Taken (for the length of a transaction) by every server migrating the schema: two servers
// starting at once migrate one after the other.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(7472616, 1)";

class PostgresStore final : public Store {
 public:
  explicit PostgresStore(PostgresOptions options) : options_(std::move(options)) {}

  Status Open(const std::string& url) {
    TY_RETURN_IF_ERROR(db_.Open(url, "store"));
    TY_RETURN_IF_ERROR(Migrate());
    for (size_t i = 0; i < kTables.size(); ++i) {
      upsert_[i] = std::string("INSERT INTO ") + kTables[i] +
                   " (key, doc) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET doc = EXCLUDED.doc";
      delete_[i] = std::string("DELETE FROM ") + kTables[i] + " WHERE key = $1";
    }
    return Status::Ok();
  }

  // One transaction, its statements pipelined: one round trip for the whole batch however many
  // writes a turn made, and an answer only once COMMIT returned (the WAL is flushed).
  Status Commit(const std::vector<Write>& writes) override {
    if (writes.empty()) return Status::Ok();
    TY_RETURN_IF_ERROR(db_.Reset());
    PGconn* c = db_.get();
    if (PQenterPipelineMode(c) != 1) return db_.Error("enter pipeline mode");
    bool sent = PQsendQueryParams(c, "BEGIN", 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
    // A leader's commit holds only while its term does (docs/operations.md, "High availability").
    const std::string term = std::to_string(options_.fence_term);
    if (sent && options_.fence_term > 0) {
      const char* values[1] = {term.c_str()};
      sent = PQsendQueryParams(c, "SELECT trainyard_fence($1::bigint)", 1, nullptr, values, nullptr, nullptr, 0) == 1;
    }
    for (size_t i = 0; sent && i < writes.size(); ++i) {
      const Write& w = writes[i];
      const char* values[2] = {w.key.c_str(), w.doc.c_str()};
      const int lengths[2] = {static_cast<int>(w.key.size()), static_cast<int>(w.doc.size())};
      const std::string& sql = w.doc.empty() ? delete_[Index(w.kind)] : upsert_[Index(w.kind)];
      sent = PQsendQueryParams(c, sql.c_str(), w.doc.empty() ? 1 : 2, nullptr, values, lengths, nullptr, 0) == 1;
    }
    sent = sent && PQsendQueryParams(c, "COMMIT", 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
    sent = sent && PQpipelineSync(c) == 1;
    Status first = sent ? Status::Ok() : db_.Error("send a commit");
    // Reads every answer up to the sync, whatever failed: the connection must be left idle. After a
    // failed statement the rest are aborted (PGRES_PIPELINE_ABORTED) and COMMIT never runs.
    bool committed = false, fenced = false;
    while (sent) {
      Result r(PQgetResult(c));
      if (!r) continue;  // the end of one statement's results
      const ExecStatusType st = PQresultStatus(r.get());
      if (st == PGRES_PIPELINE_SYNC) break;
      if (st == PGRES_COMMAND_OK) {
        if (std::string(PQcmdStatus(r.get())) == "COMMIT") committed = true;
      } else if (st == PGRES_TUPLES_OK) {
        // the fence's answer: it held
      } else if (first.ok()) {
        const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
        if (state && std::string(state) == "TYF01") {
          std::string m = PQresultErrorField(r.get(), PG_DIAG_MESSAGE_PRIMARY);
          first = FailedPrecondition("the database refused a commit of " + std::to_string(writes.size()) + " write(s): " + m);
          fenced = true;
        } else {
          first = db_.Error("commit", st == PGRES_PIPELINE_ABORTED ? nullptr : r.get());
        }
      }
      if (PQstatus(c) != CONNECTION_OK) break;
    }
    PQexitPipelineMode(c);
    if (first.ok() && !committed) first = db_.Error("commit (no COMMIT acknowledged)");
    if (!first.ok() && PQtransactionStatus(c) == PQTRANS_INERROR) (void)db_.Exec("ROLLBACK");  // reports `first`
    if (fenced && options_.on_fenced) options_.on_fenced(first);
    return first;
  }

  Status LoadAll(Kind kind, const std::function<void(const std::string&, const std::string&)>& fn) override {
    PGconn* c = db_.get();
    const std::string sql = std::string("SELECT key, doc FROM ") + kTables[Index(kind)] + " ORDER BY key";
    if (PQsendQuery(c, sql.c_str()) != 1) return db_.Error("read " + std::string(kTables[Index(kind)]));
    // Row by row: a table of a million jobs is never held twice in memory.
    (void)PQsetSingleRowMode(c);  // when refused, the rows come in one result: still correct
    Status st = Status::Ok();
    while (true) {
      Result r(PQgetResult(c));
      if (!r) break;
      const ExecStatusType s = PQresultStatus(r.get());
      if (s == PGRES_SINGLE_TUPLE || s == PGRES_TUPLES_OK) {
        if (st.ok())
          for (int i = 0; i < PQntuples(r.get()); ++i) fn(Text(r.get(), i, 0), Text(r.get(), i, 1));
      } else if (st.ok()) {
        st = db_.Error("read " + std::string(kTables[Index(kind)]), r.get());
      }
    }
    return st;
  }

  int SchemaVersion() const override { return version_; }

 private:
  static size_t Index(Kind k) { return static_cast<size_t>(k); }

  Status Migrate() {
    TY_RETURN_IF_ERROR(db_.Exec("BEGIN"));
    Status st = MigrateInTransaction();
    if (st.ok()) st = db_.Exec("COMMIT");
    if (!st.ok()) (void)db_.Exec("ROLLBACK");  // reports st, the first error
    return st;
  }

  Status MigrateInTransaction() {
    TY_RETURN_IF_ERROR(db_.Exec(kMigrationLock));
    TY_RETURN_IF_ERROR(db_.Exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)"));
    Result r;
    TY_RETURN_IF_ERROR(db_.Query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", {}, &r));
    version_ = std::atoi(PQgetvalue(r.get(), 0, 0));
    const auto& m = Migrations();
    if (version_ > static_cast<int>(m.size()))
      return FailedPrecondition("store schema version " + std::to_string(version_) +
                                " is newer than this binary supports (" + std::to_string(m.size()) +
                                "): a newer trainyard migrated this database; run that version");
    for (size_t v = static_cast<size_t>(version_); v < m.size(); ++v) {
      TY_RETURN_IF_ERROR(db_.Exec(m[v]));
      TY_RETURN_IF_ERROR(db_.Exec("INSERT INTO schema_migrations (version) VALUES (" + std::to_string(v + 1) + ")"));
      version_ = static_cast<int>(v + 1);
    }
    return Status::Ok();
  }

  const PostgresOptions options_;
  Connection db_;
  std::array<std::string, kTables.size()> upsert_;
  std::array<std::string, kTables.size()> delete_;
  int version_ = 0;
};

class PostgresEventLog final : public PublishingEventLog {
 public:
  Status Open(const std::string& url) {
    TY_RETURN_IF_ERROR(db_.Open(url, "events"));
    auto newest = NewestStored();
    if (!newest.ok()) return newest.status();
    Published(*newest);
    return Status::Ok();
  }

  Status Read(uint64_t after, size_t limit, std::vector<StoredEvent>* out) override {
    std::lock_guard lock(db_mu_);
    const std::string from = Key(after), n = std::to_string(limit);
    Result r;
    TY_RETURN_IF_ERROR(db_.Query("SELECT key, doc FROM events WHERE key > $1 ORDER BY key LIMIT $2::bigint", {&from, &n}, &r));
    for (int i = 0; i < PQntuples(r.get()); ++i)
      out->push_back({std::strtoull(PQgetvalue(r.get(), i, 0), nullptr, 10), Text(r.get(), i, 1)});
    return Status::Ok();
  }

  StatusOr<uint64_t> NewestStored() override { return Edge("SELECT MAX(key) FROM events"); }
  StatusOr<uint64_t> OldestStored() override { return Edge("SELECT MIN(key) FROM events"); }


  StatusOr<uint64_t> LoadCursor(const std::string& consumer, bool* found) override {
    std::lock_guard lock(db_mu_);
    Result r;
    TY_RETURN_IF_ERROR(db_.Query("SELECT doc FROM event_cursors WHERE key = $1", {&consumer}, &r));
    *found = PQntuples(r.get()) > 0;
    return *found ? std::strtoull(PQgetvalue(r.get(), 0, 0), nullptr, 10) : 0;
  }

  Status SaveCursor(const std::string& consumer, uint64_t seq) override {
    std::lock_guard lock(db_mu_);
    const std::string v = std::to_string(seq);
    return db_.Query("INSERT INTO event_cursors (key, doc) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET doc = EXCLUDED.doc",
                     {&consumer, &v});
  }

  StatusOr<int64_t> Prune(uint64_t keep, int64_t before_ms) override {
    int64_t gone = 0;
    auto newest = NewestStored();
    if (!newest.ok()) return newest.status();
    std::lock_guard lock(db_mu_);
    if (*newest > keep) {
      const std::string below = Key(*newest - keep);
      TY_RETURN_IF_ERROR(Delete("DELETE FROM events WHERE key <= $1", below, &gone));
    }
    // The old events are a prefix of the key order (see sqlite_event_log.cpp): slices of 1000.
    while (before_ms > 0) {
      int64_t n = 0;
      TY_RETURN_IF_ERROR(Delete("DELETE FROM events WHERE key IN (SELECT key FROM events ORDER BY key LIMIT 1000) "
                                "AND (doc::jsonb ->> 'at')::bigint < $1::bigint",
                                std::to_string(before_ms), &n));
      gone += n;
      if (n < 1000) break;
    }
    return gone;
  }

  Status ReadAudit(const std::string& lowest, const std::string& below, size_t limit,
                   std::vector<std::pair<std::string, std::string>>* out) override {
    std::lock_guard lock(db_mu_);
    const std::string n = std::to_string(limit);
    Result r;
    TY_RETURN_IF_ERROR(db_.Query("SELECT key, doc FROM audit WHERE key >= $1 AND key < $2 ORDER BY key DESC LIMIT $3::bigint",
                                 {&lowest, &below, &n}, &r));
    for (int i = 0; i < PQntuples(r.get()); ++i) out->emplace_back(Text(r.get(), i, 0), Text(r.get(), i, 1));
    return Status::Ok();
  }

  StatusOr<int64_t> PruneAudit(uint64_t keep, int64_t before_ms) override {
    std::lock_guard lock(db_mu_);
    int64_t gone = 0;
    if (before_ms > 0) TY_RETURN_IF_ERROR(Delete("DELETE FROM audit WHERE key < $1", AuditKey(before_ms, ""), &gone));
    TY_RETURN_IF_ERROR(Delete("DELETE FROM audit WHERE key <= (SELECT key FROM audit ORDER BY key DESC LIMIT 1 OFFSET $1::bigint)",
                              std::to_string(keep), &gone));
    return gone;
  }

 private:
  // REQUIRES: db_mu_ held.
  Status Delete(const char* sql, const std::string& param, int64_t* gone) {
    Result r;
    TY_RETURN_IF_ERROR(db_.Query(sql, {&param}, &r));
    *gone += std::strtoll(PQcmdTuples(r.get()), nullptr, 10);
    return Status::Ok();
  }

  StatusOr<uint64_t> Edge(const char* sql) {
    std::lock_guard lock(db_mu_);
    Result r;
    TY_RETURN_IF_ERROR(db_.Query(sql, {}, &r));
    return PQgetisnull(r.get(), 0, 0) ? 0 : std::strtoull(PQgetvalue(r.get(), 0, 0), nullptr, 10);
  }

  Connection db_;
  std::mutex db_mu_;
};

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url, PostgresOptions options) {
  auto s = std::make_unique<PostgresStore>(std::move(options));
  Status st = s->Open(url);
  if (!st.ok()) return st;
  return std::unique_ptr<Store>(std::move(s));
}

StatusOr<std::unique_ptr<EventLog>> OpenPostgresEventLog(const std::string& url) {
  auto log = std::make_unique<PostgresEventLog>();
  Status st = log->Open(url);
  if (!st.ok()) return st;
  return std::unique_ptr<EventLog>(std::move(log));
}

}  // namespace ty::store
