#include "api/cloudwatch_api.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <zlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "api/audit.h"
#include "api/errors.h"
#include "api/cloudwatch_wire.h"
#include "control/cloudwatch_read.h"
#include "control/cloudwatch_metrics.h"
#include "control/controller.h"
#include "control/state.h"
#include "core/strings.h"

namespace ty::api {

using json = nlohmann::json;
using control::CwBucket;
using control::CwDimensions;
using control::CwMetricId;
using control::State;

using cw::Invalid;
using cw::Missing;
using cw::String;
using cw::Time;
using cw::Dimensions;
using cw::Metric;

namespace {

constexpr std::string_view kTargetPrefix = "GraniteServiceVersion20100801.";
constexpr std::string_view kCborPath = "/service/GraniteServiceVersion20100801/operation/";
constexpr int64_t kListPage = 500;
constexpr int64_t kMaxDatapointsLimit = 100800;
constexpr int64_t kMaxStatisticsDatapoints = 1440;


// ---- The codec ----

void Head(std::string* out, uint8_t major, uint64_t n) {
  const uint8_t m = static_cast<uint8_t>(major << 5);
  auto bytes = [&](int k) {
    for (int i = k - 1; i >= 0; --i) out->push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  };
  if (n < 24) out->push_back(static_cast<char>(m | n));
  else if (n <= 0xff) { out->push_back(static_cast<char>(m | 24)); bytes(1); }
  else if (n <= 0xffff) { out->push_back(static_cast<char>(m | 25)); bytes(2); }
  else if (n <= 0xffffffffULL) { out->push_back(static_cast<char>(m | 26)); bytes(4); }
  else { out->push_back(static_cast<char>(m | 27)); bytes(8); }
}

void Double(std::string* out, double d) {
  out->push_back(static_cast<char>(0xfb));
  const uint64_t bits = std::bit_cast<uint64_t>(d);
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

double TimestampOf(const json::binary_t& b) {
  double d = 0;
  if (b.size() == sizeof d) std::memcpy(&d, b.data(), sizeof d);
  return d;
}

void Write(std::string* out, const json& v) {
  switch (v.type()) {
    case json::value_t::null: out->push_back(static_cast<char>(0xf6)); break;
    case json::value_t::boolean: out->push_back(static_cast<char>(v.get<bool>() ? 0xf5 : 0xf4)); break;
    case json::value_t::number_unsigned: Head(out, 0, v.get<uint64_t>()); break;
    case json::value_t::number_integer: {
      const int64_t i = v.get<int64_t>();
      if (i >= 0) Head(out, 0, static_cast<uint64_t>(i));
      else Head(out, 1, static_cast<uint64_t>(-(i + 1)));
      break;
    }
    case json::value_t::number_float: Double(out, v.get<double>()); break;
    case json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      Head(out, 3, s.size());
      *out += s;
      break;
    }
    case json::value_t::array:
      Head(out, 4, v.size());
      for (const auto& e : v) Write(out, e);
      break;
    case json::value_t::object:
      Head(out, 5, v.size());
      for (const auto& [k, e] : v.items()) {
        Head(out, 3, k.size());
        *out += k;
        Write(out, e);
      }
      break;
    case json::value_t::binary: {
      const auto& b = v.get_binary();
      if (b.has_subtype() && b.subtype() == 1) {  // a timestamp: tag 1 over epoch seconds
        out->push_back(static_cast<char>(0xc1));
        Double(out, TimestampOf(b));
      } else {
        Head(out, 2, b.size());
        out->append(reinterpret_cast<const char*>(b.data()), b.size());
      }
      break;
    }
    case json::value_t::discarded: break;
  }
}

// The same value with every timestamp as its number (JSON 1.0 replies).
json AsJson(const json& v) {
  if (v.is_binary()) return TimestampOf(v.get_binary());
  if (v.is_array()) {
    json out = json::array();
    for (const auto& e : v) out.push_back(AsJson(e));
    return out;
  }
  if (v.is_object()) {
    json out = json::object();
    for (const auto& [k, e] : v.items()) out[k] = AsJson(e);
    return out;
  }
  return v;
}

// nlohmann-json 3.11 reads CBOR tags from 6 on only, and a timestamp is tag 1 (0xc1): this walk
// rewrites tags 0..5 in their one-byte form into the equivalent two-byte form (0xd8 N), which it
// reads. The walk keeps a stack of the open arrays and maps, so nesting past `max_depth` is refused
// before the recursive reader sees it. False: not well-formed (*too_deep: too deeply nested).
bool Retag(std::string_view in, std::string* out, int max_depth, bool* too_deep, size_t* error_at) {
  std::vector<int64_t> open;  // items still to come in each open array or map; -1: until a break
  size_t pos = 0;
  bool top_done = false;
  auto done = [&] {  // one whole item ended
    while (!open.empty() && open.back() > 0 && --open.back() == 0) open.pop_back();
    if (open.empty()) top_done = true;
  };
  while (pos < in.size() && !top_done) {
    *error_at = pos;
    const auto b = static_cast<uint8_t>(in[pos]);
    const uint8_t major = b >> 5, info = b & 31;
    if (b == 0xff) {  // the break that ends an indefinite array, map or string
      if (open.empty() || open.back() != -1) return false;
      open.pop_back();
      out->push_back(static_cast<char>(b));
      ++pos;
      if (open.empty()) top_done = true; else done();
      continue;
    }
    uint64_t value = info;
    size_t head = 1;
    if (info >= 24 && info <= 27) {
      head += size_t{1} << (info - 24);
      if (pos + head > in.size()) return false;
      value = 0;
      for (size_t i = 1; i < head; ++i) value = (value << 8) | static_cast<uint8_t>(in[pos + i]);
    } else if (info >= 28 && (info != 31 || major == 0 || major == 1 || major == 6)) {
      return false;
    }
    const bool indefinite = info == 31;
    if (major == 6 && value <= 5 && head == 1) {
      out->push_back(static_cast<char>(0xd8));
      out->push_back(static_cast<char>(value));
      ++pos;
      continue;  // the tagged item follows
    }
    out->append(in.substr(pos, head));
    pos += head;
    if (major == 6) continue;
    if ((major == 2 || major == 3) && !indefinite) {
      if (value > in.size() - pos) return false;
      out->append(in.substr(pos, value));
      pos += value;
    }
    if ((major >= 2 && major <= 5) && indefinite) {
      open.push_back(-1);
    } else if ((major == 4 || major == 5) && value > 0) {
      if (value > in.size()) return false;  // more items than bytes left
      open.push_back(static_cast<int64_t>(major == 5 ? value * 2 : value));
    } else {
      done();
      continue;
    }
    if (static_cast<int>(open.size()) > max_depth) {
      *too_deep = true;
      return false;
    }
  }
  *error_at = pos;
  return top_done && pos == in.size();
}

// A gzip body (Content-Encoding: gzip; botocore compresses PutMetricData bodies of 10 KiB and
// more), inflated to at most `limit` bytes.
StatusOr<std::string> Gunzip(std::string_view in, size_t limit) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return Status(Code::kInternal, "zlib could not start");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[16384];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (out.size() > limit) {
      inflateEnd(&z);
      return Status(Code::kPayloadTooLarge, "The request body inflates past " + std::to_string(limit) +
                                                " bytes (server.max_request_bytes)");
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) return InvalidArgument("The request body is not well-formed gzip (Content-Encoding: gzip)");
  return out;
}


// ---- Operations ----

// A read that held many datapoints (metric math, a large reply's JSON tree) freed them in many
// small blocks, which the allocator keeps for the process unless asked: give the free pages back,
// so a burst of large reads does not stay as resident memory. Callers ask only past a size
// (kReleaseAfterDatapoints, kReleaseAfterReplyBytes), below which asking costs more than it saves.
constexpr uint64_t kReleaseAfterDatapoints = 100'000;
constexpr size_t kReleaseAfterReplyBytes = size_t{1} << 20;
void ReleaseFreedMemory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

StatusOr<json> PutMetricData(control::Controller& c, const json& req) {
  auto ns = String(req, "Namespace", "", true, 1, 255);
  if (!ns.ok()) return ns.status();
  if (StartsWith(*ns, "AWS/"))
    return Invalid("Namespace", "namespaces starting with AWS/ are reserved for AWS's own metrics, not " + *ns);
  if (*ns == control::kSageMakerMetricNamespace) return Invalid("Namespace", *ns + " is the training jobs' own namespace");
  if (req.contains("EntityMetricData") && !req["EntityMetricData"].is_null() && !req["EntityMetricData"].empty())
    return Invalid("EntityMetricData", "entities are not supported by this server; use MetricData");
  if (!req.contains("MetricData") || req["MetricData"].is_null()) return Missing("MetricData");
  const json& data = req["MetricData"];
  if (!data.is_array() || data.empty() || data.size() > 1000)
    return Invalid("MetricData", "must be a list of 1 to 1000 datums");
  const EpochMs now = c.Now();
  std::vector<control::CwDatum> out;
  for (size_t i = 0; i < data.size(); ++i) {
    const std::string at = "MetricData.member." + std::to_string(i + 1) + ".";
    const json& d = data[i];
    if (!d.is_object()) return Invalid(at.substr(0, at.size() - 1), "must be a structure");
    control::CwDatum datum;
    auto name = String(d, "MetricName", at, true, 1, 255);
    if (!name.ok()) return name.status();
    auto dims = Dimensions(d, at, false);
    if (!dims.ok()) return dims.status();
    datum.id = CwMetricId{*ns, *name, *dims};
    auto unit = String(d, "Unit", at, false, 0, 64);
    if (!unit.ok()) return unit.status();
    if (!unit->empty() && !cw::IsUnit(*unit)) return Invalid(at + "Unit", *unit + " is not a CloudWatch unit");
    datum.unit = *unit;
    auto t = Time(d, "Timestamp", false, now);
    if (!t.ok()) return Invalid(at + "Timestamp", "must be a timestamp");
    if (*t < now - 14 * control::kCwDay || *t > now + 2 * 3'600'000)
      return Invalid(at + "Timestamp", "must be within the past two weeks and at most two hours ahead, not " +
                                           FormatIso8601(*t));
    datum.timestamp = *t;
    if (d.contains("StorageResolution") && !d["StorageResolution"].is_null() &&
        !(d["StorageResolution"].is_number_integer() &&
          (d["StorageResolution"].get<int64_t>() == 1 || d["StorageResolution"].get<int64_t>() == 60)))
      return Invalid(at + "StorageResolution", "must be 1 or 60");
    // AWS refuses values it cannot store: non-finite, or too large or too small in magnitude.
    auto value_ok = [](const json& v) {
      if (!v.is_number()) return false;
      const double x = std::fabs(v.get<double>());
      return std::isfinite(x) && (x == 0 || (x >= 8.515920e-109 && x <= 1.174271e+108));
    };
    const bool has_value = d.contains("Value") && !d["Value"].is_null();
    const bool has_stats = d.contains("StatisticValues") && !d["StatisticValues"].is_null();
    const bool has_values = d.contains("Values") && !d["Values"].is_null();
    if (has_value + has_stats + has_values != 1)
      return Status(Code::kFailedPrecondition,
                    "The parameters " + at + "Value, " + at + "StatisticValues and " + at +
                        "Values are mutually exclusive and one of them is required.");
    if (has_value) {
      if (!value_ok(d["Value"])) return Invalid(at + "Value", "must be a finite number from 8.515920e-109 to 1.174271e+108 in magnitude, or 0");
      datum.values.Add(d["Value"].get<double>());
    } else if (has_stats) {
      const json& sv = d["StatisticValues"];
      for (const char* k : {"SampleCount", "Sum", "Minimum", "Maximum"}) {
        if (!sv.is_object() || !sv.contains(k)) return Missing(at + "StatisticValues." + k);
        if (!value_ok(sv[k])) return Invalid(at + "StatisticValues." + k, "must be a finite number");
      }
      const double n = sv["SampleCount"].get<double>(), lo = sv["Minimum"].get<double>(), hi = sv["Maximum"].get<double>();
      if (n <= 0) return Invalid(at + "StatisticValues.SampleCount", "must be greater than 0");
      if (lo > hi) return Status(Code::kFailedPrecondition, "The parameters " + at + "StatisticValues.Minimum must not exceed " + at + "StatisticValues.Maximum.");
      datum.values = CwBucket{n, sv["Sum"].get<double>(), lo, hi, {}};
    } else {
      const json& vs = d["Values"];
      if (!vs.is_array() || vs.empty() || vs.size() > 150) return Invalid(at + "Values", "must be a list of 1 to 150 numbers");
      const json* counts = d.contains("Counts") && !d["Counts"].is_null() ? &d["Counts"] : nullptr;
      if (counts && (!counts->is_array() || counts->size() != vs.size()))
        return Status(Code::kFailedPrecondition, "The parameters " + at + "Values and " + at + "Counts must be lists of the same length.");
      for (size_t k = 0; k < vs.size(); ++k) {
        if (!value_ok(vs[k])) return Invalid(at + "Values." + std::to_string(k + 1), "must be a finite number");
        double n = 1;
        if (counts) {
          if (!(*counts)[k].is_number() || !((*counts)[k].get<double>() >= 0) || !std::isfinite((*counts)[k].get<double>()))
            return Invalid(at + "Counts." + std::to_string(k + 1), "must be a number >= 0");
          n = (*counts)[k].get<double>();
        }
        datum.values.Add(vs[k].get<double>(), n);
      }
      if (datum.values.count <= 0) continue;  // every count 0: nothing to store
    }
    out.push_back(std::move(datum));
  }
  TY_RETURN_IF_ERROR(c.PutMetricData(out));
  return json::object();
}

StatusOr<json> ListMetrics(control::Controller& c, const json& req, const cw::MetricReadCheck& may_read) {
  auto ns = String(req, "Namespace", "", false, 1, 255);
  if (!ns.ok()) return ns.status();
  auto name = String(req, "MetricName", "", false, 1, 255);
  if (!name.ok()) return name.status();
  auto filter = Dimensions(req, "", true);
  if (!filter.ok()) return filter.status();
  auto token = String(req, "NextToken", "", false, 0, 64);
  if (!token.ok()) return token.status();
  size_t offset = 0;
  if (!token->empty()) {
    if (token->find_first_not_of("0123456789") != std::string::npos || token->size() > 12)
      return Invalid("NextToken", "is not a token this server returned");
    offset = std::stoull(*token);
  }
  if (req.contains("RecentlyActive") && !req["RecentlyActive"].is_null() && req["RecentlyActive"] != "PT3H")
    return Invalid("RecentlyActive", "must be PT3H");
  const EpochMs recent = req.contains("RecentlyActive") && !req["RecentlyActive"].is_null() ? c.Now() - 3 * 3'600'000 : INT64_MIN;
  return c.Read([&](const State& s) -> StatusOr<json> {
    json metrics = json::array();
    size_t seen = 0;
    bool more = false;
    control::ForEachCwMetric(s, [&](const CwMetricId& id) {
      if (more) return;
      if (!ns->empty() && id.ns != *ns) return;
      if (!name->empty() && id.name != *name) return;
      for (const auto& wanted : *filter) {
        const std::string& fn = wanted.first;
        const std::string& fv = wanted.second;
        auto d = std::find_if(id.dims.begin(), id.dims.end(), [&fn](const auto& x) { return x.first == fn; });
        if (d == id.dims.end() || (!fv.empty() && d->second != fv)) return;
      }
      if (recent != INT64_MIN && control::ReadCwMetric(s, id, recent, INT64_MAX).buckets.empty()) return;
      if (!may_read(s, id).ok()) return;  // listed only to those who may read it
      if (seen++ < offset) return;
      if (static_cast<int64_t>(metrics.size()) == kListPage) { more = true; return; }
      json dims = json::array();
      for (const auto& [n, v] : id.dims) dims.push_back({{"Name", n}, {"Value", v}});
      metrics.push_back({{"Namespace", id.ns}, {"MetricName", id.name}, {"Dimensions", dims}});
    });
    json out = {{"Metrics", metrics}};
    if (more) out["NextToken"] = std::to_string(offset + metrics.size());
    return out;
  });
}

StatusOr<json> GetMetricStatistics(control::Controller& c, const json& req, const cw::MetricReadCheck& may_read) {
  auto id = Metric(req, "");
  if (!id.ok()) return id.status();
  auto from = Time(req, "StartTime", true, 0);
  if (!from.ok()) return from.status();
  auto to = Time(req, "EndTime", true, 0);
  if (!to.ok()) return to.status();
  if (*from >= *to) return Status(Code::kFailedPrecondition, "The parameter StartTime must be before EndTime.");
  if (!req.contains("Period") || req["Period"].is_null()) return Missing("Period");
  if (!req["Period"].is_number_integer() || !control::IsCwPeriod(req["Period"].get<int64_t>()))
    return Invalid("Period", "must be 1, 5, 10, 30 or a multiple of 60 seconds");
  const EpochMs period = req["Period"].get<int64_t>() * 1000;
  std::vector<std::string> stats, extended;
  for (const auto& [key, list, rule] : {std::tuple{"Statistics", &stats, 5}, std::tuple{"ExtendedStatistics", &extended, 10}}) {
    if (!req.contains(key) || req[key].is_null()) continue;
    if (!req[key].is_array() || req[key].empty() || static_cast<int>(req[key].size()) > rule)
      return Invalid(key, "must be a list of 1 to " + std::to_string(rule) + " statistics");
    for (const auto& s : req[key]) {
      if (!s.is_string()) return Invalid(key, "must hold strings");
      const std::string v = s.get<std::string>();
      const bool ok = list == &stats ? control::IsCwStatistic(v) : control::IsCwPercentile(v);
      if (!ok)
        return Invalid(key, list == &stats ? v + " is not one of SampleCount, Average, Sum, Minimum, Maximum"
                                           : v + " is not a percentile p0 .. p100");
      list->push_back(v);
    }
  }
  if (stats.empty() && extended.empty())
    return Status(Code::kFailedPrecondition, "The parameter Statistics or ExtendedStatistics is required (one of them).");
  if (!stats.empty() && !extended.empty())
    return Status(Code::kFailedPrecondition, "The parameters Statistics and ExtendedStatistics are mutually exclusive.");
  if ((*to - *from + period - 1) / period > kMaxStatisticsDatapoints)
    return Status(Code::kFailedPrecondition,
                  "You have requested up to " + std::to_string((*to - *from + period - 1) / period) +
                      " datapoints, which exceeds the limit of 1440. Narrow the window or lengthen the Period.");
  auto unit = String(req, "Unit", "", false, 0, 64);
  if (!unit.ok()) return unit.status();
  if (!unit->empty() && !cw::IsUnit(*unit)) return Invalid("Unit", *unit + " is not a CloudWatch unit");
  return c.Read([&](const State& s) -> StatusOr<json> {
    TY_RETURN_IF_ERROR(may_read(s, *id));
    // Each period's statistics straight from the stored buckets (no copy of the window; at most
    // control::CwStoredPointsAtMost of any window, 44,955, below AWS's 50,850 queried points). The
    // metric's unit is known once read, and a unit asked for that it lacks means no datapoints.
    json points = json::array();
    const std::string metric_unit = control::ForEachCwPeriod(s, *id, *from, *to, period, [&](EpochMs t, const CwBucket& b) {
      json d = {{"Timestamp", CwTimestamp(static_cast<double>(t) / 1000)}};
      for (const auto& st : stats) d[st] = *control::CwStat(b, st);
      if (!extended.empty()) {
        json e = json::object();
        for (const auto& st : extended)
          if (auto v = control::CwStat(b, st)) e[st] = *v;
        d["ExtendedStatistics"] = e;
      }
      points.push_back(std::move(d));
    });
    if (!unit->empty() && *unit != metric_unit) points = json::array();
    for (json& d : points) d["Unit"] = metric_unit;
    return json{{"Label", id->name}, {"Datapoints", std::move(points)}};
  });
}

StatusOr<json> GetMetricData(control::Controller& c, const json& req, const cw::MetricReadCheck& may_read) {
  if (!req.contains("MetricDataQueries") || req["MetricDataQueries"].is_null()) return Missing("MetricDataQueries");
  const json& qs = req["MetricDataQueries"];
  if (!qs.is_array() || qs.empty() || qs.size() > 500) return Invalid("MetricDataQueries", "must be a list of 1 to 500 queries");
  auto from = Time(req, "StartTime", true, 0);
  if (!from.ok()) return from.status();
  auto to = Time(req, "EndTime", true, 0);
  if (!to.ok()) return to.status();
  if (*from >= *to) return Status(Code::kFailedPrecondition, "The parameter StartTime must be before EndTime.");
  int64_t max_points = kMaxDatapointsLimit;
  if (req.contains("MaxDatapoints") && !req["MaxDatapoints"].is_null()) {
    if (!req["MaxDatapoints"].is_number_integer() || req["MaxDatapoints"].get<int64_t>() < 1 ||
        req["MaxDatapoints"].get<int64_t>() > kMaxDatapointsLimit)
      return Invalid("MaxDatapoints", "must be an integer from 1 to 100800");
    max_points = req["MaxDatapoints"].get<int64_t>();
  }
  auto scan = String(req, "ScanBy", "", false, 0, 32);
  if (!scan.ok()) return scan.status();
  if (!scan->empty() && *scan != "TimestampDescending" && *scan != "TimestampAscending")
    return Invalid("ScanBy", "must be TimestampDescending or TimestampAscending");
  const bool ascending = *scan == "TimestampAscending";
  auto token = String(req, "NextToken", "", false, 0, 64);
  if (!token.ok()) return token.status();
  size_t skip = 0;
  if (!token->empty()) {
    if (token->find_first_not_of("0123456789") != std::string::npos || token->size() > 12)
      return Invalid("NextToken", "is not a token this server returned");
    skip = std::stoull(*token);
  }
  std::vector<control::CwQuery> queries;
  std::set<std::string> ids;
  for (size_t i = 0; i < qs.size(); ++i) {
    const std::string at = "MetricDataQueries.member." + std::to_string(i + 1) + ".";
    const json& q = qs[i];
    auto out = cw::Query(q, at);
    if (!out.ok()) return out.status();
    if (!ids.insert(out->id).second) return Invalid(at + "Id", "is used by two queries: " + out->id);
    queries.push_back(std::move(*out));
  }
  // The grid FILL and constant results use: the shortest period of the request.
  EpochMs grid_period = 0;
  for (const auto& q : queries)
    if (q.period && (!grid_period || q.period < grid_period)) grid_period = q.period;
  if (!grid_period) grid_period = 60'000;
  if ((*to - *from) / grid_period > kMaxDatapointsLimit)
    return Status(Code::kFailedPrecondition, "The window holds more than 100800 periods of " +
                                                 std::to_string(grid_period / 1000) + " s; lengthen the Period");
  // What the call may hold, counted before any of it is read (docs/metrics.md, "Limits on what a
  // read may cost").
  auto cost = control::CheckCwQueryCost(queries, *from, *to, grid_period, c.Now());
  if (!cost.ok()) return cost.status();
  auto may_read_all = [&](const State& s) -> Status {
    for (const auto& q : queries)
      if (q.expression.empty()) TY_RETURN_IF_ERROR(may_read(s, q.metric));
    return Status::Ok();
  };
  // The page holds the returned points [skip, skip + max_points) in request order, each query's
  // in ScanBy order; a query whose points run past the page, and every later one, is PartialData.
  json results = json::array();
  size_t index = 0, returned = 0;  // the next point's position over the whole answer; points in this page
  bool more = false;
  auto add_result = [&](const control::CwQuery& q, json timestamps, json values) {
    json r = {{"Id", q.id}, {"Label", q.label.empty() ? (q.expression.empty() ? q.metric.name : q.id) : q.label}};
    r["Timestamps"] = std::move(timestamps);
    r["Values"] = std::move(values);
    r["StatusCode"] = more ? "PartialData" : "Complete";
    r["Messages"] = json::array();
    results.push_back(std::move(r));
  };
  // Writes the points [lo, hi) of a query's `n` (oldest first in `points`) in ScanBy order, and moves past all n.
  auto add_points = [&](const control::CwQuery& q, const std::vector<std::pair<EpochMs, double>>& points, size_t n) {
    const size_t lo = std::max(skip, index), hi = std::min(skip + static_cast<size_t>(max_points), index + n);
    json ts = json::array(), vs = json::array();
    if (lo < hi) {
      ts.get_ref<json::array_t&>().reserve(hi - lo);
      vs.get_ref<json::array_t&>().reserve(hi - lo);
      for (size_t k = lo - index; k < hi - index; ++k) {
        const auto& [t, v] = points[ascending ? k : n - 1 - k];
        ts.push_back(CwTimestamp(static_cast<double>(t) / 1000));
        vs.push_back(v);
      }
      returned += hi - lo;
    }
    index += n;
    if (index > skip + static_cast<size_t>(max_points)) more = true;
    add_result(q, std::move(ts), std::move(vs));
  };
  const bool math = std::any_of(queries.begin(), queries.end(), [](const control::CwQuery& q) { return !q.expression.empty(); });
  if (!math) {
    // No expression needs the others: a query before the page is only counted, one after it not
    // read at all, so a page costs its own points (and a count of the earlier ones).
    TY_RETURN_IF_ERROR(c.Read([&](const State& s) -> Status {
      TY_RETURN_IF_ERROR(may_read_all(s));
      std::vector<std::pair<EpochMs, double>> points;
      for (const auto& q : queries) {
        if (!q.return_data) continue;
        points.clear();
        if (more) {
          add_points(q, points, 0);
          continue;
        }
        const size_t n = control::CountCwQuery(s, q, *from, *to);
        if (index + n > skip && index < skip + static_cast<size_t>(max_points)) {
          points.reserve(n);
          control::ReadCwQuery(s, q, *from, *to, [&points](EpochMs t, double v) { points.emplace_back(t, v); });
        }
        add_points(q, points, points.empty() ? n : points.size());
      }
      return Status::Ok();
    }));
  } else {
    StatusOr<control::CwQueryValues> read = c.Read([&](const State& s) -> StatusOr<control::CwQueryValues> {
      TY_RETURN_IF_ERROR(may_read_all(s));
      return control::ReadCwQueries(s, queries, *from, *to);
    });
    if (!read.ok()) return read.status();
    control::CwQueryValues values = std::move(*read);
    // Expressions in request order; one may use any query before or after it that is not itself
    // an expression still to come (evaluated in order, so forward references to expressions fail).
    if (Status st = control::EvaluateCwExpressions(queries, *from, *to, grid_period, &values); !st.ok())
      return Invalid("MetricDataQueries", st.message());
    std::vector<std::pair<EpochMs, double>> points;
    for (const auto& q : queries) {
      if (!q.return_data) continue;
      const auto& series = values.series[q.id];
      points.assign(series.begin(), series.end());
      add_points(q, points, points.size());
    }
    values = {};
    points = {};
    if (*cost >= kReleaseAfterDatapoints) ReleaseFreedMemory();
  }
  json out = json::object();
  out["MetricDataResults"] = std::move(results);
  out["Messages"] = json::array();
  if (more) out["NextToken"] = std::to_string(skip + returned);
  return out;
}

// ---- Replies ----

http::Response Answer(bool cbor, int status, const json& body, const std::string& request_id) {
  http::Response res;
  res.status = status;
  if (cbor) {
    res.headers = {{"Content-Type", "application/cbor"}, {"smithy-protocol", "rpc-v2-cbor"}};
    res.body = EncodeCbor(body);
  } else {
    res.headers = {{"Content-Type", "application/x-amz-json-1.0"}};
    res.body = AsJson(body).dump();
  }
  res.headers.emplace_back("x-amzn-RequestId", request_id);
  return res;
}

// CloudWatch's query-protocol code of an error shape (botocore reads it from x-amzn-query-error).
std::string QueryCode(const std::string& type) {
  if (type == "InvalidParameterValueException") return "InvalidParameterValue";
  if (type == "MissingRequiredParameterException") return "MissingParameter";
  if (type == "InvalidParameterCombinationException") return "InvalidParameterCombination";
  if (type == "InternalServiceFault") return "InternalServiceError";
  if (type == "LimitExceededFault") return "LimitExceeded";
  return type;
}

// The error of `operation`: CloudWatch's own type for the status (api/errors.cpp), except where
// the operation's row names its model's (cw::Operation::limit_exceeded_type).
WireError CloudWatchError(const Status& st, const std::string& operation) {
  WireError e = ToWireError(Protocol::kCloudWatch, st);
  if (st.code() == Code::kLimitExceeded)
    if (const cw::Operation* row = cw::FindOperation(operation); row && !row->limit_exceeded_type.empty())
      e.type = std::string(row->limit_exceeded_type);
  return e;
}

// The query protocol's error document (Action=...&Version=2010-08-01 requests, which older SDKs send).
http::Response QueryErrorAnswer(const Status& st, const std::string& request_id, const std::string& operation) {
  WireError e = CloudWatchError(st, operation);
  const std::string code = e.type == "UnknownOperationException" ? "InvalidAction" : QueryCode(e.type);
  http::Response res;
  res.status = e.http_status;
  res.headers = {{"Content-Type", "text/xml"}, {"x-amzn-RequestId", request_id}};
  res.body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ErrorResponse xmlns=\"http://monitoring.amazonaws.com/doc/2010-08-01/\">"
             "<Error><Type>" + std::string(e.http_status >= 500 ? "Receiver" : "Sender") + "</Type><Code>" + XmlEscape(code) +
             "</Code><Message>" + XmlEscape(e.message) + "</Message></Error><RequestId>" + XmlEscape(request_id) +
             "</RequestId></ErrorResponse>";
  return res;
}

http::Response ErrorAnswer(bool cbor, const Status& st, const std::string& request_id, const std::string& operation) {
  WireError e = CloudWatchError(st, operation);
  json body = {{"__type", "com.amazonaws.cloudwatch#" + e.type}, {"message", e.message}};
  http::Response res = Answer(cbor, e.http_status, body, request_id);
  res.headers.emplace_back("x-amzn-query-error", QueryCode(e.type) + (e.http_status >= 500 ? ";Receiver" : ";Sender"));
  return res;
}

}  // namespace

