// Tuning jobs in the controller, stepped turn by turn on in-memory ports with a manual clock
// (tests/testing/): trials start up to MaxParallelTrainingJobs, each stored with its training job;
// a restart continues with the same trials and suggestions; Stop stops the running trials.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "api/decode.h"
#include "control/controller.h"
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

class TuningControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ty-tuning-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    config_ = DefaultConfig();
    config_.data_dir = dir_.string();
    config_.sandbox = "none";
    Open();
  }
  void TearDown() override {
    c_.reset();
    fs::remove_all(dir_);
  }
  // A controller over data_; a restart drops the old one as a killed server would be.
  void Open() {
    c_.reset();
    auto executor = std::make_unique<FakeExecutor>();
    exec_ = executor.get();
    Ports ports{std::make_unique<testing::MemStore>(data_), std::make_unique<testing::MemEventLog>(data_), std::move(executor)};
    auto c = Controller::Open(config_, clock_, std::move(ports));
    ASSERT_TRUE(c.ok()) << c.status().message();
    c_ = std::move(c).value();
  }
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

  fs::path dir_;
  Config config_;
  ManualClock clock_{1'700'000'000'000};
  std::shared_ptr<MemData> data_ = std::make_shared<MemData>();
  FakeExecutor* exec_ = nullptr;
  std::unique_ptr<Controller> c_;
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

}  // namespace
}  // namespace ty::control
