// The operation -> IAM action / resource mapping (api/authorize.h), and checks against a
// controller on the in-memory ports: users and keys are committed and survive a restart; the
// three-team policies of docs/security.md decide Submit, Describe, Terminate and List filtering.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <set>
#include <tuple>
#include <nlohmann/json.hpp>

#include "api/authorize.h"
#include "api/operations.h"
#include "api/service_model.h"
#include "control/controller.h"
#include "core/strings.h"
#include "testing/controller_fixture.h"
#include "testing/fakes.h"

namespace ty::api {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The access column of every row is well formed (tests/unit/operations_test.cpp checks the rows
// against the models and the docs).
TEST(OperationAccess, ListCallsNameTheirItemsAndADescribeAction) {
  for (const OperationTable* table : AllOperationTables())
    for (const Operation& row : table->rows()) {
      const OperationAccess& a = row.access;
      EXPECT_EQ(a.list_member.empty(), a.item_action.empty()) << row.name;
      EXPECT_EQ(a.list_member.empty(), a.item == ResourceKind::kNone) << row.name;
      if (!a.item_action.empty()) {
        EXPECT_NE(a.item_action.find(':'), std::string_view::npos) << row.name;
        EXPECT_FALSE(a.item_name.empty() && a.item_arn.empty()) << row.name << ": its items name no resource";
      }
      if (a.resource != ResourceKind::kNone) {
        EXPECT_FALSE(a.field.empty()) << row.name;
      }
      EXPECT_EQ(FindOperationAccess(table->api(), row.name), &a) << row.name;
    }
  EXPECT_EQ(FindOperationAccess(Api::kBatch, "NoSuchOperation"), nullptr);
  EXPECT_EQ(ActionPrefix(Api::kEvents), "events");
}

constexpr const char* kTeamPolicy = R"({"Version": "2012-10-17", "Statement": [
  {"Sid": "SubmitToOwnShare", "Effect": "Allow", "Action": ["batch:SubmitServiceJob"],
   "Resource": ["arn:aws:batch:*:*:job-queue/shared", "arn:aws:batch:*:*:service-job/*"],
   "Condition": {"StringEquals": {"batch:ShareIdentifier": "${aws:PrincipalTag/team}"}}},
  {"Sid": "DescribeOwnJobs", "Effect": "Allow",
   "Action": ["batch:DescribeServiceJob", "batch:ListServiceJobs", "sagemaker:Describe*"], "Resource": "*",
   "Condition": {"StringEqualsIfExists": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
  {"Sid": "TerminateOwnJobs", "Effect": "Allow", "Action": "batch:TerminateServiceJob",
   "Resource": "arn:aws:batch:*:*:service-job/*",
   "Condition": {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}}]})";
constexpr const char* kGuardRail = R"({"Version": "2012-10-17", "Statement": [
  {"Sid": "DenyTerminateOthers", "Effect": "Deny",
   "Action": ["batch:TerminateServiceJob", "sagemaker:StopTrainingJob"], "Resource": "*",
   "Condition": {"StringNotEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}}]})";
constexpr const char* kOwnerOnly = R"({"Version": "2012-10-17", "Statement": [
  {"Effect": "Allow", "Action": "batch:DescribeServiceJob", "Resource": "*",
   "Condition": {"StringEquals": {"trainyard:JobOwner": "${aws:PrincipalArn}"}}}]})";

constexpr const char* kDataPolicy = R"({"Version": "2012-10-17", "Statement": [
  {"Effect": "Allow", "Action": "s3:*", "Resource": ["arn:aws:s3:::bucket", "arn:aws:s3:::bucket/*"]}]})";

