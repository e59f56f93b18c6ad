"""The multi-region seed workflow (docs/regions.md, "The seed workflow"), unchanged, against four
trainyard servers on loopback as four regions, each with its own bucket of data.

A relational query has written an array file: one line per region and data location. One Batch
array job in the entry region starts a child per line; each child reads AWS_BATCH_JOB_ARRAY_INDEX,
copies the array file with `aws s3 cp`, and with boto3 creates a SageMaker training job in its
line's region (close to the data, which never leaves it) and waits for it. The children hold
nothing but the credentials of their job role, which the entry region hands out and which reach
the other regions through it. All four models land in their own region's bucket; the parent
array job SUCCEEDS."""
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import unittest

import harness
from test_regions import Federation, client, region_config

ENTRY = "us-east-1"
REGIONS = [ENTRY, "eu-west-1", "ap-south-1", "us-west-2"]
ACCOUNT = "000000000000"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/seed"
# What the seed's job role may do: train and read and write its buckets, and pass itself on to the
# training jobs it creates.
ROLE_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["sagemaker:*", "s3:*", "iam:PassRole"], "Resource": "*"}]}
# The seed's image: a registry name the host runs with its own software (executor.host_images).
IMAGE = f"{ACCOUNT}.dkr.ecr.{ENTRY}.amazonaws.com/seed-workflow:latest"

# One child of the array job, as the seed writes it.
CHILD = r"""
import json, os, subprocess, sys, time
import boto3

index = int(os.environ["AWS_BATCH_JOB_ARRAY_INDEX"])
array_uri, out_dir, role = sys.argv[1], sys.argv[2], sys.argv[3]
subprocess.run(["aws", "s3", "cp", array_uri, "/tmp/array.txt"], check=True)
lines = [l for l in open("/tmp/array.txt").read().split("\n") if l]
region, data = lines[index].split(",")
bucket = data.split("/")[2]
sm = boto3.client("sagemaker", region_name=region)
name = f"seed-{index}"
sm.create_training_job(
    TrainingJobName=name, RoleArn=role,
    AlgorithmSpecification={"TrainingImage": "local/python3", "TrainingInputMode": "File"},
    HyperParameters={"sagemaker_program": "train.py", "sagemaker_submit_directory": f"s3://{bucket}/code/train.tar.gz",
                     "epochs": "2"},
    InputDataConfig=[{"ChannelName": "train", "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": data}}}],
    OutputDataConfig={"S3OutputPath": f"s3://{bucket}/models"},
    ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
    StoppingCondition={"MaxRuntimeInSeconds": 300})
while True:
    tj = sm.describe_training_job(TrainingJobName=name)
    if tj["TrainingJobStatus"] not in ("InProgress", "Stopping"):
        break
    time.sleep(0.2)
with open(os.path.join(out_dir, f"child-{index}.json"), "w") as f:
    json.dump({"region": region, "job": name, "arn": tj["TrainingJobArn"], "status": tj["TrainingJobStatus"],
               "model": tj.get("ModelArtifacts", {}).get("S3ModelArtifacts", ""),
               "reason": tj.get("FailureReason", "")}, f)
sys.exit(0 if tj["TrainingJobStatus"] == "Completed" else 1)
"""

# What a child needs beside boto3: the aws CLI and what it imports, for the system's python3.
AWSCLI_PACKAGES = harness.BOTO3_PACKAGES + ("awscli", "docutils", "yaml", "colorama", "rsa", "pyasn1")
SYSTEM_PYTHON = "/usr/bin/python3"


def stage_tools(work_dir):
    """The job's PYTHONPATH and a bin directory with an `aws` command, under work_dir."""
    lib = harness.stage_packages(os.path.join(work_dir, "pylib"), AWSCLI_PACKAGES)
    bin_dir = os.path.join(work_dir, "bin")
    os.makedirs(bin_dir)
    aws = os.path.join(bin_dir, "aws")
    with open(aws, "w") as f:
        f.write(f'#!/bin/sh\nexec {SYSTEM_PYTHON} -m awscli "$@"\n')
    os.chmod(bin_dir, 0o755)
    os.chmod(aws, 0o755)
    return lib, bin_dir


