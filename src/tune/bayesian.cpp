#include "tune/strategies.h"

namespace ty::tune::internal {

StatusOr<std::unique_ptr<Search>> CreateBayesian(const SearchConfig& config, std::vector<Trial> warm_start) {
  return InvalidArgument("HyperParameterTuningJobConfig.Strategy: Bayesian is not supported yet");
}

}  // namespace ty::tune::internal
