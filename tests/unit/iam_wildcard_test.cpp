// Wildcard matching for actions, ARNs and the *Like operators (iam/wildcard.h).
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "iam/wildcard.h"

namespace ty::iam {
namespace {

bool Like(const char* pattern, const char* text) { return Wildcard(pattern).Matches(text); }

TEST(IamWildcard, StarMatchesAnyRunIncludingNone) {
  EXPECT_TRUE(Like("*", ""));
  EXPECT_TRUE(Like("*", "anything"));
  EXPECT_TRUE(Like("Submit*", "Submit"));
  EXPECT_TRUE(Like("Submit*", "SubmitServiceJob"));
  EXPECT_TRUE(Like("*Job", "SubmitServiceJob"));
  EXPECT_TRUE(Like("S*J*b", "SubmitServiceJob"));
  EXPECT_FALSE(Like("Submit*", "TerminateJob"));
  EXPECT_FALSE(Like("*Jobs", "SubmitServiceJob"));
}

TEST(IamWildcard, QuestionMarkMatchesExactlyOneCharacter) {
  EXPECT_TRUE(Like("team-?", "team-a"));
  EXPECT_FALSE(Like("team-?", "team-"));
  EXPECT_FALSE(Like("team-?", "team-ab"));
  EXPECT_TRUE(Like("?*", "x"));
  EXPECT_FALSE(Like("?*", ""));
}

TEST(IamWildcard, EverythingElseIsLiteralAndCaseSensitive) {
  EXPECT_TRUE(Like("a.b[c]", "a.b[c]"));
  EXPECT_FALSE(Like("a.b", "axb"));
  EXPECT_FALSE(Like("Team", "team"));
  EXPECT_FALSE(Like("", "x"));
  EXPECT_TRUE(Like("", ""));
}

TEST(IamWildcard, MiddleRunsArePlacedLeftmostWithoutLosingALaterMatch) {
  // The first "ab" candidate is followed by "x", not "c"; the match must still be found later.
  EXPECT_TRUE(Like("*ab*c", "abxabc"));
  EXPECT_TRUE(Like("*a?c*", "abxadcz"));
  EXPECT_FALSE(Like("*ab*ab*", "abxa"));
  // Two runs may not share characters.
  EXPECT_FALSE(Like("*ab*ba*", "aba"));
  EXPECT_TRUE(Like("*ab*ba*", "abba"));
  // The tail must not be consumed by the middle run.
  EXPECT_FALSE(Like("*aa*aa", "aaa"));
  EXPECT_TRUE(Like("*aa*aa", "aaaa"));
}

TEST(IamWildcard, IgnoreCaseLowersTheTextAgainstALowerCasePattern) {
  Wildcard w("batch:submit*");
  EXPECT_TRUE(w.Matches("batch:SubmitServiceJob", /*ignore_case=*/true));
  EXPECT_TRUE(w.Matches("BATCH:SUBMITJOB", /*ignore_case=*/true));
  EXPECT_FALSE(w.Matches("batch:SubmitServiceJob", /*ignore_case=*/false));
}

TEST(IamWildcard, LiteralPartsKeepStarAndQuestionMarkLiteral) {
  Wildcard w;
  w.AppendPattern("arn:aws:s3:::bucket/home/");
  w.AppendLiteral("*");  // a user named "*"
  w.AppendPattern("/*");
  EXPECT_TRUE(w.MatchesArn("arn:aws:s3:::bucket/home/*/notes.txt"));
  EXPECT_FALSE(w.MatchesArn("arn:aws:s3:::bucket/home/bob/notes.txt"));
}

TEST(IamWildcard, ArnFieldsAreMatchedOneByOne) {
  Wildcard w("arn:aws:batch:*:*:job-queue/team-a*");
  EXPECT_TRUE(w.MatchesArn("arn:aws:batch:us-east-1:000000000000:job-queue/team-a"));
  EXPECT_TRUE(w.MatchesArn("arn:aws:batch:us-east-1:000000000000:job-queue/team-a-gpu"));
  EXPECT_FALSE(w.MatchesArn("arn:aws:batch:us-east-1:000000000000:job-queue/team-b"));
  // A `*` in the region field does not swallow the account field's colon.
  Wildcard region("arn:aws:batch:*:job-queue/x");
  EXPECT_FALSE(region.MatchesArn("arn:aws:batch:us-east-1:000000000000:job-queue/x"));
  // `*` in one field cannot stand for two fields, even when the text would line up.
  Wildcard two("arn:aws:*:000000000000:job-queue/x");
  EXPECT_FALSE(two.MatchesArn("arn:aws:batch:us-east-1:000000000000:job-queue/x"));
}

TEST(IamWildcard, TheResourceFieldMayHoldColonsAndTheStarSpansThem) {
  Wildcard w("arn:aws:logs:*:*:log-group:/aws/batch/job:*");
  EXPECT_TRUE(w.MatchesArn("arn:aws:logs:us-east-1:0:log-group:/aws/batch/job:log-stream:a/b"));
  Wildcard star("arn:aws:logs:us-east-1:0:*");
  EXPECT_TRUE(star.MatchesArn("arn:aws:logs:us-east-1:0:log-group:x:log-stream:y"));
}

TEST(IamWildcard, ArnMatchingIsCaseSensitiveAndNeedsSixFields) {
  EXPECT_FALSE(Wildcard("arn:aws:batch:*:*:job-queue/A").MatchesArn("arn:aws:batch:r:0:job-queue/a"));
  EXPECT_FALSE(Wildcard("arn:aws:batch:*:*:*").MatchesArn("arn:aws:batch:r:0"));
  EXPECT_FALSE(Wildcard("arn:aws:batch:*:*:*").MatchesArn("*"));
  EXPECT_TRUE(Wildcard("*").MatchesArn("*"));
  EXPECT_TRUE(Wildcard("*").MatchesArn("not an arn"));
  EXPECT_TRUE(Wildcard("**").MatchesArn("not an arn"));  // `**` is `*`
}

// The textbook dynamic programme over (pattern prefix, text prefix): slow, obviously right.
bool Reference(const std::string& p, const std::string& t) {
  std::vector<std::vector<bool>> m(p.size() + 1, std::vector<bool>(t.size() + 1, false));
  m[0][0] = true;
  for (size_t i = 1; i <= p.size(); ++i) {
    for (size_t j = 0; j <= t.size(); ++j) {
      if (p[i - 1] == '*') {
        m[i][j] = m[i - 1][j] || (j > 0 && m[i][j - 1]);
      } else if (j > 0) {
        m[i][j] = m[i - 1][j - 1] && (p[i - 1] == '?' || p[i - 1] == t[j - 1]);
      }
    }
  }
  return m[p.size()][t.size()];
}

TEST(IamWildcard, AgreesWithTheDynamicProgrammeOnRandomPatterns) {
  std::mt19937 rng(17);  // fixed seed: the same cases every run
  auto draw = [&](const char* alphabet, size_t n, size_t max_len) {
    std::string s(std::uniform_int_distribution<size_t>(0, max_len)(rng), ' ');
    for (char& c : s) c = alphabet[std::uniform_int_distribution<size_t>(0, n - 1)(rng)];
    return s;
  };
  int matched = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string p = draw("ab*?", 4, 8);
    std::string t = draw("ab", 2, 10);
    bool want = Reference(p, t);
    matched += want;
    ASSERT_EQ(Wildcard(p).Matches(t), want) << "pattern " << p << " text " << t;
  }
  EXPECT_GT(matched, 1000);  // both answers are exercised
}

TEST(IamWildcard, PathologicalPatternTakesLinearTime) {
  // a*a*a*...*b against 200,000 a's: a backtracking matcher takes exponential (or at least
  // |pattern| x |text| per star) time; leftmost placement reads the text once.
  std::string pattern;
  for (int i = 0; i < 500; ++i) pattern += "a*";
  pattern += "b";
  std::string text(200'000, 'a');
  Wildcard w(pattern);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(w.Matches(text));
  EXPECT_TRUE(w.Matches(text + "b"));
  std::string q;
  for (int i = 0; i < 500; ++i) q += "*?";
  q += "*b";
  EXPECT_FALSE(Wildcard(q).Matches(text));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  // Linear work here is well under a millisecond; the bound leaves room for a loaded machine and
  // sanitizers while a quadratic matcher (1e8 steps per call) would still exceed it.
  EXPECT_LT(ms, 2000);
}

}  // namespace
}  // namespace ty::iam
