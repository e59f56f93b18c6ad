// Files shared by the local executor and the supervisor inside an attempt directory
// (docs/design/attempt-spec.md).
#pragma once

#include <string>

namespace ty::exec::local {

inline std::string SpecPath(const std::string& dir) { return dir + "/spec.json"; }
inline std::string StatusPath(const std::string& dir) { return dir + "/status.json"; }
inline std::string StopPath(const std::string& dir) { return dir + "/stop"; }
inline std::string InterruptPath(const std::string& dir) { return dir + "/interrupt"; }
// Written by an executor that has given the attempt up (its Slurm node failed): every process of
// the attempt is killed at once and nothing more is recorded as its outcome.
inline std::string FencePath(const std::string& dir) { return dir + "/fence"; }
// On Slurm: written by the supervisor when the instances on other nodes are to end (a stop, a
// failed instance, MaxRuntimeInSeconds), with the grace in seconds. Each node agent looks for it
// ten times a second. A signal cannot carry this: srun turns a SIGTERM into a SIGKILL of the
// whole step, and passes other signals to every process of the step, the job's own included.
inline std::string EndPath(const std::string& dir) { return dir + "/end"; }
// On Slurm: the job's nodes in instance order, written by the supervisor before any instance
// starts ({"names": [...], "addresses": [...]}).
inline std::string NodesPath(const std::string& dir) { return dir + "/nodes.json"; }
inline std::string LockPath(const std::string& dir) { return dir + "/lock"; }
inline std::string LogDir(const std::string& dir) { return dir + "/logs"; }
// System metrics samples of one instance (JSON lines, exec/local/system_sampler.h), beside its log.
inline std::string SystemMetricsPath(const std::string& dir, int n) {
  return LogDir(dir) + "/algo-" + std::to_string(n) + ".system.jsonl";
}
inline std::string HostDir(const std::string& dir, int n) { return dir + "/hosts/algo-" + std::to_string(n); }

// Writes `text` to `path` atomically (temp file, rename); `durable` also fsyncs it first.
// `mode` is the new file's permission bits (0600 for files that hold secrets).
bool WriteFileAtomic(const std::string& path, const std::string& text, bool durable = true, int mode = 0644);
// Reads a whole file; false when it cannot be read.
bool ReadFile(const std::string& path, std::string* out);
// True when some process holds the attempt's lock (its supervisor, alive).
bool SupervisorAlive(const std::string& dir);
// Field 22 (starttime, clock ticks since boot) of /proc/<pid>/stat; "" when there is no such
// process. Together with the pid it names one process for good (pids get reused).
std::string ProcStartTime(int pid);

}  // namespace ty::exec::local
