// Parsing and checking IAM policy documents (iam/policy.h): what is accepted, and for what is
// not, a Status naming the field and the rule.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "iam/policy.h"

namespace ty::iam {
namespace {

Policy MustParse(const std::string& doc) {
  auto p = ParsePolicy(doc, "test");
  EXPECT_TRUE(p.ok()) << p.status().message() << "\n" << doc;
  return p.ok() ? std::move(*p) : Policy{};
}

// The error for `doc`, which must be refused with `code`.
std::string Refused(const std::string& doc, Code code = Code::kInvalidArgument) {
  auto p = ParsePolicy(doc);
  EXPECT_FALSE(p.ok()) << doc;
  if (p.ok()) return "";
  EXPECT_EQ(p.status().code(), code) << p.status().message();
  return p.status().message();
}

TEST(IamPolicy, ParsesAStatementArrayWithEveryElement) {
  Policy p = MustParse(R"({"Version":"2012-10-17","Id":"team-a","Statement":[
    {"Sid":"SubmitOwnShare","Effect":"Allow","Action":["batch:Submit*","batch:Describe*"],
     "Resource":"arn:aws:batch:*:*:job-queue/*",
     "Condition":{"StringEquals":{"batch:ShareIdentifier":["teamA","teamA-gpu"]},
                  "ForAnyValue:StringLikeIfExists":{"aws:RequestTag/team":"a*"}}},
    {"Effect":"Deny","NotAction":"batch:Describe*","NotResource":["arn:aws:batch:*:*:job/*"]}]})");
  EXPECT_EQ(p.name, "test");
  EXPECT_EQ(p.version, "2012-10-17");
  EXPECT_EQ(p.id, "team-a");
  ASSERT_EQ(p.statements.size(), 2u);
  const Statement& a = p.statements[0];
  EXPECT_EQ(a.sid, "SubmitOwnShare");
  EXPECT_EQ(a.effect, Effect::kAllow);
  EXPECT_FALSE(a.not_action);
  ASSERT_EQ(a.actions.size(), 2u);
  EXPECT_EQ(a.actions[1].text, "batch:Describe*");
  ASSERT_EQ(a.conditions.size(), 2u);
  // Conditions in key order of the JSON object: ForAnyValue:... sorts before StringEquals.
  const Condition& any = a.conditions[0];
  EXPECT_EQ(any.op, Operator::kStringLike);
  EXPECT_EQ(any.qualifier, SetQualifier::kForAnyValue);
  EXPECT_TRUE(any.if_exists);
  EXPECT_EQ(any.key, "aws:requesttag/team");  // keys are case-insensitive: kept lower-cased
  const Condition& eq = a.conditions[1];
  EXPECT_EQ(eq.op, Operator::kStringEquals);
  ASSERT_EQ(eq.values.size(), 2u);
  EXPECT_EQ(eq.values[1].text, "teamA-gpu");
  const Statement& d = p.statements[1];
  EXPECT_EQ(d.effect, Effect::kDeny);
  EXPECT_TRUE(d.not_action);
  EXPECT_TRUE(d.not_resource);
}

TEST(IamPolicy, AcceptsASingleStatementObjectAndDefaultsTheVersion) {
  Policy p = MustParse(R"({"Statement":{"Effect":"Allow","Action":"*","Resource":"*"}})");
  EXPECT_EQ(p.version, "2008-10-17");
  EXPECT_FALSE(p.substitutes_variables());
  ASSERT_EQ(p.statements.size(), 1u);
}

TEST(IamPolicy, VariablesAreRecognisedOnlyUnderVersion2012) {
  const char* body = R"("Statement":{"Effect":"Allow","Action":"s3:*",
      "Resource":"arn:aws:s3:::home/${aws:username}/*"}})";
  EXPECT_TRUE(MustParse(std::string(R"({"Version":"2012-10-17",)") + body).statements[0].resources[0].has_variables);
  EXPECT_FALSE(MustParse(std::string(R"({"Version":"2008-10-17",)") + body).statements[0].resources[0].has_variables);
}

TEST(IamPolicy, ConditionValuesMayBeNumbersAndBooleans) {
  Policy p = MustParse(R"({"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"*","Resource":"*",
    "Condition":{"Bool":{"aws:SecureTransport":true},"NumericLessThan":{"trainyard:InstanceCount":4}}}})");
  ASSERT_EQ(p.statements[0].conditions.size(), 2u);
  EXPECT_TRUE(p.statements[0].conditions[0].values[0].flag);
  EXPECT_EQ(p.statements[0].conditions[1].values[0].number, 4);
}

