// The supervisor: one detached process per attempt that owns the attempt's processes.
#pragma once

#include <string>

namespace ty::exec {

// Runs the attempt described by <attempt_dir>/spec.json to completion (see
// docs/design/attempt-spec.md). Entry point of `trainyard supervise <attempt_dir>`.
// Returns the process exit code of the supervisor itself (0 when it recorded an outcome).
int RunSupervisor(const std::string& attempt_dir);

}  // namespace ty::exec
