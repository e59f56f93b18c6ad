// src/tune: ranges and scaling, each strategy, the median rule, completion criteria, warm start.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "tune/search.h"

namespace ty::tune {
namespace {

Range Continuous(std::string name, double min, double max, Scaling s = Scaling::kAuto) {
  Range r;
  r.name = std::move(name);
  r.kind = Range::Kind::kContinuous;
  r.min = min;
  r.max = max;
  r.scaling = s;
  return r;
}
Range Integer(std::string name, double min, double max, Scaling s = Scaling::kAuto) {
  Range r = Continuous(std::move(name), min, max, s);
  r.kind = Range::Kind::kInteger;
  return r;
}
Range Categorical(std::string name, std::vector<std::string> values) {
  Range r;
  r.name = std::move(name);
  r.kind = Range::Kind::kCategorical;
  r.values = std::move(values);
  return r;
}

std::unique_ptr<Search> Make(const SearchConfig& config, std::vector<Trial> warm = {}) {
  auto s = Search::Create(config, std::move(warm));
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

double Value(const Assignment& a, const std::string& name) {
  for (const auto& [n, v] : a) {
    if (n == name) return std::stod(v);
  }
  ADD_FAILURE() << "no " << name;
  return NAN;
}

// Runs `search` to the end with every trial finishing at once with objective f(assignment).
template <typename F>
std::vector<Trial> RunSequentially(const Search& search, F f, int limit = 1000) {
  std::vector<Trial> trials;
  while (static_cast<int>(trials.size()) < limit) {
    std::optional<Suggestion> s = search.Next(trials);
    if (!s) break;
    Trial t;
    t.index = static_cast<int>(trials.size());
    t.assignment = s->assignment;
    t.resource = s->resource;
    t.parent = s->parent;
    t.state = Trial::State::kCompleted;
    t.final_objective = f(t.assignment);
    trials.push_back(t);
  }
  return trials;
}

Trial Finished(int index, Assignment a, double objective) {
  Trial t;
  t.index = index;
  t.assignment = std::move(a);
  t.state = Trial::State::kCompleted;
  t.final_objective = objective;
  return t;
}

// --- validation -------------------------------------------------------------------------------

TEST(ValidateRanges, LogarithmicNeedsPositiveMinimum) {
  Status st = ValidateRanges({Continuous("lr", 0, 1, Scaling::kLogarithmic)});
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("'lr'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("greater than 0"), std::string::npos) << st.message();
  EXPECT_TRUE(ValidateRanges({Continuous("lr", 1e-5, 1, Scaling::kLogarithmic)}).ok());
}

TEST(ValidateRanges, ReverseLogarithmicOnlyForContinuousWithinZeroOne) {
  EXPECT_TRUE(ValidateRanges({Continuous("m", 0, 0.999, Scaling::kReverseLogarithmic)}).ok());
  Status high = ValidateRanges({Continuous("m", 0.5, 1.0, Scaling::kReverseLogarithmic)});
  EXPECT_NE(high.message().find("0 <= x < 1.0"), std::string::npos) << high.message();
  Status integer = ValidateRanges({Integer("k", 0, 0, Scaling::kReverseLogarithmic)});
  EXPECT_EQ(integer.code(), Code::kInvalidArgument);
  Status integer2 = ValidateRanges({Integer("k", 1, 5, Scaling::kReverseLogarithmic)});
  EXPECT_NE(integer2.message().find("not supported for integer"), std::string::npos) << integer2.message();
}

TEST(ValidateRanges, RejectsEmptyOrReversedBoundsFractionsDuplicates) {
  EXPECT_NE(ValidateRanges({Continuous("a", 1, 1)}).message().find("must be less than MaxValue"), std::string::npos);
  EXPECT_NE(ValidateRanges({Integer("a", 1.5, 3)}).message().find("whole numbers"), std::string::npos);
  EXPECT_NE(ValidateRanges({Continuous("a", 0, 1), Categorical("a", {"x"})}).message().find("more than one range"),
            std::string::npos);
  EXPECT_NE(ValidateRanges({Categorical("c", {})}).message().find("1 to 30 values"), std::string::npos);
  EXPECT_NE(ValidateRanges({Categorical("c", {"x", "x"})}).message().find("listed twice"), std::string::npos);
  EXPECT_NE(ValidateRanges({Continuous("", 0, 1)}).message().find("Name must not be empty"), std::string::npos);
  std::vector<Range> many;
  for (int i = 0; i < 31; ++i) many.push_back(Continuous("p" + std::to_string(i), 0, 1));
  EXPECT_NE(ValidateRanges(many).message().find("at most 30"), std::string::npos);
}

TEST(Create, RejectsBadLimitsAndCombinations) {
  SearchConfig c;
  c.strategy = Strategy::kRandom;
  c.ranges = {Continuous("x", 0, 1)};
  c.max_trials = 0;
  EXPECT_NE(Search::Create(c).status().message().find("MaxNumberOfTrainingJobs"), std::string::npos);
  c.max_trials = 5;
  c.max_parallel = 0;
  EXPECT_NE(Search::Create(c).status().message().find("MaxParallelTrainingJobs"), std::string::npos);
  c.max_parallel = 1;
  c.strategy = Strategy::kHyperband;
  c.max_resource = 9;
  c.early_stopping = true;
  EXPECT_NE(Search::Create(c).status().message().find("TrainingJobEarlyStoppingType"), std::string::npos);
  c.early_stopping = false;
  c.min_resource = 10;
  EXPECT_NE(Search::Create(c).status().message().find("MaxResource"), std::string::npos);
}

// --- Grid -------------------------------------------------------------------------------------

TEST(Grid, WalksEveryCombinationInFixedOrderThenIsExhausted) {
  SearchConfig c;
  c.strategy = Strategy::kGrid;
  c.ranges = {Categorical("opt", {"sgd", "adam"}), Categorical("act", {"relu", "tanh", "gelu"})};
  EXPECT_EQ(*GridSize(c.ranges), 6);
  auto s = Make(c);
  std::vector<Trial> trials = RunSequentially(*s, [](const Assignment&) { return 1.0; });
  ASSERT_EQ(trials.size(), 6u);
  // The first range varies slowest.
  EXPECT_EQ(trials[0].assignment, (Assignment{{"opt", "sgd"}, {"act", "relu"}}));
  EXPECT_EQ(trials[1].assignment, (Assignment{{"opt", "sgd"}, {"act", "tanh"}}));
  EXPECT_EQ(trials[3].assignment, (Assignment{{"opt", "adam"}, {"act", "relu"}}));
  EXPECT_EQ(trials[5].assignment, (Assignment{{"opt", "adam"}, {"act", "gelu"}}));
  EXPECT_EQ(s->Complete(trials), Completion::kExhausted);
  EXPECT_FALSE(s->Next(trials).has_value());
}

TEST(Grid, AcceptsOnlyCategoricalRangesAndTheGridSizeAsBudget) {
  SearchConfig c;
  c.strategy = Strategy::kGrid;
  c.ranges = {Categorical("a", {"1", "2"}), Integer("b", 1, 3)};
  EXPECT_NE(Search::Create(c).status().message().find("only categorical"), std::string::npos);
  EXPECT_EQ(*GridSize(c.ranges), 6);  // the count itself walks integers by every whole number
  EXPECT_EQ(GridSize({Continuous("x", 0, 1)}).status().code(), Code::kInvalidArgument);
  c.ranges = {Categorical("a", {"1", "2"}), Categorical("b", {"x", "y"})};
  c.max_trials = 5;
  EXPECT_NE(Search::Create(c).status().message().find("set it to 4"), std::string::npos);
  c.max_trials = 4;
  EXPECT_TRUE(Search::Create(c).ok());
}

TEST(Grid, WarmStartCombinationsAreNotRunAgain) {
  SearchConfig c;
  c.strategy = Strategy::kGrid;
  c.ranges = {Categorical("a", {"1", "2", "3"})};
  auto s = Make(c, {Finished(0, {{"a", "2"}}, 0.5)});
  std::vector<Trial> trials = RunSequentially(*s, [](const Assignment&) { return 1.0; });
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].assignment[0].second, "1");
  EXPECT_EQ(trials[1].assignment[0].second, "3");
  EXPECT_EQ(s->Complete(trials), Completion::kExhausted);
}

// --- Random -----------------------------------------------------------------------------------

TEST(Random, SameInputsGiveTheSameSuggestionInAFreshSearch) {
  SearchConfig c;
  c.strategy = Strategy::kRandom;
  c.seed = 42;
  c.max_trials = 20;
  c.ranges = {Continuous("lr", 1e-4, 1, Scaling::kLogarithmic), Integer("layers", 1, 8), Categorical("o", {"a", "b"})};
  auto a = Make(c);
  std::vector<Trial> trials = RunSequentially(*a, [](const Assignment& x) { return Value(x, "layers"); }, 10);
  auto b = Make(c);
  std::optional<Suggestion> first = a->Next(trials);
  std::optional<Suggestion> second = b->Next(trials);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->assignment, second->assignment);
  c.seed = 43;
  EXPECT_NE(Make(c)->Next(trials)->assignment, first->assignment);
}

TEST(Random, CoversTheSpaceUniformlyUnderItsScaling) {
  SearchConfig c;
  c.strategy = Strategy::kRandom;
  c.seed = 7;
  c.max_trials = 2000;
  c.max_parallel = 2000;
  c.ranges = {Continuous("lin", 0, 10), Continuous("log", 1e-4, 1, Scaling::kLogarithmic),
              Continuous("rev", 0, 0.9999, Scaling::kReverseLogarithmic), Integer("k", 1, 4)};
  auto s = Make(c);
  std::vector<Trial> trials;
  int lin_low = 0, log_low = 0, rev_high = 0;
  std::map<int, int> ks;
  for (int i = 0; i < 2000; ++i) {
    Suggestion g = *s->Next(trials);
    const double lin = Value(g.assignment, "lin"), log = Value(g.assignment, "log"), rev = Value(g.assignment, "rev");
    ASSERT_TRUE(lin >= 0 && lin <= 10 && log >= 1e-4 && log <= 1 && rev >= 0 && rev <= 0.9999);
    lin_low += lin < 5;
    log_low += log < 1e-2;    // half of the decades
    rev_high += rev > 0.99;   // 1 - x in [1e-4, 1e-2): half of the decades
    ++ks[static_cast<int>(Value(g.assignment, "k"))];
    Trial t;
    t.index = i;
    t.assignment = g.assignment;
    trials.push_back(t);  // running: Random does not look at results
  }
  EXPECT_NEAR(lin_low, 1000, 100);
  EXPECT_NEAR(log_low, 1000, 100);
  EXPECT_NEAR(rev_high, 1000, 100);
  ASSERT_EQ(ks.size(), 4u);  // endpoints get a full share, as inner values do
  for (const auto& [k, n] : ks) EXPECT_NEAR(n, 500, 80) << k;
}

TEST(Random, DiscreteSpaceNeverRepeatsAndEndsWhenUsedUp) {
  SearchConfig c;
  c.strategy = Strategy::kRandom;
  c.max_trials = 50;
  c.ranges = {Integer("k", 1, 3), Categorical("o", {"a", "b"})};
  auto s = Make(c);
  std::vector<Trial> trials = RunSequentially(*s, [](const Assignment&) { return 0.0; });
  ASSERT_EQ(trials.size(), 6u);
  std::set<Assignment> distinct;
  for (const Trial& t : trials) distinct.insert(t.assignment);
  EXPECT_EQ(distinct.size(), 6u);
  EXPECT_EQ(s->Complete(trials), Completion::kExhausted);
}

TEST(Random, RespectsMaxParallelAndMaxTrials) {
  SearchConfig c;
  c.strategy = Strategy::kRandom;
  c.max_trials = 3;
  c.max_parallel = 2;
  c.ranges = {Continuous("x", 0, 1)};
  auto s = Make(c);
  std::vector<Trial> trials;
  for (int i = 0; i < 2; ++i) {
    Trial t;
    t.index = i;
    t.assignment = s->Next(trials)->assignment;
    trials.push_back(t);
  }
  EXPECT_FALSE(s->Next(trials).has_value());  // two running
  trials[0].state = Trial::State::kFailed;
  ASSERT_TRUE(s->Next(trials).has_value());
  Trial t;
  t.index = 2;
  trials.push_back(t);
  trials[1].state = Trial::State::kCompleted;
  trials[1].final_objective = 1;
  EXPECT_FALSE(s->Next(trials).has_value());             // three suggested
  EXPECT_EQ(s->Complete(trials), Completion::kNone);     // one still runs
  trials[2].state = Trial::State::kCompleted;
  EXPECT_EQ(s->Complete(trials), Completion::kExhausted);
}

// --- Bayesian ---------------------------------------------------------------------------------

double Quadratic(const Assignment& a) {
  const double x = Value(a, "x"), y = Value(a, "y");
  return (x - 0.3) * (x - 0.3) + (y + 0.5) * (y + 0.5);
}

SearchConfig QuadraticConfig(Strategy strategy, uint64_t seed) {
  SearchConfig c;
  c.strategy = strategy;
  c.goal = Goal::kMinimize;
  c.seed = seed;
  c.max_trials = 25;
  c.ranges = {Continuous("x", -2, 2), Continuous("y", -2, 2)};
  return c;
}

double BestOf(const std::vector<Trial>& trials) {
  double best = INFINITY;
  for (const Trial& t : trials) best = std::min(best, *ObjectiveOf(t));
  return best;
}

TEST(Bayesian, BeatsRandomOnAQuadraticAtEqualBudget) {
  int wins = 0;
  std::vector<double> bayes, random;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const double b = BestOf(RunSequentially(*Make(QuadraticConfig(Strategy::kBayesian, seed)), Quadratic));
    const double r = BestOf(RunSequentially(*Make(QuadraticConfig(Strategy::kRandom, seed)), Quadratic));
    wins += b < r;
    bayes.push_back(b);
    random.push_back(r);
  }
  std::sort(bayes.begin(), bayes.end());
  std::sort(random.begin(), random.end());
  EXPECT_GE(wins, 4);
  EXPECT_LT(bayes[2], 1e-3);              // median regret after 25 trials
  EXPECT_LT(bayes[2] * 10, random[2]);    // an order of magnitude better than random
}

