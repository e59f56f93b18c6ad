"""Every file a job wrote is hostile: the supervisor (the server's user, often root) reads the
failure file, uploads the model, output and checkpoints and unpacks the source directory without
following a link out of the job's tree, without blocking on a FIFO, and refuses archives whose
entries would land outside it. Each case was a way to read or plant the server's files."""
import io
import os
import shutil
import stat
import tarfile
import tempfile
import time
import unittest

from harness import BIN, ServerTest

GROUP = "/aws/sagemaker/TrainingJobs"


def files_under(root):
    """Every regular file below root (links not followed), as paths relative to it."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            p = os.path.join(dirpath, name)
            if stat.S_ISREG(os.lstat(p).st_mode):
                out.append(os.path.relpath(p, root))
    return sorted(out)


class HostileOutputsTest(ServerTest):
    server_config = "[executor]\nstop_grace_seconds = 5\n"

    def setUp(self):
        super().setUp()
        self.logs = self.server.client("logs")
        self.secret = self.server.credentials()[1]
        self.credentials = os.path.join(self.data_dir, "credentials")
        os.makedirs(self.bucket_path("trainyard-test"), exist_ok=True)
        self.give_to_server(self.bucket_path("trainyard-test"))

    def give_to_server(self, path):
        """Makes a directory the test created (and those above it, up to the data directory)
        writable by the server's user: here the test's own."""

    def tearDown(self):
        self.logs.close()
        super().tearDown()

    def run_command(self, name, command, timeout=60, **extra):
        self.sm.create_training_job(**self.command_payload(name, command, **extra))
        return self.wait_training(name, timeout=timeout)

    def job_log(self, name):
        """Every line of the job's log streams (CloudWatch Logs)."""
        events = self.logs.filter_log_events(logGroupName=GROUP, logStreamNamePrefix=name + "/")["events"]
        return "\n".join(e["message"] for e in events)

    def assert_no_secret_in_buckets(self):
        buckets = os.path.join(self.data_dir, "buckets")
        for rel in files_under(buckets):
            with open(os.path.join(buckets, rel), "rb") as f:
                self.assertNotIn(self.secret.encode(), f.read(), rel)

    # ---- the failure file ----

    def test_a_failure_file_linked_to_the_servers_credentials_is_not_read(self):
        tj = self.run_command("fail-link", f"ln -s {self.credentials} $SM_OUTPUT_DIR/failure; exit 3")
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertNotIn(self.secret, tj.get("FailureReason", ""))
        self.assertNotIn("aws_secret_access_key", tj.get("FailureReason", ""))
        self.assertIn("/opt/ml/output/failure is ignored: failure is a symbolic link", self.job_log("fail-link"))

    def test_a_failure_file_that_is_a_fifo_does_not_hold_the_instance(self):
        tj = self.run_command("fail-fifo", "mkfifo $SM_OUTPUT_DIR/failure; exit 3", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertIn("/opt/ml/output/failure is ignored: failure is a FIFO", self.job_log("fail-fifo"))
        # The server answers and the next job runs to the end.
        after = self.run_command("after-fifo", "echo ok > $SM_OUTPUT_DIR/failure; true")
        self.assertEqual(after["TrainingJobStatus"], "Completed", after.get("FailureReason"))

    def test_a_regular_failure_file_is_still_the_reason_cut_at_1024_bytes(self):
        tj = self.run_command("fail-long", "printf 'bad input %02000d' 7 > $SM_OUTPUT_DIR/failure; exit 3")
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertIn("bad input 000", tj["FailureReason"])
        self.assertLessEqual(len(tj["FailureReason"]), 1024)

    # ---- uploads ----

    def links(self, where):
        return (f"ln -s {self.credentials} {where}/creds; ln -s ../../.. {where}/up; "
                f"ln -s /etc {where}/etc; mkfifo {where}/pipe; mkdir -p {where}/sub; echo real > {where}/sub/real")

    def test_links_in_an_uncompressed_model_are_not_followed(self):
        tj = self.run_command("model-links", self.links("$SM_MODEL_DIR"),
                              OutputDataConfig={"S3OutputPath": "s3://trainyard-test/output", "CompressionType": "NONE"})
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        # Exactly the job's regular file, under its own key; nothing beside or above the bucket.
        self.assertEqual(files_under(os.path.join(self.data_dir, "buckets")),
                         ["trainyard-test/output/model-links/output/model/sub/real"])
        self.assert_no_secret_in_buckets()
        log = self.job_log("model-links")
        for entry, why in (("creds", "a symbolic link"), ("up", "a symbolic link"), ("etc", "a symbolic link"),
                           ("pipe", "a FIFO")):
            self.assertIn(f"/opt/ml/model: /opt/ml/model/{entry} is not uploaded: is {why}", log)

    def test_links_in_a_compressed_model_are_not_followed(self):
        tj = self.run_command("model-tar", self.links("$SM_MODEL_DIR"))
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        with tarfile.open(self.bucket_path("trainyard-test", "output/model-tar/output/model.tar.gz")) as t:
            members = {m.name: m for m in t.getmembers()}
            self.assertEqual(sorted(members), [".", "./sub", "./sub/real"])
            self.assertTrue(all(m.isfile() or m.isdir() for m in members.values()))
            self.assertEqual(t.extractfile("./sub/real").read(), b"real\n")
        self.assert_no_secret_in_buckets()

    def test_links_in_checkpoints_are_not_followed(self):
        # Deep enough that a key built from the link's target would land beside the bucket.
        before = os.stat(self.credentials)
        tj = self.run_command("ckpt-links", "D=$(dirname $TRAINYARD_CHECKPOINT_MARKER); " + self.links("$D"),
                              CheckpointConfig={"S3Uri": "s3://trainyard-test/ckpt/a/b/links"})
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        buckets = os.path.join(self.data_dir, "buckets")
        self.assertEqual([f for f in files_under(buckets) if "/output/ckpt-links/" not in f],
                         ["trainyard-test/ckpt/a/b/links/sub/real"])
        self.assert_no_secret_in_buckets()
        after = os.stat(self.credentials)  # not rewritten through the link either
        self.assertEqual((after.st_ino, after.st_mtime_ns), (before.st_ino, before.st_mtime_ns))
        self.assertIn("checkpoints: /opt/ml/checkpoints/creds is not uploaded: is a symbolic link",
                      self.job_log("ckpt-links"))

    def test_a_model_directory_replaced_by_a_link_uploads_nothing(self):
        tj = self.run_command("model-swap", f"rm -rf $SM_MODEL_DIR && ln -s {self.data_dir} $SM_MODEL_DIR",
                              OutputDataConfig={"S3OutputPath": "s3://trainyard-test/output", "CompressionType": "NONE"})
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual([f for f in files_under(os.path.join(self.data_dir, "buckets"))
                          if "/output/model-swap/output/model/" in f], [])
        self.assert_no_secret_in_buckets()
        self.assertIn("/opt/ml/model: /opt/ml/model is not uploaded: model is a symbolic link", self.job_log("model-swap"))

    # ---- a warm pool's workspace ----

    def test_a_marker_planted_in_a_warm_pool_workspace_neither_blocks_nor_is_written_through(self):
        victim = os.path.join(self.work_dir, "victim")
        with open(victim, "w") as f:
            f.write("untouched")
        # The workspace is bound into the job at its own path (the rest of the data directory is
        # hidden): the job replaces the marker with a FIFO and plants a link at its temporary name.
        plant = (f"for W in {self.data_dir}/pools/*/algo-1; do rm -f $W/.prepared $W/.prepared.tmp; "
                 f"mkfifo $W/.prepared; ln -s {victim} $W/.prepared.tmp; done")
        pooled = {"ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1,
                                     "KeepAlivePeriodInSeconds": 600}}
        first = self.run_command("pool-plant", plant, **pooled)
        self.assertEqual(first["TrainingJobStatus"], "Completed", first.get("FailureReason"))
        deadline = time.time() + 30
        while (self.sm.describe_training_job(TrainingJobName="pool-plant").get("WarmPoolStatus") or {}).get(
                "Status") != "Available":
            self.assertLess(time.time(), deadline, "the warm pool never became available")
            time.sleep(0.05)
        second = self.run_command("pool-next", "true", **pooled)
        self.assertEqual(second["TrainingJobStatus"], "Completed",
                         f'{second.get("FailureReason")}; the job log: {self.job_log("pool-next")!r}; '
                         f'the supervisor log: {self.supervisor_log("pool-next")!r}')
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="pool-plant")["WarmPoolStatus"]["Status"],
                         "Reused")
        with open(victim) as f:
            self.assertEqual(f.read(), "untouched")
        self.sm.update_training_job(TrainingJobName="pool-next", ResourceConfig={"KeepAlivePeriodInSeconds": 0})

    # ---- the source directory archive ----

    def source_dir_job(self, name, members):
        """A script-mode job whose sagemaker_submit_directory is a tar.gz of `members`:
        (TarInfo, bytes or None)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as t:
            for info, data in members:
                if data is not None:
                    info.size = len(data)
                t.addfile(info, io.BytesIO(data) if data is not None else None)
        os.makedirs(self.bucket_path("trainyard-test", "code"), exist_ok=True)
        self.give_to_server(self.bucket_path("trainyard-test", "code"))
        with open(self.bucket_path("trainyard-test", f"code/{name}.tar.gz"), "wb") as f:
            f.write(buf.getvalue())
        payload = self.command_payload(name, "unused")
        payload["AlgorithmSpecification"] = {"TrainingImage": "local/python3", "TrainingInputMode": "File"}
        payload["HyperParameters"] = {"sagemaker_program": "train.py",
                                      "sagemaker_submit_directory": f"s3://trainyard-test/code/{name}.tar.gz"}
        self.sm.create_training_job(**payload)
        return self.wait_training(name, timeout=60)

    @staticmethod
    def member(name, kind=tarfile.REGTYPE, data=b"", mode=0o644, link=""):
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.linkname = kind, mode, link
        return info, (data if kind == tarfile.REGTYPE else None)

    def assert_refused(self, name, members, reason):
        train = self.member("train.py", data=b"print('ran')\n")
        tj = self.source_dir_job(name, [train] + members)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertTrue(tj["FailureReason"].startswith(
            f"ClientError: sagemaker_submit_directory: the archive s3://trainyard-test/code/{name}.tar.gz is refused: "),
            tj["FailureReason"])
        self.assertIn(reason, tj["FailureReason"])
        self.assertNotIn(self.secret, tj["FailureReason"])

    def test_a_source_dir_with_a_dot_dot_member_is_refused(self):
        self.assert_refused("src-dotdot", [self.member("../../../../planted.py", data=b"x")],
                            "entry '../../../../planted.py' has a '..' component")
        self.assertEqual([p for p in os.listdir(self.data_dir) if p.startswith("planted")], [])

    def test_a_source_dir_with_an_absolute_member_is_refused(self):
        target = os.path.join(self.work_dir, "planted-abs.py")
        self.assert_refused("src-abs", [self.member(target, data=b"x")], f"entry '{target}' has an absolute name")
        self.assertFalse(os.path.exists(target))

    def test_a_source_dir_that_writes_through_its_own_link_is_refused(self):
        self.assert_refused("src-link", [self.member("escape", tarfile.SYMTYPE, link=self.work_dir),
                                         self.member("escape/planted.py", data=b"x")],
                            f"entry 'escape' is a symbolic link to the absolute path {self.work_dir}")
        self.assertFalse(os.path.exists(os.path.join(self.work_dir, "planted.py")))

    def test_a_source_dir_that_links_up_and_out_is_refused(self):
        self.assert_refused("src-up", [self.member("lib", tarfile.DIRTYPE, mode=0o755),
                                       self.member("lib/up", tarfile.SYMTYPE, link="../../../../..")],
                            "entry 'lib/up' is a symbolic link to ../../../../.., which leads out")

    def test_a_source_dir_with_a_device_is_refused(self):
        dev = self.member("disk", tarfile.CHRTYPE)
        dev[0].devmajor, dev[0].devminor = 1, 3
        self.assert_refused("src-dev", [dev], "entry 'disk' is a character device")

    def test_a_source_dir_is_unpacked_without_setuid_bits_or_foreign_owners(self):
        train = self.member("train.py", data=(
            b"import os, stat\n"
            b"st = os.stat('tool')\n"
            b"open(os.environ['SM_MODEL_DIR'] + '/mode', 'w').write('%o %d' % (stat.S_IMODE(st.st_mode), st.st_uid))\n"))
        tool, data = self.member("tool", data=b"#!/bin/sh\n", mode=0o6777)
        tool.uid, tool.gid = 12345, 12345
        tj = self.source_dir_job("src-suid", [train, (tool, data)])
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        with tarfile.open(self.bucket_path("trainyard-test", "output/src-suid/output/model.tar.gz")) as t:
            mode, uid = t.extractfile("./mode").read().decode().split()
        self.assertEqual(mode, "755")
        self.assertNotEqual(uid, "12345")


NOBODY = 65534


def can_drop_to_nobody():
    return os.geteuid() == 0 and shutil.which("setpriv") is not None


@unittest.skipUnless(can_drop_to_nobody(), "needs root and setpriv to start the server as an unprivileged user")
class HostileOutputsUnprivilegedServerTest(HostileOutputsTest):
    """The same jobs with the server (and so the supervisor) running as nobody, with a data
    directory it owns: the credentials file is still the server's, and still must not leak."""

    @classmethod
    def setUpClass(cls):
        cls.wrapper_dir = tempfile.mkdtemp(prefix="trainyard-nobody-")
        cls.wrapper = os.path.join(cls.wrapper_dir, "trainyard")
        with open(cls.wrapper, "w") as f:
            f.write(f'#!/bin/sh\nexec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups {BIN} "$@"\n')
        os.chmod(cls.wrapper, 0o755)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.wrapper_dir, ignore_errors=True)

    def new_server(self, **kw):
        for d in (self.data_dir, self.work_dir):
            os.chown(d, NOBODY, NOBODY)
        return super().new_server(bin=self.wrapper, **kw)

    def give_to_server(self, path):
        while path.startswith(self.data_dir) and path != self.data_dir:
            os.chown(path, NOBODY, NOBODY)
            path = os.path.dirname(path)

    def test_the_server_runs_unprivileged(self):
        self.assertEqual(os.stat(self.credentials).st_uid, NOBODY)


if __name__ == "__main__":
    unittest.main()
