// The outputs of a simulation: summary.json, jobs.csv and three SVG plots, all byte-identical
// for the same inputs (ordered keys, fixed number formats, no clock).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sim/sim.h"

namespace ty::sim {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr int kPlotBuckets = 500;
constexpr size_t kPlottedTeams = 8;
const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                               "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

// Six decimals, so that the JSON shows no float noise.
double Round6(double x) { return std::round(x * 1e6) / 1e6; }

std::string Fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

// Nearest-rank percentile of sorted values; null when there are none.
ordered_json Percentile(const std::vector<int64_t>& sorted, int p) {
  if (sorted.empty()) return nullptr;
  size_t rank = (static_cast<size_t>(p) * sorted.size() + 99) / 100;
  return sorted[std::max<size_t>(rank, 1) - 1];
}

// Each team's entitlement at one instant: the capacity split among the teams that want some
// (held + waiting > 0) in proportion to their weights, no team above what it wants, and what a
// team leaves over split again among the others (weighted max-min fairness).
std::vector<double> Entitlement(const std::vector<double>& weight, const std::vector<int32_t>& demand, double capacity) {
  std::vector<double> ent(demand.size(), 0.0);
  std::vector<size_t> open;
  for (size_t i = 0; i < demand.size(); ++i)
    if (demand[i] > 0 && weight[i] > 0) open.push_back(i);
  double left = capacity;
  while (!open.empty()) {
    double total = 0;
    for (size_t i : open) total += weight[i];
    std::vector<size_t> still;
    double given = 0;
    for (size_t i : open) {
      if (demand[i] <= left * weight[i] / total) {
        ent[i] = demand[i];
        given += demand[i];
      } else {
        still.push_back(i);
      }
    }
    if (given == 0) {
      for (size_t i : open) ent[i] = left * weight[i] / total;
      break;
    }
    left -= given;
    open = std::move(still);
  }
  return ent;
}

// The weight of every team for its entitlement at one instant (see docs/simulate.md): its
// share's weight split evenly among the share's teams that want GPUs then.
class Weights {
 public:
  Weights(const ClusterSpec& c, const std::vector<std::string>& teams) : share_of_(teams.size()) {
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < teams.size(); ++i) {
      const std::string share = c.TeamOf(teams[i]).share;
      auto [it, added] = index.try_emplace(share, share_weight_.size());
      if (added) {
        auto spec = c.shares.find(share);
        share_weight_.push_back(c.policy == Policy::kFifo        ? 0.0  // per team instead
                                : c.policy == Policy::kFairShare ? 1.0 / (spec == c.shares.end() ? 1.0 : spec->second.weight_factor)
                                                                 : static_cast<double>(spec->second.gpus));
      }
      share_of_[i] = it->second;
    }
    fifo_ = c.policy == Policy::kFifo;
  }

  std::vector<double> At(const std::vector<int32_t>& demand) const {
    std::vector<int> active(share_weight_.size(), 0);
    for (size_t i = 0; i < demand.size(); ++i)
      if (demand[i] > 0) ++active[share_of_[i]];
    std::vector<double> w(demand.size(), 0.0);
    for (size_t i = 0; i < demand.size(); ++i)
      if (demand[i] > 0) w[i] = fifo_ ? 1.0 : share_weight_[share_of_[i]] / active[share_of_[i]];
    return w;
  }

 private:
  std::vector<size_t> share_of_;
  std::vector<double> share_weight_;
  bool fifo_ = false;
};

// Time-averages of a step function over equal buckets of [t0, t1).
class Buckets {
 public:
  Buckets(int64_t t0, int64_t t1) : t0_(t0), width_(std::max<double>(1.0, static_cast<double>(t1 - t0)) / kPlotBuckets) {
    sum_.assign(kPlotBuckets, 0.0);
  }
  void Add(int64_t a, int64_t b, double value) {
    double x = static_cast<double>(a - t0_), end = static_cast<double>(b - t0_);
    while (x < end) {
      int k = std::min(kPlotBuckets - 1, static_cast<int>(x / width_));
      double edge = std::min(end, (k + 1) * width_);
      if (edge <= x) edge = end;  // the last bucket takes any rounding rest
      sum_[static_cast<size_t>(k)] += value * (edge - x);
      x = edge;
    }
  }
  std::vector<std::pair<double, double>> Points() const {  // (days since t0, average)
    std::vector<std::pair<double, double>> out;
    for (int k = 0; k < kPlotBuckets; ++k)
      out.emplace_back((k + 0.5) * width_ / 86400.0, sum_[static_cast<size_t>(k)] / width_);
    return out;
  }

