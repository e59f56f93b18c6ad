// Tests for ty::api::ServiceModel: parsing the embedded botocore models, routing, and the
// AWS-style input validation driven by them.
#include "api/service_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <span>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace ty::api {
namespace {

using json = nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const ServiceModel& Sm() { return ServiceModel::SageMaker(); }
const ServiceModel& Batch() { return ServiceModel::Batch(); }

const ServiceModel::Operation& Op(const ServiceModel& m, const char* name) {
  const ServiceModel::Operation* op = m.FindOperation(name);
  EXPECT_NE(op, nullptr) << name;
  static const ServiceModel::Operation kNone;
  return op ? *op : kNone;
}

json ValidTrainingJob() {
  return json::parse(R"({
    "TrainingJobName": "my-job-1",
    "AlgorithmSpecification": {"TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:latest",
                               "TrainingInputMode": "File"},
    "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/output"},
    "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    "HyperParameters": {"epochs": "10", "learning-rate": "0.01"},
    "InputDataConfig": [{
      "ChannelName": "train",
      "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://bucket/train/",
                                      "S3DataDistributionType": "FullyReplicated"}}
    }],
    "Tags": [{"Key": "team", "Value": "ml"}],
    "Environment": {"MY_VAR": "1"},
    "UnknownMemberIsIgnored": {"anything": [1, 2, 3]}
  })");
}

json ValidServiceJob() {
  return json::parse(R"({
    "jobName": "job-1",
    "jobQueue": "queue-1",
    "serviceJobType": "SAGEMAKER_TRAINING",
    "serviceRequestPayload": "{\"TrainingJobName\": \"x\"}",
    "schedulingPriority": 5,
    "retryStrategy": {"attempts": 2, "evaluateOnExit": [{"action": "RETRY", "onStatusReason": "*"}]},
    "timeoutConfig": {"attemptDurationSeconds": 600},
    "tags": {"k": "v"}
  })");
}

std::string Validate(const json& body, const char* op = "CreateTrainingJob",
                     const ServiceModel& m = ServiceModel::SageMaker()) {
  Status st = m.ValidateInput(Op(m, op), body);
  if (st.ok()) return "";
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
  return st.message();
}

// ---------------------------------------------------------------------------------------------
// Parsing and lookup

TEST(ServiceModelTest, ParsesEmbeddedModels) {
  EXPECT_EQ(Batch().protocol(), "rest-json");
  EXPECT_EQ(Batch().signing_name(), "batch");
  EXPECT_EQ(Batch().target_prefix(), "");
  EXPECT_EQ(Batch().api_version(), "2016-08-10");
  EXPECT_EQ(Sm().protocol(), "json");
  EXPECT_EQ(Sm().signing_name(), "sagemaker");
  EXPECT_EQ(Sm().target_prefix(), "SageMaker");
  EXPECT_GT(Batch().OperationNames().size(), 30u);
  EXPECT_GT(Sm().OperationNames().size(), 300u);
  auto names = Sm().OperationNames();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(&ServiceModel::Batch(), &ServiceModel::Batch());  // parsed once
}

TEST(ServiceModelTest, ParallelFirstUseIsSafe) {
  std::vector<std::thread> threads;
  std::vector<const ServiceModel*> seen(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      seen[i] = &ServiceModel::SageMaker();
      EXPECT_EQ(seen[i]->ValidateInput(*seen[i]->FindOperation("CreateTrainingJob"),
                                       ValidTrainingJob()).message(), "");
    });
  }
  for (auto& t : threads) t.join();
  for (auto* m : seen) EXPECT_EQ(m, seen[0]);
}

TEST(ServiceModelTest, FindOperation) {
  const auto* op = Sm().FindOperation("CreateTrainingJob");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->name, "CreateTrainingJob");
  EXPECT_EQ(op->http_method, "POST");
  EXPECT_EQ(op->request_uri, "/");
  EXPECT_EQ(op->input_shape, "CreateTrainingJobRequest");
  EXPECT_EQ(op->output_shape, "CreateTrainingJobResponse");
  EXPECT_EQ(Sm().FindOperation("NoSuchOperation"), nullptr);
  EXPECT_EQ(Sm().FindOperation(""), nullptr);
}

TEST(ServiceModelTest, FindByHttp) {
  const auto* op = Batch().FindByHttp("POST", "/v1/submitservicejob");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->name, "SubmitServiceJob");
  EXPECT_EQ(op->input_shape, "SubmitServiceJobRequest");
  ASSERT_NE(Batch().FindByHttp("POST", "/v1/createjobqueue"), nullptr);
  EXPECT_EQ(Batch().FindByHttp("POST", "/v1/createjobqueue")->name, "CreateJobQueue");
  EXPECT_EQ(Batch().FindByHttp("POST", "/v1/createjobqueue?x=1")->name, "CreateJobQueue");
  EXPECT_EQ(Batch().FindByHttp("GET", "/v1/submitservicejob"), nullptr);
  EXPECT_EQ(Batch().FindByHttp("POST", "/v1/submitservicejob/"), nullptr);
  EXPECT_EQ(Batch().FindByHttp("POST", "/v1/nosuch"), nullptr);
  // Templated URIs match one non-empty segment.
  const auto* tags = Batch().FindByHttp("GET", "/v1/tags/arn:aws:batch:us-east-1:1:job-queue/q");
  EXPECT_EQ(tags, nullptr);  // the ARN holds a '/', which a {label} does not span
  tags = Batch().FindByHttp("GET", "/v1/tags/arn%3Aaws%3Abatch");
  ASSERT_NE(tags, nullptr);
  EXPECT_EQ(tags->name, "ListTagsForResource");
  EXPECT_EQ(Batch().FindByHttp("GET", "/v1/tags/"), nullptr);
}

TEST(ServiceModelTest, MemberNames) {
  auto names = Sm().MemberNames("ResourceConfig");
  EXPECT_THAT(names, ::testing::Contains("InstanceCount"));
  EXPECT_THAT(names, ::testing::Contains("InstanceType"));
  EXPECT_THAT(Batch().MemberNames("SubmitServiceJobRequest"), ::testing::Contains("jobName"));
  EXPECT_TRUE(Sm().MemberNames("NoSuchShape").empty());
  EXPECT_TRUE(Sm().MemberNames("TrainingJobName").empty());  // not a structure
  EXPECT_TRUE(Sm().HasShape("TrainingJobName"));
}

