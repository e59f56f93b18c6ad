#include <sys/stat.h>

#include <cctype>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <vector>

#include "core/clock.h"
#include "core/config.h"
#include "core/model.h"
#include "core/object_key.h"
#include "core/strings.h"
#include "core/training_spec_json.h"

namespace ty {
namespace {

TEST(Glob, StarMatchesAnyRunIncludingEmpty) {
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("Received status from SageMaker: InternalServerError*",
                        "Received status from SageMaker: InternalServerError: try again"));
  EXPECT_FALSE(GlobMatch("Received*Validation*", "Received status: InternalServerError"));
  EXPECT_TRUE(GlobMatch("*CapacityError*", "x CapacityError y"));
  EXPECT_FALSE(GlobMatch("abc", "abcd"));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXXbYYc"));
}

TEST(AmzDate, RoundTripsAndRejectsGarbage) {
  int64_t ms = 0;
  ASSERT_TRUE(ParseAmzDate("20150830T123600Z", &ms));
  EXPECT_EQ(ms, 1440938160000);
  EXPECT_EQ(FormatAmzDate(ms), "20150830T123600Z");
  EXPECT_FALSE(ParseAmzDate("2015-08-30T12:36:00Z", &ms));
  EXPECT_FALSE(ParseAmzDate("20151330T123600Z", &ms));
}

TEST(Iso8601, ReadsWhatTheQueryProtocolSendsAndRejectsTheRest) {
  int64_t ms = 0;
  ASSERT_TRUE(ParseIso8601("2015-08-30T12:36:00Z", &ms));
  EXPECT_EQ(ms, 1440938160000);
  ASSERT_TRUE(ParseIso8601("2015-08-30T12:36:00.123456Z", &ms));  // botocore's microseconds
  EXPECT_EQ(ms, 1440938160123);
  ASSERT_TRUE(ParseIso8601("2015-08-30T12:36:00+00:00", &ms));
  EXPECT_EQ(ms, 1440938160000);
  ASSERT_TRUE(ParseIso8601(FormatIso8601(1440938160042), &ms));
  EXPECT_EQ(ms, 1440938160042);
  for (const char* bad : {"20150830T123600Z", "2015-08-30T12:36:00", "2015-08-30T12:36:00+02:00", "2015-13-30T12:36:00Z",
                          "2015-08-30T24:36:00Z", "2015-08-30T12:36:00.Z", "2015-08-30T12:36:00.12345678901Z",
                          "2015-08-3OT12:36:00Z", "", "yesterday"})
    EXPECT_FALSE(ParseIso8601(bad, &ms)) << bad;
}

TEST(HttpDate, IsImfFixdateInGmt) {
  EXPECT_EQ(FormatHttpDate(784111777000), "Sun, 06 Nov 1994 08:49:37 GMT");  // RFC 9110's example
  EXPECT_EQ(FormatHttpDate(1440938160999), "Sun, 30 Aug 2015 12:36:00 GMT");   // milliseconds dropped
  EXPECT_EQ(FormatHttpDate(951782400000), "Tue, 29 Feb 2000 00:00:00 GMT");
}

TEST(HttpDate, ParsesWhatItFormatsAndTheOtherSpellings) {
  int64_t t = 0;
  ASSERT_TRUE(ParseHttpDate(FormatHttpDate(784111777000), &t));
  EXPECT_EQ(t, 784111777000);
  ASSERT_TRUE(ParseHttpDate("Sun, 6 Nov 1994 08:49:37 +0000", &t));  // Python's formatdate
  EXPECT_EQ(t, 784111777000);
  ASSERT_TRUE(ParseHttpDate("19941106T084937Z", &t));
  EXPECT_EQ(t, 784111777000);
  for (const char* bad : {"", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 06 Foo 1994 08:49:37 GMT",
                          "Sun, 06 Nov 94 08:49:37 GMT", "Sun, 06 Nov 1994 8:49:37 GMT", "yesterday"})
    EXPECT_FALSE(ParseHttpDate(bad, &t)) << bad;
}

TEST(Strings, RandomAlnumHasTheLengthAndAlphabetAsked) {
  for (size_t n : {0u, 1u, 16u, 40u, 200u}) {
    std::string upper = RandomAlnum(n, true), all = RandomAlnum(n, false);
    ASSERT_EQ(upper.size(), n);
    ASSERT_EQ(all.size(), n);
    for (char c : upper) EXPECT_TRUE((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) << c;
    for (char c : all) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << c;
  }
  EXPECT_NE(RandomAlnum(40, false), RandomAlnum(40, false));
}

TEST(Strings, SplitKeepsEmptyFields) {
  EXPECT_EQ(Split("a//b", '/'), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(Trim("  x y \n"), "x y");
}

TEST(Strings, HexDigitValueReadsBothCasesAndRefusesTheRest) {
  EXPECT_EQ(HexDigitValue('0'), 0);
  EXPECT_EQ(HexDigitValue('9'), 9);
  EXPECT_EQ(HexDigitValue('a'), 10);
  EXPECT_EQ(HexDigitValue('F'), 15);
  for (char c : {'g', 'G', '/', ':', '@', '`', ' ', '\0'}) EXPECT_EQ(HexDigitValue(c), -1) << int(c);
}

TEST(Strings, EqualsIgnoreCaseComparesAsciiWithoutCase) {
  EXPECT_TRUE(EqualsIgnoreCase("Content-Length", "content-length"));
  EXPECT_TRUE(EqualsIgnoreCase("", ""));
  EXPECT_FALSE(EqualsIgnoreCase("content-length", "content-lengths"));
  EXPECT_FALSE(EqualsIgnoreCase("x-amz-target", "x-amz-targes"));
}

TEST(BatchNames, JobNamesStartWithALetterOrDigit) {
  EXPECT_TRUE(IsBatchJobName("a"));
  EXPECT_TRUE(IsBatchJobName(std::string(128, 'A')));
  EXPECT_TRUE(IsBatchJobName("9_a-B"));
  for (const std::string& bad : std::vector<std::string>{"", "-x", "_x", "../x", "a.b", "a\nb", "a b", std::string(129, 'a')})
    EXPECT_FALSE(IsBatchJobName(bad)) << bad;
}

TEST(ObjectKey, BucketNamesFollowS3Rules) {
  for (const std::string& ok : std::vector<std::string>{"abc", "trainyard-test", "a.b-c", "123", std::string(63, 'a')})
    EXPECT_TRUE(CheckBucketName(ok).ok()) << ok;
  for (const std::string& bad : std::vector<std::string>{"ab", std::string(64, 'a'), "Abc", "a_b", "-ab", "ab-", "a..b", "192.168.5.4",
                                "xn--abc", "sthree-x", "amzn-s3-demo-x", "abc-s3alias", "abc--ol-s3", "abc.mrap",
                                                       "abc--x-s3", "abc--table-s3", "a/b", ".."}) {
    Status st = CheckBucketName(bad);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_NE(CheckBucketName("a..b").message().find("'a..b'"), std::string::npos);
}

TEST(ObjectKey, KeysAreSafeRelativePaths) {
  for (const char* ok : {"a", "a/b.csv", ".hidden", "a/..b/c..", "dir/file with spaces", "\xc3\xa9t\xc3\xa9"})
    EXPECT_TRUE(CheckObjectKey(ok, KeyUse::kObject).ok()) << ok;
  // message fragment each rule gives
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty"}, {"/etc/passwd", "starts with '/'"}, {"a//b", "empty segment"}, {"./a", "'.' segment"},
      {"a/..", "'..' segment"}, {"../x", "'..' segment"}, {"a/", "ends with '/'"},
      {std::string("a\0b", 3), "control character"}, {"a\nb", "control character"}, {"a\x7f", "control character"},
      {"\xff", "UTF-8"}, {"\xc0\xaf", "UTF-8"}, {"\xed\xa0\x80", "UTF-8"}, {"\xe2\x82", "UTF-8"},
      {std::string(1025, 'a'), "1025 bytes"}, {std::string(256, 'a'), "segment of 256 bytes"}};
  for (const auto& [key, rule] : bad) {
    Status st = CheckObjectKey(key, KeyUse::kObject);
    ASSERT_EQ(st.code(), Code::kInvalidArgument) << key;
    EXPECT_NE(st.message().find(rule), std::string::npos) << st.message();
  }
  EXPECT_NE(CheckObjectKey("a\nb", KeyUse::kObject).message().find("'a\\x0ab'"), std::string::npos)
      << "control bytes are shown escaped";
  // A prefix may be empty or end with one '/'; not with two, nor climb.
  for (const char* ok : {"", "a/", "a/b", "a/part-"}) EXPECT_TRUE(CheckObjectKey(ok, KeyUse::kPrefix).ok()) << ok;
  for (const char* badp : {"/", "a//", "../", "a/./", "//abs/"})
    EXPECT_FALSE(CheckObjectKey(badp, KeyUse::kPrefix).ok()) << badp;
}

TEST(ObjectKey, ParseS3UriSplitsAndChecks) {
  auto loc = ParseS3Uri("s3://bkt/a/b/", KeyUse::kPrefix);
  ASSERT_TRUE(loc.ok());
  EXPECT_EQ(loc->bucket, "bkt");
  EXPECT_EQ(loc->key, "a/b/");
  ASSERT_TRUE(ParseS3Uri("s3://bkt", KeyUse::kPrefix).ok());
  EXPECT_EQ(ParseS3Uri("s3://bkt", KeyUse::kPrefix)->key, "");
  EXPECT_FALSE(ParseS3Uri("s3://bkt/", KeyUse::kObject).ok());
  EXPECT_FALSE(ParseS3Uri("https://bkt/a", KeyUse::kObject).ok());
  auto abs = ParseS3Uri("s3://bkt//tmp/x", KeyUse::kPrefix);
  ASSERT_FALSE(abs.ok());
  EXPECT_NE(abs.status().message().find("'s3://bkt//tmp/x'"), std::string::npos) << abs.status().message();
  EXPECT_NE(abs.status().message().find("starts with '/'"), std::string::npos) << abs.status().message();
  EXPECT_FALSE(ParseS3Uri("s3://bkt/../../", KeyUse::kPrefix).ok());
  EXPECT_FALSE(ParseS3Uri("s3://../x", KeyUse::kPrefix).ok());
}

TEST(Uuid, HasVersion4Shape) {
  std::string u = NewUuid();
  ASSERT_EQ(u.size(), 36u);
  EXPECT_EQ(u[14], '4');
  EXPECT_NE(NewUuid(), u);
}

// ---- The training spec (core/training_spec.h) ----

nlohmann::json SpecRequest() {
  return nlohmann::json::parse(R"j({
    "TrainingJobName": "tj", "RoleArn": "arn:aws:iam::000000000000:role/R",
    "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "FastFile",
                               "ContainerEntrypoint": ["python3"], "ContainerArguments": ["train.py", 3],
                               "MetricDefinitions": [{"Name": "loss", "Regex": "loss=(\\S+)"}]},
    "HyperParameters": {"epochs": "3", "lr": "0.1"}, "Environment": {"A": "1"},
    "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": "s3://b/train/",
                          "S3DataType": "ManifestFile"}}, "ShuffleConfig": {"Seed": 7}},
                        {"ChannelName": "fsx", "DataSource": {"FileSystemDataSource": {"FileSystemId": "fs-1",
                          "DirectoryPath": "/d", "FileSystemAccessMode": "rw", "FileSystemType": "EFS"}}}],
    "OutputDataConfig": {"S3OutputPath": "s3://b/out/", "CompressionType": "NONE"},
    "CheckpointConfig": {"S3Uri": "s3://b/ckpt"},
    "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 2, "VolumeSizeInGB": 5,
                       "KeepAlivePeriodInSeconds": 60},
    "VpcConfig": {"SecurityGroupIds": ["sg-2", "sg-1"], "Subnets": ["s-1"]},
    "StoppingCondition": {"MaxRuntimeInSeconds": 600, "MaxPendingTimeInSeconds": 7200},
    "RetryStrategy": {"MaximumRetryAttempts": 2}, "EnableNetworkIsolation": true,
    "Tags": [{"Key": "team", "Value": "a"}], "DebugHookConfig": {"S3OutputPath": "s3://b/debug"}})j");
}

