#include "tune/search.h"

#include <algorithm>
#include <climits>
#include <set>

#include "tune/strategies.h"

namespace ty::tune {

std::optional<double> ObjectiveOf(const Trial& trial) {
  if (trial.state == Trial::State::kRunning || trial.state == Trial::State::kFailed) return std::nullopt;
  if (trial.final_objective) return trial.final_objective;
  if (!trial.intermediate.empty()) return trial.intermediate.back().second;
  return std::nullopt;
}

namespace internal {
namespace {

// The median rule compares a trial against the running averages of at least this many earlier
// trials; with fewer, a median says little and nothing is stopped.
constexpr size_t kMedianMinTrials = 3;

int Running(const std::vector<Trial>& trials) {
  return static_cast<int>(std::count_if(trials.begin(), trials.end(),
                                        [](const Trial& t) { return t.state == Trial::State::kRunning; }));
}

}  // namespace

SearchBase::SearchBase(SearchConfig config, std::vector<Trial> warm_start, int max_trials)
    : config_(std::move(config)),
      space_(config_.ranges),
      warm_(std::move(warm_start)),
      max_trials_(max_trials),
      discrete_size_(space_.DiscreteSize()) {}

std::optional<Suggestion> SearchBase::Next(const std::vector<Trial>& trials) const {
  if (Running(trials) >= config_.max_parallel) return std::nullopt;
  if (static_cast<int64_t>(trials.size()) >= max_trials_) return std::nullopt;
  if (Complete(trials) != Completion::kNone) return std::nullopt;
  return Suggest(trials);
}

Completion SearchBase::Complete(const std::vector<Trial>& trials) const {
  std::vector<double> losses;  // finished trials' objectives in suggestion order
  for (const Trial& t : trials) {
    if (std::optional<double> o = ObjectiveOf(t)) losses.push_back(Loss(*o));
  }
  if (config_.target_objective) {
    const double target = Loss(*config_.target_objective);
    if (std::any_of(losses.begin(), losses.end(), [&](double l) { return l <= target; })) {
      return Completion::kTargetReached;
    }
  }
  const size_t window = static_cast<size_t>(std::max(0, config_.best_not_improving));
  if (window > 0 && losses.size() > window) {
    const auto split = losses.end() - static_cast<std::ptrdiff_t>(window);
    const double best_before = *std::min_element(losses.begin(), split);
    if (std::none_of(split, losses.end(), [&](double l) { return l < best_before; })) {
      return Completion::kBestNotImproving;
    }
  }
  if (config_.complete_on_convergence && Converged(trials)) return Completion::kConverged;
  if (Running(trials) == 0 &&
      (static_cast<int64_t>(trials.size()) >= max_trials_ || !CanSuggestMore(trials))) {
    return Completion::kExhausted;
  }
  return Completion::kNone;
}

// SageMaker's median rule (TrainingJobEarlyStoppingType = Auto): after epoch e, take the running
// average of the objective up to epoch e of every earlier trial that reached epoch e (warm-start
// parents included); stop the trial when its value at e is worse than the median of those averages.
bool SearchBase::ShouldStop(const Trial& trial, const std::vector<Trial>& trials) const {
  if (!config_.early_stopping || trial.state != Trial::State::kRunning || trial.intermediate.empty()) return false;
  // Plain locals, not a structured binding: the lambda below captures them (clang before 16 refuses
  // to capture a binding).
  const int epoch = trial.intermediate.back().first;
  const double value = trial.intermediate.back().second;
  std::vector<double> averages;
  auto consider = [&](const Trial& other) {
    if (other.intermediate.empty() || other.intermediate.back().first < epoch) return;
    double sum = 0;
    int count = 0;
    for (const auto& [e, v] : other.intermediate) {
      if (e > epoch) break;
      sum += v;
      ++count;
    }
    if (count > 0) averages.push_back(Loss(sum / count));
  };
  for (const Trial& w : warm_) consider(w);
  for (const Trial& t : trials) {
    if (t.index < trial.index) consider(t);
  }
  if (averages.size() < kMedianMinTrials) return false;
  std::sort(averages.begin(), averages.end());
  const size_t m = averages.size();
  const double median = m % 2 == 1 ? averages[m / 2] : (averages[m / 2 - 1] + averages[m / 2]) / 2;
  return Loss(value) > median;
}

bool SearchBase::CanSuggestMore(const std::vector<Trial>& trials) const {
  if (!discrete_size_) return true;
  std::set<Assignment> tried;
  for (const Trial& w : warm_) tried.insert(w.assignment);
  for (const Trial& t : trials) tried.insert(t.assignment);
  return static_cast<int64_t>(tried.size()) < *discrete_size_;
}

bool SearchBase::Tried(const Assignment& a, const std::vector<Trial>& trials) const {
  auto same = [&](const Trial& t) { return t.assignment == a; };
  return std::any_of(warm_.begin(), warm_.end(), same) || std::any_of(trials.begin(), trials.end(), same);
}

Assignment SearchBase::GridAssignment(int64_t index) const {
  const std::vector<Range>& ranges = space_.ranges();
  Assignment out(ranges.size());
  for (size_t i = ranges.size(); i-- > 0;) {
    const Range& r = ranges[i];
    if (r.kind == Range::Kind::kCategorical) {
      const auto k = static_cast<int64_t>(r.values.size());
      out[i] = {r.name, r.values[static_cast<size_t>(index % k)]};
      index /= k;
    } else {
      const auto k = static_cast<int64_t>(r.max - r.min) + 1;
      out[i] = {r.name, std::to_string(static_cast<int64_t>(r.min) + index % k)};
      index /= k;
    }
  }
  return out;
}

std::optional<Point> SearchBase::UntriedRandomPoint(Rng& rng, const std::vector<Trial>& trials) const {
  constexpr int kDraws = 64;
  for (int i = 0; i < kDraws; ++i) {
    Point u = space_.RandomPoint(rng);
    if (!discrete_size_ || !Tried(space_.Decode(u), trials)) return u;
  }
  // Nearly used up: the first untried assignment in grid order (a discrete space this crowded is
  // small, since at most max_trials assignments were tried).
  for (int64_t i = 0; i < *discrete_size_; ++i) {
    Assignment a = GridAssignment(i);
    if (!Tried(a, trials)) return space_.Encode(a);
  }
  return std::nullopt;
}

namespace {

// Grid: every combination of the categorical values, in grid order, skipping those a warm-start
// parent already ran.
class GridSearch final : public SearchBase {
 public:
  GridSearch(SearchConfig config, std::vector<Trial> warm, int max_trials, std::vector<int64_t> skipped)
      : SearchBase(std::move(config), std::move(warm), max_trials), skipped_(std::move(skipped)) {}

