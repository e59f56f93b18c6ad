#include "exec/log_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace ty::exec {

namespace {

class LocalLogFile final : public LogFile {
 public:
  explicit LocalLogFile(int fd) : fd_(fd) {}
  ~LocalLogFile() override { ::close(fd_); }
  LocalLogFile(const LocalLogFile&) = delete;
  LocalLogFile& operator=(const LocalLogFile&) = delete;

  int64_t ReadAt(int64_t offset, char* buf, size_t n) const override {
    for (;;) {
      ssize_t r = ::pread(fd_, buf, n, offset);
      if (r >= 0 || errno != EINTR) return r;
    }
  }

  int64_t Size() const override {
    off_t end = ::lseek(fd_, 0, SEEK_END);
    return end < 0 ? 0 : static_cast<int64_t>(end);
  }

 private:
  int fd_;
};

}  // namespace

std::unique_ptr<LogFile> OpenLocalLogFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  return std::make_unique<LocalLogFile>(fd);
}

}  // namespace ty::exec
