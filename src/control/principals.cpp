// Users, access keys, roles and managed policies: their commands, store documents and the directory the
// request path reads (principals.h).
#include "control/principals.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "control/controller.h"
#include "control/turn.h"
#include "core/strings.h"

namespace ty::control {

using nlohmann::json;

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(IamUser, name, arn, user_id, created, tags, policies)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(IamAccessKey, id, secret, user, created)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(IamPolicy, name, arn, document, description, created)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(IamRole, name, arn, role_id, description, created, policies,
                                                assume_role_policy_document)

namespace {

template <typename T>
bool Decode(const std::string& doc, T* v) {
  json j = json::parse(doc, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  try {
    *v = j.get<T>();
  } catch (const json::exception&) {
    return false;
  }
  return true;
}

constexpr const char* kPrefix = "iam/";

// The account of an IAM ARN (arn:aws:iam::ACCOUNT:...).
std::string AccountOf(const std::string& arn) {
  if (!StartsWith(arn, "arn:aws:iam::")) return "";
  return arn.substr(13, arn.find(':', 13) - 13);
}

}  // namespace

std::string PrincipalStoreKey(const std::string& kind, const std::string& name) { return kPrefix + kind + "/" + name; }
std::string EncodeDoc(const IamUser& v) { return json(v).dump(); }
std::string EncodeDoc(const IamAccessKey& v) { return json(v).dump(); }
std::string EncodeDoc(const IamPolicy& v) { return json(v).dump(); }
std::string EncodeDoc(const IamRole& v) { return json(v).dump(); }
bool DecodeDoc(const std::string& doc, IamUser* v) { return Decode(doc, v); }
bool DecodeDoc(const std::string& doc, IamAccessKey* v) { return Decode(doc, v); }
bool DecodeDoc(const std::string& doc, IamPolicy* v) { return Decode(doc, v); }
bool DecodeDoc(const std::string& doc, IamRole* v) { return Decode(doc, v); }

std::string RoleNameOf(const std::string& arn, const std::string& account_id) {
  const std::string prefix = "arn:aws:iam::" + account_id + ":role/";
  if (!StartsWith(arn, prefix) || arn.size() == prefix.size() || arn.back() == '/') return "";
  return arn.substr(arn.rfind('/') + 1);
}

iam::PrincipalKeys PrincipalKeysOf(const PrincipalEntry* entry, const std::string& arn, const std::string& username) {
  iam::PrincipalKeys k;
  k.arn = arn;
  k.principal_arn = entry ? entry->user.arn : arn;
  k.username = username;
  if (entry) {
    k.user_id = entry->user.user_id;
    k.tags = entry->user.tags;
  }
  return k;
}

ResolvedPrincipal ResolvePrincipal(const PrincipalDirectory& dir, const std::string& account_id,
                                   const std::string& arn) {
  ResolvedPrincipal p;
  const std::string user_prefix = "arn:aws:iam::" + account_id + ":user/";
  const std::string session_prefix = "arn:aws:sts::" + account_id + ":assumed-role/";
  if (StartsWith(arn, user_prefix)) {
    p.username = arn.substr(arn.rfind('/') + 1);
    if (auto it = dir.users.find(p.username); it != dir.users.end()) p.entry = it->second;
  } else if (StartsWith(arn, session_prefix)) {
    // A role session (a job, or an STS caller) acts with its role's policies.
    p.role_session = true;
    const std::string rest = arn.substr(session_prefix.size());
    if (auto it = dir.roles.find(rest.substr(0, rest.find('/'))); it != dir.roles.end()) p.entry = it->second->as_caller;
  }
  return p;
}

JobPrincipal JobPrincipalOf(const PrincipalDirectory& dir, const std::string& account_id, const std::string& owner,
                            const std::string& role_arn, const std::string& job_name) {
  JobPrincipal p;
  if (owner.empty() || owner == "arn:aws:iam::" + account_id + ":root") {
    p.unrestricted = true;
    return p;
  }
  if (const std::string role = RoleNameOf(role_arn, account_id); !role.empty())
    if (auto it = dir.roles.find(role); it != dir.roles.end()) {
      p.role_session = true;
      p.arn = "arn:aws:sts::" + account_id + ":assumed-role/" + role + "/" + job_name;
      p.entry = it->second->as_caller;
      return p;
    }
  p.arn = owner;
  ResolvedPrincipal who = ResolvePrincipal(dir, account_id, owner);
  p.username = std::move(who.username);
  p.role_session = who.role_session;
  p.entry = std::move(who.entry);
  return p;
}

std::string DefaultTrustPolicy(const std::string& account_id) {
  return json{{"Version", "2012-10-17"},
              {"Statement",
               json::array({{{"Sid", "DefaultTrust"},
                             {"Effect", "Allow"},
                             {"Principal",
                              {{"AWS", "arn:aws:iam::" + account_id + ":root"},
                               {"Service", json::array({kSageMakerPrincipal, kEcsTasksPrincipal})}}},
                             {"Action", "sts:AssumeRole"}}})}}
      .dump();
}

bool TrustAdmits(const RoleEntry& role, const iam::Request& r) {
  const iam::Policy* trust = role.trust.get();
  return iam::Evaluate(r, std::span<const iam::Policy* const>(&trust, 1)).allowed();
}

Status CheckServiceTrust(const RoleEntry& role, std::string_view service, EpochMs now) {
  iam::Request r;
  r.principal = std::string(service);
  r.action = "sts:AssumeRole";
  r.resource = role.role.arn;
  r.principal_ids = {"service:" + std::string(service)};
  r.Set("aws:CurrentTime", FormatIso8601(now));
  r.Set("aws:EpochTime", std::to_string(now / 1000));
  if (TrustAdmits(role, r)) return Status::Ok();
  return InvalidArgument("Could not assume role " + role.role.arn + ". Please ensure that the role exists and its trust "
                         "policy (AssumeRolePolicyDocument) allows principal '" + std::string(service) +
                         "' to assume the role.");
}

Status MayRunAsRole(const PrincipalDirectory& dir, const std::string& account_id, const std::string& owner,
                    const std::string& role_arn, std::string_view service, EpochMs now) {
  const std::string role = RoleNameOf(role_arn, account_id);
  auto entry = role.empty() ? dir.roles.end() : dir.roles.find(role);
  if (entry == dir.roles.end()) return Status::Ok();
  const std::string root = "arn:aws:iam::" + account_id + ":root";
  if (!owner.empty() && owner != root) {
    iam::Request r;
    r.action = "iam:PassRole";
    r.resource = entry->second->role.arn;
    r.Set("aws:CurrentTime", FormatIso8601(now));
    r.Set("aws:EpochTime", std::to_string(now / 1000));
    const ResolvedPrincipal caller = ResolvePrincipal(dir, account_id, owner);
    iam::SetPrincipalKeys(&r, PrincipalKeysOf(caller.entry.get(), owner, caller.username));
    static const std::vector<const iam::Policy*> kNone;
    iam::Decision d = iam::Evaluate(r, caller.entry ? caller.entry->policies : kNone);
    if (!d.allowed()) return Status(Code::kAccessDenied, iam::DenialMessage(r, d));
  }
  return CheckServiceTrust(*entry->second, service, now);
}

std::shared_ptr<const PrincipalDirectory> BuildDirectory(const Principals& p) {
  auto dir = std::make_shared<PrincipalDirectory>();
  std::map<std::string, std::shared_ptr<const iam::Policy>> parsed;
  for (const auto& [name, policy] : p.policies) {
    auto doc = iam::ParsePolicy(policy.document, policy.name);
    if (!doc.ok()) {
      spdlog::warn("policy {} no longer parses and allows nothing: {}", name, doc.status().message());
      continue;
    }
    parsed[name] = std::make_shared<const iam::Policy>(std::move(*doc));
  }
  for (const auto& [name, user] : p.users) {
    auto entry = std::make_shared<PrincipalEntry>();
    entry->user = user;
    for (const auto& policy : user.policies)
      if (auto it = parsed.find(policy); it != parsed.end()) {
        entry->owned.push_back(it->second);
        entry->policies.push_back(it->second.get());
        entry->documents.push_back(p.policies.at(policy).document);
      }
    dir->users[name] = std::move(entry);
  }
  for (const auto& [id, key] : p.keys)
    if (auto it = dir->users.find(key.user); it != dir->users.end()) dir->keys[id] = {key.secret, it->second};
  for (const auto& [name, role] : p.roles) {
    auto entry = std::make_shared<RoleEntry>();
    entry->role = role;
    const std::string& document = role.assume_role_policy_document;
    auto trust = iam::ParseTrustPolicy(document.empty() ? DefaultTrustPolicy(AccountOf(role.arn)) : document,
                                       role.arn);
    if (!trust.ok()) {
      spdlog::warn("trust policy of role {} no longer parses and admits nobody: {}", name, trust.status().message());
      trust = iam::Policy{role.arn, "2012-10-17", "", {}};
    }
    entry->trust = std::make_shared<const iam::Policy>(std::move(*trust));
    for (const auto& policy : role.policies)
      if (auto it = parsed.find(policy); it != parsed.end()) {
        entry->owned.push_back(it->second);
        entry->policies.push_back(it->second.get());
      }
    auto caller = std::make_shared<PrincipalEntry>();
    caller->user.name = role.name;
    caller->user.arn = role.arn;
    caller->user.user_id = role.role_id;
    caller->owned = entry->owned;
    caller->policies = entry->policies;
    for (const auto& policy : role.policies)
      if (parsed.count(policy)) caller->documents.push_back(p.policies.at(policy).document);
    entry->as_caller = std::move(caller);
    dir->roles[name] = std::move(entry);
  }
  return dir;
}

// ---- the controller's side ----

std::shared_ptr<const PrincipalDirectory> Controller::directory() const {
  MutexLock lock(directory_mu_);
  return directory_;
}

void Controller::PublishDirectory() {
  std::shared_ptr<const PrincipalDirectory> dir;
  {
    ReaderLock lock(state_mu_);
    dir = BuildDirectory(state_.principals);
  }
  MutexLock lock(directory_mu_);
  directory_ = std::move(dir);
}

void Controller::LoadPrincipals(State& s) {
  Status st = store_->LoadAll(store::Kind::kMeta, [&](const std::string& key, const std::string& doc) {
    if (StartsWith(key, "iam/user/")) {
      IamUser u;
      if (DecodeDoc(doc, &u)) s.principals.users[u.name] = std::move(u);
    } else if (StartsWith(key, "iam/key/")) {
      IamAccessKey k;
      if (DecodeDoc(doc, &k)) s.principals.keys[k.id] = std::move(k);
    } else if (StartsWith(key, "iam/policy/")) {
      IamPolicy p;
      if (DecodeDoc(doc, &p)) s.principals.policies[p.name] = std::move(p);
    } else if (StartsWith(key, "iam/role/")) {
      IamRole r;
      if (DecodeDoc(doc, &r)) s.principals.roles[r.name] = std::move(r);
    }
  });
  if (!st.ok()) {
    spdlog::critical("cannot load users and keys: {}", st.message());
    std::abort();
  }
  auto dir = BuildDirectory(s.principals);
  MutexLock lock(directory_mu_);
  directory_ = std::move(dir);
}

void Controller::WritePrincipals(const Turn& t, std::vector<store::Write>* writes) {
  const Principals& p = state_.principals;
  for (const std::string& key : t.principals) {
    std::string doc;
    if (StartsWith(key, "iam/user/")) {
      if (auto it = p.users.find(key.substr(9)); it != p.users.end()) doc = EncodeDoc(it->second);
    } else if (StartsWith(key, "iam/key/")) {
      if (auto it = p.keys.find(key.substr(8)); it != p.keys.end()) doc = EncodeDoc(it->second);
    } else if (StartsWith(key, "iam/policy/")) {
      if (auto it = p.policies.find(key.substr(11)); it != p.policies.end()) doc = EncodeDoc(it->second);
    } else if (StartsWith(key, "iam/role/")) {
      if (auto it = p.roles.find(key.substr(9)); it != p.roles.end()) doc = EncodeDoc(it->second);
    }
    writes->push_back({store::Kind::kMeta, key, std::move(doc)});  // empty: deleted
  }
}

namespace {
Status NoSuchUser(const std::string& name) { return NotFound("The user with name " + name + " cannot be found."); }
}  // namespace

StatusOr<IamUser> Controller::CreateUser(const CreateUserCommand& cmd) {
  return Execute<IamUser>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<IamUser> {
    Principals& p = state_.principals;
    if (p.users.count(cmd.name)) return AlreadyExists("User with name " + cmd.name + " already exists.");
    IamUser u;
    u.name = cmd.name;
    u.arn = "arn:aws:iam::" + config_.account_id + ":user/" + cmd.name;
    u.user_id = cmd.user_id;
    u.created = t.now;
    u.tags = cmd.tags;
    p.users[u.name] = u;
    t.principals.insert(PrincipalStoreKey("user", u.name));
    return u;
  });
}

Status Controller::DeleteUser(const std::string& name) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    Principals& p = state_.principals;
    auto it = p.users.find(name);
    if (it == p.users.end()) return NoSuchUser(name);
    for (const auto& [id, key] : p.keys)
      if (key.user == name)
        return FailedPrecondition("Cannot delete entity, must delete access keys first (user " + name + " holds " + id + ")");
    if (!it->second.policies.empty())
      return FailedPrecondition("Cannot delete entity, must detach all policies first (user " + name + " has " +
                                it->second.policies.front() + ")");
    p.users.erase(it);
    t.principals.insert(PrincipalStoreKey("user", name));
    return Status::Ok();
  });
}

