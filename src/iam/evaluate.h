// Evaluating a request against the policies of its principal: IAM's order for identity-based
// policies. Pure: the request carries everything (including the time, as aws:CurrentTime).
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "iam/policy.h"

namespace ty::iam {

// What is asked, by whom, with the condition keys the caller knows for this request.
struct Request {
  std::string principal;  // the caller's ARN (arn:aws:iam::000000000000:user/alice), for messages
  std::string action;     // service:Operation, e.g. batch:SubmitServiceJob
  std::string resource;   // the ARN acted on, or "*" for calls on no one resource (List*)
  // For a trust policy (ParseTrustPolicy), in place of the resource: every name the caller goes
  // by, each as a trust policy's Principal entries are kept: its own ARN, its role's ARN for a
  // role session, its account's root ARN (arn:aws:iam::ACCOUNT:root), or "service:NAME" for a
  // service principal. A trust statement applies when one of them is among its principals, or
  // when it names "*".
  std::vector<std::string> principal_ids;

  // Sets a condition key (names are case-insensitive, values are not). Keys with several values
  // (tag keys, for instance) take them all; Set replaces what was there.
  void Set(std::string_view key, std::string value);
  void Set(std::string_view key, std::vector<std::string> values);
  // nullptr when the key is absent from the request.
  const std::vector<std::string>* Find(std::string_view key) const;

  // Condition keys by lower-cased name. The caller supplies every key it knows, policy variables
  // included (aws:username, aws:PrincipalTag/team, aws:CurrentTime, aws:SourceIp,
  // aws:SecureTransport, batch:ShareIdentifier, trainyard:JobOwner, ...).
  std::map<std::string, std::vector<std::string>, std::less<>> keys;
};

// Who asks, as the condition keys see it: the same for every request of one principal.
struct PrincipalKeys {
  std::string arn;            // the caller (a role session's assumed-role ARN), for messages
  std::string principal_arn;  // aws:PrincipalArn: the user's ARN, or a role session's role ARN
  std::string username;       // aws:username (users only; "" none)
  std::string user_id;        // aws:userid (a user's AIDA..., a role's AROA...; "" none)
  std::map<std::string, std::string> tags;  // aws:PrincipalTag/KEY

  bool operator==(const PrincipalKeys&) const = default;
};

// Sets request.principal and the keys above (those that are empty are left absent).
void SetPrincipalKeys(Request* request, const PrincipalKeys& who);

enum class Outcome {
  kAllow,         // some statement allows it and none denies it
  kExplicitDeny,  // a Deny statement applies (whatever allows it)
  kImplicitDeny,  // no statement allows it
};

// The outcome and the statement that decided it: the first Deny that applies, or else the first
// Allow that applies; none for an implicit deny.
struct Decision {
  Outcome outcome = Outcome::kImplicitDeny;
  const Policy* policy = nullptr;  // borrowed from Evaluate's arguments
  int statement = -1;              // index into policy->statements

  bool allowed() const { return outcome == Outcome::kAllow; }
  // The deciding statement's Sid, or "" (none, or a statement without one).
  std::string_view sid() const;
};

// Explicit deny beats allow; without an allow the request is denied. Every statement of every
// policy is considered (order does not change the outcome, only which statement is reported:
// the first of its kind in argument order).
// REQUIRES: no null pointer in `policies`.
Decision Evaluate(const Request& request, std::span<const Policy* const> policies);

// The text of an AccessDeniedException, in IAM's words:
//   User: P is not authorized to perform: A on resource: R because no identity-based policy
//   allows the A action
//   User: P is not authorized to perform: A on resource: R with an explicit deny in an
//   identity-based policy: NAME
// REQUIRES: !decision.allowed().
std::string DenialMessage(const Request& request, const Decision& decision);

}  // namespace ty::iam
