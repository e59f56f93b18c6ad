"""The Slurm executor (docs/slurm.md) against a private Slurm cluster on this machine
(slurm_cluster.py): the quick-start job, a 3-instance job whose instances land on 3 nodes and
exchange data over TCP by their SM_HOSTS names, a stop, a node that dies under a job, and a
server killed with -9 while its jobs run on Slurm.

One cluster serves the whole class; each test gets a fresh server on it.
"""
import json
import os
import socket
import time
import unittest

import test_distributed
import test_real_training
from harness import ServerTest
from slurm_cluster import SlurmCluster

CLUSTER = None


def slurm_config(cluster, extra=""):
    return f"""
[executor]
kind = "slurm"
stop_grace_seconds = 5

[executor.slurm]
partition = "main"
bin_dir = "{cluster.bin_dir}"
conf = "{cluster.conf_path}"
poll_interval_ms = 200

[[instance_types]]
name = "ml.m5.large"
count = 8
vcpus = 1
memory_mib = 512

[[instance_types]]
name = "ml.g5.2xlarge"
count = 4
vcpus = 1
gpus = 2
memory_mib = 512

[[instance_types]]
name = "ml.m5.xlarge"
count = 4
vcpus = 4
memory_mib = 1024
slurm_whole_node = true
{extra}
"""


def setUpModule():
    global CLUSTER
    CLUSTER = SlurmCluster(nodes=4, cpus_per_node=4, gpus_per_node=2, memory_mib=8192)
    CLUSTER.start()


def tearDownModule():
    if CLUSTER:
        CLUSTER.stop()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A 3-way all-reduce over plain TCP, by SM_HOSTS names only: algo-1 listens at its own name,
# every other instance connects to it, sends its rank + 1, and reads back the sum.
ALLREDUCE = r"""
import json, os, socket, sys, time
hosts = json.loads(os.environ["SM_HOSTS"])
me = os.environ["SM_CURRENT_HOST"]
rank = hosts.index(me)
port = int(os.environ["ALLREDUCE_PORT"])
print(f"rank {rank} of {len(hosts)} on {me} at {socket.gethostbyname(me)} master {os.environ['MASTER_ADDR']}", flush=True)
if rank == 0:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((socket.gethostbyname(hosts[0]), port))
    srv.listen(len(hosts))
    conns, total = [], 1
    while len(conns) < len(hosts) - 1:
        c, _ = srv.accept()
        total += int(c.recv(64).decode())
        conns.append(c)
    for c in conns:
        c.sendall(str(total).encode())
        c.close()
else:
    for _ in range(600):
        try:
            c = socket.create_connection((hosts[0], port), timeout=5)
            break
        except OSError:
            time.sleep(0.1)
    c.sendall(str(rank + 1).encode())
    total = int(c.recv(64).decode())
print(f"rank {rank} sum={total}", flush=True)
"""


