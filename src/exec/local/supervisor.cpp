// The supervisor of one attempt: `trainyard supervise <attempt_dir>`.
//
// It runs detached from the server (its own session), holds <dir>/lock for its whole life (so a
// restarted server can tell it is alive without trusting pids), builds each instance's /opt/ml
// tree, starts every instance together, captures their output as timestamped log lines, enforces
// stop requests, the grace period and MaxRuntimeInSeconds, packs the artifacts, and records every
// phase in <dir>/status.json.
//
// It never lets an exception out (a failure of its own is recorded as the attempt's outcome) and
// never leaves a process of the attempt behind: on exit every instance's process group is gone,
// and if it is killed itself the instances get SIGKILL from the kernel (PR_SET_PDEATHSIG, and
// bubblewrap's --die-with-parent inside the sandbox).
#include <fcntl.h>
#include <openssl/rand.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "exec/local/archive.h"
#include "exec/local/attempt_files.h"
#include "exec/local/cgroup.h"
#include "exec/data_access.h"
#include "exec/local/data.h"
#include "exec/local/host_settings.h"
#include "exec/local/job_tree.h"
#include "exec/local/opt_ml.h"
#include "exec/local/outputs.h"
#include "exec/local/run_command.h"
#include "exec/local/sandbox.h"
#include "exec/local/sandbox_plan.h"
#include "exec/local/gpus.h"
#include "exec/local/ports.h"
#include "exec/local/system_sampler.h"
#include "exec/local/volume.h"
#include "exec/local/supervisor.h"
#include "exec/attempt_spec.h"
#include "exec/image/cache.h"
#include "exec/image/command.h"
#include "exec/image/reference.h"
#include "exec/distribution.h"
#include "exec/executor.h"

namespace ty::exec {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int64_t NowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

int g_signal_pipe[2] = {-1, -1};
// Async-signal-safe: one byte into the self-pipe, errno preserved; the main loop does the rest.
void OnSignal(int) {
  int saved = errno;
  char c = 1;
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &c, 1);
  errno = saved;
}

struct Instance {
  int n = 0;
  pid_t pid = -1;
  int out_fd = -1;
  std::string pending;  // partial line
  FILE* log = nullptr;
  int64_t log_bytes = 0;     // size of the log file (it is appended to across runs)
  bool log_capped = false;   // hit max_log_bytes_: the rest of the output is dropped
  bool exited = false;
  int exit_code = 0;
  int64_t drain_deadline = 0;  // once exited: when to stop waiting for its pipe to close
  bool job_termed = false;     // sandboxed: the job's own process has had its SIGTERM (Signal)
  bool remote = false;         // srun to another Slurm node: a stop goes through the end file
};

// How many objects of a channel are downloaded at once.
constexpr int kDownloadThreads = 8;

// SageMaker's limit on FailureReason: the most of /opt/ml/output/failure that is read.
constexpr size_t kMaxFailureBytes = 1024;
// How many entries one pass over an instance's tree reports as left out in the job's log (a
// tree of a million links must not become a million log lines); then one line with the count.
constexpr int kMaxSkipLines = 50;
// What a source directory archive may unpack to (the host's disk is shared).
constexpr local::ExtractLimits kSourceDirLimits{100'000, int64_t{8} << 30};

// How long the output of an exited instance may keep coming (from processes that left its
// process group) before the supervisor stops reading it.
constexpr int64_t kDrainMs = 2000;

// SIGTERM and SIGINT go to the self-pipe (the main loop treats them as a stop request); SIGPIPE
// and SIGHUP are ignored. False when the pipe cannot be made.
bool CatchSignals() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  return true;
}

class Supervisor {
 public:
  explicit Supervisor(std::string dir) : dir_(std::move(dir)) {}

  int Run() {
    // SIGTERM (Executor::Stop) must never kill the supervisor: the handler is in place before
    // anything about this supervisor is visible to the executor.
    if (!CatchSignals()) return 5;

    lock_fd_ = ::open(local::LockPath(dir_).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) return 3;  // another supervisor runs
    // A supervisor that ran this attempt before left its status: started twice (a server restart
    // can start one while the first has not taken the lock yet), the second never runs it again.
    if (::access(local::StatusPath(dir_).c_str(), F_OK) == 0) return 3;
    if (!Load()) return 4;
    status_ = {{"supervisor_pid", ::getpid()}, {"supervisor_start_time", local::ProcStartTime(::getpid())},
               {"phase", "Preparing"}, {"transitions", json::array()}};
    try {
      RunAttempt();
      return 0;
    } catch (const std::exception& e) {
      return RecordOwnFailure(e.what());
    } catch (...) {
      return RecordOwnFailure("unknown error");
    }
  }

  // On Slurm, instance n (n >= 2) on the job's node n: `trainyard-supervisor --instance n DIR`,
  // started through srun by the supervisor on the first node. It builds the instance's sandbox
  // on this node, runs the job's command with its output on stdout (srun carries it back to the
  // supervisor, which writes the log), passes a stop's SIGTERM on as the supervisor does and
  // kills the instance after the grace or at once when the attempt is fenced. Its exit code is
  // the instance's.
  int RunInstanceAgent(int n) {
    if (!CatchSignals()) return 125;
    if (!Load()) {
      std::fprintf(stderr, "[trainyard] algo-%d: cannot read the attempt's spec in %s\n", n, dir_.c_str());
      return 125;
    }
    count_ = std::max(1, spec_.instance_count);
    if (n < 2 || n > count_) return 125;
    configured_.assign(static_cast<size_t>(count_), true);
    sandbox_ = host_.sandbox == "bwrap";
    slurm_ = true;
    grace_ms_ = spec_.stop_grace_seconds * 1000;
    ReadNodes();
    ReadPorts();
    try {
      if (sandbox_) {
        auto user = local::ResolveJobUser(host_.job_user);
        if (!user.ok()) throw std::runtime_error(user.status().message());
        job_user_ = *user;
      }
      if (!LoadImage()) throw std::runtime_error("cannot read the attempt's image (image.json)");
      auto command = InstanceCommand();
      if (!command.ok()) throw std::runtime_error(command.status().message());
      std::vector<std::string> argv = std::move(command).value();
      local::Sandbox sb(job_user_.switch_user);
      if (sandbox_) {
        Status st = BuildSandbox(n, &sb);
        auto wrapped = st.ok() ? sb.Command(argv) : StatusOr<std::vector<std::string>>(st);
        if (!wrapped.ok()) throw std::runtime_error(wrapped.status().message());
        argv = std::move(wrapped).value();
      }
      std::vector<std::string> env_strings;
      for (auto& [k, v] : Environment(n)) env_strings.push_back(k + "=" + v);
      std::vector<char*> envp, args;
      for (auto& e : env_strings) envp.push_back(e.data());
      envp.push_back(nullptr);
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      Instance inst;
      inst.n = n;
      inst.pid = SpawnInstanceProcess(n, sandbox_ ? &sb : nullptr, args, envp, 1, sandbox_ ? "/" : local::HostDir(dir_, n) + "/code");
      if (inst.pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
      ::setpgid(inst.pid, inst.pid);
      instances_.push_back(inst);
      // Sampled here, on its node, into the shared attempt directory.
      cuda_visible_.assign(static_cast<size_t>(count_), std::nullopt);
      if (const char* cuda = std::getenv("CUDA_VISIBLE_DEVICES")) cuda_visible_[static_cast<size_t>(n - 1)] = cuda;
      StartSystemSampler();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[trainyard] cannot start algo-%d: %s\n", n, e.what());
      return 125;
    }
    Instance& inst = instances_.front();
    while (!inst.exited) {
      ::poll(nullptr, 0, 100);
      int status;
      if (::waitpid(inst.pid, &status, WNOHANG) == inst.pid) {
        inst.exited = true;
        inst.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        ::kill(-inst.pid, SIGKILL);
        break;
      }
      int64_t now = NowMs();
      if (Fenced()) {
        Signal(SIGKILL);
        continue;
      }
      if (!stopped_ && (StopRequested() || EndRequested())) {
        stopped_ = true;
        BeginStop();
      }
      EnforceGrace(now);
    }
    if (sampler_) sampler_->Stop();
    return inst.exit_code;
  }

 private:
  // Reads <dir>/spec.json: {"attempt": <AttemptSpec>, "host": <HostSettings>}
  // (docs/design/attempt-spec.md).
  bool Load() {
    std::string text;
    if (!local::ReadFile(local::SpecPath(dir_), &text)) return false;
    json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("attempt") || !doc.contains("host")) return false;
    auto spec = DecodeAttemptSpec(doc["attempt"].dump());
    auto host = local::DecodeHostSettings(doc["host"].dump());
    if (!spec.ok() || !host.ok()) return false;
    spec_ = std::move(spec).value();
    host_ = std::move(host).value();
    placed_gpus_ = local::PlacedGpus(text);
    slurm_ = host_.launcher == "slurm";
    server_paths_.clear();
    AddRedactedPath(&server_paths_, dir_, "<attempt dir>");
    AddRedactedPath(&server_paths_, fs::absolute(dir_).lexically_normal().parent_path().string(), "<attempts dir>");
    AddRedactedPath(&server_paths_, host_.data_dir, "<data dir>");
    return true;
  }

  // `text` as a job may read it: no directory of the server's named (exec/executor.h, RedactPaths).
  std::string ForTheJob(std::string text) const { return RedactPaths(std::move(text), server_paths_); }

  bool Fenced() const {
    struct stat st;
    return ::stat(local::FencePath(dir_).c_str(), &st) == 0;
  }

  // ---- Slurm (docs/slurm.md) ----
  // The command line of a Slurm command from the configured directory.
  std::string SlurmCommand(const char* name) const {
    return host_.slurm_bin_dir.empty() ? std::string(name) : host_.slurm_bin_dir + "/" + name;
  }
  std::vector<std::pair<std::string, std::string>> SlurmEnv() const {
    if (host_.slurm_conf.empty()) return {};
    return {{"SLURM_CONF", host_.slurm_conf}};
  }

