// Container jobs stepped turn by turn on in-memory ports with a fake executor: an array's children
// exist only as they are released, and what a restart reloads counts them the same.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/decode.h"
#include "control/controller.h"
#include "testing/controller_fixture.h"
#include "testing/fakes.h"

namespace ty::control {
namespace {

using nlohmann::json;

class ContainerJobsTest : public testing::ControllerFixture {
 protected:
  ContainerJobsTest() : ControllerFixture("container-jobs") {}

  void SetUpQueue(int vcpus) {
    auto ce = api::DecodeCreateComputeEnvironment(
        {{"computeEnvironmentName", "ce"}, {"type", "MANAGED"}, {"computeResources", {{"maxvCpus", vcpus}}}});
    ASSERT_TRUE(ce.ok()) << ce.status().message();
    ASSERT_TRUE(c_->CreateComputeEnvironment(*ce).ok());
    auto q = api::DecodeCreateJobQueue({{"jobQueueName", "jq"}, {"priority", 1},
                                        {"computeEnvironmentOrder", {{{"order", 1}, {"computeEnvironment", "ce"}}}}});
    ASSERT_TRUE(q.ok()) << q.status().message();
    ASSERT_TRUE(c_->CreateJobQueue(*q).ok());
    json resources = json::array({{{"type", "VCPU"}, {"value", "1"}}, {{"type", "MEMORY"}, {"value", "64"}}});
    json props = {{"image", "busybox"}, {"command", json::array({"true"})}, {"resourceRequirements", resources}};
    auto d = api::DecodeRegisterJobDefinition({{"jobDefinitionName", "d"}, {"type", "container"}, {"containerProperties", props}});
    ASSERT_TRUE(d.ok()) << d.status().message();
    ASSERT_TRUE(c_->RegisterJobDefinition(*d).ok());
  }

  std::string SubmitArray(int64_t size) {
    auto cmd = api::DecodeSubmitJob({{"jobName", "arr"}, {"jobQueue", "jq"}, {"jobDefinition", "d"},
                                     {"arrayProperties", {{"size", size}}}});
    EXPECT_TRUE(cmd.ok()) << cmd.status().message();
    auto job = c_->SubmitJob(*cmd);
    EXPECT_TRUE(job.ok()) << job.status().message();
    return job->id;
  }

