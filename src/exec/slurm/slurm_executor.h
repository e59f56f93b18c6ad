// The Slurm executor: each attempt is one Slurm job over instance_count nodes (docs/slurm.md).
//
// trainyard decides who runs next; Slurm decides on which nodes, starts the processes and
// notices dead nodes. The attempt's batch script runs trainyard's supervisor on the job's first
// node, which runs instance 1 there and instance n on the job's n-th node through srun, and
// writes the same attempt directory as on the local executor (status.json, logs, metrics). That
// directory must be shared: the server reads it, the nodes write it.
//
// Contracts beyond the port's:
//  - Start() returns at once: sbatch runs on a submitter thread. Its job id is kept in
//    <dir>/slurm_job_id, so a restarted server re-adopts the job (Adopt), and the job is named
//    ty-<attempt id>, so one submitted just before a crash is found by name.
//  - A monitor thread reads the cluster's jobs (squeue) every poll_interval_ms; Poll() never waits
//    on Slurm except to classify an attempt that ended badly (one scontrol call).
//  - An attempt whose Slurm job failed with its node (NODE_FAIL, or a node of it DOWN) ends as a
//    CapacityError (FailureKind::kCapacity): never the job's fault. Its directory is fenced first
//    (local::FencePath), so every process of it still running on a node that only lost its slurmd
//    is killed before the event is reported (or 30 s have passed: the node is truly gone).
//  - An attempt whose Slurm job ended without an outcome is reported lost (kLost).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "exec/executor.h"
#include "exec/local/attempt_status.h"
#include "exec/local/host_settings.h"

namespace ty::exec {

// What squeue says of one Slurm job.
struct SlurmJobState {
  std::string id;
  std::string name;
  std::string state;   // PENDING, RUNNING, COMPLETED, NODE_FAIL, ...
  std::string reason;  // why pending or why it ended
  std::string nodes;   // Slurm's node list expression
};

// Parses `squeue -h -o '%i|%j|%T|%r|%N'` output; lines that do not have five fields are skipped.
std::vector<SlurmJobState> ParseSqueue(const std::string& text);

// The sbatch command line of an attempt (argv, the batch script last).
struct SbatchPlan {
  std::vector<std::string> argv;
  std::string script;  // the batch script's text
};
SbatchPlan PlanSbatch(const AttemptSpec& spec, const InstanceTypeSpec* type, const SlurmConfig& slurm,
                      const std::string& attempt_dir, const std::string& supervisor_binary);

// What one instance of `spec` asks Slurm for (partition, account, CPUs, memory, GPUs, features):
// the shape of an allocation. Two attempts with the same arguments can run in the same one.
std::vector<std::string> SlurmResourceArgs(const AttemptSpec& spec, const InstanceTypeSpec* type, const SlurmConfig& slurm);

// The sbatch of a held allocation named `name` of one node with `resources` (docs/slurm.md,
// "Held allocations"): its batch step runs `trainyard-supervisor --held`, no time limit of its
// own (the partition's applies; every attempt in it keeps its own), [executor.slurm]
// hold_sbatch_args last.
SbatchPlan PlanHold(const std::string& name, const std::vector<std::string>& resources, const SlurmConfig& slurm,
                    const std::string& hold_dir, const std::string& attempts_root, const std::string& supervisor_binary);

class SlurmExecutor final : public local::AttemptDirectoryExecutor {
 public:
  struct Options {
    std::string attempts_root;      // <data-dir>/attempts: shared with every node
    std::string supervisor_binary;  // trainyard-supervisor, at the same path on every node
    local::HostSettings host;       // launcher "slurm"; notify_socket is set here
    SlurmConfig slurm;
    std::vector<InstanceTypeSpec> instance_types;
    std::string notify_address = "127.0.0.1";  // where nodes reach this server (UDP pokes)
    std::function<void()> wake;
    const Clock* clock = nullptr;
  };

  explicit SlurmExecutor(Options options);
  ~SlurmExecutor() override;

  Status Start(const std::string& attempt_id, const AttemptSpec& spec) override;
  Status Stop(const std::string& attempt_id, int grace_seconds) override;
  Status Interrupt(const std::string& attempt_id, int grace_seconds) override;
  Status Adopt(const std::string& attempt_id) override;
  std::vector<AttemptEvent> Poll() override;
  bool Sandboxed() const override { return options_.host.sandbox == "bwrap"; }
  void Cleanup(const std::string& attempt_id) override;
  Status Discard(const std::string& attempt_id) override;
  // What the cluster can hold for trainyard, as last read (exec/slurm/slurm_nodes.h); nullopt
  // until the first read succeeded.
  std::shared_ptr<const CapacityReport> Capacity() const override;

