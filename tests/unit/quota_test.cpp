// Quota-share scheduling (pure library): borrowing, reclaim, in-share preemption, reasons.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "sched/quota.h"
#include "sched/sched.h"

namespace ty::sched {
namespace {

const std::string kType = "ml.m5.large";

QuotaShareSpec Share(std::string name, int64_t limit, SharingStrategy s = SharingStrategy::kLendAndBorrow,
                     int64_t borrow = -1, bool in_share = false) {
  QuotaShareSpec q;
  q.name = std::move(name);
  q.limit[kType] = limit;
  q.strategy = s;
  q.borrow_limit_percent = borrow;
  q.in_share_preemption = in_share;
  return q;
}

std::vector<QuotaJob> Jobs(uint64_t first, int n, int64_t size = 1, int priority = 0) {
  std::vector<QuotaJob> out;
  for (int i = 0; i < n; ++i) out.push_back({first + static_cast<uint64_t>(i), kType, size, priority});
  return out;
}

std::vector<QuotaRunningJob> Running(int share, uint64_t first, int n, int64_t size = 1, int priority = 0,
                                     uint64_t first_start = 1) {
  std::vector<QuotaRunningJob> out;
  for (int i = 0; i < n; ++i)
    out.push_back({first + static_cast<uint64_t>(i), share, kType, size, priority, first_start + static_cast<uint64_t>(i)});
  return out;
}

TEST(QuotaShares, IdleCapacityIsBorrowedAndReclaimedWhenTheOwnerSubmits) {
  // 100 instances; A guaranteed 60, B 40, both LEND_AND_BORROW. B uses 25, so A grows to 75.
  QuotaSnapshot s;
  s.capacity[kType] = 100;
  s.shares = {Share("A", 60), Share("B", 40)};
  s.shares[0].runnable = Jobs(1000, 80);
  s.running = Running(1, 1, 25);
  auto d = ScheduleQuotaShares(s);
  ASSERT_EQ(d.starts.size(), 75u);
  EXPECT_EQ(std::count_if(d.starts.begin(), d.starts.end(), [](auto& x) { return x.borrowing; }), 15);
  EXPECT_TRUE(d.preemptions.empty());

  // Now A runs 75 (the 15 borrowed ones started last) and B asks for its full 40.
  QuotaSnapshot s2;
  s2.capacity[kType] = 100;
  s2.shares = {Share("A", 60), Share("B", 40)};
  s2.running = Running(1, 1, 25);
  auto a = Running(0, 1000, 75, 1, 0, 100);
  s2.running.insert(s2.running.end(), a.begin(), a.end());
  s2.shares[1].runnable = Jobs(5000, 15);
  auto d2 = ScheduleQuotaShares(s2);
  // shares: A 75 -> 60 (15 preempted, the most recently started), B 25 -> 40 once they exit.
  ASSERT_EQ(d2.preemptions.size(), 15u);
  std::set<uint64_t> victims;
  for (const auto& p : d2.preemptions) {
    EXPECT_FALSE(p.in_share);
    victims.insert(p.victim_seq);
  }
  EXPECT_EQ(*victims.begin(), 1060u);  // jobs 1060..1074 started last
  EXPECT_EQ(*victims.rbegin(), 1074u);
  EXPECT_TRUE(d2.starts.empty());

  // While the victims stop, nothing more is preempted for the same jobs.
  for (auto& r : s2.running)
    if (victims.count(r.seq)) r.preempting = true;
  auto d3 = ScheduleQuotaShares(s2);
  EXPECT_TRUE(d3.preemptions.empty());
  EXPECT_EQ(d3.waits.size(), 15u);
}

TEST(QuotaShares, ABorrowerDoesNotRetakeCapacityItsOwnerIsWaitingFor) {
  // A (limit 2) had borrowed 2; one A job was preempted and is runnable again, submitted before
  // B's job. The freed instance goes to B (inside its quota), not back to A.
  QuotaSnapshot s;
  s.capacity[kType] = 4;
  s.shares = {Share("A", 2), Share("B", 2)};
  s.running = Running(0, 1, 3);  // A holds 3
  s.shares[0].runnable = Jobs(4, 1);   // the preempted A job, back in the queue
  s.shares[1].runnable = Jobs(10, 1);  // B's job
  auto d = ScheduleQuotaShares(s);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job_seq, 10u);
  EXPECT_FALSE(d.starts[0].borrowing);
}

TEST(QuotaShares, InSharePreemptionTakesExactlyTheLowestPriorityJob) {
  // A share of 60 runs four 15-instance jobs at priorities 80, 50, 30 and 10; a priority-90 job
  // of 15 preempts exactly the priority-10 job.
  QuotaSnapshot s;
  s.capacity[kType] = 60;
  s.shares = {Share("A", 60, SharingStrategy::kReserve, -1, true)};
  int priorities[] = {80, 50, 30, 10};
  for (int i = 0; i < 4; ++i) s.running.push_back({static_cast<uint64_t>(i + 1), 0, kType, 15, priorities[i], static_cast<uint64_t>(i + 1)});
  s.shares[0].runnable = {{100, kType, 15, 90}};
  auto d = ScheduleQuotaShares(s);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim_seq, 4u);
  EXPECT_TRUE(d.preemptions[0].in_share);
  EXPECT_EQ(d.preemptions[0].for_job_seq, 100u);
}

