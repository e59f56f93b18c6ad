// Load generator for a running trainyard server: signed SubmitServiceJob requests over
// keep-alive HTTP from several connections, and submit->RUNNING latency on idle capacity.
//
//   ty_loadgen submit  --endpoint URL --key K --secret S --queue Q --jobs N --connections C
//   ty_loadgen latency --endpoint URL --key K --secret S --queue Q --jobs N
//   ty_loadgen e2e     --endpoint URL --key K --secret S --queue Q --jobs N --connections C
//   ty_loadgen startlat --endpoint URL --key K --secret S --queue Q --jobs N --mark-dir DIR
//   ty_loadgen fill     --endpoint URL --key K --secret S --queue Q --jobs N --connections C
//                       [--share-ids K] [--quota-shares K] [--priorities P] [--prefix P]
//
// fill: N jobs in realistic shapes for a queue that stays deep (bench/pass_scale.py): one in ten
// asks for two instances, with --share-ids a share identifier drawn from K by a Zipf law (a few
// teams submit most), with --quota-shares a quota share q0..q(K-1) in turn, with --priorities a
// scheduling priority 0..P-1.
//   ty_loadgen readlat --endpoint URL --key K --secret S --queue Q --jobs N --connections C
//
// readlat: DescribeServiceJob latency of one queued job, from a reader connection of its own,
// while N submissions from C connections run (each one commits with an fsync); and the submit
// throughput beside it.
// e2e: N jobs running `true` submitted from C connections; time from the first submit until
// every job is SUCCEEDED or FAILED (the definition of peers/slurm/bench.sh (b)).
// startlat: idle-capacity latency from just before the submit call to the job's own first line
// (`date +%s%N` written to a file in DIR, which must be bound into the sandbox), after a random
// 0-1 s pause before each submission (peers/slurm/bench.sh (c)).
//
// Prints one JSON object with the figures.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/sigv4.h"
#include "core/clock.h"

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

const char kUsage[] =
    "usage: ty_loadgen MODE --endpoint http://HOST:PORT --key K --secret S --queue Q [options]\n"
    "\n"
    "Load generator for a running trainyard server (signed SubmitServiceJob over keep-alive HTTP).\n"
    "Prints one JSON object with the figures.\n"
    "\n"
    "modes:\n"
    "  submit    durable submit throughput: --jobs N from --connections C\n"
    "  latency   submit -> RUNNING on idle capacity, one job at a time (--jobs N)\n"
    "  e2e       N jobs from C connections, until every one has ended\n"
    "  startlat  submit -> the job's first line, via a file in --mark-dir DIR\n"
    "  fill      N jobs in realistic shapes into a deep queue (see --share-ids, --quota-shares)\n"
    "  readlat   DescribeServiceJob latency from a reader of its own while N submits from C run\n"
    "\n"
    "options:\n"
    "  --jobs N            jobs to submit (default 1000)\n"
    "  --connections C     keep-alive connections, one thread each (default 4)\n"
    "  --command CMD       the jobs' shell command (default true)\n"
    "  --mark-dir DIR      startlat: directory bound into the sandbox for the jobs' marks\n"
    "  --share-ids K       fill: a shareIdentifier from K (Zipf), for a fair-share queue\n"
    "  --quota-shares K    fill: a quotaShareName q0..q(K-1), for a quota-share queue\n"
    "  --priorities P      fill: a schedulingPriority 0..P-1 (default none)\n"
    "  --prefix P          fill: job name prefix (default fill-)\n"
    "  --keys FILE         submit: one \"KEY SECRET SHARE\" per line; connection c signs with line\n"
    "                      c mod lines and submits to shareIdentifier SHARE (users under policies)\n"
    "  -h, --help          print this help and exit\n";

struct Args {
  std::string mode, endpoint, key, secret, queue, command = "true", mark_dir, prefix = "fill-";
  struct Signer {
    std::string key, secret, share;
  };
  std::vector<Signer> signers;  // --keys; empty: --key/--secret and no share
  int jobs = 1000, connections = 4, share_ids = 0, quota_shares = 0, priorities = 0;
};

