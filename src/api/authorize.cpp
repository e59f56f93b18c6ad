#include "api/authorize.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "control/controller.h"
#include "core/strings.h"

namespace ty::api {

using nlohmann::json;
using control::Controller;
using control::State;

namespace {

constexpr std::string_view kLogGroup = "/aws/sagemaker/TrainingJobs";
constexpr std::string_view kBatchLogGroup = "/aws/batch/job";

// Every operation the server routes. tests/unit/authorize_test.cpp walks the handler tables and
// fails for an operation missing here.
constexpr OperationAccess kAccess[] = {
    // ---- Batch ----
    {Api::kBatch, "CreateServiceEnvironment", ResourceKind::kServiceEnvironment, "serviceEnvironmentName"},
    {Api::kBatch, "UpdateServiceEnvironment", ResourceKind::kServiceEnvironment, "serviceEnvironment"},
    {Api::kBatch, "DeleteServiceEnvironment", ResourceKind::kServiceEnvironment, "serviceEnvironment"},
    {Api::kBatch, "DescribeServiceEnvironments", ResourceKind::kNone, "", "serviceEnvironments",
     "batch:DescribeServiceEnvironments"},
    {Api::kBatch, "CreateJobQueue", ResourceKind::kJobQueue, "jobQueueName"},
    {Api::kBatch, "UpdateJobQueue", ResourceKind::kJobQueue, "jobQueue"},
    {Api::kBatch, "DeleteJobQueue", ResourceKind::kJobQueue, "jobQueue"},
    {Api::kBatch, "DescribeJobQueues", ResourceKind::kNone, "", "jobQueues", "batch:DescribeJobQueues"},
    {Api::kBatch, "GetJobQueueSnapshot", ResourceKind::kJobQueue, "jobQueue"},
    {Api::kBatch, "CreateSchedulingPolicy", ResourceKind::kSchedulingPolicy, "name"},
    {Api::kBatch, "UpdateSchedulingPolicy", ResourceKind::kSchedulingPolicy, "arn"},
    {Api::kBatch, "DeleteSchedulingPolicy", ResourceKind::kSchedulingPolicy, "arn"},
    {Api::kBatch, "DescribeSchedulingPolicies", ResourceKind::kSchedulingPolicies, "arns"},
    {Api::kBatch, "ListSchedulingPolicies", ResourceKind::kNone, "", "schedulingPolicies",
     "batch:DescribeSchedulingPolicies"},
    {Api::kBatch, "RegisterJobDefinition", ResourceKind::kJobDefinition, "jobDefinitionName"},
    {Api::kBatch, "DeregisterJobDefinition", ResourceKind::kJobDefinition, "jobDefinition"},
    {Api::kBatch, "DescribeJobDefinitions", ResourceKind::kNone},
    {Api::kBatch, "CreateQuotaShare", ResourceKind::kNewQuotaShare, "jobQueue"},
    {Api::kBatch, "UpdateQuotaShare", ResourceKind::kQuotaShare, "quotaShareArn"},
    {Api::kBatch, "DeleteQuotaShare", ResourceKind::kQuotaShare, "quotaShareArn"},
    {Api::kBatch, "DescribeQuotaShare", ResourceKind::kQuotaShare, "quotaShareArn"},
    {Api::kBatch, "ListQuotaShares", ResourceKind::kJobQueue, "jobQueue", "quotaShares", "batch:DescribeQuotaShare"},
    {Api::kBatch, "CreateComputeEnvironment", ResourceKind::kComputeEnvironment, "computeEnvironmentName"},
    {Api::kBatch, "UpdateComputeEnvironment", ResourceKind::kComputeEnvironment, "computeEnvironment"},
    {Api::kBatch, "DeleteComputeEnvironment", ResourceKind::kComputeEnvironment, "computeEnvironment"},
    {Api::kBatch, "DescribeComputeEnvironments", ResourceKind::kNone, "", "computeEnvironments",
     "batch:DescribeComputeEnvironments"},
    {Api::kBatch, "SubmitJob", ResourceKind::kJobQueue, "jobQueue"},
    {Api::kBatch, "DescribeJobs", ResourceKind::kNone, "", "jobs", "batch:DescribeJobs"},
    {Api::kBatch, "ListJobs", ResourceKind::kNone, "", "jobSummaryList", "batch:ListJobs"},
    {Api::kBatch, "CancelJob", ResourceKind::kContainerJob, "jobId"},
    {Api::kBatch, "TerminateJob", ResourceKind::kContainerJob, "jobId"},
    {Api::kBatch, "SubmitServiceJob", ResourceKind::kJobQueue, "jobQueue"},
    {Api::kBatch, "DescribeServiceJob", ResourceKind::kServiceJob, "jobId"},
    {Api::kBatch, "ListServiceJobs", ResourceKind::kNone, "", "jobSummaryList", "batch:DescribeServiceJob"},
    {Api::kBatch, "TerminateServiceJob", ResourceKind::kServiceJob, "jobId"},
    {Api::kBatch, "UpdateServiceJob", ResourceKind::kServiceJob, "jobId"},
    {Api::kBatch, "TerminateServiceJobs", ResourceKind::kServiceJobs, "jobs"},
    {Api::kBatch, "TagResource", ResourceKind::kTaggedResource, "resourceArn"},
    {Api::kBatch, "UntagResource", ResourceKind::kTaggedResource, "resourceArn"},
    {Api::kBatch, "ListTagsForResource", ResourceKind::kTaggedResource, "resourceArn"},
    // ---- SageMaker ----
    {Api::kSageMaker, "CreateTrainingJob", ResourceKind::kTrainingJob, "TrainingJobName"},
    {Api::kSageMaker, "DescribeTrainingJob", ResourceKind::kTrainingJob, "TrainingJobName"},
    {Api::kSageMaker, "StopTrainingJob", ResourceKind::kTrainingJob, "TrainingJobName"},
    {Api::kSageMaker, "UpdateTrainingJob", ResourceKind::kTrainingJob, "TrainingJobName"},
    {Api::kSageMaker, "ListTrainingJobs", ResourceKind::kNone, "", "TrainingJobSummaries",
     "sagemaker:DescribeTrainingJob"},
    {Api::kSageMaker, "CreateHyperParameterTuningJob", ResourceKind::kTuningJob, "HyperParameterTuningJobName"},
    {Api::kSageMaker, "DescribeHyperParameterTuningJob", ResourceKind::kTuningJob, "HyperParameterTuningJobName"},
    {Api::kSageMaker, "ListHyperParameterTuningJobs", ResourceKind::kNone, "", "HyperParameterTuningJobSummaries",
     "sagemaker:DescribeHyperParameterTuningJob"},
    {Api::kSageMaker, "ListTrainingJobsForHyperParameterTuningJob", ResourceKind::kTuningJob,
     "HyperParameterTuningJobName"},
    {Api::kSageMaker, "StopHyperParameterTuningJob", ResourceKind::kTuningJob, "HyperParameterTuningJobName"},
    {Api::kSageMaker, "DeleteHyperParameterTuningJob", ResourceKind::kTuningJob, "HyperParameterTuningJobName"},
    {Api::kSageMaker, "AddTags", ResourceKind::kTaggedResource, "ResourceArn"},
    {Api::kSageMaker, "DeleteTags", ResourceKind::kTaggedResource, "ResourceArn"},
    {Api::kSageMaker, "ListTags", ResourceKind::kTaggedResource, "ResourceArn"},
    // ---- CloudWatch Logs (the training jobs' instance logs) ----
    {Api::kLogs, "DescribeLogGroups", ResourceKind::kNone},
    {Api::kLogs, "DescribeLogStreams", ResourceKind::kLogGroup, "logGroupName", "logStreams", "logs:DescribeLogStreams"},
    {Api::kLogs, "GetLogEvents", ResourceKind::kLogStream, "logStreamName"},
    {Api::kLogs, "FilterLogEvents", ResourceKind::kLogGroup, "logGroupName", "events", "logs:FilterLogEvents"},
    // ---- EventBridge (rules on the default event bus, API destinations) ----
    {Api::kEvents, "PutRule", ResourceKind::kEventRule, "Name"},
    {Api::kEvents, "DescribeRule", ResourceKind::kEventRule, "Name"},
    {Api::kEvents, "ListRules", ResourceKind::kNone, "", "Rules", "events:DescribeRule"},
    {Api::kEvents, "EnableRule", ResourceKind::kEventRule, "Name"},
    {Api::kEvents, "DisableRule", ResourceKind::kEventRule, "Name"},
    {Api::kEvents, "DeleteRule", ResourceKind::kEventRule, "Name"},
    {Api::kEvents, "PutTargets", ResourceKind::kEventRule, "Rule"},
    {Api::kEvents, "RemoveTargets", ResourceKind::kEventRule, "Rule"},
    {Api::kEvents, "ListTargetsByRule", ResourceKind::kEventRule, "Rule"},
    {Api::kEvents, "CreateConnection", ResourceKind::kEventConnection, "Name"},
    {Api::kEvents, "DescribeConnection", ResourceKind::kEventConnection, "Name"},
    {Api::kEvents, "ListConnections", ResourceKind::kNone, "", "Connections", "events:DescribeConnection"},
    {Api::kEvents, "DeleteConnection", ResourceKind::kEventConnection, "Name"},
    {Api::kEvents, "CreateApiDestination", ResourceKind::kEventApiDestination, "Name"},
    {Api::kEvents, "DescribeApiDestination", ResourceKind::kEventApiDestination, "Name"},
    {Api::kEvents, "ListApiDestinations", ResourceKind::kNone, "", "ApiDestinations",
     "events:DescribeApiDestination"},
    {Api::kEvents, "DeleteApiDestination", ResourceKind::kEventApiDestination, "Name"},
    {Api::kEvents, "PutEvents", ResourceKind::kNone},
    // ---- trainyard's own endpoints ----
    {Api::kTrainyard, "GetLogs", ResourceKind::kTrainingJob, "trainingJobName"},
    {Api::kTrainyard, "MetricSeries", ResourceKind::kTrainingJob, "TrainingJobName"},
    {Api::kTrainyard, "SystemMetrics", ResourceKind::kTrainingJob, "TrainingJobName"},
    {Api::kTrainyard, "Interrupt", ResourceKind::kTrainingJob, "TrainingJobName"},
    {Api::kTrainyard, "AdvanceClock", ResourceKind::kNone},
    {Api::kTrainyard, "CostReport", ResourceKind::kNone},
    {Api::kTrainyard, "WhatIf", ResourceKind::kNone},
    {Api::kTrainyard, "DescribeCapacity", ResourceKind::kNone},
    {Api::kTrainyard, "QueueStandings", ResourceKind::kNone},
    {Api::kTrainyard, "ShareHistory", ResourceKind::kNone},
    {Api::kTrainyard, "Events", ResourceKind::kNone},
    {Api::kTrainyard, "LookupAuditEvents", ResourceKind::kNone},
    {Api::kTrainyard, "CreateUser", ResourceKind::kUser, "UserName"},
    {Api::kTrainyard, "DeleteUser", ResourceKind::kUser, "UserName"},
    {Api::kTrainyard, "TagUser", ResourceKind::kUser, "UserName"},
    {Api::kTrainyard, "UntagUser", ResourceKind::kUser, "UserName"},
    {Api::kTrainyard, "ListUsers", ResourceKind::kNone},
    {Api::kTrainyard, "CreateAccessKey", ResourceKind::kUser, "UserName"},
    {Api::kTrainyard, "DeleteAccessKey", ResourceKind::kUser, "UserName"},
    {Api::kTrainyard, "ListAccessKeys", ResourceKind::kUser, "UserName"},
    {Api::kTrainyard, "CreatePolicy", ResourceKind::kPolicy, "PolicyName"},
    {Api::kTrainyard, "GetPolicy", ResourceKind::kPolicy, "PolicyName"},
    {Api::kTrainyard, "DeletePolicy", ResourceKind::kPolicy, "PolicyName"},
    {Api::kTrainyard, "ListPolicies", ResourceKind::kNone},
    {Api::kTrainyard, "AttachUserPolicy", ResourceKind::kUser, "UserName"},
    {Api::kTrainyard, "DetachUserPolicy", ResourceKind::kUser, "UserName"},
    {Api::kTrainyard, "CreateRole", ResourceKind::kRole, "RoleName"},
    {Api::kTrainyard, "GetRole", ResourceKind::kRole, "RoleName"},
    {Api::kTrainyard, "DeleteRole", ResourceKind::kRole, "RoleName"},
    {Api::kTrainyard, "ListRoles", ResourceKind::kNone},
    {Api::kTrainyard, "AttachRolePolicy", ResourceKind::kRole, "RoleName"},
    {Api::kTrainyard, "DetachRolePolicy", ResourceKind::kRole, "RoleName"},
};

// What a request acts on: an ARN and what the conditions may ask of it.
struct Target {
  std::string arn;
  // Borrowed from state, only while its lock is held (FilterReply); null: `own_tags`, a copy, which
  // is what a Target that outlives the lock uses.
  const Tags* tags = nullptr;
  Tags own_tags;
  std::string owner;           // trainyard:JobOwner
  std::string share;           // batch:ShareIdentifier of a job acted on
  std::string quota_share;     // trainyard:QuotaShare of a job acted on
};

Target AnyResource() {
  Target t;
  t.arn = "*";
  return t;
}

std::string StringMember(const json& req, std::string_view field) {
  auto it = req.find(field);
  return it != req.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The tags a request sets: Batch's {"k": "v"} map or SageMaker's [{"Key", "Value"}] list.
Tags RequestTags(const json& req) {
  Tags out;
  for (const char* member : {"tags", "Tags"}) {
    auto it = req.find(member);
    if (it == req.end()) continue;
    if (it->is_object()) {
      for (const auto& [k, v] : it->items())
        if (v.is_string()) out[k] = v.get<std::string>();
    } else if (it->is_array()) {
      for (const auto& t : *it)
        if (t.is_object() && t.contains("Key") && t["Key"].is_string())
          out[t["Key"].get<std::string>()] = t.value("Value", "");
    }
  }
  return out;
}

// A training job's tags as its resource tags: its own Tags, then those of the service job it
// runs for (so a team's tag on a submitted job covers the job's attempts and their logs).
Tags TrainingJobTags(const State& s, const TrainingJob& tj) {
  Tags tags;
  json req = json::parse(tj.request_json, nullptr, false);
  if (!req.is_discarded() && req.is_object()) tags = RequestTags(req);
  if (!tj.service_job_id.empty())
    if (const control::ServiceJobState* js = s.FindJob(tj.service_job_id))
      for (const auto& [k, v] : js->job.tags) tags.emplace(k, v);
  return tags;
}

std::string NameOf(const std::string& name_or_arn) {
  if (!StartsWith(name_or_arn, "arn:")) return name_or_arn;
  auto slash = name_or_arn.rfind('/');
  return slash == std::string::npos ? name_or_arn : name_or_arn.substr(slash + 1);
}

void SetTarget(Target* t, const ServiceJob& job) {
  t->arn = job.arn;
  t->tags = &job.tags;
  t->owner = job.owner;
  t->share = job.share_identifier;
  t->quota_share = job.quota_share_name;
}

void SetTrainingJob(Target* t, const State& s, const TrainingJob& tj) {
  t->arn = tj.arn;
  t->own_tags = TrainingJobTags(s, tj);
  t->owner = tj.owner;
}

// The condition keys every request carries.
void SetCallerKeys(iam::Request* r, const Principal& caller, const CallContext& ctx) {
  r->principal = caller.arn;
  // A role session's aws:PrincipalArn is its role's ARN, as in IAM; the message names the session.
  r->Set("aws:PrincipalArn", caller.type == Principal::Type::kRoleSession && caller.entry ? caller.entry->user.arn : caller.arn);
  if (!caller.name.empty()) r->Set("aws:username", caller.name);
  if (caller.entry) {
    r->Set("aws:userid", caller.entry->user.user_id);
    for (const auto& [k, v] : caller.entry->user.tags) r->Set("aws:PrincipalTag/" + k, v);
  }
  if (!ctx.source_ip.empty()) r->Set("aws:SourceIp", ctx.source_ip);
  r->Set("aws:SecureTransport", ctx.secure_transport ? "true" : "false");
  r->Set("aws:CurrentTime", FormatIso8601(ctx.now));
  r->Set("aws:EpochTime", std::to_string(ctx.now / 1000));
}

// The request's own keys: tags it sets, the share it submits to, the instances it asks for.
void SetRequestKeys(iam::Request* r, const std::string& operation, const json& req) {
  Tags tags = RequestTags(req);
  if (!tags.empty()) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : tags) {
      r->Set("aws:RequestTag/" + k, v);
      keys.push_back(k);
    }
    r->Set("aws:TagKeys", std::move(keys));
  }
  if (operation == "SubmitServiceJob") {
    if (std::string share = StringMember(req, "shareIdentifier"); !share.empty()) r->Set("batch:ShareIdentifier", share);
    if (std::string q = StringMember(req, "quotaShareName"); !q.empty()) r->Set("trainyard:QuotaShare", q);
    json payload = json::parse(StringMember(req, "serviceRequestPayload"), nullptr, false);
    if (payload.is_object() && payload.contains("ResourceConfig") && payload["ResourceConfig"].is_object())
      if (auto c = payload["ResourceConfig"].find("InstanceCount"); c != payload["ResourceConfig"].end() && c->is_number_integer())
        r->Set("trainyard:InstanceCount", std::to_string(c->get<int64_t>()));
  }
  if (operation == "CreateTrainingJob" && req.contains("ResourceConfig") && req["ResourceConfig"].is_object())
    if (auto c = req["ResourceConfig"].find("InstanceCount"); c != req["ResourceConfig"].end() && c->is_number_integer())
      r->Set("trainyard:InstanceCount", std::to_string(c->get<int64_t>()));
}

// The keys of the resource acted on. A job's share comes from the job when the request does not
// name one (Terminate, Describe).
void SetResourceKeys(iam::Request* r, const Target& t) {
  r->resource = t.arn;
  for (const auto& [k, v] : t.tags ? *t.tags : t.own_tags) r->Set("aws:ResourceTag/" + k, v);
  if (!t.owner.empty()) r->Set("trainyard:JobOwner", t.owner);
  if (!t.share.empty() && !r->Find("batch:ShareIdentifier")) r->Set("batch:ShareIdentifier", t.share);
  if (!t.quota_share.empty() && !r->Find("trainyard:QuotaShare")) r->Set("trainyard:QuotaShare", t.quota_share);
}

// Whether a statement that may apply to `action` reads a condition key only the server's state
// can supply for the resource: its tags, and for a job also its owner and share. When none does,
// the check builds the resource's ARN from the request alone and takes no state lock: a turn holds
// that lock exclusively while it applies a batch of submits, and waiting for it on every submit
// cost about a tenth of submit throughput (bench/README.md).
bool NeedsResourceState(const Principal& caller, std::string_view action, bool job_resource) {
  if (!caller.entry) return false;
  for (const iam::Policy* policy : caller.entry->policies)
    for (const iam::Statement& st : policy->statements) {
      bool named = false;
      for (const iam::Pattern& p : st.actions) named = named || p.compiled.Matches(action, /*ignore_case=*/true);
      if (named == st.not_action) continue;  // cannot apply to this action
      for (const iam::Condition& c : st.conditions) {
        if (StartsWith(c.key, "aws:resourcetag/")) return true;
        if (job_resource && (c.key == "trainyard:jobowner" || c.key == "batch:shareidentifier" || c.key == "trainyard:quotashare"))
          return true;
      }
    }
  return false;
}

// The decision for one request, and the AccessDenied text when it is a denial.
AccessDecision Decide(const Principal& caller, const iam::Request& r, std::string* denial = nullptr) {
  AccessDecision d;
  d.principal = caller.arn;
  d.action = r.action;
  d.resource = r.resource;
  if (caller.is_root()) {
    d.allowed = true;
    return d;
  }
  static const std::vector<const iam::Policy*> kNone;
  const std::vector<const iam::Policy*>& policies = caller.entry ? caller.entry->policies : kNone;
  iam::Decision decision = iam::Evaluate(r, policies);
  d.allowed = decision.allowed();
  if (decision.policy) {
    d.policy = decision.policy->name;
    d.statement = std::string(decision.sid());
  }
  if (!d.allowed && denial) *denial = iam::DenialMessage(r, decision);
  return d;
}

// The log group a Logs request names (logGroupName, or logGroupIdentifier as a name or ARN);
// training jobs' when it names none.
std::string RequestLogGroup(const json& request) {
  std::string g = StringMember(request, "logGroupName");
  if (g.empty()) g = StringMember(request, "logGroupIdentifier");
  if (StartsWith(g, "arn:")) {
    auto p = g.find(":log-group:");
    if (p != std::string::npos) g = g.substr(p + 11);
    if (EndsWith(g, ":*")) g.resize(g.size() - 2);
  }
  return g.empty() ? std::string(kLogGroup) : g;
}

// The container job whose attempt logs to `stream` (<definition>/default/<attempt id>, the attempt
// id batch-<job id with ':' as '-'>-<n>); null when none does. Call under Read().
const ty::ContainerJob* ContainerJobOfStream(const State& s, const std::string& stream) {
  const size_t slash = stream.rfind('/');
  if (slash == std::string::npos) return nullptr;
  std::string id = stream.substr(slash + 1);
  const size_t dash = id.rfind('-');
  if (!StartsWith(id, "batch-") || dash == std::string::npos || dash < 6) return nullptr;
  id = id.substr(6, dash - 6);
  const ty::ContainerJob* j = s.FindContainerJob(id);
  if (!j) {  // an array child, <parent id>:<index>
    const size_t last = id.rfind('-');
    if (last != std::string::npos) j = s.FindContainerJob(id.substr(0, last) + ":" + id.substr(last + 1));
  }
  if (!j) return nullptr;
  for (const auto& a : j->attempts)
    if (a.log_stream_name == stream) return j;
  return nullptr;
}

// The resource an item of a List or Describe-many reply stands for. Call under Read().
Target ItemTarget(const State& s, const std::string& operation, const json& item, const std::string& logs_prefix) {
  Target t;
  if (operation == "ListServiceJobs") {
    if (const control::ServiceJobState* js = s.FindJob(item.value("jobId", ""))) {
      SetTarget(&t, js->job);
    } else {
      t.arn = item.value("jobArn", "");
    }
  } else if (operation == "ListTrainingJobs") {
    if (const TrainingJob* tj = s.FindTrainingJob(item.value("TrainingJobName", ""))) {
      SetTrainingJob(&t, s, *tj);
    } else {
      t.arn = item.value("TrainingJobArn", "");
    }
  } else if (operation == "ListHyperParameterTuningJobs") {
    t.arn = item.value("HyperParameterTuningJobArn", "");
    if (const control::TuningJob* tuning = s.FindTuningJob(item.value("HyperParameterTuningJobName", ""))) {
      t.tags = &tuning->tags;
      t.owner = tuning->owner;
    }
  } else if (operation == "DescribeLogStreams" || operation == "FilterLogEvents") {
    // A training job's stream is <job>/algo-<n>-<epoch>, a container attempt's
    // <definition>/default/<attempt id>: each carries its job's tags and owner.
    std::string stream = item.value("logStreamName", "");
    if (stream.find("/default/") != std::string::npos) {
      if (const ty::ContainerJob* j = ContainerJobOfStream(s, stream)) {
        t.tags = &j->tags;
        t.owner = j->owner;
      }
      t.arn = logs_prefix + std::string(kBatchLogGroup) + ":log-stream:" + stream;
    } else {
      if (const TrainingJob* tj = s.FindTrainingJob(stream.substr(0, stream.find('/')))) SetTrainingJob(&t, s, *tj);
      t.arn = logs_prefix + std::string(kLogGroup) + ":log-stream:" + stream;
    }
  } else if (operation == "DescribeJobQueues") {
    t.arn = item.value("jobQueueArn", "");
    if (const ty::JobQueue* q = Controller::FindQueue(s, t.arn)) t.tags = &q->tags;
  } else if (operation == "DescribeServiceEnvironments") {
    t.arn = item.value("serviceEnvironmentArn", "");
    if (const ty::ServiceEnvironment* e = Controller::FindEnvironment(s, t.arn)) t.tags = &e->tags;
  } else if (operation == "ListSchedulingPolicies") {
    t.arn = item.value("arn", "");
    if (const ty::SchedulingPolicy* p = Controller::FindPolicy(s, t.arn)) t.tags = &p->tags;
  } else if (operation == "DescribeComputeEnvironments") {
    t.arn = item.value("computeEnvironmentArn", "");
    if (const ty::ComputeEnvironment* e = Controller::FindComputeEnvironment(s, t.arn)) t.tags = &e->tags;
  } else if (operation == "DescribeJobs" || operation == "ListJobs") {
    t.arn = item.value("jobArn", "");
    if (const ty::ContainerJob* j = s.FindContainerJob(item.value("jobId", ""))) {
      t.tags = &j->tags;
      t.owner = j->owner;
    }
  } else if (operation == "ListRules") {
    t.arn = item.value("Arn", "");
  } else if (operation == "ListConnections") {
    t.arn = item.value("ConnectionArn", "");
  } else if (operation == "ListApiDestinations") {
    t.arn = item.value("ApiDestinationArn", "");
  } else if (operation == "ListQuotaShares") {
    t.arn = item.value("quotaShareArn", "");
    if (const ty::QuotaShare* q = Controller::FindQuotaShareByArn(s, t.arn)) t.tags = &q->tags;
  }
  return t;
}

}  // namespace

