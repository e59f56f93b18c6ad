// Forwarding between regions (docs/regions.md). A trainyard server is one region; [regions] peers
// names the others. A request signed for a peer's region is authenticated where it enters (SigV4,
// the caller resolved as for a local request), then sent on to the peer with five headers:
//
//   X-Trainyard-Peer-Caller          base64 of the caller as JSON (PeerCaller: type, ARN, key id,
//                                    tags, policy documents, a session's expiry, the entry region)
//   X-Trainyard-Peer-Time            the forwarding server's wall clock, epoch milliseconds
//   X-Trainyard-Peer-Content-Sha256  hex SHA-256 of the body as sent
//   X-Trainyard-Peer-Signed-Headers  the headers the signature covers, lower-case, ';'-separated
//   X-Trainyard-Peer-Signature       hex HMAC-SHA256(peer secret, PeerStringToSign(...))
//
// The signature covers the method, path, query, the body's hash, the time, the caller and every
// header that selects the operation or the resource, or says what the body is (PeerMustSign:
// Host, Content-Type, X-Amz-Target, every x-amz-* header, ...), so a proxy on a plain-HTTP link
// between regions cannot turn one operation into another. The peer accepts such a request only
// with a valid signature, every such header it carries signed, a time within the replay window
// and a signature it has not seen before (ReplayGuard); it then skips SigV4 and authorizes the
// caller as sent against its own resources. The head alone proves the request (VerifyPeerHead),
// so the peer knows whose body it reads before it reads it. A request signed the older way, without
// X-Trainyard-Peer-Signed-Headers, is refused: regions are upgraded together (docs/regions.md). Identity is resolved where a request enters,
// authorization happens where the resource lives. A forwarded request is never forwarded again.
//
// Nothing here reads the controller; the only I/O is SendToPeer's HTTP exchange.
#pragma once

#include <deque>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "http/server.h"

namespace ty::api {

inline constexpr std::string_view kPeerCallerHeader = "X-Trainyard-Peer-Caller";
inline constexpr std::string_view kPeerTimeHeader = "X-Trainyard-Peer-Time";
inline constexpr std::string_view kPeerSignatureHeader = "X-Trainyard-Peer-Signature";
inline constexpr std::string_view kPeerContentHashHeader = "X-Trainyard-Peer-Content-Sha256";
inline constexpr std::string_view kPeerSignedHeadersHeader = "X-Trainyard-Peer-Signed-Headers";

// The caller of a forwarded request, as the entry region resolved it.
struct PeerCaller {
  std::string type;           // "root", "user" or "role-session"
  std::string arn;            // the principal: a user's ARN, a session's assumed-role ARN; "" for root
  std::string role_arn;       // role sessions: the role's ARN (aws:PrincipalArn)
  std::string name;           // aws:username (users)
  std::string user_id;        // aws:userid (a user's AIDA..., a role's AROA...)
  std::string access_key_id;  // the key that signed the request where it entered
  std::vector<std::pair<std::string, std::string>> tags;  // the user's tags
  std::vector<std::string> policy_names;
  std::vector<std::string> policy_documents;  // as accepted by the entry region, same order
  EpochMs session_expires = 0;  // role sessions: refused at the peer once past
  std::string entry_region;     // where the request was signed and verified
  // Where the request came from at the entry region: what aws:SourceIp and aws:SecureTransport
  // mean at the peer (the connection there is the entry server's own).
  std::string source_ip;
  bool secure_transport = false;
};

// The header value (base64 of compact JSON) and back. DecodePeerCaller refuses (kUnauthenticated)
// anything that is not what EncodePeerCaller writes, bounded by `max_bytes` of header text.
std::string EncodePeerCaller(const PeerCaller& caller);
StatusOr<PeerCaller> DecodePeerCaller(std::string_view header, size_t max_bytes = 64 * 1024);

// Whether the peer signature must cover header `name` (any case) when a forwarded request carries
// it: Host, Content-Type, Content-MD5, Content-Encoding, Range, the If-* conditions, X-Amz-Target and
// every x-amz-* header.
bool PeerMustSign(std::string_view name);

// "TRAINYARD-PEER-HMAC-SHA256-V2\n" method "\n" path "\n" query "\n", then for each signed header
// (sorted) "name:value\n" (name lower-case, value trimmed, repeats joined by ','), then "\n" the
// signed names joined by ';' "\n" content hash "\n" time "\n" caller header. Path and query
// exactly as they travel on the wire.
std::string PeerStringToSign(std::string_view method, std::string_view path, std::string_view query,
                             const http::Fields& headers, const std::vector<std::string>& signed_names,
                             std::string_view content_sha256, std::string_view time_ms, std::string_view caller_header);
std::string PeerSignature(std::string_view secret, std::string_view string_to_sign);

// Adds the peer headers to `headers`, the request's headers as they will be sent, signing every
// header among them that PeerMustSign names. A request without a Host header gets `host` (the
// authority it is sent to), so the Host the peer sees is signed too.
void SignPeerRequest(std::string_view secret, std::string_view method, std::string_view path, std::string_view query,
                     std::string_view body, std::string_view host, const std::string& caller_header, EpochMs now,
                     http::Fields* headers);

// Signatures seen within the replay window: a second request with one is a replay. Bounded by the
// window: entries older than twice it are dropped, oldest first, as new ones arrive (amortized
// O(log n) a request). Thread-safe.
class ReplayGuard {
 public:
  // False when `signature` was already seen (and not yet forgotten); records it otherwise.
  bool FirstUse(const std::string& signature, EpochMs now, EpochMs window_ms);

