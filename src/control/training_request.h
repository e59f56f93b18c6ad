// The check of a CreateTrainingJob request (or a service job's serviceRequestPayload) against
// what this host can run: its instance catalogue, URIs, file systems, sandbox and script mode.
// api/ calls it while decoding a request (api/decode.h), after model validation; its errors are
// the ValidationException messages the client sees.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>

#include "core/config.h"
#include "core/status.h"

namespace ty::control {

// `sandbox` is the resolved sandbox mode ("bwrap" or "none"; Controller::sandbox()).
Status CheckTrainingRequest(const nlohmann::json& req, const Config& config, const std::string& sandbox);

}  // namespace ty::control