std::string Payload(const std::string& name, const std::string& command) {
  json p = {{"TrainingJobName", name},
            {"RoleArn", "arn:aws:iam::000000000000:role/SageMakerRole"},
            {"AlgorithmSpecification", {{"TrainingImage", "local/shell"}, {"TrainingInputMode", "File"},
                                        {"ContainerEntrypoint", {"/bin/sh", "-c"}}, {"ContainerArguments", {command}}}},
            {"OutputDataConfig", {{"S3OutputPath", "s3://bench/output"}}},
            {"ResourceConfig", {{"InstanceType", "ml.m5.large"}, {"InstanceCount", 1}, {"VolumeSizeInGB", 1}}},
            {"StoppingCondition", {{"MaxRuntimeInSeconds", 600}}}};
  return p.dump();
}

class Conn {
 public:
  explicit Conn(const Args& a, std::string key = {}, std::string secret = {})
      : a_(a), key_(key.empty() ? a.key : key), secret_(secret.empty() ? a.secret : secret), http_(a.endpoint) {
    http_.set_keep_alive(true);
    http_.set_tcp_nodelay(true);
    http_.set_read_timeout(600, 0);  // a deep queue's turns take seconds (fill), and requests queue behind them
    host_ = a.endpoint.substr(7);
  }
  json Call(const std::string& op, const json& body) {
    const std::string payload = body.dump();
    ty::api::HttpRequestView req;
    req.method = "POST";
    req.path = "/v1/" + op;
    req.body = payload;
    req.headers = {{"host", host_}, {"content-type", "application/json"}};
    ty::api::SignSigV4(req, {key_, secret_}, "us-east-1", "batch", ty::SystemClock::instance().now_ms());
    httplib::Headers h;
    for (auto& [k, v] : req.headers)
      if (k != "host" && k != "content-type") h.emplace(k, v);
    auto res = http_.Post(req.path, h, payload, "application/json");
    if (!res || res->status != 200) {
      std::fprintf(stderr, "%s failed: %s\n", op.c_str(), res ? res->body.c_str() : "no response");
      std::exit(1);
    }
    return json::parse(res->body);
  }

