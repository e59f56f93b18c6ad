// On Slurm: a batch step that keeps its allocation for trainyard and runs, one after another, the
// supervisors of the attempts the executor hands it (docs/slurm.md, "Held allocations" and
// "Warm pools on Slurm").
//
// The holder's directory is its only channel with the server, which may be on another machine:
//   <dir>/next      written by the server: the directory of the attempt to run here next
//   <dir>/running   written by the holder while an attempt's supervisor runs (its directory)
// While an attempt is handed over or runs, one of the two exists (the holder writes `running`
// before it removes `next`), so a restarted server reads whether the allocation is busy from them.
// The holder ends, and Slurm takes the allocation back, when the directory goes (the server gives
// the allocation back) or when it has been idle for max_idle_ms (the server is gone).
#pragma once

#include <cstdint>
#include <string>

namespace ty::exec {

// Runs until the holder's directory is removed or it has been idle for max_idle_ms. Only an
// attempt directory directly inside attempts_root is run. Returns the process's exit code.
int RunAllocationHolder(const std::string& dir, const std::string& attempts_root, int64_t max_idle_ms);

}  // namespace ty::exec