class AuthorizerTest : public testing::ControllerFixture {
 protected:
  AuthorizerTest() : ControllerFixture("authorize") {}
  void SetUp() override {
    ControllerFixture::SetUp();
    ASSERT_TRUE(c_->CreatePolicy({"team", kTeamPolicy, ""}).ok());
    ASSERT_TRUE(c_->CreatePolicy({"guard-rail", kGuardRail, ""}).ok());
    ASSERT_TRUE(c_->CreatePolicy({"owner-only", kOwnerOnly, ""}).ok());
    // The jobs' output bucket: a job's data is checked as its submitter (no role exists here).
    ASSERT_TRUE(c_->CreatePolicy({"data", kDataPolicy, ""}).ok());
    for (const char* team : {"a", "b"}) {
      std::string user = std::string("member-") + team;
      ASSERT_TRUE(c_->CreateUser({user, {{"team", team}}, "AIDA0000000000000000" + std::string(team)}).ok());
      ASSERT_TRUE(c_->AttachPolicy({user, "team"}).ok());
      ASSERT_TRUE(c_->AttachPolicy({user, "data"}).ok());
      ASSERT_TRUE(c_->AttachPolicy({user, "guard-rail"}).ok());
      ASSERT_TRUE(c_->CreateAccessKey({user, std::string("AKIATEAM00000000000") + team, std::string(40, team[0])}).ok());
    }
  }
  Principal As(const std::string& user) {
    auto dir = c_->directory();
    auto it = dir->users.find(user);
    EXPECT_NE(it, dir->users.end()) << user;
    Principal p;
    p.type = Principal::Type::kUser;
    p.arn = it->second->user.arn;
    p.name = user;
    p.entry = it->second;
    return p;
  }
  std::string SubmitAs(const std::string& user, const std::string& share) {
    json req = {{"jobName", "j-" + share}, {"jobQueue", "shared"}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                {"shareIdentifier", share}, {"tags", {{"team", share}}},
                {"serviceRequestPayload",
                 json{{"TrainingJobName", "j-" + share + std::to_string(++jobs_)},
                      {"RoleArn", "arn:aws:iam::000000000000:role/R"},
                      {"AlgorithmSpecification", {{"TrainingImage", "x"}, {"TrainingInputMode", "File"}, {"ContainerEntrypoint", {"true"}}}},
                      {"OutputDataConfig", {{"S3OutputPath", "s3://bucket/out"}}},
                      {"ResourceConfig", {{"InstanceType", "ml.m5.large"}, {"InstanceCount", 1}, {"VolumeSizeInGB", 1}}},
                      {"StoppingCondition", {{"MaxRuntimeInSeconds", 3600}}}}
                     .dump()}};
    Status allowed = authz().Check(As(user), ctx(), Api::kBatch, "SubmitServiceJob", req);
    if (!allowed.ok()) return "denied: " + allowed.message();
    auto out = BatchOperations().Serve(*c_, "SubmitServiceJob", req, As(user).arn);
    EXPECT_TRUE(out.ok()) << out.status().message();
    return out.ok() ? (*out)["jobId"].get<std::string>() : "";
  }
  void MakeSharedQueue() {
    ASSERT_TRUE(BatchOperations().Serve(*c_, "CreateSchedulingPolicy", {{"name", "fair"}, {"fairsharePolicy", json::object()}}).ok());
    ASSERT_TRUE(BatchOperations().Serve(*c_, "CreateServiceEnvironment",
                            {{"serviceEnvironmentName", "env"}, {"serviceEnvironmentType", "SAGEMAKER_TRAINING"},
                             {"capacityLimits", {{{"capacityUnit", "NUM_INSTANCES"}, {"maxCapacity", 4}}}}})
                    .ok());
    ASSERT_TRUE(BatchOperations().Serve(*c_, "CreateJobQueue",
                            {{"jobQueueName", "shared"}, {"jobQueueType", "SAGEMAKER_TRAINING"}, {"priority", 1},
                             {"schedulingPolicyArn", c_->Arn("batch", "scheduling-policy/fair")},
                             {"serviceEnvironmentOrder", {{{"order", 1}, {"serviceEnvironment", "env"}}}}})
                    .ok());
  }
  Authorizer authz() { return Authorizer(*c_); }
  CallContext ctx() { return {"127.0.0.1", false, clock_.now_ms()}; }

  int jobs_ = 0;
};

TEST_F(AuthorizerTest, KeysAndPoliciesAreCommittedAndSurviveARestart) {
  Open();
  auto dir = c_->directory();
  ASSERT_EQ(dir->keys.count("AKIATEAM00000000000a"), 1u);
  EXPECT_EQ(dir->keys.find("AKIATEAM00000000000a")->second.secret, std::string(40, 'a'));
  EXPECT_EQ(dir->keys.find("AKIATEAM00000000000a")->second.principal->user.name, "member-a");
  EXPECT_EQ(dir->users.at("member-a")->policies.size(), 3u);
  EXPECT_EQ(dir->users.at("member-a")->user.tags.at("team"), "a");
}

TEST_F(AuthorizerTest, ADeletedKeyLeavesTheDirectoryWhenAcknowledged) {
  ASSERT_TRUE(c_->DeleteAccessKey("member-a", "AKIATEAM00000000000a").ok());
  EXPECT_EQ(c_->directory()->keys.count("AKIATEAM00000000000a"), 0u);
  EXPECT_EQ(c_->DeleteAccessKey("member-b", "AKIATEAM00000000000a").code(), Code::kNotFound);
  Open();
  EXPECT_EQ(c_->directory()->keys.count("AKIATEAM00000000000a"), 0u);
}

