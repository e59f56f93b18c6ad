// Counters and histograms the controller keeps for GET /metrics (docs/metrics.md). In memory
// only: they start from zero when the server starts (Prometheus treats that as a counter reset).
// Written on the controller thread under the exclusive state lock, read under Controller::Read.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "control/cloudwatch_metrics.h"
#include "core/model.h"

namespace ty::control {

struct Histogram {
  const std::vector<double>* bounds = nullptr;  // upper bounds (seconds), ascending; +Inf implied
  std::vector<uint64_t> buckets;                // per bound, not cumulative; last one: above all bounds
  double sum = 0;
  uint64_t count = 0;

  explicit Histogram(const std::vector<double>* b = nullptr) : bounds(b) {}
  void Observe(double v) {
    if (buckets.empty()) buckets.assign(bounds->size() + 1, 0);
    size_t i = 0;
    while (i < bounds->size() && v > (*bounds)[i]) ++i;
    ++buckets[i];
    sum += v;
    ++count;
  }
};

// Job-duration buckets (seconds): a second to a day.
inline const std::vector<double>& JobDurationBuckets() {
  static const std::vector<double> k = {1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400};
  return k;
}
// Scheduling-pass buckets (seconds): 50 microseconds to 2.5 seconds.
inline const std::vector<double>& PassDurationBuckets() {
  static const std::vector<double> k = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                        0.01,    0.025,  0.05,    0.1,    0.25,   0.5,    1, 2.5};
  return k;
}

// The §8.1 durations trainyard measures (AWS/Batch names in docs/metrics.md).
enum class JobDuration {
  kSubmittedToRunnable,       // JobSubmittedToRunnableDuration
  kSubmittedToFirstScheduled, // JobSubmittedToFirstScheduledDuration
  kRunnableToScheduled,       // JobAttemptRunnableToScheduledDuration
  kScheduledToStarting,       // JobAttemptScheduledToStartingDuration
  kStartingToRunning,         // JobAttemptStartingToRunningDuration
  kExecution,                 // JobAttemptExecutionDuration (RUNNING -> end of attempt)
  kAttempt,                   // JobAttemptDuration (STARTING -> end of attempt)
  kCount
};

struct Telemetry {
  std::map<std::string, int64_t> submitted;                          // by queue
  std::map<std::pair<std::string, JobStatus>, int64_t> transitions;  // (queue, new status)
  std::map<std::string, int64_t> retried;     // by queue: an attempt ended and the job went back to RUNNABLE
  std::map<std::string, int64_t> preempted;   // by queue
  std::map<std::string, int64_t> terminated;  // by queue: FAILED through TerminateServiceJob / time-limit actions
  std::map<std::string, double> preemption_lost_gpu_seconds;       // by queue
  std::map<std::string, double> preemption_lost_instance_seconds;  // by queue
  std::map<std::string, int64_t> spot_interruptions;               // by instance type
  std::map<std::string, double> interruption_lost_gpu_seconds;       // by instance type
  std::map<std::string, double> interruption_lost_instance_seconds;  // by instance type
  // (duration, queue) -> histogram
  std::map<std::pair<JobDuration, std::string>, Histogram> durations;
  Histogram schedule_pass{&PassDurationBuckets()};

  // The durations observed since the last AWS/Batch sample (control/cloudwatch.cpp), in ms:
  // drained into the CloudWatch store once a minute.
  std::map<std::pair<JobDuration, std::string>, CwBucket> unsampled_durations;
  void ObserveDuration(JobDuration d, const std::string& queue, EpochMs ms) {
    auto [it, fresh] = durations.try_emplace({d, queue}, &JobDurationBuckets());
    it->second.Observe(static_cast<double>(ms < 0 ? 0 : ms) / 1000.0);
    unsampled_durations[{d, queue}].Add(static_cast<double>(ms < 0 ? 0 : ms));
  }
};

}  // namespace ty::control
