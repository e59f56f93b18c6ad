// trainyard simulate: the virtual-time replay through the production scheduler.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "sim/sim.h"

namespace ty::sim {
namespace {

namespace fs = std::filesystem;

ClusterSpec Cluster(const std::string& toml) {
  auto c = ParseCluster(toml, "test.toml");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : ClusterSpec{};
}

TraceJob J(const std::string& id, int64_t submit, int64_t duration, int64_t gpus, const std::string& team) {
  return {id, submit, duration, gpus, team};
}

std::vector<TraceJob> Excerpt() {
  auto t = ReadTrace(std::string(TY_TEST_DATA_DIR) + "/philly_head.csv", 0, -1);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *t : std::vector<TraceJob>{};
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every completed job held its GPUs for its trace duration plus what preemptions cost it (work
// since the last checkpoint, restart costs); a job never holds GPUs without accounting for them;
// and what is held never exceeds the capacity at any event.
void ExpectConservation(const ClusterSpec& c, const std::vector<TraceJob>& trace, const Result& r) {
  int64_t served = 0, demand = 0, lost = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const JobResult& j = r.jobs[i];
    ASSERT_GE(j.end_s, 0) << trace[i].id << " never completed";
    EXPECT_EQ(j.held_s, trace[i].duration_s + j.lost_work_s + j.restart_s) << trace[i].id;
    EXPECT_GE(j.start_s, trace[i].submit_s) << trace[i].id;
    EXPECT_GE(j.end_s, j.start_s + trace[i].duration_s) << trace[i].id;
    served += j.held_s * trace[i].gpus;
    demand += trace[i].duration_s * trace[i].gpus;
    lost += (j.lost_work_s + j.restart_s) * trace[i].gpus;
  }
  EXPECT_EQ(served, demand + lost);
  // The integral of the timeline is what the jobs held.
  int64_t integral = 0;
  Timeline::Cursor cursor(r.timeline, r.teams.size());
  while (cursor.Next()) {
    const Sample& s = cursor.sample();
    ASSERT_LE(s.used, c.gpus) << "at t=" << s.t_s;
    ASSERT_GE(s.used, 0);
    EXPECT_EQ(s.used, std::accumulate(s.held.begin(), s.held.end(), int64_t{0}));
    if (cursor.next() < r.timeline.size()) integral += s.used * (r.timeline.t_s(cursor.next()) - s.t_s);
  }
  EXPECT_EQ(integral, served);
  ASSERT_FALSE(r.timeline.empty());
  EXPECT_EQ(r.timeline.used(r.timeline.size() - 1), 0);
}

TEST(SimTest, FifoStartsJobsInSubmitOrderAsCapacityFrees) {
  ClusterSpec c = Cluster("gpus = 2\npolicy = \"fifo\"\n");
  std::vector<TraceJob> trace = {J("a", 0, 100, 2, "x"), J("b", 10, 50, 1, "y"), J("c", 20, 30, 1, "y"),
                                 J("d", 30, 10, 2, "x")};
  Result r = Simulate(c, trace);
  // a: 0-100; b and c start when a ends (100-150, 100-130); d needs both GPUs: 150-160.
  EXPECT_EQ(r.jobs[0].start_s, 0);
  EXPECT_EQ(r.jobs[1].start_s, 100);
  EXPECT_EQ(r.jobs[2].start_s, 100);
  EXPECT_EQ(r.jobs[3].start_s, 150);
  EXPECT_EQ(r.jobs[3].end_s, 160);
  ExpectConservation(c, trace, r);
}

TEST(SimTest, FifoHeadBlocksWithoutRuntimeBoundsAndBackfillsWithExactOnes) {
  // 2 GPUs: a holds 1 until 100; b (2 GPUs) waits at the head; c (1 GPU, 10 s) fits now.
  std::vector<TraceJob> trace = {J("a", 0, 100, 1, "x"), J("b", 1, 10, 2, "x"), J("c", 2, 10, 1, "x")};
  Result strict = Simulate(Cluster("gpus = 2\npolicy = \"fifo\"\n"), trace);
  EXPECT_EQ(strict.jobs[2].start_s, 110);  // behind b
  Result easy = Simulate(Cluster("gpus = 2\npolicy = \"fifo\"\nruntime_bound = \"exact\"\n"), trace);
  EXPECT_EQ(easy.jobs[2].start_s, 2);  // ends at 12, before b can start at 100
  EXPECT_EQ(easy.jobs[1].start_s, 100);
}

TEST(SimTest, QuotaReclaimPreemptsBorrowersWhoLoseWorkSinceTheirCheckpoint) {
  ClusterSpec c = Cluster(R"(
gpus = 4
policy = "quota"
checkpoint_interval_s = 30
restart_cost_s = 10
[shares.a]
gpus = 2
[shares.b]
gpus = 2
[defaults]
share = "b"
[teams]
ta = { share = "a" }
)");
  // b runs 4 jobs at 0 (2 of them borrowed from a); a's 2 jobs at 100 reclaim them.
  std::vector<TraceJob> trace = {J("b1", 0, 1000, 1, "tb"), J("b2", 0, 1000, 1, "tb"), J("b3", 0, 1000, 1, "tb"),
                                 J("b4", 0, 1000, 1, "tb"), J("a1", 100, 500, 1, "ta"), J("a2", 100, 500, 1, "ta")};
  Result r = Simulate(c, trace);
  EXPECT_EQ(r.jobs[4].start_s, 100);
  EXPECT_EQ(r.jobs[5].start_s, 100);
  int64_t preempted = 0;
  for (int i = 0; i < 4; ++i) {
    if (r.jobs[i].preemptions == 0) continue;
    ++preempted;
    // 100 s of work, checkpoints at 30, 60, 90: 10 s lost; the restart costs 10 s.
    EXPECT_EQ(r.jobs[i].lost_work_s, 10);
    EXPECT_EQ(r.jobs[i].restart_s, 10);
    EXPECT_EQ(r.jobs[i].held_s, 1000 + 10 + 10);
  }
  EXPECT_EQ(preempted, 2);
  ExpectConservation(c, trace, r);
}

// The spans each job held its GPUs: one per attempt, the first cut by the preemption.
TEST(SimTest, HeldSpansFollowEachAttemptOfEveryJob) {
  ClusterSpec c = Cluster(R"(
gpus = 2
policy = "quota"
checkpoint_interval_s = 30
restart_cost_s = 10
[shares.a]
gpus = 1
[shares.b]
gpus = 1
[defaults]
share = "b"
[teams]
ta = { share = "a" }
)");
  // b borrows a's GPU at 0; a's job at 100 reclaims it.
  std::vector<TraceJob> trace = {J("b1", 0, 1000, 1, "tb"), J("b2", 0, 1000, 1, "tb"), J("a1", 100, 500, 1, "ta")};
  Result r = Simulate(c, trace);
  auto spans = HeldSpans(r);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[2], (std::vector<std::pair<int64_t, int64_t>>{{100, 600}}));
  // The borrower lost 10 s after its checkpoint at 90; its second attempt pays the 10 s restart
  // cost and runs the 910 s left, once a1 ends (or b1 does) at 600 or 1000.
  const size_t victim = r.jobs[0].preemptions ? 0 : 1, other = 1 - victim;
  EXPECT_EQ(spans[other], (std::vector<std::pair<int64_t, int64_t>>{{0, 1000}}));
  ASSERT_EQ(spans[victim].size(), 2u);
  EXPECT_EQ(spans[victim][0], (std::pair<int64_t, int64_t>{0, 100}));
  EXPECT_EQ(spans[victim][1], (std::pair<int64_t, int64_t>{600, 600 + 920}));
  for (size_t i = 0; i < spans.size(); ++i) {
    int64_t held = 0;
    for (const auto& [a, b] : spans[i]) held += b - a;
    EXPECT_EQ(held, r.jobs[i].held_s) << trace[i].id;
  }
}

const char* kQuotaCluster = R"(
gpus = 64
policy = "quota"
checkpoint_interval_s = 1800
restart_cost_s = 120
[shares.big]
gpus = 32
in_share_preemption = true
[shares.mid]
gpus = 16
[shares.rest]
gpus = 16
strategy = "LEND"
[defaults]
share = "rest"
[teams]
6214e9 = { share = "big", priority = 1 }
11cb48 = { share = "big", priority = 5 }
103959 = { share = "mid" }
)";

TEST(SimTest, PhillyExcerptConservesGpuTimeUnderEveryPolicy) {
  const std::vector<TraceJob> trace = Excerpt();
  ASSERT_EQ(trace.size(), 1500u);
  for (const char* toml : {"gpus = 64\npolicy = \"fifo\"\n", "gpus = 64\npolicy = \"fifo\"\nruntime_bound = \"exact\"\n",
                           "gpus = 64\npolicy = \"fair_share\"\n[fair_share]\nshare_decay_seconds = 3600\n"
                           "[shares.6214e9]\nweight_factor = 2\n",
                           kQuotaCluster}) {
    SCOPED_TRACE(toml);
    ClusterSpec c = Cluster(toml);
    ExpectConservation(c, trace, Simulate(c, trace));
  }
}

TEST(SimTest, QuotaSharesPreemptOnThePhillyExcerpt) {
  const std::vector<TraceJob> trace = Excerpt();
  ClusterSpec c = Cluster(kQuotaCluster);
  Result r = Simulate(c, trace);
  int64_t preemptions = 0, lost = 0;
  for (const auto& j : r.jobs) preemptions += j.preemptions, lost += j.lost_work_s + j.restart_s;
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(lost, 0);
}

TEST(SimTest, SkippedPassesAndOfferLimitsChangeNoDecision) {
  // A quota pass that could decide nothing is skipped, and a pass is offered only the jobs that
  // could start or preempt in it; running every pass with every job must give the same schedule.
  const std::vector<TraceJob> trace = Excerpt();
  ClusterSpec limited = Cluster(kQuotaCluster);
  ClusterSpec every = limited;
  every.exhaustive = true;
  Result a = Simulate(limited, trace), b = Simulate(every, trace);
  for (size_t i = 0; i < trace.size(); ++i) {
    EXPECT_EQ(a.jobs[i].start_s, b.jobs[i].start_s) << trace[i].id;
    EXPECT_EQ(a.jobs[i].end_s, b.jobs[i].end_s) << trace[i].id;
    EXPECT_EQ(a.jobs[i].preemptions, b.jobs[i].preemptions) << trace[i].id;
  }
  EXPECT_LT(a.passes, b.passes);
}

// Two GPUs, one per share: share a runs two jobs (one on b's lent GPU), and b's job at `reclaim_s`
// takes one of them back. Returns the index of the preempted job (-1: none).
int64_t ReclaimVictim(const std::string& knobs, int64_t second_start_s, int64_t reclaim_s) {
  ClusterSpec c = Cluster("gpus = 2\npolicy = \"quota\"\n" + knobs +
                          "[shares.a]\ngpus = 1\n[shares.b]\ngpus = 1\n[defaults]\nshare = \"a\"\n"
                          "[teams]\nb = { share = \"b\" }\n");
  const std::vector<TraceJob> trace = {J("a1", 0, 1000, 1, "a"), J("a2", second_start_s, 1000, 1, "a"),
                                       J("b1", reclaim_s, 1000, 1, "b")};
  const Result r = Simulate(c, trace);
  int64_t victim = -1;
  for (const Decision& d : r.decisions)
    if (d.kind == Decision::kPreempt) {
      EXPECT_EQ(victim, -1) << "one preemption at most";
      EXPECT_EQ(d.t_s, reclaim_s);
      victim = d.job;
    }
  return victim;
}

TEST(SimTest, VictimsAreRankedByWorkLostSinceTheirLastCheckpoint) {
  // At 110 s a1 (started at 0) checkpointed at 100 s and loses 10 s; a2 (started at 30 s, its first
  // checkpoint due at 130 s) loses 80 s: a1 is the victim although a2 started more recently. The
  // checkpoint is taken between passes, so the pass at 110 s must see it.
  EXPECT_EQ(ReclaimVictim("checkpoint_interval_s = 100\n", 30, 110), 0);
  // Without checkpoints a1 would lose more: a2 goes.
  EXPECT_EQ(ReclaimVictim("", 30, 110), 1);
}

TEST(SimTest, AJobBecomesPreemptibleAfterItsMinimumRuntime) {
  // At 100 s a1 ran 100 s and may be preempted; a2 ran 70 s of its 90: a1 goes although a2 loses
  // less work. Before a1 ran 90 s neither may go, and b1 waits for a completion.
  EXPECT_EQ(ReclaimVictim("min_runtime_s = 90\n", 30, 100), 0);
  EXPECT_EQ(ReclaimVictim("", 30, 100), 1);
  EXPECT_EQ(ReclaimVictim("min_runtime_s = 90\n", 30, 80), -1);
}

TEST(SimTest, SameInputsGiveByteIdenticalOutputs) {
  const std::vector<TraceJob> trace = Excerpt();
  ClusterSpec c = Cluster(kQuotaCluster);
  const fs::path base = fs::temp_directory_path() / ("ty_sim_test_" + std::to_string(::getpid()));
  ASSERT_TRUE(WriteOutputs(c, trace, Simulate(c, trace), (base / "one").string()).ok());
  ASSERT_TRUE(WriteOutputs(c, trace, Simulate(c, trace), (base / "two").string()).ok());
  for (const char* f : {"summary.json", "jobs.csv", "utilization.svg", "shares.svg", "waits.svg"}) {
    std::string a = Slurp(base / "one" / f), b = Slurp(base / "two" / f);
    EXPECT_FALSE(a.empty()) << f;
    EXPECT_EQ(a, b) << f << " differs between two runs";
  }
  const std::string summary = Slurp(base / "one" / "summary.json");
  for (const char* key : {"\"jobs\": 1500", "\"completed\": 1500", "\"makespan_s\"", "\"gpu_utilization\"",
                          "\"gpu_hours_received\"", "\"gpu_hours_entitled\"", "\"gpu_hours_lost\"", "\"p99\""})
    EXPECT_NE(summary.find(key), std::string::npos) << key;
  fs::remove_all(base);
}

TEST(SimTest, InvalidClusterFilesNameTheKey) {
  struct Case {
    const char* toml;
    const char* says;
  } cases[] = {
      {"policy = \"fifo\"\n", "gpus is required"},
      {"gpus = 0\npolicy = \"fifo\"\n", "gpus must be between 1"},
      {"gpus = 8\npolicy = \"drf\"\n", "policy must be one of fifo, fair_share, quota"},
      {"gpus = 8\npolicy = \"fifo\"\nbogus = 1\n", "unknown key 'bogus'"},
      {"gpus = 8\npolicy = \"quota\"\n[shares.a]\ngpus = 8\nstrategy = \"SHARE\"\n[defaults]\nshare = \"a\"\n",
       "shares.a.strategy must be one of RESERVE, LEND, LEND_AND_BORROW"},
      {"gpus = 8\npolicy = \"quota\"\n[shares.a]\ngpus = 8\n", "defaults.share is required"},
      {"gpus = 8\npolicy = \"quota\"\n[shares.a]\ngpus = 8\n[defaults]\nshare = \"a\"\n[teams]\nx = { share = \"b\" }\n",
       "teams.x.share names no share"},
      {"gpus = 8\npolicy = \"quota\"\n[shares.a]\nstrategy = \"LEND\"\n[defaults]\nshare = \"a\"\n", "shares.a.gpus is required"},
      {"gpus = 8\npolicy = \"fair_share\"\n[shares.a]\nweight_factor = 0\n", "shares.a.weight_factor must be between"},
      {"gpus = 8\npolicy = \"fair_share\"\n[teams]\nx = { priority = 10000 }\n", "teams.x.priority must be between 0 and 9999"},
      {"gpus = 8\npolicy = \"fifo\"\ncheckpoint_interval_s = \"1h\"\n", "checkpoint_interval_s must be an integer"},
      {"gpus = 8\npolicy = \"fifo\"\n[fair_share]\nshare_decay_seconds = 60\n", "fair_share applies only with policy"},
      {"gpus = = 8\n", "test.toml:1"},
  };
  for (const Case& k : cases) {
    auto c = ParseCluster(k.toml, "test.toml");
    ASSERT_FALSE(c.ok()) << k.toml;
    EXPECT_NE(c.status().message().find(k.says), std::string::npos) << c.status().message();
  }
}

TEST(SimTest, TraceWithoutTheNormalizedHeaderIsRejected) {
  const fs::path p = fs::temp_directory_path() / ("ty_sim_bad_" + std::to_string(::getpid()) + ".csv");
  std::ofstream(p) << "id,submit,duration\n1,2,3\n";
  auto t = ReadTrace(p.string(), 0, -1);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(":1: the header must be"), std::string::npos) << t.status().message();
  fs::remove(p);
}

