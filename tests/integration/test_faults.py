"""Faults of the host around an attempt: the object store unreachable during download, the disk
full while input is downloaded or the output is packed. The attempt fails with
InternalServerError, which the retry rules treat as transient; a job's own missing data is a
ClientError and is not retried (docs/retries.md)."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

from harness import MotoServer, ServerTest, object_store_toml


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class ObjectStoreDownTest(ServerTest):
    def setUp(self):
        # Bucket "remote" lives behind an endpoint where nothing listens; other buckets are local.
        self.server_config = "[executor]\nstop_grace_seconds = 2\n\n" + object_store_toml(
            f"http://127.0.0.1:{closed_port()}", ["remote"])
        super().setUp()

    def payload(self, name, bucket, **extra):
        p = self.command_payload(name, "true", **extra)
        p["InputDataConfig"] = [{"ChannelName": "train", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/data/"}}}]
        return p

    def test_unreachable_store_is_an_infrastructure_failure_and_retried(self):
        self.sm.create_training_job(**self.payload("down", "remote", RetryStrategy={"MaximumRetryAttempts": 2}))
        tj = self.wait_training("down", timeout=90)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertTrue(tj["FailureReason"].startswith("InternalServerError: input channel train:"), tj["FailureReason"])
        self.assertIn("127.0.0.1", tj["FailureReason"])
        statuses = [t["Status"] for t in tj["SecondaryStatusTransitions"]]
        self.assertEqual(statuses.count("Restarting"), 2, statuses)

    def test_unreachable_store_retried_by_service_job_rules(self):
        queue = self.create_queue("faults", capacity=1)
        job = self.submit(queue, self.payload("down-sj", "remote"), retryStrategy={"attempts": 2, "evaluateOnExit": [
            {"action": "RETRY", "onStatusReason": "Received status from SageMaker: InternalServerError*"},
            {"action": "EXIT", "onStatusReason": "*"}]})
        done = self.wait_jobs([job], timeout=90)[0]
        self.assertEqual((done["status"], len(done["attempts"])), ("FAILED", 2))
        for a in done["attempts"]:
            self.assertTrue(a["statusReason"].startswith(
                "Received status from SageMaker: InternalServerError: input channel train:"), a["statusReason"])

    def test_missing_input_data_is_the_jobs_error_and_not_retried(self):
        self.sm.create_training_job(**self.payload("nodata", "trainyard-test", RetryStrategy={"MaximumRetryAttempts": 2}))
        tj = self.wait_training("nodata", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertTrue(tj["FailureReason"].startswith("ClientError: input channel train:"), tj["FailureReason"])
        self.assertNotIn("Restarting", [t["Status"] for t in tj["SecondaryStatusTransitions"]])



def can_mount_tmpfs():
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    d = tempfile.mkdtemp(prefix="trainyard-mnt-")
    try:
        if subprocess.call(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
            return False
        subprocess.call(["umount", d])
        return True
    finally:
        os.rmdir(d)


MiB = 1024 * 1024


@unittest.skipUnless(shutil.which("moto_server"), "moto_server is not installed")
@unittest.skipUnless(can_mount_tmpfs(), "needs root (mount) for a small tmpfs to fill")
class DiskFullTest(ServerTest):
    """The server's data directory (attempts, the object cache, the embedded buckets, the
    database) is on a 20 MiB tmpfs; bucket "remote" is on moto_server, on another disk."""

    def setUp(self):
        self.mnt = tempfile.mkdtemp(prefix="trainyard-small-disk-")
        subprocess.check_call(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", self.mnt])
        self.addCleanup(os.rmdir, self.mnt)
        self.addCleanup(subprocess.call, ["umount", "-l", self.mnt])
        self.moto = MotoServer().start()
        self.addCleanup(self.moto.stop)
        s3 = self.moto.client()
        s3.create_bucket(Bucket="remote")
        s3.put_object(Bucket="remote", Key="big/data.bin", Body=os.urandom(24 * MiB))
        s3.put_object(Bucket="remote", Key="small/data.csv", Body=b"1,2\n")
        s3.close()
        self.data_dir_parent = self.mnt
        # No disk reserve: these tests are about what a full disk does to the job that fills it
        # (the reserve would hold every start back on a 20 MiB disk; test_hostile_resources has it).
        # No sandbox: a sandboxed root server gives each instance a volume allocated in full,
        # which a 20 MiB disk cannot hold, so there the job never shares the disk it could fill.
        self.server_config = ("[server]\ndata_dir_reserve_mib = 0\n\n[executor]\nstop_grace_seconds = 2\n"
                              "sandbox = \"none\"\n\n"
                              + self.moto.object_store_toml(["remote"]))
        super().setUp()

    def payload(self, name, command, prefix, **extra):
        p = self.command_payload(name, command, **extra)
        p["InputDataConfig"] = [{"ChannelName": "train", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": f"s3://remote/{prefix}/"}}}]
        return p

    def free_mib(self):
        st = os.statvfs(self.mnt)
        return st.f_bavail * st.f_frsize / MiB

    def assert_server_keeps_working(self, name):
        # A job that fits still runs to the end, its output in the bucket on the small disk.
        self.sm.create_training_job(**self.payload(name, "cat $SM_CHANNEL_TRAIN/data.csv > $SM_MODEL_DIR/m", "small"))
        tj = self.wait_training(name, timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertTrue(os.path.exists(self.bucket_path("trainyard-test", f"output/{name}/output/model.tar.gz")))

    def test_disk_full_while_downloading_input_is_an_infrastructure_failure_and_retried(self):
        self.assert_server_keeps_working("before")
        self.sm.create_training_job(**self.payload("fill-in", "true", "big", RetryStrategy={"MaximumRetryAttempts": 1}))
        tj = self.wait_training("fill-in", timeout=90)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        reason = tj["FailureReason"]
        self.assertTrue(reason.startswith("InternalServerError: input channel train: GetObject s3://remote/big/data.bin"),
                        reason)
        self.assertIn("no space left on device", reason.lower())
        statuses = [t["Status"] for t in tj["SecondaryStatusTransitions"]]
        self.assertEqual(statuses.count("Restarting"), 1, statuses)  # MaximumRetryAttempts
        # The partial download does not keep the disk full; nothing else is lost.
        self.assertGreater(self.free_mib(), 12)
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="before")["TrainingJobStatus"], "Completed")
        self.assertTrue(os.path.exists(self.bucket_path("trainyard-test", "output/before/output/model.tar.gz")))
        self.assertEqual(self.server.proc.poll(), None)
        self.assert_server_keeps_working("after")

    def test_disk_full_while_packing_the_output_is_an_infrastructure_failure_and_retried(self):
        self.assert_server_keeps_working("before")
        queue = self.create_queue("disk", capacity=1)
        # The first attempt's 12 MiB model fits, its archive does not; the second writes a small one.
        command = ('if [ "$AWS_BATCH_JOB_ATTEMPT" = 1 ]; then head -c 12582912 /dev/urandom > $SM_MODEL_DIR/big; '
                   'else echo small > $SM_MODEL_DIR/m; fi')
        job = self.submit(queue, self.payload("fill-out", command, "small"), retryStrategy={
            "attempts": 2, "evaluateOnExit": [
                {"action": "RETRY", "onStatusReason": "Received status from SageMaker: InternalServerError*"},
                {"action": "EXIT", "onStatusReason": "*"}]})
        done = self.wait_jobs([job], timeout=90)[0]
        self.assertEqual((done["status"], len(done["attempts"])), ("SUCCEEDED", 2),
                         [a.get("statusReason") for a in done["attempts"]])
        reason = done["attempts"][0]["statusReason"]
        self.assertTrue(reason.startswith("Received status from SageMaker: InternalServerError: cannot pack model.tar.gz"),
                        reason)
        self.assertIn("no space left on device", reason.lower())
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="before")["TrainingJobStatus"], "Completed")
        self.assertTrue(os.path.exists(self.bucket_path("trainyard-test", "output/before/output/model.tar.gz")))
        self.assertEqual(self.server.proc.poll(), None)
        self.assert_server_keeps_working("after")



def userns_works():
    return shutil.which("unshare") is not None and subprocess.call(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /tmp"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0


@unittest.skipIf(os.environ.get("TRAINYARD_IN_USERNS"), "already in a user namespace")
@unittest.skipUnless(shutil.which("moto_server"), "moto_server is not installed")
@unittest.skipIf(os.geteuid() == 0 and not os.environ.get("TRAINYARD_TEST_USERNS"),
                 "running as root: DiskFullTest mounts its tmpfs itself")
@unittest.skipUnless(userns_works(), "not root, and user namespaces do not work here")
class DiskFullInUserNamespaceTest(unittest.TestCase):
    """Without root: DiskFullTest runs in a user and mount namespace of its own (unshare -rm),
    where it may mount its small tmpfs."""

    def test_disk_full_tests_pass_in_a_user_namespace(self):
        env = dict(os.environ, TRAINYARD_IN_USERNS="1")
        out = subprocess.run(["unshare", "-rm", sys.executable, "-m", "unittest", "-v", "test_faults.DiskFullTest"],
                             cwd=os.path.dirname(os.path.abspath(__file__)), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=400)
        self.assertEqual(out.returncode, 0, out.stdout[-4000:])
        self.assertIn("Ran 2 tests", out.stdout)
        self.assertNotIn("skipped", out.stdout)


if __name__ == "__main__":
    unittest.main()
