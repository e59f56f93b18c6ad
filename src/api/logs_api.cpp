// A subset of the CloudWatch Logs API (JSON 1.1, X-Amz-Target Logs_20140328.*) over the
// executor's per-instance log files. See docs/logs.md.
//
// The AWS Logs model is not embedded (it is large); the few fields used here are validated by hand.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <tuple>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "api/handlers.h"
#include "control/controller.h"
#include "core/strings.h"

namespace ty::api {

using nlohmann::json;
using control::Controller;
using control::State;

namespace {

constexpr const char* kGroup = "/aws/sagemaker/TrainingJobs";

struct Stream {
  std::string name;     // <job>/algo-<n>-<start seconds>
  std::string job;
  int instance = 1;
  int64_t creation_ms = 0;
  std::string path;
};

struct Event {
  int64_t begin = 0;  // byte offset of the line
  int64_t end = 0;    // byte offset after its newline
  int64_t ts = 0;
  std::string message;
};

std::string StreamName(const std::string& job, int instance, int64_t start_ms) {
  return job + "/algo-" + std::to_string(instance) + "-" + std::to_string(start_ms / 1000);
}

// Every stream of the group: one per instance of each training job that has started.
std::vector<Stream> AllStreams(Controller& c) {
  std::vector<Stream> out;
  c.Read([&](const State& s) {
    for (const auto& [name, tj] : s.training_jobs) {
      if (tj.training_start_time <= 0) continue;
      for (int i = 1; i <= tj.instance_count; ++i)
        out.push_back({StreamName(name, i, tj.training_start_time), name, i, tj.training_start_time, ""});
    }
    return 0;
  });
  for (auto& st : out) st.path = c.LogPath(st.job, st.instance);
  std::sort(out.begin(), out.end(), [](const Stream& a, const Stream& b) { return a.name < b.name; });
  return out;
}

// Complete lines of a log file ("<epoch_ms> <text>\n"); a partial last line waits for its end.
std::vector<Event> ReadEvents(const std::string& path) {
  std::vector<Event> out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;
  std::string line;
  int64_t off = 0;
  while (std::getline(in, line)) {
    if (in.eof()) break;
    int64_t next = off + static_cast<int64_t>(line.size()) + 1;
    auto sp = line.find(' ');
    if (sp != std::string::npos) out.push_back({off, next, std::strtoll(line.c_str(), nullptr, 10), line.substr(sp + 1)});
    off = next;
  }
  return out;
}

// [logs] retention_days: older events are not served (the sweep deletes finished jobs' files).
int64_t RetentionFloor(Controller& c) {
  int64_t days = c.config().logs_retention_days;
  return days > 0 ? c.Now() - days * 86400000 : 0;
}

// The timestamps of the first and last complete lines of a log file, without reading it whole
// (lines are at most 64 KiB plus the timestamp). False when it has none.
bool FirstAndLastTimestamps(const std::string& path, int64_t* first, int64_t* last) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return false;
  const int64_t size = static_cast<int64_t>(in.tellg());
  const int64_t window = std::min<int64_t>(size, 66 * 1024);
  std::string tail(static_cast<size_t>(window), '\0');
  in.seekg(size - window);
  in.read(tail.data(), window);
  size_t end = tail.rfind('\n');
  if (end == std::string::npos) return false;
  size_t begin = end == 0 ? std::string::npos : tail.rfind('\n', end - 1);
  if (begin == std::string::npos && size != window) return false;  // cannot happen with 64 KiB lines
  *last = std::strtoll(tail.c_str() + (begin == std::string::npos ? 0 : begin + 1), nullptr, 10);
  in.seekg(0);
  std::string head;
  std::getline(in, head);
  *first = std::strtoll(head.c_str(), nullptr, 10);
  return true;
}

Status Invalid(const std::string& msg) { return InvalidArgument(msg); }

StatusOr<std::string> OptString(const json& req, const char* field) {
  if (!req.contains(field) || req[field].is_null()) return std::string();
  if (!req[field].is_string()) return Invalid(std::string("1 validation error detected: Value at '") + field +
                                              "' failed to satisfy constraint: Member must be a string");
  return req[field].get<std::string>();
}

StatusOr<int64_t> OptInt(const json& req, const char* field, int64_t dflt, int64_t lo, int64_t hi) {
  if (!req.contains(field) || req[field].is_null()) return dflt;
  if (!req[field].is_number_integer())
    return Invalid(std::string("1 validation error detected: Value at '") + field +
                   "' failed to satisfy constraint: Member must be an integer");
  int64_t v = req[field].get<int64_t>();
  if (v < lo || v > hi)
    return Invalid(std::string("1 validation error detected: Value '") + std::to_string(v) + "' at '" + field +
                   "' failed to satisfy constraint: Member must have value between " + std::to_string(lo) + " and " +
                   std::to_string(hi));
  return v;
}

std::string FromHex(std::string_view h, bool* ok) {
  std::string out;
  *ok = h.size() % 2 == 0;
  for (size_t i = 0; *ok && i < h.size(); i += 2) {
    auto nib = [&](char ch) -> int {
      if (ch >= '0' && ch <= '9') return ch - '0';
      if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
      *ok = false;
      return 0;
    };
    out.push_back(static_cast<char>(nib(h[i]) * 16 + nib(h[i + 1])));
  }
  return out;
}

// Group: logGroupName or logGroupIdentifier (name or ARN); only kGroup exists.
Status CheckGroup(const json& req, bool required) {
  auto name = OptString(req, "logGroupName");
  if (!name.ok()) return name.status();
  auto ident = OptString(req, "logGroupIdentifier");
  if (!ident.ok()) return ident.status();
  if (!name->empty() && !ident->empty())
    return Invalid("LogGroup name and LogGroup ARN are mutually exclusive parameters.");
  std::string g = !name->empty() ? *name : *ident;
  if (g.empty()) {
    if (required) return Invalid("1 validation error detected: Value null at 'logGroupName' failed to satisfy constraint: Member must not be null");
    return Status();
  }
  if (StartsWith(g, "arn:")) {
    auto p = g.find(":log-group:");
    if (p != std::string::npos) g = g.substr(p + 11);
    if (EndsWith(g, ":*")) g.resize(g.size() - 2);
  }
  if (g != kGroup) return NotFound("The specified log group does not exist.");
  return Status();
}

const Stream* FindStream(const std::vector<Stream>& all, const std::string& name) {
  for (const auto& s : all)
    if (s.name == name) return &s;
  return nullptr;
}

std::string GroupArn(Controller& c) {
  return "arn:aws:logs:" + c.config().region + ":" + c.config().account_id + ":log-group:" + kGroup;
}

int64_t FileSize(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return in ? static_cast<int64_t>(in.tellg()) : 0;
}

// A filter pattern: space-separated terms, all of which must occur (case-sensitive); a term in
// double quotes is a phrase (may hold spaces); a leading '-' on a term excludes it. An empty pattern
// matches everything.
struct Filter {
  std::vector<std::string> must, must_not;
  bool Matches(const std::string& msg) const {
    for (const auto& t : must)
      if (msg.find(t) == std::string::npos) return false;
    for (const auto& t : must_not)
      if (msg.find(t) != std::string::npos) return false;
    return true;
  }
};

StatusOr<Filter> ParseFilter(const std::string& p) {
  Filter f;
  size_t i = 0;
  while (i < p.size()) {
    if (p[i] == ' ' || p[i] == '\t') { ++i; continue; }
    bool neg = false;
    if (p[i] == '-' && i + 1 < p.size() && p[i + 1] != ' ') { neg = true; ++i; }
    std::string term;
    if (p[i] == '"') {
      size_t close = p.find('"', i + 1);
      if (close == std::string::npos) return Invalid("Invalid character(s) in term '" + p.substr(i) + "': unterminated quote in filterPattern");
      term = p.substr(i + 1, close - i - 1);
      i = close + 1;
    } else {
      size_t e = p.find_first_of(" \t", i);
      if (e == std::string::npos) e = p.size();
      term = p.substr(i, e - i);
      i = e;
      if (term.find_first_of("{}[]=<>?*") != std::string::npos && term != "*")
        return Invalid("filterPattern: only plain terms, \"quoted phrases\" and -exclusions are supported; got '" + term + "'");
      if (term == "*") continue;
    }
    if (term.empty()) continue;
    (neg ? f.must_not : f.must).push_back(term);
  }
  return f;
}

Response DescribeLogGroups(Controller& c, const json& req) {
  auto prefix = OptString(req, "logGroupNamePrefix");
  if (!prefix.ok()) return prefix.status();
  auto pattern = OptString(req, "logGroupNamePattern");
  if (!pattern.ok()) return pattern.status();
  if (!prefix->empty() && !pattern->empty())
    return Invalid("LogGroup name prefix and LogGroup name pattern are mutually exclusive parameters.");
  auto limit = OptInt(req, "limit", 50, 1, 50);
  if (!limit.ok()) return limit.status();
  json groups = json::array();
  bool match = StartsWith(kGroup, *prefix) && std::string(kGroup).find(*pattern) != std::string::npos;
  auto token = OptString(req, "nextToken");
  if (!token.ok()) return token.status();
  if (match && token->empty()) {
    int64_t bytes = 0, created = 0;
    for (const auto& s : AllStreams(c)) {
      bytes += FileSize(s.path);
      if (created == 0 || s.creation_ms < created) created = s.creation_ms;
    }
    json g = {{"logGroupName", kGroup}, {"creationTime", created}, {"metricFilterCount", 0},
              {"arn", GroupArn(c) + ":*"}, {"logGroupArn", GroupArn(c)}, {"storedBytes", bytes},
              {"logGroupClass", "STANDARD"}};
    if (c.config().logs_retention_days > 0) g["retentionInDays"] = c.config().logs_retention_days;
    groups.push_back(g);
  }
  return json{{"logGroups", groups}};
}

Response DescribeLogStreams(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckGroup(req, true));
  auto prefix = OptString(req, "logStreamNamePrefix");
  if (!prefix.ok()) return prefix.status();
  auto order = OptString(req, "orderBy");
  if (!order.ok()) return order.status();
  if (order->empty()) *order = "LogStreamName";
  if (*order != "LogStreamName" && *order != "LastEventTime")
    return Invalid("1 validation error detected: Value '" + *order +
                   "' at 'orderBy' failed to satisfy constraint: Member must satisfy enum value set: [LogStreamName, LastEventTime]");
  if (*order == "LastEventTime" && !prefix->empty())
    return Invalid("Cannot order by LastEventTime with a logStreamNamePrefix.");
  bool desc = req.contains("descending") && req["descending"].is_boolean() && req["descending"].get<bool>();
  auto limit = OptInt(req, "limit", 50, 1, 50);
  if (!limit.ok()) return limit.status();
  auto token = OptString(req, "nextToken");
  if (!token.ok()) return token.status();
  int64_t skip = 0;
  if (!token->empty()) {
    if (!StartsWith(*token, "s/")) return Invalid("The specified nextToken is invalid.");
    skip = std::strtoll(token->c_str() + 2, nullptr, 16);
  }
  struct Row {
    json j;
    int64_t last;
  };
  std::vector<Row> rows;
  std::string arn_base = GroupArn(c) + ":log-stream:";
  for (const auto& s : AllStreams(c)) {
    if (!StartsWith(s.name, *prefix)) continue;
    json j = {{"logStreamName", s.name}, {"creationTime", s.creation_ms}, {"arn", arn_base + s.name},
              {"storedBytes", FileSize(s.path)}};
    int64_t first_ts = 0, last = s.creation_ms, last_ts = 0;
    if (FirstAndLastTimestamps(s.path, &first_ts, &last_ts)) {
      j["firstEventTimestamp"] = first_ts;
      j["lastEventTimestamp"] = last_ts;
      j["lastIngestionTime"] = last_ts;
      last = last_ts;
    }
    rows.push_back({j, last});
  }
  if (*order == "LastEventTime")
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.last < b.last; });
  if (desc) std::reverse(rows.begin(), rows.end());
  json out = json::array();
  int64_t i = skip;
  for (; i < static_cast<int64_t>(rows.size()) && static_cast<int64_t>(out.size()) < *limit; ++i) out.push_back(rows[i].j);
  json reply = {{"logStreams", out}};
  if (i < static_cast<int64_t>(rows.size())) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "s/%016llx", static_cast<unsigned long long>(i));
    reply["nextToken"] = buf;
  }
  return reply;
}

