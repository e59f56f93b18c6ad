// Input guards that need no I/O: a JSON nesting check that runs before anything parses the text,
// and per-key token buckets for throttling. Both take what they need as arguments (the time
// included), so tests drive them directly.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/strings.h"

namespace ty::http {

// JsonDepth (core/strings.h) guards every body before it is parsed.
using ::ty::JsonDepth;

// Token buckets, one per key: each holds up to `burst` tokens and gains `rate_per_second`. A call
// takes one token or is refused. Thread-safe. rate_per_second <= 0 disables throttling.
class RateLimiter {
 public:
  RateLimiter(double rate_per_second, double burst) : rate_(rate_per_second), burst_(burst) {}

  // True when `key` may make a call at `now_ms` (a monotonic clock).
  bool Admit(const std::string& key, int64_t now_ms);

 private:
  struct Bucket {
    double tokens;
    int64_t at_ms;
  };

  // Constant after construction.
  const double rate_;
  const double burst_;

  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;  // guarded by mu_; keys are verified access keys
};

}  // namespace ty::http
