// Batch container jobs (docs/batch-jobs.md): SubmitJob against a job definition, dependencies,
// array jobs whose children are made only as they are released, retries, timeouts, cancel and
// terminate, and the pass that places RUNNABLE jobs on their queue's compute environments.
//
// Each attempt is an executor attempt (the job's command, run in the sandbox in its image or with
// the host's binaries). Stored as kMeta documents "container-job/<seq>": one per job, array parent or child
// that has been made.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "control/controller.h"
#include "control/turn.h"
#include "core/strings.h"
#include "sched/containers.h"
#include "exec/image/reference.h"

namespace ty::control {

namespace {

constexpr const char* kTimeoutReason = "Job attempt duration exceeded timeout";
constexpr const char* kExitedReason = "Essential container in task exited";
constexpr const char* kDependencyFailed = "Dependent Job failed";
// How many entries of one share a pass's snapshot holds past those that fit nowhere now (a job
// too big for the free room): with the free vCPUs, bounds a pass however deep the queue.
constexpr int kScanPerShare = 64;

// The executor's name for attempt `n` (1-based) of `id` (a child's ':' is not a file-name character here).
std::string AttemptIdOf(const std::string& id, size_t n) {
  std::string safe = id;
  std::replace(safe.begin(), safe.end(), ':', '-');
  return "batch-" + safe + "-" + std::to_string(n);
}

bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// Replaces each whole `Ref::name` token of `arg` whose name is in `params` (AWS's parameter
// substitution; a name not in `params` is left as written).
std::string SubstituteRefs(const std::string& arg, const std::map<std::string, std::string>& params) {
  std::string out;
  size_t i = 0;
  while (i < arg.size()) {
    const bool word_start = i == 0 || !IsNameChar(arg[i - 1]);
    if (word_start && arg.compare(i, 5, "Ref::") == 0) {
      size_t end = i + 5;
      while (end < arg.size() && IsNameChar(arg[end])) ++end;
      auto p = params.find(arg.substr(i + 5, end - i - 5));
      if (p != params.end() && end > i + 5) {
        out += p->second;
        i = end;
        continue;
      }
    }
    out += arg[i++];
  }
  return out;
}

State::ContainerUse SizeOf(const ContainerJob& j) { return {j.vcpus, j.memory_mib, j.gpus}; }

// Brings a share's decayed usage up to `now` (what it held since `at` counts in).
void DecayContainerUsage(State::ContainerShareUse& u, int64_t decay_seconds, EpochMs now) {
  if (u.at != 0 && now > u.at) u.usage = sched::DecayedContainerUsage(u.usage, u.held, now - u.at, decay_seconds);
  u.at = std::max(u.at, now);
}

// An attempt of `j` starts (sign +1) or ends (-1) at `now`: its share's usage is brought up to
// then, so that the integral counts what was held until the change.
void HoldForShare(State& s, const ContainerJob& j, EpochMs now, int sign) {
  int64_t decay_seconds = 0;
  if (auto q = s.queues.find(j.queue); q != s.queues.end())
    if (const SchedulingPolicy* p = Controller::FindPolicy(s, q->second.scheduling_policy_arn); p && p->fairshare)
      decay_seconds = p->fairshare->share_decay_seconds;
  State::ContainerShareUse& u = s.container_share_use[j.queue][j.share_identifier];
  DecayContainerUsage(u, decay_seconds, now);
  if (sign > 0) u.held += SizeOf(j);
  else u.held -= SizeOf(j);
}

}  // namespace

const JobDefinition* Controller::FindSubmittableDefinition(const State& s, const std::string& ref) {
  if (const JobDefinition* d = FindJobDefinition(s, ref)) return d;
  if (StartsWith(ref, "arn:") || ref.find(':') != std::string::npos) return nullptr;
  auto by_name = s.job_definitions.find(ref);
  if (by_name == s.job_definitions.end()) return nullptr;
  for (auto it = by_name->second.rbegin(); it != by_name->second.rend(); ++it)
    if (it->second.active) return &it->second;
  return nullptr;
}

std::map<JobStatus, int64_t> Controller::ArrayStatusSummary(const State& s, const ContainerJob& parent) {
  std::map<JobStatus, int64_t> out;
  if (auto it = s.array_counts.find(parent.seq); it != s.array_counts.end()) out = it->second;
  const int64_t unmade = parent.array_size - parent.next_index;
  if (unmade > 0) out[IsTerminal(parent.status) ? JobStatus::kFailed : parent.released ? JobStatus::kRunnable : JobStatus::kPending] += unmade;
  return out;
}

// ------------------------------------------------------------------------------------------
// Submit.

StatusOr<ContainerJob> Controller::SubmitJob(const SubmitJobCommand& cmd) {
  return Execute<ContainerJob>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<ContainerJob> {
    const JobQueue* q = FindQueue(state_, cmd.queue);
    if (!q) return InvalidArgument("jobQueue: job queue " + cmd.queue + " does not exist");
    if (q->job_queue_type != "ECS")
      return InvalidArgument("jobQueue: " + q->name + " is a " + q->job_queue_type +
                             " job queue; container jobs go to a queue of compute environments (SubmitServiceJob takes service jobs)");
    if (q->state != ResourceState::kEnabled) return InvalidArgument("jobQueue: job queue " + q->name + " is DISABLED");
    const bool fair = q->kind == QueueKind::kFairShare;
    if (fair && cmd.share_identifier.empty())
      return InvalidArgument("shareIdentifier: a job submitted to fair-share job queue " + q->name + " needs one");
    if (!fair && !cmd.share_identifier.empty())
      return InvalidArgument("shareIdentifier: job queue " + q->name + " has no fair-share scheduling policy");
    if (!fair && cmd.scheduling_priority)
      return InvalidArgument("schedulingPriorityOverride: only jobs of a fair-share job queue have a scheduling priority");
    const JobDefinition* d = FindSubmittableDefinition(state_, cmd.job_definition);
    if (!d) return InvalidArgument("jobDefinition: no ACTIVE job definition " + cmd.job_definition);
    if (!d->active) return InvalidArgument("jobDefinition: " + d->arn + " is INACTIVE");
    // Dependencies name jobs that exist; N_TO_N pairs arrays of one size; SEQUENTIAL is an array's own.
    for (size_t i = 0; i < cmd.depends_on.size(); ++i) {
      const JobDependency& dep = cmd.depends_on[i];
      const std::string where = "dependsOn[" + std::to_string(i) + "]";
      if (dep.type == "SEQUENTIAL") {
        if (cmd.array_size == 0) return InvalidArgument(where + ": SEQUENTIAL dependencies are for array jobs");
        continue;
      }
      const ContainerJob* other = state_.FindContainerJob(dep.job_id);
      if (!other) return InvalidArgument(where + ".jobId: job " + dep.job_id + " does not exist");
      if (dep.type == "N_TO_N" && (cmd.array_size == 0 || other->array_size != cmd.array_size))
        return InvalidArgument(where + ": an N_TO_N dependency joins two array jobs of the same size (" +
                               std::to_string(cmd.array_size) + " and " + std::to_string(other->array_size) + ")");
    }
    // The definition (decoded when it was registered or loaded), overlaid by the request.
    const ContainerTemplate& def = d->container;
    ContainerJob j;
    j.name = cmd.name;
    j.queue = q->name;
    j.job_definition = d->arn;
    j.image = def.image;
    j.job_role_arn = def.job_role_arn;
    std::map<std::string, std::string> params = def.parameters;
    for (const auto& [k, v] : cmd.parameters) params[k] = v;
    const std::vector<std::string>& command = cmd.command ? *cmd.command : def.command;
    if (!IsHostImage(config_.host_images, j.image))
      if (auto ref = exec::image::ParseImageReference(j.image); ref.ok())
        if (Status where = exec::image::CheckImageLocation(*ref, config_.image_dirs); !where.ok())
          return InvalidArgument("containerProperties.image: " + where.message());
    if (command.empty() && IsHostImage(config_.host_images, j.image))
      return InvalidArgument("containerOverrides.command: neither the request nor job definition " + d->arn +
                             " gives a command, and image '" + j.image + "' runs with this host's software "
                             "(executor.host_images), which has no Cmd of its own");
    for (const auto& a : command) j.command.push_back(SubstituteRefs(a, params));
    j.environment = def.environment;
    for (const auto& [k, v] : cmd.environment) j.environment[k] = v;
    j.vcpus = cmd.vcpus.value_or(def.vcpus);
    j.memory_mib = cmd.memory_mib.value_or(def.memory_mib);
    j.gpus = cmd.gpus.value_or(def.gpus);
    j.retry_attempts = cmd.retry_attempts.value_or(def.retry_attempts);
    j.evaluate_on_exit = cmd.evaluate_on_exit ? *cmd.evaluate_on_exit : def.evaluate_on_exit;
    j.attempt_duration_seconds = cmd.attempt_duration_seconds.value_or(def.attempt_duration_seconds);
    j.share_identifier = cmd.share_identifier;
    j.scheduling_priority = cmd.scheduling_priority.value_or(def.scheduling_priority);
    j.propagate_tags = cmd.propagate_tags.value_or(def.propagate_tags);
    j.tags = cmd.tags;
    j.depends_on = cmd.depends_on;
    j.array_size = cmd.array_size;
    j.owner = cmd.owner;
    if (j.vcpus < 1 || j.memory_mib < 4)
      return InvalidArgument("resourceRequirements: a job needs at least 1 VCPU and 4 MiB of MEMORY");
    // A job that no compute environment of its queue could ever hold would wait forever.
    bool fits = false;
    for (const auto& o : q->compute_environment_order) {
      const ComputeEnvironment& ce = state_.compute_environments.at(o.compute_environment);
      fits = fits || (j.vcpus <= ce.vcpus && j.memory_mib <= ce.memory_mib && j.gpus <= ce.gpus);
    }
    if (!fits)
      return InvalidArgument("resourceRequirements: " + std::to_string(j.vcpus) + " vCPUs, " + std::to_string(j.memory_mib) +
                             " MiB and " + std::to_string(j.gpus) + " GPUs fit none of job queue " + q->name +
                             "'s compute environments");
    j.seq = state_.next_seq++;
    j.id = NewUuid();
    j.arn = Arn("batch", "job/" + j.id);
    j.created_at = t.now;
    j.status = JobStatus::kSubmitted;
    state_.container_seq_by_id[j.id] = j.seq;
    state_.container_by_queue_status[j.queue][JobStatus::kSubmitted].insert(j.seq);
    ContainerJob& stored = state_.container_jobs.emplace(j.seq, std::move(j)).first->second;
    container_pending_admit_.insert(stored.seq);
    t.container_submitted_now.insert(stored.seq);
    t.container_jobs.insert(stored.seq);
    return stored;
  });
}

