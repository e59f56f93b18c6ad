"""One rule for every field that names a role (docs/security.md, "Roles for jobs"): users `a` and
`c` of two teams, each allowed its own resources and iam:PassRole on its own team role, and a role
`admin-role` allowed everything. `c` may not get admin-role's credentials by naming it in a tuning
job's definitions, in a job definition's jobRoleArn or taskRoleArn, nor by submitting team a's job
definition (which names admin-role) with its own command: each is refused before anything is
made. Roles have trust policies: stored, returned by GetRole, replaced by UpdateAssumeRolePolicy,
checked whole, and honoured by STS AssumeRole and by the services that take roles for jobs."""
import json

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from harness import ServerTest, REGION

ACCOUNT = "000000000000"
ADMIN_ROLE = f"arn:aws:iam::{ACCOUNT}:role/admin-role"
EVERYTHING = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
# A team's own resources: its tuning and training jobs, its job definitions, any queue; its role.
TEAM = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "sagemaker:*",
     "Resource": ["arn:aws:sagemaker:*:*:hyper-parameter-tuning-job/${aws:PrincipalTag/team}-*",
                  "arn:aws:sagemaker:*:*:training-job/${aws:PrincipalTag/team}-*"]},
    {"Effect": "Allow", "Action": "batch:*",
     "Resource": ["arn:aws:batch:*:*:job-queue/*", "arn:aws:batch:*:*:job-definition/${aws:PrincipalTag/team}-*",
                  "arn:aws:batch:*:*:job/*"]},
    {"Effect": "Allow", "Action": ["sts:AssumeRole", "iam:PassRole"],
     "Resource": "arn:aws:iam::*:role/team-${aws:PrincipalTag/team}"}]}
