// The local executor with real supervisor processes (the `trainyard` binary from TRAINYARD_BIN).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "exec/attempt_spec.h"
#include "exec/local/attempt_files.h"
#include "exec/local/host_settings.h"
#include "exec/local/sandbox.h"
#include "exec/local/gpus.h"
#include "exec/local/run_command.h"
#include "exec/local/system_sampler.h"
#include "exec/local/local_executor.h"

namespace ty::exec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Loads the job's seccomp filter in a child and reports, as its exit status, the first check
// that did not hold (0: all did). The filter refuses with EPERM and leaves the rest alone.
int ChildUnderJobFilter() {
  auto fd = local::JobSeccompFilter();
  if (!fd.ok()) return 100;
  std::vector<sock_filter> prog(4096);
  ssize_t n = ::read(*fd, prog.data(), prog.size() * sizeof(sock_filter));
  if (n <= 0 || n % sizeof(sock_filter) != 0) return 101;
  pid_t pid = ::fork();
  if (pid == 0) {
    sock_fprog fprog{static_cast<unsigned short>(n / sizeof(sock_filter)), prog.data()};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0)
      ::_exit(102);
    if (::mount("none", "/mnt", "tmpfs", 0, nullptr) == 0 || errno != EPERM) ::_exit(1);
    if (::umount2("/proc", MNT_DETACH) == 0 || errno != EPERM) ::_exit(2);
    if (::unshare(CLONE_NEWUSER) == 0 || errno != EPERM) ::_exit(3);
    if (::syscall(SYS_clone3, nullptr, 0) != -1 || errno != ENOSYS) ::_exit(4);
    if (::syscall(SYS_keyctl, 0, 0, 0, 0, 0) != -1 || errno != EPERM) ::_exit(5);
    if (::syscall(SYS_bpf, 0, nullptr, 0) != -1 || errno != EPERM) ::_exit(6);
    if (::syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, ::getppid(), 0, 0) != -1 || errno != EPERM) ::_exit(7);
    if (::syscall(SYS_setns, 0, 0) != -1 || errno != EPERM) ::_exit(8);
    // Allowed: unrelated calls and namespaces other than user ones (bubblewrap's own).
    if (::getpid() <= 0) ::_exit(9);
    pid_t inner = ::fork();
    if (inner == 0) ::_exit(0);
    if (inner < 0) ::_exit(10);
    int st = 0;
    ::waitpid(inner, &st, 0);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(*fd);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

TEST(JobSandbox, SeccompFilterRefusesMountUserNamespacesKeyringsBpfPtraceAndSetns) {
  EXPECT_EQ(ChildUnderJobFilter(), 0);
}

TEST(JobSandbox, JobUserIsTheCallerWhenUnprivilegedAndNeverRoot) {
  auto u = local::ResolveJobUser("nobody");
  ASSERT_TRUE(u.ok()) << u.status().message();
  if (::geteuid() == 0) {
    EXPECT_TRUE(u->switch_user);
    EXPECT_NE(u->uid, 0u);
    EXPECT_NE(u->gid, 0u);
    EXPECT_FALSE(local::ResolveJobUser("root").ok());
    EXPECT_FALSE(local::ResolveJobUser("0:0").ok());
    EXPECT_FALSE(local::ResolveJobUser("no-such-user-here").ok());
    auto numeric = local::ResolveJobUser("4242:4343");
    ASSERT_TRUE(numeric.ok());
    EXPECT_EQ(numeric->uid, 4242u);
    EXPECT_EQ(numeric->gid, 4343u);
  } else {
    EXPECT_FALSE(u->switch_user);
    EXPECT_EQ(u->uid, ::geteuid());
  }
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Processes of a process group that are still running (zombies do not count).
int LiveMembers(int pgid) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string stat = Slurp(entry.path() / "stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (std::sscanf(stat.c_str() + close + 2, "%c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == pgid && state != 'Z') ++n;
  }
  return n;
}

bool BwrapWorks() {
  return std::system("bwrap --ro-bind / / --proc /proc --dev /dev --tmpfs /tmp --unshare-pid --unshare-uts true >/dev/null 2>&1") == 0;
}

class LocalExecutorTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "bwrap" && !BwrapWorks()) GTEST_SKIP() << "bubblewrap does not work here";
    const char* bin = std::getenv("TRAINYARD_BIN");
    ASSERT_NE(bin, nullptr) << "TRAINYARD_BIN must name the trainyard binary";
    bin_ = bin;
    root_ = fs::temp_directory_path() / ("ty-exec-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(counter_++));
    fs::remove_all(root_);
    fs::create_directories(root_ / "attempts");
    executor_ = Make();
  }
  void TearDown() override {
    executor_.reset();
    if (!root_.empty()) fs::remove_all(root_);
  }

  std::unique_ptr<LocalExecutor> Make() {
    LocalExecutor::Options o;
    o.attempts_root = (root_ / "attempts").string();
    o.supervisor_binary = bin_;
    o.host.sandbox = GetParam();
    o.host.notify_socket = (root_ / "executor.sock").string();
    // The embedded directory store rooted at root_: s3://out/<id>/ is root_/out/<id>/.
    o.host.object_dir_root = root_.string();
    o.host.object_cache_dir = (root_ / "cache").string();
    o.host.data_dir = root_.string();  // as HostSettingsFor sets it: the buckets, the cache and the attempts are in it
    o.clock = &SystemClock::instance();
    return std::make_unique<LocalExecutor>(o);
  }

  json Spec(const std::string& id, const std::string& command, int instances = 1) {
    return {{"attempt_id", id},
            {"training_job_name", id},
            {"training_job_arn", "arn:aws:sagemaker:us-east-1:000000000000:training-job/" + id},
            {"region", "us-east-1"},
            {"instance_type", "ml.m5.large"},
            {"instance_count", instances},
            {"vcpus", 2},
            {"gpus", 0},
            // As root each instance's volume is allocated in full: the smallest SageMaker allows.
            {"volume_size_gb", 1},
            {"command", {"/bin/sh", "-c", command}},
            {"hyperparameters", {{"epochs", "3"}}},
            {"environment", {{"FOO", "bar"}}},
            {"extra_env", json::object()},
            {"channels", json::array()},
            {"output_prefix", "s3://out/" + id + "/"},
            {"compress", true},
            {"checkpoint", nullptr},
            {"stop_grace_seconds", 30},
            {"max_runtime_seconds", 0}};
  }

  // Starts the attempt of a spec given in its JSON form (exec/attempt_spec.h).
  Status StartSpec(const std::string& id, const json& spec) {
    auto decoded = DecodeAttemptSpec(spec.dump());
    if (!decoded.ok()) return decoded.status();
    return executor_->Start(id, *decoded);
  }

  // Polls until the attempt's final event, collecting every event.
  std::vector<AttemptEvent> RunToEnd(LocalExecutor& ex, const std::string& id, int timeout_s = 30) {
    std::vector<AttemptEvent> all;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      for (auto& e : ex.Poll()) {
        if (e.attempt_id != id) continue;
        all.push_back(e);
        if (e.phase == Phase::kExited || e.phase == Phase::kLost) return all;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "attempt " << id << " did not finish";
    return all;
  }

  void WaitForPhase(LocalExecutor& ex, const std::string& id, const std::string& phase) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      std::string text = Slurp(root_ / "attempts" / id / "status.json");
      if (text.find("\"" + phase + "\"") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << id << " never reached " << phase;
  }

  static inline int counter_ = 0;
  std::string bin_;
  fs::path root_;
  std::unique_ptr<LocalExecutor> executor_;
};

