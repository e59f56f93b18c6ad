// Placement across regions (pure ranking, control/placement.h): data locality first, then free
// capacity, queue wait and price; unreachable regions are skipped with their cause.
#include <gtest/gtest.h>

#include "control/placement.h"

namespace ty::control {
namespace {

PeerSummary Region(std::string name, std::set<std::string> buckets, int64_t free, int64_t waiting = 0,
                   double price = 0.10) {
  PeerSummary s;
  s.region = std::move(name);
  s.buckets = std::move(buckets);
  s.free_instances = free;
  s.waiting_jobs = waiting;
  s.price_per_hour = price;
  return s;
}

PlacementRequest Job(std::vector<std::string> buckets, int64_t count = 1) {
  return {std::move(buckets), "ml.m5.large", count};
}

std::vector<std::string> Order(const Placement& p) {
  std::vector<std::string> v;
  for (const auto& r : p.order) v.push_back(r.region);
  return v;
}

TEST(Placement, RegionHoldingTheInputDataWinsOverAnIdleOne) {
  // scores: a = 100 (free) - 10 (cents) = 90; b = 1000 + 100 - 10 - 30 (3 waiting) = 1060
  auto p = RankRegions(Job({"data-b"}), {Region("a", {}, 4), Region("b", {"data-b"}, 1, 3)});
  EXPECT_EQ(Order(p), (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(p.order[0].score, 1060);
  EXPECT_EQ(p.order[1].score, 90);
  EXPECT_NE(p.order[0].why.find("holds input data-b"), std::string::npos);
  EXPECT_NE(p.order[1].why.find("input elsewhere: data-b"), std::string::npos);
}

TEST(Placement, UnreachableRegionIsSkippedWithItsCause) {
  PeerSummary down = Region("b", {"data-b"}, 1);
  down.reachable = false;
  down.unreachable_reason = "Connection refused";
  auto p = RankRegions(Job({"data-b"}), {Region("a", {}, 1), down});
  EXPECT_EQ(Order(p), (std::vector<std::string>{"a"}));
  ASSERT_EQ(p.skipped.size(), 1u);
  EXPECT_EQ(p.skipped[0], "b: unreachable: Connection refused");
  EXPECT_EQ(PlacementReason(p, "a", {}),
            "placed in a score=90: input elsewhere: data-b / 1 free of ml.m5.large / 0 waiting / 0.10 USD/h -- "
            "b: unreachable: Connection refused");
}

TEST(Placement, FullRegionIsTriedAfterEveryRegionWithCapacity) {
  // b holds the data but has nothing free for two instances: a is tried first.
  auto p = RankRegions(Job({"data-b"}, 2), {Region("b", {"data-b"}, 1), Region("a", {}, 2)});
  EXPECT_EQ(Order(p), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(p.order[1].full);
}

TEST(Placement, QueueWaitAndPriceBreakEvenData) {
  // a: 100 - 50 (5 waiting) - 10 = 40; b: 100 - 0 - 30 ($0.30) = 70
  auto p = RankRegions(Job({}), {Region("a", {}, 1, 5, 0.10), Region("b", {}, 1, 0, 0.30)});
  EXPECT_EQ(Order(p), (std::vector<std::string>{"b", "a"}));
  // c is cheaper still at the same wait: 100 - 5 = 95
  p = RankRegions(Job({}), {Region("a", {}, 1, 5, 0.10), Region("b", {}, 1, 0, 0.30), Region("c", {}, 1, 0, 0.05)});
  EXPECT_EQ(Order(p), (std::vector<std::string>{"c", "b", "a"}));
}

TEST(Placement, TiesKeepTheListedOrder) {
  auto p = RankRegions(Job({}), {Region("x", {}, 1), Region("y", {}, 1), Region("z", {}, 1)});
  EXPECT_EQ(Order(p), (std::vector<std::string>{"x", "y", "z"}));
}

TEST(Placement, RegionWithoutTheInstanceTypeIsNoCandidate) {
  PeerSummary none = Region("b", {"data-b"}, 0);
  none.offers_instance_type = false;
  auto p = RankRegions(Job({"data-b"}), {none, Region("a", {}, 1)});
  EXPECT_EQ(Order(p), (std::vector<std::string>{"a"}));
  EXPECT_EQ(p.skipped[0], "b: offers no ml.m5.large");
}

TEST(Placement, EachInputBucketCountsOnce) {
  // a holds both buckets (2000), b one (1000): a wins although b is cheaper.
  auto p = RankRegions(Job({"d1", "d2"}), {Region("b", {"d1"}, 1, 0, 0.01), Region("a", {"d1", "d2"}, 1, 0, 5.0)});
  EXPECT_EQ(Order(p), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.order[0].score, 2000 + 100 - 500);
}

}  // namespace
}  // namespace ty::control
