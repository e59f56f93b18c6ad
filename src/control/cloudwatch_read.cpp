#include "control/cloudwatch_read.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <set>
#include <string_view>

#include "control/state.h"

namespace ty::control {

namespace {

CwBucket One(double v) {
  CwBucket b;
  b.Add(v);
  return b;
}

// The training job and host of a /aws/sagemaker/TrainingJobs metric ("<job>/algo-<n>"), or nulls.
std::pair<const TrainingJob*, std::string> HostOf(const State& s, const CwMetricId& id) {
  if (id.ns != kSageMakerMetricNamespace || id.dims.size() != 1 || id.dims[0].first != "Host") return {nullptr, ""};
  const std::string& host = id.dims[0].second;
  const size_t slash = host.rfind("/algo-");
  if (slash == std::string::npos) return {nullptr, ""};
  const TrainingJob* tj = s.FindTrainingJob(host.substr(0, slash));
  return {tj, host.substr(slash + 1)};
}

int SystemIndex(const std::string& name) {
  for (size_t k = 0; k < kSystemMetricNames.size(); ++k)
    if (name == kSystemMetricNames[k]) return static_cast<int>(k);
  return -1;
}

// A statistic's name, parsed once per query rather than once per point.
struct Statistic {
  enum Kind { kSampleCount, kSum, kAverage, kMinimum, kMaximum, kPercentile, kNone } kind = kNone;
  double p = 0;  // kPercentile's 0..100
};

Statistic ParseStatistic(const std::string& stat) {
  if (stat == "SampleCount") return {Statistic::kSampleCount};
  if (stat == "Sum") return {Statistic::kSum};
  if (stat == "Average") return {Statistic::kAverage};
  if (stat == "Minimum") return {Statistic::kMinimum};
  if (stat == "Maximum") return {Statistic::kMaximum};
  if (!IsCwPercentile(stat)) return {Statistic::kNone};  // validated before; never a value
  return {Statistic::kPercentile, std::stod(stat.substr(1))};
}

// CwPercentile over a bucket's kept values, sorted in a copy on the stack.
double Percentile(const CwSample& values, double p) {
  std::array<double, kCloudWatchValuesPerBucket> sorted;
  for (size_t i = 0; i < values.size(); ++i) sorted[i] = values[i];
  std::sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(values.size()));
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  return sorted[static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(values.size()))) - 1];
}

std::optional<double> StatOf(const CwBucket& b, const Statistic& st) {
  switch (st.kind) {
    case Statistic::kSampleCount: return b.count;
    case Statistic::kSum: return b.sum;
    case Statistic::kAverage: return b.count > 0 ? b.sum / b.count : 0;
    case Statistic::kMinimum: return b.min;
    case Statistic::kMaximum: return b.max;
    case Statistic::kPercentile: break;
    case Statistic::kNone: return std::nullopt;
  }
  if (b.values.empty()) return std::nullopt;
  return Percentile(b.values, st.p);
}

// Calls fn(period start, bucket) for each period of `period` ms from `origin` that the points
// [first, last) (pairs of start and bucket, oldest first, none before origin) fall in: the point's
// own bucket when it is alone in its period, else their merge (CwByPeriod's, one period at a time).
template <typename It, typename Fn>
void ForEachPeriod(It first, It last, EpochMs origin, EpochMs period, Fn&& fn) {
  CwBucket merged;  // reused: its values keep their capacity from one period to the next
  const CwBucket* alone = nullptr;
  EpochMs at = 0;
  for (; first != last; ++first) {
    const EpochMs start = origin + (first->first - origin) / period * period;
    if (alone && start == at) {
      if (alone != &merged) {
        merged = *alone;  // the same as merging it into an empty bucket (stored sums are never -0)
        alone = &merged;
      }
      merged.Merge(first->second);
      continue;
    }
    if (alone) fn(at, *alone);
    at = start;
    alone = &first->second;
  }
  if (alone) fn(at, *alone);
}

}  // namespace

CwPoints ReadCwMetric(const State& s, const CwMetricId& id, EpochMs from, EpochMs to) {
  CwPoints out;
  if (const CwSeries* series = s.cloudwatch.Find(id.Key())) {
    out.unit = series->unit;
    for (auto b = series->buckets.lower_bound(from); b != series->buckets.end() && b->first < to; ++b)
      out.buckets.emplace_back(b->first, b->second);
    return out;
  }
  auto [tj, host] = HostOf(s, id);
  if (!tj) return out;
  if (int k = SystemIndex(id.name); k >= 0) {
    out.unit = "Percent";
    auto all = s.system_series.find(tj->name);
    if (all == s.system_series.end()) return out;
    auto h = all->second.find(host);
    if (h == all->second.end()) return out;
    for (const auto& smp : h->second)
      if (smp.values[k] && smp.timestamp >= from && smp.timestamp < to) out.buckets.emplace_back(smp.timestamp, One(*smp.values[k]));
    return out;
  }
  // MetricDefinitions series are the job's, reported on its first host as SageMaker does.
  if (host != "algo-1") return out;
  auto series = s.metric_series.find(tj->name);
  if (series == s.metric_series.end()) return out;
  if (const MetricTrack* track = series->second.Find(id.name))
    for (const auto& p : track->points)
      if (p.timestamp >= from && p.timestamp < to) out.buckets.emplace_back(p.timestamp, One(p.value));
  return out;
}

