// EventBridge target input (input_transformer.h): paths, and the InputTransformer's template.
#include "obs/input_transformer.h"

#include <re2/re2.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/strings.h"

namespace ty::obs {

using nlohmann::json;

namespace {

constexpr const char* kEvent = "aws.events.event";
constexpr const char* kEventJson = "aws.events.event.json";
constexpr const char* kRuleName = "aws.events.rule-name";
constexpr const char* kRuleArn = "aws.events.rule-arn";
constexpr const char* kIngestionTime = "aws.events.event.ingestion-time";

bool Predefined(const std::string& name) {
  return name == kEvent || name == kEventJson || name == kRuleName || name == kRuleArn || name == kIngestionTime;
}

// A template cut into literal text and variables.
struct Piece {
  std::string text;  // literal text, when `var` is empty
  std::string var;
  bool in_string = false;  // a JSON template's variable inside a string literal
};

struct Template {
  std::vector<Piece> pieces;
  bool json = false;
  std::string error;  // why a JSON template is not one
};

// The first character after `pos` that is not white space ('\0' at the end).
char NextSolid(const std::string& s, size_t pos) {
  while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos]))) ++pos;
  return pos < s.size() ? s[pos] : '\0';
}

bool IsJsonTemplate(const std::string& t) {
  const size_t first = t.find_first_not_of(" \t\r\n");
  const size_t last = t.find_last_not_of(" \t\r\n");
  return first != std::string::npos && t[first] == '{' && t[last] == '}';
}

Template Cut(const InputPathsMap& paths, const std::string& t) {
  Template out;
  out.json = IsJsonTemplate(t);
  std::string literal;
  bool in_string = false, escaped = false, string_has_var = false;
  auto flush = [&] {
    if (!literal.empty()) out.pieces.push_back({std::move(literal), "", false});
    literal.clear();
  };
  for (size_t i = 0; i < t.size();) {
    const char c = t[i];
    if (c == '<') {
      const size_t close = t.find('>', i + 1);
      if (close != std::string::npos) {
        std::string name = t.substr(i + 1, close - i - 1);
        if (paths.count(name) || Predefined(name)) {
          flush();
          const bool inside = out.json && in_string;
          if (out.json && !in_string && NextSolid(t, close + 1) == ':' && out.error.empty())
            out.error = "the placeholder <" + name + "> is used as an object key, which a JSON template may not do";
          string_has_var = string_has_var || inside;
          out.pieces.push_back({"", std::move(name), inside});
          i = close + 1;
          continue;
        }
      }
    }
    literal += c;
    if (out.json) {
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
          if (string_has_var && NextSolid(t, i + 1) == ':' && out.error.empty())
            out.error = "a placeholder is used in an object key, which a JSON template may not do";
        }
      } else if (c == '"') {
        in_string = true;
        string_has_var = false;
      }
    }
    ++i;
  }
  flush();
  if (out.json && out.error.empty()) {
    // Each variable as a value (null, or nothing inside a string) must leave valid JSON.
    std::string probe;
    for (const Piece& p : out.pieces) probe += p.var.empty() ? p.text : p.in_string ? "" : "null";
    try {
      (void)json::parse(probe);
    } catch (const json::parse_error& e) {
      out.error = std::string("is in braces, so it must be JSON with each placeholder as a value, and it is not (") +
                  e.what() + ")";
    }
  }
  return out;
}

std::string Dump(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

// A value's text: a string as it is, anything else as JSON.
std::string TextOf(const json* v) {
  if (!v) return "";
  return v->is_string() ? v->get<std::string>() : Dump(*v);
}

}  // namespace

bool ValidEventPath(std::string_view path) {
  static const RE2 kPath("\\$(\\.[^.\\[\\]]+|\\[[0-9]{1,9}\\])*");
  return path.size() <= 256 && RE2::FullMatch(path, kPath);
}

const json* FindEventPath(const json& event, std::string_view path) {
  const json* at = &event;
  size_t pos = 1;  // after "$"
  while (pos < path.size()) {
    if (path[pos] == '.') {
      size_t end = path.find_first_of(".[", pos + 1);
      if (end == std::string_view::npos) end = path.size();
      const std::string key(path.substr(pos + 1, end - pos - 1));
      if (!at->is_object()) return nullptr;
      auto it = at->find(key);
      if (it == at->end()) return nullptr;
      at = &*it;
      pos = end;
    } else if (path[pos] == '[') {
      const size_t end = path.find(']', pos);
      if (end == std::string_view::npos) return nullptr;
      const size_t index = std::stoul(std::string(path.substr(pos + 1, end - pos - 1)));
      if (!at->is_array() || index >= at->size()) return nullptr;
      at = &(*at)[index];
      pos = end + 1;
    } else {
      return nullptr;
    }
  }
  return at;
}

Status CheckInputTransformer(const InputPathsMap& paths, const std::string& input_template) {
  if (paths.size() > 100)
    return InvalidArgument("InputPathsMap: has " + std::to_string(paths.size()) + " entries; at most 100 are allowed");
  static const RE2 kKey("[A-Za-z0-9_\\-]{1,256}");
  for (const auto& [key, path] : paths) {
    if (!RE2::FullMatch(key, kKey))
      return InvalidArgument("InputPathsMap: key '" + key + "' must satisfy the pattern [A-Za-z0-9_-]{1,256}");
    if (!ValidEventPath(path))
      return InvalidArgument("InputPathsMap." + key + ": '" + path +
                             "' must be $ or $.field.field[0]... (JSON dot notation with array indices, at most 256 "
                             "characters)");
  }
  if (input_template.empty() || input_template.size() > 8192)
    return InvalidArgument("InputTemplate: is required: 1 to 8192 characters (it has " +
                           std::to_string(input_template.size()) + ")");
  Template t = Cut(paths, input_template);
  if (!t.error.empty()) return InvalidArgument("InputTemplate: " + t.error);
  return Status::Ok();
}

std::string RenderInputTemplate(const InputPathsMap& paths, const std::string& input_template, const json& event,
                                const TransformerContext& context) {
  const Template t = Cut(paths, input_template);
  std::string out;
  for (const Piece& p : t.pieces) {
    if (p.var.empty()) {
      out += p.text;
      continue;
    }
    json made;  // the value of a predefined variable
    const json* v = nullptr;
    if (p.var == kEvent) {
      v = &event;
    } else if (p.var == kEventJson) {
      made = Dump(event);
    } else if (p.var == kRuleName) {
      made = context.rule_name;
    } else if (p.var == kRuleArn) {
      made = context.rule_arn;
    } else if (p.var == kIngestionTime) {
      made = FormatIso8601(context.ingestion_ms);
    } else if (auto it = paths.find(p.var); it != paths.end()) {
      v = FindEventPath(event, it->second);
    }
    if (!made.is_null()) v = &made;
    if (!t.json) {
      out += TextOf(v);
    } else if (p.in_string) {
      const std::string quoted = Dump(json(TextOf(v)));
      out += quoted.substr(1, quoted.size() - 2);
    } else {
      out += v ? Dump(*v) : "null";
    }
  }
  return out;
}

}  // namespace ty::obs
