"""Hostile jobs: what a job does to escape its sandbox or take the host down, and what it gets.

The server runs as root (as in CI) unless a test says otherwise: the job must still run as an
unprivileged user without capabilities, under a seccomp filter, in a cgroup with its instance
type's memory and process limits, on a volume of VolumeSizeInGB; its requirements.txt is built
as the job, in its sandbox. Every job here is bounded (a 256 MiB instance type, 64 tasks, a
1 GB volume) so the suite fits a 2-core machine. While the hostile jobs run, a thread times
DescribeTrainingJob; the p99 is printed at the end.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from harness import BIN, ServerTest, Server

PIDS_MAX = 64
CONFIG = f"""[executor]
sandbox = "bwrap"
stop_grace_seconds = 2
max_pids_per_instance = {PIDS_MAX}
pip_no_index = true

[[instance_types]]
name = "ml.m5.large"
count = 2
vcpus = 1
gpus = 0
memory_mib = 256
"""

LATENCIES = []  # seconds, every DescribeTrainingJob the pollers timed


def setUpModule():
    if os.geteuid() != 0:
        raise unittest.SkipTest("these tests start the server as root (and once as nobody)")
    if shutil.which("bwrap") is None or shutil.which("setpriv") is None:
        raise unittest.SkipTest("needs bubblewrap and setpriv")


def tearDownModule():
    if LATENCIES:
        ordered = sorted(LATENCIES)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        sys.stderr.write(f"\nDescribeTrainingJob during hostile jobs: {len(ordered)} calls, "
                         f"p50 {ordered[len(ordered) // 2] * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
                         f"max {ordered[-1] * 1000:.1f} ms\n")


# Reports what a hostile job could do, as JSON in /opt/ml/model/report.json.
PROBE = r"""
import ctypes, json, os, subprocess, sys
report = {}
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
report["CapEff"] = status["CapEff"].strip()
report["NoNewPrivs"] = status["NoNewPrivs"].strip()
report["Seccomp"] = status["Seccomp"].strip()
report["uid"] = os.getuid()
def run(name, argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    report[name] = r.returncode
run("umount", ["umount", "-l", "/opt/ml"])
run("remount", ["mount", "-o", "remount,bind,rw", "/"])
run("mount_tmpfs", ["mount", "-t", "tmpfs", "none", "/mnt"])
run("unshare_user", ["unshare", "-U", "-r", "true"])
libc = ctypes.CDLL(None, use_errno=True)
report["ptrace_attach_1"] = libc.ptrace(16, 1, 0, 0)  # PTRACE_ATTACH to the sandbox's init
if report["ptrace_attach_1"] == 0:
    libc.ptrace(17, 1, 0, 0)  # PTRACE_DETACH: let it run on, so that the report gets out
report["add_key"] = libc.syscall(248, b"user", b"trainyard", b"x", 1, -2)  # into its process keyring
try:
    with open(os.environ["TY_WATCHED"] + "/escaped", "w") as f:
        f.write("escaped")
    report["host_write"] = "written"
except OSError as e:
    report["host_write"] = e.__class__.__name__
reads = {}
for path in json.loads(os.environ["TY_SECRETS"]):
    try:
        with open(path) as f:
            reads[path] = "read " + f.read(40)
    except OSError as e:
        reads[path] = e.__class__.__name__
report["reads"] = reads
with open("/opt/ml/model/report.json", "w") as f:
    json.dump(report, f)
"""


class HostileJobTest(ServerTest):
    server_config = CONFIG

    def setUp(self):
        super().setUp()
        # A host directory outside /tmp (which the sandbox replaces) that anyone may write.
        self.watched = tempfile.mkdtemp(prefix="trainyard-watched-", dir="/opt" if os.path.isdir("/opt") else "/srv")
        os.chmod(self.watched, 0o777)  # writable by anyone who can reach it
        self.poll_stop = threading.Event()
        self.poller = threading.Thread(target=self.time_describes, daemon=True)
        self.poller.start()

    def tearDown(self):
        self.poll_stop.set()
        self.poller.join(timeout=10)
        super().tearDown()
        shutil.rmtree(self.watched, ignore_errors=True)

    def time_describes(self):
        client = self.server.client("sagemaker")
        while not self.poll_stop.wait(0.05):
            start = time.monotonic()
            try:
                client.describe_training_job(TrainingJobName="latency-probe-absent")
            except client.exceptions.ResourceNotFound:
                pass
            except Exception:
                continue
            LATENCIES.append(time.monotonic() - start)

    def run_job(self, name, command, timeout=120, **extra):
        payload = self.command_payload(name, command, **extra)
        payload["OutputDataConfig"]["CompressionType"] = "NONE"
        self.sm.create_training_job(**payload)
        return self.wait_training(name, timeout=timeout)

    def model_file(self, name, path):
        with open(self.bucket_path("trainyard-test", f"output/{name}/output/model/{path}")) as f:
            return f.read()

    def assert_failed_with(self, tj, *words):
        self.assertEqual(tj["TrainingJobStatus"], "Failed", tj.get("FailureReason"))
        for w in words:
            self.assertIn(w, tj.get("FailureReason", ""))

    def code_job(self, name, files):
        p = super().code_job(name, files)
        p["OutputDataConfig"]["CompressionType"] = "NONE"
        return p

    def probe(self, name, secrets):
        p = self.code_job(name, {"probe.py": PROBE})
        p["Environment"] = {"TY_SECRETS": json.dumps(secrets), "TY_WATCHED": self.watched}
        self.sm.create_training_job(**p)
        tj = self.wait_training(name, timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        return json.loads(self.model_file(name, "report.json"))

    def test_a_job_has_no_capability_and_cannot_mount_unmount_trace_or_escape(self):
        # A first job, whose spec (with the object store's keys) the second tries to read.
        self.assertEqual(self.run_job("other", "true")["TrainingJobStatus"], "Completed")
        secrets = [os.path.join(self.data_dir, "credentials"),
                   os.path.join(self.data_dir, "attempts", "other", "spec.json"),
                   os.path.join(self.data_dir, "attempts", "probe", "spec.json"),
                   "/etc/shadow", os.path.join(self.watched, "secret")]
        with open(os.path.join(self.watched, "secret"), "w") as f:  # the host's root may read it
            f.write("secret")
        os.chmod(os.path.join(self.watched, "secret"), 0o600)
        r = self.probe("probe", secrets)
        self.assertEqual(r["CapEff"], "0000000000000000", r)
        self.assertEqual(r["NoNewPrivs"], "1", r)
        self.assertEqual(r["Seccomp"], "2", r)
        self.assertNotEqual(r["uid"], 0, r)
        for refused in ("umount", "remount", "mount_tmpfs", "unshare_user"):
            self.assertNotEqual(r[refused], 0, (refused, r))
        self.assertEqual(r["ptrace_attach_1"], -1, r)
        self.assertEqual(r["add_key"], -1, r)
        self.assertNotEqual(r["host_write"], "written", r)
        self.assertFalse(os.path.exists(os.path.join(self.watched, "escaped")))
        for path, outcome in r["reads"].items():
            self.assertFalse(outcome.startswith("read "), (path, outcome))

    def test_a_thread_storm_is_bounded_and_the_next_job_runs(self):
        p = self.code_job("storm", {"storm.py": STORM})
        self.sm.create_training_job(**p)
        tj = self.wait_training("storm", timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertLess(int(self.model_file("storm", "threads")), PIDS_MAX)
        # A fork bomb: bounded by the same limit; the server answers and the next job starts.
        bomb = self.run_job("bomb", "b() { b | b & }; b; sleep 3; exit 3", timeout=60)
        self.assertEqual(bomb["TrainingJobStatus"], "Failed")
        self.assertEqual(self.run_job("after-bomb", "echo fine")["TrainingJobStatus"], "Completed")

    def test_a_memory_hog_ends_with_the_out_of_memory_reason(self):
        hog = "python3 -c \"b = [bytearray(16 << 20) for _ in range(128)]\""  # 2 GiB against 256 MiB
        tj = self.run_job("hog", hog)
        self.assert_failed_with(tj, "AlgorithmError", "out of memory", "256 MiB")

    def test_writing_beyond_the_volume_fails_with_a_clear_reason(self):
        # VolumeSizeInGB 1: 1.2 GB into its input directory (never uploaded).
        fill = "dd if=/dev/zero of=/opt/ml/input/fill bs=1M count=1200 status=none; exit 1"
        tj = self.run_job("disk", fill)
        self.assert_failed_with(tj, "storage volume", "VolumeSizeInGB 1")

    def test_tmp_counts_against_the_volume(self):
        fill = "dd if=/dev/zero of=/tmp/fill bs=1M count=1200 status=none; exit 1"
        tj = self.run_job("tmp", fill)
        self.assert_failed_with(tj, "storage volume", "VolumeSizeInGB 1")

    def test_a_job_lists_no_mount_of_another_job(self):
        # The holder keeps its storage volume mounted while the lister reads its own mount table.
        gate = os.path.join(self.work_dir, "release-holder")
        self.sm.create_training_job(**self.command_payload(
            "mount-holder", f"while [ ! -e {gate} ]; do sleep 0.05; done"))
        try:
            self.wait_secondary("mount-holder", "Training", timeout=60)
            lister = self.run_job("mount-lister", "cat /proc/self/mountinfo > /opt/ml/model/mountinfo")
        finally:
            open(gate, "w").close()
        self.assertEqual(lister["TrainingJobStatus"], "Completed", lister.get("FailureReason"))
        mounts = self.model_file("mount-lister", "mountinfo")
        self.assertNotIn("mount-holder", mounts)
        self.assertEqual(self.wait_training("mount-holder", timeout=60)["TrainingJobStatus"], "Completed")

    def test_a_failure_reason_names_no_server_directory(self):
        # The embedded store's message about a missing bucket gives its directory in the data dir.
        p = self.command_payload("no-bucket", "true")
        p["InputDataConfig"] = [{"ChannelName": "train", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": "s3://no-such-bucket/data/", "S3DataDistributionType": "FullyReplicated"}}}]
        self.sm.create_training_job(**p)
        tj = self.wait_training("no-bucket", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertIn("no-such-bucket", tj["FailureReason"])
        said = [tj["FailureReason"]] + [t.get("StatusMessage", "") for t in tj["SecondaryStatusTransitions"]]
        for directory in {self.data_dir, os.path.realpath(self.data_dir)}:
            for text in said:
                self.assertNotIn(directory, text)

    def test_a_pep517_backend_in_requirements_runs_as_the_job_in_its_sandbox(self):
        p = self.code_job("pep517", {
            "train.py": "import os, shutil\nshutil.copy(os.path.expanduser('~/backend-report'), "
                        "'/opt/ml/model/backend-report')\n",
            "requirements.txt": "./evil\n",
            "evil/pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
            "evil/backend.py": BACKEND.replace("WATCHED", self.watched)})
        self.sm.create_training_job(**p)
        tj = self.wait_training("pep517", timeout=180)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertFalse(os.path.exists(os.path.join(self.watched, "pwned")), "the backend wrote to the host")
        report = json.loads(self.model_file("pep517", "backend-report"))
        self.assertNotEqual(report["uid"], 0, report)
        self.assertEqual(report["CapEff"], "0000000000000000", report)
        self.assertNotEqual(report["pwned"], "written", report)


# Starts up to 2000 threads (far more than the instance's task limit, far less than pid_max).
STORM = """
import os, threading, time
n = 0
try:
    for _ in range(2000):
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        n += 1
except RuntimeError:
    pass
with open("/opt/ml/model/threads", "w") as f:
    f.write(str(n))
os._exit(0)
"""


# An in-tree PEP 517 backend: tries to write into a host directory the test watches, records
# who it ran as in $HOME (which the training job then sees), and builds a minimal wheel.
BACKEND = r'''
import base64, hashlib, json, os, zipfile
def _payload():
    status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
    try:
        with open("WATCHED/pwned", "w") as f:
            f.write("pwned")
        pwned = "written"
    except OSError as e:
        pwned = e.__class__.__name__
    with open(os.path.expanduser("~/backend-report"), "w") as f:
        json.dump({"uid": os.getuid(), "CapEff": status["CapEff"].strip(), "pwned": pwned}, f)
def get_requires_for_build_wheel(config_settings=None):
    return []
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _payload()
    name = "evil-0.1-py3-none-any.whl"
    files = {"evil/__init__.py": b"", "evil-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: evil\nVersion: 0.1\n",
             "evil-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    record += "evil-0.1.dist-info/RECORD,,\n"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr("evil-0.1.dist-info/RECORD", record)
    return name
'''


class HostileJobUnprivilegedServerTest(HostileJobTest):
    """The server as nobody (a data directory it owns): no uid switch, no cgroup, no loop
    device. The job is still without capabilities and mount; a file beyond VolumeSizeInGB
    fails it (the file-size limit)."""

    def new_server(self, **kw):
        os.chown(self.data_dir, 65534, 65534)
        os.chown(self.work_dir, 65534, 65534)
        wrapper = os.path.join(self.work_dir, "trainyard-as-nobody")
        with open(wrapper, "w") as f:
            f.write(f"#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups {BIN} \"$@\"\n")
        os.chmod(wrapper, 0o755)
        settings = dict(env=self.server_env, config=self.server_config, args=self.server_args,
                        shared_dirs=[self.work_dir], bin=wrapper)
        settings.update(kw)
        return Server(self.data_dir, **settings).start()

    def code_job(self, name, files):
        p = super().code_job(name, files)
        subprocess.check_call(["chown", "-R", "65534:65534", self.bucket_path("trainyard-test")])
        return p

    # Limits that need root (cgroups, the volume) are not promised here; the rest is inherited.
    test_a_thread_storm_is_bounded_and_the_next_job_runs = None
    test_a_memory_hog_ends_with_the_out_of_memory_reason = None
    test_tmp_counts_against_the_volume = None
    test_a_pep517_backend_in_requirements_runs_as_the_job_in_its_sandbox = None

    def test_writing_beyond_the_volume_fails_with_a_clear_reason(self):
        fill = "dd if=/dev/zero of=/opt/ml/input/fill bs=1M count=1100 status=none; exit $?"
        tj = self.run_job("disk", fill)
        self.assert_failed_with(tj, "larger than its storage volume", "VolumeSizeInGB 1")


if __name__ == "__main__":
    unittest.main()
