// Amazon EventBridge (JSON 1.1, X-Amz-Target AWSEvents.*, signed as "events"): rules with event
// patterns on the default event bus, API destinations and their connections as targets, and
// PutEvents for users' own events (docs/events.md, "EventBridge API"). The rules' state is the
// controller's (control/event_bus.h); delivery is obs/webhooks' (EventBridgeDeliveries).
//
// The EventBridge model is not embedded; the fields used here are validated by hand, with the
// model's limits (botocore's events 2015-10-07).
#include "api/eventbridge_api.h"

#include <re2/re2.h>

#include <cctype>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "api/operations.h"
#include "control/controller.h"
#include "control/state.h"
#include "core/strings.h"
#include "obs/event_filter.h"
#include "obs/input_transformer.h"
#include "obs/outbound.h"

namespace ty::api {

using nlohmann::json;
using control::Controller;
using control::State;

namespace {

// `lhs` = the value of a StatusOr `expr`, or return its error.
#define EB_CONCAT2(a, b) a##b
#define EB_CONCAT(a, b) EB_CONCAT2(a, b)
#define EB_ASSIGN_OR_RETURN(lhs, expr) EB_ASSIGN_IMPL(EB_CONCAT(eb_or_, __LINE__), lhs, expr)
#define EB_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                   \
  if (!tmp.ok()) return tmp.status();  \
  lhs = std::move(*tmp)

// What ListRules and ListTargetsByRule show of a configuration-file webhook.
constexpr const char* kManagedBy = "trainyard.config";

double Seconds(EpochMs ms) { return static_cast<double>(ms) / 1000.0; }

StatusOr<std::string> OptionalString(const json& req, const std::string& field, size_t max) {
  auto it = req.find(field);
  if (it == req.end() || it->is_null()) return std::string();
  if (!it->is_string()) return InvalidArgument(field + ": must be a string");
  const std::string& v = it->get_ref<const std::string&>();
  if (v.size() > max)
    return InvalidArgument(field + ": must have length less than or equal to " + std::to_string(max) + " (it has " +
                           std::to_string(v.size()) + ")");
  return v;
}

// A name of a rule, target, connection or API destination: [.-_A-Za-z0-9]{1,64}.
StatusOr<std::string> NameField(const json& req, const std::string& field, bool required = true) {
  auto v = OptionalString(req, field, 64);
  if (!v.ok()) return v.status();
  if (v->empty()) {
    if (!required) return v;
    return InvalidArgument(field + ": is required (1 to 64 characters of [.-_A-Za-z0-9])");
  }
  static const RE2 kName("[\\.\\-_A-Za-z0-9]+");
  if (!RE2::FullMatch(*v, kName))
    return InvalidArgument(field + ": '" + *v + "' must satisfy the pattern [\\.\\-_A-Za-z0-9]+");
  return v;
}

// Only the default event bus exists (by name or ARN).
Status CheckEventBus(Controller& c, const json& req, const std::string& field = "EventBusName") {
  auto bus = OptionalString(req, field, 1600);
  if (!bus.ok()) return bus.status();
  if (bus->empty() || *bus == "default" || *bus == c.Arn("events", "event-bus/default")) return Status::Ok();
  return NotFound("Event bus " + *bus + " does not exist.");
}

StatusOr<int> LimitField(const json& req, int max) {
  auto it = req.find("Limit");
  if (it == req.end() || it->is_null()) return max;
  if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > max)
    return InvalidArgument("Limit: must be an integer from 1 to " + std::to_string(max));
  return it->get<int>();
}

// The event pattern of a configuration-file webhook: its sources and detail types as pattern
// fields beside its own pattern (its queue, share and tag filters have no pattern form).
std::string PatternOf(const WebhookConfig& w) {
  json p = w.pattern.empty() ? json::object() : json::parse(w.pattern, nullptr, false);
  if (!p.is_object()) p = json::object();
  if (!w.sources.empty() && !p.contains("source")) p["source"] = w.sources;
  if (!w.detail_types.empty() && !p.contains("detail-type")) p["detail-type"] = w.detail_types;
  return p.dump();
}

json RuleJson(Controller& c, const control::EventRule& r) {
  json j = {{"Name", r.name}, {"Arn", r.arn}, {"State", r.enabled ? "ENABLED" : "DISABLED"}, {"EventBusName", "default"}};
  if (!r.event_pattern.empty()) j["EventPattern"] = r.event_pattern;
  if (!r.schedule_expression.empty()) j["ScheduleExpression"] = r.schedule_expression;
  if (!r.description.empty()) j["Description"] = r.description;
  return j;
}

json WebhookRuleJson(Controller& c, const WebhookConfig& w) {
  return {{"Name", w.name},
          {"Arn", c.Arn("events", "rule/" + w.name)},
          {"State", "ENABLED"},
          {"EventBusName", "default"},
          {"EventPattern", PatternOf(w)},
          {"ManagedBy", kManagedBy},
          {"Description", "Webhook of the configuration file ([[webhooks]] name = \"" + w.name +
                              "\"); read-only through the API"}};
}

const WebhookConfig* Webhook(Controller& c, const std::string& name) {
  for (const auto& w : c.config().webhooks)
    if (w.name == name) return &w;
  return nullptr;
}

// A ScheduleExpression's period: rate(N minute|minutes|hour|hours|day|days), N >= 1, the unit
// singular exactly when N is 1, as AWS requires. cron() is not served.
StatusOr<int64_t> RatePeriodMs(const std::string& expr) {
  if (StartsWith(expr, "cron("))
    return InvalidArgument("ScheduleExpression: cron() expressions are not supported by this server; use "
                           "rate(N minutes), rate(N hours) or rate(N days)");
  static const RE2 kRate("rate\\(([0-9]{1,9}) (minute|minutes|hour|hours|day|days)\\)");
  int64_t n = 0;
  std::string unit;
  if (!RE2::FullMatch(expr, kRate, &n, &unit))
    return InvalidArgument("ScheduleExpression: '" + expr +
                           "' is not a valid schedule expression: rate(N unit), unit minute(s), hour(s) or day(s)");
  const bool plural = unit.back() == 's';
  if (n < 1 || plural != (n != 1))
    return InvalidArgument("ScheduleExpression: '" + expr + "': N must be at least 1, with a singular unit for 1 " +
                           "(rate(1 hour)) and a plural one otherwise (rate(5 minutes))");
  const int64_t unit_ms = StartsWith(unit, "minute") ? 60'000 : StartsWith(unit, "hour") ? 3'600'000 : 86'400'000;
  if (n > 365LL * 86'400'000 / unit_ms)
    return InvalidArgument("ScheduleExpression: '" + expr + "': the period may be at most 365 days");
  return n * unit_ms;
}

// Members whose string value is JSON text that is parsed, matched or rendered (an entry's Detail,
// a rule's EventPattern, a target's Input and InputTemplate, TestEventPattern's Event): each is
// held to [server] max_json_depth, like the request body, before anything parses it, wherever it
// is in the request.
constexpr const char* kJsonTextMembers[] = {"Detail", "EventPattern", "Input", "InputTemplate", "Event"};

// `req` is a parsed body, so its own depth is within the limit and so is this recursion.
Status CheckEmbeddedJsonDepth(const json& req, const std::string& at, int limit) {
  if (req.is_array()) {
    for (size_t i = 0; i < req.size(); ++i)
      TY_RETURN_IF_ERROR(CheckEmbeddedJsonDepth(req[i], at + "[" + std::to_string(i) + "]", limit));
  } else if (req.is_object()) {
    for (const auto& item : req.items()) {
      const std::string& key = item.key();
      const json& value = item.value();
      const std::string member = at.empty() ? key : at + "." + key;
      const bool text = std::find_if(std::begin(kJsonTextMembers), std::end(kJsonTextMembers),
                                     [&](const char* m) { return key == m; }) != std::end(kJsonTextMembers);
      if (text && value.is_string() && JsonDepth(value.get_ref<const std::string&>(), limit) > limit)
        return InvalidArgument(member + ": nests JSON objects and arrays more than " + std::to_string(limit) +
                               " deep (server.max_json_depth)");
      TY_RETURN_IF_ERROR(CheckEmbeddedJsonDepth(value, member, limit));
    }
  }
  return Status::Ok();
}

// The sources a PutEvents entry may not use: AWS's (aws.*) and the server's own ("trainyard", the
// source of its own API calls' audit records), so a user's event never reads as the server's to a
// rule or webhook that trusts a source. A strict character set makes the comparison exact: ASCII
// letters, digits and . _ - / only, so no case, space, lookalike dot (U+2024, U+FF0E) or other
// Unicode spelling can slip past it; then the prefixes are compared without case, with any
// separator after them. AccessDenied: reserved (NotAuthorizedForSourceException); InvalidArgument:
// outside the character set.
Status CheckEventSource(const std::string& source) {
  static const RE2 kSource("[A-Za-z0-9._/\\-]+");
  if (!RE2::FullMatch(source, kSource))
    return InvalidArgument("Parameter Source is not valid. Reason: only ASCII letters, digits and . _ - / may be used.");
  const std::string lower = ToLower(source);
  for (const std::string reserved : {"aws", "trainyard"}) {
    if (!StartsWith(lower, reserved)) continue;
    if (lower.size() == reserved.size() || !std::isalnum(static_cast<unsigned char>(lower[reserved.size()])))
      return Status(Code::kAccessDenied, "Not authorized for the source " + source + " (sources named " + reserved +
                                             " or starting with " + reserved + ". are the server's own).");
  }
  return Status::Ok();
}

StatusOr<control::EventRule> FindRule(Controller& c, const std::string& name) {
  return c.Read([&](const State& s) -> StatusOr<control::EventRule> {
    auto it = s.event_bus.rules.find(name);
    if (it == s.event_bus.rules.end()) return NotFound("Rule " + name + " does not exist.");
    return it->second;
  });
}

Response PutRule(Controller& c, const json& req, const std::string& caller) {
  TY_RETURN_IF_ERROR(CheckEventBus(c, req));
  control::PutRuleCommand cmd;
  cmd.principal = caller;
  EB_ASSIGN_OR_RETURN(cmd.name, NameField(req, "Name"));
  EB_ASSIGN_OR_RETURN(cmd.schedule_expression, OptionalString(req, "ScheduleExpression", 256));
  if (!cmd.schedule_expression.empty()) {
    EB_ASSIGN_OR_RETURN(cmd.schedule_period_ms, RatePeriodMs(cmd.schedule_expression));
  }
  EB_ASSIGN_OR_RETURN(cmd.event_pattern, OptionalString(req, "EventPattern", 4096));
  if (cmd.event_pattern.empty() && cmd.schedule_expression.empty())
    return InvalidArgument("EventPattern or ScheduleExpression: a rule needs at least one (rule " + cmd.name + ")");
  if (!cmd.event_pattern.empty()) {
    json pattern = json::parse(cmd.event_pattern, nullptr, false);
    if (pattern.is_discarded() || !pattern.is_object())
      return InvalidArgument("EventPattern: is not a JSON object");
    if (Status st = obs::CheckEventPattern(pattern); !st.ok()) return InvalidArgument("EventPattern: " + st.message());
  }
  EB_ASSIGN_OR_RETURN(cmd.description, OptionalString(req, "Description", 512));
  EB_ASSIGN_OR_RETURN(std::string state, OptionalString(req, "State", 64));
  if (!state.empty() && state != "ENABLED" && state != "DISABLED")
    return InvalidArgument("State: must be ENABLED or DISABLED, not '" + state + "'");
  cmd.enabled = state != "DISABLED";
  if (auto it = req.find("Tags"); it != req.end()) {
    if (!it->is_array() || it->size() > 50) return InvalidArgument("Tags: must be a list of at most 50 {Key, Value}");
    for (const auto& tag : *it) {
      if (!tag.is_object() || !tag.contains("Key") || !tag["Key"].is_string() || !tag.contains("Value") ||
          !tag["Value"].is_string())
        return InvalidArgument("Tags: each tag must have a string Key and Value");
      const std::string& key = tag["Key"].get_ref<const std::string&>();
      if (key.empty() || key.size() > 128) return InvalidArgument("Tags: a Key must have 1 to 128 characters");
      if (tag["Value"].get_ref<const std::string&>().size() > 256)
        return InvalidArgument("Tags: a Value must have at most 256 characters");
      cmd.tags[key] = tag["Value"].get<std::string>();
    }
  }
  EB_ASSIGN_OR_RETURN(control::EventRule r, c.PutRule(cmd));
  return json{{"RuleArn", r.arn}};
}

Response DescribeRule(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckEventBus(c, req));
  EB_ASSIGN_OR_RETURN(std::string name, NameField(req, "Name"));
  if (const WebhookConfig* w = Webhook(c, name)) return WebhookRuleJson(c, *w);
  EB_ASSIGN_OR_RETURN(control::EventRule r, FindRule(c, name));
  json j = RuleJson(c, r);
  j["CreatedBy"] = c.config().account_id;
  return j;
}

