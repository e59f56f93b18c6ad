"""System metrics of each instance (SageMaker's per-host training metrics; docs/metrics.md "System metrics"): sampled
by the supervisor, served by POST /trainyard/v1/system-metrics and `trainyard metrics --system`."""
import json
import os
import stat
import subprocess
import time
import unittest

from harness import BIN, ServerTest

# Four processes (the script and three children it forks, so the tree's descendants must count)
# burn CPU until each has used 2 s of it, while the parent holds 200 MB.
BURN = r"""import os, time
def burn(seconds):
    start = time.process_time()
    x = 0
    while time.process_time() - start < seconds:
        x += 1
held = bytearray(200 * 1024 * 1024)
for i in range(0, len(held), 4096):
    held[i] = 1
children = []
for _ in range(3):
    child = os.fork()
    if child == 0:
        burn(2)
        os._exit(0)
    children.append(child)
burn(2)
for child in children:
    os.waitpid(child, 0)
print("burnt", len(held))
"""

INTERVAL_1S = "[executor]\nsystem_metrics_interval_seconds = 1\n"
GPU_NAMES = {"GPUUtilization", "GPUMemoryUtilization"}

# A test double for nvidia-smi: it insists on the query trainyard documents and prints two GPUs.
FAKE_NVIDIA_SMI = """#!/bin/sh
if [ "$1" != "--query-gpu=index,utilization.gpu,memory.used,memory.total" ] || \
   [ "$2" != "--format=csv,noheader,nounits" ] || [ "$#" != 2 ]; then
  echo "unexpected arguments: $*" >&2
  exit 2
fi
printf '0, 50, 1000, 4000\\n1, 30, 2000, 4000\\n'
"""


def mem_total_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no MemTotal in /proc/meminfo")


def by_metric(out, host):
    return {s["MetricName"]: [p["Value"] for p in s["Points"]] for s in out["Series"] if s["Host"] == host}


