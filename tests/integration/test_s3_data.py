"""Input channels, the object cache, checkpoints and outputs against an S3 endpoint (moto_server),
through the real API: the server is configured to send every bucket to the endpoint."""
import io
import json
import os
import random
import shutil
import tarfile
import tempfile
import time
import unittest

import botocore.exceptions

from harness import MotoPerClass, MotoServer, ServerTest


class S3DataTest(MotoPerClass, ServerTest):
    def setUp(self):
        self.fs_dir = tempfile.mkdtemp(prefix="trainyard-fs-")
        self.server_config = self.moto.object_store_toml(
            ["*"], multipart_threshold_bytes=6291456, multipart_part_bytes=5242880, checkpoint_sync_seconds=1) + f"""
[file_systems]
"fs-0123abcd" = "{self.fs_dir}"
"""
        super().setUp()
        self.s3 = self.moto.client()
        self.bucket = "b-" + self._testMethodName.replace("_", "-")[5:40].strip("-")
        self.s3.create_bucket(Bucket=self.bucket)

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.fs_dir, ignore_errors=True)

    # ---- helpers ----
    def put(self, key, body):
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)

    def keys(self, prefix):
        out = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)

    def get(self, key):
        return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def model_files(self, job):
        """name -> bytes of model.tar.gz in the endpoint."""
        data = self.get(f"output/{job}/output/model.tar.gz")
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
            return {m.name.lstrip("./"): t.extractfile(m).read() for m in t.getmembers() if m.isfile()}

    def channel(self, name, uri, data_type="S3Prefix", **extra):
        s3 = {"S3DataType": data_type, "S3Uri": uri}
        s3.update(extra.pop("s3", {}))
        ch = {"ChannelName": name, "DataSource": {"S3DataSource": s3}}
        ch.update(extra)
        return ch

    def run_job(self, name, command, channels=(), instances=1, statuses=("Completed",), **extra):
        p = self.command_payload(name, command, bucket=self.bucket, **extra)
        if channels:
            p["InputDataConfig"] = list(channels)
        p["ResourceConfig"]["InstanceCount"] = instances
        self.sm.create_training_job(**p)
        tj = self.wait_training(name)
        self.assertIn(tj["TrainingJobStatus"], statuses, tj.get("FailureReason"))
        return tj

    def transition(self, tj, status):
        return next(t["StatusMessage"] for t in tj["SecondaryStatusTransitions"] if t["Status"] == status)

    # ---- input channels ----
    def test_s3_prefix_keeps_relative_paths_and_a_second_job_downloads_nothing(self):
        self.put("data/train/a.csv", b"1,2\n")
        self.put("data/train/sub/b.csv", b"3,4\n")
        self.put("data/trainx/not-mine.csv", b"x")
        list_files = ('cd "$SM_CHANNEL_TRAIN" && find . -type f | sort > "$SM_MODEL_DIR/files.txt" && '
                      'cat sub/b.csv > "$SM_MODEL_DIR/b.txt"')
        ch = self.channel("train", f"s3://{self.bucket}/data/train/")
        first = self.run_job("cache-1", list_files, [ch])
        files = self.model_files("cache-1")
        self.assertEqual(files["files.txt"].decode().split(), ["./a.csv", "./sub/b.csv"])
        self.assertEqual(files["b.txt"], b"3,4\n")
        self.assertIn("Input data: 2 objects (8 bytes) downloaded, 0 objects (0 bytes) reused",
                      self.transition(first, "Training"))
        second = self.run_job("cache-2", list_files, [ch])
        self.assertIn("Input data: 0 objects (0 bytes) downloaded, 2 objects (8 bytes) reused",
                      self.transition(second, "Training"))
        self.assertEqual(self.model_files("cache-2")["files.txt"], files["files.txt"])
        with open(os.path.join(self.data_dir, "attempts", "cache-2", "supervisor.log")) as f:
            self.assertIn("input: downloaded 0 objects (0 bytes), reused 2 objects (8 bytes)", f.read())
        # A changed object is a new ETag: downloaded again, the rest still reused.
        self.put("data/train/a.csv", b"5,6,7\n")
        third = self.run_job("cache-3", list_files, [ch])
        self.assertIn("Input data: 1 objects (6 bytes) downloaded, 1 objects (4 bytes) reused",
                      self.transition(third, "Training"))

    def test_manifest_file_and_sharding_with_a_seeded_shuffle(self):
        for i in range(6):
            self.put(f"data/pool/f{i}", str(i).encode())
        self.put("manifests/m.json", json.dumps(
            [{"prefix": f"s3://{self.bucket}/data/pool/"}, "f1", "f3", "f4"]).encode())
        cmd = ('for c in listed shard; do (cd "$SM_INPUT_DIR/data/$c"; '
               'ls | sort | tr "\\n" " " > "$SM_MODEL_DIR/$SM_CURRENT_HOST-$c"); done')

        def shards(name, seed):
            extra = {"ShuffleConfig": {"Seed": seed}} if seed is not None else {}
            self.run_job(name, cmd, [
                self.channel("listed", f"s3://{self.bucket}/manifests/m.json", "ManifestFile"),
                self.channel("shard", f"s3://{self.bucket}/data/pool/",
                             s3={"S3DataDistributionType": "ShardedByS3Key"}, **extra)], instances=2)
            files = self.model_files(name)
            for host in ("algo-1", "algo-2"):
                self.assertEqual(files[f"{host}-listed"].split(), [b"f1", b"f3", b"f4"])
            return [set(files[f"{h}-shard"].decode().split()) for h in ("algo-1", "algo-2")]

        plain = shards("shard-plain", None)
        self.assertEqual(plain, [{"f0", "f2", "f4"}, {"f1", "f3", "f5"}])  # key order, round robin
        seeded = shards("shard-seed", 7)
        self.assertEqual(seeded[0] | seeded[1], {f"f{i}" for i in range(6)})
        self.assertFalse(seeded[0] & seeded[1])
        self.assertEqual([len(s) for s in seeded], [3, 3])
        self.assertNotEqual(seeded, plain)
        self.assertEqual(shards("shard-seed-again", 7), seeded)  # deterministic

    def test_a_missing_manifest_fails_the_job_with_a_client_error(self):
        tj = self.run_job("no-manifest", "true", [
            self.channel("train", f"s3://{self.bucket}/manifests/missing.json", "ManifestFile")], statuses=("Failed",))
        self.assertTrue(tj["FailureReason"].startswith("ClientError: "), tj["FailureReason"])
        self.assertIn("manifests/missing.json", tj["FailureReason"])
        self.put("manifests/bad.json", b'["not an object"]')
        tj = self.run_job("bad-manifest", "true", [
            self.channel("train", f"s3://{self.bucket}/manifests/bad.json", "ManifestFile")], statuses=("Failed",))
        self.assertIn('{"prefix"', tj["FailureReason"])

    def test_fast_file_is_staged_as_file_mode_and_says_so(self):
        self.put("data/ff/x.bin", b"abc")
        tj = self.run_job("fastfile", 'cat "$SM_CHANNEL_TRAIN/x.bin" > "$SM_MODEL_DIR/x"',
                          [self.channel("train", f"s3://{self.bucket}/data/ff/", InputMode="FastFile")])
        self.assertIn("FastFile input mode is staged as File mode", self.transition(tj, "Downloading"))
        self.assertEqual(self.model_files("fastfile")["x"], b"abc")

    def test_file_system_data_source_is_mounted_not_copied(self):
        os.makedirs(os.path.join(self.fs_dir, "datasets", "d1"))
        with open(os.path.join(self.fs_dir, "datasets", "d1", "big.txt"), "w") as f:
            f.write("on the file system")
        os.chmod(os.path.join(self.fs_dir, "datasets", "d1"), 0o1777)  # jobs run as an unprivileged user
        fs_channel = {"ChannelName": "fsx", "DataSource": {"FileSystemDataSource": {
            "FileSystemId": "fs-0123abcd", "FileSystemAccessMode": "ro", "FileSystemType": "EFS",
            "DirectoryPath": "/datasets/d1"}}}
        tj = self.run_job("fs-ro", 'cat "$SM_CHANNEL_FSX/big.txt" > "$SM_MODEL_DIR/got"; '
                                   'touch "$SM_CHANNEL_FSX/new" 2>/dev/null; true', [fs_channel])
        self.assertEqual(self.model_files("fs-ro")["got"], b"on the file system")
        if "(sandboxed)" in self.transition(tj, "Training"):  # a read-only bind mount
            self.assertFalse(os.path.exists(os.path.join(self.fs_dir, "datasets", "d1", "new")))
        fs_channel["DataSource"]["FileSystemDataSource"]["FileSystemAccessMode"] = "rw"
        self.run_job("fs-rw", 'echo w > "$SM_CHANNEL_FSX/written"', [fs_channel])
        with open(os.path.join(self.fs_dir, "datasets", "d1", "written")) as f:
            self.assertEqual(f.read(), "w\n")

    def test_validation_of_data_sources(self):
        def bad(channel, field):
            with self.assertRaises(botocore.exceptions.ClientError) as e:
                self.sm.create_training_job(**self.command_payload("bad", "true", bucket=self.bucket,
                                                                   InputDataConfig=[channel]))
            self.assertEqual(e.exception.response["Error"]["Code"], "ValidationException")
            self.assertIn(field, e.exception.response["Error"]["Message"])

        bad(self.channel("t", f"s3://{self.bucket}/x", "AugmentedManifestFile"), "S3DataType")
        bad(self.channel("t", f"s3://{self.bucket}/m.json", "ManifestFile", InputMode="FastFile"), "InputMode")
        bad({"ChannelName": "f", "DataSource": {"FileSystemDataSource": {
            "FileSystemId": "fs-99999999", "FileSystemAccessMode": "ro", "FileSystemType": "EFS",
            "DirectoryPath": "/x"}}}, "FileSystemId")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.sm.create_training_job(**self.command_payload(
                "bad", "true", bucket=self.bucket,
                CheckpointConfig={"S3Uri": f"s3://{self.bucket}/c", "LocalPath": "/tmp/ckpt"}))
        self.assertIn("CheckpointConfig.LocalPath", e.exception.response["Error"]["Message"])

    # ---- checkpoints ----
    def test_checkpoints_are_restored_synced_while_training_and_deletes_propagate(self):
        self.put("ckpt/run/old.ckpt", b"old")
        self.put("ckpt/run/stale.ckpt", b"stale")
        flag = os.path.join(self.work_dir, "go-on")
        cmd = ('C="$(dirname "$SM_MODEL_DIR")/checkpoints"; '
               'cat "$C/old.ckpt" > "$SM_MODEL_DIR/restored"; echo 1 > "$C/step-1.ckpt"; rm "$C/stale.ckpt"; '
               f'while [ ! -f {flag} ]; do sleep 0.1; done; echo 2 > "$C/step-2.ckpt"; rm "$C/step-1.ckpt"')
        p = self.command_payload("ckpt", cmd, bucket=self.bucket,
                                 CheckpointConfig={"S3Uri": f"s3://{self.bucket}/ckpt/run"})
        self.sm.create_training_job(**p)
        # While the job waits: the new file is uploaded and the deleted one gone from the store.
        deadline = time.time() + 60
        while self.keys("ckpt/") != ["ckpt/run/old.ckpt", "ckpt/run/step-1.ckpt"]:
            self.assertLess(time.time(), deadline, self.keys("ckpt/"))
            self.assertEqual(self.sm.describe_training_job(TrainingJobName="ckpt")["TrainingJobStatus"], "InProgress")
            time.sleep(0.2)
        open(flag, "w").close()
        tj = self.wait_training("ckpt")
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual(self.model_files("ckpt")["restored"], b"old")
        self.assertEqual(self.keys("ckpt/"), ["ckpt/run/old.ckpt", "ckpt/run/step-2.ckpt"])
        self.assertEqual(self.get("ckpt/run/step-2.ckpt"), b"2\n")

    def test_every_instance_gets_the_checkpoints_and_keeps_its_file_names(self):
        self.put("ckpt/two/shared.ckpt", b"s")
        cmd = ('C="$(dirname "$SM_MODEL_DIR")/checkpoints"; cat "$C/shared.ckpt" > "$SM_MODEL_DIR/$SM_CURRENT_HOST"; '
               'echo "$SM_CURRENT_HOST" > "$C/$SM_CURRENT_HOST.ckpt"')
        self.run_job("ckpt-two", cmd, instances=2, CheckpointConfig={"S3Uri": f"s3://{self.bucket}/ckpt/two/"})
        files = self.model_files("ckpt-two")
        self.assertEqual((files["algo-1"], files["algo-2"]), (b"s", b"s"))
        self.assertEqual(self.keys("ckpt/"), ["ckpt/two/algo-1.ckpt", "ckpt/two/algo-2.ckpt", "ckpt/two/shared.ckpt"])
        self.assertEqual(self.get("ckpt/two/algo-2.ckpt"), b"algo-2\n")

    # ---- outputs ----
    def test_outputs_compressed(self):
        tj = self.run_job("gz", 'echo m > "$SM_MODEL_DIR/m.txt"; echo o > "$SM_OUTPUT_DATA_DIR/o.txt"')
        self.assertEqual(tj["ModelArtifacts"]["S3ModelArtifacts"], f"s3://{self.bucket}/output/gz/output/model.tar.gz")
        self.assertEqual(self.keys("output/gz/"), ["output/gz/output/model.tar.gz", "output/gz/output/output.tar.gz"])
        self.assertEqual(self.model_files("gz")["m.txt"], b"m\n")

    def test_outputs_uncompressed_and_a_large_file_goes_in_parts(self):
        random.seed(3)
        blob = os.path.join(self.work_dir, "blob")
        with open(blob, "wb") as f:
            f.write(random.randbytes(11 * 1024 * 1024))
        tj = self.run_job("plain", f'echo m > "$SM_MODEL_DIR/m.txt"; mkdir "$SM_MODEL_DIR/sub"; '
                                   f'cp {blob} "$SM_MODEL_DIR/sub/blob"; echo o > "$SM_OUTPUT_DATA_DIR/o.txt"',
                          OutputDataConfig={"S3OutputPath": f"s3://{self.bucket}/output", "CompressionType": "NONE"})
        self.assertEqual(tj["ModelArtifacts"]["S3ModelArtifacts"], f"s3://{self.bucket}/output/plain/output/model/")
        self.assertEqual(self.keys("output/plain/"), ["output/plain/output/data/o.txt",
                                                      "output/plain/output/model/m.txt",
                                                      "output/plain/output/model/sub/blob"])
        head = self.s3.head_object(Bucket=self.bucket, Key="output/plain/output/model/sub/blob")
        self.assertTrue(head["ETag"].strip('"').endswith("-3"), head["ETag"])  # 5 + 5 + 1 MiB
        with open(blob, "rb") as f:
            self.assertEqual(self.get("output/plain/output/model/sub/blob"), f.read())

    def test_store_errors_fail_the_job_with_a_client_error_naming_the_object(self):
        tj = self.run_job("no-out-bucket", 'echo m > "$SM_MODEL_DIR/m"', statuses=("Failed",),
                          OutputDataConfig={"S3OutputPath": "s3://no-such-output-bucket/out"})
        self.assertTrue(tj["FailureReason"].startswith("ClientError: "), tj["FailureReason"])
        self.assertIn("s3://no-such-output-bucket/out/no-out-bucket/output/model.tar.gz", tj["FailureReason"])
        self.assertIn("NoSuchBucket", tj["FailureReason"])
        self.assertEqual(tj["ModelArtifacts"]["S3ModelArtifacts"], "")  # nothing was uploaded
        tj = self.run_job("no-ckpt-bucket", "true", statuses=("Failed",),
                          CheckpointConfig={"S3Uri": "s3://no-such-ckpt-bucket/c"})
        self.assertIn("CheckpointConfig", tj["FailureReason"])
        self.assertIn("NoSuchBucket", tj["FailureReason"])

    def test_spec_file_is_private(self):
        self.run_job("private", "true")
        mode = os.stat(os.path.join(self.data_dir, "attempts", "private", "spec.json")).st_mode & 0o777
        self.assertEqual(mode, 0o600)