TEST_P(LocalExecutorTest, SuccessfulAttemptReportsEveryPhaseAndWritesArtifacts) {
  std::string cmd = "echo hello; echo \"hosts=$SM_HOSTS foo=$FOO job=$TRAINING_JOB_NAME\"; "
                    "echo w > $SM_MODEL_DIR/weights.txt; cat $SM_INPUT_CONFIG_DIR/hyperparameters.json";
  ASSERT_TRUE(StartSpec("ok", Spec("ok", cmd)).ok());
  auto events = RunToEnd(*executor_, "ok");
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].phase, Phase::kPreparing);
  EXPECT_EQ(events[1].phase, Phase::kTraining);
  EXPECT_EQ(events[2].phase, Phase::kUploading);
  EXPECT_EQ(events[3].phase, Phase::kExited);
  EXPECT_EQ(events[3].exit_code, 0);
  EXPECT_FALSE(events[3].stopped);
  EXPECT_TRUE(events[3].model_uploaded);
  for (size_t i = 1; i < events.size(); ++i) EXPECT_LE(events[i - 1].at, events[i].at);

  std::string log = Slurp(executor_->LogPath("ok", 1));
  EXPECT_NE(log.find(" hello\n"), std::string::npos) << log;
  EXPECT_NE(log.find("hosts=[\"algo-1\"] foo=bar job=ok"), std::string::npos) << log;
  EXPECT_NE(log.find("{\"epochs\":\"3\"}"), std::string::npos) << log;
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(log[0])));  // "<epoch_ms> <text>"
  std::string listing = (root_ / "listing.txt").string();
  ASSERT_EQ(std::system(("tar -tzf " + (root_ / "out/ok/model.tar.gz").string() + " > " + listing).c_str()), 0);
  EXPECT_NE(Slurp(listing).find("weights.txt"), std::string::npos);
  EXPECT_TRUE(fs::exists(root_ / "out/ok/output.tar.gz"));
}

TEST_P(LocalExecutorTest, FailureFileAndExitCodeAreReported) {
  std::string cmd = "echo 'out of memory in layer 3' > $SM_OUTPUT_DIR/failure; exit 7";
  ASSERT_TRUE(StartSpec("bad", Spec("bad", cmd)).ok());
  auto events = RunToEnd(*executor_, "bad");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().phase, Phase::kExited);
  EXPECT_EQ(events.back().exit_code, 7);
  EXPECT_EQ(events.back().failure_reason, "out of memory in layer 3\n");
}

TEST_P(LocalExecutorTest, StopDeliversSigtermAndTheJobCanFinishCleanly) {
  ASSERT_TRUE(StartSpec("stop", Spec("stop", "trap 'echo term; exit 0' TERM; while :; do sleep 0.05; done")).ok());
  WaitForPhase(*executor_, "stop", "Training");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(executor_->Stop("stop", 30).ok());
  auto start = std::chrono::steady_clock::now();
  auto events = RunToEnd(*executor_, "stop");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));  // well under the grace
  EXPECT_TRUE(events.back().stopped);
  EXPECT_NE(Slurp(executor_->LogPath("stop", 1)).find(" term"), std::string::npos);
}

TEST_P(LocalExecutorTest, JobIgnoringSigtermIsKilledAfterTheGrace) {
  ASSERT_TRUE(StartSpec("deaf", Spec("deaf", "trap '' TERM; echo deaf; while :; do sleep 0.05; done")).ok());
  WaitForPhase(*executor_, "deaf", "Training");
  // The stop must come after the trap is in place: a SIGTERM before it ends the shell at once.
  for (int i = 0; i < 400 && Slurp(executor_->LogPath("deaf", 1)).find(" deaf") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ASSERT_NE(Slurp(executor_->LogPath("deaf", 1)).find(" deaf"), std::string::npos);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(executor_->Stop("deaf", 1).ok());
  auto events = RunToEnd(*executor_, "deaf");
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(900));
  EXPECT_LT(took, std::chrono::seconds(15));
  EXPECT_TRUE(events.back().stopped);
}

TEST_P(LocalExecutorTest, MaxRuntimeStopsTheAttempt) {
  json spec = Spec("slow", "sleep 30");
  spec["max_runtime_seconds"] = 1;
  spec["stop_grace_seconds"] = 1;
  ASSERT_TRUE(StartSpec("slow", spec).ok());
  auto events = RunToEnd(*executor_, "slow");
  EXPECT_TRUE(events.back().max_runtime_exceeded);
}

TEST_P(LocalExecutorTest, GangOfTwoStartsTogetherAndSeesEachOther) {
  ASSERT_TRUE(StartSpec("gang", Spec("gang", "echo \"me=$SM_CURRENT_HOST all=$SM_HOSTS\"", 2)).ok());
  auto events = RunToEnd(*executor_, "gang");
  EXPECT_EQ(events.back().exit_code, 0);
  for (int n : {1, 2}) {
    std::string log = Slurp(executor_->LogPath("gang", n));
    EXPECT_NE(log.find("me=algo-" + std::to_string(n) + " all=[\"algo-1\",\"algo-2\"]"), std::string::npos) << log;
  }
}

TEST_P(LocalExecutorTest, InTheSandboxInstancesReachEachOtherByName) {
  if (GetParam() != "bwrap") GTEST_SKIP() << "names resolve only inside the sandbox";
  std::string cmd = "echo \"name=$(hostname) peer=$(getent hosts algo-2 | cut -d' ' -f1) "
                    "ml=$(ls /opt/ml/input/config | tr '\\n' ,)\"";
  ASSERT_TRUE(StartSpec("names", Spec("names", cmd, 2)).ok());
  auto events = RunToEnd(*executor_, "names");
  EXPECT_EQ(events.back().exit_code, 0);
  std::string log = Slurp(executor_->LogPath("names", 1));
  EXPECT_NE(log.find("name=algo-1 peer=127.0.1.2 ml=hyperparameters.json,inputdataconfig.json,resourceconfig.json,"),
            std::string::npos) << log;
}

TEST_P(LocalExecutorTest, AFailingInstanceStopsTheRestOfTheGang) {
  std::string cmd = "if [ \"$SM_CURRENT_HOST\" = algo-2 ]; then exit 5; fi; sleep 30";
  json spec = Spec("half", cmd, 2);
  spec["stop_grace_seconds"] = 1;
  ASSERT_TRUE(StartSpec("half", spec).ok());
  auto events = RunToEnd(*executor_, "half");
  EXPECT_EQ(events.back().exit_code, 5);
}

TEST_P(LocalExecutorTest, ANewExecutorAdoptsARunningAttempt) {
  ASSERT_TRUE(StartSpec("adopt", Spec("adopt", "sleep 1; echo done")).ok());
  WaitForPhase(*executor_, "adopt", "Training");
  executor_.reset();  // the "server" goes away; the supervisor does not
  executor_ = Make();
  ASSERT_TRUE(executor_->Adopt("adopt").ok());
  auto events = RunToEnd(*executor_, "adopt");
  EXPECT_EQ(events.front().phase, Phase::kPreparing);  // replayed from the start
  EXPECT_EQ(events.back().phase, Phase::kExited);
  EXPECT_EQ(events.back().exit_code, 0);
  EXPECT_FALSE(executor_->Adopt("never-started").ok());
}

