#include "api/http_binding.h"

#include <nlohmann/json.hpp>

#include "core/strings.h"

namespace ty::api {

namespace {

// A path segment's percent-escapes decoded (RFC 3986: '+' is itself in a path). False when an
// escape is not '%' and two hex digits.
bool PercentDecode(std::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out->push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return false;
    const int hi = HexDigitValue(s[i + 1]), lo = HexDigitValue(s[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

std::string_view WithoutQuery(std::string_view s) { return s.substr(0, s.find('?')); }

}  // namespace

Status BindHttpMembers(const ServiceModel& model, const ServiceModel::Operation& op, std::string_view path,
                       const std::function<std::vector<std::string>(std::string_view)>& query_values,
                       nlohmann::json* out) {
  const std::vector<ServiceModel::HttpMember> members = model.HttpMembers(op.input_shape);
  if (members.empty()) return Status::Ok();
  const std::vector<std::string> labels = Split(WithoutQuery(op.request_uri), '/');
  const std::vector<std::string> segments = Split(WithoutQuery(path), '/');
  for (const auto& m : members) {
    if (m.location == "uri") {
      for (size_t i = 0; i < labels.size() && i < segments.size(); ++i) {
        const std::string& label = labels[i];
        const bool greedy = label == "{" + m.location_name + "+}";
        if (label != "{" + m.location_name + "}" && !greedy) continue;
        std::string raw = segments[i];
        for (size_t j = i + 1; greedy && j < segments.size(); ++j) raw += "/" + segments[j];
        std::string value;
        if (!PercentDecode(raw, &value))
          return InvalidArgument(m.member + ": the request path's segment '" + raw + "' has a malformed percent-escape");
        (*out)[m.member] = value;
      }
    } else if (m.location == "querystring") {
      std::vector<std::string> values = query_values(m.location_name);
      if (values.empty()) continue;
      if (m.is_list) {
        (*out)[m.member] = values;
      } else {
        (*out)[m.member] = values.front();
      }
    }
  }
  return Status::Ok();
}

}  // namespace ty::api
