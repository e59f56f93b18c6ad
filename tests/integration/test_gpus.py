"""GPUs per instance on the local executor (docs/gpus.md), without a GPU: an inventory of four
stand-in device nodes, and jobs of 1 and 2 GPUs and a 2-instance job. No two running instances
share an index, each sees only its own (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, the device
nodes in its sandbox), SM_NUM_GPUS agrees, and an instance that finds no GPU free does not start."""
import glob
import json
import os
import shutil
import stat
import tempfile
import time
import unittest

from harness import ServerTest

# Each instance reports what it sees, says it is up, and holds its GPUs until the test releases
# it (a file `release` beside the reports), or 60 s.
REPORT = r'''
import glob, json, os, sys, time
out = sys.argv[sys.argv.index("--out") + 1]
name = os.environ["TRAINING_JOB_NAME"] + "." + os.environ["SM_CURRENT_HOST"]
report = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "SM_NUM_GPUS")}
report["nodes"] = sorted(glob.glob("/dev/nvidia*"))
with open(os.path.join(out, name + ".json"), "w") as f:
    json.dump(report, f)
open(os.path.join(out, name + ".up"), "w").close()
deadline = time.time() + 60
while not os.path.exists(os.path.join(out, "release")) and time.time() < deadline:
    time.sleep(0.05)
'''


class GpuInventoryTest(ServerTest):
    sandboxed = True  # root: the default sandbox (bubblewrap)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if os.geteuid() != 0:
            raise unittest.SkipTest("stand-in GPU device nodes need root (mknod)")
        # Not under /tmp, which the supervisor replaces with its own while it builds a sandbox.
        os.makedirs("/var/tmp", exist_ok=True)
        cls.dev_dir = tempfile.mkdtemp(prefix="trainyard-gpus-", dir="/var/tmp")
        os.chmod(cls.dev_dir, 0o755)
        # Character devices with /dev/null's numbers: opening one is harmless.
        for name in ["nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl"]:
            os.mknod(os.path.join(cls.dev_dir, name), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        cls.server_config = f"""
[executor]
gpus = [0, 1, 2, 3]
gpu_device_dir = "{cls.dev_dir}"

[[instance_types]]
name = "ml.g5.xlarge"
count = 4
vcpus = 1
gpus = 1

[[instance_types]]
name = "ml.g5.2xlarge"
count = 2
vcpus = 1
gpus = 2

[[instance_types]]
name = "ml.m5.large"
count = 2
vcpus = 1
"""

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dev_dir, ignore_errors=True)
        super().tearDownClass()

    def start(self, name, instance_type, count, out):
        p = self.code_job(name, {"train.py": REPORT})
        p["HyperParameters"].update({"out": out})
        p["ResourceConfig"].update({"InstanceType": instance_type, "InstanceCount": count})
        self.sm.create_training_job(**p)

    def outdir(self, name):
        out = os.path.join(self.work_dir, name)
        os.makedirs(out)
        os.chmod(out, 0o1777)  # jobs run as an unprivileged user
        return out

    def reports(self, out):
        found = {}
        for path in glob.glob(os.path.join(out, "*.json")):
            with open(path) as f:
                found[os.path.basename(path)[:-5]] = json.load(f)
        return found

    def check_sees_only_its_own(self, who, r):
        visible = r["CUDA_VISIBLE_DEVICES"]
        indices = [int(i) for i in visible.split(",")] if visible else []
        self.assertEqual(len(indices), int(r["SM_NUM_GPUS"]), who)
        self.assertEqual(r["NVIDIA_VISIBLE_DEVICES"], visible, who)
        if self.sandboxed:
            # In its sandbox: its own GPUs' nodes and the control node, nothing of the others.
            want = sorted([f"/dev/nvidia{i}" for i in indices] + (["/dev/nvidiactl"] if indices else []))
            self.assertEqual(r["nodes"], want, who)
        return indices

    def test_no_two_running_instances_share_a_gpu(self):
        out = self.outdir("together")
        # 1 + 2 + 1 GPUs at once: the whole inventory.
        self.start("one-a", "ml.g5.xlarge", 1, out)
        self.start("two", "ml.g5.2xlarge", 1, out)
        self.start("one-b", "ml.g5.xlarge", 1, out)
        deadline = time.time() + 60
        while len(glob.glob(os.path.join(out, "*.up"))) < 3:
            self.assertLess(time.time(), deadline, "the three jobs did not run together")
            time.sleep(0.05)
        # Every GPU is held now: a fourth GPU instance does not start.
        more_out = self.outdir("more")
        open(os.path.join(more_out, "release"), "w").close()
        self.start("one-more", "ml.g5.xlarge", 1, more_out)
        more = self.wait_training("one-more", timeout=60)
        self.assertEqual(more["TrainingJobStatus"], "Failed")
        self.assertIn("CapacityError", more["FailureReason"])
        self.assertIn("0 of the host's 4 are free", more["FailureReason"])
        open(os.path.join(out, "release"), "w").close()
        for name in ("one-a", "two", "one-b"):
            tj = self.wait_training(name, timeout=120)
            self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        held = []
        for who, r in self.reports(out).items():
            held += self.check_sees_only_its_own(who, r)
        self.assertEqual(sorted(held), [0, 1, 2, 3])

        # Released at their end: a 2-instance job gets two of them, one each, and a CPU instance none.
        out2 = self.outdir("after")
        open(os.path.join(out2, "release"), "w").close()
        self.start("pair", "ml.g5.xlarge", 2, out2)
        self.start("cpu", "ml.m5.large", 1, out2)
        for name in ("pair", "cpu"):
            tj = self.wait_training(name, timeout=120)
            self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        reports = self.reports(out2)
        pair = [self.check_sees_only_its_own(f"pair.algo-{n}", reports[f"pair.algo-{n}"]) for n in (1, 2)]
        self.assertEqual(len(pair[0]), 1)
        self.assertEqual(len(pair[1]), 1)
        self.assertNotEqual(pair[0], pair[1])
        cpu = reports["cpu.algo-1"]
        self.assertEqual((cpu["CUDA_VISIBLE_DEVICES"], cpu["NVIDIA_VISIBLE_DEVICES"], cpu["SM_NUM_GPUS"]), (None, None, "0"))
        if self.sandboxed:
            self.assertEqual(cpu["nodes"], [])


if __name__ == "__main__":
    unittest.main()
