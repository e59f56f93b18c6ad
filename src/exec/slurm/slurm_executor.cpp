#include "exec/slurm/slurm_executor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "core/steady_clock.h"
#include "exec/local/attempt_files.h"
#include "exec/local/run_command.h"
#include "exec/slurm/slurm_nodes.h"

namespace ty::exec {

namespace fs = std::filesystem;

namespace {

// How long an attempt may go unseen by squeue after its submission before it counts as gone
// (squeue and sbatch race; a job submitted a moment ago may be missing from a listing begun
// before it).
constexpr int64_t kUnseenGraceMs = 10000;
// How long a fenced attempt's supervisor gets to acknowledge (its node may be truly gone).
constexpr int64_t kFenceWaitMs = 30000;

// Slurm job states in which the job still holds (or waits for) its nodes.
bool Alive(const std::string& state) {
  for (const char* s : {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
                        "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"})
    if (state == s) return true;
  return false;
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// One "Key=Value" of `scontrol show ... --oneliner` output ("" when absent).
std::string Field(const std::string& line, const std::string& key) {
  size_t at = 0;
  while ((at = line.find(key + "=", at)) != std::string::npos) {
    if (at == 0 || line[at - 1] == ' ') {
      at += key.size() + 1;
      return line.substr(at, line.find_first_of(" \n", at) - at);
    }
    at += key.size();
  }
  return "";
}

}  // namespace

std::vector<SlurmJobState> ParseSqueue(const std::string& text) {
  std::vector<SlurmJobState> jobs;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    std::vector<std::string> f;
    size_t start = 0;
    for (size_t bar; (bar = line.find('|', start)) != std::string::npos; start = bar + 1) f.push_back(line.substr(start, bar - start));
    f.push_back(line.substr(start));
    if (f.size() != 5 || f[0].empty()) continue;
    jobs.push_back({f[0], f[1], f[2], f[3], f[4]});
  }
  return jobs;
}

std::vector<std::string> SlurmResourceArgs(const AttemptSpec& spec, const InstanceTypeSpec* type, const SlurmConfig& slurm) {
  std::vector<std::string> args;
  const std::string partition = type && !type->slurm_partition.empty() ? type->slurm_partition : slurm.partition;
  args.push_back("--partition=" + partition);
  if (!slurm.account.empty()) args.push_back("--account=" + slurm.account);
  if (type && type->slurm_whole_node) {
    args.push_back("--exclusive");
  } else {
    args.push_back("--cpus-per-task=" + std::to_string(std::max(1, spec.vcpus)));
    if (spec.memory_mib > 0) args.push_back("--mem=" + std::to_string(spec.memory_mib) + "M");
    if (spec.gpus > 0) args.push_back("--gres=gpu:" + std::to_string(spec.gpus));
  }
  if (type && !type->slurm_constraint.empty()) args.push_back("--constraint=" + type->slurm_constraint);
  return args;
}

SbatchPlan PlanSbatch(const AttemptSpec& spec, const InstanceTypeSpec* type, const SlurmConfig& slurm,
                      const std::string& dir, const std::string& supervisor_binary) {
  SbatchPlan p;
  p.argv = {"--parsable",
            "--job-name=ty-" + spec.attempt_id,
            "--comment=trainyard",
            "--nodes=" + std::to_string(std::max(1, spec.instance_count)),
            "--ntasks-per-node=1",
            "--no-requeue",
            "--export=ALL",  // what RunSbatch leaves in sbatch's environment
            "--output=" + dir + "/slurm-%j.out",
            "--chdir=" + dir};
  for (auto& a : SlurmResourceArgs(spec, type, slurm)) p.argv.push_back(std::move(a));
  if (spec.max_runtime_seconds > 0 && !spec.warm_pool) {
    // Slurm's limit is a backstop behind the supervisor's own: the runtime, the grace and a margin.
    int64_t minutes = (spec.max_runtime_seconds + spec.stop_grace_seconds + 300 + 59) / 60;
    p.argv.push_back("--time=" + std::to_string(minutes));
  }
  for (const auto& a : slurm.sbatch_args) p.argv.push_back(a);
  p.argv.push_back(dir + "/batch.sh");
  p.script = "#!/bin/sh\n# trainyard attempt " + spec.attempt_id + " (docs/slurm.md)\n";
  if (spec.warm_pool) {
    // A warm pool keeps the allocation: after the attempt, the batch step waits for the next
    // attempt on the pool (Start hands it over) until the pool's directory goes.
    p.script += Quote(supervisor_binary) + " " + Quote(dir) + "\nexec " + Quote(supervisor_binary) + " --hold " +
                Quote(spec.warm_pool->workspace) + " " + Quote(dir) + "\n";
  } else {
    p.script += "exec " + Quote(supervisor_binary) + " " + Quote(dir) + "\n";
  }
  return p;
}

SbatchPlan PlanHold(const std::string& name, const std::vector<std::string>& resources, const SlurmConfig& slurm,
                    const std::string& hold_dir, const std::string& attempts_root, const std::string& supervisor_binary) {
  SbatchPlan p;
  p.argv = {"--parsable",
            "--job-name=" + name,
            "--comment=trainyard",
            "--nodes=1",
            "--ntasks-per-node=1",
            "--no-requeue",
            "--export=ALL",  // what RunSbatch leaves in sbatch's environment
            "--output=" + hold_dir + "/slurm-%j.out",
            "--chdir=" + hold_dir};
  p.argv.insert(p.argv.end(), resources.begin(), resources.end());
  for (const auto& a : slurm.sbatch_args) p.argv.push_back(a);
  for (const auto& a : slurm.hold_sbatch_args) p.argv.push_back(a);
  p.argv.push_back(hold_dir + "/batch.sh");
  // The holder ends by itself a minute after the server would have given the allocation back:
  // only when no server is there to do it.
  p.script = "#!/bin/sh\n# trainyard held allocation (docs/slurm.md, \"Held allocations\")\nexec " + Quote(supervisor_binary) +
             " --held " + Quote(hold_dir) + " " + Quote(attempts_root) + " " +
             std::to_string(slurm.hold_keep_alive_seconds + 60) + "\n";
  return p;
}

SlurmExecutor::SlurmExecutor(Options options)
    : AttemptDirectoryExecutor(options.attempts_root), options_(std::move(options)) {
  std::error_code ec;
  fs::create_directories(options_.attempts_root, ec);
  options_.host.launcher = "slurm";
  options_.host.agent_binary = options_.supervisor_binary;
  options_.host.slurm_bin_dir = options_.slurm.bin_dir;
  options_.host.slurm_conf = options_.slurm.conf;
  // Held allocations live beside the attempts, on the same shared file system. Their Slurm jobs
  // carry a tag of this directory, so that a server tells its own from another server's.
  const fs::path slurm_dir = fs::absolute(options_.attempts_root).lexically_normal().parent_path() / "slurm";
  holds_root_ = (slurm_dir / "holds").string();
  fs::create_directories(holds_root_, ec);
  uint32_t tag = 2166136261u;  // FNV-1a of the directory's path
  for (unsigned char c : holds_root_) tag = (tag ^ c) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", tag);
  hold_prefix_ = std::string("ty-hold-") + hex + "-";
  options_.host.slurm_node_addresses = (slurm_dir / "nodes.json").string();
  AdoptHolds();
  // Supervisors on the nodes poke this server over UDP (a unix socket does not cross machines).
  udp_fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  options_.host.notify_socket.clear();
  if (udp_fd_ >= 0 && ::inet_pton(AF_INET, options_.notify_address.c_str(), &addr.sin_addr) == 1 &&
      ::bind(udp_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    socklen_t len = sizeof addr;
    ::getsockname(udp_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    options_.host.notify_socket = "udp:" + options_.notify_address + ":" + std::to_string(ntohs(addr.sin_port));
    timeval tv{0, 200000};
    ::setsockopt(udp_fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    threads_.emplace_back([this] { ListenLoop(); });
    // Running supervisors poke whichever server wrote this last: the one that leads now.
    options_.host.notify_file = (slurm_dir / "notify").string();
    local::WriteFileAtomic(options_.host.notify_file, options_.host.notify_socket + "\n");
  }
  // sbatch answers in tens of milliseconds; a few at once keep a burst of starts moving.
  for (int i = 0; i < 4; ++i) threads_.emplace_back([this] { SubmitLoop(); });
  threads_.emplace_back([this] { MonitorLoop(); });
}

SlurmExecutor::~SlurmExecutor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (udp_fd_ >= 0) ::shutdown(udp_fd_, SHUT_RDWR);
  for (auto& t : threads_) t.join();
  if (udp_fd_ >= 0) ::close(udp_fd_);
}

int SlurmExecutor::RunSlurm(const std::string& command, const std::vector<std::string>& args, std::string* out,
                            std::string* err) const {
  std::vector<std::string> argv = {options_.slurm.bin_dir.empty() ? command : options_.slurm.bin_dir + "/" + command};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::pair<std::string, std::string>> env;
  if (!options_.slurm.conf.empty()) env.emplace_back("SLURM_CONF", options_.slurm.conf);
  return local::CaptureCommand(argv, env, out, err);
}

int SlurmExecutor::RunSbatch(const std::vector<std::string>& args, std::string* out, std::string* err) const {
  // A clean environment with only these, exported whole (--export=ALL): the batch step gets the
  // server's PATH, LANG, LC_ALL and HOME and nothing else of it. Naming them in the export list
  // instead makes Slurm build the user's login environment before the batch step starts, which
  // took about a second per job on the test cluster (bench/README.md, "Held allocations").
  std::vector<std::string> argv = {"env", "-i"};
  for (const char* name : {"PATH", "LANG", "LC_ALL", "HOME"})
    if (const char* value = std::getenv(name)) argv.push_back(std::string(name) + "=" + value);
  if (!options_.slurm.conf.empty()) argv.push_back("SLURM_CONF=" + options_.slurm.conf);
  argv.push_back(options_.slurm.bin_dir.empty() ? "sbatch" : options_.slurm.bin_dir + "/sbatch");
  argv.insert(argv.end(), args.begin(), args.end());
  return local::CaptureCommand(argv, {}, out, err);
}

void SlurmExecutor::ListenLoop() {
  char buf[512];
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    ssize_t n = ::recv(udp_fd_, buf, sizeof buf, 0);
    if (n >= 0 && options_.wake) options_.wake();
  }
}

void SlurmExecutor::SubmitLoop() {
  while (true) {
    Submission s;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      s = std::move(queue_.front());
      queue_.pop_front();
    }
    std::string out, err;
    int rc = RunSbatch(s.plan.argv, &out, &err);
    Submitted result;
    std::string id = out.substr(0, out.find_first_of(";\n"));
    if (rc == 0 && !id.empty() && id.find_first_not_of("0123456789") == std::string::npos) {
      result.job_id = id;
      // Kept with the attempt: a restarted server finds its job by it; and with its warm pool,
      // whose next attempt runs in the same allocation.
      local::WriteFileAtomic(Dir(s.attempt_id) + "/slurm_job_id", id + "\n");
      if (!s.pool_workspace.empty()) local::WriteFileAtomic(s.pool_workspace + "/slurm_job_id", id + "\n");
    } else {
      while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
      result.error = "sbatch failed (exit " + std::to_string(rc) + "): " + (err.empty() ? out : err);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      submitted_[s.attempt_id] = result;
    }
    if (options_.wake) options_.wake();
  }
}

void SlurmExecutor::MonitorLoop() {
  int64_t next_capacity = 0;
  while (true) {
    RefreshJobs();
    // The nodes change slowly; read them every second at most.
    if (SteadyMs() >= next_capacity) {
      RefreshCapacity();
      next_capacity = SteadyMs() + std::max(1000, options_.slurm.poll_interval_ms);
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(options_.slurm.poll_interval_ms), [this] { return stopping_; });
    if (stopping_) return;
  }
}

void SlurmExecutor::RefreshCapacity() {
  std::string nodes_out, jobs_out, err;
  std::vector<std::string> problems;
  bool read = RunSlurm("scontrol", {"show", "node", "--oneliner"}, &nodes_out, &err) == 0 &&
              RunSlurm("squeue", std::vector<std::string>(std::begin(slurm::kSqueueArgs), std::end(slurm::kSqueueArgs)),
                       &jobs_out, &err) == 0;
  const EpochMs now = options_.clock ? options_.clock->now_ms() : 0;
  std::shared_ptr<CapacityReport> report;
  if (read) {
    const std::vector<slurm::SlurmNode> nodes = slurm::ParseNodes(nodes_out, &problems);
    report = std::make_shared<CapacityReport>(slurm::ComputeCapacity(options_.instance_types, options_.slurm.partition,
                                                                     nodes, slurm::ParseJobs(jobs_out, &problems), now, problems));
    // Each node's address, for the supervisors: one question to slurmctld fewer per start.
    nlohmann::json addresses = nlohmann::json::object();
    for (const slurm::SlurmNode& n : nodes)
      if (!n.name.empty() && !n.addr.empty()) addresses[n.name] = n.addr;
    std::string text = addresses.dump();
    if (text != node_addresses_written_ && local::WriteFileAtomic(options_.host.slurm_node_addresses, text))
      node_addresses_written_ = std::move(text);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!report) {
    // Slurm cannot be reached: the last view stands, saying so.
    if (!capacity_) return;
    report = std::make_shared<CapacityReport>(*capacity_);
    report->problem = "Slurm could not be read: " + err.substr(0, 512);
  }
  capacity_ = std::move(report);
}

std::shared_ptr<const CapacityReport> SlurmExecutor::Capacity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_;
}

