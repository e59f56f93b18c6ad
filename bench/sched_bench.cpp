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