TEST(ServiceModelTest, ParseRejectsBadModels) {
  EXPECT_EQ(ServiceModel::Parse("not json").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ServiceModel::Parse("[]").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ServiceModel::Parse(R"({"metadata":{}})").status().code(), Code::kInvalidArgument);
  auto dangling = ServiceModel::Parse(R"({"metadata":{},"operations":{},
      "shapes":{"A":{"type":"list","member":{"shape":"Missing"}}}})");
  ASSERT_FALSE(dangling.ok());
  EXPECT_THAT(dangling.status().message(), HasSubstr("Missing"));
  auto bad_types = ServiceModel::Parse(R"({"metadata":{"protocol":5},"operations":{"X":{"http":7}},
      "shapes":{"A":{"type":"string","min":"x","enum":[1,"a"],"required":"no"}}})");
  EXPECT_TRUE(bad_types.ok()) << bad_types.status().message();
}

TEST(ServiceModelTest, SmallModel) {
  auto m = ServiceModel::Parse(R"({
    "metadata": {"protocol": "json", "targetPrefix": "T", "endpointPrefix": "ep"},
    "operations": {"Op": {"name": "Op", "http": {"method": "POST", "requestUri": "/"},
                          "input": {"shape": "In"}}},
    "shapes": {
      "In": {"type": "structure", "required": ["a"],
             "members": {"a": {"shape": "S", "locationName": "A"}, "p": {"shape": "S", "location": "uri"}}},
      "S": {"type": "string", "min": 2, "pattern": "^[a-z]+$"}
    }})");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->signing_name(), "ep");
  const auto* op = (*m)->FindOperation("Op");
  ASSERT_NE(op, nullptr);
  EXPECT_TRUE((*m)->ValidateInput(*op, json{{"A", "ab"}}).ok());
  // The body key is the locationName; uri members are not looked for in the body.
  EXPECT_THAT((*m)->ValidateInput(*op, json{{"a", "ab"}}).message(), HasSubstr("at 'A'"));
  EXPECT_TRUE((*m)->ValidateInput(*op, json{{"A", "ab"}, {"p", 5}}).ok());
  EXPECT_THAT((*m)->ValidateShape("In", json{{"A", "ab"}, {"p", 5}}, "").message(),
              HasSubstr("at 'p'"));
  EXPECT_EQ((*m)->MemberNames("In"), (std::vector<std::string>{"A", "p"}));
  EXPECT_THAT((*m)->ValidateInput(*op, json{{"A", "a"}}).message(),
              HasSubstr("length greater than or equal to 2"));
  EXPECT_EQ((*m)->ValidateShape("Nope", json(1), "").code(), Code::kNotFound);
}

// ---------------------------------------------------------------------------------------------
// Valid requests

TEST(ServiceModelTest, ValidCreateTrainingJobPasses) {
  EXPECT_EQ(Validate(ValidTrainingJob()), "");
}

TEST(ServiceModelTest, ValidSubmitServiceJobPasses) {
  EXPECT_EQ(Validate(ValidServiceJob(), "SubmitServiceJob", Batch()), "");
  json minimal = {{"jobName", "j"}, {"jobQueue", "q"}, {"serviceJobType", "SAGEMAKER_TRAINING"},
                  {"serviceRequestPayload", "{}"}};
  EXPECT_EQ(Validate(minimal, "SubmitServiceJob", Batch()), "");
}

TEST(ServiceModelTest, OtherBatchOperationsValidate) {
  EXPECT_EQ(Validate(json::parse(R"({"jobQueueName": "q", "priority": 1, "jobQueueType": "SAGEMAKER_TRAINING",
      "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": "env"}]})"),
                     "CreateJobQueue", Batch()),
            "");
  EXPECT_THAT(Validate(json::object(), "CreateJobQueue", Batch()),
              AllOf(HasSubstr("at 'jobQueueName'"), HasSubstr("at 'priority'")));
  EXPECT_EQ(Validate(json::object(), "DescribeJobQueues", Batch()), "");
  EXPECT_EQ(Validate(nullptr, "DescribeJobQueues", Batch()), "");  // empty body
}

TEST(ServiceModelTest, NullOptionalMembersAreAbsent) {
  json body = ValidTrainingJob();
  body["VpcConfig"] = nullptr;
  body["ResourceConfig"]["VolumeKmsKeyId"] = nullptr;
  EXPECT_EQ(Validate(body), "");
}

// ---------------------------------------------------------------------------------------------
// One rule class at a time

TEST(ServiceModelTest, RequiredMembers) {
  json body = ValidTrainingJob();
  body.erase("RoleArn");
  body["AlgorithmSpecification"]["TrainingInputMode"] = nullptr;  // null counts as absent
  std::string msg = Validate(body);
  EXPECT_THAT(msg, StartsWith("2 validation errors detected: "));
  EXPECT_THAT(msg, HasSubstr("Value null at 'RoleArn' failed to satisfy constraint: Member must not be null"));
  EXPECT_THAT(msg, HasSubstr("Value null at 'AlgorithmSpecification.TrainingInputMode' failed to "
                             "satisfy constraint: Member must not be null"));

  json channel_body = ValidTrainingJob();
  channel_body["InputDataConfig"][0]["DataSource"]["S3DataSource"].erase("S3Uri");
  EXPECT_THAT(Validate(channel_body),
              HasSubstr("Value null at 'InputDataConfig[0].DataSource.S3DataSource.S3Uri'"));
}

