#include "core/config.h"

#include <toml++/toml.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <cctype>
#include <cstdlib>
#include <set>

namespace ty {

const InstanceTypeSpec* Config::FindInstanceType(const std::string& name) const {
  for (const auto& t : instance_types)
    if (t.name == name) return &t;
  return nullptr;
}

bool Config::TlsEnabled() const {
  if (tls == "on") return true;
  if (tls == "off") return false;
  if (!tls_certificate_file.empty()) return true;
  // Loopback traffic never leaves the machine: the quick start stays plain http on 127.0.0.1.
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return !(host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0);
}

namespace {
bool SlurmWordChar(char ch, bool colon) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' ||
         ch == '.' || (colon && ch == ':');
}
}  // namespace

bool ValidSlurmPartitionName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char ch : name)
    if (!SlurmWordChar(ch, false)) return false;
  return true;
}

bool ValidSlurmConstraint(std::string_view constraint) {
  if (constraint.empty() || constraint.size() > 256) return false;
  const bool any = constraint.find('|') != std::string_view::npos;
  const char sep = any ? '|' : '&';
  size_t word = 0;  // length of the feature being read
  for (char ch : constraint) {
    if (ch == sep) {
      if (word == 0) return false;  // an empty feature: "a&&b", "&a"
      word = 0;
    } else if (SlurmWordChar(ch, true)) {
      ++word;
    } else {
      return false;  // whitespace, control characters, the other separator, Slurm's brackets and counts
    }
  }
  return word > 0;
}

int64_t Config::CapacityOf(const std::string& key) const {
  const CapacityKeyParts k = SplitCapacityKey(key);
  const InstanceTypeSpec* t = FindInstanceType(k.type);
  return t ? t->Capacity(k.spot) : 0;
}

Config DefaultConfig() {
  Config c;
  // A small catalogue that fits a laptop or CI box: CPU types for script-mode jobs, and GPU
  // types with zero count (enable them in a config file on a GPU machine).
  // Prices are SageMaker Training's on-demand list prices in us-east-1 (USD per instance-hour);
  // spot capacity is priced at 30% of them unless a config file says otherwise.
  auto type = [](const char* name, int64_t count, int64_t spot, int vcpus, int gpus, int64_t memory_mib,
                 double price) {
    InstanceTypeSpec t;
    t.name = name;
    t.count = count;
    t.spot_count = spot;
    t.vcpus = vcpus;
    t.gpus = gpus;
    t.memory_mib = memory_mib;
    t.price_per_hour = price;
    return t;
  };
  c.instance_types = {
      type("ml.m5.large", 4, 2, 2, 0, 8192, 0.115),        type("ml.m5.xlarge", 2, 1, 4, 0, 16384, 0.23),
      type("ml.m5.2xlarge", 1, 0, 8, 0, 32768, 0.461),     type("ml.c5.xlarge", 2, 0, 4, 0, 8192, 0.204),
      type("ml.c5.2xlarge", 1, 0, 8, 0, 16384, 0.408),     type("ml.g5.xlarge", 0, 0, 4, 1, 16384, 1.408),
      type("ml.g5.12xlarge", 0, 0, 48, 4, 196608, 7.09),   type("ml.p4d.24xlarge", 0, 0, 96, 8, 1179648, 37.688),
  };
  return c;
}

namespace {

Status CheckKeys(const toml::table& t, const std::set<std::string>& allowed, const std::string& where) {
  for (const auto& [k, v] : t) {
    if (!allowed.count(std::string(k.str())))
      return InvalidArgument("config: unknown key '" + std::string(k.str()) + "' in " + where);
  }
  return Status::Ok();
}

template <typename T>
Status Read(const toml::table& t, const char* key, T* out, const std::string& where) {
  const toml::node* n = t.get(key);
  if (!n) return Status::Ok();
  if constexpr (std::is_same_v<T, std::string>) {
    if (!n->is_string()) return InvalidArgument("config: " + where + key + " must be a string");
    *out = n->as_string()->get();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!n->is_boolean()) return InvalidArgument("config: " + where + key + " must be a boolean");
    *out = n->as_boolean()->get();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!n->is_number()) return InvalidArgument("config: " + where + key + " must be a number");
    *out = n->is_integer() ? static_cast<T>(n->as_integer()->get()) : static_cast<T>(n->as_floating_point()->get());
  } else {
    if (!n->is_integer()) return InvalidArgument("config: " + where + key + " must be an integer");
    *out = static_cast<T>(n->as_integer()->get());
  }
  return Status::Ok();
}

Status ReadStrings(const toml::table& t, const char* key, std::vector<std::string>* out, const std::string& where) {
  const toml::node* n = t.get(key);
  if (!n) return Status::Ok();
  const auto* arr = n->as_array();
  const std::string what = "config: " + where + key + " must be an array of strings";
  if (!arr) return InvalidArgument(what);
  out->clear();
  for (const auto& e : *arr) {
    if (!e.is_string()) return InvalidArgument(what);
    out->push_back(e.as_string()->get());
  }
  return Status::Ok();
}

