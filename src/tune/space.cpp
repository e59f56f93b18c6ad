#include "tune/space.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <string>

namespace ty::tune {
namespace {

// AWS's limits (ParameterRanges in the service model): at most 30 ranges in all, names and
// values up to 256 characters, 1 to 30 values per categorical range.
constexpr size_t kMaxRanges = 30;
constexpr size_t kMaxNameLength = 256;
constexpr size_t kMaxCategoricalValues = 30;

const char* KindName(Range::Kind kind) {
  switch (kind) {
    case Range::Kind::kInteger: return "IntegerParameterRanges";
    case Range::Kind::kContinuous: return "ContinuousParameterRanges";
    case Range::Kind::kCategorical: return "CategoricalParameterRanges";
  }
  return "?";
}

std::string Where(const Range& r) { return std::string(KindName(r.kind)) + " '" + r.name + "'"; }

}  // namespace

Status ValidateRanges(const std::vector<Range>& ranges) {
  if (ranges.size() > kMaxRanges) {
    return InvalidArgument("ParameterRanges: at most " + std::to_string(kMaxRanges) +
                           " hyperparameter ranges in all, got " + std::to_string(ranges.size()));
  }
  std::set<std::string> names;
  for (const Range& r : ranges) {
    if (r.name.empty()) return InvalidArgument(std::string(KindName(r.kind)) + ": Name must not be empty");
    if (r.name.size() > kMaxNameLength) {
      return InvalidArgument(Where(r) + ": Name must be at most 256 characters");
    }
    if (!names.insert(r.name).second) {
      return InvalidArgument("ParameterRanges: hyperparameter '" + r.name + "' appears in more than one range");
    }
    if (r.kind == Range::Kind::kCategorical) {
      if (r.values.empty() || r.values.size() > kMaxCategoricalValues) {
        return InvalidArgument(Where(r) + ": Values must hold 1 to 30 values, got " + std::to_string(r.values.size()));
      }
      std::set<std::string> seen;
      for (const std::string& v : r.values) {
        if (v.size() > kMaxNameLength) return InvalidArgument(Where(r) + ": each value must be at most 256 characters");
        if (!seen.insert(v).second) return InvalidArgument(Where(r) + ": value '" + v + "' is listed twice");
      }
      continue;
    }
    if (!std::isfinite(r.min) || !std::isfinite(r.max)) {
      return InvalidArgument(Where(r) + ": MinValue and MaxValue must be finite numbers");
    }
    if (!(r.min < r.max)) {
      return InvalidArgument(Where(r) + ": MinValue (" + internal::FormatDouble(r.min) +
                             ") must be less than MaxValue (" + internal::FormatDouble(r.max) + ")");
    }
    if (r.kind == Range::Kind::kInteger &&
        (r.min != std::floor(r.min) || r.max != std::floor(r.max) || std::fabs(r.min) > 9.0e15 ||
         std::fabs(r.max) > 9.0e15)) {
      return InvalidArgument(Where(r) + ": MinValue and MaxValue must be whole numbers");
    }
    if (r.scaling == Scaling::kLogarithmic && !(r.min > 0)) {
      return InvalidArgument(Where(r) + ": Logarithmic scaling works only for ranges whose values are all greater "
                             "than 0 (MinValue is " + internal::FormatDouble(r.min) + ")");
    }
    if (r.scaling == Scaling::kReverseLogarithmic) {
      if (r.kind == Range::Kind::kInteger) {
        return InvalidArgument(Where(r) + ": ReverseLogarithmic scaling is not supported for integer ranges");
      }
      if (!(r.min >= 0 && r.max < 1)) {
        return InvalidArgument(Where(r) + ": ReverseLogarithmic scaling works only for ranges entirely within "
                               "0 <= x < 1.0");
      }
    }
  }
  return Status::Ok();
}

StatusOr<int64_t> GridSize(const std::vector<Range>& ranges) {
  TY_RETURN_IF_ERROR(ValidateRanges(ranges));
  int64_t size = 1;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (const Range& r : ranges) {
    if (r.kind == Range::Kind::kContinuous) {
      return InvalidArgument(Where(r) + ": a Grid search cannot walk a continuous range");
    }
    const double count = r.kind == Range::Kind::kInteger ? r.max - r.min + 1 : static_cast<double>(r.values.size());
    if (count >= static_cast<double>(kMax) / static_cast<double>(size)) return kMax;
    size *= static_cast<int64_t>(count);
  }
  return size;
}

namespace internal {
namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Where a value sits on the scaled axis from `lo` to `hi`.
double ToAxis(Scaling s, double v) {
  switch (s) {
    case Scaling::kLogarithmic: return std::log(v);
    case Scaling::kReverseLogarithmic: return -std::log1p(-v);
    default: return v;
  }
}
double FromAxis(Scaling s, double a) {
  switch (s) {
    case Scaling::kLogarithmic: return std::exp(a);
    case Scaling::kReverseLogarithmic: return -std::expm1(-a);
    default: return a;
  }
}

// The interval a numeric range's coordinate spans before rounding.
std::pair<double, double> Span(const Range& r) {
  if (r.kind == Range::Kind::kInteger) return {r.min - 0.5, r.max + 0.5};
  return {r.min, r.max};
}

std::optional<double> ParseDouble(const std::string& s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

Rng::Rng(uint64_t seed, uint64_t stream) : gen_(SplitMix(SplitMix(seed) ^ SplitMix(stream + 0x51ed27ULL))) {}

double Rng::Uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }

double Rng::Normal() {
  const double u1 = 1.0 - Uniform();  // (0, 1]
  const double u2 = Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

uint64_t Rng::Below(uint64_t n) { return n == 0 ? 0 : gen_() % n; }

std::string FormatDouble(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

Scaling Resolve(const Range& range) {
  return range.scaling == Scaling::kAuto ? Scaling::kLinear : range.scaling;
}

Space::Space(std::vector<Range> ranges) : ranges_(std::move(ranges)) {
  for (const Range& r : ranges_) {
    feature_dims_ += r.kind == Range::Kind::kCategorical ? static_cast<int>(r.values.size()) : 1;
  }
}

Assignment Space::Decode(const Point& u) const {
  Assignment out;
  out.reserve(ranges_.size());
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const Range& r = ranges_[i];
    const double x = std::clamp(u[i], 0.0, 1.0);
    if (r.kind == Range::Kind::kCategorical) {
      const size_t k = r.values.size();
      out.emplace_back(r.name, r.values[std::min(k - 1, static_cast<size_t>(x * static_cast<double>(k)))]);
      continue;
    }
    const Scaling s = Resolve(r);
    auto [lo, hi] = Span(r);
    const double a = ToAxis(s, lo) + x * (ToAxis(s, hi) - ToAxis(s, lo));
    double v = std::clamp(FromAxis(s, a), r.min, r.max);
    if (r.kind == Range::Kind::kInteger) {
      v = std::clamp(std::round(v), r.min, r.max);
      out.emplace_back(r.name, std::to_string(static_cast<int64_t>(v)));
    } else {
      out.emplace_back(r.name, FormatDouble(v));
    }
  }
  return out;
}

std::optional<Point> Space::Encode(const Assignment& assignment) const {
  Point u(ranges_.size());
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const Range& r = ranges_[i];
    const std::string* value = nullptr;
    for (const auto& [name, v] : assignment) {
      if (name == r.name) value = &v;
    }
    if (value == nullptr) return std::nullopt;
    if (r.kind == Range::Kind::kCategorical) {
      auto it = std::find(r.values.begin(), r.values.end(), *value);
      if (it == r.values.end()) return std::nullopt;
      u[i] = (static_cast<double>(it - r.values.begin()) + 0.5) / static_cast<double>(r.values.size());
      continue;
    }
    std::optional<double> v = ParseDouble(*value);
    if (!v) return std::nullopt;
    double x = std::clamp(*v, r.min, r.max);
    if (r.kind == Range::Kind::kInteger) x = std::round(x);
    const Scaling s = Resolve(r);
    auto [lo, hi] = Span(r);
    u[i] = std::clamp((ToAxis(s, x) - ToAxis(s, lo)) / (ToAxis(s, hi) - ToAxis(s, lo)), 0.0, 1.0);
  }
  return u;
}

Point Space::Snap(const Point& u) const { return *Encode(Decode(u)); }

std::vector<double> Space::Features(const Point& u) const {
  std::vector<double> f;
  f.reserve(static_cast<size_t>(feature_dims_));
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const Range& r = ranges_[i];
    if (r.kind != Range::Kind::kCategorical) {
      f.push_back(u[i]);
      continue;
    }
    const size_t k = r.values.size();
    const size_t idx = std::min(k - 1, static_cast<size_t>(std::clamp(u[i], 0.0, 1.0) * static_cast<double>(k)));
    for (size_t j = 0; j < k; ++j) f.push_back(j == idx ? 1.0 : 0.0);
  }
  return f;
}

std::optional<int64_t> Space::DiscreteSize() const {
  for (const Range& r : ranges_) {
    if (r.kind == Range::Kind::kContinuous) return std::nullopt;
  }
  StatusOr<int64_t> size = GridSize(ranges_);
  if (!size.ok()) return std::nullopt;
  return *size;
}

Point Space::RandomPoint(Rng& rng) const {
  Point u(ranges_.size());
  for (double& x : u) x = rng.Uniform();
  return u;
}

}  // namespace internal
}  // namespace ty::tune
