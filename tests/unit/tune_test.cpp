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
