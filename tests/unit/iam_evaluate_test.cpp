// Evaluating requests against policies (iam/evaluate.h): IAM's order (explicit deny, allow,
// implicit deny), NotAction/NotResource, every condition operator, set qualifiers, IfExists,
// policy variables, and the three-team set-up of docs/security.md.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "iam/evaluate.h"

namespace ty::iam {
namespace {

constexpr const char* kQueue = "arn:aws:batch:us-east-1:000000000000:job-queue/shared";
constexpr const char* kJob = "arn:aws:batch:us-east-1:000000000000:service-job/0123";

Policy Parse(const std::string& doc, const std::string& name = "p") {
  auto p = ParsePolicy(doc, name);
  EXPECT_TRUE(p.ok()) << p.status().message() << "\n" << doc;
  return p.ok() ? std::move(*p) : Policy{};
}

// A 2012-10-17 policy with one statement.
Policy One(const std::string& effect, const std::string& action, const std::string& resource,
           const std::string& condition = "") {
  std::string doc = R"({"Version":"2012-10-17","Statement":{"Sid":"S","Effect":")" + effect +
                    R"(","Action":)" + action + R"(,"Resource":)" + resource;
  if (!condition.empty()) doc += R"(,"Condition":)" + condition;
  return Parse(doc + "}}");
}

Request Req(const std::string& action, const std::string& resource = kQueue) {
  Request r;
  r.principal = "arn:aws:iam::000000000000:user/alice";
  r.action = action;
  r.resource = resource;
  return r;
}

Outcome Decide(const Request& r, const std::vector<const Policy*>& ps) { return Evaluate(r, ps).outcome; }
Outcome Decide(const Request& r, const Policy& p) { return Decide(r, std::vector<const Policy*>{&p}); }

// Whether a policy allowing everything under `condition` allows `r`.
bool AllowedUnder(const std::string& condition, const Request& r) {
  Policy p = One("Allow", R"("*")", R"("*")", condition);
  return Decide(r, p) == Outcome::kAllow;
}

TEST(IamEvaluate, NoPolicyOrNoMatchingStatementIsAnImplicitDeny) {
  Request r = Req("batch:SubmitServiceJob");
  Decision d = Evaluate(r, {});
  EXPECT_EQ(d.outcome, Outcome::kImplicitDeny);
  EXPECT_EQ(d.policy, nullptr);
  Policy describe = One("Allow", R"("batch:Describe*")", R"("*")");
  EXPECT_EQ(Decide(r, describe), Outcome::kImplicitDeny);
}

TEST(IamEvaluate, AnExplicitDenyBeatsAnAllowInAnyPolicyAndAnyOrder) {
  Policy allow = Parse(R"({"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"batch:*","Resource":"*"}})", "AllowBatch");
  Policy deny = Parse(R"({"Version":"2012-10-17","Statement":[
      {"Sid":"Other","Effect":"Deny","Action":"sagemaker:*","Resource":"*"},
      {"Sid":"NoTerminate","Effect":"Deny","Action":"batch:Terminate*","Resource":"*"}]})", "DenyTerminate");
  Request r = Req("batch:TerminateServiceJob", kJob);
  for (auto order : {std::vector<const Policy*>{&allow, &deny}, std::vector<const Policy*>{&deny, &allow}}) {
    Decision d = Evaluate(r, order);
    EXPECT_EQ(d.outcome, Outcome::kExplicitDeny);
    EXPECT_EQ(d.policy, &deny);
    EXPECT_EQ(d.statement, 1);
    EXPECT_EQ(d.sid(), "NoTerminate");
  }
  Decision ok = Evaluate(Req("batch:SubmitServiceJob"), std::vector<const Policy*>{&allow, &deny});
  EXPECT_EQ(ok.outcome, Outcome::kAllow);
  EXPECT_EQ(ok.policy, &allow);
  EXPECT_EQ(ok.statement, 0);
}

