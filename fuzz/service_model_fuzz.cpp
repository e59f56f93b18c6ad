// Request validation against the embedded AWS service models (api/service_model.h): any JSON body
// for any operation, including the ValidationException message rendered from it.
//
// Input: "<service>:<Operation>" on the first line (service "batch" or "sagemaker"), then the
// request body. A body that is not JSON is what the server refuses before validating; it is
// skipped here. An unknown service or operation validates the body against CreateTrainingJob.
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "api/service_model.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [head, body] = ty::fuzz::SplitFirstLine(ty::fuzz::AsText(data, size));
  size_t colon = head.find(':');
  std::string_view service = head.substr(0, colon);
  std::string_view op_name = colon == std::string_view::npos ? std::string_view() : head.substr(colon + 1);

  const ty::api::ServiceModel* model =
      service == "batch" ? &ty::api::ServiceModel::Batch() : &ty::api::ServiceModel::SageMaker();
  const ty::api::ServiceModel::Operation* op = model->FindOperation(op_name);
  if (op == nullptr) {
    model = &ty::api::ServiceModel::SageMaker();
    op = model->FindOperation("CreateTrainingJob");
  }
  if (op == nullptr) abort();

  nlohmann::json input = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (input.is_discarded()) return 0;
  ty::Status st = model->ValidateInput(*op, input);
  // Validation errors are ValidationException (kInvalidArgument); anything else (an exception
  // turned into kInternal) means the validator met input it does not handle.
  if (!st.ok() && st.code() != ty::Code::kInvalidArgument) {
    std::fprintf(stderr, "ValidateInput(%s): %s\n", op->name.c_str(), st.message().c_str());
    abort();
  }
  return 0;
}