TEST(Bayesian, DeterministicAcrossFreshSearches) {
  SearchConfig c = QuadraticConfig(Strategy::kBayesian, 9);
  std::vector<Trial> trials = RunSequentially(*Make(c), Quadratic, 12);
  ASSERT_EQ(trials.size(), 12u);
  EXPECT_EQ(RunSequentially(*Make(c), Quadratic, 12)[11].assignment, trials[11].assignment);
  auto a = Make(c);
  std::optional<Suggestion> first = a->Next(trials);
  auto b = Make(c);
  EXPECT_EQ(b->Next(trials)->assignment, first->assignment);
  EXPECT_EQ(a->Next(trials)->assignment, first->assignment);
}

TEST(Bayesian, RunningTrialsPushParallelSuggestionsApart) {
  SearchConfig c = QuadraticConfig(Strategy::kBayesian, 3);
  c.max_parallel = 3;
  auto s = Make(c);
  std::vector<Trial> trials = RunSequentially(*s, Quadratic, 10);
  std::optional<Suggestion> first = s->Next(trials);
  Trial running;
  running.index = 10;
  running.assignment = first->assignment;
  trials.push_back(running);
  std::optional<Suggestion> second = s->Next(trials);
  ASSERT_TRUE(second.has_value());
  const double dx = Value(first->assignment, "x") - Value(second->assignment, "x");
  const double dy = Value(first->assignment, "y") - Value(second->assignment, "y");
  EXPECT_GT(std::hypot(dx, dy), 1e-3);
}