void SlurmExecutor::RefreshJobs() {
  const int64_t began = SteadyMs();
  std::string out, err;
  // Every state: a job that ended is listed (for MinJobAge) with how it ended.
  if (RunSlurm("squeue", {"-h", "--me", "-t", "all", "-o", "%i|%j|%T|%r|%N"}, &out, &err) != 0) return;
  std::map<std::string, SlurmJobState> jobs;
  std::map<std::string, std::string> by_name;
  for (auto& j : ParseSqueue(out)) {
    if (j.name.rfind("ty-", 0) != 0) continue;
    // Ours have plain numeric ids; the newest is the longest, then the greatest (an array
    // task's "12_3" from someone naming a job so sorts as text and never throws).
    auto& newest = by_name[j.name];
    if (newest.empty() || j.id.size() > newest.size() || (j.id.size() == newest.size() && j.id > newest)) newest = j.id;
    std::string id = j.id;
    jobs.emplace(std::move(id), std::move(j));
  }
  bool changed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, j] : jobs) {
      auto old = jobs_.find(id);
      if (old == jobs_.end() || old->second.state != j.state) changed = true;
    }
    jobs_ = std::move(jobs);
    by_name_ = std::move(by_name);
    jobs_read_at_ = began;
  }
  if (changed && options_.wake) options_.wake();
}

