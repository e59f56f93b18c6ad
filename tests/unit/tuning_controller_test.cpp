// Tuning jobs in the controller, stepped turn by turn on in-memory ports with a manual clock
// (tests/testing/): trials start up to MaxParallelTrainingJobs, each stored with its training job;
// a restart continues with the same trials and suggestions; Stop stops the running trials.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "api/decode.h"
#include "control/controller.h"
#include "core/training_spec_json.h"
#include "testing/controller_fixture.h"
#include "testing/fakes.h"

namespace ty::control {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using exec::Phase;
using testing::FakeExecutor;
using testing::MemData;

json TuningRequest(const std::string& name, int max_jobs, int parallel) {
  return {{"HyperParameterTuningJobName", name},
          {"HyperParameterTuningJobConfig",
           {{"Strategy", "Random"},
            {"RandomSeed", 11},
            {"HyperParameterTuningJobObjective", {{"Type", "Minimize"}, {"MetricName", "loss"}}},
            {"ResourceLimits", {{"MaxNumberOfTrainingJobs", max_jobs}, {"MaxParallelTrainingJobs", parallel}}},
            {"ParameterRanges",
             {{"ContinuousParameterRanges", {{{"Name", "lr"}, {"MinValue", "0.001"}, {"MaxValue", "1"}, {"ScalingType", "Logarithmic"}}}}}}}},
          {"TrainingJobDefinition",
           {{"StaticHyperParameters", {{"sagemaker_program", "train.py"}}},
            {"AlgorithmSpecification",
             {{"TrainingImage", "x"}, {"TrainingInputMode", "File"}, {"MetricDefinitions", {{{"Name", "loss"}, {"Regex", "loss=([0-9.]+)"}}}}}},
            {"RoleArn", "arn:aws:iam::000000000000:role/R"},
            {"OutputDataConfig", {{"S3OutputPath", "s3://bucket/out"}}},
            {"ResourceConfig", {{"InstanceType", "ml.m5.large"}, {"InstanceCount", 1}, {"VolumeSizeInGB", 1}}},
            {"StoppingCondition", {{"MaxRuntimeInSeconds", 3600}}}}}};
}

class TuningControllerTest : public testing::ControllerFixture {
 protected:
  TuningControllerTest() : ControllerFixture("tuning", 1'700'000'000'000) { logs_in_data_dir_ = true; }
  StatusOr<TuningJob> Create(const json& req) {
    auto cmd = api::DecodeCreateHyperParameterTuningJob(req, {c_->config(), c_->sandbox()}, 0);
    if (!cmd.ok()) return cmd.status();
    return c_->CreateTuningJob(*cmd);
  }
  TuningJob Tuning(const std::string& name) {
    return c_->Read([&](const State& s) { return *s.FindTuningJob(name); });
  }
  void Exit(const std::string& attempt, bool stopped = false) {
    exec::AttemptEvent e;
    e.attempt_id = attempt;
    e.phase = Phase::kExited;
    e.at = clock_.now_ms();
    e.stopped = stopped;
    exec_->Push(e);
    c_->Step();
  }