TEST(Bayesian, WarmStartChangesTheFirstSuggestionsAndIsNotRepeated) {
  SearchConfig c = QuadraticConfig(Strategy::kBayesian, 4);
  std::vector<Trial> cold = RunSequentially(*Make(c), Quadratic, 6);
  // Warm start: a parent job's 8 trials, around the optimum.
  std::vector<Trial> warm;
  for (int i = 0; i < 8; ++i) {
    Assignment a = {{"x", std::to_string(-1.5 + 0.4 * i)}, {"y", std::to_string(1.5 - 0.45 * i)}};
    warm.push_back(Finished(i, a, Quadratic(a)));
  }
  auto s = Make(c, warm);
  std::vector<Trial> hot = RunSequentially(*s, Quadratic, 6);
  EXPECT_NE(hot[0].assignment, cold[0].assignment);  // no initial design: the model is already fed
  EXPECT_LT(BestOf(hot), 1e-2);
  EXPECT_LT(BestOf(hot), BestOf(cold));
  for (const Trial& t : hot) {
    for (const Trial& w : warm) EXPECT_NE(t.assignment, w.assignment);
  }
}

TEST(Bayesian, HandlesCategoricalAndIntegerRanges) {
  SearchConfig c;
  c.strategy = Strategy::kBayesian;
  c.goal = Goal::kMaximize;
  c.max_trials = 20;
  c.ranges = {Categorical("opt", {"sgd", "adam", "rmsprop"}), Integer("layers", 1, 6),
              Continuous("lr", 1e-4, 1e-1, Scaling::kLogarithmic)};
  auto f = [](const Assignment& a) {
    const double opt = a[0].second == "adam" ? 1.0 : 0.0;
    return opt - std::fabs(Value(a, "layers") - 4) - std::fabs(std::log10(Value(a, "lr")) + 3);
  };
  std::vector<Trial> trials = RunSequentially(*Make(c), f);
  ASSERT_EQ(trials.size(), 20u);
  double best = -INFINITY;
  for (const Trial& t : trials) best = std::max(best, *ObjectiveOf(t));
  EXPECT_GT(best, 0.5);  // found adam, 4 layers and lr near 1e-3
}

