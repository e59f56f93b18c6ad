// trainyard's own reads for the console's queue pages (docs/console-data.md): where each queue's
// shares stand now (QueueStandings) and how they stood over the last day (ShareHistory). Both
// read what the controller computes (control/share_standings.h) under its shared lock; the
// figures are those of GET /metrics' share gauges.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "api/handlers.h"
#include "control/controller.h"
#include "control/share_standings.h"

namespace ty::api {

using nlohmann::json;
using control::Controller;
using control::State;

namespace {

// Instances are whole for quota shares and may be fractional for fair shares: whole numbers are
// written as integers.
json Instances(double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v))) return static_cast<int64_t>(v);
  return v;
}

// Members other than `known` are refused, naming the first and those the operation takes.
Status UnknownMembers(const json& req, std::initializer_list<const char*> known, const char* operation) {
  for (const auto& item : req.items()) {
    const std::string& k = item.key();  // a lambda may not capture a structured binding (C++20)
    if (std::any_of(known.begin(), known.end(), [&](const char* n) { return k == n; })) continue;
    std::string names;
    for (const char* n : known) names += (names.empty() ? "" : ", ") + std::string(n);
    return InvalidArgument("Unknown member " + k.substr(0, 64) + " (" + operation + " takes " + names + ")");
  }
  return Status::Ok();
}

// A job queue named by its name or ARN, resolved to its name.
StatusOr<std::string> QueueName(const State& s, const std::string& ref) {
  const JobQueue* q = Controller::FindQueue(s, ref);
  if (!q) return NotFound("Requested resource not found: job queue " + ref.substr(0, 300));
  return q->name;
}

json EncodeStanding(const control::QueueStanding& q) {
  json counts = json::object();
  for (const auto& [status, n] : q.counts) counts[JobStatusName(status)] = n;
  json shares = json::array();
  for (const control::ShareStanding& st : q.shares) {
    json row = {{"Share", st.share},
                {"InUse", st.in_use},
                {"Entitlement", Instances(st.entitlement)},
                {"Borrowed", Instances(st.borrowed)},
                {"Lent", Instances(st.lent)},
                {"Waiting", st.waiting}};
    if (st.fair) {
      row["WeightFactor"] = st.fair->weight_factor;
      row["EntitlementRatio"] = st.fair->entitlement_ratio;
      if (st.fair->usage) row["Usage"] = *st.fair->usage;
      if (st.fair->weighted_usage) row["WeightedUsage"] = *st.fair->weighted_usage;
    }
    if (!st.quota_types.empty()) {
      json types = json::array();
      for (const auto& [type, e] : st.quota_types)
        types.push_back({{"InstanceType", type},
                         {"Limit", e.limit},
                         {"InUse", e.in_use},
                         {"Borrowed", e.borrowed},
                         {"Lent", e.lent}});
      row["InstanceTypes"] = std::move(types);
    }
    shares.push_back(std::move(row));
  }
  json out = {{"JobQueue", q.queue},
              {"Kind", control::QueueKindName(q.kind)},
              {"State", ToWire(q.state)},
              {"Counts", std::move(counts)},
              {"Shares", std::move(shares)}};
  if (!q.unassigned_lent.empty()) {
    json unassigned = json::object();
    for (const auto& [type, n] : q.unassigned_lent) unassigned[type] = n;
    out["UnassignedLent"] = std::move(unassigned);
  }
  return out;
}

// Epoch seconds, bounded so that the conversion to milliseconds is exact and in range.
StatusOr<EpochMs> TimeMember(const json& req, const char* key, EpochMs fallback) {
  auto it = req.find(key);
  if (it == req.end()) return fallback;
  if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() <= 1e12))
    return InvalidArgument(std::string(key) + " must be a number of epoch seconds between 0 and 1e12");
  return static_cast<EpochMs>(std::llround(it->get<double>() * 1000.0));
}

}  // namespace

Response HandleQueueStandings(Controller& c, const json& req) {
  if (!req.is_object()) return InvalidArgument("The request body must be a JSON object");
  if (Status st = UnknownMembers(req, {"JobQueue"}, "QueueStandings"); !st.ok()) return st;
  if (req.contains("JobQueue") && (!req["JobQueue"].is_string() || req["JobQueue"].get<std::string>().empty()))
    return InvalidArgument("JobQueue must be a non-empty string (a job queue's name or ARN)");
  const std::string ref = req.value("JobQueue", "");
  return c.Read([&](const State& s) -> Response {
    std::string name;
    if (!ref.empty()) {
      auto found = QueueName(s, ref);
      if (!found.ok()) return found.status();
      name = *found;
    }
    const control::Holdings held = control::ActiveHoldings(s);
    json queues = json::array();
    for (const control::QueueStanding& q : control::ShareStandings(s, held, ref.empty() ? nullptr : &name))
      queues.push_back(EncodeStanding(q));
    return json{{"Queues", std::move(queues)}};
  });
}

Response HandleShareHistory(Controller& c, const json& req) {
  if (!req.is_object()) return InvalidArgument("The request body must be a JSON object");
  if (Status st = UnknownMembers(req, {"JobQueue", "StartTime", "EndTime"}, "ShareHistory"); !st.ok()) return st;
  if (!req.contains("JobQueue") || !req["JobQueue"].is_string() || req["JobQueue"].get<std::string>().empty())
    return InvalidArgument("JobQueue is required and must be a non-empty string (a job queue's name or ARN)");
  auto from = TimeMember(req, "StartTime", INT64_MIN);
  if (!from.ok()) return from.status();
  auto to = TimeMember(req, "EndTime", INT64_MAX);
  if (!to.ok()) return to.status();
  if (*from > *to) return InvalidArgument("StartTime must not be after EndTime");
  const std::string ref = req["JobQueue"].get<std::string>();
  const int64_t interval = c.config().console.share_history_interval_seconds;
  return c.Read([&](const State& s) -> Response {
    auto name = QueueName(s, ref);
    if (!name.ok()) return name.status();
    json points = json::array();
    if (const auto* samples = s.share_history.Of(*name))
      for (const control::QueueSample& sample : *samples) {
        if (sample.at < *from || sample.at > *to) continue;
        json shares = json::object();
        for (const control::ShareSample& sh : sample.shares)
          shares[sh.share] = {{"InUse", sh.in_use},
                              {"Entitlement", Instances(sh.entitlement)},
                              {"Borrowed", Instances(sh.borrowed)},
                              {"Lent", Instances(sh.lent)}};
        points.push_back({{"Timestamp", static_cast<double>(sample.at) / 1000.0}, {"Shares", std::move(shares)}});
      }
    return json{{"JobQueue", *name}, {"IntervalSeconds", interval}, {"Points", std::move(points)}};
  });
}

}  // namespace ty::api