TEST(ContainerTemplate, DecodesWhatASubmitInheritsFromItsJobDefinition) {
  const std::string spec = R"({
    "parameters": {"epochs": "3", "ignored": 7},
    "containerProperties": {"image": "busybox", "jobRoleArn": "arn:aws:iam::0:role/r",
      "command": ["train", "Ref::epochs", 5], "environment": [{"name": "A", "value": "1"}, {"value": "no name"}],
      "vcpus": 2, "memory": 512,
      "resourceRequirements": [{"type": "VCPU", "value": "4"}, {"type": "GPU", "value": "1.0"}, {"type": "MEMORY", "value": "x"}]},
    "retryStrategy": {"attempts": 3, "evaluateOnExit": [{"action": "exit", "onExitCode": "1*"}, {"onReason": "Out*"}]},
    "timeout": {"attemptDurationSeconds": 120}, "schedulingPriority": 9, "propagateTags": true})";
  ty::ContainerTemplate c;
  ASSERT_TRUE(ty::ParseContainerTemplate(spec, &c));
  EXPECT_EQ(c.image, "busybox");
  EXPECT_EQ(c.job_role_arn, "arn:aws:iam::0:role/r");
  EXPECT_EQ(c.command, (std::vector<std::string>{"train", "Ref::epochs"}));  // a number is not a string
  EXPECT_EQ(c.environment, (std::map<std::string, std::string>{{"A", "1"}}));
  EXPECT_EQ(c.parameters, (std::map<std::string, std::string>{{"epochs", "3"}}));
  EXPECT_EQ(c.vcpus, 4);         // resourceRequirements over vcpus; a string value reads as a number
  EXPECT_EQ(c.memory_mib, 512);  // "x" is not a number: memory stays
  EXPECT_EQ(c.gpus, 1);
  EXPECT_EQ(c.retry_attempts, 3);
  ASSERT_EQ(c.evaluate_on_exit.size(), 2u);
  EXPECT_FALSE(c.evaluate_on_exit[0].retry);  // action EXIT, any case
  EXPECT_EQ(c.evaluate_on_exit[0].on_exit_code, "1*");
  EXPECT_TRUE(c.evaluate_on_exit[1].retry);   // no action: RETRY
  EXPECT_EQ(c.evaluate_on_exit[1].on_reason, "Out*");
  EXPECT_EQ(c.attempt_duration_seconds, 120);
  EXPECT_EQ(c.scheduling_priority, 9);
  EXPECT_TRUE(c.propagate_tags);
}

