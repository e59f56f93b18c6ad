// How the directory store (objstore.cpp) and the S3 view of the same buckets (bucket_store.cpp)
// turn keys into places on disk and walk a bucket's folders (internal to objstore/).
//
// Both resolve a key beneath its bucket's directory through OpenDirBeneath only, after checking
// it with core/object_key.h, so whatever key gets that far cannot reach a file outside its
// bucket; both write through a temporary file beside the key whose name (TempLeafName) both listings
// skip.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "core/status.h"

namespace ty::objstore {

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
  void Close();
  int fd_ = -1;
};

// The directory `rel` ("" or "a/b", segments already checked by CheckObjectKey) beneath `base`,
// as an O_PATH descriptor; missing directories are made (0755) when `create`. Every segment is
// resolved beneath `base` without following a symlink (openat2 with RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS where the kernel has it, else a walk of O_NOFOLLOW opens, one segment at a
// time). An invalid Fd with errno set (ELOOP or ENOTDIR: a symlink or a file is where a directory
// should be) otherwise.
Fd OpenDirBeneath(int base, const std::string& rel, bool create);

// `root`/`bucket` as an O_PATH directory descriptor (invalid when missing). The root and the
// bucket's own directory are the operator's and may be symlinks; nothing beneath them is followed.
Fd OpenBucketDir(const std::string& root, const std::string& bucket);

// The names of in-flight writes: every write goes to a file of this name beside its key and is
// renamed over the key when complete. No listing shows such a name, and no key may hold a segment
// that starts with kTempPrefix (CheckNotTempName). At most 8 + 32 bytes: within NAME_MAX.
inline constexpr std::string_view kTempPrefix = ".ty-tmp-";
std::string TempLeafName();  // kTempPrefix + 32 random hex digits
bool IsTempName(std::string_view name);
// InvalidArgument naming the key when a segment of `key` starts with kTempPrefix.
Status CheckNotTempName(std::string_view key);

// Walks the folders beneath `dir` (an O_PATH descriptor of the folder whose key prefix is `base`,
// "" or "a/b/"), depth first. For every sub-folder, `descend(parent_fd, name, key_prefix)` (key_prefix
// ends with '/') says whether to walk it; every regular file whose name is a valid object key and
// not a temporary name is handed to `object(key, stat)`. Symlinks and special files are skipped,
// never followed; the walk stops when `object` returns false. Errors: a folder that cannot be read.
Status WalkObjects(Fd dir, const std::string& base,
                   const std::function<bool(int parent_fd, const char* name, const std::string& key_prefix)>& descend,
                   const std::function<bool(const std::string& key, const struct stat& st)>& object);

// Walks every folder beneath `dir` (O_PATH) by WalkObjects' rules and hands each regular file whose
// name is a temporary one (IsTempName) to `temp(parent_fd, name, stat)`, which may remove it.
// Errors: the first folder that cannot be read (the walk goes on with the others).
Status WalkTempFiles(Fd dir, const std::function<void(int parent_fd, const char* name, const struct stat& st)>& temp);

}  // namespace ty::objstore