TEST_P(LocalExecutorTest, ASupervisorKilledWithoutAnOutcomeIsLost) {
  ASSERT_TRUE(StartSpec("lost", Spec("lost", "sleep 30; echo never")).ok());
  WaitForPhase(*executor_, "lost", "Training");
  json st = json::parse(Slurp(root_ / "attempts/lost/status.json"));
  ASSERT_EQ(::kill(st["supervisor_pid"].get<int>(), SIGKILL), 0);
  auto events = RunToEnd(*executor_, "lost");
  EXPECT_EQ(events.back().phase, Phase::kLost);
  // Nothing of the attempt is left running.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (const auto& pgid : st.value("instance_pgids", json::array()))
    EXPECT_EQ(LiveMembers(pgid.get<int>()), 0) << "process group " << pgid << " still runs";
}

// Script mode: the program comes from the submit tarball, hyperparameters become arguments, the
// channels are staged, and the job sees SageMaker's files and variables (it dumps them into its
// model directory, which comes back in model.tar.gz).
TEST_P(LocalExecutorTest, ScriptModeStagesCodeDataConfigAndEnvironment) {
  const bool sandbox = GetParam() == "bwrap";
  fs::path src = root_ / "src";
  fs::create_directories(src / "pkg");
  std::ofstream(src / "train.py") << R"PY(
import json, os, sys
model = os.environ["SM_MODEL_DIR"]
cfg = os.environ["SM_INPUT_CONFIG_DIR"]
train = os.environ["SM_CHANNEL_TRAINING"]
out = {
  "argv": sys.argv[1:],
  "cwd": os.getcwd(),
  "env": {k: v for k, v in os.environ.items()},
  "hyperparameters": json.load(open(os.path.join(cfg, "hyperparameters.json"))),
  "resourceconfig": json.load(open(os.path.join(cfg, "resourceconfig.json"))),
  "inputdataconfig": json.load(open(os.path.join(cfg, "inputdataconfig.json"))),
  "train_files": sorted(os.path.relpath(os.path.join(d, f), train) for d, _, fs in os.walk(train) for f in fs),
  "nested": open(os.path.join(train, "sub", "b.csv")).read(),
  "single": sorted(os.listdir(os.environ["SM_CHANNEL_LABELS"])),
  "ckpt_in": sorted(os.listdir("/opt/ml/checkpoints" if os.environ.get("TRAINYARD_OPT_ML") is None
                               else os.path.join(os.environ["TRAINYARD_OPT_ML"], "checkpoints"))),
  "helper": open("pkg/helper.txt").read(),
}
json.dump(out, open(os.path.join(model, "env.json"), "w"))
open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "metrics.txt"), "w").write("acc=1\n")
root = os.environ.get("TRAINYARD_OPT_ML", "/opt/ml")
open(os.path.join(root, "checkpoints", "step-2.ckpt"), "w").write("2")
print("epoch 1 loss=0.5")
print("epoch 2 loss=0.25", flush=True)
)PY";
  std::ofstream(src / "pkg/helper.txt") << "helper";
  fs::create_directories(root_ / "code");
  ASSERT_EQ(std::system(("tar -czf " + (root_ / "code/sourcedir.tar.gz").string() + " -C " + src.string() + " .").c_str()), 0);
  fs::create_directories(root_ / "data/train/sub");
  std::ofstream(root_ / "data/train/a.csv") << "1,2\n";
  std::ofstream(root_ / "data/train/sub/b.csv") << "3,4\n";
  std::ofstream(root_ / "data/labels.csv") << "x\n";
  fs::create_directories(root_ / "ckpt");
  std::ofstream(root_ / "ckpt/step-1.ckpt") << "1";

  json spec = Spec("script", "");
  spec["command"] = json::array();
  spec["script_mode"] = {{"program", "train.py"}, {"submit_uri", "s3://code/sourcedir.tar.gz"}};
  spec["hyperparameters"] = {{"lr", "0.1"}, {"name", "\"abc\""}, {"layers", "[1,2]"},
                             {"sagemaker_program", "\"train.py\""}, {"sagemaker_submit_directory", "\"s3://b/x\""}};
  spec["environment"] = {{"FOO", "bar"}, {"SM_LOG_LEVEL", "10"}};
  spec["extra_env"] = {{"FOO", "extra"}, {"AWS_BATCH_JOB_ID", "j-1"}};
  spec["channels"] = {{{"name", "training"}, {"uri", "s3://data/train/"}, {"content_type", "text/csv"},
                       {"input_mode", "File"}, {"distribution", "FullyReplicated"}, {"record_wrapper", "None"}},
                      {{"name", "labels"}, {"uri", "s3://data/labels.csv"}, {"content_type", ""},
                       {"input_mode", "File"}, {"distribution", "ShardedByS3Key"}, {"record_wrapper", "RecordIO"}}};
  spec["checkpoint"] = {{"uri", "s3://ckpt/"}, {"local_path", "/opt/ml/checkpoints"}};
  ASSERT_TRUE(StartSpec("script", spec).ok());
  auto events = RunToEnd(*executor_, "script");
  // The four phases, and the checkpoint the job wrote (step-2.ckpt, after training started; the
  // restored step-1.ckpt predates it and does not count) before Exited. Creating and then writing
  // the file can move its mtime twice, which may be seen as two checkpoints: count at least one.
  const auto checkpoints = std::count_if(events.begin(), events.end(),
                                         [](const AttemptEvent& e) { return e.phase == Phase::kCheckpointed; });
  ASSERT_GE(checkpoints, 1);
  ASSERT_EQ(events.size(), 4u + static_cast<size_t>(checkpoints));
  auto ck = std::find_if(events.begin(), events.end(), [](const AttemptEvent& e) { return e.phase == Phase::kCheckpointed; });
  EXPECT_GT(ck - events.begin(), 1);  // after Preparing and Training
  EXPECT_LT(ck - events.begin() + checkpoints - 1, 4);
  ASSERT_EQ(events.back().phase, Phase::kExited);
  EXPECT_EQ(events.back().exit_code, 0) << Slurp(executor_->LogPath("script", 1));
  EXPECT_TRUE(events.back().model_uploaded);

  // Logs: "<epoch_ms> <text>" lines.
  std::istringstream log(Slurp(executor_->LogPath("script", 1)));
  std::vector<std::string> lines;
  for (std::string line; std::getline(log, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& line : lines) {
    size_t sp = line.find(' ');
    ASSERT_NE(sp, std::string::npos);
    int64_t ms = std::stoll(line.substr(0, sp));
    EXPECT_NEAR(static_cast<double>(ms), static_cast<double>(events.back().at), 60000.0);
  }
  EXPECT_EQ(lines[1].substr(lines[1].find(' ') + 1), "epoch 2 loss=0.25");

  // The model archive holds what the job wrote; the output archive its output/data.
  fs::path x = root_ / "x";
  fs::create_directories(x);
  ASSERT_EQ(std::system(("tar -xzf " + (root_ / "out/script/model.tar.gz").string() + " -C " + x.string()).c_str()), 0);
  json got = json::parse(Slurp(x / "env.json"));
  std::string listing = (root_ / "listing.txt").string();
  ASSERT_EQ(std::system(("tar -tzf " + (root_ / "out/script/output.tar.gz").string() + " > " + listing).c_str()), 0);
  EXPECT_NE(Slurp(listing).find("metrics.txt"), std::string::npos);

  EXPECT_EQ(got["argv"], json({"--layers", "[1,2]", "--lr", "0.1", "--name", "abc"}));
  std::string ml = sandbox ? "/opt/ml" : fs::absolute(root_ / "attempts/script/hosts/algo-1").string();
  // Without a sandbox /opt/ml/code links to the instance workspace: the same directory.
  EXPECT_EQ(fs::weakly_canonical(got["cwd"].get<std::string>()), fs::weakly_canonical(ml + "/code"));
  EXPECT_EQ(got["helper"], "helper");
  EXPECT_EQ(got["hyperparameters"], spec["hyperparameters"]);
  EXPECT_EQ(got["resourceconfig"],
            json::parse(R"({"current_host":"algo-1","hosts":["algo-1"],"network_interface_name":"lo",
              "current_instance_type":"ml.m5.large","current_group_name":"homogeneousCluster",
              "instance_groups":[{"instance_group_name":"homogeneousCluster","instance_type":"ml.m5.large",
              "hosts":["algo-1"]}]})"));
  EXPECT_EQ(got["inputdataconfig"],
            json::parse(R"({"training":{"ContentType":"text/csv","TrainingInputMode":"File",
              "S3DistributionType":"FullyReplicated","RecordWrapperType":"None"},
              "labels":{"TrainingInputMode":"File","S3DistributionType":"ShardedByS3Key","RecordWrapperType":"RecordIO"}})"));
  EXPECT_EQ(got["train_files"], json({"a.csv", "sub/b.csv"}));
  EXPECT_EQ(got["nested"], "3,4\n");
  EXPECT_EQ(got["single"], json({"labels.csv"}));
  EXPECT_EQ(got["ckpt_in"], json({"step-1.ckpt"}));
  EXPECT_TRUE(fs::exists(root_ / "ckpt/step-2.ckpt"));  // checkpoints go back to their source

  const json& env = got["env"];
  EXPECT_EQ(env["SM_MODEL_DIR"], ml + "/model");
  EXPECT_EQ(env["SM_CHANNELS"], "[\"labels\",\"training\"]");
  EXPECT_EQ(env["SM_CHANNEL_TRAINING"], ml + "/input/data/training");
  EXPECT_EQ(json::parse(env["SM_HPS"].get<std::string>()),
            json::parse(R"({"lr":0.1,"name":"abc","layers":[1,2]})"));
  EXPECT_EQ(env["SM_HP_LR"], "0.1");
  EXPECT_EQ(env["SM_HP_NAME"], "abc");
  EXPECT_FALSE(env.contains("SM_HP_SAGEMAKER_PROGRAM"));
  EXPECT_EQ(env["SM_CURRENT_HOST"], "algo-1");
  EXPECT_EQ(env["SM_HOSTS"], "[\"algo-1\"]");
  EXPECT_EQ(env["SM_NUM_CPUS"], "2");
  EXPECT_EQ(env["SM_NUM_GPUS"], "0");
  EXPECT_EQ(env["SM_LOG_LEVEL"], "20");  // a reserved name in a stored spec never overrides the server's
  EXPECT_EQ(env["SM_USER_ENTRY_POINT"], "train.py");
  EXPECT_EQ(env["SM_USER_ARGS"], "[\"--layers\",\"[1,2]\",\"--lr\",\"0.1\",\"--name\",\"abc\"]");
  EXPECT_EQ(env["SM_OUTPUT_DATA_DIR"], ml + "/output/data");
  EXPECT_EQ(env["SM_INPUT_CONFIG_DIR"], ml + "/input/config");
  EXPECT_EQ(json::parse(env["SM_RESOURCE_CONFIG"].get<std::string>()), got["resourceconfig"]);
  EXPECT_EQ(json::parse(env["SM_TRAINING_ENV"].get<std::string>())["hosts"], json({"algo-1"}));
  EXPECT_EQ(env["TRAINING_JOB_NAME"], "script");
  EXPECT_EQ(env["TRAINING_JOB_ARN"], "arn:aws:sagemaker:us-east-1:000000000000:training-job/script");
  EXPECT_EQ(env["AWS_REGION"], "us-east-1");
  EXPECT_EQ(env["FOO"], "extra");  // extra_env wins over Environment
  EXPECT_EQ(env["AWS_BATCH_JOB_ID"], "j-1");
  if (sandbox) {
    EXPECT_FALSE(env.contains("TRAINYARD_OPT_ML"));
    EXPECT_EQ(env["MASTER_ADDR"], "algo-1");
  } else {
    EXPECT_EQ(env["TRAINYARD_OPT_ML"], ml);
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
  }

  executor_->Cleanup("script");
  EXPECT_FALSE(fs::exists(root_ / "attempts/script/hosts"));
  EXPECT_TRUE(fs::exists(executor_->LogPath("script", 1)));
}