  // Runs a Slurm command (sbatch, squeue, ...) from the configured directory with SLURM_CONF;
  // its exit status, stdout in *out and stderr in *err.
  int RunSlurm(const std::string& command, const std::vector<std::string>& args, std::string* out,
               std::string* err = nullptr) const;

 private:
  struct Tracked {
    local::StatusCursor cursor;
    int64_t since = 0;            // steady ms: when tracking began
    std::string job_id;           // "" until sbatch answered (or the job was found by name)
    bool stop_requested = false;  // Stop/Interrupt was called
    int64_t fenced_at = 0;        // steady ms; 0 = not fenced
    std::string fence_reason;
  };
  struct Submission {
    std::string attempt_id;
    SbatchPlan plan;
    std::string pool_workspace;  // its warm pool's directory; "" = none
  };
  struct Submitted {
    std::string job_id;  // "" on failure
    std::string error;
  };
  // An allocation trainyard holds (docs/slurm.md, "Held allocations"): a one-node Slurm job whose
  // batch step runs the attempts handed to it (<holds>/<id>/next), one at a time.
  struct Hold {
    std::string key;          // its shape: SlurmResourceArgs, joined
    std::string job_id;       // "" until sbatch answered
    std::string attempt;      // the attempt handed to it last; "" when idle
    int64_t since = 0;        // steady ms: submitted or adopted
    int64_t idle_since = 0;   // steady ms: when it became idle
  };

  // sbatch with `args`, from an environment of the server's PATH, LANG, LC_ALL, HOME only.
  int RunSbatch(const std::vector<std::string>& args, std::string* out, std::string* err) const;
  void SubmitLoop();
  void MonitorLoop();
  void ListenLoop();
  void RefreshJobs();
  void RefreshCapacity();
  // Why the attempt's Slurm job ended badly, when its node failed: "" when it did not.
  std::string NodeFailure(const std::string& job_id) const;
  // An Exited event that the job's own outcome does not explain is given Slurm's reason.
  void Classify(const Tracked& t, AttemptEvent* e) const;
  std::optional<SlurmJobState> JobOf(const std::string& job_id) const;  // as squeue last said

  // Held allocations (controller thread).
  std::string HoldDir(const std::string& hold_id) const { return holds_root_ + "/" + hold_id; }
  std::string HoldName(const std::string& hold_id) const { return hold_prefix_ + hold_id; }
  // Runs a single-instance attempt in a held allocation of its shape: an idle one Slurm says is
  // running, else a new one submitted for it. False when it must go to Slurm on its own.
  bool StartHeld(const std::string& attempt_id, const AttemptSpec& spec, const InstanceTypeSpec* type);
  // Holds left by an earlier server process, from their directories.
  void AdoptHolds();
  // After Poll's events: idles the holds whose attempt ended, gives back the ones idle past their
  // keep-alive, drops the ones Slurm ended, cancels jobs of this server's holds it does not know.
  void TendHolds(const std::vector<AttemptEvent>& events, int64_t now_steady, int64_t read_at,
                 const std::map<std::string, Submitted>& submitted, const std::map<std::string, std::string>& by_name);
  // Gives the hold back: its directory goes, so its holder ends and Slurm frees the allocation.
  void ReleaseHold(const std::string& hold_id);
  // True while the holder of the attempt's hold still has it to run or runs it.
  bool HeldAttemptPending(const std::string& attempt_id) const;

  // ---- constant after construction ----
  Options options_;
  // ---- controller thread only ----
  std::map<std::string, Tracked> tracked_;
  std::map<std::string, Hold> holds_;          // hold id -> hold
  std::map<std::string, std::string> held_in_;  // attempt id -> its hold's id
  std::set<std::string> cancelled_;            // job ids of unknown holds already scancelled
  std::string holds_root_;                     // <data-dir>/slurm/holds: shared with every node
  std::string hold_prefix_;                    // Slurm job name of this server's holds, before the id
  // ---- shared with the threads ----
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Submission> queue_;                   // sbatch waiting
  std::map<std::string, Submitted> submitted_;     // attempt id -> what sbatch said
  std::map<std::string, SlurmJobState> jobs_;      // job id -> state (our jobs, as squeue last said)
  std::map<std::string, std::string> by_name_;     // job name -> newest job id
  int64_t jobs_read_at_ = 0;                       // steady ms of the last squeue that succeeded
  std::shared_ptr<const CapacityReport> capacity_;  // the last capacity read
  std::string node_addresses_written_;             // the monitor's last host.slurm_node_addresses
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  int udp_fd_ = -1;
};

}  // namespace ty::exec
