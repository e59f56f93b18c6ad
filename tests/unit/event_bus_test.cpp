// EventBridge rules, targets, connections and API destinations (control/event_bus.h,
// api/eventbridge_api.h) on a controller over the in-memory ports: what is stored survives a
// restart, refusals change nothing, and the deliveries follow the rules' state.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/operations.h"
#include "api/encode.h"
#include "api/eventbridge_api.h"
#include "control/controller.h"
#include "control/state.h"
#include "core/strings.h"
#include "store/event_log.h"
#include "testing/controller_fixture.h"

namespace ty::api {
namespace {

using nlohmann::json;

constexpr const char* kFailed = R"({"source": ["aws.batch"], "detail": {"status": ["FAILED"]}})";

class EventBusTest : public testing::ControllerFixture {
 protected:
  EventBusTest() : ControllerFixture("event-bus") {}

  // The root's ARN, the caller unless a test says otherwise.
  std::string Root() const { return "arn:aws:iam::" + config_.account_id + ":root"; }
  json Call(const std::string& op, const json& req) { return CallAs(Root(), op, req); }
  json CallAs(const std::string& caller, const std::string& op, const json& req) {
    auto out = EventBridgeOperations().Serve(*c_, op, req, caller);
    EXPECT_TRUE(out.ok()) << op << ": " << out.status().message();
    return out.ok() ? *out : json();
  }
  Status Refusal(const std::string& op, const json& req) {
    auto out = EventBridgeOperations().Serve(*c_, op, req, Root());
    EXPECT_FALSE(out.ok()) << op << " was accepted: " << req.dump();
    return out.status();
  }
  // A connection and an API destination on it; returns the destination's ARN.
  std::string Destination(const std::string& name = "dest") {
    json conn = Call("CreateConnection", {{"Name", name + "-conn"},
                                          {"AuthorizationType", "API_KEY"},
                                          {"AuthParameters", {{"ApiKeyAuthParameters", {{"ApiKeyName", "x-api-key"},
                                                                                        {"ApiKeyValue", "secret"}}}}}});
    json dest = Call("CreateApiDestination", {{"Name", name},
                                              {"ConnectionArn", conn["ConnectionArn"]},
                                              {"InvocationEndpoint", "http://192.0.2.10:9/hook"},
                                              {"HttpMethod", "POST"}});
    return dest["ApiDestinationArn"];
  }
  json Rules() { return Call("ListRules", json::object())["Rules"]; }
};

TEST_F(EventBusTest, RulesTargetsAndDestinationsSurviveARestart) {
  const std::string dest = Destination();
  Call("PutRule", {{"Name", "failed"}, {"EventPattern", kFailed}, {"State", "DISABLED"}, {"Description", "d"}});
  Call("PutTargets", {{"Rule", "failed"},
                      {"Targets", {{{"Id", "t1"}, {"Arn", dest}, {"InputPath", "$.detail"}},
                                   {{"Id", "t2"}, {"Arn", dest}, {"RetryPolicy", {{"MaximumRetryAttempts", 0}}}}}}});

  Open();  // a restart: only what was committed is there

  json rule = Call("DescribeRule", {{"Name", "failed"}});
  EXPECT_EQ(rule["State"], "DISABLED");
  EXPECT_EQ(rule["EventPattern"], kFailed);
  EXPECT_EQ(rule["Description"], "d");
  EXPECT_EQ(Call("ListTargetsByRule", {{"Rule", "failed"}})["Targets"],
            json::parse(R"([{"Id": "t1", "Arn": ")" + dest + R"(", "InputPath": "$.detail"},
                            {"Id": "t2", "Arn": ")" + dest + R"(",
                             "RetryPolicy": {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 86400}}])"));
  Call("EnableRule", {{"Name", "failed"}});
  auto deliveries = EventBridgeDeliveries(*c_);
  ASSERT_EQ(deliveries.size(), 2u);
  EXPECT_EQ(deliveries[0].max_attempts, 186);  // AWS's default: 185 retries after the first try
  EXPECT_EQ(deliveries[1].max_attempts, 1);
  EXPECT_EQ(deliveries[1].max_event_age_seconds, 86400);
  json conn = Call("DescribeConnection", {{"Name", "dest-conn"}});
  EXPECT_EQ(conn["AuthParameters"], json::parse(R"({"ApiKeyAuthParameters": {"ApiKeyName": "x-api-key"}})"));
  EXPECT_EQ(conn.dump().find("secret"), std::string::npos);  // the key's value is never answered
}

TEST_F(EventBusTest, AnInputTransformerIsStoredListedAndDeliveredAndAHostileOneIsRefusedByName) {
  const std::string dest = Destination();
  Call("PutRule", {{"Name", "chat"}, {"EventPattern", kFailed}});
  const json transformer = {{"InputPathsMap", {{"status", "$.detail.status"}, {"job", "$.detail.jobName"}}},
                            {"InputTemplate", R"({"text": "<job> is <status>", "rule": <aws.events.rule-name>})"}};
  const json refusals[] = {
      {{"Id", "t"}, {"Arn", dest}, {"Input", "{}"}, {"InputTransformer", transformer}},
      {{"Id", "t"}, {"Arn", dest}, {"InputPath", "$.detail"}, {"InputTransformer", transformer}},
      {{"Id", "t"}, {"Arn", dest}, {"InputTransformer", {{"InputPathsMap", {{"a", "$.x"}}}}}},
      {{"Id", "t"}, {"Arn", dest}, {"InputTransformer", {{"InputTemplate", "{<a>: 1}"}, {"InputPathsMap", {{"a", "$.x"}}}}}},
      {{"Id", "t"}, {"Arn", dest}, {"InputTransformer", {{"InputTemplate", "x"}, {"InputPathsMap", {{"a", "x"}}}}}},
      {{"Id", "t"}, {"Arn", dest}, {"InputTransformer", {{"InputTemplate", "x"}, {"InputPathsMap", {{"a", 1}}}}}},
      {{"Id", "t"}, {"Arn", dest}, {"InputTransformer", "<a>"}},
  };
  for (const json& target : refusals) {
    Status st = Refusal("PutTargets", {{"Rule", "chat"}, {"Targets", {target}}});
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << target.dump();
    EXPECT_NE(st.message().find("Targets[0]."), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("Input"), std::string::npos) << st.message();
  }
  EXPECT_EQ(Call("ListTargetsByRule", {{"Rule", "chat"}})["Targets"], json::array());

  Call("PutTargets", {{"Rule", "chat"}, {"Targets", {{{"Id", "t"}, {"Arn", dest}, {"InputTransformer", transformer}}}}});
  Open();  // stored with the target
  EXPECT_EQ(Call("ListTargetsByRule", {{"Rule", "chat"}})["Targets"],
            json::array({{{"Id", "t"}, {"Arn", dest}, {"InputTransformer", transformer}}}));
  auto deliveries = EventBridgeDeliveries(*c_);
  ASSERT_EQ(deliveries.size(), 1u);
  EXPECT_EQ(deliveries[0].input_template, transformer["InputTemplate"]);
  EXPECT_EQ(deliveries[0].input_paths_map, (std::map<std::string, std::string>{{"job", "$.detail.jobName"},
                                                                                {"status", "$.detail.status"}}));
  EXPECT_EQ(deliveries[0].rule_name, "chat");
  EXPECT_EQ(deliveries[0].rule_arn, Call("DescribeRule", {{"Name", "chat"}})["Arn"]);

  // A template alone (no InputPathsMap) is listed without one.
  Call("PutTargets", {{"Rule", "chat"}, {"Targets", {{{"Id", "t"}, {"Arn", dest},
                                                      {"InputTransformer", {{"InputTemplate", "fixed"}}}}}}});
  EXPECT_EQ(Call("ListTargetsByRule", {{"Rule", "chat"}})["Targets"][0]["InputTransformer"],
            json({{"InputTemplate", "fixed"}}));
}

TEST(EventBusDocTest, ARuleDocumentWrittenBeforeInputTransformerStillLoads) {
  control::EventRule r;
  ASSERT_TRUE(control::DecodeDoc(
      R"({"name": "old", "arn": "a", "event_pattern": "{}", "enabled": true,
          "targets": [{"id": "t", "arn": "d", "input": "", "input_path": "$.detail", "generation": 4}]})",
      &r));
  ASSERT_EQ(r.targets.size(), 1u);
  EXPECT_EQ(r.targets[0].input_path, "$.detail");
  EXPECT_TRUE(r.targets[0].input_template.empty());
  EXPECT_TRUE(r.targets[0].input_paths_map.empty());
  EXPECT_EQ(r.targets[0].maximum_retry_attempts, 185);
}

