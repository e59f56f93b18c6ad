#include "objstore/bucket_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/object_key.h"
#include "core/strings.h"
#include "core/thread_annotations.h"
#include "objstore/dir_walk.h"
#include "objstore/names.h"

namespace ty::objstore {

namespace {

using json = nlohmann::json;

// The one extended attribute holding what S3 has that a file does not (bucket_store.h). On an
// object or a part: {"etag", "size", "mtime_ns", "content_type", "headers", "user_metadata"}, valid
// while size and mtime_ns match the file. On a bucket's directory: {"created_ms"}.
constexpr char kMetaXattr[] = "user.trainyard.s3";
constexpr size_t kMaxXattrBytes = 64 * 1024;  // XATTR_SIZE_MAX
constexpr size_t kHashBufferBytes = 1 << 20;
constexpr size_t kMaxKeyBytes = 1024;
constexpr int kMaxPartNumber = 10000;
constexpr int kMaxListKeys = 1000;
// Multipart uploads: <root>/.uploads/<upload id>/{upload.json, part-00001, ...}. ".uploads" is not
// a valid bucket name, so it is never listed or opened as a bucket.
constexpr char kUploadsDir[] = ".uploads";
constexpr char kUploadRecord[] = "upload.json";
constexpr size_t kUploadIdHexDigits = 32;

Status S3Error(Code code, const std::string& s3_code, const std::string& message) {
  return Status(code, s3_code + ": " + message);
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}
int64_t MtimeMs(const struct stat& st) { return MtimeNs(st) / 1000000; }

class Md5 {
 public:
  Md5() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_md5(), nullptr); }
  ~Md5() { EVP_MD_CTX_free(ctx_); }
  Md5(const Md5&) = delete;
  Md5& operator=(const Md5&) = delete;
  void Update(const void* data, size_t n) { EVP_DigestUpdate(ctx_, data, n); }
  // The 16-byte digest.
  std::string Final() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, out, &len);
    return std::string(reinterpret_cast<char*>(out), len);
  }

 private:
  EVP_MD_CTX* ctx_;
};

std::string Md5Of(std::string_view data) {
  Md5 md5;
  md5.Update(data.data(), data.size());
  return md5.Final();
}

// The binary digest a Content-MD5 header (base64 of 16 bytes) carries; InvalidDigest if it is not one.
StatusOr<std::string> DecodeContentMd5(const std::string& header) {
  std::string_view v = Trim(header);
  unsigned char out[18];
  if (v.size() != 24 || v.substr(22) != "==" ||
      EVP_DecodeBlock(out, reinterpret_cast<const unsigned char*>(v.data()), 24) != 18)
    return S3Error(Code::kInvalidArgument, "InvalidDigest",
                   "the Content-MD5 you specified is not valid (base64 of a 16-byte MD5 digest)");
  return std::string(reinterpret_cast<char*>(out), 16);
}

// BadDigest unless `data` is what the client's Content-MD5 says.
Status CheckContentMd5(const std::optional<std::string>& content_md5, const std::string& digest) {
  if (!content_md5) return Status::Ok();
  auto want = DecodeContentMd5(*content_md5);
  if (!want.ok()) return want.status();
  if (*want != digest)
    return S3Error(Code::kInvalidArgument, "BadDigest",
                   "the Content-MD5 you specified did not match what was received (" + ToHex(digest) + ")");
  return Status::Ok();
}

// "abc" from "\"ABC\"": how clients quote and case the ETags they send back.
std::string BareEtag(std::string_view etag) {
  etag = Trim(etag);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return ToLower(etag);
}

json PairsJson(const std::vector<std::pair<std::string, std::string>>& pairs) {
  json out = json::array();
  for (const auto& [k, v] : pairs) out.push_back(json::array({k, v}));
  return out;
}

std::vector<std::pair<std::string, std::string>> PairsFrom(const json& j) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!j.is_array()) return out;
  for (const json& p : j)
    if (p.is_array() && p.size() == 2 && p[0].is_string() && p[1].is_string())
      out.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
  return out;
}

json AttributesJson(const ObjectAttributes& a) {
  return json{{"content_type", a.content_type},
              {"headers", PairsJson(a.headers)},
              {"user_metadata", PairsJson(a.user_metadata)}};
}

ObjectAttributes AttributesFrom(const json& j) {
  ObjectAttributes a;
  if (!j.is_object()) return a;
  if (auto it = j.find("content_type"); it != j.end() && it->is_string()) a.content_type = it->get<std::string>();
  if (auto it = j.find("headers"); it != j.end()) a.headers = PairsFrom(*it);
  if (auto it = j.find("user_metadata"); it != j.end()) a.user_metadata = PairsFrom(*it);
  return a;
}

// The parsed attribute of `fd`, or a discarded value when there is none or it is not JSON.
json ReadXattr(int fd) {
  char small[4096];  // enough for most records; larger ones are read at their size
  ssize_t n = ::fgetxattr(fd, kMetaXattr, small, sizeof small);
  if (n >= 0) return json::parse(std::string_view(small, static_cast<size_t>(n)), nullptr, false);
  if (errno != ERANGE) return json(json::value_t::discarded);
  std::string buf(kMaxXattrBytes, '\0');
  n = ::fgetxattr(fd, kMetaXattr, buf.data(), buf.size());
  if (n < 0) return json(json::value_t::discarded);
  buf.resize(static_cast<size_t>(n));
  return json::parse(buf, nullptr, false);
}

// Best effort: a file system without user xattrs, or a file this process may not change, still
// answers (its ETag is computed again on each use).
void WriteXattr(int fd, const json& j) {
  std::string text = j.dump();
  if (::fsetxattr(fd, kMetaXattr, text.data(), text.size(), 0) != 0) {
    // ENOTSUP, EPERM, EACCES, E2BIG, EROFS: nothing to do.
  }
}

json ObjectXattr(const std::string& etag, const struct stat& st, const ObjectAttributes& attributes) {
  json j = AttributesJson(attributes);
  j["etag"] = etag;
  j["size"] = static_cast<int64_t>(st.st_size);
  j["mtime_ns"] = MtimeNs(st);
  return j;
}

// Reads `fd` from `offset` until `size` bytes or its end, in 1 MiB buffers, into `md5` (and `out`
// when given). "" or why it failed.
std::string StreamFile(int fd, int64_t offset, int64_t size, Md5* md5, int out) {
  std::string buf(kHashBufferBytes, '\0');
  while (size > 0) {
    ssize_t n = ::pread(fd, buf.data(), static_cast<size_t>(std::min<int64_t>(size, buf.size())), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::strerror(errno);
    if (n == 0) return "the file ended early (it changed while it was read)";
    if (md5) md5->Update(buf.data(), static_cast<size_t>(n));
    for (ssize_t done = 0; out >= 0 && done < n;) {
      ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return std::strerror(errno);
      done += w;
    }
    offset += n;
    size -= n;
  }
  return "";
}

// Appends `size` bytes of `in` from `offset` to `out` (at its current offset): copy_file_range
// (a reflink or an in-kernel copy) where the file systems allow it, else read and write. "" or why
// it failed.
std::string CopyRange(int in, int64_t offset, int64_t size, int out) {
  loff_t in_off = offset;
  while (size > 0) {
    ssize_t n = ::copy_file_range(in, &in_off, out, nullptr, static_cast<size_t>(size), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP || errno == EPERM))
      return StreamFile(in, in_off, size, nullptr, out);
    if (n < 0) return std::strerror(errno);
    if (n == 0) return "the file ended early (it changed while it was copied)";
    size -= n;
  }
  return "";
}

