// The audit trail (docs/security.md, "Audit"): records, what is recorded, and their lookup.
#include "api/audit.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

#include "api/operations.h"
#include "control/controller.h"
#include "core/strings.h"
#include "http/server.h"
#include "store/event_log.h"

namespace ty::api {

using nlohmann::json;

namespace {

// Request text copied into a record is capped, so that a hostile request cannot make its record
// (and event) large: member values are checked by the model only after the record has begun.
constexpr size_t kMaxNameChars = 512;
constexpr size_t kMaxResources = 20;
constexpr size_t kMaxMessageChars = 1024;

std::string Capped(std::string_view s, size_t n) { return std::string(s.substr(0, n)); }

bool IsAddressChar(char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == '.' || c == ':'; }

// An IPv4 or IPv6 address as text (not checked further: it is recorded, never connected to).
bool LooksLikeAddress(std::string_view s) {
  return !s.empty() && s.size() <= 45 && std::all_of(s.begin(), s.end(), IsAddressChar);
}

bool IsTrusted(std::string_view address, const std::vector<std::string>& trusted) {
  return std::find(trusted.begin(), trusted.end(), address) != trusted.end();
}

// The key id of a "Credential=<key>/<date>/<region>/<service>/aws4_request" scope.
std::string KeyOfScope(std::string_view scope) {
  std::string_view key = scope.substr(0, scope.find('/'));
  if (key.empty() || key.size() > 128 ||
      !std::all_of(key.begin(), key.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }))
    return "";
  return std::string(key);
}

const std::string* StringMember(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

std::string Text(const json& j, const char* key) {
  const std::string* s = StringMember(j, key);
  return s ? *s : "";
}

// A timestamp member: epoch seconds, as AWS's JSON protocols send them.
Status ReadTime(const json& req, const char* key, EpochMs* out) {
  auto it = req.find(key);
  if (it == req.end()) return Status::Ok();
  if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 1e11)
    return InvalidArgument(std::string(key) + " must be a time in epoch seconds (a number from 0 to 1e11)");
  *out = static_cast<EpochMs>(it->get<double>() * 1000);
  return Status::Ok();
}

constexpr const char* kAttributeKeys[] = {"EventId",      "EventName",   "ReadOnly", "Username",  "Principal", "Action",
                                          "ResourceType", "ResourceName", "EventSource", "AccessKeyId", "ErrorCode"};

// A NextToken is the key of the last record a page scanned: "<20 digits>/<request id>".
bool LooksLikeKey(const std::string& s) {
  if (s.size() < 22 || s.size() > 120 || s[20] != '/') return false;
  for (size_t i = 0; i < 20; ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return std::all_of(s.begin() + 21, s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == '-'; });
}

}  // namespace

std::string ActionOf(const AuditRecord& r) { return r.service + ":" + r.operation; }

bool IsReadOnly(const std::string& operation) {
  static const char* kReadPrefixes[] = {"Describe", "List", "Get", "BatchGet", "Search", "Filter", "Test"};
  for (const char* p : kReadPrefixes)
    if (StartsWith(operation, p)) return true;
  static const char* kOwnReads[] = {"CostReport", "MetricSeries", "SystemMetrics", "Events", "StreamEvents",
                                    "LookupAuditEvents", "WhatIf", "QueueStandings", "ShareHistory"};
  return std::find(std::begin(kOwnReads), std::end(kOwnReads), operation) != std::end(kOwnReads);
}

bool IsDenied(const std::string& error_type) {
  return StartsWith(error_type, "AccessDenied") || error_type == "MissingAuthenticationTokenException" ||
         error_type == "UnrecognizedClientException" || error_type == "InvalidSignatureException" ||
         error_type == "IncompleteSignature" || error_type == "ThrottlingException" ||
         // the S3 endpoint's codes for the same refusals
         error_type == "SignatureDoesNotMatch" || error_type == "InvalidAccessKeyId" ||
         error_type == "RequestTimeTooSkewed" || error_type == "ExpiredToken" || error_type == "InvalidToken" ||
         error_type == "SlowDown";
}

