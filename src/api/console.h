// The web console's server side (docs/console.md): its files and its sign-in sessions. The
// routes themselves live in server.cpp, beside the API they call through.
//
// - ConsoleAssets: the files under /console/static/ and /console/vendor/, read once at start into
//   memory. A request names an entry of that table; no part of a request ever becomes a path.
// - ConsoleSessions: who signed in, by an unguessable cookie, with a token each state-changing
//   request must repeat in a header (the cookie alone is what a cross-site page could make the
//   browser send).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/thread_annotations.h"

namespace ty::http {
struct Request;
}

namespace ty::api {

struct ConsoleFile {
  std::string content_type;
  std::string body;
};

class ConsoleAssets {
 public:
  // Reads `dir`/app (every regular file below it, symbolic links skipped) and the charting
  // library's two files from `dir`/node_modules. Missing files are logged, not fatal: the console
  // serves what it has.
  void Load(const std::string& dir);
  // "static/app.js", "vendor/uplot.js", ...: null when there is no such file.
  const ConsoleFile* Find(const std::string& name) const;
  size_t size() const { return files_.size(); }

 private:
  std::map<std::string, ConsoleFile, std::less<>> files_;
};

struct ConsoleSession {
  std::string access_key_id;  // the key it signed in with: its principal is looked up on every request
  std::string csrf_token;
  int64_t created_ms = 0;
  int64_t last_seen_ms = 0;
  int64_t expires_ms = 0;     // created + session_hours
};

class ConsoleSessions {
 public:
  ConsoleSessions(int64_t lifetime_ms, int64_t idle_ms, size_t max_sessions)
      : lifetime_ms_(lifetime_ms), idle_ms_(idle_ms), max_sessions_(max_sessions) {}

  // A new session for `access_key_id`; `*cookie` gets the value the browser keeps.
  ConsoleSession Create(const std::string& access_key_id, int64_t now_ms, std::string* cookie);
  // The live session of a cookie value (its idle clock restarted), or nullopt: unknown, expired
  // or idle too long (then forgotten).
  std::optional<ConsoleSession> Find(const std::string& cookie, int64_t now_ms);
  void Remove(const std::string& cookie);
  // Ends every session signed in with this key (the key was deleted or deactivated).
  void RemoveKey(const std::string& access_key_id);
  size_t size() const;

 private:
  const int64_t lifetime_ms_, idle_ms_;
  const size_t max_sessions_;
  mutable Mutex mu_;
  // By the SHA-256 of the cookie: a lookup compares hashes, so its timing says nothing of a
  // cookie, and the table holds nothing a reader of memory could sign in with.
  std::map<std::string, ConsoleSession> sessions_ GUARDED_BY(mu_);
};

// The cookie's name and the header that carries the session's token on state-changing requests.
inline constexpr const char* kConsoleCookie = "trainyard_console";
inline constexpr const char* kConsoleCsrfHeader = "X-Trainyard-Csrf";

// The value of cookie `name` in the request's Cookie headers, or "".
std::string CookieValue(const http::Request& req, const std::string& name);

// Why a request is not the console's own page calling (empty: it is). A state-changing request
// must come from the console's origin: an Origin header, when sent, must name this host, and a
// browser's Sec-Fetch-Site, when sent, must be same-origin.
std::string CrossSiteReason(const http::Request& req);

// Constant-time equality of two secrets.
bool SecretEquals(const std::string& a, const std::string& b);

}  // namespace ty::api
