// CloudWatch's query protocol (Action=...&Version=2010-08-01, a form body or a GET's query), which
// older SDKs send (docs/metrics.md, "The CloudWatch API"): the parameters become the same members
// the JSON protocols carry, typed by name, and the reply is the operation's XML document.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <set>

#include "api/cloudwatch_api.h"
#include "api/cloudwatch_wire.h"
#include "core/strings.h"

namespace ty::api::cw {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxListIndex = 10000;  // "X.member.N": N at most this (every list CloudWatch takes is shorter)

const std::set<std::string> kDoubles = {"Values", "Counts", "Threshold", "SampleCount", "Sum", "Minimum", "Maximum"};
const std::set<std::string> kIntegers = {"Period", "EvaluationPeriods", "DatapointsToAlarm", "MaxRecords",
                                         "MaxDatapoints", "StorageResolution"};
const std::set<std::string> kBooleans = {"ActionsEnabled", "ReturnData", "IncludeLinkedAccounts"};
const std::set<std::string> kTimestamps = {"StartTime", "EndTime", "Timestamp", "StartDate", "EndDate"};

bool IsIndex(const std::string& s) {
  return !s.empty() && s.size() <= 6 && s.find_first_not_of("0123456789") == std::string::npos && s[0] != '0';
}

// The member's value typed by its name (and, for Value, by where it is: a datum's Value is a
// number, a dimension's or a tag's a string). A value that does not convert stays text, for the
// operation to refuse with the member named.
json Typed(const std::vector<std::string>& parts, const std::string& leaf, const std::string& text) {
  const bool datum_value = leaf == "Value" && parts.size() == 4 && parts[0] == "MetricData";
  try {
    size_t used = 0;
    if (kDoubles.count(leaf) || datum_value) {
      const double d = std::stod(text, &used);
      if (used == text.size()) return d;
    } else if (kIntegers.count(leaf)) {
      const long long i = std::stoll(text, &used);
      if (used == text.size()) return static_cast<int64_t>(i);
    } else if (kBooleans.count(leaf)) {
      if (text == "true") return true;
      if (text == "false") return false;
    } else if (kTimestamps.count(leaf)) {
      int64_t ms = 0;
      if (ParseIso8601(text, &ms)) return static_cast<double>(ms) / 1000;
    } else {
      return text;
    }
  } catch (const std::exception&) {
  }
  return text;
}

// Writes `v` as the element `name` (lists as <member> items, DatapointValueMap as entries).
void Element(std::string* out, const std::string& name, const json& v) {
  if (v.is_null()) return;
  *out += "<" + name + ">";
  if (v.is_binary()) {
    double seconds = 0;  // CwTimestamp: epoch seconds as a native double
    if (v.get_binary().size() == sizeof seconds) std::memcpy(&seconds, v.get_binary().data(), sizeof seconds);
    *out += FormatIso8601(static_cast<int64_t>(std::llround(seconds * 1000)));
  } else if (v.is_array()) {
    for (const auto& e : v) Element(out, "member", e);
  } else if (v.is_object() && name == "ExtendedStatistics") {
    for (const auto& [k, e] : v.items()) *out += "<entry><key>" + XmlEscape(k) + "</key><value>" + e.dump() + "</value></entry>";
  } else if (v.is_object()) {
    for (const auto& [k, e] : v.items()) Element(out, k, e);
  } else if (v.is_string()) {
    *out += XmlEscape(v.get_ref<const std::string&>());
  } else {
    *out += v.dump();  // numbers and booleans as JSON writes them
  }
  *out += "</" + name + ">";
}

}  // namespace

StatusOr<json> QueryMembers(std::string_view query, std::string_view form, std::string* action) {
  json root = json::object();
  std::set<std::string> seen;
  auto add = [&](std::string_view text) -> Status {
    for (const auto& part : Split(text, '&')) {
      if (part.empty()) continue;
      const size_t eq = part.find('=');
      const std::string key = FormDecode(std::string_view(part).substr(0, eq));
      const std::string value = eq == std::string::npos ? "" : FormDecode(std::string_view(part).substr(eq + 1));
      if (key == "Action") {
        *action = value;
        continue;
      }
      if (key == "Version") {
        if (value != "2010-08-01") return Invalid("Version", "must be 2010-08-01, not " + value.substr(0, 40));
        continue;
      }
      if (!seen.insert(key).second) return Invalid(key.substr(0, 200), "is given twice");
      const std::vector<std::string> parts = Split(key, '.');
      json* node = &root;
      std::string leaf;
      for (size_t i = 0; i < parts.size(); ++i) {
        const std::string& p = parts[i];
        if (p == "member" && i + 1 < parts.size() && IsIndex(parts[i + 1])) {
          const size_t index = std::stoul(parts[i + 1]);
          if (index > kMaxListIndex)
            return Invalid(key.substr(0, 200), "a list index must be at most " + std::to_string(kMaxListIndex));
          if (node->is_null()) *node = json::array();
          if (!node->is_array()) return Invalid(key.substr(0, 200), "mixes a list with a single value");
          while (node->size() < index) node->push_back(nullptr);
          node = &(*node)[index - 1];
          ++i;
          continue;
        }
        if (p.empty()) return Invalid(key.substr(0, 200), "is not a member name");
        if (node->is_null()) *node = json::object();
        if (!node->is_object()) return Invalid(key.substr(0, 200), "mixes a structure with a single value");
        node = &(*node)[p];
        leaf = p;
      }
      if (!node->is_null()) return Invalid(key.substr(0, 200), "mixes a single value with a list or structure");
      *node = Typed(parts, leaf, value);
    }
    return Status::Ok();
  };
  TY_RETURN_IF_ERROR(add(query));
  TY_RETURN_IF_ERROR(add(form));
  return root;
}

std::string QueryReply(const std::string& action, const json& result, const std::string& request_id) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<" + action +
                    "Response xmlns=\"http://monitoring.amazonaws.com/doc/2010-08-01/\">";
  if (result.is_object() && !result.empty()) Element(&out, action + "Result", result);
  out += "<ResponseMetadata><RequestId>" + XmlEscape(request_id) + "</RequestId></ResponseMetadata></" + action +
         "Response>";
  return out;
}

}  // namespace ty::api::cw
