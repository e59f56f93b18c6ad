#include "exec/local/volume.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "exec/file_lock.h"
#include "exec/local/run_command.h"

namespace ty::exec::local {

namespace fs = std::filesystem;

namespace {

// Attaches `image` to a free loop device that frees itself when unmounted; its path, or "".
// *loop_fd holds the device open: closed before the mount, it would be freed at once.
std::string AttachLoop(const std::string& image, int* loop_fd, std::string* error) {
  int ctl = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (ctl < 0) {
    *error = std::string("/dev/loop-control: ") + std::strerror(errno);
    return "";
  }
  int file = ::open(image.c_str(), O_RDWR | O_CLOEXEC);
  std::string device;
  for (int attempt = 0; attempt < 8 && file >= 0 && device.empty(); ++attempt) {
    int n = ::ioctl(ctl, LOOP_CTL_GET_FREE);
    if (n < 0) break;
    std::string path = "/dev/loop" + std::to_string(n);
    int loop = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (loop < 0) continue;
    loop_config config{};
    config.fd = static_cast<uint32_t>(file);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    if (::ioctl(loop, LOOP_CONFIGURE, &config) == 0) {
      device = path;
      *loop_fd = loop;
      break;
    }
    *error = path + ": " + std::strerror(errno);  // EBUSY: another took it first
    ::close(loop);
  }
  if (file < 0) *error = image + ": " + std::strerror(errno);
  if (file >= 0) ::close(file);
  ::close(ctl);
  return device;
}

// True while loop `device` may still read or write the image with inode `ino`: a mount of it is
// left in another namespace, or it could not be asked. Nobody else attaches a volume's image.
bool LoopHolds(const std::string& device, ino_t ino) {
  int fd = ::open(device.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  loop_info64 info{};
  bool held = ::ioctl(fd, LOOP_GET_STATUS64, &info) == 0 ? info.lo_inode == ino : errno != ENXIO;
  ::close(fd);
  return held;
}

int64_t FreeBytes(int fd) {
  struct statvfs sv {};
  if (::fstatvfs(fd, &sv) != 0) return -1;
  return static_cast<int64_t>(sv.f_bavail) * static_cast<int64_t>(sv.f_frsize);
}

// The pooled images under `pool_dir` (<size>/<n>.img), with their allocated bytes.
std::vector<std::pair<fs::path, int64_t>> PooledImages(const std::string& pool_dir) {
  std::vector<std::pair<fs::path, int64_t>> out;
  std::error_code ec;
  for (fs::directory_iterator size(pool_dir, ec), end; !ec && size != end; size.increment(ec)) {
    std::error_code inner;
    for (fs::directory_iterator img(size->path(), inner); !inner && img != end; img.increment(inner)) {
      struct stat sb {};
      if (::lstat(img->path().c_str(), &sb) == 0 && S_ISREG(sb.st_mode))
        out.emplace_back(img->path(), static_cast<int64_t>(sb.st_blocks) * 512);
    }
  }
  return out;
}

// Moves a pooled image of size_bytes to `image`. REQUIRES: the volumes' lock is held.
bool TakeFromPool(const std::string& pool_dir, int64_t size_bytes, const std::string& image) {
  std::error_code ec;
  for (fs::directory_iterator img(pool_dir + "/" + std::to_string(size_bytes), ec), end; !ec && img != end;
       img.increment(ec)) {
    if (img->path().extension() != ".img") continue;
    if (::rename(img->path().c_str(), image.c_str()) != 0) continue;
    struct stat sb {};
    if (::lstat(image.c_str(), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == size_bytes) return true;
    ::unlink(image.c_str());
  }
  return false;
}

}  // namespace

// Allocates size_bytes to the open file fd when the file system keeps space.reserve_bytes free
// after it, first deleting pooled images (of other sizes: there was none of this one) where that
// makes it fit. The check and the allocation are one step for every supervisor of the host (the
// lock file), so concurrent volumes never count the same free space twice.
Status AllocateWithin(int fd, int64_t size_bytes, const InstanceVolume::Space& space) {
  FileLock lock(space.lock_path);
  Status st;
  int64_t free_bytes = FreeBytes(fd);
  if (free_bytes >= 0 && free_bytes - size_bytes < space.reserve_bytes && !space.pool_dir.empty()) {
    for (const auto& [img, bytes] : PooledImages(space.pool_dir)) {
      if (free_bytes - size_bytes >= space.reserve_bytes) break;
      if (::unlink(img.c_str()) == 0) free_bytes = FreeBytes(fd);
    }
  }
  if (free_bytes >= 0 && free_bytes - size_bytes < space.reserve_bytes)
    st = LimitExceeded("a storage volume of " + std::to_string(size_bytes >> 20) + " MiB does not fit: the data dir's " +
                       "file system has " + std::to_string(free_bytes >> 20) + " MiB free and keeps " +
                       std::to_string(space.reserve_bytes >> 20) + " MiB ([server] data_dir_reserve_mib)");
  if (st.ok()) {
    // Allocated, not sparse: the volume's space is the job's for sure, and a host disk that fills
    // up meanwhile can never turn the job's writes into I/O errors of the loop device.
    int err = ::posix_fallocate(fd, 0, size_bytes);
    if (err != 0) st = Unavailable("cannot allocate " + std::to_string(size_bytes) + " bytes: " + std::strerror(err));
  }
  return st;
}

// The file system of every volume of size_bytes: made once per size by mkfs.ext4 into a sparse
// file under `dir` (holding the lock file meanwhile, so it is made once), then kept. A new
// volume is a copy of its written blocks (a few MiB) into an allocated image, whose other blocks
// read as zeros, as they do right after mkfs: no mkfs process per start.
StatusOr<std::string> Template(const std::string& dir, int64_t size_bytes, const std::string& lock_path,
                               const std::string& log_path) {
  const std::string path = dir + "/" + std::to_string(size_bytes) + ".ext4";
  if (::access(path.c_str(), R_OK) == 0) return path;
  FileLock lock(lock_path);
  if (::access(path.c_str(), R_OK) == 0) return path;  // made while this one waited
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const bool sized = fd >= 0 && ::ftruncate(fd, size_bytes) == 0;
  if (fd >= 0) ::close(fd);
  // No reserved blocks (the job may use all of it). nodiscard: a discard would punch holes
  // in the image it is run on; lazy inode tables and journal: they read as zeros in a copy.
  if (!sized || RunCommand({"mkfs.ext4", "-q", "-F", "-m", "0", "-E",
                            "lazy_itable_init=1,lazy_journal_init=1,nodiscard", tmp}, log_path) != 0 ||
      ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Unavailable("mkfs.ext4 failed for a volume of " + std::to_string(size_bytes) + " bytes (see " + log_path + ")");
  }
  return path;
}

// Copies the written extents of `from` into `to` (same size, allocated): SEEK_DATA/SEEK_HOLE, so
// only the file system's metadata moves.
Status CopyWrittenBlocks(const std::string& from, int to) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Internal("cannot open " + from + ": " + std::strerror(errno));
  Status st;
  off_t end = ::lseek(in, 0, SEEK_END);
  for (off_t data = ::lseek(in, 0, SEEK_DATA); st.ok() && data >= 0 && data < end;) {
    off_t hole = ::lseek(in, data, SEEK_HOLE);
    if (hole < 0) hole = end;
    loff_t src = data, dst = data;
    while (src < hole) {
      ssize_t n = ::copy_file_range(in, &src, to, &dst, static_cast<size_t>(hole - src), 0);
      if (n <= 0) {
        st = Internal("cannot copy the volume's file system: " + std::string(n < 0 ? std::strerror(errno) : "short copy"));
        break;
      }
    }
    data = ::lseek(in, hole, SEEK_DATA);
  }
  ::close(in);
  return st;
}

StatusOr<std::unique_ptr<InstanceVolume>> InstanceVolume::Create(const std::string& image, const std::string& mount_at,
                                                                 int64_t size_bytes, const Space& space,
                                                                 const std::string& log_path) {
  if (::geteuid() != 0) return Unavailable("storage volumes need root (loop devices)");
  if (::access("/dev/loop-control", W_OK) != 0) return Unavailable("no /dev/loop-control");
  std::error_code ec;
  fs::create_directories(fs::path(image).parent_path(), ec);
  fs::create_directories(mount_at, ec);
  std::unique_ptr<InstanceVolume> v(new InstanceVolume());
  v->image_ = image;
  v->mount_at_ = mount_at;
  v->size_bytes_ = size_bytes;
  v->space_ = space;
  auto made = Template(space.template_dir, size_bytes, space.lock_path, log_path);
  if (!made.ok()) return made.status();
  v->template_ = *made;
  if (!space.pool_dir.empty()) {
    FileLock lock(space.lock_path);
    v->reused_ = TakeFromPool(space.pool_dir, size_bytes, image);
  }
  if (!v->reused_) {
    int fd = ::open(image.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Internal("cannot create " + image + ": " + std::strerror(errno));
    Status allocated = AllocateWithin(fd, size_bytes, space);
    if (allocated.ok()) allocated = CopyWrittenBlocks(v->template_, fd);
    ::close(fd);
    if (!allocated.ok()) return allocated;  // v removes the image
  }
  struct stat sb {};
  if (::stat(image.c_str(), &sb) != 0) return Internal("cannot stat " + image + ": " + std::strerror(errno));
  v->image_ino_ = sb.st_ino;
  std::string error;
  int loop = -1;
  std::string device = AttachLoop(image, &loop, &error);
  if (device.empty()) return Unavailable("no loop device: " + error);
  // noinit_itable: the kernel would zero the inode tables in the background, which the image's
  // unwritten blocks already read as.
  const bool mounted = ::mount(device.c_str(), mount_at.c_str(), "ext4", MS_NOSUID | MS_NODEV, "noinit_itable") == 0;
  std::string why = std::strerror(errno);
  ::close(loop);  // unmounted, the device now clears itself
  if (!mounted) return Unavailable("cannot mount " + device + " at " + mount_at + ": " + why);
  v->loop_device_ = device;
  // Without a pool the loop device holds the image alone: unlinked, its space goes back with the
  // last unmount, even when nobody is left to delete it (a supervisor that was killed). A pooled
  // one stays, for Remove to wipe; the server deletes it if the supervisor is killed.
  if (space.pool_dir.empty()) ::unlink(image.c_str());
  ::rmdir((mount_at + "/lost+found").c_str());
  return v;
}

InstanceVolume::~InstanceVolume() { Remove(); }

Status InstanceVolume::BindInto(const std::string& sub, const std::string& at) {
  std::error_code ec;
  fs::create_directories(mount_at_ + "/" + sub, ec);
  fs::create_directories(at, ec);
  if (::mount((mount_at_ + "/" + sub).c_str(), at.c_str(), nullptr, MS_BIND, nullptr) != 0)
    return Internal("cannot mount the volume's " + sub + " at " + at + ": " + std::strerror(errno));
  binds_.push_back(at);
  return Status::Ok();
}

bool InstanceVolume::Full() const {
  struct statvfs sv {};
  if (::statvfs(mount_at_.c_str(), &sv) != 0) return false;
  const uint64_t total = static_cast<uint64_t>(sv.f_blocks) * sv.f_frsize;
  const uint64_t avail = static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
  return avail < std::max<uint64_t>(4 << 20, total / 200);  // under 4 MiB or 0.5% left
}

void InstanceVolume::Remove() {
  if (removed_) return;
  removed_ = true;
  // At once when nothing holds a file on it (its instances' processes are gone by now), else
  // lazily; then the file system may still write to the image, which is not reused.
  bool unmounted = true;
  auto unmount = [&unmounted](const std::string& at) {
    if (::umount2(at.c_str(), 0) == 0) return;
    unmounted = unmounted && errno == EINVAL;  // EINVAL: not mounted
    ::umount2(at.c_str(), MNT_DETACH);
  };
  for (auto it = binds_.rbegin(); it != binds_.rend(); ++it) unmount(*it);
  if (!loop_device_.empty()) unmount(mount_at_);  // the loop device clears itself (autoclear)
  ::rmdir(mount_at_.c_str());
  if (!ReturnToPool(unmounted)) ::unlink(image_.c_str());
}

bool InstanceVolume::ReturnToPool(bool unmounted) {
  if (space_.pool_dir.empty() || loop_device_.empty() || !unmounted || LoopHolds(loop_device_, image_ino_)) return false;
  int fd = ::open(image_.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  // ZERO_RANGE keeps the blocks allocated (no free, no discard, no allocation at the next start)
  // and makes every one read as zeros; the template's blocks are then written over them.
  struct stat sb {};
  const bool wiped = ::fstat(fd, &sb) == 0 && sb.st_ino == image_ino_ && sb.st_size == size_bytes_ &&
                     ::fallocate(fd, FALLOC_FL_ZERO_RANGE, 0, size_bytes_) == 0 && CopyWrittenBlocks(template_, fd).ok();
  const int64_t free_bytes = FreeBytes(fd);
  ::close(fd);
  if (!wiped || free_bytes < 0) return false;
  FileLock lock(space_.lock_path);
  int64_t pooled = 0;
  for (const auto& [img, bytes] : PooledImages(space_.pool_dir)) pooled += bytes;
  // Never more in the pool than the free space it leaves above the reserve.
  if (pooled + size_bytes_ > free_bytes - space_.reserve_bytes) return false;
  const std::string dir = space_.pool_dir + "/" + std::to_string(size_bytes_);
  std::error_code ec;
  fs::create_directories(dir, ec);
  return ::rename(image_.c_str(), (dir + "/" + std::to_string(image_ino_) + ".img").c_str()) == 0;
}

std::string VolumePoolDir(const std::string& run_dir) {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(in, boot);
  if (boot.empty()) return "";
  return run_dir + "/volume-pool/" + boot;
}

int64_t DiscardVolumePool(const std::string& run_dir, const std::string& lock_path, bool all) {
  const std::string current = VolumePoolDir(run_dir);
  FileLock lock(lock_path);
  int64_t freed = 0;
  std::vector<fs::path> boots;
  std::error_code ec;
  for (fs::directory_iterator boot(run_dir + "/volume-pool", ec), end; !ec && boot != end; boot.increment(ec))
    boots.push_back(boot->path());
  for (const auto& boot : boots) {
    if (boot.string() == current && !all) continue;
    for (const auto& [img, bytes] : PooledImages(boot.string()))
      if (::unlink(img.c_str()) == 0) freed += bytes;
    if (boot.string() != current) fs::remove_all(boot, ec);
  }
  return freed;
}

void RemoveLeftoverImages(const std::string& attempt_dir) {
  std::error_code ec;
  for (fs::directory_iterator d(attempt_dir + "/volumes", ec), end; !ec && d != end; d.increment(ec))
    if (d->path().extension() == ".img") fs::remove(d->path(), ec);
}

void SweepOrphanVolumes(const std::string& attempts_root, const std::function<bool(const std::string&)>& alive) {
  std::error_code ec;
  fs::path root = fs::weakly_canonical(fs::absolute(attempts_root), ec);
  if (ec) return;
  std::vector<std::pair<std::string, std::string>> mounts;  // (mount point, attempt), innermost last
  std::ifstream mi("/proc/self/mountinfo");
  const std::string prefix = root.string() + "/";
  for (std::string line; std::getline(mi, line);) {
    std::istringstream in(line);
    std::string id, parent, dev, fsroot, point;
    if (!(in >> id >> parent >> dev >> fsroot >> point)) continue;
    if (point.rfind(prefix, 0) != 0) continue;
    std::string rest = point.substr(prefix.size());
    mounts.emplace_back(point, rest.substr(0, rest.find('/')));
  }
  for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) {
    if (alive(it->second)) continue;
    ::umount2(it->first.c_str(), MNT_DETACH);
  }
  for (const auto& [point, attempt] : mounts) {
    if (alive(attempt)) continue;
    for (fs::directory_iterator d(root / attempt / "volumes", ec), end; !ec && d != end; d.increment(ec))
      if (d->path().extension() == ".img") fs::remove(d->path(), ec);
  }
}

}  // namespace ty::exec::local
