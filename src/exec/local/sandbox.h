// How one instance's process is confined (docs/user-guide.md, "The sandbox").
//
// Whatever user the server runs as, the job runs under bubblewrap with its own user, mount, pid,
// uts and ipc namespaces, no capabilities, no_new_privs, nested user namespaces disabled and a
// seccomp filter (JobSeccompFilter) that refuses the system calls a contained job has no use
// for. When the supervisor is root, the child drops to the unprivileged job user before it execs
// bubblewrap, so job code never runs as host root, not even inside a user namespace mapped to 0.
//
// Bind sources are opened by the supervisor (O_PATH). An unprivileged server hands them to
// bubblewrap as descriptors (--bind-fd). A root server's child, still root, first makes a mount
// namespace of its own, mounts a private tmpfs over /tmp there (the staging area) and binds each
// source into it, so that bubblewrap, run as the job user, needs no search permission on the
// data directory's path (bubblewrap resolves even --bind-fd sources by path). The staging tmpfs
// is invisible to the host and is covered in the sandbox by the instance's own /tmp.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace ty::exec::local {

// The identity a job runs as. switch_user: the supervisor is root and drops to uid/gid first.
struct JobUser {
  uid_t uid = 0;
  gid_t gid = 0;
  bool switch_user = false;
};

// Resolves executor.job_user ("nobody", "65534" or "65534:65534"): when the caller is root,
// the job user; otherwise the caller itself (an unprivileged server cannot switch).
StatusOr<JobUser> ResolveJobUser(const std::string& spec);

// A memfd holding the job's seccomp filter as a BPF program (bwrap --seccomp FD). Close-on-exec;
// Sandbox::Command clears that for the child. Refused with EPERM: mount and the new mount API,
// umount2, pivot_root, chroot, ptrace except PTRACE_TRACEME, process_vm_readv/writev, keyctl,
// add_key, request_key, bpf, perf_event_open, kexec_*, init/finit/delete_module,
// open_by_handle_at, name_to_handle_at, clone/unshare with CLONE_NEWUSER, setns, swapon/off,
// reboot, acct, quotactl, userfaultfd, syslog, clock/time setters, iopl/ioperm, TIOCSTI. clone3
// answers ENOSYS (its flags are out of a filter's reach), so libc falls back to clone.
StatusOr<int> JobSeccompFilter();

// One instance's sandbox, built in the supervisor before fork. Owns the descriptors it opened.
class Sandbox {
 public:
  // staged: the child is root and stages the bind sources (see above); else --bind-fd.
  explicit Sandbox(bool staged = false) : staged_(staged) {}
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;
  Sandbox(Sandbox&& other) noexcept;
  Sandbox& operator=(Sandbox&& other) noexcept;
  ~Sandbox();

  // Mount `host` at `dest` (read-only or not), from a descriptor opened now as the supervisor.
  Status Bind(const std::string& host, const std::string& dest, bool read_only);
  // Bind a device node (the GPUs) at `dest` in the sandbox.
  void DeviceBind(const std::string& path, const std::string& dest);
  // A private tmpfs at `dest`; size_bytes > 0 bounds it.
  void Tmpfs(const std::string& dest, int64_t size_bytes = 0);
  // Any other bubblewrap arguments (in order).
  void Arg(const std::string& a);

  // The bwrap command line that runs `command`: the namespaces, --cap-drop ALL, the seccomp
  // filter and the mounts in the order they were added.
  StatusOr<std::vector<std::string>> Command(const std::vector<std::string>& command);

  // In the forked child, before exec: clears close-on-exec on the descriptors the command line
  // names, stages the bind sources where staged, drops to the job user, sets no_new_privs.
  // Async-signal-safe; false: errno says why.
  bool PrepareChild(const JobUser& user) const;

 private:
  struct Staged {
    int fd;             // the source, opened by Bind
    std::string path;   // where the child binds it: /tmp/.trainyard-sandbox/<k>
    bool directory;
  };
  bool staged_ = false;
  std::vector<std::string> args_;
  std::vector<Staged> staged_binds_;
  std::vector<int> fds_;  // opened by Bind and the filter; closed on destruction
};

// Runs `true` in a sandbox exactly as a job's (the job user, namespaces, seccomp filter and,
// as root, the staged mounts). OK when it works; else what failed.
Status ProbeSandbox(const std::string& job_user);

// Chown a tree the job must write (its /opt/ml, workspace, home) to the job user, without
// following symbolic links. No-op when the user is not switched. A regular file with other hard
// links (the object cache links input files into each instance) stays the supervisor's and
// read-only, unless `private_copies`: then the job gets a copy of its own (restored checkpoints,
// which the job rewrites in place).
Status GiveToJobUser(const std::string& path, const JobUser& user, bool private_copies = false);

}  // namespace ty::exec::local