TEST(IamEvaluate, ActionsMatchCaseInsensitivelyWithWildcards) {
  Policy p = One("Allow", R"(["batch:Submit*","SAGEMAKER:describe*"])", R"("*")");
  EXPECT_EQ(Decide(Req("batch:SubmitServiceJob"), p), Outcome::kAllow);
  EXPECT_EQ(Decide(Req("Batch:submitservicejob"), p), Outcome::kAllow);
  EXPECT_EQ(Decide(Req("sagemaker:DescribeTrainingJob"), p), Outcome::kAllow);
  EXPECT_EQ(Decide(Req("sagemaker:CreateTrainingJob"), p), Outcome::kImplicitDeny);
  EXPECT_EQ(Decide(Req("batchx:SubmitServiceJob"), p), Outcome::kImplicitDeny);
}

TEST(IamEvaluate, ResourcesMatchArnPatternsCaseSensitively) {
  Policy p = One("Allow", R"("batch:*")", R"(["arn:aws:batch:*:000000000000:job-queue/team-a*"])");
  EXPECT_EQ(Decide(Req("batch:SubmitServiceJob", "arn:aws:batch:us-east-1:000000000000:job-queue/team-a"), p), Outcome::kAllow);
  EXPECT_EQ(Decide(Req("batch:SubmitServiceJob", "arn:aws:batch:us-east-1:000000000000:job-queue/Team-a"), p), Outcome::kImplicitDeny);
  EXPECT_EQ(Decide(Req("batch:SubmitServiceJob", "arn:aws:batch:us-east-1:111111111111:job-queue/team-a"), p), Outcome::kImplicitDeny);
  // A call on no one resource (List*) is "*": only Resource "*" covers it.
  EXPECT_EQ(Decide(Req("batch:ListServiceJobs", "*"), p), Outcome::kImplicitDeny);
  EXPECT_EQ(Decide(Req("batch:ListServiceJobs", "*"), One("Allow", R"("batch:*")", R"("*")")), Outcome::kAllow);
}

TEST(IamEvaluate, NotActionAllowsEverythingButTheListedActions) {
  // As IAM's example of everything but IAM itself.
  Policy p = Parse(R"({"Version":"2012-10-17","Statement":{"Effect":"Allow","NotAction":"sagemaker:*","Resource":"*"}})");
  EXPECT_EQ(Decide(Req("batch:SubmitServiceJob"), p), Outcome::kAllow);
  EXPECT_EQ(Decide(Req("sagemaker:CreateTrainingJob"), p), Outcome::kImplicitDeny);
}

TEST(IamEvaluate, NotResourceDeniesEverythingButTheListedResources) {
  Policy allow = One("Allow", R"("batch:*")", R"("*")");
  Policy deny = Parse(R"({"Version":"2012-10-17","Statement":{"Effect":"Deny","Action":"batch:*",
      "NotResource":["arn:aws:batch:*:*:job-queue/team-a","arn:aws:batch:*:*:service-job/*"]}})");
  std::vector<const Policy*> both{&allow, &deny};
  EXPECT_EQ(Decide(Req("batch:SubmitServiceJob", "arn:aws:batch:us-east-1:0:job-queue/team-a"), both), Outcome::kAllow);
  EXPECT_EQ(Decide(Req("batch:DescribeServiceJob", kJob), both), Outcome::kAllow);
  EXPECT_EQ(Decide(Req("batch:SubmitServiceJob", "arn:aws:batch:us-east-1:0:job-queue/team-b"), both), Outcome::kExplicitDeny);
}

