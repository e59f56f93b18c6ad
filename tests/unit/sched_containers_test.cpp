// The container-job pass (sched/containers.h): dominant-share order over vCPU, memory and GPU,
// weights, decay, ties, computeReservation and the compute environment order.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "sched/containers.h"
#include "sched/sched.h"

namespace ty::sched {
namespace {

constexpr int64_t kGiB = 1024;

ContainerSnapshot OneEnvironment(ContainerResources capacity) {
  ContainerSnapshot s;
  s.environments.push_back({"ce", true, capacity, {}});
  ContainerQueue q;
  q.name = "q";
  q.environments = {0};
  q.fair_share = true;
  s.queues.push_back(q);
  return s;
}

// `n` jobs of one size, seqs from `first`.
std::vector<ContainerCandidate> Jobs(uint64_t first, int n, ContainerResources size) {
  std::vector<ContainerCandidate> out;
  for (int i = 0; i < n; ++i) out.push_back({first + static_cast<uint64_t>(i), size, 1});
  return out;
}

// Starts per share identifier.
std::map<std::string, int> StartsPerShare(const ContainerSnapshot& s, const std::vector<ContainerStart>& starts) {
  std::map<std::string, int> out;
  for (const auto& st : starts) ++out[s.queues[st.queue].shares[st.share].identifier];
  return out;
}

TEST(ContainerFairShare, ShareOfLargeJobsGetsAsManyVcpusNotAsManyStarts) {
  // 64 vCPUs; a submits 8-vCPU jobs, b 1-vCPU jobs, equal weights, both want more than all.
  auto s = OneEnvironment({64, 256 * kGiB, 0});
  s.queues[0].shares.push_back({"a", 1.0, {}, {}, Jobs(1, 16, {8, 2 * kGiB, 0})});
  s.queues[0].shares.push_back({"b", 1.0, {}, {}, Jobs(100, 100, {1, 2 * kGiB, 0})});
  const auto starts = ScheduleContainers(s);
  // shares (vCPU is dominant for both): a = 32/64 = .5, b = 32/64 = .5; memory a 8/256, b 64/256.
  EXPECT_EQ(StartsPerShare(s, starts), (std::map<std::string, int>{{"a", 4}, {"b", 32}}));
}

TEST(ContainerFairShare, TheDominantResourceIsTheOneAShareUsesMostOf) {
  // 16 vCPUs, 64 GiB. a's jobs are memory-heavy (1 vCPU, 16 GiB: memory share .25 a job), b's
  // vCPU-heavy (4 vCPUs, 1 GiB: vCPU share .25 a job): each gets three, as their dominant shares
  // are equal, though a uses a quarter of the vCPUs b does.
  auto s = OneEnvironment({16, 64 * kGiB, 0});
  s.queues[0].shares.push_back({"a", 1.0, {}, {}, Jobs(1, 8, {1, 16 * kGiB, 0})});
  s.queues[0].shares.push_back({"b", 1.0, {}, {}, Jobs(100, 8, {4, 1 * kGiB, 0})});
  const auto starts = ScheduleContainers(s);
  // shares: a = memory 48/64 = .75; b = vCPU 12/16 = .75. Left: 1 vCPU, 13 GiB, room for neither.
  EXPECT_EQ(StartsPerShare(s, starts), (std::map<std::string, int>{{"a", 3}, {"b", 3}}));
}

TEST(ContainerFairShare, GpusCountWhenTheQueueHasThem) {
  // 64 vCPUs, 8 GPUs: a's 1-vCPU 1-GPU jobs are GPU-dominant (1/8 a job), so b's 1-vCPU jobs get
  // eight starts for each of a's.
  auto s = OneEnvironment({64, 256 * kGiB, 8});
  s.queues[0].shares.push_back({"a", 1.0, {}, {}, Jobs(1, 8, {1, 1 * kGiB, 1})});
  s.queues[0].shares.push_back({"b", 1.0, {}, {}, Jobs(100, 100, {1, 1 * kGiB, 0})});
  const auto starts = ScheduleContainers(s);
  // 64 vCPUs split 8 + 56 would leave a at GPU share 1 and b at .875: a stops at 7 GPUs.
  const auto per = StartsPerShare(s, starts);
  EXPECT_EQ(per.at("a") + per.at("b"), 64);
  EXPECT_EQ(per.at("a"), 7);
  EXPECT_EQ(per.at("b"), 57);
}

TEST(ContainerFairShare, ALowerWeightFactorGetsMore) {
  auto s = OneEnvironment({8, 64 * kGiB, 0});
  s.queues[0].shares.push_back({"a", 1.0, {}, {}, Jobs(1, 10, {1, 1 * kGiB, 0})});
  s.queues[0].shares.push_back({"b", 3.0, {}, {}, Jobs(100, 10, {1, 1 * kGiB, 0})});
  // weighted shares: a = 6/8 x 1 = .75, b = 2/8 x 3 = .75.
  EXPECT_EQ(StartsPerShare(s, ScheduleContainers(s)), (std::map<std::string, int>{{"a", 6}, {"b", 2}}));
}

TEST(ContainerFairShare, PastUsageDecayedOverTheWindowPutsAShareBehind) {
  auto s = OneEnvironment({4, 64 * kGiB, 0});
  // a ran 4 vCPUs for a whole window (600 s): its average over the window counts 4 x 4 x (1 - 1/e).
  s.queues[0].shares.push_back({"a", 1.0, DecayedContainerUsage({}, {4, 4 * kGiB, 0}, 600'000, 600), {}, Jobs(1, 4, {1, 1 * kGiB, 0})});
  s.queues[0].shares.push_back({"b", 1.0, {}, {}, Jobs(100, 4, {1, 1 * kGiB, 0})});
  EXPECT_EQ(StartsPerShare(s, ScheduleContainers(s)), (std::map<std::string, int>{{"b", 4}}));
  // A window later with nothing held, a's history has decayed to 1/e of it: a goes first again
  // only once b holds more than a's remaining history, 4 x 4 x (1 - 1/e)/e = 2.3 vCPUs.
  s.queues[0].shares[0].usage = DecayedContainerUsage(s.queues[0].shares[0].usage, {}, 600'000 * 5, 600);
  EXPECT_EQ(StartsPerShare(s, ScheduleContainers(s)), (std::map<std::string, int>{{"a", 2}, {"b", 2}}));
}

TEST(ContainerFairShare, DecayIsTheServiceSharesDecayPerResource) {
  const ContainerUsage u = DecayedContainerUsage({100, 2000, 3}, {2, 4096, 1}, 30'000, 0);
  EXPECT_DOUBLE_EQ(u.vcpu_seconds, DecayedUsage(100, 2, 30'000, 0));
  EXPECT_DOUBLE_EQ(u.memory_mib_seconds, DecayedUsage(2000, 4096, 30'000, 0));
  EXPECT_DOUBLE_EQ(u.gpu_seconds, DecayedUsage(3, 1, 30'000, 0));
  // Held for ever, usage / tau tends to what is held.
  const ContainerUsage steady = DecayedContainerUsage({}, {2, 0, 0}, 600'000'000, 60);
  EXPECT_NEAR(steady.vcpu_seconds / 60, 2.0, 1e-9);
}

TEST(ContainerFairShare, DominantShareLeavesOutAResourceTheQueueHasNoneOf) {
  // No GPUs in the queue: a GPU held (on an environment since taken out of the order) weighs nothing.
  EXPECT_DOUBLE_EQ(DominantShare({}, {2, 1024, 1}, {}, {8, 8192, 0}, 1.0, 600), 0.25);
  EXPECT_DOUBLE_EQ(DominantShare({}, {2, 1024, 1}, {}, {8, 8192, 0}, 2.0, 600), 0.5);
  // The next job counts for half its size.
  EXPECT_DOUBLE_EQ(DominantShare({}, {}, {4, 0, 0}, {8, 8192, 0}, 1.0, 600), 0.25);
}

TEST(ContainerFairShare, EqualSharesGoByShareName) {
  auto s = OneEnvironment({1, 64 * kGiB, 0});
  s.queues[0].shares.push_back({"zeta", 1.0, {}, {}, Jobs(1, 1, {1, 1 * kGiB, 0})});
  s.queues[0].shares.push_back({"alpha", 1.0, {}, {}, Jobs(2, 1, {1, 1 * kGiB, 0})});
  const auto starts = ScheduleContainers(s);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].seq, 2u);
}

TEST(ContainerFairShare, ComputeReservationHoldsVcpusBackForSharesNotActiveYet) {
  // computeReservation 50 with one active share: 50% of the 10 vCPUs is held back.
  auto s = OneEnvironment({10, 64 * kGiB, 0});
  s.queues[0].compute_reservation = 50;
  s.queues[0].shares.push_back({"a", 1.0, {}, {}, Jobs(1, 10, {1, 1 * kGiB, 0})});
  EXPECT_EQ(ScheduleContainers(s).size(), 5u);
  // Two active shares: 25% (2 vCPUs, rounded down) is held back.
  s.queues[0].shares.push_back({"b", 1.0, {}, {}, Jobs(100, 10, {1, 1 * kGiB, 0})});
  EXPECT_EQ(ScheduleContainers(s).size(), 8u);
}

TEST(ContainerPlacement, FirstEnabledEnvironmentWithRoomInQueueOrder) {
  ContainerSnapshot s;
  s.environments.push_back({"full", true, {4, 16 * kGiB, 0}, {4, 4 * kGiB, 0}});
  s.environments.push_back({"off", false, {64, 64 * kGiB, 0}, {}});
  s.environments.push_back({"small", true, {2, 16 * kGiB, 0}, {}});
  s.environments.push_back({"big", true, {16, 64 * kGiB, 0}, {}});
  ContainerQueue q;
  q.name = "q";
  q.environments = {0, 1, 2, 3};
  q.shares.push_back({"", 1.0, {}, {}, {{1, {2, 1 * kGiB, 0}, 1}, {2, {4, 1 * kGiB, 0}, 1}, {3, {1, 1 * kGiB, 0}, 1}}});
  s.queues.push_back(q);
  const auto starts = ScheduleContainers(s);
  // 1 fills "small"; 2 does not fit it and goes to "big"; 3 fits only "big" now.
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(starts[0], (ContainerStart{1, 0, 0, 2}));
  EXPECT_EQ(starts[1], (ContainerStart{2, 0, 0, 3}));
  EXPECT_EQ(starts[2], (ContainerStart{3, 0, 0, 3}));
}

TEST(ContainerPlacement, AJobTooBigForTheRoomLeftIsPassedOverForSmallerOnes) {
  auto s = OneEnvironment({4, 64 * kGiB, 0});
  s.queues[0].fair_share = false;
  s.queues[0].shares.push_back({"", 1.0, {}, {}, {{1, {3, 1 * kGiB, 0}, 1}, {2, {2, 1 * kGiB, 0}, 1}, {3, {1, 1 * kGiB, 0}, 1}}});
  const auto starts = ScheduleContainers(s);
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0].seq, 1u);
  EXPECT_EQ(starts[1].seq, 3u);
}

TEST(ContainerPlacement, HigherPriorityQueueFirstThenCreationOrderOnASharedEnvironment) {
  ContainerSnapshot s;
  s.environments.push_back({"ce", true, {3, 64 * kGiB, 0}, {}});
  for (auto [name, priority, seq, job] : {std::tuple{"low", 1, 1u, 10u}, {"high-later", 5, 3u, 30u}, {"high", 5, 2u, 20u}}) {
    ContainerQueue q;
    q.name = name;
    q.priority = priority;
    q.seq = seq;
    q.environments = {0};
    q.shares.push_back({"", 1.0, {}, {}, Jobs(job, 2, {1, 1 * kGiB, 0})});
    s.queues.push_back(q);
  }
  std::vector<uint64_t> seqs;
  for (const auto& st : ScheduleContainers(s)) seqs.push_back(st.seq);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{20, 21, 30}));
}

TEST(ContainerPass, AnArrayParentStandsForItsChildrenLeft) {
  auto s = OneEnvironment({8, 64 * kGiB, 0});
  s.queues[0].shares.push_back({"a", 1.0, {}, {}, {{7, {2, 1 * kGiB, 0}, 3}}});
  const auto starts = ScheduleContainers(s);
  ASSERT_EQ(starts.size(), 3u);
  for (const auto& st : starts) EXPECT_EQ(st.seq, 7u);
}

TEST(ContainerPass, SkipGivesTheRoomBackAndPassesOverTheCandidate) {
  // 7 is an array whose next child waits for its predecessor; 8 goes in its place.
  auto s = OneEnvironment({2, 64 * kGiB, 0});
  s.queues[0].shares.push_back({"a", 1.0, {}, {}, {{7, {2, 1 * kGiB, 0}, 5}, {8, {2, 1 * kGiB, 0}, 1}}});
  ContainerPass pass(s);
  auto first = pass.Next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->seq, 7u);
  pass.Skip();
  auto second = pass.Next();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->seq, 8u);
  EXPECT_FALSE(pass.Next());
  // A skip changes the order of shares back too: the skipped start no longer counts as held.
  EXPECT_EQ(pass.snapshot().queues[0].shares[0].held, (ContainerResources{2, 1 * kGiB, 0}));
}

TEST(ContainerPass, ADisabledQueueStartsNothing) {
  auto s = OneEnvironment({8, 64 * kGiB, 0});
  s.queues[0].enabled = false;
  s.queues[0].shares.push_back({"a", 1.0, {}, {}, Jobs(1, 2, {1, 1 * kGiB, 0})});
  EXPECT_TRUE(ScheduleContainers(s).empty());
}

}  // namespace
}  // namespace ty::sched
