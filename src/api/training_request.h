// A CreateTrainingJob request (or a service job's serviceRequestPayload) accepted: checked
// against what this host can run (its instance catalogue, URIs, file systems, sandbox and script
// mode) and decoded into the training spec (core/training_spec.h), the one typed form the
// controller holds. It runs where a request is decoded (api/decode.h), after model validation;
// its errors are the ValidationException messages the client sees.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>

#include "control/commands.h"
#include "core/config.h"
#include "core/status.h"

namespace ty::api {

// `req` checked and decoded into the request's spec (its `json` is left to the caller: a service
// job keeps its payload as submitted). `sandbox` is the resolved sandbox mode ("bwrap" or "none";
// Controller::sandbox()).
StatusOr<control::TrainingRequest> AcceptTrainingRequest(const nlohmann::json& req, const Config& config,
                                                         const std::string& sandbox);

}  // namespace ty::api
