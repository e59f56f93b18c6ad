"""Who may act on a Batch container job (docs/security.md): trainyard:JobOwner and
batch:ShareIdentifier conditions hold for CancelJob and TerminateJob as for service jobs, so a
member of one team cannot stop another's job however the job is tagged."""
import json
import time
import unittest

from botocore.exceptions import ClientError

from harness import ServerTest

OWN_JOBS = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["batch:SubmitJob", "batch:DescribeJobs"], "Resource": "*"},
    {"Effect": "Allow", "Action": ["batch:CancelJob", "batch:TerminateJob"], "Resource": "*",
     "Condition": {"StringEquals": {"trainyard:JobOwner": "${aws:PrincipalArn}"}}}]}


class ContainerJobOwnerTest(ServerTest):
    def setUp(self):
        super().setUp()
        self.gate = f"{self.work_dir}/open"
        self.batch.create_compute_environment(computeEnvironmentName="ce", type="UNMANAGED", unmanagedvCpus=4)
        self.batch.create_job_queue(jobQueueName="jq", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        self.batch.register_job_definition(
            jobDefinitionName="hold", type="container",
            containerProperties={"image": "local/busybox",
                                 "command": ["/bin/sh", "-c", f"while [ ! -e {self.gate} ]; do sleep 0.05; done"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "256"}]})
        iam = lambda op, body: self.server.admin("admin/iam/" + op, body)
        iam("CreatePolicy", {"PolicyName": "own-jobs", "PolicyDocument": json.dumps(OWN_JOBS)})
        self.members = {}
        for name in ("member-a", "member-b"):
            iam("CreateUser", {"UserName": name})
            iam("AttachUserPolicy", {"UserName": name, "PolicyName": "own-jobs"})
            key = iam("CreateAccessKey", {"UserName": name})["AccessKey"]
            self.members[name] = self.server.client("batch", key=key["AccessKeyId"], secret=key["SecretAccessKey"])

    def tearDown(self):
        open(self.gate, "w").close()
        for c in self.members.values():
            c.close()
        super().tearDown()

    def status(self, job_id):
        [j] = self.batch.describe_jobs(jobs=[job_id])["jobs"]
        return j

    def test_only_the_submitter_stops_its_job(self):
        a, b = self.members["member-a"], self.members["member-b"]
        job = a.submit_job(jobName="a-job", jobQueue="jq", jobDefinition="hold")["jobId"]
        deadline = time.time() + 60
        while self.status(job)["status"] != "RUNNING":
            self.assertLess(time.time(), deadline, self.status(job)["status"])
            time.sleep(0.05)
        for op in (b.terminate_job, b.cancel_job):
            with self.assertRaises(ClientError) as e:
                op(jobId=job, reason="not yours")
            self.assertEqual(e.exception.response["Error"]["Code"], "AccessDeniedException")
        self.assertEqual(self.status(job)["status"], "RUNNING")
        a.terminate_job(jobId=job, reason="mine to stop")
        deadline = time.time() + 60
        while (j := self.status(job))["status"] != "FAILED":
            self.assertLess(time.time(), deadline, j["status"])
            time.sleep(0.05)
        self.assertEqual(j["statusReason"], "mine to stop")


if __name__ == "__main__":
    unittest.main()
