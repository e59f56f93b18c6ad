"""The quick-start walkthrough from boto3: unchanged AWS code, pointed at trainyard.

Credentials come from the standard AWS variables (the quick start exports the ones trainyard
generated in its data directory).
"""
import argparse
import json
import os
import tarfile
import time

import boto3

parser = argparse.ArgumentParser()
parser.add_argument("--endpoint-url", required=True)
parser.add_argument("--bucket-dir", required=True, help="the server's embedded object store directory")
parser.add_argument("--jobs", type=int, default=3)
args = parser.parse_args()

batch = boto3.client("batch", endpoint_url=args.endpoint_url, region_name="us-east-1")
sagemaker = boto3.client("sagemaker", endpoint_url=args.endpoint_url, region_name="us-east-1")

batch.create_service_environment(
    serviceEnvironmentName="boto3-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
    capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}])
batch.create_job_queue(
    jobQueueName="boto3-queue", jobQueueType="SAGEMAKER_TRAINING", priority=1,
    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "boto3-env"}])

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "training-job.json")) as f:
    template = f.read()

job_ids = []
for n in range(1, args.jobs + 1):
    payload = json.loads(template.replace("JOBNUM", f"boto3-{n}").replace("EPOCHS", "5"))
    resp = batch.submit_service_job(jobName=f"boto3-{n}", jobQueue="boto3-queue",
                                    serviceJobType="SAGEMAKER_TRAINING",
                                    serviceRequestPayload=json.dumps(payload))
    job_ids.append(resp["jobId"])
    print(f"submitted {resp['jobName']} as {resp['jobId']}")

deadline = time.time() + 300
while time.time() < deadline:
    statuses = [batch.describe_service_job(jobId=j)["status"] for j in job_ids]
    if all(s in ("SUCCEEDED", "FAILED") for s in statuses):
        break
    time.sleep(0.5)

for job_id in job_ids:
    job = batch.describe_service_job(jobId=job_id)
    arn = job["latestAttempt"]["serviceResourceId"]["value"]
    name = arn.split("/")[-1]
    tj = sagemaker.describe_training_job(TrainingJobName=name)  # as the SageMaker SDK does
    metrics = {m["MetricName"]: m["Value"] for m in tj["FinalMetricDataList"]}
    artifact = tj["ModelArtifacts"]["S3ModelArtifacts"]
    local = os.path.join(args.bucket_dir, artifact[len("s3://"):])
    with tarfile.open(local) as t:
        members = sorted(m.name for m in t.getmembers() if m.isfile())
    print(f"{job['jobName']}: {job['status']}, training job {name} {tj['TrainingJobStatus']}, "
          f"loss={metrics.get('train:loss')}, artifact {artifact} holds {members}")
    assert job["status"] == "SUCCEEDED", job
