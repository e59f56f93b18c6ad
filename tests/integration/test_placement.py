"""Placement across regions (docs/regions.md, "Placement"): a SubmitServiceJob tagged
trainyard:candidate-regions goes to the candidate with the best score. With the job's input data in
region B's bucket and region A idle, the job runs in B; once B is down (killed), the next job runs
in A, and each job records why it went where it did (its trainyard:placement tag)."""
import json
import unittest

from botocore.exceptions import ClientError

import harness
from test_regions import A, B, Federation, client

QUEUE = "q"


def create_queue(batch):
    batch.create_service_environment(serviceEnvironmentName=QUEUE + "-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
                                     capacityLimits=[{"maxCapacity": 2, "capacityUnit": "NUM_INSTANCES"}])
    batch.create_job_queue(jobQueueName=QUEUE, jobQueueType="SAGEMAKER_TRAINING", priority=1,
                           serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": QUEUE + "-env"}])


def payload(name):
    """A job that reads its channel (from s3://data-b) and writes a model."""
    return {
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
        "AlgorithmSpecification": {"TrainingImage": "local/shell", "TrainingInputMode": "File",
                                   "ContainerEntrypoint": ["/bin/sh", "-c"],
                                   "ContainerArguments": ["cat /opt/ml/input/data/train/part-0 > /opt/ml/model/seen"]},
        "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": "s3://data-b/train/"}}}],
        "OutputDataConfig": {"S3OutputPath": "s3://data-b/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 120},
    }


class PlacementTest(unittest.TestCase):
    def setUp(self):
        self.fed = Federation()
        self.addCleanup(self.fed.stop)
        self.b = self.fed.start(B)
        self.a = self.fed.start(A, peers={B: self.b.url})
        for server, region in ((self.a, A), (self.b, B)):
            create_queue(client(server, "batch", region))
        # The input data lives in region B only.
        s3 = client(self.a, "s3", B, s3={"addressing_style": "path"})
        s3.create_bucket(Bucket="data-b", CreateBucketConfiguration={"LocationConstraint": B})
        s3.put_object(Bucket="data-b", Key="train/part-0", Body=b"rows of region b\n")

    def submit(self, name):
        batch = client(self.a, "batch", A)
        return batch.submit_service_job(jobName=name, jobQueue=QUEUE, serviceJobType="SAGEMAKER_TRAINING",
                                        serviceRequestPayload=json.dumps(payload(name)),
                                        tags={"trainyard:candidate-regions": f"{A} {B}"})["jobId"]

    def wait(self, server, region, job_id, timeout=120):
        import time
        batch = client(server, "batch", region)
        deadline = time.time() + timeout
        while True:
            job = batch.describe_service_job(jobId=job_id)
            if job["status"] in ("SUCCEEDED", "FAILED"):
                return job
            if time.time() > deadline:
                self.fail(f"{job_id} is {job['status']} in {region}: {server.read_log()}")
            time.sleep(0.1)

    def test_job_goes_where_its_data_is_then_elsewhere_when_that_region_is_down(self):
        first = self.submit("near-the-data")
        job = self.wait(self.b, B, first)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        reason = job["tags"]["trainyard:placement"]
        # B: 1000 (holds data-b) + 100 (free capacity) - 12 (0.12 USD/h); A: the same without the data.
        self.assertRegex(reason, rf"^placed in {B} score=1088: holds input data-b / \d+ free of ml.m5.large / 0 waiting"
                                 rf" / 0.12 USD/h -- {A} score=88: input elsewhere: data-b / ")
        with self.assertRaises(ClientError):  # nothing of it in A
            client(self.a, "batch", A).describe_service_job(jobId=first)
        # The model was written in B's own bucket.
        s3b = client(self.b, "s3", B, s3={"addressing_style": "path"})
        keys = [o["Key"] for o in s3b.list_objects_v2(Bucket="data-b", Prefix="output/near-the-data")["Contents"]]
        self.assertTrue(any(k.endswith("model.tar.gz") for k in keys), keys)

        # Region B goes away; a copy of the data is in A, so the job can run there.
        s3a = client(self.a, "s3", A, s3={"addressing_style": "path"})
        s3a.create_bucket(Bucket="data-b")
        s3a.put_object(Bucket="data-b", Key="train/part-0", Body=b"rows of region b, copied\n")
        self.b.kill9()
        harness.kill_attempt_processes(self.b.data_dir)
        second = self.submit("b-is-down")
        job = self.wait(self.a, A, second)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        reason = job["tags"]["trainyard:placement"]
        self.assertTrue(reason.startswith(f"placed in {A}"), reason)
        self.assertIn(f"-- {B}: unreachable: Region {B} is unavailable: Failed to connect", reason)
        self.assertIn("placed in " + A, self.a.read_log())


if __name__ == "__main__":
    unittest.main()
