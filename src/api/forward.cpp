#include "api/forward.h"

#include <curl/curl.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/strings.h"

namespace ty::api {

using nlohmann::json;

std::string EncodePeerCaller(const PeerCaller& c) {
  json tags = json::array();
  for (const auto& [k, v] : c.tags) tags.push_back({k, v});
  json j = {{"type", c.type},
            {"arn", c.arn},
            {"roleArn", c.role_arn},
            {"name", c.name},
            {"userId", c.user_id},
            {"accessKeyId", c.access_key_id},
            {"tags", tags},
            {"policyNames", c.policy_names},
            {"policyDocuments", c.policy_documents},
            {"sessionExpires", c.session_expires},
            {"entryRegion", c.entry_region},
            {"sourceIp", c.source_ip},
            {"secureTransport", c.secure_transport},
            // Two forwards of the same request in the same millisecond still differ (ReplayGuard).
            {"nonce", RandomHex(12)}};
  return Base64Encode(j.dump());
}

StatusOr<PeerCaller> DecodePeerCaller(std::string_view header, size_t max_bytes) {
  const Status bad(Code::kUnauthenticated, std::string(kPeerCallerHeader) + " is not a caller this server can read");
  auto text = Base64Decode(header, max_bytes);
  if (!text) return bad;
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad;
  PeerCaller c;
  auto str = [&](const char* key, std::string* out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  auto strings = [&](const char* key, std::vector<std::string>* out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_array()) return false;
    for (const auto& e : *it) {
      if (!e.is_string()) return false;
      out->push_back(e.get<std::string>());
    }
    return true;
  };
  if (!str("type", &c.type) || !str("arn", &c.arn) || !str("roleArn", &c.role_arn) || !str("name", &c.name) || !str("userId", &c.user_id) ||
      !str("accessKeyId", &c.access_key_id) || !str("entryRegion", &c.entry_region) ||
      !strings("policyNames", &c.policy_names) || !strings("policyDocuments", &c.policy_documents))
    return bad;
  if (c.type != "root" && c.type != "user" && c.type != "role-session") return bad;
  if (c.policy_names.size() != c.policy_documents.size()) return bad;
  auto tags = j.find("tags");
  if (tags == j.end() || !tags->is_array()) return bad;
  for (const auto& t : *tags) {
    if (!t.is_array() || t.size() != 2 || !t[0].is_string() || !t[1].is_string()) return bad;
    c.tags.emplace_back(t[0].get<std::string>(), t[1].get<std::string>());
  }
  str("sourceIp", &c.source_ip);  // optional: "" leaves the connection's address
  if (auto secure = j.find("secureTransport"); secure != j.end() && secure->is_boolean()) c.secure_transport = *secure;
  auto expires = j.find("sessionExpires");
  if (expires == j.end() || !expires->is_number_integer()) return bad;
  c.session_expires = expires->get<EpochMs>();
  return c;
}

bool PeerMustSign(std::string_view name) {
  static constexpr std::string_view kNames[] = {"host", "content-type", "content-md5", "content-encoding", "range",
                                                "if-match", "if-none-match", "if-modified-since", "if-unmodified-since"};
  for (std::string_view n : kNames)
    if (EqualsIgnoreCase(n, name)) return true;
  return name.size() >= 6 && EqualsIgnoreCase(name.substr(0, 6), "x-amz-");
}

std::string PeerStringToSign(std::string_view method, std::string_view path, std::string_view query,
                             const http::Fields& headers, const std::vector<std::string>& signed_names,
                             std::string_view content_sha256, std::string_view time_ms, std::string_view caller_header) {
  std::string s = "TRAINYARD-PEER-HMAC-SHA256-V2\n";
  s.append(method).append("\n").append(path).append("\n").append(query).append("\n");
  std::string names;
  for (const std::string& name : signed_names) {
    std::string value;
    bool first = true;
    for (const auto& [k, v] : headers)
      if (EqualsIgnoreCase(k, name)) {
        value.append(first ? "" : ",").append(Trim(v));
        first = false;
      }
    s.append(name).append(":").append(value).append("\n");
    names.append(names.empty() ? "" : ";").append(name);
  }
  s.append("\n").append(names).append("\n");
  s.append(content_sha256).append("\n").append(time_ms).append("\n").append(caller_header);
  return s;
}

void SignPeerRequest(std::string_view secret, std::string_view method, std::string_view path, std::string_view query,
                     std::string_view body, std::string_view host, const std::string& caller_header, EpochMs now,
                     http::Fields* headers) {
  std::erase_if(*headers, [](const auto& h) { return StartsWith(ToLower(h.first), "x-trainyard-peer-"); });
  if (std::none_of(headers->begin(), headers->end(), [](const auto& h) { return EqualsIgnoreCase(h.first, "host"); }))
    headers->emplace_back("Host", std::string(host));
  std::vector<std::string> names;
  for (const auto& [k, v] : *headers)
    if (PeerMustSign(k)) names.push_back(ToLower(k));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  const std::string time = std::to_string(now);
  const std::string hash = Sha256Hex(body);
  const std::string signature =
      PeerSignature(secret, PeerStringToSign(method, path, query, *headers, names, hash, time, caller_header));
  std::string joined;
  for (const std::string& n : names) joined.append(joined.empty() ? "" : ";").append(n);
  headers->emplace_back(std::string(kPeerCallerHeader), caller_header);
  headers->emplace_back(std::string(kPeerTimeHeader), time);
  headers->emplace_back(std::string(kPeerContentHashHeader), hash);
  headers->emplace_back(std::string(kPeerSignedHeadersHeader), joined);
  headers->emplace_back(std::string(kPeerSignatureHeader), signature);
}

std::string PeerSignature(std::string_view secret, std::string_view string_to_sign) {
  return ToHex(HmacSha256(secret, string_to_sign));
}

bool ReplayGuard::FirstUse(const std::string& signature, EpochMs now, EpochMs window_ms) {
  MutexLock lock(mu_);
  // A signature is kept for twice the window: a request is accepted up to `window` either side of
  // this clock, so one seen now could still be fresh that much later.
  // Arrival order is clock order unless the clock steps back; then old entries stay a while longer.
  while (!arrivals_.empty() && now - arrivals_.front().first > 2 * window_ms) {
    seen_.erase(arrivals_.front().second);
    arrivals_.pop_front();
  }
  if (!seen_.insert(signature).second) return false;
  arrivals_.emplace_back(now, signature);
  return true;
}

void ApplyPeerOrigin(const http::Request& req, std::string* source_ip, bool* secure_transport) {
  const std::string* header = req.Header(kPeerCallerHeader);
  if (!header) return;
  auto caller = DecodePeerCaller(*header);
  if (!caller.ok() || caller->source_ip.empty()) return;
  *source_ip = caller->source_ip;
  *secure_transport = caller->secure_transport;
}

bool IsPeerRequest(const http::Request& req) {
  for (const auto& [name, value] : req.headers)
    if (name.size() > 17 && EqualsIgnoreCase(std::string_view(name).substr(0, 17), "x-trainyard-peer-")) return true;
  return false;
}

StatusOr<PeerCaller> VerifyPeerHead(const http::Request& req, std::string_view secret, EpochMs now, EpochMs window_ms) {
  if (secret.empty())
    return Status(Code::kUnauthenticated,
                  "This server takes no forwarded requests: it has no [regions] peer_secret_file");
  const std::string* caller = req.Header(kPeerCallerHeader);
  const std::string* time = req.Header(kPeerTimeHeader);
  const std::string* signature = req.Header(kPeerSignatureHeader);
  if (!caller || !time || !signature)
    return Status(Code::kUnauthenticated, "A forwarded request needs X-Trainyard-Peer-Caller, X-Trainyard-Peer-Time and "
                                          "X-Trainyard-Peer-Signature");
  char* end = nullptr;
  const long long sent = std::strtoll(time->c_str(), &end, 10);
  if (time->empty() || !end || *end != '\0' || sent <= 0)
    return Status(Code::kUnauthenticated, "X-Trainyard-Peer-Time must be epoch milliseconds");
  const std::string* signed_list = req.Header(kPeerSignedHeadersHeader);
  const std::string* hash = req.Header(kPeerContentHashHeader);
  if (!signed_list || !hash)
    return Status(Code::kUnauthenticated,
                  "The forwarded request has no X-Trainyard-Peer-Signed-Headers or X-Trainyard-Peer-Content-Sha256: "
                  "the region that sent it runs an older trainyard, whose peer signature does not cover the "
                  "operation's headers; run the same version in every region (docs/regions.md)");
  if (hash->size() != 64 || hash->find_first_not_of("0123456789abcdef") != std::string::npos)
    return Status(Code::kUnauthenticated, "X-Trainyard-Peer-Content-Sha256 must be a lower-case hex SHA-256");
  std::vector<std::string> names;
  for (const std::string& n : Split(*signed_list, ';'))
    if (!n.empty()) names.push_back(ToLower(n));
  if (!std::is_sorted(names.begin(), names.end()) || std::adjacent_find(names.begin(), names.end()) != names.end())
    return Status(Code::kUnauthenticated, "X-Trainyard-Peer-Signed-Headers must name lower-case headers, sorted, each once");
  std::vector<std::string> unsigned_sent;
  for (const auto& [name, value] : req.headers) {
    const std::string lower = ToLower(name);
    if (PeerMustSign(lower) && !std::binary_search(names.begin(), names.end(), lower) &&
        std::find(unsigned_sent.begin(), unsigned_sent.end(), lower) == unsigned_sent.end())
      unsigned_sent.push_back(lower);
  }
  if (!unsigned_sent.empty()) {
    std::string list;
    for (const std::string& n : unsigned_sent) list.append(list.empty() ? "" : ", ").append(n);
    return Status(Code::kBadSignature, "The forwarded request carries headers its peer signature does not cover: " + list +
                                           " (Host, Content-Type, X-Amz-Target and every x-amz-* header must be signed)");
  }
  const std::string expected =
      PeerSignature(secret, PeerStringToSign(req.method, req.path, req.query, req.headers, names, *hash, *time, *caller));
  if (signature->size() != expected.size() ||
      CRYPTO_memcmp(signature->data(), expected.data(), expected.size()) != 0)
    return Status(Code::kBadSignature, "The forwarded request's X-Trainyard-Peer-Signature does not match (a different "
                                       "peer secret, or the request was changed on the way)");
  if (sent < now - window_ms || sent > now + window_ms)
    return Status(Code::kExpired, "The forwarded request was signed at " + std::to_string(sent) +
                                      " ms, outside the replay window of " + std::to_string(window_ms / 1000) +
                                      " s around this server's clock (" + std::to_string(now) + " ms)");
  return DecodePeerCaller(*caller);
}

StatusOr<PeerCaller> VerifyPeerRequest(const http::Request& req, std::string_view secret, EpochMs now,
                                       EpochMs window_ms, ReplayGuard& replays) {
  auto decoded = VerifyPeerHead(req, secret, now, window_ms);
  if (!decoded.ok()) return decoded.status();
  const std::string hash = Sha256Hex(req.body);
  if (const std::string* sent = req.Header(kPeerContentHashHeader); !sent || *sent != hash)
    return Status(Code::kBadSignature, "The forwarded request's body is not the one its peer signature covers "
                                       "(X-Trainyard-Peer-Content-Sha256)");
  if (!replays.FirstUse(*req.Header(kPeerSignatureHeader), now, window_ms))
    return Status(Code::kBadSignature, "The forwarded request was already received once (a replay)");
  return decoded;
}

std::vector<std::string> CredentialScope(const http::Request& req) {
  std::string scope;
  if (const std::string* auth = req.Header("Authorization")) {
    if (!StartsWith(*auth, "AWS4-HMAC-SHA256")) return {};
    size_t at = auth->find("Credential=");
    if (at == std::string::npos) return {};
    scope = auth->substr(at + 11);
    scope = scope.substr(0, scope.find_first_of(", "));
  } else {
    auto credential = req.Params("X-Amz-Credential");
    if (credential.empty()) return {};
    scope = credential.front();
  }
  std::vector<std::string> parts = Split(scope, '/');  // key/date/region/service/aws4_request
  if (parts.size() != 5) return {};
  return parts;
}

std::string ScopeRegion(const http::Request& req) {
  std::vector<std::string> parts = CredentialScope(req);
  return parts.empty() ? "" : parts[2];
}

std::string UrlAuthority(std::string_view url) {
  if (size_t scheme = url.find("://"); scheme != std::string_view::npos) url.remove_prefix(scheme + 3);
  return std::string(url.substr(0, url.find_first_of("/?#")));
}

namespace {

// Headers that belong to one connection, never forwarded either way.
bool HopByHop(std::string_view name) {
  static constexpr std::string_view kNames[] = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                                                "te", "trailer", "transfer-encoding", "upgrade", "content-length",
                                                "expect", "date"};
  for (std::string_view n : kNames)
    if (EqualsIgnoreCase(n, name)) return true;
  return false;
}

struct Exchange {
  http::Response res;
  int64_t limit = 0;
  bool too_large = false;
  bool in_headers = true;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* x = static_cast<Exchange*>(user);
  if (static_cast<int64_t>(x->res.body.size() + size * n) > x->limit) {
    x->too_large = true;
    return 0;  // aborts the transfer
  }
  x->res.body.append(data, size * n);
  return size * n;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* x = static_cast<Exchange*>(user);
  std::string_view line(data, size * n);
  if (StartsWith(line, "HTTP/")) {  // a new status line (after a 100 Continue): start over
    x->res.headers.clear();
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return size * n;
  std::string name(Trim(line.substr(0, colon)));
  std::string value(Trim(line.substr(colon + 1)));
  if (!HopByHop(name)) x->res.headers.emplace_back(std::move(name), std::move(value));
  else if (EqualsIgnoreCase(name, "content-length")) x->res.content_length = std::strtoll(value.c_str(), nullptr, 10);
  return size * n;
}

}  // namespace

StatusOr<http::Response> SendToPeer(const PeerTarget& target, const std::string& method, const std::string& path,
                                    const std::string& query, const http::Fields& headers, const std::string& body,
                                    bool* not_delivered) {
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return Status(Code::kInternal, "libcurl could not start a transfer");
  const std::string url = target.base_url + path + (query.empty() ? "" : "?" + query);
  struct curl_slist* list = nullptr;
  for (const auto& [name, value] : headers)
    if (!HopByHop(name)) list = curl_slist_append(list, (name + ": " + value).c_str());
  list = curl_slist_append(list, "Expect:");  // no 100-continue round trip
  // libcurl adds a form Content-Type to a body sent without one: the peer must see the request's own.
  if (std::none_of(headers.begin(), headers.end(), [](const auto& h) { return EqualsIgnoreCase(h.first, "content-type"); }))
    list = curl_slist_append(list, "Content-Type:");
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> owned(list, curl_slist_free_all);
  Exchange x;
  x.limit = target.max_response_bytes;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  if (!body.empty() || method == "POST" || method == "PUT") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, static_cast<long>(target.connect_timeout_seconds));
  curl_easy_setopt(c, CURLOPT_TIMEOUT, static_cast<long>(target.timeout_seconds));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect is the client's to follow
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
  // The body arrives as the peer sent it: the client decodes any Content-Encoding itself.
  curl_easy_setopt(c, CURLOPT_HTTP_CONTENT_DECODING, 0L);
  char detail[CURL_ERROR_SIZE] = {0};  // "Failed to connect to ... port 8101 after 0 ms: Connection refused"
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
  const CURLcode rc = curl_easy_perform(c);
  if (not_delivered)
    *not_delivered = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY;
  if (x.too_large)
    return Unavailable("Region " + target.region + " answered with more than " +
                       std::to_string(target.max_response_bytes) + " bytes, more than a forwarded answer may hold");
  if (rc != CURLE_OK)
    return Unavailable("Region " + target.region + " is unavailable: " +
                       (detail[0] ? std::string(detail) : std::string(curl_easy_strerror(rc))) + " (" + target.base_url +
                       ")");
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  x.res.status = static_cast<int>(status);
  if (method != "HEAD") x.res.content_length = -1;  // the body read is the body sent on
  return std::move(x.res);
}

}  // namespace ty::api