TEST(ContainerTemplate, DefaultsAndMembersOfTheWrongTypeReadAsAbsent) {
  ty::ContainerTemplate c;
  ASSERT_TRUE(ty::ParseContainerTemplate(
      R"({"containerProperties": {"image": 5, "command": "not a list", "vcpus": "1e400"}, "propagateTags": "yes",
          "retryStrategy": [], "timeout": 3})", &c));
  EXPECT_EQ(c.image, "");
  EXPECT_TRUE(c.command.empty());
  EXPECT_EQ(c.vcpus, 1);  // out of range: the default
  EXPECT_EQ(c.memory_mib, 2048);
  EXPECT_EQ(c.retry_attempts, 1);
  EXPECT_EQ(c.attempt_duration_seconds, 0);
  EXPECT_FALSE(c.propagate_tags);
  EXPECT_FALSE(ty::ParseContainerTemplate("[1]", &c));
  EXPECT_FALSE(ty::ParseContainerTemplate("{", &c));
}

TEST(TrainingSpec, DecodesEveryMemberTheControllerReads) {
  TrainingSpec s;
  ASSERT_TRUE(DecodeTrainingSpec(SpecRequest(), &s));
  EXPECT_EQ(s.training_job_name, "tj");
  EXPECT_EQ(s.container_arguments, (std::vector<std::string>{"train.py", "3"}));  // a number as its text
  EXPECT_EQ(s.training_input_mode, "FastFile");
  ASSERT_EQ(s.channels.size(), 2u);
  EXPECT_EQ(s.channels[0].s3_data_type, "ManifestFile");
  EXPECT_EQ(s.channels[0].shuffle_seed, 7);
  ASSERT_TRUE(s.channels[1].file_system);
  EXPECT_FALSE(s.channels[1].file_system->read_only);
  EXPECT_EQ(s.OutputPathTrimmed(), "s3://b/out");
  ASSERT_TRUE(s.checkpoint);
  EXPECT_EQ(s.checkpoint->local_path, "/opt/ml/checkpoints");
  EXPECT_EQ(s.volume_size_gb, 5);
  EXPECT_EQ(s.security_group_ids, (std::vector<std::string>{"sg-1", "sg-2"}));  // a set: sorted
  EXPECT_EQ(s.MaxRuntimeSeconds(), 600);
  EXPECT_EQ(s.max_retry_attempts, 2);
  EXPECT_TRUE(s.network_isolation);
  EXPECT_EQ(s.tags, (Tags{{"team", "a"}}));
}

