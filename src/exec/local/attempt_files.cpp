#include "exec/local/attempt_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace ty::exec::local {

bool WriteFileAtomic(const std::string& path, const std::string& text, bool durable, int mode) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd >= 0) ::fchmod(fd, static_cast<mode_t>(mode));  // an old temp file keeps its bits otherwise
  if (fd < 0) return false;
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n <= 0) {
      ::close(fd);
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  bool ok = !durable || ::fsync(fd) == 0;
  ::close(fd);
  return ok && ::rename(tmp.c_str(), path.c_str()) == 0;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

bool SupervisorAlive(const std::string& dir) {
  int fd = ::open(LockPath(dir).c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);  // releases our lock if we got it
  return held;
}

std::string ProcStartTime(int pid) {
  std::string stat;
  if (pid <= 0 || !ReadFile("/proc/" + std::to_string(pid) + "/stat", &stat)) return "";
  // "pid (comm) state ppid ...": comm may contain spaces and parentheses, so count from the
  // last ')'. Field 3 (state) is the first one after it, so starttime is the 20th.
  auto close = stat.rfind(')');
  if (close == std::string::npos) return "";
  size_t pos = close + 2;
  for (int field = 3; field < 22 && pos < stat.size(); ++field) {
    pos = stat.find(' ', pos);
    if (pos == std::string::npos) return "";
    ++pos;
  }
  size_t end = stat.find(' ', pos);
  return pos < stat.size() ? stat.substr(pos, end == std::string::npos ? std::string::npos : end - pos) : "";
}

}  // namespace ty::exec::local