class SystemMetricsTest(ServerTest):
    # No nvidia-smi under this name on PATH: the GPU metrics are left out, not zeros.
    server_config = INTERVAL_1S + 'nvidia_smi = "trainyard-test-no-such-nvidia-smi"\n'

    def test_cpu_memory_and_disk_of_the_instance_tree(self):
        script = os.path.join(self.work_dir, "burn.py")  # work_dir is bound into the sandbox
        with open(script, "w") as f:
            f.write(BURN)
        self.sm.create_training_job(**self.command_payload("burner", "python3 " + script))
        tj = self.wait_training("burner")
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        out = self.server.admin("system-metrics", {"TrainingJobName": "burner"})
        self.assertEqual(out["Namespace"], "/aws/sagemaker/TrainingJobs")
        self.assertEqual({s["Host"] for s in out["Series"]}, {"burner/algo-1"})
        series = by_metric(out, "burner/algo-1")
        self.assertEqual(set(series), {"CPUUtilization", "MemoryUtilization", "DiskUtilization"}, out)
        self.assertGreaterEqual(len(series["CPUUtilization"]), 2, out)
        # 8 CPU-seconds over four processes: on an idle host some interval sees more than half a
        # core, but the machine running the tests may give the tree much less (other tests burn
        # CPU beside it). An idle tree reads ~0 %, so a clear fraction of a core still tells that
        # the tree's CPU time is counted.
        self.assertGreater(max(series["CPUUtilization"]), 15, out)
        # The 200 MB the script holds shows (RSS of the tree over MemTotal).
        self.assertGreater(max(series["MemoryUtilization"]), 0.9 * 200 * 1024 * 1024 / mem_total_bytes() * 100, out)
        self.assertTrue(all(0 < v <= 100 for v in series["DiskUtilization"]), out)
        # Points lie within the run, oldest first.
        points = next(s["Points"] for s in out["Series"] if s["MetricName"] == "CPUUtilization")
        stamps = [p["Timestamp"] for p in points]
        self.assertEqual(stamps, sorted(stamps))
        self.assertGreaterEqual(stamps[0], tj["TrainingStartTime"].timestamp() - 1)
        self.assertLessEqual(stamps[-1], tj["TrainingEndTime"].timestamp() + 1)

        # Filters: one metric, one host, a time window.
        only = self.server.admin("system-metrics", {"TrainingJobName": "burner", "MetricName": "DiskUtilization",
                                                    "Host": "burner/algo-1"})
        self.assertEqual([s["MetricName"] for s in only["Series"]], ["DiskUtilization"])
        window = self.server.admin("system-metrics", {"TrainingJobName": "burner", "MetricName": "CPUUtilization",
                                                      "StartTime": stamps[1], "EndTime": stamps[1]})
        self.assertEqual([p["Timestamp"] for p in window["Series"][0]["Points"]], [stamps[1]])
        none = self.server.admin("system-metrics", {"TrainingJobName": "burner", "EndTime": stamps[0] - 10})
        self.assertEqual([s["Points"] for s in none["Series"]], [[], [], []])
        gpu = self.server.admin("system-metrics", {"TrainingJobName": "burner", "MetricName": "GPUUtilization"})
        self.assertEqual(gpu["Series"], [])

        for body, fragment in (({"TrainingJobName": "nope"}, "ResourceNotFound"),
                               ({}, "TrainingJobName is required"),
                               ({"TrainingJobName": "burner", "MetricName": "CPU"}, "MetricName must be one of"),
                               ({"TrainingJobName": "burner", "Host": "burner/algo-2"}, "Host must be one of"),
                               ({"TrainingJobName": "burner", "Host": "other/algo-1"}, "Host must be one of"),
                               ({"TrainingJobName": "burner", "StartTime": "yesterday"}, "StartTime must be a number"),
                               ({"TrainingJobName": "burner", "EndTime": -1}, "EndTime must be a number"),
                               ({"TrainingJobName": "burner", "StartTime": 20, "EndTime": 10}, "StartTime must not be after")):
            with self.assertRaises(RuntimeError) as e:
                self.server.admin("system-metrics", body)
            self.assertIn(fragment, str(e.exception))
            if fragment != "ResourceNotFound":
                self.assertIn("ValidationException", str(e.exception))

        # The CLI prints the same points.
        key, secret = self.server.credentials()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
        table = subprocess.run([BIN, "metrics", "burner", "--system", "--metric", "CPUUtilization", "--host", "algo-1",
                                "--endpoint-url", self.server.url],
                               env=env, capture_output=True, text=True, check=True).stdout.splitlines()
        self.assertEqual(table[0].split(), ["HOST", "METRIC", "TIME", "VALUE"])
        self.assertEqual(len(table) - 1, len(stamps))
        self.assertTrue(all(r.split()[:2] == ["burner/algo-1", "CPUUtilization"] for r in table[1:]), table)

        # A restarted server serves them from its store, with the files gone.
        self.server.stop()
        for root, _, files in os.walk(os.path.join(self.data_dir, "attempts")):
            for f in files:
                if f.endswith(".system.jsonl"):
                    os.remove(os.path.join(root, f))
        self.server = self.new_server()
        again = self.server.admin("system-metrics", {"TrainingJobName": "burner"})
        self.assertEqual(again["Series"], out["Series"])

    def test_each_instance_is_a_host(self):
        p = self.command_payload("pair", "sleep 3")
        p["ResourceConfig"]["InstanceCount"] = 2
        self.sm.create_training_job(**p)
        self.assertEqual(self.wait_training("pair")["TrainingJobStatus"], "Completed")
        out = self.server.admin("system-metrics", {"TrainingJobName": "pair", "MetricName": "CPUUtilization"})
        self.assertEqual([s["Host"] for s in out["Series"]], ["pair/algo-1", "pair/algo-2"])
        self.assertTrue(all(s["Points"] for s in out["Series"]), out)
        two = self.server.admin("system-metrics", {"TrainingJobName": "pair", "Host": "pair/algo-2"})
        self.assertEqual({s["Host"] for s in two["Series"]}, {"pair/algo-2"})

    def test_a_server_killed_while_training_neither_loses_nor_repeats_samples(self):
        gate = os.path.join(self.work_dir, "gate")
        self.sm.create_training_job(**self.command_payload("crashy", f"while [ ! -e {gate} ]; do sleep 0.1; done"))
        deadline = time.time() + 60
        while True:  # some samples are in before the kill
            out = self.server.admin("system-metrics", {"TrainingJobName": "crashy", "MetricName": "CPUUtilization"})
            if out["Series"] and len(out["Series"][0]["Points"]) >= 2:
                break
            self.assertLess(time.time(), deadline, out)
            time.sleep(0.2)
        self.server.kill9()
        self.server = self.new_server()
        self.sm = self.server.client("sagemaker")
        open(gate, "w").close()
        self.assertEqual(self.wait_training("crashy")["TrainingJobStatus"], "Completed")
        out = self.server.admin("system-metrics", {"TrainingJobName": "crashy", "MetricName": "CPUUtilization"})
        stamps = [p["Timestamp"] for p in out["Series"][0]["Points"]]
        self.assertEqual(stamps, sorted(set(stamps)), "samples repeated or out of order")
        # Every line the supervisor wrote is in the series, once.
        path = os.path.join(self.data_dir, "attempts", "crashy", "logs", "algo-1.system.jsonl")
        with open(path) as f:
            written = [json.loads(line)["Timestamp"] / 1000 for line in f]
        self.assertEqual(stamps, written)

    def test_zero_interval_samples_nothing(self):
        self.server.stop()
        self.server = self.new_server(config="[executor]\nsystem_metrics_interval_seconds = 0\n")
        self.sm = self.server.client("sagemaker")
        self.sm.create_training_job(**self.command_payload("quiet", "sleep 3"))
        self.assertEqual(self.wait_training("quiet")["TrainingJobStatus"], "Completed")
        self.assertEqual(self.server.admin("system-metrics", {"TrainingJobName": "quiet"})["Series"], [])

    def test_a_bad_interval_is_refused_naming_the_key(self):
        path = os.path.join(self.work_dir, "bad.toml")
        with open(path, "w") as f:
            f.write("[executor]\nsystem_metrics_interval_seconds = -1\n")
        r = subprocess.run([BIN, "serve", "--listen", "127.0.0.1:0", "--data-dir", os.path.join(self.work_dir, "d"),
                            "--config", path], capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("executor.system_metrics_interval_seconds", r.stdout + r.stderr)


class GpuMetricsTest(ServerTest):
    def setUp(self):
        super().setUp()
        fake = os.path.join(self.work_dir, "fake-nvidia-smi")
        with open(fake, "w") as f:
            f.write(FAKE_NVIDIA_SMI)
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)
        self.server.stop()
        self.server = self.new_server(config=INTERVAL_1S + f'nvidia_smi = "{fake}"\n')
        self.sm = self.server.client("sagemaker")

    def gpu_series(self, name):
        # The run's last samples are read when it ends, before it is reported finished.
        return by_metric(self.server.admin("system-metrics", {"TrainingJobName": name}), name + "/algo-1")

    def test_every_gpu_is_summed_without_cuda_visible_devices(self):
        self.sm.create_training_job(**self.command_payload("allgpus", "sleep 4"))
        # While it runs, /metrics carries its newest sample, labelled with SageMaker's Host.
        import re
        import time
        import urllib.request
        want = re.compile(r'^trainyard_instance_gpu_utilization_percent\{training_job="allgpus",host="allgpus/algo-1"\} 80$', re.M)
        deadline = time.time() + 30
        while True:
            with urllib.request.urlopen(self.server.url + "/metrics", timeout=10) as r:
                text = r.read().decode()
            if want.search(text):
                break
            self.assertLess(time.time(), deadline, "no GPU sample on /metrics")
            time.sleep(0.2)
        self.assertEqual(self.wait_training("allgpus")["TrainingJobStatus"], "Completed")
        with urllib.request.urlopen(self.server.url + "/metrics", timeout=10) as r:
            self.assertNotIn('training_job="allgpus"', r.read().decode())  # gone when it ends
        series = self.gpu_series("allgpus")
        self.assertTrue(series.get("GPUUtilization"), series)
        self.assertEqual(set(series["GPUUtilization"]), {80.0})        # 50 + 30
        self.assertEqual(set(series["GPUMemoryUtilization"]), {75.0})  # 1000/4000 + 2000/4000

    def test_only_the_instances_gpus_count(self):
        p = self.command_payload("onegpu", "sleep 4", Environment={"CUDA_VISIBLE_DEVICES": "1"})
        self.sm.create_training_job(**p)
        self.assertEqual(self.wait_training("onegpu")["TrainingJobStatus"], "Completed")
        series = self.gpu_series("onegpu")
        self.assertTrue(series.get("GPUUtilization"), series)
        self.assertEqual(set(series["GPUUtilization"]), {30.0})
        self.assertEqual(set(series["GPUMemoryUtilization"]), {50.0})
        self.assertIn("CPUUtilization", series)


if __name__ == "__main__":
    unittest.main()
