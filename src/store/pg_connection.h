// One libpq connection, shared by the PostgreSQL store, its event log and the leader lease
// (postgres_store.cpp, leader_lease.cpp). Internal to ty_store_postgres.
#pragma once

#include <libpq-fe.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace ty::store::pg {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// The connection string without its password, for messages.
inline std::string Redacted(const std::string& url) {
  std::string out = url;
  const size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    const size_t at = out.find('@', scheme);
    const size_t colon = out.find(':', scheme + 3);
    if (at != std::string::npos && colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  }
  const size_t pw = out.find("password=");
  if (pw != std::string::npos) {
    const size_t end = out.find_first_of(" &", pw);
    out.replace(pw + 9, (end == std::string::npos ? out.size() : end) - pw - 9, "***");
  }
  return out;
}

// One libpq connection. Not thread-safe: each user holds its own, or a mutex.
class Connection {
 public:
  ~Connection() {
    if (conn_) PQfinish(conn_);
  }

  Status Open(const std::string& url, const std::string& who) {
    who_ = who;
    conn_ = PQconnectdb(url.c_str());
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK)
      return Unavailable("PostgreSQL (" + who_ + "): cannot connect to " + Redacted(url) + ": " + Message());
    // Notices ("... already exists, skipping") are not for the server's log.
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
    // Commits wait for the write-ahead log to be flushed (the server's default; said here so a
    // database configured otherwise does not weaken the promise silently).
    return Exec("SET synchronous_commit = on");
  }

  PGconn* get() const { return conn_; }

  // Reconnects a connection that broke (the database restarted, the network went); a no-op on a
  // healthy one. The next statement then runs on a fresh session.
  Status Reset() {
    if (conn_ && PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
    if (!conn_) return Unavailable("PostgreSQL (" + who_ + "): no connection");
    PQreset(conn_);
    if (PQstatus(conn_) != CONNECTION_OK) return Unavailable("PostgreSQL (" + who_ + "): cannot reconnect: " + Message());
    return Exec("SET synchronous_commit = on");
  }

  std::string Message() const {
    std::string m = conn_ ? PQerrorMessage(conn_) : "out of memory";
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return m;
  }

  Status Error(const std::string& what, const PGresult* r = nullptr) const {
    std::string m = r ? PQresultErrorMessage(r) : Message();
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    // A connection that broke (the database restarted, the network went) is unavailable, not a bug.
    const bool lost = !conn_ || PQstatus(conn_) != CONNECTION_OK;
    return Status(lost ? Code::kUnavailable : Code::kInternal, "PostgreSQL (" + who_ + ") " + what + ": " + m);
  }

  Status Exec(const std::string& sql) {
    Result r(PQexec(conn_, sql.c_str()));
    const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return Error(sql.substr(0, 60), r.get());
    return Status::Ok();
  }

  // A statement with text parameters; its rows (if any) in `out`.
  Status Query(const char* sql, std::initializer_list<const std::string*> params, Result* out = nullptr) {
    TY_RETURN_IF_ERROR(Reset());
    std::vector<const char*> values;
    std::vector<int> lengths;
    for (const std::string* p : params) {
      values.push_back(p->c_str());
      lengths.push_back(static_cast<int>(p->size()));
    }
    Result r(PQexecParams(conn_, sql, static_cast<int>(values.size()), nullptr, values.data(), lengths.data(), nullptr, 0));
    const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return Error(sql, r.get());
    if (out) *out = std::move(r);
    return Status::Ok();
  }

 private:
  PGconn* conn_ = nullptr;
  std::string who_;
};

inline std::string Text(const PGresult* r, int row, int col) {
  return std::string(PQgetvalue(r, row, col), static_cast<size_t>(PQgetlength(r, row, col)));
}

}  // namespace ty::store::pg