TEST(TrainingSpec, TheStoredFormDecodesToTheSameSpec) {
  TrainingSpec s, back;
  ASSERT_TRUE(DecodeTrainingSpec(SpecRequest(), &s));
  ASSERT_TRUE(DecodeTrainingSpec(EncodeTrainingSpec(s), &back));
  EXPECT_EQ(back, s);
}

TEST(TrainingSpec, TheEchoIsTheRequestUnlessTheSpecWasGivenNewValues) {
  const nlohmann::json request = SpecRequest();
  TrainingSpec s;
  ASSERT_TRUE(DecodeTrainingSpec(request, &s));
  EXPECT_EQ(EchoTrainingRequest(request, s), request);  // members the spec does not hold stay too
  // A trial's values and a rung's.
  s.training_job_name = "tj-001";
  s.hyperparameters["lr"] = "0.5";
  s.checkpoint->s3_uri = "s3://b/ckpt/tj-001";
  s.instance_type = "ml.m5.xlarge";
  s.keep_alive_seconds = 0;
  nlohmann::json echo = EchoTrainingRequest(request, s);
  EXPECT_EQ(echo["TrainingJobName"], "tj-001");
  EXPECT_EQ(echo["HyperParameters"], (nlohmann::json{{"epochs", "3"}, {"lr", "0.5"}}));
  EXPECT_EQ(echo["CheckpointConfig"]["S3Uri"], "s3://b/ckpt/tj-001");
  EXPECT_EQ(echo["ResourceConfig"]["InstanceType"], "ml.m5.xlarge");
  EXPECT_EQ(echo["ResourceConfig"]["KeepAlivePeriodInSeconds"], 0);
  EXPECT_EQ(echo["DebugHookConfig"], request["DebugHookConfig"]);
  TrainingSpec again;
  ASSERT_TRUE(DecodeTrainingSpec(echo, &again));
  EXPECT_EQ(again, s);
}

