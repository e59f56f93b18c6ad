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

const char* FailureKindName(FailureKind k) {
  switch (k) {
    case FailureKind::kNone: return "None";
    case FailureKind::kAlgorithm: return "Algorithm";
    case FailureKind::kClient: return "Client";
    case FailureKind::kInternal: return "Internal";
    case FailureKind::kCapacity: return "Capacity";
  }
  return "None";
}

FailureKind ParseFailureKind(std::string_view name) {
  for (FailureKind k : {FailureKind::kAlgorithm, FailureKind::kClient, FailureKind::kInternal, FailureKind::kCapacity})
    if (name == FailureKindName(k)) return k;
  return FailureKind::kNone;
}

}  // namespace ty::exec
