// The audit trail (docs/security.md, "Audit"): who made which API call, on what, from where, and
// how it ended. Every call whose operation mutates is recorded whatever its outcome, and every call
// refused for its credentials, its permissions or its rate; successful reads are not (unless
// [audit] record_reads). Each record is stored with the state (with the commit of the call's own
// change where it made one: control/audit.h) and published as an "AWS API Call via CloudTrail"
// event; admins read them with LookupAuditEvents (POST /trainyard/v1/admin/audit).
//
// Records are CloudTrail records (eventTime, eventSource, eventName, userIdentity,
// sourceIPAddress, userAgent, requestID, errorCode, ...) with trainyard's own fields beside them
// (action, principal, resources, httpStatus, denied, decidingStatement).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/handlers.h"
#include "control/audit.h"
#include "core/config.h"
#include "core/model.h"

namespace ty::http {
struct Request;
}

namespace ty::api {

struct AuditResource {
  std::string type;  // "AWS::Batch::JobQueue", "AWS::SageMaker::TrainingJob", ..., "ARN"
  std::string name;  // as the request names it: a name or an ARN
};

// What the request path knows of one call.
struct AuditRecord {
  EpochMs at = 0;
  std::string request_id;     // the x-amzn-RequestId of the response
  std::string principal;      // "root" (the root key), a principal's ARN, or "" when not authenticated
  std::string access_key_id;  // as verified; for a refused signature, the one the request claimed
  std::string service;        // action prefix: "batch", "sagemaker", "logs" or "trainyard" (its own endpoints)
  std::string operation;      // "SubmitServiceJob"
  std::vector<AuditResource> resources;
  std::string source_address;
  std::string user_agent;
  std::string region;
  std::string account_id;
  // The policy statement that decided a refusal, when the refusal names one.
  std::optional<std::string> deciding_statement;
};

// "batch:SubmitServiceJob".
std::string ActionOf(const AuditRecord& r);
// Reads: operations named Describe*, List*, Get*, BatchGet*, Search*, Filter* (FilterLogEvents),
// and trainyard's own reads (CostReport, MetricSeries, SystemMetrics, Events, StreamEvents,
// LookupAuditEvents, QueueStandings, ShareHistory). Everything else mutates.
bool IsReadOnly(const std::string& operation);
// Refusals for the caller's credentials, permissions or rate: AccessDenied*, the signature and
// key errors, ThrottlingException.
bool IsDenied(const std::string& error_type);
// The resources a request names: the members its operation's row lists (Operation::audit,
// api/operations.h), in the row's order; none for an operation without a row (STS, CloudWatch).
std::vector<AuditResource> ResourcesOf(const std::string& service, const std::string& operation,
                                       const nlohmann::json& body);
// The client's address: the peer's, or, when the peer is one of `trusted_proxies`, the last
// address of X-Forwarded-For that is not itself a trusted proxy.
std::string SourceAddressOf(const http::Request& req, const std::vector<std::string>& trusted_proxies);
// The access key id a request claims (Authorization's Credential=, or X-Amz-Credential in the
// query), whether or not its signature holds; "" when it names none. Never the secret.
std::string ClaimedAccessKeyId(const http::Request& req);

// The stored document of `r`, ended with `outcome` (an error's wire type, message and status; a
// success has an empty type and status 200).
std::string RenderAuditRecord(const AuditRecord& r, const WireError& outcome);

// A LookupAuditEvents request (CloudTrail's LookupEvents, with trainyard's extensions).
struct AuditQuery {
  EpochMs start_ms = 0;           // StartTime (inclusive)
  EpochMs end_ms = INT64_MAX / 2;  // EndTime (inclusive)
  // LookupAttributes, all of which must hold: AttributeKey -> AttributeValue.
  std::vector<std::pair<std::string, std::string>> attributes;
  bool denied_only = false;  // DeniedOnly: refused calls only
  size_t max_results = 50;   // MaxResults, 1..50
  std::string next_token;    // NextToken: the key of the last record scanned
};
// Parses and checks a request; ValidationException naming the member otherwise.
StatusOr<AuditQuery> AuditQueryFrom(const nlohmann::json& req);
// Whether a stored record passes the query's attributes and DeniedOnly (not its time range).
bool AuditMatches(const AuditQuery& q, const nlohmann::json& record);

// POST /trainyard/v1/admin/audit: {"StartTime"?, "EndTime"? (epoch seconds or ISO-8601),
// "LookupAttributes"?: [{"AttributeKey","AttributeValue"}], "DeniedOnly"?, "MaxResults"?,
// "NextToken"?} -> {"Events": [{"EventId","EventName","EventSource","EventTime","ReadOnly",
// "AccessKeyId","Username","Resources","CloudTrailEvent"}], "NextToken"?}, newest first.
Response HandleLookupAuditEvents(control::Controller& c, const nlohmann::json& req);

// One call's audit record from the request's arrival to its answer, in the request path
// (api/server.cpp): the request id the response carries, whether the call is recorded, and
// where its record is stored.
class AuditedCall {
 public:
  // `service` is the action's prefix (AuditRecord::service); `protocol` shapes the outcome of a
  // command that takes the record.
  AuditedCall(control::Controller& c, const http::Request& req, Protocol protocol, std::string service,
              std::string operation);

  const std::string& request_id() const { return record_.request_id; }
  // Authentication and authorization fill in who is calling (and a refusal's deciding statement).
  AuditRecord& record() { return record_; }
  // Names the resources from the parsed request body.
  void SetBody(const nlohmann::json& body);

  // While the returned scope lives, the first command the handler queues stores the record with
  // its own change (control/audit.h). Only a call that is recorded whatever its outcome (a
  // mutating one, or any with [audit] record_reads) offers its record so.
  std::optional<control::AuditScope> OfferToCommand();

  // The call is answered with `outcome`: a call that is recorded and whose record no command took
  // is stored now, in a commit of its own, before the answer goes out. Call once, after the scope
  // from OfferToCommand has ended.
  void Finish(const Status& outcome);

 private:
  bool Recorded(const WireError& outcome) const;

  control::Controller& controller_;
  const Protocol protocol_;
  AuditRecord record_;
  control::PendingAudit pending_;
};

}  // namespace ty::api
