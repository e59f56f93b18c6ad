#include "control/metric_alarms.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>

#include "control/state.h"
#include "core/strings.h"

namespace ty::control {

using nlohmann::json;

namespace {

json EncodeMetric(const CwMetricId& m) {
  json dims = json::array();
  for (const auto& [n, v] : m.dims) dims.push_back({n, v});
  return {{"ns", m.ns}, {"name", m.name}, {"dims", dims}};
}

CwMetricId DecodeMetric(const json& j) {
  CwMetricId m;
  if (!j.is_object()) return m;
  m.ns = j.value("ns", "");
  m.name = j.value("name", "");
  for (const auto& d : j.value("dims", json::array()))
    if (d.is_array() && d.size() == 2 && d[0].is_string() && d[1].is_string()) m.dims.emplace_back(d[0], d[1]);
  return m;
}

json EncodeDefinition(const MetricAlarmDefinition& d) {
  json queries = json::array();
  for (const auto& q : d.metrics)
    queries.push_back({{"id", q.id}, {"label", q.label}, {"expression", q.expression}, {"stat", q.stat},
                       {"metric", EncodeMetric(q.metric)}, {"period", q.period}, {"return_data", q.return_data}});
  return {{"description", d.description},
          {"actions_enabled", d.actions_enabled},
          {"ok_actions", d.ok_actions},
          {"alarm_actions", d.alarm_actions},
          {"insufficient_data_actions", d.insufficient_data_actions},
          {"metric", EncodeMetric(d.metric)},
          {"statistic", d.statistic},
          {"unit", d.unit},
          {"period", d.period},
          {"metrics", queries},
          {"evaluation_periods", d.evaluation_periods},
          {"datapoints_to_alarm", d.datapoints_to_alarm},
          {"threshold", d.threshold},
          {"comparison", d.comparison},
          {"treat_missing", d.treat_missing},
          {"low_sample_count_percentile", d.low_sample_count_percentile},
          {"tags", d.tags}};
}

MetricAlarmDefinition DecodeDefinition(const json& j) {
  MetricAlarmDefinition d;
  d.description = j.value("description", "");
  d.actions_enabled = j.value("actions_enabled", true);
  d.ok_actions = j.value("ok_actions", std::vector<std::string>{});
  d.alarm_actions = j.value("alarm_actions", std::vector<std::string>{});
  d.insufficient_data_actions = j.value("insufficient_data_actions", std::vector<std::string>{});
  d.metric = DecodeMetric(j.value("metric", json::object()));
  d.statistic = j.value("statistic", "");
  d.unit = j.value("unit", "");
  d.period = j.value("period", int64_t{0});
  for (const auto& q : j.value("metrics", json::array())) {
    if (!q.is_object()) continue;
    CwQuery out;
    out.id = q.value("id", "");
    out.label = q.value("label", "");
    out.expression = q.value("expression", "");
    out.stat = q.value("stat", "");
    out.metric = DecodeMetric(q.value("metric", json::object()));
    out.period = q.value("period", EpochMs{0});
    out.return_data = q.value("return_data", true);
    d.metrics.push_back(std::move(out));
  }
  d.evaluation_periods = j.value("evaluation_periods", int64_t{1});
  d.datapoints_to_alarm = j.value("datapoints_to_alarm", d.evaluation_periods);
  d.threshold = j.value("threshold", 0.0);
  d.comparison = j.value("comparison", "GreaterThanThreshold");
  d.treat_missing = j.value("treat_missing", "missing");
  d.low_sample_count_percentile = j.value("low_sample_count_percentile", "");
  if (j.contains("tags") && j["tags"].is_object()) d.tags = j["tags"].get<Tags>();
  return d;
}

bool Breaches(const std::string& op, double v, double threshold) {
  if (op == "GreaterThanOrEqualToThreshold") return v >= threshold;
  if (op == "GreaterThanThreshold") return v > threshold;
  if (op == "LessThanThreshold") return v < threshold;
  if (op == "LessThanOrEqualToThreshold") return v <= threshold;
  return false;
}

std::string Words(const std::string& op) {
  if (op == "GreaterThanOrEqualToThreshold") return "greater than or equal to";
  if (op == "GreaterThanThreshold") return "greater than";
  if (op == "LessThanThreshold") return "less than";
  return "less than or equal to";
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos && std::isfinite(v)) s += ".0";
  return s;
}

// "26/11/26 12:01:00", the datapoint time CloudWatch's reasons use.
std::string ReasonTime(EpochMs t) {
  const std::string iso = FormatIso8601(t);  // 2026-11-26T12:01:00Z
  return iso.substr(8, 2) + "/" + iso.substr(5, 2) + "/" + iso.substr(2, 2) + " " + iso.substr(11, 8);
}

}  // namespace

EpochMs MetricAlarmDefinition::PeriodMs() const {
  if (metrics.empty()) return period * 1000;
  EpochMs p = 0;
  for (const auto& q : metrics)
    if (q.expression.empty() && q.period && (!p || q.period < p)) p = q.period;
  return p ? p : 60'000;
}

void AlarmState::Record(AlarmHistoryItem item) {
  history.push_back(std::move(item));
  const EpochMs newest = history.back().at;
  while (history.size() > kAlarmHistoryKept || (!history.empty() && history.front().at < newest - kAlarmHistoryRetention))
    history.pop_front();
}

std::string EncodeAlarmDoc(const AlarmState& a) {
  json history = json::array();
  for (const auto& h : a.history) history.push_back({{"at", h.at}, {"type", h.type}, {"summary", h.summary}, {"data", h.data}});
  json doc = {{"value", a.value},   {"since", a.since},     {"reason", a.reason}, {"reason_data", a.reason_data},
              {"condition_since", a.condition_since}, {"configured_at", a.configured_at}, {"history", history}};
  if (a.metric) doc["metric"] = EncodeDefinition(*a.metric);
  return doc.dump();
}