std::vector<AuditResource> ResourcesOf(const std::string& service, const std::string& operation, const json& body) {
  std::vector<AuditResource> out;
  const std::optional<Api> api = ApiOfPrefix(service);
  const Operation* row = api ? FindOperation(*api, operation) : nullptr;
  if (!row || !body.is_object()) return out;
  for (const AuditMember& m : row->audit) {
    auto it = body.find(m.member);
    if (it == body.end()) continue;
    auto add = [&](const json& v) {
      if (v.is_string() && out.size() < kMaxResources)
        out.push_back({std::string(m.type), Capped(v.get_ref<const std::string&>(), kMaxNameChars)});
    };
    if (it->is_array()) {
      for (const auto& v : *it) add(v);
    } else {
      add(*it);
    }
  }
  return out;
}

std::string SourceAddressOf(const http::Request& req, const std::vector<std::string>& trusted_proxies) {
  if (!IsTrusted(req.peer, trusted_proxies)) return req.peer;
  const std::string* forwarded = req.Header("X-Forwarded-For");
  if (!forwarded) return req.peer;
  // Each proxy appends the address it received from: read from the right, past our own proxies.
  std::vector<std::string> hops = Split(*forwarded, ',');
  for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
    std::string hop(Trim(*it));
    if (!LooksLikeAddress(hop)) return req.peer;  // not something a proxy of ours wrote
    if (!IsTrusted(hop, trusted_proxies)) return hop;
  }
  return req.peer;
}

std::string ClaimedAccessKeyId(const http::Request& req) {
  if (const std::string* auth = req.Header("Authorization")) {
    size_t at = auth->find("Credential=");
    if (at == std::string::npos) return "";
    return KeyOfScope(std::string_view(*auth).substr(at + 11));
  }
  auto credential = req.Params("X-Amz-Credential");
  return credential.empty() ? "" : KeyOfScope(credential.front());
}

std::string RenderAuditRecord(const AuditRecord& r, const WireError& outcome) {
  json identity = {{"accessKeyId", r.access_key_id}, {"accountId", r.account_id}};
  if (r.principal == "root") {
    identity["type"] = "Root";
    identity["arn"] = "arn:aws:iam::" + r.account_id + ":root";
    identity["principalId"] = r.account_id;
  } else if (StartsWith(r.principal, "arn:")) {
    identity["type"] = r.principal.find(":assumed-role/") != std::string::npos ? "AssumedRole" : "IAMUser";
    identity["arn"] = r.principal;
  } else {
    identity["type"] = "Unknown";  // not authenticated
  }
  json resources = json::array();
  for (const auto& res : r.resources) resources.push_back({{"type", res.type}, {"name", res.name}});
  const bool denied = IsDenied(outcome.type);
  json doc = {{"eventVersion", "1.08"},
              {"eventTime", FormatIso8601(r.at)},
              {"eventTimeMs", r.at},
              {"eventSource", r.service == "trainyard" ? "trainyard" : r.service + ".amazonaws.com"},
              {"eventName", r.operation},
              {"awsRegion", r.region},
              {"sourceIPAddress", r.source_address},
              {"userAgent", r.user_agent},
              {"requestID", r.request_id},
              {"eventID", r.request_id},
              {"readOnly", IsReadOnly(r.operation)},
              {"eventType", "AwsApiCall"},
              {"managementEvent", true},
              {"recipientAccountId", r.account_id},
              {"userIdentity", std::move(identity)},
              {"action", ActionOf(r)},
              {"principal", r.principal},
              {"resources", std::move(resources)},
              {"httpStatus", outcome.http_status},
              {"denied", denied}};
  if (!outcome.type.empty()) {
    doc["errorCode"] = outcome.type;
    doc["errorMessage"] = Capped(outcome.message, kMaxMessageChars);
  }
  if (r.deciding_statement) doc["decidingStatement"] = Capped(*r.deciding_statement, 4 * kMaxMessageChars);
  // Request text may be invalid UTF-8 (it is recorded before validation): replaced, not refused.
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

StatusOr<AuditQuery> AuditQueryFrom(const json& req) {
  static const char* kMembers[] = {"StartTime", "EndTime", "LookupAttributes", "DeniedOnly", "MaxResults", "NextToken"};
  for (const auto& item : req.items()) {
    const std::string& key = item.key();  // a named variable: lambdas may not capture bindings in C++20
    if (std::find_if(std::begin(kMembers), std::end(kMembers), [&](const char* m) { return key == m; }) == std::end(kMembers))
      return InvalidArgument("Unknown member " + Capped(key, 64) + " (LookupAuditEvents takes StartTime, EndTime, "
                             "LookupAttributes, DeniedOnly, MaxResults and NextToken)");
  }
  AuditQuery q;
  TY_RETURN_IF_ERROR(ReadTime(req, "StartTime", &q.start_ms));
  TY_RETURN_IF_ERROR(ReadTime(req, "EndTime", &q.end_ms));
  if (q.start_ms > q.end_ms) return InvalidArgument("StartTime must not be after EndTime");
  if (auto it = req.find("LookupAttributes"); it != req.end()) {
    if (!it->is_array() || it->size() > 10)
      return InvalidArgument("LookupAttributes must be an array of at most 10 {AttributeKey, AttributeValue} objects");
    for (const auto& a : *it) {
      const std::string* key = a.is_object() ? StringMember(a, "AttributeKey") : nullptr;
      const std::string* value = a.is_object() ? StringMember(a, "AttributeValue") : nullptr;
      if (!key || !value || a.size() != 2)
        return InvalidArgument("LookupAttributes must be an array of at most 10 {AttributeKey, AttributeValue} objects");
      if (std::find_if(std::begin(kAttributeKeys), std::end(kAttributeKeys), [&](const char* k) { return *key == k; }) ==
          std::end(kAttributeKeys))
        return InvalidArgument("LookupAttributes.AttributeKey must be one of EventId, EventName, ReadOnly, Username, "
                               "Principal, Action, ResourceType, ResourceName, EventSource, AccessKeyId, ErrorCode");
      if (value->empty() || value->size() > 2000)
        return InvalidArgument("LookupAttributes.AttributeValue must be 1 to 2000 characters");
      q.attributes.emplace_back(*key, *value);
    }
  }
  if (auto it = req.find("DeniedOnly"); it != req.end()) {
    if (!it->is_boolean()) return InvalidArgument("DeniedOnly must be a boolean");
    q.denied_only = it->get<bool>();
  }
  if (auto it = req.find("MaxResults"); it != req.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 50)
      return InvalidArgument("MaxResults must be an integer from 1 to 50");
    q.max_results = static_cast<size_t>(it->get<int64_t>());
  }
  if (auto it = req.find("NextToken"); it != req.end()) {
    if (!it->is_string() || !LooksLikeKey(it->get<std::string>()))
      return InvalidArgument("NextToken is not a token this server gave");
    q.next_token = it->get<std::string>();
  }
  return q;
}

