#include "exec/image/cache.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <openssl/sha.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "exec/file_lock.h"

namespace ty::exec::image {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool ReadWhole(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::string Sha256Hex(const std::string& s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : d) out += {kHex[b >> 4], kHex[b & 15]};
  return out;
}

bool ValidDigest(const std::string& d) {
  if (d.size() != 71 || d.compare(0, 7, "sha256:") != 0) return false;
  for (size_t i = 7; i < d.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(d[i])) || std::isupper(static_cast<unsigned char>(d[i]))) return false;
  return true;
}

// Writes `text` to a temporary file beside `path`, fsyncs it and renames it into place.
Status WriteDurably(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return Internal("cannot write " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      return Internal("cannot write " + tmp + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Internal("cannot sync " + tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Internal("cannot replace " + path + ": " + std::strerror(errno));
  }
  int dir = ::open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return Status::Ok();
}

std::vector<std::string> Strings(const json& o, const char* key) {
  std::vector<std::string> out;
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return out;
  if (!it->is_array()) throw std::runtime_error(std::string(key) + " must be an array of strings");
  for (const auto& v : *it) {
    if (!v.is_string()) throw std::runtime_error(std::string(key) + " must be an array of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::string String(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return "";
  if (!it->is_string()) throw std::runtime_error(std::string(key) + " must be a string");
  return it->get<std::string>();
}

// The blob `digest` of the layout, read as text (a manifest or a config: small).
StatusOr<std::string> Blob(const std::string& layout, const std::string& digest) {
  if (!ValidDigest(digest)) return FailedPrecondition("the image's layout names a malformed digest: " + digest.substr(0, 80));
  std::string text;
  if (!ReadWhole(layout + "/blobs/sha256/" + digest.substr(7), &text))
    return FailedPrecondition("the image's blob " + digest + " is missing from the layout");
  if (Sha256Hex(text) != digest.substr(7)) return FailedPrecondition("the image's blob " + digest + " does not match its digest");
  return text;
}

}  // namespace

StatusOr<ImageConfig> ParseImageConfig(std::string_view text) {
  json o = json::parse(text, nullptr, false);
  if (o.is_discarded() || !o.is_object()) return InvalidArgument("image config: not a JSON object");
  try {
    const json& c = o.contains("config") && o["config"].is_object() ? o["config"] : o;
    ImageConfig cfg;
    cfg.entrypoint = Strings(c, "Entrypoint");
    cfg.cmd = Strings(c, "Cmd");
    cfg.env = Strings(c, "Env");
    cfg.working_dir = String(c, "WorkingDir");
    cfg.user = String(c, "User");
    return cfg;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("image config: ") + e.what());
  }
}

std::string EncodeImageConfig(const ImageConfig& c) {
  return json{{"Entrypoint", c.entrypoint}, {"Cmd", c.cmd}, {"Env", c.env},
              {"WorkingDir", c.working_dir}, {"User", c.user}}.dump();
}

StatusOr<std::map<std::string, std::string>> ReadIndex(const std::string& path) {
  std::map<std::string, std::string> index;
  std::string text;
  if (!ReadWhole(path, &text)) {
    if (errno == ENOENT || !fs::exists(path)) return index;
    return Internal("cannot read the image index " + path);
  }
  json o = json::parse(text, nullptr, false);
  if (o.is_discarded() || !o.is_object()) return Internal("the image index " + path + " is not a JSON object");
  for (const auto& [k, v] : o.items()) {
    if (!v.is_string() || !ValidDigest(v.get<std::string>()))
      return Internal("the image index " + path + " maps '" + k + "' to something that is not a sha256 digest");
    index[k] = v.get<std::string>();
  }
  return index;
}

Status WriteIndex(const std::string& path, const std::map<std::string, std::string>& index) {
  json o = json::object();
  for (const auto& [k, v] : index) o[k] = v;
  return WriteDurably(path, o.dump(1) + "\n");
}

Status MakeMountPoints(const std::string& rootfs, const std::string& working_dir) {
  static const char* kDirs[] = {"proc", "dev", "tmp", "var/tmp", "home", "opt/ml", "opt/trainyard", "etc"};
  int root = ::open(rootfs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (root < 0) return Internal("cannot open " + rootfs + ": " + std::strerror(errno));
  auto make = [&](const std::string& rel, bool file) -> Status {
    int dir = ::dup(root);
    size_t i = 0;
    Status st = Status::Ok();
    while (st.ok() && i < rel.size()) {
      size_t j = rel.find('/', i);
      if (j == std::string::npos) j = rel.size();
      const std::string part = rel.substr(i, j - i);
      const bool last = j == rel.size();
      if (last && file) {
        int fd = ::openat(dir, part.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
        struct stat sb;
        if (fd < 0 || ::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
          st = FailedPrecondition("the image's /" + rel + " is not a regular file (a link or something else); the sandbox mounts its own there");
        if (fd >= 0) ::close(fd);
      } else {
        if (::mkdirat(dir, part.c_str(), 0755) != 0 && errno != EEXIST)
          st = Internal("cannot make /" + rel + " in the image: " + std::strerror(errno));
        int next = st.ok() ? ::openat(dir, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (st.ok() && next < 0)
          st = FailedPrecondition("the image's /" + rel.substr(0, j) +
                                  " is a symbolic link or not a directory; the sandbox mounts /" + rel + " there");
        ::close(dir);
        dir = next;
      }
      i = j + 1;
    }
    if (dir >= 0) ::close(dir);
    return st;
  };
  Status st = Status::Ok();
  for (const char* d : kDirs)
    if (st.ok()) st = make(d, false);
  if (st.ok()) st = make("etc/hosts", true);
  // The WorkingDir, which Docker makes when the image lacks it.
  std::string wd;
  for (size_t i = 0; st.ok() && i < working_dir.size();) {
    size_t j = working_dir.find('/', i);
    if (j == std::string::npos) j = working_dir.size();
    const std::string part = working_dir.substr(i, j - i);
    if (part == "..") st = FailedPrecondition("the image's WorkingDir " + working_dir + " contains '..'");
    else if (!part.empty() && part != ".") wd += (wd.empty() ? "" : "/") + part;
    i = j + 1;
  }
  if (st.ok() && !wd.empty()) st = make(wd, false);
  ::close(root);
  return st;
}

Status DropPrivilegeBits(const std::string& rootfs) {
  std::error_code ec;
  // The iterator does not descend into a directory link; lstat and the entry's own type keep
  // every change on the entry itself.
  for (fs::recursive_directory_iterator it(rootfs, fs::directory_options::none, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string path = it->path().string();
    struct stat sb;
    if (::lstat(path.c_str(), &sb) != 0 || S_ISLNK(sb.st_mode)) continue;
    if ((sb.st_mode & (S_ISUID | S_ISGID)) != 0 && ::chmod(path.c_str(), sb.st_mode & 07777 & ~(S_ISUID | S_ISGID)) != 0)
      return Internal("cannot clear the set-user-ID bits of a file of the image: " + std::string(std::strerror(errno)));
    if (S_ISREG(sb.st_mode) && ::lremovexattr(path.c_str(), "security.capability") != 0 && errno != ENODATA &&
        errno != ENOTSUP)
      return Internal("cannot drop the file capabilities of a file of the image: " + std::string(std::strerror(errno)));
  }
  if (ec) return Internal("cannot walk the unpacked image: " + ec.message());
  return Status::Ok();
}

Status RunTool(const std::vector<std::string>& argv, int timeout_seconds, std::string* err) {
  err->clear();
  if (argv.empty()) return InvalidArgument("no command");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
    }
    ::dup2(pipefd[1], 2);
    ::execvp(args[0], args.data());
    const char msg[] = "cannot execute the program\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(pipefd[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd p{pipefd[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = ::read(pipefd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (err->size() < 65536) err->append(buf, std::min<size_t>(static_cast<size_t>(n), 65536 - err->size()));
  }
  ::close(pipefd[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  while (!err->empty() && (err->back() == '\n' || err->back() == ' ')) err->pop_back();
  const std::string prog = fs::path(argv[0]).filename().string();
  if (timed_out) return Unavailable(prog + " did not finish within " + std::to_string(timeout_seconds) + " s");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  std::string how = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                      : "was killed by signal " + std::to_string(WTERMSIG(status));
  return Unavailable(prog + " " + how + (err->empty() ? "" : ": " + *err));
}

ImageCache::ImageCache(std::string root, CacheOptions options) : root_(std::move(root)), options_(std::move(options)) {}

StatusOr<CachedImage> ImageCache::FromDigest(const std::string& digest) const {
  CachedImage img;
  img.digest = digest;
  img.rootfs = root_ + "/rootfs/" + digest;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(img.rootfs, ec))) return NotFound("not unpacked: " + digest);
  std::string text;
  if (!ReadWhole(root_ + "/config/" + digest + ".json", &text)) return NotFound("no config: " + digest);
  auto cfg = ParseImageConfig(text);
  if (!cfg.ok()) return cfg.status();
  img.config = *std::move(cfg);
  return img;
}

StatusOr<CachedImage> ImageCache::Lookup(const ImageReference& ref) const {
  auto index = ReadIndex(root_ + "/index.json");
  if (!index.ok()) return index.status();
  auto it = index->find(ref.Skopeo());
  if (it == index->end()) return NotFound("not cached: " + ref.Skopeo());
  return FromDigest(it->second);
}

StatusOr<CachedImage> ImageCache::Get(const ImageReference& ref) {
  std::error_code ec;
  fs::create_directories(root_, ec);
  // Only the server's user reaches the unpacked images on the host; also a cache an earlier
  // version made 0755, whose images may still hold set-user-ID files.
  if (ec || ::chmod(root_.c_str(), 0700) != 0)
    return Internal("cannot make the image cache private: " + (ec ? ec.message() : std::string(std::strerror(errno))));
  if (auto hit = Lookup(ref); hit.ok() || hit.status().code() != Code::kNotFound) return hit;
  for (const char* d : {"/rootfs", "/config", "/tmp"}) fs::create_directories(root_ + d, ec);
  if (ec) return Internal("cannot make the image cache: " + ec.message());

  FileLock lock(root_ + "/lock");
  if (!lock.ok()) return Internal("cannot lock the image cache " + root_ + ": " + std::strerror(errno));
  // Another start may have fetched it while this one waited.
  if (auto hit = Lookup(ref); hit.ok() || hit.status().code() != Code::kNotFound) return hit;
  // Whatever is in tmp/ now was left by a fetch that was killed (the lock is ours).
  for (const auto& e : fs::directory_iterator(root_ + "/tmp", ec)) fs::remove_all(e.path(), ec);

  const std::string key = ref.Skopeo();
  const std::string layout = root_ + "/layout";
  const std::string tag = "ref-" + Sha256Hex(key).substr(0, 40);
  std::string err;
  Status st = RunTool({options_.skopeo, "--insecure-policy", "copy", "--quiet", key, "oci:" + layout + ":" + tag},
                      options_.timeout_seconds, &err);
  if (!st.ok()) return Unavailable(st.message());
  CachedImage img;
  img.copied = true;

  // The manifest digest the layout now gives the tag, and the config it names.
  std::string text;
  if (!ReadWhole(layout + "/index.json", &text)) return Internal("skopeo left no " + layout + "/index.json");
  json index = json::parse(text, nullptr, false);
  std::string digest;
  if (index.is_object() && index.contains("manifests") && index["manifests"].is_array())
    for (const auto& m : index["manifests"])
      if (m.is_object() && m.value("annotations", json::object()).value("org.opencontainers.image.ref.name", "") == tag)
        digest = m.value("digest", "");
  if (!ValidDigest(digest)) return FailedPrecondition("the copied image has no manifest digest in " + layout + "/index.json");
  auto manifest_text = Blob(layout, digest);
  if (!manifest_text.ok()) return manifest_text.status();
  json manifest = json::parse(*manifest_text, nullptr, false);
  if (!manifest.is_object() || !manifest.contains("config") || !manifest["config"].is_object())
    return FailedPrecondition("the image's manifest " + digest + " names no config");
  auto config_text = Blob(layout, manifest["config"].value("digest", ""));
  if (!config_text.ok()) return config_text.status();
  auto config = ParseImageConfig(*config_text);
  if (!config.ok()) return FailedPrecondition(config.status().message());
  img.config = *config;
  img.digest = digest;
  img.rootfs = root_ + "/rootfs/" + digest;

  if (!fs::is_directory(fs::symlink_status(img.rootfs, ec))) {
    const std::string bundle = root_ + "/tmp/" + digest.substr(7, 16) + "." + std::to_string(::getpid());
    st = RunTool({options_.umoci, "unpack", "--rootless", "--image", layout + ":" + tag, bundle},
                 options_.timeout_seconds, &err);
    if (!st.ok()) {
      fs::remove_all(bundle, ec);
      return FailedPrecondition("cannot unpack the image: " + st.message());
    }
    Status mp = DropPrivilegeBits(bundle + "/rootfs");
    if (mp.ok()) mp = MakeMountPoints(bundle + "/rootfs", img.config.working_dir);
    if (!mp.ok()) {
      fs::remove_all(bundle, ec);
      return mp;
    }
    TY_RETURN_IF_ERROR(WriteDurably(root_ + "/config/" + digest + ".json", EncodeImageConfig(img.config)));
    // The root must be searchable by the job user whatever umask the unpack had.
    ::chmod((bundle + "/rootfs").c_str(), 0755);
    if (::rename((bundle + "/rootfs").c_str(), img.rootfs.c_str()) != 0) {
      std::string why = std::strerror(errno);
      fs::remove_all(bundle, ec);
      return Internal("cannot move the unpacked image into " + img.rootfs + ": " + why);
    }
    fs::remove_all(bundle, ec);
    img.unpacked = true;
  } else {
    TY_RETURN_IF_ERROR(WriteDurably(root_ + "/config/" + digest + ".json", EncodeImageConfig(img.config)));
  }
  auto entries = ReadIndex(root_ + "/index.json");
  if (!entries.ok()) return entries.status();
  (*entries)[key] = digest;
  TY_RETURN_IF_ERROR(WriteIndex(root_ + "/index.json", *entries));
  return img;
}

}  // namespace ty::exec::image
