#include "exec/local/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace ty::exec::local {

namespace fs = std::filesystem;

namespace {

constexpr const char* kGroupDir = "trainyard";

// Where each hierarchy is mounted and where this process sits in it.
struct Hierarchies {
  std::string v2_mount, v2_path;                 // "" when there is no unified hierarchy
  std::map<std::string, std::string> v1_mount;   // controller -> mount point
  std::map<std::string, std::string> v1_path;    // controller -> this process's cgroup
};

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

Hierarchies Discover() {
  Hierarchies h;
  std::ifstream mi("/proc/self/mountinfo");
  for (std::string line; std::getline(mi, line);) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    auto left = Split(line.substr(0, dash), ' ');
    auto right = Split(line.substr(dash + 3), ' ');
    if (left.size() < 5 || right.size() < 3) continue;
    if (right[0] == "cgroup2" && h.v2_mount.empty()) h.v2_mount = left[4];
    if (right[0] == "cgroup")
      for (const auto& opt : Split(right[2], ','))
        if (opt == "memory" || opt == "pids" || opt == "cpu" || opt == "cpuacct" || opt == "devices")
          h.v1_mount.emplace(opt, left[4]);
  }
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string ctrls = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (ctrls.empty()) h.v2_path = path;
    for (const auto& c : Split(ctrls, ',')) h.v1_path[c] = path;
  }
  return h;
}

bool WriteValue(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  ::close(fd);
  return ok;
}

std::string ReadValue(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The value of `key` in a flat-keyed file ("oom_kill 3"); -1 when absent.
int64_t KeyedValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string k; in >> k;) {
    int64_t v = 0;
    if (!(in >> v)) return -1;
    if (k == key) return v;
  }
  return -1;
}

std::string Join(const std::string& mount, const std::string& own, const std::string& parent) {
  std::string base = parent.empty() ? own : parent;
  std::string joined = (fs::path(mount) / fs::path(base).relative_path()).lexically_normal().string();
  while (joined.size() > 1 && joined.back() == '/') joined.pop_back();
  return joined;
}

// Kills every process in the cgroup and removes the directory; waits (bounded) for the
// processes to be gone, since rmdir fails while the cgroup has members.
void KillAndRemove(const std::string& dir, bool v2) {
  if (v2) WriteValue(dir + "/cgroup.kill", "1");
  for (int round = 0; round < 200; ++round) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    std::istringstream procs(ReadValue(dir + "/cgroup.procs"));
    for (pid_t pid; procs >> pid;) ::kill(pid, SIGKILL);
    timespec ts{0, 10'000'000};
    ::nanosleep(&ts, nullptr);
  }
}

Status Fail(const std::string& dir, const std::string& what) {
  return Unavailable("cgroup " + dir + ": cannot set " + what + ": " + std::strerror(errno));
}

}  // namespace

