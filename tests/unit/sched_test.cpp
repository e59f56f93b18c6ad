#include <gtest/gtest.h>

#include "sched/sched.h"

namespace ty::sched {
namespace {

Snapshot OneQueue(int64_t max, int64_t host, std::vector<Job> jobs) {
  Snapshot s;
  s.environments.push_back({"env", true, max, 0});
  Queue q;
  q.name = "q";
  q.environments = {0};
  q.runnable = std::move(jobs);
  s.queues.push_back(q);
  s.host.push_back({"ml.m5.large", host, host});
  return s;
}

std::vector<uint64_t> Started(const Decisions& d) {
  std::vector<uint64_t> out;
  for (const auto& s : d.starts) out.push_back(s.job_seq);
  return out;
}

TEST(Fifo, StartsInSubmitOrderUpToCapacity) {
  auto d = ScheduleFifo(OneQueue(2, 4, {{1, "ml.m5.large", 1}, {2, "ml.m5.large", 1}, {3, "ml.m5.large", 1}}));
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{1, 2}));
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].job_seq, 3u);
  EXPECT_EQ(d.waits[0].kind, WaitKind::kCapacity);
}

TEST(Fifo, HeadThatDoesNotFitBlocksSmallerJobsBehindIt) {
  // environment: 3 instances; the head needs 2 with 2 in use, so the 1-instance job behind waits.
  auto s = OneQueue(3, 8, {{1, "ml.m5.large", 2}, {2, "ml.m5.large", 1}});
  s.environments[0].in_use = 2;
  auto d = ScheduleFifo(s);
  EXPECT_TRUE(d.starts.empty());
  ASSERT_EQ(d.waits.size(), 2u);
  EXPECT_EQ(d.waits[0].kind, WaitKind::kCapacity);
  EXPECT_EQ(d.waits[1].kind, WaitKind::kBehind);
}

TEST(Fifo, JobLargerThanEnvironmentGetsMisconfigurationAndDoesNotBlock) {
  auto d = ScheduleFifo(OneQueue(2, 8, {{1, "ml.m5.large", 3}, {2, "ml.m5.large", 1}}));
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{2}));
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].kind, WaitKind::kMisconfiguration);
  EXPECT_EQ(d.waits[0].reason, kMaxResourceReason);
}

TEST(Fifo, HostCatalogueLimitsInstancesOfAType) {
  auto d = ScheduleFifo(OneQueue(10, 1, {{1, "ml.m5.large", 1}, {2, "ml.m5.large", 1}}));
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{1}));
}

TEST(Fifo, UnknownInstanceTypeIsMisconfigured) {
  auto d = ScheduleFifo(OneQueue(10, 1, {{1, "ml.p4d.24xlarge", 1}}));
  EXPECT_TRUE(d.starts.empty());
  EXPECT_EQ(d.waits[0].kind, WaitKind::kMisconfiguration);
}

TEST(Fifo, HigherPriorityQueueIsServedFirstOnSharedEnvironment) {
  Snapshot s = OneQueue(1, 4, {{1, "ml.m5.large", 1}});
  Queue high;
  high.name = "high";
  high.priority = 10;
  high.seq = 5;
  high.environments = {0};
  high.runnable = {{7, "ml.m5.large", 1}};
  s.queues.push_back(high);
  auto d = ScheduleFifo(s);
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{7}));
}

TEST(Fifo, EqualPriorityQueuesFallBackToCreationOrder) {
  Snapshot s = OneQueue(1, 4, {{1, "ml.m5.large", 1}});
  s.queues[0].seq = 9;
  Queue other;
  other.name = "older";
  other.seq = 2;
  other.environments = {0};
  other.runnable = {{5, "ml.m5.large", 1}};
  s.queues.push_back(other);
  EXPECT_EQ(Started(ScheduleFifo(s)), (std::vector<uint64_t>{5}));
}

TEST(Fifo, SecondEnvironmentInOrderTakesOverflow) {
  Snapshot s = OneQueue(1, 4, {{1, "ml.m5.large", 1}, {2, "ml.m5.large", 1}});
  s.environments.push_back({"env2", true, 1, 0});
  s.queues[0].environments = {0, 1};
  auto d = ScheduleFifo(s);
  ASSERT_EQ(d.starts.size(), 2u);
  EXPECT_EQ(d.starts[0].environment, 0);
  EXPECT_EQ(d.starts[1].environment, 1);
}

TEST(Fifo, DisabledQueueStartsNothing) {
  Snapshot s = OneQueue(4, 4, {{1, "ml.m5.large", 1}});
  s.queues[0].enabled = false;
  auto d = ScheduleFifo(s);
  EXPECT_TRUE(d.starts.empty());
  EXPECT_EQ(d.waits[0].kind, WaitKind::kQueueDisabled);
}

TEST(Fifo, DisabledEnvironmentStartsNothing) {
  Snapshot s = OneQueue(4, 4, {{1, "ml.m5.large", 1}});
  s.environments[0].enabled = false;
  EXPECT_TRUE(ScheduleFifo(s).starts.empty());
}

TEST(Fifo, SameInputSameDecisions) {
  Snapshot s = OneQueue(3, 3, {{4, "ml.m5.large", 1}, {9, "ml.m5.large", 2}, {11, "ml.m5.large", 1}});
  auto a = ScheduleFifo(s);
  auto b = ScheduleFifo(s);
  EXPECT_EQ(Started(a), Started(b));
  EXPECT_EQ(a.waits.size(), b.waits.size());
}

}  // namespace
}  // namespace ty::sched