// An object's ETag and attributes, from the attribute when its size and mtime still match the
// open file `fd` (stat `st`), else computed (MD5 of the content) and stored back (best effort).
// Attributes survive a stale record: a job that rewrote the file kept its content type.
StatusOr<std::pair<std::string, ObjectAttributes>> EtagOf(int fd, const struct stat& st) {
  json j = ReadXattr(fd);
  ObjectAttributes attributes;
  if (j.is_object()) {
    attributes = AttributesFrom(j);
    auto etag = j.find("etag"), size = j.find("size"), mtime = j.find("mtime_ns");
    if (etag != j.end() && etag->is_string() && !etag->get<std::string>().empty() && size != j.end() &&
        size->is_number_integer() && size->get<int64_t>() == st.st_size && mtime != j.end() &&
        mtime->is_number_integer() && mtime->get<int64_t>() == MtimeNs(st))
      return std::make_pair(etag->get<std::string>(), std::move(attributes));
  }
  Md5 md5;
  if (std::string why = StreamFile(fd, 0, st.st_size, &md5, -1); !why.empty())
    return S3Error(Code::kInternal, "InternalError", "cannot compute the object's MD5: " + why);
  std::string etag = ToHex(md5.Final());
  struct stat after;
  if (::fstat(fd, &after) == 0 && after.st_size == st.st_size && MtimeNs(after) == MtimeNs(st))
    WriteXattr(fd, ObjectXattr(etag, st, attributes));
  return std::make_pair(std::move(etag), std::move(attributes));
}

