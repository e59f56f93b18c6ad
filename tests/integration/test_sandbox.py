"""EnableNetworkIsolation takes a sandboxed job's network away; it is refused for several
instances and without a sandbox."""
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
