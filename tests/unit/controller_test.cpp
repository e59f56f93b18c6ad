// The controller stepped turn by turn on in-memory ports (tests/testing/) with a manual clock:
// every turn happens when the test says, so each rule is checked without waiting for real time.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <nlohmann/json.hpp>

#include "api/decode.h"
#include "control/controller.h"
#include "control/system_metrics.h"
#include "control/warm_pool_rules.h"
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

// Requests, built in one place so that a change of the controller's request types touches only
// these helpers.
json EnvironmentRequest(const std::string& name, int64_t instances, const std::string& unit = "NUM_INSTANCES") {
  return {{"serviceEnvironmentName", name}, {"serviceEnvironmentType", "SAGEMAKER_TRAINING"},
          {"capacityLimits", {{{"capacityUnit", unit}, {"maxCapacity", instances}}}}};
}

json QueueRequest(const std::string& name, const std::string& environment, json extra = json::object()) {
  json q = {{"jobQueueName", name}, {"jobQueueType", "SAGEMAKER_TRAINING"}, {"priority", 1},
            {"serviceEnvironmentOrder", {{{"order", 1}, {"serviceEnvironment", environment}}}}};
  q.update(extra);
  return q;
}

json TrainingPayload(const std::string& name, int instances = 1) {
  return {{"TrainingJobName", name},
          {"RoleArn", "arn:aws:iam::000000000000:role/R"},
          {"AlgorithmSpecification", {{"TrainingImage", "x"}, {"TrainingInputMode", "File"}, {"ContainerEntrypoint", {"true"}}}},
          {"OutputDataConfig", {{"S3OutputPath", "s3://bucket/out"}}},
          {"ResourceConfig", {{"InstanceType", "ml.m5.large"}, {"InstanceCount", instances}, {"VolumeSizeInGB", 1}}},
          {"StoppingCondition", {{"MaxRuntimeInSeconds", 3600}}}};
}

json SubmitRequest(const std::string& name, const std::string& queue, json extra = json::object(), int instances = 1) {
  json r = {{"jobName", name}, {"jobQueue", queue}, {"serviceJobType", "SAGEMAKER_TRAINING"},
            {"serviceRequestPayload", TrainingPayload(name, instances).dump()}};
  r.update(extra);
  return r;
}

class ControllerTest : public testing::ControllerFixture {
 protected:
  ControllerTest() : ControllerFixture("controller") {}

  // The controller's calls with requests decoded as the API decodes them.
  StatusOr<ServiceEnvironment> CreateEnvironment(const json& req) {
    auto cmd = api::DecodeCreateServiceEnvironment(req);
    if (!cmd.ok()) return cmd.status();
    return c_->CreateServiceEnvironment(*cmd);
  }
  StatusOr<JobQueue> CreateQueue(const json& req) {
    auto cmd = api::DecodeCreateJobQueue(req);
    if (!cmd.ok()) return cmd.status();
    return c_->CreateJobQueue(*cmd);
  }
  StatusOr<SchedulingPolicy> CreatePolicy(const json& req) {
    auto cmd = api::DecodeCreateSchedulingPolicy(req);
    if (!cmd.ok()) return cmd.status();
    return c_->CreateSchedulingPolicy(*cmd);
  }
  StatusOr<QuotaShare> CreateQuotaShare(const json& req) {
    auto cmd = api::DecodeCreateQuotaShare(req);
    if (!cmd.ok()) return cmd.status();
    return c_->CreateQuotaShare(*cmd);
  }
  StatusOr<ServiceJob> SubmitJson(const json& req) {
    auto cmd = api::DecodeSubmitServiceJob(req, {c_->config(), c_->sandbox()});
    if (!cmd.ok()) return cmd.status();
    return c_->SubmitServiceJob(*cmd);
  }
  // The status of a service job (by id), as a describing client sees it.
  JobStatus StatusOf(const std::string& id) {
    return c_->Read([&](const State& s) { return s.FindJob(id)->job.status; });
  }
  std::string Submit(const std::string& name, const std::string& queue, json extra = json::object(), int instances = 1) {
    auto job = SubmitJson(SubmitRequest(name, queue, extra, instances));
    EXPECT_TRUE(job.ok()) << job.status().message();
    return job.ok() ? job->id : "";
  }
  void FifoQueue(int64_t instances) {
    ASSERT_TRUE(CreateEnvironment(EnvironmentRequest("e", instances)).ok());
    ASSERT_TRUE(CreateQueue(QueueRequest("q", "e")).ok());
  }
  // The executor reports the attempt running, then (later) exited.
  void Run(const std::string& attempt) {
    exec_->Push(attempt, Phase::kPreparing, clock_.now_ms());
    exec_->Push(attempt, Phase::kTraining, clock_.now_ms());
    c_->Step();
  }
  void Exit(const std::string& attempt, int code, const std::string& failure = "") {
    exec::AttemptEvent e;
    e.attempt_id = attempt;
    e.phase = Phase::kExited;
    e.at = clock_.now_ms();
    e.exit_code = code;
    e.failure_reason = failure;
    e.model_uploaded = code == 0;
    exec_->Push(e);
    c_->Step();
  }

};

