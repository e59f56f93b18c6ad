// CloudWatch's alarm operations (docs/alarms.md, "CloudWatch alarms"): PutMetricAlarm,
// DescribeAlarms, DescribeAlarmsForMetric, DescribeAlarmHistory, SetAlarmState, DeleteAlarms,
// EnableAlarmActions and DisableAlarmActions, served by api/cloudwatch_api.cpp's dispatch. The
// configuration file's [[alarms]] rules are listed beside the API's alarms, as metric alarms of
// namespace trainyard/AlarmRules, and share their state, history and events.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "api/cloudwatch_api.h"
#include "api/cloudwatch_wire.h"
#include "control/controller.h"
#include "control/state.h"
#include "core/strings.h"

namespace ty::api::cw {

using json = nlohmann::json;
using control::AlarmState;
using control::MetricAlarmDefinition;
using control::State;

namespace {

constexpr const char* kRuleNamespace = "trainyard/AlarmRules";
const std::set<std::string> kComparisons = {"GreaterThanOrEqualToThreshold", "GreaterThanThreshold",
                                            "LessThanThreshold", "LessThanOrEqualToThreshold"};
const std::set<std::string> kStates = {"OK", "ALARM", "INSUFFICIENT_DATA"};

bool Present(const json& o, const char* key) { return o.contains(key) && !o[key].is_null(); }

StatusOr<std::vector<std::string>> Strings(const json& o, const std::string& key, size_t max_items, size_t min_len,
                                           size_t max_len, bool required) {
  std::vector<std::string> out;
  if (!Present(o, key.c_str())) {
    if (required) return Missing(key);
    return out;
  }
  if (!o[key].is_array() || o[key].size() > max_items || (required && o[key].empty()))
    return Invalid(key, "must be a list of " + std::string(required ? "1" : "0") + " to " + std::to_string(max_items) + " strings");
  for (size_t i = 0; i < o[key].size(); ++i) {
    const json& v = o[key][i];
    const std::string at = key + ".member." + std::to_string(i + 1);
    if (!v.is_string()) return Invalid(at, "must be a string");
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() < min_len || s.size() > max_len)
      return Invalid(at, "must have length between " + std::to_string(min_len) + " and " + std::to_string(max_len));
    out.push_back(s);
  }
  return out;
}

StatusOr<std::vector<std::string>> Actions(const json& req, const std::string& key) {
  auto list = Strings(req, key, 5, 1, 1024, false);
  if (!list.ok()) return list.status();
  for (size_t i = 0; i < list->size(); ++i)
    if (!StartsWith((*list)[i], "arn:"))
      return Invalid(key + ".member." + std::to_string(i + 1), "must be an ARN (arn:...), not " + (*list)[i].substr(0, 100));
  return list;
}

// A token this server returned: the offset of the next item.
StatusOr<size_t> Offset(const json& req) {
  auto token = String(req, "NextToken", "", false, 0, 64);
  if (!token.ok()) return token.status();
  if (token->empty()) return size_t{0};
  if (token->find_first_not_of("0123456789") != std::string::npos || token->size() > 12)
    return Invalid("NextToken", "is not a token this server returned");
  return static_cast<size_t>(std::stoull(*token));
}

json Time(EpochMs t) { return CwTimestamp(static_cast<double>(t) / 1000); }

json DimensionsJson(const control::CwDimensions& dims) {
  json out = json::array();
  for (const auto& [n, v] : dims) out.push_back({{"Name", n}, {"Value", v}});
  return out;
}

json MetricJson(const control::CwMetricId& m) {
  return {{"Namespace", m.ns}, {"MetricName", m.name}, {"Dimensions", DimensionsJson(m.dims)}};
}

// The state members every alarm has.
void PutState(json& out, const AlarmState* st, const std::string& fallback_value) {
  out["StateValue"] = st ? st->value : fallback_value;
  out["StateReason"] = st && !st->reason.empty() ? st->reason : "Unchecked: no state change since the server started";
  if (st && !st->reason_data.empty()) out["StateReasonData"] = st->reason_data;
  if (st && st->since > 0) {
    out["StateUpdatedTimestamp"] = Time(st->since);
    out["StateTransitionedTimestamp"] = Time(st->since);
  }
}

json AlarmJson(const control::Controller& c, const std::string& name, const AlarmState& st) {
  const MetricAlarmDefinition& d = *st.metric;
  json out = {{"AlarmName", name},
              {"AlarmArn", c.Arn("cloudwatch", "alarm:" + name)},
              {"AlarmConfigurationUpdatedTimestamp", Time(st.configured_at)},
              {"ActionsEnabled", d.actions_enabled},
              {"OKActions", d.ok_actions},
              {"AlarmActions", d.alarm_actions},
              {"InsufficientDataActions", d.insufficient_data_actions},
              {"EvaluationPeriods", d.evaluation_periods},
              {"DatapointsToAlarm", d.datapoints_to_alarm},
              {"Threshold", d.threshold},
              {"ComparisonOperator", d.comparison},
              {"TreatMissingData", d.treat_missing}};
  if (!d.description.empty()) out["AlarmDescription"] = d.description;
  PutState(out, &st, "INSUFFICIENT_DATA");
  if (!d.low_sample_count_percentile.empty()) out["EvaluateLowSampleCountPercentile"] = d.low_sample_count_percentile;
  if (d.metrics.empty()) {
    out.update(MetricJson(d.metric));
    out[control::IsCwPercentile(d.statistic) ? "ExtendedStatistic" : "Statistic"] = d.statistic;
    out["Period"] = d.period;
    if (!d.unit.empty()) out["Unit"] = d.unit;
  } else {
    json metrics = json::array();
    for (const auto& q : d.metrics) {
      json m = {{"Id", q.id}, {"ReturnData", q.return_data}};
      if (!q.label.empty()) m["Label"] = q.label;
      if (q.expression.empty()) {
        m["MetricStat"] = {{"Metric", MetricJson(q.metric)}, {"Period", q.period / 1000}, {"Stat", q.stat}};
      } else {
        m["Expression"] = q.expression;
        if (q.period) m["Period"] = q.period / 1000;
      }
      metrics.push_back(std::move(m));
    }
    out["Metrics"] = metrics;
  }
  return out;
}

// A configuration-file rule, shown as the metric alarm it amounts to.
json RuleJson(const control::Controller& c, const AlarmConfig& a, const AlarmState* st) {
  control::CwDimensions dims;
  if (!a.instance_type.empty()) dims.emplace_back("InstanceType", a.instance_type);
  if (!a.queue.empty()) dims.emplace_back("JobQueueName", a.queue);
  const bool by_seconds = a.rule == "runnable_longer_than" || a.rule == "warm_pool_expiring";
  json out = {{"AlarmName", a.name},
              {"AlarmArn", c.Arn("cloudwatch", "alarm:" + a.name)},
              {"AlarmDescription", "Rule " + a.rule + " of the configuration file ([[alarms]] name = \"" + a.name +
                                       "\"); change it there"},
              {"ActionsEnabled", false},
              {"OKActions", json::array()},
              {"AlarmActions", json::array()},
              {"InsufficientDataActions", json::array()},
              {"Namespace", kRuleNamespace},
              {"MetricName", a.rule},
              {"Dimensions", DimensionsJson(dims)},
              {"Statistic", "Maximum"},
              {"Period", 60},
              {"EvaluationPeriods", 1},
              {"DatapointsToAlarm", 1},
              {"Threshold", by_seconds ? static_cast<double>(a.seconds) : a.threshold},
              {"ComparisonOperator", "GreaterThanThreshold"},
              {"TreatMissingData", "notBreaching"}};
  PutState(out, st, "OK");
  return out;
}

// Whether the caller may read every metric a definition watches.
Status MayReadMetrics(const State& s, const MetricAlarmDefinition& d, const MetricReadCheck& may_read) {
  if (d.metrics.empty()) return may_read(s, d.metric);
  for (const auto& q : d.metrics)
    if (q.expression.empty()) TY_RETURN_IF_ERROR(may_read(s, q.metric));
  return Status::Ok();
}

// Whether the caller may see the alarm `name`: one put through the API watches metrics, and is
// shown to those who may read them all; a configuration-file rule watches the server's own.
bool MaySeeAlarm(const State& s, const std::string& name, const MetricReadCheck& may_read) {
  auto it = s.alarms.find(name);
  return it == s.alarms.end() || !it->second.metric || MayReadMetrics(s, *it->second.metric, may_read).ok();
}

// Every alarm, sorted by name: rules of the configuration file and the API's.
std::vector<json> AllAlarms(const control::Controller& c, const State& s) {
  std::map<std::string, json> by_name;
  for (const auto& a : c.config().alarms) {
    auto st = s.alarms.find(a.name);
    by_name[a.name] = RuleJson(c, a, st == s.alarms.end() ? nullptr : &st->second);
  }
  for (const auto& [name, st] : s.alarms)
    if (st.metric) by_name[name] = AlarmJson(c, name, st);
  std::vector<json> out;
  for (auto& [n, j] : by_name) out.push_back(std::move(j));
  return out;
}

StatusOr<json> PutMetricAlarm(control::Controller& c, const json& req, const MetricReadCheck& may_read) {
  auto name = String(req, "AlarmName", "", true, 1, 255);
  if (!name.ok()) return name.status();
  MetricAlarmDefinition d;
  auto description = String(req, "AlarmDescription", "", false, 0, 1024);
  if (!description.ok()) return description.status();
  d.description = *description;
  if (Present(req, "ActionsEnabled")) {
    if (!req["ActionsEnabled"].is_boolean()) return Invalid("ActionsEnabled", "must be a boolean");
    d.actions_enabled = req["ActionsEnabled"].get<bool>();
  }
  for (auto [key, list] : {std::pair{"OKActions", &d.ok_actions}, std::pair{"AlarmActions", &d.alarm_actions},
                           std::pair{"InsufficientDataActions", &d.insufficient_data_actions}}) {
    auto actions = Actions(req, key);
    if (!actions.ok()) return actions.status();
    *list = std::move(*actions);
  }
  if (Present(req, "ThresholdMetricId"))
    return Invalid("ThresholdMetricId", "anomaly detection bands are not served by this server; give a Threshold");
  const bool single = Present(req, "MetricName") || Present(req, "Namespace") || Present(req, "Statistic") ||
                      Present(req, "ExtendedStatistic") || Present(req, "Dimensions") || Present(req, "Period");
  const bool math = Present(req, "Metrics");
  if (single == math)
    return Status(Code::kFailedPrecondition,
                  "The parameters MetricName (with Namespace, Statistic or ExtendedStatistic, Period) and Metrics are "
                  "mutually exclusive and one of them is required.");
  if (single) {
    auto metric = Metric(req, "");
    if (!metric.ok()) return metric.status();
    d.metric = *metric;
    const bool stat = Present(req, "Statistic"), extended = Present(req, "ExtendedStatistic");
    if (stat == extended)
      return Status(Code::kFailedPrecondition,
                    "The parameters Statistic and ExtendedStatistic are mutually exclusive and one of them is required.");
    auto s = String(req, stat ? "Statistic" : "ExtendedStatistic", "", true, 1, 16);
    if (!s.ok()) return s.status();
    if (stat && !control::IsCwStatistic(*s))
      return Invalid("Statistic", *s + " is not one of SampleCount, Average, Sum, Minimum, Maximum");
    if (extended && !control::IsCwPercentile(*s)) return Invalid("ExtendedStatistic", *s + " is not a percentile p0 .. p100");
    d.statistic = *s;
    if (!Present(req, "Period")) return Missing("Period");
    if (!req["Period"].is_number_integer() || req["Period"].get<int64_t>() < 10 ||
        !control::IsCwPeriod(req["Period"].get<int64_t>()))
      return Invalid("Period", "must be 10, 30 or a multiple of 60 seconds");
    d.period = req["Period"].get<int64_t>();
    auto unit = String(req, "Unit", "", false, 0, 64);
    if (!unit.ok()) return unit.status();
    if (!unit->empty() && !IsUnit(*unit)) return Invalid("Unit", *unit + " is not a CloudWatch unit");
    d.unit = *unit;
  } else {
    const json& qs = req["Metrics"];
    if (!qs.is_array() || qs.empty() || qs.size() > 10) return Invalid("Metrics", "must be a list of 1 to 10 queries");
    std::set<std::string> ids;
    int returning = 0;
    for (size_t i = 0; i < qs.size(); ++i) {
      const std::string at = "Metrics.member." + std::to_string(i + 1) + ".";
      auto q = Query(qs[i], at);
      if (!q.ok()) return q.status();
      if (!ids.insert(q->id).second) return Invalid(at + "Id", "is used by two queries: " + q->id);
      if (q->expression.empty() && q->period < 10'000)
        return Invalid(at + "MetricStat.Period", "must be 10, 30 or a multiple of 60 seconds for an alarm");
      returning += q->return_data ? 1 : 0;
      d.metrics.push_back(std::move(*q));
    }
    if (returning != 1)
      return Invalid("Metrics", "exactly one query must have ReturnData true (the one the alarm watches), not " +
                                    std::to_string(returning));
    // An expression must be well-formed now, not at the first evaluation.
    control::CwQueryValues empty;
    for (const auto& q : d.metrics)
      if (q.expression.empty()) {
        empty.series[q.id];
        empty.metric_ids.push_back(q.id);
      }
    if (Status st = control::EvaluateCwExpressions(d.metrics, 0, d.PeriodMs(), d.PeriodMs(), &empty); !st.ok())
      return Invalid("Metrics", st.message());
  }
  auto periods = Integer(req, "EvaluationPeriods", "", 1, 1440, 0);
  if (!periods.ok()) return periods.status();
  if (*periods == 0) return Missing("EvaluationPeriods");
  d.evaluation_periods = *periods;
  if (d.PeriodMs() / 1000 * d.evaluation_periods > 86400)
    return Invalid("EvaluationPeriods", "times the Period must be at most one day (86400 s), not " +
                                            std::to_string(d.PeriodMs() / 1000 * d.evaluation_periods) + " s");
  auto to_alarm = Integer(req, "DatapointsToAlarm", "", 1, d.evaluation_periods, d.evaluation_periods);
  if (!to_alarm.ok()) return to_alarm.status();
  d.datapoints_to_alarm = *to_alarm;
  if (!Present(req, "Threshold")) return Missing("Threshold");
  if (!req["Threshold"].is_number() || !std::isfinite(req["Threshold"].get<double>()))
    return Invalid("Threshold", "must be a finite number");
  d.threshold = req["Threshold"].get<double>();
  auto op = String(req, "ComparisonOperator", "", true, 1, 64);
  if (!op.ok()) return op.status();
  if (!kComparisons.count(*op))
    return Invalid("ComparisonOperator", *op + " is not GreaterThanOrEqualToThreshold, GreaterThanThreshold, "
                                               "LessThanThreshold or LessThanOrEqualToThreshold (anomaly detection "
                                               "bands are not served)");
  d.comparison = *op;
  auto missing = String(req, "TreatMissingData", "", false, 0, 255);
  if (!missing.ok()) return missing.status();
  if (!missing->empty()) {
    if (*missing != "missing" && *missing != "notBreaching" && *missing != "breaching" && *missing != "ignore")
      return Invalid("TreatMissingData", *missing + " is not missing, notBreaching, breaching or ignore");
    d.treat_missing = *missing;
  }
  auto low = String(req, "EvaluateLowSampleCountPercentile", "", false, 0, 255);
  if (!low.ok()) return low.status();
  if (!low->empty() && *low != "evaluate" && *low != "ignore")
    return Invalid("EvaluateLowSampleCountPercentile", *low + " is not evaluate or ignore");
  d.low_sample_count_percentile = *low;
  if (Present(req, "Tags")) {
    const json& tags = req["Tags"];
    if (!tags.is_array() || tags.size() > 50) return Invalid("Tags", "must be a list of at most 50 {Key, Value}");
    for (size_t i = 0; i < tags.size(); ++i) {
      const std::string at = "Tags.member." + std::to_string(i + 1) + ".";
      auto key = String(tags[i], "Key", at, true, 1, 128);
      if (!key.ok()) return key.status();
      auto value = String(tags[i], "Value", at, true, 0, 256);
      if (!value.ok()) return value.status();
      d.tags[*key] = *value;
    }
  }
  if (!d.metrics.empty()) {  // the evaluation's cost, as GetMetricData's over the alarm's window
    const EpochMs now = c.Now();
    TY_RETURN_IF_ERROR(
        control::CheckCwQueryCost(d.metrics, now - d.PeriodMs() * d.evaluation_periods, now, d.PeriodMs(), now).status());
  }
  // An alarm reads its metrics for whoever sees it: its author must be allowed to read them.
  TY_RETURN_IF_ERROR(c.Read([&](const State& s) { return MayReadMetrics(s, d, may_read); }));
  TY_RETURN_IF_ERROR(c.PutMetricAlarm(*name, std::move(d)));
  return json::object();
}

// The alarms a describe asks for: MetricAlarms (a page) and CompositeAlarms (none here).
StatusOr<json> Page(const std::vector<json>& matched, size_t offset, int64_t max_records) {
  json alarms = json::array();
  for (size_t i = offset; i < matched.size() && static_cast<int64_t>(alarms.size()) < max_records; ++i)
    alarms.push_back(matched[i]);
  json out = {{"MetricAlarms", alarms}, {"CompositeAlarms", json::array()}};
  if (offset + alarms.size() < matched.size()) out["NextToken"] = std::to_string(offset + alarms.size());
  return out;
}

StatusOr<json> DescribeAlarms(control::Controller& c, const json& req, const MetricReadCheck& may_read) {
  auto names = Strings(req, "AlarmNames", 100, 1, 255, false);
  if (!names.ok()) return names.status();
  auto prefix = String(req, "AlarmNamePrefix", "", false, 1, 255);
  if (!prefix.ok()) return prefix.status();
  if (!names->empty() && !prefix->empty())
    return Status(Code::kFailedPrecondition, "The parameters AlarmNames and AlarmNamePrefix are mutually exclusive.");
  auto state = String(req, "StateValue", "", false, 0, 32);
  if (!state.ok()) return state.status();
  if (!state->empty() && !kStates.count(*state)) return Invalid("StateValue", *state + " is not OK, ALARM or INSUFFICIENT_DATA");
  auto action = String(req, "ActionPrefix", "", false, 1, 1024);
  if (!action.ok()) return action.status();
  auto types = Strings(req, "AlarmTypes", 2, 1, 32, false);
  if (!types.ok()) return types.status();
  for (const auto& t : *types)
    if (t != "MetricAlarm" && t != "CompositeAlarm") return Invalid("AlarmTypes", t + " is not MetricAlarm or CompositeAlarm");
  const bool metric_alarms = types->empty() || std::count(types->begin(), types->end(), "MetricAlarm");
  for (const char* k : {"ChildrenOfAlarmName", "ParentsOfAlarmName"}) {
    auto v = String(req, k, "", false, 1, 255);
    if (!v.ok()) return v.status();
  }
  const bool composite_only = Present(req, "ChildrenOfAlarmName") || Present(req, "ParentsOfAlarmName");
  auto max = Integer(req, "MaxRecords", "", 1, 100, 50);
  if (!max.ok()) return max.status();
  auto offset = Offset(req);
  if (!offset.ok()) return offset.status();
  const std::set<std::string> wanted(names->begin(), names->end());
  std::vector<json> matched = c.Read([&](const State& s) {
    std::vector<json> out;
    if (!metric_alarms || composite_only) return out;  // composite alarms are not served: none
    for (json& a : AllAlarms(c, s)) {
      const std::string& n = a["AlarmName"].get_ref<const std::string&>();
      if (!wanted.empty() && !wanted.count(n)) continue;
      if (!prefix->empty() && !StartsWith(n, *prefix)) continue;
      if (!MaySeeAlarm(s, n, may_read)) continue;
      if (!state->empty() && a["StateValue"] != *state) continue;
      if (!action->empty()) {
        bool any = false;
        for (const char* k : {"OKActions", "AlarmActions", "InsufficientDataActions"})
          for (const auto& arn : a[k]) any = any || StartsWith(arn.get<std::string>(), *action);
        if (!any) continue;
      }
      out.push_back(std::move(a));
    }
    return out;
  });
  return Page(matched, *offset, *max);
}

StatusOr<json> DescribeAlarmsForMetric(control::Controller& c, const json& req, const MetricReadCheck& may_read) {
  auto metric = Metric(req, "");
  if (!metric.ok()) return metric.status();
  auto stat = String(req, "Statistic", "", false, 1, 16);
  if (!stat.ok()) return stat.status();
  auto extended = String(req, "ExtendedStatistic", "", false, 1, 16);
  if (!extended.ok()) return extended.status();
  auto period = Integer(req, "Period", "", 1, 86400, 0);
  if (!period.ok()) return period.status();
  auto unit = String(req, "Unit", "", false, 0, 64);
  if (!unit.ok()) return unit.status();
  const json dims = DimensionsJson(metric->dims);
  const bool dims_given = Present(req, "Dimensions");
  auto same = [&](const json& m) {
    return m.value("Namespace", "") == metric->ns && m.value("MetricName", "") == metric->name &&
           (!dims_given || m.value("Dimensions", json::array()) == dims);
  };
  return c.Read([&](const State& s) -> StatusOr<json> {
    TY_RETURN_IF_ERROR(may_read(s, *metric));  // names the metric: refused as a read of it would be
    json out = json::array();
    for (json& a : AllAlarms(c, s)) {
      if (!MaySeeAlarm(s, a["AlarmName"].get<std::string>(), may_read)) continue;
      bool hit = false;
      if (a.contains("Metrics")) {
        for (const auto& q : a["Metrics"])
          if (q.contains("MetricStat") && same(q["MetricStat"]["Metric"]) &&
              (stat->empty() || q["MetricStat"]["Stat"] == *stat) && (*period == 0 || q["MetricStat"]["Period"] == *period))
            hit = true;
      } else {
        hit = same(a) && (stat->empty() || a.value("Statistic", "") == *stat) &&
              (extended->empty() || a.value("ExtendedStatistic", "") == *extended) &&
              (*period == 0 || a["Period"] == *period) && (unit->empty() || a.value("Unit", "") == *unit);
      }
      if (hit) out.push_back(std::move(a));
    }
    return json{{"MetricAlarms", std::move(out)}};
  });
}

StatusOr<json> DescribeAlarmHistory(control::Controller& c, const json& req) {
  auto name = String(req, "AlarmName", "", false, 1, 255);
  if (!name.ok()) return name.status();
  auto types = Strings(req, "AlarmTypes", 2, 1, 32, false);
  if (!types.ok()) return types.status();
  for (const auto& t : *types)
    if (t != "MetricAlarm" && t != "CompositeAlarm") return Invalid("AlarmTypes", t + " is not MetricAlarm or CompositeAlarm");
  const bool metric_alarms = types->empty() || std::count(types->begin(), types->end(), "MetricAlarm");
  auto type = String(req, "HistoryItemType", "", false, 0, 64);
  if (!type.ok()) return type.status();
  if (!type->empty() && *type != "ConfigurationUpdate" && *type != "StateUpdate" && *type != "Action" &&
      *type != "AlarmContributorStateUpdate" && *type != "AlarmContributorAction")
    return Invalid("HistoryItemType", *type + " is not ConfigurationUpdate, StateUpdate or Action");
  auto from = cw::Time(req, "StartDate", false, 0);
  if (!from.ok()) return from.status();
  auto to = cw::Time(req, "EndDate", false, INT64_MAX);
  if (!to.ok()) return to.status();
  auto max = Integer(req, "MaxRecords", "", 1, 100, 100);
  if (!max.ok()) return max.status();
  auto scan = String(req, "ScanBy", "", false, 0, 32);
  if (!scan.ok()) return scan.status();
  if (!scan->empty() && *scan != "TimestampDescending" && *scan != "TimestampAscending")
    return Invalid("ScanBy", "must be TimestampDescending or TimestampAscending");
  auto offset = Offset(req);
  if (!offset.ok()) return offset.status();
  struct Item {
    EpochMs at;
    std::string alarm;
    const control::AlarmHistoryItem* item;
  };
  return c.Read([&](const State& s) -> StatusOr<json> {
    std::vector<Item> items;
    if (metric_alarms)
      for (const auto& [n, st] : s.alarms) {
        if (!name->empty() && n != *name) continue;
        for (const auto& h : st.history)
          if ((type->empty() || h.type == *type) && h.at >= *from && h.at <= *to) items.push_back({h.at, n, &h});
      }
    // Newest first unless asked otherwise; ties keep the alarm's own order.
    std::stable_sort(items.begin(), items.end(), [&](const Item& a, const Item& b) {
      return *scan == "TimestampAscending" ? a.at < b.at : a.at > b.at;
    });
    json out_items = json::array();
    for (size_t i = *offset; i < items.size() && static_cast<int64_t>(out_items.size()) < *max; ++i)
      out_items.push_back({{"AlarmName", items[i].alarm},
                           {"AlarmType", "MetricAlarm"},
                           {"Timestamp", Time(items[i].at)},
                           {"HistoryItemType", items[i].item->type},
                           {"HistorySummary", items[i].item->summary},
                           {"HistoryData", items[i].item->data}});
    json out = {{"AlarmHistoryItems", out_items}};
    if (*offset + out_items.size() < items.size()) out["NextToken"] = std::to_string(*offset + out_items.size());
    return out;
  });
}

StatusOr<json> SetAlarmState(control::Controller& c, const json& req) {
  auto name = String(req, "AlarmName", "", true, 1, 255);
  if (!name.ok()) return name.status();
  auto value = String(req, "StateValue", "", true, 1, 32);
  if (!value.ok()) return value.status();
  if (!kStates.count(*value)) return Invalid("StateValue", *value + " is not OK, ALARM or INSUFFICIENT_DATA");
  auto reason = String(req, "StateReason", "", true, 0, 1023);
  if (!reason.ok()) return reason.status();
  auto data = String(req, "StateReasonData", "", false, 0, 4000);
  if (!data.ok()) return data.status();
  if (!data->empty() && json::parse(*data, nullptr, false).is_discarded())
    return Invalid("StateReasonData", "must be JSON text");
  TY_RETURN_IF_ERROR(c.SetAlarmState(*name, *value, *reason, *data));
  return json::object();
}

StatusOr<json> DeleteAlarms(control::Controller& c, const json& req) {
  auto names = Strings(req, "AlarmNames", 100, 1, 255, true);
  if (!names.ok()) return names.status();
  TY_RETURN_IF_ERROR(c.DeleteAlarms(*names));
  return json::object();
}

StatusOr<json> SetActions(control::Controller& c, const json& req, bool enabled) {
  auto names = Strings(req, "AlarmNames", 100, 1, 255, true);
  if (!names.ok()) return names.status();
  TY_RETURN_IF_ERROR(c.SetAlarmActions(*names, enabled));
  return json::object();
}

}  // namespace

std::span<const Operation> AlarmOperations() {
  // Each row's handler, given the series check; the history and the changes read no series.
  static const Operation kRows[] = {
      {"PutMetricAlarm", PutMetricAlarm, {}, "LimitExceededFault"},
      {"DescribeAlarms", DescribeAlarms},
      {"DescribeAlarmsForMetric", DescribeAlarmsForMetric},
      {"DescribeAlarmHistory", [](control::Controller& c, const json& req, const MetricReadCheck&) {
         return DescribeAlarmHistory(c, req);
       }},
      {"SetAlarmState", [](control::Controller& c, const json& req, const MetricReadCheck&) {
         return SetAlarmState(c, req);
       }},
      {"DeleteAlarms", [](control::Controller& c, const json& req, const MetricReadCheck&) {
         return DeleteAlarms(c, req);
       }},
      {"EnableAlarmActions", [](control::Controller& c, const json& req, const MetricReadCheck&) {
         return SetActions(c, req, true);
       }},
      {"DisableAlarmActions", [](control::Controller& c, const json& req, const MetricReadCheck&) {
         return SetActions(c, req, false);
       }},
  };
  return kRows;
}

}  // namespace ty::api::cw