TEST(QuotaShares, InSharePreemptionTakesTheJobThatLosesLeastWorkSinceItsCheckpoint) {
  // Two priority-10 jobs of 15 instances, both started at t=0 s, now t=1000 s; #1 checkpointed
  // at t=950 s (loses 15 x 50 s), #2 never (loses 15 x 1000 s) although it started more recently.
  QuotaSnapshot s;
  s.now_ms = 1'000'000;
  s.capacity[kType] = 30;
  s.shares = {Share("A", 30, SharingStrategy::kReserve, -1, true)};
  s.running = Running(0, 1, 2, 15, 10);
  s.running[0].started_ms = s.running[1].started_ms = 1;
  s.running[0].last_checkpoint_ms = 950'000;
  s.shares[0].runnable = {{100, kType, 15, 90}};
  auto d = ScheduleQuotaShares(s);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim_seq, 1u);
  EXPECT_EQ(WorkLostMs(s.running[0], s.now_ms), 15 * 50'000);

  // Without checkpoints the most recently started one goes (equal work lost: the later start).
  s.running[0].last_checkpoint_ms = 0;
  d = ScheduleQuotaShares(s);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim_seq, 2u);
}

TEST(QuotaShares, WorkLostCountsInstancesAndIsZeroWhenNothingIsKnown) {
  QuotaRunningJob r;
  r.instance_count = 4;
  EXPECT_EQ(WorkLostMs(r, 10'000), 0);  // neither start nor checkpoint known
  r.started_ms = 4'000;
  EXPECT_EQ(WorkLostMs(r, 10'000), 4 * 6'000);
  r.last_checkpoint_ms = 9'000;
  EXPECT_EQ(WorkLostMs(r, 10'000), 4 * 1'000);
  EXPECT_EQ(WorkLostMs(r, 8'000), 0);  // a checkpoint "after" now loses nothing
}

TEST(QuotaShares, NoInSharePreemptionWhenDisabledOrNoLowerPriority) {
  QuotaSnapshot s;
  s.capacity[kType] = 30;
  s.shares = {Share("A", 30, SharingStrategy::kReserve, -1, false)};
  s.running = Running(0, 1, 2, 15, 10);
  s.shares[0].runnable = {{100, kType, 15, 90}};
  EXPECT_TRUE(ScheduleQuotaShares(s).preemptions.empty());
  s.shares[0].in_share_preemption = true;
  s.shares[0].runnable = {{100, kType, 15, 5}};  // lower than everything running
  EXPECT_TRUE(ScheduleQuotaShares(s).preemptions.empty());
}

TEST(QuotaShares, NothingIsPreemptedForAJobThatWouldStillNotFit) {
  // Over-subscribed: 8 instances, limits 5 + 5. A uses its 5, B uses 3; nobody borrows, so B's
  // job of 2 (inside its quota) waits and nothing is preempted.
  QuotaSnapshot s;
  s.capacity[kType] = 8;
  s.shares = {Share("A", 5), Share("B", 5)};
  s.running = Running(0, 1, 5);
  auto b = Running(1, 10, 3);
  s.running.insert(s.running.end(), b.begin(), b.end());
  s.shares[1].runnable = Jobs(100, 1, 2);
  auto d = ScheduleQuotaShares(s);
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_TRUE(d.starts.empty());
  ASSERT_EQ(d.waits.size(), 1u);
}

TEST(QuotaShares, ReserveSharesDoNotLendTheirIdleQuota) {
  QuotaSnapshot s;
  s.capacity[kType] = 10;
  s.shares = {Share("R", 5, SharingStrategy::kReserve), Share("L", 5, SharingStrategy::kLendAndBorrow)};
  s.shares[1].runnable = Jobs(1, 8);
  auto d = ScheduleQuotaShares(s);
  EXPECT_EQ(d.starts.size(), 5u);  // its own 5; R's idle 5 stay reserved
  // A LEND share's idle quota can be borrowed.
  s.shares[0].strategy = SharingStrategy::kLend;
  EXPECT_EQ(ScheduleQuotaShares(s).starts.size(), 8u);
}

TEST(QuotaShares, BorrowLimitCapsBorrowing) {
  QuotaSnapshot s;
  s.capacity[kType] = 20;
  s.shares = {Share("A", 4, SharingStrategy::kLendAndBorrow, 50), Share("B", 16, SharingStrategy::kLend)};
  s.shares[0].runnable = Jobs(1, 10);
  EXPECT_EQ(ScheduleQuotaShares(s).starts.size(), 6u);  // 4 + 50% of 4
}

TEST(QuotaShares, MisconfigurationReasonsAreAwsVariants) {
  auto reason = [](QuotaShareSpec share, std::vector<QuotaShareSpec> others, int64_t size, int64_t capacity = 100) {
    QuotaSnapshot s;
    s.capacity[kType] = capacity;
    share.runnable = Jobs(1, 1, size);
    s.shares.push_back(share);
    for (auto& o : others) s.shares.push_back(o);
    auto d = ScheduleQuotaShares(s);
    return d.waits.empty() ? std::string("started") : d.ReasonOf(d.waits[0]);
  };
  // RESERVE / LEND: job 5 > share limit 4.
  EXPECT_EQ(reason(Share("A", 4, SharingStrategy::kReserve), {}, 5), kQuotaLimitReason);
  EXPECT_EQ(reason(Share("A", 4, SharingStrategy::kLend), {}, 5), kQuotaLimitReason);
  // LEND_AND_BORROW: limit 2, borrowLimit 100 -> at most 4.
  EXPECT_EQ(reason(Share("A", 2, SharingStrategy::kLendAndBorrow, 100), {Share("B", 50)}, 5), kQuotaBorrowLimitReason);
  // A and B each 4, borrowLimit 200: a job of 10 on A exceeds own 4 + B's 4.
  EXPECT_EQ(reason(Share("A", 4, SharingStrategy::kLendAndBorrow, 200), {Share("B", 4)}, 10), kQuotaBorrowableReason);
  // More than the environment holds of the type.
  EXPECT_EQ(reason(Share("A", 4), {}, 11, 10), kMaxResourceReason);
}

TEST(QuotaShares, SameInputSameDecisions) {
  QuotaSnapshot s;
  s.capacity[kType] = 50;
  s.shares = {Share("A", 20), Share("B", 30, SharingStrategy::kLend)};
  s.shares[0].runnable = Jobs(1, 40);
  s.shares[1].runnable = Jobs(100, 10, 2);
  auto a = ScheduleQuotaShares(s);
  auto b = ScheduleQuotaShares(s);
  ASSERT_EQ(a.starts.size(), b.starts.size());
  for (size_t i = 0; i < a.starts.size(); ++i) EXPECT_EQ(a.starts[i].job_seq, b.starts[i].job_seq);
}

TEST(QuotaShares, EstimatesFollowEachSharesQuotaAndTheRuntimeBounds) {
  // 2 instances; A and B reserve one each. A's job ends at +10 s, B's at +20 s. A's next jobs
  // (5 s each) follow at +10 s and +15 s; B's waits for B's own instance, at +20 s.
  QuotaSnapshot s;
  s.now_ms = 1'000'000;
  s.capacity[kType] = 2;
  s.shares = {Share("A", 1, SharingStrategy::kReserve), Share("B", 1, SharingStrategy::kReserve)};
  s.running = Running(0, 1, 1);
  auto b = Running(1, 2, 1);
  s.running.push_back(b[0]);
  s.running[0].end_ms = s.now_ms + 10'000;
  s.running[1].end_ms = s.now_ms + 20'000;
  s.shares[0].runnable = {{10, kType, 1, 0, 5'000}, {12, kType, 1, 0, 5'000}};
  s.shares[1].runnable = {{11, kType, 1, 0, 5'000}};
  auto d = ScheduleQuotaShares(s);
  ASSERT_EQ(d.front.size(), 3u);
  std::map<uint64_t, int64_t> at;
  for (const auto& f : d.front) {
    at[f.job_seq] = f.estimated_start_ms - s.now_ms;
    EXPECT_EQ(d.waits[f.wait].job_seq, f.job_seq);
  }
  EXPECT_EQ(at[10], 10'000);
  EXPECT_EQ(at[12], 15'000);
  EXPECT_EQ(at[11], 20'000);
}

TEST(QuotaShares, OfferOrderAcrossSharesIsSubmitOrderAtAnyJobNumber) {
  // Idle capacity goes to the share whose next job was submitted first, whatever the size of the
  // job numbers (small ones are merged as one packed integer, very large ones as pairs).
  for (uint64_t base : {uint64_t{1}, (uint64_t{1} << 40) - 3, uint64_t{1} << 62}) {
    QuotaSnapshot s;
    s.capacity[kType] = 3;
    s.shares = {Share("A", 1, SharingStrategy::kLend), Share("B", 1, SharingStrategy::kLend),
                Share("C", 1, SharingStrategy::kLendAndBorrow)};
    s.shares[0].runnable = Jobs(base + 4, 1);
    s.shares[1].runnable = Jobs(base + 2, 1);
    s.shares[2].runnable = {{base + 5, kType, 1, 0}, {base + 0, kType, 1, 0}, {base + 3, kType, 1, 0}};
    auto d = ScheduleQuotaShares(s);
    std::vector<uint64_t> started;
    for (const auto& x : d.starts) started.push_back(x.job_seq - base);
    // C's first job (inside its quota) and B's start; A's job 4 comes before C's 5, but C borrows
    // only in the last round, after the owners: A's job takes the last instance.
    EXPECT_EQ(started, (std::vector<uint64_t>{0, 2, 4})) << "base " << base;
    std::vector<uint64_t> waiting;
    for (const auto& w : d.waits) waiting.push_back(w.job_seq - base);
    EXPECT_EQ(waiting, (std::vector<uint64_t>{3, 5})) << "base " << base;
  }
}

TEST(QuotaShares, ARunningJobOfATypeNoShareOrCapacityNamesCountsAsInUse) {
  // A job still runs on a type the snapshot no longer gives capacity or quota for (its
  // environment changed): it is in use, preemptible by nobody's quota, and blocks nothing else.
  QuotaSnapshot s;
  s.capacity[kType] = 2;
  s.shares = {Share("A", 1), Share("B", 1)};
  s.running = {{1, 0, "ml.old.type", 4, 0, 1}};
  s.running.push_back({2, 1, kType, 1, 0, 2});
  s.shares[0].runnable = Jobs(10, 2);
  auto d = ScheduleQuotaShares(s);
  ASSERT_EQ(d.starts.size(), 1u);  // A's quota, on the one idle instance
  EXPECT_EQ(d.starts[0].job_seq, 10u);
  EXPECT_TRUE(d.preemptions.empty());
  ASSERT_EQ(d.waits.size(), 1u);
}

// Warm pools as idle holds. 4 instances; A and B are guaranteed 2 each. A runs 2 jobs and keeps
// 2 more instances warm (borrowed, beyond its quota).
QuotaSnapshot WarmA(SharingStrategy b_strategy, bool wanted) {
  QuotaSnapshot s;
  s.capacity[kType] = 4;
  s.shares = {Share("A", 2), Share("B", 2, b_strategy)};
  s.running = Running(0, 1, 2);
  s.idle_holds.push_back({900, 0, kType, 2, 0, wanted});
  s.shares[1].runnable = Jobs(10, 2);
  return s;
}

TEST(IdleHolds, AShareReclaimingItsQuotaReleasesTheHoldFirst) {
  // B lends but does not borrow: the hold holds, and B's reclaim takes it, not A's jobs.
  auto d = ScheduleQuotaShares(WarmA(SharingStrategy::kLend, false));
  EXPECT_TRUE(d.starts.empty());
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim_seq, 900u);
}

TEST(IdleHolds, AHoldThatAWaitingJobWouldTakeOverCountsAsFree) {
  auto d = ScheduleQuotaShares(WarmA(SharingStrategy::kLend, true));
  EXPECT_EQ(d.starts.size(), 2u);
  EXPECT_TRUE(d.preemptions.empty());
}

TEST(IdleHolds, ALendingHoldYieldsToAWaitingBorrower) {
  // B may borrow and waits: A's pool (A lends) gives way, so B starts without a preemption.
  auto d = ScheduleQuotaShares(WarmA(SharingStrategy::kLendAndBorrow, false));
  EXPECT_EQ(d.starts.size(), 2u);
  EXPECT_TRUE(d.preemptions.empty());
}

}  // namespace
}  // namespace ty::sched
