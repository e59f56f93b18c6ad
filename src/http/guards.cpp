#include "http/guards.h"

#include <algorithm>

namespace ty::http {

int JsonDepth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

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
