#include "control/cloudwatch_read.h"

#include <algorithm>

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

std::optional<double> CwStat(const CwBucket& b, const std::string& stat) {
  if (stat == "SampleCount") return b.count;
  if (stat == "Sum") return b.sum;
  if (stat == "Average") return b.count > 0 ? b.sum / b.count : 0;
  if (stat == "Minimum") return b.min;
  if (stat == "Maximum") return b.max;
  if (b.values.empty()) return std::nullopt;
  return CwPercentile(b.values, std::stod(stat.substr(1)));
}

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

CwQueryValues ReadCwQueries(const State& s, const std::vector<CwQuery>& queries, EpochMs from, EpochMs to) {
  CwQueryValues out;
  for (const auto& q : queries) {
    if (!q.expression.empty()) continue;
    CwTimeSeries series;
    for (const auto& [t, b] : CwByPeriod(ReadCwMetric(s, q.metric, from, to), from, q.period))
      if (auto v = CwStat(b, q.stat)) series[t] = *v;
    out.series[q.id] = std::move(series);
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
