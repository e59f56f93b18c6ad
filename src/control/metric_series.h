// MetricDefinitions series of training jobs (docs/metrics.md, "MetricDefinitions series"): the
// values the controller parses from each job's logs, bounded per metric, and how a read pages
// through them. Pure functions, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"

namespace ty::control {

// At most this many points are kept per metric of a job (and a read returns at most this many
// per page). Rule: the k-th value a metric's regex produced (k = 0, 1, ...) is kept while k is
// a multiple of the metric's stride; when more than the cap would be kept the stride doubles,
// so every other kept point goes and the rest stay evenly spread over the whole run. The newest
// value is always kept as well, so FinalMetricDataList and the series end on the same value.
// The rule depends only on the order of the values, so reading the logs again after a restart
// keeps the same points.
inline constexpr size_t kMaxMetricPointsPerMetric = 10000;

struct MetricPoint {
  uint64_t index = 0;  // k: which value of the metric this was, in log order
  EpochMs timestamp = 0;
  double value = 0;
};

// One metric's kept points, oldest first.
struct MetricTrack {
  std::string name;
  uint64_t seen = 0;    // values produced so far (the next one's index)
  uint64_t stride = 1;  // a power of two
  std::vector<MetricPoint> points;
};

// A training job's series: one track per metric, in the order each first produced a value.
class MetricSeries {
 public:
  // REQUIRES: cap >= 2.
  explicit MetricSeries(size_t cap = kMaxMetricPointsPerMetric) : cap_(cap) {}

  void Append(std::string_view name, double value, EpochMs timestamp);

  const std::vector<MetricTrack>& tracks() const { return tracks_; }
  const MetricTrack* Find(std::string_view name) const;
  // Restores a track as stored. REQUIRES: no track of that name yet.
  void Restore(MetricTrack track) { tracks_.push_back(std::move(track)); }

 private:
  size_t cap_;
  std::vector<MetricTrack> tracks_;
};

// The store's document of a series, and back (false when it is not one):
// {"metrics": [{"name", "seen", "stride", "points": [[index, timestamp, value], ...]}, ...]}.
// Documents of the earlier unbounded shape, [[name, value, timestamp], ...], are read by
// appending their values in order (so they are bounded on load).
std::string EncodeMetricSeries(const MetricSeries& series);
bool DecodeMetricSeries(std::string_view doc, MetricSeries* out);

// Where a page of a series read starts: the metric (its position in the read's metric order)
// and the first point index not yet returned.
struct MetricCursor {
  size_t metric = 0;
  uint64_t after_index = 0;  // points with index >= this are still to come
};

// NextToken text of a cursor, and back (nullopt for a token this server did not make).
std::string MetricCursorToken(const MetricCursor& c);
std::optional<MetricCursor> ParseMetricCursorToken(std::string_view token);

struct MetricPage {
  struct Series {
    std::string name;
    std::vector<MetricPoint> points;
  };
  std::vector<Series> series;          // every metric of `order` from the cursor's on, until the page is full
  std::optional<MetricCursor> next;    // where the next page starts; none when the read is complete
};

// One page of a read of `order`'s metrics (in that order) whose timestamps are in [from, to]:
// at most `max_points` points (REQUIRES: max_points >= 1). A metric without kept points (or
// without a track) is listed with none. Points are copied; the series is only read.
MetricPage PageMetricSeries(const MetricSeries* series, const std::vector<std::string>& order, EpochMs from, EpochMs to,
                            const MetricCursor& start, size_t max_points);

}  // namespace ty::control