TEST(IamEvaluate, StringOperators) {
  Request r = Req("batch:SubmitServiceJob");
  r.Set("batch:ShareIdentifier", "teamA");
  EXPECT_TRUE(AllowedUnder(R"({"StringEquals":{"batch:ShareIdentifier":["teamB","teamA"]}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"StringEquals":{"batch:ShareIdentifier":"teama"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"StringEqualsIgnoreCase":{"batch:ShareIdentifier":"TEAMA"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"StringNotEqualsIgnoreCase":{"batch:ShareIdentifier":"TEAMA"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"StringNotEquals":{"batch:ShareIdentifier":["teamB","teamC"]}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"StringNotEquals":{"batch:ShareIdentifier":["teamB","teamA"]}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"StringLike":{"batch:ShareIdentifier":"team?"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"StringLike":{"batch:ShareIdentifier":"team"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"StringNotLike":{"batch:ShareIdentifier":"teamB*"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"StringNotLike":{"batch:ShareIdentifier":"t*"}})", r));
  // Condition key names are case-insensitive, values are not.
  EXPECT_TRUE(AllowedUnder(R"({"StringEquals":{"BATCH:shareidentifier":"teamA"}})", r));
}

TEST(IamEvaluate, AnAbsentKeyFailsPositiveOperatorsAndSatisfiesNegatedOnes) {
  Request r = Req("batch:SubmitServiceJob");
  EXPECT_FALSE(AllowedUnder(R"({"StringEquals":{"batch:ShareIdentifier":"teamA"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"StringLike":{"batch:ShareIdentifier":"*"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"StringNotEquals":{"batch:ShareIdentifier":"teamA"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"ArnNotLike":{"aws:PrincipalArn":"arn:aws:iam::*:user/bob"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"NotIpAddress":{"aws:SourceIp":"10.0.0.0/8"}})", r));
}

TEST(IamEvaluate, IfExistsHoldsWhenTheKeyIsAbsentAndTestsItWhenPresent) {
  Request r = Req("sagemaker:CreateTrainingJob");
  const char* c = R"({"StringEqualsIfExists":{"sagemaker:InstanceTypes":"ml.m5.large"}})";
  EXPECT_TRUE(AllowedUnder(c, r));
  r.Set("sagemaker:InstanceTypes", "ml.p4d.24xlarge");
  EXPECT_FALSE(AllowedUnder(c, r));
  r.Set("sagemaker:InstanceTypes", "ml.m5.large");
  EXPECT_TRUE(AllowedUnder(c, r));
}

TEST(IamEvaluate, ArnOperatorsMatchFieldByField) {
  Request r = Req("batch:SubmitServiceJob");
  r.Set("aws:PrincipalArn", "arn:aws:iam::000000000000:user/alice");
  EXPECT_TRUE(AllowedUnder(R"({"ArnLike":{"aws:PrincipalArn":"arn:aws:iam::*:user/a*"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"ArnEquals":{"aws:PrincipalArn":"arn:aws:iam::000000000000:user/alice"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"ArnLike":{"aws:PrincipalArn":"arn:aws:iam::*:user/b*"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"ArnLike":{"aws:PrincipalArn":"arn:aws:*:user/alice"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"ArnNotEquals":{"aws:PrincipalArn":"arn:aws:iam::000000000000:user/bob"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"ArnNotLike":{"aws:PrincipalArn":"arn:aws:iam::*:*"}})", r));
}

TEST(IamEvaluate, BoolComparesTrueAndFalse) {
  Request r = Req("batch:SubmitServiceJob");
  r.Set("aws:SecureTransport", "false");
  EXPECT_TRUE(AllowedUnder(R"({"Bool":{"aws:SecureTransport":false}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"Bool":{"aws:SecureTransport":"true"}})", r));
  r.Set("aws:SecureTransport", "TRUE");
  EXPECT_TRUE(AllowedUnder(R"({"Bool":{"aws:SecureTransport":"true"}})", r));
  r.Set("aws:SecureTransport", "yes");  // neither: matches no Bool value
  EXPECT_FALSE(AllowedUnder(R"({"Bool":{"aws:SecureTransport":"true"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"Bool":{"aws:SecureTransport":"false"}})", r));
}