// ------------------------------------------------------------------------------------------
// Status, indices and dependencies.

void Controller::IndexContainer(ContainerJob& j) {
  state_.container_runnable[j.queue][j.share_identifier].insert({-j.scheduling_priority, j.seq});
}

void Controller::UnindexContainer(const ContainerJob& j) {
  auto q = state_.container_runnable.find(j.queue);
  if (q == state_.container_runnable.end()) return;
  auto share = q->second.find(j.share_identifier);
  if (share == q->second.end()) return;
  share->second.erase({-j.scheduling_priority, j.seq});
  if (share->second.empty()) q->second.erase(share);
  if (q->second.empty()) state_.container_runnable.erase(q);
}

void Controller::SetContainerStatus(Turn& t, ContainerJob& j, JobStatus to, const std::string& reason) {
  const JobStatus from = j.status;
  if (from == JobStatus::kRunnable) UnindexContainer(j);
  if (j.parent_id.empty()) {
    auto& by_status = state_.container_by_queue_status[j.queue];
    by_status[from].erase(j.seq);
    by_status[to].insert(j.seq);
  } else if (auto parent = state_.container_seq_by_id.find(j.parent_id); parent != state_.container_seq_by_id.end()) {
    auto& counts = state_.array_counts[parent->second];
    if (--counts[from] == 0) counts.erase(from);
    ++counts[to];
  }
  j.status = to;
  j.status_reason = reason;
  if (to == JobStatus::kRunnable && j.array_size == 0) IndexContainer(j);
  t.container_jobs.insert(j.seq);
  t.reschedule = true;
  if (IsTerminal(to)) {
    j.stopped_at = t.now;
    if (j.array_size > 0) UnindexContainer(j);
    ContainerJobEnded(t, j);
  }
}

