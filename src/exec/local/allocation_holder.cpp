#include "exec/local/allocation_holder.h"

#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>

#include "core/steady_clock.h"
#include "exec/local/attempt_files.h"
#include "exec/local/supervisor.h"

namespace ty::exec {

namespace fs = std::filesystem;

namespace {

// Waits up to `ms` for a change in the watched directory (or just sleeps, without a watch: a
// shared file system whose changes come from another machine raises no event, so the caller
// looks again after the wait either way).
void WaitForChange(int watch_fd, int ms) {
  if (watch_fd < 0) {
    ::poll(nullptr, 0, ms);
    return;
  }
  pollfd p{watch_fd, POLLIN, 0};
  if (::poll(&p, 1, ms) > 0) {
    char buf[4096];
    while (::read(watch_fd, buf, sizeof buf) > 0) {
    }
  }
}

}  // namespace

int RunAllocationHolder(const std::string& dir, const std::string& attempts_root, int64_t max_idle_ms) {
  ::signal(SIGPIPE, SIG_IGN);
  const fs::path root = fs::absolute(attempts_root).lexically_normal();
  const std::string next_path = dir + "/next";
  const std::string running_path = dir + "/running";
  int watch_fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (watch_fd >= 0 && ::inotify_add_watch(watch_fd, dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF) < 0) {
    ::close(watch_fd);
    watch_fd = -1;
  }
  int64_t idle_since = SteadyMs();
  while (true) {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return 0;  // given back: the allocation goes
    std::string next;
    if (local::ReadFile(next_path, &next)) {
      while (!next.empty() && (next.back() == '\n' || next.back() == ' ')) next.pop_back();
      // Only an attempt directory of the same server: a sibling inside its attempts directory.
      const fs::path attempt = fs::path(next).lexically_normal();
      const bool runnable = attempt.parent_path() == root && fs::is_directory(attempt);
      if (runnable) local::WriteFileAtomic(running_path, attempt.string() + "\n");
      ::unlink(next_path.c_str());
      if (runnable) {
        pid_t pid = ::fork();
        if (pid == 0) {
          if (watch_fd >= 0) ::close(watch_fd);
          ::_exit(RunSupervisor(attempt.string()));
        }
        int status;
        while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        ::unlink(running_path.c_str());
      }
      idle_since = SteadyMs();
      continue;
    }
    if (SteadyMs() - idle_since > max_idle_ms) return 0;
    WaitForChange(watch_fd, 50);
  }
}

}  // namespace ty::exec
