// CloudWatch's request members, read and checked (api/cloudwatch_api.cpp and
// api/cloudwatch_alarms.cpp share them): each refusal names the member by its query-protocol path
// ("MetricDataQueries.member.2.Id") and the rule, in AWS's wording, so the aws CLI prints a
// sentence. Internal to ty_api.
#pragma once

#include <cstdint>
#include <functional>
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

// The alarm operations (api/cloudwatch_alarms.cpp). PutMetricAlarm is refused for a metric the
// caller may not read; DescribeAlarms and DescribeAlarmsForMetric leave out the alarms on one.
bool IsAlarmOperation(const std::string& op);
bool ChangesAlarms(const std::string& op);  // stored with the command's own commit (audit)
StatusOr<nlohmann::json> ServeAlarmOperation(control::Controller& c, const std::string& op, const nlohmann::json& req,
                                             const MetricReadCheck& may_read);

// The query protocol (api/cloudwatch_query.cpp): the members of a GET's query and a POST's form
// body (Action goes to *action; Version must be 2010-08-01), typed by member name; and the XML
// reply of `action` carrying `result`.
StatusOr<nlohmann::json> QueryMembers(std::string_view query, std::string_view form, std::string* action);
std::string QueryReply(const std::string& action, const nlohmann::json& result, const std::string& request_id);

}  // namespace ty::api::cw
