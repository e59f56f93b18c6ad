#include "exec/local/data.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "core/object_key.h"
#include "exec/data_access.h"
#include "core/strings.h"

namespace ty::exec::local {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The store as the job's principal may use it: each call on an embedded bucket is decided first
// (s3:ListBucket with s3:prefix for a listing, s3:GetObject for Head and Get, s3:PutObject,
// s3:DeleteObject), as the S3 endpoint decides its callers' calls.
class CheckedStore final : public objstore::ObjectStore {
 public:
  CheckedStore(std::unique_ptr<ObjectStore> inner, const DataAccess& access, const Clock& clock)
      : inner_(std::move(inner)), policy_(access), clock_(clock) {}

  StatusOr<std::vector<objstore::ObjectInfo>> List(const std::string& bucket, const std::string& prefix) override {
    if (!inner_->Remote(bucket)) TY_RETURN_IF_ERROR(policy_.CheckList(bucket, prefix, clock_.now_ms()));
    return inner_->List(bucket, prefix);
  }
  StatusOr<objstore::ObjectInfo> Head(const std::string& bucket, const std::string& key) override {
    TY_RETURN_IF_ERROR(Check("s3:GetObject", bucket, key));
    return inner_->Head(bucket, key);
  }
  Status Get(const std::string& bucket, const std::string& key, const std::string& local_path) override {
    TY_RETURN_IF_ERROR(Check("s3:GetObject", bucket, key));
    return inner_->Get(bucket, key, local_path);
  }
  Status Put(const std::string& bucket, const std::string& key, const std::string& local_path) override {
    TY_RETURN_IF_ERROR(Check("s3:PutObject", bucket, key));
    return inner_->Put(bucket, key, local_path);
  }
  Status Delete(const std::string& bucket, const std::string& key) override {
    TY_RETURN_IF_ERROR(Check("s3:DeleteObject", bucket, key));
    return inner_->Delete(bucket, key);
  }
  bool Remote(const std::string& bucket) const override { return inner_->Remote(bucket); }

 private:
  Status Check(std::string_view action, const std::string& bucket, const std::string& key) const {
    return inner_->Remote(bucket) ? Status::Ok() : policy_.CheckObject(action, bucket, key, clock_.now_ms());
  }

  std::unique_ptr<ObjectStore> inner_;
  const DataAccessPolicy policy_;
  const Clock& clock_;
};

// `rel` can name a file beneath a local directory (no '/' first, no empty, '.' or '..' segment).
bool SafeRel(const std::string& rel) { return CheckObjectKey(rel, KeyUse::kObject).ok(); }

// The code of a channel's error caused by `st`: the job's (InvalidArgument), unless the job's
// principal was refused, which the supervisor must tell apart (it then uploads nothing).
Code DataErrorCode(const Status& st) {
  return st.code() == Code::kAccessDenied ? Code::kAccessDenied : Code::kInvalidArgument;
}

// Two objects of a channel must not land on the same path, nor one on a directory the other
// needs (key order and shuffling aside, the download would depend on which came last).
Status CheckDistinctPaths(const std::vector<InputItem>& items, const std::string& uri) {
  std::map<std::string, const InputItem*> by_rel;
  for (const auto& it : items) {
    auto [at, fresh] = by_rel.emplace(it.rel, &it);
    if (!fresh)
      return InvalidArgument("the channel " + uri + " maps the keys '" + at->second->key + "' and '" + it.key +
                             "' to the same file '" + it.rel + "'");
  }
  for (const auto& it : items)
    for (size_t slash = it.rel.find('/'); slash != std::string::npos; slash = it.rel.find('/', slash + 1)) {
      auto file = by_rel.find(it.rel.substr(0, slash));
      if (file != by_rel.end())
        return InvalidArgument("the channel " + uri + " maps the key '" + file->second->key + "' to the file '" +
                               file->first + "', which the key '" + it.key + "' needs as a directory");
    }
  return Status::Ok();
}

// Reflink (a copy-on-write clone, where the file system has them), else a hard link, else a
// copy. The cache's files are read-only, so a job cannot change them through a hard link
// unless it runs as root.
bool LinkOrCopy(const std::string& from, const std::string& to, std::string* why) {
  std::error_code ec;
  fs::remove(to, ec);
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in >= 0) {
    int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    bool cloned = out >= 0 && ::ioctl(out, FICLONE, in) == 0;
    if (out >= 0) ::close(out);
    ::close(in);
    if (cloned) return true;
    fs::remove(to, ec);
  }
  if (::link(from.c_str(), to.c_str()) == 0) return true;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) *why = ec.message();
  return !ec;
}

}  // namespace

