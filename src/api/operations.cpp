// The operation tables' common part (api/operations.h), and trainyard's own endpoints' table.
#include "api/operations.h"

#include "api/audit.h"
#include "api/events.h"
#include "api/service_model.h"

namespace ty::api {

using nlohmann::json;

OperationTable::OperationTable(Api api, std::string_view signing_name, const ServiceModel* model,
                               std::vector<Operation> rows)
    : api_(api), signing_name_(signing_name), model_(model), rows_(std::move(rows)) {}

const Operation* OperationTable::Find(std::string_view name) const {
  for (const Operation& row : rows_)
    if (row.name == name) return &row;
  return nullptr;
}

Response OperationTable::Serve(control::Controller& c, std::string_view operation, const json& request,
                               const std::string& caller) const {
  const Operation* row = Find(operation);
  if (!row) return Status(Code::kUnknownOperation, "Operation " + std::string(operation) + " is not supported by this server");
  const json carried = ParseCarried(row, request);
  return row->handle({c, request, carried, caller});
}

json ParseCarried(const Operation* row, const json& request) {
  if (!row || row->access.carries.member.empty()) return json();
  auto it = request.find(row->access.carries.member);
  if (it == request.end() || !it->is_string()) return json();
  json carried = json::parse(it->get_ref<const std::string&>(), nullptr, false);
  return carried.is_object() ? carried : json();
}

// trainyard's own operations: POST to the path, signed as "sagemaker" (Events: "events"); the
// console calls them by name, the CLI by OwnOperationPath (docs/api-coverage.md).
const OperationTable& TrainyardOperations() {
  static const OperationTable kTable(Api::kTrainyard, "sagemaker", nullptr, {
      {.name = "GetLogs", .handle = Plain<HandleGetLogs>,
       .access = {.resource = ResourceKind::kTrainingJob, .field = "trainingJobName"},
       .audit = {{"trainingJobName", "AWS::SageMaker::TrainingJob"}}, .path = "/trainyard/v1/logs"},
      // Test-only: moves every clock of the server, so it acts on no one resource.
      {.name = "AdvanceClock", .handle = Plain<HandleAdvanceClock>, .path = "/trainyard/v1/admin/advance-clock"},
      {.name = "Interrupt", .handle = Plain<HandleInterrupt>,
       .access = {.resource = ResourceKind::kTrainingJob, .field = "TrainingJobName"},
       .audit = {{"TrainingJobName", "AWS::SageMaker::TrainingJob"}}, .path = "/trainyard/v1/admin/interrupt"},
      {.name = "MetricSeries", .handle = Plain<HandleMetricSeries>,
       .access = {.resource = ResourceKind::kTrainingJob, .field = "TrainingJobName"},
       .audit = {{"TrainingJobName", "AWS::SageMaker::TrainingJob"}}, .path = "/trainyard/v1/metric-series"},
      {.name = "SystemMetrics", .handle = Plain<HandleSystemMetrics>,
       .access = {.resource = ResourceKind::kTrainingJob, .field = "TrainingJobName"},
       .audit = {{"TrainingJobName", "AWS::SageMaker::TrainingJob"}}, .path = "/trainyard/v1/system-metrics"},
      {.name = "CostReport", .handle = Plain<HandleCostReport>, .audit = {{"JobQueue", "AWS::Batch::JobQueue"}},
       .path = "/trainyard/v1/costs"},
      {.name = "WhatIf", .handle = Plain<HandleWhatIf>, .audit = {{"JobQueue", "AWS::Batch::JobQueue"}},
       .path = "/trainyard/v1/what-if"},
      {.name = "LookupAuditEvents", .handle = Plain<HandleLookupAuditEvents>, .path = "/trainyard/v1/admin/audit"},
      {.name = "DescribeCapacity", .handle = Plain<HandleDescribeCapacity>, .path = "/trainyard/v1/admin/capacity"},
      {.name = "QueueStandings", .handle = Plain<HandleQueueStandings>, .audit = {{"JobQueue", "AWS::Batch::JobQueue"}},
       .path = "/trainyard/v1/queue-standings"},
      {.name = "ShareHistory", .handle = Plain<HandleShareHistory>, .audit = {{"JobQueue", "AWS::Batch::JobQueue"}},
       .path = "/trainyard/v1/share-history"},
      // Replay from a cursor with long polling (docs/events.md); read with the event stream's key.
      {.name = "Events", .handle = Plain<HandleEvents>, .path = "/trainyard/v1/events", .signed_as = "events"},
  });
  return kTable;
}

std::span<const OperationTable* const> AllOperationTables() {
  static const OperationTable* const kTables[] = {&BatchOperations(),       &SageMakerOperations(),
                                                  &LogsOperations(),        &EventBridgeOperations(),
                                                  &TrainyardOperations(),   &IamAdminOperations()};
  return kTables;
}

const Operation* FindOperation(Api api, std::string_view name) {
  for (const OperationTable* table : AllOperationTables())
    if (table->api() == api)
      if (const Operation* row = table->Find(name)) return row;
  return nullptr;
}

std::optional<Api> ApiOfPrefix(std::string_view prefix) {
  for (Api api : {Api::kBatch, Api::kSageMaker, Api::kLogs, Api::kTrainyard, Api::kEvents})
    if (ActionPrefix(api) == prefix) return api;
  return std::nullopt;
}

}  // namespace ty::api
