#include "iam/policy.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "iam/values.h"

namespace ty::iam {
namespace {

using nlohmann::json;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) { return Lower(a) == Lower(b); }

// Quotes a value from the document for a message, cut short: messages must stay small whatever
// the document holds.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 64;
  std::string out = "\"";
  out += s.substr(0, kMax);
  if (s.size() > kMax) out += "...";
  out += '"';
  return out;
}

struct Operators {
  const char* name;
  Operator op;
  bool negated;
};

constexpr Operators kOperators[] = {
    {"StringEquals", Operator::kStringEquals, false},
    {"StringNotEquals", Operator::kStringEquals, true},
    {"StringEqualsIgnoreCase", Operator::kStringEqualsIgnoreCase, false},
    {"StringNotEqualsIgnoreCase", Operator::kStringEqualsIgnoreCase, true},
    {"StringLike", Operator::kStringLike, false},
    {"StringNotLike", Operator::kStringLike, true},
    {"ArnEquals", Operator::kArnLike, false},
    {"ArnLike", Operator::kArnLike, false},
    {"ArnNotEquals", Operator::kArnLike, true},
    {"ArnNotLike", Operator::kArnLike, true},
    {"Bool", Operator::kBool, false},
    {"NumericEquals", Operator::kNumericEquals, false},
    {"NumericNotEquals", Operator::kNumericEquals, true},
    {"NumericLessThan", Operator::kNumericLessThan, false},
    {"NumericLessThanEquals", Operator::kNumericLessThanEquals, false},
    {"NumericGreaterThan", Operator::kNumericGreaterThan, false},
    {"NumericGreaterThanEquals", Operator::kNumericGreaterThanEquals, false},
    {"DateEquals", Operator::kDateEquals, false},
    {"DateNotEquals", Operator::kDateEquals, true},
    {"DateLessThan", Operator::kDateLessThan, false},
    {"DateLessThanEquals", Operator::kDateLessThanEquals, false},
    {"DateGreaterThan", Operator::kDateGreaterThan, false},
    {"DateGreaterThanEquals", Operator::kDateGreaterThanEquals, false},
    {"IpAddress", Operator::kIpAddress, false},
    {"NotIpAddress", Operator::kIpAddress, true},
    {"Null", Operator::kNull, false},
};

class Parser {
 public:
  Parser(const ParseLimits& limits, bool trust) : limits_(limits), trust_(trust) {}

  StatusOr<Policy> Parse(std::string_view text, std::string name) {
    if (text.size() > limits_.max_bytes) {
      return LimitExceeded("policy document is " + std::to_string(text.size()) +
                           " bytes; at most " + std::to_string(limits_.max_bytes) + " are allowed");
    }
    if (JsonDepth(text, limits_.max_depth) > limits_.max_depth) {
      return InvalidArgument("policy document is nested more than " +
                             std::to_string(limits_.max_depth) + " levels deep");
    }
    json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return InvalidArgument("policy document is not valid JSON");
    if (!doc.is_object()) return InvalidArgument("policy document must be a JSON object");

    Policy policy;
    policy.name = std::move(name);
    policy.version = "2008-10-17";
    const json* statements = nullptr;
    for (const auto& [key, value] : doc.items()) {
      if (key == "Version") {
        if (!value.is_string() || (value != "2012-10-17" && value != "2008-10-17")) {
          return InvalidArgument("Version must be \"2012-10-17\" or \"2008-10-17\"");
        }
        policy.version = value.get<std::string>();
      } else if (key == "Id") {
        if (!value.is_string()) return InvalidArgument("Id must be a string");
        policy.id = value.get<std::string>();
      } else if (key == "Statement") {
        statements = &value;
      } else {
        return InvalidArgument("policy document has an unknown element " + Quote(key) +
                               " (allowed: Version, Id, Statement)");
      }
    }
    if (statements == nullptr) return InvalidArgument("Statement is required");
    substitutes_ = policy.substitutes_variables();

    // Statement is one object or an array of them.
    if (statements->is_object()) {
      auto st = ParseStatement(*statements, "Statement");
      if (!st.ok()) return st.status();
      policy.statements.push_back(std::move(*st));
    } else if (statements->is_array()) {
      if (statements->empty()) return InvalidArgument("Statement must not be empty");
      if (statements->size() > limits_.max_statements) {
        return LimitExceeded("Statement has " + std::to_string(statements->size()) +
                             " entries; at most " + std::to_string(limits_.max_statements) +
                             " are allowed");
      }
      for (size_t i = 0; i < statements->size(); ++i) {
        auto st = ParseStatement((*statements)[i], "Statement[" + std::to_string(i) + "]");
        if (!st.ok()) return st.status();
        policy.statements.push_back(std::move(*st));
      }
    } else {
      return InvalidArgument("Statement must be an object or an array of objects");
    }
    return policy;
  }

