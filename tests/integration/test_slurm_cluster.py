"""The private Slurm test cluster (slurm_cluster.py) that the Slurm executor's tests and the bench
stand on: it starts, places a multi-node job on distinct nodes, runs steps on every node, notices
a dead slurmd, and leaves nothing behind."""
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from slurm_cluster import SlurmCluster, _alive


def wait_job(cluster, job_id, timeout=60):
    """The job's final state (it stays visible for MinJobAge after it ends)."""
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        out = cluster.cmd("scontrol", "-o", "show", "job", job_id)
        state = re.search(r"JobState=(\S+)", out).group(1)
        if state in ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY"):
            return state
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} still {state} after {timeout}s")


def wait_file(path, predicate=lambda text: bool(text), timeout=30):
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                text = f.read()
            if predicate(text):
                return text
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{path}: {text!r} after {timeout}s")


class SlurmClusterTest(unittest.TestCase):
    def setUp(self):
        # Job output goes outside the cluster's own directory, so it survives stop().
        self.work = tempfile.mkdtemp(prefix="ty-slurm-test-")
        self.addCleanup(shutil.rmtree, self.work, True)
        self.cluster = SlurmCluster(nodes=4, cpus_per_node=4, gpus_per_node=2, memory_mib=8192)
        self.addCleanup(self.cluster.stop)
        self.cluster.start()

    def test_configured_shape(self):
        c = self.cluster
        self.assertEqual(c.node_states(), {n: "idle" for n in ["n1", "n2", "n3", "n4"]})
        for n in c.nodes:
            out = c.cmd("scontrol", "-o", "show", "node", n)
            self.assertIn(f"NodeAddr={c.addresses[n]} ", out)
            self.assertIn("CPUTot=4 ", out)
            self.assertIn("RealMemory=8192 ", out)
            self.assertIn("Gres=gpu:2 ", out)
        self.assertEqual(len(set(c.addresses.values())), 4)
        self.assertTrue(all(a.startswith("127.0.200.") for a in c.addresses.values()))

    def test_three_node_job_runs_on_three_nodes_and_srun_reaches_each(self):
        c = self.cluster
        out = os.path.join(self.work, "job.out")
        script = os.path.join(self.work, "job.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n"
                    "echo batch $SLURMD_NODENAME $SLURM_NODEID $SLURM_JOB_NUM_NODES\n"
                    "srun --label sh -c 'echo step $SLURMD_NODENAME $SLURM_NODEID'\n")
        job = c.cmd("sbatch", "--parsable", "--nodes=3", "--ntasks-per-node=1", "--mem=100",
                    "-o", out, script).strip()
        self.assertEqual(wait_job(c, job), "COMPLETED", wait_file(out, lambda t: True))
        lines = wait_file(out).splitlines()
        batch = [l.split() for l in lines if l.startswith("batch ")]
        self.assertEqual(len(batch), 1, lines)
        self.assertEqual(batch[0][2:], ["0", "3"])  # the batch script runs on the first node
        steps = sorted(l.split()[1:] for l in lines if " step " in l)
        self.assertEqual(len(steps), 3, lines)
        nodes = {s[1] for s in steps}
        self.assertEqual(len(nodes), 3, f"three different nodes: {steps}")
        self.assertEqual({s[2] for s in steps}, {"0", "1", "2"})
        self.assertIn(batch[0][1], nodes)
        alloc = c.cmd("squeue", "-h", "-j", job, "-t", "all", "-o", "%N").strip()
        self.assertEqual(set(c.cmd("scontrol", "show", "hostnames", alloc).split()), nodes)

    def test_gpus_are_counted_per_node(self):
        c = self.cluster
        out = os.path.join(self.work, "gpu.out")
        job = c.cmd("sbatch", "--parsable", "--nodes=1", "--gres=gpu:2", "--mem=100", "-o", out,
                    "--wrap", "echo gpus=$SLURM_GPUS_ON_NODE").strip()
        self.assertEqual(wait_job(c, job), "COMPLETED")
        # Placeholder devices: Slurm counts them but sets no CUDA_VISIBLE_DEVICES.
        self.assertEqual(wait_file(out).strip(), "gpus=2")
        # A node has two: three on one node cannot be had.
        r = subprocess.run(["sbatch", "--nodes=1", "--gres=gpu:3", "--wrap", "true"], env=c.env,
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Requested node configuration is not available", r.stderr)

    def test_killed_slurmd_marks_its_node_down_and_it_comes_back(self):
        c = self.cluster
        started = os.path.join(self.work, "started")
        job = c.cmd("sbatch", "--parsable", "--nodelist=n2", "--mem=100", "-o", "/dev/null",
                    "--no-requeue", "--wrap", f"echo $$ > {started}; exec sleep 300").strip()
        pid = int(wait_file(started).strip())
        self.assertTrue(c.node_state("n2").startswith(("mixed", "alloc")))
        killed_at = time.monotonic()
        c.kill_slurmd("n2")
        state = c.wait_state("n2", lambda s: s.startswith("down"), timeout=60)
        took = time.monotonic() - killed_at
        # slurmd_timeout=5, message_timeout=2: DOWN within about 10 s.
        self.assertLess(took, 30, f"{state} after {took:.1f}s")
        self.assertEqual(wait_job(c, job), "NODE_FAIL")
        # The other nodes were not touched.
        for n in ("n1", "n3", "n4"):
            self.assertEqual(c.node_state(n), "idle")
        c.restart_slurmd("n2")
        c.wait_idle(["n2"], timeout=60)
        # Nothing ended the job's process when its slurmd died; stop() must.
        self.assertTrue(_alive(pid))
        c.stop()
        self.assertFalse(_alive(pid), "stop() left the job of a dead slurmd running")

    def test_stop_leaves_no_process_behind(self):
        c = self.cluster
        pids_file = os.path.join(self.work, "pids")
        # A two-node job with a step on each node, each running a process that ignores SIGTERM.
        job = c.cmd("sbatch", "--parsable", "--nodes=2", "--ntasks-per-node=1", "--mem=100",
                    "-o", "/dev/null", "--wrap",
                    f"srun sh -c 'trap \"\" TERM; echo $$ >> {pids_file}; while :; do sleep 1; done'").strip()
        wait_file(pids_file, lambda t: len(t.split()) == 2)
        job_pids = [int(p) for p in wait_file(pids_file).split()]
        daemons = [p.pid for p in c.procs.values()]
        stepds = c.leftovers()
        self.assertTrue(stepds, "slurmstepd and the job's processes are found through the spool dir")
        self.assertTrue(set(job_pids) <= set(stepds), (job_pids, stepds))
        directory = c.dir
        self.assertEqual(c.cmd("squeue", "-h", "-j", job, "-o", "%T").strip(), "RUNNING")
        c.stop()
        for p in daemons + stepds + job_pids:
            self.assertFalse(_alive(p), f"pid {p} outlived stop()")
        self.assertFalse(os.path.exists(directory))
        c.stop()  # twice is harmless

    def test_two_clusters_at_once(self):
        # ctest -j2 runs two of these: nothing they choose may collide.
        with SlurmCluster(nodes=2, gpus_per_node=0, memory_mib=0) as other:
            self.assertNotEqual(other.conf_path, self.cluster.conf_path)
            self.assertNotEqual(other.ctld_port, self.cluster.ctld_port)
            self.assertFalse(set(other.node_ports.values()) & set(self.cluster.node_ports.values()))
            outs = []
            for c in (self.cluster, other):
                out = os.path.join(self.work, f"{c.ctld_port}.out")
                job = c.cmd("sbatch", "--parsable", "-o", out, "--wrap", "echo $SLURM_CLUSTER_NAME").strip()
                self.assertEqual(wait_job(c, job), "COMPLETED")
                outs.append(wait_file(out).strip())
            self.assertNotEqual(outs[0], outs[1])


if __name__ == "__main__":
    unittest.main()
