// Trace replay in virtual time through the production scheduling library (sched/).
//
// A trace job becomes one service job of `num_gpus` instances of the single instance type "gpu"
// (1 instance = 1 GPU). The cluster file picks the policy: one FIFO queue, one fair-share queue,
// or one quota-share queue. Passes run after each batch of events at the same virtual time;
// nothing here reads a clock, so the same inputs give the same result (docs/simulate.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "sched/containers.h"

namespace ty::sim {

enum class Policy { kFifo, kFairShare, kQuota };
enum class Strategy { kReserve, kLend, kLendAndBorrow };

// One share: a fair-share identifier or a quota share.
struct ShareSpec {
  std::string name;
  double weight_factor = 1.0;           // fair share: lower gets more
  int64_t gpus = 0;                     // quota: the limit, in GPUs
  Strategy strategy = Strategy::kLendAndBorrow;
  int64_t borrow_limit_percent = -1;    // quota: -1 unlimited
  bool in_share_preemption = false;     // quota
};

struct TeamSpec {
  std::string share;
  int priority = 0;  // schedulingPriority, 0..9999
};

struct ClusterSpec {
  int64_t gpus = 0;
  Policy policy = Policy::kFifo;
  // What the scheduler knows of a job's runtime: false, nothing (no runtime bound: a head that
  // cannot start blocks its queue); true, its exact trace duration (EASY backfill around it).
  bool exact_runtime = false;
  int64_t checkpoint_interval_s = 0;  // 0: no checkpoints, a preemption loses the whole attempt
  int64_t restart_cost_s = 0;         // paid at the start of every attempt after a preemption
  int64_t min_runtime_s = 0;          // quota: a job is not preempted before it ran this long
  int64_t decay_seconds = 0;          // fair share: shareDecaySeconds (0 means 600)
  int compute_reservation = 0;        // fair share: percent
  std::map<std::string, ShareSpec> shares;  // by name
  std::map<std::string, TeamSpec> teams;    // by team
  // Teams not in `teams`: with an empty share, fair share gives each such team its own share
  // (weight 1); quota needs a share here.
  TeamSpec default_team;
  // Tests only (not in the file): run every quota pass, also those that could decide nothing,
  // and offer it every runnable job instead of only those that could start or preempt in it
  // (docs/simulate.md, "Per-pass offer limits"). The schedule must be the same.
  bool exhaustive = false;

  // The share and priority of a team (applies the defaults).
  TeamSpec TeamOf(const std::string& team) const;
};

StatusOr<ClusterSpec> ParseCluster(const std::string& toml_text, const std::string& source);
StatusOr<ClusterSpec> LoadCluster(const std::string& path);

struct TraceJob {
  std::string id;
  int64_t submit_s = 0;
  int64_t duration_s = 0;
  int64_t gpus = 1;
  std::string team;  // "(none)" when the trace has none
  int priority = -1; // schedulingPriority; -1: the team's (scenarios set it per job, traces never)
};

// Reads the normalized trace CSV (docs/simulate.md, "Traces") and keeps the jobs submitted in
// [start_s, end_s); end_s < 0: no end. Rows are ordered by submit time, then file order.
StatusOr<std::vector<TraceJob>> ReadTrace(const std::string& path, int64_t start_s, int64_t end_s);

struct JobResult {
  int64_t start_s = -1;    // first start; -1: never started
  int64_t end_s = -1;      // completion; -1: never completed
  int64_t preemptions = 0;
  int64_t held_s = 0;      // seconds it held its GPUs, over every attempt
  int64_t lost_work_s = 0; // work thrown away by preemptions (since the last checkpoint)
  int64_t restart_s = 0;   // restart costs paid
};

// The cluster after each batch of events: what is held and wanted per team from `t_s` on.
struct Sample {
  int64_t t_s = 0;
  int64_t used = 0;
  std::vector<int32_t> held;    // per team (Result::teams order)
  std::vector<int32_t> demand;  // per team: held + waiting GPUs
};

// The samples of a replay, stored as what changed: per instant its time, the GPUs in use and the
// teams whose figures it changed. A full sample per instant would cost teams × instants (a
// million-job trace has ~600,000 instants and 1,000 teams); most instants change one or two.
class Timeline {
 public:
  size_t size() const { return instants_.size(); }
  bool empty() const { return instants_.empty(); }
  int64_t t_s(size_t k) const { return instants_[k].t_s; }
  int64_t used(size_t k) const { return instants_[k].used; }

  // The samples in order, each with every team's figures (teams start at 0).
  class Cursor {
   public:
    Cursor(const Timeline& timeline, size_t teams);
    bool Next();  // false: past the last sample
    size_t next() const { return k_; }  // the index of the sample Next() gives
    const Sample& sample() const { return s_; }

   private:
    const Timeline& timeline_;
    size_t k_ = 0;
    Sample s_;
  };

  // Recording (the replay): the sample at `t_s`, given as the teams changed since the previous
  // one. A second call at the same time replaces that sample (adds to its changes).
  void Begin(int64_t t_s, int64_t used);
  void Change(int team, int32_t held, int32_t demand);

