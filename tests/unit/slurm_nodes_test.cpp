// The capacity view from Slurm's own text (exec/slurm/slurm_nodes.h): canned `scontrol show node
// --oneliner` and squeue outputs, as Slurm 22.05 writes them.
#include "exec/slurm/slurm_nodes.h"

#include <gtest/gtest.h>

#include <random>

namespace ty::exec::slurm {
namespace {

// A node line as scontrol writes it, with the fields that matter filled in.
std::string Node(const std::string& name, const std::string& state, int cpus, int cpus_alloc, int mem, int mem_alloc,
                 const std::string& gres = "(null)", const std::string& alloc_tres = "",
                 const std::string& partitions = "main", const std::string& features = "(null)",
                 const std::string& reason = "") {
  std::string l = "NodeName=" + name + " Arch=x86_64 CoresPerSocket=1 CPUAlloc=" + std::to_string(cpus_alloc) +
                  " CPUEfctv=" + std::to_string(cpus) + " CPUTot=" + std::to_string(cpus) +
                  " CPULoad=0.01 AvailableFeatures=" + features + " ActiveFeatures=" + features + " Gres=" + gres +
                  " NodeAddr=127.0.0.1 NodeHostName=" + name + " Version=22.05.8 OS=Linux 6.1.0 #1 SMP " +
                  "RealMemory=" + std::to_string(mem) + " AllocMem=" + std::to_string(mem_alloc) +
                  " FreeMem=N/A Sockets=" + std::to_string(cpus) + " Boards=1 State=" + state +
                  " ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=" + partitions +
                  " BootTime=None SlurmdStartTime=None LastBusyTime=2024-05-01T10:00:00 CfgTRES=cpu=" +
                  std::to_string(cpus) + ",mem=" + std::to_string(mem) + "M,billing=" + std::to_string(cpus) +
                  " AllocTRES=" + alloc_tres + " CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s";
  if (!reason.empty()) l += " Reason=" + reason;
  return l + "\n";
}

InstanceTypeSpec Type(const std::string& name, int vcpus, int64_t memory_mib, int gpus) {
  InstanceTypeSpec t;
  t.name = name;
  t.count = 100;
  t.vcpus = vcpus;
  t.memory_mib = memory_mib;
  t.gpus = gpus;
  return t;
}

CapacityReport Compute(const std::vector<InstanceTypeSpec>& types, const std::string& scontrol,
                       const std::string& squeue = "") {
  std::vector<std::string> problems;
  auto nodes = ParseNodes(scontrol, &problems);
  auto jobs = ParseJobs(squeue, &problems);
  EXPECT_TRUE(problems.empty()) << problems[0];
  return ComputeCapacity(types, "main", nodes, jobs, 1000);
}

TEST(SlurmNodes, ParsesTheFieldsOfAOnelinerNode) {
  std::vector<std::string> problems;
  auto nodes = ParseNodes(Node("gpu1", "MIXED", 16, 4, 64000, 8192, "gpu:a100:4(S:0-1)",
                               "cpu=4,mem=8G,gres/gpu=1,gres/gpu:a100=1", "main,gpu", "a100,ib",
                               "Not responding [slurm@2024-05-01T10:00:00]"),
                          &problems);
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_TRUE(problems.empty());
  const SlurmNode& n = nodes[0];
  EXPECT_EQ(n.name, "gpu1");
  EXPECT_EQ(n.addr, "127.0.0.1");
  EXPECT_EQ(n.state, "MIXED");
  EXPECT_EQ(n.partitions, (std::vector<std::string>{"main", "gpu"}));
  EXPECT_EQ(n.features, (std::vector<std::string>{"a100", "ib"}));
  EXPECT_EQ(n.cpus, 16);
  EXPECT_EQ(n.cpus_alloc, 4);
  EXPECT_EQ(n.memory_mib, 64000);
  EXPECT_EQ(n.memory_alloc_mib, 8192);
  EXPECT_EQ(n.gpus, 4);
  EXPECT_EQ(n.gpus_alloc, 1);  // the untyped count, not also the typed one
  EXPECT_EQ(n.reason, "Not responding [slurm@2024-05-01T10:00:00]");
}

TEST(SlurmNodes, GresListsSumTheirGpusOnly) {
  std::vector<std::string> problems;
  auto nodes = ParseNodes(Node("n1", "IDLE", 8, 0, 1000, 0, "gpu:a100:2(S:0,1),gpu:v100:1,mps:400") +
                              Node("n2", "IDLE", 8, 0, 1000, 0, "gpu:3", "cpu=1,gres/gpu:a100=1,gres/gpu:v100=1"),
                          &problems);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].gpus, 3);
  EXPECT_EQ(nodes[1].gpus, 3);
  EXPECT_EQ(nodes[1].gpus_alloc, 2);  // no untyped entry: the typed ones summed
}

