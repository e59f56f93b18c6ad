#include "api/cloudwatch_wire.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

namespace ty::api::cw {

using json = nlohmann::json;
using control::CwDimensions;
using control::CwMetricId;

namespace {

const std::set<std::string> kUnits = {
    "Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes", "Bits",
    "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second", "Kilobytes/Second",
    "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second", "Kilobits/Second", "Megabits/Second",
    "Gigabits/Second", "Terabits/Second", "Count/Second", "None"};

}  // namespace

bool IsUnit(const std::string& unit) { return kUnits.count(unit) > 0; }

Status Missing(const std::string& member) { return InvalidArgument("The parameter " + member + " is required."); }
Status Invalid(const std::string& member, const std::string& rule) {
  return InvalidArgument("The value for parameter " + member + " is invalid: " + rule);
}

StatusOr<std::string> String(const json& o, const std::string& key, const std::string& where, bool required, size_t min,
                             size_t max) {
  if (!o.contains(key) || o[key].is_null()) {
    if (required) return Missing(where + key);
    return std::string();
  }
  if (!o[key].is_string()) return Invalid(where + key, "must be a string");
  const std::string& s = o[key].get_ref<const std::string&>();
  if (s.size() < min || s.size() > max)
    return Invalid(where + key, "must have length between " + std::to_string(min) + " and " + std::to_string(max));
  return s;
}

// A timestamp member (epoch seconds on the wire) in ms.
StatusOr<EpochMs> Time(const json& o, const std::string& key, bool required, EpochMs fallback) {
  if (!o.contains(key) || o[key].is_null()) {
    if (required) return Missing(key);
    return fallback;
  }
  if (!o[key].is_number() || !(o[key].get<double>() >= 0 && o[key].get<double>() <= 1e11))
    return Invalid(key, "must be a timestamp (epoch seconds between 0 and 1e11)");
  return static_cast<EpochMs>(std::llround(o[key].get<double>() * 1000));
}

StatusOr<CwDimensions> Dimensions(const json& o, const std::string& where, bool filter) {
  CwDimensions dims;
  if (!o.contains("Dimensions") || o["Dimensions"].is_null()) return dims;
  const json& list = o["Dimensions"];
  if (!list.is_array()) return Invalid(where + "Dimensions", "must be a list");
  if (list.size() > 30) return Invalid(where + "Dimensions", "must have at most 30 members");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + "Dimensions.member." + std::to_string(i + 1) + ".";
    if (!list[i].is_object()) return Invalid(at.substr(0, at.size() - 1), "must be a structure");
    auto name = String(list[i], "Name", at, true, 1, 255);
    if (!name.ok()) return name.status();
    auto value = String(list[i], "Value", at, !filter, filter ? 0 : 1, 1024);
    if (!value.ok()) return value.status();
    for (const auto& [n, v] : dims)
      if (n == *name) return Invalid(where + "Dimensions", "names dimension " + n + " twice");
    dims.emplace_back(*name, *value);
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

StatusOr<CwMetricId> Metric(const json& o, const std::string& where) {
  CwMetricId id;
  auto ns = String(o, "Namespace", where, true, 1, 255);
  if (!ns.ok()) return ns.status();
  auto name = String(o, "MetricName", where, true, 1, 255);
  if (!name.ok()) return name.status();
  auto dims = Dimensions(o, where, false);
  if (!dims.ok()) return dims.status();
  return CwMetricId{*ns, *name, *dims};
}

StatusOr<int64_t> Integer(const json& o, const std::string& key, const std::string& where, int64_t min, int64_t max,
                          int64_t fallback) {
  if (!o.contains(key) || o[key].is_null()) return fallback;
  if (!o[key].is_number_integer() || o[key].get<int64_t>() < min || o[key].get<int64_t>() > max)
    return Invalid(where + key, "must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  return o[key].get<int64_t>();
}

StatusOr<control::CwQuery> Query(const json& q, const std::string& at) {
  if (!q.is_object()) return Invalid(at.substr(0, at.size() - 1), "must be a structure");
  control::CwQuery out;
  auto id = String(q, "Id", at, true, 1, 255);
  if (!id.ok()) return id.status();
  if (!std::islower(static_cast<unsigned char>((*id)[0])) ||
      id->find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != std::string::npos)
    return Invalid(at + "Id", "must start with a lowercase letter and hold only letters, digits and underscores, not " + *id);
  out.id = *id;
  auto label = String(q, "Label", at, false, 0, 1024);
  if (!label.ok()) return label.status();
  out.label = *label;
  if (q.contains("ReturnData") && !q["ReturnData"].is_null()) {
    if (!q["ReturnData"].is_boolean()) return Invalid(at + "ReturnData", "must be a boolean");
    out.return_data = q["ReturnData"].get<bool>();
  }
  const bool has_stat = q.contains("MetricStat") && !q["MetricStat"].is_null();
  const bool has_expr = q.contains("Expression") && !q["Expression"].is_null();
  if (has_stat == has_expr)
    return Status(Code::kFailedPrecondition, "The parameters " + at + "MetricStat and " + at +
                                                 "Expression are mutually exclusive and one of them is required.");
  if (has_stat) {
    const json& ms = q["MetricStat"];
    if (!ms.is_object()) return Invalid(at + "MetricStat", "must be a structure");
    if (!ms.contains("Metric") || !ms["Metric"].is_object()) return Missing(at + "MetricStat.Metric");
    auto metric = Metric(ms["Metric"], at + "MetricStat.Metric.");
    if (!metric.ok()) return metric.status();
    out.metric = *metric;
    if (!ms.contains("Period")) return Missing(at + "MetricStat.Period");
    if (!ms["Period"].is_number_integer() || !control::IsCwPeriod(ms["Period"].get<int64_t>()))
      return Invalid(at + "MetricStat.Period", "must be 1, 5, 10, 30 or a multiple of 60 seconds");
    out.period = ms["Period"].get<int64_t>() * 1000;
    auto stat = String(ms, "Stat", at + "MetricStat.", true, 1, 16);
    if (!stat.ok()) return stat.status();
    if (!control::IsCwStatistic(*stat) && !control::IsCwPercentile(*stat))
      return Invalid(at + "MetricStat.Stat", *stat + " is not SampleCount, Average, Sum, Minimum, Maximum or a percentile pNN");
    out.stat = *stat;
  } else {
    auto expr = String(q, "Expression", at, true, 1, 2048);
    if (!expr.ok()) return expr.status();
    out.expression = *expr;
    if (q.contains("Period") && !q["Period"].is_null()) {
      if (!q["Period"].is_number_integer() || !control::IsCwPeriod(q["Period"].get<int64_t>()))
        return Invalid(at + "Period", "must be 1, 5, 10, 30 or a multiple of 60 seconds");
      out.period = q["Period"].get<int64_t>() * 1000;
    }
  }
  return out;
}

}  // namespace ty::api::cw
