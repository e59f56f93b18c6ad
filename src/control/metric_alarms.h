// CloudWatch metric alarms (docs/alarms.md, "CloudWatch alarms"): the definition PutMetricAlarm
// stores, and its evaluation, a pure function of the state and the time. An alarm looks at the
// EvaluationPeriods periods that ended at the last period boundary; each period's value is its
// statistic (or the metric-math query that returns data), missing when the period has none.
// DatapointsToAlarm breaching values put it in ALARM, otherwise it is OK, and a window with no
// value at all is INSUFFICIENT_DATA, OK, ALARM or unchanged by TreatMissingData.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "control/cloudwatch_read.h"
#include "core/model.h"

namespace ty::control {

struct State;

inline constexpr size_t kAlarmHistoryKept = 100;           // items per alarm, newest kept
inline constexpr EpochMs kAlarmHistoryRetention = 30LL * 86'400'000;  // as AWS: 30 days

struct MetricAlarmDefinition {
  std::string description;
  bool actions_enabled = true;
  std::vector<std::string> ok_actions, alarm_actions, insufficient_data_actions;
  // One metric (metrics empty): the metric, its statistic ("Average", ... or a percentile "p90",
  // the ExtendedStatistic), the unit it must have ("" = any) and the period in seconds.
  CwMetricId metric;
  std::string statistic;
  std::string unit;
  int64_t period = 0;
  // Or metric math: queries, exactly one returning data.
  std::vector<CwQuery> metrics;
  int64_t evaluation_periods = 1;
  int64_t datapoints_to_alarm = 1;
  double threshold = 0;
  std::string comparison;             // GreaterThanOrEqualToThreshold | GreaterThanThreshold | LessThan...
  std::string treat_missing = "missing";  // missing | notBreaching | breaching | ignore
  std::string low_sample_count_percentile;  // evaluate | ignore | "" (kept and returned)
  Tags tags;

  // The period evaluated, in ms: `period`, or the shortest MetricStat period of `metrics`.
  EpochMs PeriodMs() const;
};

struct AlarmHistoryItem {
  EpochMs at = 0;
  std::string type;     // ConfigurationUpdate | StateUpdate | Action
  std::string summary;  // HistorySummary
  std::string data;     // HistoryData (JSON text)
};

// Where an alarm stands, persisted (kMeta "alarm/<name>") so a restart neither raises it again
// nor forgets it. A [[alarms]] rule of the configuration file has no `metric`; an alarm put
// through the API has its definition there.
struct AlarmState {
  std::string value = "OK";  // OK | ALARM | INSUFFICIENT_DATA (a rule: OK | ALARM)
  EpochMs since = 0;         // when it took that value (StateTransitionedTimestamp)
  std::string reason;
  std::string reason_data;      // JSON text ("" = none)
  EpochMs condition_since = 0;  // idle_capacity_while_waiting: when the condition began to hold (0: it does not)
  std::optional<MetricAlarmDefinition> metric;
  EpochMs configured_at = 0;           // AlarmConfigurationUpdatedTimestamp
  std::deque<AlarmHistoryItem> history;  // oldest first, bounded (kAlarmHistoryKept, kAlarmHistoryRetention)

  // Adds a history item, dropping what is past the bounds.
  void Record(AlarmHistoryItem item);
};

std::string EncodeAlarmDoc(const AlarmState& a);
bool DecodeAlarmDoc(const std::string& doc, AlarmState* a);

// What an evaluation found.
struct AlarmVerdict {
  std::string value;        // OK | ALARM | INSUFFICIENT_DATA
  std::string reason;       // StateReason, in CloudWatch's words
  std::string reason_data;  // StateReasonData (JSON text)
};

// Evaluates `d` as of `now`. `current`: the alarm's state now (TreatMissingData ignore keeps it).
// The reason and its data are written only when the value differs from `current`: most minutes
// change nothing, and the words cost more than the arithmetic.
AlarmVerdict EvaluateMetricAlarm(const State& s, const MetricAlarmDefinition& d, const std::string& current,
                                 EpochMs now);

}  // namespace ty::control