// Pages go by name: NextToken is the last name of the page before.
Response ListRules(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckEventBus(c, req));
  EB_ASSIGN_OR_RETURN(std::string prefix, NameField(req, "NamePrefix", false));
  EB_ASSIGN_OR_RETURN(std::string after, OptionalString(req, "NextToken", 2048));
  EB_ASSIGN_OR_RETURN(int limit, LimitField(req, 100));
  std::map<std::string, json> all;
  for (const auto& w : c.config().webhooks) all[w.name] = WebhookRuleJson(c, w);
  c.Read([&](const State& s) {
    for (const auto& [name, r] : s.event_bus.rules) all[name] = RuleJson(c, r);
    return 0;
  });
  json rules = json::array();
  std::string last;
  for (auto it = after.empty() ? all.begin() : all.upper_bound(after); it != all.end(); ++it) {
    if (!StartsWith(it->first, prefix)) continue;
    if (static_cast<int>(rules.size()) == limit) return json{{"Rules", rules}, {"NextToken", last}};
    rules.push_back(it->second);
    last = it->first;
  }
  return json{{"Rules", rules}};
}

Response SetRuleState(Controller& c, const json& req, bool enabled) {
  TY_RETURN_IF_ERROR(CheckEventBus(c, req));
  EB_ASSIGN_OR_RETURN(std::string name, NameField(req, "Name"));
  TY_RETURN_IF_ERROR(c.SetRuleEnabled(name, enabled));
  return json::object();
}