void Controller::EvaluateDependencies(Turn& t, ContainerJob& j) {
  if (j.released || IsTerminal(j.status)) return;
  for (const JobDependency& dep : j.depends_on) {
    if (dep.type == "SEQUENTIAL" || dep.type == "N_TO_N") continue;  // per child: NextChild
    const ContainerJob* other = state_.FindContainerJob(dep.job_id);
    if (!other || other->status == JobStatus::kFailed) {
      if (j.array_size > 0) {  // none of its children will run
        state_.array_counts[j.seq][JobStatus::kFailed] += j.array_size - j.next_index;
        j.next_index = j.array_size;
      }
      SetContainerStatus(t, j, JobStatus::kFailed, kDependencyFailed);
      return;
    }
    if (other->status != JobStatus::kSucceeded) return;  // still waiting
  }
  j.released = true;
  t.container_jobs.insert(j.seq);
  if (j.array_size == 0) {
    SetContainerStatus(t, j, JobStatus::kRunnable, "");
  } else if (j.next_index < j.array_size) {
    IndexContainer(j);  // the parent stays PENDING while its children run
    t.reschedule = true;
  }
}

void Controller::ContainerJobEnded(Turn& t, const ContainerJob& j) {
  // A child: its parent ends once every child has.
  if (!j.parent_id.empty()) {
    auto pseq = state_.container_seq_by_id.find(j.parent_id);
    if (pseq != state_.container_seq_by_id.end()) {
      ContainerJob& parent = state_.container_jobs.at(pseq->second);
      const auto& counts = state_.array_counts[parent.seq];
      auto count = [&](JobStatus s) { auto it = counts.find(s); return it == counts.end() ? int64_t{0} : it->second; };
      const int64_t failed = count(JobStatus::kFailed);
      if (!IsTerminal(parent.status) && parent.next_index == parent.array_size &&
          failed + count(JobStatus::kSucceeded) == parent.array_size) {
        if (failed == 0) {
          SetContainerStatus(t, parent, JobStatus::kSucceeded, "");
        } else {
          SetContainerStatus(t, parent, JobStatus::kFailed,
                             !parent.stop_reason.empty() ? parent.stop_reason
                                                         : std::to_string(failed) + " of " + std::to_string(parent.array_size) +
                                                               " child jobs failed");
        }
      }
    }
    return;
  }
  // The jobs that wait on it look again (a failure fails them, and theirs in turn).
  auto waiting = state_.container_dependents.find(j.id);
  if (waiting == state_.container_dependents.end()) return;
  std::vector<uint64_t> seqs = std::move(waiting->second);
  state_.container_dependents.erase(waiting);
  for (uint64_t seq : seqs)
    if (auto it = state_.container_jobs.find(seq); it != state_.container_jobs.end()) EvaluateDependencies(t, it->second);
}