class MixedRoutingTest(ServerTest):
    """Only the listed bucket is on the endpoint; the others stay in <data_dir>/buckets."""

    def setUp(self):
        self.moto = MotoServer().start()
        self.server_config = self.moto.object_store_toml(["remote-data"])
        super().setUp()
        self.s3 = self.moto.client()
        self.s3.create_bucket(Bucket="remote-data")

    def tearDown(self):
        super().tearDown()
        self.moto.stop()

    def test_listed_bucket_is_remote_and_the_rest_local(self):
        self.s3.put_object(Bucket="remote-data", Key="in/r.txt", Body=b"remote")
        os.makedirs(self.bucket_path("local-data", "in"))
        with open(self.bucket_path("local-data", "in/l.txt"), "w") as f:
            f.write("local")
        p = self.command_payload("mixed", 'cat "$SM_CHANNEL_R/r.txt" "$SM_CHANNEL_L/l.txt" > "$SM_MODEL_DIR/both"',
                                 bucket="local-data")
        p["InputDataConfig"] = [
            {"ChannelName": "r", "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://remote-data/in/"}}},
            {"ChannelName": "l", "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://local-data/in/"}}}]
        self.sm.create_training_job(**p)
        tj = self.wait_training("mixed")
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        # The output bucket is local: the archive is a file under <data_dir>/buckets.
        archive = self.bucket_path("local-data", "output/mixed/output/model.tar.gz")
        with tarfile.open(archive) as t:
            self.assertEqual(t.extractfile("./both").read(), b"remotelocal")
        self.assertNotIn("Contents", self.s3.list_objects_v2(Bucket="remote-data", Prefix="output/"))
        # Only the remote object went through the cache.
        self.assertIn("Input data: 1 objects (6 bytes) downloaded, 0 objects (0 bytes) reused",
                      next(t["StatusMessage"] for t in tj["SecondaryStatusTransitions"] if t["Status"] == "Training"))


if __name__ == "__main__":
    unittest.main()
