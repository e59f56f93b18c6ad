// An instance's storage volume (VolumeSizeInGB), when the supervisor is root and loop devices
// work: an ext4 image in the attempt directory (its space allocated up front), loop-mounted
// nosuid,nodev. Everything the
// job can write (its /opt/ml tree, /tmp, /var/tmp, $HOME) lives on it, so the kernel counts the
// bytes and a job that writes more gets ENOSPC instead of filling the host's disk.
//
// Images are kept for reuse in a pool per size (Space::pool_dir), so that a start neither
// allocates a new image nor frees one (each is a file created, allocated, truncated and
// discarded on the host's file system). Invariants of the pool:
//   1. An image enters the pool only once nothing else holds it (no loop device is attached to
//      it) and after it was wiped: every block reads as zeros again (FALLOC_FL_ZERO_RANGE, which
//      keeps the allocation) and its size's fresh file system is copied in. What one job wrote
//      is never readable in the next one's volume; an image left half-wiped is never in the pool.
//   2. The pool is per boot of the host: a wipe is coherent in the page cache, not necessarily
//      on the disk, so after a crash of the machine the images of earlier boots are deleted.
//   3. Pooled images are used space like any other: a volume that does not fit above the
//      reserve first deletes pooled images of other sizes, the pool never holds more than the
//      free space it leaves above the reserve, and the server empties it first when the disk
//      runs short (DiscardVolumePool).
// Not thread-safe; owned by the supervisor's main thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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
    // Where released images wait for reuse, one folder per size (VolumePoolDir); "": none are
    // kept (each image is deleted once mounted).
    std::string pool_dir;
  };
  // Creates `image` (size_bytes, allocated), puts an ext4 file system on it (a copy of the one
  // made for its size, in space.template_dir) and mounts it at `mount_at`; or takes a wiped image
  // of that size from space.pool_dir instead. With a pool, `image` stays in place while the
  // volume is mounted (its attempt's leftovers, when the supervisor is killed; see
  // RemoveLeftoverImages). LimitExceeded: the file system has not size_bytes free above the
  // reserve (the message says how much it has). Unavailable: not root, or no loop device could
  // be had.
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
  // True when the image came from the pool rather than being allocated for this volume.
  bool reused() const { return reused_; }
  // Unmounts everything (lazily when a process still holds a file: it cannot block it) and puts
  // the image back into the pool, wiped, or deletes it. Also done by the destructor.
  void Remove();

 private:
  InstanceVolume() = default;
  // Wipes the unmounted image and moves it into the pool; false: it was not (the caller deletes it).
  bool ReturnToPool(bool unmounted);

  // Constant after Create.
  std::string image_, mount_at_, loop_device_;
  int64_t size_bytes_ = 0;
  Space space_;
  std::string template_;
  ino_t image_ino_ = 0;
  bool reused_ = false;

  std::vector<std::string> binds_;
  bool removed_ = false;
};

// The pool of this boot of the host under `run_dir` (<run_dir>/volume-pool/<boot id>).
std::string VolumePoolDir(const std::string& run_dir);

// Deletes the pooled images of earlier boots of the host (invariant 2), or with `all` every
// pooled image, under the volumes' lock at `lock_path`. Returns the bytes freed.
int64_t DiscardVolumePool(const std::string& run_dir, const std::string& lock_path, bool all);

// Deletes the images an attempt's supervisor left in `attempt_dir`/volumes when it was killed
// (they may be half-used; they never go back into the pool).
void RemoveLeftoverImages(const std::string& attempt_dir);

// Unmounts volumes left under <attempts_root>/<attempt>/ by supervisors that died
// (`alive(attempt)` false) and deletes their images.
void SweepOrphanVolumes(const std::string& attempts_root, const std::function<bool(const std::string&)>& alive);

}  // namespace ty::exec::local
