// One operation table per service: each row is everything that varies by operation, so adding an
// operation is adding one row (docs/design/layout.md, "Adding an operation"). A row says how the
// operation is served (its handler: decode, the controller's command or read, encode), who may
// call it (its OperationAccess, read by api/authorize.cpp), which resources its audit record
// names (api/audit.cpp) and how the request path treats it (server.cpp: its path, placement
// across regions, the deliveries it changes). server.cpp routes by looking a row up; an
// operation is implemented when it has a row. tests/unit/operations_test.cpp checks every table
// against the service's embedded model and docs/api-coverage.md.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/authorize.h"
#include "api/handlers.h"

namespace ty::api {

class ServiceModel;

// One validated request, as its handler receives it.
struct OperationCall {
  control::Controller& controller;
  const nlohmann::json& request;  // passed validation; rest-json's path and query members merged in
  const nlohmann::json& carried;  // the request it carries, parsed once (ParseCarried); null if none
  const std::string& caller;      // the signer's ARN: trainyard:JobOwner of what the call creates
};
using OperationHandler = Response (*)(const OperationCall&);

// A request member that names a resource the call acts on, and the resource's CloudTrail type
// ("AWS::Batch::JobQueue"; "ARN" for any ARN). Its string value (or each string of an array) is
// recorded in the audit record, in the row's order.
struct AuditMember {
  std::string_view member;
  std::string_view type;
};

struct Operation {
  std::string_view name;  // as AWS names it: "SubmitServiceJob"
  OperationHandler handle = nullptr;
  OperationAccess access = {};
  // What the audit record names. Empty only for an operation that acts on no one resource.
  std::vector<AuditMember> audit = {};
  // trainyard's own operations: the POST path that routes to it.
  std::string_view path = {};
  // The SigV4 service the request must be signed for, when it is not the table's.
  std::string_view signed_as = {};
  // Placement across regions (api/forward.h, docs/regions.md): a request tagged
  // trainyard:candidate-regions may be sent to the best peer region.
  bool placeable = false;
  // EventBridge: a success changes rules or targets, so the webhook deliveries are synced.
  bool changes_deliveries = false;
};

class OperationTable {
 public:
  // `model`: the embedded AWS model the requests are validated against (null: members are
  // checked by the handlers). `signing_name`: the SigV4 service of its requests.
  OperationTable(Api api, std::string_view signing_name, const ServiceModel* model, std::vector<Operation> rows);

  Api api() const { return api_; }
  std::string_view signing_name() const { return signing_name_; }
  const ServiceModel* model() const { return model_; }
  std::span<const Operation> rows() const { return rows_; }
  // The row of `name`; null when the table has none (not implemented).
  const Operation* Find(std::string_view name) const;

  // Serves one request that passed validation through its row (in-process callers and tests; the
  // server routes through Find): kUnknownOperation when there is no row.
  Response Serve(control::Controller& c, std::string_view operation, const nlohmann::json& request,
                 const std::string& caller = {}) const;

 private:
  Api api_;
  std::string_view signing_name_;
  const ServiceModel* model_;
  std::vector<Operation> rows_;  // constant after construction
};

// The tables. Batch (batch_api.cpp), SageMaker with its tuning rows (sagemaker_api.cpp,
// tuning_api.cpp), CloudWatch Logs (logs_api.cpp), EventBridge (eventbridge_api.cpp), trainyard's
// own endpoints (operations.cpp) and its IAM admin endpoints (iam_api.cpp, routed under
// /trainyard/v1/admin/iam/<Operation>). Built on first use, constant after.
const OperationTable& BatchOperations();
const OperationTable& SageMakerOperations();
const OperationTable& LogsOperations();
const OperationTable& EventBridgeOperations();
const OperationTable& TrainyardOperations();
const OperationTable& IamAdminOperations();
std::span<const OperationTable* const> AllOperationTables();
// The tuning rows of the SageMaker table (tuning_api.cpp).
std::vector<Operation> TuningOperationRows();

// The row of an operation of `api` (trainyard's own and its IAM admin tables share Api::kTrainyard).
const Operation* FindOperation(Api api, std::string_view name);
// The Api whose action prefix is `prefix` ("batch", ...); nullopt for any other.
std::optional<Api> ApiOfPrefix(std::string_view prefix);

// The request `request` carries for its row (access.carries), parsed: an object, or null when the
// row carries none or the member is not JSON text of an object (validation speaks for that).
nlohmann::json ParseCarried(const Operation* row, const nlohmann::json& request);

// Handler adapters for rows. Plain<F>: a read or a call that takes the request as it is.
template <Response (*F)(control::Controller&, const nlohmann::json&)>
Response Plain(const OperationCall& x) {
  return F(x.controller, x.request);
}

}  // namespace ty::api
