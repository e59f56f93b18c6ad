// AWS Signature Version 4 (AWS4-HMAC-SHA256): verification of incoming requests (server) and
// signing of outgoing ones (CLI client).
//
// The canonical request is built exactly as botocore's SigV4Auth builds it for non-S3 services, so
// requests from boto3 and the `aws` CLI verify:
//   - canonical URI: the wire path with dot segments and empty segments removed, then URI-encoded
//     again with '/' and unreserved characters kept (already-encoded paths are encoded twice); an
//     empty path is "/". S3 (scope service "s3", as botocore's S3SigV4Auth) signs the path exactly
//     as sent: no normalization, no second encoding;
//   - canonical query: '&'-separated params, each key and value percent-decoded then re-encoded
//     (unreserved A-Za-z0-9-_.~ kept, everything else %XX upper-case; '+' is not a space), sorted by
//     key then value;
//   - canonical headers: "lowercase-name:value\n" for each signed header in sorted order, the value
//     trimmed with inner whitespace runs collapsed to one space, repeated headers joined by ',';
//   - payload hash: the x-amz-content-sha256 header when present, else hex SHA-256 of the body.
//     S3 requires the header on header-signed requests and accepts the values of PayloadMode;
//     a presigned S3 URL signs "UNSIGNED-PAYLOAD".
// Every function here reports failures through Status; none throws.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace ty::api {

struct HttpRequestView {
  std::string method;                 // "POST"
  std::string path;                   // as sent on the wire (already percent-encoded), no query
  std::string query;                  // raw query string without '?', may be empty
  std::vector<std::pair<std::string, std::string>> headers;  // names as received, any case
  // Borrowed: the bytes belong to the caller and must outlive the view (an upload of hundreds of
  // MiB is verified where the listener read it, never copied).
  std::string_view body;
};

struct Credential {
  std::string access_key_id;
  std::string secret_access_key;
};

// Returns the secret for a key id, or nullopt if unknown. Must not throw.
using SecretLookup = std::function<std::optional<std::string>(std::string_view access_key_id)>;

inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view kStreamingSignedPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
inline constexpr std::string_view kStreamingSignedPayloadTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
inline constexpr std::string_view kStreamingUnsignedPayloadTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";

// What the signature says of the body (S3's x-amz-content-sha256 values). Anything but kSignedBody
// is S3 only; the streaming modes mean the body is aws-chunked (api/aws_chunked.h decodes it).
enum class PayloadMode {
  kSignedBody,                // the body's SHA-256 was signed and has been checked
  kUnsigned,                  // UNSIGNED-PAYLOAD (and every presigned S3 URL): the body is not covered
  kStreamingSigned,           // STREAMING-AWS4-HMAC-SHA256-PAYLOAD: each chunk signed, chained from the seed
  kStreamingSignedTrailer,    // ...-PAYLOAD-TRAILER: the same, then signed trailers
  kStreamingUnsignedTrailer,  // STREAMING-UNSIGNED-PAYLOAD-TRAILER: unsigned chunks, a checksum trailer
};

struct VerifiedCaller {
  std::string access_key_id;
  std::string service;
  std::string region;
  // What verifying an aws-chunked body needs: the derived key (binary, 32 bytes; as secret as the
  // secret itself: never logged or returned), the request time as signed ("20130524T000000Z"),
  // the scope ("20130524/us-east-1/s3/aws4_request"), the request's own signature (hex: the seed
  // of the chunk-signature chain) and what the signature says of the body.
  std::string signing_key;
  std::string amz_date;
  std::string scope;
  std::string seed_signature;
  PayloadMode payload_mode = PayloadMode::kSignedBody;
  bool presigned = false;
  // The X-Amz-Security-Token header, or the query parameter of a presigned URL; "" when absent.
  std::string security_token;
};