  // The job's nodes (SLURM_JOB_NODELIST, in Slurm's order: instance n runs on the n-th) and
  // their addresses (each node's NodeAddr), recorded in nodes.json for the node agents.
  bool ResolveSlurmNodes(std::string* error) {
    const char* list = std::getenv("SLURM_JOB_NODELIST");
    const char* job = std::getenv("SLURM_JOB_ID");
    if (!list || !job) {
      *error = "the supervisor runs on Slurm but not inside a Slurm job (no SLURM_JOB_ID / SLURM_JOB_NODELIST)";
      return false;
    }
    slurm_job_id_ = job;
    std::string out, err;
    // One plain name (a held allocation's one node) needs no expanding.
    if (std::string_view(list).find_first_of("[,") == std::string_view::npos && *list) {
      out = std::string(list) + "\n";
    } else if (local::CaptureCommand({SlurmCommand("scontrol"), "show", "hostnames", list}, SlurmEnv(), &out, &err) != 0) {
      *error = "scontrol show hostnames " + std::string(list) + ": " + err;
      return false;
    }
    node_names_.clear();
    for (size_t pos = 0; pos < out.size();) {
      size_t nl = out.find('\n', pos);
      std::string name = out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      if (!name.empty()) node_names_.push_back(name);
      pos = nl == std::string::npos ? out.size() : nl + 1;
    }
    if (static_cast<int>(node_names_.size()) < count_) {
      *error = "the Slurm job has " + std::to_string(node_names_.size()) + " nodes for " + std::to_string(count_) + " instances";
      return false;
    }
    node_names_.resize(static_cast<size_t>(count_));
    node_addrs_.clear();
    json listed = json::object();
    if (std::string text; !host_.slurm_node_addresses.empty() && local::ReadFile(host_.slurm_node_addresses, &text)) {
      listed = json::parse(text, nullptr, false);
      if (!listed.is_object()) listed = json::object();
    }
    for (const std::string& name : node_names_) {
      out.clear();
      err.clear();
      std::string addr = name;
      // Known to the server from its last read of the nodes.
      if (auto it = listed.find(name); it != listed.end() && it->is_string() && !it->get<std::string>().empty()) {
        node_addrs_.push_back(it->get<std::string>());
        continue;
      }
      if (local::CaptureCommand({SlurmCommand("scontrol"), "show", "node", "--oneliner", name}, SlurmEnv(), &out, &err) == 0) {
        auto at = out.find(" NodeAddr=");
        if (at != std::string::npos) {
          at += 10;
          addr = out.substr(at, out.find_first_of(" \n", at) - at);
        }
      }
      node_addrs_.push_back(addr);
    }
    json nodes = {{"job_id", slurm_job_id_}, {"names", node_names_}, {"addresses", node_addrs_}};
    if (!local::WriteFileAtomic(local::NodesPath(dir_), nodes.dump(), false)) {
      *error = "cannot write " + local::NodesPath(dir_);
      return false;
    }
    std::string where;
    for (int n = 1; n <= count_; ++n)
      where += (n > 1 ? ", " : "") + std::string("algo-") + std::to_string(n) + " on " + node_names_[n - 1] + " (" +
               node_addrs_[n - 1] + ")";
    Log("Slurm job " + slurm_job_id_ + ": " + where);
    status_["slurm"] = nodes;
    return true;
  }
  void ReadNodes() {
    std::string text;
    if (!local::ReadFile(local::NodesPath(dir_), &text)) return;
    json nodes = json::parse(text, nullptr, false);
    if (!nodes.is_object()) return;
    try {
      slurm_job_id_ = nodes.value("job_id", "");
      node_names_ = nodes.value("names", std::vector<std::string>{});
      node_addrs_ = nodes.value("addresses", std::vector<std::string>{});
    } catch (const json::exception&) {
    }
  }

  // srun of instance n's node agent on the job's n-th node (relative n - 1), in the job's
  // allocation, its output and exit code carried back.
  std::vector<std::string> SrunCommand(int n) const {
    std::vector<std::string> argv = {SlurmCommand("srun"),
                                     "--jobid=" + slurm_job_id_,
                                     "--nodes=1",
                                     "--ntasks=1",
                                     "--relative=" + std::to_string(n - 1),
                                     "--overlap",
                                     "--kill-on-bad-exit=0",
                                     "--quiet",
                                     "--job-name=algo-" + std::to_string(n),
                                     host_.agent_binary,
                                     "--instance",
                                     std::to_string(n),
                                     fs::absolute(dir_).string()};
    return argv;
  }

  // Preparing -> Training -> Uploading -> Exited.
  void RunAttempt() {
    // Resuming after a crash of the supervisor itself is not attempted: a new one starts clean.
    std::string fastfile;
    for (const auto& ch : spec_.channels)
      if (ch.input_mode == "FastFile") fastfile += (fastfile.empty() ? "" : ", ") + ch.name;
    Enter("Preparing", "Preparing the instances for training and downloading input data." +
                           (fastfile.empty() ? std::string()
                                             : " FastFile input mode is staged as File mode on this host (channels: " +
                                                   fastfile + "): the data is downloaded in full before training starts."));
    count_ = std::max(1, spec_.instance_count);
    configured_.assign(static_cast<size_t>(count_), false);
    sandbox_ = host_.sandbox == "bwrap";
    grace_ms_ = spec_.stop_grace_seconds * 1000;
    max_log_bytes_ = host_.log_max_bytes;
    fs::create_directories(local::LogDir(dir_));
    if (sandbox_) {
      auto user = local::ResolveJobUser(host_.job_user);
      if (!user.ok()) throw std::runtime_error(user.status().message());
      job_user_ = *user;
      // On this host the server releases what a killed supervisor left (LocalExecutor), so a
      // start does not scan every running attempt; on a Slurm node the server is elsewhere.
      if (slurm_) SweepOrphans();
      PrivateMounts();
    }

    mover_ = std::make_unique<local::DataMover>(host_.object_store, host_.object_dir_root, host_.object_cache_dir,
                                                spec_.data_access);
    sync_seconds_ = std::max(1, host_.object_store.checkpoint_sync_seconds);

    std::string error;
    if (slurm_ && !ResolveSlurmNodes(&error)) {
      Fail(FailureKind::kInternal, error);
    } else if (!StopRequested()) {
      if (!Prepare(&error)) {
        Fail(capacity_error_          ? FailureKind::kCapacity
             : infrastructure_error_ ? FailureKind::kInternal
                                     : FailureKind::kClient,
             error);
      } else if (!StopRequested()) {
        if (!HoldPorts(&error) || !Launch(&error)) {
          Fail(FailureKind::kInternal, error);
          BeginStop();
        }
        Enter("Training", "Training in progress." + InputSummary(), InputSummary());
        StartCheckpointSync();
        StartSystemSampler();
        Supervise();
        StopSystemSampler();
        NoteCheckpoint(NowMs(), true);
        StopCheckpointSync();
        NoteResourceFailure();
      }
    }
    if (StopRequested() && launched_ == 0) stopped_ = true;
    if (Fenced()) {
      // The executor gave the attempt up (its node failed): what is left is not uploaded.
      Fail(FailureKind::kCapacity, "CapacityError: the attempt was given up by the server (a node of its Slurm job failed)");
      ReleaseInstances();
      RecordOutcome();
      return;
    }
    // An image that could not be had: nothing was prepared or ran, so there is nothing to upload
    // (as with AWS, a job that could not pull its image has no artifacts).
    // Nor when its data was refused: the job wrote nothing anywhere.
    if (!image_unavailable_ && !access_denied_) {
      Enter("Uploading", "Uploading generated training model.");
      Upload();
    }
    ReleaseInstances();
    RecordOutcome();
  }

  void RecordOutcome() {
    status_["exit_code"] = exit_code_;
    status_["stopped"] = stopped_;
    status_["max_runtime_exceeded"] = max_runtime_exceeded_;
    status_["failure_reason"] = ForTheJob(failure_);
    // A non-zero exit nothing else explained is the job's own.
    if (failure_kind_ == FailureKind::kNone && exit_code_ != 0 && !stopped_ && !max_runtime_exceeded_)
      failure_kind_ = FailureKind::kAlgorithm;
    status_["failure_kind"] = FailureKindName(failure_kind_);
    status_["model_uploaded"] = model_uploaded_;
    Enter("Exited", "");
  }

  // An error of the supervisor itself (an exception): no process of the attempt survives it, and
  // the outcome says what happened.
  int RecordOwnFailure(const std::string& what) {
    try {
      StopCheckpointSync();
      if (sampler_) sampler_->Stop();
      for (auto& i : instances_)
        if (i.pid > 0) ::kill(-i.pid, SIGKILL);
      for (auto& i : instances_) {
        int st;
        if (i.pid > 0 && !i.exited) ::waitpid(i.pid, &st, 0);
      }
      ReleaseInstances();
      if (exit_code_ == 0) exit_code_ = 1;
      failure_ = "InternalServerError: the supervisor failed: " + what;
      failure_kind_ = FailureKind::kInternal;
      RecordOutcome();
      return 0;
    } catch (...) {
      return 5;
    }
  }

  // The attempt's outcome, with the reason's conventional prefix for its kind
  // ("InternalServerError: ", "ClientError: "); the first failure recorded stands.
  void Fail(FailureKind kind, const std::string& what) {
    if (failure_.empty()) {
      failure_ = (kind == FailureKind::kInternal ? "InternalServerError: " : kind == FailureKind::kClient ? "ClientError: " : "") + what;
      failure_kind_ = kind;
    }
    if (exit_code_ == 0) exit_code_ = 1;
  }

  // `detail`: what `message` adds to the phase's fixed text (AttemptEvent::detail).
  void Enter(const std::string& phase, const std::string& message, const std::string& detail = "") {
    status_["phase"] = phase;
    json tr = {{"phase", phase}, {"at", NowMs()}, {"message", ForTheJob(message)}};
    if (!detail.empty()) tr["detail"] = ForTheJob(detail);
    status_["transitions"].push_back(std::move(tr));
    // Only the outcome must survive a machine crash; earlier phases are progress reports.
    local::WriteFileAtomic(local::StatusPath(dir_), status_.dump(), phase == "Exited");
    Notify();
  }

