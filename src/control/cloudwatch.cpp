// PutMetricData's turn (docs/metrics.md, "The CloudWatch API"): users' own metrics into
// State::cloudwatch, the hours they land in written with the turn. And the AWS/Batch sampler:
// once a minute of the controller's clock, each queue's counters (their growth since the last
// sample) and the durations observed since, as AWS/Batch metrics with dimension JobQueueName.
#include <array>
#include <set>

#include <spdlog/spdlog.h>

#include "control/controller.h"
#include "control/turn.h"

namespace ty::control {

Status Controller::PutMetricData(const std::vector<CwDatum>& data) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    CloudWatchMetrics& cw = state_.cloudwatch;
    // All or nothing: the series and minute buckets this put would add are counted before
    // anything is stored.
    std::set<std::string> added;
    std::set<std::pair<std::string, EpochMs>> minutes;
    size_t bytes = 0;
    for (const CwDatum& d : data) {
      std::string key = d.id.Key();
      const EpochMs minute = d.timestamp - (((d.timestamp % kCwMinute) + kCwMinute) % kCwMinute);
      if (!cw.HasMinute(key, minute) && minutes.insert({key, minute}).second) bytes += kCwBucketBytes;
      if (!cw.Find(key) && added.insert(std::move(key)).second) bytes += CloudWatchMetrics::SeriesBytes(d.id);
    }
    if (cw.series().size() + added.size() > cw.max_series())
      return Status(Code::kLimitExceeded, "This server keeps at most " + std::to_string(cw.max_series()) +
                                              " CloudWatch metrics ([cloudwatch] max_series); this request would add " +
                                              std::to_string(added.size()) + " to the " +
                                              std::to_string(cw.series().size()) + " stored");
    if (cw.bytes() + bytes > cw.max_bytes())
      return Status(Code::kLimitExceeded, "This server keeps at most " + std::to_string(cw.max_bytes()) +
                                              " bytes of CloudWatch data ([cloudwatch] max_series_bytes); this request "
                                              "would add " + std::to_string(bytes) + " to the " +
                                              std::to_string(cw.bytes()) + " held");
    for (const CwDatum& d : data) TY_RETURN_IF_ERROR(cw.Put(d.id, d.unit, d.timestamp, d.values, &t.cloudwatch));
    cw.Compact(t.now, &t.cloudwatch);
    return Status::Ok();
  });
}

void Controller::SampleBatchMetrics(Turn& t) {
  if (t.now < next_batch_sample_) return;
  next_batch_sample_ = (t.now / kCwMinute + 1) * kCwMinute;  // the next minute, however late this tick came
  Telemetry& tm = state_.telemetry;
  CloudWatchMetrics& cw = state_.cloudwatch;
  auto put = [&](const std::string& queue, const char* name, const char* unit, const CwBucket& b) REQUIRES(state_mu_) {
    CwMetricId id{"AWS/Batch", name, {{"JobQueueName", queue}}};
    if (Status st = cw.Put(id, unit, t.now, b, &t.cloudwatch); !st.ok())
      spdlog::warn("AWS/Batch {} of {} not sampled: {}", name, queue, st.message());
  };
  auto counter = [&](const std::string& queue, const char* name, int64_t now_value) REQUIRES(turn_mu_, state_mu_) {
    int64_t& seen = batch_sampled_[{queue, name}];
    const int64_t grew = now_value - seen;
    seen = now_value;
    if (grew <= 0) return;
    CwBucket b;
    b.Add(1, static_cast<double>(grew));  // `grew` occurrences of 1: Sum and SampleCount are the count
    put(queue, name, "Count", b);
  };
  static constexpr std::array<std::pair<JobStatus, const char*>, 6> kMoves = {{
      {JobStatus::kRunnable, "JobsMovedToRunnable"}, {JobStatus::kScheduled, "JobsMovedToScheduled"},
      {JobStatus::kStarting, "JobsMovedToStarting"}, {JobStatus::kRunning, "JobsMovedToRunning"},
      {JobStatus::kSucceeded, "JobsMovedToSucceeded"}, {JobStatus::kFailed, "JobsMovedToFailed"}}};
  for (const auto& [queue, n] : tm.submitted) counter(queue, "JobsSubmitted", n);
  for (const auto& [key, n] : tm.transitions)
    for (const auto& [status, name] : kMoves)
      if (key.second == status) counter(key.first, name, n);
  for (const auto& [queue, n] : tm.terminated) counter(queue, "JobsTerminated", n);
  for (const auto& [queue, n] : tm.retried) counter(queue, "JobsRetried", n);
  for (const auto& [queue, n] : tm.preempted) counter(queue, "JobsPreempted", n);
  static constexpr std::array<const char*, static_cast<size_t>(JobDuration::kCount)> kDurations = {
      "JobSubmittedToRunnableDuration",        "JobSubmittedToFirstScheduledDuration",
      "JobAttemptRunnableToScheduledDuration", "JobAttemptScheduledToStartingDuration",
      "JobAttemptStartingToRunningDuration",   "JobAttemptExecutionDuration",
      "JobAttemptDuration"};
  for (const auto& [key, b] : tm.unsampled_durations) put(key.second, kDurations[static_cast<size_t>(key.first)], "Milliseconds", b);
  tm.unsampled_durations.clear();
  cw.Compact(t.now, &t.cloudwatch);
}

}  // namespace ty::control
