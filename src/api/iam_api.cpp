// trainyard's user administration (POST /trainyard/v1/admin/iam/<Operation>, JSON 1.1, signed as
// "sagemaker"): users, access keys, roles and managed policies in IAM's request and reply shapes
// (docs/security.md, "Users and keys", "Roles for jobs"). Shapes are checked here; the controller checks names
// against state in its turn.
#include <nlohmann/json.hpp>

#include "api/operations.h"
#include "control/controller.h"
#include "core/strings.h"
#include "iam/policy.h"

namespace ty::api {

using nlohmann::json;
using control::Controller;

namespace {

double Seconds(EpochMs ms) { return static_cast<double>(ms) / 1000.0; }

// IAM's names: 1..max of letters, digits and +=,.@_-
Status CheckName(const json& req, const char* field, size_t max, bool required = true) {
  auto it = req.find(field);
  if (it == req.end() || it->is_null()) {
    if (!required) return Status::Ok();
    return InvalidArgument(std::string("1 validation error detected: Value null at '") + field +
                           "' failed to satisfy constraint: Member must not be null");
  }
  if (!it->is_string()) return InvalidArgument(std::string(field) + " must be a string");
  const std::string& s = it->get_ref<const std::string&>();
  bool ok = !s.empty() && s.size() <= max;
  for (char c : s)
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || std::string_view("+=,.@_-").find(c) != std::string_view::npos);
  if (!ok)
    return InvalidArgument(std::string("1 validation error detected: Value at '") + field +
                           "' failed to satisfy constraint: Member must have length between 1 and " + std::to_string(max) +
                           " and match pattern [\\w+=,.@-]+");
  return Status::Ok();
}

std::string Str(const json& req, const char* field) {
  auto it = req.find(field);
  return it != req.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Tags: [{"Key", "Value"}], at most 50; keys 1..128 and values 0..256 characters.
StatusOr<Tags> DecodeTags(const json& req, const char* field) {
  Tags out;
  auto it = req.find(field);
  if (it == req.end() || it->is_null()) return out;
  if (!it->is_array() || it->size() > 50) return InvalidArgument(std::string(field) + " must be a list of at most 50 {Key, Value} tags");
  for (const auto& t : *it) {
    if (!t.is_object() || !t.contains("Key") || !t["Key"].is_string() || (t.contains("Value") && !t["Value"].is_string()))
      return InvalidArgument(std::string(field) + " must be a list of {\"Key\": string, \"Value\": string}");
    std::string k = t["Key"], v = t.value("Value", "");
    if (k.empty() || k.size() > 128 || v.size() > 256)
      return InvalidArgument(std::string(field) + ": a tag key has 1 to 128 characters and a value at most 256");
    out[k] = v;
  }
  return out;
}

json EncodeTags(const Tags& tags) {
  json out = json::array();
  for (const auto& [k, v] : tags) out.push_back({{"Key", k}, {"Value", v}});
  return out;
}

json EncodeUser(const control::IamUser& u) {
  json attached = json::array();
  for (const auto& p : u.policies) attached.push_back(p);
  return {{"UserName", u.name}, {"UserId", u.user_id}, {"Arn", u.arn}, {"Path", "/"},
          {"CreateDate", Seconds(u.created)}, {"Tags", EncodeTags(u.tags)}, {"AttachedPolicies", attached}};
}

// A role stored before roles had trust policies has the default one (DefaultTrustPolicy).
json EncodeRole(const control::IamRole& r, const std::string& account_id) {
  json attached = json::array();
  for (const auto& p : r.policies) attached.push_back(p);
  json j = {{"RoleName", r.name}, {"RoleId", r.role_id}, {"Arn", r.arn}, {"Path", "/"},
            {"CreateDate", Seconds(r.created)}, {"AttachedPolicies", attached},
            {"AssumeRolePolicyDocument", r.assume_role_policy_document.empty()
                                             ? control::DefaultTrustPolicy(account_id)
                                             : r.assume_role_policy_document}};
  if (!r.description.empty()) j["Description"] = r.description;
  return j;
}

// Never the secret: it is shown once, by CreateAccessKey.
json EncodeKeyMetadata(const control::IamAccessKey& k) {
  return {{"UserName", k.user}, {"AccessKeyId", k.id}, {"Status", "Active"}, {"CreateDate", Seconds(k.created)}};
}

json EncodePolicy(const control::IamPolicy& p, size_t attachments, bool with_document) {
  json j = {{"PolicyName", p.name}, {"Arn", p.arn}, {"Path", "/"}, {"DefaultVersionId", "v1"},
            {"AttachmentCount", attachments}, {"IsAttachable", true}, {"CreateDate", Seconds(p.created)},
            {"UpdateDate", Seconds(p.created)}};
  if (!p.description.empty()) j["Description"] = p.description;
  if (with_document) j["PolicyDocument"] = p.document;
  return j;
}

// A document checked whole at the edge (the controller stores only documents that parse):
// MalformedPolicyDocument naming the field and the rule, or LimitExceeded.
Status CheckDocument(const StatusOr<iam::Policy>& parsed) {
  if (parsed.ok()) return Status::Ok();
  if (parsed.status().code() == Code::kLimitExceeded)
    return LimitExceeded("MalformedPolicyDocument: " + parsed.status().message());
  return InvalidArgument("MalformedPolicyDocument: " + parsed.status().message());
}

// PolicyArn or PolicyName, whichever is given.
StatusOr<std::string> PolicyRef(const json& req) {
  std::string arn = Str(req, "PolicyArn");
  if (!arn.empty()) return arn;
  TY_RETURN_IF_ERROR(CheckName(req, "PolicyName", 128));
  return Str(req, "PolicyName");
}

Response Empty(const Status& st) {
  if (!st.ok()) return st;
  return json::object();
}

Response CreateUser(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckName(req, "UserName", 64));
  auto tags = DecodeTags(req, "Tags");
  if (!tags.ok()) return tags.status();
  control::CreateUserCommand cmd{Str(req, "UserName"), *tags, "AIDA" + RandomAlnum(17, true)};
  auto u = c.CreateUser(cmd);
  if (!u.ok()) return u.status();
  return json{{"User", EncodeUser(*u)}};
}

Response DeleteUser(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckName(req, "UserName", 64));
  return Empty(c.DeleteUser(Str(req, "UserName")));
}

