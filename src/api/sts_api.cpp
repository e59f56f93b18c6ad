#include "api/sts_api.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <map>

#include "api/audit.h"
#include "api/operations.h"
#include "control/controller.h"
#include "control/principals.h"
#include "control/role_sessions.h"
#include "core/strings.h"

namespace ty::api {

namespace {

constexpr std::string_view kNamespace = "https://sts.amazonaws.com/doc/2011-06-15/";
constexpr int64_t kMinDurationS = 900;
constexpr int64_t kMaxDurationS = 43200;
constexpr int64_t kDefaultDurationS = 3600;

using Params = std::map<std::string, std::string>;



// The parameters of a POST's form body and of the query together (the body's win).
Params ParamsOf(const http::Request& req) {
  Params out;
  auto add = [&](std::string_view text) {
    for (const auto& part : Split(text, '&')) {
      if (part.empty()) continue;
      size_t eq = part.find('=');
      std::string key = FormDecode(std::string_view(part).substr(0, eq));
      out[key] = eq == std::string::npos ? "" : FormDecode(std::string_view(part).substr(eq + 1));
    }
  };
  add(req.query);
  if (req.method == "POST") add(req.body);
  return out;
}

struct StsError {
  int status;
  const char* code;
};

StsError ErrorOf(const Status& st) {
  switch (st.code()) {
    case Code::kUnauthenticated:
      return StartsWith(st.message(), "Missing Authentication Token") ? StsError{403, "MissingAuthenticationToken"}
                                                                      : StsError{400, "IncompleteSignature"};
    case Code::kUnknownKey: return {403, "InvalidClientTokenId"};
    case Code::kBadSignature: return {403, "SignatureDoesNotMatch"};
    case Code::kExpired: return {400, "RequestExpired"};
    case Code::kExpiredToken: return {400, "ExpiredToken"};
    case Code::kAccessDenied: return {403, "AccessDenied"};
    case Code::kInvalidArgument: return {400, "ValidationError"};
    case Code::kThrottled: return {400, "Throttling"};
    case Code::kUnknownOperation: return {400, "InvalidAction"};
    case Code::kPayloadTooLarge: return {413, "RequestEntityTooLarge"};
    default: return {500, "InternalFailure"};
  }
}

http::Response Xml(int status, std::string body) {
  http::Response res;
  res.status = status;
  res.headers = {{"Content-Type", "text/xml"}};
  res.body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + std::move(body);
  return res;
}

http::Response ErrorReply(const Status& st, const std::string& request_id) {
  StsError e = ErrorOf(st);
  http::Response res = Xml(e.status, "<ErrorResponse xmlns=\"" + std::string(kNamespace) + "\"><Error><Type>" +
                                         (e.status >= 500 ? "Receiver" : "Sender") + "</Type><Code>" + e.code +
                                         "</Code><Message>" + XmlEscape(st.message()) + "</Message></Error><RequestId>" +
                                         XmlEscape(request_id) + "</RequestId></ErrorResponse>");
  res.headers.emplace_back("x-amzn-RequestId", request_id);
  return res;
}

http::Response Reply(const std::string& action, const std::string& result, const std::string& request_id) {
  http::Response res = Xml(200, "<" + action + "Response xmlns=\"" + std::string(kNamespace) + "\"><" + action +
                                    "Result>" + result + "</" + action + "Result><ResponseMetadata><RequestId>" +
                                    XmlEscape(request_id) + "</RequestId></ResponseMetadata></" + action + "Response>");
  res.headers.emplace_back("x-amzn-RequestId", request_id);
  return res;
}

std::string Element(std::string_view name, std::string_view value) {
  return "<" + std::string(name) + ">" + XmlEscape(value) + "</" + std::string(name) + ">";
}

std::string ValidationError(const std::string& value, const std::string& member, const std::string& rule) {
  return "1 validation error detected: Value '" + value + "' at '" + member + "' failed to satisfy constraint: " + rule;
}

// The session name of an assumed-role ARN (its last segment).
std::string SessionNameOf(const std::string& arn) { return arn.substr(arn.rfind('/') + 1); }

StatusOr<std::string> GetCallerIdentity(const Principal& caller, const std::string& account) {
  std::string arn, user_id;
  switch (caller.type) {
    case Principal::Type::kRoot:
      arn = "arn:aws:iam::" + account + ":root";
      user_id = account;
      break;
    case Principal::Type::kUser:
      arn = caller.arn;
      user_id = caller.entry ? caller.entry->user.user_id : caller.access_key_id;
      break;
    case Principal::Type::kRoleSession:
      arn = caller.arn;
      user_id = (caller.entry && !caller.entry->user.user_id.empty() ? caller.entry->user.user_id : caller.access_key_id) +
                ":" + SessionNameOf(caller.arn);
      break;
  }
  return Element("Arn", arn) + Element("UserId", user_id) + Element("Account", account);
}

bool IsSessionNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_+=,.@-").find(c) != std::string_view::npos;
}

StatusOr<std::string> AssumeRole(control::Controller& controller, const Authorizer& authz, const Principal& caller,
                                 const CallContext& ctx, const Params& params) {
  auto get = [&](const char* key) -> const std::string* {
    auto it = params.find(key);
    return it == params.end() ? nullptr : &it->second;
  };
  const std::string* role_arn = get("RoleArn");
  const std::string* session = get("RoleSessionName");
  if (!role_arn) return InvalidArgument(ValidationError("null", "roleArn", "Member must not be null"));
  if (!session) return InvalidArgument(ValidationError("null", "roleSessionName", "Member must not be null"));
  if (role_arn->size() < 20 || role_arn->size() > 2048)
    return InvalidArgument(ValidationError(role_arn->substr(0, 100), "roleArn",
                                           "Member must have length between 20 and 2048"));
  if (session->size() < 2 || session->size() > 64 || !std::all_of(session->begin(), session->end(), IsSessionNameChar))
    return InvalidArgument(ValidationError(session->substr(0, 100), "roleSessionName",
                                           "Member must have length between 2 and 64 and satisfy regular expression "
                                           "pattern: [\\w+=,.@-]*"));
  int64_t duration_s = kDefaultDurationS;
  if (const std::string* d = get("DurationSeconds")) {
    auto [ptr, ec] = std::from_chars(d->data(), d->data() + d->size(), duration_s);
    if (d->empty() || ec != std::errc() || ptr != d->data() + d->size() || duration_s < kMinDurationS ||
        duration_s > kMaxDurationS)
      return InvalidArgument(ValidationError(d->substr(0, 40), "durationSeconds",
                                             "Member must be a whole number of seconds from 900 to 43200"));
  }
  // Allowed first, then existence: a caller who may not assume a role learns nothing of it.
  TY_RETURN_IF_ERROR(authz.CheckAction(caller, ctx, "sts:AssumeRole", *role_arn));
  const std::string& account = controller.config().account_id;
  const std::string role = control::RoleNameOf(*role_arn, account);
  auto dir = controller.directory();
  auto entry = role.empty() ? dir->roles.end() : dir->roles.find(role);
  if (entry == dir->roles.end())
    return InvalidArgument(ValidationError(*role_arn, "roleArn", "Member must name a role of account " + account +
                                                                     " (trainyard admin role list)"));
  // The caller's own allow is not enough: the role's trust policy must admit it too.
  TY_RETURN_IF_ERROR(authz.CheckTrust(caller, ctx, *entry->second, *session));
  control::RoleSession s =
      controller.role_sessions().MintAssumed(role, *session, account, duration_s * 1000, controller.Now());
  return "<Credentials>" + Element("AccessKeyId", s.access_key_id) + Element("SecretAccessKey", s.secret) +
         Element("SessionToken", s.token) + Element("Expiration", FormatIso8601(s.expires)) + "</Credentials>" +
         "<AssumedRoleUser>" + Element("Arn", s.principal_arn) +
         Element("AssumedRoleId", entry->second->role.role_id + ":" + *session) + "</AssumedRoleUser>" +
         Element("PackedPolicySize", "0");
}

// What an STS action is given.
struct StsCall {
  control::Controller& controller;
  const Authorizer& authz;
  const Principal& caller;
  const CallContext& ctx;
  const Params& params;
};

// STS's operation table: an action is answered when it has a row. Each authorizes itself
// (GetCallerIdentity needs no permission, as on AWS; AssumeRole checks sts:AssumeRole on the role,
// then the role's trust policy). A row's audit member is the parameter that names the resource
// its record names, allowed or refused (AssumeRole: the role).
struct StsOperation {
  std::string_view name;
  StatusOr<std::string> (*serve)(const StsCall& x);
  AuditMember audit = {};
};
constexpr StsOperation kStsOperations[] = {
    {"GetCallerIdentity",
     [](const StsCall& x) { return GetCallerIdentity(x.caller, x.controller.config().account_id); }},
    {"AssumeRole", [](const StsCall& x) { return AssumeRole(x.controller, x.authz, x.caller, x.ctx, x.params); },
     {"RoleArn", "AWS::IAM::Role"}},
};

const StsOperation* FindStsOperation(std::string_view action) {
  for (const StsOperation& row : kStsOperations)
    if (row.name == action) return &row;
  return nullptr;
}

}  // namespace

