// The audit trail (docs/security.md, "Audit"): what is recorded and how (api/audit.h, pure), and
// that the controller stores a call's record in the commit of the call's own change
// (control/audit.h), on in-memory ports with a manual clock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "api/audit.h"
#include "api/decode.h"
#include "control/controller.h"
#include "http/server.h"
#include "store/event_log.h"
#include "testing/fakes.h"

namespace ty {
namespace {

using nlohmann::json;

// ---- what is recorded (pure) ----

TEST(AuditRules, ReadsAreDescribeListGetSearchFilterAndTrainyardsOwnReads) {
  for (const char* op : {"DescribeServiceJob", "ListServiceJobs", "GetJobQueueSnapshot", "BatchGetThing", "SearchJobs",
                         "FilterLogEvents", "CostReport", "MetricSeries", "SystemMetrics", "Events", "StreamEvents",
                         "LookupAuditEvents", "WhatIf"})
    EXPECT_TRUE(api::IsReadOnly(op)) << op;
  for (const char* op : {"SubmitServiceJob", "TerminateServiceJob", "CreateJobQueue", "UpdateTrainingJob", "TagResource",
                         "AdvanceClock", "Interrupt"})
    EXPECT_FALSE(api::IsReadOnly(op)) << op;
}

TEST(AuditRules, DeniedMeansRefusedForCredentialsPermissionsOrRate) {
  for (const char* t : {"AccessDeniedException", "InvalidSignatureException", "UnrecognizedClientException",
                        "MissingAuthenticationTokenException", "ThrottlingException"})
    EXPECT_TRUE(api::IsDenied(t)) << t;
  for (const char* t : {"", "ClientException", "ValidationException", "ResourceNotFound", "ServerException"})
    EXPECT_FALSE(api::IsDenied(t)) << t;
}

std::vector<std::pair<std::string, std::string>> Pairs(const std::vector<api::AuditResource>& rs) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& r : rs) out.emplace_back(r.type, r.name);
  return out;
}

TEST(AuditRules, ResourcesAreTheMembersTheOperationsRowNamesInRowOrder) {
  using P = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(Pairs(api::ResourcesOf("batch", "SubmitServiceJob",
                                   {{"jobName", "j"}, {"jobQueue", "q"}, {"serviceRequestPayload", "{}"}})),
            (P{{"AWS::Batch::JobQueue", "q"}, {"AWS::Batch::ServiceJob", "j"}}));
  EXPECT_EQ(Pairs(api::ResourcesOf("batch", "TerminateServiceJobs", {{"jobs", {"a", "b", 7}}})),
            (P{{"AWS::Batch::ServiceJob", "a"}, {"AWS::Batch::ServiceJob", "b"}}));
  EXPECT_EQ(Pairs(api::ResourcesOf("sagemaker", "StopTrainingJob", {{"TrainingJobName", "t"}, {"jobQueue", "not-sagemaker's"}})),
            (P{{"AWS::SageMaker::TrainingJob", "t"}}));
  EXPECT_EQ(Pairs(api::ResourcesOf("batch", "TagResource", {{"resourceArn", "arn:aws:batch:r:1:job-queue/q"}})),
            (P{{"ARN", "arn:aws:batch:r:1:job-queue/q"}}));
  // The same member names different resources in different operations: each row says which.
  EXPECT_EQ(Pairs(api::ResourcesOf("batch", "CancelJob", {{"jobId", "c"}})), (P{{"AWS::Batch::Job", "c"}}));
  EXPECT_EQ(Pairs(api::ResourcesOf("batch", "TerminateServiceJob", {{"jobId", "s"}})), (P{{"AWS::Batch::ServiceJob", "s"}}));
  EXPECT_TRUE(api::ResourcesOf("batch", "NoSuchOperation", {{"jobQueue", "q"}}).empty());
  // A hostile request cannot make its record large: 20 resources of 512 characters at most.
  json many = json::array();
  for (int i = 0; i < 100; ++i) many.push_back(std::string(5000, 'x'));
  auto capped = api::ResourcesOf("batch", "TerminateServiceJobs", {{"jobs", many}});
  ASSERT_EQ(capped.size(), 20u);
  EXPECT_EQ(capped[0].name.size(), 512u);
}

http::Request From(const std::string& peer, const std::string& forwarded = "") {
  http::Request r;
  r.peer = peer;
  if (!forwarded.empty()) r.headers.emplace_back("X-Forwarded-For", forwarded);
  return r;
}

