// The JSON forms of a TrainingSpec (core/training_spec.h), for the code that holds a request's
// JSON already: api/ where a request is accepted and described, and the stored documents.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "core/training_spec.h"

namespace ty {

// `req` (a CreateTrainingJob request, or a spec's stored form) decoded; members of the wrong type
// read as absent. False: not an object.
bool DecodeTrainingSpec(const nlohmann::json& req, TrainingSpec* out);

// The spec's stored form: a CreateTrainingJob request holding exactly the spec's members, which
// DecodeTrainingSpec reads back to an equal spec.
nlohmann::json EncodeTrainingSpec(const TrainingSpec& spec);

// What DescribeTrainingJob and DescribeServiceJob echo of a job whose spec was made from
// `request` (as accepted) and may have been given new values since: a ladder's rung
// (ResourceConfig.InstanceType, EnableManagedSpotTraining, StoppingCondition.MaxWaitTimeInSeconds,
// Tags), a tuning trial (TrainingJobName, HyperParameters, CheckpointConfig.S3Uri, Tags),
// UpdateTrainingJob (ResourceConfig.KeepAlivePeriodInSeconds). `request` is returned unchanged
// when its spec is `spec`; otherwise those members are replaced by the spec's.
nlohmann::json EchoTrainingRequest(nlohmann::json request, const TrainingSpec& spec);

}  // namespace ty