TEST(ServiceModelTest, Types) {
  json body = ValidTrainingJob();
  body["ResourceConfig"]["InstanceCount"] = "1";
  EXPECT_THAT(Validate(body), HasSubstr("Value '1' at 'ResourceConfig.InstanceCount' failed to "
                                        "satisfy constraint: Member must be of type integer") );
  body["ResourceConfig"]["InstanceCount"] = 1.5;
  EXPECT_THAT(Validate(body), HasSubstr("at 'ResourceConfig.InstanceCount' failed to satisfy "
                                        "constraint: Member must be of type integer"));
  body["ResourceConfig"]["InstanceCount"] = true;
  EXPECT_THAT(Validate(body), HasSubstr("Member must be of type integer"));
  body["ResourceConfig"]["InstanceCount"] = int64_t{1} << 31;  // over int32
  EXPECT_THAT(Validate(body), HasSubstr("Member must be of type integer"));
  body["ResourceConfig"]["InstanceCount"] = 2;
  EXPECT_EQ(Validate(body), "");

  body["EnableNetworkIsolation"] = "true";
  EXPECT_THAT(Validate(body), HasSubstr("at 'EnableNetworkIsolation' failed to satisfy constraint: "
                                        "Member must be of type boolean"));
  body["EnableNetworkIsolation"] = true;
  body["TrainingJobName"] = 7;
  EXPECT_THAT(Validate(body), HasSubstr("Value '7' at 'TrainingJobName' failed to satisfy "
                                        "constraint: Member must be of type string"));
  body["TrainingJobName"] = "ok";
  body["ResourceConfig"] = json::array();
  EXPECT_THAT(Validate(body), HasSubstr("at 'ResourceConfig' failed to satisfy constraint: Member "
                                        "must be of type structure"));
  body["ResourceConfig"] = ValidTrainingJob()["ResourceConfig"];
  body["InputDataConfig"] = json::object();
  EXPECT_THAT(Validate(body), HasSubstr("Member must be of type list"));
  body["InputDataConfig"] = ValidTrainingJob()["InputDataConfig"];
  body["HyperParameters"] = json::array({"a"});
  EXPECT_THAT(Validate(body), HasSubstr("at 'HyperParameters' failed to satisfy constraint: Member "
                                        "must be of type map"));
  body["HyperParameters"] = {{"lr", 0.1}};
  EXPECT_THAT(Validate(body), HasSubstr("at 'HyperParameters.lr' failed to satisfy constraint: "
                                        "Member must be of type string"));
  body["HyperParameters"] = {{"lr", "0.1"}};
  EXPECT_EQ(Validate(body), "");

  // Batch long / integer members.
  json job = ValidServiceJob();
  job["schedulingPriority"] = 1.0;
  EXPECT_THAT(Validate(job, "SubmitServiceJob", Batch()),
              HasSubstr("at 'schedulingPriority' failed to satisfy constraint: Member must be of type integer"));
  // Double and timestamp members.
  EXPECT_TRUE(Sm().ValidateShape("MemoryInGiBAmount", json(2), "").ok());
  EXPECT_TRUE(Sm().ValidateShape("MemoryInGiBAmount", json(2.5), "").ok());
  EXPECT_THAT(Sm().ValidateShape("MemoryInGiBAmount", json("2"), "M").message(),
              HasSubstr("Value '2' at 'M' failed to satisfy constraint: Member must be of type float"));
  EXPECT_TRUE(Sm().ValidateShape("Timestamp", json(1700000000), "").ok());
  EXPECT_TRUE(Sm().ValidateShape("Timestamp", json(1700000000.5), "").ok());
  EXPECT_TRUE(Sm().ValidateShape("Timestamp", json("2024-01-01T00:00:00Z"), "").ok());
  EXPECT_THAT(Sm().ValidateShape("Timestamp", json(true), "T").message(),
              HasSubstr("Member must be of type timestamp"));
}

TEST(ServiceModelTest, TopLevelMustBeAnObject) {
  EXPECT_THAT(Validate(json::array()), HasSubstr("Member must be of type structure"));
  EXPECT_THAT(Validate(json("x")), HasSubstr("Member must be of type structure"));
}

TEST(ServiceModelTest, StringLength) {
  json body = ValidTrainingJob();
  body["AlgorithmSpecification"]["TrainingImage"] = std::string(256, 'a');
  std::string msg = Validate(body);
  EXPECT_THAT(msg, StartsWith("1 validation error detected: "));
  EXPECT_THAT(msg, HasSubstr("at 'AlgorithmSpecification.TrainingImage' failed to satisfy "
                             "constraint: Member must have length less than or equal to 255"));
  // A too-long name breaks both its length and its pattern ({0,62}); both are reported.
  body = ValidTrainingJob();
  body["TrainingJobName"] = std::string(64, 'a');
  msg = Validate(body);
  EXPECT_THAT(msg, StartsWith("2 validation errors detected: "));
  EXPECT_THAT(msg, HasSubstr("at 'TrainingJobName' failed to satisfy constraint: Member must have "
                             "length less than or equal to 63"));

  body = ValidTrainingJob();
  body["RoleArn"] = "arn:aws:iam::1:role";
  EXPECT_THAT(Validate(body), HasSubstr("at 'RoleArn' failed to satisfy constraint: Member must have "
                                        "length greater than or equal to 20"));

  // Code points, not bytes: 64 x U+00E9 is 128 bytes but within the 256 of a hyperparameter key.
  std::string e_acute;
  for (int i = 0; i < 256; ++i) e_acute += "\xC3\xA9";
  body = ValidTrainingJob();
  body["HyperParameters"] = {{e_acute, "v"}};
  EXPECT_EQ(Validate(body), "");
  body["HyperParameters"] = {{e_acute + "x", "v"}};
  EXPECT_THAT(Validate(body), HasSubstr("length less than or equal to 256"));

  // Batch: clientToken is 1..64.
  json job = ValidServiceJob();
  job["clientToken"] = "";
  EXPECT_THAT(Validate(job, "SubmitServiceJob", Batch()),
              HasSubstr("Value '' at 'clientToken' failed to satisfy constraint: Member must have "
                        "length greater than or equal to 1"));
}

