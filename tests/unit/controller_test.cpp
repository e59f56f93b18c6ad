// The controller with a manual clock: time-driven rules without waiting for real time.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/decode.h"
#include "control/controller.h"
#include "control/system_metrics.h"
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
    auto cmd = api::DecodeSubmitServiceJob({{"jobName", "too-big"}, {"jobQueue", "q"}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                                            {"serviceRequestPayload", payload.dump()}},
                                           {c_->config(), c_->sandbox()});
    EXPECT_TRUE(cmd.ok()) << cmd.status().message();
    if (!cmd.ok()) return "";
    auto job = c_->SubmitServiceJob(*cmd);
    EXPECT_TRUE(job.ok()) << job.status().message();
    return job.ok() ? job->id : "";
  }

  fs::path dir_;
  Config config_;
  ManualClock clock_{1'800'000'000'000};
  std::unique_ptr<Controller> c_;
};

TEST_F(ControllerTest, TimeLimitActionTerminatesAMisconfiguredJobAfterMaxTime) {
  ASSERT_TRUE(c_->CreateServiceEnvironment(*api::DecodeCreateServiceEnvironment(
      {{"serviceEnvironmentName", "e"}, {"serviceEnvironmentType", "SAGEMAKER_TRAINING"},
       {"capacityLimits", {{{"capacityUnit", "NUM_INSTANCES"}, {"maxCapacity", 1}}}}})).ok());
  json action = {{"reason", "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"}, {"state", "RUNNABLE"},
                 {"maxTimeSeconds", 600}, {"action", "TERMINATE"}};
  ASSERT_TRUE(c_->CreateJobQueue(*api::DecodeCreateJobQueue({{"jobQueueName", "q"}, {"jobQueueType", "SAGEMAKER_TRAINING"}, {"priority", 1},
                                  {"serviceEnvironmentOrder", {{{"order", 1}, {"serviceEnvironment", "e"}}}},
                                  {"jobStateTimeLimitActions", {action}}})).ok());
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
  ASSERT_TRUE(c_->CreateServiceEnvironment(*api::DecodeCreateServiceEnvironment(
      {{"serviceEnvironmentName", "e"}, {"serviceEnvironmentType", "SAGEMAKER_TRAINING"},
       {"capacityLimits", {{{"capacityUnit", "NUM_INSTANCES"}, {"maxCapacity", 1}}}}})).ok());
  auto make = [&](json action) {
    auto cmd = api::DecodeCreateJobQueue({{"jobQueueName", "q"}, {"jobQueueType", "SAGEMAKER_TRAINING"}, {"priority", 1},
                                          {"serviceEnvironmentOrder", {{{"order", 1}, {"serviceEnvironment", "e"}}}},
                                          {"jobStateTimeLimitActions", {action}}});
    return cmd.ok() ? c_->CreateJobQueue(*cmd) : StatusOr<JobQueue>(cmd.status());
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
  EXPECT_EQ(ClassifyPoolOutcome("Completed", "", true, StopCause::kNone), PoolOutcome::kKept);
  EXPECT_EQ(ClassifyPoolOutcome("Stopped", "", true, StopCause::kUser), PoolOutcome::kKept);
  EXPECT_EQ(ClassifyPoolOutcome("Stopped", "", false, StopCause::kUser), PoolOutcome::kNotStarted);
  EXPECT_EQ(ClassifyPoolOutcome("Stopped", "", true, StopCause::kPreempt), PoolOutcome::kPreempted);
  EXPECT_EQ(ClassifyPoolOutcome("Failed", "AlgorithmError: exit 3", true, StopCause::kNone), PoolOutcome::kKept);
  EXPECT_EQ(ClassifyPoolOutcome("Failed", "ClientError: no data", true, StopCause::kNone), PoolOutcome::kKept);
  EXPECT_EQ(ClassifyPoolOutcome("Failed", "InternalServerError: lost", true, StopCause::kNone), PoolOutcome::kInfrastructure);
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


// ---- System metrics (control/system_metrics.h) ----

SystemSample Sample(EpochMs at, double cpu) {
  SystemSample s;
  s.timestamp = at;
  s.values[0] = cpu;
  return s;
}

TEST(SystemMetrics, SampleLinesParseByMetricNameAndOthersAreRejected) {
  SystemSample s;
  ASSERT_TRUE(ParseSystemSampleLine(R"({"Timestamp":1700000000123,"CPUUtilization":150.5,"DiskUtilization":40,"Other":1})", &s));
  EXPECT_EQ(s.timestamp, 1700000000123);
  EXPECT_EQ(s.values[0], 150.5);
  EXPECT_FALSE(s.values[1].has_value());  // MemoryUtilization not in the line
  EXPECT_EQ(s.values[2], 40.0);
  EXPECT_FALSE(s.values[3].has_value());
  EXPECT_FALSE(ParseSystemSampleLine(R"({"CPUUtilization":1})", &s));
  EXPECT_FALSE(ParseSystemSampleLine(R"({"Timestamp":17000)", &s));
}

TEST(SystemMetrics, SamplesNotNewerThanTheLastAreTheOnesAlreadyHeld) {
  std::vector<SystemSample> series;
  EXPECT_TRUE(AppendSystemSample(series, Sample(1000, 1)));
  EXPECT_TRUE(AppendSystemSample(series, Sample(2000, 2)));
  EXPECT_FALSE(AppendSystemSample(series, Sample(1000, 1)));  // the file read again after a restart
  EXPECT_FALSE(AppendSystemSample(series, Sample(2000, 2)));
  EXPECT_EQ(series.size(), 2u);
}

TEST(SystemMetrics, AFullSeriesIsMergedPairwiseAndKeepsItsSpan) {
  std::vector<SystemSample> series;
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(AppendSystemSample(series, Sample(i * 1000, i * 10), 4));
  SystemSample gpu = Sample(5000, 50);
  gpu.values[3] = 80;  // only the new sample measured a GPU
  ASSERT_TRUE(AppendSystemSample(series, gpu, 4));
  // (1000: 10, 2000: 20) -> 2000: 15; (3000: 30, 4000: 40) -> 4000: 35; then 5000: 50.
  ASSERT_EQ(series.size(), 3u);
  EXPECT_EQ(series[0].timestamp, 2000);
  EXPECT_EQ(series[0].values[0], 15.0);
  EXPECT_EQ(series[1].timestamp, 4000);
  EXPECT_EQ(series[1].values[0], 35.0);
  EXPECT_EQ(series[2].values[3], 80.0);
  EXPECT_FALSE(series[1].values[3].has_value());
  for (int i = 6; i <= 100; ++i) ASSERT_TRUE(AppendSystemSample(series, Sample(i * 1000, i), 4));
  EXPECT_LE(series.size(), 4u);
  EXPECT_EQ(series.back().timestamp, 100'000);
}

TEST(SystemMetrics, StoreDocumentsRoundTripWithUnmeasuredValues) {
  SystemSeries in;
  SystemSample a = Sample(1000, 12.5);
  a.values[1] = 3.25;
  a.values[4] = 60;
  in["algo-1"] = {a, Sample(2000, 0)};
  in["algo-2"] = {};
  SystemSeries out;
  ASSERT_TRUE(DecodeSystemSeries(EncodeSystemSeries(in), &out));
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out["algo-1"].size(), 2u);
  EXPECT_EQ(out["algo-1"][0].timestamp, 1000);
  EXPECT_EQ(out["algo-1"][0].values, a.values);
  EXPECT_FALSE(out["algo-1"][1].values[3].has_value());
  EXPECT_TRUE(out["algo-2"].empty());
  EXPECT_FALSE(DecodeSystemSeries("[1,2]", &out));
}

}  // namespace
}  // namespace ty::control