TEST_F(EventBusTest, OnlyEnabledRulesDeliverAndEnablingAgainStartsAFreshCursor) {
  const std::string dest = Destination();
  Call("PutRule", {{"Name", "r"}, {"EventPattern", kFailed}});
  Call("PutTargets", {{"Rule", "r"}, {"Targets", {{{"Id", "t"}, {"Arn", dest}}}}});
  auto deliveries = EventBridgeDeliveries(*c_);
  ASSERT_EQ(deliveries.size(), 1u);
  const std::string first = deliveries[0].name;
  EXPECT_EQ(first.rfind("eventbridge/r/t/", 0), 0u) << first;
  EXPECT_EQ(deliveries[0].pattern, kFailed);
  EXPECT_EQ(deliveries[0].headers, (std::vector<std::pair<std::string, std::string>>{{"x-api-key", "secret"}}));

  Call("DisableRule", {{"Name", "r"}});
  EXPECT_TRUE(EventBridgeDeliveries(*c_).empty());
  Call("EnableRule", {{"Name", "r"}});
  deliveries = EventBridgeDeliveries(*c_);
  ASSERT_EQ(deliveries.size(), 1u);
  EXPECT_NE(deliveries[0].name, first);  // what happened while disabled is not delivered

  Open();
  ASSERT_EQ(EventBridgeDeliveries(*c_).size(), 1u);
  EXPECT_EQ(EventBridgeDeliveries(*c_)[0].name, deliveries[0].name);  // the same cursor after a restart
}