StatusOr<std::unique_ptr<InstanceCgroup>> InstanceCgroup::Create(const std::string& name, const std::string& parent,
                                                                   const CgroupLimits& limits) {
  Hierarchies h = Discover();
  std::unique_ptr<InstanceCgroup> cg(new InstanceCgroup());
  std::error_code ec;
  // cgroup v2: the parent's own subtree_control must enable memory and pids for trainyard/,
  // which the kernel allows only in a cgroup without processes of its own (a delegated subtree).
  if (!h.v2_mount.empty() && ReadValue(h.v2_mount + "/cgroup.controllers").find("memory") != std::string::npos) {
    std::string base = Join(h.v2_mount, h.v2_path, parent);
    std::string group = base + "/" + kGroupDir, dir = group + "/" + name;
    ::mkdir(group.c_str(), 0755);
    // One controller per write: a write naming one the kernel does not offer changes nothing.
    for (const char* c : {"+memory", "+pids", "+cpu"}) {
      WriteValue(base + "/cgroup.subtree_control", c);
      WriteValue(group + "/cgroup.subtree_control", c);
    }
    std::string enabled = ReadValue(group + "/cgroup.subtree_control");
    if (enabled.find("memory") != std::string::npos && enabled.find("pids") != std::string::npos &&
        (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST)) {
      cg->version_ = 2;
      cg->dirs_ = {dir};
      if (limits.memory_bytes > 0) {
        if (!WriteValue(dir + "/memory.max", std::to_string(limits.memory_bytes))) return Fail(dir, "memory.max");
        WriteValue(dir + "/memory.swap.max", "0");
      }
      if (limits.pids_max > 0 && !WriteValue(dir + "/pids.max", std::to_string(limits.pids_max)))
        return Fail(dir, "pids.max");
      if (limits.vcpus > 0 && enabled.find("cpu") != std::string::npos)
        WriteValue(dir + "/cpu.max", std::to_string(limits.vcpus * 100000) + " 100000");
    }
  }
  if (cg->version_ == 0) {
    if (!h.v1_mount.count("memory") || !h.v1_mount.count("pids"))
      return Unavailable("no writable cgroup hierarchy with the memory and pids controllers");
    cg->version_ = 1;
    for (const char* ctrl : {"memory", "pids", "cpu", "devices", "cpuacct"}) {
      if (!h.v1_mount.count(ctrl)) continue;
      std::string group = Join(h.v1_mount[ctrl], h.v1_path[ctrl], parent) + "/" + kGroupDir;
      std::string dir = group + "/" + name;
      // cpuacct (the CPU time the system metrics read) is often mounted together with cpu.
      if (std::string(ctrl) == "cpuacct" && h.v1_mount.count("cpu") && h.v1_mount["cpu"] == h.v1_mount["cpuacct"]) {
        cg->cpuacct_dir_ = dir;
        continue;
      }
      ::mkdir(group.c_str(), 0755);
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        Status st = Unavailable("cannot create the cgroup " + dir + ": " + std::strerror(errno));
        cg->Remove();
        return st;
      }
      cg->dirs_.push_back(dir);
      const std::string c = ctrl;
      if (c == "memory" && limits.memory_bytes > 0) {
        if (!WriteValue(dir + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes)))
          return Fail(dir, "memory.limit_in_bytes");
        WriteValue(dir + "/memory.memsw.limit_in_bytes", std::to_string(limits.memory_bytes));  // where swap is accounted
      } else if (c == "pids" && limits.pids_max > 0) {
        if (!WriteValue(dir + "/pids.max", std::to_string(limits.pids_max))) return Fail(dir, "pids.max");
      } else if (c == "cpu" && limits.vcpus > 0) {
        WriteValue(dir + "/cpu.cfs_period_us", "100000");
        WriteValue(dir + "/cpu.cfs_quota_us", std::to_string(limits.vcpus * 100000));
      } else if (c == "cpuacct") {
        cg->cpuacct_dir_ = dir;
      } else if (c == "devices") {
        if (!WriteValue(dir + "/devices.deny", "a")) return Fail(dir, "devices.deny");
        std::vector<std::string> allow = {"c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm", "c 1:9 rwm",
                                          "c 5:0 rwm", "c 5:2 rwm", "c 136:* rwm"};
        for (const auto& node : limits.device_nodes) {
          struct stat sb {};
          if (::stat(node.c_str(), &sb) != 0 || !(S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode))) continue;
          allow.push_back(std::string(S_ISCHR(sb.st_mode) ? "c " : "b ") + std::to_string(major(sb.st_rdev)) + ":" +
                          std::to_string(minor(sb.st_rdev)) + " rw");
        }
        for (const auto& a : allow)
          if (!WriteValue(dir + "/devices.allow", a)) return Fail(dir, "devices.allow " + a);
      }
    }
  }
  for (const auto& dir : cg->dirs_) {
    int fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Fail(dir, "cgroup.procs");
    cg->procs_fds_.push_back(fd);
  }
  return cg;
}

InstanceCgroup::~InstanceCgroup() { Remove(); }

