// The start overhead of a cached OCI image (docs/images.md): the same trivial command (`true`)
// started in an instance's sandbox exactly as the supervisor builds it (SandboxSteps, Sandbox,
// the job user, the seccomp filter), once with the host's software as `/` and once with a cached
// image's root file system, each timed from building the sandbox (for the image: resolving the
// reference in the cache first) to the command's exit. Median and p90 of --runs starts each,
// interleaved. Run by bench/image_start.py, which builds the image offline.
//
//   image_start_bench --cache DIR --image oci:/path/layout:tag [--runs N]
#include <CLI/CLI.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "exec/attempt_spec.h"
#include "exec/image/cache.h"
#include "exec/image/command.h"
#include "exec/image/reference.h"
#include "exec/local/host_settings.h"
#include "exec/local/sandbox.h"
#include "exec/local/sandbox_plan.h"

namespace fs = std::filesystem;
using namespace ty;
using namespace ty::exec;

namespace {

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Dirs {
  std::string scratch, opt_ml, hosts, workspace;
};

// One start: builds the sandbox and runs `true` in it as the job user; the milliseconds it took.
double StartOnce(const AttemptSpec& spec, const local::HostSettings& host, const Dirs& d, const local::JobUser& user,
                 const image::ImageCache* cache, const image::ImageReference* ref) {
  const double t0 = NowMs();
  local::SandboxLayout layout;
  layout.scratch = d.scratch;
  layout.job_home = "/home/job";
  layout.workspace = d.workspace;
  layout.opt_ml = d.opt_ml;
  layout.hosts_file = d.hosts;
  layout.is_directory = [](const std::string& p) {
    std::error_code ec;
    return fs::is_directory(p, ec);
  };
  std::vector<std::string> command = {"true"};
  std::map<std::string, std::string> env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
  if (cache) {
    auto img = cache->Lookup(*ref);
    if (!img.ok()) {
      std::fprintf(stderr, "lookup: %s\n", img.status().message().c_str());
      std::exit(1);
    }
    layout.image_rootfs = img->rootfs;
    layout.working_dir = image::ImageWorkingDir(img->config);
    env = image::ImageEnvironment(img->config);
    command = *image::ImageArgv(img->config, ImageCommand::kCmd, {"true"});
  }
  local::Sandbox sb(user.switch_user);
  Status st = local::ApplySandboxSteps(local::SandboxSteps(spec, host, layout), &sb);
  auto argv = st.ok() ? sb.Command(command) : StatusOr<std::vector<std::string>>(st);
  if (!argv.ok()) {
    std::fprintf(stderr, "sandbox: %s\n", argv.status().message().c_str());
    std::exit(1);
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> args, envp;
  for (auto& a : *argv) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!sb.PrepareChild(user)) ::_exit(126);
    ::execvpe(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "the sandboxed command failed (status %d)\n", status);
    std::exit(1);
  }
  return NowMs() - t0;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string cache_dir, image_ref;
  int runs = 50;
  CLI::App app{"The start overhead of a cached OCI image against the host's software: the same `true` started in "
               "an instance's sandbox as the supervisor builds it, median and p90 of each (bench/image_start.py "
               "builds the image and runs this)."};
  app.add_option("--cache", cache_dir, "the image cache directory (made when missing)")->required();
  app.add_option("--image", image_ref, "the image reference, e.g. oci:/path/layout:tag")->required();
  app.add_option("--runs", runs, "starts of each kind, interleaved")->check(CLI::Range(3, 100000));
  CLI11_PARSE(app, argc, argv);
  auto ref = image::ParseImageReference(image_ref);
  if (!ref.ok()) {
    std::fprintf(stderr, "%s\n", ref.status().message().c_str());
    return 2;
  }
  image::ImageCache cache(cache_dir);
  double t0 = NowMs();
  auto first = cache.Get(*ref);
  if (!first.ok()) {
    std::fprintf(stderr, "fetch: %s\n", first.status().message().c_str());
    return 1;
  }
  const double fetch_ms = NowMs() - t0;

  auto user = local::ResolveJobUser("nobody");
  if (!user.ok()) return 1;
  const std::string base = cache_dir + "/bench-instance";
  Dirs d{base + "/scratch", base + "/opt_ml", base + "/hosts", base + "/ws"};
  for (const std::string& p : {d.scratch + "/tmp", d.scratch + "/home", d.opt_ml + "/code", d.workspace + "/code"})
    fs::create_directories(p);
  std::ofstream(d.hosts) << "127.0.0.1 localhost algo-1\n";
  // As the supervisor does: what the job (and bwrap, making mount points) writes is the job user's.
  for (const std::string& p : {d.scratch, d.opt_ml, d.workspace})
    if (Status st = local::GiveToJobUser(p, *user); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 1;
    }
  fs::create_directories("/opt/ml");
  AttemptSpec spec;
  spec.attempt_id = "bench";
  spec.instance_type = "ml.m5.large";
  local::HostSettings host;
  host.sandbox = "bwrap";

  std::vector<double> host_ms, image_ms;
  for (int i = 0; i < runs; ++i) {
    host_ms.push_back(StartOnce(spec, host, d, *user, nullptr, nullptr));
    image_ms.push_back(StartOnce(spec, host, d, *user, &cache, &*ref));
  }
  fs::remove_all(base);
  std::printf("{\"runs\": %d, \"first_fetch_ms\": %.1f, \"copied\": %s, \"unpacked\": %s,\n"
              " \"host_median_ms\": %.2f, \"host_p90_ms\": %.2f,\n"
              " \"image_median_ms\": %.2f, \"image_p90_ms\": %.2f,\n"
              " \"overhead_median_ms\": %.2f}\n",
              runs, fetch_ms, first->copied ? "true" : "false", first->unpacked ? "true" : "false",
              Percentile(host_ms, 0.5), Percentile(host_ms, 0.9), Percentile(image_ms, 0.5), Percentile(image_ms, 0.9),
              Percentile(image_ms, 0.5) - Percentile(host_ms, 0.5));
  return 0;
}
