// The scheduling library at a depth of a million queued jobs: one pass over 1,000,000 runnable
// jobs on 10,000 instances, fair share and quota shares both on, the snapshot of a queue at that
// depth, and the library's memory per queued job (see README.md for the figures).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "sched/quota.h"
#include "sched/sched.h"

// Live heap bytes, counted by replacing the global allocation functions (new and delete both
// go to malloc and free here).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
void* Count(void* p) {
  if (!p) throw std::bad_alloc();
  int64_t now = g_live += static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}
void Uncount(void* p) {
  if (p) g_live -= static_cast<int64_t>(malloc_usable_size(p));
  std::free(p);
}
}  // namespace
void* operator new(size_t n) { return Count(std::malloc(n)); }
void* operator new[](size_t n) { return Count(std::malloc(n)); }
void operator delete(void* p) noexcept { Uncount(p); }
void operator delete[](void* p) noexcept { Uncount(p); }
void operator delete(void* p, size_t) noexcept { Uncount(p); }
void operator delete[](void* p, size_t) noexcept { Uncount(p); }

namespace {

using namespace ty::sched;

constexpr int64_t kNow = 1'800'000'000'000;
const std::string kType = "ml.g5.xlarge";

// One fair-share queue: `shares` shares x `per_share` jobs on an environment of `capacity`
// instances of which `busy` are held by running jobs whose runtime bounds end within a day.
Snapshot FairShareAtDepth(int shares, int per_share, int64_t capacity, int64_t busy) {
  Snapshot s;
  s.now_ms = kNow;
  s.environments.push_back({"fs-env", true, capacity, busy});
  s.host.push_back({kType, 2 * capacity, 2 * capacity - busy});
  for (int64_t i = 0; i < busy; ++i) s.running.push_back({0, kType, 1, kNow + (i * 7919) % 86'400'000 + 1});
  Queue q;
  q.name = "fair";
  q.environments = {0};
  FairShare fs;
  uint64_t seq = 1;
  for (int i = 0; i < shares; ++i) {
    Share sh;
    sh.identifier = "team-" + std::to_string(i);
    sh.weight_factor = 0.5 + (i % 4) * 0.5;
    sh.decayed_usage = static_cast<double>((i * 7919) % 1000);
    sh.held = busy / shares;
    sh.runnable.reserve(static_cast<size_t>(per_share));
    for (int j = 0; j < per_share; ++j)
      sh.runnable.push_back({seq++, kType, 1 + (j % 8 == 0), 3'600'000 * (1 + j % 12)});
    fs.shares.push_back(std::move(sh));
  }
  q.fair_share = std::move(fs);
  s.queues.push_back(std::move(q));
  return s;
}

// `queues` quota-share queues of 20 shares (the AWS maximum) x `per_share` jobs, each on
// `capacity` instances of which `busy` run, spread over the shares; a third of the shares preempt
// inside the share, a third only reserve.
std::vector<QuotaSnapshot> QuotaAtDepth(int queues, int per_share, int64_t capacity, int64_t busy) {
  std::vector<QuotaSnapshot> out;
  uint64_t seq = 10'000'000;
  for (int q = 0; q < queues; ++q) {
    QuotaSnapshot s;
    s.now_ms = kNow;
    s.capacity[kType] = capacity;
    for (int i = 0; i < 20; ++i) {
      QuotaShareSpec sh;
      sh.name = "share-" + std::to_string(i);
      sh.limit[kType] = capacity / 20;
      sh.strategy = i % 3 == 0 ? SharingStrategy::kReserve : i % 3 == 1 ? SharingStrategy::kLend : SharingStrategy::kLendAndBorrow;
      sh.borrow_limit_percent = i % 2 ? -1 : 50;
      sh.in_share_preemption = i % 3 != 2;
      sh.runnable.reserve(static_cast<size_t>(per_share));
      for (int j = 0; j < per_share; ++j)
        sh.runnable.push_back({seq++, kType, 1 + (j % 8 == 0), (j * 37) % 100, 3'600'000 * (1 + j % 12)});
      s.shares.push_back(std::move(sh));
    }
    for (int64_t r = 0; r < busy; ++r)
      s.running.push_back({seq++, static_cast<int>(r % 20), kType, 1, static_cast<int>((r * 13) % 100),
                           static_cast<uint64_t>(r), false, true, kNow + (r * 7919) % 86'400'000 + 1});
    out.push_back(std::move(s));
  }
  return out;
}

struct Depth {
  Snapshot fair;
  std::vector<QuotaSnapshot> quota;
  int64_t jobs = 0;
  int64_t bytes = 0;  // heap held by the snapshots
};

// 1,000,000 runnable jobs: 500,000 over 1,000 fair shares and 500,000 over 25 quota-share
// queues of 20 shares; 10,000 instances, 5,000 each, `busy_percent` of them running.
Depth MakeDepth(int64_t busy_percent) {
  Depth d;
  int64_t before = g_live.load();
  d.fair = FairShareAtDepth(1000, 500, 5000, 5000 * busy_percent / 100);
  d.quota = QuotaAtDepth(25, 1000, 200, 200 * busy_percent / 100);
  d.bytes = g_live.load() - before;
  d.jobs = 1000 * 500 + 25 * 20 * 1000;
  return d;
}

void BM_MillionJobPass(benchmark::State& state) {
  Depth depth = MakeDepth(state.range(0));
  int64_t decisions = 0, starts = 0, preemptions = 0, peak_extra = 0, quota_placed = 0;
  std::unordered_map<uint64_t, int64_t> size_of;  // quota jobs: instances, to count what starts
  for (const auto& q : depth.quota)
    for (const auto& sh : q.shares)
      for (const auto& j : sh.runnable) size_of[j.seq] = j.instance_count;
  for (auto _ : state) {
    int64_t base = g_live.load();
    g_peak = base;
    Decisions d = Schedule(depth.fair);
    decisions = static_cast<int64_t>(d.starts.size() + d.waits.size());
    starts = static_cast<int64_t>(d.starts.size());
    preemptions = 0;
    quota_placed = 0;
    for (const auto& q : depth.quota) {
      QuotaDecisions qd = ScheduleQuotaShares(q);
      state.PauseTiming();
      for (const auto& st : qd.starts) quota_placed += size_of[st.job_seq];
      state.ResumeTiming();
      decisions += static_cast<int64_t>(qd.starts.size() + qd.waits.size() + qd.preemptions.size());
      starts += static_cast<int64_t>(qd.starts.size());
      preemptions += static_cast<int64_t>(qd.preemptions.size());
    }
    peak_extra = g_peak.load() - base;
    benchmark::DoNotOptimize(decisions);
  }
  state.counters["decisions_per_pass"] = static_cast<double>(decisions);
  state.counters["starts_per_pass"] = static_cast<double>(starts);
  state.counters["preemptions_per_pass"] = static_cast<double>(preemptions);
  state.counters["quota_instances_started"] = static_cast<double>(quota_placed);
  state.counters["decisions_per_s"] =
      benchmark::Counter(static_cast<double>(decisions) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["snapshot_bytes_per_job"] = static_cast<double>(depth.bytes) / static_cast<double>(depth.jobs);
  state.counters["pass_peak_bytes_per_job"] = static_cast<double>(peak_extra) / static_cast<double>(depth.jobs);
}
// Argument: percent of the 10,000 instances busy when the pass runs (0: an empty cluster fills
// up; 99: steady state, a few instances free and most jobs behind a reserved head).
BENCHMARK(BM_MillionJobPass)->Arg(0)->Arg(99)->Unit(benchmark::kMillisecond)->Iterations(3);

// GetJobQueueSnapshot at that depth: the queue's front (100 jobs with the reason each waits and
// its estimated start, kept by the last pass) and its utilization by share.
void BM_SnapshotAtDepth(benchmark::State& state) {
  Depth depth = MakeDepth(99);
  Decisions d = Schedule(depth.fair);
  const auto& shares = depth.fair.queues[0].fair_share->shares;
  for (auto _ : state) {
    const QueueFront* f = d.FrontOf("fair");
    size_t text = 0;
    int64_t latest = 0;
    for (const auto& j : f->jobs) {
      text += d.ReasonOf(d.waits[j.wait]).size();
      latest = std::max(latest, j.estimated_start_ms);
    }
    std::map<std::string, int64_t> by_share;
    for (const auto& sh : shares) by_share[sh.identifier] += sh.held;
    benchmark::DoNotOptimize(text);
    benchmark::DoNotOptimize(latest);
    benchmark::DoNotOptimize(by_share);
  }
  state.counters["front_jobs"] = static_cast<double>(d.FrontOf("fair")->jobs.size());
}
BENCHMARK(BM_SnapshotAtDepth)->Unit(benchmark::kMicrosecond);

}  // namespace
