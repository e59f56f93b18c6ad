// Reading an attempt directory that a supervisor writes (docs/design/attempt-spec.md): its
// status.json as AttemptEvents, and its logs as lines. Shared by the executors whose attempts
// run under trainyard's supervisor (the local one, and the Slurm one over a shared directory).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "exec/executor.h"

namespace ty::exec::local {

// How far an executor has read one attempt's status.json.
struct StatusCursor {
  size_t transitions_seen = 0;
  // Identity of the status.json last parsed (it is replaced by rename, so a new inode means new
  // content); ReadStatusEvents skips the parse while it is unchanged.
  uint64_t ino = 0;
  int64_t mtime_ns = 0;
  int64_t size = -1;
  EpochMs last_checkpoint = 0;  // the latest one reported
};

// Appends the events of <dir>/status.json past *cursor (advancing it). `force` parses even an
// unchanged file. Returns true when they include kExited (the attempt is over). *exists: whether
// the file is there.
bool ReadStatusEvents(const std::string& id, const std::string& dir, StatusCursor* cursor, bool force,
                      std::vector<AttemptEvent>* events, bool* exists = nullptr);

// The process groups of the instances the supervisor recorded in its status (to end them when
// it died without doing so).
std::vector<int> RecordedInstanceGroups(const std::string& dir);

// The complete lines of a file that begin in [offset, offset + max_bytes) (at least one when one
// begins there, however long), as Executor::ReadLog returns them.
Executor::LogChunk ReadLines(const std::string& path, int64_t offset, int64_t max_bytes);

// The part of an executor whose attempts are directories a supervisor writes under one root
// (<root>/<attempt id>): each instance's log and system metrics samples are read from there,
// and its logs deleted there, wherever the supervisor ran.
class AttemptDirectoryExecutor : public Executor {
 public:
  explicit AttemptDirectoryExecutor(std::string attempts_root) : attempts_root_(std::move(attempts_root)) {}

  LogChunk ReadLog(const std::string& attempt_id, int instance, int64_t offset, int64_t max_bytes) const override;
  LogChunk ReadSystemMetrics(const std::string& attempt_id, int instance, int64_t offset,
                             int64_t max_bytes) const override;
  std::unique_ptr<LogFile> OpenLog(const std::string& attempt_id, int instance) const override;
  std::string LogPath(const std::string& attempt_id, int instance) const override;
  std::string SystemMetricsPath(const std::string& attempt_id, int instance) const override;
  void DiscardLogs(const std::string& attempt_id) override;

 protected:
  const std::string& attempts_root() const { return attempts_root_; }
  std::string Dir(const std::string& id) const { return attempts_root_ + "/" + id; }

 private:
  const std::string attempts_root_;
};

}  // namespace ty::exec::local
