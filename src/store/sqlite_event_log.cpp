#include <sqlite3.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "store/event_log.h"
#include "store/tables.h"

namespace ty::store {
namespace {

class SqliteEventLog final : public PublishingEventLog {
 public:
  ~SqliteEventLog() override {
    sqlite3_finalize(read_);
    sqlite3_finalize(read_audit_);
    sqlite3_finalize(save_cursor_);
    if (db_) sqlite3_close(db_);
  }

  Status Open(const std::string& path) {
    // The controller's store has created the file and its tables already.
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK)
      return Error("open " + path);
    sqlite3_busy_timeout(db_, 5000);
    TY_RETURN_IF_ERROR(Exec("PRAGMA synchronous=NORMAL;"));
    auto newest = NewestStored();
    if (!newest.ok()) return newest.status();
    Published(*newest);
    return Status::Ok();
  }

  Status Read(uint64_t after, size_t limit, std::vector<StoredEvent>* out) override {
    std::lock_guard lock(db_mu_);
    sqlite3_stmt* s = Prepared(&read_, "SELECT key, doc FROM events WHERE key > ?1 ORDER BY key LIMIT ?2");
    if (!s) return Error("prepare");
    Resetter done{s};
    const std::string from = Key(after);
    sqlite3_bind_text(s, 1, from.data(), static_cast<int>(from.size()), SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(limit));
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      StoredEvent e;
      e.seq = std::strtoull(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), nullptr, 10);
      e.doc.assign(reinterpret_cast<const char*>(sqlite3_column_text(s, 1)), static_cast<size_t>(sqlite3_column_bytes(s, 1)));
      out->push_back(std::move(e));
    }
    if (rc != SQLITE_DONE) return Error("read events");
    return Status::Ok();
  }

  StatusOr<uint64_t> NewestStored() override { return Edge("SELECT MAX(key) FROM events"); }
  StatusOr<uint64_t> OldestStored() override { return Edge("SELECT MIN(key) FROM events"); }


  StatusOr<uint64_t> LoadCursor(const std::string& consumer, bool* found) override {
    std::lock_guard lock(db_mu_);
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, "SELECT doc FROM event_cursors WHERE key = ?1", -1, &s, nullptr) != SQLITE_OK)
      return Error("prepare");
    sqlite3_bind_text(s, 1, consumer.data(), static_cast<int>(consumer.size()), SQLITE_STATIC);
    uint64_t seq = 0;
    *found = false;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
      seq = std::strtoull(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), nullptr, 10);
      *found = true;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("read cursor");
    return seq;
  }

  // A webhook saves its cursor after every delivery, so this is on the delivery path of each event.
  Status SaveCursor(const std::string& consumer, uint64_t seq) override {
    std::lock_guard lock(db_mu_);
    sqlite3_stmt* s = Prepared(&save_cursor_,
                               "INSERT INTO event_cursors (key, doc) VALUES (?1, ?2) "
                               "ON CONFLICT(key) DO UPDATE SET doc = excluded.doc");
    if (!s) return Error("prepare");
    Resetter done{s};
    const std::string v = std::to_string(seq);
    sqlite3_bind_text(s, 1, consumer.data(), static_cast<int>(consumer.size()), SQLITE_STATIC);
    sqlite3_bind_text(s, 2, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) return Error("save cursor");
    return Status::Ok();
  }

  StatusOr<int64_t> Prune(uint64_t keep, int64_t before_ms) override {
    int64_t gone = 0;
    auto newest = NewestStored();
    if (!newest.ok()) return newest.status();
    std::lock_guard lock(db_mu_);
    if (*newest > keep) {
      const std::string below = Key(*newest - keep);
      sqlite3_stmt* s = nullptr;
      if (sqlite3_prepare_v2(db_, "DELETE FROM events WHERE key <= ?1", -1, &s, nullptr) != SQLITE_OK) return Error("prepare");
      sqlite3_bind_text(s, 1, below.data(), static_cast<int>(below.size()), SQLITE_STATIC);
      int rc = sqlite3_step(s);
      sqlite3_finalize(s);
      if (rc != SQLITE_DONE) return Error("prune events");
      gone += sqlite3_changes(db_);
    }
    // Events are stored in time order (near enough: "at" is the controller's clock at each turn),
    // so the old ones are a prefix; take it in slices so the write lock is held only briefly.
    while (before_ms > 0) {
      sqlite3_stmt* s = nullptr;
      if (sqlite3_prepare_v2(db_,
                             "DELETE FROM events WHERE key IN (SELECT key FROM events ORDER BY key LIMIT 1000) "
                             "AND json_extract(doc, '$.at') < ?1",
                             -1, &s, nullptr) != SQLITE_OK)
        return Error("prepare");
      sqlite3_bind_int64(s, 1, before_ms);
      int rc = sqlite3_step(s);
      sqlite3_finalize(s);
      if (rc != SQLITE_DONE) return Error("prune events");
      const int n = sqlite3_changes(db_);
      gone += n;
      if (n < 1000) break;
    }
    return gone;
  }

  Status ReadAudit(const std::string& lowest, const std::string& below, size_t limit,
                   std::vector<std::pair<std::string, std::string>>* out) override {
    std::lock_guard lock(db_mu_);
    sqlite3_stmt* s =
        Prepared(&read_audit_, "SELECT key, doc FROM audit WHERE key >= ?1 AND key < ?2 ORDER BY key DESC LIMIT ?3");
    if (!s) return Error("prepare");
    Resetter done{s};
    sqlite3_bind_text(s, 1, lowest.data(), static_cast<int>(lowest.size()), SQLITE_STATIC);
    sqlite3_bind_text(s, 2, below.data(), static_cast<int>(below.size()), SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, static_cast<sqlite3_int64>(limit));
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      auto text = [&](int col) {
        return std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, col)),
                           static_cast<size_t>(sqlite3_column_bytes(s, col)));
      };
      out->emplace_back(text(0), text(1));
    }
    if (rc != SQLITE_DONE) return Error("read audit records");
    return Status::Ok();
  }

  StatusOr<int64_t> PruneAudit(uint64_t keep, int64_t before_ms) override {
    std::lock_guard lock(db_mu_);
    int64_t gone = 0;
    // Keys begin with the time: the old records are a prefix of the key order.
    if (before_ms > 0) {
      const std::string below = AuditKey(before_ms, "");
      TY_RETURN_IF_ERROR(Delete("DELETE FROM audit WHERE key < ?1", &below, 0, &gone));
    }
    TY_RETURN_IF_ERROR(Delete("DELETE FROM audit WHERE key <= (SELECT key FROM audit ORDER BY key DESC LIMIT 1 OFFSET ?1)",
                              nullptr, static_cast<int64_t>(keep), &gone));
    return gone;
  }

 private:
  // One DELETE whose parameter ?1 is `text`, or `number` when text is null. REQUIRES: db_mu_ held.
  Status Delete(const char* sql, const std::string* text, int64_t number, int64_t* gone) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) return Error("prepare");
    if (text) sqlite3_bind_text(s, 1, text->data(), static_cast<int>(text->size()), SQLITE_STATIC);
    else sqlite3_bind_int64(s, 1, number);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return Error("prune audit records");
    *gone += sqlite3_changes(db_);
    return Status::Ok();
  }

  // The hot statements (Read, SaveCursor: once per delivered event for each webhook) are
  // prepared once and kept; compiling them each time was about a seventh of a webhook thread's
  // CPU. Used under db_mu_ only.
  sqlite3_stmt* Prepared(sqlite3_stmt** slot, const char* sql) {
    if (!*slot && sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, slot, nullptr) != SQLITE_OK) {
      sqlite3_finalize(*slot);
      *slot = nullptr;
    }
    return *slot;
  }
  // Resets a kept statement when the call ends, so that it holds no read snapshot of the WAL
  // (which would keep checkpoints from finishing) and no pointer to the caller's strings.
  struct Resetter {
    sqlite3_stmt* s;
    ~Resetter() {
      sqlite3_reset(s);
      sqlite3_clear_bindings(s);
    }
  };

  Status Error(const std::string& what) const {
    return Internal("sqlite (events) " + what + ": " + (db_ ? sqlite3_errmsg(db_) : "no database"));
  }

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown";
      sqlite3_free(err);
      return Internal(std::string("sqlite (events): ") + msg);
    }
    return Status::Ok();
  }

  StatusOr<uint64_t> Edge(const char* sql) {
    std::lock_guard lock(db_mu_);
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) return Error("prepare");
    uint64_t seq = 0;
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL)
      seq = std::strtoull(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), nullptr, 10);
    sqlite3_finalize(s);
    return seq;
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt* read_ = nullptr;
  sqlite3_stmt* read_audit_ = nullptr;
  sqlite3_stmt* save_cursor_ = nullptr;
  std::mutex db_mu_;
};

}  // namespace

StatusOr<std::unique_ptr<EventLog>> EventLog::Open(const std::string& db_path) {
  auto log = std::make_unique<SqliteEventLog>();
  Status st = log->Open(db_path);
  if (!st.ok()) return st;
  return std::unique_ptr<EventLog>(std::move(log));
}

}  // namespace ty::store
