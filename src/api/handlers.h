// trainyard's own operations' handlers (the rows of TrainyardOperations(), api/operations.h): map
// validated wire requests onto controller calls and encode replies. No business logic lives here.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace ty::control {
class Controller;
}

namespace ty::api {

using Response = StatusOr<nlohmann::json>;

// trainyard's own read of a training job's log (POST /trainyard/v1/logs, signed as "sagemaker").
Response HandleGetLogs(control::Controller& c, const nlohmann::json& req);
// Test-only: moves the server's clock on (POST /trainyard/v1/admin/advance-clock, {"seconds": N},
// signed as "sagemaker"); refused unless the server runs with --clock=offset.
Response HandleAdvanceClock(control::Controller& c, const nlohmann::json& req);

// A spot interruption of a training job (POST /trainyard/v1/admin/interrupt, {"TrainingJobName": N}).
Response HandleInterrupt(control::Controller& c, const nlohmann::json& req);
// What training jobs cost at the catalogue's prices, per job and per queue and share
// (POST /trainyard/v1/costs, {"JobQueue": optional filter}; docs/spot.md).
Response HandleCostReport(control::Controller& c, const nlohmann::json& req);
// What the host offers per capacity key (configured, what the executor's cluster reports, in use,
// free) and the cluster's nodes with why each unusable one is (POST /trainyard/v1/admin/capacity,
// {}; docs/slurm-capacity.md).
Response HandleDescribeCapacity(control::Controller& c, const nlohmann::json& req);
// The time series of a training job's MetricDefinitions, as parsed from its logs
// (POST /trainyard/v1/metric-series, {"TrainingJobName", "MetricName"?, "StartTime"?, "EndTime"?}).
Response HandleMetricSeries(control::Controller& c, const nlohmann::json& req);
// The system metrics sampled on each instance of a training job, per Host and MetricName
// (POST /trainyard/v1/system-metrics, {"TrainingJobName", "Host"?, "MetricName"?, "StartTime"?,
// "EndTime"?}; docs/metrics.md, "System metrics").
Response HandleSystemMetrics(control::Controller& c, const nlohmann::json& req);

// A job queue's recent history replayed through the simulator with its current settings and with
// changed share weights, quotas or capacity, beside what happened (POST /trainyard/v1/what-if;
// what_if.h, docs/simulate.md "What if").
Response HandleWhatIf(control::Controller& c, const nlohmann::json& req);
// The console's queue data (console_data.cpp; docs/api-coverage.md). Where each queue's shares
// stand now: per queue its kind, state, unfinished jobs per status and per share what it holds,
// is entitled to, borrows, lends and has waiting (POST /trainyard/v1/queue-standings,
// {"JobQueue"?}); the same figures as GET /metrics' share gauges.
Response HandleQueueStandings(control::Controller& c, const nlohmann::json& req);
// A queue's sampled share standings, oldest first (POST /trainyard/v1/share-history,
// {"JobQueue", "StartTime"?, "EndTime"?}; in memory, [console] share_history_interval_seconds).
Response HandleShareHistory(control::Controller& c, const nlohmann::json& req);


}  // namespace ty::api