void Controller::AdmitContainerJobs(Turn& t) {
  if (container_pending_admit_.empty()) return;
  std::vector<uint64_t> admit;
  for (uint64_t seq : container_pending_admit_)
    if (!t.container_submitted_now.count(seq)) admit.push_back(seq);
  for (uint64_t seq : admit) {
    container_pending_admit_.erase(seq);
    ContainerJob& j = state_.container_jobs.at(seq);
    if (j.status != JobStatus::kSubmitted) continue;
    SetContainerStatus(t, j, JobStatus::kPending, "");
    for (const JobDependency& dep : j.depends_on)
      if (dep.type.empty() || dep.type == "N_TO_N")
        if (const ContainerJob* other = state_.FindContainerJob(dep.job_id); other && !IsTerminal(other->status))
          state_.container_dependents[other->id].push_back(j.seq);
    EvaluateDependencies(t, j);
  }
}

// ------------------------------------------------------------------------------------------
// Arrays.

ContainerJob* Controller::NextChild(Turn& t, ContainerJob& parent) {
  while (parent.next_index < parent.array_size) {
    const int64_t i = parent.next_index;
    bool failed = false;
    for (const JobDependency& dep : parent.depends_on) {
      const ContainerJob* before = nullptr;
      if (dep.type == "SEQUENTIAL" && i > 0) {
        before = state_.FindContainerJob(parent.id + ":" + std::to_string(i - 1));
      } else if (dep.type == "N_TO_N") {
        before = state_.FindContainerJob(dep.job_id + ":" + std::to_string(i));
        const ContainerJob* other = state_.FindContainerJob(dep.job_id);
        if (!before && other && IsTerminal(other->status)) {  // that child will never be made
          failed = true;
          continue;
        }
      } else {
        continue;
      }
      if (!before) return nullptr;  // not made yet: wait
      if (before->status == JobStatus::kFailed) failed = true;
      else if (before->status != JobStatus::kSucceeded) return nullptr;
    }
    ContainerJob c;
    c.id = parent.id + ":" + std::to_string(i);
    c.arn = parent.arn + ":" + std::to_string(i);
    c.name = parent.name;
    c.queue = parent.queue;
    c.seq = state_.next_seq++;
    c.status = JobStatus::kPending;
    c.created_at = t.now;
    c.job_definition = parent.job_definition;
    c.image = parent.image;
    c.command = parent.command;
    c.environment = parent.environment;
    c.vcpus = parent.vcpus;
    c.memory_mib = parent.memory_mib;
    c.gpus = parent.gpus;
    c.job_role_arn = parent.job_role_arn;
    c.retry_attempts = parent.retry_attempts;
    c.evaluate_on_exit = parent.evaluate_on_exit;
    c.attempt_duration_seconds = parent.attempt_duration_seconds;
    c.share_identifier = parent.share_identifier;
    c.scheduling_priority = parent.scheduling_priority;
    c.tags = parent.tags;
    c.propagate_tags = parent.propagate_tags;
    c.owner = parent.owner;
    c.parent_id = parent.id;
    c.array_index = i;
    c.released = true;
    state_.container_seq_by_id[c.id] = c.seq;
    state_.array_children[parent.seq][i] = c.seq;
    ++state_.array_counts[parent.seq][JobStatus::kPending];
    ContainerJob& child = state_.container_jobs.emplace(c.seq, std::move(c)).first->second;
    ++parent.next_index;
    t.container_jobs.insert(parent.seq);
    if (parent.next_index == parent.array_size) UnindexContainer(parent);
    if (failed) {
      SetContainerStatus(t, child, JobStatus::kFailed, kDependencyFailed);
      continue;
    }
    SetContainerStatus(t, child, JobStatus::kRunnable, "");
    UnindexContainer(child);  // placed at once by the caller
    return &child;
  }
  return nullptr;
}

