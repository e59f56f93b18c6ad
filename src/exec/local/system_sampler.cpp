#include "exec/local/system_sampler.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "exec/local/attempt_files.h"
#include "exec/local/run_command.h"

namespace ty::exec::local {

namespace {

int64_t NowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}
int64_t MonotonicUs() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

// How long one nvidia-smi run may take before it is killed (the sample then has no GPU fields).
constexpr int64_t kNvidiaSmiTimeoutMs = 5000;

// Every process of /proc that could be read (processes come and go while the scan runs).
std::vector<ProcStat> ReadProcesses() {
  std::vector<ProcStat> procs;
  DIR* d = ::opendir("/proc");
  if (!d) return procs;
  std::string text;
  char path[64];
  while (dirent* e = ::readdir(d)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    std::snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[1024];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) continue;
    ProcStat p;
    if (ParseProcStat(std::string_view(buf, static_cast<size_t>(n)), &p)) procs.push_back(p);
  }
  ::closedir(d);
  return procs;
}

// Runs `path --query-gpu=...` and returns its stdout; nullopt when it could not run, failed, or
// took longer than kNvidiaSmiTimeoutMs (it is killed then).
std::optional<std::string> RunNvidiaSmi(const std::string& path) {
  std::vector<std::string> argv = {path, "--query-gpu=index,utilization.gpu,memory.used,memory.total",
                                   "--format=csv,noheader,nounits"};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {  // only system calls between fork and exec (the parent has threads)
    ::dup2(fds[1], 1);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 2);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  const int64_t deadline = MonotonicUs() + kNvidiaSmiTimeoutMs * 1000;
  bool timed_out = false;
  char buf[4096];
  while (true) {
    int64_t left_ms = (deadline - MonotonicUs()) / 1000;
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(left_ms));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < (1 << 20)) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  // The supervisor's main loop reaps with waitpid(-1) and may have taken this child's status
  // already (ECHILD): then its output decides.
  pid_t w;
  while ((w = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (timed_out) return std::nullopt;
  if (w == pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) return std::nullopt;
  return out;
}

void AppendNumber(std::string* line, const char* name, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, ",\"%s\":%.2f", name, v);
  *line += buf;
}

}  // namespace

bool ParseProcStat(std::string_view text, ProcStat* out) {
  auto open = text.find('(');
  auto close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open || close + 2 > text.size())
    return false;
  ProcStat p;
  p.pid = std::atoi(std::string(text.substr(0, open)).c_str());
  // After "pid (comm) ": field 3 (state) is token 0, so field k is token k - 3.
  std::vector<std::string_view> tokens;
  size_t i = close + 2;
  while (i < text.size() && tokens.size() <= 21) {
    while (i < text.size() && text[i] == ' ') ++i;
    size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\n') ++j;
    if (j > i) tokens.push_back(text.substr(i, j - i));
    i = j + 1;
  }
  if (tokens.size() < 22 || p.pid <= 0) return false;
  auto num = [&](size_t field) { return std::strtoll(std::string(tokens[field - 3]).c_str(), nullptr, 10); };
  p.ppid = static_cast<int>(num(4));
  p.cpu_ticks = num(14) + num(15) + num(16) + num(17);
  p.rss_pages = std::max<int64_t>(0, num(24));
  *out = p;
  return true;
}

TreeUsage SumTree(const std::vector<ProcStat>& procs, int root) {
  std::unordered_map<int, std::vector<size_t>> children;
  std::unordered_map<int, size_t> by_pid;
  for (size_t k = 0; k < procs.size(); ++k) {
    by_pid[procs[k].pid] = k;
    children[procs[k].ppid].push_back(k);
  }
  TreeUsage u;
  auto it = by_pid.find(root);
  if (it == by_pid.end()) return u;
  std::vector<size_t> todo = {it->second};
  while (!todo.empty()) {
    const ProcStat& p = procs[todo.back()];
    todo.pop_back();
    u.cpu_ticks += p.cpu_ticks;
    u.rss_pages += p.rss_pages;
    ++u.processes;
    // pids are unique and a process's parent existed before it, so the walk cannot loop;
    // pid 0 (the kernel's, parent of 1 and 2) never appears as a process.
    if (auto c = children.find(p.pid); c != children.end() && p.pid != 0)
      for (size_t k : c->second) todo.push_back(k);
  }
  return u;
}

