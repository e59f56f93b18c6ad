// Helpers shared by the fuzz targets: views of the input and a file holding it, for the parsers
// whose public function takes a path.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

namespace ty::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// (first line without its '\n', the rest); the rest is empty when there is no '\n'.
inline std::pair<std::string_view, std::string_view> SplitFirstLine(std::string_view s) {
  size_t nl = s.find('\n');
  if (nl == std::string_view::npos) return {s, {}};
  return {s.substr(0, nl), s.substr(nl + 1)};
}

// The input as an anonymous in-memory file, named by a /proc/self/fd path. Reused across runs
// (created once, truncated and rewritten each time) so a fuzzing run opens no new descriptors.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  const std::string& Write(std::string_view text) {
    if (ftruncate(fd_, 0) != 0) abort();
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n = pwrite(fd_, text.data() + done, text.size() - done, static_cast<off_t>(done));
      if (n <= 0) abort();
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace ty::fuzz
