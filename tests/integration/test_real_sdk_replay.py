"""The calls the real SageMaker Python SDK makes, replayed with boto3 against `trainyard serve` alone,
in the SDK's order and with its parameters; each answer is checked for what the SDK reads from it.

Read from aws/sagemaker-python-sdk (sagemaker-core: sagemaker/core/helper/session_helper.py,
sagemaker/core/logs.py, sagemaker/core/utils/logs.py; sagemaker-train: sagemaker/train/model_trainer.py,
sagemaker/train/aws_batch/). Each step names the SDK function it replays.

TRAINYARD_REPLAY_S3_ON_MOTO=1 sends the S3 and STS steps to a moto_server instead (and the jobs'
buckets with them), for checking the replay where trainyard's S3 endpoint is not built."""
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
import unittest

import boto3
import botocore.config
import botocore.exceptions

from harness import REGION, MotoPerClass, ServerTest

ON_MOTO = os.environ.get("TRAINYARD_REPLAY_S3_ON_MOTO") == "1"

# sagemaker/train/constants.py: the driver channel and ModelTrainer's container command.
SM_DRIVERS_CONTAINER_PATH = "/opt/ml/input/data/sm_drivers"
DEFAULT_CONTAINER_ENTRYPOINT = ["/bin/bash"]
DEFAULT_CONTAINER_ARGUMENTS = ["-c", f"chmod +x {SM_DRIVERS_CONTAINER_PATH}/sm_train.sh "
                                     f"&& {SM_DRIVERS_CONTAINER_PATH}/sm_train.sh"]
# sagemaker/train/aws_batch/constants.py
DEFAULT_TIMEOUT = {"attemptDurationSeconds": 86400}
DEFAULT_SAGEMAKER_TRAINING_RETRY_CONFIG = {
    "attempts": 1,
    "evaluateOnExit": [
        {"action": "RETRY", "onStatusReason": "Received status from SageMaker:InternalServerError: "
                                              "We encountered an internal error. Please try again."},
        {"action": "EXIT", "onStatusReason": "*"}]}

# A stand-in for the SDK's sm_train.sh (which runs its Python drivers): it finds the user's code in
# the code channel and runs the entry script, as the real one does.
SM_TRAIN_SH = """#!/bin/bash
set -e
cd /opt/ml/input/data/code
echo "channels: $(cd /opt/ml/input/data && ls | sort | tr '\\n' ' ')"
echo "train: $(cd /opt/ml/input/data/train && find . -type f | sort | tr '\\n' ' ')"
python3 train.py
"""
TRAIN_PY = """import os
rows = open(os.path.join(os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"), "a.csv")).read().split()
for epoch in range(3):
    print(f"epoch={epoch} loss={1.0 / (epoch + 1):.3f}", flush=True)
open("/opt/ml/model/model.txt", "w").write(f"trained on {len(rows)} rows\\n")
"""