TEST_F(EventBusTest, HostileInputIsRefusedByNameAndNothingIsStored) {
  const std::string dest = Destination();
  struct Case {
    json req;
    Code code;
    std::string names;
  };
  const Case rules[] = {
      {{{"Name", std::string(65, 'x')}, {"EventPattern", kFailed}}, Code::kInvalidArgument, "Name"},
      {{{"Name", "has space"}, {"EventPattern", kFailed}}, Code::kInvalidArgument, "Name"},
      {{{"Name", "p"}, {"EventPattern", R"({"detail": {"status": "FAILED"}})"}}, Code::kInvalidArgument, "EventPattern"},
      {{{"Name", "p"}, {"EventPattern", "[1]"}}, Code::kInvalidArgument, "EventPattern"},
      {{{"Name", "p"}}, Code::kInvalidArgument, "EventPattern"},
      {{{"Name", "p"}, {"ScheduleExpression", "cron(0 12 * * ? *)"}}, Code::kInvalidArgument, "ScheduleExpression"},
      {{{"Name", "p"}, {"EventPattern", kFailed}, {"State", "ON"}}, Code::kInvalidArgument, "State"},
      {{{"Name", "p"}, {"EventPattern", kFailed}, {"EventBusName", "custom"}}, Code::kNotFound, "custom"},
  };
  for (const Case& c : rules) {
    Status st = Refusal("PutRule", c.req);
    EXPECT_EQ(st.code(), c.code) << c.req.dump();
    EXPECT_EQ(st.message().rfind(c.names, 0) == 0 || st.message().find(c.names) != std::string::npos, true)
        << st.message();
  }
  EXPECT_TRUE(Rules().empty());

  Call("PutRule", {{"Name", "r"}, {"EventPattern", kFailed}});
  Status lambda = Refusal("PutTargets", {{"Rule", "r"},
                                         {"Targets", {{{"Id", "ok"}, {"Arn", dest}},
                                                      {{"Id", "fn"}, {"Arn", "arn:aws:lambda:us-east-1:1:function:f"}}}}});
  EXPECT_NE(lambda.message().find("Targets[1].Arn: targets of kind lambda"), std::string::npos) << lambda.message();
  Status retry = Refusal("PutTargets", {{"Rule", "r"},
                                        {"Targets", {{{"Id", "x"}, {"Arn", dest},
                                                      {"RetryPolicy", {{"MaximumEventAgeInSeconds", 10}}}}}}});
  EXPECT_EQ(retry.message().rfind("Targets[0].RetryPolicy.MaximumEventAgeInSeconds", 0), 0u) << retry.message();
  Status dlq = Refusal("PutTargets", {{"Rule", "r"},
                                      {"Targets", {{{"Id", "x"}, {"Arn", dest},
                                                    {"DeadLetterConfig", {{"Arn", "arn:aws:sqs:us-east-1:1:q"}}}}}}});
  EXPECT_NE(dlq.message().find("DeadLetterConfig"), std::string::npos) << dlq.message();
  Status sqs = Refusal("PutTargets", {{"Rule", "r"}, {"Targets", {{{"Id", "q"}, {"Arn", "arn:aws:sqs:us-east-1:1:q"}}}}});
  EXPECT_NE(sqs.message().find("kind sqs"), std::string::npos) << sqs.message();
  EXPECT_EQ(Refusal("PutTargets", {{"Rule", "r"}, {"Targets", {{{"Id", "x"}, {"Arn", dest + "-gone"}}}}}).code(),
            Code::kNotFound);
  EXPECT_EQ(Refusal("PutTargets", {{"Rule", "nope"}, {"Targets", {{{"Id", "x"}, {"Arn", dest}}}}}).code(),
            Code::kNotFound);
  EXPECT_TRUE(Call("ListTargetsByRule", {{"Rule", "r"}})["Targets"].empty());

  EXPECT_EQ(Refusal("CreateApiDestination", {{"Name", "d2"},
                                             {"ConnectionArn", "arn:aws:events:us-east-1:1:connection/none"},
                                             {"InvocationEndpoint", "http://x/"},
                                             {"HttpMethod", "POST"}})
                .code(),
            Code::kNotFound);
  EXPECT_EQ(Refusal("CreateApiDestination", {{"Name", "d3"},
                                             {"ConnectionArn", "x"},
                                             {"InvocationEndpoint", "ftp://x/"},
                                             {"HttpMethod", "POST"}})
                .message()
                .rfind("InvocationEndpoint", 0),
            0u);
  EXPECT_EQ(Call("ListApiDestinations", json::object())["ApiDestinations"].size(), 1u);
}

