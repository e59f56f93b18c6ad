// Plays a scenario file (docs/simulate.md, "Scenarios") through the real controller on the
// in-memory ports (tests/testing/), stepped turn by turn on a manual clock: the same snapshot
// builder and passes as the server, with no processes and no waiting.
//
// The harness plays the executor: after a start it reports the attempt Preparing and Training,
// and at start + duration it reports it exited (0); a stop the controller asks for (a
// preemption, a warm pool giving way) it reports at once as an exit of a stopped attempt.
//
//   scenario_runner FILE    exit 0: every expectation holds; 1: one does not; 2: a bad file
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>

#include "api/decode.h"
#include "control/controller.h"
#include "sim/sim.h"
#include "testing/fakes.h"

namespace ty {
namespace {

using nlohmann::json;
using control::Controller;
using control::State;
using sim::Policy;
using sim::Scenario;
using sim::ScenarioJob;

constexpr EpochMs kEpoch = 1'800'000'000'000;

class Runner {
 public:
  explicit Runner(const Scenario& sc) : sc_(sc) {}

  Status Run() {
    if (Status st = Open(); !st.ok()) return st;
    // Every instant at which something is due: the file's times and the exits of running
    // attempts, which become known as attempts start.
    size_t next_job = 0, next_expect = 0;
    for (;;) {
      int64_t t = INT64_MAX;
      if (next_job < sc_.jobs.size()) t = std::min(t, sc_.jobs[next_job].job.submit_s);
      if (next_expect < sc_.expects.size()) t = std::min(t, sc_.expects[next_expect].t_s);
      for (const auto& [attempt, end] : ends_) t = std::min(t, end);
      if (t == INT64_MAX) break;
      clock_.set_ms(kEpoch + t * 1000);
      // Completions before submits (as in the simulator).
      for (auto it = ends_.begin(); it != ends_.end();) {
        if (it->second != t) {
          ++it;
          continue;
        }
        exec_->Push(it->first, exec::Phase::kExited, clock_.now_ms());
        Log(t, "end", job_of_attempt_[it->first]);
        ended_.insert({job_of_attempt_[it->first], t});
        it = ends_.erase(it);
      }
      Settle(t);
      while (next_job < sc_.jobs.size() && sc_.jobs[next_job].job.submit_s == t) {
        if (Status st = Submit(sc_.jobs[next_job]); !st.ok()) return st;
        ++next_job;
      }
      // The arrival batch of an idle fair-share queue: the jobs of this instant are weighed
      // together when it closes, before anything else happens.
      Settle(t);
      if (config_.scheduler_batch_ms > 0 && HasBatch()) {
        clock_.advance_ms(config_.scheduler_batch_ms);
        Settle(t);
      }
      while (next_expect < sc_.expects.size() && sc_.expects[next_expect].t_s == t) Check(sc_.expects[next_expect++]);
    }
    return Status::Ok();
  }

  int expectations = 0;
  std::vector<std::string> failures;
  std::string log;

