#include <sqlite3.h>

#include <array>

#include "store/store.h"
#include "store/tables.h"

namespace ty::store {
namespace {

// Versioned migrations: entry i takes the schema from version i to i+1. Never edit a shipped
// entry; append a new one.
const std::vector<const char*>& Migrations() {
  static const std::vector<const char*> m = {
      "CREATE TABLE service_environments (key TEXT PRIMARY KEY, doc TEXT NOT NULL);"
      "CREATE TABLE job_queues (key TEXT PRIMARY KEY, doc TEXT NOT NULL);"
      "CREATE TABLE service_jobs (key TEXT PRIMARY KEY, doc TEXT NOT NULL);"
      "CREATE TABLE training_jobs (key TEXT PRIMARY KEY, doc TEXT NOT NULL);"
      "CREATE TABLE metric_series (key TEXT PRIMARY KEY, doc TEXT NOT NULL);"
      "CREATE TABLE meta (key TEXT PRIMARY KEY, doc TEXT NOT NULL);",
      // 2: scheduling policies.
      "CREATE TABLE scheduling_policies (key TEXT PRIMARY KEY, doc TEXT NOT NULL);",
      // 3: quota shares, keyed "<queue>/<share>".
      "CREATE TABLE quota_shares (key TEXT PRIMARY KEY, doc TEXT NOT NULL);",
      // 4: managed warm pools that are InUse or Available, keyed by pool id.
      "CREATE TABLE warm_pools (key TEXT PRIMARY KEY, doc TEXT NOT NULL);",
      // 5: events in sequence order (key: zero-padded sequence number), and where each event
      // consumer (a webhook) has got to.
      "CREATE TABLE events (key TEXT PRIMARY KEY, doc TEXT NOT NULL);"
      "CREATE TABLE event_cursors (key TEXT PRIMARY KEY, doc TEXT NOT NULL);",
      // 6: the system metrics sampled on each instance of a training job, keyed by its name.
      "CREATE TABLE system_metrics (key TEXT PRIMARY KEY, doc TEXT NOT NULL);",
      // 7: API call records, keyed "<epoch ms, 20 digits>/<request id>" so that keys sort by time.
      "CREATE TABLE audit (key TEXT PRIMARY KEY, doc TEXT NOT NULL);",
      // 8: nothing. PostgreSQL's 8 is the leader lease of several servers; a SQLite file has one
      // server, and the numbers stay the same on both stores.
      "SELECT 1;",
  };
  return m;
}

class Stmt {
 public:
  Stmt() = default;
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  sqlite3_stmt** out() { return &s_; }
  sqlite3_stmt* get() const { return s_; }

 private:
  sqlite3_stmt* s_ = nullptr;
};

class SqliteStore final : public Store {
 public:
  ~SqliteStore() override {
    for (auto& s : upsert_) sqlite3_finalize(s);
    for (auto& s : delete_) sqlite3_finalize(s);
    if (db_) sqlite3_close(db_);
  }

  Status Open(const std::string& path, bool synchronous_full) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK)
      return Error("open " + path);
    sqlite3_busy_timeout(db_, 5000);
    TY_RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL;"));
    TY_RETURN_IF_ERROR(Exec(synchronous_full ? "PRAGMA synchronous=FULL;" : "PRAGMA synchronous=NORMAL;"));
    TY_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=ON;"));
    TY_RETURN_IF_ERROR(Migrate());
    for (size_t i = 0; i < kTables.size(); ++i) {
      std::string up = std::string("INSERT INTO ") + kTables[i] +
                       " (key, doc) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET doc = excluded.doc";
      std::string del = std::string("DELETE FROM ") + kTables[i] + " WHERE key = ?1";
      if (sqlite3_prepare_v2(db_, up.c_str(), -1, &upsert_[i], nullptr) != SQLITE_OK) return Error("prepare");
      if (sqlite3_prepare_v2(db_, del.c_str(), -1, &delete_[i], nullptr) != SQLITE_OK) return Error("prepare");
    }
    return Status::Ok();
  }

