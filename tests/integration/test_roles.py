"""Roles for jobs (docs/security.md, "Roles for jobs"): a job whose RoleArn names a role runs
unchanged boto3 code that finds its credentials through the container credentials provider and
calls back into trainyard with them; what the role's policy does not allow is refused (and
audited under the role session); once the job has ended its credentials fail; a job naming an
unknown role is refused at submit; a job submits through Batch with its role only where the role
may pass itself on (iam:PassRole)."""
import json
import os
import unittest

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

import harness
from harness import ServerTest, REGION

ACCOUNT = "000000000000"
DESCRIBE_ONLY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "sagemaker:DescribeTrainingJob", "Resource": "*"}]}

# Runs in the job's sandbox, with no key anywhere in its code or its environment.
PROBE = r"""
import json, os, sys
import boto3
from botocore.exceptions import ClientError
out = {"env_keys": sorted(k for k in os.environ if k.startswith("AWS_"))}
creds = boto3.Session().get_credentials().get_frozen_credentials()
out["key"], out["secret"], out["token"] = creds.access_key, creds.secret_key, creds.token
out["status"] = boto3.client("sagemaker").describe_training_job(TrainingJobName=sys.argv[1])["TrainingJobStatus"]
try:
    boto3.client("batch").submit_service_job(jobName="sneaky", jobQueue="q", serviceJobType="SAGEMAKER_TRAINING",
                                             serviceRequestPayload="{}")
    out["submit"] = "allowed"
except ClientError as e:
    out["submit"] = e.response["Error"]["Code"]
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
"""

# The job runs as an unprivileged user: boto3 is copied where it can read it (harness.stage_packages).
SYSTEM_PYTHON = "/usr/bin/python3"


# Submits a follow-up job through Batch, as the role, naming the same role.
SUBMIT = r"""
import json, sys
import boto3
from botocore.exceptions import ClientError
with open(sys.argv[1]) as f:
    payload = json.load(f)
try:
    out = boto3.client("batch").submit_service_job(jobName="child", jobQueue="q", serviceJobType="SAGEMAKER_TRAINING",
                                                   serviceRequestPayload=json.dumps(payload))["jobId"]
except ClientError as e:
    out = e.response["Error"]["Code"] + ": " + e.response["Error"]["Message"]
with open(sys.argv[2], "w") as f:
    f.write(out)
"""