std::string OffsetToken(char dir, int64_t off) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%c/%016llx", dir, static_cast<unsigned long long>(off));
  return buf;
}

// The event window both event reads take: `limit` (1..10000), and [startTime, endTime) in epoch
// ms, with startTime raised to the retention floor.
struct Window {
  int64_t limit = 10000, start = 0, end = INT64_MAX;
};
StatusOr<Window> ReadWindow(Controller& c, const json& req) {
  Window w;
  auto limit = OptInt(req, "limit", 10000, 1, 10000);
  if (!limit.ok()) return limit.status();
  auto start = OptInt(req, "startTime", 0, 0, INT64_MAX);
  if (!start.ok()) return start.status();
  auto end = OptInt(req, "endTime", INT64_MAX, 0, INT64_MAX);
  if (!end.ok()) return end.status();
  w.limit = *limit;
  w.start = std::max(*start, RetentionFloor(c));
  w.end = *end;
  return w;
}

Response GetLogEvents(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckGroup(req, true));
  auto stream_name = OptString(req, "logStreamName");
  if (!stream_name.ok()) return stream_name.status();
  if (stream_name->empty())
    return Invalid("1 validation error detected: Value null at 'logStreamName' failed to satisfy constraint: Member must not be null");
  auto window = ReadWindow(c, req);
  if (!window.ok()) return window.status();
  const Window w = *window;
  auto token = OptString(req, "nextToken");
  if (!token.ok()) return token.status();
  bool from_head = req.contains("startFromHead") && req["startFromHead"].is_boolean() && req["startFromHead"].get<bool>();
  auto streams = AllStreams(c);
  const Stream* s = FindStream(streams, *stream_name);
  if (!s) return NotFound("The specified log stream does not exist.");

  char dir = from_head ? 'f' : 'b';
  int64_t pos = -1;  // no token: head or tail
  if (!token->empty()) {
    if (token->size() != 18 || ((*token)[0] != 'f' && (*token)[0] != 'b') || (*token)[1] != '/')
      return Invalid("The specified nextToken is invalid.");
    dir = (*token)[0];
    char* endp = nullptr;
    pos = static_cast<int64_t>(std::strtoull(token->c_str() + 2, &endp, 16));
    if (*endp != '\0') return Invalid("The specified nextToken is invalid.");
  }
  std::vector<Event> all;
  for (auto& e : ReadEvents(s->path))
    if (e.ts >= w.start && e.ts < w.end) all.push_back(std::move(e));
  // The window [lo, hi) of `all` to return.
  size_t lo = 0, hi = 0;
  const size_t cap = static_cast<size_t>(w.limit);
  const int64_t kMaxBytes = 1 << 20;
  if (dir == 'f') {
    while (lo < all.size() && pos >= 0 && all[lo].begin < pos) ++lo;
    hi = lo;
    int64_t bytes = 0;
    while (hi < all.size() && hi - lo < cap && bytes + static_cast<int64_t>(all[hi].message.size()) + 26 <= kMaxBytes)
      bytes += static_cast<int64_t>(all[hi++].message.size()) + 26;
  } else {
    hi = all.size();
    while (hi > 0 && pos >= 0 && all[hi - 1].end > pos) --hi;
    lo = hi;
    int64_t bytes = 0;
    while (lo > 0 && hi - lo < cap && bytes + static_cast<int64_t>(all[lo - 1].message.size()) + 26 <= kMaxBytes)
      bytes += static_cast<int64_t>(all[--lo].message.size()) + 26;
  }
  json events = json::array();
  for (size_t i = lo; i < hi; ++i)
    events.push_back({{"timestamp", all[i].ts}, {"message", all[i].message}, {"ingestionTime", all[i].ts}});
  // Tokens: forward resumes after the last event returned, backward before the first. With nothing
  // returned, the token asked with comes back (clients stop paging when it repeats).
  std::string fwd, bwd;
  if (lo < hi) {
    fwd = OffsetToken('f', all[hi - 1].end);
    bwd = OffsetToken('b', all[lo].begin);
  } else {
    int64_t at = pos >= 0 ? pos : (dir == 'f' ? 0 : (all.empty() ? 0 : all.back().end));
    if (pos < 0 && from_head) at = 0;
    if (pos < 0 && !from_head) at = all.empty() ? 0 : all.back().end;
    fwd = OffsetToken('f', at);
    bwd = OffsetToken('b', at);
  }
  return json{{"events", events}, {"nextForwardToken", fwd}, {"nextBackwardToken", bwd}};
}

