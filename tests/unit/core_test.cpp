#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/clock.h"
#include "core/config.h"
#include "core/model.h"
#include "core/strings.h"

namespace ty {
namespace {

TEST(Glob, StarMatchesAnyRunIncludingEmpty) {
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("Received status from SageMaker: InternalServerError*",
                        "Received status from SageMaker: InternalServerError: try again"));
  EXPECT_FALSE(GlobMatch("Received*Validation*", "Received status: InternalServerError"));
  EXPECT_TRUE(GlobMatch("*CapacityError*", "x CapacityError y"));
  EXPECT_FALSE(GlobMatch("abc", "abcd"));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXXbYYc"));
}

TEST(AmzDate, RoundTripsAndRejectsGarbage) {
  int64_t ms = 0;
  ASSERT_TRUE(ParseAmzDate("20150830T123600Z", &ms));
  EXPECT_EQ(ms, 1440938160000);
  EXPECT_EQ(FormatAmzDate(ms), "20150830T123600Z");
  EXPECT_FALSE(ParseAmzDate("2015-08-30T12:36:00Z", &ms));
  EXPECT_FALSE(ParseAmzDate("20151330T123600Z", &ms));
}

TEST(Strings, SplitKeepsEmptyFields) {
  EXPECT_EQ(Split("a//b", '/'), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(Trim("  x y \n"), "x y");
}

TEST(Uuid, HasVersion4Shape) {
  std::string u = NewUuid();
  ASSERT_EQ(u.size(), 36u);
  EXPECT_EQ(u[14], '4');
  EXPECT_NE(NewUuid(), u);
}

TEST(Model, ServiceJobRoundTripsThroughItsDocument) {
  ServiceJob j;
  j.id = "id-1";
  j.name = "n";
  j.seq = 42;
  j.status = JobStatus::kRunning;
  j.tags = {{"team", "a"}};
  j.attempts.push_back({"arn", "tj", 1, 2, "why"});
  ServiceJob back;
  ASSERT_TRUE(DecodeDoc(EncodeDoc(j), &back));
  EXPECT_EQ(back.id, "id-1");
  EXPECT_EQ(back.seq, 42u);
  EXPECT_EQ(back.status, JobStatus::kRunning);
  EXPECT_EQ(back.tags.at("team"), "a");
  ASSERT_EQ(back.attempts.size(), 1u);
  EXPECT_EQ(back.attempts[0].status_reason, "why");
  EXPECT_FALSE(DecodeDoc("not json", &back));
}

TEST(Model, JobStatusNamesParseBack) {
  for (int i = 0; i < 8; ++i) {
    auto s = static_cast<JobStatus>(i);
    EXPECT_EQ(ParseJobStatus(JobStatusName(s)), s);
  }
  EXPECT_FALSE(ParseJobStatus("DONE").has_value());
}

std::string WriteTemp(const std::string& text) {
  std::string path = ::testing::TempDir() + "/ty-config-" + std::to_string(std::rand()) + ".toml";
  std::ofstream(path) << text;
  return path;
}

TEST(Config, FileOverridesDefaultsAndAddsInstanceTypes) {
  auto c = LoadConfigFile(WriteTemp("[server]\nregion = \"eu-west-1\"\n[[instance_types]]\nname = \"ml.m5.large\"\n"
                                    "count = 9\n[[instance_types]]\nname = \"ml.g6.xlarge\"\ncount = 1\ngpus = 1\n"),
                          DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->region, "eu-west-1");
  EXPECT_EQ(c->FindInstanceType("ml.m5.large")->count, 9);
  EXPECT_EQ(c->FindInstanceType("ml.g6.xlarge")->gpus, 1);
}

TEST(Config, UnknownKeysAndBadTypesAreErrors) {
  auto c = LoadConfigFile(WriteTemp("[server]\nregoin = \"x\"\n"), DefaultConfig());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("regoin"), std::string::npos);
  c = LoadConfigFile(WriteTemp("[executor]\nsandbox = \"docker\"\n"), DefaultConfig());
  EXPECT_FALSE(c.ok());
  c = LoadConfigFile(WriteTemp("[server]\nhttp_threads = \"many\"\n"), DefaultConfig());
  EXPECT_FALSE(c.ok());
}

TEST(Config, WarmPoolQuotaAndSetupCommandPerInstanceType) {
  auto c = LoadConfigFile(WriteTemp("[executor]\npip_no_index = true\npip_find_links = \"/wheels\"\n"
                                    "[[instance_types]]\nname = \"ml.m5.large\"\nwarm_pool_quota = 1\n"
                                    "setup_command = \"python3 -m venv venv\"\n"),
                          DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->FindInstanceType("ml.m5.large")->WarmPoolQuota(), 1);
  EXPECT_EQ(c->FindInstanceType("ml.m5.large")->setup_command, "python3 -m venv venv");
  EXPECT_EQ(c->FindInstanceType("ml.m5.xlarge")->WarmPoolQuota(), 2);  // default: the type's count
  EXPECT_TRUE(c->pip_no_index);
  EXPECT_EQ(c->pip_find_links, "/wheels");
  auto bad = LoadConfigFile(WriteTemp("[[instance_types]]\nname = \"ml.m5.large\"\nwarm_pool_quota = -2\n"), DefaultConfig());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("warm_pool_quota"), std::string::npos);
}

TEST(Clock, OffsetClockFollowsTheWallClockPlusWhatWasAdvanced) {
  OffsetClock c;
  EpochMs before = SystemClock::instance().now_ms();
  c.advance_ms(86'400'000);
  EpochMs now = c.now_ms();
  EXPECT_GE(now, before + 86'400'000);
  EXPECT_LE(now, SystemClock::instance().now_ms() + 86'400'000);
  EXPECT_EQ(c.offset_ms(), 86'400'000);
}

}  // namespace
}  // namespace ty
