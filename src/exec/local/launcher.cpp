#include "exec/local/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/rand.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "exec/local/launch.h"
#include "exec/local/ports.h"
#include "exec/local/opt_ml.h"

extern char** environ;

namespace ty::exec::local {

namespace {

using Clock = std::chrono::steady_clock;

// How long a worker waits for algo-1 (and the rsh client for a worker) to listen.
constexpr auto kConnectPatience = std::chrono::seconds(300);
// How long a remote-shell connection has to send its request after the challenge.
constexpr auto kRequestDeadline = std::chrono::seconds(10);
// Connections one launcher holds at most (requests awaited, sessions, workers' presences).
// algo-1 holds one presence per worker, so an MPI launch spans at most this many instances; a
// worker holds one session. The cap keeps a flood of connections within the descriptor limit.
constexpr size_t kMaxConnections = 256;
// SIGTERM, then SIGKILL after this, for a session whose client went away.
constexpr auto kSessionGrace = std::chrono::seconds(5);

int g_signal_pipe[2] = {-1, -1};
volatile sig_atomic_t g_terminated = 0;  // a SIGTERM or SIGINT came (read where a wait blocks)

void OnSignal(int sig) {
  const int saved = errno;
  if (sig == SIGTERM || sig == SIGINT) g_terminated = 1;
  char c = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &c, 1);
  errno = saved;
}

void InstallSignals() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGCHLD}) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

