"""Where a job finds an S3Prefix channel's objects: SageMaker strips the whole prefix from each key,
whether or not the URI ends with '/', in File and FastFile modes; checked with the embedded store
and with buckets on an S3 endpoint (moto_server)."""
import io
import os
import tarfile
import unittest

from harness import MotoPerClass, ServerTest

KEYS = {"data/train/a.csv": b"1,2\n", "data/train/sub/b.csv": b"3,4\n", "data/trainer.csv": b"5\n"}

# channel name -> (URI suffix after s3://<bucket>/, input mode, the files the job must list)
CHANNELS = {
    "file-slash": ("data/train/", "File", ["./a.csv", "./sub/b.csv"]),
    # Without the '/' the prefix also matches data/trainer.csv, whose rest is er.csv.
    "file-plain": ("data/train", "File", ["./a.csv", "./er.csv", "./sub/b.csv"]),
    "fast-slash": ("data/train/", "FastFile", ["./a.csv", "./sub/b.csv"]),
    "fast-plain": ("data/train", "FastFile", ["./a.csv", "./er.csv", "./sub/b.csv"]),
    # A prefix that ends mid-name keeps the rest of each name: in/a.csv and iner.csv.
    "mid-name": ("data/tra", "File", ["./in/a.csv", "./in/sub/b.csv", "./iner.csv"]),
    # A URI naming one object places it under its own name.
    "one-object": ("data/train/a.csv", "File", ["./a.csv"]),
}


class ChannelLayoutCases:
    """The cases, for a store given by put(key, body) and model_tar(job) -> bytes."""

    def run_layout_job(self, name):
        channels = [{"ChannelName": ch, "InputMode": mode, "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": f"s3://{self.bucket}/{suffix}"}}}
            for ch, (suffix, mode, _) in CHANNELS.items()]
        listing = ('for c in ' + " ".join(CHANNELS) + '; do (cd "$SM_INPUT_DIR/data/$c" && find . -type f | sort) '
                   '> "$SM_MODEL_DIR/$c.txt" || exit 1; done; cp "$SM_INPUT_DIR/data/file-plain/a.csv" "$SM_MODEL_DIR/a"')
        p = self.command_payload(name, listing, bucket=self.bucket, InputDataConfig=channels)
        self.sm.create_training_job(**p)
        tj = self.wait_training(name)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        with tarfile.open(fileobj=io.BytesIO(self.model_tar(name)), mode="r:gz") as t:
            return {m.name.lstrip("./"): t.extractfile(m).read() for m in t.getmembers() if m.isfile()}

    def test_both_uri_forms_present_the_objects_at_the_channel_root(self):
        for key, body in KEYS.items():
            self.put(key, body)
        files = self.run_layout_job("layout")
        for ch, (_, _, expected) in CHANNELS.items():
            self.assertEqual(files[f"{ch}.txt"].decode().split(), expected, ch)
        self.assertEqual(files["a"], b"1,2\n")

    def test_keys_placed_on_one_path_fail_the_job_naming_both(self):
        self.put("data/x", b"named by the URI: placed at x")
        self.put("data/xx", b"the key minus data/x is x as well")
        p = self.command_payload("clash", "true", bucket=self.bucket, InputDataConfig=[
            {"ChannelName": "train", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": f"s3://{self.bucket}/data/x"}}}])
        self.sm.create_training_job(**p)
        tj = self.wait_training("clash")
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertTrue(tj["FailureReason"].startswith("ClientError: "), tj["FailureReason"])
        self.assertIn("'data/x' and 'data/xx'", tj["FailureReason"])


class EmbeddedStoreLayoutTest(ChannelLayoutCases, ServerTest):
    bucket = "trainyard-test"

    def put(self, key, body):
        path = self.bucket_path(self.bucket, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(body)

    def model_tar(self, job):
        with open(self.bucket_path(self.bucket, f"output/{job}/output/model.tar.gz"), "rb") as f:
            return f.read()


class EndpointLayoutTest(MotoPerClass, ChannelLayoutCases, ServerTest):
    bucket = "layout-remote"
    def setUp(self):
        self.server_config = self.moto.object_store_toml(["*"])
        super().setUp()
        self.s3 = self.moto.client()
        # moto keeps its buckets across tests: each test starts from an empty one.
        try:
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
                for o in page.get("Contents", []):
                    self.s3.delete_object(Bucket=self.bucket, Key=o["Key"])
        except self.s3.exceptions.NoSuchBucket:
            self.s3.create_bucket(Bucket=self.bucket)

    def put(self, key, body):
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)

    def model_tar(self, job):
        return self.s3.get_object(Bucket=self.bucket, Key=f"output/{job}/output/model.tar.gz")["Body"].read()


if __name__ == "__main__":
    unittest.main()
