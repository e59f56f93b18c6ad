// tuning_bench: the search strategies of src/tune on Branin (2-D) and Hartmann-6 (6-D), minimized,
// over many seeds at equal budgets, in virtual time (no processes: each epoch of a trial is one
// evaluation of a learning curve that converges to the function's value). See bench/README.md,
// "Hyperparameter tuning".
//
//   tuning_bench [--seeds N] [--trials N] [--out DIR]
#include <algorithm>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "tune/search.h"

namespace {

using ty::tune::Assignment;
using ty::tune::Range;
using ty::tune::Search;
using ty::tune::SearchConfig;
using ty::tune::Strategy;
using ty::tune::Suggestion;
using ty::tune::Trial;

constexpr int kMaxResource = 27;  // epochs of a full trial; Hyperband rungs 1, 3, 9, 27
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Function {
  std::string name;
  std::vector<Range> ranges;
  std::function<double(const std::vector<double>&)> f;
  double minimum;
  double curve_scale;  // how far above its final value a learning curve starts
};

double Branin(const std::vector<double>& x) {
  const double a = 1, b = 5.1 / (4 * M_PI * M_PI), c = 5 / M_PI, r = 6, s = 10, t = 1 / (8 * M_PI);
  return a * std::pow(x[1] - b * x[0] * x[0] + c * x[0] - r, 2) + s * (1 - t) * std::cos(x[0]) + s;
}

double Hartmann6(const std::vector<double>& x) {
  static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
  static const double A[4][6] = {{10, 3, 17, 3.5, 1.7, 8}, {0.05, 10, 17, 0.1, 8, 14},
                                 {3, 3.5, 1.7, 10, 17, 8}, {17, 8, 0.05, 10, 0.1, 14}};
  static const double P[4][6] = {{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
                                 {0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
                                 {0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
                                 {0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381}};
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 6; ++j) inner += A[i][j] * (x[j] - P[i][j]) * (x[j] - P[i][j]);
    sum += alpha[i] * std::exp(-inner);
  }
  return -sum;
}

Range Continuous(std::string name, double lo, double hi) {
  Range r;
  r.name = std::move(name);
  r.kind = Range::Kind::kContinuous;
  r.min = lo;
  r.max = hi;
  return r;
}

std::vector<double> Decode(const Assignment& a) {
  std::vector<double> x;
  for (const auto& [name, v] : a) x.push_back(std::stod(v));
  return x;
}

// A deterministic hash of a point to [0, 1): the per-configuration part of its learning curve.
double Hash01(const std::vector<double>& x, uint64_t salt) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ salt;
  for (double v : x) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    h ^= bits + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 31;
  }
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

// The objective a trial reports after `epoch` epochs: its function value plus a decaying offset
// whose speed differs per configuration (so curves cross and early ranks mislead a little), plus
// noise shrinking with the epochs.
double LearningCurve(const Function& fn, const std::vector<double>& x, int epoch) {
  const double speed = 0.6 + 0.8 * Hash01(x, 1);
  const double offset = fn.curve_scale * std::exp(-4.0 * speed * epoch / kMaxResource);
  const double noise = fn.curve_scale * 0.02 * std::exp(-2.0 * epoch / kMaxResource) * (2 * Hash01(x, 100 + epoch) - 1);
  return fn.f(x) + offset + noise;
}

struct Run {
  std::vector<double> regret_by_trial;                 // best full-resource regret among trials 0..k
  std::vector<std::pair<double, double>> by_resource;  // (epochs used, best regret so far) at each full trial's end
  double epochs = 0;
};

// Plays one search to its end in virtual time: each step starts what Next allows, then advances
// every running trial by one epoch (asking ShouldStop after each report).
Run Play(const Function& fn, SearchConfig config, double epoch_budget) {
  std::unique_ptr<Search> search = std::move(Search::Create(config)).value();
  std::vector<Trial> trials;
  std::vector<double> full_regret;  // per trial: regret if it reached kMaxResource, else inf
  Run run;
  double best = kInf;
  for (;;) {
    while (run.epochs < epoch_budget) {
      std::optional<Suggestion> g = search->Next(trials);
      if (!g) break;
      Trial t;
      t.index = static_cast<int>(trials.size());
      t.assignment = g->assignment;
      t.resource = g->resource > 0 ? g->resource : kMaxResource;
      t.parent = g->parent;
      if (g->parent >= 0) t.intermediate = trials[static_cast<size_t>(g->parent)].intermediate;  // the checkpoint
      trials.push_back(t);
      full_regret.push_back(kInf);
    }
    bool any = false;
    for (Trial& t : trials) {
      if (t.state != Trial::State::kRunning) continue;
      any = true;
      const int epoch = t.intermediate.empty() ? 1 : t.intermediate.back().first + 1;
      const std::vector<double> x = Decode(t.assignment);
      const double v = LearningCurve(fn, x, epoch);
      t.intermediate.emplace_back(epoch, v);
      run.epochs += 1;
      if (epoch >= t.resource) {
        t.state = Trial::State::kCompleted;
        t.final_objective = v;
        if (epoch >= kMaxResource) {
          full_regret[static_cast<size_t>(t.index)] = fn.f(x) - fn.minimum;
          best = std::min(best, full_regret[static_cast<size_t>(t.index)]);
          run.by_resource.emplace_back(run.epochs, best);
        }
      } else if (search->ShouldStop(t, trials)) {
        t.state = Trial::State::kStopped;
        t.stopped_early = true;
      }
    }
    if (!any) break;
  }
  double prefix = kInf;
  for (double r : full_regret) {
    prefix = std::min(prefix, r);
    run.regret_by_trial.push_back(prefix);
  }
  return run;
}

double Median(std::vector<double> v) {
  if (v.empty()) return kInf;
  std::sort(v.begin(), v.end());
  const size_t m = v.size();
  return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

// Median over seeds of the best regret after k trials.
std::vector<double> MedianByTrial(const std::vector<Run>& runs, int trials) {
  std::vector<double> out;
  for (int k = 0; k < trials; ++k) {
    std::vector<double> at;
    for (const Run& r : runs) at.push_back(k < static_cast<int>(r.regret_by_trial.size()) ? r.regret_by_trial[k] : r.regret_by_trial.back());
    out.push_back(Median(at));
  }
  return out;
}

// Best regret of a run once `epochs` were used.
double RegretAt(const Run& r, double epochs) {
  double best = kInf;
  for (const auto& [e, g] : r.by_resource) {
    if (e > epochs) break;
    best = g;
  }
  return best;
}

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> points;
};

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A line plot with a log-scale y axis, written as SVG.
std::string Plot(const std::string& title, const std::string& xlabel, double xmax, const std::vector<Series>& series) {
  const double W = 900, H = 480, L = 80, R = 210, T = 40, B = 50, pw = W - L - R, ph = H - T - B;
  double ymin = kInf, ymax = 0;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      if (std::isfinite(y) && y > 0) {
        ymin = std::min(ymin, y);
        ymax = std::max(ymax, y);
      }
    }
  }
  const double lo = std::floor(std::log10(std::max(ymin, 1e-9))), hi = std::ceil(std::log10(std::max(ymax, 1e-9)));
  auto X = [&](double x) { return L + pw * std::clamp(x / xmax, 0.0, 1.0); };
  auto Y = [&](double y) {
    const double f = (std::log10(std::max(y, 1e-12)) - lo) / std::max(hi - lo, 1.0);
    return T + ph * (1 - std::clamp(f, 0.0, 1.0));
  };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"480\" viewBox=\"0 0 900 480\" "
                  "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"900\" height=\"480\" fill=\"white\"/>\n";
  s += "<text x=\"" + Fixed(L, 0) + "\" y=\"24\" font-size=\"15\">" + title + "</text>\n";
  s += "<rect x=\"" + Fixed(L, 1) + "\" y=\"" + Fixed(T, 1) + "\" width=\"" + Fixed(pw, 1) + "\" height=\"" + Fixed(ph, 1) +
       "\" fill=\"none\" stroke=\"#333\"/>\n";
  for (double e = lo; e <= hi; e += 1) {
    const double y = Y(std::pow(10, e));
    s += "<line x1=\"" + Fixed(L, 1) + "\" x2=\"" + Fixed(L + pw, 1) + "\" y1=\"" + Fixed(y, 1) + "\" y2=\"" + Fixed(y, 1) +
         "\" stroke=\"#ddd\"/>\n<text x=\"" + Fixed(L - 6, 1) + "\" y=\"" + Fixed(y + 4, 1) +
         "\" text-anchor=\"end\">1e" + Fixed(e, 0) + "</text>\n";
  }
  for (int k = 0; k <= 5; ++k) {
    const double v = xmax * k / 5, x = X(v);
    s += "<text x=\"" + Fixed(x, 1) + "\" y=\"" + Fixed(T + ph + 18, 1) + "\" text-anchor=\"middle\">" + Fixed(v, 0) +
         "</text>\n";
  }
  s += "<text x=\"" + Fixed(L + pw / 2, 1) + "\" y=\"" + Fixed(H - 10, 1) + "\" text-anchor=\"middle\">" + xlabel +
       "</text>\n<text transform=\"translate(18," + Fixed(T + ph / 2, 1) +
       ") rotate(-90)\" text-anchor=\"middle\">median best regret (log)</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& se = series[k];
    s += "<polyline fill=\"none\" stroke=\"" + se.color + "\" stroke-width=\"1.5\" points=\"";
    bool first = true;
    for (const auto& [x, y] : se.points) {
      if (!std::isfinite(y)) continue;
      s += (first ? "" : " ") + Fixed(X(x), 1) + "," + Fixed(Y(y), 1);
      first = false;
    }
    s += "\"/>\n";
    const double ly = T + 10 + 16 * static_cast<double>(k);
    s += "<line x1=\"" + Fixed(L + pw + 12, 1) + "\" x2=\"" + Fixed(L + pw + 36, 1) + "\" y1=\"" + Fixed(ly, 1) + "\" y2=\"" +
         Fixed(ly, 1) + "\" stroke=\"" + se.color + "\" stroke-width=\"2\"/>\n<text x=\"" + Fixed(L + pw + 40, 1) +
         "\" y=\"" + Fixed(ly + 4, 1) + "\">" + se.name + "</text>\n";
  }
  return s + "</svg>\n";
}

