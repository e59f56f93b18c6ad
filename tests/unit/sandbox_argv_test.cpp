// The sandbox's bubblewrap command line (exec/local/sandbox_plan.h) and what an instance is told
// about itself (exec/local/opt_ml.h), without bubblewrap or a job: the mount order is what keeps
// a job from the server's data directory (a tmpfs over it after the host's root, before the
// instance's own paths), so it is pinned here argument by argument.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "exec/attempt_spec.h"
#include "exec/local/host_settings.h"
#include "exec/local/opt_ml.h"
#include "exec/local/sandbox_plan.h"

namespace ty::exec::local {
namespace {

using Argv = std::vector<std::string>;

SandboxLayout Layout(std::set<std::string> dirs) {
  SandboxLayout l;
  l.n = 2;
  l.scratch = "/data/attempts/a1/scratch/algo-2";
  l.job_home = "/home/job";
  l.workspace = "/data/attempts/a1/workspace/algo-2";
  l.opt_ml = "/data/attempts/a1/hosts/algo-2";
  l.hosts_file = "/data/attempts/a1/hosts-file";
  l.hidden_dirs = {"/data"};
  l.is_directory = [dirs](const std::string& p) { return dirs.count(p) > 0; };
  return l;
}

TEST(SandboxArgv, PlainJobMountsInOrder) {
  AttemptSpec spec;
  HostSettings host;
  const Argv want = {
      "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
      "--bind", "/data/attempts/a1/scratch/algo-2/tmp", "/tmp",
      "--bind", "/data/attempts/a1/scratch/algo-2/tmp", "/var/tmp",
      "--tmpfs", "/data",
      "--tmpfs", "/home",
      "--bind", "/data/attempts/a1/scratch/algo-2/home", "/home/job",
      "--bind", "/data/attempts/a1/workspace/algo-2", "/data/attempts/a1/workspace/algo-2",
      "--bind", "/data/attempts/a1/hosts/algo-2", "/opt/ml",
      "--ro-bind", "/data/attempts/a1/hosts-file", "/etc/hosts",
      "--bind", "/data/attempts/a1/workspace/algo-2/code", "/opt/ml/code",
      "--hostname", "algo-2", "--chdir", "/opt/ml/code"};
  EXPECT_EQ(BwrapArgv(SandboxSteps(spec, host, Layout({"/tmp", "/var/tmp", "/home"}))), want);
}

// With an image its root file system is `/` (read-only, the first mount), and nothing of the
// host's is bound but the instance's own paths: no hidden directories to cover (the host is not
// there), no sandbox_binds, pip wheels, workspace or launcher; the image's WorkingDir is the cwd.
TEST(SandboxArgv, ImageRootReplacesTheHostsAndBindsOnlyTheInstancesPaths) {
  AttemptSpec spec;
  spec.image = "oci:/srv/images/train:v1";
  spec.hyperparameters["sagemaker_distributed_dataparallel_enabled"] = "false";
  HostSettings host;
  host.sandbox_binds = {"/shared"};
  host.pip_find_links = "/wheels";
  SandboxLayout layout = Layout({"/tmp", "/var/tmp", "/shared", "/wheels"});  // no /home on the host
  layout.image_rootfs = "/data/images/rootfs/sha256:abc";
  layout.working_dir = "/work";
  layout.launcher = "/usr/bin/trainyard-supervisor";
  const Argv want = {
      "--ro-bind", "/data/images/rootfs/sha256:abc", "/", "--proc", "/proc", "--dev", "/dev",
      "--bind", "/data/attempts/a1/scratch/algo-2/tmp", "/tmp",
      "--bind", "/data/attempts/a1/scratch/algo-2/tmp", "/var/tmp",
      "--tmpfs", "/home",
      "--bind", "/data/attempts/a1/scratch/algo-2/home", "/home/job",
      "--bind", "/data/attempts/a1/hosts/algo-2", "/opt/ml",
      "--ro-bind", "/data/attempts/a1/hosts-file", "/etc/hosts",
      "--bind", "/data/attempts/a1/workspace/algo-2/code", "/opt/ml/code",
      "--hostname", "algo-2", "--chdir", "/work"};
  EXPECT_EQ(BwrapArgv(SandboxSteps(spec, host, layout)), want);
}

// Everything that adds a mount at once: GPUs, several hidden directories, host binds (one of
// them missing), the pip wheel directory, network isolation, no /opt/ml mount point, a warm
// pool and file-system channels.
TEST(SandboxArgv, EveryOptionInItsPlace) {
  AttemptSpec spec;
  spec.network_isolation = true;
  spec.warm_pool = WarmPoolSpec{"pool-1", "/pools/p1", ""};
  Channel s3;
  s3.name = "train";
  Channel efs;
  efs.name = "shared";
  efs.file_system = FileSystemSource{"fs-1", "/datasets/x", true};
  Channel rw;
  rw.name = "scratch";
  rw.file_system = FileSystemSource{"fs-1", "/", false};
  spec.channels = {s3, efs, rw};
  HostSettings host;
  host.sandbox_binds = {"/srv/models", "/srv/missing"};
  host.pip_find_links = "/srv/wheels";
  host.file_systems = {{"fs-1", "/mnt/fs1"}};
  SandboxLayout l = Layout({"/tmp", "/srv/models", "/srv/wheels"});  // no /var/tmp, no /home
  l.hidden_dirs = {"/data", "/pools/p1", "/mnt/fs1"};
  l.gpu_nodes = {"/dev/nvidia1", "/dev/nvidiactl"};
  l.job_home = "/tmp/.home/job";
  l.opt_ml_mount_point = false;
  const Argv want = {
      "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
      "--dev-bind", "/dev/nvidia1", "/dev/nvidia1",
      "--dev-bind", "/dev/nvidiactl", "/dev/nvidiactl",
      "--bind", "/data/attempts/a1/scratch/algo-2/tmp", "/tmp",
      "--tmpfs", "/data", "--tmpfs", "/pools/p1", "--tmpfs", "/mnt/fs1",
      "--bind", "/srv/models", "/srv/models",
      "--ro-bind", "/srv/wheels", "/srv/wheels",
      "--tmpfs", "/tmp/.home",
      "--bind", "/data/attempts/a1/scratch/algo-2/home", "/tmp/.home/job",
      "--unshare-net",
      "--tmpfs", "/opt",
      "--bind", "/data/attempts/a1/workspace/algo-2", "/data/attempts/a1/workspace/algo-2",
      "--bind", "/data/attempts/a1/hosts/algo-2", "/opt/ml",
      "--ro-bind", "/data/attempts/a1/hosts-file", "/etc/hosts",
      "--bind", "/data/attempts/a1/workspace/algo-2/code", "/opt/ml/code",
      "--bind", "/data/attempts/a1/workspace/algo-2/warmpoolcache", "/opt/ml/sagemaker/warmpoolcache",
      "--ro-bind", "/mnt/fs1/datasets/x", "/opt/ml/input/data/shared",
      "--bind", "/mnt/fs1/", "/opt/ml/input/data/scratch",
      "--hostname", "algo-2", "--chdir", "/opt/ml/code"};
  EXPECT_EQ(BwrapArgv(SandboxSteps(spec, host, l)), want);
}

// A distributed launch finds its launcher read-only at a fixed path in the sandbox, here or on
// another machine; a job without one gets no launcher mount.
TEST(SandboxArgv, ADistributedLaunchGetsTheLauncherReadOnly) {
  AttemptSpec spec;
  HostSettings host;
  SandboxLayout l = Layout({"/tmp", "/var/tmp", "/home"});
  l.launcher = "/usr/lib/trainyard/trainyard-supervisor";
  const Argv plain = BwrapArgv(SandboxSteps(spec, host, l));
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "/opt/trainyard/bin/trainyard-supervisor"), 0);
  spec.hyperparameters = {{"sagemaker_torch_distributed_enabled", "true"}};
  const Argv want_tail = {
      "--ro-bind", "/data/attempts/a1/hosts-file", "/etc/hosts",
      "--bind", "/data/attempts/a1/workspace/algo-2/code", "/opt/ml/code",
      "--tmpfs", "/opt/trainyard",
      "--ro-bind", "/usr/lib/trainyard/trainyard-supervisor", "/opt/trainyard/bin/trainyard-supervisor",
      "--hostname", "algo-2", "--chdir", "/opt/ml/code"};
  Argv got = BwrapArgv(SandboxSteps(spec, host, l));
  ASSERT_GE(got.size(), want_tail.size());
  EXPECT_EQ(Argv(got.end() - static_cast<std::ptrdiff_t>(want_tail.size()), got.end()), want_tail);
  // Without /opt/ml on the host /opt is a tmpfs already: the launcher is bound into it.
  l.opt_ml_mount_point = false;
  got = BwrapArgv(SandboxSteps(spec, host, l));
  EXPECT_EQ(std::count(got.begin(), got.end(), "/opt/trainyard"), 0);
  EXPECT_EQ(std::count(got.begin(), got.end(), "/opt/trainyard/bin/trainyard-supervisor"), 1);
}

