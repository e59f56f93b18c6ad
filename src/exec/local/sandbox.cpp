#include "exec/local/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

namespace ty::exec::local {

namespace fs = std::filesystem;

// The staging area in the root child's own mount namespace (see sandbox.h).
constexpr const char* kStagingTmp = "/tmp";
constexpr const char* kStaging = "/tmp/.trainyard-sandbox";
constexpr size_t kMaxStaged = 256;

StatusOr<JobUser> ResolveJobUser(const std::string& spec) {
  JobUser u;
  if (::geteuid() != 0) {
    u.uid = ::geteuid();
    u.gid = ::getegid();
    return u;
  }
  std::string name = spec, group;
  if (auto colon = spec.find(':'); colon != std::string::npos) {
    name = spec.substr(0, colon);
    group = spec.substr(colon + 1);
  }
  auto numeric = [](const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; };
  if (numeric(name)) {
    u.uid = static_cast<uid_t>(std::stoul(name));
    u.gid = u.uid;
  } else {
    const passwd* pw = ::getpwnam(name.c_str());
    if (!pw) return FailedPrecondition("executor.job_user: no user named " + name + " on this host");
    u.uid = pw->pw_uid;
    u.gid = pw->pw_gid;
  }
  if (numeric(group)) {
    u.gid = static_cast<gid_t>(std::stoul(group));
  } else if (!group.empty()) {
    const struct group* gr = ::getgrnam(group.c_str());
    if (!gr) return FailedPrecondition("executor.job_user: no group named " + group + " on this host");
    u.gid = gr->gr_gid;
  }
  if (u.uid == 0 || u.gid == 0)
    return FailedPrecondition("executor.job_user must name an unprivileged user and group, not root");
  u.switch_user = true;
  return u;
}

StatusOr<int> JobSeccompFilter() {
  std::unique_ptr<void, void (*)(scmp_filter_ctx)> ctx(seccomp_init(SCMP_ACT_ALLOW), seccomp_release);
  if (!ctx) return Internal("seccomp: cannot initialise a filter");
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  // Calls that are refused whatever their arguments (names this libseccomp does not know are
  // skipped: the kernel it targets has no such call either).
  static const char* const kRefused[] = {
      "mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
      "fsmount", "fspick", "mount_setattr", "process_vm_readv", "process_vm_writev", "keyctl", "add_key",
      "request_key", "bpf", "perf_event_open", "kexec_load", "kexec_file_load", "init_module", "finit_module",
      "delete_module", "create_module", "open_by_handle_at", "name_to_handle_at", "setns", "swapon", "swapoff",
      "reboot", "acct", "quotactl", "quotactl_fd", "userfaultfd", "syslog", "settimeofday", "clock_settime",
      "clock_adjtime", "adjtimex", "iopl", "ioperm", "vhangup", "lookup_dcookie", "uselib", "nfsservctl",
      "kcmp", "fanotify_init"};
  for (const char* name : kRefused) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;
    if (seccomp_rule_add(ctx.get(), eperm, nr, 0) != 0) return Internal(std::string("seccomp: cannot refuse ") + name);
  }
  int rc = 0;
  // ptrace: only PTRACE_TRACEME (a debugger started by the job itself still works that way).
  rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(ptrace), 1, SCMP_A0(SCMP_CMP_NE, PTRACE_TRACEME));
  // New user namespaces (the door to the capabilities of a namespace's root).
  rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(unshare), 1,
                         SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
  rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(clone), 1,
                         SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
  int clone3 = seccomp_syscall_resolve_name("clone3");
  if (clone3 != __NR_SCMP_ERROR) rc |= seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), clone3, 0);
  // Pushing input into the terminal of whoever started the server.
  rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, TIOCSTI));
  if (rc != 0) return Internal("seccomp: cannot add the argument rules");
  int fd = ::memfd_create("trainyard-seccomp", MFD_CLOEXEC);
  if (fd < 0) return Internal(std::string("seccomp: memfd_create: ") + std::strerror(errno));
  if (seccomp_export_bpf(ctx.get(), fd) != 0 || ::lseek(fd, 0, SEEK_SET) != 0) {
    ::close(fd);
    return Internal("seccomp: cannot export the filter");
  }
  return fd;
}