 protected:
  std::optional<Suggestion> Suggest(const std::vector<Trial>& trials) const override {
    // The n-th combination not skipped: `skipped_` is sorted, so walking it once shifts n past
    // every skipped combination at or below it.
    auto index = static_cast<int64_t>(trials.size());
    for (int64_t s : skipped_) {
      if (s <= index) ++index;
    }
    return Suggestion{GridAssignment(index), 0, -1};
  }

 private:
  const std::vector<int64_t> skipped_;  // grid indices of the warm-start parents' combinations
};

// Random: each trial uniform in the unit cube under the ranges' scaling, drawn from the generator
// of (seed, trial index); a discrete space never repeats an assignment.
class RandomSearch final : public SearchBase {
 public:
  using SearchBase::SearchBase;

 protected:
  std::optional<Suggestion> Suggest(const std::vector<Trial>& trials) const override {
    Rng rng(config_.seed, trials.size());
    std::optional<Point> u = UntriedRandomPoint(rng, trials);
    if (!u) return std::nullopt;
    return Suggestion{space_.Decode(*u), 0, -1};
  }
};

StatusOr<std::unique_ptr<Search>> CreateGrid(const SearchConfig& config, std::vector<Trial> warm_start) {
  for (const Range& r : config.ranges) {
    if (r.kind != Range::Kind::kCategorical) {
      return InvalidArgument("ParameterRanges: the Grid strategy supports only categorical parameter ranges; '" +
                             r.name + "' is " + (r.kind == Range::Kind::kInteger ? "an integer" : "a continuous") +
                             " range");
    }
  }
  StatusOr<int64_t> size = GridSize(config.ranges);
  if (!size.ok()) return size.status();
  if (*size > INT_MAX) {
    return InvalidArgument("ParameterRanges: the grid has " + std::to_string(*size) + " combinations, too many to run");
  }
  if (config.max_trials != 0 && config.max_trials != *size) {
    return InvalidArgument("ResourceLimits.MaxNumberOfTrainingJobs: a Grid search runs every combination of its "
                           "categorical values; leave it out or set it to " + std::to_string(*size) +
                           ", not " + std::to_string(config.max_trials));
  }
  Space space(config.ranges);
  std::set<int64_t> skipped;
  for (const Trial& w : warm_start) {
    std::optional<Point> u = space.Encode(w.assignment);
    if (!u) continue;
    int64_t index = 0;
    for (size_t i = 0; i < config.ranges.size(); ++i) {
      const auto k = static_cast<int64_t>(config.ranges[i].values.size());
      index = index * k + std::min(k - 1, static_cast<int64_t>((*u)[i] * static_cast<double>(k)));
    }
    skipped.insert(index);
  }
  const int max_trials = static_cast<int>(*size - static_cast<int64_t>(skipped.size()));
  return std::unique_ptr<Search>(std::make_unique<GridSearch>(
      config, std::move(warm_start), max_trials, std::vector<int64_t>(skipped.begin(), skipped.end())));
}

}  // namespace
}  // namespace internal

StatusOr<std::unique_ptr<Search>> Search::Create(const SearchConfig& config, std::vector<Trial> warm_start) {
  TY_RETURN_IF_ERROR(ValidateRanges(config.ranges));
  if (config.max_parallel < 1) {
    return InvalidArgument("ResourceLimits.MaxParallelTrainingJobs must be at least 1");
  }
  if (config.strategy != Strategy::kGrid && config.max_trials < 1) {
    return InvalidArgument("ResourceLimits.MaxNumberOfTrainingJobs must be at least 1");
  }
  if (config.best_not_improving < 0) {
    return InvalidArgument(
        "TuningJobCompletionCriteria.BestObjectiveNotImproving.MaxNumberOfTrainingJobsNotImproving must be at least 1");
  }
  if (config.strategy == Strategy::kHyperband) {
    if (config.early_stopping) {
      return InvalidArgument("TrainingJobEarlyStoppingType must be Off with the Hyperband strategy, which stops "
                             "training jobs itself");
    }
    if (config.min_resource < 1) {
      return InvalidArgument("StrategyConfig.HyperbandStrategyConfig.MinResource must be at least 1");
    }
    if (config.max_resource < config.min_resource) {
      return InvalidArgument("StrategyConfig.HyperbandStrategyConfig.MaxResource (" +
                             std::to_string(config.max_resource) + ") must be at least MinResource (" +
                             std::to_string(config.min_resource) + ")");
    }
  }
  switch (config.strategy) {
    case Strategy::kGrid: return internal::CreateGrid(config, std::move(warm_start));
    case Strategy::kRandom:
      return std::unique_ptr<Search>(
          std::make_unique<internal::RandomSearch>(config, std::move(warm_start), config.max_trials));
    case Strategy::kBayesian: return internal::CreateBayesian(config, std::move(warm_start));
    case Strategy::kHyperband: return internal::CreateHyperband(config, std::move(warm_start));
  }
  return InvalidArgument("HyperParameterTuningJobConfig.Strategy: unknown strategy");
}

}  // namespace ty::tune