TEST(TrainingSpec, HyperparameterValuesTheSdkQuotedAreUnquoted) {
  EXPECT_EQ(UnquoteHyperParameter(R"("s3://b/code.tar.gz")"), "s3://b/code.tar.gz");
  EXPECT_EQ(UnquoteHyperParameter(R"("a\"b\\c\u00e9\ud83d\ude00")"), "a\"b\\c\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(UnquoteHyperParameter("train.py"), "train.py");
  EXPECT_EQ(UnquoteHyperParameter(R"("a"b")"), R"("a"b")");  // not one string literal: as given
  EXPECT_EQ(UnquoteHyperParameter(R"("a\x")"), R"("a\x")");
  EXPECT_EQ(UnquoteHyperParameter(R"("\ud83d")"), R"("\ud83d")");  // a lone surrogate
}

TEST(Model, ServiceJobRoundTripsThroughItsDocument) {
  ServiceJob j;
  j.id = "id-1";
  j.name = "n";
  j.seq = 42;
  j.status = JobStatus::kRunning;
  j.tags = {{"team", "a"}};
  j.attempts.push_back({"arn", "tj", 1, 2, "why"});
  ServiceJob back;
  ASSERT_TRUE(DecodeDoc(EncodeDoc(j), &back));
  EXPECT_EQ(back.id, "id-1");
  EXPECT_EQ(back.seq, 42u);
  EXPECT_EQ(back.status, JobStatus::kRunning);
  EXPECT_EQ(back.tags.at("team"), "a");
  ASSERT_EQ(back.attempts.size(), 1u);
  EXPECT_EQ(back.attempts[0].status_reason, "why");
  EXPECT_FALSE(DecodeDoc("not json", &back));
}

TEST(Model, JobStatusNamesParseBack) {
  for (int i = 0; i < 8; ++i) {
    auto s = static_cast<JobStatus>(i);
    EXPECT_EQ(ParseJobStatus(JobStatusName(s)), s);
  }
  EXPECT_FALSE(ParseJobStatus("DONE").has_value());
}

std::string WriteTemp(const std::string& text) {
  std::string path = ::testing::TempDir() + "/ty-config-" + std::to_string(std::rand()) + ".toml";
  std::ofstream(path) << text;
  return path;
}

TEST(Config, FileOverridesDefaultsAndAddsInstanceTypes) {
  auto c = LoadConfigFile(WriteTemp("[server]\nregion = \"eu-west-1\"\n[[instance_types]]\nname = \"ml.m5.large\"\n"
                                    "count = 9\n[[instance_types]]\nname = \"ml.g6.xlarge\"\ncount = 1\ngpus = 1\n"),
                          DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->region, "eu-west-1");
  EXPECT_EQ(c->FindInstanceType("ml.m5.large")->count, 9);
  EXPECT_EQ(c->FindInstanceType("ml.g6.xlarge")->gpus, 1);
}

TEST(Config, InstanceTypesMapToSlurmPartitionsAndFeatures) {
  auto c = LoadConfigFile(WriteTemp("[[instance_types]]\nname = \"ml.p4d.24xlarge\"\ncount = 4\n"
                                    "slurm_partition = \"gpu-a100\"\nslurm_constraint = \"a100&ib\"\n"
                                    "slurm_whole_node = true\n"),
                          DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  const InstanceTypeSpec* t = c->FindInstanceType("ml.p4d.24xlarge");
  EXPECT_EQ(t->slurm_partition, "gpu-a100");
  EXPECT_EQ(t->slurm_constraint, "a100&ib");
  EXPECT_TRUE(t->slurm_whole_node);
  EXPECT_FALSE(c->FindInstanceType("ml.m5.large")->slurm_whole_node);  // a slice unless asked
  for (const char* bad : {"slurm_partition = \"gpu a100\"", "slurm_partition = \"p,q\"", "slurm_partition = \"p\\n\"",
                          "slurm_constraint = \"a100&ib|v100\"", "slurm_constraint = \"a100&&ib\"",
                          "slurm_constraint = \"[a100|v100]\"", "slurm_constraint = \"a100 \"",
                          "slurm_whole_node = \"yes\""}) {
    auto r = LoadConfigFile(WriteTemp(std::string("[[instance_types]]\nname = \"x\"\n") + bad + "\n"), DefaultConfig());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("instance_types[0].slurm_"), std::string::npos) << r.status().message();
  }
}

// [regions]: peers need a secret only their owner can read; names and URLs are checked.
TEST(Config, ConsoleWhatIfMaxJobsIsReadAndBounded) {
  EXPECT_EQ(DefaultConfig().console.what_if_max_jobs, 100000);
  auto c = LoadConfigFile(WriteTemp("[console]\nwhat_if_max_jobs = 500\n"), DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->console.what_if_max_jobs, 500);
  for (const char* bad : {"what_if_max_jobs = 0", "what_if_max_jobs = 10000001", "what_if_max_job = 5"}) {
    auto r = LoadConfigFile(WriteTemp(std::string("[console]\n") + bad + "\n"), DefaultConfig());
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(Config, SlurmHeldAllocationsAreReadAndBounded) {
  EXPECT_EQ(DefaultConfig().slurm.hold_max_allocations, 64);
  EXPECT_EQ(DefaultConfig().slurm.hold_keep_alive_seconds, 15);
  auto c = LoadConfigFile(WriteTemp("[executor.slurm]\nhold_max_allocations = 0\nhold_keep_alive_seconds = 300\n"
                                    "hold_sbatch_args = [\"--qos=hold\"]\n"),
                          DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->slurm.hold_max_allocations, 0);
  EXPECT_EQ(c->slurm.hold_keep_alive_seconds, 300);
  EXPECT_EQ(c->slurm.hold_sbatch_args, std::vector<std::string>{"--qos=hold"});
  for (const char* bad : {"hold_max_allocations = -1", "hold_max_allocations = 10001", "hold_keep_alive_seconds = 0",
                          "hold_keep_alive_seconds = 3601", "hold_sbatch_args = \"--qos=hold\""}) {
    auto r = LoadConfigFile(WriteTemp(std::string("[executor.slurm]\n") + bad + "\n"), DefaultConfig());
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(Config, HaSettingsAreReadAndBounded) {
  EXPECT_EQ(DefaultConfig().ha.lease_seconds, 3);
  auto c = LoadConfigFile(WriteTemp("[ha]\nlease_seconds = 1.5\nname = \"ctl-a\"\n"
                                    "advertise_url = \"https://ctl-a.internal:8443\"\nforward_timeout_seconds = 30\n"),
                          DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->ha.lease_seconds, 1.5);
  EXPECT_EQ(c->ha.name, "ctl-a");
  EXPECT_EQ(c->ha.advertise_url, "https://ctl-a.internal:8443");
  EXPECT_EQ(c->ha.forward_timeout_seconds, 30);
  for (const char* bad : {"lease_seconds = 0.5", "lease_seconds = 61", "advertise_url = \"ctl-a:8080\"",
                          "forward_timeout_seconds = 0", "lease = 3"}) {
    auto r = LoadConfigFile(WriteTemp(std::string("[ha]\n") + bad + "\n"), DefaultConfig());
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(Config, RegionsReadPeersAndAPrivateSecret) {
  const std::string secret = ::testing::TempDir() + "/ty-peer-secret-" + std::to_string(std::rand());
  std::ofstream(secret) << std::string(64, 'k') << "\n";
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);
  auto c = LoadConfigFile(WriteTemp("[regions]\npeers = { \"eu-west-1\" = \"http://127.0.0.1:8101/\" }\n"
                                    "peer_secret_file = \"" + secret + "\"\n"),
                          DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->regions.peers.at("eu-west-1"), "http://127.0.0.1:8101");  // the trailing '/' dropped
  EXPECT_EQ(c->regions.peer_secret, std::string(64, 'k'));              // the newline dropped
  EXPECT_EQ(c->regions.replay_window_seconds, 300);

  ASSERT_EQ(chmod(secret.c_str(), 0640), 0);
  c = LoadConfigFile(WriteTemp("[regions]\npeer_secret_file = \"" + secret + "\"\n"), DefaultConfig());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("mode 0640"), std::string::npos) << c.status().message();
}

TEST(Config, RegionsRefuseBadPeersAndPeersWithoutASecret) {
  for (const char* bad : {"peers = { \"eu-west-1\" = \"http://h:1\" }",         // no secret
                          "peers = { \"EU west\" = \"http://h:1\" }",           // not a region name
                          "peers = { \"eu-west-1\" = \"ftp://h:1\" }",          // not http(s)
                          "peers = [\"http://h:1\"]",                           // not a table
                          "timeout_seconds = 0", "replay_window_seconds = 7200", "unknown = 1"}) {
    auto c = LoadConfigFile(WriteTemp(std::string("[regions]\n") + bad + "\n"), DefaultConfig());
    EXPECT_FALSE(c.ok()) << bad;
  }
}

TEST(Config, UnknownKeysAndBadTypesAreErrors) {
  auto c = LoadConfigFile(WriteTemp("[server]\nregoin = \"x\"\n"), DefaultConfig());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("regoin"), std::string::npos);
  c = LoadConfigFile(WriteTemp("[executor]\nsandbox = \"docker\"\n"), DefaultConfig());
  EXPECT_FALSE(c.ok());
  c = LoadConfigFile(WriteTemp("[server]\nhttp_threads = \"many\"\n"), DefaultConfig());
  EXPECT_FALSE(c.ok());
}

TEST(Config, LogsSection) {
  EXPECT_EQ(DefaultConfig().logs_retention_days, 0);
  EXPECT_EQ(DefaultConfig().logs_max_bytes_per_stream, 0);
  auto c = LoadConfigFile(WriteTemp("[logs]\nretention_days = 7\nmax_bytes_per_stream = 1048576\n"), DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->logs_retention_days, 7);
  EXPECT_EQ(c->logs_max_bytes_per_stream, 1048576);
  c = LoadConfigFile(WriteTemp("[logs]\nretention_days = -1\n"), DefaultConfig());
  EXPECT_FALSE(c.ok());
  c = LoadConfigFile(WriteTemp("[logs]\nretention = 1\n"), DefaultConfig());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("retention"), std::string::npos);
}

TEST(Config, ConsoleSection) {
  EXPECT_EQ(DefaultConfig().console.share_history_interval_seconds, 60);
  auto c = LoadConfigFile(WriteTemp("[console]\nsession_hours = 4\nshare_history_interval_seconds = 300\n"), DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->console.share_history_interval_seconds, 300);
  EXPECT_EQ(c->console.session_hours, 4);  // one [console] table for the console and its data
  for (const char* bad : {"share_history_interval_seconds = 0", "share_history_interval_seconds = 86401"}) {
    c = LoadConfigFile(WriteTemp(std::string("[console]\n") + bad + "\n"), DefaultConfig());
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("console.share_history_interval_seconds"), std::string::npos);
  }
  c = LoadConfigFile(WriteTemp("[console]\nhistory = 1\n"), DefaultConfig());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("history"), std::string::npos);
}

TEST(Config, SystemMetricsKeys) {
  EXPECT_EQ(DefaultConfig().system_metrics_interval_seconds, 10);
  EXPECT_EQ(DefaultConfig().nvidia_smi, "nvidia-smi");
  auto c = LoadConfigFile(WriteTemp("[executor]\nsystem_metrics_interval_seconds = 0\nnvidia_smi = \"\"\n"), DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->system_metrics_interval_seconds, 0);
  EXPECT_EQ(c->nvidia_smi, "");
  for (const char* bad : {"system_metrics_interval_seconds = -1", "system_metrics_interval_seconds = 3601",
                          "system_metrics_interval_seconds = \"10\""}) {
    c = LoadConfigFile(WriteTemp(std::string("[executor]\n") + bad + "\n"), DefaultConfig());
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("executor.system_metrics_interval_seconds"), std::string::npos) << c.status().message();
  }
  c = LoadConfigFile(WriteTemp("[executor]\nnvidia_smi = 1\n"), DefaultConfig());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("executor.nvidia_smi"), std::string::npos);
}

TEST(Config, ObjectStoreAndFileSystems) {
  auto c = LoadConfigFile(WriteTemp("[object_store]\nendpoint = \"http://127.0.0.1:9000\"\nbuckets = [\"data\", \"models\"]\n"
                                    "path_style = false\nmultipart_threshold_bytes = 100\nmultipart_part_bytes = 10\n"
                                    "[file_systems]\n\"fs-0123abcd\" = \"/srv/fs\"\n"),
                          DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->object_store.Routes("data"));
  EXPECT_TRUE(c->object_store.Routes("models"));
  EXPECT_FALSE(c->object_store.Routes("other"));
  EXPECT_FALSE(c->object_store.path_style);
  EXPECT_EQ(c->object_store.multipart_part_bytes, 10);
  ASSERT_EQ(c->file_systems.size(), 1u);
  EXPECT_EQ(c->file_systems[0].second, "/srv/fs");
  EXPECT_FALSE(LoadConfigFile(WriteTemp("[object_store]\nendpoint = \"ftp://x\"\n"), DefaultConfig()).ok());
  EXPECT_FALSE(LoadConfigFile(WriteTemp("[object_store]\nbuckets = \"*\"\n"), DefaultConfig()).ok());
  EXPECT_FALSE(LoadConfigFile(WriteTemp("[object_store]\nbukets = [\"*\"]\n"), DefaultConfig()).ok());
  EXPECT_FALSE(ObjectStoreConfig{}.Routes("data"));  // no endpoint: the directory store
  auto all = LoadConfigFile(WriteTemp("[object_store]\nendpoint = \"https://s3.example\"\n"), DefaultConfig());
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->object_store.Routes("any-bucket"));  // no list: every bucket
  auto none = LoadConfigFile(WriteTemp("[object_store]\nendpoint = \"https://s3.example\"\nbuckets = []\n"), DefaultConfig());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->object_store.Routes("any-bucket"));
}

