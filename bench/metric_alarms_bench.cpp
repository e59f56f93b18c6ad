// What the controller's once-a-minute alarm pass costs (control/metric_alarms.h): N alarms over
// 1,000 metrics holding a day of one-minute points each, evaluated as the controller does
// (EvaluateMetricAlarm per alarm, the state held). The pass runs inside a controller turn, so its
// time is a pause of the turn once a minute.
//
//   build/bench/metric_alarms_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "control/metric_alarms.h"
#include "control/state.h"

namespace {

using namespace ty;
using namespace ty::control;

constexpr EpochMs kNow = 1'800'000'000'000 / kCwMinute * kCwMinute;
constexpr int kMetrics = 1000;

CwMetricId Metric(int i) { return {"Team/Bench", "Loss", {{"Run", "r" + std::to_string(i)}}}; }

const State& Filled() {
  static State* s = [] {
    auto* st = new State();
    st->cloudwatch.set_max_series(kMetrics);
    std::set<std::pair<std::string, EpochMs>> dirty;
    for (int i = 0; i < kMetrics; ++i)
      for (EpochMs t = kNow - kCwDay; t < kNow; t += kCwMinute) {
        CwBucket b;
        b.Add(static_cast<double>((t / kCwMinute + i) % 100));
        (void)st->cloudwatch.Put(Metric(i), "None", t, b, &dirty);
        dirty.clear();
      }
    return st;
  }();
  return *s;
}

// `alarms` alarms, each on one of the metrics, looking at `periods` one-minute periods.
void BM_AlarmPass(benchmark::State& bs) {
  const State& s = Filled();
  const int alarms = static_cast<int>(bs.range(0));
  std::vector<MetricAlarmDefinition> defs(alarms);
  for (int a = 0; a < alarms; ++a) {
    MetricAlarmDefinition& d = defs[a];
    d.metric = Metric(a % kMetrics);
    d.statistic = a % 2 ? "Maximum" : "p90";
    d.period = 60;
    d.evaluation_periods = bs.range(1);
    d.datapoints_to_alarm = 1;
    d.threshold = 95;
    d.comparison = "GreaterThanThreshold";
  }
  for (auto _ : bs)
    for (const auto& d : defs) benchmark::DoNotOptimize(EvaluateMetricAlarm(s, d, "OK", kNow + 1000));
  bs.SetItemsProcessed(bs.iterations() * alarms);  // alarms evaluated per second
}
BENCHMARK(BM_AlarmPass)->Args({1000, 1})->Args({5000, 1})->Args({5000, 5})->Args({5000, 60})->Unit(benchmark::kMillisecond);

}  // namespace
