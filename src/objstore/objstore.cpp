#include "objstore/objstore.h"

#include <dirent.h>
#include <fcntl.h>
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>  // struct open_how, RESOLVE_* (Linux 5.6)
#define TY_HAVE_OPENAT2 1
#endif
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <utility>

#include "core/strings.h"
#include "objstore/names.h"

namespace ty::objstore {

namespace fs = std::filesystem;

bool ParseS3Uri(const std::string& uri, std::string* bucket, std::string* key) {
  auto loc = ty::ParseS3Uri(uri, KeyUse::kPrefix);
  if (!loc.ok()) return false;
  *bucket = std::move(loc->bucket);
  *key = std::move(loc->key);
  return true;
}

namespace {

// ------------------------------------------------------------------------------------------
// The embedded directory store.

// A file descriptor, closed when it goes.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Close();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Close(); }
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  // Gives the descriptor up to the caller, who closes it.
  int release() { return std::exchange(fd_, -1); }

 private:
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
};

// openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: `rel` is resolved beneath `dirfd`, and
// the call fails (EXDEV, ELOOP) rather than follow a symlink or "..", or leave through an absolute
// path. -1 with errno ENOSYS where the kernel (or a seccomp filter: EPERM) does not offer it.
std::atomic<bool> g_openat2_disabled{false};

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

// The directory `rel` ("" or "a/b", segments already checked by CheckObjectKey) beneath `base`,
// as an O_PATH descriptor; missing directories are made (0755) when `create`. This is the one
// way the directory store turns a key into a place on disk: every segment is resolved beneath
// `base` without following a symlink (openat2 where the kernel has it, else a walk of
// O_NOFOLLOW opens, one segment at a time), so whatever key got this far cannot reach a file
// outside its bucket. An invalid Fd with errno set (ELOOP or ENOTDIR: a symlink or a file is
// where a directory should be) otherwise.
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

// The directory store's ETag: the file's inode, size and modification time. Every Put writes a
// new file and renames it into place, so a new version always has a new tag; an object that
// was not written again keeps its tag. (S3's is an MD5 of the content; hashing every object on
// each Head would read it whole.) Warm pools tell a changed source archive by it.
std::string FileEtag(const struct stat& st) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%llx-%llx-%llx%09lx", static_cast<unsigned long long>(st.st_ino),
                static_cast<unsigned long long>(st.st_size), static_cast<unsigned long long>(st.st_mtim.tv_sec),
                static_cast<long>(st.st_mtim.tv_nsec));
  return buf;
}

class DirStore : public ObjectStore {
 public:
  explicit DirStore(std::string root) : root_(std::move(root)) {}