bool AuditMatches(const AuditQuery& q, const json& r) {
  if (!r.is_object()) return false;
  if (q.denied_only && !r.value("denied", false)) return false;
  auto any_resource = [&](const char* field, const std::string& v) {
    auto it = r.find("resources");
    if (it == r.end() || !it->is_array()) return false;
    for (const auto& res : *it)
      if (res.is_object() && Text(res, field) == v) return true;
    return false;
  };
  for (const auto& [key, v] : q.attributes) {
    bool ok = false;
    if (key == "EventId") ok = Text(r, "eventID") == v;
    else if (key == "EventName") ok = Text(r, "eventName") == v;
    else if (key == "ReadOnly") ok = (r.value("readOnly", false) ? "true" : "false") == v;
    else if (key == "Username" || key == "Principal") ok = Text(r, "principal") == v;
    else if (key == "Action") ok = Text(r, "action") == v;
    else if (key == "ResourceType") ok = any_resource("type", v);
    else if (key == "ResourceName") ok = any_resource("name", v);
    else if (key == "EventSource") ok = Text(r, "eventSource") == v;
    else if (key == "AccessKeyId") ok = r.contains("userIdentity") && Text(r["userIdentity"], "accessKeyId") == v;
    else if (key == "ErrorCode") ok = Text(r, "errorCode") == v;
    if (!ok) return false;
  }
  return true;
}

