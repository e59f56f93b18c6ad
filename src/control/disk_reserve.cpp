// The data dir's disk reserve ([server] data_dir_reserve_mib, docs/configuration.md).
//
// Jobs write their scratch (/opt/ml) under <data_dir>/attempts, on the file system that also
// holds the store. A job that fills it must not take the store with it: once free space falls
// under the reserve, the server frees what it can itself (finished attempts' workspaces), holds
// back every start, and fails the running job that uses most of the data dir.
#include <spdlog/spdlog.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>

#include "control/controller.h"
#include "control/turn.h"
#include "exec/executor.h"

namespace ty::control {

namespace fs = std::filesystem;

namespace {

// Free space for the server's user; -1 when it cannot be read.
int64_t FreeBytes(const std::string& dir) {
  struct statvfs v {};
  if (statvfs(dir.c_str(), &v) != 0) return -1;
  return static_cast<int64_t>(v.f_bavail) * static_cast<int64_t>(v.f_frsize);
}

// Bytes allocated under dir (links not followed). Only walked while the disk is short.
int64_t UsedBytes(const fs::path& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) total += static_cast<int64_t>(st.st_blocks) * 512;
  }
  return total;
}

// Empties every regular file under the directory `dfd` (which it closes), without following a
// link anywhere: the walk goes by descriptors (openat with O_NOFOLLOW), so a job that swaps a
// directory for a link while this runs cannot point it outside its tree. Files with more than
// one link are left alone (their data is not only the job's). Returns the bytes freed.
int64_t TruncateTree(int dfd, int depth) {
  DIR* d = fdopendir(dfd);
  if (!d) {
    ::close(dfd);
    return 0;
  }
  int64_t freed = 0;
  while (dirent* e = readdir(d)) {
    const std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    struct stat st {};
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode) && depth < 64) {
      int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) freed += TruncateTree(sub, depth + 1);
    } else if (S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_size > 0) {
      int fd = openat(dirfd(d), e->d_name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      if (fd < 0) continue;
      struct stat again {};
      if (fstat(fd, &again) == 0 && S_ISREG(again.st_mode) && again.st_nlink == 1 && ftruncate(fd, 0) == 0)
        freed += static_cast<int64_t>(again.st_blocks) * 512;
      ::close(fd);
    }
  }
  closedir(d);
  return freed;
}

std::string Mib(int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

std::string Controller::DiskReserveReason() const {
  // The same text for as long as the disk stays short (jobs record it once, not per check).
  return "the data dir's file system has less free space than its reserve of " +
         std::to_string(config_.data_dir_reserve_mib) +
         " MiB ([server] data_dir_reserve_mib): no job starts until space is freed";
}

size_t Controller::ReclaimFinishedScratch() {
  size_t n = 0;
  for (const auto& [name, tj] : state_.training_jobs) {
    if (IsLive(tj.status) || scratch_reclaimed_.count(name)) continue;
    executor_->Cleanup(name);
    scratch_reclaimed_.insert(name);
    ++n;
  }
  return n;
}

int64_t Controller::MeasureDiskFree() const {
  return config_.data_dir_reserve_mib > 0 ? FreeBytes(data_dir_) : -1;
}

void Controller::CheckDiskReserve(Turn& t, int64_t free_bytes) {
  if (config_.data_dir_reserve_mib <= 0) return;
  const int64_t reserve = config_.data_dir_reserve_mib << 20;
  disk_free_bytes_ = free_bytes;
  if (disk_free_bytes_ < 0) return;
  // Only while the disk is short: what the reclaim freed is measured again here, under the lock.
  // Space kept only for faster starts (pooled volume images) goes before any job's scratch.
  if (disk_free_bytes_ < reserve && executor_->ReleaseIdleSpace() > 0) disk_free_bytes_ = FreeBytes(data_dir_);
  if (disk_free_bytes_ < reserve && ReclaimFinishedScratch() > 0) disk_free_bytes_ = FreeBytes(data_dir_);
  const bool low = disk_free_bytes_ >= 0 && disk_free_bytes_ < reserve;
  if (low != disk_low_) {
    disk_low_ = low;
    t.reschedule = true;  // wait reasons change, and held-back jobs may start again
    if (low) spdlog::warn("data dir: {} free; {}", Mib(disk_free_bytes_), DiskReserveReason());
    else spdlog::info("data dir: {} free again, above the reserve; jobs start again", Mib(disk_free_bytes_));
  }
  if (!low) return;
  // One job at a time: while one stopped for the reserve is still ending, its space is not yet free.
  const TrainingJob* victim = nullptr;
  int64_t victim_bytes = 0;
  for (const auto& [seq, name] : state_.live_training_jobs) {
    const TrainingJob& tj = state_.training_jobs.at(name);
    if (tj.stop_cause == StopCause::kDiskReserve) return;
    if (!tj.launched || tj.stop_requested) continue;
    const int64_t used = UsedBytes(fs::path(data_dir_) / "attempts" / name);
    if (used > victim_bytes) {
      victim = &tj;
      victim_bytes = used;
    }
  }
  if (!victim) return;
  TrainingJob& tj = state_.training_jobs.at(victim->name);
  tj.failure_reason = "ClientError: the job was stopped because the server's data dir ran short of space: its file "
                      "system had " + Mib(disk_free_bytes_) + " free, under the reserve of " +
                      std::to_string(config_.data_dir_reserve_mib) + " MiB, and this job used the most of it (" +
                      Mib(victim_bytes) + " in its /opt/ml). Write less, or ask for a larger reserve or disk.";
  spdlog::warn("data dir short of space: stopping training job {} ({} used)", tj.name, Mib(victim_bytes));
  // Its scratch is forfeit: emptied now, before anything is committed or the executor is told,
  // because both need space (the store's commit, the executor's stop file) and the job still
  // holds its files open. The job's logs stay.
  const fs::path hosts = fs::path(data_dir_) / "attempts" / tj.name / "hosts";
  int dfd = ::open(hosts.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  const int64_t freed = dfd >= 0 ? TruncateTree(dfd, 0) : 0;
  spdlog::warn("emptied {} of training job {}'s scratch", Mib(freed), tj.name);
  // No grace: every second it runs on it may write more.
  RequestStop(t, tj, StopCause::kDiskReserve, "Stopping: the data dir ran short of space and this job used the most of it.", 0);
}

}  // namespace ty::control
