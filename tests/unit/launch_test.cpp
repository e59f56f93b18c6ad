// The distributed launchers' pure parts (exec/distribution.h, exec/local/launch.h): which launch
// the hyperparameters ask for, the command each instance runs, each torch rank's variables,
// mpirun's command line, and the remote shell's frames and proof.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "exec/attempt_spec.h"
#include "exec/distribution.h"
#include "exec/local/launch.h"
#include "exec/local/opt_ml.h"

namespace ty::exec::local {
namespace {

using Argv = std::vector<std::string>;
using Kind = Distribution::Kind;

TEST(ParseDistribution, NoHyperparametersMeansOneProcessPerInstance) {
  auto d = ParseDistribution({{"epochs", "3"}});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, Kind::kNone);
}

TEST(ParseDistribution, AcceptsTheSdksJsonAndBareStrings) {
  for (const char* v : {"true", "\"true\"", "True"}) {
    auto d = ParseDistribution({{"sagemaker_torch_distributed_enabled", v}});
    ASSERT_TRUE(d.ok()) << v;
    EXPECT_EQ(d->kind, Kind::kTorch) << v;
  }
  auto off = ParseDistribution({{"sagemaker_torch_distributed_enabled", "false"}});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->kind, Kind::kNone);
}

TEST(ParseDistribution, DataParallelIsATorchLaunch) {
  auto d = ParseDistribution({{"sagemaker_distributed_dataparallel_enabled", "true"}});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, Kind::kTorch);
}

TEST(ParseDistribution, MpiTakesProcessesPerHostAndOptions) {
  auto d = ParseDistribution({{"sagemaker_mpi_enabled", "true"},
                              {"sagemaker_mpi_num_of_processes_per_host", "\"4\""},
                              {"sagemaker_mpi_custom_mpi_options", "\"-x A=1   --verbose\""}});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, Kind::kMpi);
  EXPECT_EQ(d->processes_per_host, 4);
  EXPECT_EQ(d->custom_mpi_options, (Argv{"-x", "A=1", "--verbose"}));
}

TEST(ParseDistribution, RefusesBadValuesNamingTheHyperparameter) {
  struct Case {
    std::map<std::string, std::string> hps;
    std::string fragment;
  };
  for (const Case& c : std::vector<Case>{
           {{{"sagemaker_mpi_enabled", "yes"}}, "sagemaker_mpi_enabled must be true or false"},
           {{{"sagemaker_mpi_num_of_processes_per_host", "0"}}, "from 1 to 256"},
           {{{"sagemaker_mpi_num_of_processes_per_host", "257"}}, "from 1 to 256"},
           {{{"sagemaker_mpi_num_of_processes_per_host", "1.5"}}, "sagemaker_mpi_num_of_processes_per_host"},
           {{{"sagemaker_mpi_custom_mpi_options", "[1]"}}, "sagemaker_mpi_custom_mpi_options must be a string"},
           {{{"sagemaker_mpi_custom_mpi_options", std::string(4097, 'x')}}, "at most 4096"},
           {{{"sagemaker_mpi_enabled", "true"}, {"sagemaker_distributed_dataparallel_enabled", "true"}},
            "cannot be combined"}}) {
    auto d = ParseDistribution(c.hps);
    ASSERT_FALSE(d.ok()) << c.fragment;
    EXPECT_EQ(d.status().code(), Code::kInvalidArgument);
    EXPECT_NE(d.status().message().find(c.fragment), std::string::npos) << d.status().message();
  }
}

TEST(LaunchCommand, WrapsTheEntryPointInTheLauncher) {
  Distribution none;
  EXPECT_EQ(LaunchCommand(none, "/l", {"python3", "t.py"}), (Argv{"python3", "t.py"}));
  Distribution torch{Kind::kTorch};
  EXPECT_EQ(LaunchCommand(torch, "/l", {"python3", "t.py"}), (Argv{"/l", "launch", "torch", "--", "python3", "t.py"}));
  Distribution mpi{Kind::kMpi, 3, {"-x", "A=1"}};
  EXPECT_EQ(LaunchCommand(mpi, "/l", {"python3", "t.py", "--lr", "0.1"}),
            (Argv{"/l", "launch", "mpi", "--processes-per-host", "3", "--mpi-option", "-x", "--mpi-option", "A=1", "--",
                  "python3", "t.py", "--lr", "0.1"}));
}

