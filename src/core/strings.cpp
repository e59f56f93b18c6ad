#include "core/strings.h"

#include <fnmatch.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <stdexcept>

namespace ty {

namespace {
// The kernel's CSPRNG (getrandom(2), which blocks only until it is first seeded), which OpenSSL's
// own generator is seeded from: as strong, and it spares a process whose only use of OpenSSL is
// a random name (a supervisor's upload into the embedded store) the library's initialisation,
// its configuration file and provider included.
void RandomBytes(unsigned char* out, size_t n) {
  while (n > 0) {
    ssize_t got = ::getrandom(out, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw std::runtime_error(std::string("getrandom failed: ") + std::strerror(errno));
    out += got;
    n -= static_cast<size_t>(got);
  }
}
}  // namespace

std::string ToHex(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string NewUuid() {
  unsigned char b[16];
  RandomBytes(b, sizeof b);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  std::string hex = ToHex(std::string_view(reinterpret_cast<char*>(b), sizeof b));
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20, 12);
}

std::string RandomHex(size_t n_bytes) {
  std::string b(n_bytes, '\0');
  RandomBytes(reinterpret_cast<unsigned char*>(b.data()), n_bytes);
  return ToHex(b);
}

std::string RandomAlnum(size_t n, bool upper_only) {
  static const std::string kUpper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static const std::string kAll =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  const std::string& alphabet = upper_only ? kUpper : kAll;
  // Bytes at or above the largest multiple of the alphabet's size are dropped, so every character
  // is equally likely (a plain modulo favours the alphabet's first 256 % size characters).
  const size_t usable = 256 - 256 % alphabet.size();
  std::string out;
  out.reserve(n);
  unsigned char raw[64];
  while (out.size() < n) {
    RandomBytes(raw, sizeof raw);
    for (unsigned char b : raw)
      if (b < usable && out.size() < n) out += alphabet[b % alphabet.size()];
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  return ToHex(std::string_view(reinterpret_cast<char*>(md), sizeof md));
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len);
  return std::string(reinterpret_cast<char*>(md), len);
}

int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string FormDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && HexDigitValue(s[i + 1]) >= 0 && HexDigitValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexDigitValue(s[i + 1]) * 16 + HexDigitValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (c < 0x20 && c != '\t' && c != '\n') {
          // As S3 writes them; clients that cannot read these ask for encoding-type=url.
          char buf[8];
          std::snprintf(buf, sizeof buf, "&#x%X;", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text, size_t max_text) {
  if (text.empty() || text.size() % 4 != 0 || text.size() > max_text) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  const size_t pad = text.back() == '=' ? (text[text.size() - 2] == '=' ? 2 : 1) : 0;  // decoded as zero bytes
  out.resize(static_cast<size_t>(n) - pad);
  if (Base64Encode(out) != text) return std::nullopt;
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string ToUpper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.emplace_back(s.substr(start));
      return out;
    }
    out.emplace_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

bool IsBatchName(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

bool IsBatchJobName(std::string_view s) {
  return IsBatchName(s) && std::isalnum(static_cast<unsigned char>(s.front()));
}

bool GlobMatch(std::string_view pattern, std::string_view text) {
  // Iterative wildcard match with single backtrack point: linear in practice, no recursion.
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string FormatAmzDate(int64_t epoch_ms) {
  std::time_t t = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// The epoch seconds of the UTC time whose year (4 digits), month, day, hour, minute and second
// (2 digits each) start at `at` in `s`, which the caller has checked are digits; false when a
// field is out of range.
static bool UtcSeconds(std::string_view s, const size_t (&at)[6], int64_t* seconds) {
  auto num = [&](size_t pos, size_t len) { return std::stoi(std::string(s.substr(pos, len))); };
  std::tm tm{};
  tm.tm_year = num(at[0], 4) - 1900;
  tm.tm_mon = num(at[1], 2) - 1;
  tm.tm_mday = num(at[2], 2);
  tm.tm_hour = num(at[3], 2);
  tm.tm_min = num(at[4], 2);
  tm.tm_sec = num(at[5], 2);
  if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
      tm.tm_sec > 60)
    return false;
  *seconds = static_cast<int64_t>(timegm(&tm));
  return true;
}

bool ParseAmzDate(std::string_view s, int64_t* epoch_ms) {
  if (s.size() != 16 || s[8] != 'T' || s[15] != 'Z') return false;
  for (size_t i : {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14})
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  int64_t seconds = 0;
  if (!UtcSeconds(s, {0, 4, 6, 9, 11, 13}, &seconds)) return false;
  *epoch_ms = seconds * 1000;
  return true;
}

bool ParseIso8601(std::string_view s, int64_t* epoch_ms) {
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18})
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  std::string_view rest = s.substr(19);
  int64_t ms = 0;
  if (!rest.empty() && rest[0] == '.') {  // a fraction: its first three digits count
    size_t n = 1;
    int64_t scale = 100;
    while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n]))) {
      ms += (rest[n] - '0') * scale;
      scale /= 10;
      ++n;
    }
    if (n == 1 || n > 10) return false;
    rest = rest.substr(n);
  }
  if (rest != "Z" && rest != "+00:00") return false;
  int64_t seconds = 0;
  if (!UtcSeconds(s, {0, 5, 8, 11, 14, 17}, &seconds)) return false;
  *epoch_ms = seconds * 1000 + ms;
  return true;
}

std::string FormatHttpDate(int64_t epoch_ms) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::time_t t = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char out[40];
  std::snprintf(out, sizeof out, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday], tm.tm_mday,
                kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return out;
}

bool ParseHttpDate(std::string_view s, int64_t* epoch_ms) {
  s = Trim(s);
  if (ParseAmzDate(s, epoch_ms)) return true;
  if (size_t comma = s.find(','); comma != std::string_view::npos) s = Trim(s.substr(comma + 1));
  std::vector<std::string> f;
  for (auto& tok : Split(s, ' '))
    if (!tok.empty()) f.push_back(std::move(tok));
  if (f.size() != 5) return false;
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  auto month = std::find(kMonths.begin(), kMonths.end(), f[1]);
  if (month == kMonths.end()) return false;
  if (f[4] != "GMT" && f[4] != "UTC" && f[4] != "+0000" && f[4] != "-0000" && f[4] != "Z") return false;
  std::string day = f[0].size() == 1 ? "0" + f[0] : f[0];
  const std::string& t = f[3];
  if (day.size() != 2 || f[2].size() != 4 || t.size() != 8 || t[2] != ':' || t[5] != ':') return false;
  int m = static_cast<int>(month - kMonths.begin()) + 1;
  std::string amz = f[2] + (m < 10 ? "0" : "") + std::to_string(m) + day + "T" + t.substr(0, 2) +
                    t.substr(3, 2) + t.substr(6, 2) + "Z";
  return ParseAmzDate(amz, epoch_ms);
}

bool MatchesAnyGlob(const std::vector<std::string>& patterns, const std::string& s) {
  for (const std::string& pattern : patterns)
    if (::fnmatch(pattern.c_str(), s.c_str(), 0) == 0) return true;
  return false;
}

std::string FormatIso8601(int64_t epoch_ms) {
  std::time_t t = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(epoch_ms % 1000));
  return out;
}

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

}  // namespace ty