std::optional<SlurmJobState> SlurmExecutor::JobOf(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (job_id.empty()) return std::nullopt;
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second;
}

std::string SlurmExecutor::NodeFailure(const std::string& job_id) const {
  if (job_id.empty()) return "";
  std::string out;
  if (RunSlurm("scontrol", {"show", "job", "--oneliner", job_id}, &out) != 0) return "";
  const std::string state = Field(out, "JobState");
  const std::string nodes = Field(out, "NodeList");
  if (state == "NODE_FAIL" || state == "BOOT_FAIL")
    return "its Slurm job " + job_id + " ended with " + state + " (nodes " + nodes + ")";
  if (nodes.empty() || nodes == "(null)") return "";
  std::string node_out;
  if (RunSlurm("scontrol", {"show", "node", "--oneliner", nodes}, &node_out) != 0) return "";
  std::vector<std::string> problems;
  for (const slurm::SlurmNode& node : slurm::ParseNodes(node_out, &problems))
    for (const char* bad : {"DOWN", "NOT_RESPONDING", "FAIL", "POWER_DOWN", "REBOOT"})
      if (node.state.find(bad) != std::string::npos)
        return "Slurm node " + node.name + " of its job " + job_id + " is " + node.state;
  return "";
}

void SlurmExecutor::Classify(const Tracked& t, AttemptEvent* e) const {
  if (e->phase != Phase::kExited && e->phase != Phase::kLost) return;
  const bool unexplained_stop = e->stopped && !t.stop_requested;
  if (e->phase == Phase::kExited && e->exit_code == 0 && !unexplained_stop) return;
  std::string why = t.fenced_at ? t.fence_reason : NodeFailure(t.job_id);
  if (!why.empty()) {
    // The node failed under the attempt: not the job's failure; every process of it is fenced.
    local::WriteFileAtomic(local::FencePath(Dir(e->attempt_id)), why + "\n");
    e->phase = Phase::kExited;
    e->stopped = t.stop_requested;
    e->max_runtime_exceeded = false;
    if (e->exit_code == 0) e->exit_code = 1;
    e->failure_kind = FailureKind::kCapacity;
    e->failure_reason = "CapacityError: the instances were lost: " + why;
    return;
  }
  if (unexplained_stop) {
    // Slurm signalled the attempt without trainyard asking (its time limit, an administrator's scancel).
    auto job = JobOf(t.job_id);
    e->stopped = false;
    if (e->exit_code == 0) e->exit_code = 1;
    e->failure_kind = FailureKind::kInternal;
    e->failure_reason = "InternalServerError: Slurm ended the attempt's job " + t.job_id +
                        (job ? " (" + job->state + (job->reason.empty() || job->reason == "None" ? "" : ": " + job->reason) + ")" : "");
  }
}