Response DeleteRule(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckEventBus(c, req));
  EB_ASSIGN_OR_RETURN(std::string name, NameField(req, "Name"));
  TY_RETURN_IF_ERROR(c.DeleteRule(name));
  return json::object();
}

// What kind of target an ARN names, for the refusal of the kinds not served.
std::string TargetKind(const std::string& arn) {
  // arn:partition:service:region:account:resource
  std::vector<std::string> parts;
  size_t pos = 0;
  for (int i = 0; i < 5; ++i) {
    size_t colon = arn.find(':', pos);
    if (colon == std::string::npos) return "";
    parts.push_back(arn.substr(pos, colon - pos));
    pos = colon + 1;
  }
  if (parts[0] != "arn") return "";
  const std::string resource = arn.substr(pos);
  if (parts[2] == "events") return "events:" + resource.substr(0, resource.find('/'));
  return parts[2];
}

Response PutTargets(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckEventBus(c, req));
  control::PutTargetsCommand cmd;
  EB_ASSIGN_OR_RETURN(cmd.rule, NameField(req, "Rule"));
  auto targets = req.find("Targets");
  if (targets == req.end() || !targets->is_array() || targets->empty() || targets->size() > 10)
    return InvalidArgument("Targets: is required: a list of 1 to 10 targets");
  for (size_t i = 0; i < targets->size(); ++i) {
    const json& t = (*targets)[i];
    const std::string where = "Targets[" + std::to_string(i) + "].";
    if (!t.is_object()) return InvalidArgument(where.substr(0, where.size() - 1) + ": must be an object");
    control::EventTarget target;
    auto id = NameField(t, "Id");
    if (!id.ok()) return InvalidArgument(where + id.status().message());
    target.id = *id;
    auto arn = OptionalString(t, "Arn", 1600);
    if (!arn.ok() || arn->empty()) return InvalidArgument(where + "Arn: is required (an API destination's ARN)");
    target.arn = *arn;
    const std::string kind = TargetKind(target.arn);
    if (kind != "events:api-destination")
      return InvalidArgument(where + "Arn: targets of kind " + (kind.empty() ? "'" + target.arn + "'" : kind) +
                             " are not supported by this server; only API destinations "
                             "(arn:aws:events:<region>:<account>:api-destination/<name>) are");
    if (auto retry = t.find("RetryPolicy"); retry != t.end()) {
      if (!retry->is_object()) return InvalidArgument(where + "RetryPolicy: must be an object");
      if (auto n = retry->find("MaximumRetryAttempts"); n != retry->end()) {
        if (!n->is_number_integer() || n->get<int64_t>() < 0 || n->get<int64_t>() > 185)
          return InvalidArgument(where + "RetryPolicy.MaximumRetryAttempts: must be an integer from 0 to 185");
        target.maximum_retry_attempts = n->get<int>();
      }
      if (auto n = retry->find("MaximumEventAgeInSeconds"); n != retry->end()) {
        if (!n->is_number_integer() || n->get<int64_t>() < 60 || n->get<int64_t>() > 86400)
          return InvalidArgument(where + "RetryPolicy.MaximumEventAgeInSeconds: must be an integer from 60 to 86400");
        target.maximum_event_age_seconds = n->get<int>();
      }
    }
    for (const char* unsupported : {"RoleArn", "DeadLetterConfig", "HttpParameters",
                                    "SqsParameters", "EcsParameters", "BatchParameters", "KinesisParameters",
                                    "RunCommandParameters", "RedshiftDataParameters", "SageMakerPipelineParameters",
                                    "AppSyncParameters"})
      if (t.contains(unsupported))
        return InvalidArgument(where + unsupported + ": is not supported by this server");
    auto input = OptionalString(t, "Input", 8192);
    if (!input.ok()) return InvalidArgument(where + input.status().message());
    auto path = OptionalString(t, "InputPath", 256);
    if (!path.ok()) return InvalidArgument(where + path.status().message());
    auto transformer = t.find("InputTransformer");
    const bool transformed = transformer != t.end() && !transformer->is_null();
    if (int(!input->empty()) + int(!path->empty()) + int(transformed) > 1)
      return InvalidArgument(where + "Input, InputPath and InputTransformer: give at most one (target " + target.id +
                             " of rule " + cmd.rule + ")");
    if (!input->empty()) {
      json parsed = json::parse(*input, nullptr, false);
      if (parsed.is_discarded()) return InvalidArgument(where + "Input: is not valid JSON");
    }
    if (!path->empty() && !obs::ValidEventPath(*path))
      return InvalidArgument(where + "InputPath: must be $ or $.field.field[0]... (JSON dot notation with array indices)");
    target.input = *input;
    target.input_path = *path;
    if (transformed) {
      const std::string at = where + "InputTransformer.";
      if (!transformer->is_object()) return InvalidArgument(where + "InputTransformer: must be an object");
      if (auto paths = transformer->find("InputPathsMap"); paths != transformer->end() && !paths->is_null()) {
        if (!paths->is_object()) return InvalidArgument(at + "InputPathsMap: must be a map of variable names to paths");
        for (const auto& [key, value] : paths->items()) {
          if (!value.is_string()) return InvalidArgument(at + "InputPathsMap." + key + ": must be a string (a path)");
          target.input_paths_map[key] = value.get<std::string>();
        }
      }
      auto tmpl = transformer->find("InputTemplate");
      if (tmpl == transformer->end() || !tmpl->is_string())
        return InvalidArgument(at + "InputTemplate: is required (a string of 1 to 8192 characters) for target " +
                               target.id + " of rule " + cmd.rule);
      target.input_template = tmpl->get<std::string>();
      if (Status st = obs::CheckInputTransformer(target.input_paths_map, target.input_template); !st.ok())
        return InvalidArgument(at + st.message() + " (target " + target.id + " of rule " + cmd.rule + ")");
    }
    for (const auto& earlier : cmd.targets)
      if (earlier.id == target.id) return InvalidArgument(where + "Id: '" + target.id + "' is given twice");
    cmd.targets.push_back(std::move(target));
  }
  TY_RETURN_IF_ERROR(c.PutTargets(cmd));
  return json{{"FailedEntryCount", 0}, {"FailedEntries", json::array()}};
}