TEST(ServiceModelTest, ListAndMapLength) {
  json body = ValidTrainingJob();
  body["InputDataConfig"] = json::array();
  EXPECT_THAT(Validate(body), HasSubstr("Value '[]' at 'InputDataConfig' failed to satisfy "
                                        "constraint: Member must have length greater than or equal to 1"));
  body = ValidTrainingJob();
  for (int i = 0; i < 21; ++i) body["InputDataConfig"].push_back(body["InputDataConfig"][0]);
  EXPECT_THAT(Validate(body), HasSubstr("at 'InputDataConfig' failed to satisfy constraint: Member "
                                        "must have length less than or equal to 20"));
  body = ValidTrainingJob();
  for (int i = 0; i < 6; ++i) body["ResourceConfig"]["InstanceGroups"].push_back(json::object());
  EXPECT_THAT(Validate(body), HasSubstr("at 'ResourceConfig.InstanceGroups' failed to satisfy "
                                        "constraint: Member must have length less than or equal to 5"));
  // Maps: Batch tags are 1..50 entries.
  json job = ValidServiceJob();
  job["tags"] = json::object();
  EXPECT_THAT(Validate(job, "SubmitServiceJob", Batch()),
              HasSubstr("at 'tags' failed to satisfy constraint: Member must have length greater "
                        "than or equal to 1"));
  for (int i = 0; i < 51; ++i) job["tags"]["k" + std::to_string(i)] = "v";
  EXPECT_THAT(Validate(job, "SubmitServiceJob", Batch()),
              HasSubstr("at 'tags' failed to satisfy constraint: Member must have length less "
                        "than or equal to 50"));
  // Map keys and values are validated under `Name.<key>`.
  job["tags"] = {{std::string(129, 'k'), "v"}, {"ok", std::string(257, 'v')}};
  std::string msg = Validate(job, "SubmitServiceJob", Batch());
  EXPECT_THAT(msg, HasSubstr("at 'tags." + std::string(129, 'k') + "' failed to satisfy constraint: "
                             "Member must have length less than or equal to 128"));
  EXPECT_THAT(msg, HasSubstr("at 'tags.ok' failed to satisfy constraint: Member must have length "
                             "less than or equal to 256"));
}

TEST(ServiceModelTest, NumberRange) {
  json body = ValidTrainingJob();
  body["ResourceConfig"]["InstanceCount"] = -1;
  std::string msg = Validate(body);
  EXPECT_EQ(msg, "1 validation error detected: Value '-1' at 'ResourceConfig.InstanceCount' failed "
                 "to satisfy constraint: Member must have value greater than or equal to 0");
  body = ValidTrainingJob();
  body["StoppingCondition"]["MaxRuntimeInSeconds"] = 0;
  EXPECT_THAT(Validate(body), HasSubstr("at 'StoppingCondition.MaxRuntimeInSeconds' failed to "
                                        "satisfy constraint: Member must have value greater than or equal to 1"));
  // float bounds
  EXPECT_THAT(Sm().ValidateShape("NumberOfCpuCores", json(0.1), "Cores").message(),
              HasSubstr("Value '0.1' at 'Cores' failed to satisfy constraint: Member must have "
                        "value greater than or equal to 0.25"));
  EXPECT_TRUE(Sm().ValidateShape("NumberOfCpuCores", json(1), "").ok());
  EXPECT_THAT(Sm().ValidateShape("ValidationFraction", json(1.5), "F").message(),
              HasSubstr("Member must have value less than or equal to 1"));
  // long bounds (Batch UpdatePolicy.jobExecutionTimeoutMinutes is 1..360)
  EXPECT_THAT(Batch().ValidateShape("UpdatePolicy", json{{"jobExecutionTimeoutMinutes", 361}}, "updatePolicy")
                  .message(),
              HasSubstr("Value '361' at 'updatePolicy.jobExecutionTimeoutMinutes' failed to satisfy "
                        "constraint: Member must have value less than or equal to 360"));
  EXPECT_TRUE(Batch().ValidateShape("UpdatePolicy", json{{"jobExecutionTimeoutMinutes", 360}}, "").ok());
}

TEST(ServiceModelTest, Enum) {
  json body = ValidTrainingJob();
  body["AlgorithmSpecification"]["TrainingInputMode"] = "Stream";
  EXPECT_EQ(Validate(body),
            "1 validation error detected: Value 'Stream' at 'AlgorithmSpecification.TrainingInputMode' "
            "failed to satisfy constraint: Member must satisfy enum value set: [Pipe, File, FastFile]");
  body = ValidTrainingJob();
  body["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3DataType"] = "s3prefix";
  EXPECT_THAT(Validate(body), HasSubstr("at 'InputDataConfig[0].DataSource.S3DataSource.S3DataType' "
                                        "failed to satisfy constraint: Member must satisfy enum value set: ["));
  json job = ValidServiceJob();
  job["serviceJobType"] = "EKS";
  EXPECT_THAT(Validate(job, "SubmitServiceJob", Batch()),
              HasSubstr("Value 'EKS' at 'serviceJobType' failed to satisfy constraint: Member must "
                        "satisfy enum value set: [SAGEMAKER_TRAINING]"));
}

