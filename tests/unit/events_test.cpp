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
