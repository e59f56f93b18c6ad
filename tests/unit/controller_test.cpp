// The controller with a manual clock: time-driven rules without waiting for real time.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "control/controller.h"

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

}  // namespace
}  // namespace ty::control