@unittest.skipUnless(os.access(SYSTEM_PYTHON, os.X_OK), "no system python3 for the job")
class RolesTest(ServerTest):
    def stage_boto3(self):
        lib = os.path.join(self.work_dir, "pylib")
        return lib if os.path.isdir(lib) else harness.stage_packages(lib, harness.BOTO3_PACKAGES)

    def iam(self, op, body):
        return self.server.admin("admin/iam/" + op, body)

    def test_a_job_calls_back_with_its_roles_credentials_and_loses_them_when_it_ends(self):
        self.iam("CreatePolicy", {"PolicyName": "describe-only", "PolicyDocument": json.dumps(DESCRIBE_ONLY)})
        role = self.iam("CreateRole", {"RoleName": "trainer"})["Role"]
        self.assertEqual(role["Arn"], f"arn:aws:iam::{ACCOUNT}:role/trainer")
        self.iam("AttachRolePolicy", {"RoleName": "trainer", "PolicyName": "describe-only"})

        # Once a role exists, a job must name one.
        with self.assertRaises(ClientError) as refused:
            self.sm.create_training_job(**self.command_payload("stray", "true"))
        self.assertEqual(refused.exception.response["Error"]["Code"], "ValidationException")
        self.assertIn("RoleArn", refused.exception.response["Error"]["Message"])

        result = os.path.join(self.work_dir, "probe.json")
        payload = self.command_payload("roles-job", "", RoleArn=role["Arn"])
        probe = os.path.join(self.work_dir, "probe.py")
        with open(probe, "w") as f:
            f.write(PROBE)
        os.chmod(probe, 0o644)
        payload["AlgorithmSpecification"]["ContainerEntrypoint"] = [SYSTEM_PYTHON, probe]
        payload["Environment"] = {"PYTHONPATH": self.stage_boto3()}
        payload["AlgorithmSpecification"]["ContainerArguments"] = ["roles-job", result]
        self.sm.create_training_job(**payload)
        tj = self.wait_training("roles-job")
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertNotIn("Token", json.dumps(tj, default=str))

        with open(result) as f:
            out = json.load(f)
        self.assertEqual(out["status"], "InProgress")
        self.assertEqual(out["submit"], "AccessDeniedException")
        self.assertTrue(out["key"].startswith("ASIA"), out["key"])
        self.assertNotIn("AWS_ACCESS_KEY_ID", out["env_keys"])
        self.assertIn("AWS_CONTAINER_CREDENTIALS_FULL_URI", out["env_keys"])

        # The refusal is in the audit trail under the role session.
        session = f"arn:aws:sts::{ACCOUNT}:assumed-role/trainer/roles-job"
        found = self.server.admin("admin/audit", {"LookupAttributes": [
            {"AttributeKey": "Principal", "AttributeValue": session},
            {"AttributeKey": "Action", "AttributeValue": "batch:SubmitServiceJob"}]})["Events"]
        self.assertEqual(len(found), 1, found)
        record = json.loads(found[0]["CloudTrailEvent"])
        self.assertEqual(record["errorCode"], "AccessDeniedException")
        self.assertEqual(record["userIdentity"]["type"], "AssumedRole")
        self.assertEqual(record["userIdentity"]["accessKeyId"], out["key"])

        # After the job: the same credentials are refused.
        after = boto3.client("sagemaker", endpoint_url=self.server.url, region_name=REGION,
                             aws_access_key_id=out["key"], aws_secret_access_key=out["secret"],
                             aws_session_token=out["token"], verify=self.server.ca_bundle if self.server.tls else None,
                             config=Config(retries={"max_attempts": 1}))
        with self.assertRaises(ClientError) as gone:
            after.describe_training_job(TrainingJobName="roles-job")
        self.assertEqual(gone.exception.response["Error"]["Code"], "UnrecognizedClientException")

    def run_as_role(self, name, script, args, role_arn):
        result = os.path.join(self.work_dir, name + ".out")
        path = os.path.join(self.work_dir, name + ".py")
        with open(path, "w") as f:
            f.write(script)
        os.chmod(path, 0o644)
        payload = self.command_payload(name, "", RoleArn=role_arn)
        payload["AlgorithmSpecification"]["ContainerEntrypoint"] = [SYSTEM_PYTHON, path]
        payload["AlgorithmSpecification"]["ContainerArguments"] = list(args) + [result]
        payload["Environment"] = {"PYTHONPATH": self.stage_boto3()}
        self.sm.create_training_job(**payload)
        tj = self.wait_training(name)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        with open(result) as f:
            return f.read()

    def test_a_job_submits_through_batch_only_with_a_role_it_may_pass(self):
        role = f"arn:aws:iam::{ACCOUNT}:role/pipeline"
        self.create_queue("q", capacity=2)
        self.iam("CreateRole", {"RoleName": "pipeline"})
        self.iam("CreatePolicy", {"PolicyName": "submit", "PolicyDocument": json.dumps({
            "Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": "batch:SubmitServiceJob", "Resource": "*"}]})})
        self.iam("AttachRolePolicy", {"RoleName": "pipeline", "PolicyName": "submit"})
        child = os.path.join(self.work_dir, "child.json")
        with open(child, "w") as f:
            json.dump(self.command_payload("child", "true", RoleArn=role), f)
        os.chmod(child, 0o644)
        # Submitting is allowed, but handing the child the role is not (no iam:PassRole).
        refused = self.run_as_role("parent-1", SUBMIT, [child], role)
        self.assertTrue(refused.startswith("AccessDeniedException"), refused)
        self.assertIn("iam:PassRole", refused)

        self.iam("CreatePolicy", {"PolicyName": "pass", "PolicyDocument": json.dumps({
            "Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": "iam:PassRole", "Resource": role},
                # The child writes its output as the role (docs/security.md, "Jobs' data").
                {"Effect": "Allow", "Action": "s3:*",
                 "Resource": ["arn:aws:s3:::trainyard-test", "arn:aws:s3:::trainyard-test/*"]}]})})
        self.iam("AttachRolePolicy", {"RoleName": "pipeline", "PolicyName": "pass"})
        job_id = self.run_as_role("parent-2", SUBMIT, [child], role)
        job = self.batch.describe_service_job(jobId=job_id)
        self.assertEqual(job["jobName"], "child")
        self.assertEqual(self.wait_jobs([job_id])[0]["status"], "SUCCEEDED")

    def test_the_credentials_endpoint_refuses_a_wrong_token(self):
        import urllib.request
        import urllib.error
        req = urllib.request.Request(self.server.url + "/trainyard/v1/credentials", headers={"Authorization": "nope"})
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=10)
        self.assertEqual(refused.exception.code, 403)


if __name__ == "__main__":
    unittest.main()