TEST(IamEvaluate, NumericOperators) {
  Request r = Req("sagemaker:CreateTrainingJob");
  r.Set("trainyard:InstanceCount", "4");
  EXPECT_TRUE(AllowedUnder(R"({"NumericEquals":{"trainyard:InstanceCount":4}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"NumericEquals":{"trainyard:InstanceCount":"4.0"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"NumericNotEquals":{"trainyard:InstanceCount":4}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"NumericLessThan":{"trainyard:InstanceCount":5}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"NumericLessThan":{"trainyard:InstanceCount":4}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"NumericLessThanEquals":{"trainyard:InstanceCount":4}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"NumericGreaterThan":{"trainyard:InstanceCount":3.5}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"NumericGreaterThan":{"trainyard:InstanceCount":4}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"NumericGreaterThanEquals":{"trainyard:InstanceCount":4}})", r));
  r.Set("trainyard:InstanceCount", "four");
  EXPECT_FALSE(AllowedUnder(R"({"NumericLessThan":{"trainyard:InstanceCount":5}})", r));
}

TEST(IamEvaluate, DateOperatorsCompareInstants) {
  Request r = Req("batch:SubmitServiceJob");
  r.Set("aws:CurrentTime", "2026-06-01T12:00:00Z");
  EXPECT_TRUE(AllowedUnder(R"({"DateLessThan":{"aws:CurrentTime":"2026-06-01T12:00:01Z"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"DateLessThan":{"aws:CurrentTime":"2026-06-01T12:00:00Z"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"DateLessThanEquals":{"aws:CurrentTime":"2026-06-01T12:00:00Z"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"DateGreaterThan":{"aws:CurrentTime":"2026-06-01"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"DateGreaterThanEquals":{"aws:CurrentTime":"2026-06-01T14:00:00+02:00"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"DateGreaterThan":{"aws:CurrentTime":"2026-06-01T14:00:00+02:00"}})", r));
  // 2026-06-01T12:00:00Z is 1780315200 epoch seconds.
  EXPECT_TRUE(AllowedUnder(R"({"DateEquals":{"aws:CurrentTime":"1780315200"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"DateNotEquals":{"aws:CurrentTime":"2026-06-01T12:00:00.000Z"}})", r));
}

TEST(IamEvaluate, IpAddressMatchesCidrBlocksOfBothFamilies) {
  Request r = Req("batch:SubmitServiceJob");
  r.Set("aws:SourceIp", "203.0.113.77");
  EXPECT_TRUE(AllowedUnder(R"({"IpAddress":{"aws:SourceIp":"203.0.113.0/24"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"IpAddress":{"aws:SourceIp":"203.0.113.77"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"IpAddress":{"aws:SourceIp":"203.0.113.64/27"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"IpAddress":{"aws:SourceIp":"203.0.113.96/27"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"NotIpAddress":{"aws:SourceIp":["10.0.0.0/8","203.0.0.0/16"]}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"IpAddress":{"aws:SourceIp":"0.0.0.0/0"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"IpAddress":{"aws:SourceIp":"2001:db8::/32"}})", r));
  r.Set("aws:SourceIp", "2001:db8:1::5");
  EXPECT_TRUE(AllowedUnder(R"({"IpAddress":{"aws:SourceIp":"2001:db8::/32"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"IpAddress":{"aws:SourceIp":"2001:db9::/32"}})", r));
  r.Set("aws:SourceIp", "not-an-ip");
  EXPECT_FALSE(AllowedUnder(R"({"IpAddress":{"aws:SourceIp":"0.0.0.0/0"}})", r));
}

