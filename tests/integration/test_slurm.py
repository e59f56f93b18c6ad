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
HOLD_KEEP_ALIVE = 8  # seconds an idle held allocation waits for the next attempt


ALIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")


def held_jobs(data_dir, states=ALIVE):
    """The held allocations in Slurm of the server on data_dir (their working directories are
    inside it): job id -> state, in `states` (None: any)."""
    out = CLUSTER.cmd("squeue", "-h", "-t", "all", "-o", "%i|%j|%T|%Z")
    jobs = {}
    for line in out.splitlines():
        job_id, name, state, workdir = line.strip().split("|", 3)
        if name.startswith("ty-hold-") and workdir.startswith(data_dir + "/") and (states is None or state in states):
            jobs[job_id] = state
    return jobs


def wait_no_held_jobs(test, timeout):
    """Waits until no held allocation of the test's server is left in Slurm; the seconds it took."""
    t0 = time.time()
    while held_jobs(test.data_dir):
        test.assertLess(time.time(), t0 + timeout, f"held allocations still in Slurm: {held_jobs(test.data_dir)}")
        time.sleep(0.1)
    return time.time() - t0


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
hold_keep_alive_seconds = {HOLD_KEEP_ALIVE}

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
        self.assertIn(self.slurm_job_of(first), held_jobs(self.data_dir))  # in a held allocation
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

    def slurm_job_of(self, attempt):
        with open(os.path.join(self.data_dir, "attempts", attempt, "slurm_job_id")) as f:
            return f.read().strip()

    def test_kill_9_of_the_server_leaves_every_slurm_job_accounted_for(self):
        # One job that ends while the server is down, one that runs on, one stopped after the
        # restart; each single-instance attempt runs in a held allocation of its own.
        self.sm.create_training_job(**self.command_payload("brief", "sleep 3; echo done"))
        self.sm.create_training_job(**self.command_payload("long", "trap 'exit 0' TERM; sleep 1000 & wait"))
        self.wait_secondary("brief", "Training", timeout=60)
        self.wait_secondary("long", "Training", timeout=60)
        before = held_jobs(self.data_dir)
        self.assertEqual(len(before), 2, before)
        self.server.kill9()
        time.sleep(5)  # "brief" ends on Slurm while no server watches
        self.server = self.new_server()
        self.sm = self.server.client("sagemaker")
        tj = self.wait_training("brief", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="long")["SecondaryStatus"], "Training")
        # The restart submitted nothing twice: the same two allocations, each attempt in its own.
        self.assertEqual(set(held_jobs(self.data_dir, states=None)), set(before))
        self.assertEqual({self.slurm_job_of("brief"), self.slurm_job_of("long")}, set(before))
        self.sm.stop_training_job(TrainingJobName="long")
        tj = self.wait_training("long", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Stopped")
        # Both allocations, now idle, go back to Slurm after the keep-alive: nothing is orphaned.
        wait_no_held_jobs(self, HOLD_KEEP_ALIVE + 5)

    def test_held_allocations_grow_with_the_queue_are_reused_and_go_back_when_idle(self):
        for i in range(3):
            self.sm.create_training_job(**self.command_payload(f"held-{i}", "sleep 2; echo ok"))
        for i in range(3):
            tj = self.wait_training(f"held-{i}", timeout=90)
            self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        # Three at once: three allocations, one each, none of them a Slurm job of the attempt's own.
        held = {self.slurm_job_of(f"held-{i}") for i in range(3)}
        self.assertEqual(len(held), 3)
        self.assertEqual(set(held_jobs(self.data_dir, states=None)), held)
        self.assertEqual(self.slurm_jobs_named("held-0"), [])
        # The next job of the same shape runs in one of them, with no sbatch.
        t0 = time.time()
        self.sm.create_training_job(**self.command_payload("held-next", "echo next"))
        first_line = self.first_line_after("held-next", t0)
        tj = self.wait_training("held-next", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertIn(self.slurm_job_of("held-next"), held)
        self.assertEqual(set(held_jobs(self.data_dir, states=None)), held)
        # Idle, each goes back to Slurm once its keep-alive has run out.
        released = wait_no_held_jobs(self, HOLD_KEEP_ALIVE + 5)
        print(f"\nheld allocation on Slurm: first line {first_line * 1000:.0f} ms after CreateTrainingJob; "
              f"the last allocation given back {released:.1f} s after its last job ended (keep-alive {HOLD_KEEP_ALIVE} s)")

    def test_stop_and_the_runtime_limit_reach_an_attempt_in_a_held_allocation(self):
        self.sm.create_training_job(**self.command_payload("held-stop", "trap 'exit 0' TERM; sleep 1000 & wait"))
        self.wait_secondary("held-stop", "Training", timeout=60)
        self.sm.stop_training_job(TrainingJobName="held-stop")
        self.assertEqual(self.wait_training("held-stop", timeout=60)["TrainingJobStatus"], "Stopped")
        limited = self.command_payload("held-limit", "sleep 1000")
        limited["StoppingCondition"] = {"MaxRuntimeInSeconds": 2}
        self.sm.create_training_job(**limited)
        tj = self.wait_training("held-limit", timeout=60)
        self.assertEqual((tj["TrainingJobStatus"], tj["SecondaryStatus"]), ("Stopped", "MaxRuntimeExceeded"))
        # Both ran in the same allocation, which outlived them.
        self.assertEqual(self.slurm_job_of("held-stop"), self.slurm_job_of("held-limit"))
        self.assertEqual(held_jobs(self.data_dir), {self.slurm_job_of("held-limit"): "RUNNING"})

    def test_a_multi_instance_attempt_is_one_slurm_job_of_its_own(self):
        payload = self.command_payload("pair", "echo $SM_CURRENT_HOST")
        payload["ResourceConfig"]["InstanceCount"] = 2
        self.sm.create_training_job(**payload)
        tj = self.wait_training("pair", timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        jobs = self.slurm_jobs_named("pair")
        self.assertEqual([j[0] for j in jobs], [self.slurm_job_of("pair")])
        self.assertIn(jobs[0][1], ("COMPLETING", "COMPLETED"))  # Slurm's epilog may still run
        self.assertEqual(held_jobs(self.data_dir, states=None), {})

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