// TagUser (tag true) and UntagUser.
Response TagUser(Controller& c, const json& req, bool tag) {
  TY_RETURN_IF_ERROR(CheckName(req, "UserName", 64));
  control::TagUserCommand cmd;
  cmd.name = Str(req, "UserName");
  if (tag) {
    auto tags = DecodeTags(req, "Tags");
    if (!tags.ok()) return tags.status();
    if (tags->empty()) return InvalidArgument("Tags must name at least one tag");
    cmd.tags = *tags;
  } else {
    auto keys = req.find("TagKeys");
    if (keys == req.end() || !keys->is_array() || keys->empty() || keys->size() > 50)
      return InvalidArgument("TagKeys must be a list of 1 to 50 tag keys");
    for (const auto& k : *keys) {
      if (!k.is_string()) return InvalidArgument("TagKeys must be a list of strings");
      cmd.remove.push_back(k);
    }
  }
  auto u = c.TagUser(cmd);
  if (!u.ok()) return u.status();
  return json{{"User", EncodeUser(*u)}};
}

Response ListUsers(Controller& c, const json&) {
  auto dir = c.directory();
  json users = json::array();
  for (const auto& [name, entry] : dir->users) users.push_back(EncodeUser(entry->user));
  return json{{"Users", users}, {"IsTruncated", false}};
}