 private:
  int64_t t0_;
  double width_;
  std::vector<double> sum_;
};

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

struct Series {
  std::string name;
  std::string color;
  bool dashed = false;
  std::vector<std::pair<double, double>> points;
};

// A line chart, drawn by hand (no plotting library): axes, ticks, a legend, polylines.
std::string Chart(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                  const std::vector<Series>& series, double xmax, double ymax, bool log_x) {
  const double W = 900, H = 480, L = 70, R = 190, T = 40, B = 50;
  const double pw = W - L - R, ph = H - T - B;
  xmax = std::max(xmax, log_x ? 10.0 : 1e-9);
  ymax = std::max(ymax, 1e-9);
  auto X = [&](double x) {
    double f = log_x ? std::log10(std::max(1.0, x)) / std::log10(xmax) : x / xmax;
    return L + pw * std::clamp(f, 0.0, 1.0);
  };
  auto Y = [&](double y) { return T + ph * (1.0 - std::clamp(y / ymax, 0.0, 1.0)); };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"480\" viewBox=\"0 0 900 480\" "
                  "font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"900\" height=\"480\" fill=\"white\"/>\n";
  s += "<text x=\"" + Fixed(L, 0) + "\" y=\"24\" font-size=\"15\">" + XmlEscape(title) + "</text>\n";
  s += "<rect x=\"" + Fixed(L, 1) + "\" y=\"" + Fixed(T, 1) + "\" width=\"" + Fixed(pw, 1) + "\" height=\"" + Fixed(ph, 1) +
       "\" fill=\"none\" stroke=\"#333\"/>\n";
  for (int k = 0; k <= 5; ++k) {  // y ticks
    double v = ymax * k / 5, y = Y(v);
    s += "<line x1=\"" + Fixed(L, 1) + "\" x2=\"" + Fixed(L + pw, 1) + "\" y1=\"" + Fixed(y, 1) + "\" y2=\"" + Fixed(y, 1) +
         "\" stroke=\"#ddd\"/>\n";
    s += "<text x=\"" + Fixed(L - 6, 1) + "\" y=\"" + Fixed(y + 4, 1) + "\" text-anchor=\"end\">" +
         Fixed(v, ymax < 10 ? 2 : 0) + "</text>\n";
  }
  std::vector<double> xticks;
  if (log_x) {
    for (double v = 1; v <= xmax * 1.0001; v *= 10) xticks.push_back(v);
  } else {
    for (int k = 0; k <= 5; ++k) xticks.push_back(xmax * k / 5);
  }
  for (double v : xticks) {
    double x = X(v);
    s += "<line x1=\"" + Fixed(x, 1) + "\" x2=\"" + Fixed(x, 1) + "\" y1=\"" + Fixed(T + ph, 1) + "\" y2=\"" +
         Fixed(T + ph + 5, 1) + "\" stroke=\"#333\"/>\n";
    s += "<text x=\"" + Fixed(x, 1) + "\" y=\"" + Fixed(T + ph + 18, 1) + "\" text-anchor=\"middle\">" +
         (log_x ? Fixed(v, 0) : Fixed(v, xmax < 10 ? 2 : 0)) + "</text>\n";
  }
  s += "<text x=\"" + Fixed(L + pw / 2, 1) + "\" y=\"" + Fixed(H - 10, 1) + "\" text-anchor=\"middle\">" + xlabel + "</text>\n";
  s += "<text transform=\"translate(16," + Fixed(T + ph / 2, 1) + ") rotate(-90)\" text-anchor=\"middle\">" + ylabel +
       "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& se = series[k];
    s += "<polyline fill=\"none\" stroke=\"" + se.color + "\" stroke-width=\"1.5\"" +
         (se.dashed ? " stroke-dasharray=\"5,3\"" : "") + " points=\"";
    for (size_t p = 0; p < se.points.size(); ++p)
      s += (p ? " " : "") + Fixed(X(se.points[p].first), 1) + "," + Fixed(Y(se.points[p].second), 1);
    s += "\"/>\n";
    double ly = T + 10 + 16 * static_cast<double>(k);
    s += "<line x1=\"" + Fixed(L + pw + 12, 1) + "\" x2=\"" + Fixed(L + pw + 36, 1) + "\" y1=\"" + Fixed(ly, 1) +
         "\" y2=\"" + Fixed(ly, 1) + "\" stroke=\"" + se.color + "\" stroke-width=\"2\"" +
         (se.dashed ? " stroke-dasharray=\"5,3\"" : "") + "/>\n";
    s += "<text x=\"" + Fixed(L + pw + 40, 1) + "\" y=\"" + Fixed(ly + 4, 1) + "\">" + XmlEscape(se.name) + "</text>\n";
  }
  s += "</svg>\n";
  return s;
}

