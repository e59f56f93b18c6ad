#include "http/guards.h"

#include <algorithm>

namespace ty::http {

bool RateLimiter::Admit(const std::string& key, int64_t now_ms) {
  if (rate_ <= 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{burst_, now_ms});
  Bucket& b = it->second;
  if (!fresh && now_ms > b.at_ms) {
    b.tokens = std::min(burst_, b.tokens + rate_ * static_cast<double>(now_ms - b.at_ms) / 1000.0);
    b.at_ms = now_ms;
  }
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

}  // namespace ty::http
