#include "tune/strategies.h"

namespace ty::tune::internal {

StatusOr<std::unique_ptr<Search>> CreateHyperband(const SearchConfig& config, std::vector<Trial> warm_start) {
  return InvalidArgument("HyperParameterTuningJobConfig.Strategy: Hyperband is not supported yet");
}

}  // namespace ty::tune::internal
