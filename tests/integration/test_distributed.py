"""Distributed launch (docs/distributed.md), through boto3: the hyperparameters an estimator's
`distribution` sets start a torch-distributed launcher or mpirun in every instance, and the ranks
find each other by the names in SM_HOSTS and MASTER_ADDR/MASTER_PORT alone."""
import glob
import json
import os
import socket
import time
import unittest

from botocore.exceptions import ClientError

from harness import ServerTest

# ml.g5.2xlarge declares two GPUs: SM_NUM_GPUS comes from the instance type, so the torch launcher
# starts two ranks per instance on a host without a GPU.
CONFIG = """
[[instance_types]]
name = "ml.m5.large"
count = 4
vcpus = 1

[[instance_types]]
name = "ml.g5.2xlarge"
count = 4
vcpus = 1
gpus = 2
"""

# Every rank reports what the launcher told it, then takes part in a sum over TCP: rank 0 listens
# on MASTER_ADDR:MASTER_PORT, the others send it RANK + 1 and read the total back.
ALLREDUCE = r'''
import json, os, socket, sys, time
out = sys.argv[sys.argv.index("--out") + 1]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if rank == 0:
    srv = socket.create_server((addr, port))
    conns = [srv.accept()[0] for _ in range(world - 1)]
    total = 1 + sum(int(c.makefile().readline()) for c in conns)
    for c in conns:
        c.sendall(f"{total}\n".encode())
else:
    deadline = time.time() + 60
    while True:
        try:
            c = socket.create_connection((addr, port))
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    c.sendall(f"{rank + 1}\n".encode())
    total = int(c.makefile().readline())
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR",
        "MASTER_PORT", "SM_CURRENT_HOST", "SM_HOSTS", "SM_NETWORK_INTERFACE_NAME"]
report = {k: os.environ.get(k) for k in keys}
report["total"] = total
report["elastic"] = sorted(k for k in os.environ if k.startswith("TORCHELASTIC"))
with open(os.path.join(out, f"rank-{rank}.json"), "w") as f:
    json.dump(report, f)
'''

# Local rank 1 fails with code 3; local rank 0 waits for its SIGTERM and notes it.
FAILING = r'''
import os, signal, sys, time
out = sys.argv[sys.argv.index("--out") + 1]
if os.environ["LOCAL_RANK"] == "1":
    time.sleep(0.5)
    sys.exit(3)
def on_term(sig, frame):
    with open(os.path.join(out, "termed"), "a") as f:
        f.write("rank 0\n")
    sys.exit(143)
signal.signal(signal.SIGTERM, on_term)
while True:
    time.sleep(0.05)
'''

# Every rank notes each SIGTERM it gets, then ends.
STOPPABLE = r'''
import os, signal, sys, time
out = sys.argv[sys.argv.index("--out") + 1]
rank = os.environ["RANK"]
def on_term(sig, frame):
    with open(os.path.join(out, f"term-{rank}"), "a") as f:
        f.write("SIGTERM\n")
    time.sleep(0.5)  # a second SIGTERM would be noted in this time
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
open(os.path.join(out, f"up-{rank}"), "w").close()
while True:
    time.sleep(0.05)
'''

# Every MPI rank reports its place and host; rank 0 also knocks on algo-2's remote shell without
# the secret.
MPI_RANK = r'''
import json, os, socket, struct, sys
out = sys.argv[sys.argv.index("--out") + 1]
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
report = {"rank": rank, "size": int(os.environ["OMPI_COMM_WORLD_SIZE"]),
          "local_rank": int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]),
          "host": socket.gethostname(), "option": os.environ.get("CUSTOM_OPTION"),
          "sm_current_host": os.environ.get("SM_CURRENT_HOST"),
          "instance_rank": [os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "NODE_RANK")]}
secret = os.stat(os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "trainyard-shell-secret"))
report["secret"] = [oct(secret.st_mode & 0o777), secret.st_uid == os.getuid()]
if rank == 0:
    algo2 = "algo-2"  # without the sandbox the name is in the attempt's hosts file only
    for line in open(os.environ.get("TRAINYARD_HOSTS_FILE", "/dev/null")):
        if line.split()[1:] == ["algo-2"]:
            algo2 = line.split()[0]
    s = socket.create_connection((algo2, int(os.environ["TRAINYARD_MPI_SHELL_PORT"])))
    f = s.makefile("rb")
    kind, n = struct.unpack(">cI", f.read(5)); f.read(n)
    req = json.dumps({"kind": "shell", "command": "touch /tmp/owned", "proof": "0" * 64}).encode()
    s.sendall(struct.pack(">cI", b"Q", len(req)) + req)
    kind, n = struct.unpack(">cI", f.read(5))
    report["unauthenticated"] = kind.decode() + ":" + f.read(n).decode()
with open(os.path.join(out, f"mpi-{rank}.json"), "w") as f:
    json.dump(report, f)
'''


