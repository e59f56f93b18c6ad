"""jobRoleArn (docs/batch-jobs.md, "Credentials"): a container job's command finds its role's
temporary credentials through the container credentials provider and calls trainyard with them
(AWS_ENDPOINT_URL); once the job has ended the same credentials are refused."""
import json
import os
import time
import unittest

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from harness import ServerTest, REGION
import test_roles

SYSTEM_PYTHON = test_roles.SYSTEM_PYTHON

ALLOW = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["batch:DescribeJobs", "batch:ListJobs"], "Resource": "*"}]}

PROBE = r"""
import json, os, sys
import boto3
creds = boto3.Session().get_credentials().get_frozen_credentials()
out = {"key": creds.access_key, "secret": creds.secret_key, "token": creds.token,
       "endpoint": os.environ.get("AWS_ENDPOINT_URL", "")}
job = boto3.client("batch").describe_jobs(jobs=[os.environ["AWS_BATCH_JOB_ID"]])["jobs"][0]
out["seen_status"] = job["status"]
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
"""


@unittest.skipUnless(os.access(SYSTEM_PYTHON, os.X_OK), "no system python3 for the job")
class JobCredentialsTest(ServerTest):
    stage_boto3 = test_roles.RolesTest.stage_boto3  # boto3 copied where the job's user can read it

    def test_job_role_credentials_work_during_the_job_and_are_refused_after(self):
        self.server.admin("admin/iam/CreatePolicy", {"PolicyName": "reader", "PolicyDocument": json.dumps(ALLOW)})
        role = self.server.admin("admin/iam/CreateRole", {"RoleName": "worker"})["Role"]
        self.server.admin("admin/iam/AttachRolePolicy", {"RoleName": "worker", "PolicyName": "reader"})
        self.batch.create_compute_environment(computeEnvironmentName="ce", type="MANAGED",
                                              computeResources={"type": "EC2", "maxvCpus": 2, "subnets": ["local"]})
        self.batch.create_job_queue(jobQueueName="jq", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        probe = os.path.join(self.work_dir, "probe.py")
        with open(probe, "w") as f:
            f.write(PROBE)
        os.chmod(probe, 0o644)
        result = os.path.join(self.work_dir, "creds.json")
        self.batch.register_job_definition(
            jobDefinitionName="probe", type="container",
            containerProperties={"image": "local/python3", "command": [SYSTEM_PYTHON, probe, result],
                                 "jobRoleArn": role["Arn"],
                                 "environment": [{"name": "PYTHONPATH", "value": self.stage_boto3()}],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "512"}]})
        job_id = self.batch.submit_job(jobName="probe", jobQueue="jq", jobDefinition="probe")["jobId"]
        deadline = time.time() + 90
        while True:
            [j] = self.batch.describe_jobs(jobs=[job_id])["jobs"]
            if j["status"] in ("SUCCEEDED", "FAILED") or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(j["status"], "SUCCEEDED", self.server.read_log()[-3000:])
        self.assertEqual(j["container"]["jobRoleArn"], role["Arn"])
        with open(result) as f:
            out = json.load(f)
        self.assertEqual(out["seen_status"], "RUNNING")
        self.assertTrue(out["key"].startswith("ASIA"), out["key"])
        self.assertEqual(out["endpoint"], self.server.url)
        after = boto3.client("batch", endpoint_url=self.server.url, region_name=REGION,
                             aws_access_key_id=out["key"], aws_secret_access_key=out["secret"],
                             aws_session_token=out["token"], verify=self.server.ca_bundle if self.server.tls else None,
                             config=Config(retries={"max_attempts": 1}))
        with self.assertRaises(ClientError) as gone:
            after.describe_jobs(jobs=[job_id])
        self.assertEqual(gone.exception.response["Error"]["Code"], "UnrecognizedClientException")


class ReservedEnvironmentTest(ServerTest):
    """A job's own environment may not name a variable the server sets for it: the credentials
    endpoint and token, the endpoint and region it calls, the SageMaker and trainyard variables.
    Every way in is refused with the key and the rule, and nothing is created."""

    def refusal(self, call, **kw):
        with self.assertRaises(ClientError) as e:
            call(**kw)
        return e.exception.response["Error"]["Code"], e.exception.response["Error"]["Message"]

    def test_the_servers_variables_are_refused_in_every_job_environment(self):
        payload = {"TrainingJobName": "forged",
                   "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
                   "AlgorithmSpecification": {"TrainingImage": "local/shell", "TrainingInputMode": "File",
                                              "ContainerEntrypoint": ["true"]},
                   "OutputDataConfig": {"S3OutputPath": "s3://trainyard-test/output"},
                   "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
                   "StoppingCondition": {"MaxRuntimeInSeconds": 60},
                   "Environment": {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://attacker.invalid/creds"}}
        code, msg = self.refusal(self.sm.create_training_job, **payload)
        self.assertEqual(code, "ValidationException")
        self.assertIn("'AWS_CONTAINER_CREDENTIALS_FULL_URI' is reserved", msg)
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])

        payload["Environment"] = {"SM_MODEL_DIR": "/tmp/elsewhere"}
        code, msg = self.refusal(self.batch.submit_service_job, jobName="forged", jobQueue="q",
                                 serviceJobType="SAGEMAKER_TRAINING", serviceRequestPayload=json.dumps(payload))
        self.assertEqual(code, "ClientException")
        self.assertIn("'SM_MODEL_DIR' is reserved", msg)

        code, msg = self.refusal(self.batch.register_job_definition, jobDefinitionName="forged", type="container",
                                 containerProperties={"image": "local/shell", "command": ["true"],
                                                      "environment": [{"name": "AWS_ENDPOINT_URL", "value": "http://x"}],
                                                      "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                                               {"type": "MEMORY", "value": "256"}]})
        self.assertEqual(code, "ClientException")
        self.assertIn("AWS_ENDPOINT_URL is reserved", msg)
        self.assertEqual(self.batch.describe_job_definitions()["jobDefinitions"], [])

        code, msg = self.refusal(self.batch.submit_job, jobName="forged", jobQueue="jq", jobDefinition="d",
                                 containerOverrides={"environment": [
                                     {"name": "AWS_CONTAINER_AUTHORIZATION_TOKEN", "value": "forged"}]})
        self.assertEqual(code, "ClientException")
        self.assertIn("AWS_CONTAINER_AUTHORIZATION_TOKEN is reserved", msg)


if __name__ == "__main__":
    unittest.main()