Response RemoveTargets(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckEventBus(c, req));
  control::RemoveTargetsCommand cmd;
  EB_ASSIGN_OR_RETURN(cmd.rule, NameField(req, "Rule"));
  auto ids = req.find("Ids");
  if (ids == req.end() || !ids->is_array() || ids->empty() || ids->size() > 100)
    return InvalidArgument("Ids: is required: a list of 1 to 100 target ids");
  for (const auto& id : *ids) {
    if (!id.is_string()) return InvalidArgument("Ids: each id must be a string");
    cmd.ids.push_back(id.get<std::string>());
  }
  TY_RETURN_IF_ERROR(c.RemoveTargets(cmd));
  return json{{"FailedEntryCount", 0}, {"FailedEntries", json::array()}};
}

Response ListTargetsByRule(Controller& c, const json& req) {
  TY_RETURN_IF_ERROR(CheckEventBus(c, req));
  EB_ASSIGN_OR_RETURN(std::string rule, NameField(req, "Rule"));
  EB_ASSIGN_OR_RETURN(std::string after, OptionalString(req, "NextToken", 2048));
  EB_ASSIGN_OR_RETURN(int limit, LimitField(req, 100));
  json all = json::array();
  if (const WebhookConfig* w = Webhook(c, rule)) {
    // A webhook has no ARN: its URL's scheme and host stand for it (a path may hold a secret).
    const size_t host = w->url.find("://");
    const size_t path = host == std::string::npos ? std::string::npos : w->url.find('/', host + 3);
    all.push_back({{"Id", "webhook"}, {"Arn", w->url.substr(0, path)}});
  } else {
    EB_ASSIGN_OR_RETURN(control::EventRule r, FindRule(c, rule));
    for (const auto& t : r.targets) {
      json j = {{"Id", t.id}, {"Arn", t.arn}};
      if (!t.input.empty()) j["Input"] = t.input;
      if (!t.input_path.empty()) j["InputPath"] = t.input_path;
      if (!t.input_template.empty()) {
        j["InputTransformer"] = {{"InputTemplate", t.input_template}};
        if (!t.input_paths_map.empty()) j["InputTransformer"]["InputPathsMap"] = t.input_paths_map;
      }
      if (t.maximum_retry_attempts != 185 || t.maximum_event_age_seconds != 86400)
        j["RetryPolicy"] = {{"MaximumRetryAttempts", t.maximum_retry_attempts},
                            {"MaximumEventAgeInSeconds", t.maximum_event_age_seconds}};
      all.push_back(std::move(j));
    }
  }
  // Pages go by position: NextToken is the index of the first target of the next page.
  size_t start = 0;
  if (!after.empty()) {
    if (after.find_first_not_of("0123456789") != std::string::npos || after.size() > 4)
      return InvalidArgument("NextToken: is not one this server gave");
    start = std::stoul(after);
  }
  json page = json::array();
  for (size_t i = start; i < all.size() && static_cast<int>(page.size()) < limit; ++i) page.push_back(all[i]);
  json out = {{"Targets", page}};
  if (start + page.size() < all.size()) out["NextToken"] = std::to_string(start + page.size());
  return out;
}