 private:
  StatusOr<Statement> ParseStatement(const json& j, const std::string& where) {
    if (!j.is_object()) return InvalidArgument(where + " must be an object");
    Statement st;
    bool effect_seen = false;
    const json* action = nullptr;
    const json* resource = nullptr;
    const json* principal = nullptr;
    st.trust = trust_;
    for (const auto& [key, value] : j.items()) {
      if (key == "Sid") {
        if (!value.is_string()) return InvalidArgument(where + ".Sid must be a string");
        st.sid = value.get<std::string>();
        for (char c : st.sid) {
          if (!std::isalnum(static_cast<unsigned char>(c))) {
            return InvalidArgument(where + ".Sid " + Quote(st.sid) +
                                   " may hold only letters and digits");
          }
        }
      } else if (key == "Effect") {
        if (value == "Allow") {
          st.effect = Effect::kAllow;
        } else if (value == "Deny") {
          st.effect = Effect::kDeny;
        } else {
          return InvalidArgument(where + ".Effect must be \"Allow\" or \"Deny\"");
        }
        effect_seen = true;
      } else if (key == "Action" || key == "NotAction") {
        if (action != nullptr) {
          return InvalidArgument(where + " must have exactly one of Action and NotAction");
        }
        action = &value;
        st.not_action = key == "NotAction";
      } else if (trust_ && (key == "Resource" || key == "NotResource")) {
        return InvalidArgument(where + "." + key + " is not allowed in a trust policy (its resource is the role)");
      } else if (trust_ && key == "Principal") {
        principal = &value;
      } else if (key == "Resource" || key == "NotResource") {
        if (resource != nullptr) {
          return InvalidArgument(where + " must have exactly one of Resource and NotResource");
        }
        resource = &value;
        st.not_resource = key == "NotResource";
      } else if (key == "Condition") {
        TY_RETURN_IF_ERROR(ParseConditions(value, where + ".Condition", &st.conditions));
      } else if (trust_ && key == "NotPrincipal") {
        return InvalidArgument(where + ".NotPrincipal is not supported in a trust policy; name the principals admitted "
                                       "in Principal");
      } else if (key == "Principal" || key == "NotPrincipal") {
        return InvalidArgument(where + "." + key +
                               " is not allowed in an identity-based policy (the policy applies "
                               "to whoever it is attached to)");
      } else {
        return InvalidArgument(where + " has an unknown element " + Quote(key) +
                               " (allowed: Sid, Effect, Action, NotAction, Resource, NotResource, "
                               "Condition)");
      }
    }
    if (!effect_seen) return InvalidArgument(where + ".Effect is required");
    if (action == nullptr) return InvalidArgument(where + " must have Action or NotAction");
    std::string aname = where + (st.not_action ? ".NotAction" : ".Action");
    TY_RETURN_IF_ERROR(ParseList(*action, aname, /*is_action=*/true, &st.actions));
    if (trust_) {
      if (principal == nullptr) return InvalidArgument(where + ".Principal is required in a trust policy");
      for (const Pattern& p : st.actions)
        if (!StartsWith(Lower(p.text), "sts:"))
          return InvalidArgument(aname + " " + Quote(p.text) +
                                 " is not an sts: action; a trust policy admits principals to sts:AssumeRole and its "
                                 "companions (sts:TagSession, ...)");
      TY_RETURN_IF_ERROR(ParsePrincipal(*principal, where + ".Principal", &st.principals));
      return st;
    }
    if (resource == nullptr) return InvalidArgument(where + " must have Resource or NotResource");
    std::string rname = where + (st.not_resource ? ".NotResource" : ".Resource");
    TY_RETURN_IF_ERROR(ParseList(*resource, rname, /*is_action=*/false, &st.resources));
    return st;
  }

