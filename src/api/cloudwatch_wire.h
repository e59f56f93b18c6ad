// CloudWatch's request members, read and checked (api/cloudwatch_api.cpp and
// api/cloudwatch_alarms.cpp share them): each refusal names the member by its query-protocol path
// ("MetricDataQueries.member.2.Id") and the rule, in AWS's wording, so the aws CLI prints a
// sentence. Internal to ty_api.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "control/cloudwatch_read.h"
#include "core/status.h"

namespace ty::api::cw {

Status Missing(const std::string& member);
Status Invalid(const std::string& member, const std::string& rule);

// A string member `where + key` of length [min, max]; "" when absent and not required.
StatusOr<std::string> String(const nlohmann::json& o, const std::string& key, const std::string& where, bool required,
                             size_t min, size_t max);
// A timestamp member (epoch seconds on the wire) in ms; `fallback` when absent and not required.
StatusOr<EpochMs> Time(const nlohmann::json& o, const std::string& key, bool required, EpochMs fallback);
// Dimensions (at most 30, sorted by name). `filter`: values may be empty (ListMetrics).
StatusOr<control::CwDimensions> Dimensions(const nlohmann::json& o, const std::string& where, bool filter);
// Namespace, MetricName and Dimensions of `o`.
StatusOr<control::CwMetricId> Metric(const nlohmann::json& o, const std::string& where);
// One MetricDataQuery at `at` ("MetricDataQueries.member.N.").
StatusOr<control::CwQuery> Query(const nlohmann::json& q, const std::string& at);
// A CloudWatch unit ("Seconds", "Count", ... "None").
bool IsUnit(const std::string& unit);
// An optional integer member in [min, max]; `fallback` when absent.
StatusOr<int64_t> Integer(const nlohmann::json& o, const std::string& key, const std::string& where, int64_t min,
                          int64_t max, int64_t fallback);

}  // namespace ty::api::cw

namespace ty::control {
class Controller;
}

namespace ty::api::cw {

// Whether the caller of a request may read a metric's series (docs/security.md, "CloudWatch
// metrics"): Ok, or AccessDenied naming the action and resource. Called under the controller's
// state read; one check may remember its answers for the rest of its request.
using MetricReadCheck = std::function<Status(const control::State&, const control::CwMetricId&)>;

// One row of CloudWatch's operation table (CloudWatch's counterpart of api/operations.h: its
// requests come in three protocols, and every operation is authorized alike, as
// cloudwatch:<name> on "*", since CloudWatch has no metric ARNs, and its audit record names no
// resource). A read is checked again per series it reads (`may_read`); an operation that changes
// something has its audit record stored with its command (AuditedCall::OfferToCommand decides by
// the name, as for every service).
struct Operation {
  std::string_view name;
  StatusOr<nlohmann::json> (*serve)(control::Controller& c, const nlohmann::json& req, const MetricReadCheck& may_read);
  // The request member whose value is the cloudwatch:namespace condition key ("" : none; AWS sets
  // it for PutMetricData only).
  std::string_view namespace_member = {};
  // The error type its model names for Code::kLimitExceeded, where it is not CloudWatch's own
  // (PutMetricAlarm: LimitExceededFault, which boto3 raises as cw.exceptions.LimitExceededFault).
  std::string_view limit_exceeded_type = {};
};
// Every operation served, metrics then alarms (api/cloudwatch_api.cpp).
std::span<const Operation> Operations();
const Operation* FindOperation(std::string_view name);
// The alarm rows (api/cloudwatch_alarms.cpp). PutMetricAlarm is refused for a metric the caller
// may not read; DescribeAlarms and DescribeAlarmsForMetric leave out the alarms on one.
std::span<const Operation> AlarmOperations();

// The query protocol (api/cloudwatch_query.cpp): the members of a GET's query and a POST's form
// body (Action goes to *action; Version must be 2010-08-01), typed by member name; and the XML
// reply of `action` carrying `result`.
StatusOr<nlohmann::json> QueryMembers(std::string_view query, std::string_view form, std::string* action);
std::string QueryReply(const std::string& action, const nlohmann::json& result, const std::string& request_id);

}  // namespace ty::api::cw