TEST_F(AuthorizerTest, AUserWithKeysOrPoliciesCannotBeDeleted) {
  EXPECT_EQ(c_->DeleteUser("member-a").code(), Code::kFailedPrecondition);
  EXPECT_EQ(c_->DeletePolicy("team").code(), Code::kFailedPrecondition);
  EXPECT_EQ(c_->CreateAccessKey({"member-a", "AKIATEAM0000000000a2", std::string(40, 'x')}).status().code(), Code::kOk);
  // IAM's two keys per user.
  EXPECT_EQ(c_->CreateAccessKey({"member-a", "AKIATEAM0000000000a3", std::string(40, 'y')}).status().code(),
            Code::kLimitExceeded);
}

TEST_F(AuthorizerTest, SubmitIsAllowedOnlyToTheCallersShare) {
  MakeSharedQueue();
  EXPECT_EQ(SubmitAs("member-a", "a").rfind("denied", 0), std::string::npos);
  EXPECT_EQ(SubmitAs("member-a", "b"),
            "denied: User: arn:aws:iam::000000000000:user/member-a is not authorized to perform: "
            "batch:SubmitServiceJob on resource: arn:aws:batch:us-east-1:000000000000:job-queue/shared because no "
            "identity-based policy allows the batch:SubmitServiceJob action");
}

// The request a submit carries is parsed once, by the request path (ParseCarried), and that parse
// is what both authorization and the handler read: Check takes it, and never parses the text again.
TEST_F(AuthorizerTest, ASubmitsPayloadIsAuthorizedAsTheRequestPathParsedIt) {
  MakeSharedQueue();
  ASSERT_TRUE(c_->CreatePolicy({"small-jobs", R"({"Version": "2012-10-17", "Statement": [
    {"Sid": "AtMostFour", "Effect": "Deny", "Action": "batch:SubmitServiceJob", "Resource": "*",
     "Condition": {"NumericGreaterThan": {"trainyard:InstanceCount": "4"}}}]})", ""}).ok());
  ASSERT_TRUE(c_->AttachPolicy({"member-a", "small-jobs"}).ok());
  const json req = {{"jobName", "j"}, {"jobQueue", "shared"}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                    {"shareIdentifier", "a"},
                    {"serviceRequestPayload", json{{"ResourceConfig", {{"InstanceCount", 1}}}}.dump()}};
  const Operation* submit = BatchOperations().Find("SubmitServiceJob");
  ASSERT_NE(submit, nullptr);
  const json parsed = ParseCarried(submit, req);
  EXPECT_EQ(parsed, (json{{"ResourceConfig", {{"InstanceCount", 1}}}}));
  EXPECT_TRUE(authz().Check(As("member-a"), ctx(), Api::kBatch, "SubmitServiceJob", req, parsed).ok());
  // Handed another parse than the text's, Check reads the parse: trainyard:InstanceCount is 8.
  const json eight = {{"ResourceConfig", {{"InstanceCount", 8}}}};
  Status denied = authz().Check(As("member-a"), ctx(), Api::kBatch, "SubmitServiceJob", req, eight);
  EXPECT_EQ(denied.code(), Code::kAccessDenied) << denied.message();
  // A payload that is not a JSON object carries nothing (the handler refuses it, naming the member).
  EXPECT_TRUE(ParseCarried(submit, {{"serviceRequestPayload", "[1]"}}).is_null());
  EXPECT_TRUE(ParseCarried(BatchOperations().Find("SubmitJob"), req).is_null());
}

TEST_F(AuthorizerTest, JobsAreDescribedAndTerminatedByTheirTeamOnly) {
  MakeSharedQueue();
  const std::string job_a = SubmitAs("member-a", "a");
  const json req = {{"jobId", job_a}};
  EXPECT_TRUE(authz().Check(As("member-a"), ctx(), Api::kBatch, "DescribeServiceJob", req).ok());
  Status other = authz().Check(As("member-b"), ctx(), Api::kBatch, "DescribeServiceJob", req);
  EXPECT_EQ(other.code(), Code::kAccessDenied);
  EXPECT_NE(other.message().find("service-job/" + job_a), std::string::npos) << other.message();
  Status stop = authz().Check(As("member-b"), ctx(), Api::kBatch, "TerminateServiceJob", {{"jobId", job_a}, {"reason", "x"}});
  EXPECT_EQ(stop.code(), Code::kAccessDenied);
  EXPECT_NE(stop.message().find("with an explicit deny in an identity-based policy: guard-rail"), std::string::npos)
      << stop.message();
  // A job ARN given as jobId is the same resource.
  json by_arn = {{"jobId", c_->Arn("batch", "service-job/" + job_a)}};
  EXPECT_EQ(authz().Check(As("member-b"), ctx(), Api::kBatch, "DescribeServiceJob", by_arn).code(), Code::kAccessDenied);
  // The training job of an attempt carries its service job's team tag.
  std::vector<AccessDecision> audit;
  EXPECT_TRUE(authz().Check(As("member-a"), ctx(), Api::kBatch, "TerminateServiceJob", {{"jobId", job_a}}, &audit).ok());
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].policy, "team");
  EXPECT_EQ(audit[0].statement, "TerminateOwnJobs");
  EXPECT_TRUE(audit[0].allowed);
}