 private:
  struct Instant {
    int64_t t_s;
    int64_t used;
    size_t first_change;  // into changes_; this instant's run up to the next one's
  };
  struct TeamChange {
    int32_t team, held, demand;
  };
  std::vector<Instant> instants_;
  std::vector<TeamChange> changes_;
};

// A decision of the scheduler, or a completion, as it happened (Result::decisions).
struct Decision {
  enum Kind { kStart, kPreempt, kEnd };
  int64_t t_s = 0;
  uint32_t job = 0;  // index into the trace
  Kind kind = kStart;
};

struct Result {
  std::vector<std::string> teams;  // sorted
  std::vector<int> team_of_job;    // index into teams, per job
  std::vector<JobResult> jobs;     // per trace job, in trace order
  Timeline timeline;
  int64_t passes = 0;
  std::vector<Decision> decisions;  // in the order they were taken
};

Result Simulate(const ClusterSpec& cluster, const std::vector<TraceJob>& trace);

// Container jobs (a scenario with a compute environment): one queue, FIFO or fair share by
// dominant share (sched::ContainerPass), on one compute environment of `capacity`; `sizes` gives
// each trace job's vCPUs, memory and GPUs (its `gpus` is not read). Passes run after each batch of
// events, as for service jobs; the result has decisions and per-job results (no timeline).
Result SimulateContainers(const ClusterSpec& cluster, const sched::ContainerResources& capacity,
                          const std::vector<TraceJob>& trace, const std::vector<sched::ContainerResources>& sizes);

// The spans [start, end) of trace time during which each trace job held its GPUs (one per
// attempt), per job in trace order, read from `result.decisions`.
std::vector<std::vector<std::pair<int64_t, int64_t>>> HeldSpans(const Result& result);

// Writes summary.json, jobs.csv, utilization.svg, shares.svg and waits.svg into `dir`.
Status WriteOutputs(const ClusterSpec& cluster, const std::vector<TraceJob>& trace, const Result& result,
                    const std::string& dir);

// A scenario (tests/scenarios/, docs/simulate.md "Scenarios"): a cluster file, then lines
// `at T submit JOB ...` and `at T expect start|preempt|wait|run|end JOB...` / `expect held TEAM=N...`.
struct ScenarioOutcome {
  int expectations = 0;               // checked
  std::vector<std::string> failures;  // "FILE:LINE: ...", one per expectation that does not hold
  std::string log;                    // every decision, one a line ("t=100 start b")
};
// A malformed file is an error (naming the line); expectations that do not hold are failures.
// A file whose `runners` leave out the simulator is an error too.
StatusOr<ScenarioOutcome> RunScenario(const std::string& text, const std::string& source);

// A scenario file parsed, for the runners: the simulator (RunScenario) and the controller on
// in-memory ports (tests/scenario_runner/). The options marked "controller" are refused in a
// file that the simulator runs (it models one instance type, one queue, no training jobs).
struct ScenarioJob {
  int line = 0;
  TraceJob job;
  // A container scenario's job (Scenario::compute_environment): vcpus=N, memory=MiB, gpus=N
  // (1 vCPU, 2048 MiB and no GPU unless given, as a job definition without them).
  sched::ContainerResources container{1, 2048, 0};
  bool training = false;      // controller: `train` (CreateTrainingJob), not `submit`
  std::string queue;          // controller: queue=NAME ("" the only queue)
  std::string instance_type;  // controller: type=T ("" the catalogue's first type)
  std::string ladder;         // controller: ladder=T1,T2 (the capacity-ladder tag, space-separated)
  int64_t keep_alive_s = 0;   // controller: keep_alive=S (a warm pool after the job)
  std::string role;           // controller: role=NAME (part of a warm pool's match)
};
struct ScenarioExpect {
  int line = 0;
  int64_t t_s = 0;
  std::string what;                                   // start|preempt|wait|run|end|held|warm|cold|on
  std::vector<std::string> jobs;                      // all but held
  std::string type;                                   // on: the instance type
  std::vector<std::pair<std::string, int64_t>> held;  // held: team -> GPUs
};
struct ScenarioQueue {
  std::string name;
  Policy policy = Policy::kFifo;
  int priority = 1;
};
struct Scenario {
  ClusterSpec cluster;
  bool sim = true, controller = true;  // runners = "sim controller" (the default: both)
  // controller: instance_types = "T=N ..." (default: one type of `gpus` instances) and
  // queues = "NAME=POLICY[:PRIORITY] ..." (default: one queue "q" of `policy`).
  std::vector<std::pair<std::string, int64_t>> instance_types;
  std::vector<ScenarioQueue> queues;
  // compute_environment = "vcpus=N memory=MiB gpus=N": a container-job scenario (Batch SubmitJob):
  // one queue "q" of `policy` (fifo or fair_share) on one compute environment of this capacity.
  std::optional<sched::ContainerResources> compute_environment;
  std::vector<ScenarioJob> jobs;  // in file order (time order)
  std::vector<ScenarioExpect> expects;
};
StatusOr<Scenario> ParseScenario(const std::string& text, const std::string& source);

}  // namespace ty::sim