@unittest.skipUnless(os.access(SYSTEM_PYTHON, os.X_OK), "no system python3 for the job")
class SeedWorkflowTest(unittest.TestCase):
    def setUp(self):
        self.fed = Federation()
        self.work_dir = tempfile.mkdtemp(prefix="trainyard-seed-")
        os.chmod(self.work_dir, 0o755)
        self.out_dir = os.path.join(self.work_dir, "out")
        os.makedirs(self.out_dir)
        os.chmod(self.out_dir, 0o1777)
        binds = f'\n[executor]\nsandbox_binds = ["{self.work_dir}"]\n'
        try:
            others = {r: self.fed.start(r, extra=binds) for r in REGIONS[1:]}
            self.servers = dict(others)
            self.servers[ENTRY] = self.fed.start(ENTRY, peers={r: s.url for r, s in others.items()}, extra=binds)
        except Exception:
            self.fed.stop()
            raise

    def tearDown(self):
        self.fed.stop()
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def bucket(self, region, name, key=""):
        return os.path.join(self.servers[region].data_dir, "buckets", name, key)

    def child_logs(self):
        """The last lines each child attempt logged in the entry region (for a failure's message)."""
        out = []
        attempts = os.path.join(self.servers[ENTRY].data_dir, "attempts")
        for root, _dirs, files in os.walk(attempts):
            for name in files:
                if name.endswith(".log"):
                    with open(os.path.join(root, name), errors="replace") as f:
                        out.append(f"{os.path.relpath(root, attempts)}/{name}: " + "".join(f.readlines()[-8:]))
        return "\n".join(out)

    def stage_region_data(self, region):
        """Region's own bucket data-<region>: the training code and its data."""
        bucket = f"data-{region}"
        os.makedirs(self.bucket(region, bucket, "code"))
        os.makedirs(self.bucket(region, bucket, "data/train"))
        subprocess.check_call(["tar", "-czf", self.bucket(region, bucket, "code/train.tar.gz"), "-C",
                               os.path.join(harness.QUICKSTART, "code"), "."])
        subprocess.check_call(["python3", os.path.join(harness.QUICKSTART, "make_data.py"),
                               self.bucket(region, bucket, "data/train/train.csv")])
        return f"s3://{bucket}/data/train/"

    def test_an_array_job_trains_in_each_lines_region_and_succeeds(self):
        entry = self.servers[ENTRY]
        iam = lambda op, body: entry.admin("admin/iam/" + op, body)
        iam("CreatePolicy", {"PolicyName": "seed", "PolicyDocument": json.dumps(ROLE_POLICY)})
        iam("CreateRole", {"RoleName": "seed"})
        iam("AttachRolePolicy", {"RoleName": "seed", "PolicyName": "seed"})

        # The relational query's output: one line per region and data location.
        lines = [f"{r},{self.stage_region_data(r)}" for r in reversed(REGIONS)]
        os.makedirs(self.bucket(ENTRY, "seed"))
        with open(self.bucket(ENTRY, "seed", "array.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")

        lib, bin_dir = stage_tools(self.work_dir)
        os.chmod(self.out_dir, 0o1777)  # where each child, an unprivileged user, writes its result
        child = os.path.join(self.work_dir, "child.py")
        with open(child, "w") as f:
            f.write(CHILD)
        os.chmod(child, 0o644)

        batch = client(entry, "batch", ENTRY)
        batch.create_compute_environment(computeEnvironmentName="seed-ce", type="UNMANAGED", unmanagedvCpus=4)
        batch.create_job_queue(jobQueueName="seed", priority=1,
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "seed-ce"}])
        batch.register_job_definition(jobDefinitionName="seed-train", type="container", containerProperties={
            "image": IMAGE, "jobRoleArn": ROLE,
            "command": [SYSTEM_PYTHON, child, "Ref::arrayFile", self.out_dir, ROLE],
            "environment": [{"name": "PYTHONPATH", "value": lib}, {"name": "PATH", "value": f"{bin_dir}:/usr/bin:/bin"}],
            "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "512"}]},
            parameters={"arrayFile": "s3://seed/array.txt"}, retryStrategy={"attempts": 1})
        parent = batch.submit_job(jobName="seed", jobQueue="seed", jobDefinition="seed-train",
                                  arrayProperties={"size": len(lines)})["jobId"]

        deadline = time.time() + 300
        while True:
            [p] = batch.describe_jobs(jobs=[parent])["jobs"]
            if p["status"] in ("SUCCEEDED", "FAILED"):
                break
            if time.time() > deadline:
                self.fail(f"the array job is {p['status']} {p['arrayProperties']}\n{entry.read_log()}")
            time.sleep(0.2)
        results = {}
        for name in os.listdir(self.out_dir):
            with open(os.path.join(self.out_dir, name)) as f:
                r = json.load(f)
            results[r["region"]] = r
        self.assertEqual(p["status"], "SUCCEEDED", (p.get("statusReason"), results, self.child_logs()))
        self.assertEqual(p["arrayProperties"]["statusSummary"]["SUCCEEDED"], len(lines))
        self.assertEqual(sorted(results), sorted(REGIONS))

        for index, line in enumerate(lines):
            region = line.split(",")[0]
            r = results[region]
            self.assertEqual(r["status"], "Completed", r)
            self.assertEqual(r["job"], f"seed-{index}")
            # The job is in its line's region, and there only; its model is in that region's bucket.
            self.assertIn(f":{region}:", r["arn"])
            self.assertEqual(r["model"], f"s3://data-{region}/models/seed-{index}/output/model.tar.gz")
            with tarfile.open(self.bucket(region, f"data-{region}", f"models/seed-{index}/output/model.tar.gz")) as t:
                self.assertIn("model.json", [m.name.lstrip("./") for m in t.getmembers()])
            for other in REGIONS:
                sm = client(self.servers[other], "sagemaker", other)
                names = {j["TrainingJobName"] for j in sm.list_training_jobs()["TrainingJobSummaries"]}
                self.assertEqual(f"seed-{index}" in names, other == region, (other, names))
                self.assertFalse(os.path.exists(self.bucket(other, f"data-{region}")) and other != region)


if __name__ == "__main__":
    unittest.main()
