#include "api/authorize.h"

#include <spdlog/spdlog.h>

#include <map>

#include <nlohmann/json.hpp>

#include <tuple>

#include "api/operations.h"
#include "api/service_model.h"
#include "control/cloudwatch_read.h"
#include "control/controller.h"
#include "core/object_key.h"
#include "core/strings.h"
#include "core/thread_annotations.h"

namespace ty::api {

using nlohmann::json;
using control::Controller;
using control::State;

namespace {

constexpr std::string_view kLogGroup = "/aws/sagemaker/TrainingJobs";
constexpr std::string_view kBatchLogGroup = "/aws/batch/job";

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

std::string NameOf(const std::string& name_or_arn) {
  if (!StartsWith(name_or_arn, "arn:")) return name_or_arn;
  auto slash = name_or_arn.rfind('/');
  return slash == std::string::npos ? name_or_arn : name_or_arn.substr(slash + 1);
}

// The tuning job whose trial `tj` is; null for any other training job (or once it is deleted).
const control::TuningJob* TuningJobOf(const State& s, const TrainingJob& tj) {
  return tj.tuning_job_arn.empty() ? nullptr : s.FindTuningJob(NameOf(tj.tuning_job_arn));
}

// A training job's tags as its resource tags: its own (as AddTags and DeleteTags left them),
// then those of the service job it runs for (so a team's tag on a submitted job covers the job's
// attempts and their logs); a tuning trial's are its tuning job's, as they are now, over its own.
Tags TrainingJobTags(const State& s, const TrainingJob& tj) {
  Tags tags = tj.tags;
  if (!tj.service_job_id.empty())
    if (const control::ServiceJobState* js = s.FindJob(tj.service_job_id))
      for (const auto& [k, v] : js->job.tags) tags.emplace(k, v);
  if (const control::TuningJob* tuning = TuningJobOf(s, tj))
    for (const auto& [k, v] : tuning->tags) tags[k] = v;
  return tags;
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
  const control::TuningJob* tuning = TuningJobOf(s, tj);
  t->owner = tuning ? tuning->owner : tj.owner;
}

// The condition keys every request carries.
void SetCallerKeys(iam::Request* r, const Principal& caller, const CallContext& ctx) {
  iam::SetPrincipalKeys(r, control::PrincipalKeysOf(caller.entry.get(), caller.arn, caller.name));
  if (!ctx.source_ip.empty()) r->Set("aws:SourceIp", ctx.source_ip);
  r->Set("aws:SecureTransport", ctx.secure_transport ? "true" : "false");
  r->Set("aws:CurrentTime", FormatIso8601(ctx.now));
  r->Set("aws:EpochTime", std::to_string(ctx.now / 1000));
}

// The value at a '.'-separated member path: a string as it is, an integer as its decimal text;
// "" for anything else.
std::string KeyValueAt(const json& from, std::string_view path) {
  const json* at = &from;
  for (size_t begin = 0; begin <= path.size();) {
    const size_t end = std::min(path.find('.', begin), path.size());
    if (!at->is_object()) return "";
    auto it = at->find(path.substr(begin, end - begin));
    if (it == at->end()) return "";
    at = &*it;
    begin = end + 1;
  }
  if (at->is_string()) return at->get<std::string>();
  if (at->is_number_integer()) return std::to_string(at->get<int64_t>());
  return "";
}

// The request's own keys: the tags it sets, and those its row names (the share it submits to, the
// instances it asks for).
void SetRequestKeys(iam::Request* r, const OperationAccess* access, const json& req, const json& carried) {
  Tags tags = RequestTags(req);
  if (!tags.empty()) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : tags) {
      r->Set("aws:RequestTag/" + k, v);
      keys.push_back(k);
    }
    r->Set("aws:TagKeys", std::move(keys));
  }
  if (!access) return;
  for (const RequestKey& key : access->request_keys)
    if (std::string v = KeyValueAt(key.in_carried ? carried : req, key.path); !v.empty()) r->Set(std::string(key.key), v);
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

// The resource an item of a List or Describe-many reply stands for, as the row's access says
// (`item`, found in state by the member `item_name`, its ARN in `item_arn`). Call under Read().
Target ItemTarget(const State& s, const OperationAccess& a, const json& item, const std::string& logs_prefix) {
  Target t;
  auto text = [&](std::string_view member) {
    auto it = member.empty() ? item.end() : item.find(member);
    return it != item.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string name = text(a.item_name);
  t.arn = text(a.item_arn);
  switch (a.item) {
    case ResourceKind::kServiceJob:
      if (const control::ServiceJobState* js = s.FindJob(name)) SetTarget(&t, js->job);
      break;
    case ResourceKind::kTrainingJob:
      if (const TrainingJob* tj = s.FindTrainingJob(name)) SetTrainingJob(&t, s, *tj);
      break;
    case ResourceKind::kTuningJob:
      if (const control::TuningJob* tuning = s.FindTuningJob(name)) {
        t.tags = &tuning->tags;
        t.owner = tuning->owner;
      }
      break;
    case ResourceKind::kLogStream:
      // A training job's stream is <job>/algo-<n>-<epoch>, a container attempt's
      // <definition>/default/<attempt id>: each carries its job's tags and owner.
      if (name.find("/default/") != std::string::npos) {
        if (const ty::ContainerJob* j = ContainerJobOfStream(s, name)) {
          t.tags = &j->tags;
          t.owner = j->owner;
        }
        t.arn = logs_prefix + std::string(kBatchLogGroup) + ":log-stream:" + name;
      } else {
        if (const TrainingJob* tj = s.FindTrainingJob(name.substr(0, name.find('/')))) SetTrainingJob(&t, s, *tj);
        t.arn = logs_prefix + std::string(kLogGroup) + ":log-stream:" + name;
      }
      break;
    case ResourceKind::kJobQueue:
      if (const ty::JobQueue* q = Controller::FindQueue(s, t.arn)) t.tags = &q->tags;
      break;
    case ResourceKind::kServiceEnvironment:
      if (const ty::ServiceEnvironment* e = Controller::FindEnvironment(s, t.arn)) t.tags = &e->tags;
      break;
    case ResourceKind::kSchedulingPolicy:
      if (const ty::SchedulingPolicy* p = Controller::FindPolicy(s, t.arn)) t.tags = &p->tags;
      break;
    case ResourceKind::kComputeEnvironment:
      if (const ty::ComputeEnvironment* e = Controller::FindComputeEnvironment(s, t.arn)) t.tags = &e->tags;
      break;
    case ResourceKind::kContainerJob:
      if (const ty::ContainerJob* j = s.FindContainerJob(name)) {
        t.tags = &j->tags;
        t.owner = j->owner;
      }
      break;
    case ResourceKind::kQuotaShare:
      if (const ty::QuotaShare* q = Controller::FindQuotaShareByArn(s, t.arn)) t.tags = &q->tags;
      break;
    default:  // EventBridge's rules, connections and API destinations: their ARN alone
      break;
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

const OperationAccess* FindOperationAccess(Api api, std::string_view operation) {
  const Operation* row = FindOperation(api, operation);
  return row ? &row->access : nullptr;
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
                         const json& request, const json& carried, std::vector<AccessDecision>* audit) const {
  const OperationAccess* access = FindOperationAccess(api, operation);
  TY_RETURN_IF_ERROR(CheckOperation(caller, ctx, api, operation, access, request, carried, audit));
  TY_RETURN_IF_ERROR(CheckRolesNamed(caller, ctx, api, operation, access, request, carried, audit));
  return CheckJobData(caller, ctx, access, request, carried, audit);
}

Status Authorizer::Check(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                         const json& request, std::vector<AccessDecision>* audit) const {
  return Check(caller, ctx, api, operation, request, ParseCarried(FindOperation(api, operation), request), audit);
}

Status Authorizer::CheckJobData(const Principal& caller, const CallContext& ctx, const OperationAccess* access,
                                const json& request, const json& carried, std::vector<AccessDecision>* audit) const {
  if (caller.is_root()) return Status::Ok();  // root's jobs are allowed everything
  if (!access || !access->training_definitions) return Status::Ok();
  const std::vector<TrainingDefinition> defs = access->training_definitions(request, carried);
  if (defs.empty()) return Status::Ok();
  auto dir = controller_.directory();
  for (const TrainingDefinition& d : defs) {
    const json& def = *d.definition;
    const control::JobPrincipal p =
        control::JobPrincipalOf(*dir, controller_.config().account_id, caller.arn, StringMember(def, "RoleArn"), d.job_name);
    if (p.unrestricted) continue;
    // Without a role in force the job is the caller's, whose policies the request carries (a
    // request forwarded from a peer region names a user this server may not know).
    Principal job = caller;
    if (p.arn != caller.arn) {
      job.type = Principal::Type::kRoleSession;
      job.arn = p.arn;
      job.name.clear();
      job.entry = p.entry;
    }
    TY_RETURN_IF_ERROR(CheckTrainingData(job, ctx, def, d.field_prefix, audit));
  }
  return Status::Ok();
}

Status Authorizer::CheckTrainingData(const Principal& job, const CallContext& ctx, const json& def,
                                     const std::string& field_prefix, std::vector<AccessDecision>* audit) const {
  const ObjectStoreConfig& store = controller_.config().object_store;
  // `action` on the object (or, for s3:ListBucket, the listing of the prefix) that `uri` names;
  // buckets on the configured endpoint are the endpoint's to decide.
  auto check = [&](const std::string& field, const std::string& action, std::string uri, bool as_prefix) -> Status {
    if (as_prefix && !uri.empty() && uri.back() != '/') uri += '/';
    auto where = ParseS3Uri(uri, KeyUse::kPrefix);
    if (!where.ok() || store.Routes(where->bucket)) return Status::Ok();  // validation speaks for the shape
    std::vector<std::pair<std::string, std::string>> keys;
    std::string resource = "arn:aws:s3:::" + where->bucket;
    if (action == "s3:ListBucket") {
      keys.emplace_back("s3:prefix", where->key);
    } else {
      resource += "/" + where->key;
    }
    Status st = CheckS3(job, ctx, action, resource, keys, audit);
    if (st.ok()) return st;
    return Status(Code::kAccessDenied, field_prefix + field + ": " + st.message());
  };
  auto member = [](const json& o, std::initializer_list<const char*> path) {
    const json* at = &o;
    for (const char* k : path) {
      if (!at->is_object() || !at->contains(k)) return std::string();
      at = &(*at)[k];
    }
    return at->is_string() ? at->get<std::string>() : std::string();
  };
  if (auto channels = def.find("InputDataConfig"); channels != def.end() && channels->is_array())
    for (size_t i = 0; i < channels->size(); ++i) {
      const std::string uri = member((*channels)[i], {"DataSource", "S3DataSource", "S3Uri"});
      if (uri.empty()) continue;
      const std::string field = "InputDataConfig[" + std::to_string(i) + "].DataSource.S3DataSource.S3Uri";
      // A manifest is one object; a prefix is listed, and each object listed is read at start.
      if (member((*channels)[i], {"DataSource", "S3DataSource", "S3DataType"}) == "ManifestFile") {
        TY_RETURN_IF_ERROR(check(field, "s3:GetObject", uri, false));
      } else {
        TY_RETURN_IF_ERROR(check(field, "s3:ListBucket", uri, false));
      }
    }
  // Every object an output or a checkpoint writes is beneath the path given, as its own prefix.
  if (std::string out = member(def, {"OutputDataConfig", "S3OutputPath"}); !out.empty())
    TY_RETURN_IF_ERROR(check("OutputDataConfig.S3OutputPath", "s3:PutObject", out, true));
  if (std::string ckpt = member(def, {"CheckpointConfig", "S3Uri"}); !ckpt.empty()) {
    TY_RETURN_IF_ERROR(check("CheckpointConfig.S3Uri", "s3:ListBucket", ckpt, true));
    TY_RETURN_IF_ERROR(check("CheckpointConfig.S3Uri", "s3:PutObject", ckpt, true));
  }
  // Script mode's source archive (a JSON-quoted string, as the SageMaker SDK sends it, or plain).
  for (const char* hps : {"HyperParameters", "StaticHyperParameters"}) {
    std::string src = member(def, {hps, "sagemaker_submit_directory"});
    if (src.size() >= 2 && src.front() == '"' && src.back() == '"') src = src.substr(1, src.size() - 2);
    if (StartsWith(src, "s3://"))
      TY_RETURN_IF_ERROR(check(std::string(hps) + ".sagemaker_submit_directory", "s3:GetObject", src, false));
  }
  return Status::Ok();
}

namespace {

const ServiceModel* ModelOf(Api api) {
  if (api == Api::kBatch) return &ServiceModel::Batch();
  if (api == Api::kSageMaker) return &ServiceModel::SageMaker();
  return nullptr;
}

// The service principal that takes the roles a request of `api` names: a SageMaker request's run
// as training jobs, a Batch request's (job definitions) as ECS tasks.
std::string_view ServiceOf(Api api) {
  return api == Api::kSageMaker ? control::kSageMakerPrincipal : control::kEcsTasksPrincipal;
}

// The string values at `steps` from `v` (list items and map values each), with their paths.
void CollectAt(const json& v, const std::vector<std::string>& steps, size_t i, const std::string& where,
               std::string_view service, std::vector<NamedRole>* out) {
  if (i == steps.size()) {
    if (v.is_string()) out->push_back({where, v.get<std::string>(), std::string(service)});
    return;
  }
  const std::string& step = steps[i];
  if (step == "[]") {
    if (!v.is_array()) return;
    for (size_t k = 0; k < v.size(); ++k) CollectAt(v[k], steps, i + 1, where + "[" + std::to_string(k) + "]", service, out);
  } else if (step == "{}") {
    if (!v.is_object()) return;
    for (const auto& [key, item] : v.items()) CollectAt(item, steps, i + 1, where + "." + key, service, out);
  } else {
    if (!v.is_object()) return;
    auto it = v.find(step);
    if (it == v.end()) return;
    CollectAt(*it, steps, i + 1, where.empty() ? step : where + "." + step, service, out);
  }
}

void CollectRoles(Api api, std::string_view operation, const json& request, const std::string& prefix,
                  std::vector<NamedRole>* out) {
  for (const auto& steps : RoleArnMembers(api, operation)) CollectAt(request, steps, 0, prefix, ServiceOf(api), out);
}

}  // namespace

const std::vector<std::vector<std::string>>& RoleArnMembers(Api api, std::string_view operation) {
  static Mutex mu;
  static std::map<std::pair<Api, std::string>, std::vector<std::vector<std::string>>, std::less<>> cache;  // guarded by mu
  MutexLock lock(mu);
  auto key = std::make_pair(api, std::string(operation));
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::vector<std::vector<std::string>> paths;
  if (const ServiceModel* model = ModelOf(api))
    if (const ServiceModel::Operation* op = model->FindOperation(operation); op && !op->input_shape.empty())
      paths = model->MemberPathsEndingWith(op->input_shape, "RoleArn");
  return cache.emplace(std::move(key), std::move(paths)).first->second;  // map nodes never move
}

std::vector<NamedRole> RolesNamed(Api api, std::string_view operation, const json& request, const json& carried) {
  std::vector<NamedRole> out;
  if (!request.is_object()) return out;
  CollectRoles(api, operation, request, "", &out);
  const OperationAccess* access = FindOperationAccess(api, operation);
  if (access && !access->carries.member.empty() && carried.is_object())
    CollectRoles(access->carries.api, access->carries.operation, carried, std::string(access->carries.member), &out);
  return out;
}

// Once the account has a role, every role a request names must be one of them, the caller must be
// allowed iam:PassRole on it, and its trust policy must admit the service that will take it; before
// then RoleArn is recorded and not checked (a job naming no role of the account gets no
// credentials). SubmitJob names the roles of the job definition it submits.
Status Authorizer::CheckRolesNamed(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                                   const OperationAccess* access, const json& request, const json& carried,
                                   std::vector<AccessDecision>* audit) const {
  if (api != Api::kBatch && api != Api::kSageMaker) return Status::Ok();
  const bool definition_roles = access && !access->definition_roles.empty();
  const bool carries = access && !access->carries.member.empty();
  if (!definition_roles && !carries && RoleArnMembers(api, operation).empty()) return Status::Ok();
  auto dir = controller_.directory();
  if (dir->roles.empty()) return Status::Ok();  // before any role is collected: submits stay cheap
  std::vector<NamedRole> named = RolesNamed(api, operation, request, carried);
  if (definition_roles) {
    // The definition's own members, as registered: the roles its jobs will run as.
    const std::string ref = StringMember(request, access->definition_roles);
    std::string arn, spec;
    controller_.Read([&](const State& s) {
      if (const ty::JobDefinition* d = Controller::FindSubmittableDefinition(s, ref)) {
        arn = d->arn;
        spec = d->spec_json;
      }
      return 0;
    });
    json members = json::parse(spec, nullptr, false);
    if (members.is_object()) CollectRoles(Api::kBatch, "RegisterJobDefinition", members, "jobDefinition(" + arn + ")", &named);
  }
  const std::string& account = controller_.config().account_id;
  for (const NamedRole& n : named) {
    const std::string role = control::RoleNameOf(n.arn, account);
    auto entry = role.empty() ? dir->roles.end() : dir->roles.find(role);
    if (entry == dir->roles.end())
      return InvalidArgument("1 validation error detected: Value '" + n.arn.substr(0, 256) + "' at '" + n.field +
                             "' failed to satisfy constraint: Member must name a role of account " + account +
                             " (trainyard admin role list)");
    iam::Request r;
    r.action = "iam:PassRole";
    r.resource = entry->second->role.arn;
    SetCallerKeys(&r, caller, ctx);
    std::string denial;
    AccessDecision d = Decide(caller, r, &denial);
    if (audit) audit->push_back(d);
    if (!d.allowed) return Status(Code::kAccessDenied, denial + " (" + n.field + ")");
    TY_RETURN_IF_ERROR(control::CheckServiceTrust(*entry->second, n.service, ctx.now));
  }
  return Status::Ok();
}

Status Authorizer::CheckOperation(const Principal& caller, const CallContext& ctx, Api api, const std::string& operation,
                                  const OperationAccess* access, const json& request, const json& carried,
                                  std::vector<AccessDecision>* audit) const {
  if (caller.is_root() && !audit) return Status::Ok();  // nothing to evaluate, nothing to record
  const std::string action = std::string(ActionPrefix(api)) + ":" + operation;
  iam::Request base;
  base.action = action;
  SetCallerKeys(&base, caller, ctx);
  SetRequestKeys(&base, access, request, carried);
  const std::string account = controller_.config().account_id;
  const std::string region = controller_.config().region;
  if (!access) {
    base.resource = "*";
    if (caller.is_root()) return Status::Ok();
    return Status(Code::kAccessDenied, "User: " + caller.arn + " is not authorized to perform: " + action +
                                           " on resource: * because this server has no access rule for it");
  }
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

  // One resource of the call, as `kind` and the request member `field` name it.
  auto check_resource = [&](ResourceKind kind, std::string_view field) -> Status {
    const std::string name = StringMember(request, field);
    switch (kind) {
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
          if (kind == ResourceKind::kComputeEnvironment) {
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
      case ResourceKind::kJobDefinition:
      case ResourceKind::kSubmittedJobDefinition: {
        // A new registration is checked on job-definition/<name> (its revision is not drawn yet); a
        // revision, on its own ARN with its tags; SubmitJob's bare name, on its latest ACTIVE revision.
        Target t = controller_.Read([&](const State& s) {
          Target t;
          const ty::JobDefinition* d = kind == ResourceKind::kJobDefinition ? Controller::FindJobDefinition(s, name)
                                                                            : Controller::FindSubmittableDefinition(s, name);
          if (d) {
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
        auto it = request.find(field);
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
        auto it = request.find(field);
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
          if (kind == ResourceKind::kServiceEnvironment) {
            const ty::ServiceEnvironment* e = Controller::FindEnvironment(s, name);
            t.arn = e ? e->arn : StartsWith(name, "arn:") ? name : controller_.Arn("batch", "service-environment/" + name);
            if (e) t.own_tags = e->tags;
          } else if (kind == ResourceKind::kSchedulingPolicy) {
            t.arn = StartsWith(name, "arn:") ? name : controller_.Arn("batch", "scheduling-policy/" + name);
            if (const ty::SchedulingPolicy* p = Controller::FindPolicy(s, t.arn)) t.own_tags = p->tags;
          } else if (kind == ResourceKind::kQuotaShare) {
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
        const char* type = kind == ResourceKind::kEventRule         ? "rule/"
                           : kind == ResourceKind::kEventConnection ? "connection/"
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
  };
  TY_RETURN_IF_ERROR(check_resource(access->resource, access->field));
  if (access->also == ResourceKind::kNone) return Status::Ok();
  return check_resource(access->also, access->also_field);
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

Status Authorizer::CheckTrust(const Principal& caller, const CallContext& ctx, const control::RoleEntry& role,
                              const std::string& session_name) const {
  iam::Request r;
  r.action = "sts:AssumeRole";
  r.resource = role.role.arn;
  SetCallerKeys(&r, caller, ctx);
  r.Set("sts:RoleSessionName", session_name);
  r.principal_ids = {caller.arn, "arn:aws:iam::" + controller_.config().account_id + ":root"};
  if (caller.type == Principal::Type::kRoleSession && caller.entry) r.principal_ids.push_back(caller.entry->user.arn);
  if (control::TrustAdmits(role, r)) return Status::Ok();
  return Status(Code::kAccessDenied, "User: " + caller.arn + " is not authorized to perform: sts:AssumeRole on resource: " +
                                         role.role.arn + " because the role's trust policy (AssumeRolePolicyDocument) "
                                         "does not admit the caller");
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
        Target t = ItemTarget(s, *access, item, logs_prefix);
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
  if (!access->also_list_member.empty())
    if (auto also = reply->find(access->also_list_member); also != reply->end() && also->is_array()) filter(&*also);
}

// ---- CloudWatch ----

Status Authorizer::CheckCloudWatch(const Principal& caller, const CallContext& ctx, const std::string& action,
                                   const std::string& ns) const {
  if (caller.is_root()) return Status::Ok();
  iam::Request r;
  r.action = action;
  r.resource = "*";  // CloudWatch has no metric ARNs
  SetCallerKeys(&r, caller, ctx);
  if (!ns.empty()) r.Set("cloudwatch:namespace", ns);
  std::string denial;
  if (Decide(caller, r, &denial).allowed) return Status::Ok();
  return Status(Code::kAccessDenied, std::move(denial));
}

Status Authorizer::CheckMetricOwner(const Principal& caller, const CallContext& ctx, const State& s,
                                    const control::CwMetricOwner& owner) const {
  if (caller.is_root() || owner.kind == control::CwMetricOwner::kAccount) return Status::Ok();
  iam::Request r;
  SetCallerKeys(&r, caller, ctx);
  Target t;
  if (owner.kind == control::CwMetricOwner::kTrainingJob) {
    r.action = "sagemaker:DescribeTrainingJob";
    if (const TrainingJob* tj = s.FindTrainingJob(owner.name)) SetTrainingJob(&t, s, *tj);
    else t.arn = controller_.Arn("sagemaker", "training-job/" + ToLower(owner.name));
  } else {
    r.action = "batch:DescribeJobQueues";
    if (const ty::JobQueue* q = Controller::FindQueue(s, owner.name)) {
      t.arn = q->arn;
      t.tags = &q->tags;
    } else {
      t.arn = controller_.Arn("batch", "job-queue/" + owner.name);
    }
  }
  SetResourceKeys(&r, t);
  std::string denial;
  if (Decide(caller, r, &denial).allowed) return Status::Ok();
  return Status(Code::kAccessDenied, std::move(denial));
}

bool Authorizer::MayReadEvent(const std::string& owner, const obs::EventReadCheck& check) const {
  const std::string account = controller_.config().account_id;
  if (owner == "arn:aws:iam::" + account + ":root") return true;
  if (check.action.empty()) return false;
  if (!check.put_by.empty() && check.put_by == owner) return true;
  // The owner as a caller: a user, or a role's session (its role's policies; the session may have ended).
  Principal p;
  p.arn = owner;
  control::ResolvedPrincipal who = control::ResolvePrincipal(*controller_.directory(), account, owner);
  p.type = who.role_session ? Principal::Type::kRoleSession : Principal::Type::kUser;
  p.name = std::move(who.username);
  p.entry = std::move(who.entry);
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