Status SlurmExecutor::Start(const std::string& id, const AttemptSpec& spec) {
  if (spec.attempt_id != id) return InvalidArgument("attempt spec of " + spec.attempt_id + " started as " + id);
  const std::string dir = Dir(id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir + ": " + ec.message());
  const std::string text = "{\"attempt\":" + Encode(spec) + ",\"host\":" + local::Encode(options_.host) + "}";
  if (!local::WriteFileAtomic(local::SpecPath(dir), text, true, 0600)) return Internal("cannot write the spec of " + id);
  const InstanceTypeSpec* type = nullptr;
  for (const auto& it : options_.instance_types)
    if (it.name == spec.instance_type) type = &it;
  tracked_[id] = Tracked{{}, SteadyMs(), "", false, 0, ""};
  if (spec.warm_pool && !spec.warm_pool->reused_from.empty()) {
    // The pool's allocation is still held by its batch step: the attempt runs there, as a new
    // supervisor in the same Slurm job, without waiting for Slurm to allocate again.
    std::string job_id;
    if (local::ReadFile(spec.warm_pool->workspace + "/slurm_job_id", &job_id)) job_id = job_id.substr(0, job_id.find('\n'));
    auto job = JobOf(job_id);
    bool running = job && job->state == "RUNNING";
    if (!running && !job_id.empty() && job_id.find_first_not_of("0123456789") == std::string::npos) {
      // The monitor's listing may be older than the allocation (a slow squeue under load): ask
      // Slurm about this one job before giving the pool's allocation up for a new one.
      std::string out;
      running = RunSlurm("squeue", {"-h", "-j", job_id, "-o", "%T"}, &out) == 0 && Trim(out) == "RUNNING";
    }
    if (running && local::WriteFileAtomic(spec.warm_pool->workspace + "/next", fs::absolute(dir).string() + "\n")) {
      local::WriteFileAtomic(dir + "/slurm_job_id", job_id + "\n");
      tracked_[id].job_id = job_id;
      return Status::Ok();
    }
  }
  if (StartHeld(id, spec, type)) return Status::Ok();
  // A Slurm job of its own: only now is its batch script needed.
  SbatchPlan plan = PlanSbatch(spec, type, options_.slurm, fs::absolute(dir).string(), options_.supervisor_binary);
  if (!local::WriteFileAtomic(dir + "/batch.sh", plan.script, true, 0755)) {
    tracked_.erase(id);
    return Internal("cannot write the batch script of " + id);
  }
  // The pool's directory holds its allocation's job id (and the holder waits on it).
  if (spec.warm_pool) fs::create_directories(spec.warm_pool->workspace, ec);
  {
    std::lock_guard<std::mutex> lock(mu_);
    submitted_.erase(id);
    queue_.push_back({id, std::move(plan), spec.warm_pool ? spec.warm_pool->workspace : ""});
  }
  cv_.notify_all();
  return Status::Ok();
}

