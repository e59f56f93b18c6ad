// An instance's storage volume (VolumeSizeInGB), when the supervisor is root and loop devices
// work: an ext4 image in the attempt directory (its space allocated up front), loop-mounted
// nosuid,nodev. Everything the
// job can write (its /opt/ml tree, /tmp, /var/tmp, $HOME) lives on it, so the kernel counts the
// bytes and a job that writes more gets ENOSPC instead of filling the host's disk.
// Not thread-safe; owned by the supervisor's main thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"

namespace ty::exec::local {

class InstanceVolume {
 public:
  // Where a volume's space comes from: `lock_path`, a file every supervisor of the host locks
  // while it checks and allocates, so that two volumes never count the same free space; and the
  // free space the file system keeps (reserve_bytes: nothing is allocated into it).
  struct Space {
    std::string lock_path;
    int64_t reserve_bytes = 0;
    // Where each size's file system is made once and kept (a sparse file of a few MiB each).
    std::string template_dir;
  };
  // Creates `image` (size_bytes, allocated), puts an ext4 file system on it (a copy of the one
  // made for its size, in space.template_dir) and mounts it at `mount_at`. LimitExceeded: the file system has not size_bytes free above the reserve (the
  // message says how much it has). Unavailable: not root, or no loop device could be had.
  static StatusOr<std::unique_ptr<InstanceVolume>> Create(const std::string& image, const std::string& mount_at,
                                                          int64_t size_bytes, const Space& space,
                                                          const std::string& log_path);
  ~InstanceVolume();
  InstanceVolume(const InstanceVolume&) = delete;
  InstanceVolume& operator=(const InstanceVolume&) = delete;

  const std::string& path() const { return mount_at_; }
  // Also mounts dir `sub` of the volume at `at` (a bind mount); undone by Remove.
  Status BindInto(const std::string& sub, const std::string& at);
  // True when (almost) no space is left on it.
  bool Full() const;
  // Unmounts everything (lazily: a process still holding a file cannot block it) and deletes
  // the image. Also done by the destructor.
  void Remove();

 private:
  InstanceVolume() = default;
  std::string image_, mount_at_;
  std::vector<std::string> binds_;
  bool removed_ = false;
};

// Unmounts volumes left under <attempts_root>/<attempt>/ by supervisors that died
// (`alive(attempt)` false) and deletes their images.
void SweepOrphanVolumes(const std::string& attempts_root, const std::function<bool(const std::string&)>& alive);

}  // namespace ty::exec::local