// [regions] (docs/regions.md). The secret file is read here, once: a federation secret that other
// users can read is refused, as ssh refuses a private key that is.
Status ReadRegions(toml::table& root, const std::string& config_path, Config* c) {
  auto* r = root["regions"].as_table();
  if (!r) return Status::Ok();
  TY_RETURN_IF_ERROR(CheckKeys(*r, {"peers", "peer_secret_file", "connect_timeout_seconds", "timeout_seconds",
                                    "replay_window_seconds"},
                               "[regions]"));
  RegionsConfig& g = c->regions;
  if (const toml::node* n = r->get("peers")) {
    const toml::table* peers = n->as_table();
    if (!peers) return InvalidArgument("config: regions.peers must be a table of region name = \"http://host:port\"");
    for (const auto& [name, url] : *peers) {
      const std::string region(name.str());
      if (!url.is_string()) return InvalidArgument("config: regions.peers." + region + " must be a string (the peer's URL)");
      std::string u = url.as_string()->get();
      if (region.empty() || region.size() > 64 ||
          region.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
        return InvalidArgument("config: regions.peers: '" + region +
                               "' is not a region name (lower-case letters, digits and '-', at most 64)");
      if (u.rfind("http://", 0) != 0 && u.rfind("https://", 0) != 0)
        return InvalidArgument("config: regions.peers." + region + " must be an http:// or https:// URL, not '" + u + "'");
      while (!u.empty() && u.back() == '/') u.pop_back();
      g.peers[region] = u;
    }
  }
  TY_RETURN_IF_ERROR(Read(*r, "peer_secret_file", &g.peer_secret_file, "regions."));
  TY_RETURN_IF_ERROR(Read(*r, "connect_timeout_seconds", &g.connect_timeout_seconds, "regions."));
  TY_RETURN_IF_ERROR(Read(*r, "timeout_seconds", &g.timeout_seconds, "regions."));
  TY_RETURN_IF_ERROR(Read(*r, "replay_window_seconds", &g.replay_window_seconds, "regions."));
  if (g.connect_timeout_seconds < 1 || g.connect_timeout_seconds > 600)
    return InvalidArgument("config: regions.connect_timeout_seconds must be between 1 and 600");
  if (g.timeout_seconds < 1 || g.timeout_seconds > 3600)
    return InvalidArgument("config: regions.timeout_seconds must be between 1 and 3600");
  if (g.replay_window_seconds < 1 || g.replay_window_seconds > 3600)
    return InvalidArgument("config: regions.replay_window_seconds must be between 1 and 3600");
  // A region with no peers of its own may still take forwarded requests: the secret is what it needs.
  if (g.peer_secret_file.empty()) {
    if (g.peers.empty()) return Status::Ok();
    return InvalidArgument("config: regions.peers needs regions.peer_secret_file (the federation's shared secret)");
  }
  std::string file = g.peer_secret_file;
  if (file.front() != '/') {  // relative to the config file, as a person reading it expects
    const size_t slash = config_path.rfind('/');
    if (slash != std::string::npos) file = config_path.substr(0, slash + 1) + file;
  }
  struct stat st {};
  if (stat(file.c_str(), &st) != 0)
    return InvalidArgument("config: regions.peer_secret_file: cannot read " + file + ": " + std::strerror(errno));
  if ((st.st_mode & 077) != 0)
    return InvalidArgument("config: regions.peer_secret_file: " + file +
                           " may be read by other users (mode " + [&] {
                             char m[8];
                             std::snprintf(m, sizeof m, "%04o", static_cast<unsigned>(st.st_mode & 07777));
                             return std::string(m);
                           }() + "); make it 0600");
  std::ifstream in(file, std::ios::binary);
  std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) secret.pop_back();
  if (secret.size() < 32)
    return InvalidArgument("config: regions.peer_secret_file: " + file +
                           " holds fewer than 32 characters; use a long random secret (openssl rand -hex 32)");
  g.peer_secret = std::move(secret);
  return Status::Ok();
}

