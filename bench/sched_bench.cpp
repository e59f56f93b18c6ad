// Micro-benchmark of one FIFO scheduling pass (the pure sched/ library).
#include <benchmark/benchmark.h>

#include "sched/sched.h"

namespace {

ty::sched::Snapshot Make(int queues, int jobs_per_queue, int64_t capacity) {
  ty::sched::Snapshot s;
  s.environments.push_back({"env", true, capacity, 0});
  s.host.push_back({"ml.m5.large", capacity, capacity});
  uint64_t seq = 1;
  for (int q = 0; q < queues; ++q) {
    ty::sched::Queue queue;
    queue.name = "q" + std::to_string(q);
    queue.priority = q % 7;
    queue.seq = static_cast<uint64_t>(q);
    queue.environments = {0};
    for (int j = 0; j < jobs_per_queue; ++j) queue.runnable.push_back({seq++, "ml.m5.large", 1 + j % 2});
    s.queues.push_back(std::move(queue));
  }
  return s;
}

void BM_FifoPass(benchmark::State& state) {
  auto snap = Make(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), 1000);
  for (auto _ : state) benchmark::DoNotOptimize(ty::sched::ScheduleFifo(snap));
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_FifoPass)->Args({1, 1064})->Args({50, 1064})->Unit(benchmark::kMicrosecond);

}  // namespace

namespace {

// Fair share at depth: `shares` shares with `jobs_per_share` runnable jobs each, `capacity` free
// instances; one pass places up to `capacity` jobs.
ty::sched::Snapshot MakeFairShare(int shares, int jobs_per_share, int64_t capacity) {
  ty::sched::Snapshot s;
  s.environments.push_back({"env", true, capacity, 0});
  s.host.push_back({"ml.m5.large", capacity, capacity});
  ty::sched::Queue queue;
  queue.name = "fs";
  queue.environments = {0};
  ty::sched::FairShare fs;
  uint64_t seq = 1;
  for (int i = 0; i < shares; ++i) {
    ty::sched::Share share;
    share.identifier = "share-" + std::to_string(i);
    share.weight_factor = 1.0 + (i % 5);
    share.decayed_usage = static_cast<double>((i * 7919) % 1000);
    for (int j = 0; j < jobs_per_share; ++j) share.runnable.push_back({seq++, "ml.m5.large", 1});
    fs.shares.push_back(std::move(share));
  }
  queue.fair_share = std::move(fs);
  s.queues.push_back(std::move(queue));
  return s;
}

void BM_FairSharePass(benchmark::State& state) {
  auto snap = MakeFairShare(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), state.range(2));
  size_t decisions = 0;
  for (auto _ : state) {
    auto d = ty::sched::Schedule(snap);
    decisions = d.starts.size() + d.waits.size();
    benchmark::DoNotOptimize(d);
  }
  state.counters["starts_per_pass"] = static_cast<double>(state.range(2));
  state.counters["decisions_per_s"] =
      benchmark::Counter(static_cast<double>(decisions) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
// 1,000 shares x 1,000 jobs = 1,000,000 runnable jobs; 10,000 instances.
BENCHMARK(BM_FairSharePass)->Args({100, 100, 1000})->Args({1000, 1000, 10000})->Unit(benchmark::kMillisecond);

}  // namespace