StatusOr<IamUser> Controller::TagUser(const TagUserCommand& cmd) {
  return Execute<IamUser>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<IamUser> {
    auto it = state_.principals.users.find(cmd.name);
    if (it == state_.principals.users.end()) return NoSuchUser(cmd.name);
    Tags tags = it->second.tags;
    for (const auto& k : cmd.remove) tags.erase(k);
    for (const auto& [k, v] : cmd.tags) tags[k] = v;
    if (tags.size() > 50) return LimitExceeded("A user may have at most 50 tags (" + cmd.name + " would have " + std::to_string(tags.size()) + ")");
    it->second.tags = std::move(tags);
    t.principals.insert(PrincipalStoreKey("user", cmd.name));
    return it->second;
  });
}

StatusOr<IamAccessKey> Controller::CreateAccessKey(const CreateAccessKeyCommand& cmd) {
  return Execute<IamAccessKey>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<IamAccessKey> {
    Principals& p = state_.principals;
    if (!p.users.count(cmd.user)) return NoSuchUser(cmd.user);
    size_t held = 0;
    for (const auto& [id, key] : p.keys) held += key.user == cmd.user;
    if (held >= kMaxAccessKeysPerUser)
      return LimitExceeded("Cannot exceed quota for AccessKeysPerUser: " + std::to_string(kMaxAccessKeysPerUser));
    // 80 random bits: a clash means the generator is broken, not bad luck.
    if (p.keys.count(cmd.id)) return Internal("access key id clash");
    IamAccessKey k{cmd.id, cmd.secret, cmd.user, t.now};
    p.keys[k.id] = k;
    t.principals.insert(PrincipalStoreKey("key", k.id));
    return k;
  });
}

