// `trainyard simulate`: replay a job trace through the production scheduler in virtual time.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/cli.h"
#include "sim/sim.h"

namespace ty::cli {

namespace {

struct SimulateOptions {
  std::string trace, cluster, out, scenario;
  int64_t start_s = 0;
  int64_t end_s = -1;
};

int Fail(const Status& s) {
  std::fprintf(stderr, "trainyard simulate: %s\n", s.message().c_str());
  return 2;
}

// --scenario: 0 when every expectation holds, 1 (naming each failing line) when one does not.
int RunScenarioFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Fail(NotFound("cannot read scenario file " + path));
  std::stringstream ss;
  ss << in.rdbuf();
  auto outcome = sim::RunScenario(ss.str(), path);
  if (!outcome.ok()) return Fail(outcome.status());
  if (outcome->failures.empty()) {
    std::printf("%s: %d expectations hold\n", path.c_str(), outcome->expectations);
    return 0;
  }
  for (const auto& f : outcome->failures) std::fprintf(stderr, "%s\n", f.c_str());
  std::fprintf(stderr, "%s: %zu of %d expectations failed; the decisions were:\n%s", path.c_str(),
               outcome->failures.size(), outcome->expectations, outcome->log.c_str());
  return 1;
}

}  // namespace

void AddSimulateCommand(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand(
      "simulate", "Replay a job trace through the production scheduler in virtual time (no server, no clock).");
  cmd->footer(
      "The trace is the normalized CSV (job_id,submit_time_s,duration_s,num_gpus,user,team,status); the cluster\n"
      "file (TOML) sets the GPUs, the policy (fifo, fair_share, quota), shares, the team mapping and the\n"
      "preemption cost model. Writes summary.json, jobs.csv, utilization.svg, shares.svg and waits.svg to --out;\n"
      "the same inputs give byte-identical files. See docs/simulate.md and examples/simulate/.");
  auto o = std::make_shared<SimulateOptions>();
  auto* scenario = cmd->add_option("--scenario", o->scenario,
                                   "Check a scenario file (cluster, submits, expected decisions) instead of replaying a "
                                   "trace; exit 1 when an expectation fails");
  auto* trace = cmd->add_option("--trace", o->trace, "Trace CSV in the normalized format");
  auto* cluster = cmd->add_option("--cluster", o->cluster, "Cluster file (TOML): capacity, policy, shares, teams");
  auto* out = cmd->add_option("--out", o->out, "Directory for the outputs (created if missing; files are overwritten)");
  for (auto* opt : {trace, cluster, out}) {
    opt->excludes(scenario);
    scenario->excludes(opt);
  }
  cmd->add_option("--start", o->start_s, "Replay only jobs submitted at or after this trace time (s, default 0)");
  cmd->add_option("--end", o->end_s, "Replay only jobs submitted before this trace time (s, default: no end)");
  cmd->callback([&run, o] {
    run = [o] {
      if (!o->scenario.empty()) return RunScenarioFile(o->scenario);
      if (o->trace.empty() || o->cluster.empty() || o->out.empty())
        return Fail(InvalidArgument("--trace, --cluster and --out are required (or --scenario FILE)"));
      if (o->end_s >= 0 && o->end_s <= o->start_s) return Fail(InvalidArgument("--end must be after --start"));
      const auto began = std::chrono::steady_clock::now();  // for the report on stderr only
      auto cluster = sim::LoadCluster(o->cluster);
      if (!cluster.ok()) return Fail(cluster.status());
      auto trace = sim::ReadTrace(o->trace, o->start_s, o->end_s);
      if (!trace.ok()) return Fail(trace.status());
      const sim::Result result = sim::Simulate(*cluster, *trace);
      if (Status s = sim::WriteOutputs(*cluster, *trace, result, o->out); !s.ok()) return Fail(s);
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      size_t completed = 0;
      for (const auto& j : result.jobs) completed += j.end_s >= 0;
      std::printf("%zu jobs, %zu completed, %lld scheduling passes; outputs in %s\n", trace->size(), completed,
                  static_cast<long long>(result.passes), o->out.c_str());
      if (completed < trace->size())
        std::printf("%zu jobs never finished: larger than the cluster or than their share's quota and borrow limits\n",
                    trace->size() - completed);
      std::fprintf(stderr, "wall time %.3f s\n", wall);
      return 0;
    };
  });
}

}  // namespace ty::cli
