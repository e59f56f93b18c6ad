// Event filters and EventBridge event patterns (obs/event_filter).
#include <gtest/gtest.h>

#include "obs/event_filter.h"

namespace ty::obs {
namespace {

using nlohmann::json;

json Event() {
  return json::parse(R"({"version":"0","id":"1","source":"aws.batch","detail-type":"Batch Service Job State Change",
    "resources":["arn:aws:batch:us-east-1:0:service-job/a"],
    "detail":{"status":"FAILED","jobName":"train-resnet","attempts":[{"x":1}],"retries":3,
              "tags":["gpu","nlp"],"statusReason":"Essential container exited"}})");
}

bool Match(const char* pattern) {
  json p = json::parse(pattern);
  EXPECT_TRUE(CheckEventPattern(p).ok()) << pattern << ": " << CheckEventPattern(p).message();
  return MatchesEventPattern(p, Event());
}

TEST(EventPattern, ExactValuesNestedFieldsAndArrays) {
  EXPECT_TRUE(Match(R"({"source":["aws.batch"]})"));
  EXPECT_FALSE(Match(R"({"source":["aws.sagemaker"]})"));
  EXPECT_TRUE(Match(R"({"source":["aws.sagemaker","aws.batch"],"detail":{"status":["FAILED"]}})"));
  EXPECT_FALSE(Match(R"({"detail":{"status":["SUCCEEDED"]}})"));
  EXPECT_TRUE(Match(R"({"detail":{"tags":["nlp"]}})"));  // any element of an array value
  EXPECT_FALSE(Match(R"({"detail":{"missing":["x"]}})"));
  EXPECT_FALSE(Match(R"({"detail":{"status":{"nested":["x"]}}})"));  // not an object in the event
}

TEST(EventPattern, ANestedObjectMatchesOneElementOfAnArrayOfObjectsAsAWhole) {
  const json event = json::parse(R"({"detail": {"Tags": [{"Key": "team", "Value": "nlp"}, {"Key": "owner", "Value": "alice"}],
                                                "Grid": [[{"x": 1}], [{"x": 2, "y": 3}]]}})");
  auto match = [&](const char* pattern) {
    json p = json::parse(pattern);
    EXPECT_TRUE(CheckEventPattern(p).ok()) << pattern;
    return MatchesEventPattern(p, event);
  };
  EXPECT_TRUE(match(R"({"detail": {"Tags": {"Key": ["owner"], "Value": ["alice"]}}})"));
  EXPECT_TRUE(match(R"({"detail": {"Tags": {"Value": [{"prefix": "ali"}]}}})"));
  // Both fields from one element: owner's value is not nlp, and no tag has both.
  EXPECT_FALSE(match(R"({"detail": {"Tags": {"Key": ["owner"], "Value": ["nlp"]}}})"));
  EXPECT_FALSE(match(R"({"detail": {"Tags": {"Key": ["manager"]}}})"));
  EXPECT_TRUE(match(R"({"detail": {"Grid": {"x": [2], "y": [3]}}})"));  // arrays of arrays of objects
  EXPECT_FALSE(match(R"({"detail": {"Grid": {"x": [1], "y": [3]}}})"));
}

TEST(EventPattern, Matchers) {
  EXPECT_TRUE(Match(R"({"detail":{"jobName":[{"prefix":"train-"}]}})"));
  EXPECT_FALSE(Match(R"({"detail":{"jobName":[{"prefix":"eval-"}]}})"));
  EXPECT_TRUE(Match(R"({"detail":{"jobName":[{"suffix":"resnet"}]}})"));
  EXPECT_TRUE(Match(R"({"detail":{"status":[{"anything-but":["SUCCEEDED","RUNNING"]}]}})"));
  EXPECT_FALSE(Match(R"({"detail":{"status":[{"anything-but":"FAILED"}]}})"));
  EXPECT_TRUE(Match(R"({"detail":{"jobName":[{"anything-but":{"prefix":"eval-"}}]}})"));
  EXPECT_TRUE(Match(R"({"detail":{"statusReason":[{"exists":true}]}})"));
  EXPECT_TRUE(Match(R"({"detail":{"stoppedAt":[{"exists":false}]}})"));
  EXPECT_FALSE(Match(R"({"detail":{"stoppedAt":[{"exists":true}]}})"));
  EXPECT_TRUE(Match(R"({"detail":{"retries":[{"numeric":[">",2,"<=",3]}]}})"));
  EXPECT_FALSE(Match(R"({"detail":{"retries":[{"numeric":["<",3]}]}})"));
  EXPECT_TRUE(Match(R"({"detail":{"status":[{"equals-ignore-case":"failed"}]}})"));
  EXPECT_TRUE(Match(R"({"detail":{"jobName":[{"wildcard":"train-*"}]}})"));
  EXPECT_TRUE(Match(R"({"$or":[{"source":["aws.sagemaker"]},{"detail":{"status":["FAILED"]}}]})"));
  EXPECT_FALSE(Match(R"({"$or":[{"source":["aws.sagemaker"]},{"detail":{"status":["RUNNING"]}}]})"));
}

