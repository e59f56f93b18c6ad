#include "exec/local/volume.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

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

}  // namespace

// Allocates size_bytes to the open file fd when the file system keeps space.reserve_bytes free
// after it. The check and the allocation are one step for every supervisor of the host (the lock
// file), so concurrent volumes never count the same free space twice.
Status AllocateWithin(int fd, int64_t size_bytes, const InstanceVolume::Space& space) {
  FileLock lock(space.lock_path);
  Status st;
  struct statvfs sv {};
  if (::fstatvfs(fd, &sv) == 0) {
    const int64_t free_bytes = static_cast<int64_t>(sv.f_bavail) * static_cast<int64_t>(sv.f_frsize);
    if (free_bytes - size_bytes < space.reserve_bytes)
      st = LimitExceeded("a storage volume of " + std::to_string(size_bytes >> 20) + " MiB does not fit: the data dir's " +
                         "file system has " + std::to_string(free_bytes >> 20) + " MiB free and keeps " +
                         std::to_string(space.reserve_bytes >> 20) + " MiB ([server] data_dir_reserve_mib)");
  }
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
  int fd = ::open(image.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("cannot create " + image + ": " + std::strerror(errno));
  Status allocated = AllocateWithin(fd, size_bytes, space);
  if (allocated.ok()) {
    auto made = Template(space.template_dir, size_bytes, space.lock_path, log_path);
    allocated = made.ok() ? CopyWrittenBlocks(*made, fd) : made.status();
  }
  ::close(fd);
  std::unique_ptr<InstanceVolume> v(new InstanceVolume());
  v->image_ = image;
  v->mount_at_ = mount_at;
  if (!allocated.ok()) return allocated;  // v removes the image
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
  // The loop device holds the image now: unlinked, its space goes back with the last unmount,
  // even when nobody is left to delete it (a supervisor that was killed).
  ::unlink(image.c_str());
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
  for (auto it = binds_.rbegin(); it != binds_.rend(); ++it) ::umount2(it->c_str(), MNT_DETACH);
  ::umount2(mount_at_.c_str(), MNT_DETACH);  // the loop device clears itself (autoclear)
  ::rmdir(mount_at_.c_str());
  ::unlink(image_.c_str());
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
