// The embedded buckets as S3 sees them: what `trainyard serve` answers on its S3 endpoint
// (api/s3_api.cpp) for <data_dir>/buckets. The same directories the directory store
// (objstore.h, NewDirStore) reads and writes for jobs: an object is a regular file at
// <root>/<bucket>/<key>, so whatever jobs write is what S3 clients read, and the reverse.
//
// What S3 has that a file does not (the MD5 ETag, the content type, user metadata) is kept in
// an extended attribute of the object's file, written on the temporary file before it is renamed
// into place: the content and its metadata appear together or not at all. A file with no such
// attribute (written by a job, or by hand) gets its MD5 computed on first use and stored then;
// an attribute whose recorded size and modification time no longer match the file is ignored the
// same way.
//
// Every write goes to a temporary file beside its object, is fsynced, renamed over the key and the
// folder fsynced: a reader sees the old object or the new one, never part of one, and an
// acknowledged write survives a crash. Keys are checked (core/object_key.h) and resolved beneath
// their bucket without following symlinks, as in the directory store.
//
// Errors: every failure's message starts with S3's error code and a colon, then a sentence
// (S3Code() reads it back), e.g. "NoSuchKey: s3://b/k does not exist". Codes used: NoSuchBucket,
// NoSuchKey, NoSuchUpload, BucketNotEmpty, BucketAlreadyOwnedByYou, InvalidBucketName,
// KeyTooLongError, InvalidArgument, InvalidPart, InvalidPartOrder, EntityTooSmall, BadDigest,
// InvalidRange, InternalError, InsufficientStorage, QuotaExceeded (SpaceLimits). The Status code
// is the matching kind (NotFound, AlreadyExists, FailedPrecondition, InvalidArgument,
// LimitExceeded, Internal).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ty::objstore {

// What a client sets on an object when it writes it, and gets back when it reads it.
struct ObjectAttributes {
  std::string content_type;  // "" = not given (served as binary/octet-stream)
  // Content-Encoding, Content-Disposition, Content-Language, Cache-Control, Expires: the standard
  // headers S3 stores and returns as given. Names as S3 returns them.
  std::vector<std::pair<std::string, std::string>> headers;
  // x-amz-meta-*: names lower-cased without the prefix, in the order given.
  std::vector<std::pair<std::string, std::string>> user_metadata;
};

struct ObjectMeta {
  std::string key;
  int64_t size = 0;
  std::string etag;  // without quotes: hex MD5 of the content, or "<hex md5 of the parts' md5s>-<parts>"
  int64_t last_modified_ms = 0;  // the file's modification time
  ObjectAttributes attributes;
};

struct BucketInfo {
  std::string name;
  int64_t created_ms = 0;
};

// ListObjectsV2's inputs, already decoded (the continuation token is the api layer's business:
// it hands back `start_after` = the last key or common prefix of the previous page).
struct ListQuery {
  std::string prefix;
  std::string delimiter;    // "" = none
  std::string start_after;  // keys (and common prefixes) <= this are skipped
  int max_keys = 1000;      // objects and common prefixes together; 0 gives an empty page
};

struct ListPage {
  std::vector<ObjectMeta> objects;  // key order; attributes are not filled in
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string last;  // the last key or common prefix in this page: the next page's start_after
};

struct PartInfo {
  int part_number = 0;
  int64_t size = 0;
  std::string etag;  // hex MD5 of the part, without quotes
  int64_t last_modified_ms = 0;
};

struct UploadInfo {
  std::string key;
  std::string upload_id;
  int64_t initiated_ms = 0;
  std::string initiator;  // who started it (CreateMultipartUpload's `initiator`)
};

// How much of their file system the buckets may take (docs/object-store.md, "Space"). Both
// limits are checked before a byte is written, counting the writes already in progress, so
// concurrent writers cannot together pass them:
//  - `reserve_bytes`: a write (PutObject, UploadPart, CopyObject, CompleteMultipartUpload) that
//    would leave the file system with less free space than this is refused with
//    InsufficientStorage. The server's data dir reserve: what the buckets write never takes the
//    disk under the level at which jobs stop starting (control/disk_reserve.cpp).
//  - `upload_bytes_per_initiator`: an UploadPart that would take the parts held by its
//    initiator's incomplete uploads past this is refused with QuotaExceeded.
// 0 turns either off.
struct SpaceLimits {
  int64_t reserve_bytes = 0;
  int64_t upload_bytes_per_initiator = 0;
};

// The free space, in bytes, of the file system the buckets are on (for an unprivileged writer);
// -1 when it cannot be read (writes are then let through: the write itself fails on a full disk).
using FreeSpaceProbe = std::function<int64_t()>;

// ListMultipartUploads' inputs. Uploads are listed in (key, upload id) order; an upload id begins
// with its initiation time, so the uploads of one key come in the order they were started.
struct UploadQuery {
  std::string prefix;
  std::string delimiter;         // "" = none
  std::string key_marker;        // with no upload_id_marker: keys <= this are skipped
  std::string upload_id_marker;  // with key_marker: (key, id) <= (key_marker, this) are skipped; ignored alone
  int max_uploads = 1000;        // uploads and common prefixes together, 1..1000
};

struct UploadPage {
  std::vector<UploadInfo> uploads;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  // When truncated: the next page's key_marker and upload_id_marker (the id is "" when the page
  // ends with a common prefix).
  std::string next_key_marker, next_upload_id_marker;
};