// ------------------------------------------------------------------------------------------
// The scheduling pass.

void Controller::ScheduleContainerJobs(Turn& t) {
  if (state_.container_runnable.empty() || disk_low_) return;
  // The snapshot: every compute environment, and each enabled queue with work waiting, its
  // shares' holdings and decayed usage, and the front of each share's runnable index.
  sched::ContainerSnapshot snap;
  std::map<std::string, int> env_index;
  for (const auto& [name, ce] : state_.compute_environments) {
    env_index[name] = static_cast<int>(snap.environments.size());
    auto use = state_.compute_in_use.find(name);
    snap.environments.push_back({name, ce.state == ResourceState::kEnabled, {ce.vcpus, ce.memory_mib, ce.gpus},
                                 use == state_.compute_in_use.end() ? State::ContainerUse{} : use->second});
  }
  for (const auto& [name, shares] : state_.container_runnable) {
    auto found = state_.queues.find(name);
    if (found == state_.queues.end() || found->second.state != ResourceState::kEnabled) continue;
    const JobQueue& q = found->second;
    const SchedulingPolicy* policy = FindPolicy(state_, q.scheduling_policy_arn);
    const FairSharePolicy* fair = policy && policy->fairshare ? &*policy->fairshare : nullptr;
    sched::ContainerQueue& sq = snap.queues.emplace_back();
    sq.name = q.name;
    sq.priority = q.priority;
    sq.seq = q.seq;
    sq.fair_share = fair != nullptr;
    sq.decay_seconds = fair ? fair->share_decay_seconds : 0;
    sq.compute_reservation = fair ? static_cast<int>(fair->compute_reservation) : 0;
    int64_t free_vcpus = 0;
    for (const auto& o : q.compute_environment_order) {
      auto e = env_index.find(o.compute_environment);
      if (e == env_index.end()) continue;
      sq.environments.push_back(e->second);
      const sched::ComputeEnvironmentState& env = snap.environments[static_cast<size_t>(e->second)];
      if (env.enabled) free_vcpus += std::max<int64_t>(0, env.capacity.vcpus - env.in_use.vcpus);
    }
    // Every share with work waiting or attempts running: the latter count for computeReservation.
    auto& uses = state_.container_share_use[q.name];
    for (const auto& [share, entries] : shares) uses[share];
    for (auto it = uses.begin(); it != uses.end();) {
      State::ContainerShareUse& u = it->second;
      DecayContainerUsage(u, sq.decay_seconds, t.now);
      const auto waiting = shares.find(it->first);
      // A share with nothing held, nothing waiting and its usage decayed away is forgotten.
      if (waiting == shares.end() && u.held == State::ContainerUse{} && u.usage.vcpu_seconds < 1e-3 &&
          u.usage.memory_mib_seconds < 1e-3 && u.usage.gpu_seconds < 1e-3) {
        it = uses.erase(it);
        continue;
      }
      sched::ContainerShare& sh = sq.shares.emplace_back();
      sh.identifier = it->first;
      sh.weight_factor = fair ? ShareWeight(fair->share_distribution, it->first) : 1.0;
      sh.usage = u.usage;
      sh.held = u.held;
      if (waiting != shares.end()) {
        // The front of the share: entries until those that fit now could fill the queue's free
        // vCPUs (each start takes at least one; an array parent counts once, as its next child
        // may not be makeable), plus at most kScanPerShare that fit nowhere now, so a pass costs
        // what it can start, however deep the queue.
        int64_t fitting_vcpus = 0;
        int looked_past = 0;
        for (const auto& [priority, seq] : waiting->second) {
          if (fitting_vcpus >= free_vcpus || looked_past >= kScanPerShare) break;
          const ContainerJob& j = state_.container_jobs.at(seq);
          const sched::ContainerCandidate c{seq, SizeOf(j),
                                            j.array_size > 0 ? j.array_size - j.next_index : 1};
          bool fits = false;
          for (int e : sq.environments) {
            const sched::ComputeEnvironmentState& env = snap.environments[static_cast<size_t>(e)];
            State::ContainerUse room = env.capacity;
            room -= env.in_use;
            fits = fits || (env.enabled && c.size.FitsIn(room));
          }
          if (fits) fitting_vcpus += c.size.vcpus;
          else ++looked_past;
          sh.runnable.push_back(c);
        }
      }
      ++it;
    }
  }
  // The starts: an array parent's proposal makes its next child, which may not be makeable now
  // (it waits for its predecessor, or fails on a dependency): then the pass passes over it.
  sched::ContainerPass pass(std::move(snap));
  while (auto s = pass.Next()) {
    ContainerJob& entry = state_.container_jobs.at(s->seq);
    ContainerJob* job = entry.array_size > 0 ? NextChild(t, entry) : &entry;
    if (!job) {
      pass.Skip();
      continue;
    }
    StartContainerAttempt(t, *job, pass.snapshot().environments[static_cast<size_t>(s->environment)].name);
  }
}

