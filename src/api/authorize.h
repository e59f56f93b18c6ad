// Who may do what: each operation's row (api/operations.h) maps it onto an IAM action, the ARNs
// it acts on and the condition keys of the request (OperationAccess); the Authorizer checks them
// against the caller's policies (src/iam). Called from the request path right after validation;
// docs/security.md ("Users and keys", "Actions and resources") is the user-facing table.
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

// A request member whose string value is another operation's request, as JSON text: the roles
// and the data that request names count as the carrier's. Parsed once per request
// (ParseCarried, api/operations.h) and handed to both authorization and the handler.
struct CarriedRequest {
  std::string_view member = {};  // "" : the operation carries none
  Api api = Api::kSageMaker;
  std::string_view operation = {};
};

// A condition key the request itself gives a value for (beside aws:RequestTag/*, which every
// request that sets tags carries): a string member, or an integer member as its decimal text.
struct RequestKey {
  std::string_view key;   // "batch:ShareIdentifier"
  std::string_view path;  // the member, '.' between steps: "ResourceConfig.InstanceCount"
  bool in_carried = false;  // read from the carried request (CarriedRequest), not the body
};

// One training job's definition that a request starts, for the check of the job's data
// (Authorizer::CheckJobData): the definition, the name the job's role session would carry and the
// prefix its fields are named with in a refusal. Borrows from the request.
struct TrainingDefinition {
  const nlohmann::json* definition;
  std::string job_name;
  std::string field_prefix;
};
using TrainingDefinitionsOf = std::vector<TrainingDefinition> (*)(const nlohmann::json& request,
                                                                  const nlohmann::json& carried);

// How one operation is checked: a column of its row in its service's operation table
// (api/operations.h). The action is "<ActionPrefix(api)>:<operation>".
struct OperationAccess {
  ResourceKind resource = ResourceKind::kNone;
  std::string_view field = {};  // the request member naming the resource ("" for kNone)
  // A second resource the call acts on, checked with the same action after the first (SubmitJob:
  // the job definition's revision, beside the queue, as on AWS). kNone: none.
  ResourceKind also = ResourceKind::kNone;
  std::string_view also_field = {};
  // For List and Describe-many calls: the reply's array of items, each checked again with
  // `item_action` on its own ARN, and left out unless allowed ("" : the reply is not filtered).
  // `item` is what each item stands for; `item_name` the item's member that finds it in state (an
  // id or name; a log stream's name), `item_arn` the one holding its ARN.
  std::string_view list_member = {};
  std::string_view item_action = {};
  ResourceKind item = ResourceKind::kNone;
  std::string_view item_name = {};
  std::string_view item_arn = {};
  // A second array of the same kind of items, filtered alike (FilterLogEvents names the streams it
  // searched in searchedLogStreams).
  std::string_view also_list_member = {};
  CarriedRequest carries = {};
  std::vector<RequestKey> request_keys = {};
  // The training definitions the request starts, whose data the job's principal must be allowed
  // (null: it starts none).
  TrainingDefinitionsOf training_definitions = nullptr;
  // The member naming a job definition whose registered roles the new job runs as (SubmitJob):
  // they are checked like the roles the request names itself.
  std::string_view definition_roles = {};
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
// Every role `request` names for `operation`: the values of RoleArnMembers, then those of the
// request it carries (`carried`, ParseCarried's), with their paths (list items with their index).
// Values that are not strings are left out (validation refused them).
std::vector<NamedRole> RolesNamed(Api api, std::string_view operation, const nlohmann::json& request,
                                  const nlohmann::json& carried);

// The access column of an operation's row; null when it has no row (refused as AccessDenied for
// everyone but root).
const OperationAccess* FindOperationAccess(Api api, std::string_view operation);
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

  // Allowed, or AccessDeniedException with IAM's message. `request` passed model validation;
  // `carried` is the request it carries, as ParseCarried (api/operations.h) parsed it for the
  // handler too. Root is allowed without evaluation. Appends each decision to *audit when given.
  Status Check(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
               const nlohmann::json& request, const nlohmann::json& carried,
               std::vector<AccessDecision>* audit = nullptr) const;
  // The same for a caller that has not parsed the carried request (tests, the event stream).
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
                        const OperationAccess* access, const nlohmann::json& request, const nlohmann::json& carried,
                        std::vector<AccessDecision>* audit) const;
  // Every role the request names (RolesNamed, and for SubmitJob the roles of the job definition
  // it submits): once the account has roles, each must exist, the caller must be allowed
  // iam:PassRole on it and its trust policy must admit the service that will take it
  // (docs/security.md, "Roles for jobs").
  Status CheckRolesNamed(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                         const OperationAccess* access, const nlohmann::json& request, const nlohmann::json& carried,
                         std::vector<AccessDecision>* audit) const;

  // A new job's data in the embedded object store: its channels, output path, checkpoint prefix
  // and script-mode source, each checked with the S3 action the job will use, as the job's
  // principal (control::JobPrincipalOf; docs/security.md, "Jobs' data"). CreateTrainingJob,
  // SubmitServiceJob's payload and a tuning job's training definitions; AccessDenied names the field.
  Status CheckJobData(const Principal& caller, const CallContext& ctx, const OperationAccess* access,
                      const nlohmann::json& request, const nlohmann::json& carried,
                      std::vector<AccessDecision>* audit) const;
  // One training definition (`def`, whose fields are named after `field_prefix`) as `job`.
  Status CheckTrainingData(const Principal& job, const CallContext& ctx, const nlohmann::json& def,
                           const std::string& field_prefix, std::vector<AccessDecision>* audit) const;

  control::Controller& controller_;
};

}  // namespace ty::api
