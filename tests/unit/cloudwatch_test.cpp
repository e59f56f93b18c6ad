// CloudWatch metrics (control/cloudwatch_metrics.h, control/cloudwatch_math.h, api/cloudwatch_api.h):
// statistic sets and percentiles, roll-ups by age and the series cap, the hour documents, the
// metric-math expressions, GetMetricData's in-place read (the same points as the copying one), and
// the CBOR codec (tag-1 timestamps both ways, hostile bodies).
#include <gtest/gtest.h>

#include <malloc.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "api/cloudwatch_api.h"
#include "control/cloudwatch_math.h"
#include "control/cloudwatch_metrics.h"
#include "control/cloudwatch_read.h"
#include "control/state.h"

namespace ty {
namespace {

using control::CloudWatchMetrics;
using control::CwBucket;
using control::CwMetricId;
using control::CwTimeSeries;
using control::kCwDay;
using control::kCwHour;
using control::kCwMinute;
using json = nlohmann::json;

CwBucket Values(std::initializer_list<double> vs) {
  CwBucket b;
  for (double v : vs) b.Add(v);
  return b;
}

const CwMetricId kLoss{"Team/Train", "Loss", {{"Run", "r1"}}};

TEST(CloudWatchMetrics, StatisticSetsMergeAndPercentilesUseTheKeptValues) {
  CwBucket b = Values({4, 1, 3});
  b.Merge(Values({10}));
  EXPECT_EQ(b.count, 4);
  EXPECT_EQ(b.sum, 18);
  EXPECT_EQ(b.min, 1);
  EXPECT_EQ(b.max, 10);
  EXPECT_EQ(control::CwPercentile(b.values, 50), 3);
  EXPECT_EQ(control::CwPercentile(b.values, 100), 10);
  EXPECT_EQ(control::CwPercentile(b.values, 1), 1);
  EXPECT_TRUE(std::isnan(control::CwPercentile(std::vector<double>{}, 50)));
  CwBucket many;
  for (int i = 0; i < 1000; ++i) many.Add(i);
  EXPECT_EQ(many.values.size(), control::kCloudWatchValuesPerBucket);  // bounded
  EXPECT_EQ(many.count, 1000);
}

TEST(CloudWatchMetrics, PutsLandInMinuteBucketsAndMarkTheirHour) {
  CloudWatchMetrics cw;
  std::set<std::pair<std::string, EpochMs>> dirty;
  const EpochMs t = 100 * kCwDay + 5 * kCwHour + 7 * kCwMinute;
  ASSERT_TRUE(cw.Put(kLoss, "Count", t + 1500, Values({1}), &dirty).ok());
  ASSERT_TRUE(cw.Put(kLoss, "", t + 59'000, Values({3}), &dirty).ok());
  const auto* s = cw.Find(kLoss.Key());
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->buckets.size(), 1u);
  EXPECT_EQ(s->buckets.begin()->first, t);
  EXPECT_EQ(s->buckets.begin()->second.sum, 4);
  EXPECT_EQ(s->unit, "Count");  // a put without a unit keeps the last one
  EXPECT_EQ(dirty, (std::set<std::pair<std::string, EpochMs>>{{kLoss.Key(), t - 7 * kCwMinute}}));
}

TEST(CloudWatchMetrics, RollsUpByAgeAndDropsPastRetention) {
  CloudWatchMetrics cw;
  std::set<std::pair<std::string, EpochMs>> dirty;
  const EpochMs t0 = 10 * kCwHour;  // five minute-buckets in one five-minute span
  for (int m = 0; m < 5; ++m) ASSERT_TRUE(cw.Put(kLoss, "", t0 + m * kCwMinute, Values({double(m)}), &dirty).ok());
  dirty.clear();
  cw.Compact(t0 + 14 * kCwDay, &dirty);  // younger than 15 days: unchanged
  EXPECT_EQ(cw.Find(kLoss.Key())->buckets.size(), 5u);
  EXPECT_TRUE(dirty.empty());
  cw.Compact(t0 + 16 * kCwDay, &dirty);  // five-minute resolution
  ASSERT_EQ(cw.Find(kLoss.Key())->buckets.size(), 1u);
  EXPECT_EQ(cw.Find(kLoss.Key())->buckets.at(t0).count, 5);
  EXPECT_EQ(cw.Find(kLoss.Key())->buckets.at(t0).sum, 10);
  EXPECT_EQ(dirty.size(), 1u);
  cw.Compact(t0 + 456 * kCwDay, &dirty);  // past every retention: gone
  EXPECT_EQ(cw.Find(kLoss.Key()), nullptr);
}

TEST(CloudWatchMetrics, RefusesASeriesPastTheCapAndChangesNothing) {
  CloudWatchMetrics cw(1);
  std::set<std::pair<std::string, EpochMs>> dirty;
  ASSERT_TRUE(cw.Put(kLoss, "", kCwHour, Values({1}), &dirty).ok());
  CwMetricId other = kLoss;
  other.name = "Accuracy";
  Status st = cw.Put(other, "", kCwHour, Values({1}), &dirty);
  EXPECT_EQ(st.code(), Code::kLimitExceeded);
  EXPECT_NE(st.message().find("max_series"), std::string::npos);
  EXPECT_EQ(cw.series().size(), 1u);
  EXPECT_TRUE(cw.Put(kLoss, "", 2 * kCwHour, Values({2}), &dirty).ok());  // an existing series still takes data
}

TEST(CloudWatchMetrics, AnHourDocumentLoadsBackTheSameBuckets) {
  CloudWatchMetrics cw;
  std::set<std::pair<std::string, EpochMs>> dirty;
  ASSERT_TRUE(cw.Put(kLoss, "Seconds", 3 * kCwHour + kCwMinute, Values({1, 2}), &dirty).ok());
  ASSERT_TRUE(cw.Put(kLoss, "Seconds", 4 * kCwHour, Values({5}), &dirty).ok());
  ASSERT_EQ(dirty.size(), 2u);
  CloudWatchMetrics loaded;
  for (const auto& [key, hour] : dirty) {
    EXPECT_EQ(CloudWatchMetrics::DocKey(key, hour).rfind("cloudwatch/", 0), 0u);
    ASSERT_TRUE(loaded.LoadHour(cw.EncodeHour(key, hour)));
  }
  const auto* s = loaded.Find(kLoss.Key());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->id, kLoss);
  EXPECT_EQ(s->unit, "Seconds");
  EXPECT_EQ(s->buckets.size(), 2u);
  EXPECT_EQ(s->buckets.at(3 * kCwHour + kCwMinute).sum, 3);
  EXPECT_EQ(cw.EncodeHour(kLoss.Key(), 7 * kCwHour), "");  // nothing there: the document is deleted
  EXPECT_FALSE(loaded.LoadHour("{\"points\": 3}"));
  EXPECT_FALSE(loaded.LoadHour("not json"));
}

// Thirteen days of minute points with 16 values each (the most a bucket keeps), as a metric fed
// every minute by 16 workers holds them.
void FillThirteenDays(CloudWatchMetrics* cw, const CwMetricId& id, EpochMs now) {
  std::set<std::pair<std::string, EpochMs>> dirty;
  CwBucket b;
  for (int k = 0; k < 16; ++k) b.Add(0.25 * k);
  for (EpochMs t = now - 13 * kCwDay; t < now; t += kCwMinute) ASSERT_TRUE(cw->Put(id, "", t, b, &dirty).ok());
}

// A minute bucket takes no allocation of its own beside its map node, and kCwBucketBytes is what
// the heap actually gives it: 13 days of 16-value minutes cost ~3 MB per metric (18,720 buckets
// of 160 bytes), where a heap-held value list cost ~4.8 MB (256 bytes a bucket).
TEST(CloudWatchMetrics, AMinuteBucketCostsWhatItIsCountedAs) {
  const EpochMs now = 400 * kCwDay;
  const size_t before = mallinfo2().uordblks;
  {
    CloudWatchMetrics cw;
    FillThirteenDays(&cw, kLoss, now);
    const size_t heap = mallinfo2().uordblks - before;
    const size_t buckets = cw.Find(kLoss.Key())->buckets.size();
    ASSERT_EQ(buckets, 13u * 1440);
    EXPECT_LE(heap / buckets, 168u) << heap << " bytes for " << buckets << " buckets";
    EXPECT_GE(cw.bytes() + cw.bytes() / 8, heap) << "the count must not undercount the heap by more than an eighth";
    EXPECT_LE(cw.bytes(), 3'100'000u);
  }
}

TEST(CloudWatchMetrics, RefusesABucketPastMaxBytesAndChangesNothing) {
  CloudWatchMetrics cw(1000, CloudWatchMetrics::SeriesBytes(kLoss) + 3 * control::kCwBucketBytes);
  std::set<std::pair<std::string, EpochMs>> dirty;
  for (int m = 0; m < 3; ++m) ASSERT_TRUE(cw.Put(kLoss, "", kCwHour + m * kCwMinute, Values({1}), &dirty).ok());
  const size_t held = cw.bytes();
  Status st = cw.Put(kLoss, "", kCwHour + 3 * kCwMinute, Values({1}), &dirty);
  EXPECT_EQ(st.code(), Code::kLimitExceeded);
  EXPECT_NE(st.message().find("max_series_bytes"), std::string::npos) << st.message();
  EXPECT_EQ(cw.bytes(), held);
  EXPECT_EQ(cw.Find(kLoss.Key())->buckets.size(), 3u);
  EXPECT_TRUE(cw.Put(kLoss, "", kCwHour + kCwMinute + 5000, Values({2}), &dirty).ok());  // a minute it has: no new bytes
  CwMetricId other = kLoss;
  other.name = "Accuracy";
  EXPECT_EQ(cw.Put(other, "", kCwHour, Values({1}), &dirty).code(), Code::kLimitExceeded);
  // What ages out is given back: past the retention the buckets go, and new minutes fit again.
  cw.Compact(kCwHour + control::kCwHourRetention + kCwDay, &dirty);
  EXPECT_EQ(cw.bytes(), 0u);
  EXPECT_TRUE(cw.Put(other, "", kCwHour + control::kCwHourRetention + kCwDay, Values({1}), &dirty).ok());
}

TEST(CloudWatchMetrics, RollUpsAndLoadingKeepTheByteCount) {
  const EpochMs now = 400 * kCwDay;
  CloudWatchMetrics cw;
  std::set<std::pair<std::string, EpochMs>> dirty;
  for (EpochMs t = now - 20 * kCwDay; t < now; t += 7 * kCwMinute) ASSERT_TRUE(cw.Put(kLoss, "", t, Values({1}), &dirty).ok());
  auto counted = [](const CloudWatchMetrics& c) {
    size_t n = 0;
    for (const auto& [k, s] : c.series()) n += CloudWatchMetrics::SeriesBytes(s.id) + s.buckets.size() * control::kCwBucketBytes;
    return n;
  };
  EXPECT_EQ(cw.bytes(), counted(cw));
  cw.Compact(now, &dirty);  // days 15 .. 20 back roll up into five-minute buckets
  EXPECT_EQ(cw.bytes(), counted(cw));
  CloudWatchMetrics loaded;
  for (const auto& [key, hour] : dirty)
    if (std::string doc = cw.EncodeHour(key, hour); !doc.empty()) ASSERT_TRUE(loaded.LoadHour(doc));
  EXPECT_EQ(loaded.bytes(), counted(loaded));
}

TEST(CloudWatchMetrics, KeptValuesAreSingles) {
  CwBucket b = Values({0.1, 123456789.0, 2.5});
  EXPECT_EQ(b.values.size(), 3u);
  EXPECT_EQ(b.values[0], static_cast<double>(0.1f));
  EXPECT_EQ(b.values[2], 2.5);
  EXPECT_EQ(b.max, 123456789.0);  // the statistic set stays exact
  EXPECT_EQ(b.sum, 0.1 + 123456789.0 + 2.5);
}

class CloudWatchMath : public ::testing::Test {
 protected:
  StatusOr<CwTimeSeries> Eval(const std::string& e) { return control::EvaluateCwExpression(e, vars_, ids_, grid_); }
  std::map<std::string, CwTimeSeries> vars_ = {{"a", {{0, 1}, {60, 2}, {180, 4}}}, {"b", {{0, 10}, {60, 20}, {120, 30}}}};
  std::vector<std::string> ids_ = {"a", "b"};
  std::vector<EpochMs> grid_ = {0, 60, 120, 180};
};

TEST_F(CloudWatchMath, ArithmeticKeepsTheTimestampsBothSeriesHave) {
  EXPECT_EQ(*Eval("a + b"), (CwTimeSeries{{0, 11}, {60, 22}}));
  EXPECT_EQ(*Eval("(a + 1) * 2 - -1"), (CwTimeSeries{{0, 5}, {60, 7}, {180, 11}}));
  EXPECT_EQ(*Eval("b / a"), (CwTimeSeries{{0, 10}, {60, 10}}));
  EXPECT_EQ(*Eval("a / 0"), CwTimeSeries{});  // no point where the value is undefined
}

TEST_F(CloudWatchMath, FunctionsOverArraysAndSingleSeries) {
  EXPECT_EQ(*Eval("SUM([a, b])"), (CwTimeSeries{{0, 11}, {60, 22}, {120, 30}, {180, 4}}));
  EXPECT_EQ(*Eval("SUM(METRICS())"), *Eval("SUM([a, b])"));
  EXPECT_EQ(*Eval("MAX([a, b])"), (CwTimeSeries{{0, 10}, {60, 20}, {120, 30}, {180, 4}}));
  EXPECT_EQ(*Eval("MIN([a, b])"), (CwTimeSeries{{0, 1}, {60, 2}, {120, 30}, {180, 4}}));
  EXPECT_EQ(*Eval("AVG([a, b])"), (CwTimeSeries{{0, 5.5}, {60, 11}, {120, 30}, {180, 4}}));
  // One series reduces to a number, which is the same at every grid timestamp.
  EXPECT_EQ(*Eval("AVG(b)"), (CwTimeSeries{{0, 20}, {60, 20}, {120, 20}, {180, 20}}));
  EXPECT_EQ(*Eval("a * 3 - SUM(a)"), (CwTimeSeries{{0, -4}, {60, -1}, {180, 5}}));
}

TEST_F(CloudWatchMath, FillWithAValueOrTheLatestEarlierOne) {
  EXPECT_EQ(*Eval("FILL(a, 0)"), (CwTimeSeries{{0, 1}, {60, 2}, {120, 0}, {180, 4}}));
  EXPECT_EQ(*Eval("FILL(a, REPEAT)"), (CwTimeSeries{{0, 1}, {60, 2}, {120, 2}, {180, 4}}));
  EXPECT_EQ(*Eval("FILL(b, REPEAT)"), (CwTimeSeries{{0, 10}, {60, 20}, {120, 30}, {180, 30}}));
  EXPECT_EQ(*Eval("SUM(FILL(METRICS(), 0))"), (CwTimeSeries{{0, 11}, {60, 22}, {120, 30}, {180, 4}}));
}

TEST_F(CloudWatchMath, RefusalsNameTheRule) {
  for (const char* bad : {"c + 1", "LOG(a)", "a +", "(a", "[a, 1]", "FILL(a)", "FILL(a, b)", "[a, b]", "a $ b", "SUM(1)"}) {
    auto r = Eval(bad);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("Expression"), std::string::npos) << bad;
  }
  EXPECT_NE(Eval("c + 1").status().message().find("no query has the id c"), std::string::npos);
  EXPECT_NE(Eval("LOG(a)").status().message().find("unknown function LOG"), std::string::npos);
}

// ---- What a read may cost ----

std::vector<control::CwQuery> MetricStats(int n, EpochMs period) {
  std::vector<control::CwQuery> qs;
  for (int i = 0; i < n; ++i) {
    CwMetricId id = kLoss;
    id.dims[0].second = "r" + std::to_string(i);
    qs.push_back(control::CwQuery{"m" + std::to_string(i), "", "", "Sum", id, period});
  }
  return qs;
}

// The finding's call: 20 metrics and 480 SUM(METRICS()) over 13 days of minutes took 23 s and
// 400 MB. It is refused from the request alone: 20 x 18,720 + 480 x 21 x 18,720 points.
TEST(CloudWatchCost, ManyExpressionsOverAWideWindowAreRefusedBeforeAnyWork) {
  const EpochMs now = 400 * kCwDay, from = now - 13 * kCwDay;
  std::vector<control::CwQuery> qs = MetricStats(20, kCwMinute);
  for (int i = 0; i < 480; ++i) qs.push_back(control::CwQuery{"e" + std::to_string(i), "", "SUM(METRICS())", "", {}, 0});
  auto cost = control::CheckCwQueryCost(qs, from, now, kCwMinute, now);
  ASSERT_FALSE(cost.ok());
  EXPECT_EQ(cost.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(cost.status().message().find(std::to_string(20 * 18720 + 480 * 21 * 18720)), std::string::npos)
      << cost.status().message();
  EXPECT_NE(cost.status().message().find("limit of 2000000"), std::string::npos);
  // One expression over 499 metrics for a day fits: 499 x 1,440 + 500 x 1,440.
  std::vector<control::CwQuery> day = MetricStats(499, kCwMinute);
  day.push_back(control::CwQuery{"e", "", "SUM(METRICS())", "", {}, 0});
  auto fits = control::CheckCwQueryCost(day, now - kCwDay, now, kCwMinute, now);
  ASSERT_TRUE(fits.ok()) << fits.status().message();
  EXPECT_EQ(*fits, 499u * 1440 + 500u * 1440);
}

TEST(CloudWatchCost, EachOperandCountsAndCallsWithoutExpressionsAreNotCounted) {
  const EpochMs now = 400 * kCwDay, from = now - 14 * kCwDay;
  std::vector<control::CwQuery> qs = MetricStats(1, kCwMinute);
  EXPECT_EQ(*control::CheckCwQueryCost(qs, from, now, kCwMinute, now), 0u);  // streamed a page at a time
  std::string e = "m0";
  for (int i = 0; i < 120; ++i) e += " + m0";  // 121 operands of 20,160 points
  qs.push_back(control::CwQuery{"e", "", e, "", {}, 0});
  EXPECT_EQ(control::CheckCwQueryCost(qs, from, now, kCwMinute, now).status().code(), Code::kFailedPrecondition);
  qs.back().expression = "m0 * 2";
  EXPECT_EQ(*control::CheckCwQueryCost(qs, from, now, kCwMinute, now), 20160u + 2 * 20160u);
  // A metric's points are bounded by what is stored: an hour a point past 63 days.
  EXPECT_EQ(control::CwStoredPointsAtMost(now - 455 * kCwDay, now - 63 * kCwDay, now), 392u * 24 + 1);
  EXPECT_EQ(control::CwStoredPointsAtMost(now - kCwDay, now, now), 1441u);
  // Any window of one metric (GetMetricStatistics) stays below AWS's 50,850 queried points.
  EXPECT_EQ(control::CwStoredPointsAtMost(0, 2000 * kCwDay, 1000 * kCwDay), 21721u + 13825 + 9409);
}

// A MetricStat query read in place gives what the copying read (ReadCwMetric, CwByPeriod, CwStat)
// gives, for every statistic and period, and CountCwQuery counts exactly those points.
TEST(CloudWatchRead, InPlaceReadMatchesTheCopyingReadAndItsCount) {
  control::State s;
  std::set<std::pair<std::string, EpochMs>> dirty;
  const EpochMs t0 = 200 * kCwDay;
  for (int m = 0; m < 30; ++m) {
    if (m % 7 == 3) continue;  // a gap
    CwBucket b;
    if (m % 5 == 4) {
      b = CwBucket{2, 2.0 * m, 0, 2.0 * m, {}};  // StatisticValues only: no kept values, no percentiles
    } else {
      for (int k = 0; k <= m % 4; ++k) b.Add(m * 1.5 - k * 3);
    }
    ASSERT_TRUE(s.cloudwatch.Put(kLoss, "Count", t0 + m * kCwMinute + 1000, b, &dirty).ok());
  }
  const EpochMs from = t0 + 2 * kCwMinute + 30'000, to = t0 + 27 * kCwMinute;
  int with_points = 0;
  for (EpochMs period : {kCwMinute, 2 * kCwMinute, 5 * kCwMinute, kCwHour, EpochMs{10'000}}) {
    for (const std::string stat : {"SampleCount", "Sum", "Average", "Minimum", "Maximum", "p50", "p99.5", "p0"}) {
      control::CwQuery q;
      q.id = "q";
      q.metric = kLoss;
      q.period = period;
      q.stat = stat;
      std::vector<std::pair<EpochMs, double>> want, got;
      for (const auto& [t, b] : control::CwByPeriod(control::ReadCwMetric(s, kLoss, from, to), from, period))
        if (auto v = control::CwStat(b, stat)) want.emplace_back(t, *v);
      control::ReadCwQuery(s, q, from, to, [&got](EpochMs t, double v) { got.emplace_back(t, v); });
      EXPECT_EQ(got, want) << stat << " over " << period;
      EXPECT_EQ(control::CountCwQuery(s, q, from, to), want.size()) << stat << " over " << period;
      with_points += !want.empty();
    }
  }
  EXPECT_EQ(with_points, 40);
  // By hand, 2-minute periods from 2:30: [4:30, 6:30) holds minutes 5 (7.5, 4.5) and 6 (9, 6, 3).
  control::CwQuery q{"q", "", "", "p50", kLoss, 2 * kCwMinute};
  std::map<EpochMs, double> p50, n;
  control::ReadCwQuery(s, q, from, to, [&p50](EpochMs t, double v) { p50[t] = v; });
  q.stat = "SampleCount";
  control::ReadCwQuery(s, q, from, to, [&n](EpochMs t, double v) { n[t] = v; });
  EXPECT_EQ(p50.at(from + 2 * kCwMinute), 6);
  EXPECT_EQ(n.at(from + 2 * kCwMinute), 5);
  // [2:30, 4:30) holds only minute 4, [8:30, 10:30) only minute 9 (10 is a gap): StatisticValues
  // only, so a count there but no percentile.
  EXPECT_EQ(n.at(from), 2);
  EXPECT_EQ(p50.count(from), 0u);
  EXPECT_EQ(p50.count(from + 6 * kCwMinute), 0u);
  EXPECT_EQ(n.size(), 12u);
  EXPECT_EQ(p50.size(), 10u);
  q.period = kCwMinute;
  EXPECT_EQ(control::CountCwQuery(s, q, from, to), 20u);  // minutes 3 .. 26 less the gaps 3, 10, 17, 24
  q.stat = "p50";
  EXPECT_EQ(control::CountCwQuery(s, q, from, to), 16u);  // less minutes 4, 9, 14, 19 (no kept values)
  // An unknown statistic has no points (the API refuses it before; this must not throw).
  q.stat = "Median";
  EXPECT_EQ(control::CountCwQuery(s, q, from, to), 0u);
}

TEST(CloudWatchCodec, WritesTimestampsAsTagOneAndReadsThemBack) {
  json v = {{"T", api::CwTimestamp(1700000000.5)}, {"N", -3}, {"S", "x"}, {"L", {1u, 2.5, true, nullptr}}};
  const std::string cbor = api::EncodeCbor(v);
  // tag 1 (0xc1) over a float64 (0xfb)
  EXPECT_NE(cbor.find("\xc1\xfb"), std::string::npos);
  auto back = api::DecodeCbor(cbor, 64);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)["T"], 1700000000.5);
  EXPECT_EQ((*back)["N"], -3);
  EXPECT_EQ((*back)["S"], "x");
  EXPECT_EQ((*back)["L"], json({1u, 2.5, true, nullptr}));
}

TEST(CloudWatchCodec, ReadsWhatBotocoreWrites) {
  // botocore 1.43's PutMetricData body: {"Namespace": "T/x", "MetricData": [{..., "Timestamp": tag 1 uint32}]}
  const std::string hex =
      "a2694e616d65737061636563542f786a4d65747269634461746181a56a4d65747269634e616d65644c6f73736556616c7565fb3ff0000000"
      "0000006a44696d656e73696f6e7381a2644e616d656352756e6556616c756562723164556e697465436f756e746954696d657374616d70c1"
      "1a6b080325";
  std::string bytes;
  for (size_t i = 0; i < hex.size(); i += 2) bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  auto v = api::DecodeCbor(bytes, 64);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ((*v)["Namespace"], "T/x");
  EXPECT_EQ((*v)["MetricData"][0]["Timestamp"], 1795687205);
  EXPECT_EQ((*v)["MetricData"][0]["Dimensions"][0]["Value"], "r1");
}

TEST(CloudWatchCodec, RefusesMalformedAndTooDeepBodies) {
  for (const std::string& bad : {std::string("\xbf\x61", 2), std::string("\xff"), std::string("\x1c"),
                                 std::string("\x62\x61"), std::string("\xa1\x61" "a"), std::string("\x9b\xff\xff\xff\xff\xff\xff\xff\xff"),
                                 std::string("\x01\x02")}) {
    auto r = api::DecodeCbor(bad, 64);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  }
  const std::string deep(100000, '\x81');
  auto r = api::DecodeCbor(deep, 64);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("more than 64 deep"), std::string::npos);
  EXPECT_TRUE(api::DecodeCbor(std::string(10, '\x81') + "\x80", 64).ok());
}

}  // namespace
}  // namespace ty
