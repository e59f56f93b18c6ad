"""Two teams on one server (docs/security.md, "The sharing model"): team a runs a training job
on a warm pool, a tuning job, an array job and a rule, and keeps data in its own bucket; team c,
with the same policies for its own team, cannot read, list, reuse or receive anything of a's
through jobs, trials, arrays, warm pools, logs, metrics, events, rules or objects. Each refusal
is paired with the same call succeeding for a, so no check passes because nothing was there."""
import io
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

import harness
from harness import REGION, Receiver, ServerTest

ACCOUNT = "000000000000"
GROUP = "/aws/sagemaker/TrainingJobs"
SHARED_ROLE = f"arn:aws:iam::{ACCOUNT}:role/shared-runner"
OBJECTIVE = os.path.join(harness.SOURCE_DIR, "examples", "tuning", "objective.py")

# Each member is tagged team=<t>; the same document serves both teams through the tag.
TEAM = {"Version": "2012-10-17", "Statement": [
    {"Sid": "CreateTagged", "Effect": "Allow",
     "Action": ["sagemaker:CreateTrainingJob", "sagemaker:CreateHyperParameterTuningJob", "sagemaker:AddTags",
                "batch:RegisterJobDefinition", "batch:TagResource"],
     "Resource": "*", "Condition": {"StringEquals": {"aws:RequestTag/team": "${aws:PrincipalTag/team}"}}},
    {"Sid": "SubmitToQueues", "Effect": "Allow", "Action": "batch:SubmitJob",
     "Resource": "arn:aws:batch:*:*:job-queue/*"},
    {"Sid": "UseOwnDefinitions", "Effect": "Allow", "Action": "batch:SubmitJob",
     "Resource": "arn:aws:batch:*:*:job-definition/*",
     "Condition": {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
    # Reads, and the List calls whose items are each checked again with their own tags: a call on no
    # one resource has no tag, which IfExists lets through; an item tagged for another team does not.
    {"Sid": "ReadOwn", "Effect": "Allow",
     "Action": ["batch:Describe*", "batch:List*", "batch:CancelJob", "batch:TerminateJob", "sagemaker:Describe*",
                "sagemaker:List*", "sagemaker:StopTrainingJob", "logs:*", "trainyard:MetricSeries",
                "trainyard:GetLogs", "cloudwatch:GetMetricData", "cloudwatch:ListMetrics",
                "cloudwatch:GetMetricStatistics", "events:ListRules"],
     "Resource": "*", "Condition": {"StringEqualsIfExists": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
    {"Sid": "PutOwnEvents", "Effect": "Allow", "Action": "events:PutEvents", "Resource": "*"},
    {"Sid": "PassRunner", "Effect": "Allow", "Action": "iam:PassRole", "Resource": SHARED_ROLE},
    {"Sid": "OwnBucket", "Effect": "Allow", "Action": "s3:*",
     "Resource": ["arn:aws:s3:::team-${aws:PrincipalTag/team}-data",
                  "arn:aws:s3:::team-${aws:PrincipalTag/team}-data/*"]},
    {"Sid": "OwnRules", "Effect": "Allow", "Action": "events:*",
     "Resource": ["arn:aws:events:*:*:rule/${aws:PrincipalTag/team}-*",
                  "arn:aws:events:*:*:connection/${aws:PrincipalTag/team}-*",
                  "arn:aws:events:*:*:api-destination/${aws:PrincipalTag/team}-*"]},
]}

# What every job runs as: the shared code and scratch bucket, nothing of either team's data.
RUNNER = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "s3:*",
     "Resource": ["arn:aws:s3:::shared-scratch", "arn:aws:s3:::shared-scratch/*"]}]}

# Prints a metric, lists and then writes to the warm-pool cache (docs/warm-pools.md).
PROBE = ('echo "loss=0.25"; C=$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY; echo "cache=${C:-none}"; '
         '[ -n "$C" ] && { ls "$C" | sed "s/^/seen=/"; touch "$C/from-$TRAINING_JOB_NAME"; }; true')


@unittest.skipIf(os.environ.get("TRAINYARD_TEST_STORE") == "postgres",
                 "authorization does not depend on the store; the SQLite pass covers it")
class TwoTeamsTest(ServerTest):
    server_args = ["--clock=offset"]

    def setUp(self):
        self.receiver = Receiver().start()
        # API destinations may reach this test's loopback receiver only because the operator says so.
        self.server_config = "[events]\nallow_local_endpoints = true\n"
        super().setUp()
        self.clients = []
        self.keys = {}
        iam = lambda op, body: self.server.admin("admin/iam/" + op, body)  # noqa: E731
        iam("CreatePolicy", {"PolicyName": "team", "PolicyDocument": json.dumps(TEAM)})
        iam("CreatePolicy", {"PolicyName": "runner", "PolicyDocument": json.dumps(RUNNER)})
        iam("CreateRole", {"RoleName": "shared-runner"})
        iam("AttachRolePolicy", {"RoleName": "shared-runner", "PolicyName": "runner"})
        for team in "ac":
            iam("CreateUser", {"UserName": team, "Tags": [{"Key": "team", "Value": team}]})
            iam("AttachUserPolicy", {"UserName": team, "PolicyName": "team"})
            self.keys[team] = iam("CreateAccessKey", {"UserName": team})["AccessKey"]
        root_s3 = self.server.client("s3")
        for bucket in ("team-a-data", "team-c-data", "shared-scratch"):
            root_s3.create_bucket(Bucket=bucket)
        root_s3.close()
        src = tempfile.mkdtemp(prefix="trainyard-two-teams-")
        try:
            shutil.copy(OBJECTIVE, os.path.join(src, "objective.py"))
            os.makedirs(self.bucket_path("shared-scratch", "code"), exist_ok=True)
            subprocess.check_call(["tar", "-czf", self.bucket_path("shared-scratch", "code/tune.tar.gz"),
                                   "-C", src, "."])
        finally:
            shutil.rmtree(src)
        self.batch.create_compute_environment(computeEnvironmentName="ce", type="MANAGED",
                                              computeResources={"type": "EC2", "maxvCpus": 2, "subnets": ["local"]})
        self.batch.create_job_queue(jobQueueName="jq", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])

    def tearDown(self):
        for c in self.clients:
            c.close()
        super().tearDown()
        self.receiver.stop()

    def as_(self, team, service):
        k = self.keys[team]
        if service == "s3":
            c = boto3.client("s3", endpoint_url=self.server.url, region_name=REGION,
                             aws_access_key_id=k["AccessKeyId"], aws_secret_access_key=k["SecretAccessKey"],
                             config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
        else:
            c = self.server.client(service, key=k["AccessKeyId"], secret=k["SecretAccessKey"], project_models=True)
        self.clients.append(c)
        return c

    def assertRefused(self, call, codes=("AccessDeniedException", "AccessDenied")):
        with self.assertRaises(ClientError) as e:
            call()
        self.assertIn(e.exception.response["Error"]["Code"], codes, e.exception.response)
        return e.exception.response["Error"]["Message"]

    def training(self, name, team, command=PROBE, keep=600):
        return {
            "TrainingJobName": name, "RoleArn": SHARED_ROLE,
            "AlgorithmSpecification": {"TrainingImage": "local/shell", "TrainingInputMode": "File",
                                       "ContainerEntrypoint": ["/bin/sh", "-c"], "ContainerArguments": [command],
                                       "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}]},
            "OutputDataConfig": {"S3OutputPath": "s3://shared-scratch/output"},
            "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1,
                               "KeepAlivePeriodInSeconds": keep},
            "StoppingCondition": {"MaxRuntimeInSeconds": 300},
            "Tags": [{"Key": "team", "Value": team}]}

    def tuning(self, name, team):
        return dict(
            HyperParameterTuningJobName=name,
            HyperParameterTuningJobConfig={
                "Strategy": "Random", "RandomSeed": 7,
                "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "score"},
                "ResourceLimits": {"MaxNumberOfTrainingJobs": 1, "MaxParallelTrainingJobs": 1},
                "ParameterRanges": {"IntegerParameterRanges": [{"Name": "x", "MinValue": "0", "MaxValue": "6"}]}},
            TrainingJobDefinition={
                "StaticHyperParameters": {"sagemaker_program": "objective.py", "epochs": "1",
                                          "secret-of": team,
                                          "sagemaker_submit_directory": "s3://shared-scratch/code/tune.tar.gz"},
                "AlgorithmSpecification": {"TrainingImage": "local/python3", "TrainingInputMode": "File",
                                           "MetricDefinitions": [{"Name": "score", "Regex": "score=([-0-9.]+)"}]},
                "RoleArn": SHARED_ROLE,
                "OutputDataConfig": {"S3OutputPath": "s3://shared-scratch/output"},
                "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
                "StoppingCondition": {"MaxRuntimeInSeconds": 300}},
            Tags=[{"Key": "team", "Value": team}])

    def wait(self, what, predicate, timeout=120):
        deadline = time.time() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.time() > deadline:
                self.fail(f"timed out waiting for {what}\n{self.server.read_log()}")
            time.sleep(0.1)

    def status(self, name):
        return self.sm.describe_training_job(TrainingJobName=name)

    def log_lines(self, client, name):
        streams = client.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix=name + "/")["logStreams"]
        return [e["message"] for s in streams
                for e in client.get_log_events(logGroupName=GROUP, logStreamName=s["logStreamName"])["events"]]

    def test_team_c_reaches_nothing_of_team_a(self):
        a_sm, c_sm = self.as_("a", "sagemaker"), self.as_("c", "sagemaker")
        a_batch, c_batch = self.as_("a", "batch"), self.as_("c", "batch")
        a_events, c_events = self.as_("a", "events"), self.as_("c", "events")
        a_s3, c_s3 = self.as_("a", "s3"), self.as_("c", "s3")

        # ---- c's rule, delivering every event of the account to c's own receiver ----
        conn = c_events.create_connection(Name="c-conn", AuthorizationType="API_KEY", AuthParameters={
            "ApiKeyAuthParameters": {"ApiKeyName": "x-api-key", "ApiKeyValue": "c-key"}})
        dest = c_events.create_api_destination(Name="c-dest", ConnectionArn=conn["ConnectionArn"],
                                               InvocationEndpoint=self.receiver.url,
                                               HttpMethod="POST")["ApiDestinationArn"]
        c_events.put_rule(Name="c-all", EventPattern=json.dumps({"account": [ACCOUNT]}))
        c_events.put_targets(Rule="c-all", Targets=[{"Id": "mine", "Arn": dest}])
        a_events.put_rule(Name="a-rule", EventPattern=json.dumps({"source": ["aws.sagemaker"]}))

        # ---- team a's work: data, a training job on a warm pool, a tuning job, an array job ----
        a_s3.put_object(Bucket="team-a-data", Key="private/secret.txt", Body=b"a's secret")
        a_sm.create_training_job(**self.training("a-pool", "a"))
        a_sm.create_hyper_parameter_tuning_job(**self.tuning("a-tune", "a"))
        a_batch.register_job_definition(
            jobDefinitionName="a-def", type="container", tags={"team": "a"},
            containerProperties={"image": "local/busybox", "command": ["/bin/sh", "-c", "echo a-child"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "256"}]})
        parent = a_batch.submit_job(jobName="a-array", jobQueue="jq", jobDefinition="a-def",
                                    arrayProperties={"size": 2}, tags={"team": "a"})["jobId"]
        self.wait("a-pool's warm pool", lambda: (self.status("a-pool").get("WarmPoolStatus") or {}).get("Status")
                  == "Available")
        self.wait("a-tune", lambda: self.sm.describe_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="a-tune")["HyperParameterTuningJobStatus"] == "Completed", timeout=180)
        self.wait("a-array", lambda: self.describe_job(parent)["status"] == "SUCCEEDED")
        [trial] = [t["TrainingJobName"] for t in a_sm.list_training_jobs_for_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="a-tune")["TrainingJobSummaries"]]

        # ---- jobs and trials: a sees its own, c is refused and lists none ----
        for name in ("a-pool", trial):
            self.assertEqual(a_sm.describe_training_job(TrainingJobName=name)["TrainingJobName"], name)
            self.assertRefused(lambda: c_sm.describe_training_job(TrainingJobName=name))
            self.assertRefused(lambda: c_sm.list_tags(ResourceArn=self.status(name)["TrainingJobArn"]))
        self.assertEqual(a_sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="a-tune")[
            "HyperParameterTuningJobName"], "a-tune")
        self.assertRefused(lambda: c_sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="a-tune"))
        self.assertRefused(lambda: c_sm.list_training_jobs_for_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="a-tune"))
        a_listed = {j["TrainingJobName"] for j in a_sm.list_training_jobs()["TrainingJobSummaries"]}
        self.assertEqual(a_listed, {"a-pool", trial})
        self.assertEqual(c_sm.list_training_jobs()["TrainingJobSummaries"], [])
        self.assertEqual(c_sm.list_hyper_parameter_tuning_jobs()["HyperParameterTuningJobSummaries"], [])

        # ---- arrays: the parent and its children ----
        children = [f"{parent}:0", f"{parent}:1"]
        self.assertEqual(len(a_batch.describe_jobs(jobs=[parent] + children)["jobs"]), 3)
        self.assertEqual(c_batch.describe_jobs(jobs=[parent] + children)["jobs"], [])
        self.assertEqual(len(a_batch.list_jobs(arrayJobId=parent, jobStatus="SUCCEEDED")["jobSummaryList"]), 2)
        self.assertEqual(c_batch.list_jobs(arrayJobId=parent, jobStatus="SUCCEEDED")["jobSummaryList"], [])
        self.assertEqual(c_batch.list_jobs(jobQueue="jq", jobStatus="SUCCEEDED")["jobSummaryList"], [])
        self.assertRefused(lambda: c_batch.terminate_job(jobId=children[0], reason="c"), ("AccessDeniedException",))
        # a's job definition is a resource of SubmitJob: c may not run it, even with its own command.
        self.assertRefused(lambda: c_batch.submit_job(
            jobName="c-steal", jobQueue="jq", jobDefinition="a-def", tags={"team": "c"},
            containerOverrides={"command": ["/bin/sh", "-c", "env"]}), ("AccessDeniedException",))

        # ---- logs: a reads its streams, c reads none of them and finds none ----
        self.assertIn("loss=0.25", self.log_lines(a_sm_logs := self.as_("a", "logs"), "a-pool"))
        c_logs = self.as_("c", "logs")
        [stream] = a_sm_logs.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix="a-pool/")["logStreams"]
        self.assertRefused(lambda: c_logs.get_log_events(logGroupName=GROUP, logStreamName=stream["logStreamName"]))
        self.assertEqual(c_logs.describe_log_streams(logGroupName=GROUP)["logStreams"], [])
        self.assertEqual(c_logs.filter_log_events(logGroupName=GROUP)["events"], [])

        # ---- metrics: a's training job series are a's ----
        a_cw, c_cw = self.as_("a", "cloudwatch"), self.as_("c", "cloudwatch")
        host = [{"Name": "Host", "Value": "a-pool/algo-1"}]
        query = [{"Id": "m", "MetricStat": {"Metric": {"Namespace": GROUP, "MetricName": "train:loss",
                                                      "Dimensions": host}, "Period": 60, "Stat": "Average"}}]
        window = dict(StartTime=time.time() - 3600, EndTime=time.time() + 3600)
        self.assertTrue(a_cw.get_metric_data(MetricDataQueries=query, **window)["MetricDataResults"][0]["Values"])
        try:
            seen = c_cw.get_metric_data(MetricDataQueries=query, **window)["MetricDataResults"][0]["Values"]
        except ClientError as e:
            self.assertIn(e.response["Error"]["Code"], ("AccessDenied", "AccessDeniedException"))
            seen = []
        self.assertEqual(seen, [])
        a_metrics = a_cw.list_metrics(Namespace=GROUP)["Metrics"]
        self.assertIn(host, [m["Dimensions"] for m in a_metrics])
        self.assertNotIn(host, [m["Dimensions"] for m in c_cw.list_metrics(Namespace=GROUP)["Metrics"]])

        # ---- rules ----
        self.assertEqual(a_events.describe_rule(Name="a-rule")["Name"], "a-rule")
        self.assertRefused(lambda: c_events.describe_rule(Name="a-rule"))
        self.assertEqual([r["Name"] for r in c_events.list_rules()["Rules"]], ["c-all"])

        # ---- objects: neither directly nor through a job's channel or output ----
        self.assertEqual(a_s3.get_object(Bucket="team-a-data", Key="private/secret.txt")["Body"].read(), b"a's secret")
        self.assertRefused(lambda: c_s3.get_object(Bucket="team-a-data", Key="private/secret.txt"))
        self.assertRefused(lambda: c_s3.list_objects_v2(Bucket="team-a-data"))
        stealer = self.training("c-steal-data", "c", command="cat /opt/ml/input/data/train/secret.txt", keep=0)
        stealer["InputDataConfig"] = [{"ChannelName": "train", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": "s3://team-a-data/private/"}}}]
        self.assertRefused(lambda: c_sm.create_training_job(**stealer))
        writer = self.training("c-write-data", "c", command="true", keep=0)
        writer["OutputDataConfig"] = {"S3OutputPath": "s3://team-a-data/private/"}
        self.assertRefused(lambda: c_sm.create_training_job(**writer))
        self.assertRefused(lambda: c_sm.describe_training_job(TrainingJobName="c-steal-data"),
                           ("ResourceNotFound", "ValidationException"))

        # ---- warm pools: c's job that matches a's pool in everything but its owner starts fresh ----
        c_sm.create_training_job(**self.training("c-pool", "c"))
        self.wait("c-pool", lambda: self.status("c-pool")["TrainingJobStatus"] in ("Completed", "Failed"))
        self.assertEqual(self.status("c-pool")["TrainingJobStatus"], "Completed")
        c_lines = self.log_lines(c_logs, "c-pool")
        self.assertIn("loss=0.25", c_lines)
        self.assertNotIn("seen=from-a-pool", c_lines)
        self.assertEqual(self.status("a-pool")["WarmPoolStatus"]["Status"], "Available")

        # ---- events: c's catch-all rule got c's own events and nothing of a's, nor the audit trail ----
        self.receiver.wait(lambda evs: any("c-pool" in json.dumps(e) and "Completed" in json.dumps(e) for e in evs),
                           what="c's own training job events")
        delivered = json.dumps(self.receiver.events())
        for name in ("a-pool", "a-tune", trial, "a-array", "a-def", parent, "team-a-data"):
            self.assertNotIn(name, delivered)
        self.assertNotIn("AWS API Call via CloudTrail", delivered)


if __name__ == "__main__":
    unittest.main()
