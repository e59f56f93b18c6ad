// What the Slurm executor asks sbatch for (exec/slurm/slurm_executor.h): an attempt's own job and
// a held allocation (docs/slurm.md, "Held allocations").
#include "exec/slurm/slurm_executor.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace ty::exec {
namespace {

AttemptSpec Spec(int vcpus, int64_t memory_mib, int gpus) {
  AttemptSpec s;
  s.attempt_id = "job-1-0";
  s.instance_type = "ml.g5.xlarge";
  s.instance_count = 1;
  s.vcpus = vcpus;
  s.memory_mib = memory_mib;
  s.gpus = gpus;
  s.max_runtime_seconds = 600;
  s.stop_grace_seconds = 30;
  return s;
}

bool Has(const std::vector<std::string>& argv, const std::string& arg) {
  return std::find(argv.begin(), argv.end(), arg) != argv.end();
}

TEST(SlurmPlan, AHeldAllocationHasTheAttemptsShapeAndNoTimeLimitOfItsOwn) {
  SlurmConfig slurm;
  slurm.partition = "gpu";
  slurm.account = "ml";
  slurm.sbatch_args = {"--qos=normal"};
  slurm.hold_sbatch_args = {"--qos=hold"};
  slurm.hold_keep_alive_seconds = 20;
  const AttemptSpec spec = Spec(4, 16384, 1);
  const auto shape = SlurmResourceArgs(spec, nullptr, slurm);
  const SbatchPlan attempt = PlanSbatch(spec, nullptr, slurm, "/data/attempts/job-1-0", "/opt/ty/trainyard-supervisor");
  const SbatchPlan hold = PlanHold("ty-hold-0badf00d-1", shape, slurm, "/data/slurm/holds/1", "/data/attempts",
                                   "/opt/ty/trainyard-supervisor");
  // The same resources as the attempt's own job would ask for.
  for (const std::string& a : shape) {
    EXPECT_TRUE(Has(attempt.argv, a)) << a;
    EXPECT_TRUE(Has(hold.argv, a)) << a;
  }
  for (const char* a : {"--partition=gpu", "--account=ml", "--cpus-per-task=4", "--mem=16384M", "--gres=gpu:1"})
    EXPECT_TRUE(Has(shape, a)) << a;
  EXPECT_TRUE(Has(hold.argv, "--job-name=ty-hold-0badf00d-1"));
  EXPECT_TRUE(Has(hold.argv, "--comment=trainyard"));  // counted as trainyard's in the capacity view
  EXPECT_TRUE(Has(hold.argv, "--nodes=1"));
  EXPECT_TRUE(Has(hold.argv, "--chdir=/data/slurm/holds/1"));
  EXPECT_TRUE(std::any_of(attempt.argv.begin(), attempt.argv.end(), [](const auto& a) { return a.rfind("--time=", 0) == 0; }));
  EXPECT_FALSE(std::any_of(hold.argv.begin(), hold.argv.end(), [](const auto& a) { return a.rfind("--time=", 0) == 0; }));
  // The configured arguments, then the holds' own, then the script.
  const size_t n = hold.argv.size();
  ASSERT_GE(n, 3u);
  EXPECT_EQ(hold.argv[n - 3], "--qos=normal");
  EXPECT_EQ(hold.argv[n - 2], "--qos=hold");
  EXPECT_EQ(hold.argv[n - 1], "/data/slurm/holds/1/batch.sh");
  // Its holder gives up by itself a minute after the server would have given it back.
  EXPECT_NE(hold.script.find("exec '/opt/ty/trainyard-supervisor' --held '/data/slurm/holds/1' '/data/attempts' 80\n"),
            std::string::npos)
      << hold.script;
}

TEST(SlurmPlan, ShapesDifferWithWhatTheInstanceAsksFor) {
  SlurmConfig slurm;
  EXPECT_EQ(SlurmResourceArgs(Spec(1, 512, 0), nullptr, slurm), SlurmResourceArgs(Spec(1, 512, 0), nullptr, slurm));
  EXPECT_NE(SlurmResourceArgs(Spec(1, 512, 0), nullptr, slurm), SlurmResourceArgs(Spec(2, 512, 0), nullptr, slurm));
  EXPECT_NE(SlurmResourceArgs(Spec(1, 512, 0), nullptr, slurm), SlurmResourceArgs(Spec(1, 512, 1), nullptr, slurm));
  InstanceTypeSpec whole;
  whole.name = "ml.p4d.24xlarge";
  whole.slurm_whole_node = true;
  whole.slurm_constraint = "a100";
  const auto shape = SlurmResourceArgs(Spec(96, 1 << 20, 8), &whole, slurm);
  EXPECT_TRUE(Has(shape, "--exclusive"));
  EXPECT_TRUE(Has(shape, "--constraint=a100"));
  EXPECT_FALSE(std::any_of(shape.begin(), shape.end(), [](const auto& a) { return a.rfind("--cpus-per-task", 0) == 0; }));
}

}  // namespace
}  // namespace ty::exec
