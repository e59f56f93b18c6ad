// An exclusive flock(2) on a file for a scope: what several processes of one host (supervisors,
// the server) use to take turns at a shared resource. The file is made when missing (0600) and
// never followed through a link; the lock goes with the descriptor, so a process that dies
// holding it releases it.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace ty::exec {

class FileLock {
 public:
  // Waits for the lock. Without a path, or when the file cannot be opened, holds nothing
  // (ok() is false) and the scope goes on unserialised.
  explicit FileLock(const std::string& path) {
    if (path.empty()) return;
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ < 0) return;
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace ty::exec
