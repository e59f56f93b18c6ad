"""`trainyard simulate` end to end: the command's files, their determinism, and its errors."""
import hashlib
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ.get("TRAINYARD_BIN", "trainyard")
SOURCE = os.environ.get("TRAINYARD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TRACE = os.path.join(SOURCE, "tests", "data", "philly_head.csv")
OUTPUTS = ["summary.json", "jobs.csv", "utilization.svg", "shares.svg", "waits.svg"]

QUOTA = """
gpus = 64
policy = "quota"
checkpoint_interval_s = 1800
restart_cost_s = 120
[shares.big]
gpus = 48
[shares.rest]
gpus = 16
[defaults]
share = "rest"
[teams]
6214e9 = { share = "big" }
"""


class SimulateTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.cluster = os.path.join(self.dir.name, "cluster.toml")
        with open(self.cluster, "w") as f:
            f.write(QUOTA)

    def simulate(self, out, *extra, cluster=None):
        return subprocess.run([BIN, "simulate", "--trace", TRACE, "--cluster", cluster or self.cluster,
                               "--out", out, *extra], capture_output=True, text=True, timeout=120)

    def digest(self, out):
        h = hashlib.sha256()
        for name in OUTPUTS:
            with open(os.path.join(out, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
        return h.hexdigest()

    def test_two_runs_give_the_same_output_hash(self):
        one, two = os.path.join(self.dir.name, "one"), os.path.join(self.dir.name, "two")
        for out in (one, two):
            r = self.simulate(out)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.digest(one), self.digest(two))

    def test_summary_has_the_documented_keys_and_conserves_gpu_time(self):
        out = os.path.join(self.dir.name, "out")
        r = self.simulate(out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("1500 jobs, 1500 completed", r.stdout)
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        self.assertEqual((s["jobs"], s["completed"]), (1500, 1500))
        for key in ("makespan_s", "gpu_utilization", "gpu_hours_served", "gpu_hours_demand", "gpu_hours_lost", "preemptions"):
            self.assertIn(key, s)
        self.assertLessEqual(s["gpu_utilization"], 1.0)
        self.assertAlmostEqual(s["gpu_hours_served"], s["gpu_hours_demand"] + s["gpu_hours_lost"], places=3)
        team = s["teams"]["6214e9"]
        for key in ("jobs", "wait_s", "completion_s", "gpu_hours_received", "gpu_hours_entitled", "preemptions",
                    "gpu_hours_lost"):
            self.assertIn(key, team)
        self.assertEqual(set(team["wait_s"]), {"p50", "p90", "p99"})
        self.assertEqual(set(team["completion_s"]), {"p50", "p90"})
        with open(os.path.join(out, "jobs.csv")) as f:
            rows = f.read().splitlines()
        self.assertEqual(len(rows), 1501)
        self.assertTrue(rows[0].startswith("job_id,team,gpus,submit_s,duration_s,start_s,end_s,wait_s"))

    def test_time_window_replays_only_jobs_submitted_inside_it(self):
        out = os.path.join(self.dir.name, "window")
        r = self.simulate(out, "--start", "1760000", "--end", "1780000")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "jobs.csv")) as f:
            submits = [int(line.split(",")[3]) for line in f.read().splitlines()[1:]]
        self.assertTrue(submits)
        self.assertTrue(all(1760000 <= t < 1780000 for t in submits))

    def test_invalid_cluster_file_names_the_key(self):
        bad = os.path.join(self.dir.name, "bad.toml")
        with open(bad, "w") as f:
            f.write('gpus = 8\npolicy = "quota"\n[shares.a]\ngpus = 8\nborrow_limit_percent = "all"\n[defaults]\nshare = "a"\n')
        r = self.simulate(os.path.join(self.dir.name, "x"), cluster=bad)
        self.assertEqual(r.returncode, 2)
        self.assertIn("shares.a.borrow_limit_percent must be an integer", r.stderr)


if __name__ == "__main__":
    unittest.main()