  // A trust policy's Principal: "*" or {"AWS": ..., "Service": ...}, each a string or a non-empty
  // array of strings.
  Status ParsePrincipal(const json& j, const std::string& where, std::vector<std::string>* out) {
    if (j.is_string()) {
      if (j != "*") return InvalidArgument(where + " must be \"*\" or an object of AWS and Service principals");
      out->push_back("*");
      return Status::Ok();
    }
    if (!j.is_object() || j.empty()) return InvalidArgument(where + " must be \"*\" or an object of AWS and Service principals");
    for (const auto& [type, value] : j.items()) {
      const std::string at = where + "." + type;
      if (type != "AWS" && type != "Service")
        return InvalidArgument(at + ": principal type " + Quote(type) + " is not supported (AWS or Service)");
      std::vector<const json*> items;
      if (value.is_string()) {
        items.push_back(&value);
      } else if (value.is_array() && !value.empty()) {
        for (const json& e : value) items.push_back(&e);
      } else {
        return InvalidArgument(at + " must be a string or a non-empty array of strings");
      }
      for (const json* e : items) {
        if (!e->is_string()) return InvalidArgument(at + " entries must be strings");
        const std::string& text = e->get_ref<const std::string&>();
        TY_RETURN_IF_ERROR(CountPattern(at, text));
        if (type == "Service") {
          if (!EndsWith(text, ".amazonaws.com") || text.size() == 14 ||
              !std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '-'; }))
            return InvalidArgument(at + " " + Quote(text) + " must be a service principal such as sagemaker.amazonaws.com");
          out->push_back("service:" + text);
        } else if (text == "*") {
          out->push_back("*");
        } else if (text.size() == 12 && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); })) {
          out->push_back("arn:aws:iam::" + text + ":root");
        } else {
          TY_RETURN_IF_ERROR(CheckAwsPrincipal(at, text));
          out->push_back(text);
        }
      }
    }
    return Status::Ok();
  }

  // arn:aws:iam::ACCOUNT:root, ...:user/[PATH/]NAME or ...:role/[PATH/]NAME, or an STS session
  // arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION. No wildcards: IAM matches principals exactly.
  static Status CheckAwsPrincipal(const std::string& where, std::string_view a) {
    auto bad = [&] {
      return InvalidArgument(where + " " + Quote(a) +
                             " must be \"*\", an account id or the ARN of an account root, a user or a role "
                             "(arn:aws:iam::123456789012:role/NAME), without wildcards");
    };
    if (a.find_first_of("*?") != std::string_view::npos) return bad();
    const bool iam = StartsWith(a, "arn:aws:iam::"), sts = StartsWith(a, "arn:aws:sts::");
    if (!iam && !sts) return bad();
    std::string_view rest = a.substr(13);
    const size_t colon = rest.find(':');
    if (colon != 12 || !std::all_of(rest.begin(), rest.begin() + 12, [](unsigned char c) { return std::isdigit(c); }))
      return bad();
    std::string_view resource = rest.substr(13);
    if (iam && (resource == "root" || ((StartsWith(resource, "user/") || StartsWith(resource, "role/")) &&
                                       resource.size() > 5 && resource.back() != '/')))
      return Status::Ok();
    if (sts && StartsWith(resource, "assumed-role/") && std::count(resource.begin(), resource.end(), '/') == 2 &&
        resource.back() != '/')
      return Status::Ok();
    return bad();
  }

  Status CountPattern(const std::string& where, std::string_view text) {
    if (++patterns_ > limits_.max_patterns) {
      return LimitExceeded("policy document has more than " + std::to_string(limits_.max_patterns) +
                           " Action and Resource entries");
    }
    if (text.size() > limits_.max_pattern_bytes) {
      return LimitExceeded(where + " entry is " + std::to_string(text.size()) + " bytes; at most " +
                           std::to_string(limits_.max_pattern_bytes) + " are allowed");
    }
    return Status::Ok();
  }

  // A string or a non-empty array of strings.
  Status ParseList(const json& j, const std::string& where, bool is_action, std::vector<Pattern>* out) {
    std::vector<const json*> items;
    if (j.is_string()) {
      items.push_back(&j);
    } else if (j.is_array() && !j.empty()) {
      for (const json& e : j) items.push_back(&e);
    } else {
      return InvalidArgument(where + " must be a string or a non-empty array of strings");
    }
    for (const json* e : items) {
      if (!e->is_string()) return InvalidArgument(where + " entries must be strings");
      const std::string& text = e->get_ref<const std::string&>();
      TY_RETURN_IF_ERROR(CountPattern(where, text));
      Pattern p;
      p.text = text;
      if (is_action) {
        TY_RETURN_IF_ERROR(CheckAction(where, text));
        p.compiled = Wildcard(Lower(text));
      } else {
        TY_RETURN_IF_ERROR(CheckResource(where, text));
        p.has_variables = substitutes_ && HasVariables(text);
        if (!p.has_variables) p.compiled = Wildcard(text);
      }
      out->push_back(std::move(p));
    }
    return Status::Ok();
  }

  // `*`, or `service:action` where the service prefix is letters, digits and '-' (no wildcard, as
  // in IAM) and the action letters, digits and the wildcards.
  static Status CheckAction(const std::string& where, std::string_view a) {
    if (a == "*") return Status::Ok();
    size_t colon = a.find(':');
    auto bad = [&] {
      return InvalidArgument(where + " " + Quote(a) +
                             " must be \"*\" or service:action (e.g. batch:Submit*), the service "
                             "prefix without wildcards");
    };
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == a.size()) return bad();
    for (char c : a.substr(0, colon)) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return bad();
    }
    for (char c : a.substr(colon + 1)) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '*' && c != '?') return bad();
    }
    return Status::Ok();
  }

  // `*`, or an ARN of six ':'-separated fields beginning `arn:`.
  static Status CheckResource(const std::string& where, std::string_view r) {
    if (r == "*") return Status::Ok();
    size_t colons = 0;
    for (char c : r) colons += c == ':';
    if (r.substr(0, 4) != "arn:" || colons < 5) {
      return InvalidArgument(where + " " + Quote(r) +
                             " must be \"*\" or an ARN (arn:partition:service:region:account:resource)");
    }
    return Status::Ok();
  }

  // Condition: {"Operator": {"key": value-or-values, ...}, ...}
  Status ParseConditions(const json& j, const std::string& where, std::vector<Condition>* out) {
    if (!j.is_object() || j.empty()) {
      return InvalidArgument(where + " must be a non-empty object of condition operators");
    }
    for (const auto& [op_name, block] : j.items()) {
      // The longest operator is ForAllValues:StringNotEqualsIgnoreCaseIfExists (47 characters);
      // refusing longer names here keeps every message below short.
      if (op_name.size() > 64) {
        return InvalidArgument(where + " has a condition operator of " + std::to_string(op_name.size()) +
                               " characters; none is longer than 64");
      }
      std::string at = where + "." + op_name;
      Condition proto;
      proto.op_name = op_name;
      TY_RETURN_IF_ERROR(ParseOperator(op_name, at, &proto));
      if (!block.is_object() || block.empty()) {
        return InvalidArgument(at + " must be a non-empty object of condition keys");
      }
      for (const auto& [key, values] : block.items()) {
        std::string kat = at + "." + key;
        if (key.empty() || key.size() > 256) {
          return InvalidArgument(at + " has a condition key of " + std::to_string(key.size()) +
                                 " characters; keys have 1 to 256");
        }
        Condition c = proto;
        c.key = Lower(key);
        TY_RETURN_IF_ERROR(ParseValues(values, kat, &c));
        out->push_back(std::move(c));
      }
    }
    return Status::Ok();
  }

  // [ForAnyValue:|ForAllValues:]Name[IfExists]
  static Status ParseOperator(std::string_view name, const std::string& at, Condition* c) {
    if (name.starts_with("ForAnyValue:")) {
      c->qualifier = SetQualifier::kForAnyValue;
      name.remove_prefix(12);
    } else if (name.starts_with("ForAllValues:")) {
      c->qualifier = SetQualifier::kForAllValues;
      name.remove_prefix(13);
    }
    if (name.ends_with("IfExists") && name != "IfExists") {
      c->if_exists = true;
      name.remove_suffix(8);
    }
    for (const Operators& o : kOperators) {
      if (name == o.name) {
        c->op = o.op;
        c->negated = o.negated;
        if (o.op == Operator::kNull && (c->if_exists || c->qualifier != SetQualifier::kNone)) {
          return InvalidArgument(at + ": Null takes neither IfExists nor a set qualifier");
        }
        return Status::Ok();
      }
    }
    return InvalidArgument("condition operator " + Quote(name) + " (" + at +
                           ") is not supported (docs/security.md lists those that are)");
  }

  Status ParseValues(const json& j, const std::string& at, Condition* c) {
    std::vector<const json*> items;
    if (j.is_array()) {
      if (j.empty()) return InvalidArgument(at + " must have at least one value");
      for (const json& e : j) items.push_back(&e);
    } else {
      items.push_back(&j);
    }
    for (const json* e : items) {
      if (++condition_values_ > limits_.max_condition_values) {
        return LimitExceeded("policy document has more than " +
                             std::to_string(limits_.max_condition_values) + " condition values");
      }
      ConditionValue v;
      if (e->is_string()) {
        v.text = e->get<std::string>();
      } else if (e->is_boolean()) {
        v.text = e->get<bool>() ? "true" : "false";
      } else if (e->is_number()) {
        v.text = e->dump();
      } else {
        return InvalidArgument(at + " values must be strings, numbers or booleans");
      }
      if (v.text.size() > limits_.max_pattern_bytes) {
        return LimitExceeded(at + " value is " + std::to_string(v.text.size()) +
                             " bytes; at most " + std::to_string(limits_.max_pattern_bytes) +
                             " are allowed");
      }
      TY_RETURN_IF_ERROR(PrepareValue(at, c->op, &v));
      c->values.push_back(std::move(v));
    }
    return Status::Ok();
  }

  Status PrepareValue(const std::string& at, Operator op, ConditionValue* v) {
    switch (op) {
      case Operator::kStringEquals:
      case Operator::kStringEqualsIgnoreCase:
        v->has_variables = substitutes_ && HasVariables(v->text);
        return Status::Ok();
      case Operator::kStringLike:
      case Operator::kArnLike:
        v->has_variables = substitutes_ && HasVariables(v->text);
        if (!v->has_variables) v->pattern = Wildcard(v->text);
        return Status::Ok();
      case Operator::kBool:
      case Operator::kNull:
        if (v->text != "true" && v->text != "false" && !EqualsIgnoreCase(v->text, "true") &&
            !EqualsIgnoreCase(v->text, "false")) {
          return InvalidArgument(at + " value " + Quote(v->text) + " must be true or false");
        }
        v->flag = EqualsIgnoreCase(v->text, "true");
        return Status::Ok();
      case Operator::kNumericEquals:
      case Operator::kNumericLessThan:
      case Operator::kNumericLessThanEquals:
      case Operator::kNumericGreaterThan:
      case Operator::kNumericGreaterThanEquals:
        if (!ParseNumber(v->text, &v->number)) {
          return InvalidArgument(at + " value " + Quote(v->text) + " must be a number");
        }
        return Status::Ok();
      case Operator::kDateEquals:
      case Operator::kDateLessThan:
      case Operator::kDateLessThanEquals:
      case Operator::kDateGreaterThan:
      case Operator::kDateGreaterThanEquals:
        if (!ParseDate(v->text, &v->epoch_ms)) {
          return InvalidArgument(at + " value " + Quote(v->text) +
                                 " must be an ISO 8601 date (2026-01-02T03:04:05Z) or epoch seconds");
        }
        return Status::Ok();
      case Operator::kIpAddress:
        if (!ParseCidr(v->text, v->address, &v->prefix_bits)) {
          return InvalidArgument(at + " value " + Quote(v->text) +
                                 " must be an IPv4 or IPv6 address or CIDR block (203.0.113.0/24)");
        }
        return Status::Ok();
    }
    return Status::Ok();
  }

  const ParseLimits& limits_;
  const bool trust_;  // a role's trust policy (ParseTrustPolicy)
  bool substitutes_ = false;
  size_t patterns_ = 0;
  size_t condition_values_ = 0;
};

}  // namespace

StatusOr<Policy> ParsePolicy(std::string_view document, std::string name, const ParseLimits& limits) {
  return Parser(limits, /*trust=*/false).Parse(document, std::move(name));
}

StatusOr<Policy> ParseTrustPolicy(std::string_view document, std::string name, const ParseLimits& limits) {
  return Parser(limits, /*trust=*/true).Parse(document, std::move(name));
}

}  // namespace ty::iam