std::span<const cw::Operation> cw::Operations() {
  static const std::vector<Operation> kRows = [] {
    std::vector<Operation> rows = {
        // cloudwatch:namespace, as in AWS: a policy may hold a caller to its own namespaces.
        {"PutMetricData", [](control::Controller& c, const json& req, const MetricReadCheck&) {
           return PutMetricData(c, req);
         }, "Namespace"},
        {"ListMetrics", ListMetrics},
        {"GetMetricStatistics", GetMetricStatistics},
        {"GetMetricData", GetMetricData},
    };
    for (const Operation& alarm : AlarmOperations()) rows.push_back(alarm);
    return rows;
  }();
  return kRows;
}

const cw::Operation* cw::FindOperation(std::string_view name) {
  for (const Operation& row : Operations())
    if (row.name == name) return &row;
  return nullptr;
}


json CwTimestamp(double epoch_seconds) {
  std::vector<uint8_t> bytes(sizeof(double));
  std::memcpy(bytes.data(), &epoch_seconds, sizeof(double));
  return json::binary(std::move(bytes), 1);
}

std::string EncodeCbor(const json& value) {
  std::string out;
  Write(&out, value);
  return out;
}

StatusOr<json> DecodeCbor(std::string_view body, int max_depth) {
  std::string retagged;
  bool too_deep = false;
  size_t at = 0;
  if (!Retag(body, &retagged, max_depth, &too_deep, &at)) {
    if (too_deep)
      return InvalidArgument("The request body nests CBOR maps and arrays more than " + std::to_string(max_depth) +
                             " deep (server.max_json_depth)");
    return InvalidArgument("The request body is not well-formed CBOR (at byte " + std::to_string(at) + ")");
  }
  json out = json::from_cbor(retagged, true, false, json::cbor_tag_handler_t::ignore);
  if (out.is_discarded()) return InvalidArgument("The request body is not well-formed CBOR");
  return out;
}

