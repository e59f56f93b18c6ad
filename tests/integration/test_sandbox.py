"""The sandbox: a job sees the host read-only and only its own instance's files of the server's
data directory (not another job's workspace, the credentials file, any spec.json, buckets/);
EnableNetworkIsolation takes its network away, and is refused for several instances and
without a sandbox."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse

from harness import BIN, ServerTest

WAIT = "trap 'exit 0' TERM; while :; do sleep 0.1; done"


def bwrap_works():
    return shutil.which("bwrap") is not None and subprocess.call(
        ["bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-pid",
         "--unshare-uts", "true"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0


@unittest.skipUnless(bwrap_works(), "bubblewrap does not work here")
class SandboxIsolationTest(ServerTest):
    server_config = "[executor]\nsandbox = \"bwrap\"\nstop_grace_seconds = 5\n"

    def run_training(self, name, command, **extra):
        self.sm.create_training_job(**self.command_payload(name, command, **extra))
        return self.wait_training(name, timeout=60)

    def test_a_network_isolated_job_cannot_connect_out(self):
        port = urllib.parse.urlparse(self.server.url).port
        probe = ("python3 -c \"import socket,sys; s=socket.socket(); s.settimeout(3); "
                 f"sys.exit(0 if s.connect_ex(('127.0.0.1',{port})) == 0 else 7)\"")
        # Without isolation the job reaches the server's port on the host ...
        open_job = self.run_training("net-open", probe)
        self.assertEqual(open_job["TrainingJobStatus"], "Completed", open_job.get("FailureReason"))
        # ... with it, it does not.
        shut = self.run_training("net-isolated", probe, EnableNetworkIsolation=True)
        self.assertEqual(shut["TrainingJobStatus"], "Failed")
        self.assertIn("7", shut.get("FailureReason", ""))

    def test_network_isolation_is_refused_for_several_instances(self):
        p = self.command_payload("net-two", "true", EnableNetworkIsolation=True)
        p["ResourceConfig"]["InstanceCount"] = 2
        with self.assertRaises(Exception) as e:
            self.sm.create_training_job(**p)
        self.assertIn("EnableNetworkIsolation", str(e.exception))


# Run in the sandbox (script mode, /opt/ml/code/probe.py): tries every path of paths.json and
# writes what happened to /opt/ml/output/data/report.json (uploaded uncompressed, so the test
# reads it from the bucket).
PROBE = """
import json, os
with open("paths.json") as f:
    paths = json.load(f)
report = {}
for path in paths["reads"]:
    try:
        if os.path.isdir(path):
            report["read " + path] = "listed " + ",".join(sorted(os.listdir(path)))
        else:
            with open(path) as f:
                report["read " + path] = "read " + f.read(200)
    except OSError as e:
        report["read " + path] = "error " + e.__class__.__name__
for path in paths["writes"]:
    try:
        with open(path, "w") as f:
            f.write("written by a sandboxed job")
        report["write " + path] = "written"
    except OSError as e:
        report["write " + path] = "error " + e.__class__.__name__
with open("/opt/ml/model/own", "w") as f:
    f.write("own model")
with open("/opt/ml/output/data/report.json", "w") as f:
    json.dump(report, f)
"""

# Two instances: algo-1 listens, algo-2 connects by name; each lists the data directory's
# attempts/ and finds only its own attempt there.
PAIR = """
import os, socket, sys, time
seen = os.listdir(os.environ["TY_ATTEMPTS"])
if seen != [os.environ["TY_ATTEMPT"]]:
    sys.exit("sees " + repr(seen))
if os.environ["SM_CURRENT_HOST"] == "algo-1":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("algo-1", 29500))
    s.listen(1)
    c, _ = s.accept()
    sys.exit(0 if c.recv(5) == b"hello" else 3)
