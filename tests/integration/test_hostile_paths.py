"""Hostile names and paths: object keys that would leave the embedded store, manifest prefixes
that climb out of a bucket, channel and job names that are paths, and metric regexes that do not
compile. Each is refused with an AWS-shaped error naming the field and the rule, and nothing is
written or staged outside the store."""
import json
import os
import shutil
import tempfile
import unittest

from botocore.exceptions import ClientError

from harness import ServerTest

BUCKET = "trainyard-test"


class HostilePathsTest(ServerTest):
    def setUp(self):
        super().setUp()
        # Where an absolute-path key would land if it were accepted: a fresh directory outside
        # the data directory, so "nothing was written there" is a real observation.
        self.outside = tempfile.mkdtemp(prefix="trainyard-outside-")
        os.rmdir(self.outside)  # the job would have to create it
        self.create_queue("hq", capacity=1)
        # botocore checks some patterns client-side; turn that off to reach the server's checks.
        self.sm = self.server.client("sagemaker", validate=False)
        self.batch = self.server.client("batch", validate=False)
        os.makedirs(self.bucket_path(BUCKET, "data/train"), exist_ok=True)
        with open(self.bucket_path(BUCKET, "data/train/a.csv"), "w") as f:
            f.write("1,2\n")

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.outside, ignore_errors=True)

    def refused(self, fn, **kw):
        with self.assertRaises(ClientError) as e:
            fn(**kw)
        err = e.exception.response["Error"]
        return err["Code"], err["Message"]

    def assertNothingCreated(self):
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])
        for status in ("SUBMITTED", "RUNNABLE", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED"):
            self.assertEqual(self.batch.list_service_jobs(jobQueue="hq", jobStatus=status)["jobSummaryList"], [])
        self.assertFalse(os.path.exists(self.outside), f"{self.outside} was written")

    def channel(self, uri, name="train", data_type="S3Prefix"):
        return {"ChannelName": name, "DataSource": {"S3DataSource": {"S3DataType": data_type, "S3Uri": uri}}}

    def check_refused_both_ways(self, payload, field, *words):
        """payload is refused by CreateTrainingJob (ValidationException) and SubmitServiceJob
        (ClientException), each naming `field` and `words`; nothing is created or written."""
        code, msg = self.refused(self.sm.create_training_job, **payload)
        self.assertEqual(code, "ValidationException", msg)
        for w in (field,) + words:
            self.assertIn(w, msg)
        code, msg = self.refused(self.batch.submit_service_job, jobName="j", jobQueue="hq",
                                 serviceJobType="SAGEMAKER_TRAINING", serviceRequestPayload=json.dumps(payload))
        self.assertEqual(code, "ClientException", msg)
        for w in (field,) + words:
            self.assertIn(w, msg)
        self.assertNothingCreated()

    # ---- an empty first key segment made the key an absolute host path ----
    def test_output_path_with_an_absolute_key_is_refused(self):
        payload = self.command_payload("abs-out", "echo x > $SM_MODEL_DIR/m",
                                       OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/{self.outside}"})
        self.assertIn("//", payload["OutputDataConfig"]["S3OutputPath"])
        self.check_refused_both_ways(payload, "OutputDataConfig.S3OutputPath", "'/'")

    def test_input_checkpoint_and_submit_directory_with_an_absolute_key_are_refused(self):
        bad = f"s3://{BUCKET}/{self.outside}"
        cases = {
            "InputDataConfig[0].DataSource.S3DataSource.S3Uri":
                self.command_payload("abs-in", "true", InputDataConfig=[self.channel(bad + "/")]),
            "CheckpointConfig.S3Uri":
                self.command_payload("abs-ckpt", "echo x > /opt/ml/checkpoints/c",
                                     CheckpointConfig={"S3Uri": bad, "LocalPath": "/opt/ml/checkpoints"}),
            "HyperParameters.sagemaker_submit_directory":
                self.script_payload("abs-src", HyperParameters={"sagemaker_program": "train.py",
                                                                 "sagemaker_submit_directory": bad + "/s.tar.gz"}),
        }
        for field, payload in cases.items():
            with self.subTest(field=field):
                self.check_refused_both_ways(payload, field, "'/'")

    def test_dot_segments_and_empty_segments_in_keys_are_refused(self):
        for uri, rule in ((f"s3://{BUCKET}/data/../../", "'..'"), (f"s3://{BUCKET}/data/./train/", "'.'"),
                          (f"s3://{BUCKET}/data//train/", "empty"), (f"s3://{BUCKET}/data/tr\x01ain/", "control")):
            with self.subTest(uri=uri):
                self.check_refused_both_ways(self.command_payload("dots", "true", InputDataConfig=[self.channel(uri)]),
                                             "S3Uri", rule)

    # ---- a manifest's prefix is read at staging time, after the API's checks ----
    def test_manifest_prefix_that_climbs_out_of_the_bucket_fails_the_job_and_stages_nothing(self):
        # Two levels up from the bucket is the data directory: its credentials file and every
        # attempt's spec.json (with the object store's secret key) would be staged as input.
        os.makedirs(self.bucket_path(BUCKET, "manifests"), exist_ok=True)
        with open(self.bucket_path(BUCKET, "manifests/m.json"), "w") as f:
            json.dump([{"prefix": f"s3://{BUCKET}/../../"}, "credentials"], f)
        staged = os.path.join(self.work_dir, "staged")
        self.sm.create_training_job(**self.command_payload(
            "manifest-climb", f'cp -r "$SM_CHANNEL_TRAIN" {staged}',
            InputDataConfig=[self.channel(f"s3://{BUCKET}/manifests/m.json", data_type="ManifestFile")]))
        tj = self.wait_training("manifest-climb")
        self.assertEqual(tj["TrainingJobStatus"], "Failed", tj.get("FailureReason"))
        reason = tj["FailureReason"]
        self.assertTrue(reason.startswith("ClientError: "), reason)
        self.assertIn("manifests/m.json", reason)
        self.assertIn("prefix", reason)
        self.assertIn("'..'", reason)
        self.assertFalse(os.path.exists(staged), "the job ran with the data dir staged as its input")
        for root, _, files in os.walk(os.path.join(self.data_dir, "attempts")):
            for name in files:
                path = os.path.join(root, name)
                if name == "credentials" and not os.path.islink(path):
                    self.fail(f"the server's credentials file was staged at {path}")

    def test_manifest_entry_that_climbs_out_of_its_prefix_fails_the_job(self):
        os.makedirs(self.bucket_path(BUCKET, "manifests"), exist_ok=True)
        with open(self.bucket_path(BUCKET, "manifests/m.json"), "w") as f:
            json.dump([{"prefix": f"s3://{BUCKET}/data/"}, "train/a.csv", "train//a.csv"], f)
        self.sm.create_training_job(**self.command_payload(
            "manifest-entry", "true",
            InputDataConfig=[self.channel(f"s3://{BUCKET}/manifests/m.json", data_type="ManifestFile")]))
        tj = self.wait_training("manifest-entry")
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertIn("train//a.csv", tj["FailureReason"])
        self.assertIn("empty", tj["FailureReason"])

    # ---- channel names become directories under /opt/ml/input/data/ ----
    def test_channel_names_dot_and_dotdot_are_refused(self):
        for name in ("..", "."):
            with self.subTest(name=name):
                payload = self.command_payload("chan", "true", InputDataConfig=[
                    self.channel(f"s3://{BUCKET}/data/train/", name=name)])
                self.check_refused_both_ways(payload, "InputDataConfig[0].ChannelName", repr(name))

    # ---- job names ----
    def test_batch_job_names_follow_the_aws_rule(self):
        payload = json.dumps(self.command_payload("named", "true"))
        for name in ("../x", "a" * 129, "a\nb", "-x", "a.b"):
            with self.subTest(name=name):
                code, msg = self.refused(self.batch.submit_service_job, jobName=name, jobQueue="hq",
                                         serviceJobType="SAGEMAKER_TRAINING", serviceRequestPayload=payload)
                self.assertEqual(code, "ClientException", msg)
                self.assertIn("jobName", msg)
                # The rule broken, in AWS's words: the length, or the pattern of allowed characters.
                self.assertRegex(msg, r"less than or equal to 128|pattern: \[a-zA-Z0-9\]\[a-zA-Z0-9_-\]\*")
                self.assertNothingCreated()
        job = self.batch.submit_service_job(jobName="A" * 128, jobQueue="hq", serviceJobType="SAGEMAKER_TRAINING",
                                            serviceRequestPayload=payload)
        self.assertTrue(job["jobId"])

    def test_training_job_names_follow_the_sagemaker_rule(self):
        for name in ("../x", "a_b", "a" * 64, "-a", "a-"):
            with self.subTest(name=name):
                self.check_refused_both_ways(self.command_payload(name, "true"), "TrainingJobName")

    # ---- metric definitions ----
    def test_metric_regex_that_does_not_compile_is_refused(self):
        payload = self.command_payload("metrics", "echo loss=1")
        payload["AlgorithmSpecification"]["MetricDefinitions"] = [
            {"Name": "ok", "Regex": "acc=([0-9.]+)"}, {"Name": "train:loss", "Regex": "loss=([0-9.]+"}]
        self.check_refused_both_ways(payload, "MetricDefinitions[1]", "train:loss", "missing )")

    def test_metric_regex_without_a_capturing_group_is_refused(self):
        payload = self.command_payload("metrics", "echo loss=1")
        payload["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=[0-9.]+"}]
        self.check_refused_both_ways(payload, "MetricDefinitions[0]", "capturing group")


if __name__ == "__main__":
    unittest.main()