Status SlurmExecutor::Stop(const std::string& id, int grace_seconds) {
  const std::string dir = Dir(id);
  if (!fs::exists(dir)) return NotFound("no attempt " + id);
  // The supervisor looks for the stop file ten times a second, wherever it runs.
  local::WriteFileAtomic(local::StopPath(dir), std::to_string(grace_seconds));
  auto it = tracked_.find(id);
  if (it == tracked_.end()) return Status::Ok();
  it->second.stop_requested = true;
  // A job still waiting in Slurm's queue never started its supervisor: it is cancelled there.
  // Only while it still waits (--state): the listing may be older than its start, and a held
  // allocation that started holds more than this attempt.
  if (auto job = JobOf(it->second.job_id); job && job->state == "PENDING") {
    std::string out;
    RunSlurm("scancel", {"--state=PENDING", job->id}, &out);
  }
  return Status::Ok();
}

Status SlurmExecutor::Interrupt(const std::string& id, int grace_seconds) {
  const std::string dir = Dir(id);
  if (!fs::exists(dir)) return NotFound("no attempt " + id);
  local::WriteFileAtomic(local::InterruptPath(dir), std::to_string(grace_seconds));
  return Stop(id, grace_seconds);
}

Status SlurmExecutor::Adopt(const std::string& id) {
  const std::string dir = Dir(id);
  if (!fs::exists(local::SpecPath(dir))) return NotFound("attempt " + id + " was never started");
  Tracked t{{}, SteadyMs(), "", false, 0, ""};
  std::string text;
  if (local::ReadFile(dir + "/slurm_job_id", &text)) t.job_id = text.substr(0, text.find('\n'));
  t.stop_requested = fs::exists(local::StopPath(dir));
  tracked_[id] = t;
  return Status::Ok();
}