class SlurmTest(ServerTest):
    @property
    def server_config(self):
        return slurm_config(CLUSTER)

    def attempt_nodes(self, name):
        with open(os.path.join(self.data_dir, "attempts", name, "nodes.json")) as f:
            return json.load(f)

    def log_text(self, name):
        logs = self.server.client("logs")
        streams = logs.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs",
                                            logStreamNamePrefix=name + "/")["logStreams"]
        out = {}
        for s in streams:
            ev = logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=s["logStreamName"],
                                     startFromHead=True)["events"]
            out[s["logStreamName"]] = "\n".join(e["message"] for e in ev)
        logs.close()
        return out

    def test_quickstart_job_completes_on_slurm(self):
        self.stage_quickstart()
        self.sm.create_training_job(**self.script_payload("qs-slurm"))
        tj = self.wait_training("qs-slurm", timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertIn("ModelArtifacts", tj)
        nodes = self.attempt_nodes("qs-slurm")
        self.assertEqual(len(nodes["names"]), 1)
        self.assertIn(nodes["names"][0], CLUSTER.nodes)
        text = "\n".join(self.log_text("qs-slurm").values())
        self.assertIn("loss=", text)

    def test_three_instances_on_three_nodes_all_reduce_by_host_name(self):
        payload = self.code_job("allreduce", {"allreduce.py": ALLREDUCE})
        payload["ResourceConfig"]["InstanceCount"] = 3
        payload["Environment"] = {"ALLREDUCE_PORT": str(free_port())}
        self.sm.create_training_job(**payload)
        tj = self.wait_training("allreduce", timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        nodes = self.attempt_nodes("allreduce")
        self.assertEqual(len(set(nodes["names"])), 3, nodes)
        self.assertEqual(len(set(nodes["addresses"])), 3, nodes)
        logs = self.log_text("allreduce")
        self.assertEqual(len(logs), 3, logs.keys())
        for n in range(1, 4):
            text = "".join(t for k, t in logs.items() if k.startswith(f"allreduce/algo-{n}-") or k == f"allreduce/algo-{n}")
            self.assertIn(f"rank {n - 1} sum=6", text)
            # Each instance resolved its own name to its own node's address.
            self.assertIn(f"at {nodes['addresses'][n - 1]}", text)

    def running_attempt(self, job_id, timeout=60, not_in=()):
        """The training job of the service job's current attempt once it is RUNNING."""
        deadline = time.time() + timeout
        while True:
            job = self.describe_raw(job_id)
            names = [a.get("serviceResourceId", {}).get("value", "").split("/")[-1] for a in job.get("attempts", [])]
            latest = job.get("latestAttempt", {}).get("serviceResourceId", {}).get("value", "").split("/")[-1]
            if job["status"] == "RUNNING" and latest and latest not in not_in:
                tj = self.sm.describe_training_job(TrainingJobName=latest)
                if tj["SecondaryStatus"] == "Training":
                    return job, latest
            if time.time() > deadline:
                self.fail(f"{job_id} is not running a new attempt: {job['status']} {names} {latest}\n{self.server.read_log()}")
            time.sleep(0.1)

    def test_a_node_that_dies_under_a_job_retries_it_elsewhere_without_using_an_attempt(self):
        queue = self.create_queue("nodefail", capacity=4)
        job_id = self.submit(queue, self.command_payload("nodefail", "trap 'exit 0' TERM; sleep 1000 & wait"),
                             retryStrategy={"attempts": 1})
        _, first = self.running_attempt(job_id)
        node = self.attempt_nodes(first)["names"][0]
        CLUSTER.kill_slurmd(node)
        try:
            job, second = self.running_attempt(job_id, timeout=90, not_in=(first,))
            self.assertNotEqual(self.attempt_nodes(second)["names"][0], node)
            tj = self.sm.describe_training_job(TrainingJobName=first)
            self.assertEqual(tj["TrainingJobStatus"], "Failed")
            self.assertIn("CapacityError", tj["FailureReason"])
            self.assertIn(node, tj["FailureReason"])
            # The first attempt's processes were fenced: its supervisor recorded that and ended.
            with open(os.path.join(self.data_dir, "attempts", first, "status.json")) as f:
                status = json.load(f)
            self.assertEqual(status["phase"], "Exited", status)
            self.assertEqual(job["status"], "RUNNING")
            self.batch.terminate_service_job(jobId=job_id, reason="done")
            done = self.wait_jobs([job_id], timeout=60)[0]
            self.assertEqual(done["status"], "FAILED")
        finally:
            CLUSTER.restart_slurmd(node)
            CLUSTER.wait_idle(timeout=60)

    def slurm_jobs_named(self, name):
        out = CLUSTER.cmd("squeue", "-h", "-t", "all", "-n", "ty-" + name, "-o", "%i %T")
        return [line.split() for line in out.splitlines() if line.strip()]

    def test_kill_9_of_the_server_leaves_every_slurm_job_accounted_for(self):
        # One job that ends while the server is down, one that runs on, one stopped after the restart.
        self.sm.create_training_job(**self.command_payload("brief", "sleep 3; echo done"))
        self.sm.create_training_job(**self.command_payload("long", "trap 'exit 0' TERM; sleep 1000 & wait"))
        self.wait_secondary("brief", "Training", timeout=60)
        self.wait_secondary("long", "Training", timeout=60)
        self.server.kill9()
        time.sleep(5)  # "brief" ends on Slurm while no server watches
        self.server = self.new_server()
        self.sm = self.server.client("sagemaker")
        tj = self.wait_training("brief", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="long")["SecondaryStatus"], "Training")
        # Each attempt is still one Slurm job: the restart started none twice.
        for name in ("brief", "long"):
            self.assertEqual(len(self.slurm_jobs_named(name)), 1, self.slurm_jobs_named(name))
        self.sm.stop_training_job(TrainingJobName="long")
        tj = self.wait_training("long", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Stopped")
        self.assertEqual(self.slurm_jobs_named("long")[0][1], "COMPLETED")

    def first_line_after(self, name, t0, timeout=60):
        """Seconds from t0 (epoch) to the job's first log line (its own timestamp)."""
        path = os.path.join(self.data_dir, "attempts", name, "logs", "algo-1.log")
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with open(path) as f:
                    line = f.readline()
                if line.endswith("\n"):
                    return int(line.split()[0]) / 1000.0 - t0
            except OSError:
                pass
            time.sleep(0.01)
        self.fail(f"{name} wrote no line")

    def test_a_warm_pool_keeps_the_slurm_allocation_for_the_next_job(self):
        def job(name):
            p = self.command_payload(name, "echo started")
            p["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 60
            return p
        t0 = time.time()
        self.sm.create_training_job(**job("wp-cold"))
        cold = self.first_line_after("wp-cold", t0)
        self.assertEqual(self.wait_training("wp-cold")["TrainingJobStatus"], "Completed")
        deadline = time.time() + 30
        while self.sm.describe_training_job(TrainingJobName="wp-cold").get("WarmPoolStatus", {}).get("Status") != "Available":
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        t0 = time.time()
        self.sm.create_training_job(**job("wp-warm"))
        warm = self.first_line_after("wp-warm", t0)
        self.assertEqual(self.wait_training("wp-warm")["TrainingJobStatus"], "Completed")
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="wp-cold")["WarmPoolStatus"].get("ReusedByJob"), "wp-warm")
        ids = []
        for name in ("wp-cold", "wp-warm"):
            with open(os.path.join(self.data_dir, "attempts", name, "slurm_job_id")) as f:
                ids.append(f.read().strip())
        self.assertEqual(ids[0], ids[1])  # the same Slurm allocation
        self.assertEqual(len(self.slurm_jobs_named("wp-warm")), 0)  # never submitted to Slurm
        print(f"\nwarm pool on Slurm: cold start {cold * 1000:.0f} ms, warm start {warm * 1000:.0f} ms")
        # Ending the pool releases the allocation.
        self.sm.update_training_job(TrainingJobName="wp-warm", ResourceConfig={"KeepAlivePeriodInSeconds": 0})
        deadline = time.time() + 30
        while self.slurm_jobs_named("wp-cold")[0][1] == "RUNNING":
            self.assertLess(time.time(), deadline, "the pool's Slurm job still holds its allocation")
            time.sleep(0.1)


class SlurmDistributedTest(test_distributed.DistributedTest):
    """The distributed launches, unchanged, with each instance on its own Slurm node: torch ranks
    meeting at MASTER_ADDR across nodes, and mpirun from algo-1 reaching the other node's
    instance through the authenticated remote shell."""

    @property
    def server_config(self):
        return slurm_config(CLUSTER)


class SlurmRealTrainingTest(test_real_training.RealTrainingTest):
    """PyTorch DDP and an mpi4py allreduce for real, each instance on its own Slurm node."""

    @property
    def server_config(self):
        return slurm_config(CLUSTER)


class SlurmExactResumeTest(test_real_training.ExactResumeTest):
    """A PyTorch job interrupted as managed spot on Slurm resumes exactly from its checkpoint."""
    resume_type = "ml.c5.xlarge"

    @property
    def server_config(self):
        return slurm_config(CLUSTER, """
[[instance_types]]
name = "ml.c5.xlarge"
count = 2
spot_count = 2
vcpus = 1
memory_mib = 2048

[object_store]
checkpoint_sync_seconds = 1
""")


if __name__ == "__main__":
    unittest.main()
