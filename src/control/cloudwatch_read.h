// Reading CloudWatch metrics out of the state (docs/metrics.md, "The CloudWatch API"): what
// GetMetricStatistics, GetMetricData and ListMetrics answer, and what metric alarms evaluate
// (metric_alarms.h). The series come from three places, read in place and never copied: users'
// own and AWS/Batch (State::cloudwatch), and /aws/sagemaker/TrainingJobs (a training job's
// MetricDefinitions series and system metrics per Host "<job>/algo-<n>"). Pure functions over a
// State the caller holds (under Controller::Read or inside a turn); no I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "control/cloudwatch_math.h"
#include "control/cloudwatch_metrics.h"
#include "core/status.h"

namespace ty::control {

struct State;

inline constexpr const char* kSageMakerMetricNamespace = "/aws/sagemaker/TrainingJobs";

// The points of one metric in a window.
struct CwPoints {
  std::string unit = "None";
  std::vector<std::pair<EpochMs, CwBucket>> buckets;  // oldest first
};

// Every point of a metric with a timestamp in [from, to).
CwPoints ReadCwMetric(const State& s, const CwMetricId& id, EpochMs from, EpochMs to);

// Every metric there is: users' and AWS/Batch first (by key), then each training job's.
void ForEachCwMetric(const State& s, const std::function<void(const CwMetricId&)>& fn);

// The points merged into buckets of `period` ms from `origin` (none before it).
std::map<EpochMs, CwBucket> CwByPeriod(const CwPoints& p, EpochMs origin, EpochMs period);
// The same periods of a metric's points in [from, to) (origin `from`), oldest first, read in
// place: fn(period start, bucket), the stored bucket itself when it is alone in its period, else
// a merge held in one buffer reused from period to period. Returns the unit (as ReadCwMetric's).
std::string ForEachCwPeriod(const State& s, const CwMetricId& id, EpochMs from, EpochMs to, EpochMs period,
                            const std::function<void(EpochMs, const CwBucket&)>& fn);

// What a metric's series belongs to, for authorization (docs/security.md, "CloudWatch metrics"): a
// training job's (/aws/sagemaker/TrainingJobs, Host "<job>/algo-<n>"), a job queue's (AWS/Batch
// with JobQueueName), or the account's (every other namespace).
struct CwMetricOwner {
  enum Kind { kAccount, kTrainingJob, kJobQueue } kind = kAccount;
  std::string name;  // the training job's or the queue's name
  bool operator<(const CwMetricOwner& o) const { return std::tie(kind, name) < std::tie(o.kind, o.name); }
};
CwMetricOwner CwOwnerOf(const CwMetricId& id);

// One MetricDataQuery (GetMetricData, or a metric-math alarm's Metrics): either a MetricStat
// (metric, period, stat) or an expression over other queries' ids.
struct CwQuery {
  std::string id, label, expression, stat;
  CwMetricId metric;
  EpochMs period = 0;  // ms; an expression's optional period
  bool return_data = true;
};

// ---- What a read may cost (docs/metrics.md, "Limits on what a read may cost") ----
// Counted from the request alone, before any work, as upper bounds of the datapoints a call holds.
// GetMetricData with expressions holds at most kMaxCwMathDatapoints: each MetricStat query's
// points, and for each expression its operands (METRICS() counts every MetricStat query) and its
// result, each as long as the request's period grid. (A read of one metric is bounded by what is
// stored: CwStoredPointsAtMost of any window is at most 44,955, below AWS's 50,850.)
inline constexpr uint64_t kMaxCwMathDatapoints = 2'000'000;
// The stored points a metric can have in [from, to) when the time is `now`: one a minute for the
// last 15 days (and the two hours ahead a put may reach), one per five minutes until 63 days,
// one an hour until 455 days.
uint64_t CwStoredPointsAtMost(EpochMs from, EpochMs to, EpochMs now);
// The datapoints the queries over [from, to) may hold (0 without an expression: such a call
// streams a page at a time), or FailedPrecondition naming the limit, the cost and what to change
// when that is more than kMaxCwMathDatapoints.
StatusOr<uint64_t> CheckCwQueryCost(const std::vector<CwQuery>& queries, EpochMs from, EpochMs to, EpochMs grid_period,
                                    EpochMs now);

// A statistic of a bucket: SampleCount, Sum, Average, Minimum, Maximum or a percentile "pNN";
// nullopt when it has none (a percentile without kept values).
std::optional<double> CwStat(const CwBucket& b, const std::string& stat);
bool IsCwStatistic(const std::string& s);   // one of the five
bool IsCwPercentile(const std::string& s);  // "p0" .. "p100"
// Period in seconds: 1, 5, 10, 30 or a multiple of 60.
bool IsCwPeriod(int64_t seconds);

// The queries' series over [from, to): each MetricStat query's (read under the state), then each
// expression's in request order (pure; it may use any MetricStat query and the expressions
// before it). `grid_period`: the timestamps FILL and constants use (from, from + grid_period, ...).
struct CwQueryValues {
  std::map<std::string, CwTimeSeries> series;  // by query id
  std::vector<std::string> metric_ids;         // the MetricStat queries, in request order (METRICS())
};
CwQueryValues ReadCwQueries(const State& s, const std::vector<CwQuery>& queries, EpochMs from, EpochMs to);
// One MetricStat query's points over [from, to), oldest first: fn(period start, statistic) for
// each period (from `from`) that has one. Reads the stored buckets in place: a period holding one
// bucket is that bucket's statistic, no copy; nothing is allocated per point.
void ReadCwQuery(const State& s, const CwQuery& q, EpochMs from, EpochMs to,
                 const std::function<void(EpochMs, double)>& fn);
// How many points ReadCwQuery gives, counted without computing a statistic (a page of
// GetMetricData skips the queries before it at this cost).
size_t CountCwQuery(const State& s, const CwQuery& q, EpochMs from, EpochMs to);
// InvalidArgument from a bad expression (the message says where).
Status EvaluateCwExpressions(const std::vector<CwQuery>& queries, EpochMs from, EpochMs to, EpochMs grid_period,
                             CwQueryValues* values);

}  // namespace ty::control
