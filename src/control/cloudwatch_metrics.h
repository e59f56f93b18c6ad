// CloudWatch metrics stored by trainyard itself (docs/metrics.md, "The CloudWatch API"): users'
// own namespaces (PutMetricData). Each series keeps statistic sets (count, sum, min, max and a
// few of the values, for percentiles) per time bucket, at AWS's resolutions: one minute for 15
// days, then five minutes until 63 days, then one hour until 455 days, then nothing. Which
// resolution a bucket has follows from its age alone, so a roll-up is a merge of buckets into the
// one their start rounds down to. Bounded: at most `max_series` series and at most `max_bytes`
// of buckets (kCwBucketBytes each; a put that would pass either is refused), at most
// kCloudWatchValuesPerBucket values kept per bucket, in single precision, inside the bucket.
//
// Stored as one document per series per hour (kMeta "cloudwatch/<series hash>/<hour>"): a put
// rewrites the hour it lands in, never the whole series. Pure data and functions, no I/O.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace ty::control {

inline constexpr size_t kDefaultCloudWatchMaxSeries = 1000;
inline constexpr size_t kDefaultCloudWatchMaxBytes = size_t{256} << 20;
inline constexpr size_t kCloudWatchValuesPerBucket = 16;
inline constexpr EpochMs kCwMinute = 60'000, kCwFiveMinutes = 300'000, kCwHour = 3'600'000, kCwDay = 86'400'000;
inline constexpr EpochMs kCwMinuteRetention = 15 * kCwDay, kCwFiveMinuteRetention = 63 * kCwDay,
                         kCwHourRetention = 455 * kCwDay;

// Dimensions, sorted by name (a metric is its namespace, name and dimension set).
using CwDimensions = std::vector<std::pair<std::string, std::string>>;

struct CwMetricId {
  std::string ns, name;
  CwDimensions dims;
  // One text naming the metric (the series map's key).
  std::string Key() const;
  bool operator==(const CwMetricId&) const = default;
};

// The values a bucket keeps for percentiles: at most kCloudWatchValuesPerBucket, held inside the
// bucket (no allocation of their own) as floats. Single precision is enough for a percentile of a
// sample (about 7 significant digits) and halves what a minute of a metric costs; count, sum,
// minimum and maximum stay doubles.
class CwSample {
 public:
  CwSample() = default;
  CwSample(std::initializer_list<double> values);
  explicit CwSample(const std::vector<double>& values);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  double operator[](size_t i) const { return values_[i]; }
  // REQUIRES: size() < kCloudWatchValuesPerBucket.
  void push_back(double v) { values_[size_++] = static_cast<float>(v); }
  void set(size_t i, double v) { values_[i] = static_cast<float>(v); }
  std::vector<double> ToVector() const { return {values_.begin(), values_.begin() + size_}; }

 private:
  std::array<float, kCloudWatchValuesPerBucket> values_{};
  uint8_t size_ = 0;
};

// A statistic set over one bucket.
struct CwBucket {
  double count = 0, sum = 0;
  double min = std::numeric_limits<double>::infinity(), max = -std::numeric_limits<double>::infinity();
  CwSample values;  // spread over what was added

  // Adds `count` occurrences of v.
  void Add(double v, double count = 1);
  void Merge(const CwBucket& other);
};

struct CwSeries {
  CwMetricId id;
  std::string unit;                   // the last unit put ("None" when none was given)
  std::map<EpochMs, CwBucket> buckets;  // by bucket start; resolution by age (header comment)
};

// One PutMetricData datum, decoded (api/cloudwatch_api.cpp validates it).
struct CwDatum {
  CwMetricId id;
  std::string unit;
  EpochMs timestamp = 0;
  CwBucket values;
};

// What one stored bucket costs in memory, counted against `max_bytes`: the map node that holds
// it (colour and three links, the allocator's header, the key) and the bucket itself. A series costs kCwSeriesBytes more (its key and
// id, a map node of the series map) plus its names' lengths.
inline constexpr size_t kCwBucketBytes = 5 * sizeof(void*) + sizeof(EpochMs) + sizeof(CwBucket);
inline constexpr size_t kCwSeriesBytes = 256;

// The resolution of a bucket that starts at `t` when the time is `now`: 1 minute, 5 minutes or an
// hour; 0 when it is older than every retention (dropped).
EpochMs CwResolutionAt(EpochMs t, EpochMs now);

class CloudWatchMetrics {
 public:
  explicit CloudWatchMetrics(size_t max_series = kDefaultCloudWatchMaxSeries, size_t max_bytes = kDefaultCloudWatchMaxBytes)
      : max_series_(max_series), max_bytes_(max_bytes) {}

  // Adds `b` to the series' minute bucket of t, creating the series (refused past max_series, or
  // when a new bucket would take bytes() past max_bytes; nothing changed). The hours whose
  // documents changed are added to `dirty` as (key, hour).
  Status Put(const CwMetricId& id, const std::string& unit, EpochMs t, const CwBucket& b,
             std::set<std::pair<std::string, EpochMs>>* dirty);
  // Rolls buckets up and drops expired ones as of now (every series); changed hours go to `dirty`.
  // A series left with no bucket is forgotten.
  void Compact(EpochMs now, std::set<std::pair<std::string, EpochMs>>* dirty);

  const std::map<std::string, CwSeries>& series() const { return series_; }
  const CwSeries* Find(const std::string& key) const;
  size_t max_series() const { return max_series_; }
  void set_max_series(size_t n) { max_series_ = n; }
  size_t max_bytes() const { return max_bytes_; }
  void set_max_bytes(size_t n) { max_bytes_ = n; }
  // What the series and buckets held take, by kCwBucketBytes and kCwSeriesBytes.
  size_t bytes() const { return bytes_; }
  // What a new series of `id` costs before its buckets.
  static size_t SeriesBytes(const CwMetricId& id);
  // Whether the series of `key` has a bucket for the minute of t.
  bool HasMinute(const std::string& key, EpochMs t) const;

  // The store key of a series' hour, and its document (empty: the hour holds nothing; delete it).
  static std::string DocKey(const std::string& series_key, EpochMs hour);
  std::string EncodeHour(const std::string& series_key, EpochMs hour) const;
  // Loads one stored hour (false when `doc` is not one). Loading ignores max_series and
  // max_bytes: what was stored stays (and counts, so puts are refused until it has aged out).
  bool LoadHour(std::string_view doc);

 private:
  size_t max_series_;
  size_t max_bytes_;
  size_t bytes_ = 0;  // invariant: the sum of SeriesBytes and kCwBucketBytes over what series_ holds
  std::map<std::string, CwSeries> series_;
};

// Nearest-rank percentile p (0..100] of `values` (sorted here); NaN when empty.
double CwPercentile(std::vector<double> values, double p);
double CwPercentile(const CwSample& values, double p);

}  // namespace ty::control
