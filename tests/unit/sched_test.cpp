#include <gtest/gtest.h>

#include <cmath>
#include <set>

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

TEST(Fifo, TheReasonOfAJobBehindTheHeadNamesTheHeadForTheCallerToFillIn) {
  auto s = OneQueue(3, 8, {{41, "ml.m5.large", 2}, {42, "ml.m5.large", 1}});
  s.environments[0].in_use = 2;
  auto d = ScheduleFifo(s);
  ASSERT_EQ(d.waits.size(), 2u);
  const Wait& behind = d.waits[1];
  ASSERT_EQ(d.reason_jobs.count(behind.reason), 1u);
  EXPECT_EQ(d.reason_jobs.at(behind.reason), 41u);
  EXPECT_EQ(d.NamedReason(behind.reason, [](uint64_t seq) { return "<" + std::to_string(seq) + ">"; }).rfind("queued behind job <41>", 0),
            0u);
  // The head's own reason names no job and reads the same either way.
  EXPECT_EQ(d.reason_jobs.count(d.waits[0].reason), 0u);
  EXPECT_EQ(d.NamedReason(d.waits[0].reason, [](uint64_t) { return std::string("x"); }), d.ReasonOf(d.waits[0]));
}

TEST(Fifo, JobLargerThanEnvironmentGetsMisconfigurationAndDoesNotBlock) {
  auto d = ScheduleFifo(OneQueue(2, 8, {{1, "ml.m5.large", 3}, {2, "ml.m5.large", 1}}));
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{2}));
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].kind, WaitKind::kMisconfiguration);
  EXPECT_EQ(d.ReasonOf(d.waits[0]), kMaxResourceReason);
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

namespace ty::sched {
namespace {

Snapshot FairShareQueue(int64_t capacity, std::vector<Share> shares, int reservation = 0) {
  Snapshot s;
  s.environments.push_back({"env", true, capacity, 0});
  s.host.push_back({"ml.m5.large", 1000, 1000});
  Queue q;
  q.name = "fs";
  q.environments = {0};
  q.fair_share = FairShare{reservation, 0, std::move(shares)};
  s.queues.push_back(q);
  return s;
}

std::vector<Job> Jobs(uint64_t first_seq, int n) {
  std::vector<Job> out;
  for (int i = 0; i < n; ++i) out.push_back({first_seq + static_cast<uint64_t>(i), "ml.m5.large", 1});
  return out;
}

TEST(FairShare, WithEqualUsageTheLowerWeightFactorGoesFirst) {
  // The tutorial: LOWPRI (weight 5) submitted before MIDPRI (weight 3); MIDPRI runs first.
  auto d = Schedule(FairShareQueue(1, {{"LOWPRI", 5, 0, 0, Jobs(1, 1)}, {"MIDPRI", 3, 0, 0, Jobs(2, 1)}}));
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job_seq, 2u);
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].job_seq, 1u);
}

TEST(FairShare, LowerWeightedUsageGoesFirst) {
  // shares: a = 1000 x 1 = 1000, b = 0 x 3 = 0
  auto d = Schedule(FairShareQueue(1, {{"a", 1, 1000, 0, Jobs(1, 1)}, {"b", 3, 0, 0, Jobs(2, 1)}}));
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{2}));
}

TEST(FairShare, CapacityIsSplitByWeightWithinOnePass) {
  // keys (held + half the next job) x weight: a 0.5 b 1.5 -> a; a 1.5 b 1.5 (tie: lower weight)
  // -> a; a 2.5 b 1.5 -> b; a 2.5 b 4.5 -> a  => a gets 3, b gets 1.
  auto d = Schedule(FairShareQueue(4, {{"a", 1, 0, 0, Jobs(1, 4)}, {"b", 3, 0, 0, Jobs(10, 4)}}));
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{1, 2, 10, 3}));
}

TEST(FairShare, ComputeReservationHoldsCapacityBackForNewShares) {
  // 50% reservation, one active share: 4 x 0.5^1 = 2 instances held back.
  auto d = Schedule(FairShareQueue(4, {{"a", 1, 0, 0, Jobs(1, 4)}}, 50));
  EXPECT_EQ(d.starts.size(), 2u);
  // Two active shares: 4 x 0.5^2 = 1 held back.
  d = Schedule(FairShareQueue(4, {{"a", 1, 0, 0, Jobs(1, 4)}, {"b", 1, 0, 0, Jobs(10, 4)}}, 50));
  EXPECT_EQ(d.starts.size(), 3u);
}

