#include "control/ladder.h"

#include <sstream>

namespace ty::control {

namespace {
constexpr size_t kMaxRungs = 8;
}

StatusOr<Ladder> ParseLadder(const Tags& tags, const Rung& own, int64_t count, const Config& config) {
  Ladder l;
  if (auto f = tags.find(kFallbackTag); f != tags.end()) {
    const std::string& v = f->second;
    if (v.empty() || v.size() > 3 || v.find_first_not_of("0123456789") != std::string::npos)
      return InvalidArgument(std::string("tag ") + kFallbackTag + " must be a whole number of interruptions (0..999), not '" + v + "'");
    l.fallback_after_interruptions = std::stoi(v);
  }
  auto it = tags.find(kLadderTag);
  if (it == tags.end()) return l;
  const std::string where = std::string("tag ") + kLadderTag;
  std::istringstream in(it->second);
  std::string token;
  while (in >> token) {
    Rung r;
    auto colon = token.find(':');
    r.type = token.substr(0, colon);
    std::string market = colon == std::string::npos ? "on-demand" : token.substr(colon + 1);
    if (market != "spot" && market != "on-demand")
      return InvalidArgument(where + ": rung '" + token + "' must be <instance type>, <instance type>:spot or "
                             "<instance type>:on-demand");
    r.spot = market == "spot";
    const InstanceTypeSpec* spec = config.FindInstanceType(r.type);
    if (!spec) return InvalidArgument(where + ": instance type " + r.type + " is not in this host's catalogue");
    if (spec->Capacity(r.spot) < count)
      return InvalidArgument(where + ": rung '" + token + "' offers " + std::to_string(spec->Capacity(r.spot)) +
                             " instances, fewer than the job's InstanceCount " + std::to_string(count));
    for (const auto& seen : l.rungs)
      if (seen == r) return InvalidArgument(where + ": rung '" + token + "' is listed twice");
    l.rungs.push_back(r);
  }
  if (l.rungs.empty()) return InvalidArgument(where + " must list at least one rung");
  bool has_own = false;
  for (const auto& r : l.rungs) has_own |= r == own;
  if (!has_own) l.rungs.insert(l.rungs.begin(), own);
  if (l.rungs.size() > kMaxRungs)
    return InvalidArgument(where + " may list at most " + std::to_string(kMaxRungs) + " rungs");
  return l;
}

std::string LadderText(const Ladder& l) {
  std::string out;
  for (const auto& r : l.rungs) out += (out.empty() ? "" : " ") + r.Text();
  return out;
}

Ladder LadderFromText(const std::string& text, int fallback_after_interruptions) {
  Ladder l;
  l.fallback_after_interruptions = fallback_after_interruptions;
  std::istringstream in(text);
  std::string token;
  while (in >> token) {
    auto colon = token.find(':');
    l.rungs.push_back({token.substr(0, colon), colon != std::string::npos && token.substr(colon + 1) == "spot"});
  }
  return l;
}

TrainingSpec OnRung(TrainingSpec spec, const Ladder& ladder, const Rung& rung) {
  spec.instance_type = rung.type;
  spec.managed_spot = rung.spot;
  if (!rung.spot) spec.max_wait_seconds = 0;
  spec.tags[kLadderTag] = LadderText(ladder);
  spec.tags[kFallbackTag] = std::to_string(ladder.fallback_after_interruptions);
  return spec;
}

}  // namespace ty::control
