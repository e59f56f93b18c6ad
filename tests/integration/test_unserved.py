"""Requests for AWS services trainyard does not serve are answered in that service's own protocol,
so SDKs and the aws CLI print a sentence naming the service (docs/api-coverage.md, "Other
services"), and nothing changes."""
import os
import subprocess

import boto3
import botocore.config
import botocore.exceptions

from harness import REGION, ServerTest


class UnservedServiceTest(ServerTest):
    def client(self, service):
        key, secret = self.server.credentials()
        return boto3.client(service, endpoint_url=self.server.url, region_name=REGION, aws_access_key_id=key,
                            aws_secret_access_key=secret, config=botocore.config.Config(retries={"max_attempts": 1}))

    def refusal(self, call):
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            call()
        err = e.exception.response["Error"]
        return err["Code"], err["Message"], e.exception.response["ResponseMetadata"]["HTTPStatusCode"]

    def test_query_json_and_cbor_services_each_get_their_own_error_shape(self):
        # IAM speaks the query protocol (XML answers).
        code, message, status = self.refusal(self.client("iam").list_users)
        self.assertEqual((code, status), ("InvalidAction", 400))
        self.assertIn("trainyard does not serve the IAM API (service 'iam', operation ListUsers)", message)
        self.assertIn("trainyard admin user", message)
        # DynamoDB speaks AWS JSON 1.0.
        code, message, status = self.refusal(self.client("dynamodb").list_tables)
        self.assertEqual((code, status), ("UnknownOperationException", 400))
        self.assertIn("the DynamoDB API (service 'dynamodb', operation ListTables)", message)
        # GameLift speaks Smithy RPC v2 CBOR in this botocore.
        code, message, status = self.refusal(self.client("gamelift").list_fleets)
        self.assertEqual((code, status), ("UnknownOperationException", 400))
        self.assertIn("(service 'gamelift', operation ListFleets)", message)
        # The served APIs are untouched.
        self.assertEqual(self.client("sts").get_caller_identity()["Account"], "000000000000")
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])

    def test_the_aws_cli_prints_a_sentence(self):
        key, secret = self.server.credentials()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION=REGION,
                   AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_MAX_ATTEMPTS="1")
        out = subprocess.run(["aws", "iam", "list-users", "--endpoint-url", self.server.url], env=env,
                             capture_output=True, text=True, timeout=60)
        self.assertNotEqual(out.returncode, 0, out.stderr)
        self.assertIn("An error occurred (InvalidAction) when calling the ListUsers operation: trainyard does not serve "
                      "the IAM API", out.stderr)
        self.assertNotIn("b'", out.stderr)
