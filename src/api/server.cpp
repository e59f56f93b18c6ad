#include "api/server.h"
#include "api/operations.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <malloc.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>

#include "api/audit.h"
#include "api/authorize.h"
#include "api/aws_chunked.h"
#include "api/console.h"
#include "api/errors.h"
#include "api/eventbridge_api.h"
#include "api/events.h"
#include "api/forward.h"
#include "api/handlers.h"
#include "api/http_binding.h"
#include "api/metrics.h"
#include "api/s3_api.h"
#include "api/service_model.h"
#include "api/sigv4.h"
#include "api/cloudwatch_api.h"
#include "api/sts_api.h"
#include "api/unserved.h"
#include "control/controller.h"
#include "control/placement.h"
#include "core/strings.h"
#include "http/guards.h"
#include "http/server.h"
#include "iam/policy.h"
#include "objstore/bucket_store.h"
#include "objstore/bucket_sweeper.h"
#include "obs/webhooks.h"
#include "store/event_log.h"

namespace ty::api {

using nlohmann::json;

http::Limits ListenerLimits(const Config& c) {
  http::Limits l;
  l.max_body_bytes = c.max_request_bytes;
  l.max_header_bytes = c.max_header_bytes;
  l.max_header_fields = c.max_header_fields;
  l.max_buffered_body_bytes = c.max_buffered_request_bytes;
  // The budget's shares (docs/security.md, "Requests"): a caller a signature over the head proves
  // may hold half of it, or one upload of the largest allowed size if that is more; heads that
  // prove nobody may hold half together, and an eighth (at least one request's limit) from one
  // address, so neither kind can take all of it, and unproven heads never the proven callers' half.
  const int64_t budget = c.max_buffered_request_bytes;
  l.max_buffered_body_bytes_per_caller = std::min(budget, std::max({budget / 2, c.s3.max_upload_bytes, c.max_request_bytes}));
  l.max_buffered_unproven_body_bytes = std::max(budget / 2, c.max_request_bytes);
  l.max_buffered_body_bytes_per_address = std::min(l.max_buffered_unproven_body_bytes, std::max(budget / 8, c.max_request_bytes));
  l.header_timeout_ms = c.header_timeout_seconds * 1000;
  l.body_timeout_ms = c.body_timeout_seconds * 1000;
  l.idle_timeout_ms = c.idle_timeout_seconds * 1000;
  l.max_connections = c.max_connections;
  l.max_connections_per_address = std::min(c.max_connections_per_address, c.max_connections);
  l.io_threads = c.io_threads;
  // Event streams and long polls hold a worker while they wait; they are capped at
  // events.max_streams, so http_threads workers are always left for everything else.
  l.workers = c.http_threads + std::max(0, c.events_max_streams);
  return l;
}

namespace {

int64_t MonotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Replies at least this large are followed by malloc_trim (see Route).
constexpr size_t kTrimAfterReplyBytes = 256 * 1024;

// Members whose string value is itself JSON that a handler parses (a Batch job's payload, an
// events filter's pattern): they are held to the same nesting limit as the body.
constexpr const char* kEmbeddedJsonMembers[] = {"serviceRequestPayload", "EventPattern"};

}  // namespace

std::string OwnOperationPath(const std::string& operation) {
  const Operation* row = TrainyardOperations().Find(operation);
  return row ? std::string(row->path) : "";
}

struct ApiServer::Impl {
  control::Controller& controller;
  RootCredential root;
  Authorizer authz{controller};
  http::RateLimiter throttle;
  http::RateLimiter signin_throttle;  // console sign-in attempts, per client address ([console] signin_rate)
  std::atomic<int64_t> throttled{0};  // requests refused by `throttle`, since start
  ReplayGuard replays;                 // forwarded requests already taken (api/forward.h)
  // What an EventBridge rule's owner may read (api/authorize.h), for the webhook dispatcher.
  struct RuleOwnerAccess : obs::EventAccess {
    explicit RuleOwnerAccess(const Authorizer& a) : authz(a) {}
    bool MayRead(const std::string& owner, const obs::EventReadCheck& check) const override {
      return authz.MayReadEvent(owner, check);
    }
    const Authorizer& authz;
  };
  RuleOwnerAccess rule_owner_access{authz};
  std::unique_ptr<obs::WebhookDispatcher> webhooks;
  std::vector<int> listener_ports;  // this server's, for the outbound rules (obs/outbound.h)
  std::unique_ptr<S3Endpoint> s3;      // the embedded buckets' S3 API (api/s3_api.h)
  std::unique_ptr<objstore::BucketSweeper> sweeper;  // their housekeeping thread; stopped before s3 goes
  ConsoleAssets console_assets;        // the web console's files (api/console.h), read at Bind
  ConsoleSessions console_sessions;    // who is signed in to it
  std::unique_ptr<http::Server> own_http;  // after everything its handlers use: destroyed first
  http::Server* http = nullptr;            // own_http, or the caller's listener

  Impl(control::Controller& c, RootCredential r)
      : controller(c),
        root(std::move(r)),
        throttle(c.config().throttle_rate, c.config().throttle_burst),
        signin_throttle(c.config().console.signin_rate, c.config().console.signin_burst),
        s3(std::make_unique<S3Endpoint>(c, authz,
                                        objstore::NewBucketStore(c.config().data_dir + "/buckets",
                                                                 {c.config().data_dir_reserve_mib << 20,
                                                                  c.config().s3.max_incomplete_upload_bytes_per_user}),
                                        [this](const http::Request& req, AuditRecord* who, VerifiedCaller* verified) {
                                          return Authenticate(req, "s3", who, verified);
                                        })),
        console_sessions(int64_t{c.config().console.session_hours} * 3600 * 1000,
                         int64_t{c.config().console.idle_minutes} * 60 * 1000,
                         static_cast<size_t>(c.config().console.max_sessions)) {}

  static const char* ContentType(Protocol protocol) {
    return protocol != Protocol::kBatchRestJson ? "application/x-amz-json-1.1" : "application/json";
  }

  // `request_id`: the call's (its audit record carries the same); a new one when the reply is not a call's.
  static http::Response Reply(Protocol protocol, const Status& st, const std::string& request_id = NewRequestId()) {
    WireError e = ToWireError(protocol, st);
    http::Response res;
    res.status = e.http_status;
    res.headers = {{"x-amzn-ErrorType", e.type}, {"x-amzn-RequestId", request_id}, {"Content-Type", ContentType(protocol)}};
    res.body = ErrorBody(protocol, e);
    return res;
  }

  http::Response Reply(Protocol protocol, const json& body, const std::string& request_id) {
    http::Response res;
    res.headers = {{"x-amzn-RequestId", request_id}, {"Content-Type", ContentType(protocol)}};
    res.body = body.dump();
    return res;
  }

  static std::string NewRequestId() { return NewUuid(); }

  // The protocol whose error shape a refusal takes: Batch's rest-json lives under /v1/, everything
  // else (SageMaker, Logs, trainyard's own endpoints) speaks JSON 1.1.
  static Protocol ProtocolOf(const http::Request& req) {
    return req.path.rfind("/v1/", 0) == 0 && !req.Header("X-Amz-Target") ? Protocol::kBatchRestJson
                                                                         : Protocol::kSageMakerJson;
  }