Principal Principal::Root(const std::string& account_id, const std::string& access_key_id) {
  Principal p;
  p.type = Type::kRoot;
  p.arn = "arn:aws:iam::" + account_id + ":root";
  p.access_key_id = access_key_id;
  return p;
}

std::span<const OperationAccess> AllOperationAccess() { return kAccess; }

const OperationAccess* FindOperationAccess(Api api, std::string_view operation) {
  for (const OperationAccess& a : kAccess)
    if (a.api == api && a.operation == operation) return &a;
  return nullptr;
}

std::string_view ActionPrefix(Api api) {
  switch (api) {
    case Api::kBatch: return "batch";
    case Api::kSageMaker: return "sagemaker";
    case Api::kLogs: return "logs";
    case Api::kTrainyard: return "trainyard";
    case Api::kEvents: return "events";
  }
  return "trainyard";
}

Status Authorizer::Check(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                         const json& request, std::vector<AccessDecision>* audit) const {
  TY_RETURN_IF_ERROR(CheckOperation(caller, ctx, api, operation, request, audit));
  return CheckJobRole(caller, ctx, api, operation, request, audit);
}

// The role a new job names: CreateTrainingJob's RoleArn, or the RoleArn in SubmitServiceJob's
// serviceRequestPayload. Once the account has a role, it must name one of them, and the caller must
// be allowed iam:PassRole on it; before then RoleArn is recorded and not checked.
Status Authorizer::CheckJobRole(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                                const json& request, std::vector<AccessDecision>* audit) const {
  const bool training = api == Api::kSageMaker && operation == "CreateTrainingJob";
  if (!training && !(api == Api::kBatch && operation == "SubmitServiceJob")) return Status::Ok();
  auto dir = controller_.directory();
  if (dir->roles.empty()) return Status::Ok();  // before the payload is parsed: submits stay cheap
  std::string arn, field;
  if (training) {
    arn = StringMember(request, "RoleArn");
    field = "RoleArn";
  } else if (api == Api::kBatch && operation == "SubmitServiceJob") {
    // The payload was checked as a CreateTrainingJob request by validation; a payload that does not
    // parse here is refused by the handler.
    json payload = json::parse(StringMember(request, "serviceRequestPayload"), nullptr, false);
    if (!payload.is_object()) return Status::Ok();
    arn = StringMember(payload, "RoleArn");
    field = "serviceRequestPayload.RoleArn";
  }
  const std::string role = control::RoleNameOf(arn, controller_.config().account_id);
  if (role.empty() || !dir->roles.count(role))
    return InvalidArgument("1 validation error detected: Value '" + arn + "' at '" + field +
                           "' failed to satisfy constraint: Member must name a role of account " +
                           controller_.config().account_id + " (trainyard admin role list)");
  iam::Request r;
  r.action = "iam:PassRole";
  r.resource = dir->roles.find(role)->second->role.arn;
  SetCallerKeys(&r, caller, ctx);
  std::string denial;
  AccessDecision d = Decide(caller, r, &denial);
  if (audit) audit->push_back(d);
  if (d.allowed) return Status::Ok();
  return Status(Code::kAccessDenied, std::move(denial));
}