// CompressionType NONE: the files themselves under output/model/ and output/data/.
TEST_P(LocalExecutorTest, UncompressedArtifactsAreThePlainFiles) {
  json spec = Spec("plain", "echo m > $SM_MODEL_DIR/m.txt");
  spec["compress"] = false;
  ASSERT_TRUE(StartSpec("plain", spec).ok());
  auto events = RunToEnd(*executor_, "plain");
  EXPECT_EQ(events.back().exit_code, 0);
  EXPECT_TRUE(events.back().model_uploaded);
  EXPECT_EQ(Slurp(root_ / "out/plain/model/m.txt"), "m\n");
  EXPECT_FALSE(fs::exists(root_ / "out/plain/model.tar.gz"));
}

// A stop that races the supervisor's start is neither lost nor ignored: the job never runs.
// A stop that reaches the supervisor before it launches the instances means they never start; one
// that comes later stops them. Which of the two happens depends on how the host schedules the
// supervisor against this thread, so the test asks only what holds either way: the attempt ends
// stopped, at once, not after its 30 s.
TEST_P(LocalExecutorTest, StopRightAfterStartEndsStoppedAtOnce) {
  ASSERT_TRUE(StartSpec("early", Spec("early", "echo ran; sleep 30; echo slept")).ok());
  ASSERT_TRUE(executor_->Stop("early", 30).ok());
  auto start = std::chrono::steady_clock::now();
  auto events = RunToEnd(*executor_, "early");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_EQ(events.back().phase, Phase::kExited);
  EXPECT_TRUE(events.back().stopped);
  EXPECT_EQ(Slurp(executor_->LogPath("early", 1)).find("slept"), std::string::npos);
}

// A job that leaves a background process behind (holding its output open) still finishes, and
// the background process goes with it, as in a container.
TEST_P(LocalExecutorTest, BackgroundLeftoversDoNotKeepTheAttemptAlive) {
  // Found by its command line on the host: in the sandbox the job sees its own PID namespace, so
  // the $! it could report means nothing outside.
  const std::string arg = "1000." + std::to_string(::getpid());
  ASSERT_TRUE(StartSpec("bg", Spec("bg", "sleep " + arg + " & echo main done")).ok());
  auto start = std::chrono::steady_clock::now();
  auto events = RunToEnd(*executor_, "bg");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(events.back().exit_code, 0);
  EXPECT_NE(Slurp(executor_->LogPath("bg", 1)).find("main done"), std::string::npos);
  const std::string cmdline = std::string("sleep") + '\0' + arg + '\0';
  auto running = [&] {
    for (const auto& e : fs::directory_iterator("/proc")) {
      std::string name = e.path().filename().string();
      if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
      if (Slurp(e.path() / "cmdline") != cmdline) continue;
      std::string stat = Slurp(e.path() / "stat");
      auto close = stat.rfind(')');
      if (close != std::string::npos && stat[close + 2] != 'Z') return true;
    }
    return false;
  };
  bool gone = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
       !gone && std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(20)))
    gone = !running();
  EXPECT_TRUE(gone) << "the background sleep " << arg << " survived its attempt";
}

