#include "exec/local/sandbox_plan.h"

#include "exec/distribution.h"
#include "exec/local/launch.h"
#include "exec/local/sandbox.h"

namespace ty::exec::local {

namespace {

SandboxStep Arg(std::string a) { return {SandboxStep::Kind::kArg, std::move(a), "", false}; }
SandboxStep Tmpfs(std::string dest) { return {SandboxStep::Kind::kTmpfs, "", std::move(dest), false}; }
SandboxStep Bind(std::string source, std::string dest, bool read_only) {
  return {SandboxStep::Kind::kBind, std::move(source), std::move(dest), read_only};
}

}  // namespace

std::vector<SandboxStep> SandboxSteps(const AttemptSpec& spec, const HostSettings& host, const SandboxLayout& layout) {
  auto is_dir = [&layout](const std::string& p) { return layout.is_directory && layout.is_directory(p); };
  // The image's root was given its mount points when it was unpacked (image::MakeMountPoints).
  const bool image = !layout.image_rootfs.empty();
  std::vector<SandboxStep> steps;
  if (image) {
    steps.push_back(Bind(layout.image_rootfs, "/", true));
    for (const char* a : {"--proc", "/proc", "--dev", "/dev"}) steps.push_back(Arg(a));
  } else {
    for (const char* a : {"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"}) steps.push_back(Arg(a));
  }
  // Each under /dev in the sandbox, wherever the host keeps it (gpu_device_dir).
  for (const std::string& node : layout.gpu_nodes)
    steps.push_back({SandboxStep::Kind::kDevBind, node, "/dev/" + node.substr(node.rfind('/') + 1), false});
  for (const char* t : {"/tmp", "/var/tmp"})
    if (image || is_dir(t)) steps.push_back(Bind(layout.scratch + "/tmp", t, false));
  if (!image) {
    for (const std::string& hidden : layout.hidden_dirs) steps.push_back(Tmpfs(hidden));
    for (const std::string& b : host.sandbox_binds)
      if (is_dir(b)) steps.push_back(Bind(b, b, false));
    // executor.pip_find_links, when a directory: read-only at the same path, for pip in the sandbox.
    const std::string& find_links = host.pip_find_links;
    if (!find_links.empty() && find_links[0] == '/' && is_dir(find_links)) steps.push_back(Bind(find_links, find_links, true));
  }
  steps.push_back(Tmpfs(image || is_dir("/home") ? "/home" : "/tmp/.home"));
  steps.push_back(Bind(layout.scratch + "/home", layout.job_home, false));
  if (spec.network_isolation) steps.push_back(Arg("--unshare-net"));  // loopback only
  if (!image && !layout.opt_ml_mount_point) steps.push_back(Tmpfs("/opt"));
  const std::string& ws = layout.workspace;
  if (!image) steps.push_back(Bind(ws, ws, false));
  steps.push_back(Bind(layout.opt_ml, "/opt/ml", false));
  steps.push_back(Bind(layout.hosts_file, "/etc/hosts", true));
  steps.push_back(Bind(ws + "/code", "/opt/ml/code", false));
  if (spec.warm_pool) steps.push_back(Bind(ws + "/warmpoolcache", "/opt/ml/sagemaker/warmpoolcache", false));
  for (const auto& ch : spec.channels) {
    if (!ch.file_system) continue;
    steps.push_back(Bind(FileSystemHostPath(host, ch.file_system->file_system_id, ch.file_system->directory_path),
                         "/opt/ml/input/data/" + ch.name, ch.file_system->read_only));
  }
  auto dist = ParseDistribution(spec.hyperparameters);
  if (!image && !layout.launcher.empty() && dist.ok() && dist->kind != Distribution::Kind::kNone) {
    if (layout.opt_ml_mount_point) steps.push_back(Tmpfs(kLauncherDir));  // else /opt is a tmpfs already
    steps.push_back(Bind(layout.launcher, kLauncherPath, true));
  }
  steps.push_back(Arg("--hostname"));
  steps.push_back(Arg("algo-" + std::to_string(layout.n)));
  steps.push_back(Arg("--chdir"));
  steps.push_back(Arg(image ? layout.working_dir : "/opt/ml/code"));
  return steps;
}

std::vector<std::string> BwrapArgv(const std::vector<SandboxStep>& steps) {
  std::vector<std::string> argv;
  for (const SandboxStep& s : steps) {
    switch (s.kind) {
      case SandboxStep::Kind::kArg: argv.push_back(s.source); break;
      case SandboxStep::Kind::kDevBind: argv.insert(argv.end(), {"--dev-bind", s.source, s.dest.empty() ? s.source : s.dest}); break;
      case SandboxStep::Kind::kTmpfs: argv.insert(argv.end(), {"--tmpfs", s.dest}); break;
      case SandboxStep::Kind::kBind: argv.insert(argv.end(), {s.read_only ? "--ro-bind" : "--bind", s.source, s.dest}); break;
    }
  }
  return argv;
}

Status ApplySandboxSteps(const std::vector<SandboxStep>& steps, Sandbox* sb) {
  for (const SandboxStep& s : steps) {
    switch (s.kind) {
      case SandboxStep::Kind::kArg: sb->Arg(s.source); break;
      case SandboxStep::Kind::kDevBind: sb->DeviceBind(s.source, s.dest.empty() ? s.source : s.dest); break;
      case SandboxStep::Kind::kTmpfs: sb->Tmpfs(s.dest); break;
      case SandboxStep::Kind::kBind: TY_RETURN_IF_ERROR(sb->Bind(s.source, s.dest, s.read_only)); break;
    }
  }
  return Status::Ok();
}

}  // namespace ty::exec::local