// fsync of a directory given as an O_PATH descriptor (which fsync itself refuses).
bool SyncDir(int dir) {
  Fd d(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return d.ok() && ::fsync(d.get()) == 0;
}

// An object being written: a temporary file beside its key (TempLeafName, which no listing
// shows), renamed over the key by Commit; removed when it goes uncommitted, so a failure leaves
// nothing behind.
class PendingFile {
 public:
  // `dir`: the folder of the key (O_PATH); `leaf`: the key's name in it.
  // `gone`: the error when the folder has been removed meanwhile (an aborted upload).
  static StatusOr<std::unique_ptr<PendingFile>> Create(Fd dir, std::string leaf, std::string where,
                                                       std::optional<Status> gone = std::nullopt) {
    std::unique_ptr<PendingFile> p(new PendingFile(std::move(dir), std::move(leaf), std::move(where)));
    p->gone_ = std::move(gone);
    p->tmp_ = TempLeafName();
    p->fd_ = Fd(::openat(p->dir_.get(), p->tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!p->fd_.ok()) {
      int err = errno;
      p->tmp_.clear();
      if (err == ENOENT && gone) return *gone;
      return S3Error(Code::kInternal, "InternalError", "cannot write " + p->where_ + ": " + std::strerror(err));
    }
    return p;
  }
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;
  ~PendingFile() {
    if (!tmp_.empty()) ::unlinkat(dir_.get(), tmp_.c_str(), 0);
  }

  int fd() const { return fd_.get(); }

  Status Write(std::string_view data) {
    for (size_t done = 0; done < data.size();) {
      ssize_t w = ::write(fd_.get(), data.data() + done, data.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Failed(std::strerror(errno));
      done += static_cast<size_t>(w);
    }
    return Status::Ok();
  }

  // Writes `data` and returns its MD5, hashing each piece just before writing it, so the bytes
  // come from memory once (the piece is still in cache when write() copies it). Every 8 MiB
  // written are handed to the disk at once (sync_file_range starts their writeback without
  // waiting), so Commit's fsync, which still makes all of it durable, finds little left to do.
  StatusOr<std::string> WriteHashed(std::string_view data) {
    constexpr size_t kPiece = 1 << 20;
    constexpr size_t kWriteBehind = 8 << 20;
    Md5 md5;
    size_t started = 0;  // bytes whose writeback has been started
    for (size_t at = 0; at < data.size(); at += kPiece) {
      std::string_view piece = data.substr(at, kPiece);
      md5.Update(piece.data(), piece.size());
      TY_RETURN_IF_ERROR(Write(piece));
      size_t written = at + piece.size();
      if (written - started >= kWriteBehind) {
        // Advisory: where it is refused (a file system without it) the fsync does all the work.
        (void)::sync_file_range(fd_.get(), static_cast<off_t>(started), static_cast<off_t>(written - started),
                                SYNC_FILE_RANGE_WRITE);
        started = written;
      }
    }
    return md5.Final();
  }

  Status Failed(const std::string& why) const {
    return S3Error(Code::kInternal, "InternalError", "cannot write " + where_ + ": " + why);
  }

  // Records `etag` and `attributes` on the file, makes it durable and renames it over the key,
  // then makes the rename durable. Returns the file's stat.
  StatusOr<struct stat> Commit(const std::string& etag, const ObjectAttributes& attributes) {
    struct stat st;
    if (::fstat(fd_.get(), &st) != 0) return Failed(std::strerror(errno));
    WriteXattr(fd_.get(), ObjectXattr(etag, st, attributes));
    if (::fsync(fd_.get()) != 0) return Failed(std::string("fsync: ") + std::strerror(errno));
    if (::close(fd_.release()) != 0) return Failed(std::string("close: ") + std::strerror(errno));
    int renamed = ::renameat(dir_.get(), tmp_.c_str(), dir_.get(), leaf_.c_str());
    // An empty folder at the key (left by deleted objects) gives way; one holding objects does not.
    if (renamed != 0 && errno == EISDIR && ::unlinkat(dir_.get(), leaf_.c_str(), AT_REMOVEDIR) == 0)
      renamed = ::renameat(dir_.get(), tmp_.c_str(), dir_.get(), leaf_.c_str());
    if (renamed != 0) {
      if (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST)
        return S3Error(Code::kInvalidArgument, "InvalidArgument",
                       "cannot write " + where_ + ": a folder of that name holds other objects (a key cannot be "
                       "both an object and a folder of objects here)");
      if (errno == ENOENT && gone_) return *gone_;
      return Failed(std::string("rename: ") + std::strerror(errno));
    }
    tmp_.clear();
    if (!SyncDir(dir_.get())) return Failed(std::string("fsync of its folder: ") + std::strerror(errno));
    return st;
  }

 private:
  PendingFile(Fd dir, std::string leaf, std::string where)
      : dir_(std::move(dir)), leaf_(std::move(leaf)), where_(std::move(where)) {}
  Fd dir_;
  std::string leaf_, where_, tmp_;  // tmp_: "" once renamed (or never made)
  std::optional<Status> gone_;
  Fd fd_;
};

// The MD5 of an upload is its ETag. With a Content-MD5 to check it is computed before anything is
// written (a BadDigest must leave no folder or file behind); without one (what current SDKs send,
// beside an x-amz-checksum-* the endpoint has checked) it is computed as the bytes are written,
// saving a pass over a body of up to hundreds of MiB. Returns the digest, or "" for "not yet".
StatusOr<std::string> DigestBeforeWriting(std::string_view data, const std::optional<std::string>& content_md5) {
  if (!content_md5) return std::string();
  std::string digest = Md5Of(data);
  TY_RETURN_IF_ERROR(CheckContentMd5(content_md5, digest));
  return digest;
}

// Writes `data` to `out`; returns its MD5 (`digest` when DigestBeforeWriting computed it).
StatusOr<std::string> WriteDigested(PendingFile& out, std::string_view data, const std::string& digest) {
  if (digest.empty()) return out.WriteHashed(data);
  TY_RETURN_IF_ERROR(out.Write(data));
  return digest;
}

// Writes `content` as the file `name` in `dir` (O_PATH), atomically and durably.
Status WriteSmallFile(int dir, const std::string& name, const std::string& content, const std::string& where) {
  Fd d(::dup(dir));
  auto p = PendingFile::Create(std::move(d), name, where);
  if (!p.ok()) return p.status();
  TY_RETURN_IF_ERROR((*p)->Write(content));
  auto done = (*p)->Commit("", {});
  return done.ok() ? Status::Ok() : done.status();
}

StatusOr<std::string> ReadSmallFile(int dir, const char* name) {
  Fd f(::openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st;
  if (!f.ok() || ::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20))
    return NotFound(std::string(name) + " is missing");
  std::string out(static_cast<size_t>(st.st_size), '\0');
  ssize_t n = ::pread(f.get(), out.data(), out.size(), 0);
  if (n < 0) return Internal(std::strerror(errno));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string PartName(int part_number) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "part-%05d", part_number);
  return buf;
}

// The part number a file name "part-00001" stands for, or 0.
int PartNumberOf(std::string_view name) {
  if (name.size() != 10 || !StartsWith(name, "part-")) return 0;
  int n = 0;
  for (char c : name.substr(5)) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + (c - '0');
  }
  return n >= 1 && n <= kMaxPartNumber ? n : 0;
}

// 16 hex digits of the wall clock's nanoseconds, then 16 random ones: ids sort in the order the
// uploads were started (S3 lists one key's uploads by initiation time and pages by upload id).
std::string NewUploadId() {
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  char time_hex[17];
  std::snprintf(time_hex, sizeof time_hex, "%016llx",
                static_cast<unsigned long long>(now.tv_sec) * 1000000000ULL + static_cast<unsigned long long>(now.tv_nsec));
  return time_hex + RandomHex((kUploadIdHexDigits - 16) / 2);
}

bool IsUploadId(std::string_view id) {
  return id.size() == kUploadIdHexDigits &&
         std::all_of(id.begin(), id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string Mib(int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Whether a write of `bytes` may start (SpaceLimits::reserve_bytes): the file system's free space
// less the writes already admitted and this one stays at or above the reserve. An unknown free
// space (-1) admits it. Pure.
Status AdmitWrite(const SpaceLimits& limits, int64_t free_bytes, int64_t writing, int64_t bytes, const std::string& what) {
  if (limits.reserve_bytes <= 0 || free_bytes < 0) return Status::Ok();
  const int64_t left = free_bytes - writing - bytes;
  if (left >= limits.reserve_bytes) return Status::Ok();
  return S3Error(Code::kLimitExceeded, "InsufficientStorage",
                 what + " (" + std::to_string(bytes) + " bytes) would leave the data dir's file system with less free "
                 "space than its reserve of " + Mib(limits.reserve_bytes) + " ([server] data_dir_reserve_mib; " +
                 Mib(std::max<int64_t>(free_bytes - writing, 0)) + " free beside the writes in progress): delete "
                 "objects or abort incomplete multipart uploads, or retry once space is freed");
}

// Whether an UploadPart of `bytes` may start (SpaceLimits::upload_bytes_per_initiator): `held`
// counts its initiator's incomplete uploads' parts (less the part it replaces) and the parts it
// is writing now. Pure.
Status AdmitPart(const SpaceLimits& limits, const std::string& initiator, int64_t held, int64_t bytes) {
  if (limits.upload_bytes_per_initiator <= 0 || held + bytes <= limits.upload_bytes_per_initiator) return Status::Ok();
  return S3Error(Code::kLimitExceeded, "QuotaExceeded",
                 "the incomplete multipart uploads of " + (initiator.empty() ? std::string("this caller") : initiator) +
                 " hold " + std::to_string(held) + " bytes; this part of " + std::to_string(bytes) +
                 " bytes would take them past the quota of " + std::to_string(limits.upload_bytes_per_initiator) +
                 " bytes ([s3] max_incomplete_upload_bytes_per_user): complete or abort uploads "
                 "(ListMultipartUploads lists them) first");
}

int64_t StatvfsFree(const std::string& dir) {
  struct statvfs v {};
  if (::statvfs(dir.c_str(), &v) != 0) return -1;
  return static_cast<int64_t>(v.f_bavail) * static_cast<int64_t>(v.f_frsize);
}

class DirReader : public ObjectReader {
 public:
  DirReader(Fd fd, ObjectMeta meta) : fd_(std::move(fd)), meta_(std::move(meta)) {}
  const ObjectMeta& meta() const override { return meta_; }
  StatusOr<size_t> ReadAt(int64_t offset, size_t max, std::string* out) override {
    if (offset < 0) return S3Error(Code::kInvalidArgument, "InvalidRange", "a read starts at a negative offset");
    size_t old = out->size();
    out->resize(old + max);
    size_t got = 0;
    while (got < max) {
      ssize_t n = ::pread(fd_.get(), out->data() + old + got, max - got, offset + static_cast<int64_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        out->resize(old);
        return S3Error(Code::kInternal, "InternalError", "cannot read " + meta_.key + ": " + std::strerror(errno));
      }
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    out->resize(old + got);
    return got;
  }

 private:
  const Fd fd_;  // the version opened: a later write renames a new file over the key
  const ObjectMeta meta_;
};

// The directory store's buckets as S3 sees them. Thread-safe: every call works on descriptors it
// opens itself, and concurrent writers meet only in renames; the one mutable state, the space
// accounting (SpaceLimits), is guarded by space_mu_ and never held across a write.
class DirBucketStore : public BucketStore {
 public:
  DirBucketStore(std::string root, SpaceLimits limits, FreeSpaceProbe free_space)
      : root_(std::move(root)), limits_(limits), free_space_(std::move(free_space)) {
    std::error_code ec;
    std::filesystem::create_directories(root_, ec);
    if (!free_space_) free_space_ = [dir = root_] { return StatvfsFree(dir); };
  }

  StatusOr<std::vector<BucketInfo>> ListBuckets() override {
    Fd root = Root();
    int readable = root.ok() ? ::openat(root.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    DIR* d = readable >= 0 ? ::fdopendir(readable) : nullptr;
    if (!d) {
      if (readable >= 0) ::close(readable);
      return S3Error(Code::kInternal, "InternalError", "cannot read " + root_ + ": " + std::strerror(errno));
    }
    std::vector<BucketInfo> out;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (!CheckBucketName(name).ok()) continue;
      Fd b(::openat(::dirfd(d), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (b.ok()) out.push_back(BucketInfo{name, CreatedMs(b.get())});
    }
    ::closedir(d);
    std::sort(out.begin(), out.end(), [](const BucketInfo& a, const BucketInfo& b) { return a.name < b.name; });
    return out;
  }

  Status CreateBucket(const std::string& bucket) override {
    TY_RETURN_IF_ERROR(CheckBucket(bucket));
    Fd root = Root();
    if (!root.ok() || ::mkdirat(root.get(), bucket.c_str(), 0755) != 0) {
      if (errno == EEXIST)
        return S3Error(Code::kAlreadyExists, "BucketAlreadyOwnedByYou", "the bucket " + bucket + " already exists");
      return S3Error(Code::kInternal, "InternalError", "cannot make the bucket " + bucket + ": " + std::strerror(errno));
    }
    Fd b(::openat(root.get(), bucket.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    if (b.ok() && ::fstat(b.get(), &st) == 0) WriteXattr(b.get(), json{{"created_ms", MtimeMs(st)}});
    if (!SyncDir(root.get()))
      return S3Error(Code::kInternal, "InternalError", "cannot make the bucket " + bucket + " durable: " + std::strerror(errno));
    return Status::Ok();
  }

  Status HeadBucket(const std::string& bucket) override {
    TY_RETURN_IF_ERROR(CheckBucket(bucket));
    return Bucket(bucket).status();
  }

  Status DeleteBucket(const std::string& bucket) override {
    TY_RETURN_IF_ERROR(CheckBucket(bucket));
    auto b = Bucket(bucket);
    if (!b.ok()) return b.status();
    auto uploads = AllUploads(bucket);
    if (!uploads.ok()) return uploads.status();
    if (!uploads->empty())
      return S3Error(Code::kFailedPrecondition, "BucketNotEmpty",
                     "the bucket " + bucket + " has " + std::to_string(uploads->size()) +
                         " multipart upload(s) in progress (abort them first)");
    // Anything but a folder counts (an object, a symlink, a write in progress): only empty folders
    // are removed with the bucket, and nothing is removed unless all of it can be.
    std::string found;
    TY_RETURN_IF_ERROR(FindContent(b->get(), "", &found));
    if (!found.empty())
      return S3Error(Code::kFailedPrecondition, "BucketNotEmpty",
                     "the bucket " + bucket + " is not empty (it holds '" + found + "')");
    RemoveEmptyFolders(b->get());
    Fd root = Root();
    if (::unlinkat(root.get(), bucket.c_str(), AT_REMOVEDIR) != 0) {
      if (errno == ENOTEMPTY || errno == EEXIST)
        return S3Error(Code::kFailedPrecondition, "BucketNotEmpty", "the bucket " + bucket + " is not empty");
      return S3Error(Code::kInternal, "InternalError",
                     "cannot remove the bucket " + bucket + " (" + root_ + "/" + bucket + "): " + std::strerror(errno));
    }
    (void)SyncDir(root.get());  // the bucket is gone either way; a crash may bring back an empty one
    return Status::Ok();
  }

  StatusOr<ObjectMeta> PutObject(const std::string& bucket, const std::string& key, std::string_view data,
                                 const ObjectAttributes& attributes,
                                 const std::optional<std::string>& content_md5) override {
    TY_RETURN_IF_ERROR(CheckKey(bucket, key));
    auto digest = DigestBeforeWriting(data, content_md5);
    if (!digest.ok()) return digest.status();
    auto admitted = Admit(static_cast<int64_t>(data.size()), "writing " + Where(bucket, key));
    if (!admitted.ok()) return admitted.status();
    auto out = Pending(bucket, key);
    if (!out.ok()) return out.status();
    auto written = WriteDigested(**out, data, *digest);
    if (!written.ok()) return written.status();
    std::string etag = ToHex(*written);
    auto st = (*out)->Commit(etag, attributes);
    if (!st.ok()) return st.status();
    return ObjectMeta{key, static_cast<int64_t>(st->st_size), etag, MtimeMs(*st), attributes};
  }

  StatusOr<ObjectMeta> HeadObject(const std::string& bucket, const std::string& key) override {
    auto r = Open(bucket, key);
    if (!r.ok()) return r.status();
    return r->second;
  }

  StatusOr<std::unique_ptr<ObjectReader>> OpenObject(const std::string& bucket, const std::string& key) override {
    auto r = Open(bucket, key);
    if (!r.ok()) return r.status();
    return std::unique_ptr<ObjectReader>(std::make_unique<DirReader>(std::move(r->first), std::move(r->second)));
  }

  Status DeleteObject(const std::string& bucket, const std::string& key) override {
    TY_RETURN_IF_ERROR(CheckKey(bucket, key));
    auto b = Bucket(bucket);
    if (!b.ok()) return b.status();
    size_t slash = key.rfind('/');
    Fd dir = OpenDirBeneath(b->get(), slash == std::string::npos ? "" : key.substr(0, slash), false);
    if (!dir.ok()) return Status::Ok();  // no such folder, so no such object: S3's delete succeeds
    std::string leaf = slash == std::string::npos ? key : key.substr(slash + 1);
    if (::unlinkat(dir.get(), leaf.c_str(), 0) != 0) {
      if (errno == ENOENT || errno == EISDIR) return Status::Ok();  // a folder is not an object
      return S3Error(Code::kInternal, "InternalError", "cannot delete " + Where(bucket, key) + ": " + std::strerror(errno));
    }
    if (!SyncDir(dir.get()))
      return S3Error(Code::kInternal, "InternalError",
                     "cannot make the delete of " + Where(bucket, key) + " durable: " + std::strerror(errno));
    return Status::Ok();
  }

  StatusOr<ObjectMeta> CopyObject(const std::string& src_bucket, const std::string& src_key, const std::string& bucket,
                                  const std::string& key, const std::optional<ObjectAttributes>& replace) override {
    TY_RETURN_IF_ERROR(CheckKey(bucket, key));
    if (src_bucket == bucket && src_key == key && !replace)
      return S3Error(Code::kInvalidArgument, "InvalidRequest",
                     "this copy request is illegal because it is trying to copy an object to itself without changing "
                     "the object's metadata (use the REPLACE metadata directive)");
    auto src = Open(src_bucket, src_key);
    if (!src.ok()) return src.status();
    const ObjectMeta& from = src->second;
    ObjectAttributes attributes = replace ? *replace : from.attributes;
    auto admitted = Admit(from.size, "copying to " + Where(bucket, key));
    if (!admitted.ok()) return admitted.status();
    auto out = Pending(bucket, key);
    if (!out.ok()) return out.status();
    // A single-part source's ETag is the MD5 of the content, which the copy shares. A copy of a
    // multipart object is one whole object, and S3 gives it the MD5 of its content: computed
    // while copying.
    std::string etag = from.etag;
    std::string why;
    if (from.etag.find('-') == std::string::npos) {
      why = CopyRange(src->first.get(), 0, from.size, (*out)->fd());
    } else {
      Md5 md5;
      why = StreamFile(src->first.get(), 0, from.size, &md5, (*out)->fd());
      etag = ToHex(md5.Final());
    }
    if (!why.empty()) return (*out)->Failed("copying " + Where(src_bucket, src_key) + ": " + why);
    auto st = (*out)->Commit(etag, attributes);
    if (!st.ok()) return st.status();
    return ObjectMeta{key, static_cast<int64_t>(st->st_size), etag, MtimeMs(*st), attributes};
  }

  StatusOr<ListPage> ListObjects(const std::string& bucket, const ListQuery& q) override {
    TY_RETURN_IF_ERROR(CheckBucket(bucket));
    if (q.max_keys < 0)
      return S3Error(Code::kInvalidArgument, "InvalidArgument", "max-keys is negative (" + std::to_string(q.max_keys) + ")");
    auto b = Bucket(bucket);
    if (!b.ok()) return b.status();
    ListPage page;
    const size_t max = static_cast<size_t>(std::min(q.max_keys, kMaxListKeys));
    if (max == 0) return page;
    // Only the folder the prefix ends in, and beneath it, can hold matching keys; a prefix whose
    // folder part is no valid key matches none.
    const std::string& prefix = q.prefix;
    size_t slash = prefix.rfind('/');
    std::string dir_part = slash == std::string::npos ? "" : prefix.substr(0, slash);
    if (!dir_part.empty() && !CheckObjectKey(dir_part, KeyUse::kObject).ok()) return page;
    Fd start = OpenDirBeneath(b->get(), dir_part, false);
    if (!start.ok()) return page;

    const std::string& after = q.start_after;
    // The common prefix `name` rolls up into, if any: up to and including the first delimiter
    // after the prefix.
    auto rollup = [&](const std::string& name) -> std::optional<std::string> {
      if (q.delimiter.empty()) return std::nullopt;
      size_t at = name.find(q.delimiter, prefix.size());
      if (at == std::string::npos) return std::nullopt;
      return name.substr(0, at + q.delimiter.size());
    };
    // The smallest max + 1 entries seen so far (objects with their stat, common prefixes with
    // none): one more than the page tells whether it is truncated, and memory stays bounded by
    // the page whatever the bucket holds.
    std::map<std::string, std::optional<struct stat>> entries;
    auto wanted = [&](const std::string& name) { return entries.size() <= max || name < entries.rbegin()->first; };
    auto add = [&](const std::string& name, std::optional<struct stat> st) {
      if (!wanted(name)) return;
      entries.emplace(name, st);
      if (entries.size() > max + 1) entries.erase(std::prev(entries.end()));
    };
    Status walked = WalkObjects(
        std::move(start), dir_part.empty() ? "" : dir_part + "/",
        [&](int parent, const char* name, const std::string& sub) {
          if (!StartsWith(sub, prefix) && !StartsWith(prefix, sub)) return false;
          // Every key beneath starts with `sub`: all of them sort at or before start_after.
          if (sub < after && !StartsWith(after, sub)) return false;
          if (!StartsWith(sub, prefix)) return true;  // a folder the prefix goes through
          std::optional<std::string> common = rollup(sub);
          if (common && common->size() <= sub.size()) {
            // The whole folder rolls up into one common prefix, listed when it holds an object.
            if (*common > after && wanted(*common) && !entries.count(*common) && HoldsObject(parent, name, sub))
              add(*common, std::nullopt);
            return false;
          }
          return wanted(sub);  // everything beneath sorts after `sub`
        },
        [&](const std::string& key, const struct stat& st) {
          if (!StartsWith(key, prefix) || key <= after) return true;
          if (std::optional<std::string> common = rollup(key)) {
            if (*common > after) add(*common, std::nullopt);
          } else {
            add(key, st);
          }
          return true;
        });
    if (!walked.ok())
      return S3Error(Code::kInternal, "InternalError", "ListObjects " + Where(bucket, prefix) + ": " + walked.message());

    page.truncated = entries.size() > max;
    if (page.truncated) entries.erase(std::prev(entries.end()));
    for (const auto& [name, st] : entries) {
      if (st) page.objects.push_back(ObjectMeta{name, static_cast<int64_t>(st->st_size), "", MtimeMs(*st), {}});
      else page.common_prefixes.push_back(name);
    }
    if (!entries.empty()) page.last = entries.rbegin()->first;
    // ETags for this page only: an object without a current record is hashed here, once.
    std::vector<ObjectMeta> listed;
    for (ObjectMeta& m : page.objects) {
      auto opened = OpenIn(b->get(), bucket, m.key);
      if (!opened.ok()) continue;  // deleted since the walk
      opened->second.attributes = {};
      listed.push_back(std::move(opened->second));
    }
    page.objects = std::move(listed);
    return page;
  }

  StatusOr<std::string> CreateMultipartUpload(const std::string& bucket, const std::string& key,
                                              const ObjectAttributes& attributes, const std::string& initiator) override {
    TY_RETURN_IF_ERROR(CheckKey(bucket, key));
    auto b = Bucket(bucket);
    if (!b.ok()) return b.status();
    Fd root = Root();
    if (::mkdirat(root.get(), kUploadsDir, 0700) != 0 && errno != EEXIST)
      return S3Error(Code::kInternal, "InternalError", "cannot make " + root_ + "/" + kUploadsDir + ": " + std::strerror(errno));
    Fd uploads(::openat(root.get(), kUploadsDir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    std::string id = NewUploadId();
    if (!uploads.ok() || ::mkdirat(uploads.get(), id.c_str(), 0700) != 0)
      return S3Error(Code::kInternal, "InternalError", "cannot start an upload to " + Where(bucket, key) + ": " + std::strerror(errno));
    Fd dir(::openat(uploads.get(), id.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    Status written = dir.ok() && ::fstat(dir.get(), &st) == 0
                         ? WriteSmallFile(dir.get(), kUploadRecord,
                                          json{{"bucket", bucket},
                                               {"key", key},
                                               {"attributes", AttributesJson(attributes)},
                                               {"initiated_ms", MtimeMs(st)},
                                               {"initiator", initiator}}
                                              .dump(),
                                          "the upload to " + Where(bucket, key))
                         : S3Error(Code::kInternal, "InternalError", std::strerror(errno));
    if (!written.ok() || !SyncDir(uploads.get())) {
      RemoveUpload(id);
      return written.ok() ? S3Error(Code::kInternal, "InternalError", "cannot make the upload durable") : written;
    }
    {
      MutexLock lock(space_mu_);
      LoadUsage();
      usage_[id].initiator = initiator;
    }
    return id;
  }

  StatusOr<std::string> UploadPart(const std::string& bucket, const std::string& key, const std::string& upload_id,
                                   int part_number, std::string_view data,
                                   const std::optional<std::string>& content_md5) override {
    TY_RETURN_IF_ERROR(CheckKey(bucket, key));
    if (part_number < 1 || part_number > kMaxPartNumber)
      return S3Error(Code::kInvalidArgument, "InvalidArgument",
                     "Part number must be an integer between 1 and 10000, inclusive (got " +
                         std::to_string(part_number) + ")");
    auto upload = OpenUpload(bucket, key, upload_id);
    if (!upload.ok()) return upload.status();
    auto digest = DigestBeforeWriting(data, content_md5);
    if (!digest.ok()) return digest.status();
    const std::string initiator = upload->record.value("initiator", "");
    auto admitted = Admit(static_cast<int64_t>(data.size()),
                          "part " + std::to_string(part_number) + " of the upload " + upload_id + " to " + Where(bucket, key),
                          PartOf{&initiator, &upload_id, part_number});
    if (!admitted.ok()) return admitted.status();
    auto out = PendingFile::Create(std::move(upload->dir), PartName(part_number),
                                   "the upload " + upload_id + " to " + Where(bucket, key),
                                   S3Error(Code::kNotFound, "NoSuchUpload",
                                           "the upload " + upload_id + " was aborted or completed meanwhile"));
    if (!out.ok()) return out.status();
    auto written = WriteDigested(**out, data, *digest);
    if (!written.ok()) return written.status();
    std::string etag = ToHex(*written);
    auto st = (*out)->Commit(etag, {});
    if (!st.ok()) return st.status();
    {
      MutexLock lock(space_mu_);
      // An upload aborted or completed meanwhile took its parts with it.
      if (auto u = usage_.find(upload_id); u != usage_.end()) u->second.parts[part_number] = static_cast<int64_t>(st->st_size);
    }
    return etag;
  }

  StatusOr<std::vector<PartInfo>> ListParts(const std::string& bucket, const std::string& key,
                                            const std::string& upload_id) override {
    TY_RETURN_IF_ERROR(CheckKey(bucket, key));
    auto upload = OpenUpload(bucket, key, upload_id);
    if (!upload.ok()) return upload.status();
    auto parts = Parts(upload->dir.get());
    if (!parts.ok()) return parts.status();
    std::vector<PartInfo> out;
    for (auto& [number, part] : *parts) out.push_back(part.info);
    return out;
  }

  // Every upload to `bucket`, in (key, upload id) order.
  StatusOr<std::vector<UploadInfo>> AllUploads(const std::string& bucket) const {
    TY_RETURN_IF_ERROR(CheckBucket(bucket));
    auto b = Bucket(bucket);
    if (!b.ok()) return b.status();
    std::vector<UploadInfo> out;
    Fd root = Root();
    int readable = root.ok() ? ::openat(root.get(), kUploadsDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    DIR* d = readable >= 0 ? ::fdopendir(readable) : nullptr;
    if (!d) {
      if (readable >= 0) ::close(readable);
      return out;  // no upload was ever started
    }
    while (dirent* e = ::readdir(d)) {
      if (!IsUploadId(e->d_name)) continue;
      Fd dir(::openat(::dirfd(d), e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      auto record = dir.ok() ? ReadRecord(dir.get()) : StatusOr<json>(NotFound(""));
      if (!record.ok() || (*record)["bucket"] != bucket) continue;
      out.push_back(UploadInfo{(*record)["key"].get<std::string>(), e->d_name, (*record)["initiated_ms"].get<int64_t>(),
                               record->value("initiator", "")});
    }
    ::closedir(d);
    std::sort(out.begin(), out.end(), [](const UploadInfo& a, const UploadInfo& b) {
      return std::tie(a.key, a.upload_id) < std::tie(b.key, b.upload_id);
    });
    return out;
  }

  StatusOr<UploadPage> ListMultipartUploads(const std::string& bucket, const UploadQuery& q) override {
    TY_RETURN_IF_ERROR(CheckBucket(bucket));
    if (q.max_uploads < 1 || q.max_uploads > kMaxListKeys)
      return S3Error(Code::kInvalidArgument, "InvalidArgument",
                     "max-uploads must be between 1 and 1000 (got " + std::to_string(q.max_uploads) + ")");
    auto all = AllUploads(bucket);
    if (!all.ok()) return all.status();
    // Past the markers: a key after key_marker, or key_marker's own uploads after upload_id_marker.
    auto past = [&](const UploadInfo& u) {
      if (q.key_marker.empty()) return true;
      if (q.upload_id_marker.empty()) return u.key > q.key_marker;
      return std::tie(u.key, u.upload_id) > std::tie(q.key_marker, q.upload_id_marker);
    };
    UploadPage page;
    int shown = 0;
    for (const UploadInfo& u : *all) {
      if (!StartsWith(u.key, q.prefix) || !past(u)) continue;
      // Keys with the delimiter after the prefix roll up into one common prefix, listed once and
      // never again on a later page (whose key_marker is that prefix or beyond).
      size_t at = q.delimiter.empty() ? std::string::npos : u.key.find(q.delimiter, q.prefix.size());
      std::string common = at == std::string::npos ? "" : u.key.substr(0, at + q.delimiter.size());
      if (!common.empty() && (common <= q.key_marker ||
                              (!page.common_prefixes.empty() && page.common_prefixes.back() == common)))
        continue;
      if (shown == q.max_uploads) {
        page.truncated = true;
        break;
      }
      ++shown;
      if (common.empty()) {
        page.uploads.push_back(u);
        page.next_key_marker = u.key;
        page.next_upload_id_marker = u.upload_id;
      } else {
        page.common_prefixes.push_back(common);
        page.next_key_marker = common;
        page.next_upload_id_marker.clear();
      }
    }
    if (!page.truncated) {
      page.next_key_marker.clear();
      page.next_upload_id_marker.clear();
    }
    return page;
  }

  StatusOr<ObjectMeta> CompleteMultipartUpload(const std::string& bucket, const std::string& key,
                                               const std::string& upload_id,
                                               const std::vector<std::pair<int, std::string>>& parts) override {
    TY_RETURN_IF_ERROR(CheckKey(bucket, key));
    auto upload = OpenUpload(bucket, key, upload_id);
    if (!upload.ok()) return upload.status();
    if (parts.empty())
      return S3Error(Code::kInvalidArgument, "MalformedXML", "a multipart upload is completed with at least one part");
    for (size_t i = 1; i < parts.size(); ++i)
      if (parts[i].first <= parts[i - 1].first)
        return S3Error(Code::kInvalidArgument, "InvalidPartOrder",
                       "the list of parts was not in ascending order: part " + std::to_string(parts[i].first) +
                           " follows part " + std::to_string(parts[i - 1].first));
    auto uploaded = Parts(upload->dir.get());
    if (!uploaded.ok()) return uploaded.status();
    std::string digests;
    for (size_t i = 0; i < parts.size(); ++i) {
      auto [number, etag] = parts[i];
      auto it = uploaded->find(number);
      if (it == uploaded->end() || it->second.info.etag != BareEtag(etag))
        return S3Error(Code::kInvalidArgument, "InvalidPart",
                       "part " + std::to_string(number) + (it == uploaded->end() ? " was not uploaded" :
                       " has the ETag \"" + it->second.info.etag + "\", not " + etag));
      if (i + 1 < parts.size() && it->second.info.size < kMinPartBytes)
        return S3Error(Code::kInvalidArgument, "EntityTooSmall",
                       "part " + std::to_string(number) + " is " + std::to_string(it->second.info.size) +
                           " bytes; every part but the last must be at least " + std::to_string(kMinPartBytes));
      for (size_t k = 0; k + 1 < it->second.info.etag.size(); k += 2)
        digests += static_cast<char>(HexDigitValue(it->second.info.etag[k]) * 16 + HexDigitValue(it->second.info.etag[k + 1]));
    }
    int64_t total = 0;
    for (const auto& [number, etag] : parts) total += uploaded->at(number).info.size;
    // The object is written whole before the parts go (a copy where the file system cannot share
    // their blocks): for a moment it takes their size again.
    auto admitted = Admit(total, "completing the upload " + upload_id + " to " + Where(bucket, key));
    if (!admitted.ok()) return admitted.status();
    auto out = Pending(bucket, key);
    if (!out.ok()) return out.status();
    for (const auto& [number, etag] : parts) {
      const Part& part = uploaded->at(number);
      if (std::string why = CopyRange(part.fd.get(), 0, part.info.size, (*out)->fd()); !why.empty())
        return (*out)->Failed("part " + std::to_string(number) + ": " + why);
    }
    std::string etag = ToHex(Md5Of(digests)) + "-" + std::to_string(parts.size());
    ObjectAttributes attributes = AttributesFrom(upload->record["attributes"]);
    auto st = (*out)->Commit(etag, attributes);
    if (!st.ok()) return st.status();
    RemoveUpload(upload_id);
    return ObjectMeta{key, static_cast<int64_t>(st->st_size), etag, MtimeMs(*st), attributes};
  }

  Status AbortMultipartUpload(const std::string& bucket, const std::string& key, const std::string& upload_id) override {
    TY_RETURN_IF_ERROR(CheckKey(bucket, key));
    auto upload = OpenUpload(bucket, key, upload_id);
    if (!upload.ok()) return upload.status();
    if (!RemoveUpload(upload_id))
      return S3Error(Code::kInternal, "InternalError", "cannot remove the upload " + upload_id + ": " + std::strerror(errno));
    return Status::Ok();
  }

  SweepResult Sweep(int64_t temp_before_ms, std::optional<int64_t> uploads_before_ms) override {
    SweepResult out;
    auto failed = [&](const std::string& what) {
      if (out.first_error.ok()) out.first_error = S3Error(Code::kInternal, "InternalError", what);
    };
    auto remove_old = [&](int parent, const char* name, const struct stat& st) {
      if (MtimeMs(st) >= temp_before_ms) return;
      if (::unlinkat(parent, name, 0) == 0) ++out.temp_files;
      else if (errno != ENOENT) failed(std::string("cannot remove the temporary file ") + name + ": " + std::strerror(errno));
    };
    auto buckets = ListBuckets();
    if (!buckets.ok()) failed(buckets.status().message());
    for (const BucketInfo& b : buckets.ok() ? *buckets : std::vector<BucketInfo>{}) {
      Status walked = WalkTempFiles(OpenBucketDir(root_, b.name), remove_old);
      if (!walked.ok()) failed("the bucket " + b.name + ": " + walked.message());
    }

    Fd root = Root();
    int readable = root.ok() ? ::openat(root.get(), kUploadsDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    DIR* d = readable >= 0 ? ::fdopendir(readable) : nullptr;
    if (!d) {
      if (readable >= 0) ::close(readable);
      if (errno != ENOENT) failed("cannot read " + root_ + "/" + kUploadsDir + ": " + std::strerror(errno));
      return out;
    }
    std::vector<std::string> remove_uploads, remove_unrecorded;
    while (dirent* e = ::readdir(d)) {
      if (!IsUploadId(e->d_name)) continue;
      Fd dir(::openat(::dirfd(d), e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      struct stat st;
      if (!dir.ok() || ::fstat(dir.get(), &st) != 0) continue;
      auto record = ReadRecord(dir.get());
      if (!record.ok()) {
        // A start that never wrote its record (the server stopped in CreateMultipartUpload): no
        // client holds its id, so it goes as a temporary file would.
        if (MtimeMs(st) < temp_before_ms) remove_unrecorded.push_back(e->d_name);
      } else if (uploads_before_ms && (*record)["initiated_ms"].get<int64_t>() < *uploads_before_ms) {
        remove_uploads.push_back(e->d_name);
      } else {
        Status walked = WalkTempFiles(std::move(dir), remove_old);  // parts whose write was interrupted
        if (!walked.ok()) failed("the upload " + std::string(e->d_name) + ": " + walked.message());
      }
    }
    ::closedir(d);
    for (const std::string& id : remove_uploads) {
      if (RemoveUpload(id)) ++out.uploads;
      else failed("cannot remove the upload " + id + ": " + std::strerror(errno));
    }
    for (const std::string& id : remove_unrecorded) {
      if (RemoveUpload(id)) ++out.temp_files;
      else failed("cannot remove the unrecorded upload folder " + id + ": " + std::strerror(errno));
    }
    return out;
  }

 private:
  struct Upload {
    Fd dir;  // <root>/.uploads/<id>, O_PATH
    json record;
  };
  struct Part {
    Fd fd;  // open for reading
    PartInfo info;
  };

  static Status CheckBucket(const std::string& bucket) {
    Status st = CheckBucketName(bucket);
    return st.ok() ? st : S3Error(Code::kInvalidArgument, "InvalidBucketName", st.message());
  }

  static Status CheckKey(const std::string& bucket, const std::string& key) {
    TY_RETURN_IF_ERROR(CheckBucket(bucket));
    if (key.size() > kMaxKeyBytes)
      return S3Error(Code::kInvalidArgument, "KeyTooLongError",
                     "the object key is " + std::to_string(key.size()) + " bytes long; the limit is 1024");
    Status st = CheckObjectKey(key, KeyUse::kObject);
    if (st.ok()) st = CheckNotTempName(key);
    return st.ok() ? st : S3Error(Code::kInvalidArgument, "InvalidArgument", Where(bucket, key.substr(0, 200)) + ": " + st.message());
  }

  Fd Root() const { return Fd(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)); }

  // REQUIRES: CheckBucket(bucket) passed.
  StatusOr<Fd> Bucket(const std::string& bucket) const {
    Fd b = OpenBucketDir(root_, bucket);
    if (!b.ok()) return S3Error(Code::kNotFound, "NoSuchBucket", "the bucket " + bucket + " does not exist");
    return b;
  }

  // When the bucket's directory records no creation time (made by hand), its modification time.
  static int64_t CreatedMs(int readable_dir) {
    json j = ReadXattr(readable_dir);
    if (j.is_object() && j.contains("created_ms") && j["created_ms"].is_number_integer())
      return j["created_ms"].get<int64_t>();
    struct stat st;
    return ::fstat(readable_dir, &st) == 0 ? MtimeMs(st) : 0;
  }

  // A temporary file beside the key, its folders made. REQUIRES: CheckKey(bucket, key) passed.
  StatusOr<std::unique_ptr<PendingFile>> Pending(const std::string& bucket, const std::string& key) {
    auto b = Bucket(bucket);
    if (!b.ok()) return b.status();
    size_t slash = key.rfind('/');
    Fd dir = OpenDirBeneath(b->get(), slash == std::string::npos ? "" : key.substr(0, slash), true);
    if (!dir.ok()) {
      if (errno == ELOOP || errno == ENOTDIR || errno == EXDEV || errno == EEXIST)
        return S3Error(Code::kInvalidArgument, "InvalidArgument",
                       "cannot write " + Where(bucket, key) + ": a folder of the key is an object or a symlink "
                       "(symlinks in a bucket are never followed)");
      return S3Error(Code::kInternal, "InternalError", "cannot write " + Where(bucket, key) + ": " + std::strerror(errno));
    }
    return PendingFile::Create(std::move(dir), slash == std::string::npos ? key : key.substr(slash + 1), Where(bucket, key));
  }

  // The object's file, open for reading, and its metadata.
  StatusOr<std::pair<Fd, ObjectMeta>> Open(const std::string& bucket, const std::string& key) {
    TY_RETURN_IF_ERROR(CheckKey(bucket, key));
    auto b = Bucket(bucket);
    if (!b.ok()) return b.status();
    return OpenIn(b->get(), bucket, key);
  }

  StatusOr<std::pair<Fd, ObjectMeta>> OpenIn(int bucket_dir, const std::string& bucket, const std::string& key) {
    size_t slash = key.rfind('/');
    Fd dir = OpenDirBeneath(bucket_dir, slash == std::string::npos ? "" : key.substr(0, slash), false);
    std::string leaf = slash == std::string::npos ? key : key.substr(slash + 1);
    // O_NONBLOCK: a FIFO planted in the bucket must not hold the reader; it is not an object.
    Fd f(dir.ok() ? ::openat(dir.get(), leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1);
    struct stat st;
    if (!f.ok() || ::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode))
      return S3Error(Code::kNotFound, "NoSuchKey", Where(bucket, key) + " does not exist");
    auto etag = EtagOf(f.get(), st);
    if (!etag.ok()) return etag.status();
    ObjectMeta meta{key, static_cast<int64_t>(st.st_size), std::move(etag->first), MtimeMs(st), std::move(etag->second)};
    return std::make_pair(std::move(f), std::move(meta));
  }

  // Whether the folder `name` in `parent` holds an object anywhere beneath it.
  static bool HoldsObject(int parent, const char* name, const std::string& sub) {
    Fd dir(::openat(parent, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    bool found = false;
    if (!dir.ok()) return false;
    (void)WalkObjects(  // an unreadable folder lists no object
        std::move(dir), sub, [](int, const char*, const std::string&) { return true; },
        [&](const std::string&, const struct stat&) {
          found = true;
          return false;
        });
    return found;
  }

  // The first thing beneath `dir` that is not a folder, into *found ("" when there is none).
  static Status FindContent(int dir, const std::string& base, std::string* found) {
    int readable = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* d = readable >= 0 ? ::fdopendir(readable) : nullptr;
    if (!d) {
      if (readable >= 0) ::close(readable);
      return S3Error(Code::kInternal, "InternalError", "cannot read the folder '" + base + "': " + std::strerror(errno));
    }
    Status st;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat s;
      if (::fstatat(::dirfd(d), name.c_str(), &s, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (!S_ISDIR(s.st_mode)) {
        *found = base + name;
        break;
      }
      Fd child(::openat(::dirfd(d), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!child.ok()) continue;
      st = FindContent(child.get(), base + name + "/", found);
      if (!st.ok() || !found->empty()) break;
    }
    ::closedir(d);
    return st;
  }

  // Removes the empty folders beneath `dir`, deepest first (best effort).
  static void RemoveEmptyFolders(int dir) {
    int readable = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* d = readable >= 0 ? ::fdopendir(readable) : nullptr;
    if (!d) {
      if (readable >= 0) ::close(readable);
      return;
    }
    std::vector<std::string> folders;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      struct stat s;
      if (name != "." && name != ".." && ::fstatat(::dirfd(d), name.c_str(), &s, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISDIR(s.st_mode))
        folders.push_back(name);
    }
    for (const std::string& name : folders) {
      Fd child(::openat(::dirfd(d), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (child.ok()) RemoveEmptyFolders(child.get());
      ::unlinkat(::dirfd(d), name.c_str(), AT_REMOVEDIR);
    }
    ::closedir(d);
  }

  static StatusOr<json> ReadRecord(int upload_dir) {
    auto text = ReadSmallFile(upload_dir, kUploadRecord);
    if (!text.ok()) return text.status();
    json j = json::parse(*text, nullptr, false);
    if (!j.is_object() || !j.contains("bucket") || !j["bucket"].is_string() || !j.contains("key") ||
        !j["key"].is_string() || !j.contains("initiated_ms") || !j["initiated_ms"].is_number_integer())
      return Internal("the upload's record is not valid");
    return j;
  }

  // The upload `id` of `key` in `bucket`; NoSuchUpload for any other id, which is never a path.
  StatusOr<Upload> OpenUpload(const std::string& bucket, const std::string& key, const std::string& id) const {
    auto b = Bucket(bucket);
    if (!b.ok()) return b.status();
    Status none = S3Error(Code::kNotFound, "NoSuchUpload",
                          "the upload " + id.substr(0, 64) + " of " + Where(bucket, key) +
                              " does not exist (it may have been aborted or completed)");
    if (!IsUploadId(id)) return none;
    Fd root = Root();
    Fd dir = root.ok() ? OpenDirBeneath(root.get(), std::string(kUploadsDir) + "/" + id, false) : Fd();
    if (!dir.ok()) return none;
    auto record = ReadRecord(dir.get());
    if (!record.ok() || (*record)["bucket"] != bucket || (*record)["key"] != key) return none;
    return Upload{std::move(dir), std::move(*record)};
  }

  // The parts uploaded so far, open for reading, by part number.
  static StatusOr<std::map<int, Part>> Parts(int upload_dir) {
    int readable = ::openat(upload_dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* d = readable >= 0 ? ::fdopendir(readable) : nullptr;
    if (!d) {
      if (readable >= 0) ::close(readable);
      return S3Error(Code::kNotFound, "NoSuchUpload", "the upload is gone (aborted or completed)");
    }
    std::map<int, Part> out;
    Status failed;
    while (dirent* e = ::readdir(d)) {
      int number = PartNumberOf(e->d_name);
      if (number == 0) continue;
      Fd f(::openat(::dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      struct stat st;
      if (!f.ok() || ::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      auto etag = EtagOf(f.get(), st);
      if (!etag.ok()) {
        failed = etag.status();
        break;
      }
      out.emplace(number, Part{std::move(f), PartInfo{number, static_cast<int64_t>(st.st_size), etag->first, MtimeMs(st)}});
    }
    ::closedir(d);
    if (!failed.ok()) return failed;
    return out;
  }

  // Removes <root>/.uploads/<id> and what it holds. A part being written meanwhile makes the
  // folder non-empty again; its files are removed on the next round.
  bool RemoveUpload(const std::string& id) const {
    Fd root = Root();
    Fd uploads(root.ok() ? ::openat(root.get(), kUploadsDir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1);
    if (!uploads.ok()) return false;
    for (int round = 0; round < 5; ++round) {
      int readable = ::openat(uploads.get(), id.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      DIR* d = readable >= 0 ? ::fdopendir(readable) : nullptr;
      if (!d) {
        if (readable >= 0) ::close(readable);
        return errno == ENOENT;
      }
      while (dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ::unlinkat(::dirfd(d), e->d_name, 0);
      ::closedir(d);
      if (::unlinkat(uploads.get(), id.c_str(), AT_REMOVEDIR) == 0) {
        (void)SyncDir(uploads.get());  // an upload that comes back after a crash can still be aborted
        Forget(id);
        return true;
      }
      if (errno != ENOTEMPTY && errno != EEXIST) {
        if (errno == ENOENT) Forget(id);
        return errno == ENOENT;
      }
    }
    return false;
  }

  void Forget(const std::string& id) const {
    MutexLock lock(space_mu_);
    usage_.erase(id);
  }

  // ---- Space accounting (SpaceLimits) ----

  // The part an UploadPart writes: its upload's initiator and id, and its number.
  struct PartOf {
    const std::string* initiator = nullptr;  // null: not a part
    const std::string* upload_id = nullptr;
    int part_number = 0;
  };

  // A write's bytes, counted among the writes in progress until it ends (committed or not).
  class Admission {
   public:
    Admission(const DirBucketStore* store, int64_t bytes, std::string initiator, bool part)
        : store_(store), bytes_(bytes), initiator_(std::move(initiator)), part_(part) {}
    Admission(Admission&& o) noexcept
        : store_(std::exchange(o.store_, nullptr)), bytes_(o.bytes_), initiator_(std::move(o.initiator_)), part_(o.part_) {}
    Admission(const Admission&) = delete;
    Admission& operator=(const Admission&) = delete;
    Admission& operator=(Admission&&) = delete;
    ~Admission() {
      if (!store_) return;
      MutexLock lock(store_->space_mu_);
      store_->writing_ -= bytes_;
      if (part_ && (store_->writing_parts_[initiator_] -= bytes_) <= 0) store_->writing_parts_.erase(initiator_);
    }

   private:
    const DirBucketStore* store_;
    int64_t bytes_;
    std::string initiator_;
    bool part_;
  };

  // Admits a write of `bytes` (`what` names it in a refusal) under the reserve and, for a part,
  // its initiator's quota; the space is counted as taken until the Admission ends.
  StatusOr<Admission> Admit(int64_t bytes, const std::string& what) const { return Admit(bytes, what, PartOf{}); }
  StatusOr<Admission> Admit(int64_t bytes, const std::string& what, PartOf part) const {
    MutexLock lock(space_mu_);
    const int64_t free_bytes = limits_.reserve_bytes > 0 ? free_space_() : -1;
    TY_RETURN_IF_ERROR(AdmitWrite(limits_, free_bytes, writing_, bytes, what));
    if (part.initiator) {
      LoadUsage();
      int64_t held = 0;
      if (auto w = writing_parts_.find(*part.initiator); w != writing_parts_.end()) held += w->second;
      for (const auto& [id, u] : usage_) {
        if (u.initiator != *part.initiator) continue;
        for (const auto& [number, size] : u.parts)
          if (id != *part.upload_id || number != part.part_number) held += size;  // the part it replaces goes
      }
      TY_RETURN_IF_ERROR(AdmitPart(limits_, *part.initiator, held, bytes));
      writing_parts_[*part.initiator] += bytes;
    }
    writing_ += bytes;
    return Admission(this, bytes, part.initiator ? *part.initiator : "", part.initiator != nullptr);
  }

  // Reads what the incomplete uploads hold from <root>/.uploads, once (the store is then the only
  // writer there and keeps it up to date).
  void LoadUsage() const REQUIRES(space_mu_) {
    if (usage_loaded_) return;
    usage_loaded_ = true;
    Fd root = Root();
    int readable = root.ok() ? ::openat(root.get(), kUploadsDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    DIR* d = readable >= 0 ? ::fdopendir(readable) : nullptr;
    if (!d) {
      if (readable >= 0) ::close(readable);
      return;
    }
    while (dirent* e = ::readdir(d)) {
      if (!IsUploadId(e->d_name)) continue;
      int dir = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      DIR* parts = dir >= 0 ? ::fdopendir(dir) : nullptr;
      if (!parts) {
        if (dir >= 0) ::close(dir);
        continue;
      }
      auto record = ReadRecord(::dirfd(parts));
      if (record.ok()) {
        UploadUsage& u = usage_[e->d_name];
        u.initiator = record->value("initiator", "");
        while (dirent* p = ::readdir(parts)) {
          struct stat st;
          if (int n = PartNumberOf(p->d_name); n > 0 && ::fstatat(::dirfd(parts), p->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                                               S_ISREG(st.st_mode))
            u.parts[n] = static_cast<int64_t>(st.st_size);
        }
      }
      ::closedir(parts);
    }
    ::closedir(d);
  }

  // Constant after construction.
  const std::string root_;
  const SpaceLimits limits_;
  FreeSpaceProbe free_space_;

  // What an incomplete upload holds: who started it and its parts' sizes by number.
  struct UploadUsage {
    std::string initiator;
    std::map<int, int64_t> parts;
  };
  mutable Mutex space_mu_;
  mutable bool usage_loaded_ GUARDED_BY(space_mu_) = false;
  mutable std::map<std::string, UploadUsage> usage_ GUARDED_BY(space_mu_);  // by upload id
  mutable int64_t writing_ GUARDED_BY(space_mu_) = 0;                        // bytes of writes admitted, not yet ended
  mutable std::map<std::string, int64_t> writing_parts_ GUARDED_BY(space_mu_);  // of which parts, by initiator
};

}  // namespace

std::unique_ptr<BucketStore> NewBucketStore(std::string root, SpaceLimits limits, FreeSpaceProbe free_space) {
  return std::make_unique<DirBucketStore>(std::move(root), limits, std::move(free_space));
}

std::string S3Code(const Status& status) {
  const std::string& m = status.message();
  size_t colon = m.find(':');
  if (status.ok() || colon == std::string::npos || colon == 0 || colon > 40) return "InternalError";
  for (size_t i = 0; i < colon; ++i)
    if (!std::isalnum(static_cast<unsigned char>(m[i]))) return "InternalError";
  return m.substr(0, colon);
}

}  // namespace ty::objstore
