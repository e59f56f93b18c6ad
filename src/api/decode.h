// Decoding of model-validated requests into the controller's typed commands (control/commands.h).
//
// Each decoder runs on the API thread right after model validation and checks what the model
// cannot (ranges, cross-field rules, the host's instance catalogue), in the order the checks have
// always run, so the first problem of a request is the one reported. Its errors are
// ValidationExceptions (Code::kInvalidArgument) or LimitExceeded, with AWS's wording where AWS
// has one. A command it returns can no longer fail on a JSON type: the controller thread never
// sees JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>

#include "control/commands.h"
#include "core/config.h"
#include "core/status.h"

namespace ty::api {

// What decoding a training request needs to know of the host.
struct HostFacts {
  const Config& config;
  std::string sandbox;  // "bwrap" or "none"
};

// REQUIRES (all): `req` passed model validation for its operation.
StatusOr<control::CreateServiceEnvironmentCommand> DecodeCreateServiceEnvironment(const nlohmann::json& req);
StatusOr<control::UpdateServiceEnvironmentCommand> DecodeUpdateServiceEnvironment(const nlohmann::json& req);
StatusOr<control::DeleteServiceEnvironmentCommand> DecodeDeleteServiceEnvironment(const nlohmann::json& req);
StatusOr<control::CreateJobQueueCommand> DecodeCreateJobQueue(const nlohmann::json& req);
StatusOr<control::UpdateJobQueueCommand> DecodeUpdateJobQueue(const nlohmann::json& req);
StatusOr<control::DeleteJobQueueCommand> DecodeDeleteJobQueue(const nlohmann::json& req);
StatusOr<control::CreateSchedulingPolicyCommand> DecodeCreateSchedulingPolicy(const nlohmann::json& req);
StatusOr<control::UpdateSchedulingPolicyCommand> DecodeUpdateSchedulingPolicy(const nlohmann::json& req);
StatusOr<control::DeleteSchedulingPolicyCommand> DecodeDeleteSchedulingPolicy(const nlohmann::json& req);
// RegisterJobDefinition: type container only, containerProperties for EC2 resources, held to the
// rules of docs/user-guide.md, "Job definitions".
StatusOr<control::RegisterJobDefinitionCommand> DecodeRegisterJobDefinition(const nlohmann::json& req);
StatusOr<control::DeregisterJobDefinitionCommand> DecodeDeregisterJobDefinition(const nlohmann::json& req);
// Compute environments and container jobs (docs/batch-jobs.md).
StatusOr<control::CreateComputeEnvironmentCommand> DecodeCreateComputeEnvironment(const nlohmann::json& req);
StatusOr<control::UpdateComputeEnvironmentCommand> DecodeUpdateComputeEnvironment(const nlohmann::json& req);
StatusOr<control::DeleteComputeEnvironmentCommand> DecodeDeleteComputeEnvironment(const nlohmann::json& req);
std::vector<control::EnvironmentRef> DecodeComputeOrder(const nlohmann::json& order);
StatusOr<control::SubmitJobCommand> DecodeSubmitJob(const nlohmann::json& req);
// CancelJob (terminate false) and TerminateJob.
StatusOr<control::StopJobCommand> DecodeStopJob(const nlohmann::json& req, bool terminate);
StatusOr<control::CreateQuotaShareCommand> DecodeCreateQuotaShare(const nlohmann::json& req);
StatusOr<control::UpdateQuotaShareCommand> DecodeUpdateQuotaShare(const nlohmann::json& req);
StatusOr<control::DeleteQuotaShareCommand> DecodeDeleteQuotaShare(const nlohmann::json& req);
// `payload`: serviceRequestPayload already parsed by the caller (nullptr: parsed here).
StatusOr<control::SubmitServiceJobCommand> DecodeSubmitServiceJob(const nlohmann::json& req, const HostFacts& host,
                                                                  const nlohmann::json* payload = nullptr);
StatusOr<control::TerminateServiceJobCommand> DecodeTerminateServiceJob(const nlohmann::json& req);
StatusOr<control::UpdateServiceJobCommand> DecodeUpdateServiceJob(const nlohmann::json& req);
// Tags. Batch TagResource and UntagResource: `req` holds the members bound to the URI
// (resourceArn) and the query string (tagKeys) beside the body's. SageMaker AddTags, DeleteTags.
StatusOr<control::TagResourceCommand> DecodeTagResource(const nlohmann::json& req);
StatusOr<control::UntagResourceCommand> DecodeUntagResource(const nlohmann::json& req);
StatusOr<control::TagResourceCommand> DecodeAddTags(const nlohmann::json& req);
StatusOr<control::UntagResourceCommand> DecodeDeleteTags(const nlohmann::json& req);
StatusOr<control::CreateTrainingJobCommand> DecodeCreateTrainingJob(const nlohmann::json& req, const HostFacts& host);
StatusOr<control::UpdateTrainingJobCommand> DecodeUpdateTrainingJob(const nlohmann::json& req);

// CreateHyperParameterTuningJob (docs/tuning.md, "Validation"). `drawn_seed`: the search's seed
// when the request gives no RandomSeed (the caller draws it, so that it is stored with the job).
StatusOr<control::CreateTuningJobCommand> DecodeCreateHyperParameterTuningJob(const nlohmann::json& req, const HostFacts& host,
                                                                             uint64_t drawn_seed);

}  // namespace ty::api
