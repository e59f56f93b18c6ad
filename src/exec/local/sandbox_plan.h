// The mounts and flags of one instance's bubblewrap sandbox, as a pure function of the attempt's
// spec, the host's settings and the instance's paths (docs/user-guide.md, "The sandbox"). The
// order is security-critical: bubblewrap applies mounts in order, a later one over an earlier
// one, so what hides the server's data directory must come after the host's root and before
// the instance's own paths. tests/unit/sandbox_argv_test.cpp pins it; nothing here touches the
// file system (what exists on the host comes in through SandboxLayout::is_directory).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/attempt_spec.h"
#include "exec/local/host_settings.h"

namespace ty::exec::local {

class Sandbox;

// One step of the sandbox's command line, in order.
struct SandboxStep {
  enum class Kind {
    kArg,       // a bubblewrap argument as it is (`source`)
    kDevBind,   // a device node `source` at `dest` ("" = the same path)
    kTmpfs,     // an empty private tmpfs at `dest`
    kBind,      // `source` of the host at `dest`, opened by the supervisor (Sandbox::Bind)
  };
  Kind kind = Kind::kArg;
  std::string source;
  std::string dest;
  bool read_only = false;

  bool operator==(const SandboxStep&) const = default;
};

// Instance n's paths and what the host has, as the supervisor found them.
struct SandboxLayout {
  int n = 1;
  std::string scratch;      // its /tmp, /var/tmp and $HOME live under here
  std::string job_home;     // $HOME in the sandbox (/home/job, or /tmp/.home/job without /home)
  std::string workspace;    // bound at the same path
  std::string opt_ml;       // its /opt/ml tree on the host (absolute)
  std::string hosts_file;   // its /etc/hosts on the host (absolute)
  std::vector<std::string> hidden_dirs;  // covered by an empty tmpfs (the server's data, ...)
  std::vector<std::string> gpu_nodes;    // device nodes of its GPUs
  bool opt_ml_mount_point = true;        // /opt/ml exists on the host (else /opt becomes a tmpfs)
  // The launcher of a distributed launch (trainyard-supervisor on the host), bound read-only at
  // kLauncherPath over a tmpfs at kLauncherDir (made on the host beside /opt/ml).
  std::string launcher;
  std::function<bool(const std::string&)> is_directory;  // the host's directories
  // With an image (docs/images.md): its unpacked root file system, which becomes the sandbox's
  // `/` read-only in place of the host's, and the working directory it names.
  std::string image_rootfs;
  std::string working_dir = "/opt/ml/code";
};

// The sandbox of instance n, in the order bubblewrap applies it:
//  1. the host's file system read-only, a /proc and a minimal /dev of its own plus its GPUs'
//     device nodes, and /tmp and /var/tmp from its scratch space;
//  2. an empty tmpfs over each hidden directory;
//  3. executor.sandbox_binds read-write at the same path, executor.pip_find_links read-only;
//  4. its own paths: $HOME, --unshare-net with network isolation, its workspace, its /opt/ml,
//     /etc/hosts read-only, /opt/ml/code and the warm pool cache from the workspace, its
//     file-system channels, the launcher read-only when its hyperparameters ask for a
//     distributed launch; then its host name and working directory.
// With an image the root is the image's root file system instead (read-only), nothing of the
// host's is in it but what steps 1 and 4 bind (no hidden directories to cover, no sandbox_binds,
// pip_find_links, workspace or launcher), and the working directory is the image's.
std::vector<SandboxStep> SandboxSteps(const AttemptSpec& spec, const HostSettings& host, const SandboxLayout& layout);

// The bubblewrap arguments the steps stand for, binds by path (`--bind SRC DEST`,
// `--ro-bind SRC DEST`): the sandbox's mount order and flags in readable form. The command line
// that runs passes each bind source as a descriptor instead (Sandbox::Bind).
std::vector<std::string> BwrapArgv(const std::vector<SandboxStep>& steps);

// Adds the steps to `sb` in order, opening each bind source as the supervisor.
Status ApplySandboxSteps(const std::vector<SandboxStep>& steps, Sandbox* sb);

}  // namespace ty::exec::local