TEST(EventPattern, BadPatternsNameTheRule) {
  auto msg = [](const char* p) { return CheckEventPattern(json::parse(p)).message(); };
  EXPECT_NE(msg(R"({"source":"aws.batch"})").find("source must be an array"), std::string::npos);
  EXPECT_NE(msg(R"({"source":[]})").find("must not be an empty array"), std::string::npos);
  EXPECT_NE(msg(R"({"source":[{"prefix":1}]})").find("\"prefix\" takes a string"), std::string::npos);
  EXPECT_NE(msg(R"({"source":[{"numeric":[">"]}]})").find("\"numeric\" takes"), std::string::npos);
  EXPECT_NE(msg(R"({"source":[{"sometimes":1}]})").find("unknown matcher"), std::string::npos);
  EXPECT_NE(msg(R"({"$or":[{"source":["a"]}]})").find("at least two"), std::string::npos);
  EXPECT_NE(msg(R"([1])").find("must be a JSON object"), std::string::npos);
}

// {"a":{"a":...{"a":[1]}...}}: `levels` nested objects.
std::string NestedPattern(size_t levels) {
  std::string p;
  for (size_t i = 0; i < levels; ++i) p += R"({"a":)";
  p += "[1]";
  return p + std::string(levels, '}');
}

TEST(EventPattern, NestingUpTo32LevelsIsChecked) {
  json event = 1;
  for (int i = 0; i < 32; ++i) event = json{{"a", event}};
  json ok = json::parse(NestedPattern(32));
  ASSERT_TRUE(CheckEventPattern(ok).ok()) << CheckEventPattern(ok).message();
  EXPECT_TRUE(MatchesEventPattern(ok, event));
  std::string path = "a";  // where the 33rd object sits: a.a...a, 32 keys
  for (int i = 1; i < 32; ++i) path += ".a";
  EXPECT_EQ(CheckEventPattern(json::parse(NestedPattern(33))).message(),
            "event pattern: " + path + " is nested more than 32 levels deep");
}

TEST(EventPattern, DeeplyNestedPatternsAreRefusedWithoutRecursingToTheBottom) {
  // A pattern arrives as a string inside the request, so no JSON depth limit on the request
  // applies to it; checking it once recursed per level and overflowed the stack
  // (fuzz/regressions/event_pattern/).
  EventFilter f;
  Status st = f.SetPattern(NestedPattern(200000));
  EXPECT_NE(st.message().find("is nested more than 32 levels deep"), std::string::npos) << st.message();
  std::string anything_but = R"({"a":[)";
  for (int i = 0; i < 200000; ++i) anything_but += R"({"anything-but":)";
  anything_but += "1" + std::string(200000, '}') + "]}";
  st = f.SetPattern(anything_but);
  EXPECT_NE(st.message().find("a.anything-but.anything-but"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("is nested more than 32 levels deep"), std::string::npos);
  EXPECT_TRUE(f.pattern.is_null());
}

TEST(EventFilter, QueueShareTagAndTypeFiltersAllMustPass) {
  json stored = {{"seq", 4}, {"queue", "gpu"}, {"share", "nlp"}, {"tags", {{"team", "nlp"}, {"env", "prod"}}}, {"event", Event()}};
  EventFilter f;
  EXPECT_TRUE(f.Matches(stored));
  f.queues = {"cpu", "gpu"};
  f.shares = {"nlp"};
  f.tags = {{"team", "nlp"}};
  f.detail_types = {"Batch Service Job State Change"};
  EXPECT_TRUE(f.Matches(stored));
  f.tags.emplace_back("env", "dev");
  EXPECT_FALSE(f.Matches(stored));
  f.tags.pop_back();
  ASSERT_TRUE(f.SetPattern(R"({"detail":{"status":["RUNNING"]}})").ok());
  EXPECT_FALSE(f.Matches(stored));
  ASSERT_TRUE(f.SetPattern("").ok());
  f.sources = {"aws.sagemaker"};
  EXPECT_FALSE(f.Matches(stored));
  EXPECT_FALSE(f.SetPattern("{oops").ok());
}

}  // namespace
}  // namespace ty::obs