// The signals that arrived since the last call (SIGCHLD included).
std::vector<int> DrainSignals() {
  std::vector<int> sigs;
  char buf[64];
  ssize_t n;
  while ((n = ::read(g_signal_pipe[0], buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < n; ++i) sigs.push_back(static_cast<unsigned char>(buf[i]));
  return sigs;
}

void Say(const std::string& line) { std::fprintf(stderr, "[trainyard launch] %s\n", line.c_str()); }

std::string Get(const std::map<std::string, std::string>& env, const std::string& k) {
  auto it = env.find(k);
  return it == env.end() ? "" : it->second;
}

int ExitCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// Forks `argv` with `env` in a process group of its own, stdin from /dev/null, stdout and
// stderr to out_fd/err_fd (-1: inherited); it is killed when the launcher dies. -1 on failure.
pid_t Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env, int out_fd = -1,
            int err_fd = -1) {
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> copy = argv;
  for (auto& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  // Signals stay blocked across the fork until the child runs with the default actions: a
  // SIGTERM meant for it is then delivered to it, not to the launcher's handler in the child.
  sigset_t all, previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  pid_t pid = ::fork();
  if (pid != 0) {
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    if (pid > 0) ::setpgid(pid, pid);
    return pid;
  }
  ::setpgid(0, 0);
  for (int sig : {SIGTERM, SIGINT, SIGCHLD, SIGPIPE}) ::signal(sig, SIG_DFL);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(137);
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  if (out_fd >= 0) ::dup2(out_fd, 1);
  if (err_fd >= 0) ::dup2(err_fd, 2);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execvpe(args[0], args.data(), envp.data());
  std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
  ::_exit(127);
}

// ---- torch-distributed ----

int RunTorch(const std::vector<std::string>& cmd, int grace_seconds) {
  auto env = ProcessEnvironment();
  auto node = TorchNodeFromEnvironment(env);
  if (!node.ok()) {
    Say("torch: " + node.status().message());
    return 2;
  }
  Say("torch: node " + std::to_string(node->node_rank) + " of " + std::to_string(node->hosts.size()) + ", " +
      std::to_string(node->local_world_size) + " processes, master " + node->master_addr + ":" +
      std::to_string(node->master_port));
  struct Rank {
    pid_t pid = -1;
    bool exited = false;
  };
  std::vector<Rank> ranks(static_cast<size_t>(node->local_world_size));
  int first_failure = 0;
  bool terminating = false;  // SIGTERM went to every rank (a stop, or a rank's failure)
  bool kill_pending = false;  // SIGKILL at kill_at to what is left
  Clock::time_point kill_at;
  auto terminate_all = [&](int sig) {
    for (const Rank& r : ranks)
      if (!r.exited && r.pid > 0) ::kill(-r.pid, sig);
  };
  for (int local = 0; local < node->local_world_size; ++local) {
    auto rank_env = env;
    for (auto& [k, v] : TorchRankEnvironment(*node, local)) rank_env[k] = v;
    pid_t pid = Spawn(cmd, rank_env);
    if (pid < 0) {
      Say(std::string("torch: cannot start a rank: ") + std::strerror(errno));
      first_failure = 1;
      terminating = true;
      terminate_all(SIGTERM);
      kill_pending = true;
      kill_at = Clock::now() + std::chrono::seconds(grace_seconds);
      break;
    }
    ranks[static_cast<size_t>(local)].pid = pid;
  }
  for (;;) {
    for (int sig : DrainSignals()) {
      if ((sig == SIGTERM || sig == SIGINT) && !terminating) {
        // Once to each rank: the stop's grace and its SIGKILL are the supervisor's.
        terminating = true;
        terminate_all(sig);
      }
    }
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (size_t i = 0; i < ranks.size(); ++i) {
        if (ranks[i].pid != pid) continue;
        ranks[i].exited = true;
        const int code = ExitCode(status);
        if (code != 0 && first_failure == 0) {
          first_failure = code;
          Say("torch: local rank " + std::to_string(i) + " exited with code " + std::to_string(code) +
              (terminating ? "" : "; ending the other ranks"));
          if (!terminating) {
            terminating = true;
            terminate_all(SIGTERM);
            kill_pending = true;
            kill_at = Clock::now() + std::chrono::seconds(grace_seconds);
          }
        }
      }
    }
    bool all = true;
    for (const Rank& r : ranks) all = all && (r.exited || r.pid <= 0);
    if (all) break;
    if (kill_pending && Clock::now() >= kill_at) {
      terminate_all(SIGKILL);
      kill_pending = false;
    }
    pollfd p{g_signal_pipe[0], POLLIN, 0};
    ::poll(&p, 1, 200);
  }
  return first_failure;
}

// ---- the MPI remote shell ----

std::string ReadSecret(const std::map<std::string, std::string>& env, std::string* error) {
  std::string dir = Get(env, "SM_INPUT_CONFIG_DIR");
  if (dir.empty()) dir = "/opt/ml/input/config";
  std::ifstream in(dir + "/" + kShellSecretFile);
  std::string secret;
  if (!(in >> secret) || secret.empty()) *error = "cannot read the remote shell's secret " + dir + "/" + kShellSecretFile;
  return secret;
}

// An IPv4 address of `host`: the attempt's hosts file outside the sandbox
// (TRAINYARD_HOSTS_FILE), else the resolver (the sandbox's /etc/hosts, or the cluster's).
std::optional<std::string> Resolve(const std::string& host) {
  if (const char* file = std::getenv("TRAINYARD_HOSTS_FILE")) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    if (auto a = AddressInHosts(text.str(), host)) return a;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return std::nullopt;
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
  ::freeaddrinfo(res);
  return std::string(buf);
}

sockaddr_in Address(const std::string& ip, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

bool WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Connects to host:port, retrying while nothing listens there yet; -1 once `patience` is over.
int ConnectPatiently(const std::string& host, int port, Clock::duration patience) {
  const auto deadline = Clock::now() + patience;
  for (;;) {
    if (auto ip = Resolve(host)) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a = Address(*ip, port);
      if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
      if (fd >= 0) ::close(fd);
    }
    if (Clock::now() >= deadline || g_terminated) return -1;
    ::usleep(100 * 1000);
  }
}

// Reads frames from a blocking socket; nullopt at the end of the connection or a bad frame.
std::optional<Frame> ReadFrame(int fd, std::string* buffer) {
  for (;;) {
    auto f = DecodeFrame(buffer);
    if (!f.ok()) return std::nullopt;
    if (*f) return std::move(**f);
    char chunk[65536];
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    buffer->append(chunk, static_cast<size_t>(n));
  }
}

// The port of the instances' remote shells: the attempt's own (TRAINYARD_MPI_SHELL_PORT, chosen
// free by the supervisor, the same for every instance), else the fixed default.
int ShellPort() {
  const char* v = std::getenv("TRAINYARD_MPI_SHELL_PORT");
  int port = v ? ParsePort(v) : 0;
  return port > 0 ? port : kMpiShellPort;
}

// Opens an authenticated request of `kind` to host's launcher; the socket, or -1 with *error.
int OpenSession(const std::string& host, const std::string& secret, const std::string& kind,
                const std::string& command, std::string* buffer, std::string* error) {
  int fd = ConnectPatiently(host, ShellPort(), kConnectPatience);
  if (fd < 0) {
    *error = "cannot reach " + host + ":" + std::to_string(ShellPort());
    return -1;
  }
  auto nonce = ReadFrame(fd, buffer);
  if (!nonce || nonce->type != FrameType::kNonce) {
    ::close(fd);
    *error = host + " sent no challenge";
    return -1;
  }
  nlohmann::json req = {{"kind", kind}, {"command", command},
                        {"proof", ShellProof(secret, nonce->payload, kind, command)}};
  if (!WriteAll(fd, EncodeFrame(FrameType::kRequest, req.dump()))) {
    ::close(fd);
    *error = "lost " + host;
    return -1;
  }
  return fd;
}

int RunShellClient(const std::vector<std::string>& args) {
  if (args.size() < 2) {
    std::fprintf(stderr, "usage: rsh HOST COMMAND...\n");
    return 255;
  }
  auto env = ProcessEnvironment();
  std::string error;
  std::string secret = ReadSecret(env, &error);
  if (secret.empty()) {
    Say("rsh: " + error);
    return 255;
  }
  std::string command;
  for (size_t i = 1; i < args.size(); ++i) command += (i > 1 ? " " : "") + args[i];  // as ssh joins them
  std::string buffer;
  int fd = OpenSession(args[0], secret, "shell", command, &buffer, &error);
  if (fd < 0) {
    Say("rsh: " + error);
    return 255;
  }
  for (;;) {
    auto f = ReadFrame(fd, &buffer);
    if (!f) {
      Say("rsh: the connection to " + args[0] + " ended before the command did");
      return 255;
    }
    switch (f->type) {
      case FrameType::kStdout: WriteAll(1, f->payload); break;
      case FrameType::kStderr: WriteAll(2, f->payload); break;
      case FrameType::kExit: return std::atoi(f->payload.c_str());
      case FrameType::kRefused: Say("rsh: " + args[0] + " refused: " + f->payload); return 255;
      default: break;
    }
  }
}

// One connection to this instance's launcher: a request awaited, a session, or a presence.
struct Conn {
  int fd = -1;
  std::string nonce;
  std::string in;
  Clock::time_point deadline;
  enum class State { kAwaiting, kPresence, kSession } state = State::kAwaiting;
  // A session: its command's process group and the read ends of its stdout and stderr.
  pid_t pid = -1;
  int out = -1, err = -1;
  std::optional<int> status;
  std::optional<Clock::time_point> kill_at;
};

class ShellServer {
 public:
  ShellServer(std::string secret, std::map<std::string, std::string> env)
      : secret_(std::move(secret)), env_(std::move(env)) {}
  ~ShellServer() {
    for (auto& c : conns_) Drop(*c);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }

  bool Listen(const std::string& host, std::string* error) {
    auto ip = Resolve(host);
    if (!ip) {
      *error = "cannot resolve " + host;
      return false;
    }
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = Address(*ip, ShellPort());
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 16) != 0) {
      *error = "cannot listen on " + *ip + ":" + std::to_string(ShellPort()) + ": " + std::strerror(errno);
      return false;
    }
    return true;
  }

  // The poll entries of everything the server waits on, after `extra`.
  void AddPolls(std::vector<pollfd>* fds) const {
    fds->push_back({listen_fd_, POLLIN, 0});
    for (const auto& c : conns_) {
      fds->push_back({c->fd, POLLIN, 0});
      if (c->out >= 0) fds->push_back({c->out, POLLIN, 0});
      if (c->err >= 0) fds->push_back({c->err, POLLIN, 0});
    }
  }

  // Does what is ready, without blocking; `reaped` are the children that ended (pid, status).
  void Step(const std::map<pid_t, int>& reaped) {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) break;
      if (conns_.size() >= kMaxConnections) {  // nobody needs more: one session and the presences
        ::close(fd);
        continue;
      }
      auto c = std::make_unique<Conn>();
      c->fd = fd;
      unsigned char raw[32];
      RAND_bytes(raw, sizeof raw);
      static const char* kHex = "0123456789abcdef";
      for (unsigned char b : raw) c->nonce += {kHex[b >> 4], kHex[b & 15]};
      c->deadline = Clock::now() + kRequestDeadline;
      if (WriteAll(fd, EncodeFrame(FrameType::kNonce, c->nonce))) conns_.push_back(std::move(c));
      else ::close(fd);
    }
    for (auto& c : conns_) {
      if (auto it = reaped.find(c->pid); c->pid > 0 && it != reaped.end()) c->status = it->second;
      if (c->fd < 0) continue;
      Relay(*c, c->out, FrameType::kStdout);
      Relay(*c, c->err, FrameType::kStderr);
      ReadClient(*c);
      if (c->fd < 0) continue;
      if (c->state == Conn::State::kSession && c->status && c->out < 0 && c->err < 0) {
        const int code = ExitCode(*c->status);
        WriteAll(c->fd, EncodeFrame(FrameType::kExit, std::to_string(code)));
        ++sessions_ended_;
        last_code_ = code;
        ::close(c->fd);
        c->fd = -1;
      }
      if (c->fd >= 0 && c->state == Conn::State::kAwaiting && Clock::now() >= c->deadline) Drop(*c);
    }
    for (auto& c : conns_)
      if (c->kill_at && Clock::now() >= *c->kill_at && c->pid > 0) {
        ::kill(-c->pid, SIGKILL);
        c->kill_at.reset();
      }
    std::erase_if(conns_, [](const std::unique_ptr<Conn>& c) {
      return c->fd < 0 && (c->pid < 0 || (c->status && ::kill(-c->pid, 0) != 0));
    });
  }

  // SIGTERM to every running session's command (once).
  void EndSessions() {
    for (auto& c : conns_)
      if (c->pid > 0 && !c->kill_at && ::kill(-c->pid, 0) == 0) {
        ::kill(-c->pid, SIGTERM);
        c->kill_at = Clock::now() + kSessionGrace;
      }
  }
  // Whether a session's command, or anything left in its process group (the remote daemon and
  // its ranks, after the shell that started them), still runs: the instance ends only after.
  bool Busy() const {
    for (const auto& c : conns_)
      if (c->pid > 0 && (!c->status || ::kill(-c->pid, 0) == 0)) return true;
    return false;
  }
  int sessions_ended() const { return sessions_ended_; }
  int last_code() const { return last_code_; }

 private:
  void Relay(Conn& c, int& fd, FrameType type) {
    if (fd < 0) return;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        if (c.fd >= 0) WriteAll(c.fd, EncodeFrame(type, std::string(buf, static_cast<size_t>(n))));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      ::close(fd);
      fd = -1;
      return;
    }
  }

  void ReadClient(Conn& c) {
    char buf[65536];
    for (;;) {
      ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        if (c.state != Conn::State::kAwaiting) continue;  // nothing more is read after the request
        c.in.append(buf, static_cast<size_t>(n));
        auto f = DecodeFrame(&c.in);
        if (!f.ok()) return Drop(c);
        if (*f) Handle(c, **f);
        if (c.fd < 0) return;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      // The client is gone: its session's command ends with it.
      if (c.pid > 0 && !c.status && !c.kill_at) {
        ::kill(-c.pid, SIGTERM);
        c.kill_at = Clock::now() + kSessionGrace;
      }
      ::close(c.fd);
      c.fd = -1;
      return;
    }
  }

  void Handle(Conn& c, const Frame& f) {
    nlohmann::json req = nlohmann::json::parse(f.payload, nullptr, false);
    const bool shaped = f.type == FrameType::kRequest && req.is_object() && req.value("kind", json_null()).is_string() &&
                        req.value("command", json_null()).is_string() && req.value("proof", json_null()).is_string();
    if (!shaped || !ShellProofValid(secret_, c.nonce, req["kind"], req["command"], req["proof"])) {
      Say("remote shell: refused a connection that did not prove the attempt's secret");
      WriteAll(c.fd, EncodeFrame(FrameType::kRefused, "not authenticated"));
      return Drop(c);
    }
    if (req["kind"] == "presence") {
      c.state = Conn::State::kPresence;
      return;
    }
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return Drop(c);
    c.pid = Spawn({"/bin/sh", "-c", req["command"].get<std::string>()}, env_, out[1], err[1]);
    ::close(out[1]);
    ::close(err[1]);
    c.out = out[0];
    c.err = err[0];
    ::fcntl(c.out, F_SETFL, O_NONBLOCK);
    ::fcntl(c.err, F_SETFL, O_NONBLOCK);
    if (c.pid < 0) {
      WriteAll(c.fd, EncodeFrame(FrameType::kRefused, "cannot start the command"));
      return Drop(c);
    }
    c.state = Conn::State::kSession;
  }

  static nlohmann::json json_null() { return nullptr; }

  void Drop(Conn& c) {
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    if (c.pid > 0 && !c.status) ::kill(-c.pid, SIGKILL);
    for (int* fd : {&c.out, &c.err})
      if (*fd >= 0) {
        ::close(*fd);
        *fd = -1;
      }
    c.pid = -1;
  }

  const std::string secret_;
  const std::map<std::string, std::string> env_;
  int listen_fd_ = -1;
  std::vector<std::unique_ptr<Conn>> conns_;
  int sessions_ended_ = 0;
  int last_code_ = 0;
};

