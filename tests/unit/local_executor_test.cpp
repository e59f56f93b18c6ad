// The local executor with real supervisor processes (the `trainyard` binary from TRAINYARD_BIN).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "exec/local_executor.h"

namespace ty::exec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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

bool BwrapWorks() { return std::system("bwrap --dev-bind / / --unshare-uts true >/dev/null 2>&1") == 0; }

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
    o.notify_socket = (root_ / "executor.sock").string();
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
            {"sandbox", GetParam()},
            {"command", {"/bin/sh", "-c", command}},
            {"hyperparameters", {{"epochs", "3"}}},
            {"environment", {{"FOO", "bar"}}},
            {"extra_env", json::object()},
            {"channels", json::array()},
            {"model_tar", (root_ / "out" / id / "model.tar.gz").string()},
            {"output_tar", (root_ / "out" / id / "output.tar.gz").string()},
            {"compress", true},
            {"checkpoint", nullptr},
            {"stop_grace_seconds", 30},
            {"max_runtime_seconds", 0}};
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
  ASSERT_TRUE(executor_->Start("ok", Spec("ok", cmd).dump()).ok());
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
  ASSERT_TRUE(executor_->Start("bad", Spec("bad", cmd).dump()).ok());
  auto events = RunToEnd(*executor_, "bad");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().phase, Phase::kExited);
  EXPECT_EQ(events.back().exit_code, 7);
  EXPECT_EQ(events.back().failure_reason, "out of memory in layer 3\n");
}

TEST_P(LocalExecutorTest, StopDeliversSigtermAndTheJobCanFinishCleanly) {
  ASSERT_TRUE(executor_->Start("stop", Spec("stop", "trap 'echo term; exit 0' TERM; while :; do sleep 0.05; done").dump()).ok());
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
  ASSERT_TRUE(executor_->Start("deaf", Spec("deaf", "trap '' TERM; while :; do sleep 0.05; done").dump()).ok());
  WaitForPhase(*executor_, "deaf", "Training");
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
  ASSERT_TRUE(executor_->Start("slow", spec.dump()).ok());
  auto events = RunToEnd(*executor_, "slow");
  EXPECT_TRUE(events.back().max_runtime_exceeded);
}

TEST_P(LocalExecutorTest, GangOfTwoStartsTogetherAndSeesEachOther) {
  ASSERT_TRUE(executor_->Start("gang", Spec("gang", "echo \"me=$SM_CURRENT_HOST all=$SM_HOSTS\"", 2).dump()).ok());
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
  ASSERT_TRUE(executor_->Start("names", Spec("names", cmd, 2).dump()).ok());
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
  ASSERT_TRUE(executor_->Start("half", spec.dump()).ok());
  auto events = RunToEnd(*executor_, "half");
  EXPECT_EQ(events.back().exit_code, 5);
}

TEST_P(LocalExecutorTest, ANewExecutorAdoptsARunningAttempt) {
  ASSERT_TRUE(executor_->Start("adopt", Spec("adopt", "sleep 1; echo done").dump()).ok());
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
  ASSERT_TRUE(executor_->Start("lost", Spec("lost", "sleep 30; echo never").dump()).ok());
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

INSTANTIATE_TEST_SUITE_P(Sandboxes, LocalExecutorTest, ::testing::Values("none", "bwrap"));

}  // namespace
}  // namespace ty::exec
