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
struct State;
struct CwMetricOwner;
struct RoleEntry;
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
  kSubmittedJobDefinition,  // SubmitJob's: name:revision, ARN, or a bare name (its latest ACTIVE revision)
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
  // A second resource the call acts on, checked with the same action after the first (SubmitJob:
  // the job definition's revision, beside the queue, as on AWS). kNone: none.
  ResourceKind also = ResourceKind::kNone;
  std::string_view also_field = {};
};

// A role a request names, wherever it names it (docs/security.md, "Roles for jobs").
struct NamedRole {
  std::string field;    // where: "TrainingJobDefinitions[1].RoleArn", "serviceRequestPayload.RoleArn"
  std::string arn;      // as given
  std::string service;  // the service principal that will take it (control::kSageMakerPrincipal, ...)
};

// The steps to every member of `operation`'s input whose name ends in "RoleArn" (any case), from
// the embedded model (ServiceModel::MemberPathsEndingWith); computed once per operation. Empty
// for an operation the model does not have, and for Api values without a model.
const std::vector<std::vector<std::string>>& RoleArnMembers(Api api, std::string_view operation);
// Request members that carry another operation's request as a JSON string, whose role members
// count as the carrier's: SubmitServiceJob's serviceRequestPayload is a CreateTrainingJob request.
struct CarriedRequest {
  Api api;
  std::string_view operation, member;
  Api carried_api;
  std::string_view carried_operation;
};
std::span<const CarriedRequest> CarriedRequests();
// Every role `request` names for `operation`: the values of RoleArnMembers, then those of the
// requests it carries, with their paths (list items with their index). Values that are not
// strings are left out (validation refused them).
std::vector<NamedRole> RolesNamed(Api api, std::string_view operation, const nlohmann::json& request);

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

  // CloudWatch (api/cloudwatch_api.cpp; docs/security.md, "CloudWatch metrics"): `action`
  // ("cloudwatch:PutMetricData", ...) on "*", with cloudwatch:namespace set to `ns` when it is not
  // empty (AWS sets it for PutMetricData only).
  Status CheckCloudWatch(const Principal& caller, const CallContext& ctx, const std::string& action,
                         const std::string& ns) const;
  // Whether the caller may read the series of a metric that belongs to `owner`: a training job's
  // as sagemaker:DescribeTrainingJob on the job (its tags and owner), a queue's as
  // batch:DescribeJobQueues on the queue (its tags); the account's always. AccessDenied with IAM's
  // message otherwise. REQUIRES: `s` is held under the controller's read (Controller::Read).
  Status CheckMetricOwner(const Principal& caller, const CallContext& ctx, const control::State& s,
                          const control::CwMetricOwner& owner) const;

  // For List and Describe-many replies: removes the items the caller may not describe.
  void FilterReply(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                   nlohmann::json* reply) const;

  // GET /metrics and the event stream: one action on "*"; STS AssumeRole: sts:AssumeRole on the role.
  Status CheckAction(const Principal& caller, const CallContext& ctx, const std::string& action,
                     const std::string& resource = "*") const;

  // STS AssumeRole, after CheckAction allowed sts:AssumeRole on the role: whether the role's trust
  // policy admits the caller (by its ARN, its role's ARN for a role session, or its account's root
  // ARN), with the caller's condition keys and sts:RoleSessionName. AccessDenied otherwise; the
  // root credential is judged like anyone (the default trust policy admits it).
  Status CheckTrust(const Principal& caller, const CallContext& ctx, const control::RoleEntry& role,
                    const std::string& session_name) const;

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
  // Every role the request names (RolesNamed, and for SubmitJob the roles of the job definition
  // it submits): once the account has roles, each must exist, the caller must be allowed
  // iam:PassRole on it and its trust policy must admit the service that will take it
  // (docs/security.md, "Roles for jobs").
  Status CheckRolesNamed(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                      const nlohmann::json& request, std::vector<AccessDecision>* audit) const;

  // A new job's data in the embedded object store: its channels, output path, checkpoint prefix
  // and script-mode source, each checked with the S3 action the job will use, as the job's
  // principal (control::JobPrincipalOf; docs/security.md, "Jobs' data"). CreateTrainingJob,
  // SubmitServiceJob's payload and a tuning job's training definitions; AccessDenied names the field.
  Status CheckJobData(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                      const nlohmann::json& request, std::vector<AccessDecision>* audit) const;
  // One training definition (`def`, whose fields are named after `field_prefix`) as `job`.
  Status CheckTrainingData(const Principal& job, const CallContext& ctx, const nlohmann::json& def,
                           const std::string& field_prefix, std::vector<AccessDecision>* audit) const;

  control::Controller& controller_;
};

}  // namespace ty::api