 private:
  Status Open() {
    config_ = DefaultConfig();
    config_.data_dir = "/nonexistent-scenario-data";
    config_.sandbox = "none";
    config_.data_dir_reserve_mib = 0;
    config_.instance_types.clear();
    auto types = sc_.instance_types;
    if (types.empty()) types.emplace_back("ml.g5.xlarge", sc_.cluster.gpus);
    for (const auto& [name, count] : types) {
      InstanceTypeSpec t;
      t.name = name;
      t.count = count;
      t.gpus = 1;
      config_.instance_types.push_back(t);
    }
    default_type_ = types.front().first;
    auto executor = std::make_unique<testing::FakeExecutor>();
    exec_ = executor.get();
    control::Ports ports{std::make_unique<testing::MemStore>(data_), std::make_unique<testing::MemEventLog>(data_),
                         std::move(executor)};
    auto c = Controller::Open(config_, clock_, std::move(ports));
    if (!c.ok()) return c.status();
    c_ = std::move(c).value();
    if (sc_.compute_environment) return OpenContainers(*sc_.compute_environment);

    std::vector<sim::ScenarioQueue> queues = sc_.queues;
    if (queues.empty()) queues.push_back({"q", sc_.cluster.policy, 1});
    for (const auto& q : queues) {
      queue_policy_[q.name] = q.policy;
      json limits = {{{"capacityUnit", q.policy == Policy::kQuota ? default_type_ : std::string("NUM_INSTANCES")},
                      {"maxCapacity", q.policy == Policy::kQuota ? types.front().second : Total(types)}}};
      if (Status st = Call(api::DecodeCreateServiceEnvironment(
                               {{"serviceEnvironmentName", "env-" + q.name}, {"serviceEnvironmentType", "SAGEMAKER_TRAINING"},
                                {"capacityLimits", limits}}),
                           [&](auto& cmd) { return c_->CreateServiceEnvironment(cmd).status(); });
          !st.ok())
        return st;
      json req = {{"jobQueueName", q.name}, {"jobQueueType", "SAGEMAKER_TRAINING"}, {"priority", q.priority},
                  {"serviceEnvironmentOrder", {{{"order", 1}, {"serviceEnvironment", "env-" + q.name}}}}};
      if (q.policy != Policy::kFifo) {
        json policy = {{"name", "policy-" + q.name}};
        if (q.policy == Policy::kFairShare) {
          policy["fairsharePolicy"] = FairSharePolicy();
        } else {
          policy["quotaSharePolicy"] = {{"idleResourceAssignmentStrategy", "FIFO"}};
        }
        if (Status st = Call(api::DecodeCreateSchedulingPolicy(policy),
                             [&](auto& cmd) { return c_->CreateSchedulingPolicy(cmd).status(); });
            !st.ok())
          return st;
        req["schedulingPolicyArn"] = c_->Arn("batch", "scheduling-policy/policy-" + q.name);
      }
      if (Status st = Call(api::DecodeCreateJobQueue(req), [&](auto& cmd) { return c_->CreateJobQueue(cmd).status(); });
          !st.ok())
        return st;
      if (q.policy != Policy::kQuota) continue;
      for (const auto& [name, share] : sc_.cluster.shares) {
        const char* strategy = share.strategy == sim::Strategy::kReserve ? "RESERVE"
                               : share.strategy == sim::Strategy::kLend ? "LEND"
                                                                        : "LEND_AND_BORROW";
        json sharing = {{"strategy", strategy}};
        if (share.borrow_limit_percent >= 0) sharing["borrowLimit"] = share.borrow_limit_percent;
        json qs = {{"jobQueue", q.name}, {"quotaShareName", name},
                   {"capacityLimits", {{{"capacityUnit", default_type_}, {"maxCapacity", share.gpus}}}},
                   {"resourceSharingConfiguration", sharing},
                   {"preemptionConfiguration", {{"inSharePreemption", share.in_share_preemption ? "ENABLED" : "DISABLED"}}}};
        if (Status st = Call(api::DecodeCreateQuotaShare(qs), [&](auto& cmd) { return c_->CreateQuotaShare(cmd).status(); });
            !st.ok())
          return st;
      }
    }
    default_queue_ = queues.front().name;
    return Status::Ok();
  }

  // The fairsharePolicy of the scenario's shares.
  json FairSharePolicy() const {
    json dist = json::array();
    for (const auto& [name, share] : sc_.cluster.shares)
      dist.push_back({{"shareIdentifier", name}, {"weightFactor", share.weight_factor}});
    return {{"shareDecaySeconds", sc_.cluster.decay_seconds > 0 ? sc_.cluster.decay_seconds : 600},
            {"computeReservation", sc_.cluster.compute_reservation},
            {"shareDistribution", dist}};
  }