TEST(SlurmNodes, UnusableStatesAndFlagsSayWhy) {
  auto why = [](const std::string& state, const std::string& reason = "") {
    SlurmNode n;
    n.state = state;
    n.reason = reason;
    return UnusableBecause(n);
  };
  EXPECT_EQ(why("IDLE"), "");
  EXPECT_EQ(why("MIXED"), "");
  EXPECT_EQ(why("ALLOCATED"), "");
  EXPECT_EQ(why("IDLE+COMPLETING"), "");
  EXPECT_EQ(why("IDLE+POWERED_DOWN"), "");  // Slurm powers it up for a job
  EXPECT_EQ(why("DOWN*", "Not responding"), "DOWN (Not responding)");
  EXPECT_EQ(why("IDLE+DRAIN", "maintenance"), "DRAIN (maintenance)");
  EXPECT_EQ(why("MIXED+DRAIN"), "DRAIN");  // draining: its jobs run on, nothing new starts
  EXPECT_EQ(why("IDLE*"), "NOT_RESPONDING");
  EXPECT_EQ(why("ALLOCATED+NOT_RESPONDING"), "NOT_RESPONDING");
  EXPECT_EQ(why("IDLE+FAIL"), "FAIL");
  EXPECT_EQ(why("IDLE+MAINT"), "MAINT");
  EXPECT_EQ(why("IDLE+RESERVED"), "RESERVED");
  EXPECT_EQ(why("IDLE+POWERING_DOWN"), "POWERING_DOWN");
  EXPECT_EQ(why("FUTURE"), "FUTURE");
  EXPECT_EQ(why("UNKNOWN"), "UNKNOWN");
  EXPECT_EQ(why("SOMETHING_NEW"), "SOMETHING_NEW");  // an unknown base state: not trusted
  EXPECT_EQ(why("IDLE+SOMETHING_NEW"), "");           // an unknown flag: ignored
  EXPECT_EQ(why(""), "no state");
}

TEST(SlurmNodes, DownAndDrainedNodesOfferNothing) {
  // 3 usable-looking nodes of 8 CPUs; one down, one drained: 1 node * 8/2 = 4 instances.
  auto r = Compute({Type("ml.m5.large", 2, 1024, 0)},
                   Node("n1", "IDLE", 8, 0, 16000, 0) + Node("n2", "DOWN*", 8, 0, 16000, 0, "(null)", "", "main",
                                                             "(null)", "Not responding") +
                       Node("n3", "IDLE+DRAIN", 8, 0, 16000, 0, "(null)", "", "main", "(null)", "disk [root@x]"));
  EXPECT_EQ(r.instances.at("ml.m5.large"), 4);
  EXPECT_EQ(r.instances.at("ml.m5.large#spot"), 4);
  ASSERT_EQ(r.nodes.size(), 3u);
  EXPECT_TRUE(r.nodes[0].usable);
  EXPECT_FALSE(r.nodes[1].usable);
  EXPECT_EQ(r.nodes[1].why, "DOWN (Not responding)");
  EXPECT_EQ(r.nodes[2].why, "DRAIN (disk [root@x])");
  EXPECT_EQ(r.at, 1000);
}

TEST(SlurmNodes, SlicesAreTheTightestOfCpusMemoryAndGpus) {
  // 16 CPUs, 64000 MiB, 4 GPUs free: by CPUs 16/4 = 4, memory 64000/20000 = 3, GPUs 4/1 = 4 -> 3.
  auto r = Compute({Type("ml.g5.xlarge", 4, 20000, 1), Type("ml.g5.2gpu", 2, 1000, 2), Type("ml.cpu", 1, 0, 0)},
                   Node("g1", "IDLE", 16, 0, 64000, 0, "gpu:4"));
  EXPECT_EQ(r.instances.at("ml.g5.xlarge"), 3);
  EXPECT_EQ(r.instances.at("ml.g5.2gpu"), 2);
  EXPECT_EQ(r.instances.at("ml.cpu"), 16);  // no memory asked: CPUs alone limit
}

