// Wire encodings shared between the API handlers and the events they mirror (docs/events.md).
#pragma once

#include <nlohmann/json.hpp>

#include "control/events.h"
#include "control/state.h"
#include "core/config.h"

namespace ty::api {

// Batch's tags map ({"key": "value"}).
nlohmann::json EncodeTags(const Tags& tags);

// DescribeServiceJob's response for one job (Batch, lowerCamelCase, epoch ms) as an event's
// detail: without tags, serviceRequestPayload and the status history (Batch's service job events).
nlohmann::json EncodeServiceJobEventDetail(const control::State& s, const control::ServiceJobState& js);
// DescribeTrainingJob's response for one job (SageMaker, PascalCase, epoch seconds) as an event's
// detail: with the job's Tags.
nlohmann::json EncodeTrainingJobEventDetail(const TrainingJob& tj, EpochMs now);
// DescribeHyperParameterTuningJob's reply with the job's Tags: the detail of its state-change
// events. Call under Controller::Read (or on the controller thread).
nlohmann::json EncodeTuningJobEventDetail(const control::State& s, const control::TuningJob& tuning, EpochMs now);

// Renders an event trigger as its stored document (control::EventRenderer).
std::string RenderEvent(const Config& config, const control::State& s, const control::EventTrigger& e, uint64_t seq);

}  // namespace ty::api