TEST(ServiceModelTest, Pattern) {
  json body = ValidTrainingJob();
  body["TrainingJobName"] = "bad_name!";
  EXPECT_EQ(Validate(body),
            "1 validation error detected: Value 'bad_name!' at 'TrainingJobName' failed to satisfy "
            "constraint: Member must satisfy regular expression pattern: "
            "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}");
  body["TrainingJobName"] = "-leading";
  EXPECT_THAT(Validate(body), HasSubstr("regular expression pattern"));
  body["TrainingJobName"] = "a--b-c";
  EXPECT_EQ(Validate(body), "");

  body = ValidTrainingJob();
  body["RoleArn"] = "arn:aws:iam::000000000000:user/SomeoneElse";
  EXPECT_THAT(Validate(body), HasSubstr("at 'RoleArn' failed to satisfy constraint: Member must "
                                        "satisfy regular expression pattern: arn:aws"));
  body = ValidTrainingJob();
  body["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] = "ftp://bucket/x";
  EXPECT_THAT(Validate(body), HasSubstr("at 'InputDataConfig[0].DataSource.S3DataSource.S3Uri' failed "
                                        "to satisfy constraint: Member must satisfy regular expression pattern"));
  // Unicode classes: TagKey is [\p{L}\p{Z}\p{N}_.:/=+\-@]*.
  body = ValidTrainingJob();
  body["Tags"] = json::parse(R"([{"Key": "caf\u00e9 \u65e5\u672c", "Value": "v"}, {"Key": "a#b", "Value": "v"}])");
  std::string msg = Validate(body);
  EXPECT_THAT(msg, StartsWith("1 validation error detected: Value 'a#b' at 'Tags[1].Key'"));
  // Lines: '.' spans newlines (TrainingContainerArgument is '.*').
  body = ValidTrainingJob();
  body["AlgorithmSpecification"]["ContainerArguments"] = {"--x\n--y"};
  EXPECT_EQ(Validate(body), "");
}

TEST(ServiceModelTest, TranslatedJavaPatterns) {
  // ArnOrName ends in a (?<!-) lookbehind, checked on its own.
  json body = ValidTrainingJob();
  body["AlgorithmSpecification"]["AlgorithmName"] = "my-algorithm";
  EXPECT_EQ(Validate(body), "");
  body["AlgorithmSpecification"]["AlgorithmName"] = "my-algorithm-";
  EXPECT_THAT(Validate(body), HasSubstr("at 'AlgorithmSpecification.AlgorithmName' failed to satisfy "
                                        "constraint: Member must satisfy regular expression pattern"));
  EXPECT_TRUE(Sm().PatternSupported(
      "(arn:aws[a-z\\-]*:sagemaker:[a-z0-9\\-]*:[0-9]{12}:[a-z\\-]*\\/)?([a-zA-Z0-9]([a-zA-Z0-9-]){0,62})(?<!-)"));
  // \p{Alnum} (TrainingRepositoryCredentialsProviderArn).
  const std::string lambda_arn = "arn:aws:lambda:us-east-1:123456789012:function:creds";
  EXPECT_TRUE(Sm().ValidateShape("TrainingRepositoryCredentialsProviderArn", json(lambda_arn), "").ok());
  EXPECT_FALSE(Sm().ValidateShape("TrainingRepositoryCredentialsProviderArn",
                                  json("arn:aws:lambda:us_east:123456789012:function:x"), "").ok());
  // Leading lookaheads and RE2's repetition limit.
  EXPECT_TRUE(Sm().PatternSupported("(?=.{1,32}$)[a-zA-Z0-9](-*[a-zA-Z0-9])*"));
  EXPECT_TRUE(Sm().PatternSupported("(?!\\s*$).+"));
  EXPECT_TRUE(Sm().PatternSupported(".{0,1024}"));
  EXPECT_FALSE(Sm().PatternSupported("not a pattern of the model"));
}

TEST(ServiceModelTest, LookaroundsOnASmallModel) {
  auto m = ServiceModel::Parse(R"json({"metadata": {}, "operations": {}, "shapes": {
      "NotBlank": {"type": "string", "pattern": "(?!\\s*$).+"},
      "Short": {"type": "string", "pattern": "(?=.{1,4}$)[a-z]+"},
      "NoDot": {"type": "string", "pattern": "(?!^[.-])^([a-zA-Z0-9-_.]+)"},
      "Alnum": {"type": "string", "pattern": "\\p{Alnum}+"},
      "Poss": {"type": "string", "pattern": "a++b"},
      "Surrogates": {"type": "string", "pattern": "[\\u0020-\\uD7FF\\uE000-\\uFFFD\\uD800\\uDC00-\\uDBFF\\uDFFF]*"},
      "Lookahead": {"type": "string", "pattern": "a(?=b)b"}
  }})json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto ok = [&](const char* shape, const std::string& v) {
    return (*m)->ValidateShape(shape, json(v), "").ok();
  };
  EXPECT_TRUE(ok("NotBlank", " x "));
  EXPECT_FALSE(ok("NotBlank", "   "));
  EXPECT_TRUE(ok("Short", "abcd"));
  EXPECT_FALSE(ok("Short", "abcde"));
  EXPECT_TRUE(ok("NoDot", "a.b"));
  EXPECT_FALSE(ok("NoDot", ".ab"));
  EXPECT_TRUE(ok("Alnum", "abc123"));
  EXPECT_FALSE(ok("Alnum", "abc-123"));
  EXPECT_TRUE(ok("Poss", "aaab"));
  EXPECT_TRUE(ok("Surrogates", "hello \xF0\x9F\x98\x80"));  // U+1F600 via a surrogate pair
  EXPECT_FALSE(ok("Surrogates", "bell\x07"));
  // A lookahead in the middle has no RE2 equivalent: skipped and reported.
  EXPECT_THAT((*m)->unsupported_patterns(), ::testing::ElementsAre("a(?=b)b"));
  EXPECT_TRUE(ok("Lookahead", "anything"));
}

