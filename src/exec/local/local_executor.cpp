#include "exec/local/local_executor.h"

#include <fcntl.h>
#include <spawn.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "exec/local/attempt_files.h"
#include "exec/local/attempt_status.h"
#include "exec/local/cgroup.h"
#include "exec/local/sandbox.h"
#include "exec/local/volume.h"

namespace ty::exec {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr EpochMs kStartupGraceMs = 10000;
// Every attempt's status is read at least this often, poked or not.
constexpr EpochMs kFullPollMs = 2000;
// Pokes kept between two polls; past this the next poll reads every attempt.
constexpr size_t kMaxPoked = 4096;

// The startup grace is measured on the monotonic clock: the controller's clock may jump (a wall
// clock step, or `serve --clock=offset` in tests) and must not turn a starting attempt into a
// lost one.
EpochMs SteadyMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

LocalExecutor::LocalExecutor(Options options)
    : AttemptDirectoryExecutor(options.attempts_root), options_(std::move(options)), gpus_(options_.gpus) {
  // Storage volumes and cgroups of supervisors that died while the server was down
  // (exec/local/volume.h, cgroup.h). Afterwards each is released when its attempt's end is noticed
  // (ReleaseLeftovers): a supervisor's start does not scan for them.
  auto alive = [this](const std::string& attempt) {
    return local::SupervisorAlive(options_.attempts_root + "/" + attempt);
  };
  local::SweepOrphanVolumes(options_.attempts_root, alive);
  local::SweepOrphanCgroups(options_.host.cgroup_parent, local::CgroupPrefix(options_.attempts_root), alive);
  local::DiscardVolumePool(RunDir(), RunDir() + "/volumes.lock", false);
  std::error_code ec;
  fs::create_directories(options_.attempts_root, ec);
  const std::string& socket_path = options_.host.notify_socket;
  if (!socket_path.empty() && socket_path.size() < sizeof(sockaddr_un::sun_path)) {
    fs::create_directories(fs::path(socket_path).parent_path(), ec);
    ::unlink(socket_path.c_str());  // a stale one from an earlier server
    socket_fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size());
    if (socket_fd_ >= 0 && ::bind(socket_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      timeval tv{0, 200000};
      ::setsockopt(socket_fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      listener_ = std::thread([this] { Listen(); });
    }
  }
}

LocalExecutor::~LocalExecutor() {
  stopping_ = true;
  // shutdown() wakes a recv() blocked on the socket at once; the receive timeout is the backstop.
  if (socket_fd_ >= 0) ::shutdown(socket_fd_, SHUT_RDWR);
  if (listener_.joinable()) listener_.join();
  if (socket_fd_ >= 0) ::close(socket_fd_);
}

void LocalExecutor::Listen() {
  char buf[512];
  while (!stopping_) {
    ssize_t n = ::recv(socket_fd_, buf, sizeof buf, 0);
    if (stopping_) break;
    if (n < 0) continue;
    {
      MutexLock lock(poked_mu_);
      if (poked_.size() >= kMaxPoked) poked_overflow_ = true;
      else poked_.emplace(buf, static_cast<size_t>(n));
    }
    if (options_.wake) options_.wake();
  }
}

StatusOr<LocalExecutor::SandboxChoice> LocalExecutor::ResolveSandbox(const std::string& configured,
                                                                    const std::string& job_user) {
  if (configured == "none") return SandboxChoice{"none", ""};
  Status st = local::ProbeSandbox(job_user);
  if (st.ok()) return SandboxChoice{"bwrap", ""};
  if (configured == "bwrap")
    return FailedPrecondition("executor.sandbox = \"bwrap\" but bubblewrap does not work on this machine: " + st.message());
  return SandboxChoice{"none", st.message()};
}

Status LocalExecutor::Start(const std::string& id, const AttemptSpec& spec) {
  if (spec.attempt_id != id) return InvalidArgument("attempt spec of " + spec.attempt_id + " started as " + id);
  std::string dir = Dir(id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir + ": " + ec.message());
  // The job's spec and this host's settings, side by side (docs/design/attempt-spec.md). 0600:
  // the host settings carry the object store's credentials.
  std::string text = "{\"attempt\":" + Encode(spec) + ",\"host\":" + local::Encode(options_.host);
  // Each instance's own GPUs (none for a type without), never the same index to two running
  // instances; released when the attempt's end is noticed.
  if (!gpus_.empty()) {
    auto held = gpus_.Allocate(id, std::max(1, spec.instance_count), spec.gpus);
    if (!held.ok()) return LimitExceeded("no GPUs free for " + id + ": " + held.status().message());
    text += ",\"gpus\":" + nlohmann::json(*held).dump();
  }
  text += "}";
  if (!local::WriteFileAtomic(local::SpecPath(dir), text, true, 0600)) {
    gpus_.Release(id);
    return Internal("cannot write the spec of " + id);
  }

  // posix_spawn (vfork-like: cheap even for a large, multi-threaded server) in a new session.
  // If the server dies, the supervisor is re-parented and goes on; while the server lives, it
  // reaps the supervisor in Poll().
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::string log = dir + "/supervisor.log";
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // Nothing else of the server goes along: an inherited listening socket or client connection
  // would outlive a server crash inside every running supervisor.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
  std::vector<std::string> args = {options_.supervisor_binary};
  if (options_.supervisor_binary.find("trainyard-supervisor") == std::string::npos) args.push_back("supervise");
  args.push_back(dir);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    gpus_.Release(id);
    return Internal("cannot start the supervisor " + options_.supervisor_binary + ": " + std::strerror(rc));
  }
  children_.push_back(pid);
  tracked_[id] = Tracked{SteadyMs(), {}};
  return Status::Ok();
}

Status LocalExecutor::Stop(const std::string& id, int grace_seconds) {
  std::string dir = Dir(id);
  if (!fs::exists(dir)) return NotFound("no attempt " + id);
  // The stop file carries the grace and survives a signal that races the supervisor's start.
  local::WriteFileAtomic(local::StopPath(dir), std::to_string(grace_seconds));
  std::string text;
  if (local::ReadFile(local::StatusPath(dir), &text) && local::SupervisorAlive(dir)) {
    json st = json::parse(text, nullptr, false);
    if (st.is_object() && st["supervisor_pid"].is_number_integer() && st["supervisor_start_time"].is_string()) {
      pid_t pid = st["supervisor_pid"].get<pid_t>();
      // The same process, not a later one that got its pid.
      if (pid > 0 && local::ProcStartTime(pid) == st["supervisor_start_time"].get<std::string>())
        ::kill(pid, SIGTERM);
    }
  }
  // Without a status the supervisor has not started yet; it finds the stop file when it does.
  return Status::Ok();
}

Status LocalExecutor::Interrupt(const std::string& id, int grace_seconds) {
  std::string dir = Dir(id);
  if (!fs::exists(dir)) return NotFound("no attempt " + id);
  // Written before the stop file: a supervisor that sees the stop also sees that it is an interruption.
  local::WriteFileAtomic(local::InterruptPath(dir), std::to_string(grace_seconds));
  return Stop(id, grace_seconds);
}

Status LocalExecutor::Adopt(const std::string& id) {
  std::string dir = Dir(id);
  bool has_status = fs::exists(local::StatusPath(dir));
  if (!has_status && !local::SupervisorAlive(dir)) return NotFound("attempt " + id + " was never started");
  tracked_[id] = Tracked{SteadyMs(), {}};
  // What it holds is held again (until its end is noticed).
  std::string spec_text;
  if (!gpus_.empty() && local::ReadFile(local::SpecPath(dir), &spec_text))
    if (auto held = local::PlacedGpus(spec_text)) gpus_.Restore(id, *held);
  return Status::Ok();
}

std::vector<AttemptEvent> LocalExecutor::Poll() {
  std::vector<AttemptEvent> events;
  // Reap supervisors this process started (their outcome is in their status files).
  for (auto it = children_.begin(); it != children_.end();) {
    int st = 0;
    it = ::waitpid(*it, &st, WNOHANG) == 0 ? std::next(it) : children_.erase(it);
  }
  EpochMs now = options_.clock ? options_.clock->now_ms() : 0;
  std::set<std::string> poked;
  // Without the listener (no notify socket) nothing is poked: every poll reads every attempt.
  bool full = !listener_.joinable() || SteadyMs() - last_full_poll_ >= kFullPollMs;
  {
    MutexLock lock(poked_mu_);
    poked.swap(poked_);
    full = full || poked_overflow_;
    poked_overflow_ = false;
  }
  if (full) last_full_poll_ = SteadyMs();
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    const std::string& id = it->first;
    Tracked& t = it->second;
    if (!full && !poked.count(id)) {
      ++it;
      continue;
    }
    std::string dir = Dir(id);
    bool exists = false;
    bool done = local::ReadStatusEvents(id, dir, &t.cursor, false, &events, &exists);
    if (!done && !local::SupervisorAlive(dir) && (exists || SteadyMs() - t.since > kStartupGraceMs)) {
      // The supervisor is gone; read once more in case it finished between the two checks.
      done = local::ReadStatusEvents(id, dir, &t.cursor, true, &events);
      if (!done) {
        // Its instances may have outlived it (children of a job's shell do not get the
        // supervisor's death signal): end their process groups.
        for (int pgid : local::RecordedInstanceGroups(dir)) ::kill(-pgid, SIGKILL);
        ReleaseLeftovers(dir, true);
        AttemptEvent e;
        e.attempt_id = id;
        e.phase = Phase::kLost;
        e.at = now;
        e.message = "the instance was lost: its supervisor exited without recording an outcome";
        events.push_back(e);
        done = true;
      }
    }
    if (done) gpus_.Release(id);
    it = done ? tracked_.erase(it) : std::next(it);
  }
  return events;
}