  // A container scenario: compute environment "ce" of the given capacity, queue "q" (FIFO or fair
  // share) on it, and job definition "d" whose jobs run `true` with the host's binaries.
  Status OpenContainers(const sched::ContainerResources& capacity) {
    json tags = {{"trainyard:memoryMiB", std::to_string(capacity.memory_mib)}, {"trainyard:gpus", std::to_string(capacity.gpus)}};
    if (Status st = Call(api::DecodeCreateComputeEnvironment({{"computeEnvironmentName", "ce"}, {"type", "MANAGED"},
                                                              {"computeResources", {{"maxvCpus", capacity.vcpus}}}, {"tags", tags}}),
                         [&](auto& cmd) { return c_->CreateComputeEnvironment(cmd).status(); });
        !st.ok())
      return st;
    json queue = {{"jobQueueName", "q"}, {"priority", 1}, {"computeEnvironmentOrder", {{{"order", 1}, {"computeEnvironment", "ce"}}}}};
    if (sc_.cluster.policy == Policy::kFairShare) {
      if (Status st = Call(api::DecodeCreateSchedulingPolicy({{"name", "policy-q"}, {"fairsharePolicy", FairSharePolicy()}}),
                           [&](auto& cmd) { return c_->CreateSchedulingPolicy(cmd).status(); });
          !st.ok())
        return st;
      queue["schedulingPolicyArn"] = c_->Arn("batch", "scheduling-policy/policy-q");
    }
    if (Status st = Call(api::DecodeCreateJobQueue(queue), [&](auto& cmd) { return c_->CreateJobQueue(cmd).status(); }); !st.ok())
      return st;
    json props = {{"image", "local/scenario"}, {"command", {"true"}},
                  {"resourceRequirements", {{{"type", "VCPU"}, {"value", "1"}}, {{"type", "MEMORY"}, {"value", "2048"}}}}};
    if (Status st = Call(api::DecodeRegisterJobDefinition({{"jobDefinitionName", "d"}, {"type", "container"}, {"containerProperties", props}}),
                         [&](auto& cmd) { return c_->RegisterJobDefinition(cmd).status(); });
        !st.ok())
      return st;
    queue_policy_["q"] = sc_.cluster.policy;
    default_queue_ = "q";
    return Status::Ok();
  }

  Status SubmitContainer(const ScenarioJob& j, const std::string& where) {
    json resources = {{{"type", "VCPU"}, {"value", std::to_string(j.container.vcpus)}},
                      {{"type", "MEMORY"}, {"value", std::to_string(j.container.memory_mib)}}};
    if (j.container.gpus > 0) resources.push_back({{"type", "GPU"}, {"value", std::to_string(j.container.gpus)}});
    json req = {{"jobName", j.job.id}, {"jobQueue", "q"}, {"jobDefinition", "d"},
                {"containerOverrides", {{"resourceRequirements", resources}}}};
    if (sc_.cluster.policy == Policy::kFairShare) {
      const sim::TeamSpec team = sc_.cluster.TeamOf(j.job.team);
      req["shareIdentifier"] = team.share.empty() ? j.job.team : team.share;
      req["schedulingPriorityOverride"] = j.job.priority >= 0 ? j.job.priority : team.priority;
    }
    auto cmd = api::DecodeSubmitJob(req);
    if (!cmd.ok()) return InvalidArgument(where + cmd.status().message());
    auto job = c_->SubmitJob(*cmd);
    if (!job.ok()) return InvalidArgument(where + job.status().message());
    id_of_[j.job.id] = job->id;
    container_name_of_[job->id] = j.job.id;
    return Status::Ok();
  }

  static int64_t Total(const std::vector<std::pair<std::string, int64_t>>& types) {
    int64_t n = 0;
    for (const auto& t : types) n += t.second;
    return n;
  }

  template <typename Cmd, typename F>
  static Status Call(const StatusOr<Cmd>& cmd, F f) {
    if (!cmd.ok()) return cmd.status();
    Cmd c = *cmd;
    return f(c);
  }