TEST(Config, ObjectStoreFallsBackToTheEnvironment) {
  ::setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000", 1);
  ::setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
  ::unsetenv("AWS_REGION");
  Config c = DefaultConfig();
  ApplyEnvironment(&c);
  EXPECT_EQ(c.object_store.endpoint, "http://127.0.0.1:9000");
  EXPECT_TRUE(c.object_store.Routes("anything"));  // an endpoint from the environment takes every bucket
  EXPECT_EQ(c.object_store.access_key_id, "AKIDEXAMPLE");
  EXPECT_EQ(c.object_store.region, "us-east-1");
  // A file's settings win; an environment endpoint that is this server itself is ignored.
  Config mine = DefaultConfig();
  mine.object_store.endpoint = "http://s3.example:9000";
  mine.object_store.buckets = {"data"};
  ApplyEnvironment(&mine);
  EXPECT_EQ(mine.object_store.endpoint, "http://s3.example:9000");
  EXPECT_FALSE(mine.object_store.Routes("other"));
  ::setenv("AWS_ENDPOINT_URL_S3", "http://localhost:8080/", 1);
  Config self = DefaultConfig();
  ApplyEnvironment(&self);
  EXPECT_EQ(self.object_store.endpoint, "");
  ::unsetenv("AWS_ENDPOINT_URL_S3");
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
}