namespace {
// The number after `key` at the start of a line of a flat-keyed file; -1 when there is none.
int64_t LineValue(std::string_view text, std::string_view key) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      std::string digits(line.substr(key.size() + 1, 24));
      char* stop = nullptr;
      long long v = std::strtoll(digits.c_str(), &stop, 10);
      return stop == digits.c_str() || v < 0 ? -1 : v;
    }
    at = end + 1;
  }
  return -1;
}
}  // namespace

int64_t ParseCgroupCpuNs(int version, std::string_view text) {
  if (version == 2) {
    int64_t us = LineValue(text, "usage_usec");
    return us < 0 ? -1 : us * 1000;
  }
  std::string digits(text.substr(0, 24));
  char* stop = nullptr;
  long long v = std::strtoll(digits.c_str(), &stop, 10);
  return stop == digits.c_str() || v < 0 ? -1 : v;
}

int64_t ParseCgroupRssBytes(int version, std::string_view text) {
  int64_t anon = -1, mapped = -1;
  if (version == 2) {
    anon = LineValue(text, "anon");
    mapped = LineValue(text, "file_mapped");
  } else {
    anon = LineValue(text, "total_rss");
    mapped = LineValue(text, "total_mapped_file");
    if (anon < 0) anon = LineValue(text, "rss");
    if (mapped < 0) mapped = LineValue(text, "mapped_file");
  }
  return anon < 0 ? -1 : anon + std::max<int64_t>(0, mapped);
}

int64_t ParseMemTotalBytes(std::string_view meminfo) {
  auto at = meminfo.find("MemTotal:");
  if (at == std::string_view::npos) return 0;
  std::string rest(meminfo.substr(at + 9, 64));
  return std::strtoll(rest.c_str(), nullptr, 10) * 1024;  // "MemTotal:  16314528 kB"
}

std::vector<GpuReading> ParseNvidiaSmi(std::string_view csv) {
  std::vector<GpuReading> out;
  size_t start = 0;
  while (start < csv.size()) {
    size_t end = csv.find('\n', start);
    if (end == std::string_view::npos) end = csv.size();
    std::string line(csv.substr(start, end - start));
    start = end + 1;
    double f[4];
    size_t pos = 0;
    int got = 0;
    for (; got < 4; ++got) {
      while (pos < line.size() && (line[pos] == ' ' || line[pos] == ',')) ++pos;
      if (pos >= line.size()) break;
      char* e = nullptr;
      f[got] = std::strtod(line.c_str() + pos, &e);
      if (e == line.c_str() + pos) break;  // "[N/A]", a header, a warning
      pos = static_cast<size_t>(e - line.c_str());
      while (pos < line.size() && line[pos] == ' ') ++pos;
      if (got < 3 && (pos >= line.size() || line[pos] != ',')) break;
    }
    if (got != 4 || f[0] < 0) continue;
    out.push_back({static_cast<int>(f[0]), f[1], f[2], f[3]});
  }
  return out;
}

std::optional<std::set<int>> VisibleGpus(const std::optional<std::string>& cuda_visible_devices) {
  if (!cuda_visible_devices || cuda_visible_devices->empty()) return std::nullopt;
  std::set<int> ids;
  const std::string& v = *cuda_visible_devices;
  size_t start = 0;
  while (start <= v.size()) {
    size_t end = v.find(',', start);
    if (end == std::string::npos) end = v.size();
    std::string tok = v.substr(start, end - start);
    while (!tok.empty() && tok.front() == ' ') tok.erase(0, 1);
    while (!tok.empty() && tok.back() == ' ') tok.pop_back();
    if (tok.empty() || tok.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    ids.insert(std::atoi(tok.c_str()));
    start = end + 1;
  }
  return ids;
}

GpuSums SumGpus(const std::vector<GpuReading>& gpus, const std::optional<std::set<int>>& selected) {
  GpuSums s;
  for (const auto& g : gpus) {
    if (selected && !selected->count(g.index)) continue;
    s.utilization += g.utilization;
    if (g.memory_total > 0) s.memory_utilization += g.memory_used / g.memory_total * 100.0;
    ++s.gpus;
  }
  return s;
}

std::string ResolveNvidiaSmi(const std::string& setting) {
  if (setting.empty()) return "";
  const char* path = std::getenv("PATH");
  return FindOnPath(setting, path ? path : "/usr/local/bin:/usr/bin:/bin");
}

SystemSampler::SystemSampler(std::vector<Instance> instances, Options options)
    : instances_(std::move(instances)), options_(std::move(options)) {
  std::string meminfo;
  if (ReadFile("/proc/meminfo", &meminfo)) mem_total_bytes_ = ParseMemTotalBytes(meminfo);
  if (long t = ::sysconf(_SC_CLK_TCK); t > 0) ticks_per_second_ = t;
  if (long p = ::sysconf(_SC_PAGESIZE); p > 0) page_size_ = p;
  last_cpu_ns_.assign(instances_.size(), 0);
}

SystemSampler::~SystemSampler() { Stop(); }

void SystemSampler::Start() {
  if (options_.interval_ms <= 0 || instances_.empty() || thread_.joinable()) return;
  last_at_us_ = MonotonicUs();
  thread_ = std::thread([this] { Run(); });
}

void SystemSampler::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SystemSampler::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(options_.interval_ms), [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    const int64_t t0 = MonotonicUs();
    SampleOnce();
    sample_us_ += MonotonicUs() - t0;
    ++samples_;
    lock.lock();
  }
}