StatusOr<std::string> HeaderField(const json& parent, const std::string& where, const std::string& field) {
  auto v = OptionalString(parent, field, 512);
  if (!v.ok()) return InvalidArgument(where + v.status().message());
  static const RE2 kHeader("[ \\t]*[^\\x00-\\x1F:\\x7F]+([ \\t]+[^\\x00-\\x1F:\\x7F]+)*[ \\t]*");
  if (v->empty() || !RE2::FullMatch(*v, kHeader))
    return InvalidArgument(where + field + ": is required: 1 to 512 characters, no control characters or ':'");
  return v;
}

json ConnectionJson(const control::EventConnection& x, bool detail) {
  json j = {{"ConnectionArn", x.arn},
            {"Name", x.name},
            {"ConnectionState", "AUTHORIZED"},
            {"AuthorizationType", x.authorization_type},
            {"CreationTime", Seconds(x.created)},
            {"LastModifiedTime", Seconds(x.modified)},
            {"LastAuthorizedTime", Seconds(x.modified)}};
  if (detail) {
    if (!x.description.empty()) j["Description"] = x.description;
    // Never the key's value nor the password.
    if (x.authorization_type == "API_KEY")
      j["AuthParameters"] = {{"ApiKeyAuthParameters", {{"ApiKeyName", x.key_name}}}};
    else
      j["AuthParameters"] = {{"BasicAuthParameters", {{"Username", x.username}}}};
  }
  return j;
}

Response CreateConnection(Controller& c, const json& req) {
  control::CreateConnectionCommand cmd;
  control::EventConnection& x = cmd.connection;
  EB_ASSIGN_OR_RETURN(x.name, NameField(req, "Name"));
  EB_ASSIGN_OR_RETURN(x.description, OptionalString(req, "Description", 512));
  EB_ASSIGN_OR_RETURN(x.authorization_type, OptionalString(req, "AuthorizationType", 64));
  auto params = req.find("AuthParameters");
  if (params == req.end() || !params->is_object()) return InvalidArgument("AuthParameters: is required");
  if (x.authorization_type == "API_KEY") {
    auto p = params->find("ApiKeyAuthParameters");
    if (p == params->end() || !p->is_object())
      return InvalidArgument("AuthParameters.ApiKeyAuthParameters: is required for AuthorizationType API_KEY");
    EB_ASSIGN_OR_RETURN(x.key_name, HeaderField(*p, "AuthParameters.ApiKeyAuthParameters.", "ApiKeyName"));
    EB_ASSIGN_OR_RETURN(x.key_value, HeaderField(*p, "AuthParameters.ApiKeyAuthParameters.", "ApiKeyValue"));
  } else if (x.authorization_type == "BASIC") {
    auto p = params->find("BasicAuthParameters");
    if (p == params->end() || !p->is_object())
      return InvalidArgument("AuthParameters.BasicAuthParameters: is required for AuthorizationType BASIC");
    EB_ASSIGN_OR_RETURN(x.username, HeaderField(*p, "AuthParameters.BasicAuthParameters.", "Username"));
    EB_ASSIGN_OR_RETURN(x.password, HeaderField(*p, "AuthParameters.BasicAuthParameters.", "Password"));
  } else {
    return InvalidArgument("AuthorizationType: must be API_KEY or BASIC" +
                           (x.authorization_type.empty() ? std::string() : ", not '" + x.authorization_type + "'") +
                           " (OAUTH_CLIENT_CREDENTIALS is not supported by this server)");
  }
  EB_ASSIGN_OR_RETURN(control::EventConnection made, c.CreateConnection(cmd));
  json j = ConnectionJson(made, false);
  return json{{"ConnectionArn", j["ConnectionArn"]},
              {"ConnectionState", j["ConnectionState"]},
              {"CreationTime", j["CreationTime"]},
              {"LastModifiedTime", j["LastModifiedTime"]}};
}

Response DescribeConnection(Controller& c, const json& req) {
  EB_ASSIGN_OR_RETURN(std::string name, NameField(req, "Name"));
  return c.Read([&](const State& s) -> Response {
    auto it = s.event_bus.connections.find(name);
    if (it == s.event_bus.connections.end()) return NotFound("Connection " + name + " does not exist.");
    return ConnectionJson(it->second, true);
  });
}

json DestinationJson(const control::ApiDestination& d, bool detail) {
  json j = {{"ApiDestinationArn", d.arn},
            {"Name", d.name},
            {"ApiDestinationState", "ACTIVE"},
            {"ConnectionArn", d.connection_arn},
            {"InvocationEndpoint", d.invocation_endpoint},
            {"HttpMethod", d.http_method},
            {"CreationTime", Seconds(d.created)},
            {"LastModifiedTime", Seconds(d.modified)}};
  if (d.rate_limit_per_second > 0) j["InvocationRateLimitPerSecond"] = d.rate_limit_per_second;
  if (detail && !d.description.empty()) j["Description"] = d.description;
  return j;
}

// ListConnections and ListApiDestinations: by name, NamePrefix, NextToken = the last name.
template <typename Map, typename Render>
Response ListByName(const json& req, const Map& all, const char* member, Render render) {
  EB_ASSIGN_OR_RETURN(std::string prefix, NameField(req, "NamePrefix", false));
  EB_ASSIGN_OR_RETURN(std::string after, OptionalString(req, "NextToken", 2048));
  EB_ASSIGN_OR_RETURN(int limit, LimitField(req, 100));
  json items = json::array();
  std::string last;
  for (auto it = after.empty() ? all.begin() : all.upper_bound(after); it != all.end(); ++it) {
    if (!StartsWith(it->first, prefix)) continue;
    json item = render(it->second);
    if (item.is_null()) continue;
    if (static_cast<int>(items.size()) == limit) return json{{member, items}, {"NextToken", last}};
    items.push_back(std::move(item));
    last = it->first;
  }
  return json{{member, items}};
}

