// The bounded MetricDefinitions series (control/metric_series.h): the downsampling rule, the
// store document, and paging.
#include "control/metric_series.h"

#include <gtest/gtest.h>

namespace ty::control {
namespace {

std::vector<uint64_t> Indexes(const MetricTrack& t) {
  std::vector<uint64_t> out;
  for (const auto& p : t.points) out.push_back(p.index);
  return out;
}

TEST(MetricSeries, KeepsEveryValueUnderTheCap) {
  MetricSeries s(4);
  for (int i = 0; i < 4; ++i) s.Append("loss", i, 1000 + i);
  EXPECT_EQ(Indexes(*s.Find("loss")), (std::vector<uint64_t>{0, 1, 2, 3}));
}

TEST(MetricSeries, DoublesTheStrideAndKeepsTheNewestWhenFull) {
  MetricSeries s(4);
  for (int i = 0; i < 5; ++i) s.Append("loss", i, 1000 + i);
  // stride 2: 0, 2, 4 (4 is also the newest)
  EXPECT_EQ(Indexes(*s.Find("loss")), (std::vector<uint64_t>{0, 2, 4}));
  s.Append("loss", 5, 1005);
  // 5 is off the stride: kept while it is the newest
  EXPECT_EQ(Indexes(*s.Find("loss")), (std::vector<uint64_t>{0, 2, 4, 5}));
  s.Append("loss", 6, 1006);
  // 5 goes when 6 comes: 0, 2, 4, 6 is the cap
  EXPECT_EQ(Indexes(*s.Find("loss")), (std::vector<uint64_t>{0, 2, 4, 6}));
  EXPECT_EQ(s.Find("loss")->points.back().value, 6);
}

TEST(MetricSeries, AMillionValuesStayUnderTheCapEvenlySpreadEndingOnTheLast) {
  MetricSeries s(kMaxMetricPointsPerMetric);
  const uint64_t n = 1'000'000;
  for (uint64_t i = 0; i < n; ++i) s.Append("acc", static_cast<double>(i), static_cast<EpochMs>(i));
  const MetricTrack& t = *s.Find("acc");
  EXPECT_LE(t.points.size(), kMaxMetricPointsPerMetric);
  EXPECT_GE(t.points.size(), kMaxMetricPointsPerMetric / 4);
  EXPECT_EQ(t.points.front().index, 0u);
  EXPECT_EQ(t.points.back().index, n - 1);
  // every kept point but the newest is on the stride, so gaps are equal
  for (size_t i = 0; i + 1 < t.points.size(); ++i) EXPECT_EQ(t.points[i].index, i * t.stride);
}

TEST(MetricSeries, MetricsAreBoundedSeparately) {
  MetricSeries s(2);
  for (int i = 0; i < 10; ++i) s.Append("a", i, i);
  s.Append("b", 7, 7);
  EXPECT_EQ(Indexes(*s.Find("a")), (std::vector<uint64_t>{0, 9}));
  EXPECT_EQ(Indexes(*s.Find("b")), (std::vector<uint64_t>{0}));
}

TEST(MetricSeries, DocumentRoundTripsAndGoesOnDownsamplingTheSameWay) {
  MetricSeries a(4), b(4);
  for (int i = 0; i < 7; ++i) a.Append("loss", i, i);
  ASSERT_TRUE(DecodeMetricSeries(EncodeMetricSeries(a), &b));
  for (int i = 7; i < 20; ++i) {
    a.Append("loss", i, i);
    b.Append("loss", i, i);
  }
  EXPECT_EQ(Indexes(*a.Find("loss")), Indexes(*b.Find("loss")));
}

TEST(MetricSeries, TheEarlierUnboundedDocumentIsBoundedOnLoad) {
  MetricSeries s(2);
  ASSERT_TRUE(DecodeMetricSeries(R"([["loss",1,10],["loss",2,20],["loss",3,30],["acc",9,30]])", &s));
  EXPECT_EQ(Indexes(*s.Find("loss")), (std::vector<uint64_t>{0, 2}));
  EXPECT_EQ(s.Find("acc")->points.back().value, 9);
}

TEST(MetricSeries, RejectsDocumentsItDidNotWrite) {
  MetricSeries s;
  EXPECT_FALSE(DecodeMetricSeries("{", &s));
  EXPECT_FALSE(DecodeMetricSeries(R"({"metrics":[{"name":"x"}]})", &s));
  EXPECT_FALSE(DecodeMetricSeries(R"({"metrics":[{"name":"x","seen":1,"stride":0,"points":[]}]})", &s));
}

TEST(MetricPaging, PagesCoverEveryPointOnceInMetricOrder) {
  MetricSeries s;
  for (int i = 0; i < 5; ++i) s.Append("a", i, 100 + i);
  for (int i = 0; i < 3; ++i) s.Append("b", i, 200 + i);
  const std::vector<std::string> order = {"b", "c", "a"};  // c has no values: listed, empty
  std::vector<std::pair<std::string, uint64_t>> seen;
  MetricCursor cursor;
  int pages = 0;
  while (true) {
    MetricPage p = PageMetricSeries(&s, order, INT64_MIN, INT64_MAX, cursor, 2);
    ++pages;
    size_t n = 0;
    for (const auto& sr : p.series)
      for (const auto& pt : sr.points) {
        seen.emplace_back(sr.name, pt.index);
        ++n;
      }
    EXPECT_LE(n, 2u);
    if (!p.next) break;
    auto round = ParseMetricCursorToken(MetricCursorToken(*p.next));
    ASSERT_TRUE(round);
    cursor = *round;
  }
  EXPECT_EQ(pages, 4);
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, uint64_t>>{
                      {"b", 0}, {"b", 1}, {"b", 2}, {"a", 0}, {"a", 1}, {"a", 2}, {"a", 3}, {"a", 4}}));
}

TEST(MetricPaging, TheTimeWindowFiltersAndAFullLastPageHasNoToken) {
  MetricSeries s;
  for (int i = 0; i < 10; ++i) s.Append("a", i, 100 + i);
  MetricPage p = PageMetricSeries(&s, {"a"}, 103, 104, {}, 2);
  ASSERT_EQ(p.series.size(), 1u);
  EXPECT_EQ(Indexes(MetricTrack{"", 0, 1, p.series[0].points}), (std::vector<uint64_t>{3, 4}));
  EXPECT_FALSE(p.next);
}

TEST(MetricPaging, TokensThisServerDidNotMakeAreRefused) {
  for (const char* bad : {"", "m/", "m/1", "m//1", "m/1/", "x/1/2", "m/1/2/3", "m/G/1", "m/1/11111111111111111"})
    EXPECT_FALSE(ParseMetricCursorToken(bad)) << bad;
  auto ok = ParseMetricCursorToken("m/2/ff");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->metric, 2u);
  EXPECT_EQ(ok->after_index, 255u);
}

}  // namespace
}  // namespace ty::control