CONTAINER = {"image": "local/busybox", "command": ["true"],
             "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "64"}]}


class PassRoleTest(ServerTest):
    def iam(self, op, body):
        return self.server.admin("admin/iam/" + op, body)

    def setUp(self):
        super().setUp()
        self.iam("CreatePolicy", {"PolicyName": "everything", "PolicyDocument": json.dumps(EVERYTHING)})
        self.iam("CreatePolicy", {"PolicyName": "team", "PolicyDocument": json.dumps(TEAM)})
        # What the teams' jobs write: their outputs in the test bucket, as their roles.
        self.iam("CreatePolicy", {"PolicyName": "scratch", "PolicyDocument": json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": [
                "arn:aws:s3:::trainyard-test", "arn:aws:s3:::trainyard-test/*"]}]})})
        self.iam("CreateRole", {"RoleName": "admin-role"})
        self.iam("AttachRolePolicy", {"RoleName": "admin-role", "PolicyName": "everything"})
        self.clients = {}
        for team in ("a", "c"):
            self.iam("CreateRole", {"RoleName": f"team-{team}"})
            self.iam("AttachRolePolicy", {"RoleName": f"team-{team}", "PolicyName": "scratch"})
            self.iam("CreateUser", {"UserName": team, "Tags": [{"Key": "team", "Value": team}]})
            self.iam("AttachUserPolicy", {"UserName": team, "PolicyName": "team"})
            key = self.iam("CreateAccessKey", {"UserName": team})["AccessKey"]
            for service in ("sagemaker", "batch", "sts"):
                self.clients[team, service] = self.server.client(service, key=key["AccessKeyId"],
                                                                 secret=key["SecretAccessKey"])

    def tearDown(self):
        for c in self.clients.values():
            c.close()
        super().tearDown()

    def refused(self, call, code="AccessDeniedException", *needles):
        with self.assertRaises(ClientError) as e:
            call()
        err = e.exception.response["Error"]
        self.assertEqual(err["Code"], code, err)
        for n in needles:
            self.assertIn(n, err["Message"])
        return err["Message"]

    def tuning_definition(self, role):
        # Script mode; the archive need not exist: the trial only has to be made.
        return {"StaticHyperParameters": {"epochs": "1", "sagemaker_program": "objective.py",
                                          "sagemaker_submit_directory": "s3://trainyard-test/code/tune.tar.gz"},
                "AlgorithmSpecification": {"TrainingImage": "local/python3", "TrainingInputMode": "File",
                                           "MetricDefinitions": [{"Name": "score", "Regex": "score=([-0-9.]+)"}]},
                "RoleArn": role,
                "OutputDataConfig": {"S3OutputPath": "s3://trainyard-test/output"},
                "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
                "StoppingCondition": {"MaxRuntimeInSeconds": 300}}

    def tuning_config(self):
        return {"Strategy": "Random", "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "score"},
                "ResourceLimits": {"MaxNumberOfTrainingJobs": 1, "MaxParallelTrainingJobs": 1},
                "ParameterRanges": {"IntegerParameterRanges": [{"Name": "x", "MinValue": "0", "MaxValue": "6"}]}}

    # Finding 1: a tuning job's trials would run as the role its definitions name.
    def test_a_tuning_job_naming_a_role_the_caller_may_not_pass_is_refused(self):
        sm = self.clients["c", "sagemaker"]
        self.refused(lambda: sm.create_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="c-sweep", HyperParameterTuningJobConfig=self.tuning_config(),
            TrainingJobDefinition=self.tuning_definition(ADMIN_ROLE)),
            "AccessDeniedException", "iam:PassRole", ADMIN_ROLE, "TrainingJobDefinition.RoleArn")
        named = dict(self.tuning_definition(ADMIN_ROLE), DefinitionName="d0",
                     TuningObjective={"Type": "Maximize", "MetricName": "score"},
                     HyperParameterRanges=self.tuning_config()["ParameterRanges"])
        config = self.tuning_config()
        del config["ParameterRanges"], config["HyperParameterTuningJobObjective"]
        self.refused(lambda: sm.create_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="c-sweep", HyperParameterTuningJobConfig=config,
            TrainingJobDefinitions=[named]),
            "AccessDeniedException", "iam:PassRole", ADMIN_ROLE, "TrainingJobDefinitions[0].RoleArn")
        # Nothing was made: no tuning job, no trial.
        self.assertEqual(self.sm.list_hyper_parameter_tuning_jobs()["HyperParameterTuningJobSummaries"], [])
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])
        # Its own team's role is c's to pass.
        sm.create_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="c-sweep", HyperParameterTuningJobConfig=self.tuning_config(),
            TrainingJobDefinition=self.tuning_definition(f"arn:aws:iam::{ACCOUNT}:role/team-c"))

    # Finding 2: a job definition's roles are what its jobs run as.
    def test_a_job_definition_naming_a_role_the_caller_may_not_pass_is_refused(self):
        batch = self.clients["c", "batch"]
        self.refused(lambda: batch.register_job_definition(
            jobDefinitionName="c-def", type="container", containerProperties=dict(CONTAINER, jobRoleArn=ADMIN_ROLE)),
            "AccessDeniedException", "iam:PassRole", ADMIN_ROLE, "containerProperties.jobRoleArn")
        # Members the server does not run are checked the same, before their shape is.
        self.refused(lambda: batch.register_job_definition(
            jobDefinitionName="c-def", type="container",
            ecsProperties={"taskProperties": [{"taskRoleArn": ADMIN_ROLE, "containers": [{"image": "x"}]}]}),
            "AccessDeniedException", "iam:PassRole", "ecsProperties.taskProperties[0].taskRoleArn")
        self.assertEqual(self.batch.describe_job_definitions()["jobDefinitions"], [])
        batch.register_job_definition(jobDefinitionName="c-def", type="container",
                                      containerProperties=dict(CONTAINER, jobRoleArn=f"arn:aws:iam::{ACCOUNT}:role/team-c"))

    # Finding 3: SubmitJob acts on the job definition as well as the queue.
    def test_another_teams_job_definition_cannot_be_submitted(self):
        self.batch.create_compute_environment(computeEnvironmentName="ce", type="UNMANAGED", unmanagedvCpus=2)
        self.batch.create_job_queue(jobQueueName="jq", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        self.batch.register_job_definition(jobDefinitionName="a-def", type="container",
                                           containerProperties=dict(CONTAINER, jobRoleArn=ADMIN_ROLE))
        batch = self.clients["c", "batch"]
        for ref in ("a-def", "a-def:1", f"arn:aws:batch:{REGION}:{ACCOUNT}:job-definition/a-def:1"):
            self.refused(lambda: batch.submit_job(jobName="x", jobQueue="jq", jobDefinition=ref,
                                                  containerOverrides={"command": ["sh", "-c", "env"]}),
                         "AccessDeniedException", "batch:SubmitJob",
                         f"arn:aws:batch:{REGION}:{ACCOUNT}:job-definition/a-def:1")
        self.assertEqual(self.batch.list_jobs(jobQueue="jq", jobStatus="SUBMITTED")["jobSummaryList"], [])
        # Even a definition c may submit carries its role: c needs iam:PassRole on that too.
        self.batch.register_job_definition(jobDefinitionName="c-admin", type="container",
                                           containerProperties=dict(CONTAINER, jobRoleArn=ADMIN_ROLE))
        self.refused(lambda: batch.submit_job(jobName="x", jobQueue="jq", jobDefinition="c-admin"),
                     "AccessDeniedException", "iam:PassRole", ADMIN_ROLE)

    def test_trust_policies_are_stored_checked_and_honoured(self):
        # Checked whole: a malformed document names the rule it breaks.
        for doc, rule in (({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole"}]},
                           "Statement[0].Principal is required"),
                          ({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": "*",
                                                                    "Action": "s3:GetObject"}]},
                           "is not an sts: action"),
                          ({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "bob"},
                                                                    "Action": "sts:AssumeRole"}]},
                           "Statement[0].Principal.AWS")):
            with self.assertRaises(RuntimeError) as e:
                self.iam("CreateRole", {"RoleName": "bad", "AssumeRolePolicyDocument": json.dumps(doc)})
            self.assertIn("MalformedPolicyDocument", str(e.exception))
            self.assertIn(rule, str(e.exception))
        # A role created without one has the default: the account's principals and the job services.
        default = json.loads(self.iam("GetRole", {"RoleName": "team-c"})["Role"]["AssumeRolePolicyDocument"])
        self.assertEqual(default["Statement"][0]["Principal"],
                         {"AWS": f"arn:aws:iam::{ACCOUNT}:root",
                          "Service": ["sagemaker.amazonaws.com", "ecs-tasks.amazonaws.com"]})
        sts = self.clients["c", "sts"]
        sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/team-c", RoleSessionName="s1")

        # A trust policy that admits only user a: c's own allow is not enough.
        only_a = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/a"}, "Action": "sts:AssumeRole"}]}
        self.iam("UpdateAssumeRolePolicy", {"RoleName": "team-c", "PolicyDocument": json.dumps(only_a)})
        self.assertEqual(json.loads(self.iam("GetRole", {"RoleName": "team-c"})["Role"]["AssumeRolePolicyDocument"]),
                         only_a)
        self.refused(lambda: sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/team-c", RoleSessionName="s1"),
                     "AccessDenied", "trust policy")
        # Nor may a training job take it: SageMaker is not admitted.
        self.refused(lambda: self.clients["c", "sagemaker"].create_training_job(
            **self.command_payload("c-job", "true", RoleArn=f"arn:aws:iam::{ACCOUNT}:role/team-c")),
            "ValidationException", "sagemaker.amazonaws.com")

        # Admitting c (by account root, with c's own allow) and SageMaker again.
        both = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": ACCOUNT, "Service": "sagemaker.amazonaws.com"},
             "Action": "sts:AssumeRole", "Condition": {"StringLike": {"sts:RoleSessionName": "c-*"}}}]}
        self.iam("UpdateAssumeRolePolicy", {"RoleName": "team-c", "PolicyDocument": json.dumps(both)})
        self.refused(lambda: sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/team-c", RoleSessionName="s1"),
                     "AccessDenied", "trust policy")
        creds = sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/team-c", RoleSessionName="c-nightly")
        self.assertTrue(creds["Credentials"]["AccessKeyId"].startswith("ASIA"))
        # The trust policy is kept with the role across a restart.
        self.server.stop()
        self.server = self.new_server()
        self.assertEqual(json.loads(self.iam("GetRole", {"RoleName": "team-c"})["Role"]["AssumeRolePolicyDocument"]),
                         both)