  void Notify() {
    std::string path = host_.notify_socket;
    // On Slurm, the server that leads now (after a failover, not the one that started the attempt).
    if (std::string now; !host_.notify_file.empty() && local::ReadFile(host_.notify_file, &now)) {
      while (!now.empty() && (now.back() == '\n' || now.back() == ' ')) now.pop_back();
      if (now.rfind("udp:", 0) == 0) path = now;
    }
    if (path.rfind("udp:", 0) == 0) {
      // udp:<ipv4>:<port>: the server is on another machine.
      auto colon = path.rfind(':');
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(std::atoi(path.c_str() + colon + 1)));
      if (colon <= 4 || ::inet_pton(AF_INET, path.substr(4, colon - 4).c_str(), &addr.sin_addr) != 1) return;
      int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return;
      ::sendto(fd, spec_.attempt_id.data(), spec_.attempt_id.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      ::close(fd);
      return;
    }
    if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) return;
    int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size());
    const std::string& msg = spec_.attempt_id;
    ::sendto(fd, msg.data(), msg.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::close(fd);
  }

  // True once a stop was asked for: SIGTERM/SIGINT, or the stop file (which also carries the
  // grace, and which Executor::Stop writes before signalling, so no request is missed).
  bool StopRequested() {
    if (stop_requested_) return true;
    DrainSignals();
    if (signal_seen_) stop_requested_ = true;
    if (ReadGraceFile(local::StopPath(dir_))) stop_requested_ = true;
    return stop_requested_;
  }

  // True when the file at `path` (the stop or end file) exists; the grace in seconds it holds,
  // when any, becomes this supervisor's.
  bool ReadGraceFile(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return false;
    std::string g;
    if (local::ReadFile(path, &g) && !g.empty()) grace_ms_ = std::atoll(g.c_str()) * 1000;
    return true;
  }

  void DrainSignals() {
    char buf[64];
    while (::read(g_signal_pipe[0], buf, sizeof buf) > 0) signal_seen_ = true;
  }

  std::string OptMl(int n) const { return sandbox_ ? "/opt/ml" : fs::absolute(local::HostDir(dir_, n)).string(); }

  // The launcher an instance's distributed launch runs: this binary, at kLauncherPath in the sandbox.
  std::string Launcher() const { return sandbox_ ? local::kLauncherPath : SelfExe(); }
  static std::string SelfExe() {
    std::error_code ec;
    fs::path p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? std::string(local::kLauncherPath) : p.string();
  }
  // The interface that carries the instances' addresses (SM_NETWORK_INTERFACE_NAME): on Slurm,
  // the one of this node that holds its NodeAddr (the nodes of a cluster name theirs alike); on
  // one host every algo-<n> is a loopback address (EtcHosts).
  std::string NetworkInterface() const {
    if (!node_addrs_.empty())
      if (std::string name = local::InterfaceHolding(node_addrs_[0]); !name.empty()) return name;
    return "lo";
  }

  // An MPI launch's remote shell secret, the same in every instance's input/config (0600; made
  // the job user's with the rest of the instance's tree).
  bool WriteShellSecret(const fs::path& config_dir, std::string* error) {
    auto dist = ParseDistribution(spec_.hyperparameters);
    if (!dist.ok() || dist->kind != Distribution::Kind::kMpi) return true;
    if (shell_secret_.empty()) {
      unsigned char raw[32];
      if (RAND_bytes(raw, sizeof raw) != 1) {
        *error = "cannot make the remote shell's secret";
        return false;
      }
      static const char* kHex = "0123456789abcdef";
      for (unsigned char b : raw) shell_secret_ += {kHex[b >> 4], kHex[b & 15]};
    }
    const std::string path = (config_dir / local::kShellSecretFile).string();
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    bool ok = fd >= 0 && ::fchmod(fd, 0600) == 0 && ::write(fd, shell_secret_.data(), shell_secret_.size()) ==
                                                         static_cast<ssize_t>(shell_secret_.size());
    if (fd >= 0) ::close(fd);
    if (!ok) *error = "cannot write " + path + ": " + std::strerror(errno);
    return ok;
  }

  // ---- The image (docs/images.md) ----
  // Resolves spec.image before anything else is prepared: the host's software (no image), or the
  // image from the host's cache, copied and unpacked first when it is not there yet. Its root file
  // system and config are recorded in image.json for the node agents.
  bool PrepareImage(std::string* error) {
    if (local::IsHostSoftware(host_, spec_.image)) return true;
    const std::string& name = spec_.image;
    auto dist = ParseDistribution(spec_.hyperparameters);
    if (dist.ok() && dist->kind != Distribution::Kind::kNone) {
      *error = "CannotStartContainerError: image " + name + ": the distributed launch the hyperparameters ask for runs "
               "trainyard's launcher from the host, which is not available in an image; start torchrun or mpirun from the "
               "image's own entry point instead";
      return false;
    }
    if (!sandbox_) {
      *error = "CannotStartContainerError: image " + name + ": this host runs jobs without the sandbox (executor.sandbox = "
               "\"none\" or bubblewrap unavailable), and an image runs only inside it";
      return false;
    }
    auto ref = image::ParseImageReference(name);
    if (!ref.ok()) {
      *error = "CannotPullContainerError: " + ref.status().message();
      return false;
    }
    // Also refused at create; a spec stored before executor.image_dirs changed is refused here.
    if (Status where = image::CheckImageLocation(*ref, host_.image_dirs); !where.ok()) {
      *error = "CannotPullContainerError: " + where.message();
      return false;
    }
    image::CacheOptions options;
    options.timeout_seconds = host_.image_pull_timeout_seconds;
    image::ImageCache cache(host_.image_cache_dir, options);
    const int64_t start = NowMs();
    auto got = cache.Get(*ref);
    if (!got.ok()) {
      if (host_.image_fallback_to_host) {
        Log("image " + name + ": cannot be copied (" + got.status().message() + "); running with the host's software");
        JobLog(1, "[trainyard] image " + name + " could not be copied; this host runs the job with its own software instead");
        return true;
      }
      if (got.status().code() == Code::kInternal) infrastructure_error_ = true;
      *error = "CannotPullContainerError: " + name + ": " + got.status().message();
      return false;
    }
    image_ = *std::move(got);
    if (auto command = InstanceCommand(); !command.ok()) {
      *error = "CannotStartContainerError: image " + name + ": " + command.status().message();
      return false;
    }
    Log("image " + name + ": " + image_->digest + (image_->copied ? " copied" : " cached") +
        (image_->unpacked ? ", unpacked" : "") + " in " + std::to_string(NowMs() - start) + " ms");
    status_["image"] = {{"reference", ref->Skopeo()}, {"digest", image_->digest},
                        {"copied", image_->copied}, {"unpacked", image_->unpacked}};
    json doc = {{"digest", image_->digest}, {"rootfs", image_->rootfs},
                {"config", json::parse(image::EncodeImageConfig(image_->config))}};
    if (!local::WriteFileAtomic(dir_ + "/image.json", doc.dump(), true)) {
      infrastructure_error_ = true;
      *error = "cannot write " + dir_ + "/image.json";
      return false;
    }
    return true;
  }

  // Before anything is staged: the objects every attempt writes must be the job's to write, so
  // that a job refused its output fails now, having written nothing, rather than after training.
  // The checkpoint prefix is listed at the start (its objects are checked as they are read and
  // written). A refusal is a ClientError naming the action and the object.
  bool CheckOutputAccess(std::string* error) {
    if (!spec_.data_access) return true;
    const exec::DataAccessPolicy policy(*spec_.data_access);
    const EpochMs now = NowMs();
    auto refused = [&](const std::string& what, const Status& st) {
      NoteDataError(st);
      *error = what + ": " + st.message();
      return false;
    };
    std::string bucket, key;
    if (spec_.compress && objstore::ParseS3Uri(spec_.output_prefix, &bucket, &key) && !mover_->store().Remote(bucket))
      for (const char* name : {"model.tar.gz", "output.tar.gz"})
        if (Status st = policy.CheckObject("s3:PutObject", bucket, key + name, now); !st.ok()) return refused("output", st);
    if (spec_.checkpoint && objstore::ParseS3Uri(spec_.checkpoint->uri, &bucket, &key) && !mover_->store().Remote(bucket)) {
      if (!key.empty() && key.back() != '/') key += '/';
      if (Status st = policy.CheckList(bucket, key, now); !st.ok()) return refused("checkpoints", st);
    }
    return true;
  }

  // A node agent's view of the image its supervisor resolved (image.json); true without one.
  bool LoadImage() {
    if (local::IsHostSoftware(host_, spec_.image)) return true;
    std::string text;
    if (!local::ReadFile(dir_ + "/image.json", &text)) return host_.image_fallback_to_host;
    json doc = json::parse(text, nullptr, false);
    if (!doc.is_object() || !doc.contains("config")) return false;
    auto config = image::ParseImageConfig(doc["config"].dump());
    if (!config.ok()) return false;
    image_ = image::CachedImage{doc.value("digest", ""), doc.value("rootfs", ""), *config};
    return !image_->rootfs.empty();
  }

  // What an instance runs: the job's command on the host's software, or in the image.
  StatusOr<std::vector<std::string>> InstanceCommand() const {
    if (!image_) return local::JobCommand(spec_, Launcher());
    if (spec_.command.empty() && spec_.script_mode && !spec_.script_mode->program.empty())
      return local::JobCommand(spec_, Launcher());  // python3 <program> ..., from the image's PATH
    return image::ImageArgv(image_->config, spec_.image_command, spec_.command);
  }

  bool Prepare(std::string* error) {
    if (!PrepareImage(error)) {
      image_unavailable_ = true;
      return false;
    }
    const std::string etc_hosts = slurm_ ? local::EtcHosts(node_addrs_) : local::EtcHosts(count_);
    if (!(std::ofstream(dir_ + "/hosts-file") << etc_hosts)) {
      *error = "cannot write " + dir_ + "/hosts-file";
      return false;
    }

    if (!CheckOutputAccess(error)) return false;
    std::error_code ec;
    // Each channel is listed once; each instance then gets its share.
    std::vector<std::vector<local::InputItem>> listed;
    for (const auto& ch : spec_.channels) {
      listed.emplace_back();
      if (ch.file_system) continue;
      Status st = mover_->ListChannel(ch, dir_, &listed.back());
      if (!st.ok()) {
        NoteDataError(st);
        *error = "input channel " + ch.name + ": " + st.message();
        return false;
      }
    }
    // The submit directory is identified by its URI, ETag and size: a warm workspace prepared
    // from the same archive is used as it is, without fetching it again.
    if (spec_.script_mode && !spec_.script_mode->submit_uri.empty()) {
      submit_uri_ = spec_.script_mode->submit_uri;
      std::string bucket, key;
      if (!objstore::ParseS3Uri(submit_uri_, &bucket, &key)) {
        *error = "sagemaker_submit_directory: not an s3:// URI: " + submit_uri_;
        return false;
      }
      auto head = mover_->store().Head(bucket, key);
      if (!head.ok()) {
        NoteDataError(head.status());
        *error = "sagemaker_submit_directory: cannot fetch " + submit_uri_ + ": " + head.status().message();
        return false;
      }
      code_id_ = {{"archive", submit_uri_}, {"etag", head->etag}, {"size", head->size}};
    }
    for (int n = 1; n <= count_; ++n) {
      if (StopRequested()) return true;  // staging can take long; Run() sees the stop
      fs::path h = local::HostDir(dir_, n);
      if (sandbox_ && !ConfineInstance(n, error)) return false;
      for (const char* sub : {"input/config", "input/data", "model", "output/data", "output/intermediate",
                              "checkpoints", "sagemaker"})
        fs::create_directories(h / sub, ec);
      if (!PrepareWorkspace(n, error)) return false;
      std::ofstream(h / "input/config/resourceconfig.json") << local::ResourceConfig(spec_, n, count_, NetworkInterface());
      if (!WriteShellSecret(h / "input/config", error)) return false;
      std::ofstream(h / "input/config/hyperparameters.json") << local::HyperparametersJson(spec_);
      std::ofstream(h / "input/config/inputdataconfig.json") << local::InputDataConfig(spec_);
      configured_[static_cast<size_t>(n - 1)] = true;
      size_t index = 0;
      for (const auto& ch : spec_.channels) {
        const auto& items = listed[index++];
        const std::string& name = ch.name;
        fs::path dest = h / "input/data" / name;
        if (ch.file_system) {
          // Mounted, never copied: a bind mount in the sandbox (Command), a symlink without one.
          std::string host = FileSystemDir(ch);
          if (host.empty()) {
            *error = "input channel " + name + ": the file system " + ch.file_system->file_system_id + " is not on this host";
            return false;
          }
          if (!fs::is_directory(host, ec)) {
            *error = "input channel " + name + ": the file system directory " + host + " does not exist";
            return false;
          }
          if (!sandbox_) {
            fs::remove_all(dest, ec);
            fs::create_directory_symlink(host, dest, ec);
          } else {
            fs::create_directories(dest, ec);
          }
          if (ec) {
            *error = "input channel " + name + ": " + ec.message();
            return false;
          }
          continue;
        }
        fs::create_directories(dest, ec);
        std::vector<std::pair<local::InputItem, std::string>> work;
        for (const auto& item : local::DataMover::Share(items, ch.distribution, n, count_))
          work.emplace_back(item, (dest / item.rel).string());
        // Downloads run in parallel; the stop file (written before any stop signal) ends them early.
        std::string stop_path = local::StopPath(dir_);
        Status st = mover_->FetchAll(work, kDownloadThreads, [&stop_path] {
          struct stat sb;
          return ::stat(stop_path.c_str(), &sb) == 0;
        }, &stats_);
        if (!st.ok()) {
          NoteDataError(st);
          *error = "input channel " + name + ": " + st.message();
          return false;
        }
        if (StopRequested()) return true;
      }
    }
    if (sandbox_) {
      // What the job may write is the job user's (files shared with the object cache excepted).
      for (int n = 1; n <= count_; ++n)
        for (const std::string& p : {local::HostDir(dir_, n), Scratch(n), Workspace(n)})
          if (Status st = local::GiveToJobUser(p, job_user_); !st.ok()) {
            infrastructure_error_ = true;
            *error = st.message();
            return false;
          }
    }
    if (spec_.checkpoint) {
      std::vector<local::JobDir> dirs;
      for (int n = 1; n <= count_; ++n) dirs.push_back({local::HostDir(dir_, n), CheckpointRel()});
      // Called by one sync at a time (the sync thread, then the final sync after it is joined).
      checkpoint_skip_lines_.assign(static_cast<size_t>(count_), 0);
      auto skipped = [this](size_t i, const std::string& rel, const std::string& why) {
        int& lines = checkpoint_skip_lines_[i];
        if (++lines > kMaxSkipLines) return;
        JobLog(static_cast<int>(i) + 1, "[trainyard] checkpoints: " + ShownRel(CheckpointRel(), rel) +
                                            " is not uploaded: " + why +
                                            (lines == kMaxSkipLines ? " (further entries left out are not reported)" : ""));
      };
      checkpoints_ = std::make_unique<local::CheckpointSync>(mover_.get(), spec_.checkpoint->uri, dirs,
                                                             skipped);
      local::TransferStats restored;
      Status st = checkpoints_->Restore(&restored);
      if (!st.ok()) {
        NoteDataError(st);
        *error = "CheckpointConfig: cannot restore " + spec_.checkpoint->uri + ": " + st.message();
        return false;
      }
      Log("checkpoints: restored " + std::to_string(restored.fetched_objects) + " objects (" +
          std::to_string(restored.fetched_bytes) + " bytes) into each instance");
      // Restored files are the job's to rewrite.
      for (int n = 1; sandbox_ && n <= count_; ++n)
        if (Status st = local::GiveToJobUser(CheckpointDir(n), job_user_, true); !st.ok()) {
          infrastructure_error_ = true;
          *error = st.message();
          return false;
        }
    }
    Log("input: downloaded " + std::to_string(stats_.fetched_objects) + " objects (" +
        std::to_string(stats_.fetched_bytes) + " bytes), reused " + std::to_string(stats_.reused_objects) +
        " objects (" + std::to_string(stats_.reused_bytes) + " bytes) from the host cache");
    status_["input_stats"] = {{"fetched_objects", stats_.fetched_objects}, {"fetched_bytes", stats_.fetched_bytes},
                              {"reused_objects", stats_.reused_objects}, {"reused_bytes", stats_.reused_bytes}};
    return true;
  }

  // ---- The instance workspace (docs/warm-pools.md) ----
  // Per instance: code/ (the unpacked submit directory, /opt/ml/code), the setup command's
  // results (e.g. venv/), pylib/ (requirements installed without a venv), and with a warm pool
  // warmpoolcache/ (/opt/ml/sagemaker/warmpoolcache). It lives in the pool's directory when the
  // job has a pool (so the next job on the pool finds it prepared), else in the attempt's.
  std::string Workspace(int n) const {
    std::string root = spec_.warm_pool ? spec_.warm_pool->workspace : dir_ + "/workspace";
    return fs::absolute(root + "/algo-" + std::to_string(n)).string();
  }
  bool HasWarmPool() const { return spec_.warm_pool.has_value(); }

  // The host directory of a FileSystemDataSource channel; "" when the host has no such file system.
  std::string FileSystemDir(const Channel& ch) const {
    return local::FileSystemHostPath(host_, ch.file_system->file_system_id, ch.file_system->directory_path);
  }

  // What a sandboxed instance must not see: the server's data directory (the attempt directory
  // is <data_dir>/attempts/<id>), the warm pool's directory when it lies outside it, and the
  // host's file systems for FileSystemDataSource.
  std::vector<std::string> HiddenDirs() const {
    std::error_code ec;
    std::vector<std::string> dirs;
    fs::path attempt = fs::weakly_canonical(fs::absolute(dir_), ec);
    if (ec || attempt.empty()) attempt = fs::absolute(dir_);
    fs::path data_dir = attempt.parent_path().parent_path();
    auto under = [](const fs::path& p, const fs::path& root) {
      auto r = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
      return r.first == root.end();
    };
    if (!data_dir.empty() && data_dir != data_dir.root_path()) dirs.push_back(data_dir.string());
    if (HasWarmPool()) {
      fs::path pool = fs::weakly_canonical(fs::absolute(spec_.warm_pool->workspace), ec);
      if (!ec && !pool.empty() && pool != pool.root_path() && (dirs.empty() || !under(pool, data_dir)))
        dirs.push_back(pool.string());
    }
    // The host's [file_systems] directories; never the root or a directory the system runs from.
    static const std::set<std::string> kSystem = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                                                  "/etc", "/opt", "/proc", "/dev", "/sys", "/run", "/tmp"};
    for (const auto& [id, h] : host_.file_systems) {
      std::error_code hec;
      fs::path p = fs::weakly_canonical(fs::absolute(h), hec);
      if (hec || p.empty() || p == p.root_path() || kSystem.count(p.string()) || !fs::is_directory(p, hec)) continue;
      dirs.push_back(p.string());
    }
    return dirs;
  }

  // Cold: setup command, unpack the submit directory, install its requirements.txt. Warm (the
  // workspace was prepared with the same setup command and archive): nothing to do. Only
  // /opt/ml/code and the cache are links into the workspace; the rest of /opt/ml is new per job.
  bool PrepareWorkspace(int n, std::string* error) {
    std::error_code ec;
    const fs::path ws = Workspace(n);
    const fs::path h = local::HostDir(dir_, n);
    const std::string log = dir_ + "/supervisor.log";
    const std::string& setup = spec_.setup_command;
    const json& code_id = code_id_;
    // The workspace is the jobs' (bound read-write into each one): its marker is read as a job's
    // file, so a FIFO or a link planted there by an earlier job on the pool only means "not
    // prepared".
    std::string marker_text = "{}";
    if (Status st = local::ReadJobFile({ws.string(), ""}, ".prepared", 64 * 1024, &marker_text);
        !st.ok() && st.code() != Code::kNotFound) {
      Log("workspace algo-" + std::to_string(n) + ": the .prepared marker is ignored: " + st.message());
      marker_text = "{}";
    }
    json marker = json::parse(marker_text.empty() ? "{}" : marker_text, nullptr, false);
    if (marker.is_discarded()) marker = json::object();
    const bool setup_done = marker.contains("setup") && marker["setup"] == setup;
    const bool code_done = setup_done && marker.contains("code") && marker["code"] == code_id;
    if (!setup_done) {
      // A different (or no) setup: start the workspace over, but never the cache.
      for (const char* sub : {"code", "venv", "pylib"}) fs::remove_all(ws / sub, ec);
      fs::create_directories(ws, ec);
      if (!setup.empty()) {
        if (local::RunCommand({"/bin/sh", "-c", "export TRAINYARD_WORKSPACE=\"$1\"; cd \"$1\" && eval \"$2\"", "setup",
                        ws.string(), setup}, log) != 0) {
          infrastructure_error_ = true;
          *error = "the instance setup command for " + spec_.instance_type + " failed (see " + log + ")";
          return false;
        }
      }
    }
    if (!code_done) {
      fs::remove_all(ws / "code", ec);
      fs::remove_all(ws / "pylib", ec);
      fs::create_directories(ws / "code", ec);
      if (!submit_uri_.empty()) {
        const std::string tarball = dir_ + "/sourcedir.tar.gz";
        if (!fs::exists(tarball, ec)) {
          Status st = mover_->Download(submit_uri_, tarball);
          if (!st.ok()) {
            NoteDataError(st);
            *error = "sagemaker_submit_directory: cannot fetch " + submit_uri_ + ": " + st.message();
            return false;
          }
        }
        // Unpacked in this process (no tar process per job), refusing any entry that would land
        // outside code/ (archive.h); a refused archive leaves nothing behind.
        Status st = local::ExtractTarGz(tarball, (ws / "code").string(), kSourceDirLimits);
        if (!st.ok()) {
          fs::remove_all(ws / "code", ec);
          if (st.code() == Code::kInternal) {  // the host's disk, not the job's archive
            infrastructure_error_ = true;
            *error = "sagemaker_submit_directory: cannot unpack " + submit_uri_ + ": " + st.message();
          } else {
            *error = "sagemaker_submit_directory: the archive " + submit_uri_ + " is refused: " + st.message();
          }
          JobLog(n, "[trainyard] " + *error);
          Log(*error);
          return false;
        }
      }
      if (fs::exists(ws / "code/requirements.txt") && !InstallRequirements(n, ws, error)) return false;
    }
    if (!setup_done || !code_done) {
      json m = {{"setup", setup}, {"code", code_id}};
      // Replaces a planted link. Unwritten (a full disk), the next start of the pool prepares again.
      (void)local::WriteJobFile({ws.string(), ""}, ".prepared", m.dump());
    }
    // In the sandbox the workspace's code/ and cache are bind-mounted over empty directories of
    // the /opt/ml tree (Command); without one, the tree links to them.
    if (HasWarmPool()) fs::create_directories(ws / "warmpoolcache", ec);
    std::vector<std::pair<fs::path, fs::path>> links = {{ws / "code", h / "code"}};
    if (HasWarmPool()) links.emplace_back(ws / "warmpoolcache", h / "sagemaker/warmpoolcache");
    for (const auto& [target, at] : links) {
      fs::remove_all(at, ec);
      if (sandbox_) {
        fs::create_directories(at, ec);
      } else {
        fs::create_directory_symlink(target, at, ec);
      }
      if (ec) {
        infrastructure_error_ = true;
        *error = "cannot prepare " + at.string() + ": " + ec.message();
        return false;
      }
    }
    return true;
  }

  // pip into the workspace's venv when the setup made one, else into pylib/ (on PYTHONPATH). In
  // the sandbox it runs as the job, in the instance's sandbox and cgroup: a package's build
  // backend is the job's code.
  bool InstallRequirements(int n, const fs::path& ws, std::string* error) {
    std::vector<std::string> cmd;
    if (fs::exists(ws / "venv/bin/python")) {
      cmd = {(ws / "venv/bin/python").string(), "-m", "pip", "install"};
    } else {
      cmd = {"python3", "-m", "pip", "install", "--target", (ws / "pylib").string()};
    }
    cmd.insert(cmd.end(), {"--disable-pip-version-check", "-q", "-r", (ws / "code/requirements.txt").string()});
    if (host_.pip_no_index) cmd.push_back("--no-index");
    if (!host_.pip_find_links.empty()) cmd.insert(cmd.end(), {"--find-links", host_.pip_find_links});
    int rc = -1;
    if (!sandbox_) {
      rc = local::RunCommand(cmd, dir_ + "/supervisor.log");
    } else if (Status st = local::GiveToJobUser(ws.string(), job_user_); !st.ok()) {
      infrastructure_error_ = true;
      *error = st.message();
      return false;
    } else {
      rc = RunSandboxed(n, cmd, dir_ + "/supervisor.log");
    }
    if (rc != 0) {
      *error = "cannot install requirements.txt of sagemaker_submit_directory (pip failed; see " + dir_ + "/supervisor.log)";
      return false;
    }
    return true;
  }

  // The instance's CheckpointConfig.LocalPath in its /opt/ml tree (the controller accepts only
  // paths under /opt/ml).
  std::string CheckpointDir(int n) const { return local::HostDir(dir_, n) + "/" + CheckpointRel(); }
  std::string CheckpointRel() const { return local::CheckpointRel(spec_); }

  // When the attempt last completed a checkpoint (epoch ms; 0: not since it started), for
  // checkpoint-aware preemption (docs/scheduling.md). The marker file, when a job writes it,
  // says so explicitly (its modification time); otherwise, with a CheckpointConfig, the newest
  // file written under the checkpoint path since training started counts. Files restored from
  // an earlier attempt predate the start and do not count.
  int64_t LastCheckpointMs() const {
    int64_t newest = 0;
    std::error_code ec;
    auto mtime_ms = [](const fs::path& p) -> int64_t {
      struct stat sb {};
      if (::stat(p.c_str(), &sb) != 0) return 0;
      return static_cast<int64_t>(sb.st_mtim.tv_sec) * 1000 + sb.st_mtim.tv_nsec / 1'000'000;
    };
    for (int n = 1; n <= count_; ++n) newest = std::max(newest, mtime_ms(CheckpointDir(n) + "/" + local::kCheckpointMarker));
    if (newest == 0 && spec_.checkpoint) {
      for (int n = 1; n <= count_; ++n) {
        int budget = 10000;  // files looked at per instance and scan: a huge tree is sampled, not walked
        for (auto it = fs::recursive_directory_iterator(CheckpointDir(n), ec);
             !ec && it != fs::recursive_directory_iterator() && budget-- > 0; it.increment(ec))
          if (it->is_regular_file(ec)) newest = std::max(newest, mtime_ms(it->path()));
      }
    }
    return newest >= train_start_ ? newest : 0;
  }
  // Rewrites status.json when the attempt checkpointed since the last look (every 2 s at most,
  // unless `now_anyway`: once more when the instances have exited, so that a checkpoint saved on
  // SIGTERM counts).
  void NoteCheckpoint(int64_t now, bool now_anyway = false) {
    if (now < next_checkpoint_scan_ && !now_anyway) return;
    next_checkpoint_scan_ = now + 2000;
    int64_t last = LastCheckpointMs();
    if (last <= last_checkpoint_ms_) return;
    last_checkpoint_ms_ = last;
    status_["last_checkpoint_ms"] = last;
    local::WriteFileAtomic(local::StatusPath(dir_), status_.dump(), false);
  }

  // System metrics (docs/metrics.md, "System metrics"): each launched instance is sampled every
  // spec "system_metrics.interval_seconds" (0 or absent: never) on the sampler's own thread.
  void StartSystemSampler() {
    const int64_t interval_ms = static_cast<int64_t>(host_.system_metrics_interval_seconds * 1000);
    if (interval_ms <= 0 || instances_.empty()) return;
    std::vector<local::SystemSampler::Instance> targets;
    for (const auto& i : instances_) {
      if (i.pid <= 0 || i.remote) continue;  // sampled by its node agent, on its node
      local::SystemSampler::Instance t;
      t.pid = i.pid;
      t.start_time = local::ProcStartTime(i.pid);
      t.opt_ml_dir = local::HostDir(dir_, i.n);
      t.out_path = local::SystemMetricsPath(dir_, i.n);
      t.gpus = local::VisibleGpus(cuda_visible_[static_cast<size_t>(i.n - 1)]);
      if (static_cast<size_t>(i.n - 1) < cgroups_.size() && cgroups_[static_cast<size_t>(i.n - 1)])
        t.cgroup = cgroups_[static_cast<size_t>(i.n - 1)]->UsageFiles();
      targets.push_back(std::move(t));
    }
    local::SystemSampler::Options options;
    options.interval_ms = interval_ms;
    options.nvidia_smi = local::ResolveNvidiaSmi(host_.nvidia_smi);
    Log("system metrics: every " + std::to_string(interval_ms) + " ms, GPUs " +
        (options.nvidia_smi.empty() ? std::string("not sampled (no nvidia-smi)") : "through " + options.nvidia_smi));
    sampler_ = std::make_unique<local::SystemSampler>(std::move(targets), options);
    sampler_->Start();
  }
  void StopSystemSampler() {
    if (!sampler_) return;
    sampler_->Stop();
    if (sampler_->samples() > 0)
      Log("system metrics: " + std::to_string(sampler_->samples()) + " samples, " +
          std::to_string(sampler_->sample_us() / sampler_->samples()) + " us per sample on average");
  }

  // Appends a line to supervisor.log (never secrets).
  void Log(const std::string& line) {
    std::ofstream(dir_ + "/supervisor.log", std::ios::app) << NowMs() << " " << line << "\n";
  }

  std::string InputSummary() const {
    if (stats_.fetched_objects + stats_.reused_objects == 0) return "";
    return " Input data: " + std::to_string(stats_.fetched_objects) + " objects (" + std::to_string(stats_.fetched_bytes) +
           " bytes) downloaded, " + std::to_string(stats_.reused_objects) + " objects (" +
           std::to_string(stats_.reused_bytes) + " bytes) reused from the host cache.";
  }

  // Checkpoints go to the store every sync_seconds_ while the instances run (a thread of its
  // own, so a slow upload never holds up the log pipes or a stop), and once more at the end.
  void StartCheckpointSync() {
    if (!checkpoints_) return;
    sync_thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(sync_mu_);
      while (!sync_stop_) {
        sync_cv_.wait_for(lock, std::chrono::seconds(sync_seconds_), [this] { return sync_stop_; });
        if (sync_stop_) break;
        SyncCheckpoints("periodic");
      }
    });
  }
  void StopCheckpointSync() {
    if (!sync_thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(sync_mu_);
      sync_stop_ = true;
    }
    sync_cv_.notify_all();
    sync_thread_.join();
  }
  bool SyncCheckpoints(const char* why) {
    int up = 0, del = 0;
    Status st = checkpoints_->Sync(&up, &del);
    if (up || del || !st.ok())
      Log(std::string("checkpoints (") + why + "): uploaded " + std::to_string(up) + ", deleted " + std::to_string(del) +
          (st.ok() ? "" : "; error: " + st.message()));
    if (!st.ok()) last_sync_error_ = st.message();
    return st.ok();
  }

  // The attempt's rendezvous ports (exec/local/ports.h), free on this host and held until the
  // supervisor ends; written to the attempt's ports file, where the node agents on Slurm read
  // them. MASTER_PORT for every job (a job may run its own torch.distributed), the MPI shell's
  // for an MPI job.
  bool HoldPorts(std::string* error) {
    auto master = local::HeldPort::Hold();
    if (!master.ok()) {
      *error = master.status().message();
      return false;
    }
    master_port_ = master->port();
    held_ports_.push_back(std::move(master).value());
    auto dist = ParseDistribution(spec_.hyperparameters);
    if (dist.ok() && dist->kind == Distribution::Kind::kMpi) {
      auto shell = local::HeldPort::Hold();
      if (!shell.ok()) {
        *error = shell.status().message();
        return false;
      }
      shell_port_ = shell->port();
      held_ports_.push_back(std::move(shell).value());
    }
    json ports = {{"master_port", master_port_}, {"shell_port", shell_port_}};
    if (!local::WriteFileAtomic(dir_ + "/ports.json", ports.dump(), false)) {
      *error = "cannot write " + dir_ + "/ports.json";
      return false;
    }
    Log("ports: MASTER_PORT " + std::to_string(master_port_) +
        (shell_port_ ? ", MPI shell " + std::to_string(shell_port_) : std::string()));
    return true;
  }
  void ReadPorts() {
    std::string text;
    if (!local::ReadFile(dir_ + "/ports.json", &text)) return;
    json ports = json::parse(text, nullptr, false);
    if (!ports.is_object()) return;
    auto port = [&ports](const char* key) {
      auto it = ports.find(key);
      return it != ports.end() && it->is_number_integer() ? local::ParsePort(std::to_string(it->get<int64_t>())) : 0;
    };
    master_port_ = port("master_port");
    shell_port_ = port("shell_port");
  }

  // Instance n's environment (exec/local/opt_ml.h).
  std::map<std::string, std::string> Environment(int n) {
    local::OptMlLayout layout;
    layout.n = n;
    layout.count = count_;
    layout.opt_ml = OptMl(n);
    layout.sandbox = sandbox_;
    layout.job_home = JobHome();
    layout.workspace = Workspace(n);
    // In an image the workspace is not mounted: what a host setup command made there is not used.
    layout.has_venv = !image_ && fs::exists(layout.workspace + "/venv/bin");
    layout.has_pylib = !image_ && fs::exists(layout.workspace + "/pylib");
    layout.config_written = configured_[static_cast<size_t>(n - 1)];
    layout.network_interface = NetworkInterface();
    layout.master_port = master_port_;
    layout.shell_port = shell_port_;
    if (!sandbox_) layout.hosts_file = fs::absolute(dir_ + "/hosts-file").string();
    // In an image its own Env is the base (PATH, ...), not the host's; the job's variables win.
    auto env = local::InstanceEnvironment(spec_, layout, image_ ? image::ImageEnvironment(image_->config)
                                                                : local::InheritedEnvironment());
    // The GPUs placed for the instance, and only those (unless the job names its own).
    if (placed_gpus_) {
      const size_t i = static_cast<size_t>(n - 1);
      const std::string list = i < placed_gpus_->size() ? local::GpuList((*placed_gpus_)[i]) : "";
      for (const char* var : {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"}) {
        if (spec_.environment.count(var)) continue;
        if (list.empty()) env.erase(var);
        else env[var] = list;
      }
    }
    // Without the sandbox's /etc/hosts, algo-1 is reached at its node's address.
    if (slurm_ && !sandbox_ && !node_addrs_.empty()) env["MASTER_ADDR"] = node_addrs_.front();
    // Without the sandbox the instances share the host's /tmp: each gets a TMPDIR of its own
    // (unless the job sets one), so tools that name their files by host name and user do not
    // collide. Open MPI's session directory did: mpirun on algo-1 and the orted it starts on
    // algo-2 made the same one, and orted's orte_session_dir sometimes failed.
    if (!sandbox_ && !spec_.environment.count("TMPDIR")) {
      std::error_code ec;
      fs::create_directories(Scratch(n), ec);
      if (!ec) env["TMPDIR"] = Scratch(n);
    }
    return env;
  }

  // Instance n's sandbox (exec/local/sandbox_plan.h has the mounts and their order). Mount
  // points on the host are made here, before bubblewrap (as the job user) looks for them; bind
  // sources are opened as the supervisor (local::Sandbox::Bind).
  Status BuildSandbox(int n, local::Sandbox* sb) {
    std::error_code ec;
    local::SandboxLayout layout;
    layout.n = n;
    layout.scratch = Scratch(n);
    layout.job_home = JobHome();
    layout.workspace = Workspace(n);
    layout.opt_ml = fs::absolute(local::HostDir(dir_, n)).string();
    layout.hosts_file = fs::absolute(dir_ + "/hosts-file").string();
    layout.hidden_dirs = HiddenDirs();
    layout.gpu_nodes = GpuNodes(n);
    layout.is_directory = [](const std::string& p) {
      std::error_code dec;
      return fs::is_directory(p, dec);
    };
    if (!fs::exists("/opt/ml")) {
      fs::create_directories("/opt/ml", ec);
      layout.opt_ml_mount_point = !ec;
    }
    layout.launcher = SelfExe();
    if (image_) {
      layout.image_rootfs = image_->rootfs;
      layout.working_dir = image::ImageWorkingDir(image_->config);
    }
    if (layout.opt_ml_mount_point && !fs::exists(local::kLauncherDir)) fs::create_directories(local::kLauncherDir, ec);
    fs::create_directories(local::HostDir(dir_, n) + "/code", ec);
    if (HasWarmPool()) {
      fs::create_directories(local::HostDir(dir_, n) + "/sagemaker/warmpoolcache", ec);
      fs::create_directories(layout.workspace + "/warmpoolcache", ec);
    }
    return local::ApplySandboxSteps(local::SandboxSteps(spec_, host_, layout), sb);
  }

  // $HOME in the sandbox (writable, so `pip install --user` works as in SageMaker's containers).
  std::string JobHome() const {
    std::error_code ec;
    return image_ || fs::is_directory("/home", ec) ? "/home/job" : "/tmp/.home/job";
  }

  // The device nodes of instance n's GPUs: those the executor placed for it (exec/local/gpus.h)
  // under the host's gpu_device_dir, plus the control nodes every CUDA process needs; none for an
  // instance without GPUs. Without a placement (no inventory, or Slurm, whose step cgroup holds
  // the job's GPUs), every GPU the supervisor sees.
  std::vector<std::string> GpuNodes(int n) const {
    if (!placed_gpus_) {
      const char* cuda = std::getenv("CUDA_VISIBLE_DEVICES");
      return local::GpuDeviceNodes("/dev", local::DiscoverGpus("/dev", cuda ? std::optional<std::string>(cuda) : std::nullopt, {}));
    }
    const size_t i = static_cast<size_t>(n - 1);
    return local::GpuDeviceNodes(host_.gpu_device_dir, i < placed_gpus_->size() ? (*placed_gpus_)[i] : std::vector<int>{});
  }

  // ---- Limits per instance (docs/user-guide.md, "The sandbox") ----
  // Where the instance's /tmp, /var/tmp and $HOME live: on its storage volume, else in the
  // attempt directory.
  std::string Scratch(int n) const {
    size_t i = static_cast<size_t>(n - 1);
    if (i < volumes_.size() && volumes_[i]) return volumes_[i]->path() + "/scratch";
    return fs::absolute(dir_ + "/scratch/algo-" + std::to_string(n)).string();
  }

  int64_t VolumeBytes() const { return std::max<int64_t>(1, spec_.volume_size_gb) << 30; }

  // Gives instance n its cgroup (memory, pids, CPU, devices of its instance type) and storage
  // volume (VolumeSizeInGB), before anything is written into its tree. Where the host offers
  // neither (an unprivileged server without a delegated cgroup), the job still runs, with the
  // fallbacks the log names: a file-size limit and a bounded /tmp.
  bool ConfineInstance(int n, std::string* error) {
    if (slurm_) {
      // On Slurm the step's own cgroup (Slurm's task/cgroup, with the job's CPUs, memory and
      // GPUs) confines the instance; a storage volume here would be mounted on this node only.
      Log("algo-" + std::to_string(n) + ": confined by Slurm (the job's step cgroup); no storage volume: each file is "
          "limited to VolumeSizeInGB");
      cgroups_.push_back(nullptr);
      volumes_.push_back(nullptr);
      return ScratchDirs(n, error);
    }
    const std::string attempts_root = fs::path(fs::absolute(dir_)).lexically_normal().parent_path().string();
    const std::string name =
        local::CgroupPrefix(attempts_root) + spec_.attempt_id + ".algo-" + std::to_string(n);
    local::CgroupLimits limits;
    limits.memory_bytes = spec_.memory_mib << 20;
    limits.pids_max = host_.pids_max;
    limits.vcpus = spec_.vcpus;
    limits.device_nodes = GpuNodes(n);
    auto cg = local::InstanceCgroup::Create(name, host_.cgroup_parent, limits);
    if (cg.ok()) {
      Log("algo-" + std::to_string(n) + ": " + (*cg)->Describe() + " (memory " + std::to_string(limits.memory_bytes) +
          " bytes, pids " + std::to_string(limits.pids_max) + ", vcpus " + std::to_string(limits.vcpus) + ")");
      cgroups_.push_back(std::move(cg).value());
    } else {
      Log("algo-" + std::to_string(n) + ": no cgroup (" + cg.status().message() + "): no memory, process or CPU limit");
      cgroups_.push_back(nullptr);
    }
    const std::string vol_dir = fs::absolute(dir_ + "/volumes").string();
    // The lock beside the executor's socket, out of the attempts directory (which holds attempts only).
    const std::string run_dir = (host_.data_dir.empty() ? attempts_root + "/.." : host_.data_dir) + "/run";
    std::error_code mk;
    fs::create_directories(run_dir, mk);
    const local::InstanceVolume::Space space{run_dir + "/volumes.lock", host_.disk_reserve_bytes,
                                             run_dir + "/volume-templates", local::VolumePoolDir(run_dir)};
    auto vol = local::InstanceVolume::Create(vol_dir + "/algo-" + std::to_string(n) + ".img",
                                             vol_dir + "/algo-" + std::to_string(n), VolumeBytes(), space,
                                             dir_ + "/supervisor.log");
    if (!vol.ok() && vol.status().code() == Code::kLimitExceeded) {
      // Never into the space another job needs: the attempt ends as the host's lack of capacity,
      // which a service job waits out (RUNNABLE again, after a backoff).
      capacity_error_ = true;
      *error = "CapacityError: algo-" + std::to_string(n) + ": " + vol.status().message();
      return false;
    }
    if (vol.ok()) {
      Log("algo-" + std::to_string(n) + ": storage volume of " + std::to_string(VolumeBytes()) + " bytes at " +
          (*vol)->path() + ((*vol)->reused() ? " (a wiped image from the pool)" : ""));
      Status st = (*vol)->BindInto("opt-ml", fs::absolute(local::HostDir(dir_, n)).string());
      if (st.ok() && !HasWarmPool()) st = (*vol)->BindInto("workspace", Workspace(n));
      volumes_.push_back(std::move(vol).value());
      if (!st.ok()) {
        infrastructure_error_ = true;
        *error = st.message();
        return false;
      }
    } else {
      Log("algo-" + std::to_string(n) + ": no storage volume (" + vol.status().message() +
          "): each file is limited to VolumeSizeInGB, and /tmp is not counted");
      volumes_.push_back(nullptr);
    }
    return ScratchDirs(n, error);
  }

  // The instance's /tmp and $HOME, the job user's.
  bool ScratchDirs(int n, std::string* error) {
    std::error_code ec;
    for (const char* sub : {"tmp", "home"}) fs::create_directories(Scratch(n) + "/" + sub, ec);
    fs::permissions(Scratch(n) + "/tmp", fs::perms::all | fs::perms::sticky_bit, ec);
    // Before the requirements are installed (as the job, with $HOME here).
    if (Status st = local::GiveToJobUser(Scratch(n), job_user_); !st.ok()) {
      infrastructure_error_ = true;
      *error = st.message();
      return false;
    }
    return true;
  }

  // After the instances ended: an instance the out-of-memory killer hit, or whose storage
  // volume is full, fails the job with that reason (unless it wrote its own failure file).
  void NoteResourceFailure() {
    if (exit_code_ == 0 || stopped_ || !failure_.empty()) return;
    for (int n = 1; n <= count_; ++n) {
      size_t i = static_cast<size_t>(n - 1);
      struct stat sb {};  // lstat: the job's file is not opened here (a FIFO would block)
      if (::lstat((local::HostDir(dir_, n) + "/output/failure").c_str(), &sb) == 0 && S_ISREG(sb.st_mode) &&
          sb.st_size > 0)
        return;
      if (i < cgroups_.size() && cgroups_[i] && cgroups_[i]->OomKilled()) {
        failure_ = "AlgorithmError: instance algo-" + std::to_string(n) + " ran out of memory: a process of the training "
                   "job was ended by the out-of-memory killer at the " + std::to_string(spec_.memory_mib) +
                   " MiB of instance type " + spec_.instance_type +
                   ". Please use an instance type with more memory, or reduce the memory the job uses.";
        return;
      }
      if (i < volumes_.size() && volumes_[i] && volumes_[i]->Full()) {
        failure_ = "AlgorithmError: instance algo-" + std::to_string(n) + " used all of its storage volume (VolumeSizeInGB " +
                   std::to_string(spec_.volume_size_gb) + ", which holds /opt/ml, /tmp and $HOME): " +
                   std::strerror(ENOSPC) + ". Please request a larger VolumeSizeInGB, or write less.";
        return;
      }
    }
    if (killed_by_ == SIGXFSZ)
      failure_ = "AlgorithmError: instance algo-" + std::to_string(first_failed_) + " wrote a file larger than its storage "
                 "volume (VolumeSizeInGB " + std::to_string(spec_.volume_size_gb) + ")";
  }

  // Kills what is left in each instance's cgroup, removes it, unmounts and deletes the volumes.
  void ReleaseInstances() {
    cgroups_.clear();
    volumes_.clear();
  }

  // Moves this supervisor (its main thread, and every process it starts from now on) into a mount
  // namespace of its own, a slave of the host's: the storage volumes it mounts are in no other
  // namespace, so another job's sandbox, which binds the host's root recursively, neither sees
  // them nor lists them (with this attempt's name) in its /proc/self/mountinfo. They go with the
  // namespace: when the supervisor and its instances are gone, even after a SIGKILL. Called before
  // any thread is started (unshare moves the calling thread only). Without root there is no
  // volume to keep apart.
  void PrivateMounts() {
    if (::geteuid() != 0 || slurm_) return;
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
      Log(std::string("no mount namespace of its own (") + std::strerror(errno) +
          "): the storage volumes are mounted in the host's, where other jobs' sandboxes list them");
  }

  // Cgroups and volumes left by supervisors that were killed (their attempt's lock is free).
  void SweepOrphans() {
    const std::string root = fs::path(fs::absolute(dir_)).lexically_normal().parent_path().string();
    const std::string self = fs::path(fs::absolute(dir_)).lexically_normal().filename().string();
    // This attempt's own leftovers (a predecessor of this supervisor was killed) go too: this
    // supervisor holds the lock, and has made nothing yet.
    auto alive = [&](const std::string& attempt) {
      return attempt != self && local::SupervisorAlive(root + "/" + attempt);
    };
    local::SweepOrphanCgroups(host_.cgroup_parent, local::CgroupPrefix(root), alive);
    local::SweepOrphanVolumes(root, alive);
  }

  // Forks a child that becomes instance n's process: its cgroup, then the job user and
  // no_new_privs (Sandbox::PrepareChild), then execs argv. Only system calls after fork.
  // Returns the pid, or -1 with errno.
  pid_t SpawnInstanceProcess(int n, const local::Sandbox* sb, std::vector<char*>& args, std::vector<char*>& envp,
                             int out_fd, const std::string& cwd) {
    const pid_t self = ::getpid();
    const local::InstanceCgroup* cg = sandbox_ && static_cast<size_t>(n - 1) < cgroups_.size()
                                          ? cgroups_[static_cast<size_t>(n - 1)].get() : nullptr;
    const bool limit_files = sandbox_ && (static_cast<size_t>(n - 1) >= volumes_.size() || !volumes_[static_cast<size_t>(n - 1)]);
    const rlim_t file_limit = static_cast<rlim_t>(VolumeBytes());
    const local::JobUser user = job_user_;
    // execvpe searches the supervisor's PATH, not the one in `envp`: a bare command is looked up
    // on the instance's own PATH here, before the fork (in the sandbox bubblewrap does that, with
    // the environment it is given).
    std::string resolved;
    if (!sb && args[0] != nullptr && std::strchr(args[0], '/') == nullptr) {
      for (char* e : envp)
        if (e && std::strncmp(e, "PATH=", 5) == 0) resolved = local::FindOnPath(args[0], e + 5);
      if (!resolved.empty()) args[0] = resolved.data();
    }
    // Every signal is blocked across the fork until the child has put back the default actions:
    // a stop's SIGTERM to the instance's group that reached the child before that ran the
    // supervisor's own handler there, and was lost (the job then ran until the grace's SIGKILL).
    // Held, it is delivered once the actions are the job's, and ends a child that never ran.
    sigset_t all, previous;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t pid = ::fork();
    if (pid != 0) {
      ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
      return pid;
    }
    ::setpgid(0, 0);
    ::dup2(out_fd, 1);
    ::dup2(out_fd, 2);
    int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) ::dup2(devnull, 0);
    for (int sig : {SIGTERM, SIGINT, SIGPIPE, SIGHUP}) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (cg && !cg->JoinFromChild()) {
      std::fprintf(stderr, "cannot join the instance's cgroup: %s\n", std::strerror(errno));
      ::_exit(126);
    }
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);  // a core would be written by the host's handler
    if (limit_files) {
      rlimit fsize{file_limit, file_limit};
      ::setrlimit(RLIMIT_FSIZE, &fsize);
    }
    if (sb && !sb->PrepareChild(user)) {
      std::fprintf(stderr, "cannot drop to the job user: %s\n", std::strerror(errno));
      ::_exit(126);
    }
    // After the switch of user, which clears it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != self) ::_exit(137);  // the supervisor died before the line above
    if (::chdir(cwd.c_str()) != 0) {
    }
    if (args[0] != nullptr) ::execvpe(args[0], args.data(), envp.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0] ? args[0] : "(no command)", std::strerror(errno));
    ::_exit(127);
  }

  // Runs `cmd` as instance n's job would run (its sandbox, cgroup and user) to completion, with
  // its output appended to log_path. Its exit status, or -1.
  int RunSandboxed(int n, const std::vector<std::string>& cmd, const std::string& log_path) {
    local::Sandbox sb(job_user_.switch_user);
    if (Status st = BuildSandbox(n, &sb); !st.ok()) {
      Log(st.message());
      return -1;
    }
    auto argv = sb.Command(cmd);
    if (!argv.ok()) {
      Log(argv.status().message());
      return -1;
    }
    auto env = Environment(n);
    std::vector<std::string> env_strings;
    for (auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, args;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    for (auto& a : *argv) args.push_back(a.data());
    args.push_back(nullptr);
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    pid_t pid = SpawnInstanceProcess(n, &sb, args, envp, fd, "/");
    ::close(fd);
    if (pid < 0) return -1;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    ::kill(-pid, SIGKILL);  // what it left running in the background
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // Gang start: every instance's environment and command line are built first, then the
  // processes are forked back to back, each in a process group of its own with its stdout and
  // stderr on one pipe. False (with *error) when one could not be started; the ones that were
  // are in instances_.
  bool Launch(std::string* error) {
    std::vector<std::map<std::string, std::string>> envs;
    std::vector<std::vector<std::string>> argvs;
    std::vector<local::Sandbox> sandboxes;
    for (int n = 1; n <= count_; ++n) sandboxes.emplace_back(job_user_.switch_user);
    auto command = InstanceCommand();
    if (!command.ok()) {
      *error = "CannotStartContainerError: " + command.status().message();
      return false;
    }
    for (int n = 1; n <= count_; ++n) {
      envs.push_back(Environment(n));
      argvs.push_back(*command);
      if (Remote(n)) {
        // Its node agent builds the sandbox there; srun runs as the supervisor, with its environment.
        argvs.back() = SrunCommand(n);
        envs.back() = SrunEnvironment();
      } else if (sandbox_) {
        local::Sandbox& sb = sandboxes[static_cast<size_t>(n - 1)];
        Status st = BuildSandbox(n, &sb);
        auto argv = st.ok() ? sb.Command(argvs.back()) : StatusOr<std::vector<std::string>>(st);
        if (!argv.ok()) {
          *error = "cannot start algo-" + std::to_string(n) + ": " + argv.status().message();
          return false;
        }
        argvs.back() = std::move(argv).value();
      }
      auto cuda = envs.back().find("CUDA_VISIBLE_DEVICES");
      cuda_visible_.push_back(cuda == envs.back().end() ? std::nullopt : std::optional<std::string>(cuda->second));
    }
    bool ok = true;
    for (int n = 1; n <= count_ && ok; ++n) {
      Instance inst;
      inst.n = n;
      std::string log_path = local::LogDir(dir_) + "/algo-" + std::to_string(n) + ".log";
      inst.log = std::fopen(log_path.c_str(), "ae");
      if (inst.log && std::fseek(inst.log, 0, SEEK_END) == 0) inst.log_bytes = std::ftell(inst.log);
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) {
        *error = "cannot start algo-" + std::to_string(n) + ": pipe: " + std::strerror(errno);
        if (inst.log) std::fclose(inst.log);
        ok = false;
        break;
      }
      // Everything the child needs is built before fork (the child only makes system calls).
      std::vector<std::string> env_strings;
      for (auto& [k, v] : envs[n - 1]) env_strings.push_back(k + "=" + v);
      std::vector<char*> envp, args;
      for (auto& e : env_strings) envp.push_back(e.data());
      envp.push_back(nullptr);
      for (auto& a : argvs[n - 1]) args.push_back(a.data());
      args.push_back(nullptr);
      std::string cwd = sandbox_ && !Remote(n) ? "/" : local::HostDir(dir_, n) + "/code";
      pid_t pid = SpawnInstanceProcess(n, sandbox_ && !Remote(n) ? &sandboxes[static_cast<size_t>(n - 1)] : nullptr,
                                       args, envp, fds[1], cwd);
      ::close(fds[1]);
      if (pid < 0) {
        *error = "cannot start algo-" + std::to_string(n) + ": fork: " + std::strerror(errno);
        ::close(fds[0]);
        if (inst.log) std::fclose(inst.log);
        ok = false;
        break;
      }
      ::setpgid(pid, pid);  // also in the child: whichever runs first
      inst.pid = pid;
      inst.remote = Remote(n);
      inst.out_fd = fds[0];
      ::fcntl(inst.out_fd, F_SETFL, O_NONBLOCK);
      instances_.push_back(inst);
      ++launched_;
    }
    train_start_ = NowMs();
    // Recorded so that whoever finds this supervisor dead can still end its instances.
    json pgids = json::array();
    for (const auto& i : instances_) pgids.push_back(i.pid);
    status_["instance_pgids"] = pgids;
    return ok;
  }

  // Signals every process of each running instance. In the sandbox the group leader is bwrap,
  // which would turn a SIGTERM into an immediate SIGKILL of the job (--die-with-parent), so
  // SIGTERM goes to the group's other members only, once each. A stop that came while bwrap was
  // still starting the job finds no job process yet, so Supervise sweeps again during the grace,
  // but only until a sweep has reached the job's own process (the child of bwrap's init, the
  // leader's child). After that the instance gets no more SIGTERMs, as outside the sandbox, where
  // the group gets one: what the job starts on its SIGTERM (a copy or an upload that saves its
  // checkpoint) is its own and runs until it ends or the grace does.
  void Signal(int sig) {
    for (auto& i : instances_) {
      if (i.exited || i.pid <= 0) continue;
      if (i.remote) {
        // SIGKILL to srun ends the step at once. A SIGTERM goes through the end file, which the
        // node agent treats as this supervisor treats its own SIGTERM (and kills the instance
        // after the grace): srun would make it a SIGKILL of the step. Once each.
        if (sig == SIGKILL) ::kill(-i.pid, SIGKILL);
        else if (!i.job_termed) RequestRemoteEnd();
        i.job_termed = true;
        continue;
      }
      if (!sandbox_ || sig == SIGKILL) {
        ::kill(-i.pid, sig);
        continue;
      }
      if (i.job_termed) continue;
      struct Member {
        pid_t pid, ppid;
      };
      std::vector<Member> members;
      // The instance's cgroup lists its processes; without one, every process of the host is
      // looked at (a cost that grows with the jobs running).
      std::vector<std::string> candidates;
      const size_t k = static_cast<size_t>(i.n - 1);
      if (k < cgroups_.size() && cgroups_[k]) {
        for (pid_t p : cgroups_[k]->Processes()) candidates.push_back(std::to_string(p));
      } else {
        std::error_code ec;
        for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec))
          candidates.push_back(it->path().filename().string());
      }
      for (const std::string& name : candidates) {
        if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
        pid_t pid = std::atoi(name.c_str());
        if (pid == i.pid) continue;
        std::string stat;
        if (!local::ReadFile("/proc/" + name + "/stat", &stat)) continue;
        auto close = stat.rfind(')');
        if (close == std::string::npos) continue;
        // After "pid (comm) ": state, ppid, pgrp.
        int ppid = 0, pgrp = 0;
        char state;
        if (std::sscanf(stat.c_str() + close + 2, "%c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == i.pid)
          members.push_back({pid, ppid});
      }
      std::set<pid_t> inits;  // bwrap's init in the job's PID namespace (the leader's child)
      for (const Member& m : members)
        if (m.ppid == i.pid) inits.insert(m.pid);
      for (const Member& m : members) {
        if (termed_.insert(m.pid).second) ::kill(m.pid, sig);
        if (inits.count(m.ppid)) i.job_termed = true;
      }
    }
  }

  // A spot interruption (Executor::Interrupt wrote the interrupt file before the stop file): each
  // instance finds the notice, with the time its instances will be killed, before its SIGTERM.
  void WriteInterruptionNotices(int64_t now) {
    struct stat st;
    if (::stat(local::InterruptPath(dir_).c_str(), &st) != 0) return;
    std::time_t deadline = static_cast<std::time_t>((now + grace_ms_) / 1000);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&deadline));
    json notice = {{"action", "terminate"}, {"time", when}, {"notice_seconds", grace_ms_ / 1000}};
    // The instance's tree is the job's: the notice replaces whatever is there, a link included.
    for (int n = 1; n <= count_; ++n) {
      Status st = local::WriteJobFile({local::HostDir(dir_, n), ""}, local::kInterruptionNotice, notice.dump() + "\n");
      if (!st.ok()) Log("interruption notice for algo-" + std::to_string(n) + ": " + st.message());
    }
  }

  void BeginStop() {
    if (kill_deadline_ != 0) return;
    Signal(SIGTERM);
    kill_deadline_ = NowMs() + grace_ms_;
  }

  // The instances on other nodes are to end, with this supervisor's grace (EndPath).
  void RequestRemoteEnd() {
    if (end_requested_) return;
    end_requested_ = true;
    if (!local::WriteFileAtomic(local::EndPath(dir_), std::to_string(grace_ms_ / 1000), false))
      Log("cannot write the end file: the instances on other nodes end with the grace's SIGKILL");
  }

  // On a node agent: the supervisor asked the instances on other nodes to end (EndPath).
  bool EndRequested() { return ReadGraceFile(local::EndPath(dir_)); }

  // Once stopping: a sandboxed job that was not there yet at the stop gets its SIGTERM when it
  // appears (Signal: once, never the programs it starts on it), and whatever is left at the end
  // of the grace gets SIGKILL.
  void EnforceGrace(int64_t now) {
    if (sandbox_ && kill_deadline_ && now < kill_deadline_ && now >= next_term_sweep_) {
      Signal(SIGTERM);
      next_term_sweep_ = now + 200;
    }
    if (kill_deadline_ && now >= kill_deadline_) {
      Signal(SIGKILL);
      kill_deadline_ = now + 3600 * 1000;
    }
  }

  // One log line "<epoch_ms> <text>\n", unless the file reached [logs] max_bytes_per_stream: then
  // one last line says so and the rest is dropped.
  void WriteLogLine(Instance& i, int64_t now, std::string_view text) {
    if (!i.log || i.log_capped) return;
    std::string line = std::to_string(now) + " " + std::string(text) + "\n";
    if (max_log_bytes_ > 0 && i.log_bytes + static_cast<int64_t>(line.size()) > max_log_bytes_) {
      i.log_capped = true;
      line = std::to_string(now) + " [trainyard] log truncated: this stream reached logs.max_bytes_per_stream (" +
             std::to_string(max_log_bytes_) + " bytes)\n";
    }
    std::fwrite(line.data(), 1, line.size(), i.log);
    i.log_bytes += static_cast<int64_t>(line.size());
  }

  void WriteLines(Instance& i, const char* data, size_t len, bool flush_partial) {
    i.pending.append(data, len);
    size_t start = 0, nl;
    int64_t now = NowMs();
    while ((nl = i.pending.find('\n', start)) != std::string::npos || i.pending.size() - start > 65536) {
      size_t end = nl == std::string::npos ? start + 65536 : nl;
      WriteLogLine(i, now, std::string_view(i.pending).substr(start, end - start));
      start = nl == std::string::npos ? end : nl + 1;
    }
    i.pending.erase(0, start);
    if (flush_partial && !i.pending.empty()) {
      WriteLogLine(i, now, i.pending);
      i.pending.clear();
    }
    if (i.log) std::fflush(i.log);
  }

  void Supervise() {
    int64_t max_ms = spec_.max_runtime_seconds * 1000;
    char buf[65536];
    while (true) {
      std::vector<pollfd> pfds;
      pfds.push_back({g_signal_pipe[0], POLLIN, 0});
      for (auto& i : instances_)
        if (i.out_fd >= 0) pfds.push_back({i.out_fd, POLLIN, 0});
      ::poll(pfds.data(), pfds.size(), 100);
      if (pfds[0].revents & POLLIN) DrainSignals();
      for (auto& i : instances_) {
        if (i.out_fd < 0) continue;
        while (true) {
          ssize_t n = ::read(i.out_fd, buf, sizeof buf);
          if (n > 0) {
            WriteLines(i, buf, static_cast<size_t>(n), false);
            continue;
          }
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            WriteLines(i, "", 0, true);
            ::close(i.out_fd);
            i.out_fd = -1;
          }
          break;
        }
      }
      int status;
      pid_t pid;
      while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
        for (auto& i : instances_) {
          if (i.pid != pid) continue;
          i.exited = true;
          i.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          // Like a container whose entry point ended: what the instance left running in the
          // background goes with it (and stops holding the output pipe open).
          ::kill(-i.pid, SIGKILL);
          i.drain_deadline = NowMs() + kDrainMs;
          if (i.exit_code != 0 && exit_code_ == 0) {
            exit_code_ = i.exit_code;
            first_failed_ = i.n;
            killed_by_ = WIFSIGNALED(status) ? WTERMSIG(status) : i.exit_code > 128 ? i.exit_code - 128 : 0;
            BeginStop();  // the gang fails together
          }
        }
      }
      bool all_exited = std::all_of(instances_.begin(), instances_.end(), [](auto& i) { return i.exited; });
      bool all_drained = std::all_of(instances_.begin(), instances_.end(), [](auto& i) { return i.out_fd < 0; });
      if (all_exited && all_drained) break;
      int64_t now = NowMs();
      for (auto& i : instances_) {
        if (i.exited && i.out_fd >= 0 && now >= i.drain_deadline) {  // a process that left the group
          WriteLines(i, "", 0, true);
          ::close(i.out_fd);
          i.out_fd = -1;
        }
      }
      NoteCheckpoint(now);
      if (all_exited) continue;
      if (slurm_ && !fenced_ && Fenced()) {
        fenced_ = stopped_ = true;
        Signal(SIGKILL);
        kill_deadline_ = now + 3600 * 1000;
      }
      if (!stopped_ && StopRequested()) {
        stopped_ = true;
        WriteInterruptionNotices(now);
        BeginStop();
      }
      if (max_ms > 0 && !max_runtime_exceeded_ && !stopped_ && now - train_start_ > max_ms) {
        max_runtime_exceeded_ = true;
        BeginStop();
      }
      EnforceGrace(now);
    }
    if ((stopped_ || max_runtime_exceeded_) && exit_code_ == 0) {
      for (auto& i : instances_)
        if (i.exit_code != 0) exit_code_ = i.exit_code;
    }
    for (auto& i : instances_)
      if (i.log) std::fclose(i.log);
  }

  // The job's own account of its failure, /opt/ml/output/failure of the first instance that has
  // one: a regular file, its first kMaxFailureBytes, read without following a link or opening
  // anything else (a link there once returned the server's secrets; a FIFO held the supervisor).
  void ReadFailureFiles() {
    for (int n = 1; n <= count_ && failure_.empty(); ++n) {
      std::string f;
      Status st = local::ReadJobFile({local::HostDir(dir_, n), "output"}, "failure", kMaxFailureBytes, &f);
      if (st.ok() && !f.empty()) failure_ = f;
      if (!st.ok() && st.code() != Code::kNotFound)
        JobLog(n, "[trainyard] /opt/ml/output/failure is ignored: " + st.message());
    }
  }

  // Reports the entries of one instance's tree left out of an upload in its log, the first
  // kMaxSkipLines one by one, then how many more.
  class SkipReport {
   public:
    SkipReport(Supervisor* s, std::string what) : s_(s), what_(std::move(what)) {}
    ~SkipReport() {
      for (const auto& [n, count] : counts_)
        if (count > kMaxSkipLines)
          s_->JobLog(n, "[trainyard] " + what_ + ": " + std::to_string(count - kMaxSkipLines) +
                            " more entries are not uploaded");
    }
    void operator()(int n, const std::string& rel, const std::string& why) {
      if (++counts_[n] <= kMaxSkipLines) s_->JobLog(n, "[trainyard] " + what_ + ": " + rel + " is not uploaded: " + why);
    }

   private:
    Supervisor* s_;
    std::string what_;
    std::map<int, int> counts_;
  };

  void Upload() {
    ReadFailureFiles();
    // A process that died of a signal nobody here sent (the out-of-memory killer, a crash) says so.
    if (failure_.empty() && killed_by_ > 0 && !stopped_ && !max_runtime_exceeded_) {
      const char* name = sigabbrev_np(killed_by_);
      failure_ = "AlgorithmError: instance algo-" + std::to_string(first_failed_) + ": the training process exited with code " +
                 std::to_string(exit_code_) + ", killed by signal " + std::to_string(killed_by_) +
                 (name ? std::string(" (SIG") + name + ")" : std::string()) +
                 (killed_by_ == SIGKILL ? "; the kernel's out-of-memory killer sends this signal too" : "");
    }
    auto fail = [&](const std::string& what, Code code = Code::kInvalidArgument) {
      Log("upload: " + what);
      Fail(IsTransient(code) ? FailureKind::kInternal : FailureKind::kClient, what);
      return false;
    };
    // exec/local/outputs.h: packed in this process, only the job's regular files and directories;
    // the rest is reported in the instance's log.
    auto pack = [&](const std::string& name, const char* sub) {
      if (spec_.output_prefix.empty()) return false;
      SkipReport skipped(this, std::string("/opt/ml/") + sub);
      local::OutputUpload out{dir_, !volumes_.empty() && volumes_[0] ? volumes_[0]->path() : "", count_, sub, name,
                              spec_.output_prefix, spec_.compress};
      Status st = local::UploadOutput(*mover_, out, [&](int n, const std::string& rel, const std::string& why) {
        skipped(n, ShownRel(sub, rel), why);
      });
      return st.ok() || fail(st.message(), st.code());
    };
    model_uploaded_ = pack("model.tar.gz", "model");
    pack("output.tar.gz", "output/data");
    if (checkpoints_ && !SyncCheckpoints("final")) fail("cannot sync checkpoints: " + last_sync_error_);
  }

  // How an entry of /opt/ml/<sub> is named in the job's log: its path in the job's view.
  static std::string ShownRel(const std::string& sub, const std::string& rel) {
    return "/opt/ml/" + sub + (rel.empty() ? "" : "/" + rel);
  }

  // Appends a line to instance n's log (the job's log stream), where the job's own output went;
  // nothing once the log reached [logs] max_bytes_per_stream. Safe from any thread: each line is
  // one append.
  void JobLog(int n, const std::string& text) {
    const std::string path = local::LogDir(dir_) + "/algo-" + std::to_string(n) + ".log";
    struct stat st {};
    if (max_log_bytes_ > 0 && ::stat(path.c_str(), &st) == 0 && st.st_size >= max_log_bytes_) return;
    std::string line = std::to_string(NowMs()) + " " + ForTheJob(text);
    std::replace(line.begin(), line.end(), '\n', ' ');
    line += '\n';
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    [[maybe_unused]] ssize_t w = ::write(fd, line.data(), line.size());
    ::close(fd);
  }

  std::string dir_;
  AttemptSpec spec_;
  local::HostSettings host_;
  std::vector<RedactedPath> server_paths_;  // set by Load()
  json status_;
  int lock_fd_ = -1;
  int count_ = 1;
  std::vector<bool> configured_;  // per instance: its input/config files are written
  bool sandbox_ = false;
  int64_t grace_ms_ = 120000;
  int64_t max_log_bytes_ = 0;  // [logs] max_bytes_per_stream (0: no cap)
  int first_failed_ = 0;  // the instance whose non-zero exit failed the gang
  int killed_by_ = 0;     // the signal that ended it (also seen as an exit code of 128 + N), or 0
  std::vector<Instance> instances_;
  // Per instance (index n - 1), in the sandbox: its cgroup and storage volume, each null where
  // the host offers none (set up by ConfineInstance, released by ReleaseInstances).
  std::vector<std::unique_ptr<local::InstanceCgroup>> cgroups_;
  std::vector<local::HeldPort> held_ports_;
  std::optional<std::vector<std::vector<int>>> placed_gpus_;  // per instance, from spec.json (exec/local/gpus.h)
  int master_port_ = 0, shell_port_ = 0;
  std::vector<std::unique_ptr<local::InstanceVolume>> volumes_;
  local::JobUser job_user_;
  std::vector<std::optional<std::string>> cuda_visible_;  // per instance: its CUDA_VISIBLE_DEVICES, if set
  std::unique_ptr<local::SystemSampler> sampler_;
  int launched_ = 0;
  int64_t last_checkpoint_ms_ = 0;  // reported in status.json
  int64_t next_checkpoint_scan_ = 0;
  int64_t train_start_ = 0;
  int64_t kill_deadline_ = 0;
  int64_t next_term_sweep_ = 0;
  std::set<pid_t> termed_;  // sandboxed processes already sent SIGTERM
  bool stop_requested_ = false;
  bool signal_seen_ = false;
  // ---- Slurm ----
  bool slurm_ = false;                   // host_.launcher == "slurm"
  bool fenced_ = false;                  // the executor gave the attempt up (FencePath)
  std::string slurm_job_id_;
  std::vector<std::string> node_names_;  // instance n on node_names_[n - 1]
  std::vector<std::string> node_addrs_;
  // Instance n runs on another node, through srun (instance 1 runs beside the supervisor).
  bool Remote(int n) const { return slurm_ && n > 1; }
  // srun's environment: the supervisor's own (the Slurm job's), with SLURM_CONF.
  std::map<std::string, std::string> SrunEnvironment() const {
    std::map<std::string, std::string> env = local::ProcessEnvironment();
    if (!host_.slurm_conf.empty()) env["SLURM_CONF"] = host_.slurm_conf;
    return env;
  }
  bool stopped_ = false;
  bool end_requested_ = false;  // the end file is written (RequestRemoteEnd)
  bool capacity_error_ = false;  // an instance's volume did not fit on the host's disk
  bool max_runtime_exceeded_ = false;
  int exit_code_ = 0;
  // An object store that cannot be reached or answers 5xx, or a local disk that is full, is
  // the host's failure, not the job's: the attempt fails with InternalServerError, which
  // RetryStrategy and the usual retry rules treat as transient.
  static bool IsTransient(Code code) { return code == Code::kUnavailable || code == Code::kInternal; }
  void NoteDataError(const Status& st) {
    if (IsTransient(st.code())) infrastructure_error_ = true;
    if (st.code() == Code::kAccessDenied) access_denied_ = true;
  }
  bool access_denied_ = false;  // Prepare was refused an object (data_access): nothing is uploaded
  bool infrastructure_error_ = false;  // Prepare failed for a reason of the host, not the job's
  std::string failure_;
  FailureKind failure_kind_ = FailureKind::kNone;
  std::optional<image::CachedImage> image_;  // none: the host's software
  bool image_unavailable_ = false;            // PrepareImage failed: nothing ran
  bool model_uploaded_ = false;
  std::unique_ptr<local::DataMover> mover_;
  local::TransferStats stats_;
  std::unique_ptr<local::CheckpointSync> checkpoints_;
  std::vector<int> checkpoint_skip_lines_;  // per instance: entries left out reported in its log
  std::string submit_uri_;           // sagemaker_submit_directory, "" without one
  std::string shell_secret_;         // an MPI launch's remote shell secret (WriteShellSecret)
  nlohmann::json code_id_ = nlohmann::json::object();  // what identifies it (URI, ETag, size)
  int sync_seconds_ = 10;
  std::thread sync_thread_;
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  bool sync_stop_ = false;
  std::string last_sync_error_;
};

}  // namespace

int RunSupervisor(const std::string& attempt_dir) { return Supervisor(attempt_dir).Run(); }

int RunInstanceAgent(const std::string& attempt_dir, int instance) {
  return Supervisor(attempt_dir).RunInstanceAgent(instance);
}

}  // namespace ty::exec