TEST_F(EventBusTest, WhatIsInUseIsNotDeleted) {
  const std::string dest = Destination();
  Call("PutRule", {{"Name", "r"}, {"EventPattern", kFailed}});
  Call("PutTargets", {{"Rule", "r"}, {"Targets", {{{"Id", "t"}, {"Arn", dest}}}}});
  EXPECT_EQ(Refusal("DeleteRule", {{"Name", "r"}}).code(), Code::kInvalidArgument);  // targets remain
  EXPECT_EQ(Refusal("DeleteApiDestination", {{"Name", "dest"}}).code(), Code::kInvalidArgument);
  EXPECT_EQ(Refusal("DeleteConnection", {{"Name", "dest-conn"}}).code(), Code::kInvalidArgument);
  Call("RemoveTargets", {{"Rule", "r"}, {"Ids", {"t", "not-there"}}});
  Call("DeleteRule", {{"Name", "r"}});
  Call("DeleteApiDestination", {{"Name", "dest"}});
  Call("DeleteConnection", {{"Name", "dest-conn"}});
  Open();
  EXPECT_TRUE(Rules().empty());
  EXPECT_TRUE(Call("ListConnections", json::object())["Connections"].empty());
}

TEST_F(EventBusTest, AtMostFiveTargetsAndARefusalAddsNone) {
  const std::string dest = Destination();
  Call("PutRule", {{"Name", "r"}, {"EventPattern", kFailed}});
  json four = json::array();
  for (int i = 0; i < 4; ++i) four.push_back({{"Id", "t" + std::to_string(i)}, {"Arn", dest}});
  Call("PutTargets", {{"Rule", "r"}, {"Targets", four}});
  json two = {{{"Id", "t8"}, {"Arn", dest}}, {{"Id", "t9"}, {"Arn", dest}}};
  EXPECT_EQ(Refusal("PutTargets", {{"Rule", "r"}, {"Targets", two}}).code(), Code::kInvalidArgument);
  EXPECT_EQ(Call("ListTargetsByRule", {{"Rule", "r"}})["Targets"].size(), 4u);
  Call("PutTargets", {{"Rule", "r"}, {"Targets", {{{"Id", "t0"}, {"Arn", dest}, {"Input", "{\"a\":1}"}}}}});  // replaces t0
  json targets = Call("ListTargetsByRule", {{"Rule", "r"}, {"Limit", 3}});
  EXPECT_EQ(targets["Targets"].size(), 3u);
  EXPECT_EQ(targets["Targets"][0]["Input"], "{\"a\":1}");
  EXPECT_EQ(Call("ListTargetsByRule", {{"Rule", "r"}, {"NextToken", targets["NextToken"]}})["Targets"].size(), 1u);
}