// The property the order exists for: no read-write bind of the instance's own lands before the
// tmpfs that hides the server's data directory (it would be covered, or worse, the tmpfs would
// be), and nothing after the hidden tmpfs mounts the data directory itself.
TEST(SandboxArgv, HiddenDirectoriesComeAfterTheRootAndBeforeTheInstance) {
  AttemptSpec spec;
  HostSettings host;
  auto steps = SandboxSteps(spec, host, Layout({"/tmp", "/var/tmp", "/home"}));
  size_t root = steps.size(), hidden = steps.size(), opt_ml = steps.size();
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == SandboxStep::Kind::kArg && steps[i].source == "--ro-bind" && root == steps.size()) root = i;
    if (steps[i].kind == SandboxStep::Kind::kTmpfs && steps[i].dest == "/data") hidden = i;
    if (steps[i].kind == SandboxStep::Kind::kBind && steps[i].dest == "/opt/ml") opt_ml = i;
  }
  ASSERT_LT(root, hidden);
  ASSERT_LT(hidden, opt_ml);
  for (size_t i = hidden + 1; i < steps.size(); ++i)
    EXPECT_FALSE(steps[i].dest == "/data" || steps[i].kind == SandboxStep::Kind::kTmpfs && steps[i].dest == "/") << i;
}

