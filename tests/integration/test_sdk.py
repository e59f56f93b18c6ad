"""The seed notebook (training queues with fair share, ModelTrainer with SourceCode and
requirements, three channels) run with the trainyard SDK against `trainyard serve`.

The notebook's code is kept as it is but for its imports (trainyard... for sagemaker...) and two
test-only settings: the job's environment names a gate file (so the first job stays RUNNING
while the high-priority job is submitted) and the queue's arrival batch is closed by moving the
server's clock, so the order does not depend on how fast the submissions land.

Every client the SDK makes (STS, S3, Batch, SageMaker, Logs) finds the server through
AWS_ENDPOINT_URL alone: the SDK's uploads land in the server's embedded buckets, which the jobs
read as their channels.
"""
import contextlib
import io
import json
import os
import sys
import tarfile
import tempfile
import time
import unittest

import boto3

from harness import REGION, SOURCE_DIR, ServerTest

sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))

# ---- the notebook's imports, changed to the trainyard package ----
from trainyard import Session  # noqa: E402  (sagemaker.Session)
from trainyard.train import ModelTrainer  # noqa: E402
from trainyard.train.configs import Compute, InputData, SourceCode, StoppingCondition  # noqa: E402
from trainyard.aws_batch import TrainingQueue  # noqa: E402

EXAMPLE = os.path.join(SOURCE_DIR, "examples", "sdk")
sys.path.insert(0, EXAMPLE)
import make_data  # noqa: E402

ROLE = "arn:aws:iam::000000000000:role/SageMakerRole"