TEST(SimTest, TimeWindowKeepsJobsSubmittedInside) {
  const fs::path p = fs::temp_directory_path() / ("ty_sim_win_" + std::to_string(::getpid()) + ".csv");
  std::ofstream(p) << "job_id,submit_time_s,duration_s,num_gpus,user,team,status\n"
                      "a,0,5,1,,t,\nb,10,5,1,,,\nc,20,5,1,,t,\n";
  auto t = ReadTrace(p.string(), 10, 20);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0].id, "b");
  EXPECT_EQ((*t)[0].team, "(none)");
  fs::remove(p);
}

TEST(SimTest, ScenarioChecksExpectationsAndNamesTheFailingLine) {
  const std::string head = "gpus = 2\npolicy = \"fifo\"\n\n";
  auto ok = RunScenario(head +
                            "at 0 submit a gpus=2 duration=10\n"
                            "at 0 submit b duration=5  # a comment\n"
                            "at 0 expect start a\n"
                            "at 0 expect wait b\n"
                            "at 10 expect end a\n"
                            "at 10 expect start b\n"
                            "at 12 expect run b\n"
                            "at 12 expect held default=1\n",
                        "s.scenario");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->expectations, 6);
  EXPECT_TRUE(ok->failures.empty()) << ok->failures[0];
  EXPECT_EQ(ok->log, "t=0 start a\nt=10 end a\nt=10 start b\nt=15 end b\n");

  auto bad = RunScenario(head + "at 0 submit a duration=10\nat 0 submit b gpus=2 duration=10\nat 0 expect start b\n",
                         "s.scenario");
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  ASSERT_EQ(bad->failures.size(), 1u);
  EXPECT_EQ(bad->failures[0],
            "s.scenario:6: expected b to start at 0, but it was waiting then (its decisions: start at 10, end at 20)");

  struct Case {
    std::string body, says;
  };
  const Case cases[] = {
      {"at 0 submit a\n", "s.scenario:4: submit a needs duration=S"},
      {"at 0 submit a duration=1 gpu=2\n", "s.scenario:4: bad 'gpu=2'"},
      {"at 5 submit a duration=1\nat 4 expect run a\n", "s.scenario:5: time 4 is before"},
      {"at 0 expect run zz\n", "s.scenario:4: no job zz is submitted"},
      {"at 0 expect started a\n", "s.scenario:4: expect started: must be one of"},
      {"at x submit a duration=1\n", "s.scenario:4: expected 'at T submit"},
  };
  for (const Case& k : cases) {
    auto r = RunScenario(head + k.body, "s.scenario");
    ASSERT_FALSE(r.ok()) << k.body;
    EXPECT_NE(r.status().message().find(k.says), std::string::npos) << r.status().message();
  }
  auto toml = RunScenario("gpus = 2\npolicy = \"lifo\"\nat 0 submit a duration=1\n", "s.scenario");
  ASSERT_FALSE(toml.ok());
  EXPECT_NE(toml.status().message().find("s.scenario: policy must be one of"), std::string::npos);
}

