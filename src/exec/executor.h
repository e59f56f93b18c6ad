// The Executor port: where training-job attempts run.
//
// The controller hands the executor an attempt spec (JSON, format in docs/design/attempt-spec.md)
// and learns what happened by polling. Implementations: local/ (processes on this host under a
// supervisor of ours). Every call is made from the controller thread only, except that the
// wake callback may be invoked from any thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
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

struct AttemptEvent {
  std::string attempt_id;
  Phase phase = Phase::kPreparing;
  EpochMs at = 0;                // when the supervisor entered the phase
  std::string message;           // human-readable, for SecondaryStatusTransitions
  // Only meaningful when phase == kExited:
  int exit_code = 0;             // first non-zero exit code among instances, else 0
  bool stopped = false;          // ended because Stop() was called
  bool max_runtime_exceeded = false;
  std::string failure_reason;    // first 1024 chars of /opt/ml/output/failure, or a supervisor error
  bool model_uploaded = false;   // model.tar.gz was written
};

class Executor {
 public:
  virtual ~Executor() = default;

  // Starts an attempt. Returns once the supervisor has been launched (not when it is running).
  // REQUIRES: attempt_id is unique and was never started before.
  virtual Status Start(const std::string& attempt_id, const std::string& spec_json) = 0;

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

  // Path of the log file of one instance (1-based), for tailing. Lines are "<epoch_ms> <text>".
  virtual std::string LogPath(const std::string& attempt_id, int instance) const = 0;

  // Path of the system metrics samples of one instance (1-based), for tailing: JSON lines
  // {"Timestamp": <epoch ms>, "<MetricName>": <value>, ...} (docs/metrics.md, "System metrics").
  // Kept with the logs.
  virtual std::string SystemMetricsPath(const std::string& attempt_id, int instance) const = 0;

  // Forgets an attempt's workspace files (keeps logs). Called when an attempt's records are final.
  virtual void Cleanup(const std::string& attempt_id) = 0;
};

}  // namespace ty::exec