TEST(Config, WarmPoolQuotaAndSetupCommandPerInstanceType) {
  auto c = LoadConfigFile(WriteTemp("[executor]\npip_no_index = true\npip_find_links = \"/wheels\"\n"
                                    "[[instance_types]]\nname = \"ml.m5.large\"\nwarm_pool_quota = 1\n"
                                    "setup_command = \"python3 -m venv venv\"\n"),
                          DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->FindInstanceType("ml.m5.large")->WarmPoolQuota(), 1);
  EXPECT_EQ(c->FindInstanceType("ml.m5.large")->setup_command, "python3 -m venv venv");
  EXPECT_EQ(c->FindInstanceType("ml.m5.xlarge")->WarmPoolQuota(), 2);  // default: the type's count
  EXPECT_TRUE(c->pip_no_index);
  EXPECT_EQ(c->pip_find_links, "/wheels");
  auto bad = LoadConfigFile(WriteTemp("[[instance_types]]\nname = \"ml.m5.large\"\nwarm_pool_quota = -2\n"), DefaultConfig());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("warm_pool_quota"), std::string::npos);
}

TEST(Config, SpotCapacityPricesAndInterruptionRates) {
  auto c = LoadConfigFile(WriteTemp("[executor]\nspot_notice_seconds = 30\nchaos_seed = 7\n"
                                    "[[instance_types]]\nname = \"ml.g5.xlarge\"\ncount = 1\nspot_count = 3\n"
                                    "price_per_hour = 2\nspot_interruptions_per_hour = 0.5\n"),
                          DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  const InstanceTypeSpec* g5 = c->FindInstanceType("ml.g5.xlarge");
  EXPECT_EQ(g5->Capacity(true), 3);
  EXPECT_EQ(g5->Capacity(false), 1);
  EXPECT_DOUBLE_EQ(g5->PricePerHour(false), 2.0);
  EXPECT_DOUBLE_EQ(g5->PricePerHour(true), 0.6);  // 30% of on-demand unless set
  EXPECT_DOUBLE_EQ(g5->spot_interruptions_per_hour, 0.5);
  EXPECT_EQ(c->spot_notice_seconds, 30);
  EXPECT_EQ(c->chaos_seed, 7u);
  EXPECT_EQ(c->CapacityOf("ml.g5.xlarge#spot"), 3);
  EXPECT_EQ(c->CapacityOf("ml.g5.xlarge"), 1);
  EXPECT_EQ(c->CapacityOf("ml.nope#spot"), 0);
  EXPECT_DOUBLE_EQ(c->FindInstanceType("ml.m5.large")->price_per_hour, 0.115);  // the embedded list price
  for (const char* bad : {"spot_count = -1", "price_per_hour = -0.5", "spot_price_per_hour = -1",
                          "spot_interruptions_per_hour = -2", "price_per_hour = \"cheap\""}) {
    auto b = LoadConfigFile(WriteTemp(std::string("[[instance_types]]\nname = \"ml.m5.large\"\n") + bad + "\n"),
                            DefaultConfig());
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find(std::string(bad).substr(0, std::string(bad).find(' '))), std::string::npos)
        << b.status().message();
  }
}

