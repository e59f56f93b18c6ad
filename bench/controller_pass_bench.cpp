// The controller's whole scheduling pass at depth, without HTTP or SQLite: a Controller on the
// in-memory ports (tests/testing/) and a manual clock, filled with N service jobs through the
// typed commands, then stepped turn by turn while each pass is timed.
//
// The layout is bench/pass_scale.py's: the default catalogue's four ml.m5.large instances, a FIFO
// queue, a fair-share queue (500 share identifiers drawn by a Zipf law, priorities 0-9, three
// shares with weights of their own) and a quota-share queue (10 LEND_AND_BORROW shares of 2
// instances); four long jobs hold the four instances, so every job filled in waits and every pass
// has all of them to consider. A third of N goes to each queue, one job in ten asks for two
// instances.
//
// Usage: controller_pass_bench [--jobs N] [--passes P] [--threads T]
// Prints one JSON object: the fill's rate, then the passes' p50/p99/max (the controller's own
// trainyard_scheduler_pass_duration_seconds histogram, one pass per step) for P passes forced by
// the fair-share decay (the clock advanced 500 ms per step) and P single submits.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "api/decode.h"
#include "api/handlers.h"
#include "control/controller.h"
#include "testing/fakes.h"

namespace {

using nlohmann::json;
using namespace ty;
using namespace ty::control;

void Check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.message().c_str());
    std::exit(1);
  }
}
template <typename T>
T Must(StatusOr<T> v, const char* what) {
  Check(v.status(), what);
  return std::move(v).value();
}

