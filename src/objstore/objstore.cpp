#include "objstore/objstore.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <utility>

#include "core/strings.h"
#include "objstore/dir_walk.h"
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
    Status walked = WalkObjects(
        std::move(start), dir_part.empty() ? "" : dir_part + "/",
        [&](int, const char*, const std::string& sub) { return StartsWith(sub, prefix) || StartsWith(prefix, sub); },
        [&](const std::string& key, const struct stat& st) {
          if (StartsWith(key, prefix)) out.push_back(ObjectInfo{key, static_cast<int64_t>(st.st_size), FileEtag(st)});
          return true;
        });
    if (!walked.ok()) return Internal("ListObjects " + Where(bucket, prefix) + ": " + walked.message());
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
    if (Status st = CheckNotTempName(key); !st.ok()) return InvalidArgument(Where(bucket, key) + ": " + st.message());
    Fd in(::open(local_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in.ok()) return Internal("cannot write " + Where(bucket, key) + " from " + local_path + ": " + std::strerror(errno));
    Place p = Resolve(bucket, key, true);
    if (!p.dir.ok())
      return InvalidArgument("cannot write " + Where(bucket, key) + ": " + std::strerror(errno) +
                             (errno == ELOOP || errno == ENOTDIR ? " (a folder of the key is a file or a symlink, "
                                                                   "and symlinks are never followed)" : ""));
    // Written beside the object and renamed over it: readers see the old or the new object,
    // and renaming replaces a symlink at the key itself rather than writing through it.
    std::string tmp = TempLeafName();  // a name List never shows
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
    return OpenBucketDir(root_, bucket);
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

std::unique_ptr<ObjectStore> NewDirStore(std::string root) { return std::make_unique<DirStore>(std::move(root)); }
std::unique_ptr<ObjectStore> NewRouter(const ObjectStoreConfig& config, std::string dir_root, S3StoreFactory make_s3) {
  return std::make_unique<Router>(config, std::move(dir_root), make_s3 ? make_s3 : LoadS3Store);
}

}  // namespace ty::objstore