void ForEachCwMetric(const State& s, const std::function<void(const CwMetricId&)>& fn) {
  for (const auto& [key, series] : s.cloudwatch.series()) fn(series.id);
  for (const auto& entry : s.training_jobs) {
    const std::string& name = entry.first;
    auto host = [&name](int n) { return CwDimensions{{"Host", name + "/algo-" + std::to_string(n)}}; };
    if (auto m = s.metric_series.find(name); m != s.metric_series.end())
      for (const auto& track : m->second.tracks())
        if (!track.points.empty()) fn(CwMetricId{std::string(kSageMakerMetricNamespace), track.name, host(1)});
    if (auto sys = s.system_series.find(name); sys != s.system_series.end())
      for (const auto& [algo, samples] : sys->second)
        for (size_t k = 0; k < kSystemMetricNames.size(); ++k)
          if (std::any_of(samples.begin(), samples.end(), [&](const SystemSample& x) { return x.values[k].has_value(); }))
            fn(CwMetricId{std::string(kSageMakerMetricNamespace), kSystemMetricNames[k],
                          CwDimensions{{"Host", name + "/" + algo}}});
  }
}

std::map<EpochMs, CwBucket> CwByPeriod(const CwPoints& p, EpochMs origin, EpochMs period) {
  std::map<EpochMs, CwBucket> out;
  for (const auto& [t, b] : p.buckets) out[origin + (t - origin) / period * period].Merge(b);
  return out;
}

std::string ForEachCwPeriod(const State& s, const CwMetricId& id, EpochMs from, EpochMs to, EpochMs period,
                            const std::function<void(EpochMs, const CwBucket&)>& fn) {
  if (const CwSeries* series = s.cloudwatch.Find(id.Key())) {
    if (from < to) ForEachPeriod(series->buckets.lower_bound(from), series->buckets.lower_bound(to), from, period, fn);
    return series->unit;
  }
  const CwPoints points = ReadCwMetric(s, id, from, to);
  ForEachPeriod(points.buckets.begin(), points.buckets.end(), from, period, fn);
  return points.unit;
}

CwMetricOwner CwOwnerOf(const CwMetricId& id) {
  if (id.ns == kSageMakerMetricNamespace) {
    // A job's series has the one dimension Host "<job>/algo-<n>"; any other reads nothing.
    if (id.dims.size() == 1 && id.dims[0].first == "Host") {
      const std::string& host = id.dims[0].second;
      return {CwMetricOwner::kTrainingJob, host.substr(0, host.rfind("/algo-"))};
    }
    return {};
  }
  if (id.ns == "AWS/Batch")
    for (const auto& [n, v] : id.dims)
      if (n == "JobQueueName") return {CwMetricOwner::kJobQueue, v};
  return {};
}

uint64_t CwStoredPointsAtMost(EpochMs from, EpochMs to, EpochMs now) {
  struct Tier {
    EpochMs lo, hi, step;
  };
  const Tier tiers[] = {{now - kCwMinuteRetention, now + 2 * kCwHour, kCwMinute},
                        {now - kCwFiveMinuteRetention, now - kCwMinuteRetention, kCwFiveMinutes},
                        {now - kCwHourRetention, now - kCwFiveMinuteRetention, kCwHour}};
  uint64_t n = 0;
  for (const Tier& t : tiers) {
    const EpochMs lo = std::max(from, t.lo), hi = std::min(to, t.hi);
    if (lo < hi) n += static_cast<uint64_t>((hi - lo + t.step - 1) / t.step) + 1;  // +1: a bucket started before lo
  }
  return n;
}