bool InstanceCgroup::JoinFromChild() const {
  for (int fd : procs_fds_)
    if (::write(fd, "0", 1) != 1) return false;
  return true;
}

bool InstanceCgroup::OomKilled() const {
  if (dirs_.empty()) return false;
  const std::string& mem = dirs_.front();
  if (version_ == 2) return KeyedValue(ReadValue(mem + "/memory.events"), "oom_kill") > 0;
  int64_t kills = KeyedValue(ReadValue(mem + "/memory.oom_control"), "oom_kill");
  if (kills >= 0) return kills > 0;
  return KeyedValue(ReadValue(mem + "/memory.oom_control"), "under_oom") > 0;  // kernels before 4.13
}

int64_t InstanceCgroup::MemoryPeak() const {
  if (dirs_.empty()) return 0;
  std::string v = ReadValue(dirs_.front() + (version_ == 2 ? "/memory.peak" : "/memory.max_usage_in_bytes"));
  return v.empty() ? 0 : std::atoll(v.c_str());
}

std::vector<pid_t> InstanceCgroup::Processes() const {
  std::vector<pid_t> out;
  if (dirs_.empty() || removed_) return out;
  std::istringstream procs(ReadValue(dirs_.front() + "/cgroup.procs"));
  for (pid_t pid; procs >> pid;) out.push_back(pid);
  return out;
}

CgroupUsageFiles InstanceCgroup::UsageFiles() const {
  CgroupUsageFiles f;
  if (dirs_.empty()) return f;
  f.version = version_;
  f.memory_stat = dirs_.front() + "/memory.stat";
  if (version_ == 2) f.cpu = dirs_.front() + "/cpu.stat";
  else if (!cpuacct_dir_.empty()) f.cpu = cpuacct_dir_ + "/cpuacct.usage";
  return f;
}

std::string InstanceCgroup::Describe() const {
  std::string s = "cgroup v" + std::to_string(version_) + " at";
  for (const auto& d : dirs_) s += " " + d;
  return s;
}

void InstanceCgroup::Remove() {
  if (removed_) return;
  removed_ = true;
  for (int fd : procs_fds_) ::close(fd);
  procs_fds_.clear();
  for (const auto& dir : dirs_) KillAndRemove(dir, version_ == 2);
}

std::string CgroupPrefix(const std::string& attempts_root) {
  struct stat sb {};
  if (::stat(attempts_root.c_str(), &sb) != 0) return "unknown.";
  return std::to_string(static_cast<uint64_t>(sb.st_dev)) + "-" + std::to_string(static_cast<uint64_t>(sb.st_ino)) + ".";
}

void SweepOrphanCgroups(const std::string& parent, const std::string& prefix,
                        const std::function<bool(const std::string&)>& alive) {
  Hierarchies h = Discover();
  std::vector<std::pair<std::string, bool>> groups;
  if (!h.v2_mount.empty()) groups.emplace_back(Join(h.v2_mount, h.v2_path, parent) + "/" + kGroupDir, true);
  for (const auto& [ctrl, mount] : h.v1_mount) groups.emplace_back(Join(mount, h.v1_path[ctrl], parent) + "/" + kGroupDir, false);
  std::set<std::string> checked_alive, checked_dead;
  for (const auto& [group, v2] : groups) {
    std::error_code ec;
    for (fs::directory_iterator it(group, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_directory(ec)) continue;
      std::string name = it->path().filename().string();
      auto dot = name.rfind(".algo-");
      if (dot == std::string::npos || name.rfind(prefix, 0) != 0 || dot < prefix.size()) continue;
      std::string attempt = name.substr(prefix.size(), dot - prefix.size());
      if (checked_alive.count(attempt)) continue;
      if (!checked_dead.count(attempt)) {
        if (alive(attempt)) {
          checked_alive.insert(attempt);
          continue;
        }
        checked_dead.insert(attempt);
      }
      KillAndRemove(it->path().string(), v2);
    }
  }
}

}  // namespace ty::exec::local
