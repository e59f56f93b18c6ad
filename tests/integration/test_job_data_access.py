"""A job's data is its principal's (docs/security.md, "Jobs' data"): users `a` and `c` of two teams,
each allowed its own bucket by its policies. A job's channels, output and checkpoints in the
embedded store are checked as the job at create (AccessDenied naming the field and the action)
and each object as it is read or written at start (a refusal fails the job, which writes nothing);
what is derived from a job (tuning trials, retries, array children, warm pools) stays its owner's.
One server serves every test."""
import json
import os
import shutil
import tempfile
import time
import unittest

from botocore.exceptions import ClientError

from harness import ServerTest, Server, kill_attempt_processes

ACCOUNT = "000000000000"
SECRET = "a-secret-7f3c"
GROUP = "/aws/sagemaker/TrainingJobs"

TEAM = {"Version": "2012-10-17", "Statement": [
    {"Sid": "Create", "Effect": "Allow", "Resource": "*",
     "Action": ["sagemaker:CreateTrainingJob", "sagemaker:CreateHyperParameterTuningJob", "batch:SubmitServiceJob",
                "batch:SubmitJob"]},
    {"Sid": "ReadOwn", "Effect": "Allow", "Resource": "*",
     "Action": ["sagemaker:Describe*", "sagemaker:List*", "batch:DescribeJobs", "batch:DescribeServiceJob",
                "logs:GetLogEvents", "logs:FilterLogEvents", "logs:DescribeLogStreams"],
     "Condition": {"StringEqualsIfExists": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
    {"Sid": "OwnBucket", "Effect": "Allow", "Action": "s3:*",
     "Resource": ["arn:aws:s3:::team-${aws:PrincipalTag/team}-data",
                  "arn:aws:s3:::team-${aws:PrincipalTag/team}-data/*"]}]}

# Prints where it runs and what the warm-pool cache holds, then leaves a file there.
PROBE = ('C=$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY; echo "cache=${C:-none}"; '
         '[ -n "$C" ] && { ls "$C" | sed "s/^/seen=/"; touch "$C/from-$TRAINING_JOB_NAME"; }; true')


class JobDataAccessTest(ServerTest):
    @classmethod
    def setUpClass(cls):
        cls.data_dir = tempfile.mkdtemp(prefix="trainyard-test-")
        cls.work_dir = tempfile.mkdtemp(prefix="trainyard-work-")
        os.chmod(cls.work_dir, 0o1777)
        cls.server = Server(cls.data_dir, shared_dirs=[cls.work_dir]).start()
        cls.sm = cls.server.client("sagemaker")
        cls.batch = cls.server.client("batch")
        admin = lambda op, body: cls.server.admin("admin/iam/" + op, body)  # noqa: E731
        admin("CreatePolicy", {"PolicyName": "team", "PolicyDocument": json.dumps(TEAM)})
        cls.clients = {}
        for team in "ac":
            admin("CreateUser", {"UserName": team, "Tags": [{"Key": "team", "Value": team}]})
            admin("AttachUserPolicy", {"UserName": team, "PolicyName": "team"})
            key = admin("CreateAccessKey", {"UserName": team})["AccessKey"]
            for service in ("sagemaker", "batch", "logs"):
                cls.clients[team, service] = cls.server.client(service, key=key["AccessKeyId"],
                                                               secret=key["SecretAccessKey"])
            os.makedirs(os.path.join(cls.data_dir, "buckets", f"team-{team}-data"))
        os.makedirs(os.path.join(cls.data_dir, "buckets", "team-a-data", "private"))
        with open(os.path.join(cls.data_dir, "buckets", "team-a-data", "private", "secret.txt"), "w") as f:
            f.write(SECRET + "\n")
        cls.batch.create_service_environment(
            serviceEnvironmentName="q-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 2, "capacityUnit": "NUM_INSTANCES"}])
        cls.batch.create_job_queue(jobQueueName="q", jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                   serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "q-env"}])

    @classmethod
    def tearDownClass(cls):
        for c in [cls.sm, cls.batch, *cls.clients.values()]:
            c.close()
        cls.server.stop()
        kill_attempt_processes(cls.data_dir)
        shutil.rmtree(cls.data_dir, ignore_errors=True)
        shutil.rmtree(cls.work_dir, ignore_errors=True)

    def setUp(self):  # the class's server serves every test
        pass

    def tearDown(self):
        pass

    # ---- helpers ----
    def job(self, name, command, out="s3://team-c-data/out", **extra):
        p = self.command_payload(name, command, **extra)
        p["OutputDataConfig"] = {"S3OutputPath": out}
        return p

    def channel(self, uri, data_type="S3Prefix"):
        return [{"ChannelName": "train", "DataSource": {"S3DataSource": {"S3DataType": data_type, "S3Uri": uri}}}]

    def refused(self, call):
        with self.assertRaises(ClientError) as e:
            call()
        self.assertEqual(e.exception.response["Error"]["Code"], "AccessDeniedException", e.exception.response)
        return e.exception.response["Error"]["Message"]

    def log_text(self, name):
        path = os.path.join(self.data_dir, "attempts", name, "logs", "algo-1.log")
        return open(path).read() if os.path.exists(path) else ""

    # ---- finding 1: channels, outputs and checkpoints are the job's principal's ----
    def test_another_teams_bucket_is_refused_at_create_naming_the_field_and_action(self):
        c = self.clients["c", "sagemaker"]
        cases = [
            (dict(InputDataConfig=self.channel("s3://team-a-data/private/")),
             "InputDataConfig[0].DataSource.S3DataSource.S3Uri", "s3:ListBucket", "arn:aws:s3:::team-a-data"),
            (dict(InputDataConfig=self.channel("s3://team-a-data/private/manifest.json", "ManifestFile")),
             "InputDataConfig[0].DataSource.S3DataSource.S3Uri", "s3:GetObject",
             "arn:aws:s3:::team-a-data/private/manifest.json"),
            (dict(out="s3://team-a-data/out"), "OutputDataConfig.S3OutputPath", "s3:PutObject",
             "arn:aws:s3:::team-a-data/out/"),
            (dict(CheckpointConfig={"S3Uri": "s3://team-a-data/ckpt"}), "CheckpointConfig.S3Uri", "s3:",
             "arn:aws:s3:::team-a-data"),
        ]
        for i, (extra, field, action, resource) in enumerate(cases):
            name = f"c-create-{i}"
            message = self.refused(lambda: c.create_training_job(**self.job(name, "true", **extra)))
            self.assertIn(field + ": ", message)
            self.assertIn(action, message)
            self.assertIn(resource, message)
            self.assertIn("user/c", message)
            with self.assertRaises(ClientError):  # nothing was created
                self.sm.describe_training_job(TrainingJobName=name)
        # The same in a service job's payload and a tuning job's definition.
        payload = self.job("c-submit", "true", InputDataConfig=self.channel("s3://team-a-data/private/"))
        message = self.refused(lambda: self.clients["c", "batch"].submit_service_job(
            jobName="c-submit", jobQueue="q", serviceJobType="SAGEMAKER_TRAINING",
            serviceRequestPayload=json.dumps(payload)))
        self.assertIn("serviceRequestPayload.InputDataConfig[0].DataSource.S3DataSource.S3Uri: ", message)
        for status in ("SUBMITTED", "PENDING", "RUNNABLE", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED"):
            listed = self.batch.list_service_jobs(jobQueue="q", jobStatus=status)["jobSummaryList"]
            self.assertNotIn("c-submit", [j["jobName"] for j in listed])
        definition = self.tuning_definition("s3://team-c-data/tune-out")
        definition["InputDataConfig"] = self.channel("s3://team-a-data/private/")
        message = self.refused(lambda: c.create_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="c-tune", HyperParameterTuningJobConfig=self.tuning_config(),
            TrainingJobDefinition=definition))
        self.assertIn("TrainingJobDefinition.InputDataConfig[0].DataSource.S3DataSource.S3Uri: ", message)

    def test_each_object_read_at_start_is_checked_and_a_refusal_writes_nothing(self):
        # c's own manifest passes the create-time check but lists an object in a's bucket.
        os.makedirs(self.bucket_path("team-c-data", "manifests"), exist_ok=True)
        with open(self.bucket_path("team-c-data", "manifests/m.json"), "w") as f:
            json.dump([{"prefix": "s3://team-a-data/private/"}, "secret.txt"], f)
        name = "c-manifest"
        self.clients["c", "sagemaker"].create_training_job(**self.job(
            name, "cat /opt/ml/input/data/train/* ; echo done > /opt/ml/model/m",
            InputDataConfig=self.channel("s3://team-c-data/manifests/m.json", "ManifestFile")))
        tj = self.wait_training(name)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        reason = tj["FailureReason"]
        self.assertTrue(reason.startswith("ClientError: "), reason)
        self.assertIn("s3:GetObject", reason)
        self.assertIn("arn:aws:s3:::team-a-data/private/secret.txt", reason)
        self.assertNotIn(SECRET, self.log_text(name))
        self.assertFalse(os.path.exists(self.bucket_path("team-c-data", f"out/{name}")), "the refused job wrote outputs")

    def test_the_own_bucket_is_read_and_written_as_the_job(self):
        name = "a-own"
        self.clients["a", "sagemaker"].create_training_job(**self.job(
            name, "cat /opt/ml/input/data/train/secret.txt", out="s3://team-a-data/out",
            InputDataConfig=self.channel("s3://team-a-data/private/"),
            CheckpointConfig={"S3Uri": "s3://team-a-data/ckpt/" + name}))
        tj = self.wait_training(name)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertIn(SECRET, self.log_text(name))
        self.assertTrue(os.path.exists(self.bucket_path("team-a-data", f"out/{name}/output/model.tar.gz")))

    # ---- finding 2: trials, retries and array children are their owner's ----
    def tuning_config(self):
        return {"Strategy": "Random", "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "score"},
                "ResourceLimits": {"MaxNumberOfTrainingJobs": 1, "MaxParallelTrainingJobs": 1},
                "ParameterRanges": {"IntegerParameterRanges": [{"Name": "x", "MinValue": "0", "MaxValue": "6"}]}}

    def tuning_definition(self, out):
        return {
            # Script mode from a's bucket; the trial need not run: what it names is what is read.
            "StaticHyperParameters": {"static_secret": SECRET, "sagemaker_program": "objective.py",
                                      "sagemaker_submit_directory": "s3://team-a-data/code/tune.tar.gz"},
            "AlgorithmSpecification": {"TrainingImage": "local/python3", "TrainingInputMode": "File",
                                       "MetricDefinitions": [{"Name": "score", "Regex": "score=([-0-9.]+)"}]},
            "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole",
            "OutputDataConfig": {"S3OutputPath": out},
            "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
            "StoppingCondition": {"MaxRuntimeInSeconds": 300}}

    def test_a_tuning_trial_is_read_with_its_tuning_jobs_tags_and_owner(self):
        definition = self.tuning_definition("s3://team-a-data/tune-out")
        self.clients["a", "sagemaker"].create_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="a-tune", HyperParameterTuningJobConfig=self.tuning_config(),
            TrainingJobDefinition=definition, Tags=[{"Key": "team", "Value": "a"}])
        deadline = time.time() + 30
        while not (trials := self.sm.list_training_jobs_for_hyper_parameter_tuning_job(
                HyperParameterTuningJobName="a-tune")["TrainingJobSummaries"]):
            self.assertLess(time.time(), deadline, "no trial was started")
            time.sleep(0.05)
        trial = trials[0]["TrainingJobName"]
        c, c_logs = self.clients["c", "sagemaker"], self.clients["c", "logs"]
        self.refused(lambda: c.describe_training_job(TrainingJobName=trial))
        self.assertNotIn(trial, [j["TrainingJobName"] for j in c.list_training_jobs()["TrainingJobSummaries"]])
        self.refused(lambda: c.list_training_jobs_for_hyper_parameter_tuning_job(HyperParameterTuningJobName="a-tune"))
        self.refused(lambda: c_logs.get_log_events(logGroupName=GROUP, logStreamName=trial + "/algo-1-0"))
        events = c_logs.filter_log_events(logGroupName=GROUP, logStreamNamePrefix=trial)["events"]
        self.assertEqual(events, [])
        # Its owner reads it.
        a = self.clients["a", "sagemaker"]
        self.assertEqual(a.describe_training_job(TrainingJobName=trial)["HyperParameters"]["static_secret"], SECRET)
        self.assertIn(trial, [j["TrainingJobName"] for j in a.list_training_jobs()["TrainingJobSummaries"]])

    def test_retries_carry_the_service_jobs_owner_and_tags(self):
        payload = self.job("a-retry", "exit 3", out="s3://team-a-data/out")
        job_id = self.clients["a", "batch"].submit_service_job(
            jobName="a-retry", jobQueue="q", serviceJobType="SAGEMAKER_TRAINING", tags={"team": "a"},
            retryStrategy={"attempts": 2}, serviceRequestPayload=json.dumps(payload))["jobId"]
        [j] = self.wait_jobs([job_id])
        self.assertEqual(j["status"], "FAILED")
        attempts = [tj["TrainingJobName"] for tj in self.sm.list_training_jobs(MaxResults=100)["TrainingJobSummaries"]
                    if tj["TrainingJobName"].startswith("a-retry")]
        self.assertEqual(len(attempts), 2, attempts)
        c, a = self.clients["c", "sagemaker"], self.clients["a", "sagemaker"]
        for name in attempts:
            self.refused(lambda: c.describe_training_job(TrainingJobName=name))
            self.assertEqual(a.describe_training_job(TrainingJobName=name)["TrainingJobName"], name)
        self.refused(lambda: self.clients["c", "batch"].describe_service_job(jobId=job_id))

    def test_array_children_carry_the_parents_owner_and_tags(self):
        self.batch.create_compute_environment(computeEnvironmentName="ce", type="UNMANAGED", unmanagedvCpus=2)
        self.batch.create_job_queue(jobQueueName="jq", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        self.batch.register_job_definition(
            jobDefinitionName="noop", type="container",
            containerProperties={"image": "local/busybox", "command": ["true"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "128"}]})
        parent = self.clients["a", "batch"].submit_job(jobName="a-array", jobQueue="jq", jobDefinition="noop",
                                                       arrayProperties={"size": 2}, tags={"team": "a"})["jobId"]
        self.wait_job(parent)
        for child in (parent + ":0", parent + ":1"):
            self.assertEqual(self.clients["c", "batch"].describe_jobs(jobs=[child])["jobs"], [])
            [seen] = self.clients["a", "batch"].describe_jobs(jobs=[child])["jobs"]
            self.assertEqual(seen["tags"], {"team": "a"})

    # ---- finding 3: a warm pool is its owner's ----
    def test_a_warm_pool_is_reused_only_by_its_owners_jobs(self):
        def create(team, name):
            p = self.job(name, PROBE, out=f"s3://team-{team}-data/out")
            p["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 600
            self.clients[team, "sagemaker"].create_training_job(**p)
            tj = self.wait_training(name)
            self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
            return self.log_text(name)
        create("a", "wp-a1")
        other = create("c", "wp-c1")
        self.assertNotIn("seen=from-wp-a1", other)
        self.assertNotEqual(self.sm.describe_training_job(TrainingJobName="wp-a1")["WarmPoolStatus"]["Status"], "Reused")
        self.assertIn("seen=from-wp-a1", create("a", "wp-a2"))
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="wp-a1")["WarmPoolStatus"]["ReusedByJob"], "wp-a2")


if __name__ == "__main__":
    unittest.main()