Status Authorizer::CheckOperation(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                                  const json& request, std::vector<AccessDecision>* audit) const {
  if (caller.is_root() && !audit) return Status::Ok();  // nothing to evaluate, nothing to record
  const OperationAccess* access = FindOperationAccess(api, operation);
  const std::string action = std::string(ActionPrefix(api)) + ":" + operation;
  iam::Request base;
  base.action = action;
  SetCallerKeys(&base, caller, ctx);
  SetRequestKeys(&base, operation, request);
  const std::string account = controller_.config().account_id;
  const std::string region = controller_.config().region;
  if (!access) {
    base.resource = "*";
    if (caller.is_root()) return Status::Ok();
    return Status(Code::kAccessDenied, "User: " + caller.arn + " is not authorized to perform: " + action +
                                           " on resource: * because this server has no access rule for it");
  }
  const std::string name = StringMember(request, access->field);
  auto check_one = [&](const Target& t) -> Status {
    iam::Request r = base;
    SetResourceKeys(&r, t);
    std::string denial;
    AccessDecision d = Decide(caller, r, &denial);
    const bool allowed = d.allowed;
    spdlog::debug("access {} {} {} {} {}/{}", d.principal, d.action, d.resource, allowed ? "allowed" : "denied", d.policy,
                  d.statement);
    if (audit) audit->push_back(std::move(d));
    if (allowed) return Status::Ok();
    return Status(Code::kAccessDenied, std::move(denial));
  };

  auto read_queue = [&](const std::string& ref) {
    if (!caller.is_root() && !NeedsResourceState(caller, ToLower(action), /*job_resource=*/false)) {
      Target t;
      t.arn = StartsWith(ref, "arn:") ? ref : controller_.Arn("batch", "job-queue/" + ref);
      return t;
    }
    // Reads only a queue (ReadServiceJob with no job waits only for a commit that changed queues).
    return controller_.ReadServiceJob("", [&](const State& s) {
      Target t;
      if (const ty::JobQueue* q = Controller::FindQueue(s, ref)) {
        t.arn = q->arn;
        t.own_tags = q->tags;
      } else {
        t.arn = StartsWith(ref, "arn:") ? ref : controller_.Arn("batch", "job-queue/" + ref);
      }
      return t;
    });
  };

  auto read_job = [&](const std::string& ref) {
    std::string id = StartsWith(ref, "arn:") ? NameOf(ref) : ref;
    return controller_.ReadServiceJob(id, [&](const State& s) {
      Target t;
      if (const control::ServiceJobState* js = s.FindJob(id)) {
        SetTarget(&t, js->job);
        t.own_tags = js->job.tags;  // copied: the lock ends with this read
        t.tags = nullptr;
      } else {
        t.arn = controller_.Arn("batch", "service-job/" + id);
      }
      return t;
    });
  };

  switch (access->resource) {
    case ResourceKind::kNone:
      return check_one(AnyResource());
    case ResourceKind::kJobQueue:
      return check_one(read_queue(name));
    case ResourceKind::kNewQuotaShare: {
      Target t = read_queue(name);
      t.arn += "/quota-share/" + StringMember(request, "quotaShareName");
      t.own_tags.clear();
      return check_one(t);
    }
    case ResourceKind::kServiceJob:
      return check_one(read_job(name));
    case ResourceKind::kComputeEnvironment:
    case ResourceKind::kContainerJob: {
      Target t = controller_.Read([&](const State& s) {
        Target t;
        if (access->resource == ResourceKind::kComputeEnvironment) {
          const ty::ComputeEnvironment* e = Controller::FindComputeEnvironment(s, name);
          t.arn = e ? e->arn : StartsWith(name, "arn:") ? name : controller_.Arn("batch", "compute-environment/" + name);
          if (e) t.own_tags = e->tags;
        } else {
          const ty::ContainerJob* j = s.FindContainerJob(name);
          t.arn = j ? j->arn : StartsWith(name, "arn:") ? name : controller_.Arn("batch", "job/" + name);
          if (j) {
            t.own_tags = j->tags;
            t.owner = j->owner;  // trainyard:JobOwner and batch:ShareIdentifier hold as for a service job
            t.share = j->share_identifier;
          }
        }
        return t;
      });
      return check_one(t);
    }
    case ResourceKind::kJobDefinition: {
      // A new registration is checked on job-definition/<name> (its revision is not drawn yet); a
      // revision, on its own ARN with its tags.
      Target t = controller_.Read([&](const State& s) {
        Target t;
        if (const ty::JobDefinition* d = Controller::FindJobDefinition(s, name)) {
          t.arn = d->arn;
          t.own_tags = d->tags;
        } else {
          t.arn = StartsWith(name, "arn:") ? name : controller_.Arn("batch", "job-definition/" + name);
        }
        return t;
      });
      return check_one(t);
    }
    case ResourceKind::kServiceJobs: {  // each job named is checked; a refusal for one refuses all
      auto it = request.find(access->field);
      if (it == request.end() || !it->is_array()) return check_one(AnyResource());
      for (const auto& ref : *it)
        if (ref.is_string()) TY_RETURN_IF_ERROR(check_one(read_job(ref.get<std::string>())));
      return Status::Ok();
    }
    case ResourceKind::kTrainingJob: {
      Target t = controller_.Read([&](const State& s) {
        Target t;
        if (const TrainingJob* tj = s.FindTrainingJob(name)) {
          SetTrainingJob(&t, s, *tj);
        } else {
          t.arn = controller_.Arn("sagemaker", "training-job/" + ToLower(name));
        }
        return t;
      });
      return check_one(t);
    }
    case ResourceKind::kTuningJob: {
      Target t = controller_.Read([&](const State& s) {
        Target t;
        if (const control::TuningJob* tuning = s.FindTuningJob(name)) {
          t.arn = tuning->arn;
          t.tags = &tuning->tags;
          t.owner = tuning->owner;
        } else {
          t.arn = controller_.Arn("sagemaker", "hyper-parameter-tuning-job/" + ToLower(name));
        }
        return t;
      });
      return check_one(t);
    }
    case ResourceKind::kLogGroup: {
      Target t;
      t.arn = "arn:aws:logs:" + region + ":" + account + ":log-group:" + RequestLogGroup(request);
      return check_one(t);
    }
    case ResourceKind::kLogStream: {
      // A training job's stream is named <training job>/algo-<n>-<epoch>, a container attempt's
      // <definition>/default/<attempt id>: its tags and owner are its job's.
      const std::string group = RequestLogGroup(request);
      const std::string job = name.substr(0, name.find('/'));
      Target t = controller_.Read([&](const State& s) {
        Target t;
        if (group == kBatchLogGroup) {
          if (const ty::ContainerJob* j = ContainerJobOfStream(s, name)) {
            t.own_tags = j->tags;  // copied: the lock ends with this read
            t.owner = j->owner;
          }
        } else if (const TrainingJob* tj = s.FindTrainingJob(job)) {
          SetTrainingJob(&t, s, *tj);
        }
        return t;
      });
      t.arn = "arn:aws:logs:" + region + ":" + account + ":log-group:" + group + ":log-stream:" + name;
      return check_one(t);
    }
    case ResourceKind::kSchedulingPolicies: {
      auto it = request.find(access->field);
      if (it == request.end() || !it->is_array()) return check_one(AnyResource());
      for (const auto& arn : *it) {
        if (!arn.is_string()) continue;
        Target t = controller_.Read([&](const State& s) {
          Target t;
          t.arn = arn.get<std::string>();
          if (const ty::SchedulingPolicy* p = Controller::FindPolicy(s, t.arn)) t.own_tags = p->tags;
          return t;
        });
          TY_RETURN_IF_ERROR(check_one(t));
      }
      return Status::Ok();
    }
    case ResourceKind::kServiceEnvironment:
    case ResourceKind::kSchedulingPolicy:
    case ResourceKind::kQuotaShare:
    case ResourceKind::kTaggedResource: {
      Target t = controller_.Read([&](const State& s) {
        Target t;
        if (access->resource == ResourceKind::kServiceEnvironment) {
          const ty::ServiceEnvironment* e = Controller::FindEnvironment(s, name);
          t.arn = e ? e->arn : StartsWith(name, "arn:") ? name : controller_.Arn("batch", "service-environment/" + name);
          if (e) t.own_tags = e->tags;
        } else if (access->resource == ResourceKind::kSchedulingPolicy) {
          t.arn = StartsWith(name, "arn:") ? name : controller_.Arn("batch", "scheduling-policy/" + name);
          if (const ty::SchedulingPolicy* p = Controller::FindPolicy(s, t.arn)) t.own_tags = p->tags;
        } else if (access->resource == ResourceKind::kQuotaShare) {
          t.arn = name;
          if (const ty::QuotaShare* q = Controller::FindQuotaShareByArn(s, name)) t.own_tags = q->tags;
        } else {
          // Any taggable ARN: a job (its tags, owner and share), a queue, an environment, a policy,
          // a quota share, a training job.
          t.arn = name;
          if (name.find(":service-job/") != std::string::npos) {
            if (const control::ServiceJobState* js = s.FindJob(NameOf(name))) {
              SetTarget(&t, js->job);
              t.own_tags = js->job.tags;  // copied: the lock ends with this read
              t.tags = nullptr;
            }
          } else if (name.find(":training-job/") != std::string::npos) {
            if (const TrainingJob* tj = s.FindTrainingJob(NameOf(name))) SetTrainingJob(&t, s, *tj);
          } else if (name.find(":job-queue/") != std::string::npos && name.find("/quota-share/") == std::string::npos) {
            if (const ty::JobQueue* q = Controller::FindQueue(s, name)) t.own_tags = q->tags;
          } else if (const ty::QuotaShare* q = Controller::FindQuotaShareByArn(s, name)) {
            t.own_tags = q->tags;
          } else if (const ty::ServiceEnvironment* e = Controller::FindEnvironment(s, name)) {
            t.own_tags = e->tags;
          } else if (const ty::ComputeEnvironment* ce = Controller::FindComputeEnvironment(s, name)) {
            t.own_tags = ce->tags;
          } else if (const ty::ContainerJob* cj = name.find(":job/") != std::string::npos ? s.FindContainerJob(name) : nullptr) {
            t.own_tags = cj->tags;
          } else if (name.find(":job-definition/") != std::string::npos) {
            if (const ty::JobDefinition* d = Controller::FindJobDefinition(s, name)) t.own_tags = d->tags;
          } else if (const ty::SchedulingPolicy* p = Controller::FindPolicy(s, name)) {
            t.own_tags = p->tags;
          }
        }
        return t;
      });
      return check_one(t);
    }
    case ResourceKind::kEventRule:
    case ResourceKind::kEventConnection:
    case ResourceKind::kEventApiDestination: {
      const char* type = access->resource == ResourceKind::kEventRule         ? "rule/"
                         : access->resource == ResourceKind::kEventConnection ? "connection/"
                                                                               : "api-destination/";
      Target t;
      t.arn = "arn:aws:events:" + region + ":" + account + ":" + type + name;
      return check_one(t);
    }
    case ResourceKind::kUser: {
      Target t;
      t.arn = "arn:aws:iam::" + account + ":user/" + name;
      if (auto dir = controller_.directory(); dir)
        if (auto u = dir->users.find(name); u != dir->users.end()) t.own_tags = u->second->user.tags;
      return check_one(t);
    }
    case ResourceKind::kRole: {
      Target t;
      t.arn = "arn:aws:iam::" + account + ":role/" + name;
      return check_one(t);
    }
    case ResourceKind::kPolicy: {
      Target t;
      t.arn = StartsWith(name, "arn:") ? name : "arn:aws:iam::" + account + ":policy/" + name;
      return check_one(t);
    }
  }
  return check_one(AnyResource());
}