  Status Commit(const std::vector<Write>& writes) override {
    if (writes.empty()) return Status::Ok();
    TY_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;"));
    for (const auto& w : writes) {
      sqlite3_stmt* s = w.doc.empty() ? delete_[Index(w.kind)] : upsert_[Index(w.kind)];
      sqlite3_reset(s);
      sqlite3_bind_text(s, 1, w.key.data(), static_cast<int>(w.key.size()), SQLITE_STATIC);
      if (!w.doc.empty()) sqlite3_bind_text(s, 2, w.doc.data(), static_cast<int>(w.doc.size()), SQLITE_STATIC);
      if (sqlite3_step(s) != SQLITE_DONE) {
        Status st = Error("write");
        sqlite3_reset(s);
        (void)Exec("ROLLBACK;");  // reports st, the first error; a failed rollback adds nothing
        return st;
      }
      sqlite3_reset(s);
      sqlite3_clear_bindings(s);
    }
    Status st = Exec("COMMIT;");
    if (!st.ok()) (void)Exec("ROLLBACK;");  // reports st, the first error
    return st;
  }

  Status LoadAll(Kind kind, const std::function<void(const std::string&, const std::string&)>& fn) override {
    Stmt s;
    std::string sql = std::string("SELECT key, doc FROM ") + kTables[Index(kind)] + " ORDER BY key";
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, s.out(), nullptr) != SQLITE_OK) return Error("prepare");
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
      auto text = [&](int col) {
        return std::string(reinterpret_cast<const char*>(sqlite3_column_text(s.get(), col)),
                           static_cast<size_t>(sqlite3_column_bytes(s.get(), col)));
      };
      fn(text(0), text(1));
    }
    if (rc != SQLITE_DONE) return Error("read");
    return Status::Ok();
  }

  int SchemaVersion() const override { return version_; }

 private:
  static size_t Index(Kind k) { return static_cast<size_t>(k); }

  Status Error(const std::string& what) const {
    return Internal("sqlite " + what + ": " + (db_ ? sqlite3_errmsg(db_) : "no database"));
  }

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown";
      sqlite3_free(err);
      return Internal(std::string("sqlite: ") + msg + " in: " + sql);
    }
    return Status::Ok();
  }

  Status Migrate() {
    TY_RETURN_IF_ERROR(Exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY);"));
    {
      Stmt s;
      if (sqlite3_prepare_v2(db_, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", -1, s.out(),
                             nullptr) != SQLITE_OK)
        return Error("prepare");
      if (sqlite3_step(s.get()) == SQLITE_ROW) version_ = sqlite3_column_int(s.get(), 0);
    }
    const auto& m = Migrations();
    if (version_ > static_cast<int>(m.size()))
      return FailedPrecondition("store schema version " + std::to_string(version_) +
                                " is newer than this binary supports (" + std::to_string(m.size()) + ")");
    for (size_t v = static_cast<size_t>(version_); v < m.size(); ++v) {
      TY_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;"));
      Status st = Exec(m[v]);
      if (st.ok()) {
        std::string rec = "INSERT INTO schema_migrations (version) VALUES (" + std::to_string(v + 1) + ");";
        st = Exec(rec.c_str());
      }
      if (st.ok()) st = Exec("COMMIT;");
      if (!st.ok()) {
        (void)Exec("ROLLBACK;");  // reports st, the first error
        return st;
      }
      version_ = static_cast<int>(v + 1);
    }
    return Status::Ok();
  }

  sqlite3* db_ = nullptr;
  std::array<sqlite3_stmt*, kTables.size()> upsert_{};
  std::array<sqlite3_stmt*, kTables.size()> delete_{};
  int version_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, bool synchronous_full) {
  auto s = std::make_unique<SqliteStore>();
  Status st = s->Open(path, synchronous_full);
  if (!st.ok()) return st;
  return std::unique_ptr<Store>(std::move(s));
}

}  // namespace ty::store