// A file says which runners apply; what only the controller models is refused where the
// simulator would run it (it would otherwise be ignored, and the expectation checked on a
// different story).
TEST(SimTest, ScenarioRunnersKeepControllerOptionsOutOfTheSimulator) {
  const std::string head = "gpus = 2\npolicy = \"fifo\"\n";
  auto both = ParseScenario(head + "at 0 submit a duration=1\n", "s.scenario");
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_TRUE(both->sim && both->controller);

  const std::string ctl = "runners = \"controller\"\ninstance_types = \"ml.a=1 ml.b=2\"\nqueues = \"x=fair_share:5\"\n" + head;
  auto c = ParseScenario(ctl + "at 0 train t type=ml.b ladder=ml.a,ml.b keep_alive=60 duration=1\n"
                               "at 0 expect on ml.b t\n",
                         "s.scenario");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->sim);
  ASSERT_EQ(c->instance_types.size(), 2u);
  EXPECT_EQ(c->instance_types[1], (std::pair<std::string, int64_t>{"ml.b", 2}));
  ASSERT_EQ(c->queues.size(), 1u);
  EXPECT_EQ(c->queues[0].policy, Policy::kFairShare);
  EXPECT_EQ(c->queues[0].priority, 5);
  ASSERT_EQ(c->jobs.size(), 1u);
  EXPECT_TRUE(c->jobs[0].training);
  EXPECT_EQ(c->jobs[0].ladder, "ml.a ml.b");
  EXPECT_EQ(c->expects[0].type, "ml.b");
  auto sim_run = RunScenario(ctl + "at 0 submit a duration=1\n", "s.scenario");
  ASSERT_FALSE(sim_run.ok());
  EXPECT_NE(sim_run.status().message().find("leaves out the simulator"), std::string::npos);

  const char* refused[] = {"at 0 submit a queue=x duration=1\n", "at 0 train a duration=1\n",
                           "at 0 submit a duration=1\nat 0 expect warm a\n"};
  for (const char* body : refused) {
    auto r = ParseScenario(head + body, "s.scenario");
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find("runners = \"controller\""), std::string::npos) << r.status().message();
  }
  auto checkpoints = ParseScenario(head + "checkpoint_interval_s = 100\nat 0 submit a duration=1\n", "s.scenario");
  ASSERT_FALSE(checkpoints.ok());
  EXPECT_NE(checkpoints.status().message().find("runners = \"sim\""), std::string::npos);
  EXPECT_FALSE(ParseScenario("runners = \"server\"\n" + head + "at 0 submit a duration=1\n", "s.scenario").ok());
}

}  // namespace
}  // namespace ty::sim