Status Authorizer::CheckAction(const Principal& caller, const CallContext& ctx, const std::string& action,
                               const std::string& resource) const {
  if (caller.is_root()) return Status::Ok();
  iam::Request r;
  r.action = action;
  r.resource = resource;
  SetCallerKeys(&r, caller, ctx);
  std::string denial;
  if (Decide(caller, r, &denial).allowed) return Status::Ok();
  return Status(Code::kAccessDenied, std::move(denial));
}

Status Authorizer::CheckS3(const Principal& caller, const CallContext& ctx, const std::string& action,
                           const std::string& resource,
                           const std::vector<std::pair<std::string, std::string>>& condition_keys,
                           std::vector<AccessDecision>* audit) const {
  if (caller.is_root() && !audit) return Status::Ok();
  iam::Request r;
  r.action = action;
  r.resource = resource;
  SetCallerKeys(&r, caller, ctx);
  for (const auto& [k, v] : condition_keys) r.Set(k, v);
  std::string denial;
  AccessDecision d = Decide(caller, r, &denial);
  const bool allowed = d.allowed;
  if (audit) audit->push_back(std::move(d));
  if (allowed) return Status::Ok();
  return Status(Code::kAccessDenied, std::move(denial));
}

void Authorizer::FilterReply(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                             json* reply) const {
  if (caller.is_root()) return;
  const OperationAccess* access = FindOperationAccess(api, operation);
  if (!access || access->list_member.empty() || !reply->is_object()) return;
  auto list = reply->find(access->list_member);
  if (list == reply->end() || !list->is_array()) return;
  iam::Request base;
  base.action = std::string(access->item_action);
  SetCallerKeys(&base, caller, ctx);
  const std::string logs_prefix = "arn:aws:logs:" + controller_.config().region + ":" + controller_.config().account_id +
                                  ":log-group:";
  auto filter = [&](json* items) {
    controller_.Read([&](const State& s) {
      json kept = json::array();
      for (auto& item : *items) {
        Target t = ItemTarget(s, operation, item, logs_prefix);
        if (t.arn.empty()) continue;  // an item that cannot be placed is left out, never shown
        iam::Request r = base;
        SetResourceKeys(&r, t);
        if (Decide(caller, r).allowed) kept.push_back(std::move(item));
      }
      *items = std::move(kept);
      return 0;
    });
  };
  filter(&*list);
  // FilterLogEvents also names the streams it searched.
  if (operation == "FilterLogEvents")
    if (auto searched = reply->find("searchedLogStreams"); searched != reply->end() && searched->is_array()) filter(&*searched);
}