std::vector<AttemptEvent> SlurmExecutor::Poll() {
  std::vector<AttemptEvent> events;
  const int64_t now_steady = SteadyMs();
  const EpochMs now = options_.clock ? options_.clock->now_ms() : 0;
  std::map<std::string, Submitted> submitted;
  std::map<std::string, std::string> by_name;
  int64_t read_at = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    submitted.swap(submitted_);
    by_name = by_name_;
    read_at = jobs_read_at_;
  }
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    const std::string& id = it->first;
    Tracked& t = it->second;
    bool done = false;
    if (auto s = submitted.find(id); s != submitted.end()) {
      if (!s->second.error.empty()) {
        AttemptEvent e;
        e.attempt_id = id;
        e.phase = Phase::kExited;
        e.at = now;
        e.exit_code = 1;
        e.stopped = t.stop_requested;
        e.failure_kind = FailureKind::kInternal;
        e.failure_reason = "InternalServerError: Slurm did not accept the attempt: " + s->second.error;
        events.push_back(std::move(e));
        it = tracked_.erase(it);
        continue;
      }
      t.job_id = s->second.job_id;
    }
    if (t.job_id.empty()) {
      // Adopted without a recorded id (the server died between sbatch and writing it): by name.
      auto n = by_name.find("ty-" + id);
      if (n != by_name.end() && read_at > t.since) t.job_id = n->second;
    }
    size_t first = events.size();
    done = local::ReadStatusEvents(id, Dir(id), &t.cursor, false, &events);
    if (!done && !t.fenced_at) {
      auto job = JobOf(t.job_id);
      bool gone = false;
      if (job) {
        if (job->state == "NODE_FAIL" || job->state == "BOOT_FAIL") {
          t.fence_reason = "its Slurm job " + t.job_id + " ended with " + job->state + " (nodes " + job->nodes + ")";
          t.fenced_at = now_steady;
          local::WriteFileAtomic(local::FencePath(Dir(id)), t.fence_reason + "\n");
        } else if (!Alive(job->state)) {
          gone = true;
        } else if (held_in_.count(id) && !HeldAttemptPending(id)) {
          // Its allocation lives on, but its holder is past it: the supervisor ended, with or
          // without an outcome.
          gone = true;
        }
      } else if (read_at > t.since + (t.job_id.empty() ? 3 : 1) * kUnseenGraceMs) {
        // Not listed by squeue long after its submission, or adopted without a job id and not
        // found by name either (the server died before or during its sbatch).
        bool queued = false;
        {
          std::lock_guard<std::mutex> lock(mu_);
          for (const auto& q : queue_) queued = queued || q.attempt_id == id;
        }
        gone = !queued && !submitted.count(id);
      }
      if (gone) {
        // Ended: its outcome, if the supervisor wrote one in time, else lost.
        done = local::ReadStatusEvents(id, Dir(id), &t.cursor, true, &events);
        if (!done) {
          AttemptEvent e;
          e.attempt_id = id;
          e.at = now;
          if (t.stop_requested && job && job->state == "CANCELLED") {
            e.phase = Phase::kExited;  // cancelled while it waited in Slurm's queue
            e.stopped = true;
          } else {
            e.phase = Phase::kLost;
            e.message = "the instances were lost: the Slurm job " + (t.job_id.empty() ? std::string("of the attempt") : t.job_id) +
                        " ended" + (job ? " (" + job->state + (job->reason.empty() || job->reason == "None" ? "" : ": " + job->reason) + ")" : "") +
                        " without an outcome";
          }
          events.push_back(std::move(e));
          done = true;
        }
      }
    }
    if (!done && t.fenced_at) {
      // Fenced: done when the supervisor acknowledged (its Exited above), or its node is gone for good.
      bool alive = false;
      if (auto job = JobOf(t.job_id)) alive = Alive(job->state);
      if (!alive || now_steady - t.fenced_at > kFenceWaitMs) {
        AttemptEvent e;
        e.attempt_id = id;
        e.phase = Phase::kLost;
        e.at = now;
        events.push_back(std::move(e));
        done = true;
      }
    }
    for (size_t i = first; i < events.size(); ++i) Classify(t, &events[i]);
    it = done ? tracked_.erase(it) : std::next(it);
  }
  TendHolds(events, now_steady, read_at, submitted, by_name);
  return events;
}