TEST(Completion, BayesianConvergesWhenNothingIsLeftToGain) {
  SearchConfig c = QuadraticConfig(Strategy::kBayesian, 5);
  c.max_trials = 40;
  c.complete_on_convergence = true;
  auto s = Make(c);
  // A flat objective: the model expects no improvement anywhere.
  std::vector<Trial> flat = RunSequentially(*s, [](const Assignment&) { return 2.0; });
  EXPECT_LT(flat.size(), 40u);
  EXPECT_EQ(s->Complete(flat), Completion::kConverged);
  // The quadratic after 10 trials still has something to gain.
  std::vector<Trial> early = RunSequentially(*Make(QuadraticConfig(Strategy::kBayesian, 5)), Quadratic, 10);
  EXPECT_EQ(s->Complete(early), Completion::kNone);
}

// --- median stopping rule ---------------------------------------------------------------------

Trial Curve(int index, std::vector<double> values, Trial::State state = Trial::State::kCompleted) {
  Trial t;
  t.index = index;
  t.assignment = {{"x", std::to_string(index)}};
  t.state = state;
  for (size_t e = 0; e < values.size(); ++e) t.intermediate.emplace_back(static_cast<int>(e) + 1, values[e]);
  return t;
}

TEST(MedianRule, StopsATrialWorseThanTheMedianOfEarlierRunningAverages) {
  SearchConfig c;
  c.strategy = Strategy::kRandom;
  c.goal = Goal::kMinimize;
  c.max_trials = 10;
  c.ranges = {Continuous("x", 0, 100)};
  c.early_stopping = true;
  auto s = Make(c);
  // Running averages up to epoch 2: 1.5, 2.5, 3.5 -> median 2.5.
  std::vector<Trial> trials = {Curve(0, {2, 1, 0.5}), Curve(1, {3, 2, 1}), Curve(2, {4, 3})};
  Trial t = Curve(3, {2.0, 2.4}, Trial::State::kRunning);
  trials.push_back(t);
  EXPECT_FALSE(s->ShouldStop(t, trials));  // 2.4 < 2.5
  t.intermediate[1].second = 2.6;
  trials[3] = t;
  EXPECT_TRUE(s->ShouldStop(t, trials));
  // At epoch 3 only two earlier trials got that far: too few for a median.
  t.intermediate.emplace_back(3, 100.0);
  trials[3] = t;
  EXPECT_FALSE(s->ShouldStop(t, trials));
  // Off unless asked for; maximizing flips what worse means.
  c.early_stopping = false;
  t.intermediate.pop_back();
  EXPECT_FALSE(Make(c)->ShouldStop(t, trials));
  c.early_stopping = true;
  c.goal = Goal::kMaximize;
  EXPECT_FALSE(Make(c)->ShouldStop(t, trials));
  t.intermediate[1].second = 2.4;
  EXPECT_TRUE(Make(c)->ShouldStop(t, trials));
}

