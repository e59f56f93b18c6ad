#include "api/sigv4.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>

#include "core/strings.h"

namespace ty::api {

namespace {

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
constexpr std::string_view kTerminator = "aws4_request";
constexpr int64_t kMaxPresignExpiresS = 7 * 24 * 3600;

constexpr std::string_view kSignatureMismatch =
    "The request signature we calculated does not match the signature you provided. Check your AWS "
    "Secret Access Key and signing method. Consult the service documentation for details.";

// Headers botocore's SigV4Auth never signs (SIGNED_HEADERS_BLACKLIST), plus the signature itself.
constexpr std::array<std::string_view, 13> kUnsignedHeaders = {
    "authorization", "connection", "expect", "keep-alive", "proxy-authenticate",
    "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade", "user-agent",
    "x-amzn-trace-id", "x-amz-signature"};

// A header that must be among SignedHeaders whenever the request carries it (lowercase name).
bool MustBeSigned(std::string_view name) {
  if (name == "host" || name == "content-type" || name == "x-amz-target") return true;
  return name.rfind("x-amz-", 0) == 0 && name != "x-amz-signature";
}

using Headers = std::vector<std::pair<std::string, std::string>>;
using Params = std::vector<std::pair<std::string, std::string>>;

Status Unauthenticated(std::string m) { return {Code::kUnauthenticated, std::move(m)}; }
Status BadSignature(std::string m) { return {Code::kBadSignature, std::move(m)}; }
Status Expired(std::string m) { return {Code::kExpired, std::move(m)}; }

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

// Python's str.split() whitespace, restricted to ASCII.
bool IsSpace(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

// Percent-encodes every byte except unreserved ones (and '/' when keep_slash), hex upper-case.
std::string UriEncode(std::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// Decodes %XX escapes; a malformed escape stays literal (as Python's unquote) and '+' stays '+'.
std::string UriDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int hi = HexDigitValue(s[i + 1]), lo = HexDigitValue(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// botocore.utils.remove_dot_segments: RFC 3986 dot-segment removal that also drops empty segments.
std::string RemoveDotSegments(std::string_view path) {
  if (path.empty()) return "";
  std::vector<std::string> kept;
  for (auto& seg : Split(path, '/')) {
    if (seg.empty() || seg == ".") continue;
    if (seg == "..") {
      if (!kept.empty()) kept.pop_back();
    } else {
      kept.push_back(std::move(seg));
    }
  }
  std::string out = path.front() == '/' ? "/" : "";
  for (size_t i = 0; i < kept.size(); ++i) {
    if (i) out.push_back('/');
    out += kept[i];
  }
  if (path.back() == '/' && !kept.empty()) out.push_back('/');
  return out;
}

// S3 signs the path exactly as sent (botocore's S3SigV4Auth does not normalize it, and keys may
// hold '//', '.', '..' and escapes that must reach the bucket unchanged); other services sign it
// normalized and encoded a second time.
std::string CanonicalUri(std::string_view path, bool s3) {
  if (path.empty()) return "/";
  if (s3) return std::string(path);
  return UriEncode(RemoveDotSegments(path), /*keep_slash=*/true);
}

// Splits a raw query into percent-decoded (key, value) pairs; a param without '=' has value "".
Params ParseQuery(std::string_view query) {
  Params out;
  if (query.empty()) return out;
  for (const auto& part : Split(query, '&')) {
    size_t eq = part.find('=');
    std::string_view p = part;
    if (eq == std::string::npos) {
      out.emplace_back(UriDecode(p), "");
    } else {
      out.emplace_back(UriDecode(p.substr(0, eq)), UriDecode(p.substr(eq + 1)));
    }
  }
  return out;
}

// Canonical query of decoded params, leaving out `skip_key` (X-Amz-Signature for presigned URLs).
std::string CanonicalQuery(const Params& params, std::string_view skip_key = {}) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(params.size());
  for (const auto& [k, v] : params) {
    if (!skip_key.empty() && k == skip_key) continue;
    encoded.emplace_back(UriEncode(k, false), UriEncode(v, false));
  }
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [k, v] : encoded) {
    if (!out.empty()) out.push_back('&');
    out += k;
    out.push_back('=');
    out += v;
  }
  return out;
}

const std::string* FindParam(const Params& params, std::string_view key) {
  for (const auto& [k, v] : params)
    if (k == key) return &v;
  return nullptr;
}

// First header named `lower_name` (compared case-insensitively), or null.
const std::string* FindHeader(const Headers& headers, std::string_view lower_name) {
  for (const auto& [k, v] : headers)
    if (ToLower(k) == lower_name) return &v;
  return nullptr;
}

// Trimall from the SigV4 spec: trims and collapses every whitespace run to one space.
std::string TrimAll(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  bool pending_space = false;
  for (unsigned char c : v) {
    if (IsSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(static_cast<char>(c));
  }
  return out;
}

// Canonical headers block ("name:value\n" per name) for `names` (lowercase, sorted, unique), or
// nullopt when one of them is absent from the request.
std::optional<std::string> CanonicalHeaders(const Headers& headers,
                                            const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) {
    bool found = false;
    std::string value;
    for (const auto& [k, v] : headers) {
      if (ToLower(k) != name) continue;
      if (found) value.push_back(',');
      value += TrimAll(v);
      found = true;
    }
    if (!found) return std::nullopt;
    out += name;
    out.push_back(':');
    out += value;
    out.push_back('\n');
  }
  return out;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out.push_back(';');
    out += n;
  }
  return out;
}

std::string PayloadHash(const HttpRequestView& req) {
  if (const std::string* h = FindHeader(req.headers, "x-amz-content-sha256")) return *h;
  return Sha256Hex(req.body);
}

bool IsLowerHexSha256(std::string_view v) {
  return v.size() == 64 && std::all_of(v.begin(), v.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The payload mode an S3 x-amz-content-sha256 value names, or nullopt when it names none.
std::optional<PayloadMode> S3PayloadMode(std::string_view v) {
  if (v == kUnsignedPayload) return PayloadMode::kUnsigned;
  if (v == kStreamingSignedPayload) return PayloadMode::kStreamingSigned;
  if (v == kStreamingSignedPayloadTrailer) return PayloadMode::kStreamingSignedTrailer;
  if (v == kStreamingUnsignedPayloadTrailer) return PayloadMode::kStreamingUnsignedTrailer;
  if (IsLowerHexSha256(v)) return PayloadMode::kSignedBody;
  return std::nullopt;
}

struct Scope {
  std::string access_key_id;
  std::string date;  // YYYYMMDD
  std::string region;
  std::string service;

  std::string ToString() const {
    return date + "/" + region + "/" + service + "/" + std::string(kTerminator);
  }
};

std::string SigningKey(std::string_view secret, const Scope& scope) {
  std::string key = HmacSha256("AWS4" + std::string(secret), scope.date);
  key = HmacSha256(key, scope.region);
  key = HmacSha256(key, scope.service);
  return HmacSha256(key, kTerminator);
}

// Hex signature of the canonical request parts under `signing_key`.
std::string ComputeSignature(std::string_view signing_key, const Scope& scope, std::string_view amz_date,
                             std::string_view method, std::string_view path, std::string_view query,
                             std::string_view canonical_headers, std::string_view signed_headers,
                             std::string_view payload_hash) {
  std::string canonical_request = ToUpper(method);
  canonical_request += '\n';
  canonical_request += CanonicalUri(path, scope.service == "s3");
  canonical_request += '\n';
  canonical_request += query;
  canonical_request += '\n';
  canonical_request += canonical_headers;
  canonical_request += '\n';
  canonical_request += signed_headers;
  canonical_request += '\n';
  canonical_request += payload_hash;

  std::string string_to_sign(kAlgorithm);
  string_to_sign += '\n';
  string_to_sign += amz_date;
  string_to_sign += '\n';
  string_to_sign += scope.ToString();
  string_to_sign += '\n';
  string_to_sign += Sha256Hex(canonical_request);
  return ToHex(HmacSha256(signing_key, string_to_sign));
}

// The signature parameters, from the Authorization header or from a presigned URL's query.
struct SignatureParams {
  std::string credential;
  std::string signed_headers;
  std::string signature;
  bool presigned = false;
  std::string amz_date;     // presigned only
  int64_t expires_s = 0;    // presigned only
};

Status ParseAuthorizationHeader(std::string_view header, SignatureParams* out) {
  std::string_view h = Trim(header);
  size_t sp = h.find_first_of(" \t");
  std::string_view algorithm = h.substr(0, sp);
  if (algorithm != kAlgorithm)
    return Unauthenticated("Unsupported Authorization Type: '" + std::string(algorithm) +
                           "'. Only " + std::string(kAlgorithm) + " is supported.");
  std::string_view rest = sp == std::string_view::npos ? std::string_view() : h.substr(sp);
  bool has_credential = false, has_signed_headers = false, has_signature = false;
  for (const auto& part : Split(rest, ',')) {
    std::string_view kv = Trim(part);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view key = Trim(kv.substr(0, eq));
    std::string value(Trim(kv.substr(eq + 1)));
    if (key == "Credential") {
      out->credential = std::move(value);
      has_credential = true;
    } else if (key == "SignedHeaders") {
      out->signed_headers = std::move(value);
      has_signed_headers = true;
    } else if (key == "Signature") {
      out->signature = std::move(value);
      has_signature = true;
    }
  }
  std::string missing;
  if (!has_credential) missing += "Authorization header requires 'Credential' parameter. ";
  if (!has_signature) missing += "Authorization header requires 'Signature' parameter. ";
  if (!has_signed_headers) missing += "Authorization header requires 'SignedHeaders' parameter. ";
  if (!missing.empty())
    return Unauthenticated(missing + "Authorization=" + std::string(h));
  return Status::Ok();
}

Status ParsePresignedQuery(const Params& params, SignatureParams* out) {
  out->presigned = true;
  const std::string* algorithm = FindParam(params, "X-Amz-Algorithm");
  if (!algorithm || *algorithm != kAlgorithm)
    return Unauthenticated("X-Amz-Algorithm only supports '" + std::string(kAlgorithm) + "'");
  std::string missing;
  auto take = [&](std::string_view key, std::string* dst) {
    if (const std::string* v = FindParam(params, key)) {
      *dst = *v;
    } else {
      missing += "AWS query-string parameters must include '" + std::string(key) + "'. ";
    }
  };
  std::string expires;
  take("X-Amz-Credential", &out->credential);
  take("X-Amz-Signature", &out->signature);
  take("X-Amz-SignedHeaders", &out->signed_headers);
  take("X-Amz-Date", &out->amz_date);
  take("X-Amz-Expires", &expires);
  if (!missing.empty()) return Unauthenticated(missing + "Re-examine the query-string parameters.");
  auto [ptr, ec] = std::from_chars(expires.data(), expires.data() + expires.size(), out->expires_s);
  if (ec != std::errc() || ptr != expires.data() + expires.size() || out->expires_s <= 0 ||
      out->expires_s > kMaxPresignExpiresS)
    return Unauthenticated("X-Amz-Expires must be a positive number of seconds no greater than " +
                           std::to_string(kMaxPresignExpiresS) + ", not '" + expires + "'");
  return Status::Ok();
}

Status ParseScope(std::string_view credential, Scope* out) {
  std::vector<std::string> parts = Split(credential, '/');
  if (parts.size() != 5 || parts[0].empty() || parts[1].empty() || parts[2].empty() ||
      parts[3].empty())
    return Unauthenticated(
        "Credential should be of the form '<AccessKeyId>/<YYYYMMDD>/<region>/<service>/"
        "aws4_request', not '" + std::string(credential) + "'.");
  if (parts[4] != kTerminator)
    return Unauthenticated("Credential should be scoped with a valid terminator: 'aws4_request', not '" +
                           parts[4] + "'.");
  out->access_key_id = std::move(parts[0]);
  out->date = std::move(parts[1]);
  out->region = std::move(parts[2]);
  out->service = std::move(parts[3]);
  return Status::Ok();
}

std::string SkewText(EpochMs skew_ms) {
  if (skew_ms % 60000 == 0) return std::to_string(skew_ms / 60000) + " min.";
  return std::to_string(skew_ms / 1000) + " sec.";
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

namespace {

// How much of VerifySigV4 a call does: all of it; all but comparing a hex x-amz-content-sha256 with
// the body (S3's head); or the key, scope and time only (a head whose signature covers its body).
enum class Depth { kFull, kS3Head, kScope };

StatusOr<VerifiedCaller> Verify(const HttpRequestView& req, const SecretLookup& lookup, std::string_view region,
                                const std::vector<std::string>& allowed_services, EpochMs now, EpochMs max_skew_ms,
                                Depth depth) {
  const Params query = ParseQuery(req.query);
  const std::string* authorization = FindHeader(req.headers, "authorization");
  SignatureParams sp;
  if (authorization) {
    TY_RETURN_IF_ERROR(ParseAuthorizationHeader(*authorization, &sp));
  } else if (FindParam(query, "X-Amz-Algorithm")) {
    TY_RETURN_IF_ERROR(ParsePresignedQuery(query, &sp));
  } else {
    return Unauthenticated("Missing Authentication Token");
  }

  Scope scope;
  TY_RETURN_IF_ERROR(ParseScope(sp.credential, &scope));

  std::optional<std::string> secret;
  if (lookup) secret = lookup(scope.access_key_id);
  if (!secret)
    return Status(Code::kUnknownKey, "The security token included in the request is invalid.");

  if (scope.region != region)
    return BadSignature("Credential should be scoped to a valid region, not '" + scope.region +
                        "'. Expected '" + std::string(region) + "'.");
  if (std::find(allowed_services.begin(), allowed_services.end(), scope.service) ==
      allowed_services.end()) {
    std::string expected;
    for (const auto& s : allowed_services) expected += (expected.empty() ? "'" : " or '") + s + "'";
    return BadSignature("Credential should be scoped to correct service: " +
                        (expected.empty() ? std::string("''") : expected) + ".");
  }

  // The request time, and the time it is written as in the string to sign.
  EpochMs request_ms = 0;
  std::string amz_date;
  if (sp.presigned) {
    if (!ParseAmzDate(sp.amz_date, &request_ms))
      return Unauthenticated("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"");
    amz_date = sp.amz_date;
  } else if (const std::string* x = FindHeader(req.headers, "x-amz-date")) {
    amz_date = std::string(Trim(*x));
    if (!ParseAmzDate(amz_date, &request_ms))
      return Unauthenticated("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"");
  } else if (const std::string* d = FindHeader(req.headers, "date")) {
    if (!ParseHttpDate(*d, &request_ms))
      return Unauthenticated("Date must be in RFC 1123 format, e.g. 'Fri, 02 Jan 2026 03:04:05 GMT'");
    amz_date = FormatAmzDate(request_ms);
  } else {
    return Unauthenticated(
        "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.");
  }

  if (request_ms > now + max_skew_ms)
    return Expired("Signature not yet current: " + amz_date + " is still later than " +
                   FormatAmzDate(now + max_skew_ms) + " (" + FormatAmzDate(now) + " + " +
                   SkewText(max_skew_ms) + ")");
  if (sp.presigned) {
    if (now > request_ms + sp.expires_s * 1000)
      return Expired("Request has expired: " + amz_date + " + " + std::to_string(sp.expires_s) +
                     " s is earlier than " + FormatAmzDate(now) + ".");
  } else if (request_ms < now - max_skew_ms) {
    return Expired("Signature expired: " + amz_date + " is now earlier than " +
                   FormatAmzDate(now - max_skew_ms) + " (" + FormatAmzDate(now) + " - " +
                   SkewText(max_skew_ms) + ")");
  }

  if (scope.date != std::string_view(amz_date).substr(0, 8))
    return BadSignature("Date in Credential scope does not match YYYYMMDD from ISO-8601 version of "
                        "date from HTTP: '" + scope.date + "' != '" + amz_date.substr(0, 8) +
                        "', from '" + amz_date + "'.");
  if (depth == Depth::kScope) {
    VerifiedCaller scoped;
    scoped.access_key_id = scope.access_key_id;
    scoped.service = scope.service;
    scoped.region = scope.region;
    scoped.presigned = sp.presigned;
    return scoped;
  }

  std::vector<std::string> signed_names;
  for (const auto& n : Split(sp.signed_headers, ';')) signed_names.push_back(ToLower(Trim(n)));
  std::sort(signed_names.begin(), signed_names.end());
  signed_names.erase(std::unique(signed_names.begin(), signed_names.end()), signed_names.end());
  if (!std::binary_search(signed_names.begin(), signed_names.end(), std::string("host")))
    return BadSignature("'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.");

  // Headers that choose what the request does must be covered by the signature when they are
  // sent, or they could be swapped on a signed request (X-Amz-Target turning a Describe into a
  // Stop). Named in the order they were received.
  std::vector<std::string> unsigned_sent;
  for (const auto& [k, v] : req.headers) {
    std::string name = ToLower(k);
    if (!MustBeSigned(name) || std::binary_search(signed_names.begin(), signed_names.end(), name)) continue;
    // A presigned S3 URL signs the host alone: whoever holds it picks the upload's Content-Type
    // (browsers and urllib send one of their own), as S3 allows.
    if (sp.presigned && name == "content-type" && scope.service == "s3") continue;
    if (std::find(unsigned_sent.begin(), unsigned_sent.end(), name) == unsigned_sent.end())
      unsigned_sent.push_back(std::move(name));
  }
  if (!unsigned_sent.empty()) {
    std::string names;
    for (const auto& n : unsigned_sent) names += (names.empty() ? "" : ", ") + n;
    return BadSignature("There were headers present in the request which were not signed: " + names +
                        ". Host, Content-Type, X-Amz-Target and every x-amz-* header sent must be in SignedHeaders.");
  }

  // What the signature covers of the body. S3 lets the client choose (x-amz-content-sha256, which
  // it must send); a presigned S3 URL never covers it; every other service always does.
  const bool s3 = scope.service == "s3";
  std::string payload_hash;
  PayloadMode payload_mode = PayloadMode::kSignedBody;
  if (s3 && sp.presigned) {
    payload_hash = std::string(kUnsignedPayload);
    payload_mode = PayloadMode::kUnsigned;
  } else if (s3) {
    const std::string* h = FindHeader(req.headers, "x-amz-content-sha256");
    if (!h)
      return Status(Code::kInvalidArgument,
                    "InvalidRequest: Missing required header for this request: x-amz-content-sha256");
    payload_hash = *h;
    std::optional<PayloadMode> mode = S3PayloadMode(payload_hash);
    if (!mode)
      return Status(Code::kInvalidArgument,
                    "InvalidArgument: x-amz-content-sha256 must be UNSIGNED-PAYLOAD, "
                    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, "
                    "STREAMING-UNSIGNED-PAYLOAD-TRAILER or the lower-case hex SHA-256 of the body, not '" +
                        payload_hash.substr(0, 80) + "'");
    payload_mode = *mode;
  } else {
    payload_hash = PayloadHash(req);
  }
  if (payload_mode == PayloadMode::kSignedBody && depth == Depth::kFull && payload_hash != Sha256Hex(req.body))
    return BadSignature(std::string(s3 ? "XAmzContentSHA256Mismatch: " : "") +
                        "The provided 'x-amz-content-sha256' header does not match what was computed.");

  std::optional<std::string> canonical_headers = CanonicalHeaders(req.headers, signed_names);
  if (!canonical_headers) return BadSignature(std::string(kSignatureMismatch));

  std::string canonical_query =
      sp.presigned ? CanonicalQuery(query, "X-Amz-Signature") : CanonicalQuery(query);
  std::string signing_key = SigningKey(*secret, scope);
  std::string expected =
      ComputeSignature(signing_key, scope, amz_date, req.method, req.path, canonical_query,
                       *canonical_headers, JoinNames(signed_names), payload_hash);
  if (!ConstantTimeEquals(expected, ToLower(sp.signature)))
    return BadSignature(std::string(kSignatureMismatch));

  VerifiedCaller caller;
  caller.access_key_id = scope.access_key_id;
  caller.service = scope.service;
  caller.region = scope.region;
  caller.signing_key = std::move(signing_key);
  caller.amz_date = std::move(amz_date);
  caller.scope = scope.ToString();
  caller.seed_signature = std::move(expected);
  caller.payload_mode = payload_mode;
  caller.presigned = sp.presigned;
  if (sp.presigned) {
    if (const std::string* t = FindParam(query, "X-Amz-Security-Token")) caller.security_token = *t;
  } else if (const std::string* t = FindHeader(req.headers, "x-amz-security-token")) {
    caller.security_token = std::string(Trim(*t));
  }
  return caller;
}

}  // namespace

StatusOr<VerifiedCaller> VerifySigV4(const HttpRequestView& req, const SecretLookup& lookup, std::string_view region,
                                     const std::vector<std::string>& allowed_services, EpochMs now,
                                     EpochMs max_skew_ms) {
  return Verify(req, lookup, region, allowed_services, now, max_skew_ms, Depth::kFull);
}

StatusOr<VerifiedCaller> VerifySigV4Head(const HttpRequestView& head, const SecretLookup& lookup,
                                         std::string_view region, const std::vector<std::string>& allowed_services,
                                         EpochMs now, EpochMs max_skew_ms) {
  std::string credential;
  if (const std::string* auth = FindHeader(head.headers, "authorization")) {
    SignatureParams sp;
    if (ParseAuthorizationHeader(*auth, &sp).ok()) credential = sp.credential;
  } else if (const std::string* c = FindParam(ParseQuery(head.query), "X-Amz-Credential")) {
    credential = *c;
  }
  Scope scope;
  const bool s3 = ParseScope(credential, &scope).ok() && scope.service == "s3";
  return Verify(head, lookup, region, allowed_services, now, max_skew_ms, s3 ? Depth::kS3Head : Depth::kScope);
}

void SignSigV4(HttpRequestView& req, const Credential& cred, std::string_view region,
               std::string_view service, EpochMs now) {
  std::erase_if(req.headers, [](const auto& h) {
    std::string n = ToLower(h.first);
    return n == "authorization" || n == "x-amz-date";
  });
  const std::string amz_date = FormatAmzDate(now);
  req.headers.emplace_back("X-Amz-Date", amz_date);

  std::vector<std::string> names;
  for (const auto& [k, v] : req.headers) {
    std::string n = ToLower(k);
    if (std::find(kUnsignedHeaders.begin(), kUnsignedHeaders.end(), n) == kUnsignedHeaders.end())
      names.push_back(std::move(n));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());

  Scope scope{cred.access_key_id, amz_date.substr(0, 8), std::string(region), std::string(service)};
  std::string signed_headers = JoinNames(names);
  std::string signature = ComputeSignature(
      SigningKey(cred.secret_access_key, scope), scope, amz_date, req.method, req.path,
      CanonicalQuery(ParseQuery(req.query)), CanonicalHeaders(req.headers, names).value_or(""),
      signed_headers, PayloadHash(req));
  req.headers.emplace_back("Authorization", std::string(kAlgorithm) + " Credential=" +
                                                cred.access_key_id + "/" + scope.ToString() +
                                                ", SignedHeaders=" + signed_headers +
                                                ", Signature=" + signature);
}

// ------------------------------------------------------------------------------------------
// S3's Signature Version 2 (HMAC-SHA1), as botocore's HmacV1Auth / HmacV1QueryAuth sign it.

namespace {

// The query parameters S3 signs into the resource (botocore's QSAOfInterest), sorted by name.
constexpr std::array<std::string_view, 38> kSigV2SubResources = {
    "accelerate", "acl", "analytics", "cors", "defaultObjectAcl", "delete", "inventory", "lifecycle",
    "location", "logging", "metrics", "notification", "object-lock", "partNumber", "policy",
    "replication", "requestPayment", "response-cache-control", "response-content-disposition",
    "response-content-encoding", "response-content-language", "response-content-type",
    "response-expires", "restore", "select", "select-type", "storageClass", "tagging", "torrent",
    "uploadId", "uploads", "versionId", "versioning", "versions", "website", "attributes", "retention",
    "legal-hold"};

std::string HmacSha1(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha1(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &n);
  return std::string(reinterpret_cast<const char*>(out), n);
}

}  // namespace

bool IsSigV2(const HttpRequestView& req) {
  if (const std::string* auth = FindHeader(req.headers, "authorization")) return StartsWith(*auth, "AWS ");
  const Params query = ParseQuery(req.query);
  return FindParam(query, "AWSAccessKeyId") && FindParam(query, "Signature");
}

StatusOr<VerifiedCaller> VerifySigV2(const HttpRequestView& req, const SecretLookup& lookup,
                                     std::string_view virtual_bucket, EpochMs now, EpochMs max_skew_ms) {
  const Params query = ParseQuery(req.query);
  std::string key_id, signature, when;
  bool presigned = false;
  EpochMs request_ms = 0;
  if (const std::string* auth = FindHeader(req.headers, "authorization")) {
    if (!StartsWith(*auth, "AWS ")) return Unauthenticated("Unsupported Authorization Type");
    std::string_view rest = std::string_view(*auth).substr(4);
    size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0)
      return Unauthenticated("AWS authorization header is invalid: expected 'AWS AccessKeyId:Signature'");
    key_id = std::string(Trim(rest.substr(0, colon)));
    signature = std::string(Trim(rest.substr(colon + 1)));
    // x-amz-date, when sent, is signed among the x-amz-* headers and the Date line is empty.
    const std::string* amz = FindHeader(req.headers, "x-amz-date");
    const std::string* date = amz ? amz : FindHeader(req.headers, "date");
    if (!date || !ParseHttpDate(*date, &request_ms))
      return Unauthenticated("AWS authentication requires a valid Date or x-amz-date header");
    if (request_ms > now + max_skew_ms || request_ms < now - max_skew_ms)
      return Expired("The difference between the request time and the current time is too large.");
    if (!amz) when = *date;
  } else {
    const std::string* k = FindParam(query, "AWSAccessKeyId");
    const std::string* sig = FindParam(query, "Signature");
    const std::string* expires = FindParam(query, "Expires");
    if (!k || !sig || !expires)
      return Unauthenticated("Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters");
    int64_t expires_s = 0;
    auto [end, ec] = std::from_chars(expires->data(), expires->data() + expires->size(), expires_s);
    if (ec != std::errc() || end != expires->data() + expires->size() || expires_s < 0)
      return Unauthenticated("Expires must be a number of seconds since the epoch, not '" + expires->substr(0, 40) + "'");
    if (now > expires_s * 1000) return Expired("Request has expired");
    // As SigV4's X-Amz-Expires: a URL valid for years is a standing credential whoever finds it holds.
    if (expires_s > (now + max_skew_ms) / 1000 + kMaxPresignExpiresS)
      return Unauthenticated("Expires must be at most " + std::to_string(kMaxPresignExpiresS) +
                             " seconds (7 days) after the current time, not " + *expires);
    key_id = *k;
    signature = *sig;
    when = *expires;
    presigned = true;
  }
  std::optional<std::string> secret;
  if (lookup) secret = lookup(key_id);
  if (!secret) return Status(Code::kUnknownKey, "The AWS Access Key Id you provided does not exist in our records.");

  auto header = [&](std::string_view name) -> std::string {
    const std::string* h = FindHeader(req.headers, name);
    return h ? std::string(Trim(*h)) : std::string();
  };
  std::string to_sign = req.method + "\n" + header("content-md5") + "\n" + header("content-type") + "\n" + when + "\n";
  // x-amz-* headers: lower-cased, sorted, repeated ones joined with ','.
  std::vector<std::pair<std::string, std::string>> amz;
  for (const auto& [name, value] : req.headers) {
    std::string lower = ToLower(name);
    if (!StartsWith(lower, "x-amz-")) continue;
    auto it = std::find_if(amz.begin(), amz.end(), [&](const auto& p) { return p.first == lower; });
    if (it == amz.end()) {
      amz.emplace_back(lower, std::string(Trim(value)));
    } else {
      it->second += "," + std::string(Trim(value));
    }
  }
  std::sort(amz.begin(), amz.end());
  for (const auto& [name, value] : amz) to_sign += name + ":" + value + "\n";
  // The resource: /bucket (virtual-host style) + the path as sent + the signed sub-resources.
  std::string resource = virtual_bucket.empty() ? std::string() : "/" + std::string(virtual_bucket);
  resource += req.path.empty() ? "/" : req.path;
  std::vector<std::pair<std::string, std::string>> sub;
  for (const auto& [k, v] : query)
    if (std::find(kSigV2SubResources.begin(), kSigV2SubResources.end(), k) != kSigV2SubResources.end())
      sub.emplace_back(k, v);
  std::sort(sub.begin(), sub.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < sub.size(); ++i)
    resource += (i ? "&" : "?") + sub[i].first + (sub[i].second.empty() ? "" : "=" + sub[i].second);
  to_sign += resource;

  const std::string expected = Base64Encode(HmacSha1(*secret, to_sign));
  if (expected.size() != signature.size() || CRYPTO_memcmp(expected.data(), signature.data(), expected.size()) != 0)
    return BadSignature(std::string(kSignatureMismatch));
  VerifiedCaller caller;
  caller.access_key_id = key_id;
  caller.service = "s3";
  caller.payload_mode = PayloadMode::kUnsigned;  // Signature Version 2 never covers the body
  caller.presigned = presigned;
  if (const std::string* token = presigned ? FindParam(query, "x-amz-security-token") : FindHeader(req.headers, "x-amz-security-token"))
    caller.security_token = *token;
  return caller;
}

}  // namespace ty::api
