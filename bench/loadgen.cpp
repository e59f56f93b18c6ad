// Load generator for a running trainyard server: signed SubmitServiceJob requests over
// keep-alive HTTP from several connections, and submit->RUNNING latency on idle capacity.
//
//   ty_loadgen submit  --endpoint URL --key K --secret S --queue Q --jobs N --connections C
//   ty_loadgen latency --endpoint URL --key K --secret S --queue Q --jobs N
//
// Prints one JSON object with the figures.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
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

struct Args {
  std::string mode, endpoint, key, secret, queue, command = "true";
  int jobs = 1000, connections = 4;
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
  explicit Conn(const Args& a) : a_(a), http_(a.endpoint) {
    http_.set_keep_alive(true);
    http_.set_tcp_nodelay(true);
    host_ = a.endpoint.substr(7);
  }
  json Call(const std::string& op, const json& body) {
    ty::api::HttpRequestView req;
    req.method = "POST";
    req.path = "/v1/" + op;
    req.body = body.dump();
    req.headers = {{"host", host_}, {"content-type", "application/json"}};
    ty::api::SignSigV4(req, {a_.key, a_.secret}, "us-east-1", "batch", ty::SystemClock::instance().now_ms());
    httplib::Headers h;
    for (auto& [k, v] : req.headers)
      if (k != "host" && k != "content-type") h.emplace(k, v);
    auto res = http_.Post(req.path, h, req.body, "application/json");
    if (!res || res->status != 200) {
      std::fprintf(stderr, "%s failed: %s\n", op.c_str(), res ? res->body.c_str() : "no response");
      std::exit(1);
    }
    return json::parse(res->body);
  }

 private:
  const Args& a_;
  httplib::Client http_;
  std::string host_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

json Submit(const Args& a) {
  std::atomic<int> next{0};
  std::vector<double> lat_ms;
  std::mutex mu;
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < a.connections; ++c) {
    threads.emplace_back([&, c] {
      Conn conn(a);
      std::vector<double> mine;
      int i;
      while ((i = next++) < a.jobs) {
        std::string name = "bench-" + std::to_string(c) + "-" + std::to_string(i);
        auto s = Clock::now();
        conn.Call("submitservicejob", {{"jobName", name}, {"jobQueue", a.queue}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                                       {"serviceRequestPayload", Payload(name, a.command)}});
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
      }
      std::lock_guard l(mu);
      lat_ms.insert(lat_ms.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
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

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (argc < 2) {
    std::fprintf(stderr, "usage: ty_loadgen submit|latency --endpoint URL --key K --secret S --queue Q [--jobs N] [--connections C] [--command CMD]\n");
    return 2;
  }
  a.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--endpoint") a.endpoint = v;
    else if (k == "--key") a.key = v;
    else if (k == "--secret") a.secret = v;
    else if (k == "--queue") a.queue = v;
    else if (k == "--jobs") a.jobs = std::stoi(v);
    else if (k == "--connections") a.connections = std::stoi(v);
    else if (k == "--command") a.command = v;
  }
  json out = a.mode == "submit" ? Submit(a) : Latency(a);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
