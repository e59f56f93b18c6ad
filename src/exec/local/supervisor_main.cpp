// trainyard-supervisor DIR: the supervisor as a small binary of its own, so that starting an
// attempt does not load the whole server (`trainyard supervise DIR` does the same thing). Its
// `launch` and `rsh` modes are the distributed launchers an instance runs (exec/local/launcher.h).
#include <cstdio>
#include <string>
#include <vector>

#include "exec/local/launcher.h"
#include "exec/local/supervisor.h"

int main(int argc, char** argv) {
  if (argc >= 2 && (std::string(argv[1]) == "launch" || std::string(argv[1]) == "rsh"))
    return ty::exec::local::RunLauncher(std::vector<std::string>(argv + 1, argv + argc));
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("usage: trainyard-supervisor ATTEMPT_DIR\n(started by the trainyard server; see docs/design/attempt-spec.md)\n\n%s",
                ty::exec::local::LauncherUsage());
    return 0;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: trainyard-supervisor ATTEMPT_DIR\n(started by the trainyard server; see docs/design/attempt-spec.md)\n");
    return 2;
  }
  return ty::exec::RunSupervisor(argv[1]);
}
