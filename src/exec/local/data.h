// Moving an attempt's data through the object store (docs/object-store.md): input channels
// (S3Prefix / ManifestFile, sharding, shuffling) through the host-wide object cache, uploads of
// outputs, and checkpoint restore and sync. Used by the supervisor only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/config.h"
#include "core/status.h"
#include "exec/attempt_spec.h"
#include "exec/local/job_tree.h"
#include "objstore/objstore.h"

namespace ty::exec::local {

struct InputItem {
  std::string bucket, key;
  std::string rel;  // path under /opt/ml/input/data/<channel>/
  int64_t size = -1;
  std::string etag;
};

struct TransferStats {
  int64_t fetched_objects = 0, fetched_bytes = 0;  // downloaded from the store
  int64_t reused_objects = 0, reused_bytes = 0;    // taken from the host cache
};

// Where an S3Prefix channel whose URI holds `prefix` places the object `key`, relative to
// /opt/ml/input/data/<channel>/, as SageMaker does: the key minus the whole prefix, whether or not
// the prefix ends with '/' (s3://b/data/train and s3://b/data/train/ both put data/train/a.csv at
// a.csv; a prefix ending mid-name, data/tra, puts it at in/a.csv and data/trainer.csv at
// iner.csv), with the '/'s that then lead dropped. A key equal to the prefix is placed under
// its last segment (s3://b/data/a.csv gives a.csv). Empty when the key is not under the prefix
// or the path would not be a safe relative path (an empty, '.' or '..' segment): such keys are
// not staged.
std::string ChannelPath(const std::string& prefix, const std::string& key);

class DataMover {
 public:
  // `cache_dir` empty: no cache. With `access`, every call on a bucket of the embedded store is
  // first decided by it (exec/data_access.h; `clock` gives aws:CurrentTime) and a refusal is the
  // call's AccessDenied, before anything is read or written; buckets on the endpoint are not.
  DataMover(const ObjectStoreConfig& config, const std::string& dir_root, std::string cache_dir,
            const std::optional<DataAccess>& access = std::nullopt, const Clock& clock = SystemClock::instance());

  objstore::ObjectStore& store() { return *store_; }

  // The objects of an S3 channel (uri, data_type, shuffle_seed) in the order the channel
  // defines (key order, or the manifest's, then shuffled with the seed). `scratch` is a
  // directory for the manifest. S3Prefix objects are placed by ChannelPath; two keys placed on
  // the same path, or one on a directory another needs, fail the listing (InvalidArgument).
  Status ListChannel(const Channel& channel, const std::string& scratch, std::vector<InputItem>* items);

  // The share of instance `n` (1-based) of `count` for the channel's distribution.
  static std::vector<InputItem> Share(const std::vector<InputItem>& items, const std::string& distribution, int n,
                                      int count);

  // Makes `dest` hold the object: through the host cache for remote buckets (reflink, hard
  // link or copy out of it), straight from the store otherwise.
  Status Fetch(const InputItem& item, const std::string& dest, TransferStats* stats);

  // Fetch for each (item, destination), `threads` at a time; stops early (Ok) when `cancelled`
  // says so. The first error wins.
  Status FetchAll(const std::vector<std::pair<InputItem, std::string>>& work, int threads,
                  const std::function<bool()>& cancelled, TransferStats* stats);

  // Every regular file under `dir` (a job's tree: walked without following links, job_tree.h),
  // uploaded to prefix_uri + its relative path; `skip` hears of each entry left out and why.
  Status UploadTree(const JobDir& dir, const std::string& prefix_uri, const SkipFn& skip);
  Status UploadFile(const std::string& local_path, const std::string& uri);
  Status Download(const std::string& uri, const std::string& local_path);

 private:
  std::unique_ptr<objstore::ObjectStore> store_;
  std::string cache_dir_;
};

// Checkpoint sync: restores the prefix into every instance's directory at the start, then
// uploads new and changed regular files (walked as a job's tree: links, FIFOs and devices are
// left out, job_tree.h) and deletes in the store what was deleted locally (a file is gone when no
// instance has it any more; nothing is deleted after a walk that could not see the whole tree).
class CheckpointSync {
 public:
  // Told once about each entry of instance `dir` (an index into local_dirs) a sync leaves out.
  using SkipFn = std::function<void(size_t dir, const std::string& rel, const std::string& why)>;
  CheckpointSync(DataMover* mover, std::string prefix_uri, std::vector<JobDir> local_dirs, SkipFn skip = nullptr);
  Status Restore(TransferStats* stats);
  // One pass; *uploaded / *deleted count what it did.
  Status Sync(int* uploaded, int* deleted);

 private:
  struct Sig {
    int64_t size = 0;
    int64_t mtime_ns = 0;
  };
  DataMover* mover_;
  std::string bucket_, prefix_;
  std::vector<JobDir> dirs_;
  SkipFn skip_;
  static constexpr size_t kMaxReported = 10'000;
  std::set<std::string> reported_;  // "<instance>\n<rel>\n<why>" already told to skip_
  std::map<std::string, Sig> uploaded_;  // "<instance>\n<rel>" -> what was last uploaded
  std::map<std::string, bool> in_store_;  // rel -> present in the store
};

}  // namespace ty::exec::local