TEST(LaunchCommand, JobCommandUsesTheSandboxsLauncherPath) {
  AttemptSpec spec;
  spec.script_mode = ScriptMode{"train.py", ""};
  spec.hyperparameters = {{"sagemaker_torch_distributed_enabled", "true"}, {"epochs", "2"}};
  EXPECT_EQ(JobCommand(spec),
            (Argv{"/opt/trainyard/bin/trainyard-supervisor", "launch", "torch", "--", "python3", "train.py", "--epochs", "2"}));
}

TEST(TorchRanks, SetWhatTorchrunSetsForEachLocalRank) {
  auto node = TorchNodeFromEnvironment({{"SM_HOSTS", R"(["algo-1","algo-2","algo-3"])"},
                                        {"SM_CURRENT_HOST", "algo-2"},
                                        {"SM_NUM_GPUS", "4"},
                                        {"MASTER_ADDR", "algo-1"}});
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->node_rank, 1);
  EXPECT_EQ(node->local_world_size, 4);
  // ranks: node 0 holds 0..3, node 1 holds 4..7, node 2 holds 8..11
  auto env = TorchRankEnvironment(*node, 2);
  EXPECT_EQ(env["RANK"], "6");
  EXPECT_EQ(env["LOCAL_RANK"], "2");
  EXPECT_EQ(env["WORLD_SIZE"], "12");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["NODE_RANK"], "1");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "3");
  EXPECT_EQ(env["MASTER_ADDR"], "algo-1");
  EXPECT_EQ(env["MASTER_PORT"], "7777");
  for (const auto& [k, v] : env) EXPECT_EQ(k.find("TORCHELASTIC"), std::string::npos) << k;
}

TEST(TorchRanks, AtLeastOneProcessWithoutGpus) {
  auto node = TorchNodeFromEnvironment({{"SM_HOSTS", R"(["algo-1"])"}, {"SM_CURRENT_HOST", "algo-1"}, {"SM_NUM_GPUS", "0"}});
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->local_world_size, 1);
  EXPECT_EQ(node->master_addr, "algo-1");
  EXPECT_EQ(TorchRankEnvironment(*node, 0)["WORLD_SIZE"], "1");
}

TEST(TorchRanks, RefuseAHostOutsideSmHosts) {
  EXPECT_FALSE(TorchNodeFromEnvironment({{"SM_HOSTS", R"(["algo-1"])"}, {"SM_CURRENT_HOST", "algo-9"}}).ok());
  EXPECT_FALSE(TorchNodeFromEnvironment({{"SM_HOSTS", "algo-1"}, {"SM_CURRENT_HOST", "algo-1"}}).ok());
  EXPECT_FALSE(TorchNodeFromEnvironment({{"SM_HOSTS", "[1]"}, {"SM_CURRENT_HOST", "algo-1"}}).ok());
}

TEST(Mpirun, EveryHostWithItsSlotsThroughTheAgent) {
  Argv argv = MpirunArgv({"algo-1", "algo-2"}, 2, "lo", {"-x", "A=1"}, "/l rsh", {"python3", "t.py"});
  ASSERT_GE(argv.size(), 5u);
  EXPECT_EQ((Argv{argv.begin(), argv.begin() + 5}), (Argv{"mpirun", "--host", "algo-1:2,algo-2:2", "-np", "4"}));
  auto mca = [&argv](const std::string& name) {
    for (size_t i = 0; i + 2 < argv.size(); ++i)
      if (argv[i] == "-mca" && argv[i + 1] == name) return argv[i + 2];
    return std::string("(unset)");
  };
  EXPECT_EQ(mca("plm_rsh_agent"), "/l rsh");
  EXPECT_EQ(mca("plm_rsh_no_tree_spawn"), "1");
  EXPECT_EQ(mca("orte_leave_session_attached"), "1");
  EXPECT_EQ(mca("btl_tcp_if_include"), "lo");
  EXPECT_EQ(mca("oob_tcp_if_include"), "lo");
  // The custom options come after the toolkit's (a later option wins), the command last.
  EXPECT_EQ((Argv{argv.end() - 4, argv.end()}), (Argv{"-x", "A=1", "python3", "t.py"}));
}

