// trainyard-supervisor DIR: the supervisor as a small binary of its own, so that starting an
// attempt does not load the whole server (`trainyard supervise DIR` does the same thing). Its
// `launch` and `rsh` modes are the distributed launchers an instance runs (exec/local/launcher.h).
// trainyard-supervisor --instance N DIR: on Slurm, instance N of the attempt on this node.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "exec/local/allocation_holder.h"
#include "exec/local/launcher.h"
#include "exec/local/supervisor.h"

namespace {
constexpr const char* kUsage =
    "usage: trainyard-supervisor ATTEMPT_DIR\n"
    "       trainyard-supervisor --instance N ATTEMPT_DIR   (on a Slurm node: instance N of the attempt)\n"
    "       trainyard-supervisor --hold POOL_DIR ATTEMPT_DIR (on Slurm: keep a warm pool's allocation)\n"
    "       trainyard-supervisor --held DIR ATTEMPTS_DIR IDLE_SECONDS\n"
    "                                                 (on Slurm: keep an allocation held for trainyard)\n"
    "(started by the trainyard server; see docs/design/attempt-spec.md and docs/slurm.md)\n";
}

int main(int argc, char** argv) {
  if (argc >= 2 && (std::string(argv[1]) == "launch" || std::string(argv[1]) == "rsh"))
    return ty::exec::local::RunLauncher(std::vector<std::string>(argv + 1, argv + argc));
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("%s\n%s", kUsage, ty::exec::local::LauncherUsage());
    return 0;
  }
  if (argc == 4 && std::string(argv[1]) == "--instance") {
    int n = std::atoi(argv[2]);
    if (n < 2) {
      std::fprintf(stderr, "%s", kUsage);
      return 2;
    }
    return ty::exec::RunInstanceAgent(argv[3], n);
  }
  if (argc == 4 && std::string(argv[1]) == "--hold") {
    // A warm pool's allocation, after its first attempt: kept up to the longest keep-alive
    // (KeepAlivePeriodInSeconds is at most 3600) and a margin.
    return ty::exec::RunAllocationHolder(argv[2], std::filesystem::path(argv[3]).lexically_normal().parent_path(),
                                         (3600 + 120) * 1000);
  }
  if (argc == 5 && std::string(argv[1]) == "--held") {
    char* end = nullptr;
    long long idle = std::strtoll(argv[4], &end, 10);
    if (!end || *end || idle < 1) {
      std::fprintf(stderr, "%s", kUsage);
      return 2;
    }
    return ty::exec::RunAllocationHolder(argv[2], argv[3], idle * 1000);
  }
  if (argc != 2) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  return ty::exec::RunSupervisor(argv[1]);
}