// The supervisor takes nothing of the server with it but stdio: a descriptor the server leaked
// (here a pipe without O_CLOEXEC) is not open in the supervisor.
TEST_P(LocalExecutorTest, TheSupervisorInheritsNoDescriptorsOfTheServer) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  char want[256] = {0};
  ASSERT_GT(::readlink(("/proc/self/fd/" + std::to_string(fds[1])).c_str(), want, sizeof want - 1), 0);
  ASSERT_TRUE(StartSpec("fds", Spec("fds", "sleep 30")).ok());
  WaitForPhase(*executor_, "fds", "Training");
  json st = json::parse(Slurp(root_ / "attempts/fds/status.json"));
  std::string fd_dir = "/proc/" + std::to_string(st["supervisor_pid"].get<int>()) + "/fd";
  int open_fds = 0;
  for (const auto& entry : fs::directory_iterator(fd_dir)) {
    ++open_fds;
    std::error_code ec;
    EXPECT_NE(fs::read_symlink(entry.path(), ec).string(), std::string(want)) << entry.path();
  }
  EXPECT_GT(open_fds, 0);
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_TRUE(executor_->Stop("fds", 0).ok());
  EXPECT_TRUE(RunToEnd(*executor_, "fds").back().stopped);
}

TEST_P(LocalExecutorTest, StopAndAdoptOfUnknownAttemptsAreNotFound) {
  EXPECT_EQ(executor_->Stop("nope", 1).code(), Code::kNotFound);
  EXPECT_EQ(executor_->Adopt("nope").code(), Code::kNotFound);
  EXPECT_EQ(StartSpec("other", Spec("mismatch", "true")).code(), Code::kInvalidArgument);
  EXPECT_TRUE(executor_->Poll().empty());
}

TEST_P(LocalExecutorTest, TheCheckpointMarkerIsReportedBeforeTheExit) {
  // The job checkpoints (touches the marker) and exits on its own at once: the supervisor's last
  // look still sees it, and the event comes before Exited with the marker's time.
  auto before = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  ASSERT_TRUE(StartSpec("ck", Spec("ck", "sleep 0.2; touch \"$TRAINYARD_CHECKPOINT_MARKER\"")).ok());
  auto events = RunToEnd(*executor_, "ck");
  auto ck = std::find_if(events.begin(), events.end(), [](const AttemptEvent& e) { return e.phase == Phase::kCheckpointed; });
  ASSERT_NE(ck, events.end());
  EXPECT_GE(ck->at, before);
  EXPECT_EQ(events.back().phase, Phase::kExited);
  EXPECT_EQ(std::count_if(events.begin(), events.end(), [](const AttemptEvent& e) { return e.phase == Phase::kCheckpointed; }), 1);
}

// A job that saves its checkpoint on the interruption's SIGTERM may do so through other
// programs (a copy, an upload): they start after the SIGTERM and must run to their end within the
// notice. The checkpoint they write is in the store when the attempt has exited. (In the sandbox
// the SIGTERM was once sent again every 200 ms to every new process of the job, so a save that
// took longer than that was killed half way, and the next run restored the checkpoint without it.)
TEST_P(LocalExecutorTest, ProgramsStartedOnTheInterruptionsSigtermFinishAndTheirCheckpointIsSynced) {
  json spec = Spec("save", "D=$(dirname \"$TRAINYARD_CHECKPOINT_MARKER\"); echo before > \"$D/log\"; "
                           "trap 'sh -c \"sleep 1; echo saved >> $D/log\"; exit 0' TERM; "
                           "echo ready; while :; do sleep 0.05; done");
  spec["checkpoint"] = {{"uri", "s3://ckpt/save/"}, {"local_path", "/opt/ml/checkpoints"}};
  ASSERT_TRUE(StartSpec("save", spec).ok());
  WaitForPhase(*executor_, "save", "Training");
  // The interruption must come after the trap is in place: a SIGTERM before it ends the shell.
  for (int i = 0; i < 400 && Slurp(executor_->LogPath("save", 1)).find(" ready") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ASSERT_NE(Slurp(executor_->LogPath("save", 1)).find(" ready"), std::string::npos);
  ASSERT_TRUE(executor_->Interrupt("save", 30).ok());
  auto start = std::chrono::steady_clock::now();
  auto events = RunToEnd(*executor_, "save");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));  // not the whole notice
  ASSERT_EQ(events.back().phase, Phase::kExited);
  EXPECT_TRUE(events.back().stopped);
  EXPECT_EQ(events.back().exit_code, 0) << events.back().failure_reason;
  EXPECT_EQ(Slurp(root_ / "ckpt/save/log"), "before\nsaved\n");
}

// ---- Failure kinds, recorded by the supervisor and read back by Poll ----

TEST_P(LocalExecutorTest, ANonZeroExitIsAnAlgorithmFailure) {
  ASSERT_TRUE(StartSpec("algo", Spec("algo", "exit 3")).ok());
  const AttemptEvent end = RunToEnd(*executor_, "algo").back();
  EXPECT_EQ(end.exit_code, 3);
  EXPECT_EQ(end.failure_kind, FailureKind::kAlgorithm);
  EXPECT_EQ(end.failure_reason, "");  // the controller words it from the exit code
}

TEST_P(LocalExecutorTest, AJobCannotPassItsFailureOffAsTheHosts) {
  // The reason the job writes is shown as it is, but it is the job's failure: no retry as an
  // infrastructure failure because of the text.
  ASSERT_TRUE(StartSpec("spoof", Spec("spoof", "echo 'InternalServerError: not really' > $SM_OUTPUT_DIR/failure; exit 1")).ok());
  const AttemptEvent end = RunToEnd(*executor_, "spoof").back();
  EXPECT_EQ(end.failure_reason, "InternalServerError: not really\n");
  EXPECT_EQ(end.failure_kind, FailureKind::kAlgorithm);
}

TEST_P(LocalExecutorTest, MissingChannelDataIsAClientFailure) {
  json spec = Spec("nodata", "true");
  spec["channels"] = {{{"name", "train"}, {"uri", "s3://nobucket/nothing/"}}};
  ASSERT_TRUE(StartSpec("nodata", spec).ok());
  const AttemptEvent end = RunToEnd(*executor_, "nodata").back();
  EXPECT_EQ(end.exit_code, 1);
  EXPECT_EQ(end.failure_kind, FailureKind::kClient);
  EXPECT_EQ(end.failure_reason.rfind("ClientError: input channel train:", 0), 0u) << end.failure_reason;
}

// What a job can read (its FailureReason, its transitions) names no directory of the server's:
// the store's message about the missing bucket, which gives its directory in the data
// directory, and the setup's, which points at a log in the attempt's directory.
TEST_P(LocalExecutorTest, AFailureReasonNamesNoServerDirectory) {
  json spec = Spec("paths", "true");
  spec["channels"] = {{{"name", "train"}, {"uri", "s3://nobucket/nothing/"}}};
  ASSERT_TRUE(StartSpec("paths", spec).ok());
  std::vector<AttemptEvent> events = RunToEnd(*executor_, "paths");
  json setup = Spec("paths-setup", "true");
  setup["setup_command"] = "exit 1";
  ASSERT_TRUE(StartSpec("paths-setup", setup).ok());
  for (const AttemptEvent& e : RunToEnd(*executor_, "paths-setup")) events.push_back(e);
  std::string reasons;
  for (const AttemptEvent& e : events) reasons += e.failure_reason + "\n" + e.message + "\n" + e.detail + "\n";
  EXPECT_THAT(reasons, ::testing::HasSubstr("nobucket"));
  EXPECT_THAT(reasons, ::testing::HasSubstr("<attempt dir>"));
  EXPECT_THAT(reasons, ::testing::Not(::testing::HasSubstr(root_.string()))) << reasons;
  EXPECT_THAT(reasons, ::testing::Not(::testing::HasSubstr(fs::canonical(root_).string()))) << reasons;
}