void Controller::StartContainerAttempt(Turn& t, ContainerJob& j, const std::string& environment) {
  if (j.status == JobStatus::kRunnable) UnindexContainer(j);
  j.compute_environment = environment;
  State::ContainerUse& use = state_.compute_in_use[environment];
  use += SizeOf(j);
  HoldForShare(state_, j, t.now, +1);
  j.stop_reason.clear();
  ContainerAttempt a;
  const std::string attempt_id = AttemptIdOf(j.id, j.attempts.size() + 1);
  const std::string definition_name = j.job_definition.substr(j.job_definition.rfind('/') + 1);
  a.log_stream_name = definition_name.substr(0, definition_name.rfind(':')) + "/default/" + attempt_id;
  a.started_at = t.now;
  j.attempts.push_back(a);
  state_.container_attempts[attempt_id] = j.seq;
  SetContainerStatus(t, j, JobStatus::kStarting, "");
  // jobRoleArn, judged on the owner's policies as they are now (an array child, a retry, a job
  // that waited in its queue): refused, the attempt is not started and the job fails with why.
  if (Status allowed = MayRunAsRole(*directory(), config_.account_id, j.owner, j.job_role_arn, kEcsTasksPrincipal, t.now);
      !allowed.ok()) {
    j.stop_reason = "the job may not run as its role: " + allowed.message();
    if (j.stop_reason.size() > 1024) j.stop_reason.resize(1024);
    RefuseAttempt(attempt_id, allowed, t.now);
    return;
  }
  const std::string role = RoleNameOf(j.job_role_arn, config_.account_id);
  if (!role.empty() && state_.principals.roles.count(role)) {
    if (j.credentials_token.empty()) j.credentials_token = RandomAlnum(48, false);
    role_sessions_.Mint(attempt_id, role, config_.account_id, t.now);
    role_sessions_.SetBearer(attempt_id, j.credentials_token);
  }
  t.starts.emplace_back(attempt_id, BuildContainerSpec(j));
}

std::unique_ptr<exec::LogFile> Controller::OpenContainerLog(const std::string& attempt_id) const {
  return executor_ ? executor_->OpenLog(attempt_id, 1) : nullptr;
}

exec::AttemptSpec Controller::BuildContainerSpec(const ContainerJob& j) const {
  exec::AttemptSpec spec;
  spec.attempt_id = AttemptIdOf(j.id, j.attempts.size());
  spec.training_job_name = spec.attempt_id;
  spec.training_job_arn = j.arn;
  spec.region = config_.region;
  spec.instance_type = "batch-container";
  spec.instance_count = 1;
  spec.vcpus = static_cast<int>(j.vcpus);
  spec.gpus = static_cast<int>(j.gpus);
  spec.memory_mib = j.memory_mib;
  // Allocated whole while it runs: the operator's size, not a training job's 30 GB default.
  spec.volume_size_gb = config_.container_volume_gb;
  // An OCI image runs with the job's command in place of its Cmd (its own Cmd when there is none);
  // an image executor.host_images maps to the host's software runs the command with the host's
  // binaries (docs/images.md).
  exec::UseContainerImage(&spec, j.image, j.command);
  spec.environment = j.environment;
  spec.extra_env["AWS_BATCH_JOB_ID"] = j.id;
  spec.extra_env["AWS_BATCH_JOB_ATTEMPT"] = std::to_string(j.attempts.size());
  spec.extra_env["AWS_BATCH_JQ_NAME"] = j.queue;
  spec.extra_env["AWS_BATCH_CE_NAME"] = j.compute_environment;
  if (!j.parent_id.empty()) {
    spec.extra_env["AWS_BATCH_JOB_ARRAY_INDEX"] = std::to_string(j.array_index);
    if (auto p = state_.container_seq_by_id.find(j.parent_id); p != state_.container_seq_by_id.end())
      spec.extra_env["AWS_BATCH_JOB_ARRAY_SIZE"] = std::to_string(state_.container_jobs.at(p->second).array_size);
  }
  // jobRoleArn: the role's credentials through the container credentials provider, as a training
  // job's (docs/security.md, "Roles for jobs").
  AddRoleEnvironment(spec, j.credentials_token);
  spec.stop_grace_seconds = config_.stop_grace_seconds;
  return spec;
}