// [events], [audit], [[webhooks]] and [[alarms]].
Status ReadEvents(toml::table& root, Config* c) {
  if (auto* e = root["events"].as_table()) {
    TY_RETURN_IF_ERROR(CheckKeys(*e, {"enabled", "retention_days", "max_events", "max_streams", "allow_local_endpoints"}, "[events]"));
    TY_RETURN_IF_ERROR(Read(*e, "enabled", &c->events_enabled, "events."));
    TY_RETURN_IF_ERROR(Read(*e, "retention_days", &c->events_retention_days, "events."));
    TY_RETURN_IF_ERROR(Read(*e, "max_events", &c->events_max, "events."));
    TY_RETURN_IF_ERROR(Read(*e, "max_streams", &c->events_max_streams, "events."));
    TY_RETURN_IF_ERROR(Read(*e, "allow_local_endpoints", &c->events_allow_local_endpoints, "events."));
    if (c->events_retention_days < 0) return InvalidArgument("config: events.retention_days must be >= 0");
    if (c->events_max < 1) return InvalidArgument("config: events.max_events must be >= 1");
    if (c->events_max_streams < 0) return InvalidArgument("config: events.max_streams must be >= 0");
  }
  if (auto* a = root["audit"].as_table()) {
    TY_RETURN_IF_ERROR(CheckKeys(*a, {"retain_days", "max_records", "record_reads", "trusted_proxies"}, "[audit]"));
    TY_RETURN_IF_ERROR(Read(*a, "retain_days", &c->audit_retain_days, "audit."));
    TY_RETURN_IF_ERROR(Read(*a, "max_records", &c->audit_max_records, "audit."));
    TY_RETURN_IF_ERROR(Read(*a, "record_reads", &c->audit_record_reads, "audit."));
    TY_RETURN_IF_ERROR(ReadStrings(*a, "trusted_proxies", &c->audit_trusted_proxies, "audit."));
    if (c->audit_retain_days < 0) return InvalidArgument("config: audit.retain_days must be >= 0 (0 = keep forever)");
    if (c->audit_max_records < 1) return InvalidArgument("config: audit.max_records must be >= 1");
  }
  std::set<std::string> names;
  if (const toml::node* n = root.get("webhooks")) {
    const auto* arr = n->as_array();
    if (!arr) return InvalidArgument("config: webhooks must be an array of tables ([[webhooks]])");
    for (size_t i = 0; i < arr->size(); ++i) {
      const auto* t = arr->get(i)->as_table();
      const std::string where = "webhooks[" + std::to_string(i) + "].";
      if (!t) return InvalidArgument("config: " + where + " must be a table");
      TY_RETURN_IF_ERROR(CheckKeys(*t, {"name", "url", "sources", "detail_types", "queues", "shares", "tags", "pattern",
                                        "secret", "timeout_seconds", "max_backoff_seconds"},
                                   where));
      WebhookConfig w;
      TY_RETURN_IF_ERROR(Read(*t, "name", &w.name, where));
      TY_RETURN_IF_ERROR(Read(*t, "url", &w.url, where));
      TY_RETURN_IF_ERROR(ReadStrings(*t, "sources", &w.sources, where));
      TY_RETURN_IF_ERROR(ReadStrings(*t, "detail_types", &w.detail_types, where));
      TY_RETURN_IF_ERROR(ReadStrings(*t, "queues", &w.queues, where));
      TY_RETURN_IF_ERROR(ReadStrings(*t, "shares", &w.shares, where));
      TY_RETURN_IF_ERROR(Read(*t, "pattern", &w.pattern, where));
      TY_RETURN_IF_ERROR(Read(*t, "secret", &w.secret, where));
      TY_RETURN_IF_ERROR(Read(*t, "timeout_seconds", &w.timeout_seconds, where));
      TY_RETURN_IF_ERROR(Read(*t, "max_backoff_seconds", &w.max_backoff_seconds, where));
      if (const toml::node* tags = t->get("tags")) {
        const auto* tt = tags->as_table();
        if (!tt) return InvalidArgument("config: " + where + "tags must be a table of strings (key = \"value\")");
        for (const auto& [k, v] : *tt) {
          if (!v.is_string()) return InvalidArgument("config: " + where + "tags." + std::string(k.str()) + " must be a string");
          w.tags.emplace_back(std::string(k.str()), v.as_string()->get());
        }
      }
      if (w.name.empty()) return InvalidArgument("config: " + where + "name is required");
      if (!names.insert(w.name).second) return InvalidArgument("config: " + where + "name '" + w.name + "' is used twice");
      if (w.url.rfind("http://", 0) != 0 && w.url.rfind("https://", 0) != 0)
        return InvalidArgument("config: " + where + "url must start with http:// or https://");
      if (w.timeout_seconds < 1) return InvalidArgument("config: " + where + "timeout_seconds must be >= 1");
      if (w.max_backoff_seconds < 1) return InvalidArgument("config: " + where + "max_backoff_seconds must be >= 1");
      c->webhooks.push_back(std::move(w));
    }
  }
  names.clear();
  if (const toml::node* n = root.get("alarms")) {
    const auto* arr = n->as_array();
    if (!arr) return InvalidArgument("config: alarms must be an array of tables ([[alarms]])");
    static const std::set<std::string> kRules = {"runnable_longer_than", "failure_ratio", "idle_capacity_while_waiting",
                                                 "warm_pool_expiring"};
    for (size_t i = 0; i < arr->size(); ++i) {
      const auto* t = arr->get(i)->as_table();
      const std::string where = "alarms[" + std::to_string(i) + "].";
      if (!t) return InvalidArgument("config: " + where + " must be a table");
      TY_RETURN_IF_ERROR(CheckKeys(*t, {"name", "rule", "queue", "instance_type", "seconds", "threshold", "window_seconds",
                                        "min_jobs"},
                                   where));
      AlarmConfig a;
      TY_RETURN_IF_ERROR(Read(*t, "name", &a.name, where));
      TY_RETURN_IF_ERROR(Read(*t, "rule", &a.rule, where));
      TY_RETURN_IF_ERROR(Read(*t, "queue", &a.queue, where));
      TY_RETURN_IF_ERROR(Read(*t, "instance_type", &a.instance_type, where));
      TY_RETURN_IF_ERROR(Read(*t, "seconds", &a.seconds, where));
      TY_RETURN_IF_ERROR(Read(*t, "threshold", &a.threshold, where));
      TY_RETURN_IF_ERROR(Read(*t, "window_seconds", &a.window_seconds, where));
      TY_RETURN_IF_ERROR(Read(*t, "min_jobs", &a.min_jobs, where));
      if (a.name.empty()) return InvalidArgument("config: " + where + "name is required");
      if (!names.insert(a.name).second) return InvalidArgument("config: " + where + "name '" + a.name + "' is used twice");
      if (!kRules.count(a.rule))
        return InvalidArgument("config: " + where + "rule must be one of runnable_longer_than, failure_ratio, "
                               "idle_capacity_while_waiting, warm_pool_expiring");
      if ((a.rule == "runnable_longer_than" || a.rule == "warm_pool_expiring") && a.seconds < 1)
        return InvalidArgument("config: " + where + "seconds must be >= 1 for rule " + a.rule);
      if (a.seconds < 0) return InvalidArgument("config: " + where + "seconds must be >= 0");
      if (a.rule == "failure_ratio" && (a.threshold <= 0 || a.threshold > 1))
        return InvalidArgument("config: " + where + "threshold must be in (0, 1] for rule failure_ratio");
      if (a.rule == "idle_capacity_while_waiting" && a.threshold < 1)
        return InvalidArgument("config: " + where + "threshold must be >= 1 (idle instances) for rule idle_capacity_while_waiting");
      if (a.window_seconds < 1) return InvalidArgument("config: " + where + "window_seconds must be >= 1");
      if (a.min_jobs < 1) return InvalidArgument("config: " + where + "min_jobs must be >= 1");
      c->alarms.push_back(std::move(a));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Config> LoadConfigFile(const std::string& path, Config c) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return InvalidArgument("config: " + path + ": " + std::string(e.description()));
  }
  TY_RETURN_IF_ERROR(CheckKeys(root, {"server", "executor", "instance_types", "object_store", "file_systems", "logs",
                                     "events", "audit", "webhooks", "alarms", "scheduler", "s3", "regions", "console", "store", "ha", "cloudwatch"},
                               "the top level"));
  if (auto* s3 = root["s3"].as_table()) {
    TY_RETURN_IF_ERROR(CheckKeys(*s3, {"enabled", "max_upload_bytes", "virtual_host_domains", "abort_incomplete_uploads_after_days",
                                       "max_incomplete_upload_bytes_per_user"},
                                 "[s3]"));
    TY_RETURN_IF_ERROR(Read(*s3, "enabled", &c.s3.enabled, "s3."));
    TY_RETURN_IF_ERROR(Read(*s3, "max_upload_bytes", &c.s3.max_upload_bytes, "s3."));
    TY_RETURN_IF_ERROR(ReadStrings(*s3, "virtual_host_domains", &c.s3.virtual_host_domains, "s3."));
    TY_RETURN_IF_ERROR(
        Read(*s3, "abort_incomplete_uploads_after_days", &c.s3.abort_incomplete_uploads_after_days, "s3."));
    if (c.s3.abort_incomplete_uploads_after_days < 0 || c.s3.abort_incomplete_uploads_after_days > 36500)
      return InvalidArgument("config: s3.abort_incomplete_uploads_after_days must be between 0 (never) and 36500");
    // S3's own ceiling for one PUT is 5 GiB; the body is held in memory while it is written.
    if (c.s3.max_upload_bytes < 1 || c.s3.max_upload_bytes > 5LL * 1024 * 1024 * 1024)
      return InvalidArgument("config: s3.max_upload_bytes must be between 1 and 5368709120 (5 GiB)");
    TY_RETURN_IF_ERROR(
        Read(*s3, "max_incomplete_upload_bytes_per_user", &c.s3.max_incomplete_upload_bytes_per_user, "s3."));
    // At least one part of the largest size a request may carry; at most S3's largest object.
    constexpr int64_t kMaxObjectBytes = 5LL << 40;
    if (c.s3.max_incomplete_upload_bytes_per_user != 0 &&
        (c.s3.max_incomplete_upload_bytes_per_user < c.s3.max_upload_bytes ||
         c.s3.max_incomplete_upload_bytes_per_user > kMaxObjectBytes))
      return InvalidArgument("config: s3.max_incomplete_upload_bytes_per_user must be 0 (no quota) or between "
                             "s3.max_upload_bytes (" + std::to_string(c.s3.max_upload_bytes) + ") and " +
                             std::to_string(kMaxObjectBytes) + " (5 TiB)");
    for (const std::string& d : c.s3.virtual_host_domains)
      if (d.empty() || d.front() == '.' || d.find_first_of(":/ ") != std::string::npos)
        return InvalidArgument("config: s3.virtual_host_domains: '" + d + "' is not a host name (no port, no scheme)");
  }
  TY_RETURN_IF_ERROR(ReadRegions(root, path, &c));
  if (auto* s = root["scheduler"].as_table()) {
    TY_RETURN_IF_ERROR(CheckKeys(*s, {"batch_ms"}, "[scheduler]"));
    TY_RETURN_IF_ERROR(Read(*s, "batch_ms", &c.scheduler_batch_ms, "scheduler."));
    if (c.scheduler_batch_ms < 0 || c.scheduler_batch_ms > 60'000)
      return InvalidArgument("config: scheduler.batch_ms must be between 0 and 60000");
  }
  TY_RETURN_IF_ERROR(ReadEvents(root, &c));
  if (auto* t = root["store"].as_table()) {
    TY_RETURN_IF_ERROR(CheckKeys(*t, {"url"}, "[store]"));
    TY_RETURN_IF_ERROR(Read(*t, "url", &c.store_url, "store."));
    if (!c.store_url.empty() && !StartsWith(c.store_url, "postgresql://") && !StartsWith(c.store_url, "postgres://") &&
        c.store_url.find('=') == std::string::npos)
      return InvalidArgument("config: store.url must be a PostgreSQL connection URI (postgresql://...) or "
                             "key=value connection string, or \"\" for SQLite in the data directory");
  }
  if (auto* t = root["ha"].as_table()) {
    TY_RETURN_IF_ERROR(CheckKeys(*t, {"lease_seconds", "name", "advertise_url", "forward_timeout_seconds"}, "[ha]"));
    TY_RETURN_IF_ERROR(Read(*t, "lease_seconds", &c.ha.lease_seconds, "ha."));
    TY_RETURN_IF_ERROR(Read(*t, "name", &c.ha.name, "ha."));
    TY_RETURN_IF_ERROR(Read(*t, "advertise_url", &c.ha.advertise_url, "ha."));
    TY_RETURN_IF_ERROR(Read(*t, "forward_timeout_seconds", &c.ha.forward_timeout_seconds, "ha."));
    if (!(c.ha.lease_seconds >= 1 && c.ha.lease_seconds <= 60))
      return InvalidArgument("config: ha.lease_seconds must be between 1 and 60");
    if (c.ha.forward_timeout_seconds < 1 || c.ha.forward_timeout_seconds > 3600)
      return InvalidArgument("config: ha.forward_timeout_seconds must be between 1 and 3600");
    if (!c.ha.advertise_url.empty() && !StartsWith(c.ha.advertise_url, "http://") && !StartsWith(c.ha.advertise_url, "https://"))
      return InvalidArgument("config: ha.advertise_url must start with http:// or https://");
    if (c.ha.name.size() > 200) return InvalidArgument("config: ha.name must be at most 200 characters");
  }
  if (auto* t = root["cloudwatch"].as_table()) {
    TY_RETURN_IF_ERROR(CheckKeys(*t, {"max_series", "max_series_bytes", "max_alarms"}, "[cloudwatch]"));
    TY_RETURN_IF_ERROR(Read(*t, "max_series", &c.cloudwatch.max_series, "cloudwatch."));
    TY_RETURN_IF_ERROR(Read(*t, "max_series_bytes", &c.cloudwatch.max_series_bytes, "cloudwatch."));
    if (c.cloudwatch.max_series_bytes < (int64_t{1} << 20) || c.cloudwatch.max_series_bytes > (int64_t{1} << 40))
      return InvalidArgument("config: cloudwatch.max_series_bytes must be between 1048576 (1 MiB) and 1099511627776 (1 TiB)");
    TY_RETURN_IF_ERROR(Read(*t, "max_alarms", &c.cloudwatch.max_alarms, "cloudwatch."));
    if (c.cloudwatch.max_alarms < 1 || c.cloudwatch.max_alarms > 1000000)
      return InvalidArgument("config: cloudwatch.max_alarms must be between 1 and 1000000");
    if (c.cloudwatch.max_series < 1 || c.cloudwatch.max_series > 1000000)
      return InvalidArgument("config: cloudwatch.max_series must be between 1 and 1000000");
  }
  if (auto* t = root["console"].as_table()) {
    TY_RETURN_IF_ERROR(CheckKeys(*t, {"enabled", "session_hours", "idle_minutes", "max_sessions", "assets_dir",
                                      "what_if_max_jobs", "share_history_interval_seconds", "signin_rate", "signin_burst"},
                                 "[console]"));
    ConsoleConfig& k = c.console;
    TY_RETURN_IF_ERROR(Read(*t, "enabled", &k.enabled, "console."));
    TY_RETURN_IF_ERROR(Read(*t, "session_hours", &k.session_hours, "console."));
    TY_RETURN_IF_ERROR(Read(*t, "idle_minutes", &k.idle_minutes, "console."));
    TY_RETURN_IF_ERROR(Read(*t, "max_sessions", &k.max_sessions, "console."));
    TY_RETURN_IF_ERROR(Read(*t, "assets_dir", &k.assets_dir, "console."));
    TY_RETURN_IF_ERROR(Read(*t, "what_if_max_jobs", &k.what_if_max_jobs, "console."));
    TY_RETURN_IF_ERROR(Read(*t, "share_history_interval_seconds", &k.share_history_interval_seconds, "console."));
    TY_RETURN_IF_ERROR(Read(*t, "signin_rate", &k.signin_rate, "console."));
    TY_RETURN_IF_ERROR(Read(*t, "signin_burst", &k.signin_burst, "console."));
    if (!(k.signin_rate > 0 && k.signin_rate <= 1000))
      return InvalidArgument("config: console.signin_rate must be more than 0 and at most 1000 (attempts per second per address)");
    if (!(k.signin_burst >= 1 && k.signin_burst <= 10000))
      return InvalidArgument("config: console.signin_burst must be from 1 to 10000");
    if (k.session_hours < 1 || k.session_hours > 24 * 30)
      return InvalidArgument("config: console.session_hours must be between 1 and 720");
    if (k.idle_minutes < 1 || k.idle_minutes > 24 * 60)
      return InvalidArgument("config: console.idle_minutes must be between 1 and 1440");
    if (k.max_sessions < 1) return InvalidArgument("config: console.max_sessions must be >= 1");
    if (k.what_if_max_jobs < 1 || k.what_if_max_jobs > 10'000'000)
      return InvalidArgument("config: console.what_if_max_jobs must be between 1 and 10000000");
    if (k.share_history_interval_seconds < 1 || k.share_history_interval_seconds > 86'400)
      return InvalidArgument("config: console.share_history_interval_seconds must be between 1 and 86400");
  }
  if (auto* l = root["logs"].as_table()) {
    TY_RETURN_IF_ERROR(CheckKeys(*l, {"retention_days", "max_bytes_per_stream"}, "[logs]"));
    TY_RETURN_IF_ERROR(Read(*l, "retention_days", &c.logs_retention_days, "logs."));
    TY_RETURN_IF_ERROR(Read(*l, "max_bytes_per_stream", &c.logs_max_bytes_per_stream, "logs."));
    if (c.logs_retention_days < 0) return InvalidArgument("config: logs.retention_days must be >= 0");
    if (c.logs_max_bytes_per_stream < 0) return InvalidArgument("config: logs.max_bytes_per_stream must be >= 0");
  }
  if (auto* s = root["server"].as_table()) {
    TY_RETURN_IF_ERROR(CheckKeys(*s, {"listen", "data_dir", "region", "account_id", "max_request_bytes",
                                      "max_submit_payload_bytes", "http_threads", "sqlite_synchronous_full",
                                      "data_dir_reserve_mib", "max_header_bytes", "max_header_fields", "max_buffered_request_bytes",
                                      "header_timeout_seconds", "body_timeout_seconds",
                                      "idle_timeout_seconds", "max_connections", "max_connections_per_address", "io_threads", "max_json_depth",
                                      "throttle_rate", "throttle_burst", "tls", "tls_certificate_file", "tls_key_file",
                                      "metrics_token"},
                                 "[server]"));
    TY_RETURN_IF_ERROR(Read(*s, "listen", &c.listen, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "data_dir", &c.data_dir, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "region", &c.region, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "account_id", &c.account_id, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "max_request_bytes", &c.max_request_bytes, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "max_submit_payload_bytes", &c.max_submit_payload_bytes, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "http_threads", &c.http_threads, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "sqlite_synchronous_full", &c.sqlite_synchronous_full, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "data_dir_reserve_mib", &c.data_dir_reserve_mib, "server."));
    if (c.data_dir_reserve_mib < 0 || c.data_dir_reserve_mib > (int64_t{1} << 30))
      return InvalidArgument("config: server.data_dir_reserve_mib must be between 0 and 1073741824 (MiB)");
    TY_RETURN_IF_ERROR(Read(*s, "max_header_bytes", &c.max_header_bytes, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "max_header_fields", &c.max_header_fields, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "max_buffered_request_bytes", &c.max_buffered_request_bytes, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "header_timeout_seconds", &c.header_timeout_seconds, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "body_timeout_seconds", &c.body_timeout_seconds, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "idle_timeout_seconds", &c.idle_timeout_seconds, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "max_connections", &c.max_connections, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "max_connections_per_address", &c.max_connections_per_address, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "io_threads", &c.io_threads, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "max_json_depth", &c.max_json_depth, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "throttle_rate", &c.throttle_rate, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "throttle_burst", &c.throttle_burst, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "tls", &c.tls, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "tls_certificate_file", &c.tls_certificate_file, "server."));
    TY_RETURN_IF_ERROR(Read(*s, "tls_key_file", &c.tls_key_file, "server."));
    if (c.tls != "auto" && c.tls != "on" && c.tls != "off")
      return InvalidArgument("config: server.tls must be one of auto, on, off");
    if (c.tls_certificate_file.empty() != c.tls_key_file.empty())
      return InvalidArgument("config: server.tls_certificate_file and server.tls_key_file go together: set both or neither");
    if (c.tls == "off" && !c.tls_certificate_file.empty())
      return InvalidArgument("config: server.tls is off but server.tls_certificate_file is set; remove one of them");
    TY_RETURN_IF_ERROR(Read(*s, "metrics_token", &c.metrics_token, "server."));
    if (c.max_request_bytes < 1) return InvalidArgument("config: server.max_request_bytes must be >= 1");
    if (c.http_threads < 1) return InvalidArgument("config: server.http_threads must be >= 1");
    if (c.max_header_bytes < 1024) return InvalidArgument("config: server.max_header_bytes must be >= 1024");
    if (c.max_header_fields < 8) return InvalidArgument("config: server.max_header_fields must be >= 8");
    if (c.max_buffered_request_bytes < c.max_request_bytes)
      return InvalidArgument("config: server.max_buffered_request_bytes must be >= server.max_request_bytes");
    for (auto [v, name] : {std::pair{c.header_timeout_seconds, "header_timeout_seconds"},
                           {c.body_timeout_seconds, "body_timeout_seconds"},
                           {c.idle_timeout_seconds, "idle_timeout_seconds"}})
      if (v < 1 || v > 3600) return InvalidArgument(std::string("config: server.") + name + " must be from 1 to 3600");
    if (c.max_connections < 1) return InvalidArgument("config: server.max_connections must be >= 1");
    if (c.max_connections_per_address < 1 || c.max_connections_per_address > 1'000'000)
      return InvalidArgument("config: server.max_connections_per_address must be from 1 to 1000000");
    if (c.io_threads < 1 || c.io_threads > 64) return InvalidArgument("config: server.io_threads must be from 1 to 64");
    if (c.max_json_depth < 2 || c.max_json_depth > 1000)
      return InvalidArgument("config: server.max_json_depth must be from 2 to 1000");
    if (c.throttle_rate < 0) return InvalidArgument("config: server.throttle_rate must be >= 0 (0 = no throttling)");
    if (c.throttle_rate > 0 && c.throttle_burst < 1)
      return InvalidArgument("config: server.throttle_burst must be >= 1 when server.throttle_rate is set");
  }
  if (auto* e = root["executor"].as_table()) {
    TY_RETURN_IF_ERROR(CheckKeys(*e, {"sandbox", "stop_grace_seconds", "pip_find_links", "pip_no_index",
                                      "sandbox_binds", "spot_notice_seconds", "chaos_seed",
                                      "system_metrics_interval_seconds", "nvidia_smi", "job_user",
                                      "max_pids_per_instance", "cgroup_parent", "kind", "slurm", "host_images",
                                      "image_dirs", "image_fallback_to_host", "image_pull_timeout_seconds", "container_volume_gb",
                                      "gpus", "gpus_out_of_service", "gpu_device_dir"},
                                 "[executor]"));
    TY_RETURN_IF_ERROR(Read(*e, "kind", &c.executor_kind, "executor."));
    if (c.executor_kind != "local" && c.executor_kind != "slurm")
      return InvalidArgument("config: executor.kind must be one of local, slurm");
    if (const toml::node* sn = e->get("slurm")) {
      const toml::table* s = sn->as_table();
      if (!s) return InvalidArgument("config: executor.slurm must be a table");
      TY_RETURN_IF_ERROR(CheckKeys(*s, {"partition", "account", "bin_dir", "conf", "sbatch_args", "poll_interval_ms", "notify_address",
                                       "hold_max_allocations", "hold_keep_alive_seconds", "hold_sbatch_args"},
                                   "[executor.slurm]"));
      SlurmConfig& sc = c.slurm;
      TY_RETURN_IF_ERROR(Read(*s, "partition", &sc.partition, "executor.slurm."));
      TY_RETURN_IF_ERROR(Read(*s, "account", &sc.account, "executor.slurm."));
      TY_RETURN_IF_ERROR(Read(*s, "bin_dir", &sc.bin_dir, "executor.slurm."));
      TY_RETURN_IF_ERROR(Read(*s, "conf", &sc.conf, "executor.slurm."));
      TY_RETURN_IF_ERROR(Read(*s, "poll_interval_ms", &sc.poll_interval_ms, "executor.slurm."));
      TY_RETURN_IF_ERROR(Read(*s, "notify_address", &sc.notify_address, "executor.slurm."));
      if (sc.notify_address.empty() || sc.notify_address.find_first_not_of("0123456789.") != std::string::npos)
        return InvalidArgument("config: executor.slurm.notify_address must be an IPv4 address");
      TY_RETURN_IF_ERROR(ReadStrings(*s, "sbatch_args", &sc.sbatch_args, "executor.slurm."));
      TY_RETURN_IF_ERROR(Read(*s, "hold_max_allocations", &sc.hold_max_allocations, "executor.slurm."));
      TY_RETURN_IF_ERROR(Read(*s, "hold_keep_alive_seconds", &sc.hold_keep_alive_seconds, "executor.slurm."));
      TY_RETURN_IF_ERROR(ReadStrings(*s, "hold_sbatch_args", &sc.hold_sbatch_args, "executor.slurm."));
      if (sc.hold_max_allocations < 0 || sc.hold_max_allocations > 10000)
        return InvalidArgument("config: executor.slurm.hold_max_allocations must be from 0 to 10000");
      if (sc.hold_keep_alive_seconds < 1 || sc.hold_keep_alive_seconds > 3600)
        return InvalidArgument("config: executor.slurm.hold_keep_alive_seconds must be from 1 to 3600");
      if (!ValidSlurmPartitionName(sc.partition))
        return InvalidArgument("config: executor.slurm.partition must be 1 to 64 letters, digits, '_', '-' or '.'");
      if (!sc.account.empty() && !ValidSlurmPartitionName(sc.account))
        return InvalidArgument("config: executor.slurm.account must be 1 to 64 letters, digits, '_', '-' or '.'");
      for (const std::string* p : {&sc.bin_dir, &sc.conf})
        if (!p->empty() && (*p)[0] != '/')
          return InvalidArgument("config: executor.slurm.bin_dir and executor.slurm.conf must be absolute paths");
      if (sc.poll_interval_ms < 50 || sc.poll_interval_ms > 60000)
        return InvalidArgument("config: executor.slurm.poll_interval_ms must be from 50 to 60000");
    }
    TY_RETURN_IF_ERROR(Read(*e, "spot_notice_seconds", &c.spot_notice_seconds, "executor."));
    TY_RETURN_IF_ERROR(Read(*e, "chaos_seed", &c.chaos_seed, "executor."));
    if (c.spot_notice_seconds < 0) return InvalidArgument("config: executor.spot_notice_seconds must be >= 0");
    if (const toml::node* b = e->get("sandbox_binds")) {
      auto* arr = b->as_array();
      const char* what = "config: executor.sandbox_binds must be an array of absolute paths";
      if (!arr) return InvalidArgument(what);
      c.sandbox_binds.clear();
      for (const auto& d : *arr) {
        if (!d.is_string() || d.as_string()->get().empty() || d.as_string()->get()[0] != '/') return InvalidArgument(what);
        c.sandbox_binds.push_back(d.as_string()->get());
      }
    }
    for (const char* key : {"gpus", "gpus_out_of_service"}) {
      const toml::node* g = e->get(key);
      if (!g) continue;
      const std::string what = std::string("config: executor.") + key + " must be an array of GPU indices (0 to 1023)";
      auto* arr = g->as_array();
      if (!arr) return InvalidArgument(what);
      std::vector<int> indices;
      for (const auto& v : *arr) {
        if (!v.is_integer() || v.as_integer()->get() < 0 || v.as_integer()->get() > 1023) return InvalidArgument(what);
        indices.push_back(static_cast<int>(v.as_integer()->get()));
      }
      if (std::string(key) == "gpus") c.gpus = indices;
      else c.gpus_out_of_service = indices;
    }
    TY_RETURN_IF_ERROR(Read(*e, "gpu_device_dir", &c.gpu_device_dir, "executor."));
    if (c.gpu_device_dir.empty() || c.gpu_device_dir[0] != '/')
      return InvalidArgument("config: executor.gpu_device_dir must be an absolute path");
    TY_RETURN_IF_ERROR(ReadStrings(*e, "host_images", &c.host_images, "executor."));
    TY_RETURN_IF_ERROR(ReadStrings(*e, "image_dirs", &c.image_dirs, "executor."));
    for (const std::string& d : c.image_dirs) {
      const bool dotdot = ("/" + d + "/").find("/../") != std::string::npos;
      if (d.size() < 2 || d[0] != '/' || dotdot)
        return InvalidArgument("config: executor.image_dirs must hold absolute directory paths other than / and "
                               "without '..' segments, not '" + d + "'");
    }
    TY_RETURN_IF_ERROR(Read(*e, "image_fallback_to_host", &c.image_fallback_to_host, "executor."));
    TY_RETURN_IF_ERROR(Read(*e, "image_pull_timeout_seconds", &c.image_pull_timeout_seconds, "executor."));
    if (c.image_pull_timeout_seconds < 1 || c.image_pull_timeout_seconds > 86400)
      return InvalidArgument("config: executor.image_pull_timeout_seconds must be from 1 to 86400");
    TY_RETURN_IF_ERROR(Read(*e, "container_volume_gb", &c.container_volume_gb, "executor."));
    if (c.container_volume_gb < 1 || c.container_volume_gb > 16384)
      return InvalidArgument("config: executor.container_volume_gb must be from 1 to 16384");
    TY_RETURN_IF_ERROR(Read(*e, "pip_find_links", &c.pip_find_links, "executor."));
    TY_RETURN_IF_ERROR(Read(*e, "pip_no_index", &c.pip_no_index, "executor."));
    TY_RETURN_IF_ERROR(Read(*e, "sandbox", &c.sandbox, "executor."));
    TY_RETURN_IF_ERROR(Read(*e, "stop_grace_seconds", &c.stop_grace_seconds, "executor."));
    if (c.sandbox != "auto" && c.sandbox != "bwrap" && c.sandbox != "none")
      return InvalidArgument("config: executor.sandbox must be one of auto, bwrap, none");
    if (c.stop_grace_seconds < 0) return InvalidArgument("config: executor.stop_grace_seconds must be >= 0");
    TY_RETURN_IF_ERROR(Read(*e, "system_metrics_interval_seconds", &c.system_metrics_interval_seconds, "executor."));
    if (c.system_metrics_interval_seconds < 0 || c.system_metrics_interval_seconds > 3600)
      return InvalidArgument("config: executor.system_metrics_interval_seconds must be between 0 (off) and 3600");
    TY_RETURN_IF_ERROR(Read(*e, "nvidia_smi", &c.nvidia_smi, "executor."));
    TY_RETURN_IF_ERROR(Read(*e, "job_user", &c.job_user, "executor."));
    if (c.job_user.empty() || c.job_user == "root" || c.job_user == "0" || c.job_user.rfind("0:", 0) == 0 ||
        c.job_user.find_first_of(" \t\n/") != std::string::npos)
      return InvalidArgument("config: executor.job_user must name an unprivileged user (name, uid or uid:gid), not root");
    TY_RETURN_IF_ERROR(Read(*e, "max_pids_per_instance", &c.max_pids_per_instance, "executor."));
    if (c.max_pids_per_instance < 16 || c.max_pids_per_instance > 4194304)
      return InvalidArgument("config: executor.max_pids_per_instance must be between 16 and 4194304");
    TY_RETURN_IF_ERROR(Read(*e, "cgroup_parent", &c.cgroup_parent, "executor."));
    if (!c.cgroup_parent.empty() && (c.cgroup_parent[0] != '/' || c.cgroup_parent.find("..") != std::string::npos))
      return InvalidArgument("config: executor.cgroup_parent must be an absolute path inside the cgroup hierarchy, without ..");
  }
  if (auto* o = root["object_store"].as_table()) {
    ObjectStoreConfig& os = c.object_store;
    TY_RETURN_IF_ERROR(CheckKeys(*o, {"endpoint", "region", "access_key_id", "secret_access_key", "path_style",
                                      "buckets", "multipart_threshold_bytes", "multipart_part_bytes",
                                      "checkpoint_sync_seconds"},
                                 "[object_store]"));
    TY_RETURN_IF_ERROR(Read(*o, "endpoint", &os.endpoint, "object_store."));
    TY_RETURN_IF_ERROR(Read(*o, "region", &os.region, "object_store."));
    TY_RETURN_IF_ERROR(Read(*o, "access_key_id", &os.access_key_id, "object_store."));
    TY_RETURN_IF_ERROR(Read(*o, "secret_access_key", &os.secret_access_key, "object_store."));
    TY_RETURN_IF_ERROR(Read(*o, "path_style", &os.path_style, "object_store."));
    TY_RETURN_IF_ERROR(Read(*o, "multipart_threshold_bytes", &os.multipart_threshold_bytes, "object_store."));
    TY_RETURN_IF_ERROR(Read(*o, "multipart_part_bytes", &os.multipart_part_bytes, "object_store."));
    TY_RETURN_IF_ERROR(Read(*o, "checkpoint_sync_seconds", &os.checkpoint_sync_seconds, "object_store."));
    TY_RETURN_IF_ERROR(ReadStrings(*o, "buckets", &os.buckets, "object_store."));
    // An endpoint with no bucket list takes every bucket (an empty list routes none).
    if (!os.endpoint.empty() && !o->get("buckets")) os.buckets = {"*"};
    if (os.multipart_part_bytes < 1) return InvalidArgument("config: object_store.multipart_part_bytes must be positive");
    if (os.multipart_threshold_bytes < 1)
      return InvalidArgument("config: object_store.multipart_threshold_bytes must be positive");
    if (os.checkpoint_sync_seconds < 1) return InvalidArgument("config: object_store.checkpoint_sync_seconds must be >= 1");
    if (!os.endpoint.empty() && os.endpoint.rfind("http://", 0) != 0 && os.endpoint.rfind("https://", 0) != 0)
      return InvalidArgument("config: object_store.endpoint must start with http:// or https://");
  }
  if (auto* f = root["file_systems"].as_table()) {
    for (const auto& [k, v] : *f) {
      if (!v.is_string())
        return InvalidArgument("config: file_systems." + std::string(k.str()) + " must be a directory path (string)");
      c.file_systems.emplace_back(std::string(k.str()), v.as_string()->get());
    }
  }
  if (auto* arr = root["instance_types"].as_array()) {
    // Entries replace defaults of the same name and add new types.
    for (size_t i = 0; i < arr->size(); ++i) {
      auto* t = arr->get(i)->as_table();
      std::string where = "instance_types[" + std::to_string(i) + "].";
      if (!t) return InvalidArgument("config: " + where + " must be a table");
      TY_RETURN_IF_ERROR(CheckKeys(*t, {"name", "count", "vcpus", "gpus", "memory_mib", "warm_pool_quota", "setup_command",
                                        "spot_count", "price_per_hour", "spot_price_per_hour",
                                        "spot_interruptions_per_hour", "slurm_partition", "slurm_constraint",
                                        "slurm_whole_node"},
                                   where));
      InstanceTypeSpec spec;
      TY_RETURN_IF_ERROR(Read(*t, "name", &spec.name, where));
      if (spec.name.empty()) return InvalidArgument("config: " + where + "name is required");
      if (const auto* existing = c.FindInstanceType(spec.name)) spec = *existing;
      TY_RETURN_IF_ERROR(Read(*t, "count", &spec.count, where));
      TY_RETURN_IF_ERROR(Read(*t, "vcpus", &spec.vcpus, where));
      TY_RETURN_IF_ERROR(Read(*t, "gpus", &spec.gpus, where));
      TY_RETURN_IF_ERROR(Read(*t, "memory_mib", &spec.memory_mib, where));
      TY_RETURN_IF_ERROR(Read(*t, "warm_pool_quota", &spec.warm_pool_quota, where));
      TY_RETURN_IF_ERROR(Read(*t, "setup_command", &spec.setup_command, where));
      TY_RETURN_IF_ERROR(Read(*t, "spot_count", &spec.spot_count, where));
      TY_RETURN_IF_ERROR(Read(*t, "price_per_hour", &spec.price_per_hour, where));
      TY_RETURN_IF_ERROR(Read(*t, "spot_price_per_hour", &spec.spot_price_per_hour, where));
      TY_RETURN_IF_ERROR(Read(*t, "spot_interruptions_per_hour", &spec.spot_interruptions_per_hour, where));
      TY_RETURN_IF_ERROR(Read(*t, "slurm_partition", &spec.slurm_partition, where));
      TY_RETURN_IF_ERROR(Read(*t, "slurm_constraint", &spec.slurm_constraint, where));
      TY_RETURN_IF_ERROR(Read(*t, "slurm_whole_node", &spec.slurm_whole_node, where));
      if (!spec.slurm_partition.empty() && !ValidSlurmPartitionName(spec.slurm_partition))
        return InvalidArgument("config: " + where + "slurm_partition must be 1 to 64 letters, digits, '_', '-' or '.'");
      if (!spec.slurm_constraint.empty() && !ValidSlurmConstraint(spec.slurm_constraint))
        return InvalidArgument("config: " + where +
                               "slurm_constraint must be node features (letters, digits, '_', '-', '.', ':') joined "
                               "by '&' (all of them) or by '|' (any one), not both, at most 256 characters");
      if (spec.count < 0) return InvalidArgument("config: " + where + "count must be >= 0");
      if (spec.spot_count < 0) return InvalidArgument("config: " + where + "spot_count must be >= 0");
      if (spec.price_per_hour < 0) return InvalidArgument("config: " + where + "price_per_hour must be >= 0");
      if (spec.spot_price_per_hour < 0 && t->get("spot_price_per_hour"))
        return InvalidArgument("config: " + where + "spot_price_per_hour must be >= 0");
      if (spec.spot_interruptions_per_hour < 0)
        return InvalidArgument("config: " + where + "spot_interruptions_per_hour must be >= 0");
      if (spec.warm_pool_quota < -1)
        return InvalidArgument("config: " + where + "warm_pool_quota must be >= 0 (or -1: the type's count)");
      bool replaced = false;
      for (auto& existing : c.instance_types)
        if (existing.name == spec.name) existing = spec, replaced = true;
      if (!replaced) c.instance_types.push_back(spec);
    }
  }
  return c;
}

void ApplyEnvironment(Config* c) {
  ObjectStoreConfig& os = c->object_store;
  auto env = [](const char* k) -> std::string {
    const char* v = std::getenv(k);
    return v ? v : "";
  };
  if (os.endpoint.empty()) {
    os.endpoint = env("AWS_ENDPOINT_URL_S3");
    if (os.endpoint.empty()) os.endpoint = env("AWS_ENDPOINT_URL");
    // A client environment pointed at this server is not an object store.
    std::string hostport = os.endpoint.substr(os.endpoint.find("://") == std::string::npos ? 0 : os.endpoint.find("://") + 3);
    while (!hostport.empty() && hostport.back() == '/') hostport.pop_back();
    if (hostport.rfind("localhost:", 0) == 0) hostport = "127.0.0.1" + hostport.substr(9);
    std::string listen = c->listen;
    if (listen.rfind("localhost:", 0) == 0) listen = "127.0.0.1" + listen.substr(9);
    if (hostport == listen || (listen.rfind("0.0.0.0:", 0) == 0 && hostport.find(':') != std::string::npos && hostport.substr(hostport.rfind(':')) == listen.substr(7)))
      os.endpoint.clear();
    if (!os.endpoint.empty() && os.buckets.empty()) os.buckets = {"*"};
  }
  if (os.access_key_id.empty()) os.access_key_id = env("AWS_ACCESS_KEY_ID");
  if (os.secret_access_key.empty()) os.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
  if (os.region.empty()) os.region = env("AWS_REGION");
  if (os.region.empty()) os.region = c->region;
}

}  // namespace ty