  json Payload(const ScenarioJob& j) {
    // A training job's name allows no underscore; a service job's does (its attempts are
    // found through their service job).
    std::string name = j.job.id;
    std::replace(name.begin(), name.end(), '_', '-');
    json p = {{"TrainingJobName", name},
              {"RoleArn", "arn:aws:iam::000000000000:role/" + (j.role.empty() ? std::string("R") : j.role)},
              {"AlgorithmSpecification", {{"TrainingImage", "x"}, {"TrainingInputMode", "File"}, {"ContainerEntrypoint", {"true"}}}},
              {"OutputDataConfig", {{"S3OutputPath", "s3://bucket/out"}}},
              {"ResourceConfig", {{"InstanceType", j.instance_type.empty() ? default_type_ : j.instance_type},
                                  {"InstanceCount", j.job.gpus}, {"VolumeSizeInGB", 1}}}};
    if (j.keep_alive_s > 0) p["ResourceConfig"]["KeepAlivePeriodInSeconds"] = j.keep_alive_s;
    // The scheduler knows a runtime bound only with runtime_bound = "exact"; otherwise the
    // server's default bound (one day) applies.
    if (sc_.cluster.exact_runtime) p["StoppingCondition"] = {{"MaxRuntimeInSeconds", j.job.duration_s}};
    return p;
  }

  Status Submit(const ScenarioJob& j) {
    const std::string where = "line " + std::to_string(j.line) + ": " + j.job.id + ": ";
    duration_[j.job.id] = j.job.duration_s;
    team_[j.job.id] = j.job.team;
    gpus_[j.job.id] = j.job.gpus;
    if (sc_.compute_environment) return SubmitContainer(j, where);
    const api::HostFacts host{c_->config(), c_->sandbox()};
    if (j.training) {
      json req = Payload(j);
      if (!j.ladder.empty()) req["Tags"] = {{{"Key", "trainyard:capacity-ladder"}, {"Value", j.ladder}}};
      auto cmd = api::DecodeCreateTrainingJob(req, host);
      if (!cmd.ok()) return InvalidArgument(where + cmd.status().message());
      auto tj = c_->CreateTrainingJob(*cmd);
      if (!tj.ok()) return InvalidArgument(where + tj.status().message());
      training_.insert(j.job.id);
      return Status::Ok();
    }
    const std::string queue = j.queue.empty() ? default_queue_ : j.queue;
    auto policy = queue_policy_.find(queue);
    if (policy == queue_policy_.end()) return InvalidArgument(where + "no queue " + queue);
    json req = {{"jobName", j.job.id}, {"jobQueue", queue}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                {"serviceRequestPayload", Payload(j).dump()}};
    const sim::TeamSpec team = sc_.cluster.TeamOf(j.job.team);
    const int priority = j.job.priority >= 0 ? j.job.priority : team.priority;
    if (policy->second == Policy::kFairShare) {
      req["shareIdentifier"] = team.share.empty() ? j.job.team : team.share;
      req["schedulingPriority"] = priority;
    } else if (policy->second == Policy::kQuota) {
      req["quotaShareName"] = team.share;
      req["schedulingPriority"] = priority;
    }
    if (!j.ladder.empty()) req["tags"] = {{"trainyard:capacity-ladder", j.ladder}};
    auto cmd = api::DecodeSubmitServiceJob(req, host);
    if (!cmd.ok()) return InvalidArgument(where + cmd.status().message());
    auto job = c_->SubmitServiceJob(*cmd);
    if (!job.ok()) return InvalidArgument(where + job.status().message());
    id_of_[j.job.id] = job->id;
    return Status::Ok();
  }