bool Authorizer::MayReadEvent(const std::string& owner, const obs::EventReadCheck& check) const {
  const std::string account = controller_.config().account_id;
  if (owner == "arn:aws:iam::" + account + ":root") return true;
  if (check.action.empty()) return false;
  if (!check.put_by.empty() && check.put_by == owner) return true;
  // The owner as a caller: a user, or a role's session (its role's policies; the session may have ended).
  Principal p;
  p.arn = owner;
  auto dir = controller_.directory();
  const std::string user_prefix = "arn:aws:iam::" + account + ":user/";
  const std::string role_prefix = "arn:aws:sts::" + account + ":assumed-role/";
  if (StartsWith(owner, user_prefix)) {
    p.type = Principal::Type::kUser;
    p.name = owner.substr(owner.rfind('/') + 1);
    if (auto u = dir->users.find(p.name); u != dir->users.end()) p.entry = u->second;
  } else if (StartsWith(owner, role_prefix)) {
    p.type = Principal::Type::kRoleSession;
    const std::string rest = owner.substr(role_prefix.size());
    if (auto r = dir->roles.find(rest.substr(0, rest.find('/'))); r != dir->roles.end()) p.entry = r->second->as_caller;
  }
  if (!p.entry) return false;
  iam::Request r;
  r.action = check.action;
  SetCallerKeys(&r, p, CallContext{"", false, controller_.Now()});
  if (!check.put_by.empty()) {
    r.resource = check.resource;
    r.Set("events:source", check.source);
    r.Set("events:detail-type", check.detail_type);
    return Decide(p, r).allowed;
  }
  // The resource's keys, as the describe call reads them.
  Target t = controller_.Read([&](const State& s) {
    Target t;
    t.arn = check.resource;
    const std::string& arn = check.resource;
    if (arn.find(":service-job/") != std::string::npos) {
      if (const control::ServiceJobState* js = s.FindJob(NameOf(arn))) {
        SetTarget(&t, js->job);
        t.own_tags = js->job.tags;  // copied: the lock ends with this read
        t.tags = nullptr;
      }
    } else if (arn.find(":training-job/") != std::string::npos) {
      if (const TrainingJob* tj = s.FindTrainingJob(NameOf(arn))) SetTrainingJob(&t, s, *tj);
    } else if (arn.find(":hyper-parameter-tuning-job/") != std::string::npos) {
      if (const control::TuningJob* tuning = s.FindTuningJob(NameOf(arn))) {
        t.own_tags = tuning->tags;
        t.owner = tuning->owner;
      }
    } else if (arn.find(":job/") != std::string::npos) {
      if (const ty::ContainerJob* j = s.FindContainerJob(arn)) {
        t.own_tags = j->tags;
        t.owner = j->owner;
        t.share = j->share_identifier;
      }
    }
    return t;
  });
  SetResourceKeys(&r, t);
  return Decide(p, r).allowed;
}

}  // namespace ty::api