// SageMaker's own examples pass -mca btl_vader_single_copy_mechanism none, which trainyard also
// sets: mpirun refuses a parameter listed twice, so the user's replaces the default.
TEST(Mpirun, ACustomOptionReplacesTheDefaultOfTheSameName) {
  Argv custom = {"-mca", "btl_vader_single_copy_mechanism", "cma", "--mca", "btl_tcp_if_include", "eth1",
                 "-x", "NCCL_SOCKET_IFNAME=eth1", "--bind-to", "core", "-mca", "plm_rsh_agent", "ssh"};
  Argv argv = MpirunArgv({"algo-1"}, 1, "lo", custom, "/l rsh", {"t"});
  auto values = [&argv](const std::string& name) {
    Argv v;
    for (size_t i = 0; i + 2 < argv.size(); ++i)
      if ((argv[i] == "-mca" || argv[i] == "--mca") && argv[i + 1] == name) v.push_back(argv[i + 2]);
    return v;
  };
  EXPECT_EQ(values("btl_vader_single_copy_mechanism"), Argv{"cma"});
  EXPECT_EQ(values("btl_tcp_if_include"), Argv{"eth1"});
  EXPECT_EQ(values("oob_tcp_if_include"), Argv{"lo"});  // not named: the default stays
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "NCCL_SOCKET_IFNAME=lo"), 0);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "-bind-to"), 0);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "-map-by"), 1);
  // The launch's wiring is kept (the user's follows it, as given).
  EXPECT_EQ(values("plm_rsh_agent"), (Argv{"/l rsh", "ssh"}));
  EXPECT_EQ(values("btl"), Argv{"^openib"});
  Argv shared_name = MpirunArgv({"algo-1", "algo-2"}, 2, "lo", {}, "/l rsh", {"t"}, false);
  EXPECT_NE(std::find(shared_name.begin(), shared_name.end(), "^openib,vader"), shared_name.end());
}

TEST(ShellFrames, RoundTripAndWaitForTheWholeFrame) {
  std::string wire = EncodeFrame(FrameType::kStdout, "hello") + EncodeFrame(FrameType::kExit, "3");
  std::string buffer = wire.substr(0, 7);
  auto none = DecodeFrame(&buffer);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  buffer = wire;
  auto a = DecodeFrame(&buffer);
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->type, FrameType::kStdout);
  EXPECT_EQ((*a)->payload, "hello");
  auto b = DecodeFrame(&buffer);
  ASSERT_TRUE(b.ok() && b->has_value());
  EXPECT_EQ((*b)->type, FrameType::kExit);
  EXPECT_EQ((*b)->payload, "3");
  EXPECT_TRUE(buffer.empty());
}

TEST(ShellFrames, RefuseUnknownTypesAndOversizedFrames) {
  std::string bad = "Z" + std::string(4, '\0');
  EXPECT_FALSE(DecodeFrame(&bad).ok());
  std::string huge = EncodeFrame(FrameType::kStdout, "");
  huge[1] = 0x7f;  // a length of about 2 GiB
  EXPECT_FALSE(DecodeFrame(&huge).ok());
}

TEST(ShellProof, IsHmacSha256) {
  // RFC 4231-style check against a published HMAC-SHA256 value.
  EXPECT_EQ(HmacSha256Hex("key", "The quick brown fox jumps over the lazy dog"),
            "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");
}

TEST(ShellProof, BindsTheSecretTheChallengeAndTheCommand) {
  const std::string proof = ShellProof("s3cret", "nonce-1", "shell", "orted -mca x");
  EXPECT_TRUE(ShellProofValid("s3cret", "nonce-1", "shell", "orted -mca x", proof));
  EXPECT_FALSE(ShellProofValid("other", "nonce-1", "shell", "orted -mca x", proof));
  EXPECT_FALSE(ShellProofValid("s3cret", "nonce-2", "shell", "orted -mca x", proof));  // no replay
  EXPECT_FALSE(ShellProofValid("s3cret", "nonce-1", "shell", "rm -rf /", proof));
  EXPECT_FALSE(ShellProofValid("s3cret", "nonce-1", "presence", "orted -mca x", proof));
  EXPECT_FALSE(ShellProofValid("", "nonce-1", "shell", "x", ShellProof("", "nonce-1", "shell", "x")));
  EXPECT_FALSE(ShellProofValid("s3cret", "nonce-1", "shell", "orted -mca x", ""));
}

TEST(AddressInHosts, FindsEachInstance) {
  const std::string hosts = EtcHosts(3);
  EXPECT_EQ(AddressInHosts(hosts, "algo-2"), "127.0.1.2");
  EXPECT_EQ(AddressInHosts(hosts, "localhost"), "127.0.0.1");
  EXPECT_EQ(AddressInHosts(hosts, "algo-4"), std::nullopt);
  EXPECT_EQ(AddressInHosts("# 10.0.0.1 algo-1\n10.0.0.2 node2 algo-1\n", "algo-1"), "10.0.0.2");
}

}  // namespace
}  // namespace ty::exec::local