Response HandleLookupAuditEvents(control::Controller& c, const json& req) {
  auto q = AuditQueryFrom(req);
  if (!q.ok()) return q.status();
  store::EventLog* log = c.events();
  if (!log) return FailedPrecondition("this server keeps no audit records");
  const std::string lowest = store::EventLog::AuditKey(q->start_ms, "");
  std::string below = store::EventLog::AuditKey(q->end_ms + 1, "");
  if (!q->next_token.empty()) {
    if (q->next_token < lowest || q->next_token >= below)
      return InvalidArgument("NextToken does not belong to this StartTime and EndTime");
    below = q->next_token;
  }
  // Newest first, a slice at a time; a page stops at MaxResults matches or after kScan records
  // (then NextToken goes on from there, and a page may hold fewer matches, as CloudTrail's may).
  constexpr size_t kSlice = 200, kScan = 10000;
  json events = json::array();
  size_t scanned = 0;
  std::string last;
  bool more = true;
  while (events.size() < q->max_results && scanned < kScan) {
    std::vector<std::pair<std::string, std::string>> rows;
    TY_RETURN_IF_ERROR(log->ReadAudit(lowest, below, kSlice, &rows));
    for (auto& [key, doc] : rows) {
      ++scanned;
      last = key;
      json r = json::parse(doc, nullptr, false);
      if (!AuditMatches(*q, r)) continue;
      json resources = json::array();
      for (const auto& res : r.value("resources", json::array()))
        resources.push_back({{"ResourceType", Text(res, "type")}, {"ResourceName", Text(res, "name")}});
      events.push_back({{"EventId", Text(r, "eventID")},
                        {"EventName", Text(r, "eventName")},
                        {"EventSource", Text(r, "eventSource")},
                        {"EventTime", static_cast<double>(r.value("eventTimeMs", int64_t{0})) / 1000.0},
                        {"ReadOnly", r.value("readOnly", false) ? "true" : "false"},
                        {"AccessKeyId", r.contains("userIdentity") ? Text(r["userIdentity"], "accessKeyId") : ""},
                        {"Username", Text(r, "principal")},
                        {"Resources", std::move(resources)},
                        {"CloudTrailEvent", std::move(doc)}});
      if (events.size() == q->max_results) break;
    }
    if (events.size() == q->max_results) break;
    if (rows.size() < kSlice) {
      more = false;  // the range is exhausted
      break;
    }
    below = last;
  }
  json out = {{"Events", std::move(events)}};
  if (more && !last.empty()) out["NextToken"] = last;
  return out;
}

AuditedCall::AuditedCall(control::Controller& c, const http::Request& req, Protocol protocol, std::string service,
                         std::string operation)
    : controller_(c), protocol_(protocol) {
  const Config& config = c.config();
  record_.at = c.Now();
  record_.request_id = NewUuid();
  record_.access_key_id = ClaimedAccessKeyId(req);  // until authentication says whose it is
  record_.service = std::move(service);
  record_.operation = Capped(operation, 128);
  record_.source_address = SourceAddressOf(req, config.audit_trusted_proxies);
  if (const std::string* agent = req.Header("User-Agent")) record_.user_agent = Capped(*agent, kMaxNameChars);
  record_.region = config.region;
  record_.account_id = config.account_id;
  pending_.key = store::EventLog::AuditKey(record_.at, record_.request_id);
  pending_.at = record_.at;
  // Runs on the controller thread while this call's thread waits for the command.
  pending_.render = [this](const Status& outcome) { return RenderAuditRecord(record_, ToWireError(protocol_, outcome)); };
}

void AuditedCall::SetBody(const json& body) { record_.resources = ResourcesOf(record_.service, record_.operation, body); }

std::optional<control::AuditScope> AuditedCall::OfferToCommand() {
  if (IsReadOnly(record_.operation) && !controller_.config().audit_record_reads) return std::nullopt;
  return std::optional<control::AuditScope>(std::in_place, &pending_);
}

bool AuditedCall::Recorded(const WireError& outcome) const {
  return !IsReadOnly(record_.operation) || controller_.config().audit_record_reads || IsDenied(outcome.type);
}

void AuditedCall::Finish(const Status& outcome) {
  if (pending_.taken) return;  // stored with the command's own commit
  WireError e = ToWireError(protocol_, outcome);
  if (!Recorded(e)) return;
  Status st = controller_.RecordAudit(pending_.key, pending_.at, RenderAuditRecord(record_, e));
  if (!st.ok())
    spdlog::error("the audit record of {} (request {}) was not stored: {}", ActionOf(record_), record_.request_id,
                  st.message());
}

}  // namespace ty::api
