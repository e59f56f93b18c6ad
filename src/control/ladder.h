// The capacity ladder (docs/spot.md, "Capacity ladder"): the instance types and markets a
// training job accepts, in order of preference. Private to control/.
//
// Wire shape (a trainyard extension that boto3 sends unchanged): the tag
// `trainyard:capacity-ladder` on CreateTrainingJob's Tags or SubmitServiceJob's tags, a
// space-separated list of rungs `<instance type>` (on-demand) or `<instance type>:spot`; and
// `trainyard:fallback-after-interruptions` = N (default 2): after N spot interruptions of a
// training job its later runs skip the spot rungs.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "core/model.h"
#include "core/status.h"
#include "core/training_spec.h"

namespace ty::control {

inline constexpr const char* kLadderTag = "trainyard:capacity-ladder";
inline constexpr const char* kFallbackTag = "trainyard:fallback-after-interruptions";

struct Rung {
  std::string type;
  bool spot = false;
  std::string Key() const { return CapacityKey(type, spot); }
  std::string Text() const { return spot ? type + ":spot" : type; }
  bool operator==(const Rung&) const = default;
};

struct Ladder {
  std::vector<Rung> rungs;  // in order of preference; empty: no ladder
  int fallback_after_interruptions = 2;
};

// The ladder of a job whose own request asks for `own` (its instance type and market), with the
// given tags: the tag's rungs in order, with `own` first unless the tag lists it. Checks every
// rung against the catalogue (the type exists and offers `count` instances on that market).
StatusOr<Ladder> ParseLadder(const Tags& tags, const Rung& own, int64_t count, const Config& config);

// The space-separated canonical form stored on jobs ("" for no ladder), and back.
std::string LadderText(const Ladder& l);
Ladder LadderFromText(const std::string& text, int fallback_after_interruptions);

// The first rung the job may use now: spot rungs are skipped once it has been interrupted
// `fallback_after_interruptions` times, when the ladder has an on-demand rung to fall back to;
// `free(key)` is the free host capacity of a key. Returns -1 when no rung has room.
template <typename FreeFn>
int PickRung(const Ladder& l, int64_t count, int interruptions, FreeFn free) {
  bool on_demand = false;
  for (const auto& r : l.rungs) on_demand |= !r.spot;
  const bool skip_spot = on_demand && interruptions >= l.fallback_after_interruptions;
  for (size_t i = 0; i < l.rungs.size(); ++i) {
    if (l.rungs[i].spot && skip_spot) continue;
    if (free(l.rungs[i].Key()) >= count) return static_cast<int>(i);
  }
  return -1;
}

// The spec of a run on `rung` of `ladder`: its instance type and market, no MaxWaitTimeInSeconds
// off spot, and the whole ladder in its tags, so that the restarts of a job made from it (after
// spot interruptions) climb the ladder again from the top.
TrainingSpec OnRung(TrainingSpec spec, const Ladder& ladder, const Rung& rung);

}  // namespace ty::control
