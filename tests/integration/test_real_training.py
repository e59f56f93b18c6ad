"""Real training through the distributed launches (docs/distributed.md): PyTorch DDP over gloo
with the torch-distributed launch, and an mpi4py allreduce through mpirun with SageMaker's own
example options, on 2 instances x 2 processes, in the sandbox and without it. Each fails if the
ranks end with different parameters or a different sum.

Needs Debian's python3-torch and python3-mpi4py (scripts/install-deps installs them)."""
import glob
import json
import os
import subprocess
import sys
import time
import unittest

from harness import ServerTest

CONFIG = """
[[instance_types]]
name = "ml.m5.large"
count = 2
vcpus = 1

[[instance_types]]
name = "ml.g5.2xlarge"
count = 2
vcpus = 1
gpus = 2
"""

# Debian's interpreter, where python3-torch and python3-mpi4py are, ahead of any other on PATH.
DEBIAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

# A linear model on generated data: every rank draws its own batches, DDP averages the gradients,
# so every rank must end with the same parameters. The model's start is seeded alike everywhere
# (DDP also broadcasts rank 0's).
DDP = r'''
import hashlib, json, os, sys
import torch
import torch.distributed as dist
out = sys.argv[sys.argv.index("--out") + 1]
dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the launch
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
data = torch.Generator().manual_seed(1000 + rank)
w_true = torch.arange(8, dtype=torch.float32)
losses = []
for step in range(80):
    x = torch.randn(32, 8, generator=data)
    y = x @ w_true + 0.5
    loss = torch.nn.functional.mse_loss(ddp(x).squeeze(1), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if rank == 0 and step % 10 == 0:
        print(f"step={step} loss={loss.item():.6f}", flush=True)
params = torch.cat([p.detach().flatten() for p in model.parameters()])
with open(os.path.join(out, f"ddp-{rank}.json"), "w") as f:
    json.dump({"rank": rank, "world": world, "losses": losses, "params": params.tolist(),
               "digest": hashlib.sha256(params.numpy().tobytes()).hexdigest(),
               "host": os.environ["SM_CURRENT_HOST"]}, f)
dist.destroy_process_group()
'''

# An allreduce of each rank's number, and of a vector, with mpi4py.
MPI = r'''
import array, json, os, sys
from mpi4py import MPI
out = sys.argv[sys.argv.index("--out") + 1]
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
send = array.array("d", [rank, 1.0, rank * rank])
recv = array.array("d", [0.0, 0.0, 0.0])
comm.Allreduce(send, recv, op=MPI.SUM)
with open(os.path.join(out, f"mpi-{rank}.json"), "w") as f:
    json.dump({"rank": rank, "size": size, "total": total, "vector": list(recv),
               "host": os.environ["SM_CURRENT_HOST"], "RANK": os.environ.get("RANK")}, f)
'''


# The DDP script on GPUs: NCCL, one GPU per rank (LOCAL_RANK among the instance's own GPUs).
DDP_NCCL = (DDP.replace('dist.init_process_group("gloo")', 'dist.init_process_group("nccl")')
            .replace("ddp = torch.nn.parallel.DistributedDataParallel(model)",
                     "local = int(os.environ['LOCAL_RANK'])\ntorch.cuda.set_device(local)\nmodel = model.cuda(local)\n"
                     "ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])")
            .replace("w_true = torch.arange(8, dtype=torch.float32)",
                     "w_true = torch.arange(8, dtype=torch.float32).cuda(local)")
            .replace("    x = torch.randn(32, 8, generator=data)", "    x = torch.randn(32, 8, generator=data).cuda(local)")
            .replace("params.numpy()", "params.cpu().numpy()")
            .replace('"params": params.tolist()', '"params": params.cpu().tolist(), '
                     '"visible": os.environ.get("CUDA_VISIBLE_DEVICES")'))


def gpus_for_torch():
    """How many GPUs Debian's PyTorch can use here (0: none, or a build without CUDA)."""
    p = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"],
                       capture_output=True, text=True)
    return int(p.stdout.strip() or 0) if p.returncode == 0 else 0