TEST(ServiceModelTest, Union) {
  EXPECT_TRUE(Sm().ValidateShape("CustomFileSystem",
                                 json::parse(R"({"EFSFileSystem": {"FileSystemId": "fs-0123456789abcdef"}})"),
                                 "CustomFileSystems[0]").ok());
  std::string two = Sm().ValidateShape("CustomFileSystem", json::parse(R"({
      "EFSFileSystem": {"FileSystemId": "fs-0123456789abcdef"},
      "S3FileSystem": {"S3Uri": "s3://b/p"}})"), "CustomFileSystems[0]").message();
  EXPECT_THAT(two, HasSubstr("at 'CustomFileSystems[0]' failed to satisfy constraint: Member must "
                             "have exactly one member set"));
  std::string none = Sm().ValidateShape("CustomFileSystem", json::object(), "Fs").message();
  EXPECT_THAT(none, HasSubstr("Value '{}' at 'Fs' failed to satisfy constraint: Member must have "
                              "exactly one member set"));
  // A null member is not set.
  EXPECT_TRUE(Sm().ValidateShape("CustomFileSystem", json::parse(R"({
      "EFSFileSystem": {"FileSystemId": "fs-0123456789abcdef"}, "S3FileSystem": null})"), "").ok());
  // Members of the chosen variant are validated with the full path.
  EXPECT_THAT(Sm().ValidateShape("CustomFileSystem",
                                 json::parse(R"({"EFSFileSystem": {"FileSystemId": "nope"}})"), "Fs")
                  .message(),
              HasSubstr("at 'Fs.EFSFileSystem.FileSystemId'"));
}

TEST(ServiceModelTest, MultipleErrorsAreAllReported) {
  json body = ValidTrainingJob();
  body.erase("RoleArn");
  body["TrainingJobName"] = "bad_name!";
  body["ResourceConfig"]["InstanceCount"] = -1;
  body["ResourceConfig"]["InstanceType"] = "ml.nope";
  body["InputDataConfig"][0]["ChannelName"] = "";
  std::string msg = Validate(body);
  // ChannelName "" breaks both its length and its pattern.
  EXPECT_THAT(msg, StartsWith("6 validation errors detected: "));
  EXPECT_THAT(msg, HasSubstr("Value null at 'RoleArn'"));
  EXPECT_THAT(msg, HasSubstr("Value 'bad_name!' at 'TrainingJobName'"));
  EXPECT_THAT(msg, HasSubstr("Value '-1' at 'ResourceConfig.InstanceCount'"));
  EXPECT_THAT(msg, HasSubstr("Value 'ml.nope' at 'ResourceConfig.InstanceType'"));
  EXPECT_THAT(msg, HasSubstr("Value '' at 'InputDataConfig[0].ChannelName' failed to satisfy "
                             "constraint: Member must have length greater than or equal to 1"));
  EXPECT_THAT(msg, HasSubstr("Value '' at 'InputDataConfig[0].ChannelName' failed to satisfy "
                             "constraint: Member must satisfy regular expression pattern"));
  EXPECT_EQ(std::count(msg.begin(), msg.end(), ';'), 5);
}

TEST(ServiceModelTest, LongValuesAreTruncated) {
  json body = ValidTrainingJob();
  body["TrainingJobName"] = std::string(300, 'x') + "!";
  std::string msg = Validate(body);
  EXPECT_THAT(msg, HasSubstr("Value '" + std::string(100, 'x') + "...' at 'TrainingJobName'"));
  EXPECT_THAT(msg, ::testing::Not(HasSubstr(std::string(101, 'x'))));
}

TEST(ServiceModelTest, DeepNestingIsBounded) {
  // Nothing in these models recurses, so depth follows the shapes; a value nested far deeper than
  // any shape is simply a type error at the first level that does not fit.
  json deep = json::array();
  for (int i = 0; i < 1000; ++i) deep = json::array({deep});
  json body = ValidTrainingJob();
  body["Tags"] = deep;
  EXPECT_THAT(Validate(body), HasSubstr("at 'Tags[0]' failed to satisfy constraint: Member must be of type structure"));
}

TEST(ServiceModelTest, QuotingAValueNestedFarDeeperThanTheStackAllowsDoesNotRecurse) {
  // A 300,000-deep array where a string belongs: quoting it in the message once recursed once per
  // level (json::dump) and overflowed the stack (fuzz/regressions/service_model/).
  const size_t depth = 300000;
  json body = json::object();  // moved in: copying a json value recurses too
  body["TrainingJobName"] = json::parse(std::string(depth, '[') + std::string(depth, ']'));
  std::string msg = Validate(body, "DescribeTrainingJob");
  EXPECT_EQ(msg, "1 validation error detected: Value '" + std::string(100, '[') +
                     "...' at 'TrainingJobName' failed to satisfy constraint: Member must be of type string");
}

TEST(ServiceModelTest, QuotedValuesAreTheirCompactJson) {
  // The quote is json::dump's compact form (keys sorted, invalid UTF-8 replaced), cut after 100
  // code points.
  json value = json::parse(R"({"b": [1, 2.5, {"c": null, "a": true}], "a": "x\"y", "é": {}, "e": []})");
  value["bad"] = std::string("\xff");
  std::string msg = Validate(json{{"TrainingJobName", value}}, "DescribeTrainingJob");
  EXPECT_THAT(msg, HasSubstr("Value '" + value.dump(-1, ' ', false, json::error_handler_t::replace) + "' at"));

  json wide = json::array();
  for (int i = 0; i < 100; ++i) wide.push_back(json::array({i, "é"}));
  msg = Validate(json{{"TrainingJobName", wide}}, "DescribeTrainingJob");
  std::string full = wide.dump();
  size_t cut = 0;
  for (size_t points = 0; points < 100; ++cut) points += (static_cast<unsigned char>(full[cut]) & 0xC0) != 0x80;
  while (cut < full.size() && (static_cast<unsigned char>(full[cut]) & 0xC0) == 0x80) ++cut;
  EXPECT_THAT(msg, HasSubstr("Value '" + full.substr(0, cut) + "...' at 'TrainingJobName'"));
}

// ---------------------------------------------------------------------------------------------
// Pattern coverage of the operations trainyard serves

TEST(ServiceModelTest, ReachablePatternsCompile) {
  struct Case {
    const ServiceModel* model;
    std::vector<const char*> ops;
  };
  std::vector<Case> cases = {
      {&Batch(),
       {"CreateServiceEnvironment", "UpdateServiceEnvironment", "DescribeServiceEnvironments",
        "DeleteServiceEnvironment", "CreateJobQueue", "UpdateJobQueue", "DescribeJobQueues",
        "DeleteJobQueue", "SubmitServiceJob", "DescribeServiceJob", "ListServiceJobs",
        "TerminateServiceJob", "UpdateServiceJob", "GetJobQueueSnapshot", "CreateSchedulingPolicy"}},
      {&Sm(),
       {"CreateTrainingJob", "DescribeTrainingJob", "ListTrainingJobs", "StopTrainingJob",
        "UpdateTrainingJob"}},
  };
  size_t total = 0, unsupported = 0;
  for (const auto& c : cases) {
    std::set<std::string> patterns;
    for (const char* op : c.ops) {
      ASSERT_NE(c.model->FindOperation(op), nullptr) << op;
      for (auto& p : c.model->PatternsFor(op)) patterns.insert(p);
    }
    for (const auto& p : patterns) {
      ++total;
      if (!c.model->PatternSupported(p)) {
        ++unsupported;
        std::cout << "unsupported pattern (" << c.model->signing_name() << "): " << p << "\n";
      }
    }
  }
  std::cout << "reachable patterns: " << total << ", unsupported: " << unsupported << "\n";
  EXPECT_GE(total, 20u);
  EXPECT_EQ(unsupported, 0u);

  std::cout << "unsupported in the whole SageMaker model (" << Sm().unsupported_patterns().size()
            << "):\n";
  for (const auto& p : Sm().unsupported_patterns()) std::cout << "  " << p << "\n";
  EXPECT_LE(Sm().unsupported_patterns().size(), 5u);
  EXPECT_TRUE(Batch().unsupported_patterns().empty());
}