Response FilterLogEvents(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckGroup(req, true));
  std::set<std::string> names;
  bool by_name = req.contains("logStreamNames") && !req["logStreamNames"].is_null();
  if (by_name) {
    if (!req["logStreamNames"].is_array() || req["logStreamNames"].empty() || req["logStreamNames"].size() > 100)
      return Invalid("1 validation error detected: Value at 'logStreamNames' failed to satisfy constraint: Member must have length between 1 and 100");
    for (const auto& n : req["logStreamNames"]) {
      if (!n.is_string()) return Invalid("1 validation error detected: Value at 'logStreamNames' failed to satisfy constraint: Member must be a list of strings");
      names.insert(n.get<std::string>());
    }
  }
  auto prefix = OptString(req, "logStreamNamePrefix");
  if (!prefix.ok()) return prefix.status();
  if (by_name && !prefix->empty())
    return Invalid("logStreamNames and logStreamNamePrefix are mutually exclusive parameters.");
  auto window = ReadWindow(c, req);
  if (!window.ok()) return window.status();
  const Window w = *window;
  auto pattern = OptString(req, "filterPattern");
  if (!pattern.ok()) return pattern.status();
  auto filter = ParseFilter(*pattern);
  if (!filter.ok()) return filter.status();
  auto token = OptString(req, "nextToken");
  if (!token.ok()) return token.status();
  // nextToken "n/<hex of ts|stream|offset>": the last event returned; paging resumes after it in
  // (timestamp, stream, offset) order, so it stays valid as streams grow.
  int64_t after_ts = -1, after_off = -1;
  std::string after_stream;
  if (!token->empty()) {
    bool ok = StartsWith(*token, "n/");
    std::string raw = ok ? FromHex(std::string_view(*token).substr(2), &ok) : "";
    auto parts = Split(raw, '|');
    if (!ok || parts.size() != 3) return Invalid("The specified nextToken is invalid.");
    after_ts = std::strtoll(parts[0].c_str(), nullptr, 10);
    after_stream = parts[1];
    after_off = std::strtoll(parts[2].c_str(), nullptr, 10);
  }
  struct Hit {
    int64_t ts;
    std::string stream;
    int64_t off;
    std::string message;
  };
  std::vector<Hit> hits;
  json searched = json::array();
  for (const auto& s : AllStreams(c)) {
    if (by_name && !names.count(s.name)) continue;
    if (!StartsWith(s.name, *prefix)) continue;
    searched.push_back({{"logStreamName", s.name}, {"searchedCompletely", true}});
    for (auto& e : ReadEvents(s.path)) {
      if (e.ts < w.start || e.ts >= w.end || !filter->Matches(e.message)) continue;
      if (after_ts >= 0 && std::tie(e.ts, s.name, e.begin) <= std::tie(after_ts, after_stream, after_off)) continue;
      hits.push_back({e.ts, s.name, e.begin, std::move(e.message)});
    }
  }
  std::sort(hits.begin(), hits.end(), [](const Hit& a, const Hit& b) {
    return std::tie(a.ts, a.stream, a.off) < std::tie(b.ts, b.stream, b.off);
  });
  json events = json::array();
  // At most `limit` events and about 1 MB a page (at least one event).
  size_t n = 0;
  int64_t bytes = 0;
  for (; n < hits.size() && n < static_cast<size_t>(w.limit); ++n) {
    bytes += static_cast<int64_t>(hits[n].message.size()) + 26;
    if (n > 0 && bytes > (1 << 20)) break;
  }
  for (size_t i = 0; i < n; ++i) {
    const Hit& h = hits[i];
    events.push_back({{"logStreamName", h.stream}, {"timestamp", h.ts}, {"message", h.message},
                      {"ingestionTime", h.ts}, {"eventId", ToHex(h.stream + ":" + std::to_string(h.off))}});
  }
  json reply = {{"events", events}, {"searchedLogStreams", searched}};
  if (n < hits.size()) {
    const Hit& h = hits[n - 1];
    reply["nextToken"] = "n/" + ToHex(std::to_string(h.ts) + "|" + h.stream + "|" + std::to_string(h.off));
  }
  return reply;
}

}  // namespace

bool LogsImplements(const std::string& operation) {
  return operation == "DescribeLogGroups" || operation == "DescribeLogStreams" || operation == "GetLogEvents" ||
         operation == "FilterLogEvents";
}

Response HandleLogs(Controller& c, const std::string& operation, const json& req) {
  if (operation == "DescribeLogGroups") return DescribeLogGroups(c, req);
  if (operation == "DescribeLogStreams") return DescribeLogStreams(c, req);
  if (operation == "GetLogEvents") return GetLogEvents(c, req);
  if (operation == "FilterLogEvents") return FilterLogEvents(c, req);
  return Status(Code::kUnknownOperation, "Operation " + operation + " is not supported by this server");
}

}  // namespace ty::api