TEST(MedianRule, WarmStartCurvesCount) {
  SearchConfig c;
  c.strategy = Strategy::kBayesian;
  c.goal = Goal::kMinimize;
  c.max_trials = 10;
  c.ranges = {Continuous("x", 0, 100)};
  c.early_stopping = true;
  Trial t = Curve(0, {5.0}, Trial::State::kRunning);
  EXPECT_FALSE(Make(c)->ShouldStop(t, {t}));
  auto s = Make(c, {Curve(0, {1}), Curve(1, {2}), Curve(2, {3})});
  EXPECT_TRUE(s->ShouldStop(t, {t}));
}

// --- Hyperband --------------------------------------------------------------------------------

SearchConfig HyperbandConfig() {
  SearchConfig c;
  c.strategy = Strategy::kHyperband;
  c.goal = Goal::kMinimize;
  c.max_trials = 100;
  c.max_parallel = 100;
  c.min_resource = 1;
  c.max_resource = 9;  // rungs 1, 3, 9
  c.ranges = {Continuous("x", 0, 1)};
  return c;
}

TEST(Hyperband, FreshTrialsGetMaxResourceAndStopAtARungOutsideTheTopThird) {
  auto s = Make(HyperbandConfig());
  std::vector<Trial> trials;
  // Trials land in brackets by a fixed schedule; look at those of bracket 0 (first rung 1),
  // recognisable as the ones stopped at epoch 1 when they are the worst there.
  for (int i = 0; i < 40; ++i) {
    std::optional<Suggestion> g = s->Next(trials);
    ASSERT_TRUE(g.has_value());
    EXPECT_EQ(g->resource, 9);
    EXPECT_EQ(g->parent, -1);
    Trial t;
    t.index = i;
    t.assignment = g->assignment;
    t.resource = g->resource;
    trials.push_back(t);
  }
  // Everyone reports epoch 1 with loss = index: the early ones are best.
  for (Trial& t : trials) t.intermediate = {{1, static_cast<double>(t.index)}};
  int stopped = 0, continued = 0;
  for (const Trial& t : trials) {
    if (s->ShouldStop(t, trials)) {
      ++stopped;
      EXPECT_GT(t.index, 3);  // the best few of a rung continue
    } else {
      ++continued;
    }
  }
  EXPECT_GT(stopped, 10);
  EXPECT_GT(continued, 5);
}