TEST(FairShare, DecayedUsageConvergesToHeldTimesTheTimeConstant) {
  double u = 0;
  for (int i = 0; i < 100; ++i) u = DecayedUsage(u, 2, 60'000, 600);
  EXPECT_NEAR(u, 2 * 600.0, 1.0);
  // Idle for ln(2) time constants halves it; 0 means the default of 600 s.
  EXPECT_NEAR(DecayedUsage(1000, 0, static_cast<int64_t>(600'000 * std::log(2.0)), 0), 500.0, 0.5);
}

TEST(FairShare, ShareOrderKeyWeighsAverageUsageFourTimesWhatIsHeldNow) {
  // usage 600 instance-seconds over tau 300 s: 2 instances on average, x4 = 8; + 3 held + 0.5
  // candidate = 11.5; x weightFactor 0.5 = 5.75. Candidate 0: the weighted usage, 5.5.
  EXPECT_DOUBLE_EQ(ShareOrderKey(600, 3, 0.5, 0.5, 300), 5.75);
  EXPECT_DOUBLE_EQ(ShareOrderKey(600, 3, 0, 0.5, 300), 5.5);
  // decay_seconds 0 means 600: 600 / 600 x 4 = 4, + 1 held = 5, x 2.
  EXPECT_DOUBLE_EQ(ShareOrderKey(600, 1, 0, 2, 0), 10);
  EXPECT_DOUBLE_EQ(ShareOrderKey(0, 0, 0, 999.9999, 600), 0);
}

TEST(FairShare, TwoSaturatingSharesConvergeToTheirWeights) {
  // Weights 1 and 3: over a long run, share a receives 3x the capacity of share b (within 5%).
  double usage_a = 0, usage_b = 0;
  int64_t got_a = 0, got_b = 0;
  uint64_t seq = 1;
  for (int step = 0; step < 2000; ++step) {
    // Every job runs one 10 s step; both shares always have more work than capacity.
    auto d = Schedule(FairShareQueue(16, {{"a", 1, usage_a, 0, Jobs(seq, 16)}, {"b", 3, usage_b, 0, Jobs(seq + 100, 16)}}));
    int64_t a = 0, b = 0;
    for (const auto& s : d.starts) (s.job_seq < seq + 100 ? a : b) += 1;
    seq += 1000;
    ASSERT_EQ(a + b, 16) << "work conservation";
    usage_a = DecayedUsage(usage_a, a, 10'000, 600);
    usage_b = DecayedUsage(usage_b, b, 10'000, 600);
    if (step >= 500) got_a += a, got_b += b;
  }
  EXPECT_NEAR(static_cast<double>(got_a) / static_cast<double>(got_b), 3.0, 0.15);
}

TEST(FairShare, EveryJobGetsExactlyOneDecisionBehindABlockedQueue) {
  // 3 shares x 200 jobs, 5 instances: 5 starts, 595 waits (past the ordered front too).
  auto d = Schedule(FairShareQueue(5, {{"a", 1, 0, 0, Jobs(1, 200)}, {"b", 2, 0, 0, Jobs(1001, 200)},
                                      {"c", 3, 0, 0, Jobs(2001, 200)}}));
  std::set<uint64_t> seen;
  for (const auto& s : d.starts) EXPECT_TRUE(seen.insert(s.job_seq).second);
  for (const auto& w : d.waits) EXPECT_TRUE(seen.insert(w.job_seq).second);
  EXPECT_EQ(d.starts.size(), 5u);
  EXPECT_EQ(seen.size(), 600u);
}

TEST(FairShare, AShareThatWasIdleIsServedFirstWhenItReturns) {
  double busy = 0;
  for (int i = 0; i < 30; ++i) busy = DecayedUsage(busy, 4, 60'000, 600);
  auto d = Schedule(FairShareQueue(1, {{"busy", 1, busy, 0, Jobs(1, 1)}, {"back", 1, 0, 0, Jobs(2, 1)}}));
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{2}));
}

}  // namespace
}  // namespace ty::sched

namespace ty::sched {
namespace {

constexpr int64_t kNow = 1'000'000;

Job Sized(uint64_t seq, int64_t n, int64_t runtime_s) { return {seq, "ml.m5.large", n, runtime_s * 1000}; }

// One environment of `max` instances (host the same); `running` jobs hold 1 instance each and
// end after the given seconds.
Snapshot Busy(int64_t max, std::vector<int64_t> running_ends_s, std::vector<Job> jobs) {
  Snapshot s = OneQueue(max, max, std::move(jobs));
  s.now_ms = kNow;
  for (int64_t end : running_ends_s) s.running.push_back({0, "ml.m5.large", 1, kNow + end * 1000});
  s.environments[0].in_use = static_cast<int64_t>(running_ends_s.size());
  s.host[0].free = max - static_cast<int64_t>(running_ends_s.size());
  return s;
}

TEST(Backfill, ShortJobsStartAheadOfABlockedHeadOnlyWhenTheyEndBeforeItsReservation) {
  // 4 instances, 3 busy until +100 s. The head needs 4: reserved at +100 s. A 50 s job fits
  // before that; a 200 s job would delay the head.
  auto d = Schedule(Busy(4, {100, 100, 100}, {Sized(1, 4, 60), Sized(2, 1, 50), Sized(3, 1, 200)}));
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{2}));
  ASSERT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].job_seq, 1u);
  EXPECT_EQ(d.reservations[0].at_ms, kNow + 100'000);
  ASSERT_EQ(d.waits.size(), 2u);
  EXPECT_EQ(d.waits[0].kind, WaitKind::kCapacity);
  EXPECT_NE(d.ReasonOf(d.waits[0]).find("capacity is reserved for it, expected in about 100 s"), std::string::npos)
      << d.ReasonOf(d.waits[0]);
  EXPECT_EQ(d.waits[1].job_seq, 3u);
  EXPECT_EQ(d.waits[1].kind, WaitKind::kBehind);
}

TEST(Backfill, LongJobsMayUseWhatTheHeadLeavesOver) {
  // 5 instances, 3 busy until +100 s; the head needs 4, so at +100 s one instance is spare and
  // one long job may take it now, but not a second.
  auto d = Schedule(Busy(5, {100, 100, 100}, {Sized(1, 4, 60), Sized(2, 1, 500), Sized(3, 1, 500)}));
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{2}));
}