Response DeleteConnection(Controller& c, const json& req) {
  EB_ASSIGN_OR_RETURN(std::string name, NameField(req, "Name"));
  auto before = c.Read([&](const State& s) -> StatusOr<control::EventConnection> {
    auto it = s.event_bus.connections.find(name);
    if (it == s.event_bus.connections.end()) return NotFound("Connection " + name + " does not exist.");
    return it->second;
  });
  if (!before.ok()) return before.status();
  TY_RETURN_IF_ERROR(c.DeleteConnection(name));
  json j = ConnectionJson(*before, false);
  return json{{"ConnectionArn", j["ConnectionArn"]},
              {"ConnectionState", "DELETING"},
              {"CreationTime", j["CreationTime"]},
              {"LastModifiedTime", j["LastModifiedTime"]},
              {"LastAuthorizedTime", j["LastAuthorizedTime"]}};
}

Response CreateApiDestination(Controller& c, const json& req) {
  control::CreateApiDestinationCommand cmd;
  control::ApiDestination& d = cmd.destination;
  EB_ASSIGN_OR_RETURN(d.name, NameField(req, "Name"));
  EB_ASSIGN_OR_RETURN(d.description, OptionalString(req, "Description", 512));
  EB_ASSIGN_OR_RETURN(d.connection_arn, OptionalString(req, "ConnectionArn", 1600));
  if (d.connection_arn.empty()) return InvalidArgument("ConnectionArn: is required");
  EB_ASSIGN_OR_RETURN(d.invocation_endpoint, OptionalString(req, "InvocationEndpoint", 2048));
  // EventBridge takes https:// only; http:// is allowed too, for receivers on a private network.
  if (!StartsWith(d.invocation_endpoint, "https://") && !StartsWith(d.invocation_endpoint, "http://"))
    return InvalidArgument("InvocationEndpoint: is required: an https:// (or http://) URL");
  static const RE2 kUrl("((%[0-9A-Fa-f]{2}|[-()_.!~*';/?:@\\x26=+$,A-Za-z0-9])+)([).!';/?:,])?");
  if (!RE2::FullMatch(d.invocation_endpoint, kUrl))
    return InvalidArgument("InvocationEndpoint: has characters a URL may not have unencoded");
  // A literal address or a localhost name now; a host name on what it resolves to, at each delivery.
  obs::OutboundRules rules;
  rules.allow_local = c.config().events_allow_local_endpoints;
  TY_RETURN_IF_ERROR(obs::CheckOutboundUrl(d.invocation_endpoint, rules));
  EB_ASSIGN_OR_RETURN(d.http_method, OptionalString(req, "HttpMethod", 16));
  if (d.http_method != "POST" && d.http_method != "PUT")
    return InvalidArgument("HttpMethod: must be POST or PUT on this server" +
                           (d.http_method.empty() ? std::string() : ", not '" + d.http_method + "'"));
  if (auto rate = req.find("InvocationRateLimitPerSecond"); rate != req.end()) {
    if (!rate->is_number_integer() || rate->get<int64_t>() < 1 || rate->get<int64_t>() > 300)
      return InvalidArgument("InvocationRateLimitPerSecond: must be an integer from 1 to 300");
    d.rate_limit_per_second = rate->get<int>();
  }
  EB_ASSIGN_OR_RETURN(control::ApiDestination made, c.CreateApiDestination(cmd));
  return json{{"ApiDestinationArn", made.arn},
              {"ApiDestinationState", "ACTIVE"},
              {"CreationTime", Seconds(made.created)},
              {"LastModifiedTime", Seconds(made.modified)}};
}

Response DescribeApiDestination(Controller& c, const json& req) {
  EB_ASSIGN_OR_RETURN(std::string name, NameField(req, "Name"));
  return c.Read([&](const State& s) -> Response {
    auto it = s.event_bus.api_destinations.find(name);
    if (it == s.event_bus.api_destinations.end()) return NotFound("API destination " + name + " does not exist.");
    return DestinationJson(it->second, true);
  });
}

Response DeleteApiDestination(Controller& c, const json& req) {
  EB_ASSIGN_OR_RETURN(std::string name, NameField(req, "Name"));
  TY_RETURN_IF_ERROR(c.DeleteApiDestination(name));
  return json::object();
}

// One PutEvents entry as a whole event, or why it is refused (ErrorCode, ErrorMessage).
struct EntryOutcome {
  json event;  // null when refused
  std::string error_code, error_message;
};

EntryOutcome RenderEntry(Controller& c, const json& e, EpochMs now) {
  auto refuse = [](std::string code, std::string message) { return EntryOutcome{nullptr, std::move(code), std::move(message)}; };
  if (!e.is_object()) return refuse("InvalidArgument", "The entry is not an object.");
  if (!CheckEventBus(c, e).ok()) return refuse("InvalidArgument", "EventBusName: only the default event bus exists.");
  auto str = [&](const char* f) { return e.contains(f) && e[f].is_string() ? e[f].get<std::string>() : std::string(); };
  const std::string source = str("Source"), detail_type = str("DetailType"), detail = str("Detail");
  if (source.empty()) return refuse("InvalidArgument", "Parameter Source is not valid. Reason: Source is a required argument.");
  if (source.size() > 256) return refuse("InvalidArgument", "Parameter Source is not valid. Reason: longer than 256 characters.");
  if (Status st = CheckEventSource(source); !st.ok())
    return refuse(st.code() == Code::kAccessDenied ? "NotAuthorizedForSourceException" : "InvalidArgument", st.message());
  if (detail_type.empty())
    return refuse("InvalidArgument", "Parameter DetailType is not valid. Reason: DetailType is a required argument.");
  if (detail_type.size() > 128) return refuse("InvalidArgument", "Parameter DetailType is not valid. Reason: longer than 128 characters.");
  if (detail.empty()) return refuse("InvalidArgument", "Parameter Detail is not valid. Reason: Detail is a required argument.");
  // Every EventBridge row (Checked, CheckedAs) held Detail to [server] max_json_depth before this parse.
  json parsed = json::parse(detail, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object())
    return refuse("MalformedDetail", "Detail is malformed: it must be a JSON object.");
  json resources = json::array();
  if (e.contains("Resources")) {
    if (!e["Resources"].is_array()) return refuse("InvalidArgument", "Parameter Resources is not valid: a list of strings.");
    for (const auto& r : e["Resources"]) {
      if (!r.is_string()) return refuse("InvalidArgument", "Parameter Resources is not valid: a list of strings.");
      resources.push_back(r);
    }
  }
  EpochMs at = now;
  if (e.contains("Time") && !e["Time"].is_null()) {
    if (!e["Time"].is_number()) return refuse("InvalidArgument", "Parameter Time is not valid: epoch seconds.");
    at = static_cast<EpochMs>(e["Time"].get<double>() * 1000.0);
  }
  json event = {{"version", "0"},
                {"id", NewUuid()},
                {"detail-type", detail_type},
                {"source", source},
                {"account", c.config().account_id},
                {"time", FormatIso8601(at)},
                {"region", c.config().region},
                {"resources", resources},
                {"detail", parsed}};
  if (event.dump().size() > 256 * 1024) return refuse("InvalidArgument", "The entry is larger than 256 KB.");
  return {std::move(event), "", ""};
}

