"""The aws CLI, unchanged, pointed at trainyard with --endpoint-url."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import SOURCE_DIR, ServerTest


@unittest.skipUnless(shutil.which("aws"), "the aws CLI is not installed")
class AwsCliTest(ServerTest):
    def aws(self, *args, check=True, data_path=None):
        key, secret = self.server.credentials()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION="us-east-1",
                   AWS_PAGER="", AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
        if data_path:
            env["AWS_DATA_PATH"] = data_path
        r = subprocess.run(["aws", "--endpoint-url", self.server.url, "--output", "json", *args],
                           capture_output=True, text=True, env=env, timeout=120)
        if check and r.returncode != 0:
            self.fail(f"aws {' '.join(args)} failed: {r.stderr}")
        return r

    def test_walkthrough_with_the_aws_cli(self):
        self.stage_quickstart()
        self.aws("batch", "create-service-environment", "--service-environment-name", "cli-env",
                 "--service-environment-type", "SAGEMAKER_TRAINING",
                 "--capacity-limits", "maxCapacity=1,capacityUnit=NUM_INSTANCES")
        self.aws("batch", "create-job-queue", "--job-queue-name", "cli-q", "--job-queue-type", "SAGEMAKER_TRAINING",
                 "--priority", "1", "--service-environment-order", "order=1,serviceEnvironment=cli-env")
        queues = json.loads(self.aws("batch", "describe-job-queues").stdout)["jobQueues"]
        self.assertEqual([(q["jobQueueName"], q["state"], q["status"]) for q in queues], [("cli-q", "ENABLED", "VALID")])
        payload = json.dumps(self.script_payload("cli-job-1", epochs=2))
        out = json.loads(self.aws("batch", "submit-service-job", "--job-name", "cli-job-1", "--job-queue", "cli-q",
                                  "--service-job-type", "SAGEMAKER_TRAINING",
                                  "--service-request-payload", payload).stdout)
        job = self.wait_jobs([out["jobId"]])[0]
        self.assertEqual(job["status"], "SUCCEEDED")
        described = json.loads(self.aws("batch", "describe-service-job", "--job-id", out["jobId"]).stdout)
        self.assertEqual(described["status"], "SUCCEEDED")
        listed = json.loads(self.aws("batch", "list-service-jobs", "--job-queue", "cli-q",
                                     "--job-status", "SUCCEEDED").stdout)["jobSummaryList"]
        self.assertEqual([j["jobName"] for j in listed], ["cli-job-1"])
        tj = json.loads(self.aws("sagemaker", "describe-training-job", "--training-job-name", "cli-job-1").stdout)
        self.assertEqual(tj["TrainingJobStatus"], "Completed")
        self.assertIn("train:loss", [m["MetricName"] for m in tj["FinalMetricDataList"]])
        names = json.loads(self.aws("sagemaker", "list-training-jobs").stdout)["TrainingJobSummaries"]
        self.assertEqual([n["TrainingJobName"] for n in names], ["cli-job-1"])
        snap = json.loads(self.aws("batch", "get-job-queue-snapshot", "--job-queue", "cli-q").stdout)
        self.assertEqual(snap["frontOfQueue"]["jobs"], [])

    def test_cli_errors_are_aws_shaped(self):
        r = self.aws("sagemaker", "describe-training-job", "--training-job-name", "nope", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ResourceNotFound", r.stderr)
        r = self.aws("batch", "describe-service-job", "--job-id", "00000000-0000-4000-8000-000000000000", check=False)
        self.assertIn("ClientException", r.stderr)

    def test_tags_with_the_aws_cli(self):
        self.create_queue("q")
        arn = json.loads(self.aws("batch", "describe-job-queues", "--job-queues", "q").stdout)["jobQueues"][0]["jobQueueArn"]
        self.aws("batch", "tag-resource", "--resource-arn", arn, "--tags", "team=a,stage=dev")
        self.aws("batch", "untag-resource", "--resource-arn", arn, "--tag-keys", "stage")
        listed = json.loads(self.aws("batch", "list-tags-for-resource", "--resource-arn", arn).stdout)
        self.assertEqual(listed["tags"], {"team": "a"})
        r = self.aws("batch", "tag-resource", "--resource-arn", arn, "--tags", "aws:team=a", check=False)
        self.assertIn("ClientException", r.stderr)
        self.assertIn("reserved", r.stderr)
        r = self.aws("batch", "list-tags-for-resource", "--resource-arn", arn + "-gone", check=False)
        self.assertIn("does not exist", r.stderr)

        tj = json.loads(self.aws("sagemaker", "create-training-job", "--cli-input-json",
                                 json.dumps(self.command_payload("tj", "true"))).stdout)["TrainingJobArn"]
        self.aws("sagemaker", "add-tags", "--resource-arn", tj, "--tags", "Key=team,Value=b", "Key=stage,Value=dev")
        self.aws("sagemaker", "delete-tags", "--resource-arn", tj, "--tag-keys", "stage")
        listed = json.loads(self.aws("sagemaker", "list-tags", "--resource-arn", tj).stdout)
        self.assertEqual(listed["Tags"], [{"Key": "team", "Value": "b"}])
        r = self.aws("sagemaker", "list-tags", "--resource-arn", tj.replace("us-east-1", "eu-west-3"), check=False)
        self.assertIn("ValidationException", r.stderr)

    def test_terminate_service_jobs_with_the_aws_cli(self):
        # The installed CLI's botocore predates TerminateServiceJobs: it reads trainyard's model.
        data_path = tempfile.mkdtemp(prefix="trainyard-models-")
        try:
            os.makedirs(os.path.join(data_path, "batch", "2016-08-10"))
            shutil.copy(os.path.join(SOURCE_DIR, "models", "batch-2016-08-10.json"),
                        os.path.join(data_path, "batch", "2016-08-10", "service-2.json"))
            self.create_queue("q")
            ids = [self.submit("q", self.command_payload(f"j{n}", "sleep 60")) for n in range(2)]
            out = json.loads(self.aws("batch", "terminate-service-jobs", "--jobs", *ids, "nope",
                                      "--reason", "done here", data_path=data_path).stdout)
            self.assertEqual((out["successful"], out["errors"]), (ids + ["nope"], []))
            jobs = self.wait_jobs(ids)
            self.assertEqual([(j["status"], j["isTerminated"]) for j in jobs], [("FAILED", True)] * 2)
        finally:
            shutil.rmtree(data_path)


if __name__ == "__main__":
    unittest.main()
