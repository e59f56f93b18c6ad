// Hyperband as asynchronous successive halving over brackets (README.md, "Hyperband").
#include <algorithm>
#include <cmath>
#include <tuple>

#include "tune/strategies.h"

namespace ty::tune::internal {
namespace {

constexpr int kEta = 3;

class HyperbandSearch final : public SearchBase {
 public:
  HyperbandSearch(const SearchConfig& config, std::vector<Trial> warm)
      : SearchBase(config, std::move(warm), config.max_trials) {
    // Rungs of bracket 0: MinResource * eta^k below MaxResource, then MaxResource.
    for (int64_t r = config.min_resource; r < config.max_resource; r *= kEta) base_rungs_.push_back(static_cast<int>(r));
    base_rungs_.push_back(config.max_resource);
    // Bracket b starts at rung b; Hyperband gives the bracket with s = last - b halvings
    // ceil((last + 1) / (s + 1) * eta^s) configurations. Trials take brackets in a smooth weighted
    // round robin of those counts, so every prefix of trials is spread in proportion.
    const int last = static_cast<int>(base_rungs_.size()) - 1;
    std::vector<int> weight;
    for (int b = 0; b <= last; ++b) {
      const int s = last - b;
      weight.push_back(static_cast<int>(std::ceil((last + 1.0) / (s + 1.0) * std::pow(kEta, s))));
    }
    int total = 0;
    for (int w : weight) total += w;
    std::vector<int> credit(weight.size(), 0);
    for (int i = 0; i < total; ++i) {
      size_t pick = 0;
      for (size_t b = 0; b < weight.size(); ++b) {
        credit[b] += weight[b];
        if (credit[b] > credit[pick]) pick = b;
      }
      credit[pick] -= total;
      schedule_.push_back(static_cast<int>(pick));
    }
  }

  bool ShouldStop(const Trial& trial, const std::vector<Trial>& trials) const override {
    if (trial.state != Trial::State::kRunning || trial.intermediate.empty()) return false;
    const std::vector<int> rungs = Rungs(Bracket(trial, trials));
    const int reached = Reached(trial, rungs);
    if (reached < 0) return false;
    const int rung = rungs[static_cast<size_t>(reached)];
    if (rung >= config_.max_resource || (trial.resource > 0 && rung >= trial.resource)) return false;
    if (rung <= Start(trial, rungs)) return false;
    std::vector<double> losses = Records(Bracket(trial, trials), rung, trials);
    std::optional<double> own = ValueAt(trial, rung);
    if (!own || losses.size() < 2) return false;
    // Continue only within the best 1/eta: the (1/eta)-quantile of the rung's losses, linearly
    // interpolated, is the cutoff.
    std::sort(losses.begin(), losses.end());
    const double pos = (static_cast<double>(losses.size()) - 1) / kEta;
    const size_t lo = static_cast<size_t>(pos);
    const double cutoff = lo + 1 < losses.size() ? losses[lo] + (pos - lo) * (losses[lo + 1] - losses[lo]) : losses[lo];
    return Loss(*own) > cutoff;
  }

 protected:
  std::optional<Suggestion> Suggest(const std::vector<Trial>& trials) const override {
    if (std::optional<Suggestion> p = Promotion(trials)) return p;
    Rng rng(config_.seed, trials.size());
    std::optional<Point> u = UntriedRandomPoint(rng, trials);
    if (!u) return std::nullopt;
    return Suggestion{space_.Decode(*u), config_.max_resource, -1};
  }

  bool CanSuggestMore(const std::vector<Trial>& trials) const override {
    return SearchBase::CanSuggestMore(trials) || Promotion(trials).has_value();
  }