  // Turns until the controller asks nothing more of the executor at this instant.
  void Settle(int64_t t) {
    for (int quiet = 0, turns = 0; quiet < 2 && turns < 1000; ++turns) {
      c_->Step();
      bool acted = false;
      const auto started = exec_->started();
      for (; seen_starts_ < started.size(); ++seen_starts_) {
        const std::string& attempt = started[seen_starts_];
        const std::string job = JobOfAttempt(attempt);
        job_of_attempt_[attempt] = job;
        exec_->Push(attempt, exec::Phase::kPreparing, clock_.now_ms());
        exec_->Push(attempt, exec::Phase::kTraining, clock_.now_ms());
        ends_[attempt] = t + duration_[job];
        starts_.insert({job, t});
        type_of_[job] = exec_->spec(attempt).instance_type;
        Log(t, "start", job);
        acted = true;
      }
      const auto stopped = exec_->stopped();
      for (; seen_stops_ < stopped.size(); ++seen_stops_) {
        const std::string& attempt = stopped[seen_stops_];
        if (!ends_.erase(attempt)) continue;  // already exited
        exec::AttemptEvent e;
        e.attempt_id = attempt;
        e.phase = exec::Phase::kExited;
        e.at = clock_.now_ms();
        e.exit_code = 143;
        e.stopped = true;
        exec_->Push(e);
        preempts_.insert({job_of_attempt_[attempt], t});
        Log(t, "preempt", job_of_attempt_[attempt]);
        acted = true;
      }
      quiet = acted ? 0 : quiet + 1;
    }
  }

  bool HasBatch() {
    return c_->Read([&](const State& s) {
      for (const auto& [seq, js] : s.jobs)
        if (js.batch_until > clock_.now_ms()) return true;
      return false;
    });
  }

  // The scenario job an attempt belongs to: a training job's own name, or its service job's.
  std::string JobOfAttempt(const std::string& attempt) {
    // A container job's attempt: "batch-<job id>-<attempt number>".
    if (auto dash = attempt.rfind('-'); sc_.compute_environment && attempt.rfind("batch-", 0) == 0 && dash > 6)
      if (auto it = container_name_of_.find(attempt.substr(6, dash - 6)); it != container_name_of_.end()) return it->second;
    return c_->Read([&](const State& s) -> std::string {
      const TrainingJob* tj = s.FindTrainingJob(attempt);
      if (tj == nullptr || tj->service_job_id.empty()) return attempt;
      const auto* js = s.FindJob(tj->service_job_id);
      return js == nullptr ? attempt : js->job.name;
    });
  }

  // "running", "waiting" or "ended", from the controller's state.
  std::string StateOf(const std::string& name) {
    if (training_.count(name))
      return c_->Read([&](const State& s) -> std::string {
        const TrainingJob* tj = s.FindTrainingJob(name);
        if (tj == nullptr) return "missing";
        return tj->training_end_time > 0 ? "ended" : tj->launched ? "running" : "waiting";
      });
    const bool container = sc_.compute_environment.has_value();
    return c_->Read([&](const State& s) -> std::string {
      const ContainerJob* cj = container ? s.FindContainerJob(id_of_.at(name)) : nullptr;
      const auto* js = container ? nullptr : s.FindJob(id_of_.at(name));
      switch (container ? cj->status : js->job.status) {
        case JobStatus::kScheduled:
        case JobStatus::kStarting:
        case JobStatus::kRunning: return "running";
        case JobStatus::kSucceeded:
        case JobStatus::kFailed: return "ended";
        default: return "waiting";
      }
    });
  }

  // Whether a warm pool's latest job is `name` (kept after it, or running it).
  bool Warm(const std::string& name) {
    return c_->Read([&](const State& s) {
      for (const auto& [id, pool] : s.warm_pools)
        if (pool.owner_job == name) return true;
      return false;
    });
  }