AttemptSpec ScriptSpec() {
  AttemptSpec spec;
  spec.training_job_name = "job-1";
  spec.instance_type = "ml.m5.xlarge";
  spec.script_mode = ScriptMode{"train.py", ""};
  spec.hyperparameters = {{"epochs", "3"}, {"name", "\"resnet\""}, {"sagemaker_program", "\"train.py\""}};
  return spec;
}

TEST(OptMl, ScriptModeArgvDropsSagemakerKeysAndJsonQuotes) {
  AttemptSpec spec = ScriptSpec();
  EXPECT_EQ(JobCommand(spec), (Argv{"python3", "train.py", "--epochs", "3", "--name", "resnet"}));
  spec.command = {"/bin/run", "x"};
  EXPECT_EQ(JobCommand(spec), (Argv{"/bin/run", "x"}));
}

TEST(OptMl, ResourceConfigNamesTheInstance) {
  AttemptSpec spec = ScriptSpec();
  EXPECT_EQ(ResourceConfig(spec, 2, 2),
            R"({"current_group_name":"homogeneousCluster","current_host":"algo-2","current_instance_type":"ml.m5.xlarge",)"
            R"("hosts":["algo-1","algo-2"],"instance_groups":[{"hosts":["algo-1","algo-2"],)"
            R"("instance_group_name":"homogeneousCluster","instance_type":"ml.m5.xlarge"}],"network_interface_name":"eth0"})");
  // From ten instances on, sorting the names as strings would put algo-10 second: instance 2
  // must still be told it is algo-2, in the file as in SM_CURRENT_HOST.
  const auto ten = nlohmann::json::parse(ResourceConfig(spec, 2, 10));
  EXPECT_EQ(ten["current_host"], "algo-2");
  EXPECT_EQ(ten["hosts"][1], "algo-2");
  EXPECT_EQ(ten["hosts"][9], "algo-10");
  EXPECT_EQ(EtcHosts(2), "127.0.0.1 localhost\n::1 localhost\n127.0.1.1 algo-1\n127.0.1.2 algo-2\n");
  EXPECT_EQ(HostAddress(300), "127.0.2.44");
}

