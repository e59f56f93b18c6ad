// The api edge's decoders (api/decode.h): what each request becomes, and the ValidationException
// text of what the model lets through but trainyard refuses. Also the typed forms of stored wire
// text (core/model.h), which a restart must read back from documents of earlier versions.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/decode.h"
#include "api/http_binding.h"
#include "api/service_model.h"
#include "core/model.h"
#include "core/training_spec_json.h"

namespace ty::api {
namespace {

using nlohmann::json;

json Payload() {
  return {{"TrainingJobName", "tj"},
          {"RoleArn", "arn:aws:iam::000000000000:role/R"},
          {"AlgorithmSpecification", {{"TrainingImage", "x"}, {"TrainingInputMode", "File"}, {"ContainerEntrypoint", {"true"}}}},
          {"OutputDataConfig", {{"S3OutputPath", "s3://bucket/out"}}},
          {"ResourceConfig", {{"InstanceType", "ml.m5.large"}, {"InstanceCount", 2}, {"VolumeSizeInGB", 1}}},
          {"StoppingCondition", {{"MaxRuntimeInSeconds", 3600}}}};
}

json Submit() {
  return {{"jobName", "j"}, {"jobQueue", "q"}, {"serviceJobType", "SAGEMAKER_TRAINING"},
          {"serviceRequestPayload", Payload().dump()}};
}

class DecodeTest : public ::testing::Test {
 protected:
  StatusOr<control::SubmitServiceJobCommand> DecodeSubmit(const json& req) {
    return DecodeSubmitServiceJob(req, {config_, "none"});
  }
  // The message of a decode that must fail.
  template <typename T>
  static std::string Error(const StatusOr<T>& r) {
    EXPECT_FALSE(r.ok());
    if (r.ok()) return "";
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    return r.status().message();
  }
  Config config_ = DefaultConfig();
};

TEST_F(DecodeTest, SubmitCarriesTheTypedRequestAndTheVerbatimEchoes) {
  json req = Submit();
  req["schedulingPriority"] = 7;
  req["shareIdentifier"] = "teamA";
  req["retryStrategy"] = {{"attempts", 3},
                          {"evaluateOnExit", {{{"action", "exit"}, {"onStatusReason", "Algorithm*"}}, {{"action", "RETRY"}}}}};
  req["timeoutConfig"] = {{"attemptDurationSeconds", 120}};
  req["preemptionConfiguration"] = {{"preemptionRetriesBeforeTermination", 2}};
  req["tags"] = {{"k", "v"}};
  req["clientToken"] = "tok";
  auto cmd = DecodeSubmit(req);
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  EXPECT_EQ(cmd->name, "j");
  EXPECT_EQ(cmd->queue, "q");
  EXPECT_EQ(cmd->scheduling_priority, 7);
  EXPECT_EQ(cmd->share_identifier, "teamA");
  EXPECT_EQ(cmd->training.spec.training_job_name, "tj");
  EXPECT_EQ(cmd->training.spec.instance_type, "ml.m5.large");
  EXPECT_EQ(cmd->training.spec.instance_count, 2);
  EXPECT_EQ(cmd->training.spec.max_runtime_seconds, 3600);
  EXPECT_FALSE(cmd->training.spec.managed_spot);
  ASSERT_TRUE(cmd->retry_strategy);
  EXPECT_EQ(cmd->retry_strategy->attempts, 3);
  ASSERT_EQ(cmd->retry_strategy->evaluate_on_exit.size(), 2u);
  EXPECT_EQ(cmd->retry_strategy->evaluate_on_exit[0].action, ExitRule::Action::kExit);  // case-insensitive
  EXPECT_EQ(cmd->retry_strategy->evaluate_on_exit[0].on_status_reason, "Algorithm*");
  EXPECT_EQ(cmd->retry_strategy->evaluate_on_exit[1].action, ExitRule::Action::kRetry);
  EXPECT_FALSE(cmd->retry_strategy->evaluate_on_exit[1].on_status_reason);
  ASSERT_TRUE(cmd->timeout);
  EXPECT_EQ(cmd->timeout->attempt_duration_seconds, 120);
  ASSERT_TRUE(cmd->preemption);
  EXPECT_EQ(cmd->preemption->retries_before_termination, 2);
  // DescribeServiceJob echoes what was sent.
  EXPECT_EQ(json::parse(cmd->retry_strategy_json), req["retryStrategy"]);
  EXPECT_EQ(cmd->payload, req["serviceRequestPayload"].get<std::string>());
  EXPECT_EQ(cmd->client_token, "tok");
  // The idempotency hash leaves the client token out.
  json other = req;
  other["clientToken"] = "another";
  EXPECT_EQ(DecodeSubmit(other)->request_hash, cmd->request_hash);
  other["schedulingPriority"] = 8;
  EXPECT_NE(DecodeSubmit(other)->request_hash, cmd->request_hash);
}

TEST_F(DecodeTest, TagsAreHeldToAwsRulesOnEveryRequestThatCarriesThem) {
  const std::string arn = "arn:aws:batch:us-east-1:000000000000:job-queue/q";
  auto ok = DecodeTagResource({{"resourceArn", arn}, {"tags", {{"team", "a b"}, {"cost:center", "4/2=+@-_."}}}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->service, "batch");
  EXPECT_EQ(ok->tags, (Tags{{"team", "a b"}, {"cost:center", "4/2=+@-_."}}));
  EXPECT_NE(Error(DecodeTagResource({{"resourceArn", arn}, {"tags", {{"aws:team", "a"}}}})).find("reserved"), std::string::npos);
  EXPECT_NE(Error(DecodeTagResource({{"resourceArn", arn}, {"tags", {{"Aws:team", "a"}}}})).find("reserved"), std::string::npos);
  EXPECT_NE(Error(DecodeTagResource({{"resourceArn", arn}, {"tags", {{"a#b", "a"}}}})).find("regular expression"),
            std::string::npos);
  json many = json::object();
  for (int i = 0; i < 51; ++i) many["k" + std::to_string(i)] = "v";
  EXPECT_NE(Error(DecodeTagResource({{"resourceArn", arn}, {"tags", many}})).find("at most 50"), std::string::npos);
  // Create calls and a service job's payload are held to the same rules.
  EXPECT_NE(Error(DecodeCreateJobQueue({{"jobQueueName", "q"}, {"priority", 1}, {"tags", {{"aws:x", "1"}}}})).find("reserved"),
            std::string::npos);
  json payload = Payload();
  payload["Tags"] = {{{"Key", "aws:x"}, {"Value", "1"}}};
  json submit = Submit();
  submit["serviceRequestPayload"] = payload.dump();
  EXPECT_NE(Error(DecodeSubmit(submit)).find("serviceRequestPayload.Tags"), std::string::npos);
}

TEST_F(DecodeTest, UntagKeysAreCheckedThoughTheyComeFromTheQueryString) {
  const std::string arn = "arn:aws:batch:us-east-1:000000000000:job-queue/q";
  auto ok = DecodeUntagResource({{"resourceArn", arn}, {"tagKeys", {"a", "b"}}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(DecodeUntagResource({{"resourceArn", arn}}).ok());  // tagKeys is required: at least one
  EXPECT_FALSE(DecodeUntagResource({{"resourceArn", arn}, {"tagKeys", {std::string(129, 'k')}}}).ok());
  EXPECT_NE(Error(DecodeUntagResource({{"resourceArn", arn}, {"tagKeys", {"aws:x"}}})).find("reserved"), std::string::npos);
  EXPECT_NE(Error(DecodeAddTags({{"ResourceArn", arn}, {"Tags", {{{"Key", "d"}, {"Value", "1"}}, {{"Key", "d"}, {"Value", "2"}}}}}))
                .find("more than once"),
            std::string::npos);
}

TEST_F(DecodeTest, TagOperationsReadTheirArnFromThePathAndTheirKeysFromTheQuery) {
  const ServiceModel& batch = ServiceModel::Batch();
  const std::string path = "/v1/tags/arn%3Aaws%3Abatch%3Aus-east-1%3A000000000000%3Ajob-queue%2Fq";
  const ServiceModel::Operation* op = batch.FindByHttp("DELETE", path);
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->name, "UntagResource");
  json body = json::object();
  auto query = [](std::string_view name) {
    return name == "tagKeys" ? std::vector<std::string>{"a", "b c"} : std::vector<std::string>{};
  };
  ASSERT_TRUE(BindHttpMembers(batch, *op, path, query, &body).ok());
  EXPECT_EQ(body, (json{{"resourceArn", "arn:aws:batch:us-east-1:000000000000:job-queue/q"}, {"tagKeys", {"a", "b c"}}}));
  // A malformed escape is refused, naming the member.
  json bad = json::object();
  Status st = BindHttpMembers(batch, *batch.FindByHttp("GET", "/v1/tags/arn%3"), "/v1/tags/arn%3", query, &bad);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("resourceArn"), std::string::npos);
}

TEST_F(DecodeTest, SubmitWithoutOptionalMembersHasNone) {
  auto cmd = DecodeSubmit(Submit());
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  EXPECT_FALSE(cmd->scheduling_priority);
  EXPECT_FALSE(cmd->retry_strategy);
  EXPECT_FALSE(cmd->timeout);
  EXPECT_FALSE(cmd->preemption);
  EXPECT_EQ(cmd->retry_strategy_json, "");
  EXPECT_EQ(cmd->capacity_ladder, "");
}

TEST_F(DecodeTest, SubmitRefusalsKeepTheirWording) {
  json r = Submit();
  r["serviceJobType"] = "EKS";
  EXPECT_EQ(Error(DecodeSubmit(r)), "serviceJobType must be SAGEMAKER_TRAINING");

  r = Submit();
  r["serviceRequestPayload"] = "[1]";
  EXPECT_EQ(Error(DecodeSubmit(r)), "serviceRequestPayload must be a JSON object (a CreateTrainingJob request)");

  r = Submit();
  r["schedulingPriority"] = 10000;
  EXPECT_EQ(Error(DecodeSubmit(r)), "schedulingPriority must be between 0 and 9999, not 10000");

  r = Submit();
  r["retryStrategy"] = {{"attempts", 11}};
  EXPECT_EQ(Error(DecodeSubmit(r)), "retryStrategy.attempts is required and must be an integer between 1 and 10, not 11");
  r["retryStrategy"] = json::object();
  EXPECT_EQ(Error(DecodeSubmit(r)), "retryStrategy.attempts is required and must be an integer between 1 and 10, not absent");
  r["retryStrategy"] = {{"attempts", 1}, {"evaluateOnExit", {{{"action", "RETRY"}, {"onExitCode", "1"}}}}};
  EXPECT_EQ(Error(DecodeSubmit(r)),
            "retryStrategy.evaluateOnExit[0].onExitCode is not a field of a service job's evaluateOnExit entry "
            "(ServiceJobEvaluateOnExit has action and onStatusReason only)");
  r["retryStrategy"] = {{"attempts", 1}, {"evaluateOnExit", {{{"action", "MAYBE"}}}}};
  EXPECT_EQ(Error(DecodeSubmit(r)), "retryStrategy.evaluateOnExit[0].action must be RETRY or EXIT, not 'MAYBE'");
  r["retryStrategy"] = {{"attempts", 1}, {"evaluateOnExit", {{{"onStatusReason", "x"}}}}};
  EXPECT_EQ(Error(DecodeSubmit(r)), "retryStrategy.evaluateOnExit[0].action is required: RETRY or EXIT");

  r = Submit();
  r["timeoutConfig"] = {{"attemptDurationSeconds", 59}};
  EXPECT_EQ(Error(DecodeSubmit(r)), "timeoutConfig.attemptDurationSeconds must be an integer of at least 60, not 59");
  r["timeoutConfig"] = {{"attemptDurationSeconds", "long"}};
  EXPECT_EQ(Error(DecodeSubmit(r)), "timeoutConfig.attemptDurationSeconds must be an integer of at least 60, not \"long\"");
}

TEST_F(DecodeTest, SubmitChecksThePayloadAgainstTheHost) {
  json p = Payload();
  p["ResourceConfig"]["InstanceType"] = "ml.nothing.here";
  json r = Submit();
  r["serviceRequestPayload"] = p.dump();
  auto cmd = DecodeSubmit(r);
  ASSERT_FALSE(cmd.ok());
  EXPECT_EQ(cmd.status().code(), Code::kLimitExceeded);
  EXPECT_NE(cmd.status().message().find("'ml.nothing.here for training job usage' is 0 Instances"), std::string::npos);

  p = Payload();
  p["EnableNetworkIsolation"] = true;
  r["serviceRequestPayload"] = p.dump();
  EXPECT_NE(Error(DecodeSubmit(r)).find("EnableNetworkIsolation: this host runs jobs without a sandbox"), std::string::npos);
}

TEST_F(DecodeTest, MembersOfAWrongTypeAreRefusedOrIgnoredNeverThrown) {
  // Model validation stops these on the wire; a decoder still must not throw on them.
  json r = Submit();
  r["tags"] = {{"k", 1}};
  r["shareIdentifier"] = 5;
  r["retryStrategy"] = "three";
  EXPECT_NO_THROW({
    auto cmd = DecodeSubmit(r);
    EXPECT_EQ(Error(cmd), "retryStrategy must be an object");
  });
  EXPECT_NO_THROW(DecodeCreateJobQueue({{"jobQueueName", 1}, {"priority", "high"}, {"jobStateTimeLimitActions", "none"}}));
  EXPECT_NO_THROW(DecodeCreateServiceEnvironment({{"capacityLimits", {1, 2}}}));
  EXPECT_NO_THROW(DecodeCreateQuotaShare({{"quotaShareName", "s"}, {"capacityLimits", {"x"}},
                                          {"resourceSharingConfiguration", {{"borrowLimit", "lots"}}}}));
  EXPECT_NO_THROW(DecodeCreateSchedulingPolicy({{"name", "p"}, {"fairsharePolicy", {{"shareDistribution", {7}}}}}));
  EXPECT_NO_THROW(DecodeUpdateServiceJob({{"jobId", 3}, {"schedulingPriority", "x"}}));
}

TEST_F(DecodeTest, CapacityLimitsAndEnvironmentType) {
  json env = {{"serviceEnvironmentName", "e"}, {"serviceEnvironmentType", "SAGEMAKER_TRAINING"},
              {"capacityLimits", {{{"capacityUnit", "ml.m5.large"}, {"maxCapacity", 2}}, {{"capacityUnit", "ml.c5.xlarge"}, {"maxCapacity", 1}}}}};
  auto cmd = DecodeCreateServiceEnvironment(env);
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  ASSERT_EQ(cmd->capacity_limits.size(), 2u);
  EXPECT_EQ(cmd->capacity_limits[1].capacity_unit, "ml.c5.xlarge");
  EXPECT_EQ(cmd->capacity_limits[1].max_capacity, 1);
  EXPECT_EQ(cmd->state, ResourceState::kEnabled);

  env["capacityLimits"] = {{{"capacityUnit", "NUM_INSTANCES"}, {"maxCapacity", 2}}, {{"capacityUnit", "ml.m5.large"}, {"maxCapacity", 1}}};
  EXPECT_EQ(Error(DecodeCreateServiceEnvironment(env)),
            "capacityLimits: a NUM_INSTANCES limit can't be combined with instance-type limits");
  env["capacityLimits"] = {{{"capacityUnit", "NUM_INSTANCES"}}};
  EXPECT_EQ(Error(DecodeCreateServiceEnvironment(env)), "capacityLimits[0].maxCapacity is required and must be >= 0");
  env["capacityLimits"] = {{{"capacityUnit", "NUM_INSTANCES"}, {"maxCapacity", 1}}};
  env["serviceEnvironmentType"] = "EKS";
  EXPECT_EQ(Error(DecodeCreateServiceEnvironment(env)), "serviceEnvironmentType must be SAGEMAKER_TRAINING");

  auto update = DecodeUpdateServiceEnvironment({{"serviceEnvironment", "e"}, {"state", "DISABLED"}});
  ASSERT_TRUE(update.ok());
  EXPECT_EQ(update->state, ResourceState::kDisabled);
  EXPECT_FALSE(update->capacity_limits);  // absent: unchanged
}

TEST_F(DecodeTest, JobQueueTimeLimitActionsAndOrder) {
  json action = {{"reason", "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"}, {"state", "RUNNABLE"}, {"maxTimeSeconds", 600}, {"action", "TERMINATE"}};
  json q = {{"jobQueueName", "q"}, {"jobQueueType", "SAGEMAKER_TRAINING"}, {"priority", 3},
            {"serviceEnvironmentOrder", {{{"order", 2}, {"serviceEnvironment", "b"}}, {{"order", 1}, {"serviceEnvironment", "a"}}}},
            {"jobStateTimeLimitActions", {action}}};
  auto cmd = DecodeCreateJobQueue(q);
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  EXPECT_EQ(cmd->priority, 3);
  ASSERT_EQ(cmd->service_environment_order.size(), 2u);
  EXPECT_EQ(cmd->service_environment_order[0].order, 2);
  EXPECT_EQ(cmd->service_environment_order[0].environment, "b");
  ASSERT_EQ(cmd->time_limit_actions.size(), 1u);
  EXPECT_EQ(cmd->time_limit_actions[0].reason, "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY");
  EXPECT_EQ(cmd->time_limit_actions[0].max_time_seconds, 600);
  EXPECT_EQ(json::parse(cmd->time_limit_actions_json), json::array({action}));

  json bad = q;
  bad["jobStateTimeLimitActions"][0]["maxTimeSeconds"] = 86401;
  EXPECT_EQ(Error(DecodeCreateJobQueue(bad)), "jobStateTimeLimitActions[0].maxTimeSeconds must be between 600 and 86400");
  bad = q;
  bad["jobQueueType"] = "ECS";
  EXPECT_EQ(Error(DecodeCreateJobQueue(bad)),
            "serviceEnvironmentOrder is for SAGEMAKER_TRAINING job queues; an ECS queue takes computeEnvironmentOrder");
  bad["jobQueueType"] = "EKS";
  EXPECT_EQ(Error(DecodeCreateJobQueue(bad)), "jobQueueType must be SAGEMAKER_TRAINING or ECS (EKS and ECS_FARGATE are not supported)");
  bad = q;
  bad["tags"] = {{"trainyard:minRuntimeSeconds", "5m"}};
  EXPECT_EQ(Error(DecodeCreateJobQueue(bad)), "tags.trainyard:minRuntimeSeconds must be a whole number of seconds, not '5m'");

  auto update = DecodeUpdateJobQueue({{"jobQueue", "q"}, {"priority", 9}});
  ASSERT_TRUE(update.ok());
  EXPECT_EQ(update->priority, 9);
  EXPECT_FALSE(update->state);
  EXPECT_FALSE(update->time_limit_actions);
  EXPECT_FALSE(update->service_environment_order);
}

TEST_F(DecodeTest, ContainerQueuesTakeComputeEnvironments) {
  json q = {{"jobQueueName", "jq"}, {"priority", 1},
            {"computeEnvironmentOrder", {{{"order", 1}, {"computeEnvironment", "ce"}}}}};
  auto cmd = DecodeCreateJobQueue(q);
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  EXPECT_EQ(cmd->job_queue_type, "ECS");
  ASSERT_EQ(cmd->compute_environment_order.size(), 1u);
  EXPECT_EQ(cmd->compute_environment_order[0].environment, "ce");
}

TEST_F(DecodeTest, SubmitJobRules) {
  const json ok = {{"jobName", "j"}, {"jobQueue", "jq"}, {"jobDefinition", "d"}};
  auto cmd = DecodeSubmitJob(ok);
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  EXPECT_EQ(cmd->array_size, 0);
  EXPECT_FALSE(cmd->command);
  auto with = [&](const char* key, json value) {
    json r = ok;
    r[key] = std::move(value);
    return Error(DecodeSubmitJob(r));
  };
  EXPECT_EQ(with("arrayProperties", {{"size", 1}}), "arrayProperties.size must be from 2 to 10000");
  EXPECT_EQ(with("arrayProperties", {{"size", 10001}}), "arrayProperties.size must be from 2 to 10000");
  EXPECT_EQ(with("retryStrategy", {{"attempts", 0}}), "retryStrategy.attempts must be from 1 to 10");
  EXPECT_EQ(with("timeout", {{"attemptDurationSeconds", 59}}), "timeout.attemptDurationSeconds must be at least 60");
  EXPECT_EQ(with("dependsOn", {{{"type", "SEQUENTIAL"}, {"jobId", "x"}}}),
            "dependsOn[0]: a SEQUENTIAL dependency names no jobId (it orders the array's own children)");
  EXPECT_EQ(with("containerOverrides", {{"environment", {{{"name", "AWS_BATCH_X"}, {"value", "1"}}}}}),
            "containerOverrides.environment[0].name: AWS_BATCH_X is reserved: names starting with AWS_BATCH are reserved "
            "for the variables the server sets for the job");
  EXPECT_EQ(with("containerOverrides", {{"resourceRequirements", {{{"type", "VCPU"}, {"value", "1.5"}}}}}),
            "containerOverrides.resourceRequirements[0].value must be a whole number, not '1.5'");
  EXPECT_EQ(with("nodeOverrides", json::object()),
            "nodeOverrides is not supported by this server (container jobs on compute environments only)");
  EXPECT_EQ(with("retryStrategy", {{"evaluateOnExit", {{{"action", "RETRY"}, {"onExitCode", "1x"}}}}}),
            "retryStrategy.evaluateOnExit[0].onExitCode may hold only digits and a trailing '*'");
  json over = ok;
  over["containerOverrides"] = {{"command", {"echo", "Ref::x"}},
                                {"resourceRequirements", {{{"type", "GPU"}, {"value", "2"}}, {{"type", "MEMORY"}, {"value", "64"}}}}};
  over["parameters"] = {{"x", "1"}};
  cmd = DecodeSubmitJob(over);
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  EXPECT_EQ(*cmd->command, (std::vector<std::string>{"echo", "Ref::x"}));  // substituted in the turn
  EXPECT_EQ(*cmd->gpus, 2);
  EXPECT_EQ(*cmd->memory_mib, 64);
  EXPECT_EQ(cmd->parameters.at("x"), "1");
}

TEST_F(DecodeTest, FairSharePolicies) {
  json req = {{"name", "p"},
              {"fairsharePolicy", {{"shareDecaySeconds", 3600}, {"computeReservation", 10},
                                   {"shareDistribution", {{{"shareIdentifier", "a*"}, {"weightFactor", 0.5}}, {{"shareIdentifier", "b"}}}}}}};
  auto cmd = DecodeCreateSchedulingPolicy(req);
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  ASSERT_TRUE(cmd->fairshare);
  EXPECT_EQ(cmd->fairshare->share_decay_seconds, 3600);
  EXPECT_EQ(cmd->fairshare->compute_reservation, 10);
  ASSERT_EQ(cmd->fairshare->share_distribution.size(), 2u);
  EXPECT_EQ(cmd->fairshare->share_distribution[0].share_identifier, "a*");
  EXPECT_DOUBLE_EQ(cmd->fairshare->share_distribution[0].weight_factor, 0.5);
  EXPECT_DOUBLE_EQ(cmd->fairshare->share_distribution[1].weight_factor, 1.0);
  EXPECT_EQ(cmd->quotashare_json, "");

  // Neither: a fair-share policy with the defaults.
  auto plain = DecodeCreateSchedulingPolicy({{"name", "p"}});
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(plain->fairshare);
  EXPECT_TRUE(plain->fairshare->share_distribution.empty());

  auto quota = DecodeCreateSchedulingPolicy({{"name", "p"}, {"quotaSharePolicy", {{"idleResourceAssignmentStrategy", "FIFO"}}}});
  ASSERT_TRUE(quota.ok());
  EXPECT_FALSE(quota->fairshare);
  EXPECT_NE(quota->quotashare_json, "");

  req["fairsharePolicy"]["shareDistribution"].push_back({{"shareIdentifier", "ab"}});
  EXPECT_EQ(Error(DecodeCreateSchedulingPolicy(req)),
            "fairsharePolicy.shareDistribution[2].shareIdentifier 'ab' overlaps shareDistribution[0] 'a*': share "
            "identifiers and their '*' prefixes must not overlap");
  EXPECT_EQ(Error(DecodeCreateSchedulingPolicy({{"name", "p"}, {"fairsharePolicy", json::object()}, {"quotaSharePolicy", json::object()}})),
            "a scheduling policy holds either fairsharePolicy or quotaSharePolicy, not both");
  EXPECT_EQ(Error(DecodeUpdateSchedulingPolicy({{"arn", "a"}, {"fairsharePolicy", {{"computeReservation", 100}}}})),
            "fairsharePolicy.computeReservation must be between 0 and 99, not 100");
}

TEST_F(DecodeTest, QuotaShareFieldsKeepWhatIsAbsent) {
  auto cmd = DecodeCreateQuotaShare({{"jobQueue", "q"}, {"quotaShareName", "s"},
                                     {"capacityLimits", {{{"capacityUnit", "ml.m5.large"}}}},
                                     {"resourceSharingConfiguration", {{"strategy", "LEND"}}}});
  ASSERT_TRUE(cmd.ok());
  ASSERT_TRUE(cmd->fields.capacity_limits);
  EXPECT_EQ((*cmd->fields.capacity_limits)[0].max_capacity, -1);  // absent: refused against the environment
  ASSERT_TRUE(cmd->fields.resource_sharing);
  EXPECT_EQ(cmd->fields.resource_sharing->strategy, ShareStrategy::kLend);
  EXPECT_FALSE(cmd->fields.resource_sharing->borrow_limit);
  EXPECT_FALSE(cmd->fields.in_share_preemption);
  EXPECT_FALSE(cmd->fields.state);
  EXPECT_EQ(Error(DecodeCreateQuotaShare({{"quotaShareName", "no spaces"}})),
            "quotaShareName must be 1 to 128 letters, digits, hyphens or underscores");
}

TEST_F(DecodeTest, QuotaShareSharingAndPreemptionBecomeTyped) {
  auto cmd = DecodeUpdateQuotaShare({{"quotaShareArn", "a"},
                                     {"resourceSharingConfiguration", {{"strategy", "RESERVE"}}},
                                     {"preemptionConfiguration", {{"inSharePreemption", "ENABLED"}}}});
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(cmd->fields.resource_sharing->strategy, ShareStrategy::kReserve);
  EXPECT_EQ(cmd->fields.in_share_preemption, true);
  cmd = DecodeUpdateQuotaShare({{"quotaShareArn", "a"}, {"preemptionConfiguration", {{"inSharePreemption", "DISABLED"}}}});
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(cmd->fields.in_share_preemption, false);
  // The models hold both to their enums; text that slips past them is refused, not guessed.
  EXPECT_EQ(Error(DecodeCreateQuotaShare({{"jobQueue", "q"}, {"quotaShareName", "s"},
                                          {"resourceSharingConfiguration", {{"strategy", "SHARE"}}}})),
            "resourceSharingConfiguration.strategy must be RESERVE, LEND or LEND_AND_BORROW, not 'SHARE'");
  EXPECT_EQ(Error(DecodeUpdateQuotaShare({{"quotaShareArn", "a"}, {"preemptionConfiguration", {{"inSharePreemption", "on"}}}})),
            "preemptionConfiguration.inSharePreemption must be ENABLED or DISABLED, not 'on'");
}

TEST_F(DecodeTest, UpdateTrainingJobTakesOnlyTheKeepAlive) {
  auto cmd = DecodeUpdateTrainingJob({{"TrainingJobName", "tj"}, {"ResourceConfig", {{"KeepAlivePeriodInSeconds", 60}}}});
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(cmd->keep_alive_seconds, 60);
  EXPECT_EQ(Error(DecodeUpdateTrainingJob({{"TrainingJobName", "tj"}})),
            "ResourceConfig is required: only ResourceConfig.KeepAlivePeriodInSeconds can be updated here");
  EXPECT_EQ(Error(DecodeUpdateTrainingJob({{"TrainingJobName", "tj"}, {"ResourceConfig", {{"KeepAlivePeriodInSeconds", 21601}}}})),
            "ResourceConfig.KeepAlivePeriodInSeconds must be between 0 and 21600, not 21601");
  EXPECT_NE(Error(DecodeUpdateTrainingJob({{"TrainingJobName", "tj"}, {"ProfilerConfig", json::object()}})).find("ProfilerConfig: "),
            std::string::npos);
}

TEST_F(DecodeTest, CreateTrainingJobReadsTheLadderFromItsTags) {
  json req = Payload();
  req["Tags"] = {{{"Key", "trainyard:capacity-ladder"}, {"Value", "ml.m5.large ml.m5.xlarge"}}};
  req["ResourceConfig"]["InstanceCount"] = 1;
  auto cmd = DecodeCreateTrainingJob(req, {config_, "none"});
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  EXPECT_EQ(cmd->capacity_ladder, "ml.m5.large ml.m5.xlarge");
  EXPECT_EQ(cmd->request.spec.training_job_name, "tj");
  EXPECT_EQ(json::parse(cmd->request.json), req);
}

// A job's own environment may not name a variable the server sets for it (its credentials
// endpoint and token, the endpoint and region it calls, the SageMaker and trainyard variables):
// refused at create, naming the key and the rule, on every path a job's environment comes in by.
json JobDefinition();  // below, with the RegisterJobDefinition tests

TEST_F(DecodeTest, TheServersEnvironmentVariablesAreRefusedInEveryJobEnvironment) {
  for (const char* key : {"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_ENDPOINT_URL",
                          "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE", "SM_MODEL_DIR",
                          "SM_HP_LR", "TRAINING_JOB_NAME", "TRAINYARD_HOSTS_FILE", "AWS_BATCH_JOB_ID"}) {
    SCOPED_TRACE(key);
    json req = Payload();
    req["Environment"] = {{"STAGE", "x"}, {key, "http://attacker"}};
    const std::string create = Error(DecodeCreateTrainingJob(req, {config_, "none"}));
    EXPECT_EQ(create.rfind(std::string("Environment: the key '") + key + "' is reserved: ", 0), 0u) << create;
    json submit = Submit();
    submit["serviceRequestPayload"] = req.dump();
    EXPECT_NE(Error(DecodeSubmit(submit)).find(std::string("'") + key + "' is reserved"), std::string::npos);
    json def = JobDefinition();
    def["containerProperties"]["environment"] = {{{"name", key}, {"value", "x"}}};
    EXPECT_EQ(Error(DecodeRegisterJobDefinition(def)).rfind(std::string("containerProperties.environment[0].name: ") + key +
                                                          " is reserved: ", 0), 0u);
    json job = {{"jobName", "j"}, {"jobQueue", "jq"}, {"jobDefinition", "d"},
                {"containerOverrides", {{"environment", {{{"name", "OK"}, {"value", "1"}}, {{"name", key}, {"value", "x"}}}}}}};
    EXPECT_EQ(Error(DecodeSubmitJob(job)).rfind(std::string("containerOverrides.environment[1].name: ") + key + " is reserved: ", 0),
              0u);
  }
  // Names that merely resemble them are the job's.
  json req = Payload();
  req["Environment"] = {{"AWS_REGIONAL", "x"}, {"MY_SM_VAR", "y"}, {"SMOKE", "z"}, {"AWS_ACCESS_KEY_ID", "k"}};
  EXPECT_TRUE(DecodeCreateTrainingJob(req, {config_, "none"}).ok());
}

TEST_F(DecodeTest, StatesDecodeToTheEnum) {
  auto q = DecodeCreateJobQueue({{"jobQueueName", "q"}, {"jobQueueType", "SAGEMAKER_TRAINING"}, {"state", "DISABLED"}});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->state, ResourceState::kDisabled);
  EXPECT_EQ(Error(DecodeUpdateJobQueue({{"jobQueue", "q"}, {"state", "PAUSED"}})),
            "state must be ENABLED or DISABLED, not 'PAUSED'");
  auto share = DecodeUpdateQuotaShare({{"quotaShareArn", "a"}, {"state", "DISABLED"}});
  ASSERT_TRUE(share.ok());
  EXPECT_EQ(share->fields.state, ResourceState::kDisabled);
}

// ---- Enums: each value has one wire spelling, which reads back as that value. ----

TEST(WireEnums, ResourceStateRoundTrips) {
  for (ResourceState s : {ResourceState::kEnabled, ResourceState::kDisabled}) EXPECT_EQ(ParseResourceState(ToWire(s)), s);
  EXPECT_STREQ(ToWire(ResourceState::kEnabled), "ENABLED");
  EXPECT_STREQ(ToWire(ResourceState::kDisabled), "DISABLED");
  EXPECT_FALSE(ParseResourceState("enabled"));
  EXPECT_FALSE(ParseResourceState(""));
}

TEST(WireEnums, StoredStatesKeepTheirSpelling) {
  // Documents of earlier versions hold the state as its wire string; they must still load.
  JobQueue q;
  q.name = "q";
  q.state = ResourceState::kDisabled;
  const std::string doc = EncodeDoc(q);
  EXPECT_NE(doc.find("\"state\":\"DISABLED\""), std::string::npos);
  JobQueue back;
  ASSERT_TRUE(DecodeDoc(doc, &back));
  EXPECT_EQ(back.state, ResourceState::kDisabled);
  ServiceEnvironment e;
  ASSERT_TRUE(DecodeDoc(R"({"name":"e","state":"DISABLED"})", &e));
  EXPECT_EQ(e.state, ResourceState::kDisabled);
  ASSERT_TRUE(DecodeDoc(R"({"name":"e"})", &e));
  EXPECT_EQ(e.state, ResourceState::kEnabled);
}

TEST(WireEnums, StopCausesRoundTripAndLoadFromEarlierDocuments) {
  for (int i = 0; i <= static_cast<int>(StopCause::kInterrupt); ++i) {
    const auto c = static_cast<StopCause>(i);
    EXPECT_EQ(ParseStopCause(StopCauseName(c)), c) << StopCauseName(c);
    TrainingJob tj;
    tj.stop_cause = c;
    TrainingJob back;
    ASSERT_TRUE(DecodeDoc(EncodeDoc(tj), &back));
    EXPECT_EQ(back.stop_cause, c) << StopCauseName(c);
  }
  EXPECT_FALSE(ParseStopCause("preempted"));
  // Earlier versions stored the cause as this text.
  TrainingJob old;
  ASSERT_TRUE(DecodeDoc(R"({"name":"t","stop_cause":"disk_reserve"})", &old));
  EXPECT_EQ(old.stop_cause, StopCause::kDiskReserve);
  ASSERT_TRUE(DecodeDoc(R"({"name":"t","stop_cause":""})", &old));
  EXPECT_EQ(old.stop_cause, StopCause::kNone);
}

TEST(WireEnums, TrainingAndWarmPoolStatusesRoundTripEveryValue) {
  for (int i = 0; i <= static_cast<int>(TrainingJobStatus::kStopped); ++i) {
    const auto v = static_cast<TrainingJobStatus>(i);
    EXPECT_EQ(ParseTrainingJobStatus(ToWire(v)), v) << ToWire(v);
  }
  for (int i = 0; i <= static_cast<int>(SecondaryStatus::kPending); ++i) {
    const auto v = static_cast<SecondaryStatus>(i);
    EXPECT_EQ(ParseSecondaryStatus(ToWire(v)), v) << ToWire(v);
    TrainingJob tj;
    tj.secondary_status = v;
    tj.transitions.push_back({v, 1, 0, "m"});
    TrainingJob back;
    ASSERT_TRUE(DecodeDoc(EncodeDoc(tj), &back));
    EXPECT_EQ(back.secondary_status, v) << ToWire(v);
    EXPECT_EQ(back.transitions.at(0).status, v) << ToWire(v);
  }
  for (int i = 0; i <= static_cast<int>(WarmPoolStatus::kTerminated); ++i) {
    const auto v = static_cast<WarmPoolStatus>(i);
    EXPECT_EQ(ParseWarmPoolStatus(ToWire(v)), v) << ToWire(v);
  }
  for (int i = 0; i <= static_cast<int>(ShareStrategy::kLendAndBorrow); ++i) {
    const auto v = static_cast<ShareStrategy>(i);
    EXPECT_EQ(ParseShareStrategy(ToWire(v)), v) << ToWire(v);
  }
  EXPECT_EQ(ToWire(SecondaryStatus::kMaxWaitTimeExceeded), std::string("MaxWaitTimeExceeded"));
  EXPECT_EQ(ToWire(WarmPoolStatus::kNone), std::string(""));
  EXPECT_FALSE(ParseTrainingJobStatus("inprogress"));
  EXPECT_FALSE(ParseSecondaryStatus("Running"));
}

TEST(WireEnums, DocumentsOfThePreviousVersionLoadIntoTheEnums) {
  // Written by the version that held these statuses as strings.
  TrainingJob tj;
  ASSERT_TRUE(DecodeDoc(R"({"name":"t","status":"Stopped","secondary_status":"MaxRuntimeExceeded",
      "transitions":[{"status":"Starting","start":1,"end":2,"message":"s"},
                     {"status":"Training","start":2,"end":3,"message":"t"},
                     {"status":"MaxRuntimeExceeded","start":3,"end":0,"message":"m"}],
      "warm_pool_id":"wp-1","warm_pool_status":"Reused","reused_by_job":"u"})", &tj));
  EXPECT_EQ(tj.status, TrainingJobStatus::kStopped);
  EXPECT_EQ(tj.secondary_status, SecondaryStatus::kMaxRuntimeExceeded);
  ASSERT_EQ(tj.transitions.size(), 3u);
  EXPECT_EQ(tj.transitions[1].status, SecondaryStatus::kTraining);
  EXPECT_EQ(tj.RunSeconds(0, INT64_MAX, 10), 0.001);  // only the Training transition is a run phase
  EXPECT_EQ(tj.warm_pool_status, WarmPoolStatus::kReused);
  ASSERT_TRUE(DecodeDoc(R"({"name":"t","status":"InProgress","secondary_status":"Pending","warm_pool_status":""})", &tj));
  EXPECT_EQ(tj.status, TrainingJobStatus::kInProgress);
  EXPECT_EQ(tj.warm_pool_status, WarmPoolStatus::kNone);
  WarmPool p;
  ASSERT_TRUE(DecodeDoc(R"({"id":"wp-1","status":"Available","instance_type":"ml.m5.large"})", &p));
  EXPECT_EQ(p.status, WarmPoolStatus::kAvailable);
  QuotaShare q;
  ASSERT_TRUE(DecodeDoc(R"({"name":"s","queue":"q","strategy":"LEND","borrow_limit":-1,
      "in_share_preemption":"ENABLED","state":"DISABLED","capacity_limits":[{"capacity_unit":"ml.m5.large","max_capacity":4}]})", &q));
  EXPECT_EQ(q.strategy, ShareStrategy::kLend);
  EXPECT_TRUE(q.in_share_preemption);
  EXPECT_EQ(q.state, ResourceState::kDisabled);
  ASSERT_EQ(q.capacity_limits.size(), 1u);
  EXPECT_EQ(q.capacity_limits[0].max_capacity, 4);
  ASSERT_TRUE(DecodeDoc(R"({"name":"s"})", &q));  // absent members take the defaults
  EXPECT_EQ(q.strategy, ShareStrategy::kLendAndBorrow);
  EXPECT_FALSE(q.in_share_preemption);
  // An unknown spelling is a document that does not decode, not a silent first value.
  EXPECT_FALSE(DecodeDoc(R"({"name":"t","status":"Running"})", &tj));
}

TEST(WireEnums, StoredDocumentsKeepTheWireSpellings) {
  TrainingJob tj;
  tj.status = TrainingJobStatus::kStopping;
  tj.secondary_status = SecondaryStatus::kMaxWaitTimeExceeded;
  tj.warm_pool_status = WarmPoolStatus::kAvailable;
  const std::string doc = EncodeDoc(tj);
  EXPECT_NE(doc.find(R"("status":"Stopping")"), std::string::npos) << doc;
  EXPECT_NE(doc.find(R"("secondary_status":"MaxWaitTimeExceeded")"), std::string::npos) << doc;
  EXPECT_NE(doc.find(R"("warm_pool_status":"Available")"), std::string::npos) << doc;
  QuotaShare q;
  q.strategy = ShareStrategy::kReserve;
  q.in_share_preemption = true;
  const std::string qdoc = EncodeDoc(q);
  EXPECT_NE(qdoc.find(R"("strategy":"RESERVE")"), std::string::npos) << qdoc;
  EXPECT_NE(qdoc.find(R"("in_share_preemption":"ENABLED")"), std::string::npos) << qdoc;
}

TEST(StoredText, TrainingJobDocumentsStoredBeforeSpecsDecodeTheirRequestAtLoad) {
  // A document as an earlier version wrote it: the request (as the controller had edited it) only
  // as text, and no tags of the job's own.
  TrainingJob tj;
  ASSERT_TRUE(DecodeDoc(R"({"name":"t","request_json":"{\"StoppingCondition\":{\"MaxRuntimeInSeconds\":600,\"MaxPendingTimeInSeconds\":7200},\"RetryStrategy\":{\"MaximumRetryAttempts\":2},\"CheckpointConfig\":{\"S3Uri\":\"s3://b/c\"},\"OutputDataConfig\":{\"S3OutputPath\":\"s3://b/out//\",\"CompressionType\":\"NONE\"},\"AlgorithmSpecification\":{\"MetricDefinitions\":[{\"Name\":\"loss\",\"Regex\":\"loss=(\\\\S+)\"}]},\"Tags\":[{\"Key\":\"team\",\"Value\":\"a\"}]}"})",
                        &tj));
  EXPECT_EQ(tj.spec.MaxRuntimeSeconds(), 600);
  EXPECT_EQ(tj.spec.max_pending_seconds, 7200);
  EXPECT_EQ(tj.spec.max_retry_attempts, 2);
  ASSERT_TRUE(tj.spec.checkpoint);
  EXPECT_EQ(tj.spec.checkpoint->s3_uri, "s3://b/c");
  EXPECT_EQ(tj.spec.OutputPathTrimmed(), "s3://b/out");
  EXPECT_FALSE(tj.spec.compressed_output);
  ASSERT_EQ(tj.spec.metric_definitions.size(), 1u);
  EXPECT_EQ(tj.spec.metric_definitions[0].name, "loss");
  EXPECT_EQ(tj.spec.metric_definitions[0].regex, "loss=(\\S+)");
  EXPECT_EQ(tj.tags, (Tags{{"team", "a"}}));
  // Stored again, the spec is its own member, and loads back equal.
  TrainingJob again;
  ASSERT_TRUE(DecodeDoc(EncodeDoc(tj), &again));
  EXPECT_EQ(again.spec, tj.spec);
}

TEST(StoredText, AbsentRequestMembersTakeAwsDefaults) {
  TrainingSpec spec;
  ASSERT_TRUE(DecodeTrainingSpec(std::string(R"({"OutputDataConfig":{"S3OutputPath":"s3://b"}})"), &spec));
  EXPECT_EQ(spec.MaxRuntimeSeconds(), 86400);
  EXPECT_EQ(spec.max_pending_seconds, 0);
  EXPECT_EQ(spec.max_retry_attempts, 0);
  EXPECT_FALSE(spec.checkpoint);
  EXPECT_TRUE(spec.compressed_output);
  EXPECT_TRUE(spec.metric_definitions.empty());
  EXPECT_FALSE(DecodeTrainingSpec(std::string("[1]"), &spec));
}

// ---- Stored text: documents written before these fields were typed load into the typed form. ----

TEST(StoredText, ServiceJobDocumentsParseTheirRequestFieldsAtLoad) {
  ServiceJob old;
  old.id = "j";
  old.retry_strategy_json = R"({"attempts":2,"evaluateOnExit":[{"action":"Exit","onStatusReason":"Bad*"}]})";
  old.timeout_config_json = R"({"attemptDurationSeconds":300})";
  const std::string doc = EncodeDoc(old);  // the typed members are not part of the document
  EXPECT_EQ(doc.find("retry_strategy\""), std::string::npos);
  ServiceJob loaded;
  ASSERT_TRUE(DecodeDoc(doc, &loaded));
  ASSERT_TRUE(loaded.retry_strategy);
  EXPECT_EQ(loaded.retry_strategy->attempts, 2);
  ASSERT_EQ(loaded.retry_strategy->evaluate_on_exit.size(), 1u);
  EXPECT_EQ(loaded.retry_strategy->evaluate_on_exit[0].action, ExitRule::Action::kExit);
  ASSERT_TRUE(loaded.timeout);
  EXPECT_EQ(loaded.timeout->attempt_duration_seconds, 300);
  EXPECT_FALSE(loaded.preemption);
}

TEST(StoredText, PolicyAndQueueDocumentsParseAtLoad) {
  SchedulingPolicy p;
  p.name = "p";
  p.fairshare_policy_json = R"({"shareDecaySeconds":60,"shareDistribution":[{"shareIdentifier":"x","weightFactor":2}]})";
  SchedulingPolicy lp;
  ASSERT_TRUE(DecodeDoc(EncodeDoc(p), &lp));
  ASSERT_TRUE(lp.fairshare);
  EXPECT_EQ(lp.fairshare->share_decay_seconds, 60);
  ASSERT_EQ(lp.fairshare->share_distribution.size(), 1u);
  EXPECT_DOUBLE_EQ(lp.fairshare->share_distribution[0].weight_factor, 2.0);

  p.fairshare_policy_json = "";
  p.quotashare_policy_json = R"({"idleResourceAssignmentStrategy":"FIFO"})";
  ASSERT_TRUE(DecodeDoc(EncodeDoc(p), &lp));
  EXPECT_FALSE(lp.fairshare);

  JobQueue q;
  q.name = "q";
  q.job_state_time_limit_actions_json =
      R"([{"action":"TERMINATE","maxTimeSeconds":900,"reason":"CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY","state":"RUNNABLE"}])";
  JobQueue lq;
  ASSERT_TRUE(DecodeDoc(EncodeDoc(q), &lq));
  ASSERT_EQ(lq.time_limit_actions.size(), 1u);
  EXPECT_EQ(lq.time_limit_actions[0].max_time_seconds, 900);
  EXPECT_EQ(lq.time_limit_actions[0].reason, "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY");
}

TEST(StoredText, TextThatIsNotTheRightShapeIsRefused) {
  RetryStrategy rs;
  EXPECT_FALSE(ParseRetryStrategy("[1]", &rs));
  EXPECT_FALSE(ParseRetryStrategy("{", &rs));
  EXPECT_TRUE(ParseRetryStrategy("", &rs));
  EXPECT_EQ(rs.attempts, 1);
  std::vector<TimeLimitAction> actions;
  EXPECT_FALSE(ParseTimeLimitActions("{}", &actions));
  EXPECT_TRUE(ParseTimeLimitActions("[]", &actions));
  EXPECT_TRUE(actions.empty());
}

// ---- RegisterJobDefinition ----

json JobDefinition() {
  return {{"jobDefinitionName", "seed"},
          {"type", "container"},
          {"parameters", {{"greeting", "hi"}}},
          {"containerProperties",
           {{"image", "registry.local/seed:1"},
            {"command", {"echo", "Ref::greeting"}},
            {"resourceRequirements", {{{"type", "VCPU"}, {"value", "2"}}, {{"type", "MEMORY"}, {"value", "2048"}}}},
            {"volumes", {{{"name", "data"}, {"host", {{"sourcePath", "/srv/data"}}}}}},
            {"mountPoints", {{{"sourceVolume", "data"}, {"containerPath", "/data"}}}}}},
          {"tags", {{"team", "seed"}}}};
}

TEST_F(DecodeTest, JobDefinitionKeepsItsSpecAndTagsApart) {
  auto cmd = DecodeRegisterJobDefinition(JobDefinition());
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  EXPECT_EQ(cmd->name, "seed");
  EXPECT_EQ(cmd->type, "container");
  EXPECT_EQ(cmd->tags, (Tags{{"team", "seed"}}));
  json spec = json::parse(cmd->spec_json);
  EXPECT_EQ(spec["parameters"], (json{{"greeting", "hi"}}));
  EXPECT_EQ(spec["containerProperties"]["image"], "registry.local/seed:1");
  EXPECT_FALSE(spec.contains("tags"));
  EXPECT_FALSE(spec.contains("jobDefinitionName"));
}

TEST_F(DecodeTest, JobDefinitionOfAnotherTypeIsRefused) {
  json req = JobDefinition();
  req["type"] = "multinode";
  EXPECT_NE(Error(DecodeRegisterJobDefinition(req)).find("only 'container'"), std::string::npos);
  req = JobDefinition();
  req["eksProperties"] = json::object();
  EXPECT_NE(Error(DecodeRegisterJobDefinition(req)).find("eksProperties"), std::string::npos);
  req = JobDefinition();
  req.erase("containerProperties");
  EXPECT_NE(Error(DecodeRegisterJobDefinition(req)).find("containerProperties: required"), std::string::npos);
  req = JobDefinition();
  req["platformCapabilities"] = {"FARGATE"};
  EXPECT_NE(Error(DecodeRegisterJobDefinition(req)).find("only EC2"), std::string::npos);
}

TEST_F(DecodeTest, JobDefinitionResourcesAreWholeAndNotGivenTwice) {
  auto with = [](json requirements, json extra = json::object()) {
    json req = JobDefinition();
    req["containerProperties"]["resourceRequirements"] = std::move(requirements);
    req["containerProperties"].update(extra);
    return req;
  };
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{{"type", "VCPU"}, {"value", "0.25"}}}))).find("whole number of at least 1"),
            std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{{"type", "MEMORY"}, {"value", "3"}}}))).find("at least 4"), std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{{"type", "GPU"}, {"value", "0"}}}))).find("GPU"), std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{{"type", "GPU"}, {"value", "1"}}, {{"type", "GPU"}, {"value", "2"}}})))
                .find("more than once"),
            std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{{"type", "VCPU"}, {"value", "1"}}}, {{"vcpus", 1}}))).find("can't both"),
            std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with(json::array(), {{"memory", 2}}))).find("4 MiB"), std::string::npos);
  EXPECT_TRUE(DecodeRegisterJobDefinition(with({{{"type", "GPU"}, {"value", "4"}}}, {{"vcpus", 4}, {"memory", 4}})).ok());
}

