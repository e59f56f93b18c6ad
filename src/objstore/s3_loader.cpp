#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>

#include "objstore/objstore.h"

namespace ty::objstore {

namespace {

using EntryPoint = ObjectStore* (*)(const ObjectStoreConfig*);

// An object store that answers every call with the reason the module could not be loaded, so a
// job that names a remote bucket fails with that reason (InternalServerError: the host's fault).
class Unavailable : public ObjectStore {
 public:
  explicit Unavailable(std::string why) : why_(Status(Code::kInternal, std::move(why))) {}
  StatusOr<std::vector<ObjectInfo>> List(const std::string&, const std::string&) override { return why_; }
  StatusOr<ObjectInfo> Head(const std::string&, const std::string&) override { return why_; }
  Status Get(const std::string&, const std::string&, const std::string&) override { return why_; }
  Status Put(const std::string&, const std::string&, const std::string&) override { return why_; }
  Status Delete(const std::string&, const std::string&) override { return why_; }
  bool Remote(const std::string&) const override { return true; }

 private:
  const Status why_;
};

// TRAINYARD_S3_MODULE, else trainyard-s3.so beside the running executable.
std::string ModulePath() {
  if (const char* p = std::getenv("TRAINYARD_S3_MODULE"); p && *p) return p;
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "trainyard-s3.so";
  std::string dir(exe, static_cast<size_t>(n));
  dir.erase(dir.find_last_of('/') + 1);
  return dir + "trainyard-s3.so";
}

}  // namespace

std::unique_ptr<ObjectStore> LoadS3Store(const ObjectStoreConfig& config) {
  // Loaded once per process and never unloaded: stores made from it may live until exit.
  static std::once_flag once;
  static EntryPoint entry = nullptr;
  static std::string why;
  std::call_once(once, [] {
    const std::string path = ModulePath();
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      why = "the S3 client module cannot be loaded: " + std::string(::dlerror());
      return;
    }
    entry = reinterpret_cast<EntryPoint>(::dlsym(handle, "ty_objstore_new_s3_store"));
    if (!entry) why = "the S3 client module " + path + " has no entry point ty_objstore_new_s3_store";
  });
  if (entry)
    if (ObjectStore* store = entry(&config)) return std::unique_ptr<ObjectStore>(store);
  return std::make_unique<Unavailable>(why.empty() ? "the S3 client module could not make a store" : why);
}

}  // namespace ty::objstore