 private:
  // A trial's bracket: that of the fresh trial its promotions descend from. -1 for warm-start
  // trials (they count in every bracket).
  int Bracket(const Trial& trial, const std::vector<Trial>& trials) const {
    const Trial* t = &trial;
    while (t->parent >= 0 && static_cast<size_t>(t->parent) < trials.size() && t->parent < t->index) {
      t = &trials[static_cast<size_t>(t->parent)];
    }
    return schedule_[static_cast<size_t>(t->index) % schedule_.size()];
  }
  std::vector<int> Rungs(int bracket) const {
    return std::vector<int>(base_rungs_.begin() + std::max(0, bracket), base_rungs_.end());
  }
  // The index of the highest rung the trial's reports reached, or -1.
  static int Reached(const Trial& t, const std::vector<int>& rungs) {
    if (t.intermediate.empty()) return -1;
    const int epoch = t.intermediate.back().first;
    int k = -1;
    for (size_t i = 0; i < rungs.size(); ++i) {
      if (rungs[i] <= epoch) k = static_cast<int>(i);
    }
    return k;
  }
  // A promoted trial continues from its parent's rung: the highest rung below its resource.
  static int Start(const Trial& t, const std::vector<int>& rungs) {
    if (t.parent < 0) return 0;
    int start = 0;
    for (int r : rungs) {
      if (r < t.resource) start = r;
    }
    return start;
  }
  // The objective at epoch `rung`: the last report at or before it, once the trial got that far.
  static std::optional<double> ValueAt(const Trial& t, int rung) {
    if (t.intermediate.empty() || t.intermediate.back().first < rung) return std::nullopt;
    std::optional<double> v;
    for (const auto& [e, value] : t.intermediate) {
      if (e > rung) break;
      v = value;
    }
    return v;
  }
  // Losses recorded at `rung` in `bracket`: one per lineage (a promoted trial counts only above
  // the rung it started from), warm-start trials in every bracket.
  std::vector<double> Records(int bracket, int rung, const std::vector<Trial>& trials) const {
    std::vector<double> out;
    for (const Trial& w : warm_) {
      if (std::optional<double> v = ValueAt(w, rung)) out.push_back(Loss(*v));
    }
    for (const Trial& t : trials) {
      if (t.state == Trial::State::kFailed || Bracket(t, trials) != bracket) continue;
      if (t.parent >= 0 && rung <= Start(t, Rungs(bracket))) continue;
      if (std::optional<double> v = ValueAt(t, rung)) out.push_back(Loss(*v));
    }
    return out;
  }

  // The stopped trial to continue from its checkpoint, if any: one stopped at a rung below
  // MaxResource (by ShouldStop, or a promoted trial that finished its rung), never promoted yet,
  // and now within the best floor(n / eta) of the n records at that rung. Highest rung first, then
  // the best, then the earliest.
  std::optional<Suggestion> Promotion(const std::vector<Trial>& trials) const {
    std::vector<bool> promoted(trials.size(), false);
    for (const Trial& t : trials) {
      if (t.parent >= 0 && static_cast<size_t>(t.parent) < trials.size()) promoted[static_cast<size_t>(t.parent)] = true;
    }
    std::optional<std::tuple<int, double, int>> best;  // (-rung, loss, index)
    std::optional<Suggestion> out;
    for (const Trial& t : trials) {
      const bool stopped = t.state != Trial::State::kRunning && t.state != Trial::State::kFailed &&
                           (t.stopped_early || (t.parent >= 0 && t.state == Trial::State::kCompleted));
      if (!stopped || promoted[static_cast<size_t>(t.index)]) continue;
      const int bracket = Bracket(t, trials);
      const std::vector<int> rungs = Rungs(bracket);
      const int k = Reached(t, rungs);
      if (k < 0 || k + 1 >= static_cast<int>(rungs.size())) continue;
      const int rung = rungs[static_cast<size_t>(k)];
      std::optional<double> own = ValueAt(t, rung);
      if (!own) continue;
      std::vector<double> losses = Records(bracket, rung, trials);
      const size_t top = losses.size() / kEta;
      const double loss = Loss(*own);
      const size_t better = static_cast<size_t>(std::count_if(losses.begin(), losses.end(), [&](double l) { return l < loss; }));
      if (better >= top) continue;
      std::tuple<int, double, int> key{-rung, loss, t.index};
      if (!best || key < *best) {
        best = key;
        out = Suggestion{t.assignment, rungs[static_cast<size_t>(k) + 1], t.index};
      }
    }
    return out;
  }

  std::vector<int> base_rungs_;  // constant after construction
  std::vector<int> schedule_;    // bracket of fresh trial i: schedule_[i % size]
};

}  // namespace

StatusOr<std::unique_ptr<Search>> CreateHyperband(const SearchConfig& config, std::vector<Trial> warm_start) {
  return std::unique_ptr<Search>(std::make_unique<HyperbandSearch>(config, std::move(warm_start)));
}

}  // namespace ty::tune::internal
