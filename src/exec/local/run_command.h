// Running a helper program to completion from the supervisor (the setup command, mkfs).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ty::exec::local {

// The first executable `name` in the directories of `path` (a PATH value, ':'-separated); "" when
// there is none. `name` is used as it is when it holds a '/'.
std::string FindOnPath(const std::string& name, const std::string& path);

// Runs argv (searched on PATH) with its stdout and stderr appended to log_path and waits for it.
// Returns its exit status, or -1 when it could not be started or was killed by a signal.
int RunCommand(const std::vector<std::string>& argv, const std::string& log_path);

// Runs argv (searched on PATH) with `env` added to this process's environment, its stdout
// captured into *out (at most max_bytes; the rest is read and dropped) and its stderr appended
// to *err when given. Returns its exit status, or -1 when it could not be started or was killed
// by a signal. For short queries (Slurm's scontrol, squeue, sbatch).
int CaptureCommand(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
                   std::string* out, std::string* err = nullptr, size_t max_bytes = 16 << 20);

}  // namespace ty::exec::local