// ------------------------------------------------------------------------------------------
// Attempts' events, timeouts, cancel and terminate.

bool Controller::ApplyContainerEvent(Turn& t, const exec::AttemptEvent& e) {
  auto found = state_.container_attempts.find(e.attempt_id);
  if (found == state_.container_attempts.end()) return false;
  ContainerJob& j = state_.container_jobs.at(found->second);
  ContainerAttempt& a = j.attempts.back();
  switch (e.phase) {
    case exec::Phase::kPreparing:
    case exec::Phase::kUploading:
    case exec::Phase::kCheckpointed:
      return true;
    case exec::Phase::kTraining:
      if (j.status == JobStatus::kStarting) {
        a.started_at = e.at;
        if (j.started_at == 0) j.started_at = e.at;
        SetContainerStatus(t, j, JobStatus::kRunning, "");
      }
      return true;
    case exec::Phase::kExited:
    case exec::Phase::kLost:
      break;
  }
  role_sessions_.Revoke(e.attempt_id);
  state_.container_attempts.erase(found);
  State::ContainerUse& use = state_.compute_in_use[j.compute_environment];
  use -= SizeOf(j);
  HoldForShare(state_, j, t.now, -1);
  a.stopped_at = e.at;
  const bool ran = e.phase == exec::Phase::kExited && !e.stopped && !e.max_runtime_exceeded;
  a.has_exit_code = e.phase == exec::Phase::kExited && !e.stopped;
  a.exit_code = e.exit_code;
  if (e.phase == exec::Phase::kLost) a.reason = "the attempt was lost: " + e.message;
  else if (e.exit_code != 0 && !e.failure_reason.empty()) a.reason = e.failure_reason.substr(0, 256);
  t.container_jobs.insert(j.seq);
  const bool timed_out = j.stop_reason == kTimeoutReason;
  if (!j.stop_reason.empty() && !timed_out) {  // CancelJob / TerminateJob
    a.status_reason = j.stop_reason;
    SetContainerStatus(t, j, JobStatus::kFailed, j.stop_reason);
    return true;
  }
  a.status_reason = timed_out ? kTimeoutReason : kExitedReason;
  if (ran && e.exit_code == 0 && !timed_out) {
    SetContainerStatus(t, j, JobStatus::kSucceeded, kExitedReason);
    return true;
  }
  // retryStrategy: another attempt while attempts remain, unless the first evaluateOnExit rule
  // that matches says EXIT (no rule matching retries, as AWS does).
  bool retry = static_cast<int>(j.attempts.size()) < j.retry_attempts;
  if (retry) {
    const std::string code = a.has_exit_code ? std::to_string(a.exit_code) : "";
    for (const ContainerExitRule& r : j.evaluate_on_exit) {
      if (!r.on_exit_code.empty() && (code.empty() || !GlobMatch(r.on_exit_code, code))) continue;
      if (!r.on_reason.empty() && !GlobMatch(r.on_reason, a.reason)) continue;
      if (!r.on_status_reason.empty() && !GlobMatch(r.on_status_reason, a.status_reason)) continue;
      retry = r.retry;
      break;
    }
  }
  j.stop_reason.clear();
  SetContainerStatus(t, j, retry ? JobStatus::kRunnable : JobStatus::kFailed, a.status_reason);
  return true;
}

void Controller::EnforceContainerTimeouts(Turn& t) {
  for (const auto& [attempt_id, seq] : state_.container_attempts) {
    ContainerJob& j = state_.container_jobs.at(seq);
    if (j.attempt_duration_seconds <= 0 || !j.stop_reason.empty() || j.attempts.empty()) continue;
    if (t.now - j.attempts.back().started_at < j.attempt_duration_seconds * 1000) continue;
    j.stop_reason = kTimeoutReason;
    t.container_jobs.insert(seq);
    t.stops.emplace_back(attempt_id, config_.stop_grace_seconds);
  }
}