StatusOr<uint64_t> CheckCwQueryCost(const std::vector<CwQuery>& queries, EpochMs from, EpochMs to, EpochMs grid_period,
                                    EpochMs now) {
  if (std::none_of(queries.begin(), queries.end(), [](const CwQuery& q) { return !q.expression.empty(); }))
    return uint64_t{0};
  const uint64_t window = static_cast<uint64_t>(std::max<EpochMs>(to - from, 0));
  const uint64_t grid = (window + grid_period - 1) / grid_period;
  const uint64_t stored = CwStoredPointsAtMost(from, to, now);
  std::set<std::string_view> ids;
  uint64_t metric_stats = 0, cost = 0;
  for (const auto& q : queries) {
    ids.insert(q.id);
    if (!q.expression.empty()) continue;
    ++metric_stats;
    cost += std::min<uint64_t>((window + q.period - 1) / q.period, stored);
  }
  for (const auto& q : queries) {
    if (q.expression.empty()) continue;
    // Operands: each id named, and METRICS() as every MetricStat query (words as the parser reads them).
    uint64_t operands = 0;
    const std::string& e = q.expression;
    for (size_t i = 0; i < e.size();) {
      if (!std::isalnum(static_cast<unsigned char>(e[i])) && e[i] != '_') { ++i; continue; }
      const size_t start = i;
      while (i < e.size() && (std::isalnum(static_cast<unsigned char>(e[i])) || e[i] == '_')) ++i;
      const std::string_view word(e.data() + start, i - start);
      if (word == "METRICS") operands += metric_stats;
      else if (ids.count(word)) ++operands;
    }
    cost += (operands + 1) * grid;
  }
  if (cost <= kMaxCwMathDatapoints) return cost;
  return Status(Code::kFailedPrecondition,
                "The MetricDataQueries would hold up to " + std::to_string(cost) + " datapoints (each MetricStat "
                "query's, and each expression's operands and result over " + std::to_string(grid) +
                " periods), which exceeds the limit of " + std::to_string(kMaxCwMathDatapoints) +
                " for a request with expressions. Narrow the window, lengthen the Period or use fewer expressions.");
}

std::optional<double> CwStat(const CwBucket& b, const std::string& stat) { return StatOf(b, ParseStatistic(stat)); }

bool IsCwPercentile(const std::string& s) {
  if (s.size() < 2 || s.size() > 8 || s[0] != 'p') return false;
  if (s.find_first_not_of("0123456789.", 1) != std::string::npos || s[1] == '.' || s.back() == '.') return false;
  if (std::count(s.begin(), s.end(), '.') > 1) return false;
  const double p = std::stod(s.substr(1));
  return p >= 0 && p <= 100;
}

bool IsCwStatistic(const std::string& s) {
  return s == "SampleCount" || s == "Average" || s == "Sum" || s == "Minimum" || s == "Maximum";
}

bool IsCwPeriod(int64_t p) { return p == 1 || p == 5 || p == 10 || p == 30 || (p >= 60 && p % 60 == 0); }

void ReadCwQuery(const State& s, const CwQuery& q, EpochMs from, EpochMs to,
                 const std::function<void(EpochMs, double)>& fn) {
  const Statistic st = ParseStatistic(q.stat);
  ForEachCwPeriod(s, q.metric, from, to, q.period, [&](EpochMs t, const CwBucket& b) {
    if (auto v = StatOf(b, st)) fn(t, *v);
  });
}

size_t CountCwQuery(const State& s, const CwQuery& q, EpochMs from, EpochMs to) {
  // Every statistic but a percentile has a value in each period; a percentile, where any kept value.
  const Statistic::Kind kind = ParseStatistic(q.stat).kind;
  size_t n = 0;
  if (kind == Statistic::kNone) return n;
  ForEachCwPeriod(s, q.metric, from, to, q.period, [&](EpochMs, const CwBucket& b) {
    if (kind != Statistic::kPercentile || !b.values.empty()) ++n;
  });
  return n;
}

CwQueryValues ReadCwQueries(const State& s, const std::vector<CwQuery>& queries, EpochMs from, EpochMs to) {
  CwQueryValues out;
  for (const auto& q : queries) {
    if (!q.expression.empty()) continue;
    CwTimeSeries& series = out.series[q.id];
    series.clear();
    ReadCwQuery(s, q, from, to, [&series](EpochMs t, double v) { series.emplace_hint(series.end(), t, v); });
    out.metric_ids.push_back(q.id);
  }
  return out;
}

Status EvaluateCwExpressions(const std::vector<CwQuery>& queries, EpochMs from, EpochMs to, EpochMs grid_period,
                             CwQueryValues* values) {
  std::vector<EpochMs> grid;
  for (EpochMs t = from; t < to; t += grid_period) grid.push_back(t);
  for (const auto& q : queries) {
    if (q.expression.empty()) continue;
    auto r = EvaluateCwExpression(q.expression, values->series, values->metric_ids, grid);
    if (!r.ok()) return r.status();
    values->series[q.id] = std::move(*r);
  }
  return Status::Ok();
}

}  // namespace ty::control
