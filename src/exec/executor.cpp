#include "exec/executor.h"

namespace ty::exec {

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kPreparing: return "Preparing";
    case Phase::kTraining: return "Training";
    case Phase::kUploading: return "Uploading";
    case Phase::kExited: return "Exited";
    case Phase::kLost: return "Lost";
    case Phase::kCheckpointed: return "Checkpointed";
  }
  return "?";
}

}  // namespace ty::exec