// Where the supervisors keep what the host's volumes share (their lock, templates and pool), as
// the supervisor finds it.
std::string LocalExecutor::RunDir() const {
  if (!options_.host.data_dir.empty()) return options_.host.data_dir + "/run";
  return fs::path(fs::absolute(options_.attempts_root)).lexically_normal().parent_path().string() + "/run";
}

int64_t LocalExecutor::ReleaseIdleSpace() {
  return local::DiscardVolumePool(RunDir(), RunDir() + "/volumes.lock", true);
}

// A supervisor that was killed may leave its instances' storage volumes mounted in its attempt
// directory (when it could not make a mount namespace of its own), their images (pooled ones stay
// linked while in use) and their cgroups; they go before anything removes the directory
// (exec/local/volume.h, cgroup.h). Without `lost`, the supervisor ended normally and removed its
// volumes' directories and images with its cgroups: when that is so there is nothing to look for.
void LocalExecutor::ReleaseLeftovers(const std::string& attempt_dir, bool lost) {
  std::error_code ec;
  if (!lost && (fs::is_empty(attempt_dir + "/volumes", ec) || ec)) return;
  if (local::SupervisorAlive(attempt_dir)) return;
  local::RemoveLeftoverImages(attempt_dir);
  const std::string root = fs::path(attempt_dir).parent_path().string();
  const std::string attempt = fs::path(attempt_dir).filename().string();
  auto alive = [&attempt](const std::string& other) { return other != attempt; };
  local::SweepOrphanVolumes(root, alive);
  local::SweepOrphanCgroups(options_.host.cgroup_parent, local::CgroupPrefix(root), alive);
}

Status LocalExecutor::Discard(const std::string& id) {
  tracked_.erase(id);
  gpus_.Release(id);
  ReleaseLeftovers(Dir(id), false);
  std::error_code ec;
  fs::remove_all(Dir(id), ec);
  if (ec) return Internal("cannot remove " + Dir(id) + ": " + ec.message());
  return Status::Ok();
}

void LocalExecutor::Cleanup(const std::string& id) {
  ReleaseLeftovers(Dir(id), false);
  std::error_code ec;
  fs::remove_all(Dir(id) + "/hosts", ec);
}

}  // namespace ty::exec