std::string Cell(double v) { return std::isfinite(v) ? (v == std::floor(v) ? Fixed(v, 0) : Fixed(v, v < 0.01 ? 5 : 3)) : "never"; }

}  // namespace

int main(int argc, char** argv) {
  int seeds = 30, budget = 50;
  std::string out = "bench/results/tuning";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: tuning_bench [--seeds N (30)] [--trials N (50)] [--out DIR (bench/results/tuning)]\n"
                  "Compares Random, Bayesian (max_parallel 1 and 4) and Hyperband on Branin and Hartmann-6\n"
                  "in virtual time; prints a markdown report and writes SVG regret plots to DIR.\n");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "tuning_bench: %s needs a value (see --help)\n", a.c_str());
      return 2;
    }
    if (a == "--seeds") seeds = std::atoi(argv[++i]);
    else if (a == "--trials") budget = std::atoi(argv[++i]);
    else if (a == "--out") out = argv[++i];
    else {
      std::fprintf(stderr, "tuning_bench: unknown option %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (seeds < 1 || budget < 2) {
    std::fprintf(stderr, "tuning_bench: --seeds must be >= 1 and --trials >= 2\n");
    return 2;
  }
  std::filesystem::create_directories(out);
  const std::vector<Function> functions = {
      {"branin", {Continuous("x1", -5, 10), Continuous("x2", 0, 15)}, Branin, 0.397887357729738, 20.0},
      {"hartmann6",
       {Continuous("x1", 0, 1), Continuous("x2", 0, 1), Continuous("x3", 0, 1), Continuous("x4", 0, 1),
        Continuous("x5", 0, 1), Continuous("x6", 0, 1)},
       Hartmann6, -3.32236801141551, 1.0},
  };
  struct Arm {
    std::string name, color;
    Strategy strategy;
    int parallel;
  };
  const std::vector<Arm> arms = {{"Random p1", "#888888", Strategy::kRandom, 1},
                                 {"Random p4", "#bbbbbb", Strategy::kRandom, 4},
                                 {"Bayesian p1", "#1f77b4", Strategy::kBayesian, 1},
                                 {"Bayesian p4", "#17becf", Strategy::kBayesian, 4},
                                 {"Hyperband p4", "#d62728", Strategy::kHyperband, 4}};
  const double epoch_budget = static_cast<double>(budget) * kMaxResource;
  std::printf("# tuning_bench: %d seeds, %d trials of %d epochs (Hyperband: the same %g epochs)\n\n", seeds, budget,
              kMaxResource, epoch_budget);
  for (const Function& fn : functions) {
    std::map<std::string, std::vector<Run>> runs;
    for (const Arm& arm : arms) {
      for (int seed = 0; seed < seeds; ++seed) {
        SearchConfig c;
        c.strategy = arm.strategy;
        c.goal = ty::tune::Goal::kMinimize;
        c.ranges = fn.ranges;
        c.seed = static_cast<uint64_t>(seed) + 1;
        c.max_parallel = arm.parallel;
        c.max_trials = arm.strategy == Strategy::kHyperband ? 20 * budget : budget;
        c.min_resource = 1;
        c.max_resource = kMaxResource;
        runs[arm.name].push_back(Play(fn, c, arm.strategy == Strategy::kHyperband ? epoch_budget : kInf));
      }
    }
    std::printf("## %s\n\nMedian best regret after k trials (trials that ran all %d epochs):\n\n| k |", fn.name.c_str(),
                kMaxResource);
    for (const Arm& arm : arms) {
      if (arm.strategy != Strategy::kHyperband) std::printf(" %s |", arm.name.c_str());
    }
    std::printf("\n|---|");
    for (size_t i = 0; i + 1 < arms.size(); ++i) std::printf("---|");
    std::printf("\n");
    std::map<std::string, std::vector<double>> curves;
    for (const Arm& arm : arms) curves[arm.name] = MedianByTrial(runs[arm.name], arm.strategy == Strategy::kHyperband ? 20 * budget : budget);
    for (int k : {5, 10, 15, 20, 25, 30, 40, 50}) {
      if (k > budget) continue;
      std::printf("| %d |", k);
      for (const Arm& arm : arms) {
        if (arm.strategy != Strategy::kHyperband) std::printf(" %s |", Cell(curves[arm.name][static_cast<size_t>(k - 1)]).c_str());
      }
      std::printf("\n");
    }
    // Trials Bayesian needs to reach Random's final median regret.
    for (int p : {1, 4}) {
      const std::string rnd = "Random p" + std::to_string(p), bay = "Bayesian p" + std::to_string(p);
      const double target = curves[rnd][static_cast<size_t>(budget - 1)];
      int need = -1;
      for (int k = 0; k < budget; ++k) {
        if (curves[bay][static_cast<size_t>(k)] <= target) {
          need = k + 1;
          break;
        }
      }
      std::printf("\n%s reaches %s's final median regret (%s) after %s trials of %d (goal: <= %d).", bay.c_str(),
                  rnd.c_str(), Cell(target).c_str(), need < 0 ? "never within the" : std::to_string(need).c_str(), budget,
                  budget / 2);
    }
    // Resource: the epochs at which the median (over seeds) best regret first reaches Random p4's
    // final median regret.
    const double target = curves["Random p4"][static_cast<size_t>(budget - 1)];
    auto epochs_to = [&](const std::string& name) {
      for (int e = 1; e <= static_cast<int>(epoch_budget); ++e) {
        std::vector<double> at;
        for (const Run& r : runs[name]) at.push_back(RegretAt(r, e));
        if (Median(at) <= target) return static_cast<double>(e);
      }
      return kInf;
    };
    const double re = epochs_to("Random p4"), he = epochs_to("Hyperband p4");
    std::printf("\nEpochs at which the median best regret reaches Random p4's final median regret (%s): Random %s, "
                "Hyperband %s (ratio %s; goal: <= 0.5).\n",
                Cell(target).c_str(), Cell(re).c_str(), Cell(he).c_str(),
                std::isfinite(re) && std::isfinite(he) ? Fixed(he / re, 2).c_str() : "n/a");
    double hb_trials = 0;
    for (const Run& r : runs["Hyperband p4"]) hb_trials += static_cast<double>(r.regret_by_trial.size());
    std::printf("Hyperband started %.0f trials on average within the %g epochs (promotions included).\n\n",
                hb_trials / seeds, epoch_budget);

    std::vector<Series> by_trial, by_epoch;
    for (const Arm& arm : arms) {
      if (arm.strategy == Strategy::kHyperband) continue;
      Series s{arm.name, arm.color, {}};
      for (int k = 0; k < budget; ++k) s.points.emplace_back(k + 1, curves[arm.name][static_cast<size_t>(k)]);
      by_trial.push_back(s);
    }
    for (const std::string name : {"Random p4", "Hyperband p4"}) {
      Series s{name, name[0] == 'R' ? "#888888" : "#d62728", {}};
      for (int step = 1; step <= 100; ++step) {
        const double e = epoch_budget * step / 100;
        std::vector<double> at;
        for (const Run& r : runs[name]) at.push_back(RegretAt(r, e));
        s.points.emplace_back(e, Median(at));
      }
      by_epoch.push_back(s);
    }
    std::ofstream(out + "/" + fn.name + "_trials.svg")
        << Plot(fn.name + ": median best regret vs trials (" + std::to_string(seeds) + " seeds)", "trials", budget, by_trial);
    std::ofstream(out + "/" + fn.name + "_epochs.svg")
        << Plot(fn.name + ": median best regret vs epochs used (" + std::to_string(seeds) + " seeds)", "epochs",
                epoch_budget, by_epoch);
  }
  return 0;
}
