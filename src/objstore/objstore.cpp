#include "objstore/objstore.h"

#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
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

// A temporary name beside `path`, unique per process and call (downloads run in parallel).
std::string TempName(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".part." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

std::string Where(const std::string& bucket, const std::string& key) {
  return "s3://" + bucket + "/" + key;
}

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
          out.push_back(ObjectInfo{key, static_cast<int64_t>(st.st_size), ""});
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
    return ObjectInfo{key, static_cast<int64_t>(st.st_size), ""};
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

// ------------------------------------------------------------------------------------------
// XML replies (libxml2: a real parser for entities, namespaces and CDATA, and a tree walk).

struct Xml {
  xmlDocPtr doc = nullptr;
  explicit Xml(const std::string& text) {
    if (!text.empty())
      doc = xmlReadMemory(text.data(), static_cast<int>(text.size()), "reply.xml", nullptr,
                          XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  }
  ~Xml() {
    if (doc) xmlFreeDoc(doc);
  }
  xmlNodePtr Root() const { return doc ? xmlDocGetRootElement(doc) : nullptr; }
};

bool Named(xmlNodePtr n, const char* name) {
  return n && n->type == XML_ELEMENT_NODE && std::strcmp(reinterpret_cast<const char*>(n->name), name) == 0;
}

std::string Text(xmlNodePtr n) {
  if (!n) return "";
  xmlChar* c = xmlNodeGetContent(n);
  std::string s = c ? reinterpret_cast<const char*>(c) : "";
  if (c) xmlFree(c);
  return s;
}

xmlNodePtr Child(xmlNodePtr n, const char* name) {
  for (xmlNodePtr c = n ? n->children : nullptr; c; c = c->next)
    if (Named(c, name)) return c;
  return nullptr;
}

std::string Unquote(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

// RFC 3986 unreserved characters stay; everything else is %XX (upper case, as SigV4 wants).
std::string Encode(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// The S3 client.

struct Response {
  long code = 0;
  std::string body;
  std::string etag;     // ETag response header
  int64_t length = -1;  // Content-Length response header
  std::string curl_error;
};

size_t WriteString(char* p, size_t size, size_t n, void* ud) {
  static_cast<std::string*>(ud)->append(p, size * n);
  return size * n;
}
// A download's body goes to the file on success and to the error text otherwise.
struct FileSink {
  CURL* handle = nullptr;
  FILE* file = nullptr;
  std::string* error_body = nullptr;
  int write_errno = 0;  // why the last write to the file failed (ENOSPC: the disk is full)
};
size_t WriteFile(char* p, size_t size, size_t n, void* ud) {
  auto* s = static_cast<FileSink*>(ud);
  long code = 0;
  curl_easy_getinfo(s->handle, CURLINFO_RESPONSE_CODE, &code);
  if (code >= 300) {
    s->error_body->append(p, size * n);
    return size * n;
  }
  size_t written = std::fwrite(p, 1, size * n, s->file);
  if (written != size * n) s->write_errno = errno ? errno : EIO;
  return written;
}

struct ReadSource {
  FILE* f = nullptr;
  int64_t left = 0;  // bytes still to send
};
size_t ReadFileCb(char* p, size_t size, size_t n, void* ud) {
  auto* src = static_cast<ReadSource*>(ud);
  size_t want = std::min<int64_t>(static_cast<int64_t>(size * n), src->left);
  if (want == 0) return 0;
  size_t got = std::fread(p, 1, want, src->f);
  src->left -= static_cast<int64_t>(got);
  return got;
}

size_t HeaderCb(char* p, size_t size, size_t n, void* ud) {
  auto* r = static_cast<Response*>(ud);
  std::string line(p, size * n);
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.pop_back();
    if (name == "etag") r->etag = Unquote(value);
    if (name == "content-length") r->length = std::atoll(value.c_str());
  }
  return size * n;
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    xmlInitParser();
  });
}

class S3Store : public ObjectStore {
 public:
  explicit S3Store(const ObjectStoreConfig& c) : c_(c) {
    GlobalInit();
    while (!c_.endpoint.empty() && c_.endpoint.back() == '/') c_.endpoint.pop_back();
  }

  StatusOr<std::vector<ObjectInfo>> List(const std::string& bucket, const std::string& prefix) override {
    std::vector<ObjectInfo> out;
    std::string token;
    for (int page = 0;; ++page) {
      // Query parameters in sorted order: SigV4 signs the canonical (sorted) query string.
      std::string q;
      if (!token.empty()) q += "continuation-token=" + Encode(token, false) + "&";
      // A '/' in the prefix stays as it is: that is how S3 clients send it and how servers
      // canonicalize it (a %2F here fails the signature check).
      q += "list-type=2&prefix=" + Encode(prefix, true);
      Response r;
      Request req{"GET", bucket, "", q};
      req.to_string = &r.body;
      TY_RETURN_IF_ERROR(Perform(req, &r));
      if (r.code != 200) return Error("ListObjectsV2", bucket, prefix, r);
      Xml xml(r.body);
      xmlNodePtr root = xml.Root();
      if (!Named(root, "ListBucketResult"))
        return Internal("ListObjectsV2 " + Where(bucket, prefix) + ": the reply is not a ListBucketResult");
      for (xmlNodePtr c = root->children; c; c = c->next) {
        if (!Named(c, "Contents")) continue;
        ObjectInfo o;
        o.key = Text(Child(c, "Key"));
        o.size = std::atoll(Text(Child(c, "Size")).c_str());
        o.etag = Unquote(Text(Child(c, "ETag")));
        out.push_back(o);
      }
      bool truncated = Text(Child(root, "IsTruncated")) == "true";
      token = Text(Child(root, "NextContinuationToken"));
      if (!truncated) break;
      if (token.empty())
        return Internal("ListObjectsV2 " + Where(bucket, prefix) + ": a truncated page without NextContinuationToken");
    }
    return out;
  }

  StatusOr<ObjectInfo> Head(const std::string& bucket, const std::string& key) override {
    Response r;
    Request req{"HEAD", bucket, key, ""};
    TY_RETURN_IF_ERROR(Perform(req, &r));
    if (r.code != 200) return Error("HeadObject", bucket, key, r);
    return ObjectInfo{key, r.length, r.etag};
  }

  Status Get(const std::string& bucket, const std::string& key, const std::string& local_path) override {
    std::error_code ec;
    fs::create_directories(fs::path(local_path).parent_path(), ec);
    std::string tmp = TempName(local_path);
    FILE* f = std::fopen(tmp.c_str(), "wbe");
    if (!f) return Internal("GetObject " + Where(bucket, key) + ": cannot write " + tmp + ": " + std::strerror(errno));
    Response r;
    Request req{"GET", bucket, key, ""};
    int write_errno = 0;
    req.to_file = f;
    req.file_errno = &write_errno;
    Status st = Perform(req, &r);
    errno = 0;
    bool write_ok = std::fclose(f) == 0;
    if (!write_ok && write_errno == 0) write_errno = errno ? errno : EIO;
    // A local write that failed (a full disk, ENOSPC) is said as such, whatever curl made of it.
    if (write_errno != 0 && (!st.ok() || !write_ok))
      st = Internal("GetObject " + Where(bucket, key) + ": cannot write " + tmp + ": " + std::strerror(write_errno));
    if (st.ok() && r.code != 200) st = Error("GetObject", bucket, key, r);
    if (st.ok() && !write_ok) st = Internal("GetObject " + Where(bucket, key) + ": cannot write " + tmp);
    if (st.ok() && r.length >= 0 && static_cast<int64_t>(fs::file_size(tmp, ec)) != r.length)
      st = Internal("GetObject " + Where(bucket, key) + ": short read");
    if (st.ok()) fs::rename(tmp, local_path, ec);
    if (st.ok() && ec) st = Internal("GetObject " + Where(bucket, key) + ": " + ec.message());
    if (!st.ok()) fs::remove(tmp, ec);
    return st;
  }

  Status Put(const std::string& bucket, const std::string& key, const std::string& local_path) override {
    std::error_code ec;
    int64_t size = static_cast<int64_t>(fs::file_size(local_path, ec));
    if (ec) return Internal("PutObject " + Where(bucket, key) + ": cannot read " + local_path + ": " + ec.message());
    if (size >= c_.multipart_threshold_bytes && size > c_.multipart_part_bytes) return PutMultipart(bucket, key, local_path, size);
    FILE* f = std::fopen(local_path.c_str(), "rbe");
    if (!f) return Internal("PutObject " + Where(bucket, key) + ": cannot open " + local_path);
    ReadSource src{f, size};
    Response r;
    Request req{"PUT", bucket, key, ""};
    req.from = &src;
    req.upload_size = size;
    req.to_string = &r.body;
    Status st = Perform(req, &r);
    std::fclose(f);
    TY_RETURN_IF_ERROR(st);
    if (r.code != 200) return Error("PutObject", bucket, key, r);
    return Status::Ok();
  }

  Status Delete(const std::string& bucket, const std::string& key) override {
    Response r;
    Request req{"DELETE", bucket, key, ""};
    req.to_string = &r.body;
    TY_RETURN_IF_ERROR(Perform(req, &r));
    if (r.code != 204 && r.code != 200) return Error("DeleteObject", bucket, key, r);
    return Status::Ok();
  }

  bool Remote(const std::string&) const override { return true; }

 private:
  struct Request {
    std::string method, bucket, key, query;
    std::string* to_string = nullptr;  // response body
    FILE* to_file = nullptr;
    int* file_errno = nullptr;         // set when writing to_file failed (errno)
    ReadSource* from = nullptr;        // request body from a file
    int64_t upload_size = 0;
    const std::string* body = nullptr;  // request body in memory (POST)
  };

  std::string Url(const Request& r) const {
    std::string url;
    std::string path = "/" + Encode(r.key, true);
    if (c_.path_style) {
      url = c_.endpoint + "/" + r.bucket + path;
    } else {
      auto scheme_end = c_.endpoint.find("://");
      url = c_.endpoint.substr(0, scheme_end + 3) + r.bucket + "." + c_.endpoint.substr(scheme_end + 3) + path;
    }
    if (!r.query.empty()) url += "?" + r.query;
    return url;
  }

  Status Perform(const Request& r, Response* out) {
    // The bucket becomes part of the URL (its host name, virtual-host style).
    if (Status st = CheckBucketName(r.bucket); !st.ok()) return InvalidArgument(Where(r.bucket, r.key) + ": " + st.message());
    CURL* h = curl_easy_init();
    if (!h) return Internal("cannot create an HTTP handle");
    std::string url = Url(r);
    std::string sigv4 = "aws:amz:" + c_.region + ":s3";
    std::string userpwd = c_.access_key_id + ":" + c_.secret_access_key;
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 120L);
    if (!c_.access_key_id.empty()) {
      curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
      curl_easy_setopt(h, CURLOPT_USERPWD, userpwd.c_str());
    }
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, HeaderCb);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    std::string sink;
    FileSink file_sink{h, r.to_file, &out->body};
    if (r.to_file) {
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteFile);
      curl_easy_setopt(h, CURLOPT_WRITEDATA, &file_sink);
    } else {
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteString);
      curl_easy_setopt(h, CURLOPT_WRITEDATA, r.to_string ? r.to_string : &sink);
    }
    // No "Expect:" blanking here: libcurl 7.88 would sign the blanked header it never sends.
    struct curl_slist* headers = nullptr;
    // S3 wants the payload hash in a signed header; libcurl signs the header's value as the
    // payload hash, and bodies are streamed, so they go unsigned (as over TLS is usual).
    if (!c_.access_key_id.empty()) headers = curl_slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (r.method == "HEAD") {
      curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (r.method == "PUT") {
      curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(h, CURLOPT_READFUNCTION, ReadFileCb);
      curl_easy_setopt(h, CURLOPT_READDATA, r.from);
      curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.upload_size));
    } else if (r.method == "POST") {
      curl_easy_setopt(h, CURLOPT_POST, 1L);
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, r.body ? r.body->c_str() : "");
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body ? r.body->size() : 0));
      headers = curl_slist_append(headers, "Content-Type: application/xml");
    } else if (r.method != "GET") {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    if (r.file_errno && file_sink.write_errno) *r.file_errno = file_sink.write_errno;
    if (rc != CURLE_OK)
      return Unavailable(r.method + " " + Where(r.bucket, r.key) + " at " + c_.endpoint + ": " + curl_easy_strerror(rc));
    return Status::Ok();
  }

  // "<op> s3://b/k: <Code>: <Message>" from the error reply (HEAD has no body: the status says).
  static Status Error(const std::string& op, const std::string& bucket, const std::string& key, const Response& r) {
    Xml xml(r.body);
    xmlNodePtr root = xml.Root();
    std::string code = Named(root, "Error") ? Text(Child(root, "Code")) : "";
    std::string message = Named(root, "Error") ? Text(Child(root, "Message")) : "";
    if (code.empty()) {
      code = r.code == 404 ? "NotFound" : r.code == 403 ? "AccessDenied" : "HTTP " + std::to_string(r.code);
    }
    std::string text = op + " " + Where(bucket, key) + ": " + code + (message.empty() ? "" : ": " + message);
    if (r.code == 404) return NotFound(text);
    if (r.code == 403) return FailedPrecondition(text);
    if (r.code >= 500) return Unavailable(text);
    return InvalidArgument(text);
  }

  Status PutMultipart(const std::string& bucket, const std::string& key, const std::string& local_path, int64_t size) {
    Response init;
    Request req{"POST", bucket, key, "uploads="};
    req.to_string = &init.body;
    TY_RETURN_IF_ERROR(Perform(req, &init));
    if (init.code != 200) return Error("CreateMultipartUpload", bucket, key, init);
    Xml xml(init.body);
    std::string upload_id = Text(Child(xml.Root(), "UploadId"));
    if (upload_id.empty()) return Internal("CreateMultipartUpload " + Where(bucket, key) + ": no UploadId in the reply");
    auto abort = [&](Status st) {
      Response r;
      Request a{"DELETE", bucket, key, "uploadId=" + Encode(upload_id, false)};
      a.to_string = &r.body;
      Perform(a, &r);
      return st;
    };
    FILE* f = std::fopen(local_path.c_str(), "rbe");
    if (!f) return abort(Internal("UploadPart " + Where(bucket, key) + ": cannot open " + local_path));
    std::string complete = "<CompleteMultipartUpload>";
    int part = 1;
    for (int64_t off = 0; off < size; off += c_.multipart_part_bytes, ++part) {
      int64_t len = std::min(c_.multipart_part_bytes, size - off);
      ReadSource src{f, len};
      Response r;
      Request p{"PUT", bucket, key, "partNumber=" + std::to_string(part) + "&uploadId=" + Encode(upload_id, false)};
      p.from = &src;
      p.upload_size = len;
      p.to_string = &r.body;
      Status st = Perform(p, &r);
      if (st.ok() && r.code != 200) st = Error("UploadPart " + std::to_string(part), bucket, key, r);
      if (st.ok() && r.etag.empty()) st = Internal("UploadPart " + Where(bucket, key) + ": no ETag in the reply");
      if (!st.ok()) {
        std::fclose(f);
        return abort(st);
      }
      complete += "<Part><PartNumber>" + std::to_string(part) + "</PartNumber><ETag>\"" + r.etag + "\"</ETag></Part>";
    }
    std::fclose(f);
    complete += "</CompleteMultipartUpload>";
    Response done;
    Request c{"POST", bucket, key, "uploadId=" + Encode(upload_id, false)};
    c.body = &complete;
    c.to_string = &done.body;
    Status st = Perform(c, &done);
    if (!st.ok()) return abort(st);
    // CompleteMultipartUpload can fail with 200 and an <Error> body.
    Xml reply(done.body);
    if (done.code != 200 || Named(reply.Root(), "Error")) return abort(Error("CompleteMultipartUpload", bucket, key, done));
    return Status::Ok();
  }

  ObjectStoreConfig c_;
};

class Router : public ObjectStore {
 public:
  Router(const ObjectStoreConfig& c, std::string root)
      : c_(c), dir_(NewDirStore(std::move(root))), s3_(c.endpoint.empty() ? nullptr : NewS3Store(c)) {}
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
std::unique_ptr<ObjectStore> NewS3Store(const ObjectStoreConfig& config) { return std::make_unique<S3Store>(config); }
std::unique_ptr<ObjectStore> NewRouter(const ObjectStoreConfig& config, std::string dir_root) {
  return std::make_unique<Router>(config, std::move(dir_root));
}

}  // namespace ty::objstore
