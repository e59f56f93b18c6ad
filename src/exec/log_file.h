// One log an executor keeps for an instance of an attempt (its output lines, or its system
// metrics samples), read at byte offsets by whoever pages through it (the Logs API), so that no
// reader needs to know where or how the executor stores it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ty::exec {

class LogFile {
 public:
  virtual ~LogFile() = default;
  // Up to `n` bytes from `offset` into `buf`: how many were read (0 at the end), or -1 on an
  // error. A log still being written reads further on a later call. Safe from any thread.
  virtual int64_t ReadAt(int64_t offset, char* buf, size_t n) const = 0;
  // Its size now (0 on an error).
  virtual int64_t Size() const = 0;
};

// A file of this host, opened now; null when it cannot be opened (a log that does not exist
// reads as empty to every reader).
std::unique_ptr<LogFile> OpenLocalLogFile(const std::string& path);

}  // namespace ty::exec