TEST_F(AuthorizerTest, ListsKeepOnlyWhatTheCallerMayDescribe) {
  MakeSharedQueue();
  const std::string job_a = SubmitAs("member-a", "a");
  const std::string job_b = SubmitAs("member-b", "b");
  // A reply as ListServiceJobs gives it (the filter places each item by its jobId).
  auto list = std::optional<json>(json{{"jobSummaryList", {{{"jobId", job_a}, {"jobArn", "x"}}, {{"jobId", job_b}}}}});
  json reply = *list;
  authz().FilterReply(As("member-b"), ctx(), Api::kBatch, "ListServiceJobs", &reply);
  ASSERT_EQ(reply["jobSummaryList"].size(), 1u);
  EXPECT_EQ(reply["jobSummaryList"][0]["jobId"], job_b);
  json all = *list;
  authz().FilterReply(Principal::Root("000000000000", "AKIAROOT"), ctx(), Api::kBatch, "ListServiceJobs", &all);
  EXPECT_EQ(all["jobSummaryList"].size(), 2u);
}

TEST_F(AuthorizerTest, TheSubmitterIsTheJobOwner) {
  MakeSharedQueue();
  ASSERT_TRUE(c_->AttachPolicy({"member-b", "owner-only"}).ok());
  ASSERT_TRUE(c_->AttachPolicy({"member-b", "team", false}).ok());
  const std::string job_b = SubmitAs("member-a", "a");  // submitted by a, tagged a
  EXPECT_EQ(authz().Check(As("member-b"), ctx(), Api::kBatch, "DescribeServiceJob", {{"jobId", job_b}}).code(),
            Code::kAccessDenied);
  ASSERT_TRUE(c_->AttachPolicy({"member-a", "owner-only"}).ok());
  ASSERT_TRUE(c_->AttachPolicy({"member-a", "team", false}).ok());
  EXPECT_TRUE(authz().Check(As("member-a"), ctx(), Api::kBatch, "DescribeServiceJob", {{"jobId", job_b}}).ok());
}

TEST_F(AuthorizerTest, TheCallsConditionKeysReachThePolicy) {
  // Allowed from 10.0.0.0/8 only, to a user named in the resource, before a date.
  constexpr const char* kScoped = R"({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "trainyard:ListAccessKeys", "Resource": "arn:aws:iam::*:user/${aws:username}",
     "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}, "Bool": {"aws:SecureTransport": "false"},
                   "DateLessThan": {"aws:CurrentTime": "2027-01-01T00:00:00Z"}}}]})";
  ASSERT_TRUE(c_->CreatePolicy({"scoped", kScoped, ""}).ok());
  ASSERT_TRUE(c_->AttachPolicy({"member-a", "scoped"}).ok());
  const json own = {{"UserName", "member-a"}};
  CallContext inside{"10.1.2.3", false, 1'790'000'000'000};  // 2026-09-21
  EXPECT_TRUE(authz().Check(As("member-a"), inside, Api::kTrainyard, "ListAccessKeys", own).ok());
  EXPECT_EQ(authz().Check(As("member-a"), inside, Api::kTrainyard, "ListAccessKeys", {{"UserName", "member-b"}}).code(),
            Code::kAccessDenied);
  CallContext outside = inside;
  outside.source_ip = "192.168.1.1";
  EXPECT_EQ(authz().Check(As("member-a"), outside, Api::kTrainyard, "ListAccessKeys", own).code(), Code::kAccessDenied);
  CallContext later = inside;
  later.now = 1'800'000'000'000;  // 2027-01-15
  EXPECT_EQ(authz().Check(As("member-a"), later, Api::kTrainyard, "ListAccessKeys", own).code(), Code::kAccessDenied);
}

TEST_F(AuthorizerTest, RootIsAllowedEverythingAndAnUnmappedOperationNobodyElse) {
  Principal root = Principal::Root("000000000000", "AKIAROOT");
  EXPECT_TRUE(authz().Check(root, ctx(), Api::kBatch, "DeleteJobQueue", {{"jobQueue", "x"}}).ok());
  EXPECT_TRUE(authz().Check(root, ctx(), Api::kBatch, "NoSuchOperation", json::object()).ok());
  EXPECT_EQ(authz().Check(As("member-a"), ctx(), Api::kBatch, "NoSuchOperation", json::object()).code(),
            Code::kAccessDenied);
  EXPECT_EQ(authz().Check(As("member-a"), ctx(), Api::kTrainyard, "CreateUser", {{"UserName", "x"}}).code(),
            Code::kAccessDenied);
}

