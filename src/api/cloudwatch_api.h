// CloudWatch's metrics API (docs/metrics.md, "The CloudWatch API"): PutMetricData, ListMetrics,
// GetMetricStatistics and GetMetricData for requests signed for service `monitoring`, in the
// protocols AWS's SDKs send it: Smithy RPC v2 CBOR (POST /service/GraniteServiceVersion20100801/
// operation/<Op>, what botocore 1.43 sends), AWS JSON 1.0 (X-Amz-Target:
// GraniteServiceVersion20100801.<Op>) and the query protocol (Action=<Op>, older SDKs;
// api/cloudwatch_query.cpp); and the alarm operations (api/cloudwatch_alarms.cpp). Each call is
// authorized as `cloudwatch:<Op>` and audited.
//
// What it reads: users' own namespaces (control/cloudwatch_metrics.h) and
// /aws/sagemaker/TrainingJobs, a training job's MetricDefinitions series and system metrics per
// Host "<job>/algo-<n>" (read from the controller's series, never copied).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "api/authorize.h"
#include "core/status.h"
#include "http/server.h"

namespace ty::control {
class Controller;
}

namespace ty::api {

struct AuditRecord;

// True for a request in one of CloudWatch's protocols (by path or X-Amz-Target).
bool IsCloudWatchRequest(const http::Request& req);

using CloudWatchAuthenticate = std::function<StatusOr<Principal>(AuditRecord* who)>;
http::Response ServeCloudWatch(const http::Request& req, control::Controller& controller, const Authorizer& authz,
                               const CloudWatchAuthenticate& authenticate, const CallContext& ctx);

// The codec, exposed for tests. A timestamp in a reply is a binary value of subtype 1 holding the
// epoch seconds as a native double (CwTimestamp): CBOR writes it as tag 1 over a float, JSON as a
// number. nlohmann-json reads CBOR but cannot write a tag over a number, hence EncodeCbor.
nlohmann::json CwTimestamp(double epoch_seconds);
std::string EncodeCbor(const nlohmann::json& value);
// A CBOR request body as JSON (tags dropped: a tag-1 timestamp reads as its number); refused past
// `max_depth` nested arrays and maps, before any recursion.
StatusOr<nlohmann::json> DecodeCbor(std::string_view body, int max_depth);

}  // namespace ty::api