  http::Response Route(const http::Request& req);
  // After an EventBridge call that changed rules or targets (Operation::changes_deliveries): the
  // deliveries follow (before the reply, so what happens after it is delivered).
  void SyncDeliveries() {
    if (!webhooks) return;
    if (Status st = webhooks->Sync(EventBridgeDeliveries(controller)); !st.ok())
      spdlog::error("EventBridge deliveries not updated: {}", st.message());
  }
  std::string NetworkMetrics() const;
  // The outbound rules for API destinations: the operator's setting, this server's listener ports
  // and this host's interface addresses (read now).
  obs::OutboundRules OutboundRulesNow() const {
    obs::OutboundRules rules;
    rules.allow_local = controller.config().events_allow_local_endpoints;
    rules.own_ports = listener_ports;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) == 0) {
      for (ifaddrs* a = list; a; a = a->ifa_next) {
        if (!a->ifa_addr || (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6)) continue;
        char text[INET6_ADDRSTRLEN] = {};
        const void* raw = a->ifa_addr->sa_family == AF_INET
                              ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr)
                              : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr);
        if (inet_ntop(a->ifa_addr->sa_family, raw, text, sizeof text)) rules.own_addresses.push_back(text);
      }
      freeifaddrs(list);
    }
    return rules;
  }
  // `authenticated`: the caller when a console session already named it (Console).
  http::Response Stream(const http::Request& req, const Principal* authenticated = nullptr);
  // The web console (api/console.h, docs/console.md): its pages, sign-in and the calls it makes.
  http::Response Console(const http::Request& req);
  http::Response ConsoleSignIn(const http::Request& req);
  http::Response ConsoleCall(const http::Request& req, const Principal& caller);
  StatusOr<std::pair<ConsoleSession, Principal>> ConsoleCaller(const http::Request& req);
  http::Response Refuse(int status, const std::string& message, const http::Request* head);
  http::Response RefuseUnread(const http::Request& req);
  http::BodyPlan PlanBody(const http::Request& head);
  Status CheckScrape(const http::Request& req);

  // GET /trainyard/v1/credentials: a role job's session, in the container credentials provider's
  // shape, to the attempt whose bearer token is the Authorization header (docs/security.md,
  // "Roles for jobs"). No signature: the token is the credential.
  http::Response JobCredentials(const http::Request& req) {
    const std::string* auth = req.Header("Authorization");
    std::string token = auth ? *auth : "";
    if (StartsWith(token, "Bearer ")) token = token.substr(7);  // the SDKs send the bare token
    const std::string job = controller.role_sessions().JobOfBearer(token);
    auto session = job.empty() ? std::nullopt
                               : controller.role_sessions().Current(job, controller.config().account_id, controller.Now());
    http::Response res;
    res.headers = {{"Content-Type", "application/json"}};
    if (!session) {
      res.status = 403;
      res.body = json{{"Code", "AccessDenied"},
                      {"Message", "No running job holds this token (the Authorization header must be the job's "
                                  "AWS_CONTAINER_AUTHORIZATION_TOKEN)"}}.dump();
      return res;
    }
    res.body = json{{"AccessKeyId", session->access_key_id}, {"SecretAccessKey", session->secret},
                    {"Token", session->token}, {"Expiration", FormatIso8601(session->expires)},
                    {"RoleArn", session->role_arn}}.dump();
    return res;
  }

  // The answer to a call refused before its handler ran: its audit record first (api/audit.h).
  http::Response Refused(AuditedCall& call, Protocol protocol, const Status& st) {
    call.Finish(st);
    return Reply(protocol, st, call.request_id());
  }

  // Verifies the signature (the root key or a user's, api/authorize.h), then takes a token from
  // the caller's bucket. Names the caller in `who`; `verified` (when given) gets what the signature
  // says of the body (the S3 endpoint decodes aws-chunked bodies with it).
  // `region`: the region the signature must be scoped to ("" : this server's; a peer's when the
  // request is authenticated here to be forwarded there). A request forwarded by a peer region
  // carries its caller instead of a signature (PeerPrincipal).
  // A request whose body was withheld (its head failed authentication as it arrived: PlanBody) is
  // refused here whatever it says now: its body was never read.
  StatusOr<Principal> Authenticate(const http::Request& req, const std::string& service, AuditRecord* who,
                                   VerifiedCaller* verified = nullptr, const std::string& region = "") {
    auto caller = IsPeerRequest(req) ? PeerPrincipal(req, service, who, verified)
                                     : AuthenticateSigned(req, service, who, verified, region);
    if (caller.ok() && req.body_withheld)
      return Status(Code::kBadSignature, "The request did not authenticate when its head arrived, so its body was not "
                                         "read; send it again");
    return caller;
  }

  // Whose secret a key id names: root's, a user's, or a running job's role session (kept by the
  // controller in memory, not in the directory; `session` gets it).
  SecretLookup Secrets(const control::PrincipalDirectory& users, std::optional<control::RoleSession>* session) const {
    return [this, &users, session](std::string_view key) -> std::optional<std::string> {
      if (key == root.access_key_id) return root.secret_access_key;
      if (auto it = users.keys.find(key); it != users.keys.end()) return it->second.secret;
      if (StartsWith(key, "ASIA") && (*session = controller.role_sessions().Find(std::string(key)))) return (*session)->secret;
      return std::nullopt;
    };
  }

  StatusOr<Principal> AuthenticateSigned(const http::Request& req, const std::string& service, AuditRecord* who,
                                         VerifiedCaller* verified, const std::string& region) {
    HttpRequestView view;
    view.method = req.method;
    view.path = req.path;
    view.query = req.query;
    view.headers = req.headers;
    view.body = req.body;  // borrowed: `req` outlives the verification
    // One directory for the whole request: a key deleted meanwhile is honoured to its end.
    std::shared_ptr<const control::PrincipalDirectory> users = controller.directory();
    std::optional<control::RoleSession> session;
    SecretLookup lookup = Secrets(*users, &session);
    const EpochMs now = SystemClock::instance().now_ms();
    const std::string& scoped = region.empty() ? controller.config().region : region;
    // S3 also takes Signature Version 2 (boto3's default for presigned S3 URLs). A withheld body
    // has no bytes to check the signature's hash against: its head is checked as it was on arrival.
    auto caller = service == "s3" && IsSigV2(view) ? VerifySigV2(view, lookup, VirtualHostBucket(req, controller.config().s3), now)
                  : req.body_withheld              ? VerifySigV4Head(view, lookup, scoped, {service}, now)
                                                   : VerifySigV4(view, lookup, scoped, {service}, now);
    if (!caller.ok()) return caller.status();
    if (verified) *verified = *caller;
    Principal principal = Principal::Root(controller.config().account_id, caller->access_key_id);
    if (session) {
      // The token travels beside the signature (a header, or a presigned URL's query) and must be
      // the session's own (IAM's messages).
      const std::string& token = caller->security_token;
      if (token.size() != session->token.size() || CRYPTO_memcmp(token.data(), session->token.data(), token.size()) != 0)
        return Status(Code::kUnknownKey, "The security token included in the request is invalid.");
      if (session->expires <= controller.Now()) return Status(Code::kExpiredToken, "The security token included in the request is expired");
      principal.type = Principal::Type::kRoleSession;
      principal.arn = session->principal_arn;
      if (auto role = users->roles.find(session->role_name); role != users->roles.end()) {
        principal.entry = role->second->as_caller;
      } else {  // the role was deleted while the job ran: its policies are gone, it may do nothing
        auto none = std::make_shared<control::PrincipalEntry>();
        none->user.arn = session->role_arn;
        principal.entry = std::move(none);
      }
    } else if (caller->access_key_id != root.access_key_id) {
      principal = *KeyPrincipal(*users, caller->access_key_id);
    }
    who->access_key_id = caller->access_key_id;
    who->principal = principal.is_root() ? "root" : principal.arn;
    if (!throttle.Admit(caller->access_key_id, MonotonicMs())) {
      throttled.fetch_add(1);
      return Status(Code::kThrottled, "Rate exceeded (server.throttle_rate = " + FormatRate(controller.config().throttle_rate) +
                                          " requests per second per access key)");
    }
    return principal;
  }

  // Whose key `key` is: root's or a user's; nullopt for any other (a role session's keys are
  // looked up apart, beside their token).
  std::optional<Principal> KeyPrincipal(const control::PrincipalDirectory& users, const std::string& key) const {
    Principal principal = Principal::Root(controller.config().account_id, key);
    if (key == root.access_key_id) return principal;
    auto it = users.keys.find(key);
    if (it == users.keys.end()) return std::nullopt;
    principal.type = Principal::Type::kUser;
    principal.arn = it->second.principal->user.arn;
    principal.name = it->second.principal->user.name;
    principal.entry = it->second.principal;
    return principal;
  }

  // The caller of a request a peer region forwarded (api/forward.h): its signature, time and
  // freshness checked, then the caller as the entry region resolved it. Root there is root here only
  // when it signed with this server's own root key; a user or a role session is authorized here
  // with the policies it carries.
  StatusOr<Principal> PeerPrincipal(const http::Request& req, const std::string& service, AuditRecord* who,
                                    VerifiedCaller* verified) {
    const Config& config = controller.config();
    const EpochMs now = SystemClock::instance().now_ms();
    auto sent = VerifyPeerRequest(req, config.regions.peer_secret, now,
                                  int64_t{config.regions.replay_window_seconds} * 1000, replays);
    if (!sent.ok()) {
      spdlog::warn("forwarded request {} {} from {} refused: {}", req.method, req.path, req.peer, sent.status().message());
      return sent.status();
    }
    if (std::string scoped = ScopeRegion(req); !scoped.empty() && scoped != config.region)
      return Status(Code::kBadSignature, "The forwarded request is signed for region '" + scoped + "', not this one ('" +
                                             config.region + "'); it is never forwarded again");
    who->access_key_id = sent->access_key_id;
    if (verified) {
      verified->access_key_id = sent->access_key_id;
      verified->service = service;
      verified->region = config.region;
      // The entry region checked the body against the signature (and decoded an aws-chunked one);
      // the peer signature covers the body as it arrived here.
      const std::string* sha = req.Header("x-amz-content-sha256");
      verified->payload_mode = sha && *sha == kUnsignedPayload ? PayloadMode::kUnsigned : PayloadMode::kSignedBody;
    }
    if (sent->type == "root") {
      if (sent->access_key_id != root.access_key_id)
        return Status(Code::kAccessDenied, "The root credential of region " + sent->entry_region +
                                               " is not this region's (" + config.region + ") root: only the same "
                                               "root key is root in every region");
      who->principal = "root";
      return Principal::Root(config.account_id, sent->access_key_id);
    }
    if (sent->type == "role-session" && sent->session_expires <= controller.Now())
      return Status(Code::kExpiredToken, "The security token included in the request is expired");
    auto entry = std::make_shared<control::PrincipalEntry>();
    entry->user.arn = sent->type == "user" ? sent->arn : sent->role_arn;
    entry->user.name = sent->name;
    entry->user.user_id = sent->user_id;
    entry->user.tags = Tags(sent->tags.begin(), sent->tags.end());
    for (size_t i = 0; i < sent->policy_documents.size(); ++i) {
      auto policy = iam::ParsePolicy(sent->policy_documents[i], sent->policy_names[i]);
      if (!policy.ok())
        return Status(Code::kAccessDenied, "The caller's policy " + sent->policy_names[i] +
                                               " from region " + sent->entry_region + " does not parse here: " +
                                               policy.status().message());
      entry->owned.push_back(std::make_shared<const iam::Policy>(std::move(*policy)));
      entry->policies.push_back(entry->owned.back().get());
      entry->documents.push_back(sent->policy_documents[i]);
    }
    Principal principal;
    principal.access_key_id = sent->access_key_id;
    principal.arn = sent->arn;
    if (sent->type == "user") {
      principal.type = Principal::Type::kUser;
      principal.name = sent->name;
    } else {
      principal.type = Principal::Type::kRoleSession;
    }
    principal.entry = std::move(entry);
    who->principal = principal.arn;
    return principal;
  }

  // The caller as it crosses to a peer region (api/forward.h).
  PeerCaller ToPeerCaller(const Principal& p, const http::Request& req) const {
    PeerCaller c;
    const CallContext origin = ContextOf(req);  // a forwarded request is never forwarded again: the connection's
    c.source_ip = origin.source_ip;
    c.secure_transport = origin.secure_transport;
    c.type = p.is_root() ? "root" : p.type == Principal::Type::kUser ? "user" : "role-session";
    c.access_key_id = p.access_key_id;
    c.entry_region = controller.config().region;
    if (p.is_root()) return c;
    c.arn = p.arn;
    if (p.type == Principal::Type::kUser) c.name = p.name;
    if (p.entry) {
      if (p.type == Principal::Type::kRoleSession) {
        c.role_arn = p.entry->user.arn;
        c.name = p.entry->user.name;
      }
      c.user_id = p.entry->user.user_id;
      c.tags.assign(p.entry->user.tags.begin(), p.entry->user.tags.end());
      for (size_t i = 0; i < p.entry->policies.size() && i < p.entry->documents.size(); ++i) {
        c.policy_names.push_back(p.entry->policies[i]->name);
        c.policy_documents.push_back(p.entry->documents[i]);
      }
    }
    if (p.type == Principal::Type::kRoleSession)
      if (auto session = controller.role_sessions().Find(p.access_key_id)) c.session_expires = session->expires;
    return c;
  }

  http::Response Forward(const http::Request& req, const std::string& region, const std::string& url);
  // Sends a request on to a peer region for `caller` (api/forward.h): `headers` and `body` as they
  // go (the peer headers are added here).
  // kUnavailable when the peer gives no answer.
  StatusOr<http::Response> Relay(const http::Request& req, const std::string& region, const std::string& url,
                                 const Principal& caller, http::Fields headers, const std::string& body,
                                 const std::string& who);
  // Placement across regions (docs/regions.md, "Placement"): a request of a placeable Batch
  // operation (Operation::placeable: SubmitServiceJob) tagged trainyard:candidate-regions goes to
  // the best of them; nullopt when it names none.
  std::optional<http::Response> Place(const http::Request& req, const std::string& operation);
  control::PeerSummary LocalSummary(const std::string& queue, const std::string& instance_type);
  control::PeerSummary AskPeer(const http::Request& req, const std::string& region, const std::string& url,
                               const Principal& caller, const std::string& queue, const std::string& instance_type);
  http::Response PeerSummaryReply(const http::Request& req);

  // aws:SourceIp and aws:SecureTransport: the connection's, or for a forwarded request the
  // client's as the entry region saw them.
  CallContext ContextOf(const http::Request& req) const {
    CallContext c{req.peer, req.secure_transport, controller.Now()};
    ApplyPeerOrigin(req, &c.source_ip, &c.secure_transport);
    return c;
  }

  static std::string FormatRate(double r) {
    std::string s = std::to_string(r);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }

  Status CheckDepth(std::string_view text, const std::string& what) {
    const int limit = controller.config().max_json_depth;
    if (http::JsonDepth(text, limit) > limit)
      return InvalidArgument(what + " nests JSON objects and arrays more than " + std::to_string(limit) +
                             " deep (server.max_json_depth)");
    return Status::Ok();
  }

  StatusOr<json> ParseBody(const http::Request& req) {
    if (static_cast<int64_t>(req.body.size()) > controller.config().max_request_bytes)
      return Status(Code::kPayloadTooLarge, "Request body of " + std::to_string(req.body.size()) +
                                                " bytes exceeds the limit of " +
                                                std::to_string(controller.config().max_request_bytes) + " bytes");
    if (req.body.empty()) return json::object();
    // Before anything parses, validates or renders the body: each of those recurses per level.
    TY_RETURN_IF_ERROR(CheckDepth(req.body, "The request body"));
    json j = json::parse(req.body, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return InvalidArgument("The request body is not a JSON object");
    for (const char* member : kEmbeddedJsonMembers) {
      auto it = j.find(member);
      if (it != j.end() && it->is_string()) TY_RETURN_IF_ERROR(CheckDepth(it->get_ref<const std::string&>(), member));
    }
    return j;
  }

  // An operation this server does not serve, answered before authentication as AWS's front ends do
  // (the route is resolved first); errors.cpp picks the status each protocol uses.
  http::Response UnknownOperation(Protocol protocol, const std::string& what) {
    return Reply(protocol, Status(Code::kUnknownOperation, what));
  }

  // One operation of `table` (api/operations.h): an operation without a row is not served.
  // `authenticated`: the caller, when the request was authenticated before it was changed here
  // (placement adds a tag to a submit after checking its signature).
  http::Response Handle(const http::Request& req, Protocol protocol, const OperationTable& table,
                        const std::string& operation, const Principal* authenticated = nullptr) {
    auto t0 = std::chrono::steady_clock::now();
    const ServiceModel* model = table.model();
    const Operation* row = table.Find(operation);
    const ServiceModel::Operation* op = model && row ? model->FindOperation(operation) : nullptr;
    if (!row || (model && !op))
      return UnknownOperation(protocol, "Operation " + operation + " is not supported by this server");
    const std::string service(row->signed_as.empty() ? table.signing_name() : row->signed_as);
    const Api api = table.api();
    AuditedCall call(controller, req, protocol, std::string(ActionPrefix(api)), operation);
    StatusOr<Principal> caller = authenticated ? StatusOr<Principal>(*authenticated) : Authenticate(req, service, &call.record());
    if (authenticated) {
      call.record().access_key_id = authenticated->access_key_id;
      call.record().principal = authenticated->is_root() ? "root" : authenticated->arn;
    }
    if (!caller.ok()) return Refused(call, protocol, caller.status());
    auto body = ParseBody(req);
    if (!body.ok()) return Refused(call, protocol, body.status());
    // rest-json: the members in the path and query string (Batch's tag operations: resourceArn,
    // tagKeys) are validated beside the body's, then handed over with them.
    json bound = json::object();
    if (model && protocol == Protocol::kBatchRestJson) {
      Status read = BindHttpMembers(*model, *op, req.path, [&](std::string_view p) { return req.Params(p); }, &bound);
      if (!read.ok()) return Refused(call, protocol, read);
    }
    if (bound.empty()) {
      call.SetBody(*body);
    } else {
      json named = *body;  // the audit record names the resource in the path too
      named.update(bound);
      call.SetBody(named);
    }
    const CallContext context = ContextOf(req);
    auto audit_scope = call.OfferToCommand();  // the handler's command stores the record with its change
    if (model) {
      Status valid = model->ValidateInput(*op, *body, protocol == Protocol::kBatchRestJson ? &bound : nullptr);
      if (!valid.ok()) {
        audit_scope.reset();
        return Refused(call, protocol, valid);
      }
      body->update(bound);  // before authorization: a tag operation's resource is in its path
    }
    // The request it carries (SubmitServiceJob's payload), parsed once for authorization and the handler.
    const json carried = ParseCarried(row, *body);
    // Who may do what (api/authorize.h): after validation, before anything is read or changed. A
    // refusal's deciding statement goes into the audit record.
    {
      std::vector<AccessDecision> decisions;
      Status allowed = authz.Check(*caller, context, api, operation, *body, carried,
                                   caller->is_root() ? nullptr : &decisions);
      if (!allowed.ok()) {
        if (!decisions.empty() && !decisions.back().statement.empty())
          call.record().deciding_statement = decisions.back().policy + "/" + decisions.back().statement;
        audit_scope.reset();
        return Refused(call, protocol, allowed);
      }
    }
    Response out = row->handle({controller, *body, carried, caller->arn});
    if (out.ok() && row->changes_deliveries) SyncDeliveries();
    audit_scope.reset();
    call.Finish(out.status());
    if (out.ok()) authz.FilterReply(*caller, context, api, operation, &*out);  // List calls: what the caller may see
    http::Response res;
    if (!out.ok()) {
      if (out.status().code() == Code::kInternal) spdlog::error("{}: {}", operation, out.status().message());
      res = Reply(protocol, out.status(), call.request_id());
    } else {
      res = Reply(protocol, *out, call.request_id());
    }
    // A large reply (a page of log events or metric points) was built as a JSON tree several times
    // its size. glibc keeps what a worker frees in that worker's arena, one arena per worker, so
    // without this a few large reads leave hundreds of MB resident (measured: +120 MB after twenty
    // GetLogEvents pages of 10,000 events). malloc_trim costs well under a millisecond here.
    if (res.body.size() >= kTrimAfterReplyBytes) {
      if (out.ok()) *out = json();
      malloc_trim(0);
    }
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    spdlog::debug("{} {} -> {} in {} us", service, operation, res.status, us);
    return res;
  }
};