def debian_has(module):
    return subprocess.run(["/usr/bin/python3", "-c", f"import {module}"], capture_output=True).returncode == 0


class RealTrainingTest(ServerTest):
    server_config = CONFIG

    def job(self, name, program, hyperparameters, instance_type):
        out = os.path.join(self.work_dir, name)
        os.makedirs(out)
        os.chmod(out, 0o1777)  # jobs run as an unprivileged user
        p = self.code_job(name, {"train.py": program})
        p["HyperParameters"].update(hyperparameters)
        p["HyperParameters"]["out"] = out
        p["ResourceConfig"].update({"InstanceType": instance_type, "InstanceCount": 2})
        p["Environment"] = {"PATH": DEBIAN_PATH}
        return p, out

    def instance_logs(self, name, tail=40):
        """The job's instance logs from the Logs API (the last `tail` lines of each stream)."""
        logs = self.server.client("logs")
        text = []
        streams = logs.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=name + "/")
        for s in streams.get("logStreams", []):
            events = logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=s["logStreamName"],
                                         startFromHead=True)["events"]
            text.append(f"--- {s['logStreamName']}\n" + "\n".join(e["message"] for e in events[-tail:]))
        return "\n".join(text)

    def reports(self, out, prefix):
        found = {}
        for path in glob.glob(os.path.join(out, f"{prefix}-*.json")):
            with open(path) as f:
                r = json.load(f)
            found[r["rank"]] = r
        return found

    def test_pytorch_ddp_over_two_instances_trains_one_model(self):
        if not debian_has("torch"):
            self.skipTest("python3-torch is not installed (scripts/install-deps installs it)")
        p, out = self.job("ddp", DDP, {"sagemaker_torch_distributed_enabled": "true"}, "ml.g5.2xlarge")
        self.sm.create_training_job(**p)
        tj = self.wait_training("ddp", timeout=300)
        if tj["TrainingJobStatus"] != "Completed":
            self.fail(f"{tj.get('FailureReason')}\n{self.instance_logs('ddp')}")
        reports = self.reports(out, "ddp")
        self.assertEqual(sorted(reports), [0, 1, 2, 3])
        self.assertEqual(sorted(r["host"] for r in reports.values()), ["algo-1", "algo-1", "algo-2", "algo-2"])
        for rank, r in reports.items():
            self.assertEqual(r["world"], 4)
            # Every rank holds the very same parameters: DDP averaged every step's gradients.
            self.assertEqual(r["digest"], reports[0]["digest"], f"rank {rank}: {r['params']} vs {reports[0]['params']}")
            losses = r["losses"]
            self.assertLess(sum(losses[-10:]) / 10, sum(losses[:10]) / 10 / 20, f"rank {rank}: the loss did not fall")
        # The model learned the generating weights (w = 0..7, b = 0.5).
        for got, want in zip(reports[0]["params"], [float(i) for i in range(8)] + [0.5]):
            self.assertAlmostEqual(got, want, delta=0.25)

    def test_pytorch_ddp_with_nccl_one_gpu_per_rank(self):
        # 2 instances x 2 GPUs: needs 4 GPUs that PyTorch can use.
        if gpus_for_torch() < 4:
            self.skipTest("needs 4 GPUs that PyTorch can use: none here, or Debian's python3-torch (built without "
                          "CUDA); run it on a GPU machine with a CUDA build of PyTorch")
        p, out = self.job("ddp-nccl", DDP_NCCL, {"sagemaker_torch_distributed_enabled": "true"}, "ml.g5.2xlarge")
        self.sm.create_training_job(**p)
        tj = self.wait_training("ddp-nccl", timeout=600)
        if tj["TrainingJobStatus"] != "Completed":
            self.fail(f"{tj.get('FailureReason')}\n{self.instance_logs('ddp-nccl')}")
        reports = self.reports(out, "ddp")
        self.assertEqual(sorted(reports), [0, 1, 2, 3])
        for r in reports.values():
            self.assertEqual(r["digest"], reports[0]["digest"])
        # The two instances were given different GPUs.
        by_host = {r["host"]: r["visible"] for r in reports.values()}
        self.assertEqual(len(set(by_host.values())), 2, by_host)

    def test_mpi4py_allreduce_over_two_instances_with_sagemakers_options(self):
        if not debian_has("mpi4py"):
            self.skipTest("python3-mpi4py is not installed (scripts/install-deps installs it)")
        p, out = self.job("mpi4py", MPI, {
            "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
            # As in SageMaker's examples: one of these names a parameter trainyard also sets.
            "sagemaker_mpi_custom_mpi_options": "-verbose -x NCCL_DEBUG=INFO -mca btl_vader_single_copy_mechanism none"},
            "ml.m5.large")
        self.sm.create_training_job(**p)
        tj = self.wait_training("mpi4py", timeout=300)
        if tj["TrainingJobStatus"] != "Completed":
            self.fail(f"{tj.get('FailureReason')}\n{self.instance_logs('mpi4py')}")
        reports = self.reports(out, "mpi")
        self.assertEqual(sorted(reports), [0, 1, 2, 3])
        self.assertEqual(sorted(r["host"] for r in reports.values()), ["algo-1", "algo-1", "algo-2", "algo-2"])
        for r in reports.values():
            self.assertEqual(r["size"], 4)
            self.assertEqual(r["total"], 1 + 2 + 3 + 4)
            self.assertEqual(r["vector"], [0 + 1 + 2 + 3, 4, 0 + 1 + 4 + 9])
            self.assertIsNone(r["RANK"])


