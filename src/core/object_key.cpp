#include "core/object_key.h"

#include <cstdint>

#include "core/strings.h"

namespace ty {

namespace {

constexpr size_t kMaxKeyBytes = 1024;     // S3's limit on a key, in bytes of UTF-8
constexpr size_t kMaxSegmentBytes = 255;  // NAME_MAX: one segment becomes one file name
constexpr size_t kShownBytes = 200;       // how much of a long value an error message repeats

// `s` in single quotes for an error message, control bytes as \xNN and long values cut short.
std::string Quoted(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kShownBytes; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += s.size() > kShownBytes ? "'... (" + std::to_string(s.size()) + " bytes)" : "'";
  return out;
}

// The offset of the first byte that is not part of well-formed UTF-8 (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), or npos.
size_t FirstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char c = b(i);
    size_t n;
    uint32_t lo = 0x80, hi = 0xbf;  // bounds of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return i;
    }
    if (i + n >= s.size()) return i;  // truncated sequence
    if (b(i + 1) < lo || b(i + 1) > hi) return i;
    for (size_t k = 2; k <= n; ++k)
      if (b(i + k) < 0x80 || b(i + k) > 0xbf) return i;
    i += n + 1;
  }
  return std::string_view::npos;
}

bool IsIpv4Shaped(std::string_view s) {
  int dots = 0;
  for (char c : s) {
    if (c == '.') ++dots;
    else if (c < '0' || c > '9') return false;
  }
  return dots == 3;
}

}  // namespace

Status CheckBucketName(std::string_view bucket) {
  auto bad = [&](const std::string& rule) {
    return InvalidArgument("the bucket name " + Quoted(bucket) + " " + rule +
                           " (S3's rules: 3 to 63 lower-case letters, digits, '.' and '-', starting and ending with a "
                           "letter or digit)");
  };
  if (bucket.size() < 3 || bucket.size() > 63) return bad("is not 3 to 63 characters long");
  for (char c : bucket)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'))
      return bad("holds a character other than a-z, 0-9, '.' and '-'");
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(bucket.front()) || !alnum(bucket.back())) return bad("does not start and end with a letter or digit");
  if (bucket.find("..") != std::string_view::npos) return bad("holds two adjacent periods");
  if (IsIpv4Shaped(bucket)) return bad("is formatted as an IP address");
  for (std::string_view p : {"xn--", "sthree-", "amzn-s3-demo-"})
    if (StartsWith(bucket, p)) return bad("starts with the reserved prefix '" + std::string(p) + "'");
  for (std::string_view s : {"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"})
    if (EndsWith(bucket, s)) return bad("ends with the reserved suffix '" + std::string(s) + "'");
  return Status::Ok();
}

Status CheckObjectKey(std::string_view key, KeyUse use) {
  const char* what = use == KeyUse::kObject ? "the object key " : "the key prefix ";
  auto bad = [&](const std::string& rule) {
    return InvalidArgument(what + Quoted(key) + " " + rule +
                           " (keys are stored as files, so each must be a relative path of non-empty segments "
                           "other than '.' and '..')");
  };
  if (key.empty()) {
    if (use == KeyUse::kPrefix) return Status::Ok();
    return InvalidArgument("the object key is empty");
  }
  if (key.size() > kMaxKeyBytes)
    return bad("is " + std::to_string(key.size()) + " bytes long; S3's limit is " + std::to_string(kMaxKeyBytes));
  if (size_t at = FirstInvalidUtf8(key); at != std::string_view::npos)
    return bad("is not valid UTF-8 (at byte " + std::to_string(at) + ")");
  for (char c : key) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return bad("holds a control character");
  }
  if (key.front() == '/') return bad("starts with '/' (an absolute path)");
  if (use == KeyUse::kObject && key.back() == '/') return bad("ends with '/' (a folder, not an object)");
  // A prefix may end with '/': its last, empty, segment selects everything in that folder.
  std::string_view body = use == KeyUse::kPrefix && key.back() == '/' ? key.substr(0, key.size() - 1) : key;
  size_t start = 0;
  while (true) {
    size_t end = body.find('/', start);
    std::string_view seg = body.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (seg.empty()) return bad("has an empty segment ('//')");
    if (seg == ".") return bad("has a '.' segment");
    if (seg == "..") return bad("has a '..' segment");
    if (seg.size() > kMaxSegmentBytes)
      return bad("has a segment of " + std::to_string(seg.size()) + " bytes; the limit is " +
                 std::to_string(kMaxSegmentBytes));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return Status::Ok();
}

StatusOr<S3Location> ParseS3Uri(std::string_view uri, KeyUse use) {
  if (!StartsWith(uri, "s3://"))
    return InvalidArgument(Quoted(uri) + " is not an s3://bucket/" + (use == KeyUse::kObject ? "key" : "prefix") + " URI");
  std::string_view rest = uri.substr(5);
  size_t slash = rest.find('/');
  S3Location loc;
  loc.bucket = std::string(rest.substr(0, slash));
  loc.key = slash == std::string_view::npos ? "" : std::string(rest.substr(slash + 1));
  if (Status st = CheckBucketName(loc.bucket); !st.ok()) return InvalidArgument(Quoted(uri) + ": " + st.message());
  if (Status st = CheckObjectKey(loc.key, use); !st.ok()) return InvalidArgument(Quoted(uri) + ": " + st.message());
  return loc;
}

}  // namespace ty
