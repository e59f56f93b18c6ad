"""STS (docs/security.md, "STS"): boto3's sts client against the server. GetCallerIdentity names the
root credential, a user and an assumed role; AssumeRole is refused without sts:AssumeRole on the
role, and for a role that does not exist; the credentials it returns act with the role's policy
(DescribeTrainingJob allowed, ListTrainingJobs refused) and fail with a tampered token."""
import json
import unittest

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from harness import ServerTest, REGION

ACCOUNT = "000000000000"
DESCRIBE_ONLY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "sagemaker:DescribeTrainingJob", "Resource": "*"}]}
ASSUME_TRAINER = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": f"arn:aws:iam::{ACCOUNT}:role/trainer"}]}


class StsTest(ServerTest):
    def iam(self, op, body):
        return self.server.admin("admin/iam/" + op, body)

    def client(self, service, key, secret, token=None, validate=True):
        return boto3.client(service, endpoint_url=self.server.url, region_name=REGION, aws_access_key_id=key,
                            aws_secret_access_key=secret, aws_session_token=token,
                            config=Config(retries={"max_attempts": 1}, parameter_validation=validate))

    def setUp(self):
        super().setUp()
        self.root = self.server.credentials()
        self.iam("CreatePolicy", {"PolicyName": "describe-only", "PolicyDocument": json.dumps(DESCRIBE_ONLY)})
        self.iam("CreatePolicy", {"PolicyName": "assume-trainer", "PolicyDocument": json.dumps(ASSUME_TRAINER)})
        self.role = self.iam("CreateRole", {"RoleName": "trainer"})["Role"]
        self.iam("AttachRolePolicy", {"RoleName": "trainer", "PolicyName": "describe-only"})
        for user in ("alice", "bob"):
            self.iam("CreateUser", {"UserName": user})
        self.iam("AttachUserPolicy", {"UserName": "alice", "PolicyName": "assume-trainer"})
        self.alice = self.iam("CreateAccessKey", {"UserName": "alice"})["AccessKey"]
        self.bob = self.iam("CreateAccessKey", {"UserName": "bob"})["AccessKey"]

    def sts_as(self, key):
        return self.client("sts", key["AccessKeyId"], key["SecretAccessKey"])

    def assume(self, **kw):
        return self.sts_as(self.alice).assume_role(RoleArn=self.role["Arn"], RoleSessionName="nightly", **kw)

    def test_get_caller_identity_names_root_a_user_and_an_assumed_role(self):
        root = self.client("sts", *self.root).get_caller_identity()
        self.assertEqual((root["Account"], root["Arn"], root["UserId"]),
                         (ACCOUNT, f"arn:aws:iam::{ACCOUNT}:root", ACCOUNT))
        alice = self.sts_as(self.alice).get_caller_identity()
        self.assertEqual(alice["Arn"], f"arn:aws:iam::{ACCOUNT}:user/alice")
        self.assertTrue(alice["UserId"].startswith("AIDA"), alice)
        creds = self.assume()["Credentials"]
        me = self.client("sts", creds["AccessKeyId"], creds["SecretAccessKey"],
                         creds["SessionToken"]).get_caller_identity()
        self.assertEqual(me["Arn"], f"arn:aws:sts::{ACCOUNT}:assumed-role/trainer/nightly")
        self.assertEqual(me["UserId"], self.role["RoleId"] + ":nightly")

    def test_assume_role_returns_a_session_for_the_duration_asked(self):
        out = self.assume(DurationSeconds=900)
        creds = out["Credentials"]
        self.assertTrue(creds["AccessKeyId"].startswith("ASIA"), creds)
        self.assertEqual(out["AssumedRoleUser"]["Arn"], f"arn:aws:sts::{ACCOUNT}:assumed-role/trainer/nightly")
        self.assertEqual(out["AssumedRoleUser"]["AssumedRoleId"], self.role["RoleId"] + ":nightly")
        # The session lasts what was asked: its expiry is 900 s after the server's Date.
        import email.utils
        served = email.utils.parsedate_to_datetime(out["ResponseMetadata"]["HTTPHeaders"]["date"])
        self.assertAlmostEqual((creds["Expiration"] - served).total_seconds(), 900, delta=5)
        unchecked = self.client("sts", self.alice["AccessKeyId"], self.alice["SecretAccessKey"], validate=False)
        for bad in (899, 43201):
            with self.assertRaises(ClientError) as refused:
                unchecked.assume_role(RoleArn=self.role["Arn"], RoleSessionName="nightly", DurationSeconds=bad)
            self.assertEqual(refused.exception.response["Error"]["Code"], "ValidationError")
            self.assertIn("durationSeconds", refused.exception.response["Error"]["Message"])

    def test_assume_role_is_refused_without_permission_on_the_role(self):
        with self.assertRaises(ClientError) as refused:
            self.sts_as(self.bob).assume_role(RoleArn=self.role["Arn"], RoleSessionName="sneaky")
        self.assertEqual(refused.exception.response["Error"]["Code"], "AccessDenied")
        self.assertEqual(refused.exception.response["ResponseMetadata"]["HTTPStatusCode"], 403)
        self.assertIn("sts:AssumeRole", refused.exception.response["Error"]["Message"])
        # alice may assume trainer only: another role is refused before its existence is checked.
        with self.assertRaises(ClientError) as other:
            self.sts_as(self.alice).assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/missing", RoleSessionName="x1")
        self.assertEqual(other.exception.response["Error"]["Code"], "AccessDenied")
        # root may assume any role, but only one that exists.
        with self.assertRaises(ClientError) as missing:
            self.client("sts", *self.root).assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/missing",
                                                       RoleSessionName="x1")
        self.assertEqual(missing.exception.response["Error"]["Code"], "ValidationError")
        self.assertIn("roleArn", missing.exception.response["Error"]["Message"])

    def test_assumed_credentials_act_with_the_roles_policy(self):
        creds = self.assume()["Credentials"]
        sm = self.client("sagemaker", creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])
        with self.assertRaises(ClientError) as allowed:
            sm.describe_training_job(TrainingJobName="no-such-job")
        self.assertNotIn("AccessDenied", allowed.exception.response["Error"]["Code"])  # allowed: the job is missing
        with self.assertRaises(ClientError) as refused:
            sm.list_training_jobs()
        self.assertEqual(refused.exception.response["Error"]["Code"], "AccessDeniedException")
        self.assertIn("assumed-role/trainer/nightly", refused.exception.response["Error"]["Message"])

    def test_a_tampered_or_missing_token_fails(self):
        creds = self.assume()["Credentials"]
        token = creds["SessionToken"]
        tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
        for sent in (tampered, None):
            sm = self.client("sagemaker", creds["AccessKeyId"], creds["SecretAccessKey"], sent)
            with self.assertRaises(ClientError) as refused:
                sm.describe_training_job(TrainingJobName="no-such-job")
            self.assertEqual(refused.exception.response["Error"]["Code"], "UnrecognizedClientException", sent)
            sts = self.client("sts", creds["AccessKeyId"], creds["SecretAccessKey"], sent)
            with self.assertRaises(ClientError) as sts_refused:
                sts.get_caller_identity()
            self.assertEqual(sts_refused.exception.response["Error"]["Code"], "InvalidClientTokenId", sent)

    def test_assume_role_is_audited(self):
        self.assume()
        with self.assertRaises(ClientError):
            self.sts_as(self.bob).assume_role(RoleArn=self.role["Arn"], RoleSessionName="sneaky")
        events = self.server.admin("admin/audit", {"LookupAttributes": [
            {"AttributeKey": "EventName", "AttributeValue": "AssumeRole"}]})["Events"]
        records = [json.loads(e["CloudTrailEvent"]) for e in events]
        self.assertEqual(len(records), 2, records)
        by_user = {r["userIdentity"]["arn"]: r for r in records}
        ok = by_user[f"arn:aws:iam::{ACCOUNT}:user/alice"]
        self.assertEqual(ok["eventSource"], "sts.amazonaws.com")
        self.assertNotIn("errorCode", ok)
        self.assertNotIn("SessionToken", json.dumps(ok))
        denied = by_user[f"arn:aws:iam::{ACCOUNT}:user/bob"]
        self.assertIn("AccessDenied", denied["errorCode"])
        for r in (ok, denied):  # both name the role they asked for
            self.assertEqual(r["resources"], [{"type": "AWS::IAM::Role", "name": self.role["Arn"]}])


if __name__ == "__main__":
    unittest.main()
