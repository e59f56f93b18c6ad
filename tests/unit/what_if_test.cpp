// WhatIf's conversion of a queue's history into the simulator's input (api/what_if.h).
#include "api/what_if.h"

#include <gtest/gtest.h>

#include "control/state.h"
#include "core/config.h"

namespace ty::api::what_if {
namespace {

constexpr EpochMs kStart = 1'700'000'000'000, kEnd = kStart + 86'400'000;

HistoryJob Job(uint64_t seq, const std::string& share, EpochMs submitted, std::vector<std::pair<EpochMs, EpochMs>> held,
               bool finished) {
  HistoryJob j;
  j.seq = seq;
  j.share = share;
  j.submitted = submitted;
  j.held = std::move(held);
  j.finished = finished;
  j.runtime_bound_ms = 3'600'000;
  return j;
}

QueueHistory FairShareHistory() {
  QueueHistory h;
  h.queue = "q";
  h.policy = sim::Policy::kFairShare;
  h.capacity = 4;
  h.decay_seconds = 900;
  h.start = kStart;
  h.end = kEnd;
  h.weights = {{"A", 1.0}, {"B", 2.0}};
  // Finished after 60 s; preempted once (10 s + 30 s held, 5 s of it lost); still waiting; still running.
  h.jobs = {Job(1, "A", kStart + 1'500, {{kStart + 2'000, kStart + 62'000}}, true),
            Job(2, "B", kStart + 3'000, {{kStart + 3'000, kStart + 13'000}, {kStart + 20'000, kStart + 50'000}}, true),
            Job(3, "B", kStart + 4'000, {}, false),
            Job(4, "A", kStart + 5'000, {{kStart + 70'000, kEnd}}, false)};
  h.jobs[1].lost_ms = 5'000;
  h.jobs[1].priority = 7;
  h.jobs[3].instances = 2;
  return h;
}

TEST(WhatIfTest, ReplayKeepsSubmitTimesAndRunsEachJobForWhatItHeld) {
  const QueueHistory h = FairShareHistory();
  const Replay r = ToReplay(h, {});
  ASSERT_EQ(r.trace.size(), 4u);
  // Whole seconds from the window's start, rounded down.
  EXPECT_EQ(r.trace[0].submit_s, 1);
  EXPECT_EQ(r.trace[1].submit_s, 3);
  // Held 60 s; held 40 s of which 5 s were lost; waiting: its runtime bound; running: held so far.
  EXPECT_EQ(r.trace[0].duration_s, 60);
  EXPECT_EQ(r.trace[1].duration_s, 35);
  EXPECT_EQ(r.trace[2].duration_s, 3600);
  EXPECT_EQ(r.trace[3].duration_s, 86'400 - 70);
  EXPECT_EQ(r.trace[3].gpus, 2);
  EXPECT_EQ(r.trace[1].priority, 7);
  EXPECT_EQ(r.trace[1].team, "B");
  EXPECT_EQ(r.cluster.policy, sim::Policy::kFairShare);
  EXPECT_EQ(r.cluster.gpus, 4);
  EXPECT_EQ(r.cluster.decay_seconds, 900);
  EXPECT_EQ(r.cluster.TeamOf("B").share, "B");
  EXPECT_DOUBLE_EQ(r.cluster.shares.at("A").weight_factor, 1.0);
  EXPECT_DOUBLE_EQ(r.cluster.shares.at("B").weight_factor, 2.0);
}

TEST(WhatIfTest, ChangesReplaceOnlyTheWeightsAndCapacityTheyName) {
  const QueueHistory h = FairShareHistory();
  Changes changes;
  changes.weights = {{"B", 0.25}};
  changes.capacity = 9;
  ASSERT_TRUE(CheckChanges(h, changes).ok());
  const Replay r = ToReplay(h, changes);
  EXPECT_EQ(r.cluster.gpus, 9);
  EXPECT_DOUBLE_EQ(r.cluster.shares.at("A").weight_factor, 1.0);
  EXPECT_DOUBLE_EQ(r.cluster.shares.at("B").weight_factor, 0.25);
}

TEST(WhatIfTest, ChangesNamingNoShareOfTheQueueAreRefusedByMember) {
  const QueueHistory h = FairShareHistory();
  Changes unknown;
  unknown.weights = {{"C", 1.0}};
  Status st = CheckChanges(h, unknown);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("ShareWeights.C"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("A, B"), std::string::npos) << st.message();
  Changes quotas;
  quotas.quotas = {{"A", 2}};
  st = CheckChanges(h, quotas);
  EXPECT_NE(st.message().find("QuotaLimits applies to a quota-share queue"), std::string::npos) << st.message();
}

TEST(WhatIfTest, QuotaReplayTakesTheQueueSharesAndTheChangedLimits) {
  QueueHistory h;
  h.queue = "qq";
  h.policy = sim::Policy::kQuota;
  h.capacity = 8;
  h.start = kStart;
  h.end = kEnd;
  h.min_runtime_s = 120;
  h.quotas["x"] = sim::ShareSpec{"x", 1.0, 4, sim::Strategy::kReserve};
  h.quotas["y"] = sim::ShareSpec{"y", 1.0, 4};
  // "gone": a share deleted since its job ran.
  h.jobs = {Job(1, "x", kStart, {{kStart, kStart + 1'000}}, true), Job(2, "gone", kStart, {}, false)};
  Changes changes;
  changes.quotas = {{"y", 6}};
  ASSERT_TRUE(CheckChanges(h, changes).ok());
  const Replay r = ToReplay(h, changes);
  EXPECT_EQ(r.cluster.shares.at("x").gpus, 4);
  EXPECT_EQ(r.cluster.shares.at("x").strategy, sim::Strategy::kReserve);
  EXPECT_EQ(r.cluster.shares.at("y").gpus, 6);
  EXPECT_EQ(r.cluster.shares.at("gone").gpus, 0);
  EXPECT_EQ(r.cluster.min_runtime_s, 120);
  EXPECT_EQ(r.cluster.TeamOf("gone").share, "gone");
  // The replay runs: x's job at once, and gone's on y's idle quota (x's is RESERVE).
  const sim::Result res = sim::Simulate(r.cluster, r.trace);
  EXPECT_EQ(res.jobs[0].start_s, 0);
  EXPECT_EQ(res.jobs[1].start_s, 0);
  Changes bad;
  bad.quotas = {{"z", 1}};
  EXPECT_NE(CheckChanges(h, bad).message().find("QuotaLimits.z: not a quota share of job queue qq"), std::string::npos);
}

TEST(WhatIfTest, ActualFiguresCountWaitsToNowAndHeldCapacityInsideTheWindow) {
  const QueueHistory h = FairShareHistory();
  const FiguresByShare f = ActualFigures(h);
  // A: waited 0.5 s and 65 s; B: 0 s and (still waiting) the whole window less 4 s.
  EXPECT_EQ(f.shares.at("A").waits_s, (std::vector<double>{0.5, 65.0}));
  EXPECT_EQ(f.shares.at("B").waits_s, (std::vector<double>{0.0, 86'396.0}));
  EXPECT_EQ(f.total.jobs, 4);
  EXPECT_DOUBLE_EQ(f.shares.at("A").instance_seconds, 60.0 + 2 * (86'400.0 - 70.0));
  EXPECT_DOUBLE_EQ(f.shares.at("B").instance_seconds, 40.0);
  EXPECT_EQ(Percentile(f.total.waits_s, 50), 0.5);
  EXPECT_EQ(Percentile(f.total.waits_s, 90), 86'396.0);
  EXPECT_EQ(Percentile({}, 50), std::nullopt);
}

// The history read from the controller's state: the window, the jobs that never ran, the limit.
TEST(WhatIfTest, HistoryIsTheWindowsJobsOfTheQueue) {
  control::State s;
  JobQueue q;
  q.name = "q";
  q.kind = QueueKind::kFifo;
  q.service_environment_order = {{1, "env"}};
  s.queues["q"] = q;
  ServiceEnvironment env;
  env.name = "env";
  env.capacity_limits = {{"NUM_INSTANCES", 1000}};
  s.environments["env"] = env;
  auto add = [&](uint64_t seq, EpochMs created, JobStatus status, std::vector<std::pair<std::string, EpochMs>> history) {
    control::ServiceJobState js;
    js.job.seq = seq;
    js.job.queue = "q";
    js.job.instance_type = "ml.m5.large";
    js.job.created_at = created;
    js.job.status = status;
    js.history = std::move(history);
    s.jobs[seq] = js;
    s.by_queue_status["q"][status].insert(seq);
  };
  add(1, kStart - 1, JobStatus::kSucceeded, {{"SCHEDULED", kStart}, {"SUCCEEDED", kStart + 10}});  // before the window
  add(2, kStart + 5, JobStatus::kSucceeded,
      {{"RUNNABLE", kStart + 5}, {"SCHEDULED", kStart + 10}, {"RUNNING", kStart + 20}, {"RUNNABLE", kStart + 30},
       {"SCHEDULED", kStart + 40}, {"SUCCEEDED", kStart + 50}});
  add(3, kStart + 6, JobStatus::kFailed, {{"RUNNABLE", kStart + 6}, {"FAILED", kStart + 9}});  // never ran
  add(4, kStart + 7, JobStatus::kRunning, {{"SCHEDULED", kStart + 8}, {"RUNNING", kStart + 9}});
  const Config config = DefaultConfig();
  StatusOr<QueueHistory> h = ReadQueueHistory(s, config, "q", kStart, kEnd, 10);
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->jobs.size(), 2u);
  EXPECT_EQ(h->never_ran, 1);
  EXPECT_EQ(h->jobs[0].held, (std::vector<std::pair<EpochMs, EpochMs>>{{kStart + 10, kStart + 30}, {kStart + 40, kStart + 50}}));
  EXPECT_EQ(h->jobs[1].held, (std::vector<std::pair<EpochMs, EpochMs>>{{kStart + 8, kEnd}}));
  EXPECT_FALSE(h->jobs[1].finished);
  // The environment's 1000 instances, within what the host has of the jobs' one type.
  EXPECT_EQ(h->capacity, std::min<int64_t>(1000, config.CapacityOf("ml.m5.large")));
  EXPECT_EQ(h->instance_types, std::vector<std::string>{"ml.m5.large"});

  // The limit counts the window's jobs, those that never ran too.
  h = ReadQueueHistory(s, config, "q", kStart, kEnd, 2);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("holds 3 service jobs"), std::string::npos) << h.status().message();
  EXPECT_NE(h.status().message().find("what_if_max_jobs (2)"), std::string::npos) << h.status().message();
  EXPECT_EQ(ReadQueueHistory(s, config, "nope", kStart, kEnd, 10).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace ty::api::what_if