TEST(IamEvaluate, NullTestsWhetherTheKeyIsPresent) {
  Request r = Req("batch:SubmitServiceJob");
  EXPECT_TRUE(AllowedUnder(R"({"Null":{"aws:RequestTag/team":"true"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"Null":{"aws:RequestTag/team":"false"}})", r));
  r.Set("aws:RequestTag/team", "a");
  EXPECT_FALSE(AllowedUnder(R"({"Null":{"aws:RequestTag/team":"true"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"Null":{"aws:RequestTag/team":false}})", r));
}

TEST(IamEvaluate, ForAllValuesNeedsEveryRequestValueAndHoldsForNone) {
  // IAM's example: only these tag keys may be sent.
  const char* c = R"({"ForAllValues:StringEquals":{"aws:TagKeys":["team","cost-center"]}})";
  Request r = Req("batch:TagResource");
  EXPECT_TRUE(AllowedUnder(c, r));  // no keys sent: vacuously true
  r.Set("aws:TagKeys", std::vector<std::string>{"team"});
  EXPECT_TRUE(AllowedUnder(c, r));
  r.Set("aws:TagKeys", std::vector<std::string>{"team", "cost-center"});
  EXPECT_TRUE(AllowedUnder(c, r));
  r.Set("aws:TagKeys", std::vector<std::string>{"team", "owner"});
  EXPECT_FALSE(AllowedUnder(c, r));
  // With a negated operator: none of the request values may be listed.
  EXPECT_FALSE(AllowedUnder(R"({"ForAllValues:StringNotEquals":{"aws:TagKeys":["owner"]}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"ForAllValues:StringNotEquals":{"aws:TagKeys":["admin"]}})", r));
}

TEST(IamEvaluate, ForAnyValueNeedsOneRequestValueAndFailsForNone) {
  const char* c = R"({"ForAnyValue:StringLike":{"aws:TagKeys":["team*"]}})";
  Request r = Req("batch:TagResource");
  EXPECT_FALSE(AllowedUnder(c, r));  // no keys sent
  r.Set("aws:TagKeys", std::vector<std::string>{"owner", "teamName"});
  EXPECT_TRUE(AllowedUnder(c, r));
  r.Set("aws:TagKeys", std::vector<std::string>{"owner"});
  EXPECT_FALSE(AllowedUnder(c, r));
  EXPECT_TRUE(AllowedUnder(R"({"ForAnyValue:StringNotEquals":{"aws:TagKeys":["team"]}})", r));
}

TEST(IamEvaluate, ConditionsInAStatementAreAndedAndValuesOred) {
  const char* c = R"({"StringEquals":{"batch:ShareIdentifier":["teamA","teamB"],"aws:RequestTag/team":"a"},
                      "Bool":{"aws:SecureTransport":"true"}})";
  Request r = Req("batch:SubmitServiceJob");
  r.Set("batch:ShareIdentifier", "teamB");
  r.Set("aws:RequestTag/team", "a");
  r.Set("aws:SecureTransport", "true");
  EXPECT_TRUE(AllowedUnder(c, r));
  r.Set("aws:SecureTransport", "false");
  EXPECT_FALSE(AllowedUnder(c, r));
  r.Set("aws:SecureTransport", "true");
  r.Set("aws:RequestTag/team", "b");
  EXPECT_FALSE(AllowedUnder(c, r));
}