  std::map<JobStatus, int64_t> Summary(const std::string& id) {
    return c_->Read([&](const State& s) { return Controller::ArrayStatusSummary(s, *s.FindContainerJob(id)); });
  }
  size_t Records() {
    return c_->Read([](const State& s) { return s.container_jobs.size(); });
  }
};

TEST_F(ContainerJobsTest, ArrayChildrenAreMadeOnlyAsTheyStart) {
  SetUpQueue(2);
  const std::string parent = SubmitArray(10000);
  EXPECT_EQ(Records(), 1u);  // acknowledged: the parent alone
  c_->Step();                // admitted and placed: two vCPUs, two children
  const std::vector<std::string> first = exec_->started();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(Records(), 3u);
  EXPECT_EQ(Summary(parent), (std::map<JobStatus, int64_t>{{JobStatus::kStarting, 2}, {JobStatus::kRunnable, 9998}}));
  for (const auto& a : first) exec_->Push(a, exec::Phase::kExited, clock_.now_ms());
  c_->Step();
  EXPECT_EQ(exec_->started().size(), 4u);
  EXPECT_EQ(Records(), 5u);
  EXPECT_EQ(Summary(parent), (std::map<JobStatus, int64_t>{
                                 {JobStatus::kStarting, 2}, {JobStatus::kSucceeded, 2}, {JobStatus::kRunnable, 9996}}));
}

TEST_F(ContainerJobsTest, ARestartCountsTheChildrenTheSame) {
  SetUpQueue(1);
  const std::string parent = SubmitArray(5);
  c_->Step();
  ASSERT_EQ(exec_->started().size(), 1u);
  const auto before = Summary(parent);
  Open();  // reloaded from the same store; the running child is re-adopted
  EXPECT_EQ(Summary(parent), before);
  EXPECT_EQ(Records(), 2u);
  c_->Step();
  EXPECT_TRUE(exec_->started().empty());  // the one vCPU is still held by the adopted child
}

// jobRoleArn is judged at each start on the owner's policies as they are then: an array child
// started after the owner lost iam:PassRole on the role fails, naming it, and gets no credentials.
TEST_F(ContainerJobsTest, AChildStartedAfterItsOwnerLostPassRoleFails) {
  SetUpQueue(1);
  ASSERT_TRUE(c_->CreateRole({"R", "", "AROA00000000000000001"}).ok());
  ASSERT_TRUE(c_->CreatePolicy({"pass-r", R"({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "iam:PassRole", "Resource": "arn:aws:iam::000000000000:role/R"}]})", ""}).ok());
  ASSERT_TRUE(c_->CreateUser({"u", {}, "AIDA00000000000000001"}).ok());
  ASSERT_TRUE(c_->AttachPolicy({"u", "pass-r"}).ok());
  json resources = json::array({{{"type", "VCPU"}, {"value", "1"}}, {{"type", "MEMORY"}, {"value", "64"}}});
  json props = {{"image", "busybox"}, {"command", json::array({"true"})}, {"resourceRequirements", resources},
                {"jobRoleArn", "arn:aws:iam::000000000000:role/R"}};
  auto d = api::DecodeRegisterJobDefinition({{"jobDefinitionName", "r"}, {"type", "container"}, {"containerProperties", props}});
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_TRUE(c_->RegisterJobDefinition(*d).ok());
  auto cmd = api::DecodeSubmitJob({{"jobName", "arr"}, {"jobQueue", "jq"}, {"jobDefinition", "r"}, {"arrayProperties", {{"size", 2}}}});
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  cmd->owner = "arn:aws:iam::000000000000:user/u";
  auto job = c_->SubmitJob(*cmd);
  ASSERT_TRUE(job.ok()) << job.status().message();
  c_->Step();
  const std::vector<std::string> first = exec_->started();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(c_->role_sessions().size(), 1u) << "allowed: the first child holds a session";
  ASSERT_TRUE(c_->AttachPolicy({"u", "pass-r", /*attach=*/false}).ok());
  exec_->Push(first[0], exec::Phase::kExited, clock_.now_ms());
  for (int i = 0; i < 3; ++i) c_->Step();
  EXPECT_EQ(exec_->started(), first) << "the second child is never started";
  EXPECT_EQ(c_->role_sessions().size(), 0u);
  EXPECT_EQ(Summary(job->id), (std::map<JobStatus, int64_t>{{JobStatus::kSucceeded, 1}, {JobStatus::kFailed, 1}}));
  const std::string reason = c_->Read([&](const State& s) { return s.FindContainerJob(job->id + ":1")->status_reason; });
  EXPECT_NE(reason.find("iam:PassRole on resource: arn:aws:iam::000000000000:role/R"), std::string::npos) << reason;
}

// The pass proposes the array again after its first child; the next child waits for it
// (SEQUENTIAL), so the controller skips the array and the job behind it gets the room.
TEST_F(ContainerJobsTest, AChildThatWaitsForItsPredecessorLetsTheJobBehindStart) {
  SetUpQueue(4);
  auto array = api::DecodeSubmitJob({{"jobName", "seq"}, {"jobQueue", "jq"}, {"jobDefinition", "d"},
                                     {"arrayProperties", {{"size", 3}}}, {"dependsOn", {{{"type", "SEQUENTIAL"}}}}});
  ASSERT_TRUE(array.ok()) << array.status().message();
  auto parent = c_->SubmitJob(*array);
  ASSERT_TRUE(parent.ok()) << parent.status().message();
  auto single = api::DecodeSubmitJob({{"jobName", "one"}, {"jobQueue", "jq"}, {"jobDefinition", "d"}});
  ASSERT_TRUE(single.ok()) << single.status().message();
  auto behind = c_->SubmitJob(*single);
  ASSERT_TRUE(behind.ok()) << behind.status().message();
  c_->Step();
  ASSERT_EQ(exec_->started().size(), 2u);
  EXPECT_EQ(Summary(parent->id), (std::map<JobStatus, int64_t>{{JobStatus::kStarting, 1}, {JobStatus::kRunnable, 2}}));
  EXPECT_EQ(c_->Read([&](const State& s) { return s.FindContainerJob(behind->id)->status; }), JobStatus::kStarting);
  c_->Step();  // nothing has ended: still one child, and no child made for nothing
  EXPECT_EQ(exec_->started().size(), 2u);
  EXPECT_EQ(Records(), 3u);
}

}  // namespace
}  // namespace ty::control
