// The commands the controller accepts: each request of the Batch and SageMaker APIs, decoded
// once by api/ (api/decode.h) right after model validation, so that no wire JSON crosses into
// control/ and no JSON type error can happen on the controller thread.
//
// A command holds what the request asked for, typed. It is not yet checked against live state
// (names that must exist, limits that depend on other resources): the controller does that in the
// command's turn. Fields that Describe echoes back verbatim keep their wire text beside the typed
// value (`*_json`), since the echo must be byte-for-byte what was accepted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/tuning.h"
#include "core/model.h"
#include "tune/search.h"

namespace ty::control {

// A CreateTrainingJob request (also a service job's serviceRequestPayload), checked against the
// host (api/training_request.h) and decoded once: the controller reads only `spec`.
struct TrainingRequest {
  std::string json;  // CreateTrainingJob's request as accepted, only to be echoed ("" for a payload)
  TrainingSpec spec;
};

// ---- Batch: service environments ----
struct CreateServiceEnvironmentCommand {
  std::string name;
  ResourceState state = ResourceState::kEnabled;
  std::vector<CapacityLimit> capacity_limits;  // checked: one NUM_INSTANCES or 1..5 instance types
  Tags tags;
};
struct UpdateServiceEnvironmentCommand {
  std::string environment;  // name or ARN
  std::optional<ResourceState> state;
  std::optional<std::vector<CapacityLimit>> capacity_limits;
};
struct DeleteServiceEnvironmentCommand {
  std::string environment;  // name or ARN
};

// ---- Batch: job queues ----
struct EnvironmentRef {
  int order = 0;
  std::string environment;  // name or ARN, resolved in the command's turn
};

// ---- Batch: compute environments (container jobs) ----
struct CreateComputeEnvironmentCommand {
  std::string name;
  std::string type;  // MANAGED | UNMANAGED
  ResourceState state = ResourceState::kEnabled;
  int64_t vcpus = 0, memory_mib = 0, gpus = 0;  // what it offers (ComputeEnvironment)
  int64_t unmanaged_vcpus = 0;
  std::string compute_resources_json;  // as given ("" absent)
  Tags tags;
};
struct UpdateComputeEnvironmentCommand {
  std::string compute_environment;  // name or ARN
  std::optional<ResourceState> state;
  std::optional<int64_t> vcpus;  // computeResources.maxvCpus or unmanagedvCpus
};
struct DeleteComputeEnvironmentCommand {
  std::string compute_environment;  // name or ARN
};
struct CreateJobQueueCommand {
  std::string name;
  ResourceState state = ResourceState::kEnabled;
  int priority = 0;
  std::string scheduling_policy_arn;  // "" FIFO
  std::vector<EnvironmentRef> service_environment_order;
  std::string job_queue_type = "SAGEMAKER_TRAINING";  // or "ECS": a container queue
  std::vector<EnvironmentRef> compute_environment_order;  // ECS queues
  std::vector<TimeLimitAction> time_limit_actions;
  std::string time_limit_actions_json = "[]";  // as given, for DescribeJobQueues
  Tags tags;
};
struct UpdateJobQueueCommand {
  std::string queue;  // name or ARN
  std::optional<ResourceState> state;
  std::optional<int> priority;
  std::optional<std::string> scheduling_policy_arn;
  std::optional<std::vector<EnvironmentRef>> service_environment_order;
  std::optional<std::vector<EnvironmentRef>> compute_environment_order;  // ECS queues only
  std::optional<std::vector<TimeLimitAction>> time_limit_actions;
  std::string time_limit_actions_json;  // with time_limit_actions
};
struct DeleteJobQueueCommand {
  std::string queue;  // name or ARN
};

// ---- Batch: scheduling policies ----
struct CreateSchedulingPolicyCommand {
  std::string name;
  // Exactly one of the two (a request with neither is a fair-share policy with the defaults).
  std::optional<FairSharePolicy> fairshare;
  std::string fairshare_json;   // with fairshare, as given
  std::string quotashare_json;  // "" when absent
  Tags tags;
};
struct UpdateSchedulingPolicyCommand {
  std::string arn;
  std::optional<FairSharePolicy> fairshare;
  std::string fairshare_json;   // with fairshare
  std::string quotashare_json;  // "" when absent
};
struct DeleteSchedulingPolicyCommand {
  std::string arn;
};

// ---- Batch: job definitions ----
struct RegisterJobDefinitionCommand {
  std::string name;
  std::string type;       // "container"
  std::string spec_json;        // JobDefinition::spec_json
  ContainerTemplate container;  // spec_json, decoded (ParseContainerTemplate)
  Tags tags;
};
struct DeregisterJobDefinitionCommand {
  std::string job_definition;  // name:revision or ARN
};

// ---- Batch: quota shares ----
// The members a quota share takes from CreateQuotaShare and UpdateQuotaShare; absent ones keep
// their value (their defaults on create).
struct QuotaShareFields {
  std::optional<std::vector<CapacityLimit>> capacity_limits;  // maxCapacity -1 when absent
  struct Sharing {
    std::optional<ShareStrategy> strategy;
    std::optional<int64_t> borrow_limit;
  };
  std::optional<Sharing> resource_sharing;
  std::optional<bool> in_share_preemption;  // preemptionConfiguration.inSharePreemption == ENABLED
  std::optional<ResourceState> state;
};
struct CreateQuotaShareCommand {
  std::string queue;  // name or ARN
  std::string name;
  QuotaShareFields fields;
  Tags tags;
};
struct UpdateQuotaShareCommand {
  std::string arn;
  QuotaShareFields fields;
};
struct DeleteQuotaShareCommand {
  std::string arn;
};

// ---- Batch: container jobs (SubmitJob). What the job definition gives is resolved in the turn;
// absent members here leave the definition's. ----
struct SubmitJobCommand {
  std::string name;
  std::string queue;           // name or ARN
  std::string job_definition;  // name (latest ACTIVE revision), name:revision or ARN
  std::optional<std::vector<std::string>> command;     // containerOverrides.command
  std::map<std::string, std::string> environment;      // containerOverrides.environment
  std::optional<int64_t> vcpus, memory_mib, gpus;      // containerOverrides resources
  std::map<std::string, std::string> parameters;       // overlaid on the definition's
  std::optional<int> retry_attempts;
  std::optional<std::vector<ContainerExitRule>> evaluate_on_exit;
  std::optional<int64_t> attempt_duration_seconds;
  std::string share_identifier;
  std::optional<int> scheduling_priority;
  Tags tags;
  std::optional<bool> propagate_tags;
  std::vector<JobDependency> depends_on;
  int64_t array_size = 0;  // 0: not an array job
  std::string owner;
};
struct StopJobCommand {
  std::string job_id;
  std::string reason;
  bool terminate = false;  // TerminateJob: a STARTING or RUNNING job is stopped too
};

// ---- Batch: service jobs ----
struct SubmitServiceJobCommand {
  std::string name;
  std::string queue;  // name or ARN
  std::optional<int> scheduling_priority;
  std::string share_identifier;
  std::string quota_share_name;
  std::optional<RetryStrategy> retry_strategy;
  std::optional<TimeoutConfig> timeout;
  std::optional<PreemptionConfig> preemption;
  // The wire text of the three above ("" absent), echoed by DescribeServiceJob.
  std::string retry_strategy_json, timeout_config_json, preemption_configuration_json;
  Tags tags;
  std::string payload;  // serviceRequestPayload, verbatim
  TrainingRequest training;  // the payload, decoded
  std::string client_token;
  std::string request_hash;  // sha256 of the request without clientToken (idempotency)
  // The capacity ladder from the job's and its payload's tags ("" none; control/ladder.h).
  std::string capacity_ladder;
  int fallback_after_interruptions = 2;
  std::string owner;  // the submitting principal's ARN (trainyard:JobOwner); "" unknown
};
struct TerminateServiceJobCommand {
  std::string job_id;
  std::string reason;
};
struct UpdateServiceJobCommand {
  std::string job_id;
  int scheduling_priority = 0;
};

// ---- Tags of any resource with an ARN (Batch TagResource / UntagResource, SageMaker AddTags /
// DeleteTags). The tags were checked against AWS's rules for one request (api/decode.cpp:
// CheckTags); the controller checks the total a resource ends up with. ----
struct TagResourceCommand {
  std::string service;  // "batch" or "sagemaker": the API called (an ARN of the other is refused)
  std::string arn;
  Tags tags;  // added, or replacing the values of keys the resource has
};
struct UntagResourceCommand {
  std::string service;
  std::string arn;
  std::vector<std::string> keys;  // keys the resource does not have are ignored
};

// ---- SageMaker ----
struct CreateTrainingJobCommand {
  TrainingRequest request;
  std::string capacity_ladder;  // "" none
  int fallback_after_interruptions = 2;
  std::string owner;  // the creating principal's ARN (trainyard:JobOwner); "" unknown
};
// CreateHyperParameterTuningJob (docs/tuning.md), checked at the api/ edge: ranges, strategy
// combinations, the objective among the definition's MetricDefinitions, the training definition
// as CreateTrainingJob's request is checked. Parents of a warm start are resolved in the turn.
struct CreateTuningJobCommand {
  std::string name;
  std::string request_json;           // the request as accepted, for Describe
  std::string training_request_json;  // the trials' CreateTrainingJob request, without a name
  TrainingSpec training_spec;          // the same, decoded
  std::string objective_metric;
  std::string resource_hyperparameter;  // Hyperband only
  tune::SearchConfig search;            // with its seed (RandomSeed, or drawn by api/)
  int64_t max_runtime_seconds = 0;
  std::vector<std::string> warm_start_parents;
  std::string warm_start_type;
  Tags tags;
  TrialQueue queue;  // from the tags (ParseTrialQueue); checked against the queues in the turn
  std::string owner;
};

struct UpdateTrainingJobCommand {
  std::string name;
  int64_t keep_alive_seconds = 0;  // ResourceConfig.KeepAlivePeriodInSeconds, 0..21600
};

}  // namespace ty::control
