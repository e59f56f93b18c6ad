// The supervisor: one detached process per attempt that owns the attempt's processes.
#pragma once

#include <string>

namespace ty::exec {

// Runs the attempt described by <attempt_dir>/spec.json to completion (see
// docs/design/attempt-spec.md). Entry point of `trainyard supervise <attempt_dir>`.
// Returns the process exit code of the supervisor itself (0 when it recorded an outcome).
int RunSupervisor(const std::string& attempt_dir);

// On Slurm: instance `instance` (2..N) of the attempt on this node, started by the supervisor
// through srun (`trainyard-supervisor --instance N <attempt_dir>`; docs/slurm.md). Returns the
// instance's exit code (125 when it could not be started).
int RunInstanceAgent(const std::string& attempt_dir, int instance);

}  // namespace ty::exec
