// System metrics of each instance of an attempt (SageMaker's per-host training metrics; docs/metrics.md "System
// metrics"), sampled by the supervisor: CPU and memory of the instance's process tree, the disk
// holding its /opt/ml tree, and the GPUs it was given (through nvidia-smi, when there is one).
//
// The parsers are pure functions of the text they are given (unit-tested); SystemSampler does the
// reading, on a thread of its own so that a slow nvidia-smi never holds up the supervisor's log
// pipes or a stop.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "exec/local/cgroup.h"

namespace ty::exec::local {

// The fields of /proc/<pid>/stat the sampler uses.
struct ProcStat {
  int pid = 0;
  int ppid = 0;
  // utime + stime + cutime + cstime, in clock ticks: the process's own CPU time and that of its
  // children it has waited for, so that the tree's total does not drop when a member is reaped
  // by another member.
  int64_t cpu_ticks = 0;
  int64_t rss_pages = 0;
};

// Parses the text of /proc/<pid>/stat (the command name may hold spaces and parentheses).
// False when it is not in that format.
bool ParseProcStat(std::string_view text, ProcStat* out);

// What a process tree uses: `root` and every process whose ppid chain leads to it.
struct TreeUsage {
  int64_t cpu_ticks = 0;
  int64_t rss_pages = 0;
  int processes = 0;  // 0: root is not among `procs`
};
TreeUsage SumTree(const std::vector<ProcStat>& procs, int root);

// The CPU time, in nanoseconds, in a cgroup's CPU file: v1 cpuacct.usage (nanoseconds), v2
// cpu.stat (its usage_usec line). -1 when the text is not in that format.
int64_t ParseCgroupCpuNs(int version, std::string_view text);
// The resident memory, in bytes, in a cgroup's memory.stat, as a process's RSS counts it:
// anonymous memory plus mapped files. v1 total_rss + total_mapped_file (the cgroup and its
// descendants; rss + mapped_file where the kernel has no hierarchy), v2 anon + file_mapped.
// -1 when there is no anonymous memory line.
int64_t ParseCgroupRssBytes(int version, std::string_view text);

// MemTotal of /proc/meminfo, in bytes; 0 when the text has none.
int64_t ParseMemTotalBytes(std::string_view meminfo);

// One line of `nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total
// --format=csv,noheader,nounits`.
struct GpuReading {
  int index = 0;
  double utilization = 0;    // %
  double memory_used = 0;    // MiB
  double memory_total = 0;   // MiB
};
// Lines that do not parse (a "[N/A]" field, a warning) are skipped.
std::vector<GpuReading> ParseNvidiaSmi(std::string_view csv);

// The GPU indices a CUDA_VISIBLE_DEVICES value names; nullopt (meaning every GPU) when it is
// unset, empty, or names devices otherwise than by index (UUIDs).
std::optional<std::set<int>> VisibleGpus(const std::optional<std::string>& cuda_visible_devices);

// GPUUtilization and GPUMemoryUtilization (memory.used / memory.total x 100) summed over the
// selected GPUs (all of them for nullopt); 0..100 x GPUs each.
struct GpuSums {
  double utilization = 0;
  double memory_utilization = 0;
  int gpus = 0;
};
GpuSums SumGpus(const std::vector<GpuReading>& gpus, const std::optional<std::set<int>>& selected);

// The nvidia-smi binary to run for `setting` ([executor] nvidia_smi): "" for "", the path itself
// when it holds a '/' and is executable, else the first executable match on PATH; "" when none.
std::string ResolveNvidiaSmi(const std::string& setting);

// Samples each instance every `interval_ms` (the first sample `interval_ms` after Start, its CPU
// measured from 0 at Start: an instance is started just before) and appends one JSON line per instance and sample to
// its file: {"Timestamp": <epoch ms>, "CPUUtilization": .., "MemoryUtilization": ..,
// "DiskUtilization": .., "GPUUtilization": .., "GPUMemoryUtilization": ..}; the GPU fields only
// when nvidia-smi answered. An instance whose process is gone gets no more lines.
// Thread-safety: Start and Stop from one thread; the sampling runs on the sampler's own thread.
class SystemSampler {
 public:
  struct Instance {
    pid_t pid = 0;                // root of the instance's process tree (its process group leader)
    std::string start_time;       // ProcStartTime(pid) at launch: a reused pid is not mistaken for it
    std::string opt_ml_dir;       // on the host: the disk measured is the one holding it
    std::string out_path;         // the JSON-lines file
    std::optional<std::set<int>> gpus;  // VisibleGpus of its environment
    // Its cgroup's counters, read instead of a walk of every process on the host (which grows
    // with the jobs running) when both files read; else its process tree in /proc.
    CgroupUsageFiles cgroup;
  };
  struct Options {
    int64_t interval_ms = 10000;
    std::string nvidia_smi;       // resolved path; "" = no GPU metrics
  };

  SystemSampler(std::vector<Instance> instances, Options options);
  ~SystemSampler();
  SystemSampler(const SystemSampler&) = delete;
  SystemSampler& operator=(const SystemSampler&) = delete;

  void Start();
  void Stop();

  // What sampling cost so far (for supervisor.log): samples taken, wall time spent in them.
  int64_t samples() const { return samples_; }
  int64_t sample_us() const { return sample_us_; }

 private:
  void Run();
  void SampleOnce();

  // ---- constant after construction ----
  std::vector<Instance> instances_;
  Options options_;
  int64_t mem_total_bytes_ = 0;
  long ticks_per_second_ = 100;
  long page_size_ = 4096;
  // ---- sampler thread only (read by the owner after Stop) ----
  std::vector<int64_t> last_cpu_ns_;  // per instance, at the last sample (0 at Start)
  int64_t last_at_us_ = 0;            // monotonic time of the last sample (of Start before the first)
  int64_t samples_ = 0;
  int64_t sample_us_ = 0;
  // ---- guarded by mu_ ----
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ty::exec::local