bool SlurmExecutor::StartHeld(const std::string& id, const AttemptSpec& spec, const InstanceTypeSpec* type) {
  if (options_.slurm.hold_max_allocations <= 0 || spec.warm_pool || spec.instance_count > 1) return false;
  std::string key;
  for (const std::string& a : SlurmResourceArgs(spec, type, options_.slurm)) key += a + " ";
  const std::string attempt_dir = fs::absolute(Dir(id)).lexically_normal().string();
  // An idle allocation of the same shape that Slurm says runs: handed over, no sbatch, no wait.
  for (auto& [hold_id, h] : holds_) {
    if (!h.attempt.empty() || h.key != key) continue;
    auto job = JobOf(h.job_id);
    bool running = job && job->state == "RUNNING";
    if (!running && job && Alive(job->state)) {
      // The monitor's listing may be older than the allocation's start: ask about this one job.
      std::string out;
      running = RunSlurm("squeue", {"-h", "-j", h.job_id, "-o", "%T"}, &out) == 0 && Trim(out) == "RUNNING";
    }
    if (!running) continue;
    if (!local::WriteFileAtomic(HoldDir(hold_id) + "/next", attempt_dir + "\n")) continue;
    local::WriteFileAtomic(Dir(id) + "/slurm_job_id", h.job_id + "\n");
    tracked_[id].job_id = h.job_id;
    h.attempt = id;
    held_in_[id] = hold_id;
    return true;
  }
  // None: the idle ones of other shapes go back first (this attempt may need their nodes), then
  // a new one is asked for, this attempt its first.
  std::vector<std::string> idle;
  for (const auto& [hold_id, h] : holds_)
    if (h.attempt.empty()) idle.push_back(hold_id);
  for (const std::string& hold_id : idle) ReleaseHold(hold_id);
  if (static_cast<int>(holds_.size()) >= options_.slurm.hold_max_allocations) return false;
  static std::mt19937_64 rng{std::random_device{}()};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(rng()));
  const std::string hold_id = hex;
  const std::string dir = HoldDir(hold_id);
  std::error_code ec;
  if (!fs::create_directory(dir, ec) || ec) return false;
  SbatchPlan plan = PlanHold(HoldName(hold_id), SlurmResourceArgs(spec, type, options_.slurm), options_.slurm, dir,
                             fs::absolute(options_.attempts_root).lexically_normal().string(), options_.supervisor_binary);
  if (!local::WriteFileAtomic(dir + "/key", key + "\n") || !local::WriteFileAtomic(dir + "/batch.sh", plan.script, true, 0755) ||
      !local::WriteFileAtomic(dir + "/next", attempt_dir + "\n")) {
    fs::remove_all(dir, ec);
    return false;
  }
  holds_[hold_id] = Hold{key, "", id, SteadyMs(), 0};
  held_in_[id] = hold_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    submitted_.erase(id);
    queue_.push_back({id, std::move(plan), dir});
  }
  cv_.notify_all();
  return true;
}

bool SlurmExecutor::HeldAttemptPending(const std::string& id) const {
  auto in = held_in_.find(id);
  if (in == held_in_.end()) return false;
  const std::string dir = HoldDir(in->second);
  // The holder writes `running` before it removes `next`: one of them names the attempt until
  // its supervisor has ended.
  std::string text;
  for (const char* f : {"/running", "/next"})
    if (local::ReadFile(dir + f, &text) && fs::path(Trim(text)).filename() == id) return true;
  return false;
}

void SlurmExecutor::AdoptHolds() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(holds_root_, ec)) {
    if (!entry.is_directory(ec)) continue;
    const std::string hold_id = entry.path().filename().string();
    const std::string dir = entry.path().string();
    Hold h;
    h.since = h.idle_since = SteadyMs();
    std::string text;
    if (local::ReadFile(dir + "/key", &text)) h.key = text.substr(0, text.find('\n'));
    if (local::ReadFile(dir + "/slurm_job_id", &text)) h.job_id = Trim(text);
    for (const char* f : {"/running", "/next"})
      if (h.attempt.empty() && local::ReadFile(dir + f, &text)) h.attempt = fs::path(Trim(text)).filename().string();
    if (h.key.empty()) {
      fs::remove_all(dir, ec);  // never finished being made
      continue;
    }
    if (!h.attempt.empty()) held_in_[h.attempt] = hold_id;
    holds_[hold_id] = std::move(h);
  }
}

