// The controller with a manual clock: time-driven rules without waiting for real time.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "control/controller.h"
#include "control/warm_pool_rules.h"

namespace ty::control {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ty-controller-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    config_ = DefaultConfig();
    config_.data_dir = dir_.string();
    config_.sandbox = "none";
    Open();
  }
  void TearDown() override {
    if (c_) c_->Shutdown();
    c_.reset();
    fs::remove_all(dir_);
  }
  void Open() {
    auto c = Controller::Open(config_, clock_, "/bin/false");
    ASSERT_TRUE(c.ok()) << c.status().message();
    c_ = std::move(c).value();
    c_->Start();
  }

  // Waits (real time, bounded) until pred(state) holds.
  template <typename P>
  bool Eventually(P pred) {
    for (int i = 0; i < 200; ++i) {
      if (c_->Read(pred)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  std::string SubmitTooBig() {
    json payload = {{"TrainingJobName", "too-big"},
                    {"RoleArn", "arn:aws:iam::000000000000:role/R"},
                    {"AlgorithmSpecification", {{"TrainingImage", "x"}, {"TrainingInputMode", "File"}, {"ContainerEntrypoint", {"true"}}}},
                    {"OutputDataConfig", {{"S3OutputPath", "s3://bucket/out"}}},
                    {"ResourceConfig", {{"InstanceType", "ml.m5.large"}, {"InstanceCount", 2}, {"VolumeSizeInGB", 1}}}};
    auto job = c_->SubmitServiceJob({{"jobName", "too-big"}, {"jobQueue", "q"}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                                     {"serviceRequestPayload", payload.dump()}});
    EXPECT_TRUE(job.ok()) << job.status().message();
    return job.ok() ? job->id : "";
  }

  fs::path dir_;
  Config config_;
  ManualClock clock_{1'800'000'000'000};
  std::unique_ptr<Controller> c_;
};

TEST_F(ControllerTest, TimeLimitActionTerminatesAMisconfiguredJobAfterMaxTime) {
  ASSERT_TRUE(c_->CreateServiceEnvironment({{"serviceEnvironmentName", "e"}, {"serviceEnvironmentType", "SAGEMAKER_TRAINING"},
                                            {"capacityLimits", {{{"capacityUnit", "NUM_INSTANCES"}, {"maxCapacity", 1}}}}}).ok());
  json action = {{"reason", "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"}, {"state", "RUNNABLE"},
                 {"maxTimeSeconds", 600}, {"action", "TERMINATE"}};
  ASSERT_TRUE(c_->CreateJobQueue({{"jobQueueName", "q"}, {"jobQueueType", "SAGEMAKER_TRAINING"}, {"priority", 1},
                                  {"serviceEnvironmentOrder", {{{"order", 1}, {"serviceEnvironment", "e"}}}},
                                  {"jobStateTimeLimitActions", {action}}}).ok());
  std::string id = SubmitTooBig();
  ASSERT_TRUE(Eventually([&](const State& s) { return s.FindJob(id)->wait_code == "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"; }));
  EXPECT_EQ(c_->Read([&](const State& s) { return s.FindJob(id)->job.status; }), JobStatus::kRunnable);

  clock_.advance_ms(599'000);  // not yet
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(c_->Read([&](const State& s) { return s.FindJob(id)->job.status; }), JobStatus::kRunnable);

  clock_.advance_ms(2'000);
  ASSERT_TRUE(Eventually([&](const State& s) { return s.FindJob(id)->job.status == JobStatus::kFailed; }));

  // The outcome is durable: a new controller over the same data directory sees it.
  c_->Shutdown();
  c_.reset();
  Open();
  auto [status, reason, terminated] = c_->Read([&](const State& s) {
    const ServiceJob& j = s.FindJob(id)->job;
    return std::make_tuple(j.status, j.status_reason, j.is_terminated);
  });
  EXPECT_EQ(status, JobStatus::kFailed);
  EXPECT_EQ(reason, "Terminated by JobStateTimeLimit action due to reason: MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE");
  EXPECT_TRUE(terminated);
}

TEST_F(ControllerTest, TimeLimitActionsAreValidated) {
  ASSERT_TRUE(c_->CreateServiceEnvironment({{"serviceEnvironmentName", "e"}, {"serviceEnvironmentType", "SAGEMAKER_TRAINING"},
                                            {"capacityLimits", {{{"capacityUnit", "NUM_INSTANCES"}, {"maxCapacity", 1}}}}}).ok());
  auto make = [&](json action) {
    return c_->CreateJobQueue({{"jobQueueName", "q"}, {"jobQueueType", "SAGEMAKER_TRAINING"}, {"priority", 1},
                               {"serviceEnvironmentOrder", {{{"order", 1}, {"serviceEnvironment", "e"}}}},
                               {"jobStateTimeLimitActions", {action}}});
  };
  json base = {{"reason", "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"}, {"state", "RUNNABLE"}, {"maxTimeSeconds", 600}, {"action", "TERMINATE"}};
  json cancel = base;
  cancel["action"] = "CANCEL";
  EXPECT_NE(make(cancel).status().message().find("TERMINATE"), std::string::npos);
  json short_time = base;
  short_time["maxTimeSeconds"] = 599;
  EXPECT_NE(make(short_time).status().message().find("600"), std::string::npos);
  json other = base;
  other["reason"] = "SOMETHING:ELSE";
  EXPECT_NE(make(other).status().message().find("reason"), std::string::npos);
  EXPECT_TRUE(make(base).ok());
}

json WarmRequest() {
  return {{"RoleArn", "arn:aws:iam::000000000000:role/R"},
          {"ResourceConfig", {{"InstanceType", "ml.m5.large"}, {"InstanceCount", 1}, {"VolumeSizeInGB", 1},
                              {"KeepAlivePeriodInSeconds", 600}}},
          {"HyperParameters", {{"epochs", "1"}}},
          {"VpcConfig", {{"SecurityGroupIds", {"sg-1", "sg-2"}}, {"Subnets", {"subnet-1"}}}}};
}

TEST(WarmPoolRules, MatchKeyIgnoresHyperparametersKeepAliveAndListOrder) {
  json a = WarmRequest(), b = WarmRequest();
  b["HyperParameters"]["epochs"] = "7";
  b["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 60;
  b["VpcConfig"]["SecurityGroupIds"] = {"sg-2", "sg-1"};
  b["Environment"] = {{"X", "1"}};
  EXPECT_EQ(WarmPoolMatchKey(a), WarmPoolMatchKey(b));
}

TEST(WarmPoolRules, EveryMatchingCriterionSeparatesPools) {
  const std::string base = WarmPoolMatchKey(WarmRequest());
  std::vector<std::function<void(json&)>> changes = {
      [](json& r) { r["RoleArn"] = "arn:aws:iam::000000000000:role/Other"; },
      [](json& r) { r["ResourceConfig"]["InstanceType"] = "ml.m5.xlarge"; },
      [](json& r) { r["ResourceConfig"]["InstanceCount"] = 2; },
      [](json& r) { r["ResourceConfig"]["VolumeSizeInGB"] = 2; },
      [](json& r) { r["ResourceConfig"]["VolumeKmsKeyId"] = "k"; },
      [](json& r) { r["VpcConfig"]["Subnets"] = {"subnet-2"}; },
      [](json& r) { r["VpcConfig"]["SecurityGroupIds"] = {"sg-1"}; },
      [](json& r) { r["EnableNetworkIsolation"] = true; },
      [](json& r) { r["EnableInterContainerTrafficEncryption"] = true; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    json r = WarmRequest();
    changes[i](r);
    EXPECT_NE(WarmPoolMatchKey(r), base) << "change " << i;
  }
}

TEST(WarmPoolRules, PoolsAreKeptAfterSuccessStopsAndAlgorithmErrorsOnly) {
  EXPECT_EQ(ClassifyPoolOutcome("Completed", "", true, ""), PoolOutcome::kKept);
  EXPECT_EQ(ClassifyPoolOutcome("Stopped", "", true, "user"), PoolOutcome::kKept);
  EXPECT_EQ(ClassifyPoolOutcome("Stopped", "", false, "user"), PoolOutcome::kNotStarted);
  EXPECT_EQ(ClassifyPoolOutcome("Stopped", "", true, "preempt"), PoolOutcome::kPreempted);
  EXPECT_EQ(ClassifyPoolOutcome("Failed", "AlgorithmError: exit 3", true, ""), PoolOutcome::kKept);
  EXPECT_EQ(ClassifyPoolOutcome("Failed", "ClientError: no data", true, ""), PoolOutcome::kKept);
  EXPECT_EQ(ClassifyPoolOutcome("Failed", "InternalServerError: lost", true, ""), PoolOutcome::kInfrastructure);
}

TEST(WarmPoolRules, ExpiryIsTheKeepAliveCappedAt28DaysFromCreation) {
  const EpochMs created = 1'000'000;
  // expiry = min(since + keep-alive, created + 28 d)
  EXPECT_EQ(WarmPoolExpiry(created + 5000, 600, created), created + 5000 + 600'000);
  const EpochMs late = created + kWarmPoolMaxLifetimeMs - 3'600'000;  // 1 h before the cap
  EXPECT_EQ(WarmPoolExpiry(late, 21600, created), created + kWarmPoolMaxLifetimeMs);
  EXPECT_EQ(KeepAliveOf(WarmRequest()), 600);
  EXPECT_EQ(KeepAliveOf(json::object()), 0);
}

}  // namespace
}  // namespace ty::control