// GET /trainyard/v1/events/stream: server-sent events (docs/events.md). Query parameters: after
// (a sequence number; default: the newest, or the Last-Event-ID header), source, detail-type,
// queue, share (each may repeat) and pattern (an EventBridge pattern).
http::Response ApiServer::Impl::Stream(const http::Request& req, const Principal* authenticated) {
  AuditedCall call(controller, req, Protocol::kSageMakerJson, "trainyard", "StreamEvents");
  StatusOr<Principal> caller = authenticated ? StatusOr<Principal>(*authenticated) : Authenticate(req, "events", &call.record());
  if (authenticated) {
    call.record().access_key_id = authenticated->access_key_id;
    call.record().principal = authenticated->is_root() ? "root" : authenticated->arn;
  }
  if (!caller.ok()) return Refused(call, Protocol::kSageMakerJson, caller.status());
  if (Status allowed = authz.Check(*caller, ContextOf(req), Api::kTrainyard, "Events", json::object()); !allowed.ok())
    return Refused(call, Protocol::kSageMakerJson, allowed);
  store::EventLog* log = controller.events();
  if (!log || !controller.config().events_enabled)
    return Reply(Protocol::kSageMakerJson, FailedPrecondition("events are not enabled on this server"));
  json q = json::object();
  auto many = [&](const char* param, const char* key) {
    std::vector<std::string> values = req.Params(param);
    if (values.empty()) return;
    q[key] = values;
  };
  many("source", "Sources");
  many("detail-type", "DetailTypes");
  many("queue", "JobQueues");
  many("share", "Shares");
  if (auto pattern = req.Params("pattern"); !pattern.empty()) {
    Status deep = CheckDepth(pattern.front(), "pattern");
    if (!deep.ok()) return Reply(Protocol::kSageMakerJson, deep);
    q["EventPattern"] = pattern.front();
  }
  auto filter = EventFilterFrom(q);
  if (!filter.ok()) return Reply(Protocol::kSageMakerJson, filter.status());
  std::string from;
  if (const std::string* last = req.Header("Last-Event-ID")) {
    from = *last;
  } else if (auto after = req.Params("after"); !after.empty()) {
    from = after.front();
  }
  uint64_t cursor = log->LastPublished();
  if (!from.empty()) {
    char* end = nullptr;
    cursor = std::strtoull(from.c_str(), &end, 10);
    if (!end || *end != '\0')
      return Reply(Protocol::kSageMakerJson, InvalidArgument("after (or Last-Event-ID) must be a sequence number"));
  }
  if (EventWaiters().fetch_add(1) >= controller.config().events_max_streams) {
    EventWaiters().fetch_sub(1);
    return Reply(Protocol::kSageMakerJson,
                 Status(Code::kLimitExceeded, "Too many event streams are open (events.max_streams = " +
                                               std::to_string(controller.config().events_max_streams) + ")"));
  }
  auto state = std::make_shared<std::pair<obs::EventFilter, uint64_t>>(std::move(*filter), cursor);
  http::Response res;
  res.headers = {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  res.stream = [log, state](std::string* out) {
    if (log->closed()) return false;
    std::vector<json> found;
    Status error = Status::Ok();
    const uint64_t before = state->second;
    state->second = ReadMatching(*log, state->first, state->second, 100, 10000, &found, &error);
    if (!error.ok()) return false;
    for (const auto& d : found) {
      const json& e = d["event"];
      *out += "id: " + std::to_string(d["seq"].get<uint64_t>()) + "\nevent: " + e.value("detail-type", "") +
              "\ndata: " + e.dump() + "\n\n";
    }
    if (!out->empty() || state->second != before) return true;  // sent, or skipped unwanted events: read on
    if (log->WaitNewer(state->second, std::chrono::steady_clock::now() + std::chrono::seconds(15)) <= state->second &&
        !log->closed())
      *out = ": keep-alive\n\n";  // finds clients that left
    return true;
  };
  res.on_stream_end = [] { EventWaiters().fetch_sub(1); };
  return res;
}

// A request signed for a peer region: authenticated here, then sent there for the peer to
// authorize and answer (api/forward.h, docs/regions.md). The peer's answer goes back unchanged; a
// peer that gives none is a 503 naming the region and the cause, never a local answer.
http::Response ApiServer::Impl::Forward(const http::Request& req, const std::string& region, const std::string& url) {
  const std::string service = ScopeService(req);
  const bool s3_request = service == "s3";
  // The peer records the call it answers; here only what never reached it is recorded: a refusal
  // of the caller's credentials, a bad upload, a peer with no answer.
  AuditedCall call(controller, req, s3_request ? Protocol::kS3RestXml : ProtocolOf(req),
                   service.empty() ? "trainyard" : service, "ForwardToRegion");
  auto fail = [&](const Status& st) {
    call.Finish(st);
    return s3_request ? S3ErrorResponse(req, st, call.request_id()) : Reply(ProtocolOf(req), st, call.request_id());
  };
  VerifiedCaller verified;
  auto caller = Authenticate(req, service, &call.record(), &verified, region);
  if (!caller.ok()) return fail(caller.status());
  http::Fields headers;
  for (const auto& [name, value] : req.headers)
    if (!StartsWith(ToLower(name), "x-trainyard-peer-")) headers.emplace_back(name, value);
  const std::string* body = &req.body;
  std::string decoded;
  if (verified.payload_mode != PayloadMode::kSignedBody && verified.payload_mode != PayloadMode::kUnsigned) {
    // An aws-chunked upload: its chunk signatures are checked here, where its key is known, and the
    // plain bytes go on, described as a plain body.
    auto plain = DecodeAwsChunked(req.body, req.headers, verified);
    if (!plain.ok()) return fail(plain.status());
    decoded = std::move(*plain);
    body = &decoded;
    http::Fields plain_headers;
    for (auto& [name, value] : headers) {
      const std::string lower = ToLower(name);
      if (lower == "x-amz-decoded-content-length" || lower == "x-amz-trailer" || lower == "x-amz-content-sha256") continue;
      if (lower == "content-encoding") {
        std::string rest;  // aws-chunked is the transfer's; any other coding is the object's
        for (const std::string& coding : Split(value, ','))
          if (std::string c(Trim(coding)); !c.empty() && !EqualsIgnoreCase(c, "aws-chunked")) rest += (rest.empty() ? "" : ",") + c;
        if (rest.empty()) continue;
        value = rest;
      }
      plain_headers.emplace_back(std::move(name), std::move(value));
    }
    plain_headers.emplace_back("x-amz-content-sha256", Sha256Hex(decoded));
    headers = std::move(plain_headers);
  }
  auto answer = Relay(req, region, url, *caller, std::move(headers), *body, call.record().principal);
  if (!answer.ok()) return fail(answer.status());
  return std::move(*answer);
}

StatusOr<http::Response> ApiServer::Impl::Relay(const http::Request& req, const std::string& region, const std::string& url,
                                      const Principal& caller, http::Fields headers, const std::string& body,
                                      const std::string& who) {
  const Config& config = controller.config();
  SignPeerRequest(config.regions.peer_secret, req.method, req.path, req.query, body, UrlAuthority(url),
                  EncodePeerCaller(ToPeerCaller(caller, req)), SystemClock::instance().now_ms(), &headers);
  PeerTarget target{region, url, config.regions.connect_timeout_seconds, config.regions.timeout_seconds,
                    config.max_buffered_request_bytes};
  auto answer = SendToPeer(target, req.method, req.path, req.query, headers, body);
  if (!answer.ok()) {
    spdlog::warn("{} {} for {} by {}: {}", req.method, req.path, region, who, answer.status().message());
    return answer.status();
  }
  spdlog::debug("{} {} forwarded to {} by {}: {}", req.method, req.path, region, who, answer->status);
  return answer;
}

namespace {

// The buckets a training request reads: its input channels' S3 URIs and any s3:// hyperparameter
// (a script's source directory), in order, each once.
std::vector<std::string> InputBuckets(const json& payload) {
  std::vector<std::string> out;
  auto add = [&](const std::string& uri) {
    if (!StartsWith(uri, "s3://")) return;
    std::string bucket = uri.substr(5, uri.find('/', 5) == std::string::npos ? std::string::npos : uri.find('/', 5) - 5);
    if (!bucket.empty() && std::find(out.begin(), out.end(), bucket) == out.end()) out.push_back(bucket);
  };
  if (auto channels = payload.find("InputDataConfig"); channels != payload.end() && channels->is_array())
    for (const json& c : *channels) {
      const json* uri = &c;
      for (const char* key : {"DataSource", "S3DataSource", "S3Uri"}) {
        if (!uri->is_object() || !uri->contains(key)) { uri = nullptr; break; }
        uri = &(*uri)[key];
      }
      if (uri && uri->is_string()) add(uri->get<std::string>());
    }
  if (auto hp = payload.find("HyperParameters"); hp != payload.end() && hp->is_object())
    for (const auto& [k, v] : hp->items())
      if (v.is_string()) add(v.get<std::string>());
  return out;
}

std::string QueryEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else out += {'%', kHex[c >> 4], kHex[c & 15]};
  }
  return out;
}