// ---------------------------------------------------------------------------------------------
// Every constraint of every operation's input, one violation each
//
// The walker reads the model file itself (not through ServiceModel), applies the documented rules
// on top as the server does, and for each member reachable from each operation's input sends a
// request that breaks one constraint of that member: a required member left out, a length or a
// value one past its bound, a value outside the enum, a value of the wrong JSON type, and a value
// that breaks the pattern. The error must name the member's path and the rule.

struct Walk {
  const ServiceModel& model;
  json shapes;  // the model's shapes, documented rules applied as per-member overrides
  std::map<std::string, json> overrides;  // "Structure.member" -> the traits a rule adds
  std::map<std::string, int> checked;     // per constraint kind
  std::vector<std::string> failures;

  // The shape a member refers to, with any documented rule's traits added.
  json MemberShape(const std::string& owner, const std::string& member, const json& ref) const {
    json s = shapes[ref["shape"].get<std::string>()];
    if (auto it = overrides.find(owner + "." + member); it != overrides.end()) s.update(it->second);
    return s;
  }

  // The request that carries `leaf` at `steps` (each step: a member name, "[]" for a list item,
  // "{}" for a map value) and the path a message names it by.
  static std::pair<json, std::string> Place(const std::vector<std::string>& steps, const json& leaf) {
    json v = leaf;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      if (*it == "[]") v = json::array({v});
      else if (*it == "{}") v = json{{"k", v}};
      else v = json{{*it, v}};
    }
    std::string path;
    for (const auto& st : steps) {
      if (st == "[]") path += "[0]";
      else if (st == "{}") path += ".k";
      else path += (path.empty() ? "" : ".") + st;
    }
    return {v, path};
  }

  void Expect(const ServiceModel::Operation& op, bool bound, const std::vector<std::string>& steps,
              const json& leaf, const std::string& kind, const std::string& rule) {
    auto [value, path] = Place(steps, leaf);
    json body = bound ? json::object() : value;
    json uri = bound ? value : json::object();
    Status st = model.ValidateInput(op, body, &uri);
    std::string want = "at '" + path + "' failed to satisfy constraint: Member must " + rule;
    ++checked[kind];
    if (st.ok() || st.message().find(want) == std::string::npos) {
      failures.push_back(op.name + " " + kind + ": wanted \"" + want + "\", got \"" +
                         (st.ok() ? std::string("OK") : st.message().substr(0, 300)) + "\"");
    }
  }

  static std::string Num(const json& j) {
    return j.is_number_integer() ? std::to_string(j.get<int64_t>()) : j.dump();
  }

  // A value of the wrong JSON type for a shape.
  static json WrongType(const std::string& type) {
    if (type == "string" || type == "blob") return 7;
    if (type == "timestamp") return true;
    return "not-a-" + type;
  }

  void Member(const ServiceModel::Operation& op, bool bound, std::vector<std::string> steps,
              const json& s, std::set<std::string>& seen, int depth) {
    const std::string type = s["type"];
    Expect(op, bound, steps, WrongType(type), "type", "be of type " + type);
    if (type == "string") {
      if (s.contains("min") && s["min"].get<int64_t>() > 0) {
        Expect(op, bound, steps, std::string(s["min"].get<size_t>() - 1, 'a'), "string min",
               "have length greater than or equal to " + Num(s["min"]));
      }
      if (s.contains("max")) {
        Expect(op, bound, steps, std::string(s["max"].get<size_t>() + 1, 'a'), "string max",
               "have length less than or equal to " + Num(s["max"]));
      }
      if (s.contains("enum")) {
        Expect(op, bound, steps, "NOT-IN-THE-ENUM", "enum", "satisfy enum value set");
      }
      if (s.contains("pattern")) Pattern(op, bound, steps, s);
    } else if (type == "integer" || type == "long" || type == "float" || type == "double") {
      if (s.contains("min")) {
        json below = s["min"].is_number_integer() ? json(s["min"].get<int64_t>() - 1) : json(s["min"].get<double>() / 2 - 1);
        Expect(op, bound, steps, below, "number min", "have value greater than or equal to " + ShownBound(s["min"]));
      }
      if (s.contains("max")) {
        json above = s["max"].is_number_integer() ? json(s["max"].get<int64_t>() + 1) : json(s["max"].get<double>() * 2 + 1);
        Expect(op, bound, steps, above, "number max", "have value less than or equal to " + ShownBound(s["max"]));
      }
    } else if (type == "list" || type == "map") {
      json item = type == "list" ? shapes[s["member"]["shape"].get<std::string>()]
                                 : shapes[s["value"]["shape"].get<std::string>()];
      json filler = Filler(item);
      auto many = [&](size_t n) {
        if (type == "list") return json(std::vector<json>(n, filler));
        json m = json::object();
        for (size_t i = 0; i < n; ++i) m["k" + std::to_string(i)] = filler;
        return m;
      };
      if (s.contains("min") && s["min"].get<int64_t>() > 0) {
        Expect(op, bound, steps, many(s["min"].get<size_t>() - 1), type + " min",
               "have length greater than or equal to " + Num(s["min"]));
      }
      if (s.contains("max") && s["max"].get<int64_t>() < 10000) {
        Expect(op, bound, steps, many(s["max"].get<size_t>() + 1), type + " max",
               "have length less than or equal to " + Num(s["max"]));
      }
      if (bound || depth > 6) return;
      steps.push_back(type == "list" ? "[]" : "{}");
      Member(op, false, steps, item, seen, depth + 1);
    } else if (type == "structure") {
      if (depth > 6) return;
      for (const auto& [name, ref] : s["members"].items()) {
        std::string key = s.value("__name", std::string()) + "." + name;
        if (!seen.insert(key).second) continue;  // each member once per operation
        json ms = MemberShape(s.value("__name", std::string()), name, ref);
        ms["__name"] = ref["shape"];
        bool is_bound = depth == 0 && ref.contains("location");
        std::vector<std::string> at = steps;
        at.push_back(name);
        bool required = s.contains("required") &&
                        std::find(s["required"].begin(), s["required"].end(), name) != s["required"].end();
        if (required) {
          auto [parent, ppath] = Place(steps, json::object());
          ++checked["required"];
          json body = is_bound ? json::object() : parent, uri = json::object();
          Status st = model.ValidateInput(op, body, &uri);
          std::string want = "Value null at '" + JoinPath(ppath, name) + "' failed to satisfy constraint: Member must not be null";
          if (st.ok() || st.message().find(want) == std::string::npos) {
            failures.push_back(op.name + " required: wanted \"" + want + "\"");
          }
        }
        if (!ms.value("jsonvalue", false) && !ref.value("jsonvalue", false)) {
          Member(op, is_bound, at, ms, seen, depth + 1);
        }
      }
    }
  }

  static std::string JoinPath(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

  static std::string ShownBound(const json& b) {
    if (b.is_number_integer()) return std::to_string(b.get<int64_t>());
    double d = b.get<double>();
    if (d == static_cast<double>(static_cast<int64_t>(d))) return std::to_string(static_cast<int64_t>(d));
    return b.dump();
  }

  // A value of an item shape that is at least of the right type (its own constraints may fail;
  // the length error of the container is what is looked for).
  json Filler(const json& item) const {
    const std::string type = item["type"];
    if (type == "string") return std::string(item.value("min", 1), 'a');
    if (type == "structure" || type == "map") return json::object();
    if (type == "list") return json::array();
    if (type == "boolean") return true;
    return item.value("min", 1);
  }

  // Values that each break most patterns; at least one, within the shape's length bounds, must be
  // refused with the pattern named.
  void Pattern(const ServiceModel::Operation& op, bool bound, const std::vector<std::string>& steps, const json& s) {
    size_t min = s.value("min", 0), max = s.value("max", 1000000);
    std::string pattern = s["pattern"];
    // Patterns that every string of any length matches ('.' matches line breaks here, see
    // docs/api-coverage.md) cannot be broken; the rest must refuse one of the values below.
    static const std::set<std::string> kAnyText = {".*", ".+", "[\\S\\s]*", "[\\S\\s]+", "[\\s\\S]+",
                                                   "[\\s\\S]*", ".{0,1024}", ".*(?:[ \\r\\n\\t].*)*"};
    if (kAnyText.count(pattern)) {
      ++checked["pattern matching any text"];
      return;
    }
    ++checked["pattern"];
    for (std::string base : {"\x01", "\n", " ", "!", "~~", "-", "A"}) {
      std::string v = base;
      while (v.size() < std::max<size_t>(min, 1)) v += base;
      if (v.size() > max) continue;
      auto [value, path] = Place(steps, json(v));
      json body = bound ? json::object() : value, uri = bound ? value : json::object();
      Status st = model.ValidateInput(op, body, &uri);
      std::string want = "at '" + path + "' failed to satisfy constraint: Member must satisfy regular expression pattern: " + pattern;
      if (!st.ok() && st.message().find(want) != std::string::npos) return;
    }
    failures.push_back(op.name + " pattern at " + Place(steps, json()).second + ": no value was refused: " + pattern);
  }
};

