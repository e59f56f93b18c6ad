#include "exec/local/allocation_holder.h"

#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

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

// The node's address as the first attempt's supervisor looked it up (nodes.json), for the next.
void RememberNodeAddress(const std::string& attempt_dir) {
  std::string text;
  if (!local::ReadFile(local::NodesPath(attempt_dir), &text)) return;
  auto nodes = nlohmann::json::parse(text, nullptr, false);
  if (!nodes.is_object() || !nodes["names"].is_array() || !nodes["addresses"].is_array() || nodes["names"].size() != 1 ||
      nodes["addresses"].size() != 1 || !nodes["names"][0].is_string() || !nodes["addresses"][0].is_string())
    return;
  const std::string name = nodes["names"][0].get<std::string>();
  const std::string addr = nodes["addresses"][0].get<std::string>();
  const char* self = std::getenv("SLURMD_NODENAME");
  if (name.empty() || addr.empty() || (self && name != self)) return;
  ::setenv(local::kHeldNodeAddressEnv, (name + "=" + addr).c_str(), 1);
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
        if (!std::getenv(local::kHeldNodeAddressEnv)) RememberNodeAddress(attempt.string());
      }
      idle_since = SteadyMs();
      continue;
    }
    if (SteadyMs() - idle_since > max_idle_ms) return 0;
    WaitForChange(watch_fd, 50);
  }
}

}  // namespace ty::exec