// Verifies a request signed with an `Authorization: AWS4-HMAC-SHA256 Credential=<key>/<date>/
// <region>/<service>/aws4_request, SignedHeaders=..., Signature=...` header, or (when there is no
// Authorization header) a presigned URL carrying X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date,
// X-Amz-Expires, X-Amz-SignedHeaders and X-Amz-Signature in the query.
//
// The scope's region must equal `region` and its service must be one of `allowed_services`. The
// request time comes from X-Amz-Date, else from the Date header (RFC 1123 or ISO-8601 basic); it
// must be within `max_skew_ms` (>= 0) of `now` (a presigned URL is valid from its X-Amz-Date, less
// the skew, until X-Amz-Date + X-Amz-Expires, which must be 1..604800). 'host' must be a signed
// header, and so must Content-Type, X-Amz-Target and every x-amz-* header the request carries.
// When the request carries x-amz-content-sha256 it must equal the body's hash: the body is always
// covered, except under S3's rules (scope service "s3"): there the header is required on a
// header-signed request (InvalidRequest), must be one of PayloadMode's values (InvalidArgument),
// and only a hex hash is checked against the body (XAmzContentSHA256Mismatch); those S3 errors'
// messages start with S3's code and a colon.
//
// Errors (AWS messages): kUnauthenticated for a missing or malformed signature or date, kUnknownKey
// when `lookup` does not know the key, kBadSignature for a wrong region/service/scope date, an
// unsigned host header, another header sent but not signed that must be (named in the message) or
// a signature mismatch, kExpired when outside the allowed time window.
StatusOr<VerifiedCaller> VerifySigV4(const HttpRequestView& req, const SecretLookup& lookup,
                                     std::string_view region,
                                     const std::vector<std::string>& allowed_services, EpochMs now,
                                     EpochMs max_skew_ms = 15 * 60 * 1000);

// What VerifySigV4 can check from a request's head, before its body is read (`head.body` is not
// looked at). For S3 (scope service "s3"), whose signature covers the body only through the signed
// x-amz-content-sha256 value, or not at all, it checks everything VerifySigV4 checks except that a
// hex x-amz-content-sha256 equals the body's hash: the signature itself is verified. For any
// other service, whose signature covers the body's hash, it checks the key (known to `lookup`), the
// scope (region, service, date) and the time, not the signature. VerifySigV4 must still be run on
// the whole request. Errors as VerifySigV4's.
StatusOr<VerifiedCaller> VerifySigV4Head(const HttpRequestView& head, const SecretLookup& lookup,
                                         std::string_view region, const std::vector<std::string>& allowed_services,
                                         EpochMs now, EpochMs max_skew_ms = 15 * 60 * 1000);

// Signs `req` in place for `service` in `region` at time `now`: replaces any X-Amz-Date and
// Authorization headers with fresh ones and signs every header present (lowercased, sorted), except
// those botocore never signs (user-agent, expect, transfer-encoding, connection, x-amzn-trace-id and
// other hop-by-hop headers). Precondition: the caller has set the Host header to the value the HTTP
// client will send; it is not derived here. No x-amz-content-sha256 header is added (non-S3).
void SignSigV4(HttpRequestView& req, const Credential& cred, std::string_view region,
               std::string_view service, EpochMs now);

// S3's Signature Version 2, which boto3 still uses by default for presigned S3 URLs
// (generate_presigned_url without signature_version="s3v4") and `aws s3 presign` may too: an
// `Authorization: AWS <key>:<signature>` header, or AWSAccessKeyId, Signature and Expires in the
// query. The signature is base64(HMAC-SHA1(secret, string to sign)) over the method, Content-MD5,
// Content-Type, the Date (or Expires), the x-amz-* headers and the resource (`/<virtual_bucket>` for
// virtual-host style, the path as sent, the sub-resources S3 signs). The body is never covered
// (payload_mode kUnsigned). A header-signed request must be within `max_skew_ms` of `now`; a
// presigned URL is valid until Expires, which may be at most 7 days (604800 s) after `now` (plus
// the skew), as SigV4's X-Amz-Expires. Errors as VerifySigV4's.
bool IsSigV2(const HttpRequestView& req);
StatusOr<VerifiedCaller> VerifySigV2(const HttpRequestView& req, const SecretLookup& lookup,
                                     std::string_view virtual_bucket, EpochMs now,
                                     EpochMs max_skew_ms = 15 * 60 * 1000);

}  // namespace ty::api