Status Controller::StopJob(const StopJobCommand& cmd) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    const ContainerJob* found = state_.FindContainerJob(cmd.job_id);
    if (!found) return InvalidArgument("jobId: job " + cmd.job_id + " does not exist");
    ContainerJob& j = state_.container_jobs.at(found->seq);
    auto stop_one = [&](ContainerJob& job) REQUIRES(turn_mu_, state_mu_) {
      if (IsTerminal(job.status)) return;
      if (job.status == JobStatus::kStarting || job.status == JobStatus::kRunning) {
        if (!cmd.terminate || !job.stop_reason.empty()) return;  // CancelJob leaves started jobs alone
        job.stop_reason = cmd.reason;
        t.container_jobs.insert(job.seq);
        t.stops.emplace_back(AttemptIdOf(job.id, job.attempts.size()), config_.stop_grace_seconds);
        return;
      }
      container_pending_admit_.erase(job.seq);
      SetContainerStatus(t, job, JobStatus::kFailed, cmd.reason);
    };
    if (j.array_size == 0) {
      stop_one(j);
      return Status::Ok();
    }
    if (IsTerminal(j.status)) return Status::Ok();
    // An array: its children not made yet fail with it; the made ones as any job.
    j.stop_reason = cmd.reason;
    UnindexContainer(j);
    state_.array_counts[j.seq][JobStatus::kFailed] += j.array_size - j.next_index;
    j.next_index = j.array_size;
    t.container_jobs.insert(j.seq);
    std::vector<uint64_t> children;
    for (const auto& [index, seq] : state_.array_children[j.seq]) children.push_back(seq);
    for (uint64_t seq : children) stop_one(state_.container_jobs.at(seq));
    const auto& counts = state_.array_counts[j.seq];
    int64_t ended = 0;
    for (const auto& [st, n] : counts)
      if (IsTerminal(st)) ended += n;
    // The last child to end may already have ended the parent (ContainerJobEnded).
    if (!IsTerminal(j.status) && (ended == j.array_size || j.status == JobStatus::kSubmitted)) {
      container_pending_admit_.erase(j.seq);
      SetContainerStatus(t, j, JobStatus::kFailed, cmd.reason);
    }
    return Status::Ok();
  });
}

// ------------------------------------------------------------------------------------------
// Loading and re-adopting.

void Controller::LoadContainerJob(State& s, ContainerJob j) {
  s.next_seq = std::max(s.next_seq, j.seq + 1);
  const uint64_t seq = j.seq;
  s.container_seq_by_id[j.id] = seq;
  ContainerJob& stored = s.container_jobs.emplace(seq, std::move(j)).first->second;
  if (stored.parent_id.empty()) {
    s.container_by_queue_status[stored.queue][stored.status].insert(seq);
  } else if (auto p = s.container_seq_by_id.find(stored.parent_id); p != s.container_seq_by_id.end()) {
    s.array_children[p->second][stored.array_index] = seq;
    ++s.array_counts[p->second][stored.status];
  }
}

void Controller::ReadoptContainerAttempts() {
  const EpochMs now = clock_.now_ms();
  // Children skipped by a cancel were never made: they count as failed.
  for (auto& [seq, j] : state_.container_jobs) {
    if (j.array_size == 0) continue;
    auto made = state_.array_children.find(seq);
    const int64_t n = made == state_.array_children.end() ? 0 : static_cast<int64_t>(made->second.size());
    if (j.next_index > n) state_.array_counts[seq][JobStatus::kFailed] += j.next_index - n;
  }
  for (auto& [seq, j] : state_.container_jobs) {
    switch (j.status) {
      case JobStatus::kSubmitted:
        container_pending_admit_.insert(seq);
        break;
      case JobStatus::kPending:
        if (j.array_size > 0 && j.released && j.next_index < j.array_size) IndexContainer(j);
        if (!j.released)
          for (const JobDependency& dep : j.depends_on)
            if (dep.type.empty() || dep.type == "N_TO_N")
              if (const ContainerJob* other = state_.FindContainerJob(dep.job_id); other && !IsTerminal(other->status))
                state_.container_dependents[other->id].push_back(seq);
        break;
      case JobStatus::kRunnable:
        IndexContainer(j);
        break;
      case JobStatus::kScheduled:
      case JobStatus::kStarting:
      case JobStatus::kRunning: {
        const std::string attempt_id = AttemptIdOf(j.id, j.attempts.size());
        state_.container_attempts[attempt_id] = seq;
        State::ContainerUse& use = state_.compute_in_use[j.compute_environment];
        use += SizeOf(j);
        HoldForShare(state_, j, now, +1);
        const std::string role = RoleNameOf(j.job_role_arn, config_.account_id);
        if (!j.credentials_token.empty() && state_.principals.roles.count(role)) {
          role_sessions_.Mint(attempt_id, role, config_.account_id, now);
          role_sessions_.SetBearer(attempt_id, j.credentials_token);
        }
        if (executor_->Adopt(attempt_id).ok()) {
          if (!j.stop_reason.empty()) (void)executor_->Stop(attempt_id, config_.stop_grace_seconds);
          break;
        }
        // Committed as started but never handed to the executor (the server died in between).
        (void)executor_->Discard(attempt_id);
        if (Status st = executor_->Start(attempt_id, BuildContainerSpec(j)); !st.ok())
          spdlog::error("cannot start attempt {}: {}", attempt_id, st.message());
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace ty::control