TEST(Backfill, OffMeansTheHeadBlocksTheQueueAsOnAws) {
  Snapshot s = Busy(4, {100, 100, 100}, {Sized(1, 4, 60), Sized(2, 1, 50)});
  s.queues[0].backfill = false;
  auto d = Schedule(s);
  EXPECT_TRUE(d.starts.empty());
  EXPECT_TRUE(d.reservations.empty());
}

TEST(Backfill, UnboundedRunningJobsMeanNoJobMayJumpTheHead) {
  // What holds the capacity has no known end: the head's start time is unknown, so nothing
  // starts ahead of it on that capacity.
  auto d = Schedule(Busy(4, {}, {Sized(1, 4, 60), Sized(2, 1, 1)}));
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{1}));
  Snapshot s = OneQueue(4, 4, {Sized(1, 4, 60), Sized(2, 1, 1)});
  s.environments[0].in_use = 1;
  s.host[0].free = 3;
  d = Schedule(s);
  EXPECT_TRUE(d.starts.empty());
}

TEST(Backfill, ALowerPriorityQueueCannotDelayAHigherQueuesHead) {
  Snapshot s = Busy(4, {100, 100, 100}, {Sized(1, 4, 60)});
  Queue low;
  low.name = "low";
  low.priority = -1;
  low.environments = {0};
  low.runnable = {Sized(7, 1, 500), Sized(8, 1, 30)};
  s.queues.push_back(low);
  auto d = Schedule(s);
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{8}));
  for (const auto& w : d.waits) {
    if (w.job_seq == 7) {
      EXPECT_EQ(w.kind, WaitKind::kReserved) << d.ReasonOf(w);
    }
  }
}

TEST(Backfill, FairShareHeadIsProtectedToo) {
  Snapshot s = FairShareQueue(4, {{"a", 1, 0, 0, {Sized(1, 4, 60)}}, {"b", 1, 6000, 0, {Sized(2, 1, 500), Sized(3, 1, 10)}}});
  s.now_ms = kNow;
  for (int i = 0; i < 3; ++i) s.running.push_back({0, "ml.m5.large", 1, kNow + 100'000});
  s.environments[0].in_use = 3;
  s.host[0].free = 1;
  auto d = Schedule(s);
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{3}));
}