  // The script prints `values` (one objective value an epoch) and the controller's next metric
  // read (every half second of its clock) takes them.
  void Report(const std::string& job, const std::vector<double>& values) {
    std::ofstream log(exec_->LogPath(job, 1), std::ios::app);
    for (double v : values) log << clock_.now_ms() << " loss=" << v << "\n";  // the supervisor's log: time, then text
    log.close();
    clock_.advance_ms(500);
    c_->Step();
  }
  bool StopAsked(const std::string& job) const {
    const std::vector<std::string> stopped = exec_->stopped();
    return std::find(stopped.begin(), stopped.end(), job) != stopped.end();
  }
  // The trial's request as DescribeTrainingJob echoes it.
  json TrainingRequest(const std::string& job) {
    return c_->Read([&](const State& s) {
      const TrainingJob* tj = s.FindTrainingJob(job);
      return EchoTrainingRequest(json::parse(tj->request_json), tj->spec);
    });
  }

};

TEST_F(TuningControllerTest, TrialsStartUpToMaxParallelAndTheNextWhenOneEnds) {
  ASSERT_TRUE(Create(TuningRequest("t", 3, 2)).ok());
  TuningJob t = Tuning("t");
  ASSERT_EQ(t.trials.size(), 2u);  // created and launched in the creating turn
  EXPECT_EQ(exec_->started(), (std::vector<std::string>{t.trials[0].training_job, t.trials[1].training_job}));
  EXPECT_EQ(t.trials[0].training_job.substr(0, 6), "t-001-");
  Exit(t.trials[0].training_job);
  t = Tuning("t");
  ASSERT_EQ(t.trials.size(), 3u);
  Exit(t.trials[1].training_job);
  EXPECT_EQ(Tuning("t").status, TuningJobStatus::kInProgress);  // the third still runs
  Exit(t.trials[2].training_job);
  t = Tuning("t");
  EXPECT_EQ(t.trials.size(), 3u);
  EXPECT_EQ(t.status, TuningJobStatus::kCompleted);
  const TuningCounters n = c_->Read([&](const State& s) { return CountTrials(TrialsOf(t, s)); });
  EXPECT_EQ(n.completed, 3);
  EXPECT_EQ(n.objective_failed, 3);  // the fake executor logs no metric: no objective
}

TEST_F(TuningControllerTest, RestartContinuesWithTheSameTrialsAndSuggestions) {
  ASSERT_TRUE(Create(TuningRequest("t", 3, 1)).ok());
  const TuningJob before = Tuning("t");
  ASSERT_EQ(before.trials.size(), 1u);
  Open();  // kill -9: the trial's record was stored with its training job
  c_->Step();
  TuningJob t = Tuning("t");
  ASSERT_EQ(t.trials.size(), 1u);
  EXPECT_EQ(t.trials[0].assignment, before.trials[0].assignment);
  Exit(t.trials[0].training_job);
  t = Tuning("t");
  ASSERT_EQ(t.trials.size(), 2u);
  // What a search that never crashed suggests for the second trial.
  auto search = tune::Search::Create(t.search);
  ASSERT_TRUE(search.ok());
  std::vector<tune::Trial> first = c_->Read([&](const State& s) { return TrialsOf(t, s); });
  first.pop_back();
  auto next = (*search)->Next(first);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(t.trials[1].assignment, next->assignment);
  EXPECT_EQ(c_->Read([](const State& s) { return s.training_jobs.size(); }), 2u);
}

TEST_F(TuningControllerTest, StopStopsRunningTrialsThenEndsStopped) {
  ASSERT_TRUE(Create(TuningRequest("t", 4, 2)).ok());
  ASSERT_TRUE(c_->StopTuningJob("T").ok());  // names are case-insensitive
  TuningJob t = Tuning("t");
  EXPECT_EQ(t.status, TuningJobStatus::kStopping);
  EXPECT_EQ(exec_->stopped().size(), 2u);
  Exit(t.trials[0].training_job, true);
  EXPECT_EQ(Tuning("t").status, TuningJobStatus::kStopping);
  Exit(t.trials[1].training_job, true);
  t = Tuning("t");
  EXPECT_EQ(t.status, TuningJobStatus::kStopped);
  EXPECT_EQ(t.trials.size(), 2u);  // nothing started after the stop
  EXPECT_EQ(c_->StopTuningJob("t").code(), Code::kFailedPrecondition);
}

TEST_F(TuningControllerTest, RefusalsChangeNothing) {
  ASSERT_TRUE(Create(TuningRequest("t", 1, 1)).ok());
  EXPECT_EQ(Create(TuningRequest("T", 1, 1)).status().code(), Code::kAlreadyExists);
  json bad = TuningRequest("u", 1, 1);
  bad["WarmStartConfig"] = {{"ParentHyperParameterTuningJobs", {{{"HyperParameterTuningJobName", "t"}}}},
                            {"WarmStartType", "TransferLearning"}};
  EXPECT_EQ(Create(bad).status().code(), Code::kInvalidArgument);  // the parent is still running
  EXPECT_EQ(c_->Read([](const State& s) { return s.tuning_jobs.size(); }), 1u);
  EXPECT_EQ(c_->Read([](const State& s) { return s.training_jobs.size(); }), 1u);
  EXPECT_EQ(c_->DeleteTuningJob("t").code(), Code::kAlreadyExists);  // live: ResourceInUse
}

TEST_F(TuningControllerTest, ResourceLimitsAboveSageMakersCapsAreRefusedAndStoreNothing) {
  // The review's request: MaxNumberOfTrainingJobs 10^9, MaxParallelTrainingJobs 10^6.
  auto huge = Create(TuningRequest("huge", 1'000'000'000, 1'000'000));
  ASSERT_EQ(huge.status().code(), Code::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("ResourceLimits.MaxNumberOfTrainingJobs must be between 1 and 750"),
            std::string::npos) << huge.status().message();
  auto parallel = Create(TuningRequest("parallel", 750, 101));
  ASSERT_EQ(parallel.status().code(), Code::kInvalidArgument);
  EXPECT_NE(parallel.status().message().find("ResourceLimits.MaxParallelTrainingJobs must be between 1 and 100"),
            std::string::npos) << parallel.status().message();
  json grid = TuningRequest("grid", 1, 1);
  grid["HyperParameterTuningJobConfig"]["Strategy"] = "Grid";
  grid["HyperParameterTuningJobConfig"]["ResourceLimits"].erase("MaxNumberOfTrainingJobs");
  json values = json::array();
  for (int v = 0; v < 30; ++v) values.push_back(std::to_string(v));
  grid["HyperParameterTuningJobConfig"]["ParameterRanges"] = {
      {"CategoricalParameterRanges", {{{"Name", "a"}, {"Values", values}}, {{"Name", "b"}, {"Values", values}}}}};
  auto too_big = Create(grid);  // 900 combinations, and no MaxNumberOfTrainingJobs to stop at 750
  ASSERT_EQ(too_big.status().code(), Code::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("the grid's 900 combinations"), std::string::npos) << too_big.status().message();
  EXPECT_EQ(c_->Read([](const State& s) { return s.tuning_jobs.size() + s.training_jobs.size(); }), 0u);
}

// The largest tuning job SageMaker allows starts kTrialStartsPerTurn (8) trials a turn, not 100 in
// the creating turn: the turn's work does not grow with MaxParallelTrainingJobs.
TEST_F(TuningControllerTest, AMaximalTuningJobStartsABoundedNumberOfTrialsEachTurn) {
  ASSERT_TRUE(Create(TuningRequest("big", 750, 100)).ok());
  EXPECT_EQ(Tuning("big").trials.size(), 8u);  // the creating turn
  for (size_t turn = 1; turn <= 13; ++turn) {
    c_->Step();  // the clock does not move: these are the turns that follow at once
    // trials: 16, 24, ..., 96, then the 100th (MaxParallelTrainingJobs)
    EXPECT_EQ(Tuning("big").trials.size(), std::min<size_t>(8 * (turn + 1), 100)) << "turn " << turn;
  }
  EXPECT_EQ(c_->Read([](const State& s) { return s.training_jobs.size(); }), 100u);
}

TEST_F(TuningControllerTest, TrialStartsGoRoundTheTuningJobsThatWaitForThem) {
  ASSERT_TRUE(Create(TuningRequest("a", 750, 100)).ok());
  ASSERT_TRUE(Create(TuningRequest("b", 750, 100)).ok());  // its creating turn's 8 are b's
  // trials: a 8, b 8; then a turn each, in turn
  EXPECT_EQ(Tuning("a").trials.size(), 8u);
  EXPECT_EQ(Tuning("b").trials.size(), 8u);
  c_->Step();
  EXPECT_EQ(Tuning("a").trials.size(), 16u);
  EXPECT_EQ(Tuning("b").trials.size(), 8u);
  c_->Step();
  EXPECT_EQ(Tuning("a").trials.size(), 16u);
  EXPECT_EQ(Tuning("b").trials.size(), 16u);
}

// Hyperband, MinResource 1, MaxResource 9: rungs 1, 3, 9; fresh trials take brackets 0 1 0 2 0 1 0
// 2 0 1 0 ... (bracket 0 starts at rung 1, bracket 1 at 3, bracket 2 at 9). One trial at a time.
json HyperbandRequest(const std::string& name) {
  json req = TuningRequest(name, 14, 1);
  req["HyperParameterTuningJobConfig"]["Strategy"] = "Hyperband";
  req["HyperParameterTuningJobConfig"]["StrategyConfig"] = {{"HyperbandStrategyConfig", {{"MinResource", 1}, {"MaxResource", 9}}}};
  req["TrainingJobDefinition"]["StaticHyperParameters"]["epochs"] = "9";
  req["TrainingJobDefinition"]["CheckpointConfig"] = {{"S3Uri", "s3://bucket/ckpt/"}};
  return req;
}

TEST_F(TuningControllerTest, HyperbandPromotesAStoppedTrialFromItsCheckpointOnceAcrossARestart) {
  ASSERT_TRUE(Create(HyperbandRequest("hb")).ok());
  // Bracket 0's trials report these losses at epoch 1: trial 0 is alone there and runs on; each
  // later one is worse than the best third and is stopped at rung 1. Once six are recorded, the
  // best two are the top third: trial 2 (stopped, the second best) is promoted to rung 3.
  const std::vector<double> first_epoch = {1, 2, 3, 4, 5, 6};
  for (int i = 0; i <= 10; ++i) {
    TuningJob t = Tuning("hb");
    ASSERT_EQ(t.trials.size(), static_cast<size_t>(i + 1)) << "trial " << i;
    const TuningTrial& rec = t.trials.back();
    EXPECT_EQ(rec.parent, -1) << "trial " << i;
    EXPECT_EQ(rec.resource, 9);
    EXPECT_EQ(TrainingRequest(rec.training_job)["CheckpointConfig"]["S3Uri"], "s3://bucket/ckpt/" + rec.training_job);
    if (i % 2 == 1) {  // brackets 1 and 2: runs its 9 epochs
      Report(rec.training_job, std::vector<double>(9, 0.5));
      EXPECT_FALSE(StopAsked(rec.training_job));
      Exit(rec.training_job);
      continue;
    }
    const double loss = first_epoch[static_cast<size_t>(i / 2)];
    // Trial 2 prints epoch 2 before the stop reaches it (its checkpoint holds epoch 1).
    Report(rec.training_job, i == 2 ? std::vector<double>{loss, loss} : std::vector<double>{loss});
    if (i == 0) {
      EXPECT_FALSE(StopAsked(rec.training_job));  // alone at rung 1
      Report(rec.training_job, std::vector<double>(8, 1));
      Exit(rec.training_job);
      continue;
    }
    ASSERT_TRUE(StopAsked(rec.training_job)) << "trial " << i;
    Exit(rec.training_job, true);
  }

  TuningJob t = Tuning("hb");
  ASSERT_EQ(t.trials.size(), 12u);
  // Copies: `t` is read again below, which frees the trials it held.
  const TuningTrial parent = t.trials[2];
  const TuningTrial child = t.trials[11];
  EXPECT_TRUE(parent.stopped_early);
  EXPECT_EQ(child.parent, 2);
  EXPECT_EQ(child.resource, 3);  // the rung after the one its parent stopped at
  EXPECT_EQ(child.assignment, parent.assignment);
  EXPECT_NE(child.training_job, parent.training_job);
  const json req = TrainingRequest(child.training_job);
  EXPECT_EQ(req["CheckpointConfig"]["S3Uri"], "s3://bucket/ckpt/" + parent.training_job);  // restores the parent's state
  EXPECT_EQ(req["HyperParameters"]["epochs"], "3");
  for (const auto& [k, v] : parent.assignment) EXPECT_EQ(req["HyperParameters"][k], v) << k;
  const exec::AttemptSpec spec = exec_->spec(child.training_job);
  ASSERT_TRUE(spec.checkpoint.has_value());
  EXPECT_EQ(spec.checkpoint->uri, "s3://bucket/ckpt/" + parent.training_job);
  TuningCounters n = c_->Read([&](const State& s) { return CountTrials(TrialsOf(t, s)); });
  EXPECT_EQ(n.completed, 6);
  EXPECT_EQ(n.stopped, 5);
  EXPECT_EQ(n.in_progress, 1);
  EXPECT_EQ(n.objective_succeeded, 11);  // a trial stopped early counts with the objective it reached
  EXPECT_EQ(n.objective_pending, 1);

  // kill -9 while the promotion runs: the restarted controller adopts it and starts nothing new.
  Open();
  c_->Step();
  t = Tuning("hb");
  ASSERT_EQ(t.trials.size(), 12u);
  EXPECT_TRUE(exec_->started().empty());
  EXPECT_EQ(exec_->adopted(), std::vector<std::string>{child.training_job});

  // It restores epoch 1 and trains epochs 2 and 3. While it runs, its values are counted after its
  // parent's last report (epoch 2, which it repeats); once it has completed its 3 epochs they are
  // numbered back from 3. At rung 3 it is compared with trial 0 only, is not in the top third of
  // two, and the lineage ends there: the next trial is a fresh one, not a second promotion.
  Report(child.training_job, {1.5});
  EXPECT_EQ(c_->Read([&](const State& s) { return TrialsOf(Tuning("hb"), s)[11].intermediate; }),
            (std::vector<std::pair<int, double>>{{3, 1.5}}));
  Report(child.training_job, {1.2});
  EXPECT_FALSE(StopAsked(child.training_job));
  Exit(child.training_job);
  t = Tuning("hb");
  ASSERT_EQ(t.trials.size(), 13u);
  EXPECT_EQ(t.trials[12].parent, -1);
  EXPECT_EQ(t.trials[12].resource, 9);
  const std::vector<tune::Trial> trials = c_->Read([&](const State& s) { return TrialsOf(t, s); });
  EXPECT_EQ(trials[11].intermediate, (std::vector<std::pair<int, double>>{{2, 1.5}, {3, 1.2}}));
  EXPECT_EQ(trials[11].state, tune::Trial::State::kCompleted);
  n = c_->Read([&](const State& s) { return CountTrials(TrialsOf(t, s)); });
  EXPECT_EQ(n.completed, 7);
  EXPECT_EQ(n.in_progress, 1);
}

}  // namespace
}  // namespace ty::control