TEST(AuditRules, SourceIsThePeerUnlessThePeerIsATrustedProxy) {
  const std::vector<std::string> trusted = {"10.0.0.1", "10.0.0.2"};
  EXPECT_EQ(api::SourceAddressOf(From("192.0.2.5", "203.0.113.7"), trusted), "192.0.2.5");  // not a proxy of ours
  EXPECT_EQ(api::SourceAddressOf(From("10.0.0.1", "198.51.100.1, 203.0.113.7, 10.0.0.2"), trusted), "203.0.113.7");
  EXPECT_EQ(api::SourceAddressOf(From("10.0.0.1", "2001:db8::1"), trusted), "2001:db8::1");
  EXPECT_EQ(api::SourceAddressOf(From("10.0.0.1", "10.0.0.2"), trusted), "10.0.0.1");          // only proxies
  EXPECT_EQ(api::SourceAddressOf(From("10.0.0.1", "evil<script>"), trusted), "10.0.0.1");      // not an address
  EXPECT_EQ(api::SourceAddressOf(From("10.0.0.1"), trusted), "10.0.0.1");
  EXPECT_EQ(api::SourceAddressOf(From("127.0.0.1", "203.0.113.7"), {}), "127.0.0.1");
}

TEST(AuditRules, TheClaimedKeyComesFromTheCredentialScopeAndIsNeverFreeText) {
  http::Request signed_req;
  signed_req.headers = {{"authorization", "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20260101/us-east-1/batch/aws4_request, "
                                          "SignedHeaders=host, Signature=abc"}};
  EXPECT_EQ(api::ClaimedAccessKeyId(signed_req), "AKIAEXAMPLE");
  http::Request presigned;
  presigned.query = "X-Amz-Credential=AKIAQUERY%2F20260101%2Fus-east-1%2Fbatch%2Faws4_request&X-Amz-Signature=x";
  EXPECT_EQ(api::ClaimedAccessKeyId(presigned), "AKIAQUERY");
  http::Request hostile;
  hostile.headers = {{"Authorization", "AWS4-HMAC-SHA256 Credential=<script>/x"}};
  EXPECT_EQ(api::ClaimedAccessKeyId(hostile), "");
  EXPECT_EQ(api::ClaimedAccessKeyId(http::Request{}), "");
}

api::AuditRecord Call(const std::string& principal, const std::string& operation) {
  api::AuditRecord r;
  r.at = 1'800'000'000'000;
  r.request_id = "0b5c1f2e-0000-4000-8000-000000000001";
  r.principal = principal;
  r.access_key_id = "AKIAEXAMPLE";
  r.service = "batch";
  r.operation = operation;
  r.resources = {{"AWS::Batch::JobQueue", "q"}};
  r.source_address = "192.0.2.5";
  r.user_agent = "Boto3/1.0";
  r.region = "us-east-1";
  r.account_id = "000000000000";
  return r;
}

TEST(AuditRules, ARecordSaysWhoWhatWhereAndHowItEnded) {
  json ok = json::parse(api::RenderAuditRecord(Call("root", "SubmitServiceJob"), {200, "", ""}));
  EXPECT_EQ(ok["action"], "batch:SubmitServiceJob");
  EXPECT_EQ(ok["eventSource"], "batch.amazonaws.com");
  EXPECT_EQ(ok["userIdentity"]["type"], "Root");
  EXPECT_EQ(ok["userIdentity"]["accessKeyId"], "AKIAEXAMPLE");
  EXPECT_EQ(ok["requestID"], "0b5c1f2e-0000-4000-8000-000000000001");
  EXPECT_EQ(ok["sourceIPAddress"], "192.0.2.5");
  EXPECT_EQ(ok["eventTime"], "2027-01-15T08:00:00.000Z");
  EXPECT_EQ(ok["httpStatus"], 200);
  EXPECT_FALSE(ok["denied"]);
  EXPECT_FALSE(ok.contains("errorCode"));
  EXPECT_FALSE(ok.contains("decidingStatement"));

  api::AuditRecord refused = Call("arn:aws:iam::000000000000:user/alice", "TerminateServiceJob");
  refused.deciding_statement = R"({"Sid":"NoTerminate","Effect":"Deny"})";
  json denied = json::parse(api::RenderAuditRecord(refused, {400, "AccessDeniedException", "not allowed"}));
  EXPECT_EQ(denied["userIdentity"]["type"], "IAMUser");
  EXPECT_EQ(denied["userIdentity"]["arn"], "arn:aws:iam::000000000000:user/alice");
  EXPECT_EQ(denied["errorCode"], "AccessDeniedException");
  EXPECT_EQ(denied["errorMessage"], "not allowed");
  EXPECT_TRUE(denied["denied"]);
  EXPECT_EQ(denied["decidingStatement"], R"({"Sid":"NoTerminate","Effect":"Deny"})");

  json unknown = json::parse(api::RenderAuditRecord(Call("", "DescribeJobQueues"), {403, "InvalidSignatureException", "x"}));
  EXPECT_EQ(unknown["userIdentity"]["type"], "Unknown");
  EXPECT_TRUE(unknown["readOnly"]);
  EXPECT_TRUE(unknown["denied"]);
}