TEST_F(EventBusTest, ListRulesPagesByNameWithinAPrefix) {
  for (const char* n : {"b-2", "a-1", "b-1", "b-3"}) Call("PutRule", {{"Name", n}, {"EventPattern", kFailed}});
  json page = Call("ListRules", {{"NamePrefix", "b-"}, {"Limit", 2}});
  ASSERT_EQ(page["Rules"].size(), 2u);
  EXPECT_EQ(page["Rules"][0]["Name"], "b-1");
  EXPECT_EQ(page["Rules"][1]["Name"], "b-2");
  json rest = Call("ListRules", {{"NamePrefix", "b-"}, {"Limit", 2}, {"NextToken", page["NextToken"]}});
  ASSERT_EQ(rest["Rules"].size(), 1u);
  EXPECT_EQ(rest["Rules"][0]["Name"], "b-3");
  EXPECT_FALSE(rest.contains("NextToken"));
}

TEST_F(EventBusTest, PutEventsAnswersEachEntryAndStoresTheAcceptedOnes) {
  c_->SetEventRenderer([this](const control::State& s, const control::EventTrigger& e, uint64_t seq) {
    return RenderEvent(c_->config(), s, e, seq);
  });
  json out = Call("PutEvents", {{"Entries",
                                 {{{"Source", "aws.batch"}, {"DetailType", "x"}, {"Detail", "{}"}},
                                  {{"Source", "team.a"}, {"DetailType", "x"}, {"Detail", "not json"}},
                                  {{"Source", "team.a"}, {"DetailType", "Model Ready"}, {"Detail", R"({"auc": 0.9})"},
                                   {"Resources", {"arn:aws:s3:::bucket/model"}}}}}});
  EXPECT_EQ(out["FailedEntryCount"], 2);
  EXPECT_EQ(out["Entries"][0]["ErrorCode"], "NotAuthorizedForSourceException");
  EXPECT_EQ(out["Entries"][1]["ErrorCode"], "MalformedDetail");
  const std::string id = out["Entries"][2]["EventId"];

  std::vector<store::StoredEvent> stored;
  ASSERT_TRUE(c_->events()->Read(0, 100, &stored).ok());
  std::vector<json> custom;
  for (const auto& e : stored) {
    json doc = json::parse(e.doc);
    if (doc["event"]["source"] == "team.a") custom.push_back(doc["event"]);
  }
  ASSERT_EQ(custom.size(), 1u);
  EXPECT_EQ(custom[0]["id"], id);
  EXPECT_EQ(custom[0]["detail-type"], "Model Ready");
  EXPECT_EQ(custom[0]["detail"]["auc"], 0.9);
  EXPECT_EQ(custom[0]["resources"], json::parse(R"(["arn:aws:s3:::bucket/model"])"));
  EXPECT_EQ(custom[0]["account"], config_.account_id);
}