std::vector<std::string_view> StsActions() {
  std::vector<std::string_view> out;
  for (const StsOperation& row : kStsOperations) out.push_back(row.name);
  return out;
}

http::Response ServeSts(const http::Request& req, control::Controller& controller, const Authorizer& authz,
                        const StsAuthenticate& authenticate, const CallContext& ctx) {
  if (req.method != "POST" && req.method != "GET")
    return ErrorReply(Status(Code::kUnknownOperation, "STS answers POST / with a form body, or GET with the query"), "");
  const Params params = ParamsOf(req);
  auto action_it = params.find("Action");
  const std::string action = action_it == params.end() ? "" : action_it->second;
  const StsOperation* row = FindStsOperation(action);
  AuditedCall call(controller, req, Protocol::kSageMakerJson, "sts", row ? action : "UnknownAction");
  auto caller = authenticate(&call.record());
  if (!caller.ok()) {
    call.Finish(caller.status());
    return ErrorReply(caller.status(), call.request_id());
  }
  nlohmann::json body = nlohmann::json::object();
  for (const auto& [k, v] : params)
    if (k != "Action" && k != "Version") body[k] = v;
  call.SetBody(body);
  if (row && !row->audit.member.empty())
    if (auto named = params.find(std::string(row->audit.member)); named != params.end())
      call.record().resources.push_back({std::string(row->audit.type), named->second.substr(0, 2048)});
  StatusOr<std::string> result = Status(Code::kUnknownOperation, "");
  if (!row) {
    std::string served;
    for (const StsOperation& op : kStsOperations) served += std::string(served.empty() ? "" : " and ") + std::string(op.name);
    result = Status(Code::kUnknownOperation, action.empty() ? "The request has no Action parameter"
                                                            : "Could not find operation " + action.substr(0, 100) +
                                                                  " for version 2011-06-15 (this server answers " +
                                                                  served + ")");
  } else if (auto v = params.find("Version"); v != params.end() && v->second != "2011-06-15") {
    result = InvalidArgument("Version must be 2011-06-15, not '" + v->second.substr(0, 40) + "'");
  } else {
    result = row->serve({controller, authz, *caller, ctx, params});
  }
  call.Finish(result.status());
  if (!result.ok()) return ErrorReply(result.status(), call.request_id());
  return Reply(action, *result, call.request_id());
}

}  // namespace ty::api
