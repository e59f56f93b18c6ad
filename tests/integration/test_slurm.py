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


if __name__ == "__main__":
    unittest.main()