Response CreateAccessKey(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckName(req, "UserName", 64));
  // 16 characters of A-Z0-9 after AKIA, 40 of a-zA-Z0-9: the OS's CSPRNG (RandomAlnum).
  control::CreateAccessKeyCommand cmd{Str(req, "UserName"), "AKIA" + RandomAlnum(16, true), RandomAlnum(40, false)};
  auto k = c.CreateAccessKey(cmd);
  if (!k.ok()) return k.status();
  json key = EncodeKeyMetadata(*k);
  key["SecretAccessKey"] = k->secret;
  return json{{"AccessKey", key}};
}

Response ListAccessKeys(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckName(req, "UserName", 64, /*required=*/false));
  const std::string user = Str(req, "UserName");
  return c.Read([&](const control::State& s) -> Response {
    if (!user.empty() && !s.principals.users.count(user))
      return NotFound("The user with name " + user + " cannot be found.");
    json keys = json::array();
    for (const auto& [id, k] : s.principals.keys)
      if (user.empty() || k.user == user) keys.push_back(EncodeKeyMetadata(k));
    return json{{"AccessKeyMetadata", keys}, {"IsTruncated", false}};
  });
}

Response DeleteAccessKey(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckName(req, "UserName", 64, /*required=*/false));
  std::string id = Str(req, "AccessKeyId");
  if (id.size() < 16 || id.size() > 128) return InvalidArgument("AccessKeyId must have length between 16 and 128");
  return Empty(c.DeleteAccessKey(Str(req, "UserName"), id));
}

Response CreatePolicy(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckName(req, "PolicyName", 128));
  std::string doc = Str(req, "PolicyDocument");
  if (doc.empty()) return InvalidArgument("PolicyDocument is required and must be a string holding the policy's JSON");
  std::string description = Str(req, "Description");
  if (description.size() > 1000) return InvalidArgument("Description must have at most 1000 characters");
  TY_RETURN_IF_ERROR(CheckDocument(iam::ParsePolicy(doc, Str(req, "PolicyName"))));
  auto p = c.CreatePolicy({Str(req, "PolicyName"), doc, description});
  if (!p.ok()) return p.status();
  return json{{"Policy", EncodePolicy(*p, 0, false)}};
}

// GetPolicy (one true) and ListPolicies.
Response GetPolicies(Controller& c, const json& req, bool one) {
  std::string name;
  if (one) {
    auto ref = PolicyRef(req);
    if (!ref.ok()) return ref.status();
    name = *ref;
    if (StartsWith(name, "arn:")) name = name.substr(name.rfind('/') + 1);
  }
  return c.Read([&](const control::State& s) -> Response {
    auto attachments = [&](const std::string& policy) {
      size_t n = 0;
      for (const auto& [u, user] : s.principals.users)
        n += std::count(user.policies.begin(), user.policies.end(), policy);
      for (const auto& [r, role] : s.principals.roles)
        n += std::count(role.policies.begin(), role.policies.end(), policy);
      return n;
    };
    if (one) {
      auto it = s.principals.policies.find(name);
      if (it == s.principals.policies.end()) return NotFound("Policy " + name + " was not found.");
      return json{{"Policy", EncodePolicy(it->second, attachments(name), true)}};
    }
    json list = json::array();
    for (const auto& [n, p] : s.principals.policies) list.push_back(EncodePolicy(p, attachments(n), false));
    return json{{"Policies", list}, {"IsTruncated", false}};
  });
}

Response DeletePolicy(Controller& c, const json& req) {
  auto ref = PolicyRef(req);
  if (!ref.ok()) return ref.status();
  return Empty(c.DeletePolicy(*ref));
}

// AttachUserPolicy (attach true) and DetachUserPolicy.
Response AttachUserPolicy(Controller& c, const json& req, bool attach) {
  TY_RETURN_IF_ERROR(CheckName(req, "UserName", 64));
  auto ref = PolicyRef(req);
  if (!ref.ok()) return ref.status();
  auto u = c.AttachPolicy({Str(req, "UserName"), *ref, attach});
  if (!u.ok()) return u.status();
  return json::object();
}