TEST(IamPolicy, RefusesWhatIsNotAPolicyDocument) {
  EXPECT_EQ(Refused("not json"), "policy document is not valid JSON");
  EXPECT_EQ(Refused("[]"), "policy document must be a JSON object");
  EXPECT_EQ(Refused(R"({"Version":"2012-10-17"})"), "Statement is required");
  EXPECT_EQ(Refused(R"({"Version":"2020-01-01","Statement":[]})"),
            "Version must be \"2012-10-17\" or \"2008-10-17\"");
  EXPECT_EQ(Refused(R"({"Statement":[]})"), "Statement must not be empty");
  EXPECT_EQ(Refused(R"({"Statement":"Allow"})"), "Statement must be an object or an array of objects");
  EXPECT_NE(Refused(R"({"Statement":[],"Extra":1})").find("unknown element \"Extra\""), std::string::npos);
}

TEST(IamPolicy, RefusalsNameTheStatementAndTheField) {
  auto st = [](const std::string& inner) { return R"({"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"},)" + inner + "]}"; };
  EXPECT_EQ(Refused(st(R"({"Action":"*","Resource":"*"})")), "Statement[1].Effect is required");
  EXPECT_EQ(Refused(st(R"({"Effect":"Permit","Action":"*","Resource":"*"})")),
            "Statement[1].Effect must be \"Allow\" or \"Deny\"");
  EXPECT_EQ(Refused(st(R"({"Effect":"Allow","Resource":"*"})")), "Statement[1] must have Action or NotAction");
  EXPECT_EQ(Refused(st(R"({"Effect":"Allow","Action":"*"})")), "Statement[1] must have Resource or NotResource");
  EXPECT_EQ(Refused(st(R"({"Effect":"Allow","Action":"*","NotAction":"*","Resource":"*"})")),
            "Statement[1] must have exactly one of Action and NotAction");
  EXPECT_EQ(Refused(st(R"({"Effect":"Allow","Action":"*","Resource":"*","NotResource":"*"})")),
            "Statement[1] must have exactly one of Resource and NotResource");
  EXPECT_EQ(Refused(st(R"({"Effect":"Allow","Action":[],"Resource":"*"})")),
            "Statement[1].Action must be a string or a non-empty array of strings");
  EXPECT_EQ(Refused(st(R"({"Effect":"Allow","Action":[1],"Resource":"*"})")),
            "Statement[1].Action entries must be strings");
  EXPECT_NE(Refused(st(R"({"Sid":"has space","Effect":"Allow","Action":"*","Resource":"*"})")).find(
                "Statement[1].Sid \"has space\" may hold only letters and digits"),
            std::string::npos);
  EXPECT_NE(Refused(st(R"({"Effect":"Allow","Principal":"*","Action":"*","Resource":"*"})")).find(
                "Statement[1].Principal is not allowed in an identity-based policy"),
            std::string::npos);
  EXPECT_NE(Refused(st(R"({"Effect":"Allow","Action":"*","Resource":"*","Effekt":1})")).find(
                "Statement[1] has an unknown element \"Effekt\""),
            std::string::npos);
}

TEST(IamPolicy, ActionsAreStarOrServiceColonAction) {
  auto doc = [](const std::string& a) { return R"({"Statement":{"Effect":"Allow","Resource":"*","Action":")" + a + "\"}}"; };
  MustParse(doc("batch:Submit*"));
  MustParse(doc("sagemaker:Describe?rainingJob"));
  MustParse(doc("*"));
  for (const char* bad : {"batch", "batch:", ":Submit", "*:Submit*", "b*:Submit", "batch:Submit Job", "batch:a:b"}) {
    EXPECT_NE(Refused(doc(bad)).find("must be \"*\" or service:action"), std::string::npos) << bad;
  }
}

TEST(IamPolicy, ResourcesAreStarOrArns) {
  auto doc = [](const std::string& r) { return R"({"Statement":{"Effect":"Allow","Action":"*","Resource":")" + r + "\"}}"; };
  MustParse(doc("arn:aws:batch:us-east-1:000000000000:job-queue/q"));
  MustParse(doc("arn:aws:logs:*:*:log-group:/aws/batch/job:*"));
  for (const char* bad : {"job-queue/q", "arn:aws:batch", "arn:aws:batch:r:0", "**"}) {
    EXPECT_NE(Refused(doc(bad)).find("must be \"*\" or an ARN"), std::string::npos) << bad;
  }
}