std::string Payload(const std::string& name) {
  return json{{"TrainingJobName", name},
              {"RoleArn", "arn:aws:iam::000000000000:role/SageMakerRole"},
              {"AlgorithmSpecification",
               {{"TrainingImage", "local/shell"}, {"TrainingInputMode", "File"}, {"ContainerEntrypoint", {"/bin/sh", "-c"}},
                {"ContainerArguments", {"exec sleep 86400"}}}},
              {"OutputDataConfig", {{"S3OutputPath", "s3://bench/output"}}},
              {"ResourceConfig", {{"InstanceType", "ml.m5.large"}, {"InstanceCount", 1}, {"VolumeSizeInGB", 1}}},
              {"StoppingCondition", {{"MaxRuntimeInSeconds", 86400}}}}
      .dump();
}

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t jobs = 100000;
  int passes = 30, threads = 256;
  static const char kUsage[] =
      "usage: controller_pass_bench [--jobs N] [--passes P] [--threads T]\n"
      "\n"
      "The controller's whole scheduling pass with N jobs queued (default 100000), on the in-memory\n"
      "ports and a manual clock: P passes forced by fair-share decay and P single submits (default 30),\n"
      "the fill from T threads (default 256). Prints one JSON object.\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const bool known = a == "--jobs" || a == "--passes" || a == "--threads";
    if (!known || i + 1 >= argc) {
      std::fprintf(stderr, "controller_pass_bench: %s %s\n\n%s", known ? "a value is needed after" : "unknown option",
                   a.c_str(), kUsage);
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--jobs") jobs = std::atoll(v.c_str());
    else if (a == "--passes") passes = std::atoi(v.c_str());
    else threads = std::atoi(v.c_str());
    if (jobs <= 0 || passes <= 0 || threads <= 0) {
      std::fprintf(stderr, "controller_pass_bench: %s takes a positive count, not %s\n", a.c_str(), v.c_str());
      return 2;
    }
  }
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ty-pass-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Config config = DefaultConfig();
  config.data_dir = dir.string();
  config.sandbox = "none";
  config.events_enabled = false;
  ManualClock clock(1'800'000'000'000);
  auto data = std::make_shared<testing::MemData>();
  auto executor = std::make_unique<testing::FakeExecutor>();
  testing::FakeExecutor* exec = executor.get();
  auto c = Must(Controller::Open(config, clock, {std::make_unique<testing::MemStore>(data),
                                                 std::make_unique<testing::MemEventLog>(data), std::move(executor)}),
                "open");
  const api::HostFacts host{c->config(), c->sandbox()};

  auto env = [&](const std::string& name, int64_t cap, const std::string& unit) {
    Must(c->CreateServiceEnvironment(Must(api::DecodeCreateServiceEnvironment(
             {{"serviceEnvironmentName", name}, {"serviceEnvironmentType", "SAGEMAKER_TRAINING"},
              {"capacityLimits", {{{"capacityUnit", unit}, {"maxCapacity", cap}}}}}), "env")),
         "env");
  };
  auto queue = [&](const std::string& name, int priority, const std::string& environment, const std::string& arn) {
    json req = {{"jobQueueName", name}, {"jobQueueType", "SAGEMAKER_TRAINING"}, {"priority", priority},
                {"serviceEnvironmentOrder", {{{"order", 1}, {"serviceEnvironment", environment}}}}};
    if (!arn.empty()) req["schedulingPolicyArn"] = arn;
    Must(c->CreateJobQueue(Must(api::DecodeCreateJobQueue(req), "queue")), "queue");
  };
  env("fifo-env", 2, "NUM_INSTANCES");
  env("fair-env", 2, "NUM_INSTANCES");
  env("quota-env", 20, "ml.m5.large");
  queue("fifo", 10, "fifo-env", "");
  json dist = json::array();
  for (auto [k, w] : {std::pair{0, 4.0}, {1, 2.0}, {2, 0.5}})
    dist.push_back({{"shareIdentifier", "team" + std::to_string(k)}, {"weightFactor", w}});
  const std::string fair_arn =
      Must(c->CreateSchedulingPolicy(Must(api::DecodeCreateSchedulingPolicy(
               {{"name", "fair-policy"}, {"fairsharePolicy", {{"shareDecaySeconds", 600}, {"shareDistribution", dist}}}}),
                                          "policy")),
           "policy")
          .arn;
  queue("fair", 5, "fair-env", fair_arn);
  const std::string quota_arn =
      Must(c->CreateSchedulingPolicy(Must(api::DecodeCreateSchedulingPolicy(
               {{"name", "quota-policy"}, {"quotaSharePolicy", {{"idleResourceAssignmentStrategy", "FIFO"}}}}),
                                          "policy")),
           "policy")
          .arn;
  queue("quota", 1, "quota-env", quota_arn);
  for (int k = 0; k < 10; ++k)
    Must(c->CreateQuotaShare(Must(api::DecodeCreateQuotaShare(
             {{"jobQueue", "quota"}, {"quotaShareName", "q" + std::to_string(k)},
              {"capacityLimits", {{{"capacityUnit", "ml.m5.large"}, {"maxCapacity", 2}}}},
              {"resourceSharingConfiguration", {{"strategy", "LEND_AND_BORROW"}}},
              {"preemptionConfiguration", {{"inSharePreemption", "DISABLED"}}}}), "share")),
         "share");

  // One decoded command per queue, copied for every job (decoding is the API's cost, not the pass's).
  auto command = [&](const std::string& q, json extra) {
    json req = {{"jobName", "x"}, {"jobQueue", q}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                {"serviceRequestPayload", Payload("x")}};
    req.update(extra);
    return Must(api::DecodeSubmitServiceJob(req, host), "decode");
  };
  const SubmitServiceJobCommand fifo_cmd = command("fifo", json::object());
  const SubmitServiceJobCommand fair_cmd = command("fair", {{"shareIdentifier", "team0"}, {"schedulingPriority", 0}});
  const SubmitServiceJobCommand quota_cmd = command("quota", {{"quotaShareName", "q0"}});

  // The long jobs: they hold the four instances.
  auto submit_named = [&](SubmitServiceJobCommand cmd, const std::string& name) {
    cmd.name = name;
    cmd.payload = Payload(name);
    return Must(c->SubmitServiceJob(cmd), "submit");
  };
  submit_named(fifo_cmd, "long-0");
  submit_named(fair_cmd, "long-1");
  SubmitServiceJobCommand q1 = quota_cmd;
  submit_named(quota_cmd, "long-2");
  q1.quota_share_name = "q1";
  submit_named(q1, "long-3");
  c->Step();
  clock.advance_ms(1000);  // the fair-share queue's arrival batch closes
  c->Step();
  for (const char* name : {"long-0", "long-1", "long-2", "long-3"}) {
    exec->Push(name, exec::Phase::kPreparing, clock.now_ms());
    exec->Push(name, exec::Phase::kTraining, clock.now_ms());
  }
  c->Step();

  // The fill: `threads` callers at once on the controller's own turn loop, so that turns carry
  // many submits each (as the API's http threads do).
  c->Start();
  std::vector<double> zipf_cum;
  for (int k = 0; k < 500; ++k) zipf_cum.push_back((zipf_cum.empty() ? 0 : zipf_cum.back()) + 1 / std::pow(k + 1, 1.1));
  std::atomic<int64_t> next{0};
  auto fill_t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w)
    workers.emplace_back([&, w] {
      std::mt19937_64 rng(20261125 + w);
      int64_t i;
      while ((i = next++) < jobs) {
        const int64_t per_queue = i / 3;
        SubmitServiceJobCommand cmd = i % 3 == 0 ? fifo_cmd : i % 3 == 1 ? fair_cmd : quota_cmd;
        cmd.name = "job-" + std::to_string(i);
        if (per_queue % 10 == 9) cmd.training.spec.instance_count = 2;
        if (i % 3 == 1) {
          double u = std::uniform_real_distribution<double>(0, zipf_cum.back())(rng);
          cmd.share_identifier = "team" + std::to_string(std::lower_bound(zipf_cum.begin(), zipf_cum.end(), u) - zipf_cum.begin());
          cmd.scheduling_priority = static_cast<int>(rng() % 10);
        }
        if (i % 3 == 2) cmd.quota_share_name = "q" + std::to_string(per_queue % 10);
        Must(c->SubmitServiceJob(cmd), "submit");
      }
    });
  for (auto& w : workers) w.join();
  const double fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - fill_t0).count();

  auto pass_stats = [&]() { return c->Read([](const State& s) { return std::pair{s.telemetry.schedule_pass.count, s.telemetry.schedule_pass.sum}; }); };
  auto timed_steps = [&](auto&& before_step) {
    std::vector<double> ms;
    for (int p = 0; p < passes; ++p) {
      // Read before the step: the loop may run the step's pass before this thread looks again
      // (a submit's own turn wakes the loop for the turn that admits it).
      auto [n0, s0] = pass_stats();
      before_step(p);
      c->Wake();  // a turn now; it runs one pass, which this waits for
      auto [n1, s1] = pass_stats();
      while (n1 == n0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::tie(n1, s1) = pass_stats();
      }
      if (n1 == n0 + 1) ms.push_back((s1 - s0) * 1e3);
    }
    return ms;
  };
  // Ticks: the fair-share queue's usage decays, so each tick runs a pass.
  std::vector<double> ticks = timed_steps([&](int) { clock.advance_ms(500); });
  if (!ticks.empty()) ticks.erase(ticks.begin());  // its turn also admitted the fill's last jobs
  // Trickle: one submit, in turn to each queue; the turn after it admits it and runs a pass.
  std::vector<double> trickle = timed_steps([&](int p) {
    clock.advance_ms(1);
    submit_named(p % 3 == 0 ? fifo_cmd : p % 3 == 1 ? fair_cmd : quota_cmd, "trickle-" + std::to_string(p));
  });
  const int64_t queued = c->Read([](const State& s) {
    int64_t n = 0;
    for (const auto& [q, by] : s.by_queue_status)
      if (auto it = by.find(JobStatus::kRunnable); it != by.end()) n += static_cast<int64_t>(it->second.size());
    return n;
  });
  // The console's QueueStandings (every queue in one answer, JSON included) at this depth.
  std::vector<double> standings;
  for (int r = 0; r < 20; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto reply = api::HandleQueueStandings(*c, json::object());
    standings.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!reply.ok()) {
      std::fprintf(stderr, "QueueStandings: %s\n", reply.status().message().c_str());
      return 1;
    }
  }
  json out = {{"jobs", jobs},
              {"runnable", queued},
              {"fill_seconds", fill_s},
              {"fill_submits_per_second", static_cast<double>(jobs) / fill_s},
              {"tick_pass_ms", {{"n", ticks.size()}, {"p50", Pct(ticks, 0.5)}, {"p99", Pct(ticks, 0.99)}, {"max", Pct(ticks, 1)}}},
              {"trickle_pass_ms",
               {{"n", trickle.size()}, {"p50", Pct(trickle, 0.5)}, {"p99", Pct(trickle, 0.99)}, {"max", Pct(trickle, 1)}}},
              {"queue_standings_ms", {{"n", standings.size()}, {"p50", Pct(standings, 0.5)}, {"max", Pct(standings, 1)}}}};
  std::printf("%s\n", out.dump().c_str());
  c.reset();
  fs::remove_all(dir);
  return 0;
}