Status Controller::DeleteAccessKey(const std::string& user, const std::string& id) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    Principals& p = state_.principals;
    auto it = p.keys.find(id);
    if (it == p.keys.end() || (!user.empty() && it->second.user != user))
      return NotFound("The Access Key with id " + id + " cannot be found" + (user.empty() ? "" : " for user " + user) + ".");
    p.keys.erase(it);
    t.principals.insert(PrincipalStoreKey("key", id));
    return Status::Ok();
  });
}

StatusOr<IamPolicy> Controller::CreatePolicy(const CreatePolicyCommand& cmd) {
  return Execute<IamPolicy>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<IamPolicy> {
    Principals& p = state_.principals;
    if (p.policies.count(cmd.name))
      return AlreadyExists("A policy called " + cmd.name + " already exists. Duplicate names are not allowed.");
    if (p.policies.size() >= 1500) return LimitExceeded("Cannot exceed quota for PoliciesPerAccount: 1500");
    IamPolicy pol{cmd.name, "arn:aws:iam::" + config_.account_id + ":policy/" + cmd.name, cmd.document, cmd.description, t.now};
    p.policies[pol.name] = pol;
    t.principals.insert(PrincipalStoreKey("policy", pol.name));
    return pol;
  });
}

namespace {
// A policy given by name or by its ARN.
std::string PolicyName(const std::string& name_or_arn) {
  if (!StartsWith(name_or_arn, "arn:")) return name_or_arn;
  auto slash = name_or_arn.find(":policy/");
  return slash == std::string::npos ? name_or_arn : name_or_arn.substr(slash + 8);
}
}  // namespace