  void Check(const sim::ScenarioExpect& e) {
    const std::string where = "line " + std::to_string(e.line) + ": ";
    ++expectations;
    if (e.what == "held") {
      std::map<std::string, int64_t> held;
      for (const auto& [name, team] : team_)
        if (StateOf(name) == "running") held[team] += gpus_[name];
      for (const auto& [team, want] : e.held)
        if (held[team] != want)
          failures.push_back(where + "expected team " + team + " to hold " + std::to_string(want) + " GPUs at " +
                             std::to_string(e.t_s) + ", but it held " + std::to_string(held[team]));
      return;
    }
    for (const auto& name : e.jobs) {
      bool ok = false;
      std::string got = StateOf(name);
      if (e.what == "start") ok = starts_.count({name, e.t_s}) > 0;
      else if (e.what == "preempt") ok = preempts_.count({name, e.t_s}) > 0;
      else if (e.what == "end") ok = ended_.count({name, e.t_s}) > 0;
      else if (e.what == "wait") ok = got == "waiting";
      else if (e.what == "run") ok = got == "running";
      else if (e.what == "on") {
        ok = got == "running" && type_of_[name] == e.type;
        got += " on " + (type_of_[name].empty() ? std::string("nothing") : type_of_[name]);
      } else if (e.what == "warm" || e.what == "cold") {
        ok = Warm(name) == (e.what == "warm");
        got += Warm(name) ? ", a warm pool's latest job" : ", no warm pool's latest job";
      }
      if (!ok)
        failures.push_back(where + "expected " + name + " to " + e.what + " at " + std::to_string(e.t_s) + ", but it was " +
                           got + " then");
    }
  }

  void Log(int64_t t, const char* what, const std::string& job) {
    log += "t=" + std::to_string(t) + " " + what + " " + job + "\n";
  }

  const Scenario& sc_;
  Config config_;
  ManualClock clock_{kEpoch};
  std::shared_ptr<testing::MemData> data_ = std::make_shared<testing::MemData>();
  testing::FakeExecutor* exec_ = nullptr;  // owned by c_
  std::unique_ptr<Controller> c_;
  std::string default_type_, default_queue_;
  std::map<std::string, Policy> queue_policy_;
  std::map<std::string, std::string> id_of_;  // scenario job -> service (or container) job id
  std::map<std::string, std::string> container_name_of_;  // container job id -> scenario job
  std::set<std::string> training_;            // scenario jobs created with CreateTrainingJob
  std::map<std::string, int64_t> duration_, gpus_;
  std::map<std::string, std::string> team_;
  std::map<std::string, std::string> type_of_;  // scenario job -> the instance type of its latest start
  std::map<std::string, std::string> job_of_attempt_;
  std::map<std::string, int64_t> ends_;  // running attempt -> when it exits
  std::set<std::pair<std::string, int64_t>> starts_, preempts_, ended_;
  size_t seen_starts_ = 0, seen_stops_ = 0;
};

}  // namespace
}  // namespace ty

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: scenario_runner FILE\n";
    return 2;
  }
  std::ifstream f(argv[1]);
  if (!f) {
    std::cerr << argv[1] << ": cannot read\n";
    return 2;
  }
  std::stringstream text;
  text << f.rdbuf();
  auto sc = ty::sim::ParseScenario(text.str(), argv[1]);
  if (!sc.ok()) {
    std::cerr << sc.status().message() << "\n";
    return 2;
  }
  if (!sc->controller) {
    std::cerr << argv[1] << ": runners leaves out the controller (runners = \"sim\")\n";
    return 2;
  }
  ty::Runner runner(*sc);
  if (ty::Status st = runner.Run(); !st.ok()) {
    std::cerr << argv[1] << ": " << st.message() << "\n";
    return 2;
  }
  for (const auto& failure : runner.failures) std::cerr << argv[1] << ":" << failure.substr(5) << "\n";
  if (!runner.failures.empty()) {
    std::cerr << "decisions:\n" << runner.log;
    return 1;
  }
  std::cout << argv[1] << ": " << runner.expectations << " expectations hold through the controller\n";
  return 0;
}