DataMover::DataMover(const ObjectStoreConfig& config, const std::string& dir_root, std::string cache_dir,
                     const std::optional<DataAccess>& access, const Clock& clock)
    : store_(objstore::NewRouter(config, dir_root)), cache_dir_(std::move(cache_dir)) {
  if (access) store_ = std::make_unique<CheckedStore>(std::move(store_), *access, clock);
}

std::string ChannelPath(const std::string& prefix, const std::string& key) {
  if (key.size() < prefix.size() || key.compare(0, prefix.size(), prefix) != 0) return "";
  std::string rel;
  if (key.size() == prefix.size()) {
    // The prefix names the object itself: it is placed under its own name.
    auto slash = key.rfind('/');
    rel = slash == std::string::npos ? key : key.substr(slash + 1);
  } else {
    size_t start = prefix.size();
    while (start < key.size() && key[start] == '/') ++start;
    rel = key.substr(start);
  }
  return SafeRel(rel) ? rel : "";
}

Status DataMover::ListChannel(const Channel& ch, const std::string& scratch, std::vector<InputItem>* items) {
  const std::string& uri = ch.uri;
  const bool manifest = ch.data_type == "ManifestFile";
  auto where = ParseS3Uri(uri, manifest ? KeyUse::kObject : KeyUse::kPrefix);
  if (!where.ok()) return where.status();
  const std::string& bucket = where->bucket;
  const std::string& key = where->key;
  items->clear();
  if (manifest) {
    std::string local = scratch + "/manifest-" + ch.name + ".json";
    Status st = store_->Get(bucket, key, local);
    if (!st.ok()) return Status(DataErrorCode(st), "the manifest file " + uri + " cannot be read: " + st.message());
    std::string text;
    {
      std::ifstream in(local, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    json m = json::parse(text, nullptr, false);
    if (m.is_discarded() || !m.is_array() || m.empty() || !m[0].is_object() || !m[0].contains("prefix") ||
        !m[0]["prefix"].is_string())
      return InvalidArgument("the manifest file " + uri +
                             " is not a JSON array starting with {\"prefix\": \"s3://...\"} followed by relative keys");
    // The manifest is data, read after the API's checks: its prefix and entries meet the same
    // rules as a request's URIs, or nothing is staged.
    auto prefix = ParseS3Uri(m[0]["prefix"].get<std::string>(), KeyUse::kPrefix);
    if (!prefix.ok()) return InvalidArgument("the manifest file " + uri + ": its prefix " + prefix.status().message());
    for (size_t i = 1; i < m.size(); ++i) {
      if (!m[i].is_string()) return InvalidArgument("the manifest file " + uri + ": entry " + std::to_string(i) + " is not a string");
      InputItem it;
      it.bucket = prefix->bucket;
      it.rel = m[i].get<std::string>();
      it.key = prefix->key + it.rel;
      Status rel_ok = CheckObjectKey(it.rel, KeyUse::kObject);
      if (rel_ok.ok()) rel_ok = CheckObjectKey(it.key, KeyUse::kObject);
      if (!rel_ok.ok())
        return InvalidArgument("the manifest file " + uri + ": entry " + std::to_string(i) + ": " + rel_ok.message());
      auto head = store_->Head(it.bucket, it.key);
      if (!head.ok())
        return Status(DataErrorCode(head.status()),
                      "the manifest file " + uri + " lists an object that cannot be read: " + head.status().message());
      it.size = head->size;
      it.etag = head->etag;
      items->push_back(it);
    }
  } else {
    auto list = store_->List(bucket, key);
    if (!list.ok()) return list.status();
    for (const auto& o : *list) {
      if (!o.key.empty() && o.key.back() == '/') continue;  // folder markers
      InputItem it{bucket, o.key, ChannelPath(key, o.key), o.size, o.etag};
      if (it.rel.empty()) continue;
      items->push_back(it);
    }
    if (items->empty()) return NotFound("no objects under " + uri);
    TY_RETURN_IF_ERROR(CheckDistinctPaths(*items, uri));
  }
  if (ch.shuffle_seed) {
    // Fisher-Yates with a fully specified generator: the same seed gives the same order everywhere.
    std::mt19937_64 rng(static_cast<uint64_t>(*ch.shuffle_seed));
    for (size_t i = items->size(); i > 1; --i) std::swap((*items)[i - 1], (*items)[rng() % i]);
  }
  return Status::Ok();
}

std::vector<InputItem> DataMover::Share(const std::vector<InputItem>& items, const std::string& distribution, int n,
                                        int count) {
  if (distribution != "ShardedByS3Key" || count <= 1) return items;
  std::vector<InputItem> out;
  for (size_t j = static_cast<size_t>(n - 1); j < items.size(); j += static_cast<size_t>(count)) out.push_back(items[j]);
  return out;
}

Status DataMover::Fetch(const InputItem& item, const std::string& dest, TransferStats* stats) {
  std::error_code ec;
  fs::create_directories(fs::path(dest).parent_path(), ec);
  if (cache_dir_.empty() || item.etag.empty() || !store_->Remote(item.bucket)) {
    TY_RETURN_IF_ERROR(store_->Get(item.bucket, item.key, dest));
    if (store_->Remote(item.bucket)) {
      stats->fetched_objects++;
      stats->fetched_bytes += std::max<int64_t>(0, item.size);
    }
    return Status::Ok();
  }
  // Content-addressed: the ETag (with the size) names the content, whatever the key.
  std::string id = Sha256Hex(item.etag + "\n" + std::to_string(item.size));
  fs::path cached = fs::path(cache_dir_) / id.substr(0, 2) / id;
  if (fs::exists(cached, ec) && static_cast<int64_t>(fs::file_size(cached, ec)) == item.size) {
    stats->reused_objects++;
    stats->reused_bytes += item.size;
    ::utimensat(AT_FDCWD, cached.c_str(), nullptr, 0);  // recently used (for whoever trims the cache)
  } else {
    fs::create_directories(cached.parent_path(), ec);
    TY_RETURN_IF_ERROR(store_->Get(item.bucket, item.key, cached.string()));
    auto head_size = static_cast<int64_t>(fs::file_size(cached, ec));
    if (item.size >= 0 && head_size != item.size) {
      fs::remove(cached, ec);
      return Internal("s3://" + item.bucket + "/" + item.key + " changed while it was read (size " +
                      std::to_string(head_size) + ", listed " + std::to_string(item.size) + ")");
    }
    ::chmod(cached.c_str(), 0444);
    stats->fetched_objects++;
    stats->fetched_bytes += item.size;
  }
  std::string why;
  if (!LinkOrCopy(cached.string(), dest, &why))
    return Internal("cannot place " + cached.string() + " at " + dest + ": " + why);
  return Status::Ok();
}

Status DataMover::FetchAll(const std::vector<std::pair<InputItem, std::string>>& work, int threads,
                           const std::function<bool()>& cancelled, TransferStats* stats) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first = Status::Ok();
  bool failed = false;
  auto worker = [&] {
    TransferStats mine;
    while (true) {
      size_t i = next++;
      if (i >= work.size() || cancelled()) break;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (failed) break;
      }
      Status st = Fetch(work[i].first, work[i].second, &mine);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed) first = st, failed = true;
        break;
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    stats->fetched_objects += mine.fetched_objects;
    stats->fetched_bytes += mine.fetched_bytes;
    stats->reused_objects += mine.reused_objects;
    stats->reused_bytes += mine.reused_bytes;
  };
  int n = std::max(1, std::min<int>(threads, static_cast<int>(work.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return first;
}

Status DataMover::UploadFile(const std::string& local_path, const std::string& uri) {
  auto where = ParseS3Uri(uri, KeyUse::kObject);
  if (!where.ok()) return where.status();
  return store_->Put(where->bucket, where->key, local_path);
}

Status DataMover::Download(const std::string& uri, const std::string& local_path) {
  auto where = ParseS3Uri(uri, KeyUse::kObject);
  if (!where.ok()) return where.status();
  return store_->Get(where->bucket, where->key, local_path);
}

Status DataMover::UploadTree(const JobDir& dir, const std::string& prefix_uri, const SkipFn& skip) {
  std::string prefix = prefix_uri;
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  // The store reads the file through its descriptor (/proc/self/fd names that very inode), so
  // nothing is opened again by a path the job controls.
  return WalkJobTree(dir, WalkOptions{}, [&](const JobFile& f) {
    Status st = UploadFile("/proc/self/fd/" + std::to_string(f.fd), prefix + f.rel);
    return st.ok() ? st : Status(st.code(), f.rel + ": " + st.message());
  }, skip);
}

CheckpointSync::CheckpointSync(DataMover* mover, std::string prefix_uri, std::vector<JobDir> local_dirs, SkipFn skip)
    : mover_(mover), dirs_(std::move(local_dirs)), skip_(std::move(skip)) {
  objstore::ParseS3Uri(prefix_uri, &bucket_, &prefix_);
  if (!prefix_.empty() && prefix_.back() != '/') prefix_ += '/';
}

Status CheckpointSync::Restore(TransferStats* stats) {
  auto list = mover_->store().List(bucket_, prefix_);
  if (!list.ok()) {
    if (list.status().code() == Code::kNotFound && !mover_->store().Remote(bucket_)) return Status::Ok();
    return list.status();
  }
  for (const auto& o : *list) {
    std::string rel = o.key.substr(prefix_.size());
    if (rel.empty() || rel.back() == '/' || !SafeRel(rel)) continue;
    in_store_[rel] = true;
    for (size_t i = 0; i < dirs_.size(); ++i) {
      // Before the job starts: the tree is still the supervisor's own.
      std::string dest = dirs_[i].Path() + "/" + rel;
      // Straight from the store (checkpoints change between jobs and are written in place), once;
      // the other instances get a copy of their own.
      if (i == 0) {
        TY_RETURN_IF_ERROR(mover_->store().Get(bucket_, o.key, dest));
        stats->fetched_objects++;
        stats->fetched_bytes += o.size;
      } else {
        std::error_code ec;
        fs::create_directories(fs::path(dest).parent_path(), ec);
        fs::copy_file(dirs_[0].Path() + "/" + rel, dest, fs::copy_options::overwrite_existing, ec);
        if (ec) return Internal("cannot copy the checkpoint " + rel + " to " + dest + ": " + ec.message());
      }
      // Restored files count as uploaded: only a later change sends them back.
      struct stat st;
      if (::stat(dest.c_str(), &st) == 0)
        uploaded_[std::to_string(i) + "\n" + rel] = {st.st_size, st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
    }
  }
  return Status::Ok();
}

Status CheckpointSync::Sync(int* uploaded, int* deleted) {
  std::set<std::string> present;
  bool complete = true;
  for (size_t i = 0; i < dirs_.size(); ++i) {
    WalkResult walked;
    auto visit = [&](const JobFile& f) {
      present.insert(f.rel);
      Sig sig{f.st.st_size, f.st.st_mtim.tv_sec * 1000000000LL + f.st.st_mtim.tv_nsec};
      std::string id = std::to_string(i) + "\n" + f.rel;
      auto prev = uploaded_.find(id);
      if (prev != uploaded_.end() && prev->second.size == sig.size && prev->second.mtime_ns == sig.mtime_ns)
        return Status::Ok();
      TY_RETURN_IF_ERROR(mover_->store().Put(bucket_, prefix_ + f.rel, "/proc/self/fd/" + std::to_string(f.fd)));
      uploaded_[id] = sig;
      in_store_[f.rel] = true;
      ++*uploaded;
      return Status::Ok();
    };
    auto skip = [&](const std::string& rel, const std::string& why) {
      // Each entry once, and a bounded number in all: a job can make links faster than this can log.
      if (skip_ && reported_.size() < kMaxReported && reported_.insert(std::to_string(i) + "\n" + rel + "\n" + why).second)
        skip_(i, rel, why);
    };
    TY_RETURN_IF_ERROR(WalkJobTree(dirs_[i], WalkOptions{}, visit, skip, &walked));
    complete = complete && walked.complete;
  }
  if (!complete) return Status::Ok();  // what was not seen is not known to be gone
  for (auto it = in_store_.begin(); it != in_store_.end();) {
    if (present.count(it->first)) {
      ++it;
      continue;
    }
    TY_RETURN_IF_ERROR(mover_->store().Delete(bucket_, prefix_ + it->first));
    for (size_t i = 0; i < dirs_.size(); ++i) uploaded_.erase(std::to_string(i) + "\n" + it->first);
    ++*deleted;
    it = in_store_.erase(it);
  }
  return Status::Ok();
}

}  // namespace ty::exec::local
