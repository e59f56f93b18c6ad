// How an attempt's entry point is launched on each instance, from the hyperparameters the
// SageMaker Python SDK sets for an estimator's `distribution` (docs/distributed.md). Pure: the
// controller checks a request with it, the local executor builds each instance's command from it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace ty::exec {

// The port every instance's torch-distributed rank 0 listens on (MASTER_PORT), as SageMaker's
// training toolkit passes it to torchrun.
inline constexpr int kTorchMasterPort = 7777;
// The port of the remote shell that mpirun on algo-1 reaches the other instances through, and of
// algo-1's presence (a worker whose connection to it ends knows algo-1 is gone).
inline constexpr int kMpiShellPort = 7779;

struct Distribution {
  enum class Kind {
    kNone,   // the entry point runs once per instance
    kTorch,  // sagemaker_torch_distributed_enabled or sagemaker_distributed_dataparallel_enabled
    kMpi,    // sagemaker_mpi_enabled
  };
  Kind kind = Kind::kNone;
  int processes_per_host = 1;                // MPI: sagemaker_mpi_num_of_processes_per_host
  std::vector<std::string> custom_mpi_options;  // MPI: sagemaker_mpi_custom_mpi_options, split at blanks

  bool operator==(const Distribution&) const = default;
};

// The distribution the hyperparameters ask for (values as given: JSON text, or a bare string).
// InvalidArgument naming the hyperparameter and its rule for a value that is not a boolean, a
// process count outside 1..kMaxProcessesPerHost, options over kMaxMpiOptionsLength characters,
// or torch-distributed and MPI both enabled.
inline constexpr int kMaxProcessesPerHost = 256;
inline constexpr size_t kMaxMpiOptionsLength = 4096;
StatusOr<Distribution> ParseDistribution(const std::map<std::string, std::string>& hyperparameters);

}  // namespace ty::exec