TEST_F(DecodeTest, JobDefinitionContainerRules) {
  auto with = [](json extra) {
    json req = JobDefinition();
    req["containerProperties"].update(extra);
    return req;
  };
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{"image", ""}}))).find("image"), std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{"image", "a b"}}))).find("may hold only"), std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{"environment", {{{"name", "AWS_BATCH_X"}, {"value", "1"}}}}})))
                .find("reserved"),
            std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(
                with({{"environment", {{{"name", "A"}, {"value", "1"}}, {{"name", "A"}, {"value", "2"}}}}})))
                .find("more than once"),
            std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{"jobRoleArn", "arn:aws:iam::1:user/u"}}))).find("IAM role ARN"),
            std::string::npos);
  EXPECT_TRUE(DecodeRegisterJobDefinition(with({{"jobRoleArn", "arn:aws:iam::000000000000:role/seed"}})).ok());
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{"volumes", {{{"name", "d"}, {"host", {{"sourcePath", "srv"}}}}}}})))
                .find("absolute"),
            std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{"volumes", {{{"name", "d"}, {"efsVolumeConfiguration", {{"fileSystemId", "fs"}}}}}}})))
                .find("host volumes"),
            std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{"mountPoints", {{{"sourceVolume", "nope"}, {"containerPath", "/d"}}}}})))
                .find("names no volume"),
            std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{"mountPoints", {{{"sourceVolume", "data"}, {"containerPath", "d"}}}}})))
                .find("containerPath"),
            std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with({{"networkConfiguration", {{"assignPublicIp", "ENABLED"}}}})))
                .find("Fargate"),
            std::string::npos);
}

