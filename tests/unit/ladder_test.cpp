// The capacity ladder's parsing and rung choice (docs/spot.md).
#include "control/ladder.h"

#include <gtest/gtest.h>

#include <map>

namespace ty::control {
namespace {

Config Catalogue() {
  Config c = DefaultConfig();  // ml.m5.large: 4 on-demand, 2 spot; ml.m5.2xlarge: 1, no spot
  return c;
}

TEST(Ladder, NoTagMeansNoLadder) {
  auto l = ParseLadder({}, {"ml.m5.large", false}, 1, Catalogue());
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->rungs.empty());
  EXPECT_EQ(l->fallback_after_interruptions, 2);
}

TEST(Ladder, OwnRungGoesFirstUnlessTheTagPlacesIt) {
  auto l = ParseLadder({{kLadderTag, "ml.m5.xlarge  ml.m5.2xlarge"}}, {"ml.m5.large", true}, 1, Catalogue());
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(LadderText(*l), "ml.m5.large:spot ml.m5.xlarge ml.m5.2xlarge");
  l = ParseLadder({{kLadderTag, "ml.m5.xlarge ml.m5.large:spot"}}, {"ml.m5.large", true}, 1, Catalogue());
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(LadderText(*l), "ml.m5.xlarge ml.m5.large:spot");
  // ":on-demand" is the default market, written out.
  l = ParseLadder({{kLadderTag, "ml.m5.large:spot ml.m5.large:on-demand"}}, {"ml.m5.large", true}, 1, Catalogue());
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(LadderText(*l), "ml.m5.large:spot ml.m5.large");
}

TEST(Ladder, BadRungsNameTheRule) {
  const Config c = Catalogue();
  auto msg = [&](const Tags& tags, int64_t count = 1) {
    auto l = ParseLadder(tags, {"ml.m5.large", false}, count, c);
    return l.ok() ? std::string("ok") : l.status().message();
  };
  EXPECT_NE(msg({{kLadderTag, "ml.x.large"}}).find("not in this host's catalogue"), std::string::npos);
  EXPECT_NE(msg({{kLadderTag, "ml.m5.large:cheap"}}).find("must be <instance type>"), std::string::npos);
  EXPECT_NE(msg({{kLadderTag, "ml.m5.xlarge ml.m5.xlarge"}}).find("listed twice"), std::string::npos);
  EXPECT_NE(msg({{kLadderTag, "   "}}).find("at least one rung"), std::string::npos);
  EXPECT_NE(msg({{kLadderTag, "ml.m5.2xlarge:spot"}}).find("offers 0 instances"), std::string::npos);
  EXPECT_NE(msg({{kLadderTag, "ml.m5.xlarge"}}, 3).find("fewer than the job's InstanceCount 3"), std::string::npos);
  EXPECT_NE(msg({{kFallbackTag, "-1"}}).find("whole number"), std::string::npos);
  EXPECT_EQ(msg({{kFallbackTag, "0"}}), "ok");
}

TEST(Ladder, TextRoundTrips) {
  auto l = ParseLadder({{kLadderTag, "ml.m5.large ml.m5.xlarge:spot"}, {kFallbackTag, "3"}}, {"ml.m5.large", false}, 1,
                       Catalogue());
  ASSERT_TRUE(l.ok());
  Ladder back = LadderFromText(LadderText(*l), l->fallback_after_interruptions);
  EXPECT_EQ(back.rungs, l->rungs);
  EXPECT_EQ(back.fallback_after_interruptions, 3);
}

TEST(Ladder, PicksTheFirstRungWithRoom) {
  Ladder l = LadderFromText("a:spot a b", 2);
  std::map<std::string, int64_t> free = {{"a#spot", 0}, {"a", 1}, {"b", 4}};
  auto f = [&](const std::string& k) { return free[k]; };
  EXPECT_EQ(PickRung(l, 1, 0, f), 1);   // spot is full: on-demand of the same type
  EXPECT_EQ(PickRung(l, 2, 0, f), 2);   // a has one free: the next type
  EXPECT_EQ(PickRung(l, 5, 0, f), -1);  // nowhere
  free["a#spot"] = 8;
  EXPECT_EQ(PickRung(l, 2, 0, f), 0);   // back to the top once it frees
  EXPECT_EQ(PickRung(l, 2, 2, f), 2);   // two interruptions: spot is skipped
}

TEST(Ladder, SpotOnlyLaddersKeepSpotAfterInterruptions) {
  Ladder l = LadderFromText("a:spot b:spot", 1);
  auto f = [](const std::string& k) { return k == "b#spot" ? int64_t{1} : int64_t{0}; };
  EXPECT_EQ(PickRung(l, 1, 5, f), 1);  // no on-demand rung to fall to: interruptions change nothing
}

}  // namespace
}  // namespace ty::control
