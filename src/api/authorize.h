// Who may do what: every operation the server answers, mapped onto an IAM action, the ARNs it
// acts on and the condition keys of the request, then checked against the caller's policies
// (src/iam). One place, called from the request path right after validation; docs/security.md
// ("Users and keys", "Actions and resources") is the user-facing table.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/clock.h"
#include "core/model.h"
#include "core/status.h"
#include "iam/evaluate.h"
#include "obs/event_access.h"

namespace ty::control {
class Controller;
struct PrincipalEntry;
}  // namespace ty::control

namespace ty::api {

// The caller of one request, as authentication found it.
struct Principal {
  enum class Type {
    kRoot,         // the bootstrap credential ([server] / data-dir credentials): allowed everything
    kUser,         // an access key of a user: arn:aws:iam::ACCOUNT:user/NAME
    kRoleSession,  // temporary credentials of a role: arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION
  };
  Type type = Type::kRoot;
  std::string arn;
  std::string name;           // aws:username (users only)
  std::string access_key_id;  // the key that signed the request
  // The user's (or role's) tags and policies; null for the root credential.
  std::shared_ptr<const control::PrincipalEntry> entry;

  bool is_root() const { return type == Type::kRoot; }
  static Principal Root(const std::string& account_id, const std::string& access_key_id);
};

// What the connection says about a request, beside its body.
struct CallContext {
  std::string source_ip;         // aws:SourceIp; "" unknown
  bool secure_transport = false; // aws:SecureTransport
  EpochMs now = 0;               // aws:CurrentTime
};

// The API an operation belongs to (its action prefix).
enum class Api { kBatch, kSageMaker, kLogs, kTrainyard, kEvents };

// Where a request names the resource it acts on.
enum class ResourceKind {
  kNone,                // acts on no one resource: checked against "*" (List*, Describe* of many)
  kServiceEnvironment,  // a name or ARN
  kJobQueue,            // a name or ARN
  kSchedulingPolicy,    // an ARN
  kSchedulingPolicies,  // an array of ARNs (each is checked)
  kJobDefinition,       // RegisterJobDefinition: a name (job-definition/<name>); else name:revision or ARN
  kQuotaShare,          // an ARN
  kNewQuotaShare,       // CreateQuotaShare: the queue in `field`, the name in quotaShareName
  kComputeEnvironment,  // a name or ARN
  kContainerJob,        // a container job id ("<parent>:<index>" for an array child) or ARN
  kServiceJob,          // a job id or ARN
  kServiceJobs,         // an array of job ids or ARNs (each is checked)
  kTrainingJob,         // a training job name
  kTuningJob,           // a hyperparameter tuning job name
  kTaggedResource,      // any ARN (TagResource and friends)
  kLogGroup,            // logGroupName / logGroupIdentifier
  kLogStream,           // logGroupName + logStreamName
  kUser,                // an IAM user name (trainyard's admin endpoints)
  kPolicy,              // a managed policy name or ARN
  kRole,                // an IAM role name (trainyard's admin endpoints)
  kEventRule,           // an EventBridge rule name (rule/<name> on the default bus)
  kEventConnection,     // an EventBridge connection name
  kEventApiDestination, // an EventBridge API destination name
};

// How one operation is checked.
struct OperationAccess {
  Api api;
  std::string_view operation;  // as routed: "SubmitServiceJob", "CreateUser", ...
  ResourceKind resource = ResourceKind::kNone;
  std::string_view field = {};  // the request member naming the resource ("" for kNone)
  // For List and Describe-many calls: the reply's array of items, each checked again with
  // `item_action` on its own ARN, and left out unless allowed ("" : the reply is not filtered).
  std::string_view list_member = {};
  std::string_view item_action = {};
};

// The entry for an operation; null when it has none (a new operation without one is refused as
// AccessDenied for everyone but root, and fails tests/unit/authorize_test.cpp).
const OperationAccess* FindOperationAccess(Api api, std::string_view operation);
std::span<const OperationAccess> AllOperationAccess();
// "batch", "sagemaker", "logs", "trainyard", "events".
std::string_view ActionPrefix(Api api);

// One access decision, for the audit record and the AccessDenied message.
struct AccessDecision {
  std::string principal;  // ARN
  std::string action;
  std::string resource;
  bool allowed = false;
  std::string policy;     // the deciding policy's name ("" implicit deny, or root)
  std::string statement;  // its Sid
};

class Authorizer {
 public:
  explicit Authorizer(control::Controller& controller) : controller_(controller) {}

  // Allowed, or AccessDeniedException with IAM's message. `request` passed model validation.
  // Root is allowed without evaluation. Appends each decision to *audit when given.
  Status Check(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
               const nlohmann::json& request, std::vector<AccessDecision>* audit = nullptr) const;

  // For List and Describe-many replies: removes the items the caller may not describe.
  void FilterReply(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                   nlohmann::json* reply) const;

  // GET /metrics and the event stream: one action on "*"; STS AssumeRole: sts:AssumeRole on the role.
  Status CheckAction(const Principal& caller, const CallContext& ctx, const std::string& action,
                     const std::string& resource = "*") const;

  // The S3 endpoint (api/s3_api.cpp): `action` ("s3:GetObject") on `resource`
  // (arn:aws:s3:::bucket or arn:aws:s3:::bucket/key, or "*"), with the request's own condition
  // keys (s3:prefix, s3:delimiter, s3:max-keys). Root is allowed without evaluation.
  Status CheckS3(const Principal& caller, const CallContext& ctx, const std::string& action, const std::string& resource,
                 const std::vector<std::pair<std::string, std::string>>& condition_keys,
                 std::vector<AccessDecision>* audit = nullptr) const;

  // EventBridge delivery (docs/events.md, "Who receives which events"): whether the principal
  // `owner` (the ARN of a rule's maker: the root, a user or a role session) may read an event, by
  // its policies now and the event's resource as it is now (tags, trainyard:JobOwner), as the
  // describe call on that resource would decide. A PutEvents event: its own putter may, and anyone
  // allowed events:PutEvents on the bus for its events:source and events:detail-type. A user or
  // role that no longer exists may read nothing.
  bool MayReadEvent(const std::string& owner, const obs::EventReadCheck& check) const;

 private:
  Status CheckOperation(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                        const nlohmann::json& request, std::vector<AccessDecision>* audit) const;
  // A new job's role: it must exist once the account has roles, and the caller must be allowed
  // iam:PassRole on it (docs/security.md, "Roles for jobs").
  Status CheckJobRole(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                      const nlohmann::json& request, std::vector<AccessDecision>* audit) const;

  control::Controller& controller_;
};

}  // namespace ty::api