Response CreateRole(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckName(req, "RoleName", 64));
  std::string description = Str(req, "Description");
  if (description.size() > 1000) return InvalidArgument("Description must have at most 1000 characters");
  // AssumeRolePolicyDocument is optional here (IAM requires it): without one the role gets
  // DefaultTrustPolicy(), what every role admitted before roles had trust policies.
  if (req.contains("AssumeRolePolicyDocument") && !req["AssumeRolePolicyDocument"].is_string())
    return InvalidArgument("AssumeRolePolicyDocument must be a string holding the trust policy's JSON");
  const std::string trust = Str(req, "AssumeRolePolicyDocument");
  if (!trust.empty()) TY_RETURN_IF_ERROR(CheckDocument(iam::ParseTrustPolicy(trust, Str(req, "RoleName"))));
  auto r = c.CreateRole({Str(req, "RoleName"), description, "AROA" + RandomAlnum(17, true), trust});
  if (!r.ok()) return r.status();
  return json{{"Role", EncodeRole(*r, c.config().account_id)}};
}

Response UpdateAssumeRolePolicy(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckName(req, "RoleName", 64));
  const std::string trust = Str(req, "PolicyDocument");
  if (trust.empty()) return InvalidArgument("PolicyDocument is required and must be a string holding the trust policy's JSON");
  TY_RETURN_IF_ERROR(CheckDocument(iam::ParseTrustPolicy(trust, Str(req, "RoleName"))));
  auto r = c.UpdateAssumeRolePolicy({Str(req, "RoleName"), trust});
  if (!r.ok()) return r.status();
  return json::object();
}

Response GetRole(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckName(req, "RoleName", 64));
  auto dir = c.directory();
  auto it = dir->roles.find(Str(req, "RoleName"));
  if (it == dir->roles.end()) return NotFound("The role with name " + Str(req, "RoleName") + " cannot be found.");
  return json{{"Role", EncodeRole(it->second->role, c.config().account_id)}};
}

Response ListRoles(Controller& c, const json&) {
  auto dir = c.directory();
  json roles = json::array();
  for (const auto& [name, entry] : dir->roles) roles.push_back(EncodeRole(entry->role, c.config().account_id));
  return json{{"Roles", roles}, {"IsTruncated", false}};
}

Response DeleteRole(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckName(req, "RoleName", 64));
  return Empty(c.DeleteRole(Str(req, "RoleName")));
}

// AttachRolePolicy (attach true) and DetachRolePolicy.
Response AttachRolePolicy(Controller& c, const json& req, bool attach) {
  TY_RETURN_IF_ERROR(CheckName(req, "RoleName", 64));
  auto ref = PolicyRef(req);
  if (!ref.ok()) return ref.status();
  auto r = c.AttachRolePolicy({Str(req, "RoleName"), *ref, attach});
  if (!r.ok()) return r.status();
  return json::object();
}

const OperationAccess kUser{.resource = ResourceKind::kUser, .field = "UserName"};
const OperationAccess kPolicyNamed{.resource = ResourceKind::kPolicy, .field = "PolicyName"};
const OperationAccess kRoleNamed{.resource = ResourceKind::kRole, .field = "RoleName"};
const std::vector<AuditMember> kUserAudit = {{"UserName", "AWS::IAM::User"}};
const std::vector<AuditMember> kPolicyAudit = {{"PolicyName", "AWS::IAM::Policy"}, {"PolicyArn", "AWS::IAM::Policy"}};
const std::vector<AuditMember> kRoleAudit = {{"RoleName", "AWS::IAM::Role"}};
const std::vector<AuditMember> kUserPolicyAudit = {{"UserName", "AWS::IAM::User"}, {"PolicyArn", "AWS::IAM::Policy"},
                                                   {"PolicyName", "AWS::IAM::Policy"}};