for _ in range(300):
    try:
        socket.create_connection(("algo-1", 29500), timeout=1).sendall(b"hello")
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit(4)
"""


@unittest.skipUnless(bwrap_works(), "bubblewrap does not work here")
class SandboxFileSystemTest(ServerTest):
    """A job cannot read or change the server's data directory or another job's files, nor write
    outside its own instance's paths. Here the data directory is in the temp dir (which the
    sandbox's private /tmp hides as well); the subclass below puts it elsewhere."""
    server_config = "[executor]\nsandbox = \"bwrap\"\nstop_grace_seconds = 5\n"

    def setUp(self):
        super().setUp()
        self.created = []

    def tearDown(self):
        super().tearDown()
        for path in self.created:  # what a job wrote outside its workspace, had it been able to
            try:
                os.remove(path)
            except OSError:
                pass

    def wait_for_file(self, path, timeout=60):
        deadline = time.time() + timeout
        while not os.path.exists(path):
            self.assertLess(time.time(), deadline, f"{path} never appeared\n{self.server.read_log()}")
            time.sleep(0.05)
        return path

    def probe(self, name, reads, writes):
        p = self.code_job(name, {"probe.py": PROBE, "paths.json": json.dumps({"reads": reads, "writes": writes})})
        p["OutputDataConfig"]["CompressionType"] = "NONE"
        self.sm.create_training_job(**p)
        tj = self.wait_training(name, timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        out = self.bucket_path("trainyard-test", f"output/{name}/output/")
        with open(os.path.join(out, "model", "own")) as f:  # its own /opt/ml works
            self.assertEqual(f.read(), "own model")
        with open(os.path.join(out, "data", "report.json")) as f:
            return json.load(f)

    def test_a_job_sees_only_its_own_files(self):
        # A job that keeps a secret in its /opt/ml tree and its workspace, and keeps running.
        secret = "s3cret-" + os.path.basename(self.data_dir)
        keeper = self.command_payload("keeper", f"echo {secret} > /opt/ml/model/secret; "
                                                f"echo {secret} > /opt/ml/code/secret; "
                                                "trap 'exit 0' TERM; while :; do sleep 0.1; done")
        self.sm.create_training_job(**keeper)
        keeper_dir = self.wait_for_file(os.path.join(self.data_dir, "attempts", "keeper"))
        deadline = time.time() + 60
        while True:  # the supervisor's pid, once its status is written whole
            try:
                with open(os.path.join(keeper_dir, "status.json")) as f:
                    keeper_pid = json.load(f)["supervisor_pid"]
                break
            except (OSError, ValueError, KeyError):
                self.assertLess(time.time(), deadline, "the keeper's status never appeared")
                time.sleep(0.05)
        # As root each supervisor mounts its instances' volumes in a mount namespace of its own
        # (docs/security.md, "The sandbox"): the host sees what the keeper wrote there through it.
        in_keeper = (lambda p: f"/proc/{keeper_pid}/root{p}") if os.geteuid() == 0 else (lambda p: p)
        keeper_secret = os.path.join(keeper_dir, "hosts", "algo-1", "model", "secret")
        keeper_code = os.path.join(keeper_dir, "workspace", "algo-1", "code", "secret")
        self.wait_for_file(in_keeper(keeper_secret))
        self.wait_for_file(in_keeper(keeper_code))
        credentials = os.path.join(self.data_dir, "credentials")
        bucket = self.bucket_path("trainyard-test")
        os.makedirs(bucket, exist_ok=True)
        with open(os.path.join(bucket, "object"), "w") as f:
            f.write("an object of the embedded store")
        hidden = [keeper_secret, keeper_code, credentials, os.path.join(keeper_dir, "spec.json"),
                  os.path.join(bucket, "object"), os.path.join(self.data_dir, "buckets"), keeper_dir,
                  f"/proc/{keeper_pid}/status"]
        for path in hidden:
            self.assertTrue(os.path.exists(in_keeper(path)), path)  # there on the host ...

        reads = hidden + [os.path.join(self.data_dir, "attempts"), self.data_dir,
                          "/opt/ml/input/config/resourceconfig.json"]
        marker = "trainyard-sandbox-probe-" + os.path.basename(self.data_dir)
        writes = [os.path.join(self.data_dir, marker), os.path.join(keeper_dir, "hosts", "algo-1", "model", marker),
                  os.path.join(bucket, marker), "/usr/" + marker, "/etc/" + marker, "/opt/ml/model/" + marker]
        self.created = [w for w in writes if not w.startswith("/opt/ml/")]
        report = self.probe("prober", reads, writes)
        # ... and not in the sandbox: another job's files, the credentials, any spec.json, buckets/,
        # another job's processes.
        for path in hidden:
            self.assertTrue(report["read " + path].startswith("error "), (path, report["read " + path]))
        # The data directory holds nothing but the prober's own workspace (its own spec.json,
        # with the store's keys, is not there either).
        self.assertEqual(report["read " + self.data_dir], "listed attempts")
        self.assertEqual(report["read " + os.path.join(self.data_dir, "attempts")],
                         "listed prober")
        self.assertIn('"current_host":"algo-1"', report["read /opt/ml/input/config/resourceconfig.json"])
        # Writes outside its own paths fail or stay in the sandbox; /opt/ml takes them.
        for w in writes:
            if w.startswith("/opt/ml/"):
                self.assertEqual(report["write " + w], "written")
            else:
                self.assertFalse(os.path.exists(w), w)
        for w in ("/usr/" + marker, "/etc/" + marker):
            self.assertEqual(report["write " + w], "error OSError", report["write " + w])
        with open(in_keeper(keeper_secret)) as f:
            self.assertEqual(f.read().strip(), secret)  # untouched

        self.sm.stop_training_job(TrainingJobName="keeper")
        self.assertEqual(self.wait_training("keeper", timeout=60)["TrainingJobStatus"], "Stopped")

    def test_several_instances_reach_each_other_with_the_data_dir_hidden(self):
        p = self.code_job("pair", {"pair.py": PAIR})
        p["ResourceConfig"]["InstanceCount"] = 2
        p["Environment"] = {"TY_ATTEMPTS": os.path.join(self.data_dir, "attempts"), "TY_ATTEMPT": "pair"}
        self.sm.create_training_job(**p)
        tj = self.wait_training("pair", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual(os.listdir(os.path.join(self.data_dir, "attempts")), ["pair"])


@unittest.skipUnless(bwrap_works(), "bubblewrap does not work here")
class SandboxDataDirOutsideTmpTest(SandboxFileSystemTest):
    """The same with the data directory outside /tmp: only the sandbox's tmpfs over the data
    directory hides it."""

    def setUp(self):
        parent = os.path.join(os.path.dirname(os.path.abspath(BIN)), "sandbox-test-data")
        os.makedirs(parent, exist_ok=True)
        self.data_dir_parent = parent
        super().setUp()


@unittest.skipUnless(bwrap_works(), "bubblewrap does not work here")
class SandboxFileSystemsTest(ServerTest):
    """A [file_systems] directory (outside /tmp) is hidden from every job; a job's own
    FileSystemDataSource channel is mounted at /opt/ml/input/data/<channel> only."""

    def setUp(self):
        parent = os.path.join(os.path.dirname(os.path.abspath(BIN)), "sandbox-test-data")
        os.makedirs(parent, exist_ok=True)
        self.fs_root = tempfile.mkdtemp(prefix="fs-", dir=parent)
        self.addCleanup(shutil.rmtree, self.fs_root, True)
        for d, name in (("d1", "mine.txt"), ("d2", "other.txt")):
            os.makedirs(os.path.join(self.fs_root, "datasets", d))
            with open(os.path.join(self.fs_root, "datasets", d, name), "w") as f:
                f.write(f"data of {d}")
        self.server_config = (f'[executor]\nsandbox = "bwrap"\n\n[file_systems]\n"fs-0123abcd" = "{self.fs_root}"\n')
        super().setUp()

    def test_only_the_jobs_own_file_system_channel_is_visible(self):
        other = os.path.join(self.fs_root, "datasets", "d2", "other.txt")
        mine_on_host = os.path.join(self.fs_root, "datasets", "d1", "mine.txt")
        p = self.command_payload("fs-job", f'cat "$SM_CHANNEL_FSX/mine.txt" > "$SM_MODEL_DIR/got"; '
                                           f'cat {other} && exit 7; cat {mine_on_host} && exit 8; exit 0')
        p["InputDataConfig"] = [{"ChannelName": "fsx", "DataSource": {"FileSystemDataSource": {
            "FileSystemId": "fs-0123abcd", "FileSystemAccessMode": "ro", "FileSystemType": "EFS",
            "DirectoryPath": "/datasets/d1"}}}]
        p["OutputDataConfig"]["CompressionType"] = "NONE"
        self.sm.create_training_job(**p)
        tj = self.wait_training("fs-job", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        with open(self.bucket_path("trainyard-test", "output/fs-job/output/model/got")) as f:
            self.assertEqual(f.read(), "data of d1")
        # A job without the channel does not see the file system either.
        self.sm.create_training_job(**self.command_payload("no-fs", f"cat {mine_on_host} && exit 7; exit 0"))
        tj = self.wait_training("no-fs", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))


class NoSandboxTest(ServerTest):
    server_config = "[executor]\nsandbox = \"none\"\n"

    def test_network_isolation_is_refused_without_a_sandbox(self):
        with self.assertRaises(self.sm.exceptions.ClientError) as e:
            self.sm.create_training_job(**self.command_payload("iso", "true", EnableNetworkIsolation=True))
        err = e.exception.response["Error"]
        self.assertEqual(err["Code"], "ValidationException")
        self.assertIn("EnableNetworkIsolation", err["Message"])
        self.assertIn("without a sandbox", err["Message"])


if __name__ == "__main__":
    unittest.main()