Response PutEvents(Controller& c, const json& req, const std::string& caller) {
  auto entries = req.find("Entries");
  if (entries == req.end() || !entries->is_array() || entries->empty() || entries->size() > 10)
    return InvalidArgument("Entries: is required: a list of 1 to 10 entries");
  const EpochMs now = c.Now();
  std::vector<EntryOutcome> outcomes;
  control::PutEventsCommand cmd;
  cmd.principal = caller;
  for (const auto& e : *entries) {
    outcomes.push_back(RenderEntry(c, e, now));
    if (!outcomes.back().event.is_null()) {
      cmd.events.push_back(outcomes.back().event.dump());
      cmd.times.push_back(now);  // stored at its arrival: retention counts from there
    }
  }
  if (!cmd.events.empty()) TY_RETURN_IF_ERROR(c.PutEvents(cmd));
  json out = json::array();
  int failed = 0;
  for (const auto& o : outcomes) {
    if (o.event.is_null()) {
      ++failed;
      out.push_back({{"ErrorCode", o.error_code}, {"ErrorMessage", o.error_message}});
    } else {
      out.push_back({{"EventId", o.event["id"]}});
    }
  }
  return json{{"FailedEntryCount", failed}, {"Entries", out}};
}

// Whether an event matches a pattern, as a rule with that pattern would decide it (nothing is
// stored or delivered). The event must carry the members AWS requires of one.
Response TestEventPattern(Controller& c, const json& req) {
  EB_ASSIGN_OR_RETURN(std::string pattern_text, OptionalString(req, "EventPattern", 4096));
  if (pattern_text.empty()) return InvalidArgument("EventPattern: is required");
  json pattern = json::parse(pattern_text, nullptr, false);
  if (pattern.is_discarded() || !pattern.is_object()) return InvalidArgument("EventPattern: is not a JSON object");
  if (Status st = obs::CheckEventPattern(pattern); !st.ok()) return InvalidArgument("EventPattern: " + st.message());
  EB_ASSIGN_OR_RETURN(std::string event_text, OptionalString(req, "Event", 256 * 1024));
  if (event_text.empty()) return InvalidArgument("Event: is required");
  json event = json::parse(event_text, nullptr, false);
  if (event.is_discarded() || !event.is_object()) return InvalidArgument("Event: is not a JSON object");
  for (const char* member : {"id", "account", "source", "time", "region", "resources", "detail-type"})
    if (!event.contains(member))
      return InvalidArgument(std::string("Event: the member ") + member + " is required (id, account, source, time, "
                             "region, resources and detail-type)");
  if (!event["resources"].is_array()) return InvalidArgument("Event: resources must be a list");
  return json{{"Result", obs::MatchesEventPattern(pattern, event)}};
}

}  // namespace