bool DecodeAlarmDoc(const std::string& doc, AlarmState* a) {
  json j = json::parse(doc, nullptr, false);
  if (!j.is_object()) return false;
  a->value = j.value("value", "OK");
  a->since = j.value("since", EpochMs{0});
  a->reason = j.value("reason", "");
  a->reason_data = j.value("reason_data", "");
  a->condition_since = j.value("condition_since", EpochMs{0});
  a->configured_at = j.value("configured_at", EpochMs{0});
  for (const auto& h : j.value("history", json::array()))
    if (h.is_object())
      a->history.push_back({h.value("at", EpochMs{0}), h.value("type", ""), h.value("summary", ""), h.value("data", "")});
  if (j.contains("metric") && j["metric"].is_object()) a->metric = DecodeDefinition(j["metric"]);
  return true;
}

AlarmVerdict EvaluateMetricAlarm(const State& s, const MetricAlarmDefinition& d, const std::string& current,
                                 EpochMs now) {
  const EpochMs period = d.PeriodMs();
  const int64_t n = d.evaluation_periods;
  const EpochMs end = now / period * period, start = end - n * period;
  CwTimeSeries series;
  std::string failed;  // a metric-math expression that could not be evaluated
  std::string statistic = d.statistic;
  if (d.metrics.empty()) {
    const CwPoints points = ReadCwMetric(s, d.metric, start, end);
    if (d.unit.empty() || points.unit == d.unit)
      for (const auto& [t, b] : CwByPeriod(points, start, period))
        if (auto v = CwStat(b, d.statistic)) series[t] = *v;
  } else {
    CwQueryValues values = ReadCwQueries(s, d.metrics, start, end);
    if (Status st = EvaluateCwExpressions(d.metrics, start, end, period, &values); !st.ok()) failed = st.message();
    for (const auto& q : d.metrics)
      if (q.return_data) {
        series = values.series[q.id];
        statistic = q.expression.empty() ? q.stat : "";
      }
  }
  // The window's periods, newest first (as CloudWatch lists them).
  // The value first: most evaluations leave the state as it is and need no words.
  int64_t present = 0, breaching = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto v = series.find(start + i * period);
    if (v == series.end() || !std::isfinite(v->second)) continue;
    ++present;
    if (Breaches(d.comparison, v->second, d.threshold)) ++breaching;
  }
  if (d.treat_missing == "breaching") breaching += n - present;
  AlarmVerdict out;
  const bool unknown = present == 0 && (d.treat_missing == "missing" || d.treat_missing == "ignore");
  if (!failed.empty()) out.value = "INSUFFICIENT_DATA";
  else if (unknown) out.value = d.treat_missing == "ignore" ? current : "INSUFFICIENT_DATA";
  else out.value = breaching >= d.datapoints_to_alarm ? "ALARM" : "OK";
  if (out.value == current) return out;

  // The window's periods, newest first (as CloudWatch lists them).
  json evaluated = json::array(), recent = json::array();
  std::string shown;
  for (int64_t i = n - 1; i >= 0; --i) {
    const EpochMs t = start + i * period;
    auto v = series.find(t);
    if (v == series.end() || !std::isfinite(v->second)) continue;
    evaluated.push_back({{"timestamp", FormatIso8601(t)}, {"value", v->second}});
    recent.push_back(v->second);
    shown += (shown.empty() ? "" : ", ") + Number(v->second) + " (" + ReasonTime(t) + ")";
  }
  json data = {{"version", "1.0"}, {"queryDate", FormatIso8601(now)}, {"startDate", FormatIso8601(start)},
               {"period", period / 1000}, {"recentDatapoints", recent}, {"threshold", d.threshold},
               {"evaluatedDatapoints", evaluated}};
  if (!statistic.empty()) data["statistic"] = statistic;
  if (!failed.empty()) {
    out.reason = "Insufficient Data: the metric math could not be evaluated: " + failed;
  } else if (unknown) {
    out.reason = "Insufficient Data: " + std::to_string(n) + (n == 1 ? " datapoint was" : " datapoints were") + " unknown.";
  } else if (present == 0) {  // notBreaching or breaching: the missing periods decide
    out.reason = "Threshold Crossed: no datapoints were received for " + std::to_string(n) + (n == 1 ? " period" : " periods") +
                 " and " + std::to_string(n) + " missing " + (n == 1 ? "datapoint was" : "datapoints were") + " treated as [" +
                 (d.treat_missing == "breaching" ? "Breaching" : "NonBreaching") + "].";
  } else if (out.value == "ALARM") {
    out.reason = "Threshold Crossed: " + std::to_string(breaching) + " out of the last " + std::to_string(n) +
                 " datapoints [" + shown + "] " + (breaching == 1 ? "was " : "were ") + Words(d.comparison) +
                 " the threshold (" + Number(d.threshold) + ") (minimum " + std::to_string(d.datapoints_to_alarm) +
                 (d.datapoints_to_alarm == 1 ? " datapoint" : " datapoints") + " for OK -> ALARM transition).";
  } else {
    out.reason = "Threshold Crossed: " + std::to_string(breaching) + " out of the last " + std::to_string(n) +
                 " datapoints [" + shown + "] " + (breaching == 1 ? "was " : "were ") + Words(d.comparison) +
                 " the threshold (" + Number(d.threshold) + "), fewer than the " + std::to_string(d.datapoints_to_alarm) +
                 " an ALARM needs.";
  }
  out.reason_data = data.dump();
  return out;
}

}  // namespace ty::control
