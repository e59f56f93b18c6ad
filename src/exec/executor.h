// The Executor port: where training-job attempts run.
//
// The controller hands the executor a typed attempt spec (exec/attempt_spec.h: the job's terms
// only; how a host runs it is the executor's own configuration) and learns what happened by
// polling. The executor owns everything it keeps for an attempt (directories, logs, metrics
// samples): the controller reads and discards them only through this port. Implementations:
// local/ (processes on this host under a supervisor of ours). Every call is made from the
// controller thread only, except ReadLog/ReadSystemMetrics (any thread) and the wake callback
// (invoked from any thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "core/clock.h"
#include "exec/attempt_spec.h"
#include "exec/log_file.h"
#include "core/status.h"

namespace ty::exec {

// What the supervisor of an attempt reports, in order.
enum class Phase {
  kPreparing,   // workspace, sandbox, input channels being staged (SageMaker: Downloading)
  kTraining,    // the algorithm processes are running (SageMaker: Training)
  kUploading,   // processes exited; model/output archives being written (SageMaker: Uploading)
  kExited,      // everything done; exit fields below are final
  kLost,        // the supervisor died without writing an exit status (infrastructure failure)
  // Not a phase change: the attempt completed a checkpoint at `at` (docs/scheduling.md,
  // "Checkpoints and work lost"). Reported before the kExited that follows it.
  kCheckpointed,
};

const char* PhaseName(Phase p);

// Why an attempt failed, as the executor classifies it (only meaningful on a kExited event with a
// non-zero exit code that was neither stopped nor out of time). The controller decides retries on
// it; the text of failure_reason is for people.
enum class FailureKind {
  kNone,
  kAlgorithm,  // the job's own code failed (exit code, its failure file, out of memory or disk)
  kClient,     // what the job asked for cannot be done (missing data, a refused archive, an upload the store refused)
  kInternal,   // the host failed (store unreachable, disk full, a setup that failed): transient, retried where allowed
  kCapacity,   // the host could not bring the instances up: retried without consuming attempts
};

const char* FailureKindName(FailureKind k);  // "None", "Algorithm", "Client", "Internal", "Capacity"

// A server directory a job must never read the name of, and what it reads instead.
struct RedactedPath {
  std::string path;   // absolute; one of "" or "/" is never redacted
  std::string label;  // e.g. "<data dir>"
};
// `text` with each occurrence of each path replaced by its label, the longest path first (an
// attempt's directory inside the data directory reads "<attempt dir>", not "<data dir>/..."),
// for every message a job can read: its FailureReason, its transitions, its log lines.
std::string RedactPaths(std::string text, std::vector<RedactedPath> paths);
// Adds `path` (made absolute and normal) with `label`, and its canonical form too where a link
// on the way makes that differ; nothing for "".
void AddRedactedPath(std::vector<RedactedPath>* paths, const std::string& path, const std::string& label);
// The kind of a name FailureKindName gives; kNone for anything else.
FailureKind ParseFailureKind(std::string_view name);

struct AttemptEvent {
  std::string attempt_id;
  Phase phase = Phase::kPreparing;
  EpochMs at = 0;                // when the supervisor entered the phase
  std::string message;           // human-readable, for SecondaryStatusTransitions
  // What the message adds to the phase's fixed text, for a caller that words the phase itself
  // (on kTraining: what staging did, " Input data: N objects ..."; "" when nothing).
  std::string detail;
  // Only meaningful when phase == kExited:
  int exit_code = 0;             // first non-zero exit code among instances, else 0
  bool stopped = false;          // ended because Stop() was called
  bool max_runtime_exceeded = false;
  std::string failure_reason;    // first 1024 chars of /opt/ml/output/failure, or a supervisor error
  FailureKind failure_kind = FailureKind::kNone;
  bool model_uploaded = false;   // model.tar.gz was written
};

// One node as the executor's cluster reports it (the Slurm executor; none on the local executor).
struct NodeReport {
  std::string name;
  std::string state;                    // the cluster's own words, e.g. "MIXED+DRAIN", "DOWN*"
  std::vector<std::string> partitions;
  std::vector<std::string> features;
  bool usable = false;                  // up and accepting work
  int64_t cpus = 0, cpus_alloc = 0;     // allocated: by every job, trainyard's included
  int64_t gpus = 0, gpus_alloc = 0;
  int64_t memory_mib = 0, memory_alloc_mib = 0;
  std::string why;                      // why it is not usable ("" when usable), with the cluster's reason
};

// What the executor's cluster can hold now for trainyard (docs/slurm-capacity.md).
struct CapacityReport {
  EpochMs at = 0;  // when the cluster was asked
  // Capacity key ("type", "type#spot") -> instances the cluster can hold for trainyard now, counting
  // trainyard's own running instances as holdable (the controller subtracts what it runs). A key
  // missing here offers nothing.
  std::map<std::string, int64_t> instances;
  std::vector<NodeReport> nodes;
  std::string problem;  // "" or why the view may be stale or partial (the cluster could not be asked, lines skipped)
};

class Executor {
 public:
  virtual ~Executor() = default;