namespace {

// Every EventBridge handler first holds the JSON text members to the body's nesting limit.
template <Response (*F)(Controller&, const json&)>
Response Checked(const OperationCall& x) {
  TY_RETURN_IF_ERROR(CheckEmbeddedJsonDepth(x.request, "", x.controller.config().max_json_depth));
  return F(x.controller, x.request);
}

// The same for a handler that records its caller (a rule's owner, an event's putter).
template <Response (*F)(Controller&, const json&, const std::string&)>
Response CheckedAs(const OperationCall& x) {
  TY_RETURN_IF_ERROR(CheckEmbeddedJsonDepth(x.request, "", x.controller.config().max_json_depth));
  return F(x.controller, x.request, x.caller);
}

Response EnableRule(Controller& c, const json& req) { return SetRuleState(c, req, true); }
Response DisableRule(Controller& c, const json& req) { return SetRuleState(c, req, false); }

Response ListConnections(Controller& c, const json& req) {
  return c.Read([&](const State& s) {
    return ListByName(req, s.event_bus.connections, "Connections",
                      [](const control::EventConnection& x) { return ConnectionJson(x, false); });
  });
}

Response ListApiDestinations(Controller& c, const json& req) {
  auto connection = OptionalString(req, "ConnectionArn", 1600);
  if (!connection.ok()) return connection.status();
  return c.Read([&](const State& s) {
    return ListByName(req, s.event_bus.api_destinations, "ApiDestinations", [&](const control::ApiDestination& d) {
      return connection->empty() || d.connection_arn == *connection ? DestinationJson(d, false) : json();
    });
  });
}

OperationTable EventBridgeTable() {
  using RK = ResourceKind;
  const OperationAccess rule{.resource = RK::kEventRule, .field = "Name"};
  const OperationAccess targets{.resource = RK::kEventRule, .field = "Rule"};
  const OperationAccess connection{.resource = RK::kEventConnection, .field = "Name"};
  const OperationAccess destination{.resource = RK::kEventApiDestination, .field = "Name"};
  const std::vector<AuditMember> rule_audit = {{"Name", "AWS::Events::Rule"}};
  const std::vector<AuditMember> targets_audit = {{"Rule", "AWS::Events::Rule"}};
  const std::vector<AuditMember> connection_audit = {{"Name", "AWS::Events::Connection"}};
  const std::vector<AuditMember> destination_audit = {{"Name", "AWS::Events::ApiDestination"}};
  return OperationTable(Api::kEvents, "events", nullptr, {
      {.name = "PutRule", .handle = CheckedAs<PutRule>, .access = rule, .audit = rule_audit,
       .changes_deliveries = true},
      {.name = "DescribeRule", .handle = Checked<DescribeRule>, .access = rule, .audit = rule_audit},
      {.name = "ListRules", .handle = Checked<ListRules>,
       .access = {.list_member = "Rules", .item_action = "events:DescribeRule", .item = RK::kEventRule,
                  .item_arn = "Arn"}},
      {.name = "EnableRule", .handle = Checked<EnableRule>, .access = rule, .audit = rule_audit,
       .changes_deliveries = true},
      {.name = "DisableRule", .handle = Checked<DisableRule>, .access = rule, .audit = rule_audit,
       .changes_deliveries = true},
      {.name = "DeleteRule", .handle = Checked<DeleteRule>, .access = rule, .audit = rule_audit,
       .changes_deliveries = true},
      {.name = "PutTargets", .handle = Checked<PutTargets>, .access = targets, .audit = targets_audit,
       .changes_deliveries = true},
      {.name = "RemoveTargets", .handle = Checked<RemoveTargets>, .access = targets, .audit = targets_audit,
       .changes_deliveries = true},
      {.name = "ListTargetsByRule", .handle = Checked<ListTargetsByRule>, .access = targets, .audit = targets_audit},
      {.name = "CreateConnection", .handle = Checked<CreateConnection>, .access = connection,
       .audit = connection_audit},
      {.name = "DescribeConnection", .handle = Checked<DescribeConnection>, .access = connection,
       .audit = connection_audit},
      {.name = "ListConnections", .handle = Checked<ListConnections>,
       .access = {.list_member = "Connections", .item_action = "events:DescribeConnection",
                  .item = RK::kEventConnection, .item_arn = "ConnectionArn"}},
      {.name = "DeleteConnection", .handle = Checked<DeleteConnection>, .access = connection,
       .audit = connection_audit},
      {.name = "CreateApiDestination", .handle = Checked<CreateApiDestination>, .access = destination,
       .audit = destination_audit},
      {.name = "DescribeApiDestination", .handle = Checked<DescribeApiDestination>, .access = destination,
       .audit = destination_audit},
      {.name = "ListApiDestinations", .handle = Checked<ListApiDestinations>,
       .access = {.list_member = "ApiDestinations", .item_action = "events:DescribeApiDestination",
                  .item = RK::kEventApiDestination, .item_arn = "ApiDestinationArn"}},
      {.name = "DeleteApiDestination", .handle = Checked<DeleteApiDestination>, .access = destination,
       .audit = destination_audit},
      // Puts events on the default bus: acts on no one resource (events:source and
      // events:detail-type condition delivery, not the call).
      {.name = "PutEvents", .handle = CheckedAs<PutEvents>},
      // Matches an event given in the request against a pattern: reads and changes nothing.
      {.name = "TestEventPattern", .handle = Checked<TestEventPattern>},
  });
}

}  // namespace

const OperationTable& EventBridgeOperations() {
  static const OperationTable kTable = EventBridgeTable();
  return kTable;
}

namespace {

// What a rule's targets receive: the events its pattern matches and, with a schedule, its own
// "Scheduled Event"s (which name the rule as their one resource).
std::string DeliveryPattern(const control::EventRule& rule) {
  if (rule.schedule_expression.empty()) return rule.event_pattern;
  json scheduled = {{"source", {"aws.events"}}, {"detail-type", {"Scheduled Event"}}, {"resources", {rule.arn}}};
  if (rule.event_pattern.empty()) return scheduled.dump();
  return json{{"$or", {json::parse(rule.event_pattern), scheduled}}}.dump();
}

}  // namespace

std::vector<WebhookConfig> EventBridgeDeliveries(Controller& c) {
  std::vector<WebhookConfig> out = c.config().webhooks;
  c.Read([&](const State& s) {
    const control::EventBus& bus = s.event_bus;
    for (const auto& [name, rule] : bus.rules) {
      if (!rule.enabled || rule.owner.empty()) continue;  // an ownerless rule may read nothing
      for (const auto& target : rule.targets) {
        auto d = std::find_if(bus.api_destinations.begin(), bus.api_destinations.end(),
                              [&](const auto& x) { return x.second.arn == target.arn; });
        if (d == bus.api_destinations.end()) continue;
        auto conn = std::find_if(bus.connections.begin(), bus.connections.end(),
                                 [&](const auto& x) { return x.second.arn == d->second.connection_arn; });
        WebhookConfig w;
        w.name = "eventbridge/" + name + "/" + target.id + "/" + std::to_string(target.generation);
        w.url = d->second.invocation_endpoint;
        w.method = d->second.http_method;
        w.pattern = DeliveryPattern(rule);
        w.input = target.input;
        w.input_path = target.input_path;
        w.input_paths_map = target.input_paths_map;
        w.input_template = target.input_template;
        w.rule_name = name;
        w.rule_arn = rule.arn;
        w.owner = rule.owner;
        w.max_attempts = target.maximum_retry_attempts + 1;  // the first try and its retries
        w.max_event_age_seconds = target.maximum_event_age_seconds;
        if (conn != bus.connections.end()) {
          const control::EventConnection& x = conn->second;
          if (x.authorization_type == "API_KEY") w.headers.push_back({x.key_name, x.key_value});
          if (x.authorization_type == "BASIC")
            w.headers.push_back({"Authorization", "Basic " + Base64Encode(x.username + ":" + x.password)});
        }
        out.push_back(std::move(w));
      }
    }
    return 0;
  });
  return out;
}

}  // namespace ty::api