TEST_P(LocalExecutorTest, AFailedInstanceSetupIsAnInternalFailure) {
  json spec = Spec("setup", "true");
  spec["setup_command"] = "exit 1";
  ASSERT_TRUE(StartSpec("setup", spec).ok());
  const AttemptEvent end = RunToEnd(*executor_, "setup").back();
  EXPECT_EQ(end.failure_kind, FailureKind::kInternal);
  EXPECT_EQ(end.failure_reason.rfind("InternalServerError: the instance setup command for ml.m5.large failed", 0), 0u)
      << end.failure_reason;
}

TEST_P(LocalExecutorTest, ASuccessHasNoFailureKind) {
  fs::create_directories(root_ / "data/train");
  std::ofstream(root_ / "data/train/a.csv") << "1\n";
  json spec = Spec("fine", "test -f \"$SM_CHANNEL_TRAIN/a.csv\"");
  spec["channels"] = {{{"name", "train"}, {"uri", "s3://data/train/"}}};
  ASSERT_TRUE(StartSpec("fine", spec).ok());
  auto events = RunToEnd(*executor_, "fine");
  EXPECT_EQ(events.back().exit_code, 0);
  EXPECT_EQ(events.back().failure_kind, FailureKind::kNone);
  // The staging summary counts only what came from a remote store (none here): no detail.
  auto training = std::find_if(events.begin(), events.end(), [](const AttemptEvent& e) { return e.phase == Phase::kTraining; });
  ASSERT_NE(training, events.end());
  EXPECT_EQ(training->detail, "");
  EXPECT_EQ(training->message, "Training in progress.");
}

// ---- The executor's files: logs read through it, and discarded by it ----