Status Controller::DeletePolicy(const std::string& name_or_arn) {
  const std::string name = PolicyName(name_or_arn);
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    Principals& p = state_.principals;
    auto it = p.policies.find(name);
    if (it == p.policies.end()) return NotFound("Policy " + name_or_arn + " was not found.");
    for (const auto& [user_name, user] : p.users)
      if (std::find(user.policies.begin(), user.policies.end(), name) != user.policies.end())
        return FailedPrecondition("Cannot delete a policy attached to entities (policy " + name + " is attached to user " +
                                  user_name + ")");
    for (const auto& [role_name, role] : p.roles)
      if (std::find(role.policies.begin(), role.policies.end(), name) != role.policies.end())
        return FailedPrecondition("Cannot delete a policy attached to entities (policy " + name + " is attached to role " +
                                  role_name + ")");
    p.policies.erase(it);
    t.principals.insert(PrincipalStoreKey("policy", name));
    return Status::Ok();
  });
}

// Attaches (or detaches) policy `name` to a user's or role's list. Attaching twice is a no-op, as in
// IAM; detaching one not attached is NotFound.
static Status AttachOrDetach(std::vector<std::string>& attached, const std::string& name, bool attach, size_t limit,
                             std::string_view kind, const std::string& owner) {
  auto at = std::find(attached.begin(), attached.end(), name);
  if (attach) {
    if (at != attached.end()) return Status::Ok();
    if (attached.size() >= limit) {
      std::string quota = kind == "user" ? "PoliciesPerUser" : "PoliciesPerRole";
      return LimitExceeded("Cannot exceed quota for " + quota + ": " + std::to_string(limit));
    }
    attached.push_back(name);
  } else {
    if (at == attached.end())
      return NotFound("Policy " + name + " is not attached to " + std::string(kind) + " " + owner + ".");
    attached.erase(at);
  }
  return Status::Ok();
}

