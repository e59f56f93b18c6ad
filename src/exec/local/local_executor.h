// The local executor: each attempt runs on this host under a detached supervisor process.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "core/thread_annotations.h"
#include "exec/executor.h"
#include "exec/local/attempt_status.h"
#include "exec/local/gpus.h"
#include "exec/local/host_settings.h"

namespace ty::exec {

// Contracts beyond the port's:
//  - Start() returns within milliseconds: it writes spec.json (the AttemptSpec and this host's
//    settings, Options::host) and spawns `<supervisor_binary> [supervise] <dir>` in a session of its own, with no file
//    descriptor of this process but stdio (stdout/stderr go to <dir>/supervisor.log). The
//    supervisor outlives this process; while this process lives, Poll() reaps it.
//  - Liveness of a supervisor is the flock it holds on <dir>/lock (immune to pid reuse); Stop()
//    also checks /proc/<pid>/stat's start time against status.json before signalling.
//  - Poll() reports kLost when a supervisor is gone without an Exited status (10 s of grace for
//    one that never wrote a status), and SIGKILLs the process groups it recorded.
//  - A supervisor's poke names its attempt: Poll() reads the status of the attempts poked since
//    the last call only, and every attempt's about every 2 s (a supervisor that was killed pokes
//    no more), so its cost does not grow with the attempts running.
//  - The listener thread only records pokes and calls wake(); the destructor ends it promptly.
class LocalExecutor final : public local::AttemptDirectoryExecutor {
 public:
  struct Options {
    std::string attempts_root;      // <data-dir>/attempts
    std::string supervisor_binary;  // trainyard-supervisor, or the trainyard binary (`supervise DIR`)
    // How attempts run on this host; host.notify_socket is the unix datagram socket supervisors
    // poke on each phase change.
    local::HostSettings host;
    std::function<void()> wake;     // called (from a listener thread) when a supervisor pokes
    // The host's GPUs in service (docs/gpus.md): each instance of a GPU type is given its own
    // indices, written into its spec.json; empty: none placed.
    std::vector<int> gpus;
    const Clock* clock = nullptr;
  };

  // The sandbox this host can give jobs, for `configured` ("auto", "bwrap" or "none"): "bwrap"
  // when bubblewrap can build a job's sandbox as the supervisor builds it (the job user, a user
  // namespace, no capabilities, the seccomp filter), else "none" with `problem` saying why.
  // "bwrap" that does not work is FailedPrecondition. Call once, before construction.
  struct SandboxChoice {
    std::string mode;     // "bwrap" or "none"
    std::string problem;  // why not "bwrap"; "" when it is, or when "none" was configured
  };
  static StatusOr<SandboxChoice> ResolveSandbox(const std::string& configured, const std::string& job_user);

  explicit LocalExecutor(Options options);
  ~LocalExecutor() override;

  Status Start(const std::string& attempt_id, const AttemptSpec& spec) override;
  Status Stop(const std::string& attempt_id, int grace_seconds) override;
  Status Interrupt(const std::string& attempt_id, int grace_seconds) override;
  Status Adopt(const std::string& attempt_id) override;
  std::vector<AttemptEvent> Poll() override;
  bool Sandboxed() const override { return options_.host.sandbox == "bwrap"; }
  void Cleanup(const std::string& attempt_id) override;
  int64_t ReleaseIdleSpace() override;
  Status Discard(const std::string& attempt_id) override;

 private:
  // What a supervisor that died (`lost`: without an outcome) left of `attempt_dir`: its volumes'
  // mounts and images, and its instances' cgroups. No scan of the host's mount table for an
  // attempt that ended normally and left nothing.
  void ReleaseLeftovers(const std::string& attempt_dir, bool lost);
  std::string RunDir() const;
  struct Tracked {
    EpochMs since = 0;  // when tracking began, on the monotonic clock (a supervisor gets a moment to write its status)
    local::StatusCursor cursor;
  };

  void Listen();

  // ---- constant after construction ----
  Options options_;
  // ---- thread-safe ----
  local::GpuInventory gpus_;
  // ---- controller thread only ----
  std::map<std::string, Tracked> tracked_;
  std::vector<int> children_;  // supervisor pids started by this process, until reaped
  EpochMs last_full_poll_ = 0;  // on the monotonic clock
  // ---- listener ----
  Mutex poked_mu_;
  std::set<std::string> poked_ GUARDED_BY(poked_mu_);  // attempts poked since the last Poll
  bool poked_overflow_ GUARDED_BY(poked_mu_) = false;  // too many to keep: Poll reads them all
  int socket_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread listener_;
};

}  // namespace ty::exec
