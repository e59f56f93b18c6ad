// The attempt spec's JSON form (exec/attempt_spec.h) and the local executor's host settings
// (exec/local/host_settings.h): what one side writes, the other reads back unchanged, and what
// is not a spec is refused with a reason rather than run.
#include <gtest/gtest.h>

#include <string>

#include "exec/attempt_spec.h"
#include "exec/executor.h"
#include "exec/local/host_settings.h"

namespace ty::exec {
namespace {

// Every member set away from its default, so that a member Encode or Decode forgets shows.
AttemptSpec FullSpec() {
  AttemptSpec s;
  s.attempt_id = "job-1";
  s.training_job_name = "job-1";
  s.training_job_arn = "arn:aws:sagemaker:eu-west-1:000000000000:training-job/job-1";
  s.region = "eu-west-1";
  s.instance_type = "ml.g5.2xlarge";
  s.instance_count = 3;
  s.vcpus = 8;
  s.gpus = 1;
  s.memory_mib = 32768;
  s.volume_size_gb = 75;
  s.setup_command = "python3 -m venv venv";
  s.command = {"python3", "train.py", "--epochs", "3"};
  s.script_mode = ScriptMode{"train.py", "s3://b/code/sourcedir.tar.gz"};
  s.hyperparameters = {{"epochs", "3"}, {"sagemaker_program", "\"train.py\""}};
  s.environment = {{"FOO", "bar"}, {"EMPTY", ""}};
  s.extra_env = {{"AWS_BATCH_JOB_ID", "j-1"}};
  s.network_isolation = true;
  Channel train;
  train.name = "train";
  train.content_type = "text/csv";
  train.input_mode = "FastFile";
  train.record_wrapper = "RecordIO";
  train.distribution = "ShardedByS3Key";
  train.uri = "s3://b/manifest.json";
  train.data_type = "ManifestFile";
  train.shuffle_seed = 42;
  Channel fsx;
  fsx.name = "fsx";
  fsx.file_system = FileSystemSource{"fs-1", "/datasets/d1", false};
  s.channels = {train, fsx};
  s.output_prefix = "s3://b/out/job-1/output/";
  s.compress = false;
  s.checkpoint = CheckpointConfig{"s3://b/ckpt/", "/opt/ml/checkpoints/run"};
  s.warm_pool = WarmPoolSpec{"wp-12", "/data/pools/wp-12", "earlier-job"};
  s.data_access = DataAccess{{"arn:aws:sts::000000000000:assumed-role/r/job-1", "arn:aws:iam::000000000000:role/r",
                              "", "AROA1", {{"team", "a"}}},
                             {{"data", R"({"Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]})"}}};
  s.stop_grace_seconds = 7;
  s.max_runtime_seconds = 86400;
  return s;
}

TEST(AttemptSpecTest, DecodeGivesBackWhatEncodeWrote) {
  const AttemptSpec s = FullSpec();
  auto back = DecodeAttemptSpec(Encode(s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, s);
}

TEST(AttemptSpecTest, OptionalPartsStayAbsent) {
  AttemptSpec s;
  s.attempt_id = "a";
  s.instance_type = "ml.m5.large";
  Channel c;
  c.name = "train";
  c.uri = "s3://b/p/";
  s.channels = {c};
  auto back = DecodeAttemptSpec(Encode(s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, s);
  EXPECT_FALSE(back->script_mode);
  EXPECT_FALSE(back->checkpoint);
  EXPECT_FALSE(back->warm_pool);
  EXPECT_FALSE(back->data_access);
  EXPECT_FALSE(back->channels[0].shuffle_seed);
  EXPECT_FALSE(back->channels[0].file_system);
}

TEST(AttemptSpecTest, AbsentMembersTakeTheirDefaults) {
  auto s = DecodeAttemptSpec(R"({"attempt_id": "a", "instance_type": "ml.m5.large"})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->instance_count, 1);
  EXPECT_EQ(s->stop_grace_seconds, 120);
  EXPECT_EQ(s->max_runtime_seconds, 0);
  EXPECT_TRUE(s->compress);
  EXPECT_TRUE(s->command.empty());
}

TEST(AttemptSpecTest, DecodeRefusesWhatIsNotASpec) {
  const char* bad[] = {
      "",                                                                           // not JSON
      "{",                                                                          // not JSON
      "[1, 2]",                                                                     // not an object
      R"({"instance_type": "ml.m5.large"})",                                        // no attempt_id
      R"({"attempt_id": "a"})",                                                     // no instance_type
      R"({"attempt_id": 7, "instance_type": "ml.m5.large"})",                       // wrong type
      R"({"attempt_id": "a", "instance_type": "t", "instance_count": 0})",          // no instance
      R"({"attempt_id": "a", "instance_type": "t", "instance_count": "2"})",        // wrong type
      R"({"attempt_id": "a", "instance_type": "t", "command": "python3 x.py"})",    // not an array
      R"({"attempt_id": "a", "instance_type": "t", "command": ["python3", 1]})",    // not strings
      R"({"attempt_id": "a", "instance_type": "t", "environment": {"N": 1}})",      // not a string
      R"({"attempt_id": "a", "instance_type": "t", "hyperparameters": []})",        // not an object
      R"({"attempt_id": "a", "instance_type": "t", "channels": {}})",               // not an array
      R"({"attempt_id": "a", "instance_type": "t", "channels": [{"uri": "s3://b/"}]})",  // unnamed
      R"({"attempt_id": "a", "instance_type": "t", "channels": [{"name": "c", "shuffle_seed": "x"}]})",
      R"({"attempt_id": "a", "instance_type": "t", "checkpoint": "s3://b/"})",      // not an object
      R"({"attempt_id": "a", "instance_type": "t", "warm_pool": {"id": "wp"}})",    // no workspace
      R"({"attempt_id": "a", "instance_type": "t", "compress": "yes"})",            // not a boolean
      R"({"attempt_id": "a", "instance_type": "t", "max_runtime_seconds": 1.5})",   // not an integer
  };
  for (const char* text : bad) {
    auto s = DecodeAttemptSpec(text);
    EXPECT_FALSE(s.ok()) << text;
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), Code::kInvalidArgument) << text;
      EXPECT_EQ(s.status().message().rfind("attempt spec: ", 0), 0u) << s.status().message();
    }
  }
}

TEST(FailureKindTest, NamesReadBackAndAnythingElseIsNone) {
  for (FailureKind k : {FailureKind::kNone, FailureKind::kAlgorithm, FailureKind::kClient, FailureKind::kInternal,
                        FailureKind::kCapacity})
    EXPECT_EQ(ParseFailureKind(FailureKindName(k)), k) << FailureKindName(k);
  EXPECT_STREQ(FailureKindName(FailureKind::kInternal), "Internal");
  EXPECT_EQ(ParseFailureKind("InternalServerError"), FailureKind::kNone);
  EXPECT_EQ(ParseFailureKind(""), FailureKind::kNone);
}

TEST(HostSettingsTest, DecodeGivesBackWhatEncodeWrote) {
  local::HostSettings h;
  h.sandbox = "bwrap";
  h.job_user = "1000:1000";
  h.sandbox_binds = {"/srv/shared", "/srv/other"};
  h.file_systems = {{"fs-1", "/srv/fs/one"}, {"fs-2", "/srv/fs/two"}};
  h.pids_max = 512;
  h.cgroup_parent = "trainyard.slice";
  h.log_max_bytes = 1 << 20;
  h.system_metrics_interval_seconds = 2.5;
  h.nvidia_smi = "/usr/bin/nvidia-smi";
  h.pip_find_links = "/wheels";
  h.pip_no_index = true;
  h.object_store.endpoint = "http://127.0.0.1:9000";
  h.object_store.region = "eu-west-1";
  h.object_store.access_key_id = "AK";
  h.object_store.secret_access_key = "SK";
  h.object_store.path_style = false;
  h.object_store.buckets = {"remote"};
  h.object_store.multipart_threshold_bytes = 1000;
  h.object_store.multipart_part_bytes = 500;
  h.object_store.checkpoint_sync_seconds = 3;
  h.object_dir_root = "/data/buckets";
  h.object_cache_dir = "/data/cache/objects";
  h.notify_socket = "/data/run/executor.sock";
  auto back = local::DecodeHostSettings(local::Encode(h));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(local::Encode(*back), local::Encode(h));
  EXPECT_EQ(back->object_store.secret_access_key, "SK");
  EXPECT_EQ(back->file_systems, h.file_systems);
  EXPECT_DOUBLE_EQ(back->system_metrics_interval_seconds, 2.5);
}

TEST(HostSettingsTest, DecodeRefusesWrongTypes) {
  EXPECT_FALSE(local::DecodeHostSettings("nope").ok());
  EXPECT_FALSE(local::DecodeHostSettings(R"({"sandbox_binds": "/srv"})").ok());
  EXPECT_FALSE(local::DecodeHostSettings(R"({"pids_max": "many"})").ok());
  EXPECT_TRUE(local::DecodeHostSettings("{}").ok());
}

TEST(HostSettingsTest, AFileSystemDirectoryIsResolvedInsideItsFileSystemOnly) {
  local::HostSettings h;
  h.file_systems = {{"fs-1", "/srv/fs/one"}};
  EXPECT_EQ(local::FileSystemHostPath(h, "fs-1", "/datasets/d1"), "/srv/fs/one/datasets/d1");
  EXPECT_EQ(local::FileSystemHostPath(h, "fs-1", "/"), "/srv/fs/one/");
  EXPECT_EQ(local::FileSystemHostPath(h, "fs-2", "/datasets"), "");
}

}  // namespace
}  // namespace ty::exec