# An MPI rank that notes SIGTERM and ends.
MPI_STOPPABLE = STOPPABLE.replace('os.environ["RANK"]', 'os.environ["OMPI_COMM_WORLD_RANK"]')


class DistributedTest(ServerTest):
    server_config = CONFIG
    sandboxed = True

    def job(self, name, program, hyperparameters, instance_type="ml.m5.large", count=2):
        out = os.path.join(self.work_dir, name)
        os.makedirs(out)
        os.chmod(out, 0o1777)  # jobs run as an unprivileged user
        p = self.code_job(name, {"train.py": program})
        p["HyperParameters"].update(hyperparameters)
        p["HyperParameters"]["out"] = out
        p["ResourceConfig"].update({"InstanceType": instance_type, "InstanceCount": count})
        return p, out

    def test_torch_distributed_ranks_meet_at_master_addr(self):
        # 2 instances x 2 GPUs declared: ranks 0..3, two on each host, one sum over TCP.
        p, out = self.job("torch-ranks", ALLREDUCE, {"sagemaker_torch_distributed_enabled": "true"},
                          instance_type="ml.g5.2xlarge")
        self.sm.create_training_job(**p)
        tj = self.wait_training("torch-ranks", timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        reports = {}
        for path in glob.glob(os.path.join(out, "rank-*.json")):
            with open(path) as f:
                r = json.load(f)
            reports[int(r["RANK"])] = r
        self.assertEqual(sorted(reports), [0, 1, 2, 3])
        for rank, r in reports.items():
            host = "algo-1" if rank < 2 else "algo-2"
            self.assertEqual(r["total"], 1 + 2 + 3 + 4)
            self.assertEqual((r["WORLD_SIZE"], r["LOCAL_WORLD_SIZE"]), ("4", "2"))
            self.assertEqual(r["LOCAL_RANK"], str(rank % 2))
            self.assertEqual((r["GROUP_RANK"], r["NODE_RANK"]), (str(rank // 2), str(rank // 2)))
            master = "algo-1" if self.sandboxed else "127.0.0.1"  # algo-1 resolves in the sandbox only
            # The attempt's own port, chosen free on the host: the same for every rank.
            self.assertEqual((r["MASTER_ADDR"], r["MASTER_PORT"]), (master, reports[0]["MASTER_PORT"]))
            self.assertTrue(1 <= int(r["MASTER_PORT"]) <= 65535)
            self.assertEqual(r["SM_CURRENT_HOST"], host)
            self.assertEqual(json.loads(r["SM_HOSTS"]), ["algo-1", "algo-2"])
            self.assertEqual(r["SM_NETWORK_INTERFACE_NAME"], "lo")
            self.assertEqual(r["elastic"], [])

    def test_a_failing_rank_ends_the_others_and_fails_the_job_with_its_code(self):
        p, out = self.job("torch-fail", FAILING, {"sagemaker_torch_distributed_enabled": "true"},
                          instance_type="ml.g5.2xlarge", count=1)
        self.sm.create_training_job(**p)
        tj = self.wait_training("torch-fail", timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertIn("the training process exited with code 3", tj["FailureReason"])
        with open(os.path.join(out, "termed")) as f:
            self.assertEqual(f.read(), "rank 0\n")

    def test_a_stop_reaches_every_rank_once(self):
        p, out = self.job("torch-stop", STOPPABLE, {"sagemaker_torch_distributed_enabled": "true"},
                          instance_type="ml.g5.2xlarge")
        self.sm.create_training_job(**p)
        deadline = time.time() + 60
        while len(glob.glob(os.path.join(out, "up-*"))) < 4:
            self.assertLess(time.time(), deadline, "the ranks did not start")
            time.sleep(0.05)
        self.sm.stop_training_job(TrainingJobName="torch-stop")
        tj = self.wait_training("torch-stop", timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Stopped")
        for rank in range(4):
            with open(os.path.join(out, f"term-{rank}")) as f:
                self.assertEqual(f.read(), "SIGTERM\n", f"rank {rank}")

    def test_mpi_runs_mpirun_from_algo_1_over_every_host(self):
        p, out = self.job("mpi-ranks", MPI_RANK, {
            "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
            "sagemaker_mpi_custom_mpi_options": json.dumps("-x CUSTOM_OPTION=given")})
        self.sm.create_training_job(**p)
        tj = self.wait_training("mpi-ranks", timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        reports = {}
        for path in glob.glob(os.path.join(out, "mpi-*.json")):
            with open(path) as f:
                r = json.load(f)
            reports[r["rank"]] = r
        self.assertEqual(sorted(reports), [0, 1, 2, 3])
        hosts = sorted(r["sm_current_host"] for r in reports.values())
        self.assertEqual(hosts, ["algo-1", "algo-1", "algo-2", "algo-2"])
        for r in reports.values():
            self.assertEqual(r["size"], 4)
            self.assertEqual(r["option"], "given")
            # In the sandbox each instance has its own host name; without it, the host's.
            self.assertEqual(r["host"], r["sm_current_host"] if self.sandboxed else socket.gethostname())
            self.assertEqual(r["secret"], ["0o600", True])
            # MPI's own rank variables only: not the instance's place among the instances.
            self.assertEqual(r["instance_rank"], [None, None, None])
        self.assertEqual(reports[0]["unauthenticated"], "R:not authenticated")

    def test_four_distributed_jobs_share_the_host(self):
        # Two torch and two MPI jobs at once, each with its own ports (a fixed port made three of
        # four fail with "Address already in use"); the MPI ones with SageMaker's example options,
        # which name a parameter trainyard also sets.
        outs = {}
        for i in range(2):
            p, outs[f"par-torch-{i}"] = self.job(f"par-torch-{i}", ALLREDUCE, {"sagemaker_torch_distributed_enabled": "true"},
                                                 instance_type="ml.g5.2xlarge")
            self.sm.create_training_job(**p)
            p, outs[f"par-mpi-{i}"] = self.job(f"par-mpi-{i}", MPI_RANK, {
                "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
                "sagemaker_mpi_custom_mpi_options": "-verbose -x NCCL_DEBUG=INFO -x CUSTOM_OPTION=given "
                                                    "-mca btl_vader_single_copy_mechanism none"})
            self.sm.create_training_job(**p)
        for name, out in outs.items():
            tj = self.wait_training(name, timeout=180)
            self.assertEqual(tj["TrainingJobStatus"], "Completed", f"{name}: {tj.get('FailureReason')}")
            self.assertEqual(len(glob.glob(os.path.join(out, "*.json"))), 4, name)
        ports = set()
        for i in range(2):
            with open(os.path.join(outs[f"par-torch-{i}"], "rank-0.json")) as f:
                ports.add(json.load(f)["MASTER_PORT"])
        self.assertEqual(len(ports), 2)

    def test_a_stop_ends_every_mpi_rank(self):
        p, out = self.job("mpi-stop", MPI_STOPPABLE, {
            "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"})
        self.sm.create_training_job(**p)
        deadline = time.time() + 60
        while len(glob.glob(os.path.join(out, "up-*"))) < 4:
            self.assertLess(time.time(), deadline, "the ranks did not start")
            time.sleep(0.05)
        self.sm.stop_training_job(TrainingJobName="mpi-stop")
        tj = self.wait_training("mpi-stop", timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Stopped")
        for rank in range(4):
            with open(os.path.join(out, f"term-{rank}")) as f:
                self.assertIn("SIGTERM", f.read(), f"rank {rank}")

    def test_a_failing_mpi_rank_fails_the_job(self):
        p, _ = self.job("mpi-fail", "import os, sys\nsys.exit(5 if os.environ['OMPI_COMM_WORLD_RANK'] == '3' else 0)\n",
                        {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"})
        self.sm.create_training_job(**p)
        tj = self.wait_training("mpi-fail", timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")

    def test_bad_distribution_hyperparameters_are_refused(self):
        for hps, fragment in [
                ({"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "0"},
                 "sagemaker_mpi_num_of_processes_per_host must be an integer from 1"),
                ({"sagemaker_mpi_enabled": "true", "sagemaker_torch_distributed_enabled": "true"},
                 "cannot be combined"),
                ({"sagemaker_torch_distributed_enabled": "yes"}, "must be true or false")]:
            p = self.script_payload("bad-dist")
            p["HyperParameters"].update(hps)
            with self.assertRaises(ClientError) as e:
                self.sm.create_training_job(**p)
            self.assertEqual(e.exception.response["Error"]["Code"], "ValidationException")
            self.assertIn(fragment, e.exception.response["Error"]["Message"])
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])


class DistributedWithoutSandboxTest(DistributedTest):
    """The same launches with executor.sandbox = "none": every instance on the host's own network
    and name, algo-<n> found through the attempt's hosts file."""
    server_config = CONFIG + '\n[executor]\nsandbox = "none"\n'
    sandboxed = False


if __name__ == "__main__":
    unittest.main()