# Deterministic training that checkpoints every step with torch.save (to /opt/ml/checkpoints, the
# SageMaker local path) and resumes from the checkpoint it finds. A step's data depends on the
# step alone, so a run interrupted and resumed must end where an uninterrupted one ends.
RESUMABLE = r'''
import json, os, signal, sys, time
import torch
out = sys.argv[sys.argv.index("--out") + 1]
ckpt_dir = os.path.join(os.environ.get("TRAINYARD_OPT_ML", "/opt/ml"), "checkpoints")
ckpt = os.path.join(ckpt_dir, "model.pt")
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # every step is saved already
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
step, losses = 0, []
if os.path.exists(ckpt):
    state = torch.load(ckpt)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    step, losses = state["step"], state["losses"]
    print(f"resumed at step {step}", flush=True)
w_true = torch.linspace(-1, 1, 8)
while step < 120:
    g = torch.Generator().manual_seed(step)
    x = torch.randn(64, 8, generator=g)
    y = torch.tanh(x @ w_true).unsqueeze(1)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    losses.append(loss.item())
    print(f"step={step} loss={loss.item():.8f}", flush=True)
    os.makedirs(ckpt_dir, exist_ok=True)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "losses": losses}, ckpt + ".tmp")
    os.replace(ckpt + ".tmp", ckpt)
    with open(os.path.join(out, "step.tmp"), "w") as f:
        f.write(str(step))
    os.replace(os.path.join(out, "step.tmp"), os.path.join(out, "step"))
    time.sleep(0.05)
params = torch.cat([p.detach().flatten() for p in model.parameters()])
with open(os.path.join(out, "final.json"), "w") as f:
    json.dump({"params": params.tolist(), "losses": losses}, f)
'''

RESUME_CONFIG = """
[executor]
stop_grace_seconds = 5
spot_notice_seconds = 5

[object_store]
checkpoint_sync_seconds = 1

[[instance_types]]
name = "ml.m5.xlarge"
count = 2
spot_count = 2
vcpus = 1
"""


