// EventBridge target input (obs/input_transformer.h): what PutTargets accepts of an
// InputTransformer, and the body rendered for an event, hostile values included.
#include "obs/input_transformer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ty::obs {
namespace {

using nlohmann::json;

const json kEvent = {
    {"id", "e-1"},
    {"source", "trainyard.test"},
    {"detail-type", "Job State Change"},
    {"resources", {"arn:r0", "arn:r1"}},
    {"detail", {{"status", "FAILED"}, {"attempts", 3}, {"tags", {{"team", "vision"}}}, {"ok", false}}}};
const TransformerContext kContext{"my-rule", "arn:aws:events:us-east-1:123456789012:rule/my-rule", 1700000000123};

std::string Render(const InputPathsMap& paths, const std::string& tmpl, const json& event = kEvent) {
  EXPECT_TRUE(CheckInputTransformer(paths, tmpl).ok()) << CheckInputTransformer(paths, tmpl).message();
  return RenderInputTemplate(paths, tmpl, event, kContext);
}

TEST(InputTransformerTest, AJsonTemplateGetsEachValueAsJsonAndNullForAPathThatFindsNothing) {
  const std::string out = Render(
      {{"status", "$.detail.status"}, {"n", "$.detail.attempts"}, {"tags", "$.detail.tags"},
       {"ok", "$.detail.ok"}, {"none", "$.detail.missing.deeper"}, {"r1", "$.resources[1]"}},
      R"({"s": <status>, "n": <n>, "tags": <tags>, "ok": <ok>, "none": <none>, "list": [<r1>, <n>]})");
  EXPECT_EQ(json::parse(out), json::parse(R"({"s": "FAILED", "n": 3, "tags": {"team": "vision"}, "ok": false,
                                            "none": null, "list": ["arn:r1", 3]})"));
}

TEST(InputTransformerTest, AValueInsideAJsonStringIsItsTextEscapedForThatString) {
  const std::string out = Render({{"status", "$.detail.status"}, {"n", "$.detail.attempts"}, {"none", "$.nothing"}},
                                 R"({"text": "job is <status> after <n> tries<none>", "q": "\"<status>\""})");
  EXPECT_EQ(json::parse(out), json::parse(R"({"text": "job is FAILED after 3 tries", "q": "\"FAILED\""})"));
}

