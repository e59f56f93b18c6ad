#include "exec/local_executor.h"

#include <fcntl.h>
#include <spawn.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "exec/local/attempt_files.h"

namespace ty::exec {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr EpochMs kStartupGraceMs = 10000;

Phase ParsePhase(const std::string& s) {
  if (s == "Training") return Phase::kTraining;
  if (s == "Uploading") return Phase::kUploading;
  if (s == "Exited") return Phase::kExited;
  return Phase::kPreparing;
}
}  // namespace

LocalExecutor::LocalExecutor(Options options) : options_(std::move(options)) {
  std::error_code ec;
  fs::create_directories(options_.attempts_root, ec);
  if (!options_.notify_socket.empty() && options_.notify_socket.size() < sizeof(sockaddr_un::sun_path)) {
    ::unlink(options_.notify_socket.c_str());
    socket_fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, options_.notify_socket.c_str(), options_.notify_socket.size());
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
    if (n >= 0 && options_.wake) options_.wake();
  }
}

Status LocalExecutor::Start(const std::string& id, const std::string& spec_json) {
  std::string dir = Dir(id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir + ": " + ec.message());
  json spec = json::parse(spec_json, nullptr, false);
  if (spec.is_discarded() || !spec.is_object()) return InvalidArgument("attempt spec is not a JSON object");
  spec["notify_socket"] = options_.notify_socket;
  if (!local::WriteFileAtomic(local::SpecPath(dir), spec.dump())) return Internal("cannot write the spec of " + id);

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
  if (rc != 0) return Internal("cannot start the supervisor " + options_.supervisor_binary + ": " + std::strerror(rc));
  children_.push_back(pid);
  tracked_[id] = Tracked{0, options_.clock ? options_.clock->now_ms() : 0};
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

Status LocalExecutor::Adopt(const std::string& id) {
  std::string dir = Dir(id);
  bool has_status = fs::exists(local::StatusPath(dir));
  if (!has_status && !local::SupervisorAlive(dir)) return NotFound("attempt " + id + " was never started");
  tracked_[id] = Tracked{0, options_.clock ? options_.clock->now_ms() : 0};
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
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    const std::string& id = it->first;
    Tracked& t = it->second;
    std::string dir = Dir(id);
    std::string text;
    json st;
    bool readable = local::ReadFile(local::StatusPath(dir), &text) &&
                    !(st = json::parse(text, nullptr, false)).is_discarded();
    bool done = false;
    if (readable) {
      const json& transitions = st["transitions"];
      for (size_t i = t.transitions_seen; i < transitions.size(); ++i) {
        AttemptEvent e;
        e.attempt_id = id;
        e.phase = ParsePhase(transitions[i].value("phase", ""));
        e.at = transitions[i].value("at", EpochMs{0});
        e.message = transitions[i].value("message", "");
        if (e.phase == Phase::kExited) {
          e.exit_code = st.value("exit_code", 0);
          e.stopped = st.value("stopped", false);
          e.max_runtime_exceeded = st.value("max_runtime_exceeded", false);
          e.failure_reason = st.value("failure_reason", "");
          e.model_uploaded = st.value("model_uploaded", false);
          done = true;
        }
        events.push_back(e);
      }
      t.transitions_seen = transitions.size();
    }
    if (!done && !local::SupervisorAlive(dir) && (readable || now - t.since > kStartupGraceMs)) {
      // The supervisor is gone; read once more in case it finished between the two checks.
      std::string again;
      json st2;
      if (local::ReadFile(local::StatusPath(dir), &again) &&
          !(st2 = json::parse(again, nullptr, false)).is_discarded() && st2.value("phase", "") == "Exited") {
        ++it;  // picked up by the next Poll
        continue;
      }
      // Its instances may have outlived it (children of a job's shell do not get the
      // supervisor's death signal): end their process groups.
      if (readable)
        for (const auto& pgid : st.value("instance_pgids", json::array()))
          if (pgid.get<int>() > 1) ::kill(-pgid.get<pid_t>(), SIGKILL);
      AttemptEvent e;
      e.attempt_id = id;
      e.phase = Phase::kLost;
      e.at = now;
      e.message = "the instance was lost: its supervisor exited without recording an outcome";
      events.push_back(e);
      done = true;
    }
    it = done ? tracked_.erase(it) : std::next(it);
  }
  return events;
}

std::string LocalExecutor::LogPath(const std::string& id, int instance) const {
  return local::LogDir(Dir(id)) + "/algo-" + std::to_string(instance) + ".log";
}

void LocalExecutor::Cleanup(const std::string& id) {
  std::error_code ec;
  fs::remove_all(Dir(id) + "/hosts", ec);
}

}  // namespace ty::exec
