// The search space behind every strategy (internal to src/tune): the ranges under their scaling
// mapped onto the unit cube and back, and the seeded generator all randomness comes from.
//
// A point has one coordinate in [0, 1] per range, in the ranges' order. Numeric ranges map a
// coordinate through their scaling (integers over [min - 0.5, max + 0.5], then rounded, so every
// whole number owns an equal cell under Linear); a categorical range of k values owns the cells
// [i/k, (i+1)/k). Encode(Decode(u)) snaps a point to the centre of the cell of the values it
// decodes to (continuous values map back onto themselves).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "tune/search.h"

namespace ty::tune::internal {

using Point = std::vector<double>;

// Randomness for suggestion `stream` of a search seeded with `seed`: the same (seed, stream) gives
// the same numbers on every platform (mt19937_64 is specified bit for bit; the conversions to
// doubles are written here rather than taken from <random>'s distributions, which are not).
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream);
  double Uniform();               // [0, 1)
  double Normal();                // standard normal (Box-Muller)
  uint64_t Below(uint64_t n);     // [0, n)

 private:
  std::mt19937_64 gen_;
};

// The scaling a range is searched under: Auto resolves to Linear (docs: README.md, "Scaling").
Scaling Resolve(const Range& range);

class Space {
 public:
  explicit Space(std::vector<Range> ranges);

  int dims() const { return static_cast<int>(ranges_.size()); }
  // The width of a point's features for the Gaussian process: 1 per numeric range, k per
  // categorical range of k values (one-hot).
  int feature_dims() const { return feature_dims_; }
  const std::vector<Range>& ranges() const { return ranges_; }

  Assignment Decode(const Point& u) const;
  // nullopt when the assignment lacks a range's name or holds a categorical value the range does
  // not list or a number that does not parse (a warm-start parent with other ranges). Numbers
  // outside a range are clamped to it.
  std::optional<Point> Encode(const Assignment& assignment) const;
  Point Snap(const Point& u) const;
  std::vector<double> Features(const Point& u) const;

  // Every range is integer or categorical: the number of distinct assignments (saturating at
  // INT64_MAX); nullopt when a range is continuous.
  std::optional<int64_t> DiscreteSize() const;
  Point RandomPoint(Rng& rng) const;

 private:
  std::vector<Range> ranges_;
  int feature_dims_ = 0;
};

// Shortest decimal that reads back as the same double.
std::string FormatDouble(double v);

}  // namespace ty::tune::internal