TEST(IamPolicy, ConditionOperatorsAndValuesAreChecked) {
  auto doc = [](const std::string& c) {
    return R"({"Statement":{"Effect":"Allow","Action":"*","Resource":"*","Condition":)" + c + "}}";
  };
  EXPECT_NE(Refused(doc(R"({"StringMatches":{"k":"v"}})")).find("condition operator \"StringMatches\""), std::string::npos);
  EXPECT_NE(Refused(doc(R"({"ForSomeValues:StringLike":{"k":"v"}})")).find("is not supported"), std::string::npos);
  EXPECT_NE(Refused(doc(R"({"NullIfExists":{"k":"true"}})")).find("Null takes neither IfExists"), std::string::npos);
  EXPECT_EQ(Refused(doc(R"({})")), "Statement.Condition must be a non-empty object of condition operators");
  EXPECT_EQ(Refused(doc(R"({"StringEquals":{}})")), "Statement.Condition.StringEquals must be a non-empty object of condition keys");
  EXPECT_EQ(Refused(doc(R"({"StringEquals":{"k":[]}})")), "Statement.Condition.StringEquals.k must have at least one value");
  EXPECT_EQ(Refused(doc(R"({"StringEquals":{"k":{"x":1}}})")), "Statement.Condition.StringEquals.k values must be strings, numbers or booleans");
  EXPECT_NE(Refused(doc(R"({"Bool":{"aws:SecureTransport":"yes"}})")).find("must be true or false"), std::string::npos);
  EXPECT_NE(Refused(doc(R"({"NumericLessThan":{"n":"ten"}})")).find("must be a number"), std::string::npos);
  EXPECT_NE(Refused(doc(R"({"DateLessThan":{"aws:CurrentTime":"tomorrow"}})")).find("must be an ISO 8601 date"), std::string::npos);
  EXPECT_NE(Refused(doc(R"({"DateLessThan":{"aws:CurrentTime":"2026-02-30T00:00:00Z"}})")).find("ISO 8601"), std::string::npos);
  EXPECT_NE(Refused(doc(R"({"IpAddress":{"aws:SourceIp":"10.0.0.0/33"}})")).find("CIDR"), std::string::npos);
  EXPECT_NE(Refused(doc(R"({"IpAddress":{"aws:SourceIp":"10.0.0"}})")).find("CIDR"), std::string::npos);
  MustParse(doc(R"({"IpAddress":{"aws:SourceIp":["10.0.0.0/8","2001:db8::/32","192.0.2.1"]}})"));
  MustParse(doc(R"({"DateGreaterThan":{"aws:CurrentTime":["2026-01-02","2026-01-02T03:04:05.5+02:00","1767323045"]}})"));
  MustParse(doc(R"({"ForAllValues:StringNotEqualsIgnoreCaseIfExists":{"aws:TagKeys":["a","b"]}})"));
}

TEST(IamPolicy, HostileDocumentsAreBounded) {
  // Over the size limit: refused before parsing, as IAM's LimitExceeded.
  std::string big = R"({"Statement":{"Effect":"Allow","Action":"*","Resource":"*","Sid":")" + std::string(20000, 'a') + "\"}}";
  EXPECT_NE(Refused(big, Code::kLimitExceeded).find("at most 10240"), std::string::npos);
  // Deep nesting: refused by a byte scan, before the parser recurses.
  std::string deep = R"({"Statement":)" + std::string(5000, '[') + std::string(5000, ']') + "}";
  ParseLimits roomy;
  roomy.max_bytes = 1 << 20;
  auto p = ParsePolicy(deep, "", roomy);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "policy document is nested more than 16 levels deep");
  // Too many statements, patterns, condition values or too long a pattern.
  std::string many = R"({"Statement":[)";
  for (int i = 0; i < 101; ++i) many += std::string(i ? "," : "") + R"({"Effect":"Allow","Action":"*","Resource":"*"})";
  many += "]}";
  ParseLimits limits;
  limits.max_bytes = 1 << 20;
  auto s = ParsePolicy(many, "", limits);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kLimitExceeded);
  EXPECT_EQ(s.status().message(), "Statement has 101 entries; at most 100 are allowed");
  limits.max_patterns = 3;
  auto pat = ParsePolicy(R"({"Statement":{"Effect":"Allow","Action":["a:b","a:c","a:d"],"Resource":"*"}})", "", limits);
  ASSERT_FALSE(pat.ok());
  EXPECT_EQ(pat.status().message(), "policy document has more than 3 Action and Resource entries");
  limits.max_condition_values = 2;
  auto cv = ParsePolicy(R"({"Statement":{"Effect":"Allow","Action":"*","Resource":"*","Condition":{"StringEquals":{"k":["a","b","c"]}}}})", "", limits);
  ASSERT_FALSE(cv.ok());
  EXPECT_EQ(cv.status().message(), "policy document has more than 2 condition values");
  std::string long_arn = "arn:aws:s3:::" + std::string(3000, 'x');
  auto lp = ParsePolicy(R"({"Statement":{"Effect":"Allow","Action":"*","Resource":")" + long_arn + "\"}}", "", roomy);
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().message(), "Statement.Resource entry is 3013 bytes; at most 2048 are allowed");
}

