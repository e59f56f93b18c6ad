// IAM policy documents: the typed form of the JSON that users and roles carry, and its parser.
//
// A document is checked whole when it is parsed (ParsePolicy); a Policy that exists is well
// formed, so evaluation (evaluate.h) has no error path.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "iam/wildcard.h"

namespace ty::iam {

enum class Effect { kAllow, kDeny };

// The condition operators trainyard evaluates (docs/security.md, "Policies"). The negated ones
// (StringNotEquals, ArnNotLike, NotIpAddress, ...) are kept as their positive operator plus
// Condition::negated.
enum class Operator {
  kStringEquals,
  kStringEqualsIgnoreCase,
  kStringLike,
  kArnLike,  // ArnEquals and ArnLike are the same test in IAM
  kBool,
  kNumericEquals,
  kNumericLessThan,
  kNumericLessThanEquals,
  kNumericGreaterThan,
  kNumericGreaterThanEquals,
  kDateEquals,
  kDateLessThan,
  kDateLessThanEquals,
  kDateGreaterThan,
  kDateGreaterThanEquals,
  kIpAddress,
  kNull,
};

// How a condition treats a key with several values in the request (tags, for instance).
enum class SetQualifier {
  kNone,          // the key is single-valued; with several values any one may satisfy it
  kForAnyValue,   // at least one request value satisfies it; an absent key never does
  kForAllValues,  // every request value satisfies it; an absent key always does
};

// One value on the policy's side of a condition, prepared for its operator.
struct ConditionValue {
  std::string text;         // as written (numbers and booleans in their JSON spelling)
  bool has_variables = false;  // `${...}` to substitute from the request (Version 2012-10-17)
  Wildcard pattern;         // StringLike / ArnLike without variables: compiled once
  double number = 0;        // Numeric*
  int64_t epoch_ms = 0;     // Date*
  bool flag = false;        // Bool, Null
  // IpAddress: the network in IPv6 form (IPv4 as ::ffff:a.b.c.d) and its prefix length.
  unsigned char address[16] = {};
  int prefix_bits = 0;
};

struct Condition {
  std::string op_name;       // as written, for messages: "ForAnyValue:StringLikeIfExists"
  Operator op = Operator::kStringEquals;
  bool negated = false;      // StringNotEquals, ArnNotLike, NotIpAddress, ...
  bool if_exists = false;    // ...IfExists: an absent key satisfies the condition
  SetQualifier qualifier = SetQualifier::kNone;
  std::string key;           // the condition key, lower-cased (keys are case-insensitive)
  std::vector<ConditionValue> values;  // any one may match (OR); never empty
};

// An action or resource pattern.
struct Pattern {
  std::string text;            // as written
  bool has_variables = false;  // resources only
  Wildcard compiled;           // actions lower-cased; without variables only
};

struct Statement {
  std::string sid;             // may be empty
  Effect effect = Effect::kAllow;
  bool not_action = false;     // NotAction: applies to every action except these
  std::vector<Pattern> actions;
  bool not_resource = false;   // NotResource: applies to every resource except these
  std::vector<Pattern> resources;
  std::vector<Condition> conditions;  // all must hold (AND)
  // Trust policies only (ParseTrustPolicy): whom the statement is about, in place of a resource.
  // Each entry is "*" (anyone), an AWS principal's ARN (an account as
  // arn:aws:iam::ACCOUNT:root, which admits every principal of that account, as in IAM) or
  // "service:" plus a service principal ("service:sagemaker.amazonaws.com").
  bool trust = false;
  std::vector<std::string> principals;
};

struct Policy {
  // Set by the owner of the policy (its ARN or name), for audit and AccessDenied messages.
  std::string name;
  std::string version;         // "2012-10-17" or "2008-10-17" (the default when absent)
  std::string id;              // the document's optional Id
  std::vector<Statement> statements;

  // Policy variables are substituted only under Version 2012-10-17, as in IAM.
  bool substitutes_variables() const { return version == "2012-10-17"; }
};

// Bounds that keep a hostile document from costing much to parse, keep or evaluate. The
// defaults follow IAM's own (a role's inline policies may hold 10,240 characters).
struct ParseLimits {
  size_t max_bytes = 10240;
  int max_depth = 16;               // JSON nesting; a valid policy needs 6
  size_t max_statements = 100;
  size_t max_patterns = 1000;       // Action + Resource entries, over all statements
  size_t max_condition_values = 1000;  // over all statements
  size_t max_pattern_bytes = 2048;  // one action, resource or condition value
};

// Parses and checks a policy document. Errors (a Status, never an exception):
//   kLimitExceeded   the document breaks a ParseLimits bound (IAM's LimitExceeded);
//   kInvalidArgument anything else malformed (IAM's MalformedPolicyDocument), the message naming
//                    the field (`Statement[1].Condition.StringLike`) and the rule it breaks.
// `name` is stored in Policy::name.
StatusOr<Policy> ParsePolicy(std::string_view document, std::string name = {},
                             const ParseLimits& limits = {});

// Parses a role's trust policy (IAM's AssumeRolePolicyDocument), a resource-based policy whose
// resource is the role: each statement has `Principal` ("*", or an object of `AWS` and `Service`,
// each a string or an array of strings) in place of `Resource`, and actions of the `sts` service
// (sts:AssumeRole, sts:TagSession, ...). `NotPrincipal`, `Resource`, `NotResource`, and the
// `Federated` and `CanonicalUser` principal types are refused. An `AWS` entry is "*", an
// account id (12 digits, kept as arn:aws:iam::ACCOUNT:root) or an IAM ARN of a user, a role or
// an account root; a `Service` entry is a DNS name ending in ".amazonaws.com". Errors as
// ParsePolicy's.
StatusOr<Policy> ParseTrustPolicy(std::string_view document, std::string name = {},
                                  const ParseLimits& limits = {});

}  // namespace ty::iam
