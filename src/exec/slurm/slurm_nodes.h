// What a Slurm cluster can hold for trainyard, from the text of two Slurm commands: pure functions,
// no processes, no clock (docs/slurm-capacity.md).
//
//   scontrol show node --oneliner                   -> ParseNodes
//   squeue <kSqueueArgs>                            -> ParseJobs (the jobs holding nodes)
//   ComputeCapacity(types, partition, nodes, jobs)  -> exec::CapacityReport
//
// Every input is treated as hostile: a line that does not parse is skipped and named in the
// problems, never an exception; numbers are clamped; a node list is expanded to at most
// kMaxHostlistNames names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/config.h"
#include "exec/executor.h"

namespace ty::exec::slurm {

// The squeue arguments whose output ParseJobs reads: one line per job that holds nodes, fields
// separated by '|', the job name last (so that a '|' in it cannot shift the others):
//   job id | state | node count | CPUs allocated | memory per node (MB, "4G"...) |
//   GRES per node ("gres/gpu:2", "gpu:a100:2", "N/A") | node list | comment | name
inline constexpr const char* kSqueueArgs[] = {"-h", "-a", "-t", "RUNNING,CONFIGURING,COMPLETING,SUSPENDED",
                                              "-o", "%i|%T|%D|%C|%m|%b|%N|%k|%j"};
inline constexpr size_t kMaxHostlistNames = 65536;

// One node of `scontrol show node --oneliner`.
struct SlurmNode {
  std::string name;
  std::string addr;
  std::string state;               // as Slurm writes it: "IDLE", "MIXED+DRAIN", "DOWN*+NOT_RESPONDING"
  std::vector<std::string> partitions;
  std::vector<std::string> features;  // AvailableFeatures
  int64_t cpus = 0, cpus_alloc = 0;   // CPUEfctv (else CPUTot), CPUAlloc
  int64_t memory_mib = 0, memory_alloc_mib = 0;  // RealMemory, AllocMem
  int64_t gpus = 0, gpus_alloc = 0;   // Gres gpu:N (summed over types), AllocTRES gres/gpu=M
  std::string reason;                 // Reason=..., "" when none
  bool parsed = true;                 // false: its State or figures did not parse (never offered)
};

// One job of squeue (kSqueueArgs).
struct SlurmJob {
  std::string id;
  std::string state;
  std::string name;
  std::string comment;
  std::vector<std::string> nodes;  // expanded
  int64_t cpus_per_node = 0;       // CPUs allocated / node count
  int64_t memory_per_node_mib = 0;
  int64_t gpus_per_node = 0;
  // trainyard's own: named "ty-<attempt id>" with the comment "trainyard" (how the Slurm executor
  // submits every attempt). Nothing stops an outsider from naming a job so; such a job is then
  // counted as trainyard's and its nodes look free until trainyard's job waits in Slurm.
  bool ours = false;
};

std::vector<SlurmNode> ParseNodes(std::string_view scontrol_oneliner, std::vector<std::string>* problems);
std::vector<SlurmJob> ParseJobs(std::string_view squeue_out, std::vector<std::string>* problems);

// Slurm's compressed host list ("n[1-3,07],gpu1") as names, in order; false (and *names partial)
// when it is malformed or names more than kMaxHostlistNames.
bool ExpandHostlist(std::string_view list, std::vector<std::string>* names);

// Whether a node takes no new work, and why ("" when it does): a base state of DOWN, FAIL, FUTURE,
// UNKNOWN, or a flag DRAIN/DRAINED/DRAINING, FAIL/FAILING, NOT_RESPONDING (or Slurm's '*'), MAINT,
// RESERVED, REBOOT_ISSUED, POWER_DOWN/POWERING_DOWN/POWERING_UP, INVALID/INVALID_REG. A state word
// Slurm may add later counts as unusable when it is the base state, and is ignored as a flag. A
// node whose figures did not parse is unusable.
std::string UnusableBecause(const SlurmNode& node);

// Instances of each type the cluster can hold for trainyard now, over the usable nodes of the
// type's partition (slurm_partition, else default_partition) whose features meet its constraint:
//   whole-node types: one per node that no outsider's job holds and that has the type's CPUs,
//                     memory and GPUs;
//   slice types:      floor(min(cpus / vcpus, memory / memory_mib, gpus / gpus)) per node of what
//                     outsiders' jobs leave free (a zero request does not limit).
// trainyard's own jobs are not subtracted: the controller counts the instances it runs itself.
// Each type is reported under its on-demand key and its "#spot" key (spot instances of a type run
// on the same nodes). Types that share nodes are counted independently, each over all of them.
// `problems` (what ParseNodes and ParseJobs skipped) become the report's problem text.
CapacityReport ComputeCapacity(const std::vector<InstanceTypeSpec>& types, const std::string& default_partition,
                               const std::vector<SlurmNode>& nodes, const std::vector<SlurmJob>& jobs, EpochMs at,
                               const std::vector<std::string>& problems = {});

}  // namespace ty::exec::slurm