TEST(SlurmNodes, OutsidersJobsAreSubtractedAndOursAreNot) {
  // Node g1: 16 CPUs, 4 GPUs; allocated 12 CPUs, 3 GPUs: an outsider's job holds 8 CPUs and 2 GPUs,
  // ours 4 CPUs and 1 GPU. Left for trainyard (ours given back): 8 CPUs, 2 GPUs -> 2 instances of 4 CPUs.
  const std::string scontrol =
      Node("g1", "MIXED", 16, 12, 64000, 24000, "gpu:4", "cpu=12,mem=24000M,gres/gpu=3");
  const std::string squeue =
      "101|RUNNING|1|8|16000M|gres:gpu:2|g1||train-llm\n"
      "102|RUNNING|1|4|8000M|gres:gpu:1|g1|trainyard|ty-abc-1\n";
  auto r = Compute({Type("ml.g5.xlarge", 4, 8000, 1)}, scontrol, squeue);
  EXPECT_EQ(r.instances.at("ml.g5.xlarge"), 2);
  EXPECT_EQ(r.nodes[0].cpus_alloc, 12);  // the node list shows Slurm's own figures, everyone's jobs
}

TEST(SlurmNodes, AJobNamedLikeOursWithoutOurCommentIsAnOutsider) {
  const std::string scontrol = Node("n1", "MIXED", 8, 4, 16000, 0);
  auto r = Compute({Type("t", 4, 0, 0)}, scontrol, "7|RUNNING|1|4|0|N/A|n1|someone|ty-lookalike\n");
  EXPECT_EQ(r.instances.at("t"), 1);
  r = Compute({Type("t", 4, 0, 0)}, scontrol, "7|RUNNING|1|4|0|N/A|n1|trainyard|ty-a1\n");
  EXPECT_EQ(r.instances.at("t"), 2);
}

TEST(SlurmNodes, WholeNodesCountOnePerNodeNoOutsiderHolds) {
  InstanceTypeSpec whole = Type("ml.p4d.24xlarge", 8, 32000, 2);
  whole.slurm_whole_node = true;
  const std::string scontrol = Node("w1", "IDLE", 16, 0, 64000, 0, "gpu:2") +
                               Node("w2", "MIXED", 16, 1, 64000, 0, "gpu:2") +       // an outsider's 1 CPU
                               Node("w3", "ALLOCATED", 16, 16, 64000, 0, "gpu:2", "cpu=16,gres/gpu=2") +  // ours
                               Node("w4", "IDLE", 16, 0, 64000, 0, "gpu:1") +        // too few GPUs
                               Node("w5", "MIXED", 16, 2, 64000, 0, "gpu:2");        // no job explains it
  const std::string squeue = "55|RUNNING|1|1|100M|N/A|w2||sleep\n"
                             "56|RUNNING|1|16|0|gres:gpu:1|w3|trainyard|ty-x-1\n";
  auto r = Compute({whole}, scontrol, squeue);
  EXPECT_EQ(r.instances.at("ml.p4d.24xlarge"), 2);  // w1, and w3 which trainyard itself holds
}

TEST(SlurmNodes, PartitionAndFeaturesChooseTheNodes) {
  const std::string scontrol = Node("a", "IDLE", 4, 0, 8000, 0, "(null)", "", "main", "a100,ib") +
                               Node("b", "IDLE", 4, 0, 8000, 0, "(null)", "", "main,debug", "v100") +
                               Node("c", "IDLE", 4, 0, 8000, 0, "(null)", "", "debug", "a100");
  InstanceTypeSpec any_main = Type("main", 4, 0, 0);
  InstanceTypeSpec debug = Type("debug", 4, 0, 0);
  debug.slurm_partition = "debug";
  InstanceTypeSpec both = Type("both", 4, 0, 0);
  both.slurm_constraint = "a100&ib";
  InstanceTypeSpec either = Type("either", 4, 0, 0);
  either.slurm_constraint = "a100|v100";
  InstanceTypeSpec none = Type("none", 4, 0, 0);
  none.slurm_constraint = "h100";
  auto r = Compute({any_main, debug, both, either, none}, scontrol);
  EXPECT_EQ(r.instances.at("main"), 2);    // a, b
  EXPECT_EQ(r.instances.at("debug"), 2);   // b, c
  EXPECT_EQ(r.instances.at("both"), 1);    // a
  EXPECT_EQ(r.instances.at("either"), 2);  // a, b (c is not in main)
  EXPECT_EQ(r.instances.at("none"), 0);
}