const std::vector<AuditMember> kRolePolicyAudit = {{"RoleName", "AWS::IAM::Role"}, {"PolicyArn", "AWS::IAM::Policy"},
                                                   {"PolicyName", "AWS::IAM::Policy"}};

OperationTable IamAdminTable() {
  return OperationTable(Api::kTrainyard, "sagemaker", nullptr, {
      {.name = "CreateUser", .handle = Plain<CreateUser>, .access = kUser, .audit = kUserAudit},
      {.name = "DeleteUser", .handle = Plain<DeleteUser>, .access = kUser, .audit = kUserAudit},
      {.name = "TagUser", .handle = [](const OperationCall& x) { return TagUser(x.controller, x.request, true); },
       .access = kUser, .audit = kUserAudit},
      {.name = "UntagUser", .handle = [](const OperationCall& x) { return TagUser(x.controller, x.request, false); },
       .access = kUser, .audit = kUserAudit},
      {.name = "ListUsers", .handle = Plain<ListUsers>},
      {.name = "CreateAccessKey", .handle = Plain<CreateAccessKey>, .access = kUser, .audit = kUserAudit},
      {.name = "DeleteAccessKey", .handle = Plain<DeleteAccessKey>, .access = kUser,
       .audit = {{"UserName", "AWS::IAM::User"}, {"AccessKeyId", "AWS::IAM::AccessKey"}}},
      {.name = "ListAccessKeys", .handle = Plain<ListAccessKeys>, .access = kUser, .audit = kUserAudit},
      {.name = "CreatePolicy", .handle = Plain<CreatePolicy>, .access = kPolicyNamed, .audit = kPolicyAudit},
      {.name = "GetPolicy", .handle = [](const OperationCall& x) { return GetPolicies(x.controller, x.request, true); },
       .access = kPolicyNamed, .audit = kPolicyAudit},
      {.name = "DeletePolicy", .handle = Plain<DeletePolicy>, .access = kPolicyNamed, .audit = kPolicyAudit},
      {.name = "ListPolicies",
       .handle = [](const OperationCall& x) { return GetPolicies(x.controller, x.request, false); }},
      {.name = "AttachUserPolicy",
       .handle = [](const OperationCall& x) { return AttachUserPolicy(x.controller, x.request, true); },
       .access = kUser, .audit = kUserPolicyAudit},
      {.name = "DetachUserPolicy",
       .handle = [](const OperationCall& x) { return AttachUserPolicy(x.controller, x.request, false); },
       .access = kUser, .audit = kUserPolicyAudit},
      {.name = "CreateRole", .handle = Plain<CreateRole>, .access = kRoleNamed, .audit = kRoleAudit},
      {.name = "GetRole", .handle = Plain<GetRole>, .access = kRoleNamed, .audit = kRoleAudit},
      {.name = "UpdateAssumeRolePolicy", .handle = Plain<UpdateAssumeRolePolicy>, .access = kRoleNamed,
       .audit = kRoleAudit},
      {.name = "DeleteRole", .handle = Plain<DeleteRole>, .access = kRoleNamed, .audit = kRoleAudit},
      {.name = "ListRoles", .handle = Plain<ListRoles>},
      {.name = "AttachRolePolicy",
       .handle = [](const OperationCall& x) { return AttachRolePolicy(x.controller, x.request, true); },
       .access = kRoleNamed, .audit = kRolePolicyAudit},
      {.name = "DetachRolePolicy",
       .handle = [](const OperationCall& x) { return AttachRolePolicy(x.controller, x.request, false); },
       .access = kRoleNamed, .audit = kRolePolicyAudit},
  });
}

}  // namespace

const OperationTable& IamAdminOperations() {
  static const OperationTable kTable = IamAdminTable();
  return kTable;
}

}  // namespace ty::api