Status WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Internal("cannot write " + path.string());
  out << text;
  out.close();
  if (!out) return Internal("cannot write " + path.string());
  return Status::Ok();
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

const char* PolicyName(Policy p) {
  return p == Policy::kFifo ? "fifo" : p == Policy::kFairShare ? "fair_share" : "quota";
}

}  // namespace

Status WriteOutputs(const ClusterSpec& c, const std::vector<TraceJob>& trace, const Result& r, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir + ": " + ec.message());
  const size_t nt = r.teams.size();
  const int64_t t0 = trace.empty() ? 0 : trace.front().submit_s;
  int64_t t_end = t0;
  for (const auto& j : r.jobs) t_end = std::max(t_end, j.end_s);
  const int64_t makespan = t_end - t0;

  // Per team: received and entitled GPU-seconds from the timeline.
  std::vector<double> entitled(nt, 0.0);
  const Weights weights(c, r.teams);
  Buckets util(t0, t_end);
  // While some GPUs are wanted and not held (a job waits): GPU-seconds held and idle, and for how long.
  double contended_s = 0, contended_used_gpu_s = 0;
  std::vector<Buckets> held_b(nt, Buckets(t0, t_end)), ent_b(nt, Buckets(t0, t_end));
  Timeline::Cursor cursor(r.timeline, nt);
  while (cursor.next() + 1 < r.timeline.size() && cursor.Next()) {
    const Sample& s = cursor.sample();
    const int64_t a = s.t_s, b = r.timeline.t_s(cursor.next());
    if (b <= a) continue;
    util.Add(a, b, static_cast<double>(s.used) / static_cast<double>(c.gpus));
    int64_t wanted = 0;
    for (int32_t d : s.demand) wanted += d;
    if (wanted > s.used) {
      contended_s += static_cast<double>(b - a);
      contended_used_gpu_s += static_cast<double>(s.used) * static_cast<double>(b - a);
    }
    const std::vector<double> ent = Entitlement(weights.At(s.demand), s.demand, static_cast<double>(c.gpus));
    for (size_t i = 0; i < nt; ++i) {
      entitled[i] += ent[i] * static_cast<double>(b - a);
      if (s.held[i]) held_b[i].Add(a, b, s.held[i]);
      if (ent[i] > 0) ent_b[i].Add(a, b, ent[i]);
    }
  }

  struct TeamAgg {
    int64_t jobs = 0, completed = 0, preemptions = 0, demand_gpu_s = 0, held_gpu_s = 0, lost_gpu_s = 0;
    std::vector<int64_t> waits, jcts;
  };
  std::vector<TeamAgg> agg(nt);
  TeamAgg all;
  std::string csv = "job_id,team,gpus,submit_s,duration_s,start_s,end_s,wait_s,completion_s,preemptions,gpu_s_held,gpu_s_lost\n";
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceJob& tj = trace[i];
    const JobResult& jr = r.jobs[i];
    for (TeamAgg* a : {&agg[static_cast<size_t>(r.team_of_job[i])], &all}) {
      ++a->jobs;
      a->demand_gpu_s += tj.duration_s * tj.gpus;
      a->held_gpu_s += jr.held_s * tj.gpus;
      a->lost_gpu_s += (jr.lost_work_s + jr.restart_s) * tj.gpus;
      a->preemptions += jr.preemptions;
      if (jr.start_s >= 0) a->waits.push_back(jr.start_s - tj.submit_s);
      if (jr.end_s >= 0) {
        ++a->completed;
        a->jcts.push_back(jr.end_s - tj.submit_s);
      }
    }
    auto opt = [](bool known, int64_t v) { return known ? std::to_string(v) : std::string(); };
    csv += CsvField(tj.id) + "," + CsvField(tj.team) + "," + std::to_string(tj.gpus) + "," + std::to_string(tj.submit_s) +
           "," + std::to_string(tj.duration_s) + "," + opt(jr.start_s >= 0, jr.start_s) + "," +
           opt(jr.end_s >= 0, jr.end_s) + "," + opt(jr.start_s >= 0, jr.start_s - tj.submit_s) + "," +
           opt(jr.end_s >= 0, jr.end_s - tj.submit_s) + "," + std::to_string(jr.preemptions) + "," +
           std::to_string(jr.held_s * tj.gpus) + "," + std::to_string((jr.lost_work_s + jr.restart_s) * tj.gpus) + "\n";
  }
  for (TeamAgg* a = agg.data(); a != agg.data() + nt; ++a) {
    std::sort(a->waits.begin(), a->waits.end());
    std::sort(a->jcts.begin(), a->jcts.end());
  }
  std::sort(all.waits.begin(), all.waits.end());
  std::sort(all.jcts.begin(), all.jcts.end());

  auto hours = [](double gpu_s) { return Round6(gpu_s / 3600.0); };
  ordered_json j;
  j["cluster"] = {{"gpus", c.gpus},
                  {"policy", PolicyName(c.policy)},
                  {"runtime_bound", c.exact_runtime ? "exact" : "none"},
                  {"checkpoint_interval_s", c.checkpoint_interval_s},
                  {"restart_cost_s", c.restart_cost_s}};
  j["jobs"] = all.jobs;
  j["completed"] = all.completed;
  j["never_started"] = static_cast<int64_t>(all.jobs - static_cast<int64_t>(all.waits.size()));
  j["first_submit_s"] = t0;
  j["makespan_s"] = makespan;
  const double capacity_gpu_s = static_cast<double>(c.gpus) * static_cast<double>(makespan);
  j["gpu_hours_capacity"] = hours(capacity_gpu_s);
  j["gpu_hours_demand"] = hours(static_cast<double>(all.demand_gpu_s));
  j["gpu_hours_served"] = hours(static_cast<double>(all.held_gpu_s));
  j["gpu_utilization"] = makespan > 0 ? Round6(static_cast<double>(all.held_gpu_s) / capacity_gpu_s) : 0.0;
  j["hours_jobs_waited"] = Round6(contended_s / 3600.0);
  j["gpu_utilization_while_jobs_waited"] =
      contended_s > 0 ? Round6(contended_used_gpu_s / (static_cast<double>(c.gpus) * contended_s)) : 0.0;
  j["gpu_hours_idle_while_jobs_waited"] =
      hours(static_cast<double>(c.gpus) * contended_s - contended_used_gpu_s);
  j["preemptions"] = all.preemptions;
  j["gpu_hours_lost"] = hours(static_cast<double>(all.lost_gpu_s));
  j["scheduling_passes"] = r.passes;
  j["wait_s"] = {{"p50", Percentile(all.waits, 50)}, {"p90", Percentile(all.waits, 90)}, {"p99", Percentile(all.waits, 99)}};
  j["completion_s"] = {{"p50", Percentile(all.jcts, 50)}, {"p90", Percentile(all.jcts, 90)}};
  ordered_json teams = ordered_json::object();
  for (size_t i = 0; i < nt; ++i) {
    const TeamAgg& a = agg[i];
    const TeamSpec ts = c.TeamOf(r.teams[i]);
    teams[r.teams[i]] = {
        {"share", ts.share},
        {"priority", c.policy == Policy::kFifo ? 0 : ts.priority},
        {"jobs", a.jobs},
        {"completed", a.completed},
        {"wait_s", {{"p50", Percentile(a.waits, 50)}, {"p90", Percentile(a.waits, 90)}, {"p99", Percentile(a.waits, 99)}}},
        {"completion_s", {{"p50", Percentile(a.jcts, 50)}, {"p90", Percentile(a.jcts, 90)}}},
        {"gpu_hours_demand", hours(static_cast<double>(a.demand_gpu_s))},
        {"gpu_hours_received", hours(static_cast<double>(a.held_gpu_s))},
        {"gpu_hours_entitled", hours(entitled[i])},
        {"preemptions", a.preemptions},
        {"gpu_hours_lost", hours(static_cast<double>(a.lost_gpu_s))},
    };
  }
  j["teams"] = std::move(teams);
  TY_RETURN_IF_ERROR(WriteFile(fs::path(dir) / "summary.json", j.dump(2) + "\n"));
  TY_RETURN_IF_ERROR(WriteFile(fs::path(dir) / "jobs.csv", csv));

  // Plots. The top teams by GPU-time received (ties: name), the rest as "other".
  std::vector<size_t> order(nt);
  for (size_t i = 0; i < nt; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return agg[a].held_gpu_s != agg[b].held_gpu_s ? agg[a].held_gpu_s > agg[b].held_gpu_s : r.teams[a] < r.teams[b];
  });
  const size_t shown = std::min(nt, nt > kPlottedTeams + 1 ? kPlottedTeams : nt);
  const double days = static_cast<double>(makespan) / 86400.0;

  Series u{"utilization", kColors[0], false, util.Points()};
  TY_RETURN_IF_ERROR(WriteFile(fs::path(dir) / "utilization.svg",
                               Chart("GPU utilization (" + std::to_string(c.gpus) + " GPUs, " + PolicyName(c.policy) + ")",
                                     "days since the first submit", "fraction of GPUs held", {u}, days, 1.0, false)));

  std::vector<Series> shares;
  double ymax = 1;
  auto add_pair = [&](const std::string& name, const char* color, std::vector<std::pair<double, double>> held,
                      std::vector<std::pair<double, double>> ent) {
    for (const auto& p : held) ymax = std::max(ymax, p.second);
    for (const auto& p : ent) ymax = std::max(ymax, p.second);
    shares.push_back({name + " held", color, false, std::move(held)});
    shares.push_back({name + " entitled", color, true, std::move(ent)});
  };
  for (size_t k = 0; k < shown; ++k) add_pair(r.teams[order[k]], kColors[k], held_b[order[k]].Points(), ent_b[order[k]].Points());
  if (shown < nt) {
    std::vector<std::pair<double, double>> h = held_b[order[shown]].Points(), e = ent_b[order[shown]].Points();
    for (size_t k = shown + 1; k < nt; ++k) {
      auto hk = held_b[order[k]].Points(), ek = ent_b[order[k]].Points();
      for (size_t p = 0; p < h.size(); ++p) h[p].second += hk[p].second, e[p].second += ek[p].second;
    }
    add_pair("other", kColors[8], std::move(h), std::move(e));
  }
  TY_RETURN_IF_ERROR(WriteFile(fs::path(dir) / "shares.svg",
                               Chart("GPUs held (solid) vs entitlement (dashed) per team", "days since the first submit",
                                     "GPUs", shares, days, ymax * 1.05, false)));

  // Waiting-time CDFs: 200 quantiles per series, x on a log scale (seconds, 0 drawn at 1).
  std::vector<Series> cdfs;
  double wmax = 10;
  auto cdf = [&](const std::string& name, const char* color, const std::vector<int64_t>& w) {
    Series se{name + " (" + std::to_string(w.size()) + ")", color, false, {}};
    if (w.empty()) return;
    for (int q = 0; q <= 200; ++q) {
      size_t idx = std::min(w.size() - 1, static_cast<size_t>(q) * (w.size() - 1) / 200);
      se.points.emplace_back(static_cast<double>(w[idx]), static_cast<double>(idx + 1) / static_cast<double>(w.size()));
      wmax = std::max(wmax, static_cast<double>(w[idx]));
    }
    cdfs.push_back(std::move(se));
  };
  cdf("all jobs", "#000000", all.waits);
  for (size_t k = 0; k < shown; ++k) cdf(r.teams[order[k]], kColors[k], agg[order[k]].waits);
  wmax = std::pow(10.0, std::ceil(std::log10(wmax)));
  TY_RETURN_IF_ERROR(WriteFile(fs::path(dir) / "waits.svg",
                               Chart("Waiting time CDF per team (submit to first start)", "wait (s, log scale)",
                                     "fraction of started jobs", cdfs, wmax, 1.0, true)));
  return Status::Ok();
}

}  // namespace ty::sim