TEST(OptMl, EnvironmentLayersInheritedThenSageMakerThenTheJobs) {
  AttemptSpec spec = ScriptSpec();
  spec.environment = {{"PYTHONPATH", "/job"}, {"FOO", "bar"}};
  spec.extra_env = {{"FOO", "server"}};
  spec.checkpoint = CheckpointConfig{"s3://b/ck", "/opt/ml/ckpt/"};
  OptMlLayout l;
  l.n = 2;
  l.count = 3;
  l.opt_ml = "/opt/ml";
  l.sandbox = true;
  l.job_home = "/home/job";
  l.workspace = "/ws";
  l.has_pylib = true;
  auto env = InstanceEnvironment(spec, l, {{"PYTHONPATH", "/lib"}, {"HOME", "/root"}});
  EXPECT_EQ(env["PATH"], "/usr/local/bin:/usr/bin:/bin");
  EXPECT_EQ(env["HOME"], "/home/job");
  EXPECT_EQ(env["PYTHONPATH"], "/job");  // the job's Environment wins over what it inherits
  EXPECT_EQ(env["SM_CURRENT_HOST"], "algo-2");
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "3");
  EXPECT_EQ(env["MASTER_ADDR"], "algo-1");
  EXPECT_EQ(env["SM_HP_NAME"], "resnet");
  EXPECT_EQ(env["SM_HPS"], R"({"epochs":3,"name":"resnet"})");
  EXPECT_EQ(env["SM_USER_ARGS"], R"(["--epochs","3","--name","resnet"])");
  EXPECT_EQ(env["FOO"], "server");  // the server's extra variables win over the job's
  EXPECT_EQ(env["TRAINYARD_CHECKPOINT_MARKER"], "/opt/ml/ckpt/.trainyard-checkpoint");
  EXPECT_EQ(env.count("TRAINYARD_OPT_ML"), 0u);
  EXPECT_EQ(env.count("SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"), 0u);
  EXPECT_NE(env["SM_RESOURCE_CONFIG"], "{}");
  l.config_written = false;
  EXPECT_EQ(InstanceEnvironment(spec, l, {})["SM_RESOURCE_CONFIG"], "{}");
}