std::string SelfExe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string(kLauncherPath);
}

int RunMpi(int processes_per_host, const std::vector<std::string>& options, const std::vector<std::string>& cmd) {
  auto env = ProcessEnvironment();
  auto node = TorchNodeFromEnvironment(env);  // the hosts and this one's place among them
  if (!node.ok()) {
    Say("mpi: " + node.status().message());
    return 2;
  }
  std::string error;
  std::string secret = ReadSecret(env, &error);
  if (secret.empty()) {
    Say("mpi: " + error);
    return 2;
  }
  const std::string current = node->hosts[static_cast<size_t>(node->node_rank)];
  ShellServer server(secret, env);
  if (!server.Listen(current, &error)) {
    Say("mpi: " + error);
    return 1;
  }
  const bool master = node->node_rank == 0;
  pid_t mpirun = -1;
  int presence = -1;
  std::string presence_buffer;
  if (master) {
    std::string iface = Get(env, "SM_NETWORK_INTERFACE_NAME");
    if (iface.empty()) iface = "eth0";
    // Outside the sandbox (the hosts file stands in for its /etc/hosts) every instance has the
    // host's name.
    const bool own_host_names = std::getenv("TRAINYARD_HOSTS_FILE") == nullptr;
    auto argv = MpirunArgv(node->hosts, processes_per_host, iface, options, SelfExe() + " rsh", cmd, own_host_names);
    Say("mpi: " + std::to_string(node->hosts.size()) + " hosts, " + std::to_string(processes_per_host) +
        " processes each");
    auto mpirun_env = env;
    mpirun_env.emplace("SHELL", "/bin/sh");  // the remote daemons' shell, as mpirun assumes it
    mpirun = Spawn(argv, mpirun_env);
    if (mpirun < 0) {
      Say(std::string("mpi: cannot start mpirun: ") + std::strerror(errno));
      return 127;
    }
  } else {
    presence = OpenSession(node->hosts[0], secret, "presence", "", &presence_buffer, &error);
    if (presence < 0) {
      if (g_terminated) return 143;
      Say("mpi: " + error);
      return 1;
    }
  }
  bool stopping = false;
  int mpirun_code = 0;
  for (;;) {
    std::map<pid_t, int> reaped;
    for (int sig : DrainSignals()) {
      if ((sig == SIGTERM || sig == SIGINT) && !stopping) {
        stopping = true;
        if (mpirun > 0) ::kill(-mpirun, sig);  // mpirun passes it on to every rank
        server.EndSessions();
      }
    }
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) reaped[pid] = status;
    if (mpirun > 0 && reaped.count(mpirun)) {
      mpirun_code = ExitCode(reaped[mpirun]);
      mpirun = -1;
    }
    server.Step(reaped);
    if (master && mpirun < 0 && !server.Busy()) return mpirun_code;
    if (!master) {
      // The attempt's outcome is algo-1's (mpirun's): a worker whose session is over ends well,
      // whatever its daemon's status as mpirun tore the job down.
      if (server.sessions_ended() > 0 && !server.Busy()) {
        if (server.last_code() != 0) Say("mpi: the MPI daemon's session ended with code " + std::to_string(server.last_code()));
        return stopping ? 143 : 0;
      }
      if (presence >= 0) {
        char b[256];
        ssize_t n = ::recv(presence, b, sizeof b, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          ::close(presence);
          presence = -1;
          Say("mpi: algo-1 is gone; ending");
          server.EndSessions();
        }
      }
      if (presence < 0 && !server.Busy()) return stopping ? 143 : 0;
      if (stopping && !server.Busy()) return 143;
    }
    std::vector<pollfd> fds = {{g_signal_pipe[0], POLLIN, 0}};
    if (presence >= 0) fds.push_back({presence, POLLIN, 0});
    server.AddPolls(&fds);
    ::poll(fds.data(), fds.size(), 200);
  }
}

}  // namespace

