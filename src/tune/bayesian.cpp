// Bayesian: a Gaussian process over the unit cube (gp.h) and Expected Improvement.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tune/gp.h"
#include "tune/strategies.h"

namespace ty::tune::internal {
namespace {

// Generator streams other than the trial indices (which are small): the initial design, and the
// candidates ConvergenceDetected scores.
constexpr uint64_t kDesignStream = ~0ULL;
constexpr uint64_t kConvergenceStream = ~0ULL - 1;

constexpr int kRandomCandidates = 1000;
constexpr int kLocalCandidatesPerPoint = 40;  // around each of the best observed points
constexpr int kLocalCenters = 5;
constexpr int kRefined = 3;                   // top candidates refined by pattern search
constexpr int kRefineRounds = 20;             // sweeps per step size at most
// ConvergenceDetected: the largest expected improvement left is below this fraction of the
// observed objectives' standard deviation, with at least kConvergenceMinTrials finished trials.
constexpr double kConvergenceEi = 1e-3;
constexpr int kConvergenceMinTrials = 10;

struct Data {
  std::vector<Point> points;   // snapped, with an objective
  std::vector<double> losses;
  std::vector<Point> pending;  // running trials
};

class BayesianSearch final : public SearchBase {
 public:
  BayesianSearch(const SearchConfig& config, std::vector<Trial> warm)
      : SearchBase(config, std::move(warm), config.max_trials),
        initial_(std::max(3, space_.dims() + 1)) {}

 protected:
  std::optional<Suggestion> Suggest(const std::vector<Trial>& trials) const override {
    const size_t n = trials.size();
    Data data = Collect(trials, /*with_warm=*/true);
    const int warm_observed = static_cast<int>(data.points.size() - Observed(trials));
    Rng rng(config_.seed, n);
    // The first trials: a Latin hypercube of `initial_` points (unless warm start already gave the
    // model as many observations), then random until two trials have finished.
    if (static_cast<int>(n) < initial_ && warm_observed < initial_) {
      Point u = DesignPoint(n);
      if (!discrete_size_ || !Tried(space_.Decode(u), trials)) return Suggestion{space_.Decode(u), 0, -1};
    }
    if (data.points.size() < 2) return RandomSuggestion(rng, trials);
    GaussianProcess gp = Fitted(data).WithBelievers(Features(data.pending));
    std::vector<std::pair<double, Point>> best = Maximize(gp, data, rng);
    for (const auto& [ei, u] : best) {
      Assignment a = space_.Decode(u);
      if (!Tried(a, trials)) return Suggestion{std::move(a), 0, -1};
    }
    return RandomSuggestion(rng, trials);
  }

  bool Converged(const std::vector<Trial>& trials) const override {
    Data data = Collect(trials, /*with_warm=*/true);
    if (static_cast<int>(Observed(trials)) < std::max(kConvergenceMinTrials, initial_ + 1)) return false;
    GaussianProcess gp = Fitted(data);
    Rng rng(config_.seed, kConvergenceStream);
    std::vector<std::pair<double, Point>> best = Maximize(gp, data, rng);
    return best.empty() || best.front().first < kConvergenceEi;
  }

 private:
  size_t Observed(const std::vector<Trial>& trials) const {
    size_t count = 0;
    for (const Trial& t : trials) count += ObjectiveOf(t).has_value() && space_.Encode(t.assignment).has_value();
    return count;
  }

  Data Collect(const std::vector<Trial>& trials, bool with_warm) const {
    Data d;
    auto add = [&](const Trial& t) {
      std::optional<Point> u = space_.Encode(t.assignment);
      if (!u) return;
      if (t.state == Trial::State::kRunning) {
        d.pending.push_back(*u);
      } else if (std::optional<double> o = ObjectiveOf(t); o && std::isfinite(*o)) {
        d.points.push_back(*u);
        d.losses.push_back(Loss(*o));
      }
    };
    if (with_warm) {
      for (const Trial& w : warm_) add(w);
    }
    for (const Trial& t : trials) add(t);
    return d;
  }