TEST_F(DecodeTest, JobDefinitionRetryTimeoutAndPriorityRanges) {
  auto with = [](const char* member, json value) {
    json req = JobDefinition();
    req[member] = std::move(value);
    return req;
  };
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with("retryStrategy", {{"attempts", 0}}))).find("1 to 10"), std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with("retryStrategy", {{"attempts", 11}}))).find("1 to 10"), std::string::npos);
  EXPECT_TRUE(DecodeRegisterJobDefinition(with("retryStrategy", {{"attempts", 10}})).ok());
  json six = json::array();
  for (int i = 0; i < 6; ++i) six.push_back({{"action", "RETRY"}});
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with("retryStrategy", {{"evaluateOnExit", six}}))).find("at most 5"),
            std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with("retryStrategy", {{"evaluateOnExit", {{{"action", "RETRY"}, {"onExitCode", "1*2"}}}}})))
                .find("digits"),
            std::string::npos);
  EXPECT_TRUE(DecodeRegisterJobDefinition(
                  with("retryStrategy", {{"evaluateOnExit", {{{"action", "exit"}, {"onExitCode", "13*"}, {"onReason", "Out of memory: *"}}}}}))
                  .ok());
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with("timeout", {{"attemptDurationSeconds", 59}}))).find("at least 60"),
            std::string::npos);
  EXPECT_TRUE(DecodeRegisterJobDefinition(with("timeout", {{"attemptDurationSeconds", 60}})).ok());
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with("schedulingPriority", -1))).find("0 to 9999"), std::string::npos);
  EXPECT_NE(Error(DecodeRegisterJobDefinition(with("jobDefinitionName", std::string(129, 'a')))).find("jobDefinitionName"),
            std::string::npos);
}

}  // namespace
}  // namespace ty::api