  StatusOr<std::vector<ObjectInfo>> List(const std::string& bucket, const std::string& prefix) override {
    TY_RETURN_IF_ERROR(Check(bucket, prefix, KeyUse::kPrefix));
    Fd b = BucketDir(bucket, false);
    if (!b.ok()) return NotFound("NoSuchBucket: the bucket " + bucket + " does not exist (" + root_ + "/" + bucket + ")");
    std::vector<ObjectInfo> out;
    // Only the subtree that can match the prefix is walked; symlinks are not objects and are
    // not followed; names that are not valid keys (control characters, ...) are not listed.
    size_t slash = prefix.rfind('/');
    std::string dir_part = slash == std::string::npos ? "" : prefix.substr(0, slash);
    Fd start = OpenDirBeneath(b.get(), dir_part, false);
    if (!start.ok()) return out;
    std::vector<std::pair<Fd, std::string>> todo;  // a directory and its key prefix ("" or "a/")
    todo.emplace_back(std::move(start), dir_part.empty() ? "" : dir_part + "/");
    while (!todo.empty()) {
      auto [dir, base] = std::move(todo.back());
      todo.pop_back();
      int readable = ::openat(dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      DIR* d = readable >= 0 ? ::fdopendir(readable) : nullptr;
      if (!d) {
        if (readable >= 0) ::close(readable);
        return Internal("ListObjects " + Where(bucket, prefix) + ": cannot read the folder '" + base + "': " +
                        std::strerror(errno));
      }
      while (dirent* e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        std::string key = base + name;
        struct stat st;
        if (::fstatat(::dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
          std::string sub = key + "/";
          if (!StartsWith(sub, prefix) && !StartsWith(prefix, sub)) continue;
          Fd child(::openat(::dirfd(d), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          if (child.ok()) todo.emplace_back(std::move(child), sub);
        } else if (S_ISREG(st.st_mode) && StartsWith(key, prefix) && CheckObjectKey(key, KeyUse::kObject).ok()) {
          out.push_back(ObjectInfo{key, static_cast<int64_t>(st.st_size), FileEtag(st)});
        }
      }
      ::closedir(d);
    }
    std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return out;
  }

  StatusOr<ObjectInfo> Head(const std::string& bucket, const std::string& key) override {
    TY_RETURN_IF_ERROR(Check(bucket, key, KeyUse::kObject));
    Place p = Resolve(bucket, key, false);
    struct stat st;
    if (!p.dir.ok() || ::fstatat(p.dir.get(), p.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      return NotFound("NoSuchKey: " + Where(bucket, key) + " does not exist");
    return ObjectInfo{key, static_cast<int64_t>(st.st_size), FileEtag(st)};
  }

  Status Get(const std::string& bucket, const std::string& key, const std::string& local_path) override {
    TY_RETURN_IF_ERROR(Check(bucket, key, KeyUse::kObject));
    Place p = Resolve(bucket, key, false);
    // O_NONBLOCK: a FIFO planted in the bucket must not hold the reader; it is not an object.
    Fd in(p.dir.ok() ? ::openat(p.dir.get(), p.leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1);
    const bool link = !in.ok() && (errno == ELOOP || errno == ENOTDIR);
    struct stat st;
    if (!in.ok() || ::fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode))
      return NotFound("NoSuchKey: " + Where(bucket, key) + " does not exist" +
                      (link ? " (symlinks in a bucket are never followed)" : ""));
    std::error_code ec;
    fs::create_directories(fs::path(local_path).parent_path(), ec);
    std::string tmp = TempName(local_path);
    Fd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    std::string why = out.ok() ? CopyAll(in.get(), out.get()) : std::strerror(errno);
    if (why.empty() && ::close(out.release()) != 0) why = std::strerror(errno);
    if (why.empty() && ::rename(tmp.c_str(), local_path.c_str()) != 0) why = std::strerror(errno);
    if (!why.empty()) {
      ::unlink(tmp.c_str());
      return Internal("cannot copy " + Where(bucket, key) + " to " + local_path + ": " + why);
    }
    return Status::Ok();
  }

  Status Put(const std::string& bucket, const std::string& key, const std::string& local_path) override {
    TY_RETURN_IF_ERROR(Check(bucket, key, KeyUse::kObject));
    Fd in(::open(local_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in.ok()) return Internal("cannot write " + Where(bucket, key) + " from " + local_path + ": " + std::strerror(errno));
    Place p = Resolve(bucket, key, true);
    if (!p.dir.ok())
      return InvalidArgument("cannot write " + Where(bucket, key) + ": " + std::strerror(errno) +
                             (errno == ELOOP || errno == ENOTDIR ? " (a folder of the key is a file or a symlink, "
                                                                   "and symlinks are never followed)" : ""));
    // Written beside the object and renamed over it: readers see the old or the new object,
    // and renaming replaces a symlink at the key itself rather than writing through it.
    std::string tmp = TempName(p.leaf.substr(0, 200));  // within NAME_MAX whatever the leaf's length
    Fd out(::openat(p.dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    std::string why = out.ok() ? CopyAll(in.get(), out.get()) : std::strerror(errno);
    if (why.empty() && ::close(out.release()) != 0) why = std::strerror(errno);
    if (why.empty() && ::renameat(p.dir.get(), tmp.c_str(), p.dir.get(), p.leaf.c_str()) != 0) why = std::strerror(errno);
    if (!why.empty()) {
      ::unlinkat(p.dir.get(), tmp.c_str(), 0);
      return Internal("cannot write " + Where(bucket, key) + " from " + local_path + ": " + why);
    }
    return Status::Ok();
  }

  Status Delete(const std::string& bucket, const std::string& key) override {
    TY_RETURN_IF_ERROR(Check(bucket, key, KeyUse::kObject));
    Place p = Resolve(bucket, key, false);
    if (!p.dir.ok()) return Status::Ok();  // no such folder, so no such object: S3's delete succeeds
    if (::unlinkat(p.dir.get(), p.leaf.c_str(), 0) != 0 && errno != ENOENT)
      return Internal("cannot delete " + Where(bucket, key) + ": " + std::strerror(errno));
    return Status::Ok();
  }

  bool Remote(const std::string&) const override { return false; }

 private:
  // Where a key's object lives: the folder holding it (invalid, errno set, when that folder
  // cannot be reached beneath the bucket) and its name there.
  struct Place {
    Fd dir;
    std::string leaf;
  };

  static Status Check(const std::string& bucket, const std::string& key, KeyUse use) {
    Status st = CheckBucketName(bucket);
    if (st.ok()) st = CheckObjectKey(key, use);
    return st.ok() ? st : InvalidArgument(Where(bucket, key) + ": " + st.message());
  }

  // The bucket's directory (made, with the root, when `create`). The root and the bucket's own
  // directory are the operator's and may be symlinks; nothing beneath them is followed.
  Fd BucketDir(const std::string& bucket, bool create) const {
    if (create) {
      std::error_code ec;
      fs::create_directories(fs::path(root_) / bucket, ec);
    }
    Fd root(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    return root.ok() ? Fd(::openat(root.get(), bucket.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) : Fd();
  }

  // REQUIRES: Check(bucket, key, kObject) passed.
  Place Resolve(const std::string& bucket, const std::string& key, bool create) const {
    Place p;
    size_t slash = key.rfind('/');
    p.leaf = slash == std::string::npos ? key : key.substr(slash + 1);
    Fd b = BucketDir(bucket, create);
    if (b.ok()) p.dir = OpenDirBeneath(b.get(), slash == std::string::npos ? "" : key.substr(0, slash), create);
    return p;
  }

  // Copies `in` to `out` from their current offsets to the end of `in`; "" or why it failed.
  static std::string CopyAll(int in, int out) {
    char buf[1 << 16];
    while (true) {
      ssize_t n = ::read(in, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return std::strerror(errno);
      if (n == 0) return "";
      for (ssize_t done = 0; done < n;) {
        ssize_t w = ::write(out, buf + done, static_cast<size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return std::strerror(errno);
        done += w;
      }
    }
  }

  // Constant after construction.
  const std::string root_;
};

class Router : public ObjectStore {
 public:
  Router(const ObjectStoreConfig& c, std::string root, S3StoreFactory make_s3)
      : c_(c), dir_(NewDirStore(std::move(root))), s3_(c.endpoint.empty() ? nullptr : make_s3(c)) {}
  StatusOr<std::vector<ObjectInfo>> List(const std::string& b, const std::string& p) override { return For(b).List(b, p); }
  StatusOr<ObjectInfo> Head(const std::string& b, const std::string& k) override { return For(b).Head(b, k); }
  Status Get(const std::string& b, const std::string& k, const std::string& l) override { return For(b).Get(b, k, l); }
  Status Put(const std::string& b, const std::string& k, const std::string& l) override { return For(b).Put(b, k, l); }
  Status Delete(const std::string& b, const std::string& k) override { return For(b).Delete(b, k); }
  bool Remote(const std::string& b) const override { return s3_ && c_.Routes(b); }

 private:
  ObjectStore& For(const std::string& bucket) { return s3_ && c_.Routes(bucket) ? *s3_ : *dir_; }
  ObjectStoreConfig c_;
  std::unique_ptr<ObjectStore> dir_, s3_;
};

}  // namespace

void DisableOpenat2ForTesting(bool disabled) { g_openat2_disabled = disabled; }

std::unique_ptr<ObjectStore> NewDirStore(std::string root) { return std::make_unique<DirStore>(std::move(root)); }
std::unique_ptr<ObjectStore> NewRouter(const ObjectStoreConfig& config, std::string dir_root, S3StoreFactory make_s3) {
  return std::make_unique<Router>(config, std::move(dir_root), make_s3 ? make_s3 : LoadS3Store);
}

}  // namespace ty::objstore