// A queue named by name or ARN (.../job-queue/NAME): its name.
std::string QueueName(const std::string& queue) {
  const size_t slash = queue.rfind("job-queue/");
  return slash == std::string::npos ? queue : queue.substr(slash + 10);
}

// A placement reason as an AWS tag value: at most 256 characters of letters, digits, spaces and
// _ . : / = + - @ (a quoted transport error may hold others: they become spaces).
std::string TagValue(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    const bool allowed = std::isalnum(c) || std::string_view(" _.:/=+-@").find(static_cast<char>(c)) != std::string_view::npos;
    const char k = allowed ? static_cast<char>(c) : ' ';
    if (k == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += k;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.size() <= 256 ? out : out.substr(0, 253) + "...";
}

}  // namespace

control::PeerSummary ApiServer::Impl::LocalSummary(const std::string& queue, const std::string& instance_type) {
  const Config& config = controller.config();
  control::PeerSummary out;
  out.region = config.region;
  if (auto buckets = s3->store().ListBuckets(); buckets.ok())
    for (const auto& b : *buckets) out.buckets.insert(b.name);
  const InstanceTypeSpec* type = config.FindInstanceType(instance_type);
  out.offers_instance_type = type != nullptr && type->count > 0;
  out.price_per_hour = type ? type->price_per_hour : 0;
  auto capacity = HandleDescribeCapacity(controller, json::object());
  if (capacity.ok())
    for (const json& row : (*capacity)["Capacity"])
      if (row["InstanceType"] == instance_type && !row["ManagedSpot"].get<bool>()) out.free_instances = row["Free"];
  const std::string name = QueueName(queue);
  controller.Read([&](const control::State& s) {
    out.has_queue = s.queues.count(name) > 0;
    for (const auto& [seq, j] : s.jobs)
      if (j.job.queue == name && (j.job.status == JobStatus::kSubmitted || j.job.status == JobStatus::kPending ||
                                  j.job.status == JobStatus::kRunnable))
        ++out.waiting_jobs;
    return 0;
  });
  return out;
}