TEST(IamEvaluate, PolicyVariablesAreSubstitutedFromTheRequest) {
  // IAM's example: each user reaches only their own home prefix.
  Policy p = One("Allow", R"("s3:*")", R"("arn:aws:s3:::home/${aws:username}/*")");
  Request r = Req("s3:GetObject", "arn:aws:s3:::home/alice/notes.txt");
  r.Set("aws:username", "alice");
  EXPECT_EQ(Decide(r, p), Outcome::kAllow);
  r.resource = "arn:aws:s3:::home/bob/notes.txt";
  EXPECT_EQ(Decide(r, p), Outcome::kImplicitDeny);
  // Without the key the variable has no value and the resource matches nothing.
  Request anon = Req("s3:GetObject", "arn:aws:s3:::home/alice/notes.txt");
  EXPECT_EQ(Decide(anon, p), Outcome::kImplicitDeny);
}

TEST(IamEvaluate, AVariablesValueIsLiteralEvenWhenItHoldsWildcards) {
  Policy p = One("Allow", R"("s3:*")", R"("arn:aws:s3:::home/${aws:username}/*")");
  Request r = Req("s3:GetObject", "arn:aws:s3:::home/bob/notes.txt");
  r.Set("aws:username", "*");
  EXPECT_EQ(Decide(r, p), Outcome::kImplicitDeny);
  r.Set("aws:username", "b?b");
  EXPECT_EQ(Decide(r, p), Outcome::kImplicitDeny);
}

TEST(IamEvaluate, VariablesInConditionsAndTheirEscapesAndDefaults) {
  Request r = Req("batch:TerminateServiceJob", kJob);
  r.Set("aws:PrincipalTag/team", "a");
  r.Set("aws:ResourceTag/team", "a");
  r.Set("trainyard:JobOwner", "alice");
  r.Set("aws:username", "alice");
  EXPECT_TRUE(AllowedUnder(R"({"StringEquals":{"aws:ResourceTag/team":"${aws:PrincipalTag/team}"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"StringEquals":{"trainyard:JobOwner":"${aws:username}"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"StringLike":{"trainyard:JobOwner":"${aws:username}*"}})", r));
  r.Set("aws:ResourceTag/team", "b");
  EXPECT_FALSE(AllowedUnder(R"({"StringEquals":{"aws:ResourceTag/team":"${aws:PrincipalTag/team}"}})", r));
  // ${*} and ${?} are literal characters; a default stands in for an absent key.
  r.Set("trainyard:JobOwner", "a*");
  EXPECT_TRUE(AllowedUnder(R"({"StringEquals":{"trainyard:JobOwner":"a${*}"}})", r));
  EXPECT_FALSE(AllowedUnder(R"({"StringLike":{"trainyard:JobOwner":"a${?}"}})", r));
  EXPECT_TRUE(AllowedUnder(R"({"StringEquals":{"trainyard:JobOwner":"${trainyard:Missing, 'a*'}"}})", r));
  // Under Version 2008-10-17 `${...}` is plain text.
  Policy old = Parse(R"({"Version":"2008-10-17","Statement":{"Effect":"Allow","Action":"*","Resource":"*",
      "Condition":{"StringEquals":{"trainyard:JobOwner":"${aws:username}"}}}})");
  EXPECT_EQ(Decide(r, old), Outcome::kImplicitDeny);
  r.Set("trainyard:JobOwner", "${aws:username}");
  EXPECT_EQ(Decide(r, old), Outcome::kAllow);
}

TEST(IamEvaluate, DenialMessagesUseIamsWording) {
  Request r = Req("batch:TerminateServiceJob", kJob);
  Policy deny = Parse(R"({"Version":"2012-10-17","Statement":{"Effect":"Deny","Action":"batch:Terminate*","Resource":"*"}})",
                      "arn:aws:iam::000000000000:policy/NoTerminate");
  EXPECT_EQ(DenialMessage(r, Evaluate(r, {})),
            "User: arn:aws:iam::000000000000:user/alice is not authorized to perform: batch:TerminateServiceJob on "
            "resource: arn:aws:batch:us-east-1:000000000000:service-job/0123 because no identity-based policy "
            "allows the batch:TerminateServiceJob action");
  std::vector<const Policy*> ps{&deny};
  EXPECT_EQ(DenialMessage(r, Evaluate(r, ps)),
            "User: arn:aws:iam::000000000000:user/alice is not authorized to perform: batch:TerminateServiceJob on "
            "resource: arn:aws:batch:us-east-1:000000000000:service-job/0123 with an explicit deny in an "
            "identity-based policy: arn:aws:iam::000000000000:policy/NoTerminate");
}

// The three-team set-up of docs/security.md, "Policies": the same text, evaluated.
class ThreeTeams : public ::testing::Test {
 protected:
  // Attached to every member of a team, with its team tag as aws:PrincipalTag/team.
  Policy team_ = Parse(R"({
    "Version": "2012-10-17",
    "Statement": [
      {"Sid": "SubmitToOwnShare", "Effect": "Allow",
       "Action": ["batch:SubmitServiceJob"],
       "Resource": ["arn:aws:batch:*:*:job-queue/shared", "arn:aws:batch:*:*:service-job/*"],
       "Condition": {"StringEquals": {"batch:ShareIdentifier": "${aws:PrincipalTag/team}"}}},
      {"Sid": "DescribeOwnJobs", "Effect": "Allow",
       "Action": ["batch:DescribeServiceJob", "batch:ListServiceJobs", "sagemaker:Describe*"],
       "Resource": "*",
       "Condition": {"StringEqualsIfExists": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
      {"Sid": "TerminateOwnJobs", "Effect": "Allow",
       "Action": "batch:TerminateServiceJob", "Resource": "arn:aws:batch:*:*:service-job/*",
       "Condition": {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}}
    ]})", "arn:aws:iam::000000000000:policy/TeamMember");
  // A guard rail on every team: never terminate a job another team owns.
  Policy guard_ = Parse(R"({
    "Version": "2012-10-17",
    "Statement": [
      {"Sid": "DenyTerminateOthers", "Effect": "Deny",
       "Action": ["batch:TerminateServiceJob", "sagemaker:StopTrainingJob"], "Resource": "*",
       "Condition": {"StringNotEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}}
    ]})", "arn:aws:iam::000000000000:policy/DenyTerminateOthers");
  Policy admin_ = Parse(R"({"Version": "2012-10-17",
    "Statement": {"Effect": "Allow", "Action": "*", "Resource": "*"}})", "arn:aws:iam::000000000000:policy/Admin");

  Request As(const std::string& team, const std::string& action, const std::string& resource) {
    Request r = Req(action, resource);
    r.principal = "arn:aws:iam::000000000000:user/" + team + "-member";
    r.Set("aws:PrincipalTag/team", team);
    r.Set("aws:username", team + "-member");
    return r;
  }
  Decision Member(const Request& r) { return Evaluate(r, std::vector<const Policy*>{&team_, &guard_}); }
};

TEST_F(ThreeTeams, EachTeamSubmitsOnlyToItsOwnShare) {
  Request r = As("a", "batch:SubmitServiceJob", kQueue);
  r.Set("batch:ShareIdentifier", "a");
  EXPECT_EQ(Member(r).outcome, Outcome::kAllow);
  EXPECT_EQ(Member(r).sid(), "SubmitToOwnShare");
  r.Set("batch:ShareIdentifier", "b");
  EXPECT_EQ(Member(r).outcome, Outcome::kImplicitDeny);
  r.keys.erase("batch:shareidentifier");
  EXPECT_EQ(Member(r).outcome, Outcome::kImplicitDeny);
}

TEST_F(ThreeTeams, EachTeamDescribesOnlyJobsTaggedForIt) {
  Request r = As("b", "batch:DescribeServiceJob", kJob);
  r.Set("aws:ResourceTag/team", "b");
  EXPECT_EQ(Member(r).outcome, Outcome::kAllow);
  r.Set("aws:ResourceTag/team", "c");
  EXPECT_EQ(Member(r).outcome, Outcome::kImplicitDeny);
  // A list call names no resource and no tag; the server filters what it returns.
  EXPECT_EQ(Member(As("b", "batch:ListServiceJobs", "*")).outcome, Outcome::kAllow);
}

TEST_F(ThreeTeams, NoTeamTerminatesAnotherTeamsJobAndTheGuardSaysWhy) {
  Request own = As("c", "batch:TerminateServiceJob", kJob);
  own.Set("aws:ResourceTag/team", "c");
  EXPECT_EQ(Member(own).outcome, Outcome::kAllow);
  Request other = As("c", "batch:TerminateServiceJob", kJob);
  other.Set("aws:ResourceTag/team", "a");
  Decision d = Member(other);
  EXPECT_EQ(d.outcome, Outcome::kExplicitDeny);
  EXPECT_EQ(d.policy, &guard_);
  EXPECT_EQ(d.sid(), "DenyTerminateOthers");
  // The guard holds even beside an allow-everything policy.
  std::vector<const Policy*> with_admin{&team_, &guard_, &admin_};
  EXPECT_EQ(Evaluate(other, with_admin).outcome, Outcome::kExplicitDeny);
  // An untagged job belongs to no team: the guard denies terminating it.
  Request untagged = As("c", "batch:TerminateServiceJob", kJob);
  EXPECT_EQ(Member(untagged).outcome, Outcome::kExplicitDeny);
}

TEST_F(ThreeTeams, AnAdminSeesAndDoesEverything) {
  std::vector<const Policy*> admin{&admin_};
  Request r = As("ops", "batch:TerminateServiceJob", kJob);
  r.Set("aws:ResourceTag/team", "a");
  EXPECT_EQ(Evaluate(r, admin).outcome, Outcome::kAllow);
  EXPECT_EQ(Evaluate(As("ops", "sagemaker:DeleteTags", "arn:aws:sagemaker:us-east-1:0:training-job/x"), admin).outcome,
            Outcome::kAllow);
}

// A trust policy admits by principal, in place of a resource; Deny wins; conditions hold as usual.
TEST(IamTrust, AdmitsByPrincipalAndDenyWins) {
  auto trust = ParseTrustPolicy(R"({"Version":"2012-10-17","Statement":[
    {"Effect":"Allow","Principal":{"AWS":"000000000000","Service":"sagemaker.amazonaws.com"},"Action":"sts:AssumeRole",
     "Condition":{"StringNotEquals":{"aws:username":"mallory"}}},
    {"Effect":"Deny","Principal":{"AWS":"arn:aws:iam::000000000000:user/eve"},"Action":"sts:AssumeRole"}]})");
  ASSERT_TRUE(trust.ok()) << trust.status().message();
  auto as = [&](const std::string& arn, const std::string& username) {
    Request r = Req("sts:AssumeRole", "arn:aws:iam::000000000000:role/r");
    r.principal = arn;
    r.principal_ids = {arn, "arn:aws:iam::000000000000:root"};
    if (!username.empty()) r.Set("aws:username", username);
    return Decide(r, {&*trust});
  };
  EXPECT_EQ(as("arn:aws:iam::000000000000:user/alice", "alice"), Outcome::kAllow);
  EXPECT_EQ(as("arn:aws:iam::000000000000:user/mallory", "mallory"), Outcome::kImplicitDeny);
  EXPECT_EQ(as("arn:aws:iam::000000000000:user/eve", "eve"), Outcome::kExplicitDeny);
  Request other = Req("sts:AssumeRole", "arn:aws:iam::000000000000:role/r");
  other.principal_ids = {"arn:aws:iam::111111111111:user/alice", "arn:aws:iam::111111111111:root"};
  EXPECT_EQ(Decide(other, {&*trust}), Outcome::kImplicitDeny);
  Request service = Req("sts:AssumeRole", "arn:aws:iam::000000000000:role/r");
  service.principal_ids = {"service:sagemaker.amazonaws.com"};
  EXPECT_EQ(Decide(service, {&*trust}), Outcome::kAllow);
  service.principal_ids = {"service:ecs-tasks.amazonaws.com"};
  EXPECT_EQ(Decide(service, {&*trust}), Outcome::kImplicitDeny);
}

}  // namespace
}  // namespace ty::iam
