// Hyperparameter search: the strategies behind CreateHyperParameterTuningJob (Grid, Random,
// Bayesian, Hyperband), median-rule early stopping and the completion criteria, as pure functions
// of a configuration and the trials so far. No I/O, no clock, no controller: the controller keeps
// the trials (stored with the tuning job) and asks the search what to do next; docs/tuning.md is
// the user-facing reference.
//
// Determinism (what makes a tuning job survive kill -9 with the same suggestions): a Search holds
// no state that is not derived from its config, its warm-start trials and the `trials` passed in.
// Next(trials) with the same arguments returns the same suggestion, in any process; randomness is
// drawn from a generator seeded by (config.seed, the index of the trial being suggested) only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ty::tune {

enum class Scaling { kAuto, kLinear, kLogarithmic, kReverseLogarithmic };

struct Range {
  enum class Kind { kInteger, kContinuous, kCategorical };
  std::string name;
  Kind kind = Kind::kContinuous;
  double min = 0, max = 0;  // integer and continuous ranges (integers hold whole numbers)
  Scaling scaling = Scaling::kAuto;
  std::vector<std::string> values;  // categorical
};

// A trial's hyperparameters as SageMaker passes them: (name, value as a string), in the ranges'
// order. Integers are written without a decimal point, continuous values with enough digits to
// read back the same double.
using Assignment = std::vector<std::pair<std::string, std::string>>;

enum class Strategy { kGrid, kRandom, kBayesian, kHyperband };
enum class Goal { kMinimize, kMaximize };

struct SearchConfig {
  Strategy strategy = Strategy::kBayesian;
  Goal goal = Goal::kMaximize;
  std::vector<Range> ranges;
  uint64_t seed = 0;      // RandomSeed, or one drawn when the tuning job was created and stored with it
  int max_trials = 0;     // MaxNumberOfTrainingJobs (Grid without it: the grid's size)
  int max_parallel = 1;   // MaxParallelTrainingJobs
  // Hyperband (HyperbandStrategyConfig): the resource is the trial's epoch count.
  int min_resource = 1;
  int max_resource = 0;
  // TrainingJobEarlyStoppingType = Auto (not with Hyperband, which stops trials itself).
  bool early_stopping = false;
  // TuningJobCompletionCriteria.
  std::optional<double> target_objective;  // TargetObjectiveMetricValue
  int best_not_improving = 0;              // BestObjectiveNotImproving.MaxNumberOfTrainingJobsNotImproving; 0 = off
  bool complete_on_convergence = false;    // ConvergenceDetected.CompleteOnConvergence = Enabled
};

// What the search knows of one trial; the caller stores it.
struct Trial {
  enum class State { kRunning, kCompleted, kFailed, kStopped };
  int index = 0;  // 0, 1, 2, ... in suggestion order
  Assignment assignment;
  int resource = 0;  // Hyperband: the epochs this trial was given; 0 otherwise
  int parent = -1;   // Hyperband promotion: the trial whose checkpoint this one continues; -1 = none
  State state = State::kRunning;
  // The objective metric as the trial reported it along the way: (epoch, 1-based, or the report's
  // ordinal, value), in order. The final objective is the last value unless `final_objective` is set.
  std::vector<std::pair<int, double>> intermediate;
  std::optional<double> final_objective;
  bool stopped_early = false;  // stopped by ShouldStop (counts as completed for the objective)
};

struct Suggestion {
  Assignment assignment;
  int resource = 0;  // Hyperband: the epochs to give the trial (the static hyperparameter AWS infers)
  int parent = -1;   // continue from this trial's checkpoint (Hyperband promotion); -1 = a fresh start
};

// Why a tuning job is complete.
enum class Completion { kNone, kExhausted, kTargetReached, kBestNotImproving, kConverged };

class Search {
 public:
  // InvalidArgument naming the range or setting and the rule it breaks (the ranges are also checked
  // by ValidateRanges). `warm_start`: the parent tuning jobs' finished trials, seeding the model
  // (Bayesian, Hyperband) and never suggested again (IdenticalDataAndAlgorithm).
  static StatusOr<std::unique_ptr<Search>> Create(const SearchConfig& config, std::vector<Trial> warm_start = {});
  virtual ~Search() = default;

  // The next trial to start, given every trial suggested so far (trials[i].index == i), or nullopt
  // when there is nothing to start now: max_parallel trials are running, a Hyperband rung waits
  // for results, or the search is exhausted (Complete says which).
  virtual std::optional<Suggestion> Next(const std::vector<Trial>& trials) const = 0;

  // Whether the running trial `trial` should stop now, given its intermediate values and the
  // others': the median rule (early_stopping), or the end of its Hyperband rung.
  virtual bool ShouldStop(const Trial& trial, const std::vector<Trial>& trials) const = 0;

  // Whether the tuning job is done: every trial allowed has run (kExhausted) or a completion
  // criterion holds. Running trials are then stopped by the caller.
  virtual Completion Complete(const std::vector<Trial>& trials) const = 0;
};

// The objective a finished trial counts with (its final value, else its last intermediate), or nullopt.
std::optional<double> ObjectiveOf(const Trial& trial);

// Checks ranges as SageMaker does (names unique, at most 30 ranges in all as the service model's
// ParameterRanges limits, see docs/tuning.md):
// min < max for numeric ranges, whole numbers for integers, Logarithmic only with min > 0,
// ReverseLogarithmic only for continuous ranges with 0 <= min < max < 1, categorical values
// non-empty and unique. InvalidArgument names the range and the rule.
Status ValidateRanges(const std::vector<Range>& ranges);

// The number of combinations a Grid search walks (integer ranges by every whole number,
// categorical by every value); InvalidArgument when a range is continuous.
StatusOr<int64_t> GridSize(const std::vector<Range>& ranges);

}  // namespace ty::tune
