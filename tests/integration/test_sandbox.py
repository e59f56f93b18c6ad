"""The sandbox keeps a job to its own workspace: it cannot read another job's files, its own
spec, or the server's data directory, and EnableNetworkIsolation takes its network away. Without
a sandbox, EnableNetworkIsolation is refused."""
import glob
import os
import shutil
import subprocess
import unittest
import urllib.parse

from harness import ServerTest

WAIT = "trap 'exit 0' TERM; while :; do sleep 0.1; done"


def bwrap_works():
    return shutil.which("bwrap") is not None and subprocess.call(
        ["bwrap", "--dev-bind", "/", "/", "--unshare-uts", "true"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0


@unittest.skipUnless(bwrap_works(), "bubblewrap does not work here")
class SandboxIsolationTest(ServerTest):
    server_config = "[executor]\nsandbox = \"bwrap\"\nstop_grace_seconds = 5\n"

    def run_training(self, name, command, **extra):
        self.sm.create_training_job(**self.command_payload(name, command, **extra))
        return self.wait_training(name, timeout=60)

    def test_a_job_cannot_read_another_jobs_files_nor_the_data_dir(self):
        self.sm.create_training_job(**self.command_payload("owner", "echo s3cret > $SM_MODEL_DIR/secret; " + WAIT))
        secret = None
        while secret is None:  # where the other job's file lies on the host
            found = glob.glob(os.path.join(self.data_dir, "attempts", "owner", "**", "secret"), recursive=True)
            secret = found[0] if found else None
        spec = os.path.join(self.data_dir, "attempts", "owner", "spec.json")
        own_spec = os.path.join(self.data_dir, "attempts", "reader", "spec.json")
        self.assertTrue(os.path.exists(spec))
        # Each read that succeeds is a failure of the sandbox (exit 1..4).
        rel = lambda path: "$D/" + os.path.relpath(path, self.data_dir)
        cmd = (f"D={self.data_dir}; cat {rel(secret)} && exit 1; cat {rel(spec)} && exit 2; "
               f"cat {rel(own_spec)} && exit 3; ls -A $D | grep -q . && exit 4; exit 0")
        self.assertLessEqual(len(cmd), 256, cmd)
        tj = self.run_training("reader", cmd)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.sm.stop_training_job(TrainingJobName="owner")

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
