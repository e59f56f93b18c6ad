#include "obs/event_filter.h"

#include <algorithm>

#include "core/strings.h"

namespace ty::obs {

using nlohmann::json;

namespace {

// Nesting levels a pattern may use (nested objects, $or alternatives, anything-but matchers). Events
// are a few levels deep; the bound keeps checking and matching, which recurse per level, off the
// end of the stack whatever a caller sends (a pattern is a string, so no JSON depth limit on the
// request that carries it applies).
constexpr int kMaxPatternDepth = 32;

Status TooDeep(const std::string& path) {
  return InvalidArgument("event pattern: " + (path.empty() ? std::string("the pattern") : path) +
                         " is nested more than " + std::to_string(kMaxPatternDepth) + " levels deep");
}

bool In(const std::vector<std::string>& allowed, const std::string& v) {
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

Status CheckMatcher(const json& m, const std::string& path, int depth) {
  if (!m.is_object()) return Status::Ok();  // an exact value
  if (depth > kMaxPatternDepth) return TooDeep(path);
  if (m.size() != 1) return InvalidArgument("event pattern: " + path + ": a matcher object has exactly one key");
  // Not `*m.items().begin()`: that binds to a proxy that is gone by the next statement.
  const std::string& op = m.begin().key();
  const json& v = m.begin().value();
  if (op == "prefix" || op == "suffix" || op == "equals-ignore-case" || op == "wildcard") {
    if (!v.is_string()) return InvalidArgument("event pattern: " + path + ": \"" + op + "\" takes a string");
  } else if (op == "exists") {
    if (!v.is_boolean()) return InvalidArgument("event pattern: " + path + ": \"exists\" takes true or false");
  } else if (op == "anything-but") {
    if (v.is_object()) return CheckMatcher(v, path + ".anything-but", depth + 1);
    if (v.is_array()) {
      for (const auto& e : v)
        if (e.is_object() || e.is_array()) return InvalidArgument("event pattern: " + path + ": \"anything-but\" lists plain values");
    }
  } else if (op == "numeric") {
    if (!v.is_array() || v.empty() || v.size() % 2 != 0)
      return InvalidArgument("event pattern: " + path + ": \"numeric\" takes [op, number, ...]");
    for (size_t i = 0; i < v.size(); i += 2) {
      static const std::vector<std::string> kOps = {"=", "<", "<=", ">", ">="};
      if (!v[i].is_string() || std::find(kOps.begin(), kOps.end(), v[i].get<std::string>()) == kOps.end() ||
          !v[i + 1].is_number())
        return InvalidArgument("event pattern: " + path + ": \"numeric\" takes pairs of =, <, <=, >, >= and a number");
    }
  } else {
    return InvalidArgument("event pattern: " + path + ": unknown matcher \"" + op + "\"");
  }
  return Status::Ok();
}

Status Check(const json& p, const std::string& path, int depth) {
  if (depth > kMaxPatternDepth) return TooDeep(path);
  if (!p.is_object()) return InvalidArgument("event pattern: " + (path.empty() ? std::string("the pattern") : path) + " must be a JSON object");
  for (const auto& [k, v] : p.items()) {
    const std::string here = path.empty() ? k : path + "." + k;
    if (k == "$or") {
      if (!v.is_array() || v.size() < 2) return InvalidArgument("event pattern: " + here + " takes an array of at least two patterns");
      for (const auto& alt : v) TY_RETURN_IF_ERROR(Check(alt, here, depth + 1));
    } else if (v.is_object()) {
      TY_RETURN_IF_ERROR(Check(v, here, depth + 1));
    } else if (v.is_array()) {
      if (v.empty()) return InvalidArgument("event pattern: " + here + " must not be an empty array");
      for (const auto& m : v) TY_RETURN_IF_ERROR(CheckMatcher(m, here, depth));
    } else {
      return InvalidArgument("event pattern: " + here + " must be an array of values or a nested object");
    }
  }
  return Status::Ok();
}

bool ScalarEquals(const json& want, const json& have) {
  if (want.is_number() && have.is_number()) return want.get<double>() == have.get<double>();
  return want == have;
}

bool NumericHolds(const json& conds, double x) {
  for (size_t i = 0; i < conds.size(); i += 2) {
    const std::string op = conds[i];
    const double v = conds[i + 1].get<double>();
    if ((op == "=" && !(x == v)) || (op == "<" && !(x < v)) || (op == "<=" && !(x <= v)) || (op == ">" && !(x > v)) ||
        (op == ">=" && !(x >= v)))
      return false;
  }
  return true;
}

// One matcher against one present scalar value.
bool MatchValue(const json& m, const json& have) {
  if (!m.is_object()) return ScalarEquals(m, have);
  const std::string& op = m.begin().key();
  const json& v = m.begin().value();
  if (op == "prefix") return have.is_string() && StartsWith(have.get<std::string>(), v.get<std::string>());
  if (op == "suffix") return have.is_string() && EndsWith(have.get<std::string>(), v.get<std::string>());
  if (op == "equals-ignore-case") return have.is_string() && ToLower(have.get<std::string>()) == ToLower(v.get<std::string>());
  if (op == "wildcard") return have.is_string() && GlobMatch(v.get<std::string>(), have.get<std::string>());
  if (op == "numeric") return have.is_number() && NumericHolds(v, have.get<double>());
  if (op == "anything-but") {
    if (v.is_object()) return !MatchValue(v, have);
    if (v.is_array()) {
      for (const auto& e : v)
        if (ScalarEquals(e, have)) return false;
      return true;
    }
    return !ScalarEquals(v, have);
  }
  return false;  // "exists" is decided by the caller
}

bool MatchField(const json& matchers, const json* have) {
  for (const auto& m : matchers) {
    if (m.is_object() && m.begin().key() == "exists") {
      if (m.begin().value().get<bool>() == (have != nullptr)) return true;
      continue;
    }
    if (!have) continue;
    if (have->is_array()) {
      for (const auto& e : *have)
        if (MatchValue(m, e)) return true;
    } else if (MatchValue(m, *have)) {
      return true;
    }
  }
  return false;
}

}  // namespace

Status CheckEventPattern(const json& pattern) { return Check(pattern, "", 1); }

namespace {
// A nested pattern against the event's value at its key: an object matches as a whole; an array
// (of objects, or of arrays of them) matches when one element does, so that every field the
// pattern names is matched within the same element, as EventBridge matches arrays of objects
// ({"Tags": {"Key": ["owner"], "Value": ["alice"]}} needs one tag that is both).
bool MatchesNested(const json& pattern, const json& have) {
  if (have.is_object()) return MatchesEventPattern(pattern, have);
  if (have.is_array())
    for (const auto& e : have)
      if (MatchesNested(pattern, e)) return true;
  return false;
}
}  // namespace

bool MatchesEventPattern(const json& pattern, const json& event) {
  for (const auto& [k, v] : pattern.items()) {
    if (k == "$or") {
      bool any = false;
      for (const auto& alt : v) any = any || MatchesEventPattern(alt, event);
      if (!any) return false;
      continue;
    }
    const json* have = event.is_object() && event.contains(k) ? &event[k] : nullptr;
    if (v.is_object()) {
      if (!have || !MatchesNested(v, *have)) return false;
    } else if (!MatchField(v, have)) {
      return false;
    }
  }
  return true;
}

Status EventFilter::SetPattern(const std::string& text) {
  pattern = nullptr;
  if (text.empty()) return Status::Ok();
  json p = json::parse(text, nullptr, false);
  if (p.is_discarded()) return InvalidArgument("event pattern: not valid JSON");
  TY_RETURN_IF_ERROR(CheckEventPattern(p));
  pattern = std::move(p);
  return Status::Ok();
}

bool EventFilter::Matches(const json& stored) const {
  const json& event = stored["event"];
  if (!In(sources, event.value("source", ""))) return false;
  if (!In(detail_types, event.value("detail-type", ""))) return false;
  if (!In(queues, stored.value("queue", ""))) return false;
  if (!In(shares, stored.value("share", ""))) return false;
  if (!tags.empty()) {
    const json& have = stored.contains("tags") ? stored["tags"] : json::object();
    for (const auto& [k, v] : tags)
      if (!have.contains(k) || !have[k].is_string() || have[k].get<std::string>() != v) return false;
  }
  if (!pattern.is_null() && !MatchesEventPattern(pattern, event)) return false;
  return true;
}

}  // namespace ty::obs
