// Metric alarms (control/metric_alarms.h): the evaluation window, M of N, each TreatMissingData,
// comparison operators, metric math and units; the stored document round trip; history bounds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "control/metric_alarms.h"
#include "control/state.h"

namespace ty {
namespace {

using control::AlarmState;
using control::CwBucket;
using control::CwMetricId;
using control::EvaluateMetricAlarm;
using control::kCwMinute;
using control::MetricAlarmDefinition;
using control::State;

constexpr EpochMs kT0 = 1'800'000'000'000 / kCwMinute * kCwMinute;  // a whole minute

const CwMetricId kLoss{"Team/T", "Loss", {{"Run", "r1"}}};

void Put(State& s, EpochMs t, double v, const std::string& unit = "None") {
  CwBucket b;
  b.Add(v);
  std::set<std::pair<std::string, EpochMs>> dirty;
  ASSERT_TRUE(s.cloudwatch.Put(kLoss, unit, t, b, &dirty).ok());
}

MetricAlarmDefinition Alarm(int64_t n, int64_t m, const std::string& missing) {
  MetricAlarmDefinition d;
  d.metric = kLoss;
  d.statistic = "Maximum";
  d.period = 60;
  d.evaluation_periods = n;
  d.datapoints_to_alarm = m;
  d.threshold = 5;
  d.comparison = "GreaterThanThreshold";
  d.treat_missing = missing;
  return d;
}

TEST(MetricAlarms, LooksAtThePeriodsThatEndedBeforeNow) {
  State s;
  Put(s, kT0 + 10'000, 9);  // minute 0
  // At 0:59 minute 0 has not ended: nothing to look at.
  EXPECT_EQ(EvaluateMetricAlarm(s, Alarm(1, 1, "missing"), "OK", kT0 + 59'000).value, "INSUFFICIENT_DATA");
  auto v = EvaluateMetricAlarm(s, Alarm(1, 1, "missing"), "OK", kT0 + 60'000);
  EXPECT_EQ(v.value, "ALARM");
  EXPECT_NE(v.reason.find("1 out of the last 1 datapoints [9.0 ("), std::string::npos) << v.reason;
  auto data = nlohmann::json::parse(v.reason_data);
  EXPECT_EQ(data["recentDatapoints"], nlohmann::json::array({9.0}));
  EXPECT_EQ(data["statistic"], "Maximum");
  // Two minutes on, minute 0 is out of a one-period window.
  EXPECT_EQ(EvaluateMetricAlarm(s, Alarm(1, 1, "missing"), "ALARM", kT0 + 120'000).value, "INSUFFICIENT_DATA");
}

TEST(MetricAlarms, MOfNAndEachTreatmentOfMissingData) {
  State s;
  Put(s, kT0, 9);                // breaching
  Put(s, kT0 + 2 * kCwMinute, 1);  // not; minute 1 missing
  const EpochMs now = kT0 + 3 * kCwMinute;  // the window: minutes 0, 1, 2
  auto same = EvaluateMetricAlarm(s, Alarm(3, 2, "missing"), "OK", now);
  EXPECT_EQ(same.value, "OK");
  EXPECT_EQ(same.reason, "");  // no change: no words
  auto changed = EvaluateMetricAlarm(s, Alarm(3, 2, "missing"), "ALARM", now);
  EXPECT_EQ(changed.value, "OK");
  EXPECT_NE(changed.reason.find("1 out of the last 3 datapoints [1.0 ("), std::string::npos) << changed.reason;
  EXPECT_EQ(EvaluateMetricAlarm(s, Alarm(3, 2, "notBreaching"), "OK", now).value, "OK");
  EXPECT_EQ(EvaluateMetricAlarm(s, Alarm(3, 2, "breaching"), "OK", now).value, "ALARM");  // 9 and the missing one
  EXPECT_EQ(EvaluateMetricAlarm(s, Alarm(3, 1, "missing"), "OK", now).value, "ALARM");
  // A window with nothing at all.
  const EpochMs empty = kT0 + 10 * kCwMinute;
  EXPECT_EQ(EvaluateMetricAlarm(s, Alarm(3, 2, "missing"), "ALARM", empty).value, "INSUFFICIENT_DATA");
  EXPECT_EQ(EvaluateMetricAlarm(s, Alarm(3, 2, "ignore"), "ALARM", empty).value, "ALARM");
  EXPECT_EQ(EvaluateMetricAlarm(s, Alarm(3, 2, "notBreaching"), "ALARM", empty).value, "OK");
  EXPECT_EQ(EvaluateMetricAlarm(s, Alarm(3, 2, "breaching"), "OK", empty).value, "ALARM");
}

TEST(MetricAlarms, ComparisonsUnitsAndStatistics) {
  State s;
  Put(s, kT0, 5, "Count");
  Put(s, kT0 + 1, 3, "Count");
  const EpochMs now = kT0 + kCwMinute;
  auto with = [](const std::string& op, const std::string& stat) {
    MetricAlarmDefinition d = Alarm(1, 1, "missing");
    d.comparison = op;
    d.statistic = stat;
    return d;
  };
  EXPECT_EQ(EvaluateMetricAlarm(s, with("GreaterThanThreshold", "Maximum"), "OK", now).value, "OK");  // 5 > 5: no
  EXPECT_EQ(EvaluateMetricAlarm(s, with("GreaterThanOrEqualToThreshold", "Maximum"), "OK", now).value, "ALARM");
  EXPECT_EQ(EvaluateMetricAlarm(s, with("LessThanThreshold", "Minimum"), "OK", now).value, "ALARM");  // 3 < 5
  EXPECT_EQ(EvaluateMetricAlarm(s, with("LessThanOrEqualToThreshold", "Sum"), "OK", now).value, "OK");  // 8
  EXPECT_EQ(EvaluateMetricAlarm(s, with("GreaterThanThreshold", "SampleCount"), "OK", now).value, "OK");  // 2
  MetricAlarmDefinition d = with("GreaterThanOrEqualToThreshold", "Maximum");
  d.unit = "Seconds";  // the metric is in Count: no data for this alarm
  EXPECT_EQ(EvaluateMetricAlarm(s, d, "OK", now).value, "INSUFFICIENT_DATA");
}

TEST(MetricAlarms, MetricMathWatchesTheQueryThatReturnsData) {
  State s;
  Put(s, kT0, 4);
  MetricAlarmDefinition d = Alarm(1, 1, "missing");
  d.metric = {};
  d.statistic.clear();
  d.period = 0;
  control::CwQuery m;
  m.id = "m";
  m.metric = kLoss;
  m.stat = "Sum";
  m.period = kCwMinute;
  m.return_data = false;
  control::CwQuery e;
  e.id = "e";
  e.expression = "m * 2";
  d.metrics = {m, e};
  EXPECT_EQ(d.PeriodMs(), kCwMinute);
  EXPECT_EQ(EvaluateMetricAlarm(s, d, "OK", kT0 + kCwMinute).value, "ALARM");  // 8 > 5
  d.metrics[1].expression = "m / 2";
  EXPECT_EQ(EvaluateMetricAlarm(s, d, "ALARM", kT0 + kCwMinute).value, "OK");
  d.metrics[1].expression = "nope(";
  auto v = EvaluateMetricAlarm(s, d, "OK", kT0 + kCwMinute);
  EXPECT_EQ(v.value, "INSUFFICIENT_DATA");
  EXPECT_NE(v.reason.find("metric math"), std::string::npos) << v.reason;
}

TEST(MetricAlarms, TheDocumentKeepsDefinitionStateAndHistory) {
  AlarmState a;
  a.value = "ALARM";
  a.since = kT0;
  a.reason = "why";
  a.reason_data = "{}";
  a.configured_at = kT0 - 1;
  a.metric = Alarm(3, 2, "breaching");
  a.metric->alarm_actions = {"arn:aws:sns:us-east-1:1:t"};
  a.metric->tags = {{"team", "vision"}};
  a.Record({kT0, "StateUpdate", "Alarm updated from OK to ALARM", "{}"});
  AlarmState b;
  ASSERT_TRUE(control::DecodeAlarmDoc(control::EncodeAlarmDoc(a), &b));
  EXPECT_EQ(control::EncodeAlarmDoc(a), control::EncodeAlarmDoc(b));
  ASSERT_TRUE(b.metric);
  EXPECT_EQ(b.metric->metric, kLoss);
  EXPECT_EQ(b.metric->datapoints_to_alarm, 2);
  EXPECT_EQ(b.history.size(), 1u);
  // A rule's document (no definition) stays a rule's.
  AlarmState rule;
  ASSERT_TRUE(control::DecodeAlarmDoc(R"({"value":"ALARM","since":5,"reason":"r","condition_since":0})", &rule));
  EXPECT_FALSE(rule.metric);
  EXPECT_EQ(rule.value, "ALARM");
  EXPECT_FALSE(control::DecodeAlarmDoc("not json", &rule));
}

TEST(MetricAlarms, HistoryIsBoundedByCountAndAge) {
  AlarmState a;
  for (size_t i = 0; i < control::kAlarmHistoryKept + 20; ++i) a.Record({kT0 + static_cast<EpochMs>(i), "StateUpdate", "", ""});
  EXPECT_EQ(a.history.size(), control::kAlarmHistoryKept);
  EXPECT_EQ(a.history.front().at, kT0 + 20);
  a.Record({kT0 + control::kAlarmHistoryRetention + 1000, "StateUpdate", "", ""});
  EXPECT_EQ(a.history.size(), 1u);  // everything older than 30 days before the newest went
}

}  // namespace
}  // namespace ty
