// EventBridge target input (docs/events.md, "Shaping what a target receives"): the part of an
// event that InputPath names, and the body an InputTransformer renders from an InputPathsMap and
// an InputTemplate. Checked by the API layer when a target is put, rendered by the webhook
// delivery for each event.
//
// An InputTemplate in braces ({...}) is a JSON template: each <name> outside a string literal
// becomes the value as JSON (a string quoted and escaped, a path that finds nothing null), and
// each <name> inside a string literal becomes the value's text escaped for that string. Any other
// template is text: each <name> becomes the value's text (a string without quotes, anything else
// as JSON, nothing for a path that finds nothing). A <...> that names no variable stays as it is.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ty::obs {

// "$" or "$.a.b[0].c": dot notation with array indices, the subset of JSONPath served.
bool ValidEventPath(std::string_view path);
// What `path` (ValidEventPath) names in `event`; nullptr when it names nothing.
const nlohmann::json* FindEventPath(const nlohmann::json& event, std::string_view path);

using InputPathsMap = std::map<std::string, std::string>;  // variable -> path

// Checks a transformer as PutTargets does: at most 100 variables named [A-Za-z0-9_-]{1,256} with
// valid paths, a template of 1 to 8192 characters and, when it is a JSON template, one that is
// JSON with every variable as a value and none as an object key. The message names the member
// ("InputPathsMap..." or "InputTemplate: ...").
Status CheckInputTransformer(const InputPathsMap& paths, const std::string& input_template);

// What the rule adds to the variables of the template (aws.events.rule-name, ...-arn,
// aws.events.event.ingestion-time).
struct TransformerContext {
  std::string rule_name;
  std::string rule_arn;
  int64_t ingestion_ms = 0;  // when the event was stored
};

// The body for `event`. The template is one CheckInputTransformer accepted.
std::string RenderInputTemplate(const InputPathsMap& paths, const std::string& input_template,
                                const nlohmann::json& event, const TransformerContext& context);

}  // namespace ty::obs