// GET /trainyard/v1/peer/summary?queue=Q&instanceType=T: what placement weighs, for peer regions
// only (a forwarded request: the peer signature is the credential).
http::Response ApiServer::Impl::PeerSummaryReply(const http::Request& req) {
  if (!IsPeerRequest(req))
    return Reply(Protocol::kSageMakerJson, Status(Code::kAccessDenied, "Only a peer region may ask for its summary"));
  AuditRecord unrecorded;  // a peer's read: not in the audit trail
  auto caller = Authenticate(req, "sagemaker", &unrecorded);
  if (!caller.ok()) return Reply(Protocol::kSageMakerJson, caller.status());
  auto queue = req.Params("queue");
  auto type = req.Params("instanceType");
  if (queue.empty() || type.empty())
    return Reply(Protocol::kSageMakerJson, InvalidArgument("queue and instanceType are required"));
  const control::PeerSummary s = LocalSummary(queue.front(), type.front());
  http::Response res;
  res.headers = {{"Content-Type", "application/json"}};
  res.body = json{{"region", s.region}, {"buckets", s.buckets}, {"hasQueue", s.has_queue},
                  {"offersInstanceType", s.offers_instance_type}, {"freeInstances", s.free_instances},
                  {"waitingJobs", s.waiting_jobs}, {"pricePerHour", s.price_per_hour}}.dump();
  return res;
}

control::PeerSummary ApiServer::Impl::AskPeer(const http::Request& req, const std::string& region, const std::string& url,
                                              const Principal& caller, const std::string& queue,
                                              const std::string& instance_type) {
  const Config& config = controller.config();
  control::PeerSummary out;
  out.region = region;
  const std::string path = "/trainyard/v1/peer/summary";
  const std::string query = "queue=" + QueryEncode(queue) + "&instanceType=" + QueryEncode(instance_type);
  http::Fields headers;
  SignPeerRequest(config.regions.peer_secret, "GET", path, query, "", UrlAuthority(url),
                  EncodePeerCaller(ToPeerCaller(caller, req)), SystemClock::instance().now_ms(), &headers);
  // A summary is small and placement waits for it: the connect timeout bounds the whole exchange.
  PeerTarget target{region, url, config.regions.connect_timeout_seconds, config.regions.connect_timeout_seconds * 2,
                    64 * 1024};
  auto answer = SendToPeer(target, "GET", path, query, headers, "");
  json j = answer.ok() && answer->status == 200 ? json::parse(answer->body, nullptr, false) : json();
  if (!answer.ok() || answer->status != 200 || !j.is_object()) {
    out.reachable = false;
    out.unreachable_reason = !answer.ok() ? answer.status().message()
                                          : "its summary answered " + std::to_string(answer->status) + ": " +
                                                answer->body.substr(0, 200);
    return out;
  }
  try {
    for (const auto& b : j.at("buckets")) out.buckets.insert(b.get<std::string>());
    out.has_queue = j.at("hasQueue").get<bool>();
    out.offers_instance_type = j.at("offersInstanceType").get<bool>();
    out.free_instances = j.at("freeInstances").get<int64_t>();
    out.waiting_jobs = j.at("waitingJobs").get<int64_t>();
    out.price_per_hour = j.at("pricePerHour").get<double>();
  } catch (const json::exception& e) {
    out.reachable = false;
    out.unreachable_reason = std::string("its summary is malformed: ") + e.what();
  }
  return out;
}

std::optional<http::Response> ApiServer::Impl::Place(const http::Request& req, const std::string& operation) {
  static const std::string kCandidates = "trainyard:candidate-regions";
  const Config& config = controller.config();
  // Most submits name no candidates: they go the usual way unparsed, as does anything the usual
  // way refuses (too deep to parse safely, not JSON).
  if (req.body.find(kCandidates) == std::string::npos || !CheckDepth(req.body, "The request body").ok())
    return std::nullopt;
  json body = json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body.contains("tags") || !body["tags"].is_object() || !body["tags"].contains(kCandidates) ||
      !body["tags"][kCandidates].is_string())
    return std::nullopt;
  AuditRecord who;
  auto caller = Authenticate(req, "batch", &who);
  if (!caller.ok()) return std::nullopt;  // the local path refuses it, audited
  std::vector<std::string> regions;
  // Separated by spaces: an AWS tag value may not hold a comma.
  for (const std::string& r : Split(body["tags"][kCandidates].get<std::string>(), ' '))
    if (std::string t(Trim(r)); !t.empty() && std::find(regions.begin(), regions.end(), t) == regions.end())
      regions.push_back(t);
  json payload = body.contains("serviceRequestPayload") && body["serviceRequestPayload"].is_string()
                     ? json::parse(body["serviceRequestPayload"].get<std::string>(), nullptr, false)
                     : json();
  if (regions.empty() || !payload.is_object() || !body.contains("jobQueue") || !body["jobQueue"].is_string())
    return std::nullopt;  // the local path says what is wrong with it
  control::PlacementRequest request;
  request.input_buckets = InputBuckets(payload);
  const json* resources = payload.contains("ResourceConfig") ? &payload["ResourceConfig"] : nullptr;
  request.instance_type = resources && resources->value("InstanceType", json()).is_string()
                              ? (*resources)["InstanceType"].get<std::string>() : "";
  request.instance_count = resources && (*resources).value("InstanceCount", json()).is_number_integer()
                               ? (*resources)["InstanceCount"].get<int64_t>() : 1;
  const std::string queue = body["jobQueue"].get<std::string>();
  std::vector<control::PeerSummary> summaries;
  std::vector<std::string> not_peers;
  for (const std::string& r : regions) {
    if (r == config.region) {
      summaries.push_back(LocalSummary(queue, request.instance_type));
    } else if (auto peer = config.regions.peers.find(r); peer != config.regions.peers.end()) {
      summaries.push_back(AskPeer(req, r, peer->second, *caller, queue, request.instance_type));
    } else {
      not_peers.push_back(r + ": not this region nor one of its peers");
    }
  }
  control::Placement placement = control::RankRegions(request, summaries);
  placement.skipped.insert(placement.skipped.end(), not_peers.begin(), not_peers.end());
  if (placement.order.empty())
    return Reply(Protocol::kBatchRestJson,
                 Unavailable("No candidate region can take the job: " + control::PlacementReason(placement, "none", {})));
  std::vector<std::string> failed;
  Status last = Status::Ok();
  for (const control::RankedRegion& choice : placement.order) {
    const std::string reason = control::PlacementReason(placement, choice.region, failed);
    json placed = body;
    placed["tags"]["trainyard:placement"] = TagValue(reason);
    const std::string placed_body = placed.dump();
    if (choice.region == config.region) {
      spdlog::info("job {} {}", body.value("jobName", ""), reason);
      http::Request local = req;
      local.body = placed_body;
      // The signature covered the body as sent; the placement tag was added here, after it was
      // checked, so the local call is made for the caller already authenticated.
      return Handle(local, Protocol::kBatchRestJson, BatchOperations(), operation, &*caller);
    }
    http::Fields headers;
    for (const auto& [name, value] : req.headers)
      // The SigV4 headers are this region's: the peer takes the caller from the peer headers.
      if (!StartsWith(ToLower(name), "x-trainyard-peer-") && !EqualsIgnoreCase(name, "authorization") &&
          !EqualsIgnoreCase(name, "x-amz-content-sha256"))
        headers.emplace_back(name, value);
    auto answer = Relay(req, choice.region, config.regions.peers.at(choice.region), *caller, headers, placed_body,
                        who.principal);
    if (answer.ok() && answer->status != 503) {
      if (answer->status == 200) spdlog::info("job {} {}", body.value("jobName", ""), reason);
      return std::move(*answer);
    }
    json err = answer.ok() ? json::parse(answer->body, nullptr, false) : json();
    last = answer.ok() ? Unavailable(choice.region + " is unavailable") : answer.status();
    failed.push_back(choice.region + ": " + (err.is_object() ? err.value("message", "unavailable") : last.message()));
  }
  return Reply(Protocol::kBatchRestJson,
               Unavailable("No candidate region took the job: " + control::PlacementReason(placement, "none", failed)));
}

