#include "api/console.h"

#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/strings.h"
#include "http/server.h"

namespace ty::api {

namespace fs = std::filesystem;

namespace {

// One file at most this large, and the whole table: the console is a few pages of code.
constexpr uintmax_t kMaxFileBytes = 4 * 1024 * 1024;
constexpr size_t kMaxFiles = 500;

std::string ContentTypeOf(const fs::path& p) {
  static const std::pair<const char*, const char*> kTypes[] = {
      {".html", "text/html; charset=utf-8"},  {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
      {".svg", "image/svg+xml"},               {".png", "image/png"},
      {".ico", "image/x-icon"},                {".json", "application/json"},
      {".txt", "text/plain; charset=utf-8"},
  };
  const std::string ext = p.extension().string();
  for (const auto& [e, type] : kTypes)
    if (ext == e) return type;
  return "";
}

bool ReadSmallFile(const fs::path& p, std::string* out) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(p, ec);
  if (ec || size > kMaxFileBytes) return false;
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

}  // namespace

void ConsoleAssets::Load(const std::string& dir) {
  files_.clear();
  const fs::path app = fs::path(dir) / "app";
  std::error_code ec;
  // Symbolic links are not followed, nor listed: what is served is what lies in app/ itself.
  for (fs::recursive_directory_iterator it(app, fs::directory_options::none, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_symlink() || !it->is_regular_file()) continue;
    const std::string type = ContentTypeOf(it->path());
    if (type.empty()) continue;
    if (files_.size() == kMaxFiles) {
      spdlog::warn("console: more than {} files under {}; the rest are not served", kMaxFiles, app.string());
      break;
    }
    ConsoleFile f{type, ""};
    if (!ReadSmallFile(it->path(), &f.body)) {
      spdlog::warn("console: {} is unreadable or larger than {} bytes; not served", it->path().string(), kMaxFileBytes);
      continue;
    }
    files_["static/" + fs::relative(it->path(), app).generic_string()] = std::move(f);
  }
  if (ec || files_.empty())
    spdlog::warn("console: no pages under {} ([console] assets_dir): /console/ will answer 404", app.string());
  // The charting library, as its package installs it (scripts/install-console-deps).
  const fs::path uplot = fs::path(dir) / "node_modules" / "uplot" / "dist";
  for (const auto& [name, file] : {std::pair{"vendor/uplot.js", "uPlot.iife.min.js"}, std::pair{"vendor/uplot.css", "uPlot.min.css"}}) {
    ConsoleFile f{ContentTypeOf(file), ""};
    if (ReadSmallFile(uplot / file, &f.body)) {
      files_[name] = std::move(f);
    } else {
      spdlog::warn("console: {} is missing (run scripts/install-console-deps): charts will not draw",
                   (uplot / file).string());
    }
  }
}

const ConsoleFile* ConsoleAssets::Find(const std::string& name) const {
  auto it = files_.find(name);
  return it == files_.end() ? nullptr : &it->second;
}

ConsoleSession ConsoleSessions::Create(const std::string& access_key_id, int64_t now_ms, std::string* cookie) {
  *cookie = RandomHex(32);
  ConsoleSession s;
  s.access_key_id = access_key_id;
  s.csrf_token = RandomHex(32);
  s.created_ms = s.last_seen_ms = now_ms;
  s.expires_ms = now_ms + lifetime_ms_;
  MutexLock lock(mu_);
  while (sessions_.size() >= max_sessions_) {
    auto oldest = sessions_.begin();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
      if (it->second.last_seen_ms < oldest->second.last_seen_ms) oldest = it;
    sessions_.erase(oldest);
  }
  sessions_[Sha256Hex(*cookie)] = s;
  return s;
}

std::optional<ConsoleSession> ConsoleSessions::Find(const std::string& cookie, int64_t now_ms) {
  if (cookie.size() != 64) return std::nullopt;
  const std::string key = Sha256Hex(cookie);
  MutexLock lock(mu_);
  auto it = sessions_.find(key);
  if (it == sessions_.end()) return std::nullopt;
  if (now_ms >= it->second.expires_ms || now_ms - it->second.last_seen_ms >= idle_ms_) {
    sessions_.erase(it);
    return std::nullopt;
  }
  it->second.last_seen_ms = now_ms;
  return it->second;
}

void ConsoleSessions::Remove(const std::string& cookie) {
  const std::string key = Sha256Hex(cookie);
  MutexLock lock(mu_);
  sessions_.erase(key);
}

void ConsoleSessions::RemoveKey(const std::string& access_key_id) {
  MutexLock lock(mu_);
  std::erase_if(sessions_, [&](const auto& kv) { return kv.second.access_key_id == access_key_id; });
}

size_t ConsoleSessions::size() const {
  MutexLock lock(mu_);
  return sessions_.size();
}

std::string CookieValue(const http::Request& req, const std::string& name) {
  for (const auto& [field, value] : req.headers) {
    if (!EqualsIgnoreCase(field, "cookie")) continue;
    for (const std::string& pair : Split(value, ';')) {
      std::string_view p = Trim(pair);
      const size_t eq = p.find('=');
      if (eq != std::string_view::npos && p.substr(0, eq) == name) return std::string(p.substr(eq + 1));
    }
  }
  return "";
}

std::string CrossSiteReason(const http::Request& req) {
  if (const std::string* site = req.Header("Sec-Fetch-Site"); site && *site != "same-origin")
    return "the browser says the request came from another site (Sec-Fetch-Site: " + *site + ")";
  if (const std::string* origin = req.Header("Origin")) {
    const std::string* host = req.Header("Host");
    const std::string expected = std::string(req.secure_transport ? "https://" : "http://") + (host ? *host : "");
    if (!host || *origin != expected) return "its Origin (" + *origin + ") is not this console's (" + expected + ")";
  }
  return "";
}

bool SecretEquals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace ty::api
