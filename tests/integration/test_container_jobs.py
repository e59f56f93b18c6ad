"""Batch container jobs (docs/batch-jobs.md): compute environments and ECS job queues, SubmitJob
against a job definition, the AWS_BATCH_* environment, Ref:: substitution and overrides, retries
with evaluateOnExit, attempt timeouts, CancelJob and TerminateJob, hostile input refused and
storing nothing, and acknowledged jobs surviving kill -9."""
import os
import unittest

from botocore.exceptions import ClientError

from harness import ServerTest

DEF_ARN = "arn:aws:batch:us-east-1:000000000000:job-definition/"


class ContainerJobTest(ServerTest):
    server_args = ["--clock=offset"]

    def setUp(self):
        super().setUp()
        self.batch.create_compute_environment(computeEnvironmentName="ce", type="MANAGED",
                                              computeResources={"type": "EC2", "maxvCpus": 4, "minvCpus": 0,
                                                                "instanceTypes": ["optimal"], "subnets": ["s"]},
                                              tags={"trainyard:memoryMiB": "8192"})
        self.batch.create_job_queue(jobQueueName="jq", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])

    # ---- helpers ----
    def error(self, fn, **kw):
        with self.assertRaises(ClientError) as e:
            fn(**kw)
        return e.exception.response["Error"]["Code"], e.exception.response["Error"]["Message"]

    def define(self, command, name="def", **kw):
        props = {"image": "local/busybox", "command": command,
                 "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "512"}]}
        props.update(kw.pop("container", {}))
        return self.batch.register_job_definition(jobDefinitionName=name, type="container",
                                                  containerProperties=props, **kw)["jobDefinitionArn"]

    def sh(self, script):
        return ["/bin/sh", "-c", script]

    def submit(self, name="job", definition="def", **kw):
        return self.batch.submit_job(jobName=name, jobQueue="jq", jobDefinition=definition, **kw)["jobId"]

    def path(self, name):
        return os.path.join(self.work_dir, name)

    def read_env(self, name):
        with open(self.path(name)) as f:
            return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)

    # ---- tests ----
    def test_compute_environment_and_queue_are_described(self):
        [ce] = self.batch.describe_compute_environments(computeEnvironments=["ce"])["computeEnvironments"]
        self.assertEqual((ce["type"], ce["state"], ce["status"]), ("MANAGED", "ENABLED", "VALID"))
        self.assertEqual(ce["computeResources"]["maxvCpus"], 4)
        [q] = self.batch.describe_job_queues(jobQueues=["jq"])["jobQueues"]
        self.assertEqual(q["computeEnvironmentOrder"], [{"order": 1, "computeEnvironment": ce["computeEnvironmentArn"]}])
        self.assertEqual(q["serviceEnvironmentOrder"], [])
        code, msg = self.error(self.batch.delete_compute_environment, computeEnvironment="ce")
        self.assertEqual(code, "ClientException")
        self.assertIn("DISABLED", msg)

    def test_compute_environments_and_jobs_are_tagged(self):
        self.define(self.sh("true"))
        job_id = self.submit(tags={"team": "a"})
        job_arn = self.describe_job(job_id)["jobArn"]
        ce_arn = self.batch.describe_compute_environments()["computeEnvironments"][0]["computeEnvironmentArn"]
        for arn in (job_arn, ce_arn):
            self.batch.tag_resource(resourceArn=arn, tags={"cost": "x"})
        self.assertEqual(self.batch.list_tags_for_resource(resourceArn=job_arn)["tags"], {"team": "a", "cost": "x"})
        self.assertEqual(self.batch.list_tags_for_resource(resourceArn=ce_arn)["tags"],
                         {"trainyard:memoryMiB": "8192", "cost": "x"})
        self.assertEqual(self.describe_job(job_id)["tags"], {"team": "a", "cost": "x"})

    def test_a_fair_share_queue_serves_the_share_with_less_running_first(self):
        policy = self.batch.create_scheduling_policy(name="fair", fairsharePolicy={"shareDecaySeconds": 0})["arn"]
        self.batch.create_compute_environment(computeEnvironmentName="two", type="UNMANAGED", unmanagedvCpus=2,
                                              state="DISABLED")
        self.batch.create_job_queue(jobQueueName="fq", priority=1, schedulingPolicyArn=policy,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "two"}])
        gate = self.path("gate")
        self.define(self.sh(f"while [ ! -e {gate} ]; do sleep 0.05; done"))
        code, msg = self.error(self.batch.submit_job, jobName="x", jobQueue="fq", jobDefinition="def")
        self.assertIn("shareIdentifier", msg)
        ids = {name: self.batch.submit_job(jobName=name, jobQueue="fq", jobDefinition="def",
                                           shareIdentifier=name[0])["jobId"] for name in ("a1", "a2", "a3", "b1")}
        for job_id in ids.values():
            self.wait_job(job_id, ("RUNNABLE",))
        self.batch.update_compute_environment(computeEnvironment="two", state="ENABLED")
        self.wait_job(ids["a1"], ("RUNNING",))
        self.wait_job(ids["b1"], ("RUNNING",))
        self.assertEqual([self.describe_job(ids[n])["status"] for n in ("a2", "a3")], ["RUNNABLE", "RUNNABLE"])
        open(gate, "w").close()
        for job_id in ids.values():
            self.assertEqual(self.wait_job(job_id)["status"], "SUCCEEDED")
        # The queue moves to another compute environment.
        self.batch.update_job_queue(jobQueue="fq", computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        [q] = self.batch.describe_job_queues(jobQueues=["fq"])["jobQueues"]
        self.assertEqual([o["computeEnvironment"].split("/")[-1] for o in q["computeEnvironmentOrder"]], ["ce"])
        code, msg = self.error(self.batch.update_job_queue, jobQueue="fq",
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "nope"}])
        self.assertIn("does not exist", msg)

    def test_a_job_runs_with_the_aws_batch_environment(self):
        self.define(self.sh("env > " + self.path("env-$AWS_BATCH_JOB_ATTEMPT")))
        job_id = self.submit()
        j = self.wait_job(job_id)
        self.assertEqual(j["status"], "SUCCEEDED", j)
        self.assertEqual(j["statusReason"], "Essential container in task exited")
        self.assertEqual(len(j["attempts"]), 1)
        self.assertEqual(j["attempts"][0]["container"]["exitCode"], 0)
        self.assertEqual(j["container"]["exitCode"], 0)
        self.assertEqual(j["jobDefinition"], DEF_ARN + "def:1")
        self.assertLessEqual(j["createdAt"], j["startedAt"])
        self.assertLessEqual(j["startedAt"], j["stoppedAt"])
        env = self.read_env("env-1")
        self.assertEqual(env["AWS_BATCH_JOB_ID"], job_id)
        self.assertEqual(env["AWS_BATCH_JOB_ATTEMPT"], "1")
        self.assertEqual(env["AWS_BATCH_JQ_NAME"], "jq")
        self.assertEqual(env["AWS_BATCH_CE_NAME"], "ce")
        self.assertNotIn("AWS_BATCH_JOB_ARRAY_INDEX", env)
        self.assertEqual(env["AWS_REGION"], env["AWS_DEFAULT_REGION"])
        # Batch's environment only: nothing of a SageMaker training job's.
        sagemakers = sorted(k for k in env if k.startswith(("SM_", "SAGEMAKER_", "TRAINING_JOB_")) or
                            k in ("RANK", "WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"))
        self.assertEqual(sagemakers, [])
        listed = self.batch.list_jobs(jobQueue="jq", jobStatus="SUCCEEDED")["jobSummaryList"]
        self.assertEqual([s["jobId"] for s in listed], [job_id])
        self.assertEqual(self.batch.list_jobs(jobQueue="jq")["jobSummaryList"], [])  # RUNNING by default

    def test_ref_parameters_and_overrides(self):
        self.define(self.sh('echo "$0|$1|$2|$STAGE|$EXTRA" > ' + self.path("args")) + ["Ref::greeting", "xRef::greeting", "Ref::missing"],
                    parameters={"greeting": "hello"}, container={"environment": [{"name": "STAGE", "value": "def"}]})
        j = self.wait_job(self.submit(parameters={"greeting": "hi"},
                                  containerOverrides={"environment": [{"name": "EXTRA", "value": "over"}]}))
        self.assertEqual(j["status"], "SUCCEEDED", j)
        with open(self.path("args")) as f:
            self.assertEqual(f.read().strip(), "hi|xRef::greeting|Ref::missing|def|over")
        # The command itself overridden; the latest ACTIVE revision by bare name.
        self.define(self.sh("exit 9"))
        j = self.wait_job(self.submit(containerOverrides={"command": self.sh("echo over > " + self.path("over"))}))
        self.assertEqual(j["status"], "SUCCEEDED", j)
        self.assertEqual(j["jobDefinition"], DEF_ARN + "def:2")

    def test_retries_follow_evaluate_on_exit(self):
        self.define(self.sh("echo x >> " + self.path("runs-$AWS_BATCH_JOB_ID") + "; exit 3"),
                    retryStrategy={"attempts": 3})
        retried = self.submit(name="retried")
        exited = self.submit(name="exited", retryStrategy={"attempts": 3, "evaluateOnExit": [
            {"onExitCode": "3", "action": "EXIT"}]})
        other = self.submit(name="other", retryStrategy={"attempts": 2, "evaluateOnExit": [
            {"onExitCode": "4*", "action": "EXIT"}]})
        r, e, o = self.wait_job(retried), self.wait_job(exited), self.wait_job(other)
        self.assertEqual([r["status"], len(r["attempts"])], ["FAILED", 3])
        self.assertEqual([e["status"], len(e["attempts"])], ["FAILED", 1])
        self.assertEqual([o["status"], len(o["attempts"])], ["FAILED", 2])  # no rule matched: retried
        self.assertEqual([a["container"]["exitCode"] for a in r["attempts"]], [3, 3, 3])
        with open(self.path("runs-" + retried)) as f:
            self.assertEqual(f.read().count("x"), 3)

    def test_an_attempt_past_its_timeout_fails(self):
        self.define(self.sh("touch " + self.path("started") + "; exec sleep 600"))
        job_id = self.submit(timeout={"attemptDurationSeconds": 60})
        self.wait_job(job_id, ("RUNNING",))
        self.advance(61)
        j = self.wait_job(job_id)
        self.assertEqual(j["status"], "FAILED")
        self.assertEqual(j["statusReason"], "Job attempt duration exceeded timeout")

    def test_cancel_and_terminate(self):
        gate = self.path("gate")
        self.define(self.sh(f"touch {self.path('running')}; while [ ! -e {gate} ]; do sleep 0.05; done"))
        running = self.submit(name="running")
        waiting = self.submit(name="waiting", dependsOn=[{"jobId": running}])
        self.wait_job(running, ("RUNNING",))
        self.assertEqual(self.describe_job(waiting)["status"], "PENDING")
        # CancelJob leaves a started job alone; it fails a job that has not started.
        self.batch.cancel_job(jobId=running, reason="not now")
        self.batch.cancel_job(jobId=waiting, reason="not needed")
        self.assertEqual(self.describe_job(running)["status"], "RUNNING")
        w = self.describe_job(waiting)
        self.assertEqual((w["status"], w["statusReason"]), ("FAILED", "not needed"))
        self.batch.terminate_job(jobId=running, reason="stop it")
        j = self.wait_job(running)
        self.assertEqual((j["status"], j["statusReason"]), ("FAILED", "stop it"))
        self.assertFalse(os.path.exists(gate))

    def test_hostile_submits_are_refused_and_store_nothing(self):
        self.define(self.sh("true"))
        cases = [
            dict(retryStrategy={"attempts": 11}),
            dict(timeout={"attemptDurationSeconds": 59}),
            dict(dependsOn=[{"jobId": "no-such-job"}]),
            dict(dependsOn=[{"jobId": "x"}] * 21),
            dict(jobDefinition="nope"),
            dict(jobDefinition="def:7"),
            dict(jobQueue="missing"),
            dict(arrayProperties={"size": 10001}),
            dict(arrayProperties={"size": 1}),
            dict(containerOverrides={"environment": [{"name": "AWS_BATCH_JOB_ID", "value": "x"}]}),
            dict(containerOverrides={"resourceRequirements": [{"type": "VCPU", "value": "64"}]}),
            dict(containerOverrides={"resourceRequirements": [{"type": "VCPU", "value": "two"}]}),
            dict(shareIdentifier="a"),
            dict(jobName="-bad"),
            dict(dependsOn=[{"type": "SEQUENTIAL"}]),
        ]
        for kw in cases:
            args = dict(jobName="j", jobQueue="jq", jobDefinition="def")
            args.update(kw)
            with self.subTest(kw=kw):
                code, _ = self.error(self.batch.submit_job, **args)
                self.assertEqual(code, "ClientException")
        self.assertEqual(self.error(self.batch.list_jobs, jobQueue="jq", multiNodeJobId="x")[0], "ClientException")
        for status in ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED", "FAILED"):
            self.assertEqual(self.batch.list_jobs(jobQueue="jq", jobStatus=status)["jobSummaryList"], [])

    def test_acknowledged_jobs_survive_kill_9(self):
        gate = self.path("gate")
        self.define(self.sh(f"while [ ! -e {gate} ]; do sleep 0.05; done"))
        first = self.submit(name="first")
        second = self.submit(name="second", dependsOn=[{"jobId": first}])
        self.wait_job(first, ("RUNNING",))
        self.server.kill9()
        self.server = self.new_server()
        self.batch = self.server.client("batch")
        self.assertEqual(self.describe_job(second)["status"], "PENDING")
        self.assertEqual(self.describe_job(first)["status"], "RUNNING")
        open(gate, "w").close()
        self.assertEqual(self.wait_job(first)["status"], "SUCCEEDED")
        self.assertEqual(self.wait_job(second)["status"], "SUCCEEDED")


if __name__ == "__main__":
    unittest.main()