Sandbox::Sandbox(Sandbox&& other) noexcept
    : staged_(other.staged_), args_(std::move(other.args_)), staged_binds_(std::move(other.staged_binds_)),
      fds_(std::move(other.fds_)) {
  other.fds_.clear();
}
Sandbox& Sandbox::operator=(Sandbox&& other) noexcept {
  if (this != &other) {
    for (int fd : fds_) ::close(fd);
    staged_ = other.staged_;
    args_ = std::move(other.args_);
    staged_binds_ = std::move(other.staged_binds_);
    fds_ = std::move(other.fds_);
    other.fds_.clear();
  }
  return *this;
}
Sandbox::~Sandbox() {
  for (int fd : fds_) ::close(fd);
}

Status Sandbox::Bind(const std::string& host, const std::string& dest, bool read_only) {
  // O_PATH: no read permission needed, and a FIFO or device is not opened; the descriptor is
  // used by bubblewrap for the mount only (it closes the ones it is given before running the job).
  int fd = ::open(host.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return Internal("sandbox: cannot open " + host + ": " + std::strerror(errno));
  fds_.push_back(fd);
  if (!staged_) {
    args_.insert(args_.end(), {read_only ? "--ro-bind-fd" : "--bind-fd", std::to_string(fd), dest});
    return Status::Ok();
  }
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) return Internal("sandbox: cannot stat " + host + ": " + std::strerror(errno));
  std::string path = std::string(kStaging) + "/" + std::to_string(staged_binds_.size());
  staged_binds_.push_back({fd, path, S_ISDIR(sb.st_mode)});
  args_.insert(args_.end(), {read_only ? "--ro-bind" : "--bind", path, dest});
  return Status::Ok();
}

void Sandbox::DeviceBind(const std::string& path, const std::string& dest) {
  args_.insert(args_.end(), {"--dev-bind", path, dest});
}

void Sandbox::Tmpfs(const std::string& dest, int64_t size_bytes) {
  if (size_bytes > 0) args_.insert(args_.end(), {"--size", std::to_string(size_bytes)});
  args_.insert(args_.end(), {"--tmpfs", dest});
}

void Sandbox::Arg(const std::string& a) { args_.push_back(a); }