namespace {

// Headers on every console answer: its pages load only their own code, in no frame, and leak no
// address to other sites.
void ConsoleHeaders(http::Response* res) {
  res->headers.emplace_back("Content-Security-Policy",
                            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                            "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
  res->headers.emplace_back("X-Content-Type-Options", "nosniff");
  res->headers.emplace_back("X-Frame-Options", "DENY");
  res->headers.emplace_back("Referrer-Policy", "no-referrer");
  res->headers.emplace_back("Cache-Control", "no-store");
}

http::Response ConsoleJson(int status, const json& body) {
  http::Response res;
  res.status = status;
  res.headers = {{"Content-Type", "application/json"}};
  res.body = body.dump();
  ConsoleHeaders(&res);
  return res;
}

http::Response ConsoleError(int status, const std::string& type, const std::string& message) {
  http::Response res = ConsoleJson(status, {{"__type", type}, {"message", message}});
  res.headers.emplace_back("x-amzn-ErrorType", type);
  return res;
}

std::string SessionCookie(const std::string& value, int64_t max_age_s, bool secure) {
  return std::string(kConsoleCookie) + "=" + value + "; Path=/console; Max-Age=" + std::to_string(max_age_s) +
         "; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "");
}

}  // namespace

StatusOr<std::pair<ConsoleSession, Principal>> ApiServer::Impl::ConsoleCaller(const http::Request& req) {
  const std::string cookie = CookieValue(req, kConsoleCookie);
  if (cookie.empty()) return Status(Code::kUnauthenticated, "Sign in first: the request carries no console session");
  auto session = console_sessions.Find(cookie, SystemClock::instance().now_ms());
  if (!session) return Status(Code::kUnauthenticated, "The console session has ended or is not known here; sign in again");
  auto principal = KeyPrincipal(*controller.directory(), session->access_key_id);
  if (!principal) {
    console_sessions.RemoveKey(session->access_key_id);
    return Status(Code::kUnauthenticated, "The access key this session signed in with no longer exists; sign in again");
  }
  if (!throttle.Admit(session->access_key_id, MonotonicMs())) {
    throttled.fetch_add(1);
    return Status(Code::kThrottled, "Rate exceeded (server.throttle_rate = " + FormatRate(controller.config().throttle_rate) +
                                        " requests per second per access key)");
  }
  return std::make_pair(std::move(*session), std::move(*principal));
}

// POST /console/api/signin {"accessKeyId", "secretAccessKey"}: root's key or a user's. Each
// attempt is audited (ConsoleSignIn), and attempts are throttled per client address.
http::Response ApiServer::Impl::ConsoleSignIn(const http::Request& req) {
  AuditedCall call(controller, req, Protocol::kSageMakerJson, "trainyard", "ConsoleSignIn");
  auto refuse = [&](int status, const Status& st, const std::string& type) {
    call.Finish(st);
    return ConsoleError(status, type, st.message());
  };
  if (std::string why = CrossSiteReason(req); !why.empty())
    return refuse(403, Status(Code::kAccessDenied, "Sign-in refused: " + why), "AccessDeniedException");
  if (!signin_throttle.Admit(req.peer, MonotonicMs()))
    return refuse(400, Status(Code::kThrottled, "Too many sign-in attempts from " + req.peer + " (console.signin_rate = " +
                                                    FormatRate(controller.config().console.signin_rate) +
                                                    " a second per address); retry later"),
                  "ThrottlingException");
  auto body = ParseBody(req);
  if (!body.ok()) return refuse(400, body.status(), "ValidationException");
  const json& b = *body;
  for (const char* member : {"accessKeyId", "secretAccessKey"})
    if (!b.contains(member) || !b[member].is_string() || b[member].get_ref<const std::string&>().empty() ||
        b[member].get_ref<const std::string&>().size() > 128)
      return refuse(400, InvalidArgument(std::string(member) + " is required: a string of 1 to 128 characters"),
                    "ValidationException");
  const std::string key = b["accessKeyId"];
  call.record().access_key_id = key;
  auto users = controller.directory();
  std::optional<Principal> principal = KeyPrincipal(*users, key);
  std::string secret;
  if (principal) secret = principal->is_root() ? root.secret_access_key : users->keys.find(key)->second.secret;
  // One answer for an unknown key and a wrong secret: the form does not tell which keys exist.
  if (!principal || !SecretEquals(secret, b["secretAccessKey"].get<std::string>()))
    return refuse(403, Status(Code::kAccessDenied, "The access key ID or secret access key is not valid"),
                  "AccessDeniedException");
  call.record().principal = principal->is_root() ? "root" : principal->arn;
  std::string cookie;
  const ConsoleSession session = console_sessions.Create(key, SystemClock::instance().now_ms(), &cookie);
  call.Finish(Status::Ok());
  http::Response res = ConsoleJson(200, {{"principal", principal->is_root() ? "root" : principal->arn},
                                         {"accessKeyId", key}, {"csrfToken", session.csrf_token},
                                         {"expiresAt", session.expires_ms / 1000}});
  res.headers.emplace_back("Set-Cookie", SessionCookie(cookie, int64_t{controller.config().console.session_hours} * 3600,
                                                      req.secure_transport));
  return res;
}

// POST /console/api/call {"api", "action", "input"}: one API operation, run by Handle as the
// signed-in principal, exactly as the same call signed with its key would run (validation,
// authorization, the audit record, events).
http::Response ApiServer::Impl::ConsoleCall(const http::Request& req, const Principal& caller) {
  auto body = ParseBody(req);
  if (!body.ok()) return ConsoleError(400, "ValidationException", body.status().message());
  const json& b = *body;
  if (!b.contains("api") || !b["api"].is_string() || !b.contains("action") || !b["action"].is_string())
    return ConsoleError(400, "ValidationException", "api and action are required strings");
  if (b.contains("input") && !b["input"].is_object())
    return ConsoleError(400, "ValidationException", "input must be a JSON object");
  const std::string api = b["api"];
  const std::string action = b["action"];
  json input = b.value("input", json::object());
  http::Request inner;
  inner.method = "POST";
  inner.path = "/";
  inner.peer = req.peer;
  inner.secure_transport = req.secure_transport;
  inner.headers = {{"Content-Type", "application/json"}, {"User-Agent", "trainyard-console"}};
  if (const std::string* host = req.Header("Host")) inner.headers.emplace_back("Host", *host);
  auto run = [&](Protocol protocol, const OperationTable& table) {
    inner.body = input.dump();
    inner.target = inner.path;
    http::Response res = Handle(inner, protocol, table, action, &caller);
    ConsoleHeaders(&res);
    return res;
  };
  if (api == "batch") {
    const ServiceModel& m = ServiceModel::Batch();
    const ServiceModel::Operation* op = m.FindOperation(action);
    if (!op) return ConsoleError(400, "UnknownOperationException", "Batch has no operation " + action);
    // Members bound to the path ({resourceArn} of the tag operations) move from the input there.
    std::string path = op->request_uri;
    for (size_t open = path.find('{'); open != std::string::npos; open = path.find('{', open)) {
      const size_t close = path.find('}', open);
      if (close == std::string::npos) break;
      std::string member = path.substr(open + 1, close - open - 1);
      if (!member.empty() && member.back() == '+') member.pop_back();
      const std::string value = input.contains(member) && input[member].is_string() ? input[member].get<std::string>() : "";
      input.erase(member);
      const std::string encoded = QueryEncode(value);
      path.replace(open, close - open + 1, encoded);
      open += encoded.size();
    }
    inner.method = op->http_method;
    inner.path = path.substr(0, path.find('?'));
    return run(Protocol::kBatchRestJson, BatchOperations());
  }
  if (api == "sagemaker") return run(Protocol::kSageMakerJson, SageMakerOperations());
  if (api == "logs") return run(Protocol::kLogsJson, LogsOperations());
  if (api == "trainyard") {
    const Operation* own = TrainyardOperations().Find(action);
    if (!own) return ConsoleError(400, "UnknownOperationException", "trainyard has no operation " + action);
    inner.path = std::string(own->path);
    return run(Protocol::kSageMakerJson, TrainyardOperations());
  }
  return ConsoleError(400, "ValidationException", "api must be one of batch, sagemaker, logs, trainyard; not " + api);
}

http::Response ApiServer::Impl::Console(const http::Request& req) {
  const std::string& path = req.path;
  auto file = [&](const std::string& name) {
    const ConsoleFile* f = console_assets.Find(name);
    if (!f) return ConsoleError(404, "NotFound", "No console file " + name);
    http::Response res;
    res.headers = {{"Content-Type", f->content_type}};
    res.body = f->body;
    ConsoleHeaders(&res);
    return res;
  };
  const bool read = req.method == "GET" || req.method == "HEAD";
  // Code and style: no data in them, so no session is needed to load the sign-in page's.
  if (read && (StartsWith(path, "/console/static/") || StartsWith(path, "/console/vendor/")))
    return file(path.substr(9));
  if (read && path == "/console/signin") return file("static/signin.html");
  if (path == "/console/api/signin") {
    if (req.method != "POST") return ConsoleError(405, "ValidationException", "Sign in with POST");
    return ConsoleSignIn(req);
  }
  auto caller = ConsoleCaller(req);
  if (read && (path == "/console" || path == "/console/")) {
    if (!caller.ok()) {
      http::Response res;
      res.status = 302;
      res.headers = {{"Location", "/console/signin"}};
      ConsoleHeaders(&res);
      return res;
    }
    return file("static/index.html");
  }
  if (!StartsWith(path, "/console/api/")) return ConsoleError(404, "NotFound", "No console page at " + path);
  if (!caller.ok()) {
    const bool throttled_now = caller.status().code() == Code::kThrottled;
    return ConsoleError(throttled_now ? 400 : 401, throttled_now ? "ThrottlingException" : "MissingAuthenticationTokenException",
                        caller.status().message());
  }
  const auto& [session, principal] = *caller;
  // Every call and the event stream must come from the console's own pages; a change must also
  // carry the session's token, which only those pages can read.
  if (std::string why = CrossSiteReason(req); !why.empty())
    return ConsoleError(403, "AccessDeniedException", "Cross-site request refused: " + why);
  if (read && path == "/console/api/session") {
    const Config& config = controller.config();
    return ConsoleJson(200, {{"principal", principal.is_root() ? "root" : principal.arn},
                             {"accessKeyId", session.access_key_id}, {"csrfToken", session.csrf_token},
                             {"expiresAt", session.expires_ms / 1000}, {"region", config.region},
                             {"accountId", config.account_id}});
  }
  if (read && path == "/console/api/events") return Stream(req, &principal);
  if (req.method != "POST") return ConsoleError(404, "NotFound", "No console call at " + req.method + " " + path);
  const std::string* token = req.Header(kConsoleCsrfHeader);
  if (!token || !SecretEquals(*token, session.csrf_token))
    return ConsoleError(403, "AccessDeniedException",
                        std::string("Cross-site request refused: the ") + kConsoleCsrfHeader +
                            " header must carry this session's token (GET /console/api/session)");
  if (path == "/console/api/signout") {
    console_sessions.Remove(CookieValue(req, kConsoleCookie));
    http::Response res = ConsoleJson(200, json::object());
    res.headers.emplace_back("Set-Cookie", SessionCookie("", 0, req.secure_transport));
    return res;
  }
  if (path == "/console/api/call") return ConsoleCall(req, principal);
  return ConsoleError(404, "NotFound", "No console call at POST " + path);
}

http::Response ApiServer::Impl::Route(const http::Request& req) {
  if (req.body_withheld) return RefuseUnread(req);
  // The web console's pages and calls: a browser's, with a session cookie instead of a signature.
  if (StartsWith(req.path, "/console") && (req.path.size() == 8 || req.path[8] == '/') && controller.config().console.enabled)
    return Console(req);
  // A request signed for a peer region is that region's (docs/regions.md); one a peer forwarded
  // here is never forwarded again. One signed for a region that is neither is refused by SigV4
  // below, as AWS refuses it (InvalidSignatureException naming the region).
  if (!IsPeerRequest(req)) {
    const Config& config = controller.config();
    if (std::string region = ScopeRegion(req); !region.empty() && region != config.region)
      if (auto peer = config.regions.peers.find(region); peer != config.regions.peers.end())
        return Forward(req, region, peer->second);
  }
  // A request signed for S3 is the S3 endpoint's, whatever its path (api/s3_api.h).
  if (ScopeService(req) == "s3") return s3->Handle(req);
  // A request signed for STS is answered by STS's Query protocol (api/sts_api.h).
  if (ScopeService(req) == "sts")
    return ServeSts(req, controller, authz, [&](AuditRecord* who) { return Authenticate(req, "sts", who); },
                    ContextOf(req));
  // CloudWatch (metrics and alarms) in rpc-v2-cbor, JSON 1.0 or the query protocol (api/cloudwatch_api.h).
  if (ScopeService(req) == "monitoring" || IsCloudWatchRequest(req))
    return ServeCloudWatch(req, controller, authz,
                           [&](AuditRecord* who) { return Authenticate(req, "monitoring", who); }, ContextOf(req));
  const std::string& path = req.path;
  // Batch's tagging operations are GET and DELETE on /v1/tags/{resourceArn}.
  if ((req.method == "GET" || req.method == "DELETE") && path.rfind("/v1/", 0) == 0) {
    const ServiceModel& m = ServiceModel::Batch();
    if (const ServiceModel::Operation* op = m.FindByHttp(req.method, path))
      return Handle(req, Protocol::kBatchRestJson, BatchOperations(), op->name);
  }
  if (req.method == "POST") {
    // Batch: POST /v1/<operation>, routed by the model's requestUri.
    if (path.rfind("/v1/", 0) == 0) {
      const ServiceModel& m = ServiceModel::Batch();
      const ServiceModel::Operation* op = m.FindByHttp("POST", path);
      if (!op) return UnknownOperation(Protocol::kBatchRestJson, "No operation at POST " + path);
      const Operation* row = BatchOperations().Find(op->name);
      if (row && row->placeable && !IsPeerRequest(req) && !controller.config().regions.peers.empty())
        if (auto placed = Place(req, op->name)) return std::move(*placed);
      return Handle(req, Protocol::kBatchRestJson, BatchOperations(), op->name);
    }
    // SageMaker: POST / with X-Amz-Target: SageMaker.<Operation>.
    if (path == "/") {
      const std::string* header = req.Header("X-Amz-Target");
      std::string target = header ? *header : "";
      // CloudWatch Logs shares the JSON 1.1 shape; its operations are told apart by the prefix.
      static const std::string kLogsPrefix = "Logs_20140328.";
      if (target.rfind(kLogsPrefix, 0) == 0)
        return Handle(req, Protocol::kLogsJson, LogsOperations(), target.substr(kLogsPrefix.size()));
      static const std::string kEventsPrefix = "AWSEvents.";  // EventBridge (api/eventbridge_api.h)
      if (target.rfind(kEventsPrefix, 0) == 0)
        return Handle(req, Protocol::kEventsJson, EventBridgeOperations(), target.substr(kEventsPrefix.size()));
      const ServiceModel& m = ServiceModel::SageMaker();
      std::string prefix = m.target_prefix() + ".";
      if (target.rfind(prefix, 0) != 0) {
        // Another service's operation (IAM's query protocol, DynamoDB's JSON, ...): its own shape.
        if (auto other = AnswerUnservedService(req)) return std::move(*other);
        return UnknownOperation(Protocol::kSageMakerJson,
                                "X-Amz-Target must name a SageMaker operation, not '" + target + "'");
      }
      return Handle(req, Protocol::kSageMakerJson, SageMakerOperations(), target.substr(prefix.size()));
    }
    for (const Operation& own : TrainyardOperations().rows())
      if (path == own.path) return Handle(req, Protocol::kSageMakerJson, TrainyardOperations(), std::string(own.name));
    // Users, keys and policies (api/iam_api.cpp): /trainyard/v1/admin/iam/<Operation>.
    static const std::string kIamPrefix = "/trainyard/v1/admin/iam/";
    if (path.rfind(kIamPrefix, 0) == 0 && IamAdminOperations().Find(path.substr(kIamPrefix.size())))
      return Handle(req, Protocol::kSageMakerJson, IamAdminOperations(), path.substr(kIamPrefix.size()));
  } else if (req.method == "GET") {
    if (path == "/trainyard/v1/events/stream") return Stream(req);
    if (path == "/trainyard/v1/credentials") return JobCredentials(req);
    if (path == "/trainyard/v1/peer/summary") return PeerSummaryReply(req);
    // Health for load balancers (docs/operations.md): one server over its own store always leads.
    // Several servers over PostgreSQL answer this in front of the API (cli/serve_ha.cpp).
    if (path == "/healthz") {
      http::Response res;
      res.headers = {{"Content-Type", "application/json"}, {"Cache-Control", "no-store"}};
      res.body = controller.config().store_url.empty() ? R"({"status":"ok","role":"leader","store":"sqlite"})"
                                                       : R"({"status":"ok","role":"leader","store":"postgresql"})";
      return res;
    }
    // Prometheus scrape endpoint, read-only (docs/metrics.md): open unless server.metrics_token is set.
    if (path == "/metrics") {
      if (Status allowed = CheckScrape(req); !allowed.ok()) return Reply(Protocol::kSageMakerJson, allowed);
      http::Response res;
      res.body = RenderMetrics(controller);
      if (store::EventLog* log = controller.events())
        res.body += RenderEventMetrics(log->LastPublished(), webhooks ? webhooks->Stats() : std::vector<obs::WebhookStats>{});
      res.body += NetworkMetrics();
      res.headers = {{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}};
      return res;
    }
  }
  // A Smithy RPC v2 CBOR request (/service/<Service>/operation/<Op>) of a service not served here.
  if (auto other = AnswerUnservedService(req)) return std::move(*other);
  // No operation claims the request. Under /v1/ (Batch) and on trainyard's own paths the route is
  // the operation: an unknown one is a 404. At "/" a JSON 1.1 request names its operation in
  // X-Amz-Target, and one that names none is a 400, as for an unknown target.
  http::Response res = UnknownOperation(ProtocolOf(req), "No operation at " + req.method + " " + path);
  res.status = path == "/" ? 400 : 404;
  return res;
}

// A request whose head failed authentication when it arrived (PlanBody): its body was never read,
// so nothing may act on it. Its answer is the refusal authentication gives its head again, in its
// protocol's shape, audited as any refused call is.
http::Response ApiServer::Impl::RefuseUnread(const http::Request& req) {
  const Config& config = controller.config();
  const std::string service = ScopeService(req);
  const bool s3_request = service == "s3";
  std::string region = ScopeRegion(req);
  if (IsPeerRequest(req) || !config.regions.peers.count(region)) region = "";
  // The S3 endpoint authenticates before it reads anything, and names the operation from the head.
  if (s3_request && region.empty() && !IsPeerRequest(req)) return s3->Handle(req);
  // The operation as the head names it, for the audit record (the body is not there to say more).
  std::string operation = "Unknown";
  if (const std::string* target = req.Header("X-Amz-Target"); target && target->find('.') != std::string::npos)
    operation = target->substr(target->rfind('.') + 1);
  else if (const ServiceModel::Operation* op = ServiceModel::Batch().FindByHttp(req.method, req.path))
    operation = op->name;
  AuditedCall call(controller, req, s3_request ? Protocol::kS3RestXml : ProtocolOf(req),
                   service.empty() ? "trainyard" : service, operation);
  auto caller = Authenticate(req, service.empty() ? "sagemaker" : service, &call.record(), nullptr, region);
  const Status st = caller.ok() ? Status(Code::kBadSignature, "The request was not authenticated") : caller.status();
  call.Finish(st);
  return s3_request ? S3ErrorResponse(req, st, call.request_id()) : Reply(ProtocolOf(req), st, call.request_id());
}

// With server.metrics_token set: the token as a bearer, or a signed request from root or a user
// allowed trainyard:GetMetrics.
Status ApiServer::Impl::CheckScrape(const http::Request& req) {
  const std::string& token = controller.config().metrics_token;
  if (token.empty()) return Status::Ok();
  if (const std::string* auth = req.Header("Authorization"); auth && StartsWith(*auth, "Bearer ")) {
    const std::string given = auth->substr(7);
    // Compared in constant time: the token is a secret.
    unsigned char diff = given.size() != token.size();
    for (size_t i = 0; i < given.size() && i < token.size(); ++i) diff |= given[i] ^ token[i];
    if (diff) return Status(Code::kAccessDenied, "The scrape token is not valid (server.metrics_token)");
    return Status::Ok();
  }
  if (!req.Header("Authorization"))
    return Status(Code::kUnauthenticated, "GET /metrics needs Authorization: Bearer <server.metrics_token> or a signed request");
  AuditRecord unrecorded;  // a scrape is a read: not in the audit trail
  auto caller = Authenticate(req, "sagemaker", &unrecorded);
  if (!caller.ok()) return caller.status();
  return authz.CheckAction(*caller, ContextOf(req), "trainyard:GetMetrics");
}

// The listener's own families (docs/metrics.md), beside the controller's.
std::string ApiServer::Impl::NetworkMetrics() const {
  const http::Stats st = http->stats();
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help, int64_t value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           std::to_string(value) + "\n";
  };
  family("trainyard_http_open_connections", "gauge", "Client connections open now.", st.open_connections);
  family("trainyard_http_refused_connections_total", "counter",
         "Connections answered 503 and closed: server.max_connections were open, or max_connections_per_address from their address.", st.refused_connections);
  family("trainyard_http_queued_requests", "gauge", "Requests read whole and waiting for a worker.", st.queued_requests);
  family("trainyard_http_throttled_requests_total", "counter",
         "Signed requests refused with ThrottlingException (server.throttle_rate).", throttled.load());
  return out;
}