namespace ty::control {
namespace {

// A queue's kind is not stored: it is derived from its policy on create and again on load, so a
// restart must give every queue the kind it had.
TEST_F(ControllerTest, QueueKindsFollowTheirPoliciesAcrossARestart) {
  auto env = [&](const std::string& name, json limits) {
    auto cmd = api::DecodeCreateServiceEnvironment(
        {{"serviceEnvironmentName", name}, {"serviceEnvironmentType", "SAGEMAKER_TRAINING"}, {"capacityLimits", limits}});
    ASSERT_TRUE(cmd.ok()) << cmd.status().message();
    ASSERT_TRUE(c_->CreateServiceEnvironment(*cmd).ok());
  };
  env("plain", {{{"capacityUnit", "NUM_INSTANCES"}, {"maxCapacity", 1}}});
  env("fair", {{{"capacityUnit", "NUM_INSTANCES"}, {"maxCapacity", 1}}});
  env("quota", {{{"capacityUnit", "ml.m5.large"}, {"maxCapacity", 1}}});
  auto policy = [&](json req) {
    auto cmd = api::DecodeCreateSchedulingPolicy(req);
    EXPECT_TRUE(cmd.ok()) << cmd.status().message();
    auto p = c_->CreateSchedulingPolicy(*cmd);
    EXPECT_TRUE(p.ok()) << p.status().message();
    return p.ok() ? p->arn : "";
  };
  const std::string fs = policy({{"name", "fs"}, {"fairsharePolicy", {{"shareDecaySeconds", 60}}}});
  const std::string qs = policy({{"name", "qs"}, {"quotaSharePolicy", {{"idleResourceAssignmentStrategy", "FIFO"}}}});
  auto queue = [&](const std::string& name, const std::string& environment, const std::string& arn) {
    json req = {{"jobQueueName", name}, {"jobQueueType", "SAGEMAKER_TRAINING"}, {"priority", 1},
                {"serviceEnvironmentOrder", {{{"order", 1}, {"serviceEnvironment", environment}}}}};
    if (!arn.empty()) req["schedulingPolicyArn"] = arn;
    auto cmd = api::DecodeCreateJobQueue(req);
    ASSERT_TRUE(cmd.ok()) << cmd.status().message();
    auto q = c_->CreateJobQueue(*cmd);
    ASSERT_TRUE(q.ok()) << q.status().message();
  };
  queue("fifo", "plain", "");
  queue("fair", "fair", fs);
  queue("quota", "quota", qs);
  auto kinds = [&] {
    return c_->Read([](const State& s) {
      return std::vector<QueueKind>{s.queues.at("fifo").kind, s.queues.at("fair").kind, s.queues.at("quota").kind};
    });
  };
  const std::vector<QueueKind> want = {QueueKind::kFifo, QueueKind::kFairShare, QueueKind::kQuotaShare};
  EXPECT_EQ(kinds(), want);
  c_->Shutdown();
  c_.reset();
  Open();
  EXPECT_EQ(kinds(), want);
  // The fair-share policy is parsed again at load, too.
  auto decay = c_->Read([](const State& s) {
    const SchedulingPolicy& p = s.policies.at("fs");
    return p.fairshare ? p.fairshare->share_decay_seconds : -1;
  });
  EXPECT_EQ(decay, 60);
}

}  // namespace
}  // namespace ty::control