TEST(SlurmNodes, AJobOverSeveralNodesHoldsItsShareOfEach) {
  // 2 nodes of 8 CPUs, all 16 allocated to one outsider's job over both: nothing left.
  const std::string scontrol = Node("n1", "ALLOCATED", 8, 8, 8000, 0) + Node("n2", "ALLOCATED", 8, 8, 8000, 0) +
                               Node("n3", "ALLOCATED", 8, 8, 8000, 0);
  auto r = Compute({Type("t", 2, 0, 0)}, scontrol,
                   "9|RUNNING|2|16|0|N/A|n[1-2]||mpi\n"
                   "10|RUNNING|1|8|0|N/A|n3|trainyard|ty-q-1\n");
  EXPECT_EQ(r.instances.at("t"), 4);  // n3 only: trainyard's own 8 CPUs, given back
}

TEST(SlurmNodes, HostlistsExpandAsSlurmWritesThem) {
  std::vector<std::string> names;
  ASSERT_TRUE(ExpandHostlist("n[1-3,07],gpu1,r[1-2]c[1-2]", &names));
  EXPECT_EQ(names, (std::vector<std::string>{"n1", "n2", "n3", "n07", "gpu1", "r1c1", "r1c2", "r2c1", "r2c2"}));
  names.clear();
  ASSERT_TRUE(ExpandHostlist("node[008-010]", &names));
  EXPECT_EQ(names, (std::vector<std::string>{"node008", "node009", "node010"}));
  for (const char* bad : {"n[1-", "n[3-1]", "n]1[", "n[]", "n[a-b]", "n[1-2]]", ",", "n[[1]]", "n[0-99999999999]"}) {
    names.clear();
    EXPECT_FALSE(ExpandHostlist(bad, &names)) << bad;
    EXPECT_LE(names.size(), kMaxHostlistNames) << bad;
  }
}

TEST(SlurmNodes, GarbageLinesAreSkippedAndNamed) {
  std::vector<std::string> problems;
  auto nodes = ParseNodes("garbage without pairs\n=\nNodeName=x State=IDLE CPUTot=lots CPUAlloc=0 RealMemory=1\n\n"
                          "NodeName=y State=IDLE CPUTot=99999999999999999999999 CPUAlloc=-1 RealMemory=1G\n",
                          &problems);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(problems.size(), 4u);
  for (const auto& n : nodes) EXPECT_NE(UnusableBecause(n), "") << n.name;  // unparsed figures: not offered
  auto jobs = ParseJobs("1|RUNNING|1\n|RUNNING|1|1|0|N/A|n1||x\n2|RUNNING|x|1|0|N/A|n1||x\n"
                        "3|RUNNING|1|4|0|N/A|n[1-|trainyard|ty-1\n4|RUNNING|1|4|0|N/A|n1|c|name|with|bars\n",
                        &problems);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].name, "name|with|bars");
  EXPECT_EQ(problems.size(), 8u);
  auto r = ComputeCapacity({Type("t", 1, 1, 0)}, "main", nodes, jobs, 0, problems);
  EXPECT_EQ(r.problem.find("scontrol line 1: no NodeName"), 0u) << r.problem;
  EXPECT_NE(r.problem.find("and 5 more"), std::string::npos) << r.problem;
}

TEST(SlurmNodes, RandomBytesNeverCrashAndNeverOfferNegatives) {
  std::mt19937 rng(18);
  const std::string alphabet = "NodeName=State=IDLE+DRAIN*CPUTot=CPUAlloc=RealMemory=Gres=gpu:(S)|[]-,0123456789\n ";
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int len = static_cast<int>(rng() % 300);
    for (int i = 0; i < len; ++i)
      text.push_back(rng() % 8 == 0 ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()]);
    std::vector<std::string> problems;
    auto nodes = ParseNodes(text, &problems);
    auto jobs = ParseJobs(text, &problems);
    auto r = ComputeCapacity({Type("t", 1, 1, 0)}, "", nodes, jobs, 0);
    EXPECT_GE(r.instances.at("t"), 0);
    EXPECT_LE(problems.size(), 20u);
  }
}

}  // namespace
}  // namespace ty::exec::slurm