 private:
  const Args& a_;
  std::string key_, secret_;
  httplib::Client http_;
  std::string host_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Submits a.jobs jobs from a.connections connections; returns the seconds it took and the
// per-request latencies.
double SubmitAll(const Args& a, const std::string& prefix, std::vector<double>* lat_ms) {
  std::atomic<int> next{0};
  std::mutex mu;
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < a.connections; ++c) {
    threads.emplace_back([&, c] {
      const Args::Signer* signer = a.signers.empty() ? nullptr : &a.signers[c % a.signers.size()];
      Conn conn(a, signer ? signer->key : "", signer ? signer->secret : "");
      std::vector<double> mine;
      int i;
      while ((i = next++) < a.jobs) {
        std::string name = prefix + std::to_string(c) + "-" + std::to_string(i);
        json body = {{"jobName", name}, {"jobQueue", a.queue}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                     {"serviceRequestPayload", Payload(name, a.command)}};
        if (signer) {
          body["shareIdentifier"] = signer->share;
          body["schedulingPriority"] = 1;
          body["tags"] = {{"team", signer->share}};
        }
        auto s = Clock::now();
        conn.Call("submitservicejob", body);
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
      }
      std::lock_guard l(mu);
      lat_ms->insert(lat_ms->end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

json Submit(const Args& a) {
  std::vector<double> lat_ms;
  double secs = SubmitAll(a, "bench-", &lat_ms);
  return {{"mode", "submit"},
          {"jobs", a.jobs},
          {"connections", a.connections},
          {"seconds", secs},
          {"submits_per_second", a.jobs / secs},
          {"request_ms_p50", Percentile(lat_ms, 0.5)},
          {"request_ms_p99", Percentile(lat_ms, 0.99)}};
}

json Latency(const Args& a) {
  Conn conn(a);
  std::vector<double> server_ms, client_ms;
  for (int i = 0; i < a.jobs; ++i) {
    std::string name = "lat-" + std::to_string(i);
    auto s = Clock::now();
    json r = conn.Call("submitservicejob", {{"jobName", name}, {"jobQueue", a.queue}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                                            {"serviceRequestPayload", Payload(name, a.command)}});
    std::string id = r["jobId"];
    json d;
    while (true) {
      d = conn.Call("describeservicejob", {{"jobId", id}});
      std::string st = d["status"];
      if (st == "RUNNING" || st == "SUCCEEDED" || st == "FAILED") break;
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    client_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
    // Server-side: from the SUBMITTED record to the RUNNING record.
    int64_t submitted = 0, running = 0;
    for (auto& h : d["trainyardStatusHistory"]) {
      if (h["status"] == "SUBMITTED") submitted = h["at"];
      if (h["status"] == "RUNNING") running = h["at"];
    }
    if (running) server_ms.push_back(static_cast<double>(running - submitted));
    // Let it finish so that capacity is idle for the next one.
    while (true) {
      d = conn.Call("describeservicejob", {{"jobId", id}});
      if (d["status"] == "SUCCEEDED" || d["status"] == "FAILED") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  return {{"mode", "latency"},
          {"jobs", a.jobs},
          {"submit_to_running_ms_p50", Percentile(server_ms, 0.5)},
          {"submit_to_running_ms_p99", Percentile(server_ms, 0.99)},
          {"client_observed_ms_p50", Percentile(client_ms, 0.5)},
          {"client_observed_ms_p99", Percentile(client_ms, 0.99)}};
}

// How many of the queue's jobs are in `status` (paged ListServiceJobs; counts up to `limit`).
size_t CountIn(Conn& conn, const std::string& queue, const char* status, size_t limit) {
  size_t n = 0;
  std::string token;
  do {
    // A page no larger than asked for: the e2e poll only asks whether any job is live, and a
    // page of 100 summaries every 5 ms would be most of the server's CPU during the run.
    json req = {{"jobQueue", queue}, {"jobStatus", status}, {"maxResults", std::min<size_t>(limit, 100)}};
    if (!token.empty()) req["nextToken"] = token;
    json r = conn.Call("listservicejobs", req);
    n += r["jobSummaryList"].size();
    token = r.value("nextToken", "");
  } while (!token.empty() && n < limit);
  return n;
}

json EndToEnd(const Args& a) {
  std::vector<double> lat_ms;
  auto t0 = Clock::now();
  double submit_secs = SubmitAll(a, "e2e-", &lat_ms);
  Conn conn(a);
  static const char* kLive[] = {"RUNNING", "STARTING", "SCHEDULED", "RUNNABLE", "PENDING", "SUBMITTED"};
  // Done when no job of the queue is in a live status; poll every 5 ms (one request while any
  // job is running). Slurm's side polls sdiag every 200 ms.
  while (true) {
    bool live = false;
    for (const char* st : kLive)
      if (CountIn(conn, a.queue, st, 1) > 0) {
        live = true;
        break;
      }
    if (!live) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  size_t ok = CountIn(conn, a.queue, "SUCCEEDED", SIZE_MAX), failed = CountIn(conn, a.queue, "FAILED", SIZE_MAX);
  return {{"mode", "e2e"},
          {"jobs", a.jobs},
          {"connections", a.connections},
          {"submit_phase_seconds", submit_secs},
          {"submit_phase_jobs_per_second", a.jobs / submit_secs},
          {"seconds", secs},
          {"jobs_per_second", a.jobs / secs},
          {"succeeded", ok},
          {"failed", failed}};
}

// Linear interpolation between closest ranks, as peers/slurm/bench.sh computes its percentiles.
double PercentileInterp(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double k = (v.size() - 1) * p;
  size_t f = static_cast<size_t>(k), c = std::min(f + 1, v.size() - 1);
  return v[f] + (v[c] - v[f]) * (k - f);
}

json StartLatency(const Args& a) {
  Conn conn(a);
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pause_ms(0, 999);
  std::vector<double> start_ms, call_ms;
  namespace fs = std::filesystem;
  for (int i = 0; i < a.jobs; ++i) {
    std::string name = "startlat-" + std::to_string(i);
    std::string f = a.mark_dir + "/lat." + std::to_string(i);
    std::string cmd = "date +%s%N > " + f + ".tmp; mv " + f + ".tmp " + f;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
    auto ts = std::chrono::system_clock::now();
    json r = conn.Call("submitservicejob", {{"jobName", name}, {"jobQueue", a.queue}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                                            {"serviceRequestPayload", Payload(name, cmd)}});
    auto tr = std::chrono::system_clock::now();
    std::string id = r["jobId"];
    std::error_code ec;
    while (!fs::exists(f, ec) || fs::file_size(f, ec) == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    long long te_ns = 0;
    std::ifstream(f) >> te_ns;
    long long ts_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(ts.time_since_epoch()).count();
    start_ms.push_back((te_ns - ts_ns) / 1e6);
    call_ms.push_back(std::chrono::duration<double, std::milli>(tr - ts).count());
    // Wait until the job has finished, so that capacity is idle again for the next one.
    while (true) {
      json d = conn.Call("describeservicejob", {{"jobId", id}});
      if (d["status"] == "SUCCEEDED" || d["status"] == "FAILED") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  double max = start_ms.empty() ? 0 : *std::max_element(start_ms.begin(), start_ms.end());
  return {{"mode", "startlat"},
          {"jobs", a.jobs},
          {"start_ms_p50", PercentileInterp(start_ms, 0.5)},
          {"start_ms_p99", PercentileInterp(start_ms, 0.99)},
          {"start_ms_max", max},
          {"submit_call_ms_p50", PercentileInterp(call_ms, 0.5)}};
}

std::string PayloadOf(const std::string& name, const std::string& command, int instances) {
  json p = json::parse(Payload(name, command));
  p["ResourceConfig"]["InstanceCount"] = instances;
  return p.dump();
}

// Fills a queue with a.jobs jobs from a.connections connections (see the header comment).
json Fill(const Args& a) {
  std::vector<double> zipf_cum;
  for (int k = 0; k < a.share_ids; ++k) zipf_cum.push_back((zipf_cum.empty() ? 0 : zipf_cum.back()) + 1 / std::pow(k + 1, 1.1));
  std::atomic<int> next{0};
  std::mutex mu;
  std::vector<double> lat_ms;
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < a.connections; ++c) {
    threads.emplace_back([&, c] {
      Conn conn(a);
      std::mt19937_64 rng(20261125 + c);
      std::vector<double> mine;
      int i;
      while ((i = next++) < a.jobs) {
        std::string name = a.prefix + std::to_string(i);
        json req = {{"jobName", name}, {"jobQueue", a.queue}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                    {"serviceRequestPayload", PayloadOf(name, a.command, i % 10 == 9 ? 2 : 1)}};
        if (!zipf_cum.empty()) {
          double u = std::uniform_real_distribution<double>(0, zipf_cum.back())(rng);
          auto k = std::lower_bound(zipf_cum.begin(), zipf_cum.end(), u) - zipf_cum.begin();
          req["shareIdentifier"] = "team" + std::to_string(k);
        }
        if (a.quota_shares > 0) req["quotaShareName"] = "q" + std::to_string(i % a.quota_shares);
        if (a.priorities > 0) req["schedulingPriority"] = static_cast<int>(rng() % static_cast<uint64_t>(a.priorities));
        auto s = Clock::now();
        conn.Call("submitservicejob", req);
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
      }
      std::lock_guard l(mu);
      lat_ms.insert(lat_ms.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  return {{"mode", "fill"},
          {"queue", a.queue},
          {"jobs", a.jobs},
          {"connections", a.connections},
          {"seconds", secs},
          {"submits_per_second", a.jobs / secs},
          {"request_ms_p50", Percentile(lat_ms, 0.5)},
          {"request_ms_p99", Percentile(lat_ms, 0.99)},
          {"request_ms_max", lat_ms.empty() ? 0 : *std::max_element(lat_ms.begin(), lat_ms.end())}};
}

json ReadLatency(const Args& a) {
  Conn reader(a);
  const json first = reader.Call("submitservicejob", {{"jobName", "described"}, {"jobQueue", a.queue},
                                                      {"serviceJobType", "SAGEMAKER_TRAINING"},
                                                      {"serviceRequestPayload", Payload("described", a.command)}});
  const std::string id = first.value("jobId", "");
  std::atomic<bool> done{false};
  std::vector<double> describe_ms;
  std::thread describing([&] {
    while (!done) {
      auto s = Clock::now();
      reader.Call("describeservicejob", {{"jobId", id}});
      describe_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
    }
  });
  std::vector<double> submit_ms;
  double secs = SubmitAll(a, "readlat-", &submit_ms);
  done = true;
  describing.join();
  return {{"mode", "readlat"},
          {"jobs", a.jobs},
          {"connections", a.connections},
          {"submits_per_second", a.jobs / secs},
          {"describes", describe_ms.size()},
          {"describe_ms_p50", Percentile(describe_ms, 0.5)},
          {"describe_ms_p99", Percentile(describe_ms, 0.99)},
          {"describe_ms_max", Percentile(describe_ms, 1.0)}};
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "ty_loadgen: %s\n\n%s", why.c_str(), kUsage);
    return 2;
  };
  if (argc < 2) return fail("no mode given");
  a.mode = argv[1];
  if (a.mode != "submit" && a.mode != "latency" && a.mode != "e2e" && a.mode != "startlat" && a.mode != "fill" &&
      a.mode != "readlat")
    return fail("unknown mode " + a.mode);
  auto count = [](const std::string& v, int* out) {
    size_t used = 0;
    try {
      *out = std::stoi(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    return used == v.size() && *out >= 0;
  };
  for (int i = 2; i < argc; i += 2) {
    std::string k = argv[i];
    if (i + 1 >= argc) return fail(k + " needs a value");
    std::string v = argv[i + 1];
    bool ok = true;
    if (k == "--endpoint") a.endpoint = v;
    else if (k == "--key") a.key = v;
    else if (k == "--secret") a.secret = v;
    else if (k == "--queue") a.queue = v;
    else if (k == "--jobs") ok = count(v, &a.jobs);
    else if (k == "--connections") ok = count(v, &a.connections) && a.connections > 0;
    else if (k == "--command") a.command = v;
    else if (k == "--mark-dir") a.mark_dir = v;
    else if (k == "--share-ids") ok = count(v, &a.share_ids);
    else if (k == "--quota-shares") ok = count(v, &a.quota_shares);
    else if (k == "--priorities") ok = count(v, &a.priorities);
    else if (k == "--prefix") a.prefix = v;
    else if (k == "--keys") {
      std::ifstream in(v);
      Args::Signer s;
      while (in >> s.key >> s.secret >> s.share) a.signers.push_back(s);
      ok = !a.signers.empty();
    }
    else return fail("unknown option " + k);
    if (!ok) return fail(k + " takes a count, not " + v);
  }
  if (a.endpoint.rfind("http://", 0) != 0) return fail("--endpoint http://HOST:PORT is required");
  if (a.key.empty() && !a.signers.empty()) a.key = a.signers[0].key, a.secret = a.signers[0].secret;
  if (a.key.empty() || a.secret.empty() || a.queue.empty()) return fail("--key, --secret and --queue are required");
  if (a.mode == "startlat" && a.mark_dir.empty()) return fail("startlat needs --mark-dir");
  json out = a.mode == "submit" ? Submit(a)
             : a.mode == "e2e"  ? EndToEnd(a)
             : a.mode == "startlat" ? StartLatency(a)
             : a.mode == "fill"     ? Fill(a)
             : a.mode == "readlat" ? ReadLatency(a)
                                    : Latency(a);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
