// Object storage behind one interface: an S3-compatible endpoint (libcurl, SigV4) or the
// embedded directory store (<data_dir>/buckets/<bucket>/<key>), chosen per bucket by a Router
// (reference: docs/object-store.md). libcurl and libxml2 stay inside objstore.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/object_key.h"
#include "core/status.h"

namespace ty::objstore {

struct ObjectInfo {
  std::string key;
  int64_t size = 0;
  std::string etag;  // without quotes
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  // Every object whose key starts with `prefix`, in key order (all pages).
  virtual StatusOr<std::vector<ObjectInfo>> List(const std::string& bucket, const std::string& prefix) = 0;
  virtual StatusOr<ObjectInfo> Head(const std::string& bucket, const std::string& key) = 0;
  // Writes the object to local_path (through a temporary file; replaced only when complete).
  virtual Status Get(const std::string& bucket, const std::string& key, const std::string& local_path) = 0;
  virtual Status Put(const std::string& bucket, const std::string& key, const std::string& local_path) = 0;
  virtual Status Delete(const std::string& bucket, const std::string& key) = 0;
  // True when objects come over the network (worth caching on this host).
  virtual bool Remote(const std::string& bucket) const = 0;
};

// The embedded directory store rooted at `root` (<data_dir>/buckets). Every call checks the
// bucket name and the key (core/object_key.h) and resolves the key beneath the bucket's
// directory without following symlinks, so no key reaches a file outside its bucket; symlinks
// and other non-regular files in a bucket are not objects (not listed, not read, not written
// through).
std::unique_ptr<ObjectStore> NewDirStore(std::string root);

// Tests only: makes the directory store resolve keys by its O_NOFOLLOW walk, as on kernels
// without openat2 (before 5.6), instead of openat2.
void DisableOpenat2ForTesting(bool disabled);

// An S3-compatible endpoint. Errors name the bucket, the key and the S3 error code. Linked from
// ty_objstore_s3 (libcurl, libxml2), or reached through LoadS3Store.
std::unique_ptr<ObjectStore> NewS3Store(const ObjectStoreConfig& config);

// NewS3Store from the trainyard-s3 module (beside the running executable, or the path in
// TRAINYARD_S3_MODULE), loaded on first use. libcurl and the libraries behind it cost a process
// about 3 ms of CPU to load; the supervisor of every job would pay that even when all its
// buckets are embedded. When the module cannot be loaded, the store answers every call with
// InternalServerError naming why.
std::unique_ptr<ObjectStore> LoadS3Store(const ObjectStoreConfig& config);

using S3StoreFactory = std::unique_ptr<ObjectStore> (*)(const ObjectStoreConfig&);

// Buckets that config.Routes() go to the endpoint, all others to the directory store. The
// endpoint's store is made by `make_s3` (LoadS3Store when null) only when an endpoint is set.
std::unique_ptr<ObjectStore> NewRouter(const ObjectStoreConfig& config, std::string dir_root,
                                       S3StoreFactory make_s3 = nullptr);

// s3://bucket/key -> (bucket, key); false when it is not an s3:// URI with a valid bucket name
// and a key that is a safe prefix (ty::ParseS3Uri with KeyUse::kPrefix, which says why).
bool ParseS3Uri(const std::string& uri, std::string* bucket, std::string* key);

}  // namespace ty::objstore
