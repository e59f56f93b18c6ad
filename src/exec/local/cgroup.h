// One instance's control group: the memory, process, CPU and device limits of its instance
// type (docs/user-guide.md, "The sandbox"), and how the kernel enforced them.
//
// Both layouts are supported. cgroup v2 where the unified hierarchy has the memory and pids
// controllers and the parent is a delegated subtree this process may write; else cgroup v1,
// one directory per controller (memory and pids required, cpu and devices where mounted), as
// Slurm's cgroup plugin does. Instance cgroups live under <parent>/trainyard/<name>, where the
// parent is executor.cgroup_parent or, by default, the supervisor's own cgroup in each hierarchy.
//
// Not thread-safe; owned by the supervisor's main thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace ty::exec::local {

struct CgroupLimits {
  int64_t memory_bytes = 0;  // memory (and memory+swap where accounted); 0: none
  int64_t pids_max = 0;      // tasks (processes and threads); 0: none
  int vcpus = 0;             // CPU time of this many CPUs per period; 0: none
  // Device nodes the instance may open besides the standard ones (/dev/null, zero, full,
  // random, urandom, tty, ptmx, pts): its GPUs and the NVIDIA control nodes. v1 only (v2
  // device control needs a BPF program; there the sandbox binds only these nodes).
  std::vector<std::string> device_nodes;
};

// Where an instance's use of CPU and memory can be read (SystemSampler), without a walk of
// /proc: v2 cpu.stat and memory.stat of its cgroup; v1 cpuacct.usage (where the cpuacct
// controller is mounted) and the memory controller's memory.stat. "" for a file not there.
struct CgroupUsageFiles {
  int version = 0;  // 0: no cgroup
  std::string cpu;
  std::string memory_stat;
};

class InstanceCgroup {
 public:
  // Creates the instance's cgroup `name` (a file name) with `limits`. `parent`: a path inside
  // the hierarchy ("" = the caller's own cgroup). Unavailable: no writable hierarchy here.
  static StatusOr<std::unique_ptr<InstanceCgroup>> Create(const std::string& name, const std::string& parent,
                                                          const CgroupLimits& limits);
  ~InstanceCgroup();
  InstanceCgroup(const InstanceCgroup&) = delete;
  InstanceCgroup& operator=(const InstanceCgroup&) = delete;

  // Descriptors of the cgroup.procs files (close-on-exec); a forked child joins by writing "0"
  // to each (JoinFromChild, async-signal-safe) before it execs.
  bool JoinFromChild() const;
  // True when the kernel's OOM killer ended a process of this cgroup.
  bool OomKilled() const;
  // The peak of memory use in bytes where the kernel records it (0: unknown).
  int64_t MemoryPeak() const;
  CgroupUsageFiles UsageFiles() const;
  // The processes in it now (its first controller's cgroup.procs); empty once removed.
  std::vector<pid_t> Processes() const;
  // "cgroup v1 at /sys/fs/cgroup/memory/...": for the supervisor's log.
  std::string Describe() const;
  // Kills whatever is left in it and removes it (also done by the destructor).
  void Remove();

 private:
  InstanceCgroup() = default;
  int version_ = 0;
  std::vector<std::string> dirs_;  // v2: one; v1: memory first, then pids, cpu, devices, cpuacct
  std::string cpuacct_dir_;        // v1: where cpuacct.usage is (a dir of dirs_, or cpu's when mounted with it)
  std::vector<int> procs_fds_;
  bool removed_ = false;
};

// The prefix of the cgroup names of attempts under `attempts_root`: "<st_dev>-<st_ino>." of that
// directory, so that servers with other data directories (whose attempts may have the same
// names) never touch each other's cgroups. Instance cgroups are "<prefix><attempt>.algo-<n>".
std::string CgroupPrefix(const std::string& attempts_root);

// Removes the instance cgroups named with `prefix` that supervisors which died left behind
// (`alive(attempt)` says whether that attempt's supervisor still runs). Processes still in them
// are killed first.
void SweepOrphanCgroups(const std::string& parent, const std::string& prefix,
                        const std::function<bool(const std::string&)>& alive);

}  // namespace ty::exec::local