 private:
  Mutex mu_;
  std::set<std::string> seen_ GUARDED_BY(mu_);
  std::deque<std::pair<EpochMs, std::string>> arrivals_ GUARDED_BY(mu_);  // the same, in arrival order
};

// Checks a request that carries the peer headers: kUnauthenticated when the secret is not set
// here or a header is missing or malformed (an older peer's request, without the signed headers,
// among them), kBadSignature for a header that must be signed and is not (named), for a wrong
// signature (compared in constant time) or a body that is not the one signed, kExpired outside the
// replay window, kBadSignature for a replay. The message says which, never the expected signature.
StatusOr<PeerCaller> VerifyPeerRequest(const http::Request& req, std::string_view secret, EpochMs now,
                                       EpochMs window_ms, ReplayGuard& replays);
// The same from the head alone, before the body is read: everything but the body's hash and the
// replay (which only the whole request is recorded against).
StatusOr<PeerCaller> VerifyPeerHead(const http::Request& head, std::string_view secret, EpochMs now, EpochMs window_ms);

// For a forwarded request, the client's address and transport as the entry region saw them (from
// the caller header, which authentication has verified before any decision uses them); otherwise
// the connection's own, left as given.
void ApplyPeerOrigin(const http::Request& req, std::string* source_ip, bool* secure_transport);

// Whether the request carries any of the peer headers (then it is a forwarded request, and is
// either verified as one or refused: never treated as a client's).
bool IsPeerRequest(const http::Request& req);

// The region named by the request's SigV4 credential scope (header or presigned query); "" when
// the request is not signed with SigV4 (unsigned, S3's Signature Version 2).
// The SigV4 credential scope of a request (Authorization header or presigned X-Amz-Credential):
// key id, date, region, service, "aws4_request"; empty when it has none (unsigned, SigV2).
std::vector<std::string> CredentialScope(const http::Request& req);
std::string ScopeRegion(const http::Request& req);

// The authority ("host:port") of a URL such as a peer's base URL ("http://host:port/...").
std::string UrlAuthority(std::string_view url);

struct PeerTarget {
  std::string region;
  std::string base_url;  // http://host:port, no trailing slash
  int connect_timeout_seconds = 5;
  int timeout_seconds = 120;
  int64_t max_response_bytes = 512LL * 1024 * 1024;
};

// Sends the request to the peer: method, path, query and body as given, `headers` as given (the
// hop-by-hop ones and Content-Length left out: the transfer sets them) and returns the peer's
// answer whole: status, headers (less hop-by-hop ones) and body. kUnavailable, naming the region
// and the cause (connection refused, timed out, ...), when no answer came.
// `not_delivered`, when given, is set when no connection could be made (refused, no such host):
// the peer cannot have seen the request, so sending it again is safe.
StatusOr<http::Response> SendToPeer(const PeerTarget& target, const std::string& method, const std::string& path,
                                    const std::string& query, const http::Fields& headers, const std::string& body,
                                    bool* not_delivered = nullptr);

}  // namespace ty::api