TEST(AuditRules, AQueryIsCheckedMemberByMember) {
  auto refused = [](const json& req, const std::string& member) {
    auto q = api::AuditQueryFrom(req);
    ASSERT_FALSE(q.ok()) << req.dump();
    EXPECT_EQ(q.status().code(), Code::kInvalidArgument);
    EXPECT_NE(q.status().message().find(member), std::string::npos) << q.status().message();
  };
  refused({{"MaxResults", 0}}, "MaxResults");
  refused({{"MaxResults", 51}}, "MaxResults");
  refused({{"StartTime", "yesterday"}}, "StartTime");
  refused({{"StartTime", 10}, {"EndTime", 5}}, "StartTime");
  refused({{"NextToken", "00000000000000000001/../../etc"}}, "NextToken");
  refused({{"LookupAttributes", {{{"AttributeKey", "Secret"}, {"AttributeValue", "x"}}}}}, "AttributeKey");
  refused({{"LookupAttributes", {{{"AttributeKey", "EventName"}, {"AttributeValue", ""}}}}}, "AttributeValue");
  refused({{"DeniedOnly", "yes"}}, "DeniedOnly");
  refused({{"Bogus", 1}}, "Bogus");
  auto q = api::AuditQueryFrom({{"StartTime", 1.5}, {"EndTime", 2}, {"MaxResults", 7}, {"DeniedOnly", true},
                                {"NextToken", store::EventLog::AuditKey(1700, "0b5c1f2e-0000")}});
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->start_ms, 1500);
  EXPECT_EQ(q->end_ms, 2000);
  EXPECT_EQ(q->max_results, 7u);
  EXPECT_TRUE(q->denied_only);
}

TEST(AuditRules, EveryAttributeOfAQueryMustHold) {
  json record = json::parse(api::RenderAuditRecord(Call("root", "SubmitServiceJob"), {200, "", ""}));
  auto matches = [&](std::vector<std::pair<std::string, std::string>> attributes, bool denied_only = false) {
    api::AuditQuery q;
    q.attributes = std::move(attributes);
    q.denied_only = denied_only;
    return api::AuditMatches(q, record);
  };
  EXPECT_TRUE(matches({}));
  EXPECT_TRUE(matches({{"Action", "batch:SubmitServiceJob"}, {"Principal", "root"}, {"ResourceName", "q"},
                       {"ResourceType", "AWS::Batch::JobQueue"}, {"AccessKeyId", "AKIAEXAMPLE"}, {"ReadOnly", "false"},
                       {"EventSource", "batch.amazonaws.com"}, {"Username", "root"}, {"EventName", "SubmitServiceJob"},
                       {"EventId", "0b5c1f2e-0000-4000-8000-000000000001"}}));
  EXPECT_FALSE(matches({{"Action", "batch:SubmitServiceJob"}, {"Principal", "alice"}}));
  EXPECT_FALSE(matches({{"ResourceName", "other"}}));
  EXPECT_FALSE(matches({{"ErrorCode", "ClientException"}}));
  EXPECT_FALSE(matches({}, /*denied_only=*/true));
}

// ---- where records are stored (the controller on in-memory ports) ----

class AuditStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ty-audit-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    config_ = DefaultConfig();
    config_.data_dir = dir_.string();
    config_.sandbox = "none";
    config_.audit_retain_days = 1;
    Ports ports{std::make_unique<testing::MemStore>(data_), std::make_unique<testing::MemEventLog>(data_),
                std::make_unique<testing::FakeExecutor>()};
    auto c = control::Controller::Open(config_, clock_, std::move(ports));
    ASSERT_TRUE(c.ok()) << c.status().message();
    c_ = std::move(c).value();
    // Events as their documents: an API call's is its record.
    c_->SetEventRenderer([](const control::State&, const control::EventTrigger& e, uint64_t) {
      return e.kind == control::EventTrigger::Kind::kApiCall ? e.data : std::string("state change");
    });
  }
  void TearDown() override {
    c_.reset();
    std::filesystem::remove_all(dir_);
  }
  using Ports = control::Ports;

  control::PendingAudit Pending(const std::string& request_id) {
    control::PendingAudit p;
    p.at = clock_.now_ms();
    p.key = store::EventLog::AuditKey(p.at, request_id);
    p.render = [](const Status& outcome) { return outcome.ok() ? std::string("ok") : "error: " + outcome.message(); };
    return p;
  }
  Status CreateEnvironment(const std::string& name) {
    auto cmd = api::DecodeCreateServiceEnvironment({{"serviceEnvironmentName", name},
                                                    {"serviceEnvironmentType", "SAGEMAKER_TRAINING"},
                                                    {"capacityLimits", {{{"capacityUnit", "NUM_INSTANCES"}, {"maxCapacity", 1}}}}});
    EXPECT_TRUE(cmd.ok());
    return c_->CreateServiceEnvironment(*cmd).status();
  }
  std::vector<std::string> Events() {
    std::vector<std::string> out;
    for (const auto& [k, doc] : data_->docs[store::Kind::kEvent]) out.push_back(doc);
    return out;
  }

  std::filesystem::path dir_;
  Config config_;
  ManualClock clock_{1'800'000'000'000};
  std::shared_ptr<testing::MemData> data_ = std::make_shared<testing::MemData>();
  std::unique_ptr<control::Controller> c_;
};

