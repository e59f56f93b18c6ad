// The host's GPUs as an inventory (docs/gpus.md): which indices are in service, and which
// running instance holds each. The local executor gives every instance of an attempt its type's
// number of GPUs, specific indices that no other running instance holds; the supervisor shows
// the instance only those (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, the device nodes in its
// sandbox and its cgroup's device list).
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace ty::exec::local {

// The indices N of `<device_dir>/nvidia<N>` (character devices, or any file when `any_file`: a
// test's stand-in nodes), limited to those `cuda_visible` names when it names indices, less
// `out_of_service`; ascending.
std::vector<int> DiscoverGpus(const std::string& device_dir, const std::optional<std::string>& cuda_visible,
                              const std::set<int>& out_of_service, bool any_file = false);

// The GPUs the executor placed for each instance, from the text of an attempt's spec.json (its
// "gpus": one list of indices per instance); nullopt when it placed none (no inventory on the
// host, or the Slurm executor), and then the instance sees the GPUs the supervisor itself sees.
std::optional<std::vector<std::vector<int>>> PlacedGpus(const std::string& spec_text);

// The device nodes an instance with GPUs `indices` needs: `<device_dir>/nvidia<N>` for each, plus
// the control nodes every CUDA process opens (nvidiactl, nvidia-uvm*, nvidia-modeset) found
// there; sorted. None for no indices.
std::vector<std::string> GpuDeviceNodes(const std::string& device_dir, const std::vector<int>& indices);

// "0,2": the indices as CUDA_VISIBLE_DEVICES lists them.
std::string GpuList(const std::vector<int>& indices);

// Thread-safe.
class GpuInventory {
 public:
  explicit GpuInventory(std::vector<int> in_service = {});

  bool empty() const { return in_service_.empty(); }
  const std::vector<int>& in_service() const { return in_service_; }

  // `per_instance` GPUs for each of `instances` instances of `attempt`, the lowest free indices
  // first. LimitExceeded, holding nothing, when fewer are free. An attempt that already holds
  // GPUs gets the same ones back.
  StatusOr<std::vector<std::vector<int>>> Allocate(const std::string& attempt, int instances, int per_instance);
  // What a running attempt held before a restart (read from its spec); indices not in service or
  // held by another attempt are left out.
  void Restore(const std::string& attempt, const std::vector<std::vector<int>>& held);
  void Release(const std::string& attempt);
  int free_count() const;

 private:
  const std::vector<int> in_service_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::vector<int>>> held_;  // guarded by mu_
  std::set<int> busy_;                                          // guarded by mu_
};

}  // namespace ty::exec::local