StatusOr<IamUser> Controller::AttachPolicy(const AttachPolicyCommand& cmd) {
  const std::string name = PolicyName(cmd.policy);
  return Execute<IamUser>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<IamUser> {
    Principals& p = state_.principals;
    auto user = p.users.find(cmd.user);
    if (user == p.users.end()) return NoSuchUser(cmd.user);
    if (!p.policies.count(name)) return NotFound("Policy " + cmd.policy + " does not exist or is not attachable.");
    TY_RETURN_IF_ERROR(AttachOrDetach(user->second.policies, name, cmd.attach, kMaxPoliciesPerUser, "user", cmd.user));
    t.principals.insert(PrincipalStoreKey("user", cmd.user));
    return user->second;
  });
}

namespace {
Status NoSuchRole(const std::string& name) { return NotFound("The role with name " + name + " cannot be found."); }
}  // namespace

StatusOr<IamRole> Controller::CreateRole(const CreateRoleCommand& cmd) {
  return Execute<IamRole>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<IamRole> {
    Principals& p = state_.principals;
    if (p.roles.count(cmd.name)) return AlreadyExists("Role with name " + cmd.name + " already exists.");
    if (p.roles.size() >= kMaxRoles) return LimitExceeded("Cannot exceed quota for RolesPerAccount: " + std::to_string(kMaxRoles));
    IamRole r;
    r.name = cmd.name;
    r.arn = "arn:aws:iam::" + config_.account_id + ":role/" + cmd.name;
    r.role_id = cmd.role_id;
    r.description = cmd.description;
    r.created = t.now;
    r.assume_role_policy_document =
        cmd.assume_role_policy_document.empty() ? DefaultTrustPolicy(config_.account_id) : cmd.assume_role_policy_document;
    p.roles[r.name] = r;
    t.principals.insert(PrincipalStoreKey("role", r.name));
    return r;
  });
}

Status Controller::DeleteRole(const std::string& name) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    Principals& p = state_.principals;
    auto it = p.roles.find(name);
    if (it == p.roles.end()) return NoSuchRole(name);
    if (!it->second.policies.empty())
      return FailedPrecondition("Cannot delete entity, must detach all policies first (role " + name + " has " +
                                it->second.policies.front() + ")");
    p.roles.erase(it);
    t.principals.insert(PrincipalStoreKey("role", name));
    return Status::Ok();
  });
}

StatusOr<IamRole> Controller::UpdateAssumeRolePolicy(const UpdateAssumeRolePolicyCommand& cmd) {
  return Execute<IamRole>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<IamRole> {
    auto role = state_.principals.roles.find(cmd.role);
    if (role == state_.principals.roles.end()) return NoSuchRole(cmd.role);
    role->second.assume_role_policy_document = cmd.document;
    t.principals.insert(PrincipalStoreKey("role", cmd.role));
    return role->second;
  });
}

StatusOr<IamRole> Controller::AttachRolePolicy(const AttachRolePolicyCommand& cmd) {
  const std::string name = PolicyName(cmd.policy);
  return Execute<IamRole>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<IamRole> {
    Principals& p = state_.principals;
    auto role = p.roles.find(cmd.role);
    if (role == p.roles.end()) return NoSuchRole(cmd.role);
    if (!p.policies.count(name)) return NotFound("Policy " + cmd.policy + " does not exist or is not attachable.");
    TY_RETURN_IF_ERROR(AttachOrDetach(role->second.policies, name, cmd.attach, kMaxPoliciesPerRole, "role", cmd.role));
    t.principals.insert(PrincipalStoreKey("role", cmd.role));
    return role->second;
  });
}

}  // namespace ty::control
