#include "objstore/dir_walk.h"

#include <dirent.h>
#include <fcntl.h>
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>  // struct open_how, RESOLVE_* (Linux 5.6)
#define TY_HAVE_OPENAT2 1
#endif
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/object_key.h"
#include "core/strings.h"
#include "objstore/objstore.h"

namespace ty::objstore {

namespace {

std::atomic<bool> g_openat2_disabled{false};

// openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: `rel` is resolved beneath `dirfd`, and
// the call fails (EXDEV, ELOOP) rather than follow a symlink or "..", or leave through an absolute
// path. -1 with errno ENOSYS where the kernel (or a seccomp filter: EPERM) does not offer it.
int Openat2Beneath(int dirfd, const std::string& rel, int flags) {
#if defined(TY_HAVE_OPENAT2) && defined(SYS_openat2)
  if (g_openat2_disabled) {
    errno = ENOSYS;
    return -1;
  }
  struct open_how how {};
  how.flags = static_cast<uint64_t>(flags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(::syscall(SYS_openat2, dirfd, rel.c_str(), &how, sizeof how));
  if (fd < 0 && (errno == EPERM || errno == E2BIG)) errno = ENOSYS;
  return fd;
#else
  (void)dirfd, (void)rel, (void)flags;
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

void DisableOpenat2ForTesting(bool disabled) { g_openat2_disabled = disabled; }

void Fd::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Fd OpenDirBeneath(int base, const std::string& rel, bool create) {
  constexpr int kDirFlags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  if (rel.empty()) return Fd(::openat(base, ".", kDirFlags));
  int fd = Openat2Beneath(base, rel, kDirFlags);
  if (fd >= 0 || (errno != ENOSYS && !(errno == ENOENT && create))) return Fd(fd);
  Fd cur(::openat(base, ".", kDirFlags));
  size_t start = 0;
  while (cur.ok() && start <= rel.size()) {
    size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    std::string seg = rel.substr(start, end - start);
    start = end + 1;
    if (seg.empty() || seg == "." || seg == "..") {  // never from a checked key; refused all the same
      errno = EINVAL;
      return Fd();
    }
    int next = ::openat(cur.get(), seg.c_str(), kDirFlags);
    if (next < 0 && errno == ENOENT && create) {
      if (::mkdirat(cur.get(), seg.c_str(), 0755) != 0 && errno != EEXIST) return Fd();
      next = ::openat(cur.get(), seg.c_str(), kDirFlags);
    }
    // O_PATH | O_NOFOLLOW opens a symlink itself; it must still be a directory.
    struct stat st;
    if (next >= 0 && (::fstat(next, &st) != 0 || !S_ISDIR(st.st_mode))) {
      ::close(next);
      errno = ENOTDIR;
      next = -1;
    }
    cur = Fd(next);
  }
  return cur;
}

Fd OpenBucketDir(const std::string& root, const std::string& bucket) {
  Fd r(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  return r.ok() ? Fd(::openat(r.get(), bucket.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) : Fd();
}

std::string TempLeafName() { return std::string(kTempPrefix) + RandomHex(16); }

bool IsTempName(std::string_view name) { return StartsWith(name, kTempPrefix); }

Status CheckNotTempName(std::string_view key) {
  for (size_t start = 0; start <= key.size();) {
    size_t end = key.find('/', start);
    if (end == std::string_view::npos) end = key.size();
    if (IsTempName(key.substr(start, end - start)))
      return InvalidArgument("the object key '" + std::string(key.substr(0, 200)) + "' has a segment starting with '" +
                             std::string(kTempPrefix) + "' (reserved for the temporary files of writes in progress)");
    start = end + 1;
  }
  return Status::Ok();
}

namespace {

// The walk both share: folders whose names are not temporary ones, depth first; `file(parent_fd,
// name, key, stat)` for every regular file, temporary or not, until it returns false. With
// `keep_going`, a folder that cannot be read is skipped (its error returned at the end).
Status WalkFiles(Fd dir, const std::string& base, bool keep_going,
                 const std::function<bool(int parent_fd, const char* name, const std::string& key_prefix)>& descend,
                 const std::function<bool(int parent_fd, const char* name, const std::string& key,
                                          const struct stat& st)>& file) {
  Status first;
  std::vector<std::pair<Fd, std::string>> todo;  // a directory and its key prefix ("" or "a/")
  todo.emplace_back(std::move(dir), base);
  while (!todo.empty()) {
    auto [d_fd, prefix] = std::move(todo.back());
    todo.pop_back();
    int readable = ::openat(d_fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* d = readable >= 0 ? ::fdopendir(readable) : nullptr;
    if (!d) {
      if (readable >= 0) ::close(readable);
      Status st = Internal("cannot read the folder '" + prefix + "': " + std::strerror(errno));
      if (!keep_going) return st;
      if (first.ok()) first = st;
      continue;
    }
    while (dirent* e = ::readdir(d)) {
      const char* name = e->d_name;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      struct stat st;
      if (::fstatat(::dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      std::string key = prefix + name;
      if (S_ISDIR(st.st_mode)) {
        if (IsTempName(name)) continue;
        std::string sub = key + "/";
        if (!descend(::dirfd(d), name, sub)) continue;
        Fd child(::openat(::dirfd(d), name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (child.ok()) todo.emplace_back(std::move(child), std::move(sub));
      } else if (S_ISREG(st.st_mode) && !file(::dirfd(d), name, key, st)) {
        ::closedir(d);
        return first;
      }
    }
    ::closedir(d);
  }
  return first;
}

}  // namespace

Status WalkObjects(Fd dir, const std::string& base,
                   const std::function<bool(int parent_fd, const char* name, const std::string& key_prefix)>& descend,
                   const std::function<bool(const std::string& key, const struct stat& st)>& object) {
  return WalkFiles(std::move(dir), base, /*keep_going=*/false, descend,
                   [&](int, const char* name, const std::string& key, const struct stat& st) {
                     return IsTempName(name) || !CheckObjectKey(key, KeyUse::kObject).ok() || object(key, st);
                   });
}

Status WalkTempFiles(Fd dir, const std::function<void(int parent_fd, const char* name, const struct stat& st)>& temp) {
  return WalkFiles(
      std::move(dir), "", /*keep_going=*/true, [](int, const char*, const std::string&) { return true; },
      [&](int parent, const char* name, const std::string&, const struct stat& st) {
        if (IsTempName(name)) temp(parent, name, st);
        return true;
      });
}

}  // namespace ty::objstore