TEST_F(AuditStoreTest, ACommandStoresItsCallersRecordInItsOwnCommit) {
  const int before = data_->commits;
  control::PendingAudit p = Pending("r1");
  {
    control::AuditScope scope(&p);
    ASSERT_TRUE(CreateEnvironment("e").ok());
  }
  EXPECT_TRUE(p.taken);
  EXPECT_EQ(data_->commits, before + 1);  // the environment and its record, together
  EXPECT_NE(data_->Get(store::Kind::kServiceEnvironment, "e"), "");
  EXPECT_EQ(data_->Get(store::Kind::kAudit, p.key), "ok");
  EXPECT_EQ(Events(), std::vector<std::string>{"ok"});
}

TEST_F(AuditStoreTest, ARefusedCommandStoresTheRecordWithItsError) {
  ASSERT_TRUE(CreateEnvironment("e").ok());
  control::PendingAudit p = Pending("r1");
  {
    control::AuditScope scope(&p);
    ASSERT_FALSE(CreateEnvironment("e").ok());  // the name is taken
  }
  EXPECT_TRUE(p.taken);
  EXPECT_NE(data_->Get(store::Kind::kAudit, p.key).find("error: "), std::string::npos);
}

TEST_F(AuditStoreTest, OnlyTheFirstCommandOfACallTakesItsRecord) {
  control::PendingAudit p = Pending("r1");
  {
    control::AuditScope scope(&p);
    ASSERT_TRUE(CreateEnvironment("a").ok());
    ASSERT_TRUE(CreateEnvironment("b").ok());
  }
  EXPECT_EQ(data_->Count(store::Kind::kAudit), 1u);
  // Outside a scope, commands carry no record.
  ASSERT_TRUE(CreateEnvironment("c").ok());
  EXPECT_EQ(data_->Count(store::Kind::kAudit), 1u);
}

TEST_F(AuditStoreTest, ARecordWhoseCommitFailedIsStoredWithTheChangeOnceTheStoreTakesIt) {
  data_->fail_commits = Unavailable("disk full");
  control::PendingAudit p = Pending("r1");
  {
    control::AuditScope scope(&p);
    EXPECT_EQ(CreateEnvironment("e").code(), Code::kUnavailable);
  }
  EXPECT_EQ(data_->Count(store::Kind::kAudit), 0u);
  data_->fail_commits = Status::Ok();
  c_->Step();
  EXPECT_NE(data_->Get(store::Kind::kServiceEnvironment, "e"), "");
  EXPECT_EQ(data_->Get(store::Kind::kAudit, p.key), "ok");
}

TEST_F(AuditStoreTest, ARefusedCallsRecordIsCommittedOnItsOwnAndPrunedAfterRetainDays) {
  const int before = data_->commits;
  const std::string old_key = store::EventLog::AuditKey(clock_.now_ms(), "old");
  ASSERT_TRUE(c_->RecordAudit(old_key, clock_.now_ms(), "denied").ok());
  EXPECT_EQ(data_->commits, before + 1);
  EXPECT_EQ(data_->Get(store::Kind::kAudit, old_key), "denied");
  EXPECT_EQ(Events(), std::vector<std::string>{"denied"});

  clock_.advance_ms(86'400'000 - 1000);  // retain_days = 1: a day less a second later, kept
  const std::string new_key = store::EventLog::AuditKey(clock_.now_ms(), "new");
  ASSERT_TRUE(c_->RecordAudit(new_key, clock_.now_ms(), "denied too").ok());
  c_->Step();
  EXPECT_EQ(data_->Count(store::Kind::kAudit), 2u);
  clock_.advance_ms(61'000);  // the first is over a day old; pruning runs once a minute
  c_->Step();
  EXPECT_EQ(data_->Get(store::Kind::kAudit, old_key), "");
  EXPECT_EQ(data_->Get(store::Kind::kAudit, new_key), "denied too");
}

}  // namespace
}  // namespace ty
