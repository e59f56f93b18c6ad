"""Batch container jobs' logs through the CloudWatch Logs API (docs/logs.md): group /aws/batch/job,
one stream per started attempt named its container.logStreamName, read, searched and authorized
like the training jobs' group."""
import json
import time
import unittest

from botocore.exceptions import ClientError

from harness import ServerTest

GROUP = "/aws/batch/job"
TEAM_LOGS = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["logs:DescribeLogStreams", "logs:GetLogEvents", "logs:FilterLogEvents"],
     "Resource": "*", "Condition": {"StringEqualsIfExists": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}}]}


class BatchLogsTest(ServerTest):
    def setUp(self):
        super().setUp()
        self.logs = self.server.client("logs")
        self.batch.create_compute_environment(computeEnvironmentName="ce", type="UNMANAGED", unmanagedvCpus=4)
        self.batch.create_job_queue(jobQueueName="jq", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        self.batch.register_job_definition(
            jobDefinitionName="echo", type="container",
            containerProperties={"image": "local/busybox",
                                 "command": ["/bin/sh", "-c", "echo first line; echo second needle line"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "512"}]})

    def tearDown(self):
        self.logs.close()
        super().tearDown()

    def run_job(self, name, **kw):
        job_id = self.batch.submit_job(jobName=name, jobQueue="jq", jobDefinition="echo", **kw)["jobId"]
        deadline = time.time() + 60
        while True:
            [j] = self.batch.describe_jobs(jobs=[job_id])["jobs"]
            if j["status"] in ("SUCCEEDED", "FAILED"):
                break
            if time.time() > deadline:
                self.fail(f"{name}: still {j['status']}\n{self.server.read_log()}")
            time.sleep(0.05)
        self.assertEqual(j["status"], "SUCCEEDED", j)
        return j["attempts"][0]["container"]["logStreamName"]

    def test_an_attempts_lines_are_its_log_stream(self):
        stream = self.run_job("echoer")
        self.assertTrue(stream.startswith("echo/default/"), stream)
        groups = [g["logGroupName"] for g in self.logs.describe_log_groups()["logGroups"]]
        self.assertEqual(groups, [GROUP, "/aws/sagemaker/TrainingJobs"])
        self.assertEqual([g["logGroupName"] for g in self.logs.describe_log_groups(logGroupNamePrefix="/aws/batch")
                          ["logGroups"]], [GROUP])
        page = self.logs.describe_log_groups(limit=1)
        self.assertEqual([g["logGroupName"] for g in page["logGroups"]], [GROUP])
        rest = self.logs.describe_log_groups(limit=1, nextToken=page["nextToken"])
        self.assertEqual([g["logGroupName"] for g in rest["logGroups"]], ["/aws/sagemaker/TrainingJobs"])
        self.assertNotIn("nextToken", rest)

        [listed] = self.logs.describe_log_streams(logGroupName=GROUP)["logStreams"]
        self.assertEqual(listed["logStreamName"], stream)
        self.assertGreater(listed["storedBytes"], 0)
        events = self.logs.get_log_events(logGroupName=GROUP, logStreamName=stream, startFromHead=True)["events"]
        self.assertEqual([e["message"] for e in events], ["first line", "second needle line"])
        hits = self.logs.filter_log_events(logGroupName=GROUP, filterPattern="needle")["events"]
        self.assertEqual([(e["logStreamName"], e["message"]) for e in hits], [(stream, "second needle line")])
        # The training jobs' group does not hold it.
        with self.assertRaises(ClientError) as e:
            self.logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream)
        self.assertEqual(e.exception.response["Error"]["Code"], "ResourceNotFoundException")

    def test_unknown_streams_and_groups_are_not_found(self):
        stream = self.run_job("echoer")
        for group, name in ((GROUP, stream + "x"), (GROUP, "echo/default/batch-nope-1"), ("/aws/batch/jobs", stream)):
            with self.assertRaises(ClientError) as e:
                self.logs.get_log_events(logGroupName=group, logStreamName=name)
            self.assertEqual(e.exception.response["Error"]["Code"], "ResourceNotFoundException", (group, name))

    def test_a_caller_reads_only_the_logs_of_jobs_it_may_read(self):
        iam = lambda op, body: self.server.admin("admin/iam/" + op, body)
        iam("CreatePolicy", {"PolicyName": "team-logs", "PolicyDocument": json.dumps(TEAM_LOGS)})
        iam("CreateUser", {"UserName": "member-a", "Tags": [{"Key": "team", "Value": "a"}]})
        iam("AttachUserPolicy", {"UserName": "member-a", "PolicyName": "team-logs"})
        key = iam("CreateAccessKey", {"UserName": "member-a"})["AccessKey"]
        own = self.run_job("mine", tags={"team": "a"})
        other = self.run_job("theirs", tags={"team": "b"})
        logs_a = self.server.client("logs", key=key["AccessKeyId"], secret=key["SecretAccessKey"])
        try:
            self.assertEqual([s["logStreamName"] for s in logs_a.describe_log_streams(logGroupName=GROUP)["logStreams"]],
                             [own])
            self.assertEqual(len(logs_a.get_log_events(logGroupName=GROUP, logStreamName=own)["events"]), 2)
            with self.assertRaises(ClientError) as e:
                logs_a.get_log_events(logGroupName=GROUP, logStreamName=other)
            self.assertEqual(e.exception.response["Error"]["Code"], "AccessDeniedException")
            hits = logs_a.filter_log_events(logGroupName=GROUP, filterPattern="needle")
            self.assertEqual([h["logStreamName"] for h in hits["events"]], [own])
            self.assertEqual([s["logStreamName"] for s in hits["searchedLogStreams"]], [own])
        finally:
            logs_a.close()


if __name__ == "__main__":
    unittest.main()
