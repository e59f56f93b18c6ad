// The replay's timeline, stored as changes per instant and replayed into full samples.
#include "sim/sim.h"

namespace ty::sim {

void Timeline::Begin(int64_t t_s, int64_t used) {
  if (!instants_.empty() && instants_.back().t_s == t_s) {
    instants_.back().used = used;  // the same instant again: its changes continue
    return;
  }
  instants_.push_back({t_s, used, changes_.size()});
}

void Timeline::Change(int team, int32_t held, int32_t demand) { changes_.push_back({team, held, demand}); }

Timeline::Cursor::Cursor(const Timeline& timeline, size_t teams) : timeline_(timeline) {
  s_.held.assign(teams, 0);
  s_.demand.assign(teams, 0);
}

bool Timeline::Cursor::Next() {
  if (k_ >= timeline_.instants_.size()) return false;
  const Instant& in = timeline_.instants_[k_];
  const size_t end = k_ + 1 < timeline_.instants_.size() ? timeline_.instants_[k_ + 1].first_change : timeline_.changes_.size();
  for (size_t c = in.first_change; c < end; ++c) {
    const TeamChange& ch = timeline_.changes_[c];
    s_.held[static_cast<size_t>(ch.team)] = ch.held;
    s_.demand[static_cast<size_t>(ch.team)] = ch.demand;
  }
  s_.t_s = in.t_s;
  s_.used = in.used;
  ++k_;
  return true;
}

}  // namespace ty::sim