TEST_F(EventBusTest, ARateRuleFiresOneScheduledEventPerPeriodOfTheClockAndNoBurstAfterARestart) {
  for (const char* bad : {"cron(0 20 * * ? *)", "rate(1 minutes)", "rate(5 minute)", "rate(0 minutes)",
                          "rate(5 weeks)", "rate(5  minutes)", "rate(-1 minutes)", "every 5 minutes"}) {
    Status st = Refusal("PutRule", {{"Name", "tick"}, {"ScheduleExpression", bad}});
    EXPECT_EQ(st.message().rfind("ScheduleExpression", 0), 0u) << bad << ": " << st.message();
  }
  EXPECT_NE(Refusal("PutRule", {{"Name", "tick"}, {"ScheduleExpression", "cron(0 20 * * ? *)"}}).message().find("cron"),
            std::string::npos);
  EXPECT_NE(Refusal("PutRule", {{"Name", "tick"}}).message().find("EventPattern or ScheduleExpression"),
            std::string::npos);
  EXPECT_TRUE(Rules().empty());

  auto render = [this] {
    c_->SetEventRenderer([this](const control::State& s, const control::EventTrigger& e, uint64_t seq) {
      return RenderEvent(c_->config(), s, e, seq);
    });
  };
  render();
  auto scheduled = [this] {
    std::vector<json> out;
    std::vector<store::StoredEvent> stored;
    EXPECT_TRUE(c_->events()->Read(0, 1000, &stored).ok());
    for (const auto& e : stored) {
      json doc = json::parse(e.doc);
      if (doc["event"]["detail-type"] == "Scheduled Event") out.push_back(doc["event"]);
    }
    return out;
  };
  const EpochMs since = clock_.now_ms();
  json put = Call("PutRule", {{"Name", "tick"}, {"ScheduleExpression", "rate(5 minutes)"}});
  json rule = Call("DescribeRule", {{"Name", "tick"}});
  EXPECT_EQ(rule["ScheduleExpression"], "rate(5 minutes)");
  EXPECT_FALSE(rule.contains("EventPattern"));
  EXPECT_EQ(Rules()[0]["ScheduleExpression"], "rate(5 minutes)");

  c_->Step();
  EXPECT_TRUE(scheduled().empty());
  clock_.advance_ms(5 * 60'000);
  c_->Step();
  auto got = scheduled();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["source"], "aws.events");
  EXPECT_EQ(got[0]["resources"], json::array({put["RuleArn"]}));
  EXPECT_EQ(got[0]["detail"], json::object());
  EXPECT_EQ(got[0]["time"], FormatIso8601(since + 5 * 60'000));
  clock_.advance_ms(4 * 60'000);
  c_->Step();
  EXPECT_EQ(scheduled().size(), 1u);
  clock_.advance_ms(60'000);
  c_->Step();
  EXPECT_EQ(scheduled().size(), 2u);
  clock_.advance_ms(60 * 60'000);  // twelve periods at once: one event
  c_->Step();
  EXPECT_EQ(scheduled().size(), 3u);

  // Disabled, it fires nothing; enabled again, it fires from its next period.
  Call("DisableRule", {{"Name", "tick"}});
  clock_.advance_ms(10 * 60'000);
  c_->Step();
  EXPECT_EQ(scheduled().size(), 3u);
  Call("EnableRule", {{"Name", "tick"}});
  c_->Step();
  EXPECT_EQ(scheduled().size(), 3u);

  clock_.advance_ms(30 * 60'000);  // the server is down for six periods
  Open();
  render();
  c_->Step();
  EXPECT_EQ(scheduled().size(), 3u);  // no burst for what was missed
  clock_.advance_ms(5 * 60'000);
  c_->Step();
  EXPECT_EQ(scheduled().size(), 4u);
  EXPECT_EQ(Call("DescribeRule", {{"Name", "tick"}})["ScheduleExpression"], "rate(5 minutes)");

  // Its targets get its scheduled events (and, with a pattern too, the pattern's events).
  const std::string dest = Destination();
  Call("PutTargets", {{"Rule", "tick"}, {"Targets", {{{"Id", "t"}, {"Arn", dest}}}}});
  EXPECT_EQ(json::parse(EventBridgeDeliveries(*c_)[0].pattern),
            json({{"source", {"aws.events"}}, {"detail-type", {"Scheduled Event"}}, {"resources", {put["RuleArn"]}}}));
  Call("PutRule", {{"Name", "tick"}, {"ScheduleExpression", "rate(1 hour)"}, {"EventPattern", kFailed}});
  EXPECT_EQ(json::parse(EventBridgeDeliveries(*c_)[0].pattern)["$or"][0], json::parse(kFailed));
}

TEST_F(EventBusTest, ConfigurationFileWebhooksAreListedAndReadOnly) {
  WebhookConfig w;
  w.name = "ops";
  w.url = "http://127.0.0.1:9/ops";
  w.sources = {"aws.batch"};
  config_.webhooks = {w};
  Open();
  json rules = Rules();
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0]["Name"], "ops");
  EXPECT_EQ(rules[0]["ManagedBy"], "trainyard.config");
  EXPECT_EQ(json::parse(rules[0]["EventPattern"].get<std::string>()), json::parse(R"({"source": ["aws.batch"]})"));
  for (const char* op : {"PutRule", "DisableRule", "DeleteRule"}) {
    Status st = Refusal(op, {{"Name", "ops"}, {"EventPattern", kFailed}});
    EXPECT_EQ(st.code(), Code::kFailedPrecondition) << op;
    EXPECT_NE(st.message().find("configuration file"), std::string::npos) << st.message();
  }
  EXPECT_EQ(EventBridgeDeliveries(*c_).size(), 1u);  // the webhook itself
}

TEST_F(EventBusTest, ARuleKeepsTheOwnerThatMadeItAcrossARestartAndItsDeliveriesCarryIt) {
  const std::string dest = Destination();
  const std::string c = "arn:aws:iam::" + config_.account_id + ":user/c";
  CallAs(c, "PutRule", {{"Name", "c-all"}, {"EventPattern", R"({"account": [")" + config_.account_id + R"("]})"}});
  CallAs(c, "PutTargets", {{"Rule", "c-all"}, {"Targets", {{{"Id", "t"}, {"Arn", dest}}}}});
  // Changed by someone else (allowed to), it stays c's: it still sees only what c may read.
  Call("PutRule", {{"Name", "c-all"}, {"EventPattern", kFailed}});
  Open();
  auto deliveries = EventBridgeDeliveries(*c_);
  ASSERT_EQ(deliveries.size(), 1u);
  EXPECT_EQ(deliveries[0].owner, c);
}

TEST_F(EventBusTest, ARuleStoredWithoutAnOwnerDeliversNothingUntilAPutRuleNamesOne) {
  const std::string dest = Destination();
  Call("PutRule", {{"Name", "old"}, {"EventPattern", kFailed}});
  Call("PutTargets", {{"Rule", "old"}, {"Targets", {{{"Id", "t"}, {"Arn", dest}}}}});
  {  // as a server before owners were recorded wrote it
    std::lock_guard lock(data_->mu);
    auto& doc = data_->docs[store::Kind::kMeta]["eventbus/rule/old"];
    json j = json::parse(doc);
    j.erase("owner");
    doc = j.dump();
  }
  Open();
  EXPECT_TRUE(EventBridgeDeliveries(*c_).empty());
  Call("PutRule", {{"Name", "old"}, {"EventPattern", kFailed}});
  ASSERT_EQ(EventBridgeDeliveries(*c_).size(), 1u);
  EXPECT_EQ(EventBridgeDeliveries(*c_)[0].owner, Root());
}

TEST_F(EventBusTest, PutEventsRecordsWhoPutEachEvent) {
  c_->SetEventRenderer([this](const control::State& s, const control::EventTrigger& e, uint64_t seq) {
    return RenderEvent(c_->config(), s, e, seq);
  });
  const std::string c = "arn:aws:iam::" + config_.account_id + ":user/c";
  CallAs(c, "PutEvents", {{"Entries", {{{"Source", "team.c"}, {"DetailType", "x"}, {"Detail", "{}"}}}}});
  std::vector<store::StoredEvent> stored;
  ASSERT_TRUE(c_->events()->Read(0, 100, &stored).ok());
  ASSERT_FALSE(stored.empty());
  EXPECT_EQ(json::parse(stored.back().doc)["put_by"], c);
}

// A JSON text `depth` levels deep: {"a":{"a":...{}...}}.
std::string Nested(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  for (int i = 0; i < depth; ++i) s += "}";
  return s;
}

TEST_F(EventBusTest, JsonTextNestedDeeperThanTheLimitIsRefusedNamingTheMember) {
  const std::string dest = Destination();
  Call("PutRule", {{"Name", "r"}, {"EventPattern", kFailed}});
  const std::string deep = Nested(60'000);  // 120 KB: what ended the server in its renderer
  struct Case {
    const char* op;
    json req;
    const char* member;
  };
  const Case cases[] = {
      {"PutEvents", {{"Entries", {{{"Source", "team.a"}, {"DetailType", "x"}, {"Detail", "{}"}},
                                  {{"Source", "team.a"}, {"DetailType", "x"}, {"Detail", deep}}}}}, "Entries[1].Detail"},
      {"PutRule", {{"Name", "deep"}, {"EventPattern", Nested(config_.max_json_depth + 1)}}, "EventPattern"},
      {"PutTargets", {{"Rule", "r"}, {"Targets", {{{"Id", "t"}, {"Arn", dest}, {"Input", deep}}}}}, "Targets[0].Input"},
      {"PutTargets", {{"Rule", "r"}, {"Targets", {{{"Id", "t"}, {"Arn", dest},
                                                   {"InputTransformer", {{"InputTemplate", deep}}}}}}},
       "Targets[0].InputTransformer.InputTemplate"},
  };
  for (const Case& c : cases) {
    Status st = Refusal(c.op, c.req);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << c.op;
    EXPECT_EQ(st.message().rfind(std::string(c.member) + ": nests JSON", 0), 0u) << st.message();
  }
  // The limit itself is accepted.
  json out = Call("PutEvents", {{"Entries", {{{"Source", "team.a"}, {"DetailType", "x"},
                                              {"Detail", Nested(config_.max_json_depth)}}}}});
  EXPECT_EQ(out["FailedEntryCount"], 0);
  EXPECT_TRUE(Call("ListTargetsByRule", {{"Rule", "r"}})["Targets"].empty());
}

TEST_F(EventBusTest, SourcesThatReadAsAwsOrAsTheServersOwnAreRefusedInAnySpelling) {
  const std::string reserved[] = {"aws.batch", "AWS.batch", "Aws.Sagemaker", "aws", "aws-batch", "aws_batch",
                                  "trainyard", "Trainyard", "trainyard.events"};
  const std::string invalid[] = {" aws.batch", "aws.batch ", "aws\u2024batch", "aws\uff0ebatch", "a\u0307ws.batch",
                                 "tab\tsource", "team a", ""};
  for (const std::string& source : reserved) {
    json out = Call("PutEvents", {{"Entries", {{{"Source", source}, {"DetailType", "Batch Service Job State Change"},
                                                {"Detail", "{}"}}}}});
    EXPECT_EQ(out["Entries"][0].value("ErrorCode", ""), "NotAuthorizedForSourceException") << source;
  }
  for (const std::string& source : invalid) {
    json out = Call("PutEvents", {{"Entries", {{{"Source", source}, {"DetailType", "x"}, {"Detail", "{}"}}}}});
    EXPECT_EQ(out["Entries"][0].value("ErrorCode", ""), "InvalidArgument") << source;
    EXPECT_NE(out["Entries"][0].value("ErrorMessage", "").find("Source"), std::string::npos) << source;
  }
  for (const std::string source : {"awsome.app", "team.a", "com.example/orders", "my-app_2"}) {
    json out = Call("PutEvents", {{"Entries", {{{"Source", source}, {"DetailType", "x"}, {"Detail", "{}"}}}}});
    EXPECT_EQ(out["FailedEntryCount"], 0) << source << ": " << out.dump();
  }
}

TEST_F(EventBusTest, AnApiDestinationNamingThisHostIsRefusedUnlessTheOperatorAllowsIt) {
  Destination("ok");  // a routable address
  const std::string conn = Call("DescribeConnection", {{"Name", "ok-conn"}})["ConnectionArn"];
  for (const std::string url : {"http://127.0.0.1:8080/internal/admin", "http://localhost:5432/", "http://127.0.0.2/",
                                "http://0.0.0.0/", "http://[::1]/", "http://169.254.169.254/latest/meta-data/"}) {
    Status st = Refusal("CreateApiDestination",
                        {{"Name", "local"}, {"ConnectionArn", conn}, {"InvocationEndpoint", url}, {"HttpMethod", "PUT"}});
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << url;
    EXPECT_EQ(st.message().rfind("InvocationEndpoint: ", 0), 0u) << st.message();
  }
  EXPECT_EQ(Call("ListApiDestinations", json::object())["ApiDestinations"].size(), 1u);

  config_.events_allow_local_endpoints = true;
  Open();
  Call("CreateApiDestination", {{"Name", "local"},
                                {"ConnectionArn", conn},
                                {"InvocationEndpoint", "http://127.0.0.1:8080/hook"},
                                {"HttpMethod", "POST"}});
}

}  // namespace
}  // namespace ty::api
