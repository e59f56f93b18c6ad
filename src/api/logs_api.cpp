// A subset of the CloudWatch Logs API (JSON 1.1, X-Amz-Target Logs_20140328.*) over the
// executor's per-instance logs, read through the executor (Controller::OpenLog for training jobs,
// Controller::OpenContainerLog for Batch container attempts), never by path. Two groups: training
// jobs' and container jobs'; every operation takes the group as a parameter. See docs/logs.md.
//
// The AWS Logs model is not embedded (it is large); the few fields used here are validated by hand.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "api/operations.h"
#include "control/controller.h"
#include "api/log_reader.h"
#include "core/strings.h"

namespace ty::api {

using nlohmann::json;
using control::Controller;
using control::State;
using logs::LogLine;

namespace {

constexpr const char* kTrainingGroup = "/aws/sagemaker/TrainingJobs";
constexpr const char* kBatchGroup = "/aws/batch/job";  // AWS Batch's default group
// Every group, by name (DescribeLogGroups lists them in this order).
constexpr const char* kGroups[] = {kBatchGroup, kTrainingGroup};
// FilterLogEvents reads at most this much log per call, then returns a nextToken to go on from
// (AWS, too, answers a long search in several calls, some of them with no events).
constexpr int64_t kFilterScanBytes = 64LL << 20;

struct Stream {
  std::string name;     // <job>/algo-<n>-<start seconds>, or a container attempt's logStreamName
  std::string job;      // the training job, or the container attempt's executor id
  int instance = 1;     // a training job's instance
  bool container = false;
  int64_t creation_ms = 0;
};

std::string StreamName(const std::string& job, int instance, int64_t start_ms) {
  return job + "/algo-" + std::to_string(instance) + "-" + std::to_string(start_ms / 1000);
}

// Every stream of `group`: one per instance of each training job that has started, or one per
// container attempt that has started (its logStreamName, <definition>/default/<attempt id>).
std::vector<Stream> AllStreams(Controller& c, const std::string& group) {
  std::vector<Stream> out;
  c.Read([&](const State& s) {
    if (group == kBatchGroup) {
      for (const auto& [seq, j] : s.container_jobs)
        for (const auto& a : j.attempts) {
          if (a.started_at <= 0 || a.log_stream_name.empty()) continue;
          out.push_back({a.log_stream_name, a.log_stream_name.substr(a.log_stream_name.rfind('/') + 1), 1, true,
                         a.started_at});
        }
      return 0;
    }
    for (const auto& [name, tj] : s.training_jobs) {
      if (tj.training_start_time <= 0) continue;
      for (int i = 1; i <= tj.instance_count; ++i)
        out.push_back({StreamName(name, i, tj.training_start_time), name, i, false, tj.training_start_time});
    }
    return 0;
  });
  std::sort(out.begin(), out.end(), [](const Stream& a, const Stream& b) { return a.name < b.name; });
  return out;
}

// [logs] retention_days: older events are not served (the sweep deletes finished jobs' files).
int64_t RetentionFloor(Controller& c) {
  int64_t days = c.config().logs_retention_days;
  return days > 0 ? c.Now() - days * 86400000 : 0;
}

// A stream's log, opened now (null when it has none: it reads as empty).
logs::LogHandle OpenStream(Controller& c, const Stream& s) {
  return s.container ? c.OpenContainerLog(s.job) : c.OpenLog(s.job, s.instance);
}

int64_t LogSize(const logs::LogHandle& log) { return log ? log->Size() : 0; }

// Up to `n` bytes of `log` from `offset` (fewer at its end or on an error).
std::string ReadBytes(const logs::LogHandle& log, int64_t offset, int64_t n) {
  std::string out(static_cast<size_t>(std::max<int64_t>(n, 0)), '\0');
  size_t got = 0;
  while (got < out.size()) {
    int64_t r = log->ReadAt(offset + static_cast<int64_t>(got), out.data() + got, out.size() - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

// The timestamps of the first and last complete lines of a log, without reading it whole
// (lines are at most 64 KiB plus the timestamp). False when it has none.
bool FirstAndLastTimestamps(const logs::LogHandle& log, int64_t* first, int64_t* last) {
  if (!log) return false;
  constexpr int64_t kWindow = 66 * 1024;
  const int64_t size = log->Size();
  const int64_t window = std::min<int64_t>(size, kWindow);
  std::string tail = ReadBytes(log, size - window, window);
  tail.resize(static_cast<size_t>(window), '\0');
  size_t end = tail.rfind('\n');
  if (end == std::string::npos) return false;
  size_t begin = end == 0 ? std::string::npos : tail.rfind('\n', end - 1);
  if (begin == std::string::npos && size != window) return false;  // cannot happen with 64 KiB lines
  *last = std::strtoll(tail.c_str() + (begin == std::string::npos ? 0 : begin + 1), nullptr, 10);
  std::string head = ReadBytes(log, 0, std::min<int64_t>(size, kWindow));
  head.resize(std::min(head.size(), head.find('\n')));
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

// The group a request names: logGroupName or logGroupIdentifier (name or ARN), one of kGroups.
StatusOr<std::string> CheckGroup(const json& req) {
  auto name = OptString(req, "logGroupName");
  if (!name.ok()) return name.status();
  auto ident = OptString(req, "logGroupIdentifier");
  if (!ident.ok()) return ident.status();
  if (!name->empty() && !ident->empty())
    return Invalid("LogGroup name and LogGroup ARN are mutually exclusive parameters.");
  std::string g = !name->empty() ? *name : *ident;
  if (g.empty())
    return Invalid("1 validation error detected: Value null at 'logGroupName' failed to satisfy constraint: Member must not be null");
  if (StartsWith(g, "arn:")) {
    auto p = g.find(":log-group:");
    if (p != std::string::npos) g = g.substr(p + 11);
    if (EndsWith(g, ":*")) g.resize(g.size() - 2);
  }
  for (const char* known : kGroups)
    if (g == known) return g;
  return NotFound("The specified log group does not exist.");
}

const Stream* FindStream(const std::vector<Stream>& all, const std::string& name) {
  for (const auto& s : all)
    if (s.name == name) return &s;
  return nullptr;
}

std::string GroupArn(Controller& c, const std::string& group) {
  return "arn:aws:logs:" + c.config().region + ":" + c.config().account_id + ":log-group:" + group;
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
  auto token = OptString(req, "nextToken");
  if (!token.ok()) return token.status();
  // nextToken "g/<name>": the first group of the next page.
  if (!token->empty() && !StartsWith(*token, "g/")) return Invalid("The specified nextToken is invalid.");
  const std::string from = token->empty() ? "" : token->substr(2);
  json groups = json::array();
  json reply = json::object();
  for (const std::string group : kGroups) {
    if (group < from || !StartsWith(group, *prefix) || group.find(*pattern) == std::string::npos) continue;
    if (static_cast<int64_t>(groups.size()) == *limit) {
      reply["nextToken"] = "g/" + group;
      break;
    }
    int64_t bytes = 0, created = 0;
    for (const auto& s : AllStreams(c, group)) {
      bytes += LogSize(OpenStream(c, s));
      if (created == 0 || s.creation_ms < created) created = s.creation_ms;
    }
    json g = {{"logGroupName", group}, {"creationTime", created}, {"metricFilterCount", 0},
              {"arn", GroupArn(c, group) + ":*"}, {"logGroupArn", GroupArn(c, group)}, {"storedBytes", bytes},
              {"logGroupClass", "STANDARD"}};
    if (c.config().logs_retention_days > 0) g["retentionInDays"] = c.config().logs_retention_days;
    groups.push_back(g);
  }
  reply["logGroups"] = groups;
  return reply;
}

Response DescribeLogStreams(Controller& c, const json& req) {
  auto group = CheckGroup(req);
  if (!group.ok()) return group.status();
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
  std::string arn_base = GroupArn(c, *group) + ":log-stream:";
  for (const auto& s : AllStreams(c, *group)) {
    if (!StartsWith(s.name, *prefix)) continue;
    const logs::LogHandle log = OpenStream(c, s);
    json j = {{"logStreamName", s.name}, {"creationTime", s.creation_ms}, {"arn", arn_base + s.name},
              {"storedBytes", LogSize(log)}};
    int64_t first_ts = 0, last = s.creation_ms, last_ts = 0;
    if (FirstAndLastTimestamps(log, &first_ts, &last_ts)) {
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
  auto group = CheckGroup(req);
  if (!group.ok()) return group.status();
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
  auto streams = AllStreams(c, *group);
  const Stream* s = FindStream(streams, *stream_name);
  if (!s) return NotFound("The specified log stream does not exist.");

  char dir = from_head ? 'f' : 'b';
  int64_t pos = -1;  // no token: head or tail
  if (!token->empty() && !logs::ParseOffsetToken(*token, &dir, &pos))
    return Invalid("The specified nextToken is invalid.");
  // Only the page is read: forward from the token (or the head), or backward in blocks from the
  // token (or the end). Events outside [startTime, endTime) are skipped, not counted.
  const size_t cap = static_cast<size_t>(w.limit);
  const int64_t kMaxBytes = 1 << 20;
  std::vector<LogLine> page;
  int64_t bytes = 0;
  LogLine line;
  auto fits = [&] {
    return page.size() < cap && bytes + static_cast<int64_t>(line.message.size()) + 26 <= kMaxBytes;
  };
  if (dir == 'f') {
    logs::ForwardReader in(OpenStream(c, *s), std::max<int64_t>(pos, 0));
    while (in.Next(&line)) {
      if (line.ts < w.start || line.ts >= w.end) continue;
      if (!fits()) break;
      bytes += static_cast<int64_t>(line.message.size()) + 26;
      page.push_back(std::move(line));
    }
  } else {
    logs::BackwardReader in(OpenStream(c, *s), pos);
    while (in.Next(&line)) {
      if (line.ts < w.start || line.ts >= w.end) continue;
      if (!fits()) break;
      bytes += static_cast<int64_t>(line.message.size()) + 26;
      page.push_back(std::move(line));
    }
    std::reverse(page.begin(), page.end());
  }
  json events = json::array();
  for (const auto& e : page) events.push_back({{"timestamp", e.ts}, {"message", e.message}, {"ingestionTime", e.ts}});
  // Tokens: forward resumes after the last event returned, backward before the first. With nothing
  // returned, the token asked with comes back (clients stop paging when it repeats); without one,
  // the head.
  int64_t fwd = pos >= 0 ? pos : 0, bwd = fwd;
  if (!page.empty()) {
    fwd = page.back().end;
    bwd = page.front().begin;
  }
  return json{{"events", events}, {"nextForwardToken", logs::OffsetToken('f', fwd)},
              {"nextBackwardToken", logs::OffsetToken('b', bwd)}};
}

Response FilterLogEvents(Controller& c, const json& req) {
  auto group = CheckGroup(req);
  if (!group.ok()) return group.status();
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
  // nextToken "n/<hex>": where each stream's scan stopped, so paging reads every stream forward
  // once and a token stays valid while the streams grow.
  logs::ScanPositions from;
  if (!token->empty() && !logs::ParseScanToken(*token, &from)) return Invalid("The specified nextToken is invalid.");
  std::vector<logs::StreamFile> files;
  for (auto& s : AllStreams(c, *group)) {
    if (by_name && !names.count(s.name)) continue;
    if (!StartsWith(s.name, *prefix)) continue;
    files.push_back({s.name, "", OpenStream(c, s)});
  }
  logs::ScanLimits limits;
  limits.max_events = static_cast<size_t>(w.limit);
  limits.max_scanned = kFilterScanBytes;
  auto scan = logs::ScanInterleaved(files, from, [&](const LogLine& e) {
    return e.ts >= w.start && e.ts < w.end && filter->Matches(e.message);
  }, limits);
  json events = json::array();
  for (const auto& m : scan.events)
    events.push_back({{"logStreamName", m.stream->name}, {"timestamp", m.line.ts}, {"message", m.line.message},
                      {"ingestionTime", m.line.ts},
                      {"eventId", ToHex(m.stream->name + ":" + std::to_string(m.line.begin))}});
  json searched = json::array();
  for (size_t i = 0; i < files.size(); ++i)
    searched.push_back({{"logStreamName", files[i].name}, {"searchedCompletely", static_cast<bool>(scan.complete[i])}});
  json reply = {{"events", events}, {"searchedLogStreams", searched}};
  if (scan.more) reply["nextToken"] = logs::ScanToken(scan.resume);
  return reply;
}

}  // namespace

// The instance logs of training jobs and the attempt logs of container jobs: reads only. A stream
// carries its job's tags and owner (authorize.cpp), so lists show the streams of jobs the caller
// may describe.
const OperationTable& LogsOperations() {
  static const OperationTable kTable = [] {
    using RK = ResourceKind;
    const std::vector<AuditMember> group = {{"logGroupName", "AWS::Logs::LogGroup"}};
    return OperationTable(Api::kLogs, "logs", nullptr, {
        {.name = "DescribeLogGroups", .handle = Plain<DescribeLogGroups>},
        {.name = "DescribeLogStreams", .handle = Plain<DescribeLogStreams>,
         .access = {.resource = RK::kLogGroup, .field = "logGroupName", .list_member = "logStreams",
                    .item_action = "logs:DescribeLogStreams", .item = RK::kLogStream, .item_name = "logStreamName"},
         .audit = group},
        {.name = "GetLogEvents", .handle = Plain<GetLogEvents>,
         .access = {.resource = RK::kLogStream, .field = "logStreamName"},
         .audit = {{"logGroupName", "AWS::Logs::LogGroup"}, {"logStreamName", "AWS::Logs::LogStream"}}},
        {.name = "FilterLogEvents", .handle = Plain<FilterLogEvents>,
         .access = {.resource = RK::kLogGroup, .field = "logGroupName", .list_member = "events",
                    .item_action = "logs:FilterLogEvents", .item = RK::kLogStream, .item_name = "logStreamName",
                    .also_list_member = "searchedLogStreams"},
         .audit = group},
    });
  }();
  return kTable;
}

}  // namespace ty::api
