// The strategies behind Search::Create (internal to src/tune). SearchBase holds what every
// strategy shares: the gates on Next (capacity, budget, completion), the completion criteria and
// the median stopping rule; a strategy supplies the next assignment and may override stopping.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "tune/search.h"
#include "tune/space.h"

namespace ty::tune::internal {

class SearchBase : public Search {
 public:
  // `max_trials`: the trials this search may suggest (Grid: the combinations left after warm start).
  SearchBase(SearchConfig config, std::vector<Trial> warm_start, int max_trials);

  std::optional<Suggestion> Next(const std::vector<Trial>& trials) const final;
  bool ShouldStop(const Trial& trial, const std::vector<Trial>& trials) const override;
  Completion Complete(const std::vector<Trial>& trials) const final;

 protected:
  // REQUIRES: fewer than max_parallel trials run, fewer than max_trials were suggested, and no
  // completion criterion holds. `n` = trials.size() is the index of the trial being suggested.
  virtual std::optional<Suggestion> Suggest(const std::vector<Trial>& trials) const = 0;
  // ConvergenceDetected: only a model-based strategy can tell; the others never converge.
  virtual bool Converged(const std::vector<Trial>& trials) const { return false; }
  // Whether an assignment (or a promotion) is left to suggest; false once a discrete space is
  // used up.
  virtual bool CanSuggestMore(const std::vector<Trial>& trials) const;

  // The value the search minimizes: the objective, negated when the goal is Maximize.
  double Loss(double objective) const { return config_.goal == Goal::kMaximize ? -objective : objective; }
  // Whether `a` was already run by a warm-start parent or suggested in this job.
  bool Tried(const Assignment& a, const std::vector<Trial>& trials) const;
  // A uniformly drawn point whose assignment was not tried (in a discrete space, the first
  // untried assignment in grid order when drawing keeps hitting tried ones); nullopt when a
  // discrete space is used up.
  std::optional<Point> UntriedRandomPoint(Rng& rng, const std::vector<Trial>& trials) const;
  // Assignment number `index` in grid order (the first range varies slowest). REQUIRES: discrete.
  Assignment GridAssignment(int64_t index) const;

  // Constant after construction.
  const SearchConfig config_;
  const Space space_;
  const std::vector<Trial> warm_;
  const int max_trials_;
  const std::optional<int64_t> discrete_size_;
};

StatusOr<std::unique_ptr<Search>> CreateBayesian(const SearchConfig& config, std::vector<Trial> warm_start);
StatusOr<std::unique_ptr<Search>> CreateHyperband(const SearchConfig& config, std::vector<Trial> warm_start);

}  // namespace ty::tune::internal