TEST(IamPolicy, MessagesQuoteAtMostAShortPrefixOfAHostileValue) {
  std::string doc = R"({"Statement":{"Effect":"Allow","Resource":"*","Action":")" + std::string(1500, 'x') + "\"}}";
  std::string m = Refused(doc);
  EXPECT_LT(m.size(), 300u);
  EXPECT_NE(m.find("xxx...\""), std::string::npos);
  std::string op = R"({"Statement":{"Effect":"Allow","Action":"*","Resource":"*","Condition":{")" +
                   std::string(5000, 'S') + R"(":{"k":"v"}}}})";
  EXPECT_EQ(Refused(op), "Statement.Condition has a condition operator of 5000 characters; none is longer than 64");
  std::string key = R"({"Statement":{"Effect":"Allow","Action":"*","Resource":"*","Condition":{"StringEquals":{")" +
                    std::string(5000, 'k') + R"(":"v"}}}})";
  EXPECT_EQ(Refused(key), "Statement.Condition.StringEquals has a condition key of 5000 characters; keys have 1 to 256");
}

// A role's trust policy: Principal in place of Resource, sts: actions only.
TEST(IamTrustPolicy, ParsesPrincipalsAndKeepsAccountsAsTheirRootArn) {
  auto p = ParseTrustPolicy(R"({"Version":"2012-10-17","Statement":[
    {"Effect":"Allow","Principal":{"AWS":["123456789012","arn:aws:iam::000000000000:user/a",
                                          "arn:aws:iam::000000000000:role/r"],
                                   "Service":"sagemaker.amazonaws.com"},
     "Action":["sts:AssumeRole","sts:TagSession"],"Condition":{"StringLike":{"sts:RoleSessionName":"ci-*"}}},
    {"Effect":"Deny","Principal":"*","Action":"sts:*"}]})");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->statements.size(), 2u);
  EXPECT_TRUE(p->statements[0].trust);
  EXPECT_EQ(p->statements[0].principals,
            (std::vector<std::string>{"arn:aws:iam::123456789012:root", "arn:aws:iam::000000000000:user/a",
                                      "arn:aws:iam::000000000000:role/r", "service:sagemaker.amazonaws.com"}));
  EXPECT_EQ(p->statements[1].principals, std::vector<std::string>{"*"});
  EXPECT_TRUE(p->statements[0].resources.empty());
}

TEST(IamTrustPolicy, RefusalsNameTheStatementAndTheRule) {
  auto refused = [](const std::string& statement) {
    auto p = ParseTrustPolicy(R"({"Version":"2012-10-17","Statement":[)" + statement + "]}");
    EXPECT_FALSE(p.ok()) << statement;
    return p.ok() ? std::string() : p.status().message();
  };
  EXPECT_EQ(refused(R"({"Effect":"Allow","Action":"sts:AssumeRole"})"), "Statement[0].Principal is required in a trust policy");
  EXPECT_NE(refused(R"({"Effect":"Allow","Principal":"*","Action":"sts:AssumeRole","Resource":"*"})")
                .find("Statement[0].Resource is not allowed in a trust policy"),
            std::string::npos);
  EXPECT_NE(refused(R"({"Effect":"Allow","NotPrincipal":{"AWS":"*"},"Action":"sts:AssumeRole"})").find("NotPrincipal"),
            std::string::npos);
  EXPECT_NE(refused(R"({"Effect":"Allow","Principal":"*","Action":"batch:SubmitJob"})").find("is not an sts: action"),
            std::string::npos);
  EXPECT_NE(refused(R"({"Effect":"Allow","Principal":{"Federated":"x"},"Action":"sts:AssumeRole"})")
                .find("Statement[0].Principal.Federated: principal type \"Federated\" is not supported"),
            std::string::npos);
  for (const char* bad : {"bob", "arn:aws:iam::000000000000:user/*", "arn:aws:iam::0000:root", "arn:aws:s3:::bucket",
                          "arn:aws:iam::000000000000:group/g"})
    EXPECT_NE(refused(std::string(R"({"Effect":"Allow","Principal":{"AWS":")") + bad + R"("},"Action":"sts:AssumeRole"})")
                  .find("Statement[0].Principal.AWS"),
              std::string::npos)
        << bad;
  EXPECT_NE(refused(R"({"Effect":"Allow","Principal":{"Service":"evil.example.com"},"Action":"sts:AssumeRole"})")
                .find("Statement[0].Principal.Service"),
            std::string::npos);
  // An identity policy still refuses Principal.
  EXPECT_FALSE(ParsePolicy(R"({"Statement":{"Effect":"Allow","Principal":"*","Action":"*","Resource":"*"}})").ok());
}

}  // namespace
}  // namespace ty::iam