class ExactResumeTest(RealTrainingTest):
    """A PyTorch job interrupted as a managed spot job resumes from its torch.save checkpoint and
    ends with the parameters of an uninterrupted run, to 1e-6."""
    server_config = RESUME_CONFIG
    resume_type = "ml.m5.xlarge"

    def run_resumable(self, name, interrupt_at=None):
        p, out = self.job(name, RESUMABLE, {}, self.resume_type)
        p["ResourceConfig"]["InstanceCount"] = 1
        p["EnableManagedSpotTraining"] = True
        p["StoppingCondition"] = {"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 1200}
        p["CheckpointConfig"] = {"S3Uri": f"s3://trainyard-test/ckpt/{name}"}
        p["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]
        self.sm.create_training_job(**p)
        if interrupt_at is not None:
            deadline = time.time() + 120
            while True:
                try:
                    with open(os.path.join(out, "step")) as f:
                        if int(f.read() or 0) >= interrupt_at:
                            break
                except (OSError, ValueError):
                    pass
                self.assertLess(time.time(), deadline, f"{name} never reached step {interrupt_at}")
                time.sleep(0.05)
            self.server.admin("admin/interrupt", {"TrainingJobName": name})
        tj = self.wait_training(name, timeout=300)
        if tj["TrainingJobStatus"] != "Completed":
            self.fail(f"{name}: {tj.get('FailureReason')}\n{self.instance_logs(name)}")
        with open(os.path.join(out, "final.json")) as f:
            return tj, json.load(f)

    # Not the distributed tests again.
    test_pytorch_ddp_over_two_instances_trains_one_model = None
    test_mpi4py_allreduce_over_two_instances_with_sagemakers_options = None
    test_pytorch_ddp_with_nccl_one_gpu_per_rank = None

    def test_an_interrupted_pytorch_job_resumes_exactly(self):
        if not debian_has("torch"):
            self.skipTest("python3-torch is not installed (scripts/install-deps installs it)")
        _, reference = self.run_resumable("straight")
        tj, resumed = self.run_resumable("interrupted", interrupt_at=40)
        statuses = [t["Status"] for t in tj["SecondaryStatusTransitions"]]
        self.assertIn("Interrupted", statuses)
        self.assertIn("resumed at step", self.instance_logs("interrupted", tail=1000))
        self.assertEqual(len(resumed["params"]), len(reference["params"]))
        for got, want in zip(resumed["params"], reference["params"]):
            self.assertAlmostEqual(got, want, delta=1e-6)
        # One curve: a loss per step, the same as the uninterrupted run's, and falling.
        self.assertEqual(len(resumed["losses"]), 120)
        for got, want in zip(resumed["losses"], reference["losses"]):
            self.assertAlmostEqual(got, want, delta=1e-6)
        self.assertLess(sum(resumed["losses"][-10:]), sum(resumed["losses"][:10]) / 5)


class ExactResumeWithoutSandboxTest(ExactResumeTest):
    server_config = RESUME_CONFIG.replace("[executor]\n", '[executor]\nsandbox = "none"\n')


class PyTorchExampleTest(ServerTest):
    """examples/pytorch/run.py, as docs/distributed.md and the quick start run it, against a server
    with the embedded defaults: script mode, DDP over two instances, and a tuning job over it."""

    def test_the_pytorch_example_runs_as_documented(self):
        if not debian_has("torch"):
            self.skipTest("python3-torch is not installed (scripts/install-deps installs it)")
        key, secret = self.server.credentials()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION="us-east-1")
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "pytorch", "run.py")
        p = subprocess.run([sys.executable, script, "--endpoint-url", self.server.url, "--epochs", "8"],
                           env=env, capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for line in ("pytorch-single: Completed", "pytorch-ddp: Completed", "pytorch-tune: Completed, best pytorch-tune-"):
            self.assertIn(line, p.stdout)
        self.assertIn("epoch=8 loss=", p.stdout)


class RealTrainingWithoutSandboxTest(RealTrainingTest):
    """The same with executor.sandbox = "none"."""
    server_config = CONFIG + '\n[executor]\nsandbox = "none"\n'


if __name__ == "__main__":
    unittest.main()
