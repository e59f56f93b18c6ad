// The distributed launchers, run in an instance in place of its entry point (docs/distributed.md):
//   launch torch [--grace-seconds S] -- CMD...     max(1, SM_NUM_GPUS) ranks of CMD, as torchrun
//   launch mpi --processes-per-host P [--mpi-option O]... -- CMD...
//                                                  mpirun on algo-1; the other instances serve
//                                                  as its remote shells
//   rsh HOST CMD...                                the remote shell's client (mpirun's rsh agent)
// Modes of trainyard-supervisor (and of `trainyard`), so that the one small binary the sandbox
// holds read-only at kLauncherPath is all an instance needs, here or on another machine.
#pragma once

#include <string>
#include <vector>

namespace ty::exec::local {

// `args` start with the mode ("launch" or "rsh"). Returns the process's exit code.
int RunLauncher(const std::vector<std::string>& args);

// The help text of the launcher's modes.
const char* LauncherUsage();

}  // namespace ty::exec::local