bool IsCloudWatchRequest(const http::Request& req) {
  if (StartsWith(req.path, kCborPath)) return true;
  const std::string* target = req.Header("X-Amz-Target");
  return target && StartsWith(*target, kTargetPrefix);
}

http::Response ServeCloudWatch(const http::Request& req, control::Controller& controller, const Authorizer& authz,
                               const CloudWatchAuthenticate& authenticate, const CallContext& ctx) {
  const bool cbor = StartsWith(req.path, kCborPath);
  std::string operation;
  if (cbor) operation = req.path.substr(kCborPath.size());
  else if (const std::string* target = req.Header("X-Amz-Target"); target && StartsWith(*target, kTargetPrefix))
    operation = target->substr(kTargetPrefix.size());
  const std::string* content_type = req.Header("Content-Type");
  const bool query = !cbor && !req.Header("X-Amz-Target") &&
                     (req.method == "GET" || (content_type && StartsWith(*content_type, "application/x-www-form-urlencoded")));
  auto is_known = [](const std::string& op) { return cw::FindOperation(op) != nullptr; };
  AuditedCall call(controller, req, Protocol::kCloudWatch, "cloudwatch",
                   is_known(operation) ? operation : "UnknownOperation");
  auto fail = [&](const Status& st) {
    call.Finish(st);
    return query ? QueryErrorAnswer(st, call.request_id(), operation) : ErrorAnswer(cbor, st, call.request_id(), operation);
  };
  auto caller = authenticate(&call.record());
  if (!caller.ok()) return fail(caller.status());
  if (!query && req.method != "POST") return fail(Status(Code::kUnknownOperation, "CloudWatch answers POST requests only"));
  const int depth = controller.config().max_json_depth;
  if (static_cast<int64_t>(req.body.size()) > controller.config().max_request_bytes)
    return fail(Status(Code::kPayloadTooLarge, "Request body of " + std::to_string(req.body.size()) +
                                                   " bytes exceeds the limit of " +
                                                   std::to_string(controller.config().max_request_bytes) + " bytes"));
  std::string_view raw = req.body;
  std::string inflated;
  if (const std::string* coding = req.Header("Content-Encoding"); coding && EqualsIgnoreCase(Trim(*coding), "gzip")) {
    auto plain = Gunzip(req.body, static_cast<size_t>(controller.config().max_request_bytes));
    if (!plain.ok()) return fail(plain.status());
    inflated = std::move(*plain);
    raw = inflated;
  }
  StatusOr<json> body = json::object();
  if (query) {
    body = cw::QueryMembers(req.query, req.method == "POST" ? raw : std::string_view(), &operation);
    if (is_known(operation)) call.record().operation = operation;
    if (body.ok() && operation.empty()) return fail(Status(Code::kUnknownOperation, "The request has no Action parameter"));
  }
  if (!is_known(operation)) {
    std::string served;
    for (const cw::Operation& row : cw::Operations()) served += std::string(served.empty() ? "" : ", ") + std::string(row.name);
    return fail(Status(Code::kUnknownOperation, "This server answers the CloudWatch operations " + served + ", not '" +
                                                    operation.substr(0, 100) + "'"));
  }
  if (!query && !raw.empty()) {
    if (cbor) {
      body = DecodeCbor(raw, depth);
    } else if (JsonDepth(raw, depth) > depth) {
      body = InvalidArgument("The request body nests JSON more than " + std::to_string(depth) + " deep (server.max_json_depth)");
    } else {
      json parsed = json::parse(raw, nullptr, false);
      body = parsed.is_discarded() ? StatusOr<json>(InvalidArgument("The request body is not well-formed JSON")) : StatusOr<json>(parsed);
    }
  }
  if (body.ok() && !body->is_object()) body = InvalidArgument("The request body must be a map of the operation's members");
  if (!body.ok()) return fail(body.status());
  call.SetBody(*body);
  // PutMetricData carries cloudwatch:namespace, as in AWS; a read is checked again per series it
  // reads (may_read: a training job's or a queue's series as the describe of that job or queue).
  const cw::Operation& row = *cw::FindOperation(operation);
  std::string put_ns;
  if (!row.namespace_member.empty())
    if (auto ns = body->find(row.namespace_member); ns != body->end() && ns->is_string()) put_ns = ns->get<std::string>();
  if (Status allowed = authz.CheckCloudWatch(*caller, ctx, "cloudwatch:" + operation, put_ns); !allowed.ok())
    return fail(allowed);
  std::map<control::CwMetricOwner, Status> decided;  // per owner, for this request
  const cw::MetricReadCheck may_read = [&](const State& s, const CwMetricId& id) -> Status {
    const control::CwMetricOwner owner = control::CwOwnerOf(id);
    if (owner.kind == control::CwMetricOwner::kAccount) return Status::Ok();
    auto it = decided.find(owner);
    if (it == decided.end()) it = decided.emplace(owner, authz.CheckMetricOwner(*caller, ctx, s, owner)).first;
    return it->second;
  };
  StatusOr<json> result = json::object();
  {
    auto scope = call.OfferToCommand();  // a change's record is stored with its own commit
    result = row.serve(controller, *body, may_read);
  }
  if (!result.ok()) return fail(result.status());
  call.Finish(result.status());
  http::Response res;
  if (query) {
    res.headers = {{"Content-Type", "text/xml"}, {"x-amzn-RequestId", call.request_id()}};
    res.body = cw::QueryReply(operation, *result, call.request_id());
  } else {
    res = Answer(cbor, 200, *result, call.request_id());
  }
  if (res.body.size() >= kReleaseAfterReplyBytes) {
    result = json::object();  // the reply's tree, freed first
    ReleaseFreedMemory();
  }
  return res;
}

}  // namespace ty::api