// A spec that names a variable the server sets (stored before create refused them) never
// overrides it: the server's value stands, or the variable stays unset where the server sets
// none (a job without a role gets no credentials endpoint from its own Environment).
TEST(OptMl, TheJobsEnvironmentNeverOverridesTheServersVariables) {
  AttemptSpec spec = ScriptSpec();
  spec.region = "us-west-2";
  spec.environment = {{"SM_NUM_GPUS", "7"}, {"SM_MODEL_DIR", "/tmp/elsewhere"}, {"AWS_REGION", "eu-north-1"},
                      {"TRAINYARD_CHECKPOINT_MARKER", "/tmp/m"}, {"TRAINING_JOB_NAME", "other"},
                      {"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://attacker/creds"},
                      {"AWS_CONTAINER_AUTHORIZATION_TOKEN", "forged"}, {"AWS_ENDPOINT_URL_S3", "http://attacker"},
                      {"STAGE", "dev"}};
  OptMlLayout l;
  l.opt_ml = "/opt/ml";
  l.sandbox = true;
  l.job_home = "/home/job";
  auto env = InstanceEnvironment(spec, l, {});
  EXPECT_EQ(env["SM_NUM_GPUS"], std::to_string(spec.gpus));
  EXPECT_EQ(env["SM_MODEL_DIR"], "/opt/ml/model");
  EXPECT_EQ(env["AWS_REGION"], "us-west-2");
  EXPECT_EQ(env["TRAINYARD_CHECKPOINT_MARKER"], "/opt/ml/checkpoints/.trainyard-checkpoint");
  EXPECT_EQ(env["TRAINING_JOB_NAME"], spec.training_job_name);
  EXPECT_EQ(env.count("AWS_CONTAINER_CREDENTIALS_FULL_URI"), 0u);
  EXPECT_EQ(env.count("AWS_CONTAINER_AUTHORIZATION_TOKEN"), 0u);
  EXPECT_EQ(env.count("AWS_ENDPOINT_URL_S3"), 0u);
  EXPECT_EQ(env["STAGE"], "dev");
  // A role job: the server's credentials variables, whatever the spec's environment says.
  spec.extra_env = {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://server/trainyard/v1/credentials"},
                    {"AWS_CONTAINER_AUTHORIZATION_TOKEN", "minted"}};
  env = InstanceEnvironment(spec, l, {});
  EXPECT_EQ(env["AWS_CONTAINER_CREDENTIALS_FULL_URI"], "http://server/trainyard/v1/credentials");
  EXPECT_EQ(env["AWS_CONTAINER_AUTHORIZATION_TOKEN"], "minted");
}

TEST(InstanceEnvironment, ABatchContainerGetsBatchsVariablesAndNothingOfSageMakers) {
  AttemptSpec spec = ScriptSpec();
  spec.region = "us-west-2";
  UseContainerImage(&spec, "busybox", {"env"});
  spec.environment = {{"STAGE", "dev"}, {"SM_MODEL_DIR", "/tmp/x"}, {"AWS_BATCH_JOB_ID", "forged"}};
  spec.extra_env = {{"AWS_BATCH_JOB_ID", "job-1"}, {"AWS_BATCH_JQ_NAME", "jq"}};
  OptMlLayout l;
  l.opt_ml = "/opt/ml";
  l.sandbox = true;
  l.job_home = "/home/job";
  auto env = InstanceEnvironment(spec, l, {{"PATH", "/usr/bin"}});
  EXPECT_EQ(env["AWS_BATCH_JOB_ID"], "job-1");
  EXPECT_EQ(env["AWS_BATCH_JQ_NAME"], "jq");
  EXPECT_EQ(env["AWS_REGION"], spec.region);
  EXPECT_EQ(env["AWS_DEFAULT_REGION"], spec.region);
  EXPECT_EQ(env["STAGE"], "dev");
  EXPECT_EQ(env["HOME"], "/home/job");
  for (const auto& [k, v] : env) {
    EXPECT_NE(k.rfind("SM_", 0), 0u) << k;
    EXPECT_NE(k.rfind("SAGEMAKER_", 0), 0u) << k;
    EXPECT_NE(k.rfind("TRAINING_JOB_", 0), 0u) << k;
    for (const char* torch : {"RANK", "WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"}) EXPECT_NE(k, torch);
  }
  // The kind travels to the supervisor with the rest of the spec.
  spec.attempt_id = "job-1";
  auto decoded = DecodeAttemptSpec(Encode(spec));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->kind, AttemptKind::kContainer);
  spec = ScriptSpec();
  spec.attempt_id = "tj";
  EXPECT_EQ(DecodeAttemptSpec(Encode(spec))->kind, AttemptKind::kTraining);
}

}  // namespace
}  // namespace ty::exec::local