TEST(Hyperband, AStoppedTrialThatEntersTheTopThirdIsPromotedFromItsCheckpoint) {
  SearchConfig c = HyperbandConfig();
  c.max_parallel = 1;
  auto s = Make(c);
  std::vector<Trial> trials;
  // Run trials one at a time; each reports epoch 1, is stopped if ShouldStop says so, else runs to 9.
  // Losses at epoch 1 decrease then one late trial is bad, so early stopped trials climb the ranks.
  const std::vector<double> loss1 = {5, 6, 7, 8, 9, 10, 11, 12, 13, 1, 0.5, 0.7, 0.8, 0.9, 0.6};
  int promotions = 0;
  for (size_t i = 0; i < 40 && promotions == 0; ++i) {
    std::optional<Suggestion> g = s->Next(trials);
    ASSERT_TRUE(g.has_value());
    Trial t;
    t.index = static_cast<int>(trials.size());
    t.assignment = g->assignment;
    t.resource = g->resource;
    t.parent = g->parent;
    if (g->parent >= 0) {
      ++promotions;
      const Trial& p = trials[static_cast<size_t>(g->parent)];
      EXPECT_TRUE(p.stopped_early);
      EXPECT_EQ(t.assignment, p.assignment);
      EXPECT_EQ(g->resource, 3);  // the rung after the one it stopped at
      break;
    }
    const double l = loss1[std::min(i, loss1.size() - 1)] + (i >= loss1.size() ? 100.0 + i : 0.0);
    t.intermediate = {{1, l}};
    trials.push_back(t);
    if (s->ShouldStop(trials.back(), trials)) {
      trials.back().state = Trial::State::kStopped;
      trials.back().stopped_early = true;
    } else {
      trials.back().intermediate.emplace_back(3, l);
      trials.back().intermediate.emplace_back(9, l);
      trials.back().state = Trial::State::kCompleted;
    }
  }
  EXPECT_EQ(promotions, 1);
}

TEST(Hyperband, PromotedTrialsAreNotStoppedBeforeTheirRungAndCountOnlyAboveIt) {
  auto s = Make(HyperbandConfig());
  // A lineage: trial 0 stopped at 1, trial 1 promoted from it to rung 3.
  Trial parent = Curve(0, {0.5});
  parent.state = Trial::State::kStopped;
  parent.stopped_early = true;
  parent.resource = 9;
  Trial child;
  child.index = 1;
  child.assignment = parent.assignment;
  child.parent = 0;
  child.resource = 3;
  child.intermediate = {{2, 0.4}};
  std::vector<Trial> trials = {parent, child};
  EXPECT_FALSE(s->ShouldStop(child, trials));  // below its own rung
  trials[1].intermediate.emplace_back(3, 0.3);
  EXPECT_FALSE(s->ShouldStop(trials[1], trials));  // rung 3 is its resource: it simply completes
}