  std::vector<std::vector<double>> Features(const std::vector<Point>& points) const {
    std::vector<std::vector<double>> f;
    f.reserve(points.size());
    for (const Point& p : points) f.push_back(space_.Features(p));
    return f;
  }

  GaussianProcess Fitted(const Data& data) const { return GaussianProcess::Fit(Features(data.points), data.losses); }

  Point DesignPoint(size_t row) const {
    Rng rng(config_.seed, kDesignStream);
    Point u(static_cast<size_t>(space_.dims()));
    for (size_t j = 0; j < u.size(); ++j) {
      // A random permutation of the strata per dimension (Fisher-Yates), the same in every call.
      std::vector<int> strata(static_cast<size_t>(initial_));
      std::iota(strata.begin(), strata.end(), 0);
      for (size_t i = strata.size(); i > 1; --i) std::swap(strata[i - 1], strata[rng.Below(i)]);
      std::vector<double> offsets(strata.size());
      for (double& o : offsets) o = rng.Uniform();
      u[j] = (strata[row] + offsets[row]) / initial_;
    }
    return u;
  }

  std::optional<Suggestion> RandomSuggestion(Rng& rng, const std::vector<Trial>& trials) const {
    std::optional<Point> u = UntriedRandomPoint(rng, trials);
    if (!u) return std::nullopt;
    return Suggestion{space_.Decode(*u), 0, -1};
  }

  // Expected Improvement maximized over random candidates and perturbations of the best observed
  // points, the best few refined by a pattern search; every point is snapped to the values it
  // decodes to, so the model scores what would run. Returns candidates best first.
  std::vector<std::pair<double, Point>> Maximize(const GaussianProcess& gp, const Data& data, Rng& rng) const {
    auto score = [&](const Point& u) { return gp.ExpectedImprovement(space_.Features(u)); };
    std::vector<std::pair<double, Point>> cands;
    for (int i = 0; i < kRandomCandidates; ++i) {
      Point u = space_.Snap(space_.RandomPoint(rng));
      cands.emplace_back(score(u), std::move(u));
    }
    std::vector<size_t> order(data.losses.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return data.losses[a] < data.losses[b]; });
    for (size_t c = 0; c < std::min<size_t>(kLocalCenters, order.size()); ++c) {
      for (int i = 0; i < kLocalCandidatesPerPoint; ++i) {
        Point u = data.points[order[c]];
        for (double& x : u) x = std::clamp(x + 0.1 * rng.Normal(), 0.0, 1.0);
        u = space_.Snap(u);
        cands.emplace_back(score(u), std::move(u));
      }
    }
    auto by_score = [](const auto& a, const auto& b) { return a.first > b.first; };
    std::stable_sort(cands.begin(), cands.end(), by_score);
    for (int r = 0; r < std::min<int>(kRefined, static_cast<int>(cands.size())); ++r) {
      auto& [ei, u] = cands[static_cast<size_t>(r)];
      for (double step : {0.1, 0.03, 0.01, 0.003}) {
        bool improved = true;
        for (int round = 0; improved && round < kRefineRounds; ++round) {
          improved = false;
          for (size_t j = 0; j < u.size(); ++j) {
            for (double dir : {-1.0, 1.0}) {
              Point v = u;
              v[j] = std::clamp(v[j] + dir * step, 0.0, 1.0);
              v = space_.Snap(v);
              const double s = score(v);
              if (s > ei * (1 + 1e-9) + 1e-15) {
                ei = s;
                u = std::move(v);
                improved = true;
              }
            }
          }
        }
      }
    }
    std::stable_sort(cands.begin(), cands.end(), by_score);
    return cands;
  }

  const int initial_;  // trials in the initial design: max(3, ranges + 1)
};

}  // namespace

StatusOr<std::unique_ptr<Search>> CreateBayesian(const SearchConfig& config, std::vector<Trial> warm_start) {
  return std::unique_ptr<Search>(std::make_unique<BayesianSearch>(config, std::move(warm_start)));
}

}  // namespace ty::tune::internal