// Roles: before the account has one, RoleArn is recorded and not checked (every job so far named
// one that exists nowhere); after, a job must name one of its roles, and its submitter must be
// allowed iam:PassRole on it. Roles and their policies survive a restart.
TEST_F(AuthorizerTest, AJobsRoleMustExistAndBePassable) {
  MakeSharedQueue();
  EXPECT_FALSE(StartsWith(SubmitAs("member-a", "a"), "denied")) << "no roles yet: RoleArn is not checked";

  ASSERT_TRUE(c_->CreatePolicy({"read-jobs", R"({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "sagemaker:DescribeTrainingJob", "Resource": "*"}]})", ""}).ok());
  auto role = c_->CreateRole({"R", "jobs of team a", "AROA00000000000000001"});
  ASSERT_TRUE(role.ok()) << role.status().message();
  EXPECT_EQ(role->arn, "arn:aws:iam::000000000000:role/R");
  EXPECT_EQ(c_->CreateRole({"R", "", "AROA00000000000000002"}).status().code(), Code::kAlreadyExists);
  ASSERT_TRUE(c_->AttachRolePolicy({"R", "read-jobs"}).ok());
  ASSERT_TRUE(c_->AttachRolePolicy({"R", "data"}).ok());  // the job's output, written as R
  EXPECT_EQ(c_->DeleteRole("R").code(), Code::kFailedPrecondition) << "policies still attached";
  EXPECT_EQ(c_->DeletePolicy("read-jobs").code(), Code::kFailedPrecondition) << "attached to a role";

  // The team policy does not allow iam:PassRole: the role exists, the user may not hand it on.
  std::string denied = SubmitAs("member-a", "a");
  EXPECT_TRUE(StartsWith(denied, "denied: ")) << denied;
  EXPECT_NE(denied.find("iam:PassRole"), std::string::npos) << denied;
  EXPECT_NE(denied.find("arn:aws:iam::000000000000:role/R"), std::string::npos) << denied;

  ASSERT_TRUE(c_->CreatePolicy({"pass-r", R"({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "iam:PassRole", "Resource": "arn:aws:iam::000000000000:role/R"}]})", ""}).ok());
  ASSERT_TRUE(c_->AttachPolicy({"member-a", "pass-r"}).ok());
  EXPECT_FALSE(StartsWith(SubmitAs("member-a", "a"), "denied")) << "allowed iam:PassRole on R";

  // An unknown role is a ValidationException naming the field, for root too.
  const Principal root = Principal::Root("000000000000", "ROOT");
  json training = {{"TrainingJobName", "t"}, {"RoleArn", "arn:aws:iam::000000000000:role/Nope"}};
  Status unknown = authz().Check(root, ctx(), Api::kSageMaker, "CreateTrainingJob", training);
  EXPECT_EQ(unknown.code(), Code::kInvalidArgument);
  EXPECT_NE(unknown.message().find("'RoleArn'"), std::string::npos) << unknown.message();
  training["RoleArn"] = "arn:aws:iam::111111111111:role/R";  // another account's role of the same name
  EXPECT_EQ(authz().Check(root, ctx(), Api::kSageMaker, "CreateTrainingJob", training).code(), Code::kInvalidArgument);
  training["RoleArn"] = "arn:aws:iam::000000000000:role/team-a/R";  // a path before the name
  EXPECT_TRUE(authz().Check(root, ctx(), Api::kSageMaker, "CreateTrainingJob", training).ok());

  Open();  // a restart: the role and its policy are loaded from the store
  auto dir = c_->directory();
  ASSERT_TRUE(dir->roles.count("R"));
  EXPECT_EQ(dir->roles.at("R")->role.role_id, "AROA00000000000000001");
  EXPECT_EQ(dir->roles.at("R")->policies.size(), 2u);
  ASSERT_TRUE(c_->AttachRolePolicy({"R", "read-jobs", /*attach=*/false}).ok());
  ASSERT_TRUE(c_->AttachRolePolicy({"R", "data", /*attach=*/false}).ok());
  EXPECT_TRUE(c_->DeleteRole("R").ok());
  EXPECT_EQ(c_->DeleteRole("R").code(), Code::kNotFound);
  EXPECT_FALSE(StartsWith(SubmitAs("member-b", "b"), "denied")) << "no roles left: RoleArn is not checked again";
}

// A request with `value` at `steps` (ServiceModel::MemberPathsEndingWith's form): a list holds one
// item, a map one entry.
json At(const std::vector<std::string>& steps, size_t i, const json& value) {
  if (i == steps.size()) return value;
  if (steps[i] == "[]") return json::array({At(steps, i + 1, value)});
  if (steps[i] == "{}") return json{{"k", At(steps, i + 1, value)}};
  return json{{steps[i], At(steps, i + 1, value)}};
}