void WalkModel(const ServiceModel& model, const char* file,
               std::span<const ServiceModel::DocumentedRule> rules) {
  std::ifstream in(std::string(TY_MODELS_DIR) + "/" + file);
  ASSERT_TRUE(in) << file;
  json doc = json::parse(in);
  Walk w{model, doc["shapes"], {}, {}, {}};
  for (const auto& r : rules) {
    json traits = json::object();
    if (r.min) traits["min"] = *r.min == static_cast<int64_t>(*r.min) ? json(static_cast<int64_t>(*r.min)) : json(*r.min);
    if (r.max) traits["max"] = *r.max == static_cast<int64_t>(*r.max) ? json(static_cast<int64_t>(*r.max)) : json(*r.max);
    if (!r.pattern.empty()) traits["pattern"] = std::string(r.pattern);
    w.overrides[std::string(r.member)] = traits;
  }
  size_t operations = 0;
  for (const auto& [name, op] : doc["operations"].items()) {
    if (!op.contains("input")) continue;
    const ServiceModel::Operation* served = model.FindOperation(name);
    ASSERT_NE(served, nullptr) << name;
    ++operations;
    json root = w.shapes[op["input"]["shape"].get<std::string>()];
    root["__name"] = op["input"]["shape"];
    std::set<std::string> seen;
    w.Member(*served, false, {}, root, seen, 0);
  }
  std::cout << file << ": " << operations << " operations;";
  for (const auto& [kind, n] : w.checked) std::cout << " " << kind << " " << n << ";";
  std::cout << " failures " << w.failures.size() << "\n";
  for (size_t i = 0; i < std::min<size_t>(w.failures.size(), 20); ++i) ADD_FAILURE() << w.failures[i];
  EXPECT_TRUE(w.failures.empty());
  for (const char* kind : {"required", "type", "string min", "string max", "enum", "number min", "number max", "list max"}) {
    EXPECT_GT(w.checked[kind], 0) << kind;
  }
}

TEST(ServiceModelTest, EveryBatchInputConstraintIsEnforced) {
  WalkModel(Batch(), "batch-2016-08-10.json", ServiceModel::BatchDocumentedRules());
}

TEST(ServiceModelTest, EverySageMakerInputConstraintIsEnforced) {
  WalkModel(Sm(), "sagemaker-2017-07-24.json", {});
}

}  // namespace
}  // namespace ty::api
