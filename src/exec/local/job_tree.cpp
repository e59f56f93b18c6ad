#include "exec/local/job_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/strings.h"

namespace ty::exec::local {

namespace {

// Owns one descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = other.release();
    }
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// Why an entry of this type is not read.
std::string NotRegular(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link (links are not followed)";
  if (S_ISFIFO(mode)) return "a FIFO (only regular files are read)";
  if (S_ISSOCK(mode)) return "a socket (only regular files are read)";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device (only regular files are read)";
  if (S_ISDIR(mode)) return "a directory";
  return "not a regular file";
}

// Opens `name` in `dfd` for reading when it is a regular file, without opening anything else:
// an O_PATH descriptor (which opens no device and follows no link) is checked first, and the
// file is then reopened through /proc/self/fd, which names that very inode. NotFound when there
// is no such entry; FailedPrecondition with the reason when it is not a regular file.
Status OpenRegular(int dfd, const std::string& name, Fd* out, struct stat* st) {
  Fd path(::openat(dfd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (path.get() < 0) {
    if (errno == ENOENT) return NotFound(name + " does not exist");
    return FailedPrecondition(name + " cannot be opened: " + std::strerror(errno));
  }
  if (::fstat(path.get(), st) != 0) return FailedPrecondition(name + " cannot be read: " + std::strerror(errno));
  if (!S_ISREG(st->st_mode)) return FailedPrecondition(name + " is " + NotRegular(st->st_mode));
  std::string proc = "/proc/self/fd/" + std::to_string(path.get());
  Fd fd(::open(proc.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) return FailedPrecondition(name + " cannot be opened: " + std::strerror(errno));
  if (::fstat(fd.get(), st) != 0 || !S_ISREG(st->st_mode)) return FailedPrecondition(name + " is not a regular file");
  *out = Fd(fd.release());
  return Status::Ok();
}

// Opens the directory `name` in `dfd`, never through a link.
int OpenSubdir(int dfd, const std::string& name) {
  return ::openat(dfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// The names in a directory (not "." and ".."), sorted; false when it cannot be read.
bool ListNames(int dfd, std::vector<std::string>* names) {
  int copy = ::dup(dfd);
  if (copy < 0) return false;
  DIR* d = ::fdopendir(copy);
  if (!d) {
    ::close(copy);
    return false;
  }
  ::rewinddir(d);
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names->emplace_back(e->d_name);
    errno = 0;
  }
  bool ok = errno == 0;
  ::closedir(d);
  std::sort(names->begin(), names->end());
  return ok;
}

struct Walk {
  const WalkOptions& options;
  const VisitFn& visit;
  const SkipFn& skip;
  WalkResult result;
  int64_t entries = 0;
  bool stopped = false;  // the entry limit was reached

  void Skip(const std::string& rel, const std::string& why) {
    if (skip) skip(rel, why);
  }

  Status Dir(int dfd, const std::string& prefix, int depth) {
    std::vector<std::string> names;
    if (!ListNames(dfd, &names)) {
      result.complete = false;
      Skip(prefix.empty() ? "." : prefix, std::string("the directory cannot be read: ") + std::strerror(errno));
      return Status::Ok();
    }
    for (const auto& name : names) {
      if (stopped) return Status::Ok();
      const std::string rel = prefix.empty() ? name : prefix + "/" + name;
      if (++entries > options.max_entries) {
        stopped = true;
        result.complete = false;
        Skip(rel, "more than " + std::to_string(options.max_entries) + " entries: this one and the rest are left out");
        return Status::Ok();
      }
      struct stat st {};
      if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT) Skip(rel, std::string("cannot be read: ") + std::strerror(errno));
        continue;  // gone since the listing
      }
      if (S_ISDIR(st.st_mode)) {
        if (depth >= options.max_depth) {
          result.complete = false;
          Skip(rel, "deeper than " + std::to_string(options.max_depth) + " directories: left out");
          continue;
        }
        Fd sub(OpenSubdir(dfd, name));
        if (sub.get() < 0) {
          result.complete = false;
          Skip(rel, std::string("the directory cannot be opened: ") + std::strerror(errno));
          continue;
        }
        if (options.visit_directories) {
          JobFile d;
          d.rel = rel;
          d.fd = sub.get();
          if (::fstat(sub.get(), &d.st) != 0) d.st = st;
          TY_RETURN_IF_ERROR(visit(d));
        }
        TY_RETURN_IF_ERROR(Dir(sub.get(), rel, depth + 1));
        continue;
      }
      if (!S_ISREG(st.st_mode)) {
        Skip(rel, "is " + NotRegular(st.st_mode));
        continue;
      }
      Fd fd;
      JobFile file;
      Status st_open = OpenRegular(dfd, name, &fd, &file.st);
      if (!st_open.ok()) {
        if (st_open.code() != Code::kNotFound) Skip(rel, st_open.message().substr(name.size() + 1));
        continue;
      }
      file.rel = rel;
      file.fd = fd.get();
      ++result.files;
      result.bytes += file.st.st_size;
      TY_RETURN_IF_ERROR(visit(file));
    }
    return Status::Ok();
  }
};

}  // namespace

Status OpenJobDir(const JobDir& dir, int* fd) {
  Fd cur(::open(dir.base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (cur.get() < 0) {
    if (errno == ENOENT) return NotFound(dir.base + " does not exist");
    return Internal("cannot open " + dir.base + ": " + std::strerror(errno));
  }
  std::string walked;
  for (const auto& part : Split(dir.sub, '/')) {
    if (part.empty() || part == ".") continue;
    walked += (walked.empty() ? "" : "/") + part;
    if (part == "..") return InvalidArgument(walked + " climbs out of " + dir.base);
    Fd next(OpenSubdir(cur.get(), part));
    if (next.get() < 0) {
      int err = errno;
      if (err == ENOENT) return NotFound(walked + " does not exist");
      struct stat st {};
      if (::fstatat(cur.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
        return InvalidArgument(walked + " is " + NotRegular(st.st_mode) + ", not a directory");
      return InvalidArgument(walked + " cannot be opened: " + std::strerror(err));
    }
    cur = Fd(next.release());
  }
  *fd = cur.release();
  return Status::Ok();
}

Status WalkJobTree(const JobDir& dir, const WalkOptions& options, const VisitFn& visit, const SkipFn& skip,
                   WalkResult* result) {
  int raw = -1;
  Status st = OpenJobDir(dir, &raw);
  if (st.code() == Code::kNotFound) return Status::Ok();
  Walk walk{options, visit, skip, {}};
  if (st.code() == Code::kInvalidArgument) {
    walk.result.complete = false;
    walk.Skip("", st.message());
    if (result) *result = walk.result;
    return Status::Ok();
  }
  TY_RETURN_IF_ERROR(st);
  Fd root(raw);
  st = walk.Dir(root.get(), "", 0);
  if (result) *result = walk.result;
  return st;
}

Status ReadJobFile(const JobDir& dir, const std::string& name, size_t max_bytes, std::string* out) {
  out->clear();
  int raw = -1;
  Status st = OpenJobDir(dir, &raw);
  if (st.code() == Code::kInvalidArgument) return FailedPrecondition(st.message());
  TY_RETURN_IF_ERROR(st);
  Fd d(raw);
  Fd fd;
  struct stat sb {};
  TY_RETURN_IF_ERROR(OpenRegular(d.get(), name, &fd, &sb));
  out->resize(max_bytes);
  size_t have = 0;
  while (have < max_bytes) {
    ssize_t n = ::read(fd.get(), out->data() + have, max_bytes - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += static_cast<size_t>(n);
  }
  out->resize(have);
  return Status::Ok();
}

Status WriteJobFile(const JobDir& dir, const std::string& name, const std::string& text) {
  int raw = -1;
  TY_RETURN_IF_ERROR(OpenJobDir(dir, &raw));
  Fd d(raw);
  const std::string tmp = name + ".tmp";
  ::unlinkat(d.get(), tmp.c_str(), 0);
  Fd fd(::openat(d.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (fd.get() < 0) return Internal("cannot create " + dir.Path() + "/" + tmp + ": " + std::strerror(errno));
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd.get(), p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Internal("cannot write " + dir.Path() + "/" + tmp + ": " + std::strerror(errno));
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::renameat(d.get(), tmp.c_str(), d.get(), name.c_str()) != 0)
    return Internal("cannot replace " + dir.Path() + "/" + name + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace ty::exec::local