std::string Joined(const std::vector<std::string>& steps) {
  std::string out;
  for (const auto& s : steps) out += (out.empty() || s == "[]" || s == "{}" ? "" : ".") + s;
  return out;
}

// The rule for every field that names a role, derived from the models and not from a list kept
// here: for every operation a handler serves, every input member (recursively, through lists,
// maps and the requests another carries, such as SubmitServiceJob's serviceRequestPayload) whose
// name ends in RoleArn, a caller allowed everything but iam:PassRole is refused with AccessDenied
// naming iam:PassRole and the role; allowed iam:PassRole on it, it is not. A new role-naming
// member of a served operation is covered by this test, and fails it if the check misses it.
TEST_F(AuthorizerTest, EveryRoleNamingFieldOfAServedOperationNeedsPassRole) {
  ASSERT_TRUE(c_->CreatePolicy({"everything-but-iam", R"({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["batch:*", "sagemaker:*"], "Resource": "*"}]})", ""}).ok());
  ASSERT_TRUE(c_->CreatePolicy({"pass-admin", R"({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "iam:PassRole", "Resource": "arn:aws:iam::000000000000:role/admin-role"}]})", ""}).ok());
  ASSERT_TRUE(c_->CreateUser({"member-c", {{"team", "c"}}, "AIDA0000000000000000c"}).ok());
  ASSERT_TRUE(c_->AttachPolicy({"member-c", "everything-but-iam"}).ok());
  ASSERT_TRUE(c_->CreateRole({"admin-role", "", "AROA00000000000000009"}).ok());
  const std::string role = "arn:aws:iam::000000000000:role/admin-role";

  struct Case {
    Api api;
    std::string operation, field;
    json request;
  };
  std::vector<Case> cases;
  auto add = [&](Api api, const std::string& op, const ServiceModel& model) {
    const ServiceModel::Operation* o = model.FindOperation(op);
    if (!o || o->input_shape.empty()) return;
    for (const auto& steps : model.MemberPathsEndingWith(o->input_shape, "RoleArn"))
      cases.push_back({api, op, Joined(steps), At(steps, 0, role)});
  };
  for (const Operation& row : BatchOperations().rows()) add(Api::kBatch, std::string(row.name), ServiceModel::Batch());
  for (const Operation& row : SageMakerOperations().rows())
    add(Api::kSageMaker, std::string(row.name), ServiceModel::SageMaker());
  // Requests carried inside others: each role member of the carried operation, inside its carrier.
  bool payload_carried = false;
  for (const OperationTable* table : {&BatchOperations(), &SageMakerOperations()})
    for (const Operation& row : table->rows()) {
      const CarriedRequest& carried = row.access.carries;
      if (carried.member.empty()) continue;
      payload_carried = payload_carried || (row.name == "SubmitServiceJob" && carried.member == "serviceRequestPayload" &&
                                            carried.operation == "CreateTrainingJob");
      const ServiceModel& model = carried.api == Api::kBatch ? ServiceModel::Batch() : ServiceModel::SageMaker();
      const ServiceModel::Operation* o = model.FindOperation(carried.operation);
      ASSERT_NE(o, nullptr) << carried.operation;
      for (const auto& steps : model.MemberPathsEndingWith(o->input_shape, "RoleArn"))
        cases.push_back({table->api(), std::string(row.name), std::string(carried.member) + "." + Joined(steps),
                         json{{std::string(carried.member), At(steps, 0, role).dump()}}});
    }
  EXPECT_TRUE(payload_carried) << "SubmitServiceJob's serviceRequestPayload carries a CreateTrainingJob request";

  std::set<std::string> operations, fields;
  for (const Case& k : cases) {
    operations.insert(k.operation);
    fields.insert(k.operation + " " + k.field);
    Status denied = authz().Check(As("member-c"), ctx(), k.api, k.operation, k.request);
    EXPECT_EQ(denied.code(), Code::kAccessDenied) << k.operation << " " << k.field << ": " << denied.message();
    EXPECT_NE(denied.message().find("iam:PassRole on resource: " + role), std::string::npos)
        << k.operation << " " << k.field << ": " << denied.message();
    EXPECT_NE(denied.message().find(k.field.substr(k.field.rfind('.') + 1)), std::string::npos)
        << "the refusal names the field: " << denied.message();
  }
  ASSERT_TRUE(c_->AttachPolicy({"member-c", "pass-admin"}).ok());
  for (const Case& k : cases) {
    Status allowed = authz().Check(As("member-c"), ctx(), k.api, k.operation, k.request);
    EXPECT_TRUE(allowed.ok()) << k.operation << " " << k.field << ": " << allowed.message();
  }
  // What the models hold today (a floor, so that a model update that hides the fields fails).
  for (const char* op : {"CreateTrainingJob", "CreateHyperParameterTuningJob", "RegisterJobDefinition", "SubmitServiceJob"})
    EXPECT_TRUE(operations.count(op)) << op;
  for (const char* f : {"CreateHyperParameterTuningJob TrainingJobDefinition.RoleArn",
                        "CreateHyperParameterTuningJob TrainingJobDefinitions[].RoleArn",
                        "RegisterJobDefinition containerProperties.jobRoleArn",
                        "RegisterJobDefinition containerProperties.executionRoleArn",
                        "RegisterJobDefinition ecsProperties.taskProperties[].taskRoleArn",
                        "RegisterJobDefinition nodeProperties.nodeRangeProperties[].container.jobRoleArn",
                        "SubmitServiceJob serviceRequestPayload.RoleArn", "CreateTrainingJob RoleArn"})
    EXPECT_TRUE(fields.count(f)) << f;
}