void SystemSampler::SampleOnce() {
  const int64_t at_us = MonotonicUs();
  const int64_t now = NowMs();
  const double elapsed_s = static_cast<double>(at_us - last_at_us_) / 1e6;
  last_at_us_ = at_us;
  // Read once per sample, and only for an instance without cgroup counters.
  std::optional<std::vector<ProcStat>> procs;
  std::vector<GpuReading> gpus;
  bool have_gpus = false;
  if (!options_.nvidia_smi.empty()) {
    if (auto out = RunNvidiaSmi(options_.nvidia_smi)) {
      gpus = ParseNvidiaSmi(*out);
      have_gpus = !gpus.empty();
    }
  }
  for (size_t k = 0; k < instances_.size(); ++k) {
    const Instance& inst = instances_[k];
    // A pid of an instance that has exited may already name another process.
    if (ProcStartTime(inst.pid) != inst.start_time) continue;
    int64_t cpu_ns = -1, rss_bytes = -1;
    if (inst.cgroup.version != 0 && !inst.cgroup.cpu.empty()) {
      std::string cpu, mem;
      if (ReadFile(inst.cgroup.cpu, &cpu) && ReadFile(inst.cgroup.memory_stat, &mem)) {
        cpu_ns = ParseCgroupCpuNs(inst.cgroup.version, cpu);
        rss_bytes = ParseCgroupRssBytes(inst.cgroup.version, mem);
      }
    }
    if (cpu_ns < 0 || rss_bytes < 0) {
      if (!procs) procs = ReadProcesses();
      TreeUsage u = SumTree(*procs, inst.pid);
      if (u.processes == 0) continue;
      cpu_ns = u.cpu_ticks * (1'000'000'000 / ticks_per_second_);
      rss_bytes = u.rss_pages * page_size_;
    }
    const int64_t last = last_cpu_ns_[k];
    last_cpu_ns_[k] = cpu_ns;
    if (elapsed_s <= 0) continue;
    // A member that left the tree (reparented away) takes its time with it: never below zero.
    const double cpu_s = static_cast<double>(std::max<int64_t>(0, cpu_ns - last)) / 1e9;
    std::string line = "{\"Timestamp\":" + std::to_string(now);
    AppendNumber(&line, "CPUUtilization", cpu_s / elapsed_s * 100.0);
    if (mem_total_bytes_ > 0)
      AppendNumber(&line, "MemoryUtilization",
                   static_cast<double>(rss_bytes) / static_cast<double>(mem_total_bytes_) * 100.0);
    struct statvfs vfs {};
    if (::statvfs(inst.opt_ml_dir.c_str(), &vfs) == 0 && vfs.f_blocks > 0)
      AppendNumber(&line, "DiskUtilization",
                   static_cast<double>(vfs.f_blocks - vfs.f_bfree) / static_cast<double>(vfs.f_blocks) * 100.0);
    if (have_gpus) {
      GpuSums g = SumGpus(gpus, inst.gpus);
      if (g.gpus > 0) {
        AppendNumber(&line, "GPUUtilization", g.utilization);
        AppendNumber(&line, "GPUMemoryUtilization", g.memory_utilization);
      }
    }
    line += "}\n";
    // One write of a whole line on an O_APPEND file: a reader sees whole lines or a partial last one.
    int fd = ::open(inst.out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) continue;
    [[maybe_unused]] ssize_t n = ::write(fd, line.data(), line.size());
    ::close(fd);
  }
}

}  // namespace ty::exec::local
