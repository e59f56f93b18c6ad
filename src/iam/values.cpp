#include "iam/values.h"

#include <arpa/inet.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

namespace ty::iam {

bool HasVariables(std::string_view text) {
  size_t open = text.find("${");
  return open != std::string_view::npos && text.find('}', open + 2) != std::string_view::npos;
}

bool ParseNumber(std::string_view text, double* out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && std::isfinite(*out);
}

namespace {

// Exactly `n` digits at `*pos`, advancing it.
bool Digits(std::string_view s, size_t* pos, size_t n, int* out) {
  if (*pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool Expect(std::string_view s, size_t* pos, char c) {
  if (*pos >= s.size() || s[*pos] != c) return false;
  ++*pos;
  return true;
}

}  // namespace

bool ParseDate(std::string_view s, int64_t* epoch_ms) {
  // Whole epoch seconds.
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos) {
    if (s.size() > 12) return false;
    int64_t secs = 0;
    std::from_chars(s.data(), s.data() + s.size(), secs);
    *epoch_ms = secs * 1000;
    return true;
  }
  size_t pos = 0;
  int y, mo, d, h = 0, mi = 0, sec = 0, ms = 0;
  if (!Digits(s, &pos, 4, &y) || !Expect(s, &pos, '-') || !Digits(s, &pos, 2, &mo) ||
      !Expect(s, &pos, '-') || !Digits(s, &pos, 2, &d)) {
    return false;
  }
  using namespace std::chrono;
  year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) return false;
  int64_t offset_min = 0;
  if (pos < s.size()) {
    if (!Expect(s, &pos, 'T') || !Digits(s, &pos, 2, &h) || !Expect(s, &pos, ':') ||
        !Digits(s, &pos, 2, &mi)) {
      return false;
    }
    if (pos < s.size() && s[pos] == ':') {
      ++pos;
      if (!Digits(s, &pos, 2, &sec)) return false;
      if (pos < s.size() && s[pos] == '.') {
        ++pos;
        // Milliseconds from the first three digits; up to nine are accepted.
        size_t start = pos;
        int n = 0;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
          if (n < 3) {
            ms = ms * 10 + (s[pos] - '0');
            ++n;
          }
          if (++pos - start > 9) return false;
        }
        if (pos == start) return false;
        for (; n < 3; ++n) ms *= 10;
      }
    }
    if (h > 23 || mi > 59 || sec > 60) return false;
    if (pos < s.size() && s[pos] == 'Z') {
      ++pos;
    } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
      int sign = s[pos] == '-' ? -1 : 1;
      ++pos;
      int oh, om;
      if (!Digits(s, &pos, 2, &oh) || !Expect(s, &pos, ':') || !Digits(s, &pos, 2, &om) || oh > 23 ||
          om > 59) {
        return false;
      }
      offset_min = sign * (oh * 60 + om);
    } else {
      return false;  // a time without its zone is ambiguous
    }
  }
  if (pos != s.size()) return false;
  int64_t days = sys_days(ymd).time_since_epoch().count();
  *epoch_ms = ((days * 24 + h) * 60 + mi - offset_min) * 60'000 + sec * 1000 + ms;
  return true;
}

bool ParseCidr(std::string_view text, unsigned char address[16], int* prefix_bits) {
  std::string_view host = text;
  int bits = -1;
  if (size_t slash = text.find('/'); slash != std::string_view::npos) {
    host = text.substr(0, slash);
    std::string_view b = text.substr(slash + 1);
    if (b.empty() || b.size() > 3) return false;
    auto [ptr, ec] = std::from_chars(b.data(), b.data() + b.size(), bits);
    if (ec != std::errc() || ptr != b.data() + b.size()) return false;
  }
  if (host.empty() || host.size() > 45) return false;
  std::string h(host);
  std::memset(address, 0, 16);
  unsigned char v4[4];
  if (inet_pton(AF_INET, h.c_str(), v4) == 1) {
    if (bits > 32) return false;
    address[10] = address[11] = 0xff;
    std::memcpy(address + 12, v4, 4);
    *prefix_bits = 96 + (bits < 0 ? 32 : bits);
    return true;
  }
  if (inet_pton(AF_INET6, h.c_str(), address) == 1) {
    if (bits > 128) return false;
    *prefix_bits = bits < 0 ? 128 : bits;
    return true;
  }
  return false;
}

}  // namespace ty::iam