TEST_F(ControllerTest, AServiceJobRunsFromSubmitToSucceeded) {
  FifoQueue(1);
  const std::string id = Submit("a", "q");
  EXPECT_EQ(StatusOf(id), JobStatus::kSubmitted);  // admitted on the next turn
  EXPECT_TRUE(exec_->started().empty());

  c_->Step();
  EXPECT_EQ(StatusOf(id), JobStatus::kScheduled);
  ASSERT_EQ(exec_->started(), std::vector<std::string>{"a"});
  EXPECT_EQ(exec_->spec("a").attempt_id, "a");

  Run("a");
  EXPECT_EQ(StatusOf(id), JobStatus::kRunning);

  clock_.advance_ms(10'000);
  Exit("a", 0);
  EXPECT_EQ(StatusOf(id), JobStatus::kSucceeded);
  // Durable: the stored document says so too.
  EXPECT_EQ(json::parse(data_->Get(store::Kind::kServiceJob, id))["job"].value("status", ""), "SUCCEEDED");
}

TEST_F(ControllerTest, AHigherPriorityJobPreemptsALowerOneOfItsShare) {
  ASSERT_TRUE(CreatePolicy(json{{"name", "p"}, {"quotaSharePolicy", {{"idleResourceAssignmentStrategy", "FIFO"}}}}).ok());
  ASSERT_TRUE(CreateEnvironment(EnvironmentRequest("e", 1, "ml.m5.large")).ok());
  ASSERT_TRUE(CreateQueue(QueueRequest("q", "e", {{"schedulingPolicyArn", c_->Arn("batch", "scheduling-policy/p")}})).ok());
  ASSERT_TRUE(CreateQuotaShare(json{{"jobQueue", "q"}, {"quotaShareName", "S"},
                                    {"capacityLimits", {{{"capacityUnit", "ml.m5.large"}, {"maxCapacity", 1}}}},
                                    {"resourceSharingConfiguration", {{"strategy", "RESERVE"}}},
                                    {"preemptionConfiguration", {{"inSharePreemption", "ENABLED"}}}}).ok());
  const std::string low = Submit("low", "q", {{"quotaShareName", "S"}, {"schedulingPriority", 10}});
  c_->Step();
  Run("low");
  ASSERT_EQ(StatusOf(low), JobStatus::kRunning);

  const std::string high = Submit("high", "q", {{"quotaShareName", "S"}, {"schedulingPriority", 90}});
  c_->Step();
  EXPECT_EQ(exec_->stopped(), std::vector<std::string>{"low"});  // asked to stop, not yet gone
  EXPECT_EQ(StatusOf(high), JobStatus::kRunnable);

  // The victim exits after its SIGTERM: its capacity goes to the job it was stopped for.
  exec::AttemptEvent e;
  e.attempt_id = "low";
  e.phase = Phase::kExited;
  e.at = clock_.now_ms();
  e.exit_code = 143;
  e.stopped = true;
  exec_->Push(e);
  c_->Step();
  c_->Step();
  EXPECT_EQ(StatusOf(high), JobStatus::kScheduled);
  EXPECT_EQ(exec_->started(), (std::vector<std::string>{"low", "high"}));
  // The preempted job waits to run again (a new attempt, no retry used), and says why it stopped.
  auto [status, preempted, why] = c_->Read([&](const State& s) {
    const ServiceJob& j = s.FindJob(low)->job;
    return std::make_tuple(j.status, j.preempted_attempt_count, j.attempts.front().status_reason);
  });
  EXPECT_EQ(status, JobStatus::kRunnable);
  EXPECT_EQ(preempted, 1);
  EXPECT_EQ(why, "Preempted: yielded its capacity to service job " + high);
}

TEST_F(ControllerTest, AWaitReasonNamesTheJobAheadByItsIdAndName) {
  FifoQueue(1);
  Submit("first", "q");
  const std::string head = Submit("head", "q");
  const std::string behind = Submit("behind", "q");
  c_->Step();
  c_->Step();
  // first runs; head waits for capacity; behind waits behind head, named as users know it.
  const std::string why = c_->Read([&](const State& s) { return s.FindJob(behind)->wait_reason; });
  EXPECT_NE(why.find("queued behind job " + head + " (head)"), std::string::npos) << why;
  EXPECT_EQ(why.find('#'), std::string::npos) << why;
}

TEST_F(ControllerTest, AJobIsFoundByItsArnAsByItsId) {
  FifoQueue(1);
  const std::string id = Submit("a", "q");
  const std::string arn = c_->Read([&](const State& s) { return s.FindJob(id)->job.arn; });
  ASSERT_EQ(arn, c_->Arn("batch", "service-job/" + id));
  c_->Read([&](const State& s) {
    EXPECT_EQ(s.FindJob(arn), s.FindJob(id));
    // Another region's or account's ARN with the same id names no job here.
    std::string other_region = arn, other_account = arn;
    other_region.replace(other_region.find(c_->config().region), c_->config().region.size(), "xx-west-9");
    other_account.replace(other_account.find(c_->config().account_id), c_->config().account_id.size(), "999999999999");
    EXPECT_EQ(s.FindJob(other_region), nullptr);
    EXPECT_EQ(s.FindJob(other_account), nullptr);
    EXPECT_EQ(s.FindJob("arn:aws:batch:" + c_->config().region + ":" + c_->config().account_id + ":job-queue/" + id), nullptr);
    return 0;
  });
  auto terminate = api::DecodeTerminateServiceJob(json{{"jobId", arn}, {"reason", "by ARN"}});
  ASSERT_TRUE(terminate.ok());
  ASSERT_TRUE(c_->TerminateServiceJob(*terminate).ok());
  EXPECT_EQ(StatusOf(id), JobStatus::kFailed);
}

TEST_F(ControllerTest, TerminateServiceJobsEndsEveryJobInOneCommitAndAnswersEach) {
  FifoQueue(1);
  const std::string a = Submit("a", "q");
  const std::string b = Submit("b", "q");
  const int commits = data_->commits;
  auto outcomes = c_->TerminateServiceJobs(
      {{a, "bulk"}, {c_->Arn("batch", "service-job/" + b), "bulk"}, {"00000000-0000-4000-8000-000000000000", "bulk"}});
  ASSERT_TRUE(outcomes.ok());
  ASSERT_EQ(outcomes->size(), 3u);
  EXPECT_TRUE((*outcomes)[0].ok());
  EXPECT_TRUE((*outcomes)[1].ok());
  EXPECT_EQ((*outcomes)[2].code(), Code::kNotFound);
  EXPECT_EQ(data_->commits, commits + 1);
  // a was placed by b's turn: it is being stopped; b never started: FAILED at once.
  EXPECT_EQ(StatusOf(a), JobStatus::kScheduled);
  EXPECT_EQ(StatusOf(b), JobStatus::kFailed);
  EXPECT_TRUE(c_->Read([&](const State& s) { return s.FindJob(a)->job.is_terminated && s.FindJob(b)->job.is_terminated; }));
}

TEST_F(ControllerTest, ACapacityFailureAtStartIsRetriedAfterABackoff) {
  FifoQueue(1);
  exec_->FailStarts(Internal("no such host"));
  const std::string id = Submit("a", "q");
  c_->Step();  // placed; the start fails after the commit
  EXPECT_TRUE(exec_->started().empty());
  exec_->FailStarts(Status::Ok());
  c_->Step();  // the failure comes back as the attempt's CapacityError exit
  EXPECT_EQ(StatusOf(id), JobStatus::kRunnable);
  const std::string why = c_->Read([&](const State& s) { return s.FindJob(id)->wait_reason; });
  EXPECT_NE(why.find("retrying after a capacity failure"), std::string::npos) << why;

  c_->Step();  // still backing off (1 s): nothing starts
  EXPECT_TRUE(exec_->started().empty());
  clock_.advance_ms(1'000);
  c_->Step();
  c_->Step();
  EXPECT_EQ(StatusOf(id), JobStatus::kScheduled);
  // The retry is a new attempt and consumed none of the job's retries.
  EXPECT_EQ(exec_->started(), std::vector<std::string>{"a-attempt-2"});
}

// The executor's cluster reports what it can hold (Executor::Capacity); the catalogue has 4 ml.m5.large.
exec::CapacityReport Cluster(int64_t m5_large) {
  exec::CapacityReport r;
  r.instances["ml.m5.large"] = m5_large;
  return r;
}

TEST_F(ControllerTest, ANodeGoingDownLowersCapacityWithoutPreemptingAndItsCapacityReturnsWhenReported) {
  FifoQueue(4);
  exec_->SetCapacity(Cluster(2));  // of the 4 configured, the cluster holds 2
  const std::string a = Submit("a", "q"), b = Submit("b", "q"), c = Submit("c", "q");
  c_->Step();
  c_->Step();
  EXPECT_EQ(exec_->started(), (std::vector<std::string>{"a", "b"}));
  Run("a");
  Run("b");

  exec_->SetCapacity(Cluster(1));  // a node died: 1 left, under the 2 running
  c_->Step();
  c_->Step();
  EXPECT_TRUE(exec_->stopped().empty());  // running jobs are not preempted for it
  EXPECT_TRUE(exec_->interrupted().empty());
  EXPECT_EQ(StatusOf(a), JobStatus::kRunning);
  EXPECT_EQ(StatusOf(b), JobStatus::kRunning);

  Exit("a", 0);  // 1 in use of 1: still no room for c
  c_->Step();
  EXPECT_EQ(exec_->started(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(StatusOf(c), JobStatus::kRunnable);

  exec_->SetCapacity(Cluster(2));  // Slurm reports the node back
  c_->Step();
  c_->Step();
  EXPECT_EQ(exec_->started(), (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(ControllerTest, AClusterOffersNoMoreThanTheConfiguredCountAndNothingOfATypeItDoesNotReport) {
  FifoQueue(8);
  exec::CapacityReport other;
  other.instances["ml.m5.xlarge"] = 10;  // ml.m5.large: not in the report, so none
  exec_->SetCapacity(other);
  Submit("a", "q");
  c_->Step();
  c_->Step();
  EXPECT_TRUE(exec_->started().empty());

  exec_->SetCapacity(Cluster(100));  // more than the 4 configured: the configuration caps it
  for (int i = 0; i < 5; ++i) Submit("more" + std::to_string(i), "q");
  c_->Step();
  c_->Step();
  EXPECT_EQ(exec_->started().size(), 4u);

  exec_->SetCapacity(std::nullopt);  // no view of its own (the local executor): the configured 4
  c_->Step();
  EXPECT_EQ(exec_->started().size(), 4u);
}

TEST_F(ControllerTest, ARestartedControllerReloadsStateAndReadoptsRunningAttempts) {
  FifoQueue(2);
  const std::string done = Submit("done", "q");
  const std::string running = Submit("running", "q");
  c_->Step();
  Run("done");
  Run("running");
  Exit("done", 0);
  ASSERT_EQ(StatusOf(running), JobStatus::kRunning);

  Open();  // the same store, a new controller and executor
  EXPECT_EQ(StatusOf(done), JobStatus::kSucceeded);
  EXPECT_EQ(StatusOf(running), JobStatus::kRunning);
  EXPECT_EQ(exec_->adopted(), std::vector<std::string>{"running"});
  EXPECT_TRUE(exec_->started().empty());

  // The adopted attempt's events reach the job as before the restart.
  Exit("running", 0);
  EXPECT_EQ(StatusOf(running), JobStatus::kSucceeded);
}

TEST_F(ControllerTest, TagsAreStoredWithTheirResourceAndSurviveARestart) {
  FifoQueue(1);
  const std::string queue = c_->Arn("batch", "job-queue/q");
  const std::string job = Submit("j", "q");
  const std::string job_arn = c_->Arn("batch", "service-job/" + job);
  ASSERT_TRUE(c_->TagResource({"batch", queue, {{"team", "a"}, {"stage", "dev"}}}).ok());
  ASSERT_TRUE(c_->TagResource({"batch", job_arn, {{"team", "b"}}}).ok());
  ASSERT_TRUE(c_->UntagResource({"batch", queue, {"stage", "absent"}}).ok());

  Open();  // the same store, a new controller
  EXPECT_EQ(*c_->TagsOf("batch", queue), (Tags{{"team", "a"}}));
  EXPECT_EQ(*c_->TagsOf("batch", job_arn), (Tags{{"team", "b"}}));
}

TEST_F(ControllerTest, ATrainingJobsTagsAreItsOwnAfterItsRequestsAcrossARestart) {
  json request = TrainingPayload("tj");
  request["Tags"] = {{{"Key", "team"}, {"Value", "a"}}};
  auto cmd = api::DecodeCreateTrainingJob(request, {c_->config(), c_->sandbox()});
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  auto tj = c_->CreateTrainingJob(*cmd);
  ASSERT_TRUE(tj.ok()) << tj.status().message();
  EXPECT_EQ(*c_->TagsOf("sagemaker", tj->arn), (Tags{{"team", "a"}}));
  // Every tag deleted: a restart does not bring back the request's.
  ASSERT_TRUE(c_->UntagResource({"sagemaker", tj->arn, {"team"}}).ok());
  Open();
  EXPECT_EQ(*c_->TagsOf("sagemaker", tj->arn), Tags{});
  // A document stored before training jobs kept their own tags (or their spec) reads them from its request.
  json doc = json::parse(data_->Get(store::Kind::kTrainingJob, "tj"));
  doc.erase("tags");
  doc.erase("spec");
  data_->docs[store::Kind::kTrainingJob]["tj"] = doc.dump();
  Open();
  EXPECT_EQ(*c_->TagsOf("sagemaker", tj->arn), (Tags{{"team", "a"}}));
}

TEST_F(ControllerTest, AResourceHoldsAtMostFiftyTagsAndARefusalChangesNothing) {
  FifoQueue(1);
  const std::string env = c_->Arn("batch", "service-environment/e");
  Tags many;
  for (int i = 0; i < 49; ++i) many["k" + std::to_string(i)] = "v";
  ASSERT_TRUE(c_->TagResource({"batch", env, many}).ok());
  // 49 + 2 new keys: refused whole. A key it has already does not count again.
  Status st = c_->TagResource({"batch", env, {{"n1", "v"}, {"n2", "v"}}});
  EXPECT_EQ(st.code(), Code::kLimitExceeded);
  EXPECT_EQ(c_->TagsOf("batch", env)->size(), 49u);
  EXPECT_TRUE(c_->TagResource({"batch", env, {{"k0", "new"}, {"n1", "v"}}}).ok());
  EXPECT_EQ(c_->TagsOf("batch", env)->size(), 50u);
}

TEST_F(ControllerTest, TagArnsOfAnotherServiceRegionOrAccountAreRefusedByName) {
  FifoQueue(1);
  const std::string queue = c_->Arn("batch", "job-queue/q");
  std::string other_region = queue, other_account = queue;
  other_region.replace(other_region.find(c_->config().region), c_->config().region.size(), "xx-west-9");
  other_account.replace(other_account.find(c_->config().account_id), c_->config().account_id.size(), "999999999999");
  for (const std::string& arn : {other_region, other_account}) {
    auto tags = c_->TagsOf("batch", arn);
    ASSERT_FALSE(tags.ok());
    EXPECT_EQ(tags.status().code(), Code::kInvalidArgument);
  }
  EXPECT_EQ(c_->TagsOf("sagemaker", queue).status().code(), Code::kInvalidArgument);  // not a SageMaker ARN
  EXPECT_EQ(c_->TagsOf("batch", queue + "x").status().code(), Code::kNotFound);
  EXPECT_EQ(c_->TagsOf("sagemaker", c_->Arn("sagemaker", "training-job/none")).status().code(), Code::kNotFound);
  EXPECT_EQ(c_->TagResource({"batch", other_region, {{"a", "b"}}}).code(), Code::kInvalidArgument);
}

TEST_F(ControllerTest, AFailedCommitIsReportedAndActedOnOnlyOnceStored) {
  FifoQueue(1);
  data_->fail_commits = Unavailable("disk full");
  auto job = SubmitJson(SubmitRequest("a", "q"));
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), Code::kUnavailable);
  c_->Step();
  EXPECT_TRUE(exec_->started().empty());  // placed in memory, but nothing is acted on unstored
  EXPECT_EQ(data_->Count(store::Kind::kServiceJob), 0u);

  data_->fail_commits = Status::Ok();
  c_->Step();  // the kept turns are written with this one, then acted on
  EXPECT_EQ(data_->Count(store::Kind::kServiceJob), 1u);
  EXPECT_EQ(exec_->started(), std::vector<std::string>{"a"});
}

TEST_F(ControllerTest, DescribingAJobDoesNotWaitForACommitOfOtherJobs) {
  FifoQueue(0);  // nothing runs: only submissions change state
  const std::string a = Submit("a", "q");
  c_->Step();
  // While the turn that stores b commits, a reader on another thread describes a: it must be
  // answered before that commit ends (were it to wait for it, the wait below would time out).
  std::optional<JobStatus> seen;
  data_->during_commit = [&] {
    auto read = std::async(std::launch::async, [&] { return c_->ReadServiceJob(a, [&](const State& s) { return s.FindJob(a)->job.status; }); });
    if (read.wait_for(std::chrono::seconds(10)) == std::future_status::ready) seen = read.get();
  };
  const std::string b = Submit("b", "q");
  data_->during_commit = nullptr;
  ASSERT_FALSE(b.empty());
  ASSERT_TRUE(seen.has_value()) << "the describe of a waited for the commit of b";
  EXPECT_EQ(*seen, JobStatus::kRunnable);
}

TEST_F(ControllerTest, TimeLimitActionTerminatesAMisconfiguredJobAfterMaxTime) {
  ASSERT_TRUE(CreateEnvironment(EnvironmentRequest("e", 1)).ok());
  json action = {{"reason", "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"}, {"state", "RUNNABLE"},
                 {"maxTimeSeconds", 600}, {"action", "TERMINATE"}};
  ASSERT_TRUE(CreateQueue(QueueRequest("q", "e", {{"jobStateTimeLimitActions", {action}}})).ok());
  const std::string id = Submit("too-big", "q", json::object(), 2);
  c_->Step();
  EXPECT_EQ(c_->Read([&](const State& s) { return s.FindJob(id)->wait_code; }), "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE");
  EXPECT_EQ(StatusOf(id), JobStatus::kRunnable);

  clock_.advance_ms(599'000);  // not yet
  c_->Step();
  EXPECT_EQ(StatusOf(id), JobStatus::kRunnable);

  clock_.advance_ms(2'000);
  c_->Step();
  EXPECT_EQ(StatusOf(id), JobStatus::kFailed);

  // The outcome is durable: a new controller over the same store sees it.
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
  ASSERT_TRUE(CreateEnvironment(EnvironmentRequest("e", 1)).ok());
  auto make = [&](json action) { return CreateQueue(QueueRequest("q", "e", {{"jobStateTimeLimitActions", {action}}})); };
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

// The match key of a request's spec, decoded as the API edge decodes it.
std::string MatchKey(const json& request, const std::string& owner) {
  TrainingSpec spec;
  EXPECT_TRUE(DecodeTrainingSpec(request, &spec));
  return WarmPoolMatchKey(spec, owner);
}

TEST(WarmPoolRules, MatchKeyKeepsTheFormStoredPoolsHold) {
  // WarmPool::match_key is stored: a pool kept across an upgrade must still match.
  EXPECT_EQ(MatchKey(WarmRequest(), "arn:aws:iam::000000000000:user/a"),
            R"(["arn:aws:iam::000000000000:user/a","arn:aws:iam::000000000000:role/R","ml.m5.large",1,"",1,)"
            R"(["sg-1","sg-2"],["subnet-1"],false,false])");
}

TEST(WarmPoolRules, MatchKeyIgnoresHyperparametersKeepAliveAndListOrder) {
  json a = WarmRequest(), b = WarmRequest();
  b["HyperParameters"]["epochs"] = "7";
  b["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 60;
  b["VpcConfig"]["SecurityGroupIds"] = {"sg-2", "sg-1"};
  b["Environment"] = {{"X", "1"}};
  EXPECT_EQ(MatchKey(a, "u"), MatchKey(b, "u"));
}

TEST(WarmPoolRules, EveryMatchingCriterionSeparatesPools) {
  const std::string base = MatchKey(WarmRequest(), "arn:aws:iam::000000000000:user/a");
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
    EXPECT_NE(MatchKey(r, "arn:aws:iam::000000000000:user/a"), base) << "change " << i;
  }
}

// Whom a job's data is decided as (docs/security.md, "Jobs' data").
Principals TeamsWithARole() {
  Principals p;
  p.policies["data"] = {"data", "arn:aws:iam::000000000000:policy/data",
                        R"({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]})", "", 0};
  p.users["a"] = {"a", "arn:aws:iam::000000000000:user/a", "AIDAA", 0, {{"team", "a"}}, {"data"}};
  p.roles["trainer"] = {"trainer", "arn:aws:iam::000000000000:role/trainer", "AROAT", "", 0, {"data"}};
  return p;
}

TEST(JobPrincipal, RootsJobsAndThoseWithoutAnOwnerAreUnrestricted) {
  auto dir = BuildDirectory(TeamsWithARole());
  EXPECT_TRUE(JobPrincipalOf(*dir, "000000000000", "arn:aws:iam::000000000000:root", "", "j").unrestricted);
  EXPECT_TRUE(JobPrincipalOf(*dir, "000000000000", "", "arn:aws:iam::000000000000:role/trainer", "j").unrestricted);
}

TEST(JobPrincipal, AnExistingRoleIsTheJobsSessionElseTheSubmitter) {
  auto dir = BuildDirectory(TeamsWithARole());
  JobPrincipal role = JobPrincipalOf(*dir, "000000000000", "arn:aws:iam::000000000000:user/a",
                                     "arn:aws:iam::000000000000:role/trainer", "j");
  EXPECT_EQ(role.arn, "arn:aws:sts::000000000000:assumed-role/trainer/j");
  ASSERT_TRUE(role.entry);
  EXPECT_EQ(PrincipalKeysOf(role.entry.get(), role.arn, role.username).principal_arn, "arn:aws:iam::000000000000:role/trainer");
  // A role that does not exist (a RoleArn recorded before the server had roles): the submitter.
  JobPrincipal user = JobPrincipalOf(*dir, "000000000000", "arn:aws:iam::000000000000:user/a",
                                     "arn:aws:iam::000000000000:role/SageMakerRole", "j");
  EXPECT_EQ(user.arn, "arn:aws:iam::000000000000:user/a");
  EXPECT_EQ(user.username, "a");
  ASSERT_TRUE(user.entry);
  EXPECT_EQ(user.entry->documents.size(), 1u);
  // A submitter deleted since: no policies, so nothing is allowed.
  JobPrincipal gone = JobPrincipalOf(*dir, "000000000000", "arn:aws:iam::000000000000:user/gone", "", "j");
  EXPECT_FALSE(gone.unrestricted);
  EXPECT_FALSE(gone.entry);
}

TEST(WarmPoolRules, APoolMatchesOnlyJobsOfItsOwner) {
  // Same request, another submitter: the pool's workspaces hold what the first one's jobs left.
  EXPECT_NE(MatchKey(WarmRequest(), "arn:aws:iam::000000000000:user/c"),
            MatchKey(WarmRequest(), "arn:aws:iam::000000000000:user/a"));
}

TEST(WarmPoolRules, PoolsAreKeptAfterSuccessStopsAndAlgorithmErrorsOnly) {
  EXPECT_EQ(ClassifyPoolOutcome(TrainingJobStatus::kCompleted, "", true, StopCause::kNone), PoolOutcome::kKept);
  EXPECT_EQ(ClassifyPoolOutcome(TrainingJobStatus::kStopped, "", true, StopCause::kUser), PoolOutcome::kKept);
  EXPECT_EQ(ClassifyPoolOutcome(TrainingJobStatus::kStopped, "", false, StopCause::kUser), PoolOutcome::kNotStarted);
  EXPECT_EQ(ClassifyPoolOutcome(TrainingJobStatus::kStopped, "", true, StopCause::kPreempt), PoolOutcome::kPreempted);
  EXPECT_EQ(ClassifyPoolOutcome(TrainingJobStatus::kFailed, "AlgorithmError: exit 3", true, StopCause::kNone), PoolOutcome::kKept);
  EXPECT_EQ(ClassifyPoolOutcome(TrainingJobStatus::kFailed, "ClientError: no data", true, StopCause::kNone), PoolOutcome::kKept);
  EXPECT_EQ(ClassifyPoolOutcome(TrainingJobStatus::kFailed, "InternalServerError: lost", true, StopCause::kNone), PoolOutcome::kInfrastructure);
}

TEST(WarmPoolRules, ExpiryIsTheKeepAliveCappedAt28DaysFromCreation) {
  const EpochMs created = 1'000'000;
  // expiry = min(since + keep-alive, created + 28 d)
  EXPECT_EQ(WarmPoolExpiry(created + 5000, 600, created), created + 5000 + 600'000);
  const EpochMs late = created + kWarmPoolMaxLifetimeMs - 3'600'000;  // 1 h before the cap
  EXPECT_EQ(WarmPoolExpiry(late, 21600, created), created + kWarmPoolMaxLifetimeMs);
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

// A running attempt whose RoleArn names a role holds a session for it: minted at launch, refreshed
// as expiry nears, re-minted after a restart (sessions are never stored) and revoked at its end.
TEST_F(ControllerTest, ARunningJobHoldsASessionForItsRoleUntilItEnds) {
  FifoQueue(2);
  const std::string acct = c_->config().account_id;
  Submit("no-role", "q");  // the account has no role yet: RoleArn is only recorded
  c_->Step();
  EXPECT_FALSE(c_->role_sessions().Current("no-role", acct, clock_.now_ms()));

  ASSERT_TRUE(c_->CreateRole({"R", "", "AROA00000000000000001"}).ok());
  Submit("a", "q");
  c_->Step();
  ASSERT_EQ(exec_->started().back(), "a");
  auto first = c_->role_sessions().Current("a", acct, clock_.now_ms());
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->access_key_id.starts_with("ASIA")) << first->access_key_id;
  EXPECT_EQ(first->access_key_id.size(), 20u);
  EXPECT_EQ(first->principal_arn, "arn:aws:sts::" + acct + ":assumed-role/R/a");
  EXPECT_EQ(first->expires, clock_.now_ms() + kRoleSessionMs);
  EXPECT_FALSE(first->token.empty());
  // Never stored: no document of the store holds the secret or the token.
  {
    std::lock_guard lock(data_->mu);
    for (const auto& [kind, docs] : data_->docs)
      for (const auto& [key, doc] : docs) {
        EXPECT_EQ(doc.find(first->secret), std::string::npos) << key;
        EXPECT_EQ(doc.find(first->token), std::string::npos) << key;
      }
  }

  Run("a");
  clock_.advance_ms(kRoleSessionMs - kRefreshBeforeMs + 1);  // less than the refresh margin left
  auto second = c_->role_sessions().Current("a", acct, clock_.now_ms());
  ASSERT_TRUE(second);
  EXPECT_NE(second->access_key_id, first->access_key_id);
  EXPECT_TRUE(c_->role_sessions().Find(first->access_key_id)) << "the old one is good until it expires";

  Open();  // a restart: the running attempt is re-adopted and gets a fresh session
  ASSERT_EQ(exec_->adopted(), (std::vector<std::string>{"no-role", "a"}));
  auto adopted = c_->role_sessions().Current("a", acct, clock_.now_ms());
  ASSERT_TRUE(adopted);
  EXPECT_FALSE(c_->role_sessions().Find(second->access_key_id));

  Exit("a", 0);
  EXPECT_FALSE(c_->role_sessions().Find(adopted->access_key_id)) << "revoked when the attempt ended";
  EXPECT_FALSE(c_->role_sessions().Current("a", acct, clock_.now_ms()));
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

// A fair-share pass reads each share's RUNNABLE jobs from an index in dispatch order
// (State::runnable_by_share) instead of sorting them all: a priority update moves a job within
// it, and a job that leaves RUNNABLE leaves it.
TEST_F(ControllerTest, AFairShareQueueStartsByTheIndexedDispatchOrder) {
  ASSERT_TRUE(CreateEnvironment(EnvironmentRequest("e", 1)).ok());
  auto policy = CreatePolicy(json{{"name", "fs"}, {"fairsharePolicy", {{"shareDecaySeconds", 60}}}});
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  ASSERT_TRUE(CreateQueue(QueueRequest("q", "e", {{"schedulingPolicyArn", policy->arn}})).ok());
  auto share = [](int priority) { return json{{"shareIdentifier", "A"}, {"schedulingPriority", priority}}; };
  Submit("hold", "q", share(0));
  c_->Step();                   // admitted; the queue was idle, so its arrival batch is open
  clock_.advance_ms(1000);      // ([scheduler] batch_ms)
  c_->Step();
  Run("hold");
  ASSERT_EQ(exec_->started(), std::vector<std::string>{"hold"});

  const std::string a = Submit("a", "q", share(1));
  const std::string b = Submit("b", "q", share(5));
  Submit("c", "q", share(3));
  c_->Step();  // all three RUNNABLE: b (5), c (3), a (1)
  auto update = api::DecodeUpdateServiceJob(json{{"jobId", a}, {"schedulingPriority", 9}});
  ASSERT_TRUE(update.ok());
  ASSERT_TRUE(c_->UpdateServiceJob(*update).ok());  // a (9), b (5), c (3)
  auto terminate = api::DecodeTerminateServiceJob(json{{"jobId", b}, {"reason", "not needed"}});
  ASSERT_TRUE(terminate.ok());
  ASSERT_TRUE(c_->TerminateServiceJob(*terminate).ok());  // a (9), c (3)
  EXPECT_EQ(StatusOf(b), JobStatus::kFailed);

  Exit("hold", 0);
  EXPECT_EQ(StatusOf(a), JobStatus::kScheduled);
  Run("a");
  Exit("a", 0);
  EXPECT_EQ(exec_->started(), (std::vector<std::string>{"hold", "a", "c"}));
  // Nothing RUNNABLE is left, and neither is any entry of the index.
  EXPECT_TRUE(c_->Read([](const State& s) { return s.runnable_by_share.empty(); }));
}

// A quota share of one instance, held by a running job; `share` adds to the share's request.
class QuotaQueueTest : public ControllerTest {
 protected:
  void QuotaQueue(int64_t instances, const std::string& strategy) {
    ASSERT_TRUE(CreatePolicy(json{{"name", "p"}, {"quotaSharePolicy", {{"idleResourceAssignmentStrategy", "FIFO"}}}}).ok());
    ASSERT_TRUE(CreateEnvironment(EnvironmentRequest("e", instances, "ml.m5.large")).ok());
    ASSERT_TRUE(CreateQueue(QueueRequest("q", "e", {{"schedulingPolicyArn", c_->Arn("batch", "scheduling-policy/p")}})).ok());
    ASSERT_TRUE(CreateQuotaShare(json{{"jobQueue", "q"}, {"quotaShareName", "S"},
                                      {"capacityLimits", {{{"capacityUnit", "ml.m5.large"}, {"maxCapacity", instances}}}},
                                      {"resourceSharingConfiguration", {{"strategy", strategy}}},
                                      {"preemptionConfiguration", {{"inSharePreemption", "DISABLED"}}}}).ok());
  }
  // The reason a describing client reads, and whether the last quota pass wrote it on the job itself.
  std::pair<std::string, bool> WaitOf(const std::string& id) {
    return c_->Read([&](const State& s) {
      const ServiceJobState* js = s.FindJob(id);
      return std::make_pair(s.WaitReasonOf(*js), js->reason_pass == s.quota_passes);
    });
  }
};

TEST_F(QuotaQueueTest, AQuotaPassOffersOnlyWhatTheClusterReportsAndPreemptsNothingWhenItShrinks) {
  QuotaQueue(2, "RESERVE");
  exec_->SetCapacity(Cluster(2));
  Submit("a", "q", {{"quotaShareName", "S"}});
  Submit("b", "q", {{"quotaShareName", "S"}});
  const std::string c = Submit("c", "q", {{"quotaShareName", "S"}});
  c_->Step();
  c_->Step();
  ASSERT_EQ(exec_->started(), (std::vector<std::string>{"a", "b"}));
  Run("a");
  Run("b");

  exec_->SetCapacity(Cluster(1));  // a node went down under them
  c_->Step();
  c_->Step();
  EXPECT_TRUE(exec_->stopped().empty());
  Exit("a", 0);  // share: 1 of 2 held, but the cluster holds 1 in all
  c_->Step();
  EXPECT_EQ(exec_->started(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(StatusOf(c), JobStatus::kRunnable);

  exec_->SetCapacity(Cluster(2));
  c_->Step();
  c_->Step();
  EXPECT_EQ(exec_->started(), (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(QuotaQueueTest, APassOffersAFewJobsOfAClassAndTheRestWaitForTheSameReason) {
  QuotaQueue(1, "RESERVE");
  Submit("hold", "q", {{"quotaShareName", "S"}});
  c_->Step();
  Run("hold");
  std::vector<std::string> ids;
  for (int k = 0; k < 300; ++k) ids.push_back(Submit("j" + std::to_string(k), "q", {{"quotaShareName", "S"}}));
  c_->Step();  // admitted; one pass

  const std::string at_quota = "waiting: share 'S' is at its quota (1 of 1 ml.m5.large)";
  auto [first, first_offered] = WaitOf(ids.front());
  EXPECT_EQ(first, at_quota);
  EXPECT_TRUE(first_offered);
  // Far behind what could start: not offered, and explained as the last job of its class offered.
  auto [last, last_offered] = WaitOf(ids.back());
  EXPECT_EQ(last, at_quota);
  EXPECT_FALSE(last_offered);

  // The instance comes back: the first job in submit order takes it, the rest still say why they wait.
  clock_.advance_ms(1000);
  Exit("hold", 0);
  EXPECT_EQ(StatusOf(ids.front()), JobStatus::kScheduled);
  for (size_t k = 1; k < ids.size(); ++k) ASSERT_EQ(StatusOf(ids[k]), JobStatus::kRunnable) << k;
  EXPECT_EQ(WaitOf(ids.back()).first, at_quota);
}

TEST_F(QuotaQueueTest, EveryJobOfAClassThatCanNeverRunSaysSo) {
  QuotaQueue(1, "RESERVE");
  std::vector<std::string> ids;
  for (int k = 0; k < 250; ++k) ids.push_back(Submit("big" + std::to_string(k), "q", {{"quotaShareName", "S"}}, 2));
  c_->Step();
  for (size_t k = 0; k < ids.size(); ++k) {
    auto [status_reason, code] = c_->Read([&](const State& s) {
      const ServiceJobState* js = s.FindJob(ids[k]);
      return std::make_pair(js->job.status_reason, js->wait_code);
    });
    // Two instances in an environment of one: as AWS says of a job above the environment's limit.
    ASSERT_EQ(status_reason.rfind("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - ", 0), 0u) << k << status_reason;
    ASSERT_EQ(code, "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE") << k;
  }
}

TEST_F(QuotaQueueTest, ADisabledQueueExplainsEveryWaitingJob) {
  QuotaQueue(1, "RESERVE");
  Submit("hold", "q", {{"quotaShareName", "S"}});
  c_->Step();
  Run("hold");
  std::vector<std::string> ids;
  for (int k = 0; k < 200; ++k) ids.push_back(Submit("j" + std::to_string(k), "q", {{"quotaShareName", "S"}}));
  c_->Step();
  auto update = api::DecodeUpdateJobQueue(json{{"jobQueue", "q"}, {"state", "DISABLED"}});
  ASSERT_TRUE(update.ok()) << update.status().message();
  ASSERT_TRUE(c_->UpdateJobQueue(*update).ok());
  c_->Step();
  for (const std::string& id : {ids.front(), ids.back()})
    EXPECT_EQ(WaitOf(id).first, "the job queue or its service environment is disabled");
}

}  // namespace

}  // namespace ty::control
