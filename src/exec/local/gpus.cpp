#include "exec/local/gpus.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "exec/local/system_sampler.h"

namespace ty::exec::local {

namespace fs = std::filesystem;

std::vector<int> DiscoverGpus(const std::string& device_dir, const std::optional<std::string>& cuda_visible,
                              const std::set<int>& out_of_service, bool any_file) {
  const auto visible = VisibleGpus(cuda_visible);
  std::vector<int> found;
  std::error_code ec;
  for (fs::directory_iterator it(device_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("nvidia", 0) != 0) continue;
    const std::string rest = name.substr(6);
    if (rest.empty() || rest.size() > 4 || rest.find_first_not_of("0123456789") != std::string::npos) continue;
    struct stat sb {};
    if (::stat(it->path().c_str(), &sb) != 0 || !(S_ISCHR(sb.st_mode) || any_file)) continue;
    const int index = std::stoi(rest);
    if ((visible && !visible->count(index)) || out_of_service.count(index)) continue;
    found.push_back(index);
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::optional<std::vector<std::vector<int>>> PlacedGpus(const std::string& spec_text) {
  const nlohmann::json doc = nlohmann::json::parse(spec_text, nullptr, false);
  if (!doc.is_object()) return std::nullopt;
  auto it = doc.find("gpus");
  if (it == doc.end() || !it->is_array()) return std::nullopt;
  std::vector<std::vector<int>> out;
  for (const auto& set : *it) {
    out.emplace_back();
    if (!set.is_array()) continue;
    for (const auto& i : set)
      if (i.is_number_integer() && i.get<int64_t>() >= 0 && i.get<int64_t>() <= 1023) out.back().push_back(i.get<int>());
  }
  return out;
}

std::vector<std::string> GpuDeviceNodes(const std::string& device_dir, const std::vector<int>& indices) {
  std::vector<std::string> nodes;
  if (indices.empty()) return nodes;
  for (int g : indices) nodes.push_back(device_dir + "/nvidia" + std::to_string(g));
  std::error_code ec;
  for (fs::directory_iterator it(device_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == "nvidiactl" || name.rfind("nvidia-uvm", 0) == 0 || name == "nvidia-modeset") nodes.push_back(it->path().string());
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

std::string GpuList(const std::vector<int>& indices) {
  std::string s;
  for (int i : indices) s += (s.empty() ? "" : ",") + std::to_string(i);
  return s;
}

GpuInventory::GpuInventory(std::vector<int> in_service) : in_service_([&] {
  std::sort(in_service.begin(), in_service.end());
  in_service.erase(std::unique(in_service.begin(), in_service.end()), in_service.end());
  return in_service;
}()) {}

StatusOr<std::vector<std::vector<int>>> GpuInventory::Allocate(const std::string& attempt, int instances,
                                                               int per_instance) {
  std::lock_guard lock(mu_);
  if (auto it = held_.find(attempt); it != held_.end()) return it->second;
  std::vector<int> free;
  for (int i : in_service_)
    if (!busy_.count(i)) free.push_back(i);
  const int want = std::max(0, instances) * std::max(0, per_instance);
  if (static_cast<int>(free.size()) < want)
    return LimitExceeded(std::to_string(instances) + " instance(s) of " + std::to_string(per_instance) +
                             " GPU(s) need " + std::to_string(want) + " GPUs; " + std::to_string(free.size()) + " of the host's " +
                             std::to_string(in_service_.size()) + " are free");
  std::vector<std::vector<int>> out(static_cast<size_t>(std::max(0, instances)));
  size_t next = 0;
  for (auto& set : out)
    for (int k = 0; k < per_instance; ++k) {
      set.push_back(free[next++]);
      busy_.insert(set.back());
    }
  held_[attempt] = out;
  return out;
}

void GpuInventory::Restore(const std::string& attempt, const std::vector<std::vector<int>>& held) {
  std::lock_guard lock(mu_);
  if (held_.count(attempt)) return;
  std::vector<std::vector<int>> kept;
  for (const auto& set : held) {
    kept.emplace_back();
    for (int i : set)
      if (std::binary_search(in_service_.begin(), in_service_.end(), i) && busy_.insert(i).second) kept.back().push_back(i);
  }
  held_[attempt] = kept;
}

void GpuInventory::Release(const std::string& attempt) {
  std::lock_guard lock(mu_);
  auto it = held_.find(attempt);
  if (it == held_.end()) return;
  for (const auto& set : it->second)
    for (int i : set) busy_.erase(i);
  held_.erase(it);
}

int GpuInventory::free_count() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(in_service_.size() - busy_.size());
}

}  // namespace ty::exec::local