// SubmitJob acts on the job definition too (as on AWS): batch:SubmitJob on its revision's ARN, and
// iam:PassRole on the role the definition names, since the job will run as it.
TEST_F(AuthorizerTest, SubmitJobIsCheckedOnTheDefinitionAndItsRole) {
  ASSERT_TRUE(c_->CreateRole({"admin-role", "", "AROA00000000000000009"}).ok());
  json props = {{"image", "busybox"}, {"command", json::array({"true"})},
                {"resourceRequirements", json::array({{{"type", "VCPU"}, {"value", "1"}}, {{"type", "MEMORY"}, {"value", "64"}}})},
                {"jobRoleArn", "arn:aws:iam::000000000000:role/admin-role"}};
  auto registered = BatchOperations().Serve(*c_, "RegisterJobDefinition",
                                {{"jobDefinitionName", "a-def"}, {"type", "container"}, {"containerProperties", props}});
  ASSERT_TRUE(registered.ok()) << registered.status().message();
  ASSERT_TRUE(c_->CreatePolicy({"own-queue-and-definitions", R"({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "batch:SubmitJob",
     "Resource": ["arn:aws:batch:*:*:job-queue/jq", "arn:aws:batch:*:*:job-definition/c-*"]}]})", ""}).ok());
  ASSERT_TRUE(c_->CreateUser({"member-c", {{"team", "c"}}, "AIDA0000000000000000c"}).ok());
  ASSERT_TRUE(c_->AttachPolicy({"member-c", "own-queue-and-definitions"}).ok());
  const json submit = {{"jobName", "x"}, {"jobQueue", "jq"}, {"jobDefinition", "a-def"},
                       {"containerOverrides", {{"command", json::array({"sh", "-c", "steal"})}}}};
  Status other = authz().Check(As("member-c"), ctx(), Api::kBatch, "SubmitJob", submit);
  EXPECT_EQ(other.code(), Code::kAccessDenied);
  EXPECT_NE(other.message().find("batch:SubmitJob on resource: arn:aws:batch:us-east-1:000000000000:job-definition/a-def:1"),
            std::string::npos)
      << other.message();

  ASSERT_TRUE(c_->CreatePolicy({"any-definition", R"({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "batch:SubmitJob", "Resource": "arn:aws:batch:*:*:job-definition/*"}]})", ""}).ok());
  ASSERT_TRUE(c_->AttachPolicy({"member-c", "any-definition"}).ok());
  Status role = authz().Check(As("member-c"), ctx(), Api::kBatch, "SubmitJob", submit);
  EXPECT_EQ(role.code(), Code::kAccessDenied);
  EXPECT_NE(role.message().find("iam:PassRole on resource: arn:aws:iam::000000000000:role/admin-role"), std::string::npos)
      << role.message();
  EXPECT_NE(role.message().find("jobRoleArn"), std::string::npos) << role.message();
}

// A role's trust policy says which services may take it for a job and whom STS admits.
TEST_F(AuthorizerTest, ARolesTrustPolicyMustAdmitTheJobsService) {
  auto ecs_only = c_->CreateRole({"ecs-only", "", "AROA00000000000000003", R"({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "ecs-tasks.amazonaws.com"}, "Action": "sts:AssumeRole"}]})"});
  ASSERT_TRUE(ecs_only.ok()) << ecs_only.status().message();
  const Principal root = Principal::Root("000000000000", "ROOT");
  Status training = authz().Check(root, ctx(), Api::kSageMaker, "CreateTrainingJob",
                                  {{"TrainingJobName", "t"}, {"RoleArn", ecs_only->arn}});
  EXPECT_EQ(training.code(), Code::kInvalidArgument);
  EXPECT_NE(training.message().find("sagemaker.amazonaws.com"), std::string::npos) << training.message();
  EXPECT_TRUE(authz().Check(root, ctx(), Api::kBatch, "RegisterJobDefinition",
                            {{"jobDefinitionName", "d"}, {"containerProperties", {{"jobRoleArn", ecs_only->arn}}}})
                  .ok());
  // A role created without a document admits both job services and the account's principals.
  auto plain = c_->CreateRole({"plain", "", "AROA00000000000000004"});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->assume_role_policy_document, control::DefaultTrustPolicy("000000000000"));
  EXPECT_TRUE(authz().Check(root, ctx(), Api::kSageMaker, "CreateTrainingJob", {{"TrainingJobName", "t"}, {"RoleArn", plain->arn}}).ok());
  auto dir = c_->directory();
  EXPECT_TRUE(authz().CheckTrust(As("member-a"), ctx(), *dir->roles.at("plain"), "s").ok());
  EXPECT_EQ(authz().CheckTrust(As("member-a"), ctx(), *dir->roles.at("ecs-only"), "s").code(), Code::kAccessDenied);
  // A role stored before roles had trust policies (no document) reads as the default.
  control::IamRole old;
  ASSERT_TRUE(control::DecodeDoc(R"({"name":"old","arn":"arn:aws:iam::000000000000:role/old","role_id":"AROAX"})", &old));
  EXPECT_TRUE(old.assume_role_policy_document.empty());
  control::Principals p;
  p.roles["old"] = old;
  auto built = control::BuildDirectory(p);
  EXPECT_TRUE(control::CheckServiceTrust(*built->roles.at("old"), control::kSageMakerPrincipal, 0).ok());
  EXPECT_TRUE(control::CheckServiceTrust(*built->roles.at("old"), control::kEcsTasksPrincipal, 0).ok());
}

// Checked again when a job starts: a queued job whose owner lost iam:PassRole on its role in the
// meantime fails, its reason naming iam:PassRole and the role, and gets no credentials.
TEST_F(AuthorizerTest, AJobsRoleIsCheckedAgainOnItsOwnersCurrentPoliciesWhenItStarts) {
  MakeSharedQueue();
  ASSERT_TRUE(c_->CreateRole({"R", "", "AROA00000000000000001"}).ok());
  ASSERT_TRUE(c_->AttachRolePolicy({"R", "data"}).ok());  // the job's output, written as R
  ASSERT_TRUE(c_->CreatePolicy({"pass-r", R"({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "iam:PassRole", "Resource": "arn:aws:iam::000000000000:role/R"}]})", ""}).ok());
  ASSERT_TRUE(c_->AttachPolicy({"member-a", "pass-r"}).ok());
  const std::string kept = SubmitAs("member-a", "a");  // training job j-a1
  c_->Step();
  clock_.advance_ms(1000);  // [scheduler] batch_ms: the arrival batch closes
  c_->Step();
  ASSERT_EQ(exec_->started(), std::vector<std::string>{"j-a1"});
  EXPECT_EQ(c_->role_sessions().size(), 1u);
  // j-a2 is accepted while a may pass R, and waits for capacity (j-a1 holds the only instance)
  // until a has lost iam:PassRole.
  auto capacity = [&](int n) {
    ASSERT_TRUE(BatchOperations().Serve(*c_, "UpdateServiceEnvironment",
                            {{"serviceEnvironment", "env"},
                             {"capacityLimits", {{{"capacityUnit", "NUM_INSTANCES"}, {"maxCapacity", n}}}}})
                    .ok());
  };
  capacity(1);
  const std::string refused = SubmitAs("member-a", "a");
  ASSERT_FALSE(StartsWith(refused, "denied")) << refused;
  c_->Step();
  ASSERT_EQ(exec_->started(), std::vector<std::string>{"j-a1"}) << "no room for j-a2 yet";
  ASSERT_TRUE(c_->AttachPolicy({"member-a", "pass-r", /*attach=*/false}).ok());
  capacity(4);
  for (int i = 0; i < 4; ++i) {
    c_->Step();
    clock_.advance_ms(1000);
  }
  EXPECT_EQ(exec_->started(), std::vector<std::string>{"j-a1"}) << "the refused attempt is never started";
  EXPECT_EQ(c_->role_sessions().size(), 1u) << "and holds no session";
  auto [status, reason, job_status] = c_->Read([&](const control::State& s) {
    const TrainingJob* tj = s.FindTrainingJob("j-a2");
    const control::ServiceJobState* js = s.FindJob(refused);
    return std::make_tuple(tj ? tj->status : TrainingJobStatus::kInProgress, tj ? tj->failure_reason : "",
                           js ? js->job.status : JobStatus::kSubmitted);
  });
  EXPECT_EQ(status, TrainingJobStatus::kFailed);
  EXPECT_NE(reason.find("iam:PassRole on resource: arn:aws:iam::000000000000:role/R"), std::string::npos) << reason;
  EXPECT_NE(reason.find("user/member-a"), std::string::npos) << reason;
  EXPECT_EQ(job_status, JobStatus::kFailed);
}

}  // namespace
}  // namespace ty::api