TEST(Config, SandboxBindsAreAbsolutePaths) {
  EXPECT_TRUE(DefaultConfig().sandbox_binds.empty());
  auto c = LoadConfigFile(WriteTemp("[executor]\nsandbox_binds = [\"/srv/shared\", \"/data/sets\"]\n"), DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->sandbox_binds, (std::vector<std::string>{"/srv/shared", "/data/sets"}));
  for (const char* bad : {"sandbox_binds = [\"relative/dir\"]\n", "sandbox_binds = \"/srv\"\n", "sandbox_binds = [1]\n"}) {
    auto r = LoadConfigFile(WriteTemp(std::string("[executor]\n") + bad), DefaultConfig());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("executor.sandbox_binds"), std::string::npos) << r.status().message();
  }
}

TEST(Config, JobUserIsNeverRootAndPidsAndCgroupParentAreBounded) {
  Config d = DefaultConfig();
  EXPECT_EQ(d.job_user, "nobody");
  EXPECT_EQ(d.max_pids_per_instance, 4096);
  EXPECT_EQ(d.cgroup_parent, "");
  auto c = LoadConfigFile(WriteTemp("[executor]\njob_user = \"1000:1000\"\nmax_pids_per_instance = 256\n"
                                    "cgroup_parent = \"/trainyard.slice\"\n"), DefaultConfig());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->job_user, "1000:1000");
  EXPECT_EQ(c->max_pids_per_instance, 256);
  EXPECT_EQ(c->cgroup_parent, "/trainyard.slice");
  for (const char* bad : {"job_user = \"root\"\n", "job_user = \"0\"\n", "job_user = \"0:0\"\n", "job_user = \"\"\n",
                          "max_pids_per_instance = 0\n", "max_pids_per_instance = 10\n",
                          "cgroup_parent = \"relative\"\n", "cgroup_parent = \"/a/../..\"\n"}) {
    auto r = LoadConfigFile(WriteTemp(std::string("[executor]\n") + bad), DefaultConfig());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("executor." + std::string(bad).substr(0, std::string(bad).find(' '))),
              std::string::npos) << r.status().message();
  }
}

TEST(Clock, OffsetClockFollowsTheWallClockPlusWhatWasAdvanced) {
  OffsetClock c;
  EpochMs before = SystemClock::instance().now_ms();
  c.advance_ms(86'400'000);
  EpochMs now = c.now_ms();
  EXPECT_GE(now, before + 86'400'000);
  EXPECT_LE(now, SystemClock::instance().now_ms() + 86'400'000);
  EXPECT_EQ(c.offset_ms(), 86'400'000);
}

}  // namespace
}  // namespace ty