TEST(Estimates, FollowTheRuntimeBoundsOfRunningAndEarlierJobs) {
  // 2 instances busy until +10 s and +20 s. J1 (1 instance, 30 s) fits at +10 s; J2 needs both
  // instances: the second frees at +20 s, J1's at +40 s.
  auto d = Schedule(Busy(2, {10, 20}, {Sized(1, 1, 30), Sized(2, 2, 5)}));
  const QueueFront* f = d.FrontOf("q");
  ASSERT_TRUE(f);
  ASSERT_EQ(f->jobs.size(), 2u);
  EXPECT_EQ(f->jobs[0].job_seq, 1u);
  EXPECT_EQ(f->jobs[0].estimated_start_ms, kNow + 10'000);
  EXPECT_EQ(f->jobs[1].job_seq, 2u);
  EXPECT_EQ(f->jobs[1].estimated_start_ms, kNow + 40'000);
  EXPECT_EQ(d.waits[f->jobs[1].wait].job_seq, 2u);
}

TEST(Estimates, UnknownWhenNothingBoundedWillFreeCapacity) {
  Snapshot s = OneQueue(1, 1, {Sized(1, 1, 30)});
  s.environments[0].in_use = 1;
  s.host[0].free = 0;
  auto d = Schedule(s);
  ASSERT_EQ(d.fronts.size(), 1u);
  ASSERT_EQ(d.fronts[0].jobs.size(), 1u);
  EXPECT_EQ(d.fronts[0].jobs[0].estimated_start_ms, 0);
}

TEST(NotBefore, AHeldBackJobWaitsAsideAndDoesNotBlockTheJobsBehindIt) {
  // One free instance; the head backs off until +5 s, so the job behind it takes the instance.
  Snapshot s = OneQueue(1, 1, {{1, "ml.m5.large", 1, 0, 5'000}, {2, "ml.m5.large", 1}});
  auto d = Schedule(s);
  EXPECT_EQ(Started(d), (std::vector<uint64_t>{2}));
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].job_seq, 1u);
  EXPECT_EQ(d.waits[0].kind, WaitKind::kNotBefore);
  EXPECT_TRUE(d.reservations.empty());
  // Once the time has come it is placed like any other.
  s.now_ms = 5'000;
  EXPECT_EQ(Started(Schedule(s)), (std::vector<uint64_t>{1}));
}

TEST(NotBefore, JobsOfOneArrivalBatchAreWeighedTogetherWhenItCloses) {
  // Submitted LOW (weight 5), HIGH (1), MID (3) onto an idle queue with one instance: while the
  // batch is open nothing starts; when it closes, HIGH's key (0.5 x 1) is the lowest.
  auto batch = [](uint64_t seq) { return Job{seq, "ml.m5.large", 1, 0, 1'000}; };
  Snapshot s = FairShareQueue(1, {{"LOW", 5, 0, 0, {batch(1)}}, {"HIGH", 1, 0, 0, {batch(2)}}, {"MID", 3, 0, 0, {batch(3)}}});
  auto d = Schedule(s);
  EXPECT_TRUE(d.starts.empty());
  ASSERT_EQ(d.waits.size(), 3u);
  for (const Wait& w : d.waits) EXPECT_EQ(w.kind, WaitKind::kNotBefore);
  s.now_ms = 1'000;
  EXPECT_EQ(Started(Schedule(s)), (std::vector<uint64_t>{2}));
}

// Two instance types on the host: ml.m5.xlarge (the preferred rung) and ml.m5.2xlarge.
Snapshot Ladders(int64_t preferred_free, int64_t fallback_free, std::vector<Job> jobs) {
  Snapshot s;
  s.environments.push_back({"env", true, 10, 0});
  s.host.push_back({"ml.m5.xlarge", 2, preferred_free});
  s.host.push_back({"ml.m5.2xlarge", 2, fallback_free});
  Queue q;
  q.name = "q";
  q.environments = {0};
  q.runnable = std::move(jobs);
  s.queues.push_back(q);
  return s;
}

Job LadderJob(uint64_t seq) { return {seq, "ml.m5.xlarge", 1, 0, 0, {"ml.m5.xlarge", "ml.m5.2xlarge"}}; }

TEST(Rungs, AJobTakesTheFirstRungWithRoom) {
  auto d = Schedule(Ladders(0, 2, {LadderJob(1)}));
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].rung, 1);
  d = Schedule(Ladders(1, 2, {LadderJob(1)}));
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].rung, 0);
}

TEST(Rungs, JobsPlacedInOnePassSeeWhatEarlierOnesTook) {
  // One preferred instance free: the first job takes it, the second falls back, the third
  // finds the fallback's two instances down to one and takes it too.
  auto d = Schedule(Ladders(1, 2, {LadderJob(1), LadderJob(2), LadderJob(3)}));
  ASSERT_EQ(d.starts.size(), 3u);
  EXPECT_EQ(d.starts[0].rung, 0);
  EXPECT_EQ(d.starts[1].rung, 1);
  EXPECT_EQ(d.starts[2].rung, 1);
}

TEST(Rungs, WithNoRoomOnAnyRungTheJobWaitsForItsFirst) {
  auto d = Schedule(Ladders(0, 0, {LadderJob(1)}));
  EXPECT_TRUE(d.starts.empty());
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].kind, WaitKind::kCapacity);
  EXPECT_NE(d.ReasonOf(d.waits[0]).find("free ml.m5.xlarge"), std::string::npos);
}

TEST(Rungs, AJobWithoutALadderReportsNoRung) {
  auto d = Schedule(Ladders(1, 0, {{1, "ml.m5.xlarge", 1}}));
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].rung, -1);
}

}  // namespace
}  // namespace ty::sched