class RealSdkReplayTest(MotoPerClass, ServerTest):
    start_moto = ON_MOTO
    def setUp(self):
        if ON_MOTO:
            self.server_config = self.moto.object_store_toml(["*"])
        super().setUp()
        self.local = tempfile.mkdtemp(prefix="trainyard-sdk-")
        # The SDK's clients: boto3.Session clients on one endpoint (sagemaker.Session(boto_session=...,
        # sagemaker_client=..., ...) or AWS_ENDPOINT_URL), with the server's credentials.
        key, secret = self.server.credentials()
        self.boto_session = boto3.Session(aws_access_key_id=key, aws_secret_access_key=secret, region_name=REGION)
        s3_url = self.moto.url if ON_MOTO else self.server.url
        cfg = botocore.config.Config(retries={"max_attempts": 1})
        if ON_MOTO:
            self.s3_resource = boto3.resource("s3", endpoint_url=s3_url, region_name=REGION, config=cfg,
                                              aws_access_key_id="testing", aws_secret_access_key="testing")
            self.sts = boto3.client("sts", endpoint_url=s3_url, region_name=REGION, config=cfg,
                                    aws_access_key_id="testing", aws_secret_access_key="testing")
        else:
            self.s3_resource = self.boto_session.resource("s3", endpoint_url=s3_url, config=cfg)
            self.sts = self.boto_session.client("sts", endpoint_url=s3_url, config=cfg)
        self.s3 = self.s3_resource.meta.client
        self.logs = self.boto_session.client("logs", endpoint_url=self.server.url,
                                             config=botocore.config.Config(retries={"max_attempts": 15}))

    def tearDown(self):
        shutil.rmtree(self.local, ignore_errors=True)
        super().tearDown()

    def write(self, rel, text):
        path = os.path.join(self.local, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    # ---- Session.default_bucket() ----
    def default_bucket(self):
        # Session.generate_default_sagemaker_bucket_name: sts.get_caller_identity()["Account"]
        ident = self.sts.get_caller_identity()
        account = ident["Account"]
        self.assertRegex(account, r"^[0-9]{12}$")
        self.assertIn("Arn", ident)
        bucket = f"sagemaker-{REGION}-{account}"
        # Session._create_s3_bucket_if_it_does_not_exist: s3.Bucket(name).creation_date, which
        # boto3 loads with list_buckets and a search by name.
        self.assertIsNone(self.s3_resource.Bucket(bucket).creation_date)
        # general_bucket_check_if_user_has_permission: head_bucket with ExpectedBucketOwner (the
        # SDK named the bucket); a missing bucket must be Code "404", Message "Not Found".
        with self.assertRaises(botocore.exceptions.ClientError) as cm:
            self.s3.head_bucket(Bucket=bucket, ExpectedBucketOwner=account)
        err = cm.exception.response["Error"]
        self.assertEqual((err["Code"], err["Message"]), ("404", "Not Found"))
        # create_bucket_for_not_exist_error: us-east-1 takes no CreateBucketConfiguration.
        self.s3_resource.create_bucket(Bucket=bucket)
        # A second Session: the bucket now has a creation date, and the owner check passes.
        self.assertIsNotNone(boto3.resource("s3", endpoint_url=self.s3.meta.endpoint_url, region_name=REGION,
                                            aws_access_key_id=self.s3._request_signer._credentials.access_key,
                                            aws_secret_access_key=self.s3._request_signer._credentials.secret_key)
                             .Bucket(bucket).creation_date)
        self.s3.head_bucket(Bucket=bucket, ExpectedBucketOwner=account)  # expected_bucket_owner_id_bucket_check
        return bucket, account

    # ---- Session.upload_data(path, bucket, key_prefix) ----
    def upload_data(self, path, bucket, key_prefix, account):
        files = []
        for dirpath, _, names in os.walk(path):
            for name in names:
                rel = "" if dirpath == path else os.path.relpath(dirpath, path) + "/"
                files.append((os.path.join(dirpath, name), f"{key_prefix}/{rel}{name}"))
        for local_path, key in files:
            # s3.Object(bucket, key).upload_file(local_path, ExtraArgs={"ExpectedBucketOwner": ...})
            self.s3_resource.Object(bucket, key).upload_file(local_path, ExtraArgs={"ExpectedBucketOwner": account})
        return f"s3://{bucket}/{key_prefix}"  # a directory's URI has no trailing '/'

    def model_trainer_request(self, bucket, account, job, base):
        """ModelTrainer._create_training_job_args: uploads the code, the drivers and the data
        channels under <base>/<job>/input/<channel> and builds CreateTrainingJob's request."""
        code = os.path.join(self.local, "src")
        self.write("src/train.py", TRAIN_PY)
        drivers = os.path.join(self.local, "drivers")
        self.write("drivers/sm_train.sh", SM_TRAIN_SH)
        self.write("drivers/sourcecode.json", json.dumps({"entry_script": "train.py"}))
        data = os.path.join(self.local, "data")
        self.write("data/a.csv", "1,2\n3,4\n")
        self.write("data/sub/b.csv", "5,6\n")
        prefix = f"{base}/{job}/input"

        def channel(name, uri):
            return {"ChannelName": name, "InputMode": "File", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": uri, "S3DataDistributionType": "FullyReplicated"}}}

        # create_input_data_channel for each InputData, then the code and sm_drivers channels.
        channels = [channel("train", self.upload_data(data, bucket, f"{prefix}/train", account)),
                    channel("code", self.upload_data(code, bucket, f"{prefix}/code", account)),
                    channel("sm_drivers", self.upload_data(drivers, bucket, f"{prefix}/sm_drivers", account))]
        return {
            "TrainingJobName": job,
            "AlgorithmSpecification": {
                "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-cpu-py311",
                "TrainingInputMode": "File",
                "ContainerEntrypoint": DEFAULT_CONTAINER_ENTRYPOINT,
                "ContainerArguments": DEFAULT_CONTAINER_ARGUMENTS,
                "MetricDefinitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]},
            "HyperParameters": {"epochs": "3"},
            "InputDataConfig": channels,
            "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 30},
            "RoleArn": f"arn:aws:iam::{account}:role/SageMakerRole",
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
            "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/{base}", "CompressionType": "GZIP"},
            "EnableManagedSpotTraining": False,
        }

    # ---- TrainingJob.wait / Session.logs_for_job ----
    def wait_describing(self, job):
        """_wait_until + the describe_training_job polling of logs_for_job: what it reads."""
        deadline = time.time() + 120
        while True:
            desc = self.sm.describe_training_job(TrainingJobName=job)
            self.assertIn(desc["TrainingJobStatus"], ("InProgress", "Completed", "Failed", "Stopped"))
            self.assertIsInstance(desc["ResourceConfig"]["InstanceCount"], int)  # _logs_init
            self.assertIn("LastModifiedTime", desc)  # secondary_training_status_message
            for t in desc.get("SecondaryStatusTransitions", []):
                self.assertIn("Status", t)
                self.assertIn("StartTime", t)
                self.assertIn("StatusMessage", t)
            if desc["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
                return desc
            self.assertLess(time.time(), deadline, f"{job} did not finish")
            time.sleep(0.2)

    def read_logs(self, job, instance_count):
        """_flush_log_streams, multi_stream_iter and log_stream: the streams of the job, then every
        event of each from the head, following nextForwardToken until a page is empty."""
        streams = self.logs.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs",
                                                 logStreamNamePrefix=job + "/", orderBy="LogStreamName",
                                                 limit=min(instance_count, 50))
        names = [s["logStreamName"] for s in streams["logStreams"]]
        self.assertEqual(len(names), instance_count, streams)
        self.assertRegex(names[0], rf"^{re.escape(job)}/algo-1-[0-9]+$")
        messages = []
        for name in names:
            token_arg = {}
            while True:
                resp = self.logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=name,
                                                startTime=0, startFromHead=True, **token_arg)
                token_arg = {"nextToken": resp["nextForwardToken"]}
                if not resp["events"]:
                    break
                for ev in resp["events"]:
                    self.assertIsInstance(ev["timestamp"], int)
                    messages.append(ev["message"])
        return messages

    def test_model_trainer_train_then_training_queue_submit(self):
        bucket, account = self.default_bucket()
        base = "pytorch-training"

        # ---- ModelTrainer.train(): TrainingJob.create, then wait(logs=True) ----
        job = "pytorch-training-20250101120000"
        resp = self.sm.create_training_job(**self.model_trainer_request(bucket, account, job, base))
        self.assertTrue(resp["TrainingJobArn"].endswith(":training-job/" + job), resp)
        desc = self.wait_describing(job)
        self.assertEqual(desc["TrainingJobStatus"], "Completed", desc.get("FailureReason"))
        self.assertIsInstance(desc["TrainingTimeInSeconds"], int)  # "Training seconds:"
        self.assertIsInstance(desc["BillableTimeInSeconds"], int)  # "Billable seconds:"
        messages = self.read_logs(job, desc["ResourceConfig"]["InstanceCount"])
        text = "\n".join(messages)
        # The drivers are at the sm_drivers channel's root and the data at train's root, though
        # upload_data's URIs have no trailing '/'.
        self.assertIn("channels: code sm_drivers train ", text)
        self.assertIn("train: ./a.csv ./sub/b.csv ", text)
        self.assertIn("epoch=2 loss=0.333", text)
        # The artifacts, where the SDK's model_data points: <S3OutputPath>/<job>/output/model.tar.gz
        self.assertEqual(desc["ModelArtifacts"]["S3ModelArtifacts"], f"s3://{bucket}/{base}/{job}/output/model.tar.gz")
        body = self.s3.get_object(Bucket=bucket, Key=f"{base}/{job}/output/model.tar.gz")["Body"].read()
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as t:
            self.assertEqual(t.extractfile("./model.txt").read(), b"trained on 2 rows\n")

        # ---- TrainingQueue(queue).submit(trainer, inputs, job_name) ----
        queue = self.create_queue("sdk-queue", capacity=1)
        queued = "pytorch-training-20250101120500"
        payload = self.model_trainer_request(bucket, account, queued, base)
        # _submit_service_job: the payload's Tags move to the Batch job; none here.
        sub = self.batch.submit_service_job(
            jobName=queued, jobQueue=queue, retryStrategy=DEFAULT_SAGEMAKER_TRAINING_RETRY_CONFIG,
            serviceJobType="SAGEMAKER_TRAINING", serviceRequestPayload=json.dumps(payload),
            timeoutConfig=DEFAULT_TIMEOUT)
        self.assertIn("jobArn", sub)  # MissingRequiredArgument otherwise
        self.assertEqual(sub["jobName"], queued)
        job_arn = sub["jobArn"]
        # TrainingQueue.list_jobs(job_name): JOB_NAME filter, no jobStatus; every page's
        # jobSummaryList entries need jobArn and jobName.
        pages = [self.batch.list_service_jobs(jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [queued]}])]
        while pages[-1].get("nextToken"):
            pages.append(self.batch.list_service_jobs(jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [queued]}],
                                                      nextToken=pages[-1]["nextToken"]))
        found = [j for p in pages for j in p.get("jobSummaryList", [])]
        self.assertEqual([(j["jobArn"], j["jobName"]) for j in found], [(job_arn, queued)])
        # TrainingQueuedJob.wait(): describe_service_job(jobId=<the job ARN>) until SUCCEEDED/FAILED.
        deadline = time.time() + 120
        while True:
            d = self.batch.describe_service_job(jobId=job_arn)
            if d.get("status", "") in ("SUCCEEDED", "FAILED"):
                break
            self.assertLess(time.time(), deadline, d)
            time.sleep(0.2)
        self.assertEqual(d["status"], "SUCCEEDED", d.get("statusReason"))
        # TrainingQueue.list_jobs(): jobStatus RUNNING by default (answers a list, maybe empty).
        self.assertIsInstance(self.batch.list_service_jobs(jobQueue=queue, jobStatus="RUNNING")["jobSummaryList"], list)
        # get_model_trainer(): latestAttempt.serviceResourceId.value is the training job's ARN;
        # _get_training_job_name_from_training_job_arn takes the name after "training-job/".
        arn = d["latestAttempt"]["serviceResourceId"]["value"]
        m = re.match(r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-job/(.+)$", arn)
        self.assertIsNotNone(m, arn)
        tj = self.wait_describing(m.group(1))  # TrainingJob.get(training_job_name=...)
        self.assertEqual(tj["TrainingJobStatus"], "Completed")
        self.assertIn("epoch=2 loss=0.333", "\n".join(self.read_logs(m.group(1), 1)))
        # fetch_job_results on FAILED raises RuntimeError(describe["statusReason"]): present on success too.
        self.assertIn("statusReason", d)


if __name__ == "__main__":
    unittest.main()
