// Principals: the users, their access keys, the roles jobs run as and the managed policies
// attached to users and roles (docs/security.md, "Users and keys", "Roles for jobs").
//
// The controller owns them like every other piece of state: they change in turns, are committed
// to the store (kind kMeta, keys "iam/...") before the caller is answered, and are loaded at
// start. The request path never reads them under the state lock: after each commit that changed
// them the controller publishes an immutable PrincipalDirectory, which authentication (the
// secret of an access key) and authorization (a user's tags and parsed policies) read lock-free.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "iam/evaluate.h"
#include "iam/policy.h"

namespace ty::control {

struct IamUser {
  std::string name;
  std::string arn;       // arn:aws:iam::<account>:user/<name>
  std::string user_id;   // AIDA..., stable across a delete and re-create of the same name
  EpochMs created = 0;
  Tags tags;
  std::vector<std::string> policies;  // attached managed policies, by name, in attachment order
};

struct IamAccessKey {
  std::string id;      // AKIA + 16 characters
  std::string secret;  // 40 characters. Never logged, never in an event, an error or a List reply.
  std::string user;
  EpochMs created = 0;
};

struct IamPolicy {
  std::string name;
  std::string arn;       // arn:aws:iam::<account>:policy/<name>
  std::string document;  // as accepted (it parsed with iam::ParsePolicy)
  std::string description;
  EpochMs created = 0;
};

// A role jobs run as (RoleArn / jobRoleArn) and STS AssumeRole callers take on.
struct IamRole {
  std::string name;
  std::string arn;      // arn:aws:iam::<account>:role/<name>
  std::string role_id;  // AROA...
  std::string description;
  EpochMs created = 0;
  std::vector<std::string> policies;  // attached managed policies, by name, in attachment order
  // Its trust policy (AssumeRolePolicyDocument) as accepted (it parsed with
  // iam::ParseTrustPolicy). "" for a role stored before roles had one: it has
  // DefaultTrustPolicy(), as does a role created without a document.
  std::string assume_role_policy_document;
};

// The service principals jobs take their roles as: a training job's (and a tuning trial's, and a
// service job's) is SageMaker's, a Batch container job's is ECS tasks', as on AWS.
inline constexpr std::string_view kSageMakerPrincipal = "sagemaker.amazonaws.com";
inline constexpr std::string_view kEcsTasksPrincipal = "ecs-tasks.amazonaws.com";

// The trust policy of a role created without one: it admits the account's principals (each of
// which still needs its own sts:AssumeRole allow) and both job services, which is what every role
// did before roles had trust policies, so that existing scripts keep working.
std::string DefaultTrustPolicy(const std::string& account_id);

// The durable part, in State.
struct Principals {
  std::map<std::string, IamUser> users;          // by name
  std::map<std::string, IamAccessKey> keys;      // by access key id
  std::map<std::string, IamPolicy> policies;     // by name
  std::map<std::string, IamRole> roles;          // by name
};

// A user as the request path sees it: the user's tags and its policies, parsed.
struct PrincipalEntry {
  IamUser user;
  std::vector<std::shared_ptr<const iam::Policy>> owned;  // keeps `policies` alive
  std::vector<const iam::Policy*> policies;               // what iam::Evaluate takes
  // The documents of `policies`, in the same order, as accepted: what a request forwarded to a
  // peer region carries, for the peer to authorize it (docs/regions.md).
  std::vector<std::string> documents;
};

// A role as the request path sees it: its parsed policies and trust policy.
struct RoleEntry {
  IamRole role;
  // Never null. A stored document that no longer parses (it did when accepted) admits nobody.
  std::shared_ptr<const iam::Policy> trust;
  std::vector<std::shared_ptr<const iam::Policy>> owned;
  std::vector<const iam::Policy*> policies;
  // The role as a caller (its sessions): user.arn is the role's ARN, user.user_id its RoleId.
  std::shared_ptr<const PrincipalEntry> as_caller;
};

// An immutable view of Principals, shared by every request that holds it. Built by the
// controller after a commit (BuildDirectory); a reader keeps the shared_ptr for its request.
struct PrincipalDirectory {
  struct Key {
    std::string secret;
    std::shared_ptr<const PrincipalEntry> principal;
  };
  std::map<std::string, Key, std::less<>> keys;  // by access key id
  std::map<std::string, std::shared_ptr<const PrincipalEntry>, std::less<>> users;  // by name
  std::map<std::string, std::shared_ptr<const RoleEntry>, std::less<>> roles;       // by name
};

// The role a job's role ARN names: its name when the ARN is arn:aws:iam::<account>:role/[path/]NAME
// of this account, "" otherwise.
std::string RoleNameOf(const std::string& arn, const std::string& account_id);

// The condition keys a principal brings to each of its requests: `entry` (null for the root
// credential) acting as `arn` (a user's own ARN, or a role session's assumed-role ARN, whose
// aws:PrincipalArn is then its role's), `username` for users only.
iam::PrincipalKeys PrincipalKeysOf(const PrincipalEntry* entry, const std::string& arn, const std::string& username);

// The user or role behind a principal's ARN (arn:aws:iam::ACCOUNT:user/NAME, or a role session
// arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION, which acts with its role's policies); `entry`
// is null for any other ARN and for a user or role that no longer exists, which is allowed nothing.
struct ResolvedPrincipal {
  std::shared_ptr<const PrincipalEntry> entry;
  std::string username;  // users only
  bool role_session = false;
};
ResolvedPrincipal ResolvePrincipal(const PrincipalDirectory& dir, const std::string& account_id, const std::string& arn);

// Whom a job's own reads and writes of the embedded object store are authorized as
// (docs/security.md, "Jobs' data"): the session of the role it names when that role exists (as
// assumed-role/<role>/<job name>), else the principal that submitted it. Root's jobs, and those
// submitted before there were users (no owner), are unrestricted.
struct JobPrincipal {
  bool unrestricted = false;
  bool role_session = false;
  std::string arn;
  std::string username;                         // a user owner's name
  std::shared_ptr<const PrincipalEntry> entry;  // null when not unrestricted: a deleted user or role, allowed nothing
};
JobPrincipal JobPrincipalOf(const PrincipalDirectory& dir, const std::string& account_id, const std::string& owner,
                            const std::string& role_arn, const std::string& job_name);
// Whether `role`'s trust policy admits the principal that `r` describes (r->principal_ids set)
// to `r->action` (sts:AssumeRole). Pure.
bool TrustAdmits(const RoleEntry& role, const iam::Request& r);
// Why the trust policy of `role` keeps `service` (kSageMakerPrincipal, ...) from taking it, in
// the words SageMaker uses; OK when it admits the service. Pure.
Status CheckServiceTrust(const RoleEntry& role, std::string_view service, EpochMs now);

// Whether a job recorded as submitted by `owner` (an ARN: the account root, a user, or a role
// session arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION; "" for a job recorded before owners
// were, taken as the root's) may run as `role_arn` taken by `service`, judged on the directory as
// it is now: the owner's current policies must allow iam:PassRole on the role (the root's always
// do; a user or role that no longer exists allows nothing), and the role's trust policy must
// admit `service`. OK too when `role_arn` names none of the account's roles: such a job gets no
// credentials. Else kAccessDenied naming iam:PassRole and the role, or kInvalidArgument naming
// the trust policy. Pure: `now` is aws:CurrentTime.
Status MayRunAsRole(const PrincipalDirectory& dir, const std::string& account_id, const std::string& owner,
                    const std::string& role_arn, std::string_view service, EpochMs now);

// The directory for `p`. Documents that no longer parse (they all did when accepted) are left
// out of their users' policies, with a warning: they allow nothing.
std::shared_ptr<const PrincipalDirectory> BuildDirectory(const Principals& p);

// Store documents ("iam/user/NAME", "iam/key/ID", "iam/policy/NAME" under store::Kind::kMeta).
std::string PrincipalStoreKey(const std::string& kind, const std::string& name);
std::string EncodeDoc(const IamUser& v);
std::string EncodeDoc(const IamAccessKey& v);
std::string EncodeDoc(const IamPolicy& v);
std::string EncodeDoc(const IamRole& v);
bool DecodeDoc(const std::string& doc, IamUser* v);
bool DecodeDoc(const std::string& doc, IamAccessKey* v);
bool DecodeDoc(const std::string& doc, IamPolicy* v);
bool DecodeDoc(const std::string& doc, IamRole* v);

// ---- commands (decoded and checked for shape by api/iam_api.cpp) ----
struct CreateUserCommand {
  std::string name;
  Tags tags;
  std::string user_id;  // AIDA + 16 characters, drawn by the caller
};
struct TagUserCommand {
  std::string name;
  Tags tags;                          // added or replaced
  std::vector<std::string> remove;    // keys removed
};
struct CreateAccessKeyCommand {
  std::string user;
  std::string id;      // drawn by the caller from a CSPRNG
  std::string secret;  // likewise
};
struct CreatePolicyCommand {
  std::string name;
  std::string document;  // REQUIRES: parses with iam::ParsePolicy
  std::string description;
};
struct AttachPolicyCommand {
  std::string user;
  std::string policy;  // name or ARN
  bool attach = true;  // false: detach
};
struct CreateRoleCommand {
  std::string name;
  std::string description;
  std::string role_id;  // AROA + 17 characters, drawn by the caller
  std::string assume_role_policy_document;  // "" : DefaultTrustPolicy(); else REQUIRES: parses with iam::ParseTrustPolicy
};
struct UpdateAssumeRolePolicyCommand {
  std::string role;
  std::string document;  // REQUIRES: parses with iam::ParseTrustPolicy
};
struct AttachRolePolicyCommand {
  std::string role;
  std::string policy;  // name or ARN
  bool attach = true;  // false: detach
};

// A user may hold this many access keys at once (IAM's limit) and this many managed policies.
inline constexpr size_t kMaxAccessKeysPerUser = 2;
inline constexpr size_t kMaxPoliciesPerUser = 20;
inline constexpr size_t kMaxPoliciesPerRole = 20;
inline constexpr size_t kMaxRoles = 1000;

}  // namespace ty::control