StatusOr<std::vector<std::string>> Sandbox::Command(const std::vector<std::string>& command) {
  auto filter = JobSeccompFilter();
  if (!filter.ok()) return filter.status();
  fds_.push_back(*filter);
  // --unshare-user also when the server is unprivileged (bubblewrap implies it then); as root,
  // the child has switched to the job user before bwrap runs, so the namespace maps that uid.
  std::vector<std::string> argv = {"bwrap", "--unshare-user", "--disable-userns", "--unshare-ipc",
                                   "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
                                   "--cap-drop", "ALL", "--seccomp", std::to_string(*filter)};
  argv.insert(argv.end(), args_.begin(), args_.end());
  argv.insert(argv.end(), {"--die-with-parent", "--"});
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

bool Sandbox::PrepareChild(const JobUser& user) const {
  if (staged_) {
    // Each source as a detached copy of its mount tree, taken while still in the host's mount
    // namespace (a descriptor of a mount there cannot be bound in the new one).
    int trees[kMaxStaged];
    if (staged_binds_.size() > kMaxStaged) {
      errno = E2BIG;
      return false;
    }
    for (size_t i = 0; i < staged_binds_.size(); ++i) {
      trees[i] = static_cast<int>(::syscall(SYS_open_tree, staged_binds_[i].fd, "",
                                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
      if (trees[i] < 0) return false;
    }
    // Mounts of this namespace only; none travels back to the host's.
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return false;
    // 1777: bubblewrap, as the job user, makes its own new root below /tmp.
    if (::mount("tmpfs", kStagingTmp, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) return false;
    if (::mkdir(kStaging, 0755) != 0) return false;
    for (size_t i = 0; i < staged_binds_.size(); ++i) {
      const Staged& b = staged_binds_[i];
      if (b.directory) {
        if (::mkdir(b.path.c_str(), 0755) != 0) return false;
      } else {
        int f = ::open(b.path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (f < 0) return false;
        ::close(f);
      }
      if (::syscall(SYS_move_mount, trees[i], "", AT_FDCWD, b.path.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) return false;
      ::close(trees[i]);
    }
  }
  for (int fd : fds_) {
    bool staged_source = false;
    for (const Staged& b : staged_binds_) staged_source |= b.fd == fd;
    if (staged_source) {
      ::close(fd);  // mounted; the job must not inherit a descriptor from outside its root
    } else if (::fcntl(fd, F_SETFD, 0) != 0) {
      return false;
    }
  }
  if (user.switch_user) {
    if (::setgroups(0, nullptr) != 0) return false;
    if (::setresgid(user.gid, user.gid, user.gid) != 0) return false;
    if (::setresuid(user.uid, user.uid, user.uid) != 0) return false;
    if (::getuid() == 0 || ::geteuid() == 0) {
      errno = EPERM;
      return false;
    }
  }
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0;
}

Status ProbeSandbox(const std::string& job_user) {
  auto user = ResolveJobUser(job_user);
  if (!user.ok()) return user.status();
  Sandbox sb(user->switch_user);
  for (const char* a : {"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"}) sb.Arg(a);
  if (Status st = sb.Bind("/", "/tmp", true); !st.ok()) return st;  // exercises the staging
  auto argv = sb.Command({"true"});
  if (!argv.ok()) return argv.status();
  std::vector<char*> args;
  for (auto& a : *argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Internal(std::string("sandbox probe: fork: ") + std::strerror(errno));
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    }
    if (!sb.PrepareChild(*user)) ::_exit(126);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return FailedPrecondition(code == 126 ? "cannot switch to executor.job_user or stage the sandbox's mounts"
                                        : "bubblewrap with a user namespace, --cap-drop ALL and a seccomp filter failed "
                                          "(exit code " + std::to_string(code) + ")");
}

Status GiveToJobUser(const std::string& path, const JobUser& user, bool private_copies) {
  if (!user.switch_user) return Status::Ok();
  std::error_code ec;
  // A regular file with other hard links is shared (the host's object cache links input files
  // into each instance): it stays the supervisor's, read-only; the job may replace it, not change it.
  auto give = [&](const fs::path& p) -> Status {
    struct stat sb {};
    if (::lstat(p.c_str(), &sb) != 0) return Status::Ok();
    if (S_ISREG(sb.st_mode) && sb.st_nlink > 1) {
      if (!private_copies) return Status::Ok();
      std::error_code cec;
      const fs::path copy = p.string() + ".trainyard-copy";
      fs::copy_file(p, copy, fs::copy_options::overwrite_existing, cec);
      if (!cec) fs::rename(copy, p, cec);
      if (cec) return Internal("cannot give " + p.string() + " to the job user: " + cec.message());
    }
    if (::lchown(p.c_str(), user.uid, user.gid) != 0 && errno != ENOENT)
      return Internal("cannot give " + p.string() + " to the job user: " + std::strerror(errno));
    return Status::Ok();
  };
  if (Status st = give(path); !st.ok()) return st;
  if (!fs::is_directory(fs::symlink_status(path, ec))) return Status::Ok();
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (Status st = give(it->path()); !st.ok()) return st;
  if (ec) return Internal("cannot give " + path + " to the job user: " + ec.message());
  return Status::Ok();
}

}  // namespace ty::exec::local
