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

  // ---- constant after construction ----
  Options options_;
  // ---- controller thread only ----
  std::map<std::string, Tracked> tracked_;
  // ---- shared with the threads ----
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Submission> queue_;                   // sbatch waiting
  std::map<std::string, Submitted> submitted_;     // attempt id -> what sbatch said
  std::map<std::string, SlurmJobState> jobs_;      // job id -> state (our jobs, as squeue last said)
  std::map<std::string, std::string> by_name_;     // job name -> newest job id
  int64_t jobs_read_at_ = 0;                       // steady ms of the last squeue that succeeded
  std::shared_ptr<const CapacityReport> capacity_;  // the last capacity read
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  int udp_fd_ = -1;
};

}  // namespace ty::exec