TEST_P(LocalExecutorTest, ReadLogReturnsWholeLinesAndWhereToGoOn) {
  ASSERT_TRUE(StartSpec("lines", Spec("lines", "echo one; echo two; echo three")).ok());
  EXPECT_EQ(RunToEnd(*executor_, "lines").back().exit_code, 0);
  auto all = executor_->ReadLog("lines", 1, 0, 1 << 20);
  std::vector<std::string> texts;
  std::istringstream in(all.bytes);
  for (std::string l; std::getline(in, l);) texts.push_back(l.substr(l.find(' ') + 1));
  EXPECT_EQ(texts, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(all.next_offset, static_cast<int64_t>(all.bytes.size()));
  // A budget smaller than a line still returns that one line, and the next read goes on after it.
  auto first = executor_->ReadLog("lines", 1, 0, 1);
  EXPECT_EQ(first.bytes, all.bytes.substr(0, all.bytes.find('\n') + 1));
  auto rest = executor_->ReadLog("lines", 1, first.next_offset, 1 << 20);
  EXPECT_EQ(first.bytes + rest.bytes, all.bytes);
  EXPECT_EQ(rest.next_offset, all.next_offset);
  // At the end, and for a log that does not exist: nothing, and the offset stays.
  EXPECT_EQ(executor_->ReadLog("lines", 1, all.next_offset, 100).bytes, "");
  EXPECT_EQ(executor_->ReadLog("lines", 1, all.next_offset, 100).next_offset, all.next_offset);
  EXPECT_EQ(executor_->ReadLog("nope", 1, 0, 100).bytes, "");
}

TEST_P(LocalExecutorTest, ReadLogLeavesALineBeingWrittenForLater) {
  fs::create_directories(root_ / "attempts/partial/logs");
  std::ofstream(root_ / "attempts/partial/logs/algo-1.log") << "1 done\n2 half";
  auto chunk = executor_->ReadLog("partial", 1, 0, 100);
  EXPECT_EQ(chunk.bytes, "1 done\n");
  EXPECT_EQ(chunk.next_offset, 7);
}

TEST_P(LocalExecutorTest, DiscardLogsAndDiscardRemoveTheAttemptsFiles) {
  ASSERT_TRUE(StartSpec("gone", Spec("gone", "echo bye")).ok());
  EXPECT_EQ(RunToEnd(*executor_, "gone").back().exit_code, 0);
  ASSERT_NE(executor_->ReadLog("gone", 1, 0, 100).bytes, "");
  executor_->DiscardLogs("gone");
  EXPECT_EQ(executor_->ReadLog("gone", 1, 0, 100).bytes, "");
  EXPECT_TRUE(fs::exists(root_ / "attempts/gone/status.json"));  // only the logs went
  ASSERT_TRUE(executor_->Discard("gone").ok());
  EXPECT_FALSE(fs::exists(root_ / "attempts/gone"));
  EXPECT_TRUE(executor_->Discard("gone").ok());  // idempotent
  // The same id starts again from scratch (a restarted run).
  ASSERT_TRUE(StartSpec("gone", Spec("gone", "echo again")).ok());
  EXPECT_EQ(RunToEnd(*executor_, "gone").back().exit_code, 0);
}

TEST(RedactPathsTest, TheLongestPathIsReplacedFirstAndEveryOccurrence) {
  const std::vector<RedactedPath> paths = {{"/var/lib/ty/", "<data dir>"}, {"/var/lib/ty/attempts/job-1", "<attempt dir>"},
                                           {"/", "<root>"}, {"", "<empty>"}};
  EXPECT_EQ(RedactPaths("cannot write /var/lib/ty/attempts/job-1/image.json; see /var/lib/ty/buckets/b and "
                        "/var/lib/ty/attempts/job-1/x",
                        paths),
            "cannot write <attempt dir>/image.json; see <data dir>/buckets/b and <attempt dir>/x");
  EXPECT_EQ(RedactPaths("nothing of the server's: /etc/hosts", paths), "nothing of the server's: /etc/hosts");
}

TEST(PhaseNameTest, NamesEveryPhase) {
  EXPECT_STREQ(PhaseName(Phase::kCheckpointed), "Checkpointed");
  EXPECT_STREQ(PhaseName(Phase::kPreparing), "Preparing");
  EXPECT_STREQ(PhaseName(Phase::kTraining), "Training");
  EXPECT_STREQ(PhaseName(Phase::kUploading), "Uploading");
  EXPECT_STREQ(PhaseName(Phase::kExited), "Exited");
  EXPECT_STREQ(PhaseName(Phase::kLost), "Lost");
}

// ---- System metrics (exec/local/system_sampler.h) ----

// A /proc/<pid>/stat line: utime 14, stime 15, cutime 16, cstime 17 and rss (field 24) given.
std::string StatLine(int pid, const std::string& comm, int ppid, int utime, int stime, int cutime, int cstime, int rss) {
  return std::to_string(pid) + " (" + comm + ") S " + std::to_string(ppid) + " 1 1 0 -1 4194304 98 0 0 0 " +
         std::to_string(utime) + " " + std::to_string(stime) + " " + std::to_string(cutime) + " " +
         std::to_string(cstime) + " 20 0 1 0 1052955 3133440 " + std::to_string(rss) +
         " 18446744073709551615 94102677000192 0 0\n";
}

TEST(SystemSamplerTest, ProcStatCountsOwnAndWaitedForChildrenTimeAndRss) {
  local::ProcStat p;
  // The command name may hold spaces and parentheses: fields are counted after the last ')'.
  ASSERT_TRUE(local::ParseProcStat(StatLine(42, "py thon) (x", 7, 100, 20, 3, 4, 2500), &p));
  EXPECT_EQ(p.pid, 42);
  EXPECT_EQ(p.ppid, 7);
  EXPECT_EQ(p.cpu_ticks, 127);  // 100 + 20 + 3 + 4
  EXPECT_EQ(p.rss_pages, 2500);
  EXPECT_FALSE(local::ParseProcStat("42 (short) S 1 2 3", &p));
  EXPECT_FALSE(local::ParseProcStat("garbage", &p));
}

TEST(SystemSamplerTest, ProcStatOfARealProcessParses) {
  std::string text = Slurp("/proc/self/stat");
  local::ProcStat p;
  ASSERT_TRUE(local::ParseProcStat(text, &p)) << text;
  EXPECT_EQ(p.pid, ::getpid());
  EXPECT_EQ(p.ppid, ::getppid());
  EXPECT_GT(p.rss_pages, 0);
}

TEST(SystemSamplerTest, TreeSumsTheRootAndEveryDescendantOnly) {
  std::vector<local::ProcStat> procs;
  for (const auto& line : {StatLine(1, "init", 0, 1000, 0, 0, 0, 1),       // not in the tree
                           StatLine(10, "bwrap", 1, 1, 1, 0, 0, 10),       // root
                           StatLine(11, "bwrap", 10, 2, 0, 0, 0, 20),      // child
                           StatLine(12, "python", 11, 300, 50, 40, 10, 30000),  // grandchild, reaped a worker
                           StatLine(13, "worker", 12, 100, 0, 0, 0, 5000),      // great-grandchild
                           StatLine(20, "other", 1, 7000, 0, 0, 0, 99999)}) {   // a sibling tree
    local::ProcStat p;
    ASSERT_TRUE(local::ParseProcStat(line, &p));
    procs.push_back(p);
  }
  local::TreeUsage u = local::SumTree(procs, 10);
  EXPECT_EQ(u.processes, 4);
  EXPECT_EQ(u.cpu_ticks, 2 + 2 + 400 + 100);
  EXPECT_EQ(u.rss_pages, 10 + 20 + 30000 + 5000);
  EXPECT_EQ(local::SumTree(procs, 13).cpu_ticks, 100);
  EXPECT_EQ(local::SumTree(procs, 99).processes, 0);  // gone
}

TEST(SystemSamplerTest, MemTotalIsReadInBytes) {
  EXPECT_EQ(local::ParseMemTotalBytes("MemTotal:       16314528 kB\nMemFree:  1 kB\n"), int64_t{16314528} * 1024);
  EXPECT_EQ(local::ParseMemTotalBytes("MemFree: 1 kB\n"), 0);
}

TEST(SystemSamplerTest, NvidiaSmiLinesAreSummedOverTheInstancesGpus) {
  const std::string csv = "0, 50, 1000, 4000\n1, 30, 2000, 4000\n2, [N/A], [N/A], [N/A]\nWARNING: something\n3, 100, 4000, 4000";
  auto gpus = local::ParseNvidiaSmi(csv);
  ASSERT_EQ(gpus.size(), 3u);  // the [N/A] line and the warning are skipped
  EXPECT_EQ(gpus[2].index, 3);
  local::GpuSums all = local::SumGpus(gpus, std::nullopt);
  EXPECT_EQ(all.gpus, 3);
  EXPECT_DOUBLE_EQ(all.utilization, 180);         // 50 + 30 + 100
  EXPECT_DOUBLE_EQ(all.memory_utilization, 175);  // 25 + 50 + 100
  local::GpuSums one = local::SumGpus(gpus, local::VisibleGpus(std::string("1")));
  EXPECT_EQ(one.gpus, 1);
  EXPECT_DOUBLE_EQ(one.utilization, 30);
  EXPECT_DOUBLE_EQ(one.memory_utilization, 50);
  EXPECT_EQ(local::SumGpus(gpus, local::VisibleGpus(std::string("5"))).gpus, 0);
}

TEST(SystemSamplerTest, CudaVisibleDevicesNamesGpusByIndexOrMeansAll) {
  EXPECT_EQ(local::VisibleGpus(std::string("0, 2")), (std::set<int>{0, 2}));
  EXPECT_EQ(local::VisibleGpus(std::nullopt), std::nullopt);
  EXPECT_EQ(local::VisibleGpus(std::string("")), std::nullopt);
  EXPECT_EQ(local::VisibleGpus(std::string("GPU-8f6c1e2a")), std::nullopt);  // UUIDs: every GPU
  EXPECT_EQ(local::VisibleGpus(std::string("0,,1")), std::nullopt);
}

TEST(SystemSamplerTest, NvidiaSmiIsFoundOnPathOrByPathOrNotAtAll) {
  EXPECT_EQ(local::ResolveNvidiaSmi(""), "");
  EXPECT_EQ(local::ResolveNvidiaSmi("/bin/sh"), "/bin/sh");
  EXPECT_EQ(local::ResolveNvidiaSmi("/nonexistent/nvidia-smi"), "");
  EXPECT_EQ(local::ResolveNvidiaSmi("no-such-binary-for-trainyard"), "");
  EXPECT_NE(local::ResolveNvidiaSmi("sh"), "");
}

// A live process tree sampled for real: the file gets JSON lines with every non-GPU metric.
TEST(SystemSamplerTest, SamplesAProcessTreeIntoJsonLines) {
  fs::path dir = fs::temp_directory_path() / ("ty-sampler-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  pid_t child = ::fork();
  if (child == 0) {
    ::execl("/bin/sh", "sh", "-c", "sleep 30 & sleep 30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(child, 0);
  local::SystemSampler::Instance inst;
  inst.pid = child;
  for (int i = 0; i < 100 && local::ProcStartTime(child).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  inst.start_time = local::ProcStartTime(child);
  inst.opt_ml_dir = dir.string();
  inst.out_path = (dir / "algo-1.system.jsonl").string();
  local::SystemSampler sampler({inst}, {.interval_ms = 100, .nvidia_smi = ""});
  sampler.Start();
  std::vector<json> lines;
  for (int i = 0; i < 300 && lines.size() < 2; ++i) {  // polled, 30 s at most
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    lines.clear();
    std::istringstream in(Slurp(inst.out_path));
    for (std::string l; std::getline(in, l);) lines.push_back(json::parse(l));
  }
  sampler.Stop();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_GE(lines.size(), 2u);
  for (const auto& l : lines) {
    EXPECT_GT(l.value("Timestamp", int64_t{0}), 1'600'000'000'000);
    EXPECT_GE(l.value("CPUUtilization", -1.0), 0);
    EXPECT_GT(l.value("MemoryUtilization", 0.0), 0);  // the shell and its two sleeps have some RSS
    EXPECT_GT(l.value("DiskUtilization", 0.0), 0);
    EXPECT_LE(l.value("DiskUtilization", 101.0), 100);
    EXPECT_FALSE(l.contains("GPUUtilization"));
  }
  EXPECT_GT(sampler.samples(), 0);
  fs::remove_all(dir);
}

TEST(SystemSamplerTest, CgroupCountersParseInBothLayouts) {
  EXPECT_EQ(local::ParseCgroupCpuNs(1, "123456789\n"), 123456789);
  EXPECT_EQ(local::ParseCgroupCpuNs(2, "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n"), 1'500'000);
  EXPECT_EQ(local::ParseCgroupCpuNs(2, "user_usec 1000\n"), -1);
  EXPECT_EQ(local::ParseCgroupCpuNs(1, "garbage"), -1);
  const std::string v1 =
      "cache 4096\nrss 8192\nrss_huge 0\nmapped_file 4096\ntotal_cache 4096\ntotal_rss 12288\ntotal_mapped_file 8192\n";
  EXPECT_EQ(local::ParseCgroupRssBytes(1, v1), 12288 + 8192);  // the hierarchy's totals, not rss_huge
  EXPECT_EQ(local::ParseCgroupRssBytes(1, "rss_huge 7\nrss 8192\nmapped_file 4096\n"), 8192 + 4096);
  EXPECT_EQ(local::ParseCgroupRssBytes(2, "anon_thp 0\nanon 65536\nfile 4096\nfile_mapped 1024\n"), 65536 + 1024);
  EXPECT_EQ(local::ParseCgroupRssBytes(2, "file 4096\n"), -1);
}

// With a cgroup, the sampler reads its counters and walks no process table: a busy process in
// the instance's cgroup counts although it is outside the (idle) process tree rooted at the pid.
TEST(SystemSamplerTest, AnInstanceWithACgroupIsMeasuredByItsCounters) {
  auto cg = local::InstanceCgroup::Create("ty-sampler-test-" + std::to_string(::getpid()), "", {});
  if (!cg.ok()) GTEST_SKIP() << "no writable cgroup here: " << cg.status().message();
  local::CgroupUsageFiles files = (*cg)->UsageFiles();
  if (files.cpu.empty()) GTEST_SKIP() << "no CPU accounting controller mounted";
  fs::path dir = fs::temp_directory_path() / ("ty-sampler-cg-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  pid_t idle = ::fork();
  if (idle == 0) {
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  pid_t busy = ::fork();
  if (busy == 0) {
    if (!(*cg)->JoinFromChild()) ::_exit(126);
    // 64 MiB held in a shell variable, then a spin.
    ::execl("/bin/sh", "sh", "-c", "x=$(head -c 67108864 /dev/zero | tr '\\0' a); while :; do :; done",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(idle, 0);
  ASSERT_GT(busy, 0);
  local::SystemSampler::Instance inst;
  inst.pid = idle;
  for (int i = 0; i < 100 && local::ProcStartTime(idle).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  inst.start_time = local::ProcStartTime(idle);
  inst.opt_ml_dir = dir.string();
  inst.out_path = (dir / "algo-1.system.jsonl").string();
  inst.cgroup = files;
  local::SystemSampler sampler({inst}, {.interval_ms = 300, .nvidia_smi = ""});
  sampler.Start();
  std::vector<json> lines;
  auto held = [&] { return !lines.empty() && lines.back().value("MemoryUtilization", 0.0) > 0; };
  for (int i = 0; i < 300 && (lines.size() < 2 || !held()); ++i) {  // polled, 30 s at most
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    lines.clear();
    std::istringstream in(Slurp(inst.out_path));
    for (std::string l; std::getline(in, l);) lines.push_back(json::parse(l));
  }
  sampler.Stop();
  for (pid_t p : {idle, busy}) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
  (*cg)->Remove();
  fs::remove_all(dir);
  ASSERT_GE(lines.size(), 2u);
  // A spinning shell on a machine with other work: well above the idle tree's 0 %.
  EXPECT_GT(lines.back().value("CPUUtilization", 0.0), 10) << lines.back().dump();
  EXPECT_GT(lines.back().value("MemoryUtilization", 0.0), 0) << lines.back().dump();
}

// Without the sandbox a job's command is looked up on the instance's own PATH (execvpe would
// search the supervisor's).
TEST(FindOnPathTest, SearchesTheGivenPathOnlyAndSkipsDirectories) {
  EXPECT_EQ(local::FindOnPath("sh", "/nonexistent:/bin"), "/bin/sh");
  EXPECT_EQ(local::FindOnPath("sh", "/nonexistent"), "");
  EXPECT_EQ(local::FindOnPath("sh", ""), "");
  EXPECT_EQ(local::FindOnPath("bin", "/"), "");  // a directory named so is no command
  EXPECT_EQ(local::FindOnPath("/bin/sh", "/nonexistent"), "/bin/sh");
}

TEST(GpuInventoryTest, NoIndexIsGivenTwiceUntilItIsReleased) {
  local::GpuInventory inv({3, 1, 0, 2, 2});
  EXPECT_EQ(inv.in_service(), (std::vector<int>{0, 1, 2, 3}));
  auto a = inv.Allocate("a", 1, 1);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (std::vector<std::vector<int>>{{0}}));
  auto b = inv.Allocate("b", 1, 2);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<std::vector<int>>{{1, 2}}));
  EXPECT_EQ(*inv.Allocate("a", 1, 1), *a);  // asked again: the same ones
  auto c = inv.Allocate("c", 2, 1);         // two instances, one left
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("1 of the host's 4 are free"), std::string::npos) << c.status().message();
  EXPECT_EQ(inv.free_count(), 1);           // the refusal held nothing
  inv.Release("b");
  auto c2 = inv.Allocate("c", 2, 1);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(*c2, (std::vector<std::vector<int>>{{1}, {2}}));
  auto none = inv.Allocate("cpu", 3, 0);    // a type without GPUs: an empty set per instance
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, (std::vector<std::vector<int>>{{}, {}, {}}));
}

TEST(GpuInventoryTest, ARestoredAttemptKeepsWhatItHeldAndNothingTwice) {
  local::GpuInventory inv({0, 1, 2});
  inv.Restore("x", {{2}, {7}});  // 7 is not in service (taken out since)
  inv.Restore("y", {{2}});       // already x's
  EXPECT_EQ(inv.free_count(), 2);
  auto z = inv.Allocate("z", 1, 2);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(*z, (std::vector<std::vector<int>>{{0, 1}}));
  EXPECT_FALSE(inv.Allocate("w", 1, 1).ok());
}

TEST(GpuInventoryTest, DiscoveryReadsTheNodesWithinVisibleDevicesLessThoseOutOfService) {
  fs::path dir = fs::temp_directory_path() / ("ty-gpus-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* n : {"nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm", "nvidia12x"})
    std::ofstream(dir / n) << "";
  EXPECT_EQ(local::DiscoverGpus(dir.string(), std::nullopt, {}, true), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(local::DiscoverGpus(dir.string(), std::string("1,3"), {3}, true), (std::vector<int>{1}));
  EXPECT_TRUE(local::DiscoverGpus(dir.string(), std::nullopt, {}, false).empty());  // regular files are no GPUs
  fs::remove_all(dir);
  EXPECT_EQ(*local::PlacedGpus(R"({"attempt":{},"gpus":[[0,1],[],[2,"x",-1]]})"),
            (std::vector<std::vector<int>>{{0, 1}, {}, {2}}));
  EXPECT_FALSE(local::PlacedGpus(R"({"attempt":{}})").has_value());
  EXPECT_EQ(local::GpuList({0, 2}), "0,2");
}

INSTANTIATE_TEST_SUITE_P(Sandboxes, LocalExecutorTest, ::testing::Values("none", "bwrap"));

}  // namespace
}  // namespace ty::exec