class SdkSeedNotebookTest(ServerTest):
    server_args = ["--clock=offset"]

    def setUp(self):
        # One arrival batch (closed by the test) holds the first submissions, as if they had all
        # been submitted in the same instant.
        self.server_config = "[scheduler]\nbatch_ms = 60000\n"
        super().setUp()
        key, secret = self.server.credentials()
        self.saved_env = dict(os.environ)
        for k in [k for k in os.environ if k.startswith("AWS_")]:
            del os.environ[k]
        os.environ.update({"AWS_ENDPOINT_URL": self.server.url, "AWS_ACCESS_KEY_ID": key,
                           "AWS_SECRET_ACCESS_KEY": secret, "AWS_DEFAULT_REGION": REGION,
                           "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull})
        self.data = tempfile.mkdtemp(prefix="trainyard-sdk-data-", dir=self.work_dir)
        make_data.make(self.data)
        self.gate = os.path.join(self.work_dir, "go")

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.saved_env)
        super().tearDown()

    def create_resources(self):
        """create_resources.py's fair-share queue: shares HIGHPRI 1, MIDPRI 3, LOWPRI 5 on a
        service environment of one instance, so jobs queue."""
        arn = self.batch.create_scheduling_policy(
            name="ml-g6-12xlarge-sp",
            fairsharePolicy={"shareDecaySeconds": 3600, "shareDistribution": [
                {"shareIdentifier": "HIGHPRI", "weightFactor": 1},
                {"shareIdentifier": "MIDPRI", "weightFactor": 3},
                {"shareIdentifier": "LOWPRI", "weightFactor": 5}]})["arn"]
        self.batch.create_service_environment(
            serviceEnvironmentName="ml-g6-12xlarge-fss", serviceEnvironmentType="SAGEMAKER_TRAINING",
            state="ENABLED", capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}])
        self.batch.create_job_queue(
            jobQueueName="ml-g6-12xlarge-queue", jobQueueType="SAGEMAKER_TRAINING", state="ENABLED",
            priority=1, schedulingPolicyArn=arn,
            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "ml-g6-12xlarge-fss"}])

    def statuses(self, jobs):
        return {j.job_name: j.describe()["status"] for j in jobs}

    def wait_until(self, what, predicate, jobs, timeout=90):
        deadline = time.time() + timeout
        while True:
            seen = self.statuses(jobs)
            if predicate(seen):
                return seen
            if time.time() > deadline:
                self.fail(f"timed out waiting for {what}: {seen}\n{self.server.read_log()}")
            time.sleep(0.1)

    def test_seed_notebook_order_and_artifacts(self):
        self.create_resources()

        # ---- the notebook ----
        sagemaker_session = Session()
        bucket = sagemaker_session.default_bucket()
        prefix = "sdk-seed"
        train_s3 = sagemaker_session.upload_data(os.path.join(self.data, "train"), bucket, f"{prefix}/data/train")
        val_s3 = sagemaker_session.upload_data(os.path.join(self.data, "validation"), bucket, f"{prefix}/data/validation")
        test_s3 = sagemaker_session.upload_data(os.path.join(self.data, "test"), bucket, f"{prefix}/data/test")

        source_code = SourceCode(source_dir=os.path.join(EXAMPLE, "code"), requirements="requirements.txt",
                                 entry_script="train.py")
        model_trainer = ModelTrainer(
            training_image="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-cpu-py311",
            source_code=source_code,
            base_job_name="sdk-seed",
            compute=Compute(instance_type="ml.m5.large", instance_count=1, volume_size_in_gb=1),
            stopping_condition=StoppingCondition(max_runtime_in_seconds=300),
            hyperparameters={"epochs": 20, "lr": 0.5},
            role=ROLE,
            environment={"GATE": self.gate},  # test only: hold the first job until the high job is queued
        )
        TRAINING_INPUTS = [
            InputData(channel_name="train", data_source=train_s3),
            InputData(channel_name="validation", data_source=val_s3),
            InputData(channel_name="test", data_source=test_s3),
        ]
        queue = TrainingQueue("ml-g6-12xlarge-queue")
        low = [queue.submit(model_trainer, TRAINING_INPUTS, f"low-pri-{i}", priority=5, share_identifier="LOWPRI")
               for i in range(2)]
        mid = [queue.submit(model_trainer, TRAINING_INPUTS, f"mid-pri-{i}", priority=5, share_identifier="MIDPRI")
               for i in range(2)]

        # ---- the seed's order ----
        self.assertEqual(bucket, f"sagemaker-{REGION}-{sagemaker_session.account_id()}")
        self.wait_until("the arrival batch", lambda s: all(v == "RUNNABLE" for v in s.values()), low + mid)
        self.advance(60)  # closes the batch: all four are weighed together
        seen = self.wait_until("one job running", lambda s: "RUNNING" in s.values(), low + mid)
        running = [n for n, s in seen.items() if s in ("SCHEDULED", "STARTING", "RUNNING")]
        self.assertEqual(len(running), 1, seen)
        self.assertTrue(running[0].startswith("mid-pri-"), f"MIDPRI should start before LOWPRI: {seen}")

        high = queue.submit(model_trainer, TRAINING_INPUTS, "high-pri-0", priority=5, share_identifier="HIGHPRI")
        self.wait_until("high queued", lambda s: s["high-pri-0"] == "RUNNABLE", [high])
        with open(self.gate, "w"):
            pass
        everything = low + mid + [high]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            final = high.wait(timeout=240, logs=True, poll=0.2)
        self.assertEqual(final["status"], "SUCCEEDED", final.get("statusReason"))
        log = out.getvalue()
        self.assertIn("channels: train=200 validation=50 test=50 rows", log)
        self.assertIn("test_loss=", log)
        self.assertIn("installing requirements", log)
        results = {j.job_name: j.result(timeout=240) for j in everything}
        order = sorted(results, key=lambda n: results[n]["startedAt"])
        self.assertTrue(order[0].startswith("mid-pri-"), order)
        self.assertEqual(order[1], "high-pri-0", f"HIGHPRI should start before the waiting LOWPRI: {order}")
        other_mid = ({"mid-pri-0", "mid-pri-1"} - {order[0]}).pop()
        self.assertEqual(set(order[2:]), {"low-pri-0", "low-pri-1", other_mid})

        # ---- what the SDK sent, and what the jobs left ----
        d = results["high-pri-0"]
        self.assertEqual((d["schedulingPriority"], d["shareIdentifier"]), (5, "HIGHPRI"))
        self.assertEqual(d["timeoutConfig"], {"attemptDurationSeconds": 86400})
        payload = json.loads(d["serviceRequestPayload"])
        channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in payload["InputDataConfig"]}
        self.assertEqual(sorted(channels), ["code", "sm_drivers", "test", "train", "validation"])
        self.assertEqual(channels["train"], f"s3://{bucket}/sdk-seed/data/train")
        job_name = payload["TrainingJobName"]
        self.assertEqual(channels["sm_drivers"], f"s3://{bucket}/sdk-seed/{job_name}/input/sm_drivers")
        self.assertEqual(payload["AlgorithmSpecification"]["ContainerEntrypoint"], ["/bin/bash"])
        self.assertEqual(payload["OutputDataConfig"]["S3OutputPath"], f"s3://{bucket}/sdk-seed")
        s3 = boto3.client("s3")
        body = s3.get_object(Bucket=bucket, Key=f"sdk-seed/{job_name}/output/model.tar.gz")["Body"].read()
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as t:
            model = json.load(t.extractfile("./model.json"))
        self.assertAlmostEqual(model["a"], 3, delta=1.5)

        # ---- list_jobs / get_job ----
        self.assertEqual(sorted(j.job_name for j in queue.list_jobs(status="SUCCEEDED")), sorted(results))
        self.assertEqual(queue.get_job("mid-pri-1").job_arn, mid[1].job_arn)
        with self.assertRaises(ValueError):
            queue.get_job("no-such-job")


if __name__ == "__main__":
    unittest.main()