// Refusals of the network layer, in the shape the request's protocol expects.
http::Response ApiServer::Impl::Refuse(int status, const std::string& message, const http::Request* head) {
  return RefuseRequest(status, message, head);
}

http::Response RefuseRequest(int status, const std::string& message, const http::Request* head) {
  Protocol p = head ? ApiServer::Impl::ProtocolOf(*head) : Protocol::kSageMakerJson;
  Code code = status == 413 ? Code::kPayloadTooLarge
              : status == 503 ? Code::kUnavailable
              : status >= 500 ? Code::kInternal
                              : Code::kInvalidArgument;
  http::Response res = ApiServer::Impl::Reply(p, Status(code, message));
  res.status = status;
  return res;
}

ApiServer::ApiServer(control::Controller& controller, RootCredential root, http::Server* listener)
    : impl_(std::make_unique<Impl>(controller, std::move(root))) {
  Impl* impl = impl_.get();
  if (listener) {
    impl->http = listener;
    return;
  }
  impl->own_http = std::make_unique<http::Server>(
      ListenerLimits(controller.config()), [impl](const http::Request& req) { return impl->Route(req); },
      [impl](int status, const std::string& message, const http::Request* head) { return impl->Refuse(status, message, head); });
  impl->http = impl->own_http.get();
  impl->http->SetBodyPlan([this](const http::Request& head) { return PlanBody(head); });
}

