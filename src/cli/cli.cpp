#include <string>
#include <vector>

#include "exec/supervisor.h"

namespace ty::cli {
int Main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() >= 3 && args[1] == "supervise") return ty::exec::RunSupervisor(args[2]);
  return 2;
}
}  // namespace ty::cli
