// A job's own accesses to the embedded object store (exec/data_access.h; docs/security.md,
// "Jobs' data"): each is decided as the S3 endpoint decides a caller's, with the job's
// principal's keys and policies.
#include <gtest/gtest.h>

#include "exec/data_access.h"

namespace ty::exec {
namespace {

constexpr EpochMs kNow = 1'700'000'000'000;

// User c of team c: its team's bucket, listing only under data/ of the shared bucket, and an
// explicit deny on a's private prefix.
DataAccess MemberC() {
  DataAccess a;
  a.principal = {"arn:aws:iam::000000000000:user/c", "", "c", "AIDAC", {{"team", "c"}}};
  a.policies = {{"team", R"({"Version": "2012-10-17", "Statement": [
      {"Effect": "Allow", "Action": "s3:*",
       "Resource": ["arn:aws:s3:::team-${aws:PrincipalTag/team}-data", "arn:aws:s3:::team-${aws:PrincipalTag/team}-data/*"]},
      {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::shared",
       "Condition": {"StringLike": {"s3:prefix": "data/*"}}}]})"},
                {"guard", R"({"Version": "2012-10-17", "Statement": [
      {"Sid": "NotPrivate", "Effect": "Deny", "Action": "s3:*", "Resource": "arn:aws:s3:::team-c-data/private/*"}]})"}};
  return a;
}

TEST(DataAccessPolicyTest, TheOwnBucketIsReadAndWrittenWithPolicyVariables) {
  const DataAccessPolicy p(MemberC());
  EXPECT_TRUE(p.CheckObject("s3:GetObject", "team-c-data", "train/a.csv", kNow).ok());
  EXPECT_TRUE(p.CheckObject("s3:PutObject", "team-c-data", "out/j/output/model.tar.gz", kNow).ok());
  EXPECT_TRUE(p.CheckList("team-c-data", "train/", kNow).ok());
}

TEST(DataAccessPolicyTest, AnotherTeamsObjectIsRefusedNamingTheActionAndTheObject) {
  const DataAccessPolicy p(MemberC());
  Status st = p.CheckObject("s3:GetObject", "team-a-data", "private/secret.txt", kNow);
  EXPECT_EQ(st.code(), Code::kAccessDenied);
  EXPECT_NE(st.message().find("user/c is not authorized to perform: s3:GetObject on resource: "
                              "arn:aws:s3:::team-a-data/private/secret.txt"),
            std::string::npos)
      << st.message();
}

TEST(DataAccessPolicyTest, AListingIsDecidedWithItsPrefix) {
  const DataAccessPolicy p(MemberC());
  EXPECT_TRUE(p.CheckList("shared", "data/train/", kNow).ok());
  Status st = p.CheckList("shared", "secrets/", kNow);
  EXPECT_EQ(st.code(), Code::kAccessDenied);
  EXPECT_NE(st.message().find("s3:ListBucket on resource: arn:aws:s3:::shared"), std::string::npos) << st.message();
}

TEST(DataAccessPolicyTest, AnExplicitDenyWinsAndIsNamed) {
  const DataAccessPolicy p(MemberC());
  Status st = p.CheckObject("s3:PutObject", "team-c-data", "private/x", kNow);
  EXPECT_EQ(st.code(), Code::kAccessDenied);
  EXPECT_NE(st.message().find("explicit deny"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("guard"), std::string::npos) << st.message();
}

TEST(DataAccessPolicyTest, NoPoliciesAllowNothing) {
  DataAccess a = MemberC();
  a.policies.clear();  // a deleted user, or a role without policies
  const DataAccessPolicy p(a);
  EXPECT_EQ(p.CheckObject("s3:GetObject", "team-c-data", "k", kNow).code(), Code::kAccessDenied);
  EXPECT_EQ(p.CheckList("team-c-data", "", kNow).code(), Code::kAccessDenied);
}

TEST(DataAccessPolicyTest, TheTimeComesFromTheCaller) {
  DataAccess a = MemberC();
  a.policies = {{"until", R"({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
      "Resource": "*", "Condition": {"DateLessThan": {"aws:CurrentTime": "2023-11-14T22:13:21Z"}}}]})"}};
  const DataAccessPolicy p(a);
  EXPECT_TRUE(p.CheckObject("s3:GetObject", "b", "k", kNow).ok());           // 2023-11-14T22:13:20Z
  EXPECT_FALSE(p.CheckObject("s3:GetObject", "b", "k", kNow + 1000).ok());
}

}  // namespace
}  // namespace ty::exec