http::Response ApiServer::Serve(const http::Request& req) { return impl_->Route(req); }

http::BodyPlan ApiServer::PlanBody(const http::Request& head) const { return impl_->PlanBody(head); }

// Object data (PutObject, UploadPart) may be up to [s3] max_upload_bytes; everything else keeps the
// server's limit. The head is authenticated as far as it can be before its body is read:
//   - a peer region's request: its whole signature (the body's hash is signed in a header);
//   - S3 (SigV4 header or presigned, SigV2): the whole signature, which covers the body only
//     through the signed x-amz-content-sha256, or not at all;
//   - any other SigV4 request: the key, scope and time (its signature covers the body's hash).
// The first two charge the body to the proven access key; everything else to the client's address.
// A head that claims a signature and fails these checks has its body withheld (RefuseUnread).
http::BodyPlan ApiServer::Impl::PlanBody(const http::Request& head) {
  const Config& c = controller.config();
  const EpochMs now = SystemClock::instance().now_ms();
  const std::string service = ScopeService(head);
  http::BodyPlan plan;
  plan.limit = service == "s3" && s3->IsUpload(head) ? std::max(c.s3.max_upload_bytes, c.max_request_bytes)
                                                     : c.max_request_bytes;
  // An aws-chunked upload declares its data's length: its encoding is at most that plus its
  // framing (chunks of 8 KiB at least but the last, about 100 bytes each, and the trailer). The
  // limit, and so what a body sent without Content-Length holds of the caller's share, is that
  // bound rather than the largest upload allowed: several parts of one upload_file go at once.
  if (const std::string* decoded = head.Header("x-amz-decoded-content-length")) {
    int64_t n = -1;
    if (!decoded->empty() && decoded->size() <= 18 &&
        std::all_of(decoded->begin(), decoded->end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      n = std::stoll(*decoded);
    if (n >= 0) plan.limit = std::min(plan.limit, n + n / 64 + 8192);
  }
  if (IsPeerRequest(head)) {
    auto sent = VerifyPeerHead(head, c.regions.peer_secret, now, int64_t{c.regions.replay_window_seconds} * 1000);
    if (!sent.ok()) plan.withhold_body = true;
    else plan.caller = sent->access_key_id;
    return plan;
  }
  const std::string* auth = head.Header("Authorization");
  const bool claims_signature = (auth && (StartsWith(*auth, "AWS4-HMAC-SHA256") || StartsWith(*auth, "AWS "))) ||
                                !head.Params("X-Amz-Credential").empty() || !head.Params("X-Amz-Algorithm").empty();
  if (service.empty()) {
    plan.withhold_body = claims_signature;  // a signature too malformed to name its scope
    return plan;
  }
  HttpRequestView view;
  view.method = head.method;
  view.path = head.path;
  view.query = head.query;
  view.headers = head.headers;
  std::string region = ScopeRegion(head);
  if (region != c.region && !c.regions.peers.count(region)) region = c.region;
  std::shared_ptr<const control::PrincipalDirectory> users = controller.directory();
  std::optional<control::RoleSession> session;
  SecretLookup lookup = Secrets(*users, &session);
  auto checked = service == "s3" && IsSigV2(view) ? VerifySigV2(view, lookup, VirtualHostBucket(head, c.s3), now)
                                                  : VerifySigV4Head(view, lookup, region, {service}, now);
  if (!checked.ok()) plan.withhold_body = true;
  else if (service == "s3") plan.caller = checked->access_key_id;
  return plan;
}

ApiServer::~ApiServer() {
  if (impl_->webhooks) impl_->webhooks->Stop();
  if (impl_->sweeper) impl_->sweeper->Stop();
}

StatusOr<int> ApiServer::Bind(const std::string& host, int port) {
  TY_RETURN_IF_ERROR(StartServices());
  auto bound = impl_->http->Bind(host, port);
  if (bound.ok()) NoteListenerPort(*bound);
  return bound;
}

void ApiServer::NoteListenerPort(int port) {
  impl_->listener_ports.push_back(port);
  if (impl_->webhooks) impl_->webhooks->SetOutboundRules(impl_->OutboundRulesNow());
}

Status ApiServer::StartServices() {
  const Config& config = impl_->controller.config();
  if (config.console.enabled && impl_->console_assets.size() == 0)
    impl_->console_assets.Load(config.console.assets_dir.empty() ? TRAINYARD_CONSOLE_DIR : config.console.assets_dir);
  // Also without configured webhooks: EventBridge rules made through the API deliver through it.
  if (impl_->controller.events() && config.events_enabled && !impl_->webhooks) {
    auto d = std::make_unique<obs::WebhookDispatcher>(*impl_->controller.events(), EventBridgeDeliveries(impl_->controller),
                                                      &impl_->rule_owner_access);
    d->SetOutboundRules(impl_->OutboundRulesNow());
    Status st = d->Start();
    if (!st.ok()) return st;
    impl_->webhooks = std::move(d);
  }
  if (config.s3.enabled && !impl_->sweeper) {
    // What interrupted writes leave (a day old) and uploads nobody finished: at start, then hourly,
    // on the wall clock that stamps the files.
    objstore::SweepPolicy policy;
    policy.upload_age_ms = config.s3.abort_incomplete_uploads_after_days * 24 * 3600 * 1000;
    impl_->sweeper = std::make_unique<objstore::BucketSweeper>(
        impl_->s3->store(), SystemClock::instance(), policy, [](const objstore::SweepResult& r) {
          if (r.temp_files > 0 || r.uploads > 0)
            spdlog::info("buckets swept: removed {} temporary file(s) of interrupted writes, aborted {} multipart "
                         "upload(s) past [s3] abort_incomplete_uploads_after_days",
                         r.temp_files, r.uploads);
          else
            spdlog::debug("buckets swept: nothing to remove");
          if (!r.first_error.ok()) spdlog::warn("buckets swept, not all of it: {}", r.first_error.message());
        });
    impl_->sweeper->Start();
  }
  return Status::Ok();
}

Status ApiServer::UseTls(const std::string& certificate_file, const std::string& key_file) {
  return impl_->http->UseTls({certificate_file, key_file});
}

void ApiServer::Run() { impl_->http->Run(); }

void ApiServer::Stop() {
  if (impl_->webhooks) impl_->webhooks->Stop();
  if (impl_->sweeper) impl_->sweeper->Stop();
  if (store::EventLog* log = impl_->controller.events()) log->Close();  // ends the streams
  if (impl_->own_http) impl_->own_http->Stop();
}

}  // namespace ty::api