const char* LauncherUsage() {
  return "usage: trainyard-supervisor launch torch [--grace-seconds S] -- COMMAND...\n"
         "       trainyard-supervisor launch mpi [--processes-per-host P] [--mpi-option OPTION]... -- COMMAND...\n"
         "       trainyard-supervisor rsh HOST COMMAND...\n"
         "Run inside an instance in place of its entry point (see docs/distributed.md):\n"
         "  launch torch  starts max(1, SM_NUM_GPUS) processes of COMMAND with RANK, LOCAL_RANK, WORLD_SIZE,\n"
         "                MASTER_ADDR and MASTER_PORT as torchrun sets them\n"
         "  launch mpi    on algo-1 runs mpirun over every host in SM_HOSTS; on the others serves as its\n"
         "                remote shell until the session or algo-1 ends\n"
         "  rsh           mpirun's remote shell agent: runs COMMAND on HOST's launcher\n";
}

int RunLauncher(const std::vector<std::string>& args) {
  if (args.size() >= 2 && (args[1] == "--help" || args[1] == "-h")) {
    std::printf("%s", LauncherUsage());
    return 0;
  }
  // The client keeps the default actions: mpirun ends its remote shells with a signal.
  if (!args.empty() && args[0] == "rsh") return RunShellClient({args.begin() + 1, args.end()});
  InstallSignals();
  if (args.size() < 2 || args[0] != "launch" || (args[1] != "torch" && args[1] != "mpi")) {
    std::fprintf(stderr, "%s", LauncherUsage());
    return 2;
  }
  int grace = 30, per_host = 1;
  std::vector<std::string> options, cmd;
  size_t i = 2;
  auto number = [&](const std::string& s, int lo, int hi, int* out) {
    if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    *out = std::stoi(s);
    return *out >= lo && *out <= hi;
  };
  for (; i < args.size() && args[i] != "--"; ++i) {
    const std::string& a = args[i];
    bool ok = i + 1 < args.size();
    if (ok && a == "--grace-seconds") ok = number(args[++i], 0, 86400, &grace);
    else if (ok && a == "--processes-per-host") ok = number(args[++i], 1, kMaxProcessesPerHost, &per_host);
    else if (ok && a == "--mpi-option") options.push_back(args[++i]);
    else ok = false;
    if (!ok) {
      std::fprintf(stderr, "launch: bad argument %s\n%s", a.c_str(), LauncherUsage());
      return 2;
    }
  }
  if (i < args.size()) cmd.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  if (cmd.empty()) {
    std::fprintf(stderr, "launch: no command after --\n%s", LauncherUsage());
    return 2;
  }
  return args[1] == "torch" ? RunTorch(cmd, grace) : RunMpi(per_host, options, cmd);
}

}  // namespace ty::exec::local