TEST(Hyperband, RejectsEarlyStoppingAndCountsWarmStartAtEveryRung) {
  SearchConfig c = HyperbandConfig();
  Trial t = Curve(0, {5.0}, Trial::State::kRunning);
  t.resource = 9;
  // Alone, a trial passes its rung; with warm-start curves that were all better at epoch 1, the
  // schedule's bracket-0 trial 0 stops there.
  EXPECT_FALSE(Make(c)->ShouldStop(t, {t}));
  EXPECT_TRUE(Make(c, {Curve(0, {1, 1, 1}), Curve(1, {2, 2, 2})})->ShouldStop(t, {t}));
}

// --- completion -------------------------------------------------------------------------------

TEST(Completion, TargetReachedFollowsTheGoal) {
  SearchConfig c;
  c.strategy = Strategy::kRandom;
  c.max_trials = 10;
  c.ranges = {Continuous("x", 0, 1)};
  c.target_objective = 0.9;
  c.goal = Goal::kMaximize;
  std::vector<Trial> trials = {Finished(0, {{"x", "0.1"}}, 0.5)};
  EXPECT_EQ(Make(c)->Complete(trials), Completion::kNone);
  trials.push_back(Finished(1, {{"x", "0.2"}}, 0.95));
  EXPECT_EQ(Make(c)->Complete(trials), Completion::kTargetReached);
  EXPECT_FALSE(Make(c)->Next(trials).has_value());
  c.goal = Goal::kMinimize;
  EXPECT_EQ(Make(c)->Complete(trials), Completion::kTargetReached);  // 0.5 <= 0.9
  c.target_objective = 0.4;
  EXPECT_EQ(Make(c)->Complete(trials), Completion::kNone);
}

TEST(Completion, BestNotImprovingOverTheLastNFinishedTrials) {
  SearchConfig c;
  c.strategy = Strategy::kRandom;
  c.max_trials = 10;
  c.goal = Goal::kMinimize;
  c.ranges = {Continuous("x", 0, 1)};
  c.best_not_improving = 2;
  auto s = Make(c);
  std::vector<Trial> trials = {Finished(0, {{"x", "0.1"}}, 5), Finished(1, {{"x", "0.2"}}, 3)};
  EXPECT_EQ(s->Complete(trials), Completion::kNone);
  trials.push_back(Finished(2, {{"x", "0.3"}}, 4));
  EXPECT_EQ(s->Complete(trials), Completion::kNone);  // only one trial since the best
  Trial failed;
  failed.index = 3;
  failed.state = Trial::State::kFailed;
  trials.push_back(failed);  // a failed trial has no objective and does not count
  EXPECT_EQ(s->Complete(trials), Completion::kNone);
  trials.push_back(Finished(4, {{"x", "0.4"}}, 3));  // equal is not an improvement
  EXPECT_EQ(s->Complete(trials), Completion::kBestNotImproving);
}

TEST(Completion, RandomAndGridNeverConverge) {
  SearchConfig c;
  c.strategy = Strategy::kRandom;
  c.max_trials = 40;
  c.ranges = {Continuous("x", 0, 1)};
  c.complete_on_convergence = true;
  auto s = Make(c);
  std::vector<Trial> trials = RunSequentially(*s, [](const Assignment&) { return 1.0; }, 30);
  EXPECT_EQ(s->Complete(trials), Completion::kNone);
}

TEST(ObjectiveOf, FinalValueElseLastIntermediateNeverForRunningOrFailed) {
  Trial t;
  t.intermediate = {{1, 0.3}, {2, 0.2}};
  EXPECT_FALSE(ObjectiveOf(t).has_value());
  t.state = Trial::State::kStopped;
  EXPECT_EQ(*ObjectiveOf(t), 0.2);
  t.final_objective = 0.25;
  EXPECT_EQ(*ObjectiveOf(t), 0.25);
  t.state = Trial::State::kFailed;
  EXPECT_FALSE(ObjectiveOf(t).has_value());
}

}  // namespace
}  // namespace ty::tune
