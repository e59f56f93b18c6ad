#include "exec/distribution.h"

#include <cctype>
#include <nlohmann/json.hpp>

namespace ty::exec {

namespace {

// A hyperparameter's value as the SDK sends it: JSON text ("true", "2", "\"-x A\""), else the
// bare string a hand-written request gives.
nlohmann::json Decode(const std::string& v) {
  nlohmann::json j = nlohmann::json::parse(v, nullptr, false);
  return j.is_discarded() ? nlohmann::json(v) : j;
}

// true/false, as a JSON boolean or the strings "true"/"false" (any case).
StatusOr<bool> Flag(const std::map<std::string, std::string>& hps, const std::string& name) {
  auto it = hps.find(name);
  if (it == hps.end()) return false;
  nlohmann::json j = Decode(it->second);
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (s == "true") return true;
    if (s == "false") return false;
  }
  return InvalidArgument("HyperParameters." + name + " must be true or false, not " + it->second);
}

}  // namespace

StatusOr<Distribution> ParseDistribution(const std::map<std::string, std::string>& hps) {
  Distribution d;
  auto torch = Flag(hps, "sagemaker_torch_distributed_enabled");
  if (!torch.ok()) return torch.status();
  auto smddp = Flag(hps, "sagemaker_distributed_dataparallel_enabled");
  if (!smddp.ok()) return smddp.status();
  auto mpi = Flag(hps, "sagemaker_mpi_enabled");
  if (!mpi.ok()) return mpi.status();
  if ((*torch || *smddp) && *mpi)
    return InvalidArgument("HyperParameters: sagemaker_mpi_enabled cannot be combined with " +
                           std::string(*torch ? "sagemaker_torch_distributed_enabled" : "sagemaker_distributed_dataparallel_enabled") +
                           "; an estimator's distribution chooses one launcher");
  if (*torch || *smddp) d.kind = Distribution::Kind::kTorch;
  if (*mpi) d.kind = Distribution::Kind::kMpi;
  if (auto it = hps.find("sagemaker_mpi_num_of_processes_per_host"); it != hps.end()) {
    nlohmann::json j = Decode(it->second);
    if (j.is_string()) j = Decode(j.get<std::string>());
    if (!j.is_number_integer() || j.get<int64_t>() < 1 || j.get<int64_t>() > kMaxProcessesPerHost)
      return InvalidArgument("HyperParameters.sagemaker_mpi_num_of_processes_per_host must be an integer from 1 to " +
                             std::to_string(kMaxProcessesPerHost) + ", not " + it->second);
    d.processes_per_host = static_cast<int>(j.get<int64_t>());
  }
  if (auto it = hps.find("sagemaker_mpi_custom_mpi_options"); it != hps.end()) {
    nlohmann::json j = Decode(it->second);
    if (!j.is_string())
      return InvalidArgument("HyperParameters.sagemaker_mpi_custom_mpi_options must be a string of mpirun options");
    const std::string s = j.get<std::string>();
    if (s.size() > kMaxMpiOptionsLength)
      return InvalidArgument("HyperParameters.sagemaker_mpi_custom_mpi_options must be at most " +
                             std::to_string(kMaxMpiOptionsLength) + " characters");
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      size_t start = i;
      while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (i > start) d.custom_mpi_options.push_back(s.substr(start, i - start));
    }
  }
  return d;
}

}  // namespace ty::exec