TEST(InputTransformerTest, HostileValuesStayInsideTheirJsonValueAndComeBackUnchanged) {
  const std::vector<std::string> hostile = {
      R"(say "hi")",
      "line one\nline two\r\n\ttabbed",
      "</script><script>alert(1)</script>",
      R"(", "injected": true, "x": ")",
      "back\\slash \\\" and \\u0041",
      "unicode: \xc3\xa9\xe2\x82\xac \xf0\x9f\x9a\x80 \xe4\xb8\xad",
      std::string("nul \0 and bell \x07", 18),
      "<status> is not a placeholder inside a value",
  };
  for (const std::string& value : hostile) {
    json event = kEvent;
    event["detail"]["status"] = value;
    const std::string out = Render({{"status", "$.detail.status"}},
                                   R"({"as_value": <status>, "in_text": "status: <status>!", "keys": 2})", event);
    json parsed = json::parse(out, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << "not JSON for " << json(value).dump() << ": " << out;
    EXPECT_EQ(parsed.size(), 3u) << out;  // nothing was injected beside the template's keys
    EXPECT_EQ(parsed["as_value"], value);
    EXPECT_EQ(parsed["in_text"], "status: " + value + "!");
    EXPECT_EQ(parsed["keys"], 2);
  }
}

TEST(InputTransformerTest, ATextTemplateGetsPlainTextAndNothingForAPathThatFindsNothing) {
  EXPECT_EQ(Render({{"status", "$.detail.status"}, {"tags", "$.detail.tags"}, {"none", "$.detail.none"}},
                   "Job is <status> (tags <tags>)<none>, see <nope> and a < b > c"),
            R"(Job is FAILED (tags {"team":"vision"}), see <nope> and a < b > c)");
  // Text that merely starts with a brace is not a JSON template.
  EXPECT_EQ(Render({{"status", "$.detail.status"}}, "{<status>} happened"), "{FAILED} happened");
}

TEST(InputTransformerTest, PredefinedVariablesNameTheRuleTheEventAndItsIngestionTime) {
  const std::string out = Render({}, R"({"rule": <aws.events.rule-name>, "arn": "<aws.events.rule-arn>",
      "at": <aws.events.event.ingestion-time>, "event": <aws.events.event>, "raw": <aws.events.event.json>})");
  json j = json::parse(out);
  EXPECT_EQ(j["rule"], "my-rule");
  EXPECT_EQ(j["arn"], kContext.rule_arn);
  EXPECT_EQ(j["at"], "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(j["event"], kEvent);
  ASSERT_TRUE(j["raw"].is_string());
  EXPECT_EQ(json::parse(j["raw"].get<std::string>()), kEvent);
  EXPECT_EQ(Render({}, "rule <aws.events.rule-name>"), "rule my-rule");
}

TEST(InputTransformerTest, PutTargetsRefusesWhatAwsRefuses) {
  auto message = [](const InputPathsMap& paths, const std::string& tmpl) {
    Status st = CheckInputTransformer(paths, tmpl);
    EXPECT_FALSE(st.ok()) << tmpl;
    return st.message();
  };
  EXPECT_NE(message({{"k", "$.a"}}, R"({<k>: 1})").find("object key"), std::string::npos);
  EXPECT_NE(message({{"k", "$.a"}}, R"({"x<k>": 1})").find("object key"), std::string::npos);
  EXPECT_NE(message({{"k", "$.a"}}, R"({"a": <k> <k>})").find("must be JSON"), std::string::npos);
  EXPECT_NE(message({{"k", "$.a"}}, R"({"a": "<k>})").find("must be JSON"), std::string::npos);
  EXPECT_NE(message({}, "").find("InputTemplate: is required"), std::string::npos);
  EXPECT_NE(message({}, std::string(8193, 'x')).find("InputTemplate"), std::string::npos);
  EXPECT_NE(message({{"bad.key", "$.a"}}, "x").find("InputPathsMap: key 'bad.key'"), std::string::npos);
  EXPECT_NE(message({{"k", "detail.status"}}, "x").find("InputPathsMap.k:"), std::string::npos);
  EXPECT_NE(message({{"k", "$.a[x]"}}, "x").find("InputPathsMap.k:"), std::string::npos);
  InputPathsMap many;
  for (int i = 0; i < 101; ++i) many["v" + std::to_string(i)] = "$.a";
  EXPECT_NE(message(many, "x").find("at most 100"), std::string::npos);
  many.erase("v0");
  EXPECT_TRUE(CheckInputTransformer(many, "x").ok());
  EXPECT_TRUE(CheckInputTransformer({}, std::string(8192, 'x')).ok());
}

TEST(InputTransformerTest, PathsUseDotsAndArrayIndices) {
  EXPECT_TRUE(ValidEventPath("$"));
  EXPECT_TRUE(ValidEventPath("$.detail.status"));
  EXPECT_TRUE(ValidEventPath("$.resources[0]"));
  EXPECT_TRUE(ValidEventPath("$.detail-type"));
  EXPECT_FALSE(ValidEventPath(""));
  EXPECT_FALSE(ValidEventPath("$."));
  EXPECT_FALSE(ValidEventPath("$..a"));
  EXPECT_FALSE(ValidEventPath("$['a']"));
  EXPECT_EQ(*FindEventPath(kEvent, "$"), kEvent);
  EXPECT_EQ(*FindEventPath(kEvent, "$.resources[1]"), "arn:r1");
  EXPECT_EQ(*FindEventPath(kEvent, "$.detail-type"), "Job State Change");
  EXPECT_EQ(FindEventPath(kEvent, "$.resources[2]"), nullptr);
  EXPECT_EQ(FindEventPath(kEvent, "$.detail.status.deeper"), nullptr);
  EXPECT_EQ(FindEventPath(kEvent, "$.detail[0]"), nullptr);
}

}  // namespace
}  // namespace ty::obs
