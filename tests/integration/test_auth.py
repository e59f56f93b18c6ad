"""Authentication: every failure class is refused with 403 and AWS's error type, and changes nothing."""
import datetime
import http.client
import json
import unittest
import urllib.parse
from unittest import mock

import botocore.auth
import botocore.awsrequest
import botocore.credentials
from botocore.exceptions import ClientError

from harness import ServerTest

ENV_BODY = json.dumps({"serviceEnvironmentName": "auth-env", "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                       "capacityLimits": [{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}]})


class AuthTest(ServerTest):
    def raw(self, path, body, headers):
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, resp.getheader("x-amzn-ErrorType"), json.loads(data or b"{}")

    def signed_headers(self, body, key=None, secret=None, region="us-east-1", service="batch",
                       when=None, path="/v1/createserviceenvironment", target=None):
        k, s = self.server.credentials()
        creds = botocore.credentials.Credentials(key or k, secret or s)
        headers = {"Content-Type": "application/json"}
        if target:
            headers = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": target}
        req = botocore.awsrequest.AWSRequest(method="POST", url=self.server.url + path, data=body, headers=headers)
        if when is None:
            botocore.auth.SigV4Auth(creds, service, region).add_auth(req)
        else:
            with mock.patch("botocore.auth.get_current_datetime", return_value=when):
                botocore.auth.SigV4Auth(creds, service, region).add_auth(req)
        return dict(req.headers.items())

    def assertNothingCreated(self):
        self.assertEqual(self.batch.describe_service_environments()["serviceEnvironments"], [])

    def test_generated_credentials_file_is_private(self):
        import os
        import stat
        path = os.path.join(self.data_dir, "credentials")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        with open(path) as f:
            self.assertEqual(f.readline().strip(), "[trainyard]")

    def test_correctly_signed_request_is_accepted(self):
        status, _, body = self.raw("/v1/createserviceenvironment", ENV_BODY, self.signed_headers(ENV_BODY))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["serviceEnvironmentName"], "auth-env")

    def test_unsigned_request_is_refused(self):
        status, etype, body = self.raw("/v1/createserviceenvironment", ENV_BODY, {"Content-Type": "application/json"})
        self.assertEqual((status, etype), (403, "MissingAuthenticationTokenException"))
        self.assertIn("Missing Authentication Token", body["message"])
        self.assertNothingCreated()

    def test_unsigned_sagemaker_request_is_refused(self):
        status, etype, _ = self.raw("/", "{}", {"Content-Type": "application/x-amz-json-1.1",
                                                "X-Amz-Target": "SageMaker.ListTrainingJobs"})
        self.assertEqual((status, etype), (403, "MissingAuthenticationTokenException"))

    def test_bad_signature_is_refused(self):
        headers = self.signed_headers(ENV_BODY)
        tampered = ENV_BODY.replace("auth-env", "evil-env")
        status, etype, body = self.raw("/v1/createserviceenvironment", tampered, headers)
        self.assertEqual((status, etype), (403, "InvalidSignatureException"))
        self.assertIn("signature we calculated does not match", body["message"])
        self.assertNothingCreated()

    def test_wrong_secret_is_refused(self):
        headers = self.signed_headers(ENV_BODY, secret="x" * 40)
        status, etype, _ = self.raw("/v1/createserviceenvironment", ENV_BODY, headers)
        self.assertEqual((status, etype), (403, "InvalidSignatureException"))
        self.assertNothingCreated()

    def test_unknown_key_is_refused(self):
        headers = self.signed_headers(ENV_BODY, key="AKIAUNKNOWNUNKNOWN00", secret="y" * 40)
        status, etype, body = self.raw("/v1/createserviceenvironment", ENV_BODY, headers)
        self.assertEqual((status, etype), (403, "UnrecognizedClientException"))
        self.assertIn("security token included in the request is invalid", body["message"])
        self.assertNothingCreated()

    def test_wrong_region_is_refused(self):
        headers = self.signed_headers(ENV_BODY, region="eu-west-1")
        status, etype, body = self.raw("/v1/createserviceenvironment", ENV_BODY, headers)
        self.assertEqual((status, etype), (403, "InvalidSignatureException"))
        self.assertIn("eu-west-1", body["message"])
        self.assertNothingCreated()

    def test_wrong_service_is_refused(self):
        headers = self.signed_headers(ENV_BODY, service="sagemaker")
        status, etype, _ = self.raw("/v1/createserviceenvironment", ENV_BODY, headers)
        self.assertEqual((status, etype), (403, "InvalidSignatureException"))
        self.assertNothingCreated()

    def test_clock_skew_over_15_minutes_is_refused(self):
        for skew in (datetime.timedelta(minutes=-16), datetime.timedelta(minutes=16)):
            when = datetime.datetime.utcnow() + skew
            headers = self.signed_headers(ENV_BODY, when=when)
            status, etype, body = self.raw("/v1/createserviceenvironment", ENV_BODY, headers)
            self.assertEqual((status, etype), (403, "InvalidSignatureException"), body)
            self.assertIn("Signature", body["message"])
        self.assertNothingCreated()

    def test_clock_skew_under_15_minutes_is_accepted(self):
        when = datetime.datetime.utcnow() - datetime.timedelta(minutes=14)
        status, _, body = self.raw("/v1/createserviceenvironment", ENV_BODY, self.signed_headers(ENV_BODY, when=when))
        self.assertEqual(status, 200, body)

    def test_boto3_with_wrong_credentials_gets_client_errors(self):
        bad = self.server.client("batch", key="AKIAUNKNOWNUNKNOWN00", secret="z" * 40)
        with self.assertRaises(ClientError) as e:
            bad.describe_job_queues()
        self.assertEqual(e.exception.response["Error"]["Code"], "UnrecognizedClientException")
        self.assertEqual(e.exception.response["ResponseMetadata"]["HTTPStatusCode"], 403)
        wrong_region = self.server.client("sagemaker", region="ap-south-1")
        with self.assertRaises(ClientError) as e:
            wrong_region.list_training_jobs()
        self.assertEqual(e.exception.response["Error"]["Code"], "InvalidSignatureException")

    def test_environment_credentials_replace_the_generated_file(self):
        self.server.stop()
        from harness import Server
        s = Server(self.data_dir, env={"TRAINYARD_ROOT_ACCESS_KEY_ID": "AKIAENVKEY0000000000",
                                       "TRAINYARD_ROOT_SECRET_ACCESS_KEY": "envsecret" * 4}).start()
        try:
            ok = s.client("batch", key="AKIAENVKEY0000000000", secret="envsecret" * 4)
            self.assertEqual(ok.describe_job_queues()["jobQueues"], [])
            with self.assertRaises(ClientError):
                s.client("batch").describe_job_queues()  # the file's key is not accepted now
        finally:
            s.stop()
            self.server = s


if __name__ == "__main__":
    unittest.main()
