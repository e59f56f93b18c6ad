// Which events a consumer wants (docs/events.md): filters on source, detail-type, queue, share
// and tags, and an EventBridge event pattern over the event itself.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ty::obs {

struct EventFilter {
  std::vector<std::string> sources;
  std::vector<std::string> detail_types;
  std::vector<std::string> queues;
  std::vector<std::string> shares;
  std::vector<std::pair<std::string, std::string>> tags;  // all must be on the job
  nlohmann::json pattern;  // null: none

  // Parses and checks an EventBridge event pattern ("" = none). The message names the rule
  // that is broken.
  Status SetPattern(const std::string& text);

  // `stored` is a stored event document: {"seq","at","queue","share","tags","event"}.
  bool Matches(const nlohmann::json& stored) const;
};

// EventBridge event-pattern matching (a subset: exact values, prefix, suffix, anything-but,
// exists, numeric, equals-ignore-case, wildcard and $or), nested at most 32 levels deep (objects,
// $or alternatives and anything-but matchers each count one). InvalidArgument names what is wrong.
Status CheckEventPattern(const nlohmann::json& pattern);
// REQUIRES: CheckEventPattern(pattern) is OK (matching recurses once per level of the pattern).
bool MatchesEventPattern(const nlohmann::json& pattern, const nlohmann::json& event);

}  // namespace ty::obs