// What a sweep (BucketStore::Sweep) removed.
struct SweepResult {
  int64_t temp_files = 0;  // temporary files of interrupted writes (and upload folders never recorded)
  int64_t uploads = 0;     // multipart uploads aborted for their age
  Status first_error;      // the first thing that could not be read or removed (the sweep goes on)
};

// An open object: reads whole or by range from a file that stays open (a concurrent overwrite
// renames a new file over the key; this reader keeps reading the version it opened).
class ObjectReader {
 public:
  virtual ~ObjectReader() = default;
  virtual const ObjectMeta& meta() const = 0;
  // Up to `max` bytes from `offset` appended to *out; 0 bytes at the end.
  virtual StatusOr<size_t> ReadAt(int64_t offset, size_t max, std::string* out) = 0;
};

class BucketStore {
 public:
  virtual ~BucketStore() = default;

  virtual StatusOr<std::vector<BucketInfo>> ListBuckets() = 0;
  virtual Status CreateBucket(const std::string& bucket) = 0;  // BucketAlreadyOwnedByYou when it exists
  virtual Status HeadBucket(const std::string& bucket) = 0;
  virtual Status DeleteBucket(const std::string& bucket) = 0;  // BucketNotEmpty unless it holds no object and no upload

  // `content_md5`: the Content-MD5 header's value (base64) when the client sent one: BadDigest
  // when the data does not match, and nothing is written.
  virtual StatusOr<ObjectMeta> PutObject(const std::string& bucket, const std::string& key, std::string_view data,
                                         const ObjectAttributes& attributes,
                                         const std::optional<std::string>& content_md5 = std::nullopt) = 0;
  virtual StatusOr<ObjectMeta> HeadObject(const std::string& bucket, const std::string& key) = 0;
  virtual StatusOr<std::unique_ptr<ObjectReader>> OpenObject(const std::string& bucket, const std::string& key) = 0;
  // Succeeds when the key does not exist (as S3 does); NoSuchBucket when the bucket does not.
  virtual Status DeleteObject(const std::string& bucket, const std::string& key) = 0;
  // `replace`: the new object's attributes (x-amz-metadata-directive: REPLACE); nullopt copies them.
  virtual StatusOr<ObjectMeta> CopyObject(const std::string& src_bucket, const std::string& src_key,
                                          const std::string& bucket, const std::string& key,
                                          const std::optional<ObjectAttributes>& replace) = 0;
  virtual StatusOr<ListPage> ListObjects(const std::string& bucket, const ListQuery& query) = 0;

  // Multipart uploads. Parts are kept under <root>/.uploads/ (not a valid bucket name, so never
  // listed as one) until Complete or Abort; an upload id names exactly one bucket and key.
  // `initiator`: who starts it (the S3 endpoint: the caller's quota identity), recorded with the
  // upload; its parts count against that initiator's SpaceLimits::upload_bytes_per_initiator.
  virtual StatusOr<std::string> CreateMultipartUpload(const std::string& bucket, const std::string& key,
                                                      const ObjectAttributes& attributes,
                                                      const std::string& initiator = "") = 0;
  // part_number 1..10000; a part sent again replaces the earlier one. Returns the part's ETag.
  virtual StatusOr<std::string> UploadPart(const std::string& bucket, const std::string& key,
                                           const std::string& upload_id, int part_number, std::string_view data,
                                           const std::optional<std::string>& content_md5 = std::nullopt) = 0;
  virtual StatusOr<std::vector<PartInfo>> ListParts(const std::string& bucket, const std::string& key,
                                                    const std::string& upload_id) = 0;
  virtual StatusOr<UploadPage> ListMultipartUploads(const std::string& bucket, const UploadQuery& query) = 0;
  // `parts`: (part number, ETag as the client sent it, quotes allowed) in ascending part order
  // (InvalidPartOrder otherwise); each must be an uploaded part with that ETag (InvalidPart); every
  // part but the last at least 5 MiB (EntityTooSmall). The object appears whole, with the
  // multipart ETag; the upload's parts are removed.
  virtual StatusOr<ObjectMeta> CompleteMultipartUpload(const std::string& bucket, const std::string& key,
                                                       const std::string& upload_id,
                                                       const std::vector<std::pair<int, std::string>>& parts) = 0;
  virtual Status AbortMultipartUpload(const std::string& bucket, const std::string& key,
                                      const std::string& upload_id) = 0;

  // Removes what interrupted writes and forgotten uploads leave behind: in every bucket (and every
  // upload's folder) the temporary files (dir_walk.h's kTempPrefix) last modified before
  // `temp_before_ms`, and every multipart upload initiated before `uploads_before_ms` (nullopt:
  // none), as AbortMultipartUpload would. Folders are walked as listings walk them: symlinks and
  // special files are never followed or removed. Epoch milliseconds.
  virtual SweepResult Sweep(int64_t temp_before_ms, std::optional<int64_t> uploads_before_ms) = 0;
};

// The store for `root` (<data_dir>/buckets), made if missing. `free_space`: null measures the
// file system of `root` (statvfs); tests give their own.
std::unique_ptr<BucketStore> NewBucketStore(std::string root, SpaceLimits limits = {}, FreeSpaceProbe free_space = nullptr);

// The S3 error code a BucketStore status carries ("NoSuchKey"), or "InternalError".
std::string S3Code(const Status& status);

// The smallest part but the last that CompleteMultipartUpload accepts (S3's 5 MiB).
inline constexpr int64_t kMinPartBytes = 5 * 1024 * 1024;

}  // namespace ty::objstore
