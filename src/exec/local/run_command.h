// Running a helper program to completion from the supervisor (the setup command, mkfs).
#pragma once

#include <string>
#include <vector>

namespace ty::exec::local {

// Runs argv (searched on PATH) with its stdout and stderr appended to log_path and waits for it.
// Returns its exit status, or -1 when it could not be started or was killed by a signal.
int RunCommand(const std::vector<std::string>& argv, const std::string& log_path);

}  // namespace ty::exec::local