  // Starts an attempt. Returns once the supervisor has been launched (not when it is running).
  // REQUIRES: attempt_id is unique and was never started before.
  virtual Status Start(const std::string& attempt_id, const AttemptSpec& spec) = 0;

  // Asks the attempt to stop: SIGTERM to every process, SIGKILL after grace_seconds.
  // Idempotent; a no-op for an attempt that already exited.
  virtual Status Stop(const std::string& attempt_id, int grace_seconds) = 0;

  // A spot interruption: like Stop, but each instance is told first. A notice file
  // ($TRAINYARD_INTERRUPTION_NOTICE: {"action": "terminate", "time": <deadline>}) is written
  // before the SIGTERM, so a job can checkpoint and exit early (docs/spot.md).
  virtual Status Interrupt(const std::string& attempt_id, int grace_seconds) { return Stop(attempt_id, grace_seconds); }

  // Re-attaches to an attempt started by an earlier server process (after a restart).
  // Events for it (including ones that happened while the server was down) come from Poll().
  virtual Status Adopt(const std::string& attempt_id) = 0;

  // Phase changes of tracked attempts since the last call, in order per attempt.
  // An attempt is untracked once its kExited or kLost event was returned.
  virtual std::vector<AttemptEvent> Poll() = 0;

  // Whether instances run isolated from the host (a sandbox with its own network namespace
  // possible): EnableNetworkIsolation needs it.
  virtual bool Sandboxed() const { return false; }

  // The complete lines ("<epoch_ms> <text>\n") of one instance's (1-based) log that begin in
  // [offset, offset + max_bytes): at least one when one begins there, however long; a line being
  // written is not returned until it ends. A log that does not exist (yet, or any more) reads as
  // empty. Safe from any thread.
  struct LogChunk {
    std::string bytes;
    int64_t next_offset = 0;  // where the next read goes on
  };
  virtual LogChunk ReadLog(const std::string& attempt_id, int instance, int64_t offset, int64_t max_bytes) const {
    return {"", offset};
  }
  // The same over the instance's system metrics samples: JSON lines {"Timestamp": <epoch ms>,
  // "<MetricName>": <value>, ...} (docs/metrics.md, "System metrics").
  virtual LogChunk ReadSystemMetrics(const std::string& attempt_id, int instance, int64_t offset,
                                     int64_t max_bytes) const {
    return {"", offset};
  }

  // One instance's (1-based) log, for readers that page through it themselves at byte offsets
  // (the Logs API), as it is when called and as it grows; null when there is none (it reads as
  // empty). Lines are "<epoch_ms> <text>\n". Safe from any thread.
  virtual std::unique_ptr<LogFile> OpenLog(const std::string& attempt_id, int instance) const { return nullptr; }

  // Path of the log file of one instance (1-based), for the metric tails that still read it by
  // path. TODO: they move to ReadLog / ReadSystemMetrics, then these go.
  virtual std::string LogPath(const std::string& attempt_id, int instance) const { return ""; }
  virtual std::string SystemMetricsPath(const std::string& attempt_id, int instance) const { return ""; }

  // What the cluster can hold now, per capacity key; null when the executor has no view of its
  // own (the local executor): the configuration's counts stand. Where there is one, a type offers
  // min(its configured count, the reported instances). Cheap (the latest view, shared, never
  // changed once handed out: not a fresh query and not a copy) and safe from any thread.
  virtual std::shared_ptr<const CapacityReport> Capacity() const { return nullptr; }

  // Forgets an attempt's workspace files (keeps logs). Called when an attempt's records are final.
  virtual void Cleanup(const std::string& attempt_id) = 0;

  // Frees the disk space the executor keeps only to start later attempts faster (the local
  // executor's pool of storage volume images); called when the data dir runs short. The bytes freed.
  virtual int64_t ReleaseIdleSpace() { return 0; }

  // Forgets everything of an attempt that is not running (workspace, status, logs), so that the
  // same id can be started again (a restarted or resumed run). Idempotent.
  virtual Status Discard(const std::string& attempt_id) { return Status::Ok(); }

  // Deletes an ended attempt's logs and metrics samples ([logs] retention_days).
  virtual void DiscardLogs(const std::string& attempt_id) {}
};

}  // namespace ty::exec