void SlurmExecutor::ReleaseHold(const std::string& hold_id) {
  auto it = holds_.find(hold_id);
  if (it == holds_.end()) return;
  std::error_code ec;
  fs::remove_all(HoldDir(hold_id), ec);
  // One still waiting in Slurm's queue never started its holder: it is cancelled there (only
  // while it waits: one that started ends by itself once its directory is gone).
  if (auto job = JobOf(it->second.job_id); job && job->state == "PENDING") {
    std::string out;
    RunSlurm("scancel", {"--state=PENDING", job->id}, &out);
  }
  if (!it->second.attempt.empty()) held_in_.erase(it->second.attempt);
  holds_.erase(it);
}

void SlurmExecutor::TendHolds(const std::vector<AttemptEvent>& events, int64_t now_steady, int64_t read_at,
                              const std::map<std::string, Submitted>& submitted,
                              const std::map<std::string, std::string>& by_name) {
  for (const AttemptEvent& e : events) {
    if (e.phase != Phase::kExited && e.phase != Phase::kLost) continue;
    auto in = held_in_.find(e.attempt_id);
    if (in == held_in_.end()) continue;
    auto h = holds_.find(in->second);
    if (h != holds_.end() && h->second.attempt == e.attempt_id) {
      h->second.attempt.clear();
      h->second.idle_since = now_steady;
    }
    held_in_.erase(in);
  }
  std::vector<std::string> release;
  for (auto& [hold_id, h] : holds_) {
    if (h.job_id.empty()) {
      const std::string& id = hold_id;  // a structured binding is not captured before C++20's clang 16
      auto s = std::find_if(submitted.begin(), submitted.end(),
                            [&](const auto& kv) { return held_in_.count(kv.first) && held_in_.at(kv.first) == id; });
      if (s != submitted.end()) {
        h.job_id = s->second.job_id;  // "" when sbatch failed: the attempt failed with it
      } else if (auto n = by_name.find(HoldName(hold_id)); n != by_name.end() && read_at > h.since) {
        h.job_id = n->second;  // adopted before its sbatch's answer was written down
      }
      if (h.job_id.empty()) {
        bool waiting = false;
        {
          std::lock_guard<std::mutex> lock(mu_);
          for (const auto& q : queue_) waiting = waiting || q.pool_workspace == HoldDir(hold_id);
        }
        if (s != submitted.end() || (!waiting && read_at > h.since + 3 * kUnseenGraceMs)) release.push_back(hold_id);
        continue;
      }
    }
    auto job = JobOf(h.job_id);
    if (job ? !Alive(job->state) : read_at > h.since + kUnseenGraceMs) {
      release.push_back(hold_id);  // Slurm ended it (its node failed, its time ran out, scancel)
      continue;
    }
    // Busy with an attempt no longer tracked (it ended before a restart): idle once its holder is past it.
    if (!h.attempt.empty() && !tracked_.count(h.attempt) && !HeldAttemptPending(h.attempt)) {
      held_in_.erase(h.attempt);
      h.attempt.clear();
      h.idle_since = now_steady;
    }
    if (h.attempt.empty() && now_steady - h.idle_since >= int64_t{options_.slurm.hold_keep_alive_seconds} * 1000)
      release.push_back(hold_id);
  }
  for (const std::string& hold_id : release) ReleaseHold(hold_id);
  // A job of this server's holds that it does not know (made just before a crash, or given back a
  // moment ago and not yet gone) is cancelled, once.
  for (const auto& [name, job_id] : by_name) {
    if (name.rfind(hold_prefix_, 0) != 0 || cancelled_.count(job_id)) continue;
    const std::string hold_id = name.substr(hold_prefix_.size());
    if (holds_.count(hold_id) || fs::exists(HoldDir(hold_id))) continue;
    auto job = JobOf(job_id);
    if (!job || !Alive(job->state)) continue;
    std::string out;
    RunSlurm("scancel", {job_id}, &out);
    cancelled_.insert(job_id);
  }
}

Status SlurmExecutor::Discard(const std::string& id) {
  tracked_.erase(id);
  std::error_code ec;
  fs::remove_all(Dir(id), ec);
  if (ec) return Internal("cannot remove " + Dir(id) + ": " + ec.message());
  return Status::Ok();
}

void SlurmExecutor::Cleanup(const std::string& id) {
  std::error_code ec;
  fs::remove_all(Dir(id) + "/hosts", ec);
}

}  // namespace ty::exec
