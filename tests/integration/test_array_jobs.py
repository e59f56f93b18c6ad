"""Array jobs (docs/batch-jobs.md, "Array jobs"): children get their index and the array's size,
the parent's statusSummary counts them and its status follows theirs, ListJobs pages through
them, and a 10,000-child array is acknowledged at once without a stored record per child."""
import os
import time
import unittest

from harness import ServerTest


class ArrayJobTest(ServerTest):
    def setUp(self):
        super().setUp()
        self.batch.create_compute_environment(computeEnvironmentName="ce", type="MANAGED",
                                              computeResources={"type": "EC2", "maxvCpus": 2, "subnets": ["local"]})
        self.batch.create_job_queue(jobQueueName="jq", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])

    def define(self, script, name="def"):
        self.batch.register_job_definition(
            jobDefinitionName=name, type="container",
            containerProperties={"image": "local/busybox", "command": ["/bin/sh", "-c", script],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "256"}]})

    def path(self, name):
        return os.path.join(self.work_dir, name)

    def stored_job_rows(self):
        return int(self.server.store_query("SELECT COUNT(*) FROM meta WHERE key LIKE 'container-job/%'"))

    def test_children_get_their_index_and_the_parent_counts_them(self):
        self.define("env > " + self.path("env-$AWS_BATCH_JOB_ARRAY_INDEX"))
        parent = self.batch.submit_job(jobName="arr", jobQueue="jq", jobDefinition="def",
                                       arrayProperties={"size": 5})["jobId"]
        j = self.wait_job(parent)
        self.assertEqual(j["status"], "SUCCEEDED")
        self.assertEqual(j["arrayProperties"], {"size": 5, "statusSummary": {"SUCCEEDED": 5}})
        for i in range(5):
            with open(self.path(f"env-{i}")) as f:
                env = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
            self.assertEqual(env["AWS_BATCH_JOB_ARRAY_INDEX"], str(i))
            self.assertEqual(env["AWS_BATCH_JOB_ARRAY_SIZE"], "5")
            self.assertEqual(env["AWS_BATCH_JOB_ID"], f"{parent}:{i}")
        child = self.describe_job(f"{parent}:3")
        self.assertEqual((child["status"], child["arrayProperties"]), ("SUCCEEDED", {"index": 3}))
        # ListJobs by arrayJobId pages through the children in index order.
        ids, token = [], None
        while True:
            kw = {"nextToken": token} if token else {}
            page = self.batch.list_jobs(arrayJobId=parent, jobStatus="SUCCEEDED", maxResults=2, **kw)
            self.assertLessEqual(len(page["jobSummaryList"]), 2)
            ids += [s["jobId"] for s in page["jobSummaryList"]]
            token = page.get("nextToken")
            if not token:
                break
        self.assertEqual(ids, [f"{parent}:{i}" for i in range(5)])
        # The queue lists the parent, not its children.
        self.assertEqual([s["jobId"] for s in self.batch.list_jobs(jobQueue="jq", jobStatus="SUCCEEDED")["jobSummaryList"]],
                         [parent])

    def test_the_parent_fails_once_every_child_ended_when_one_failed(self):
        self.define('[ "$AWS_BATCH_JOB_ARRAY_INDEX" != 2 ]')
        parent = self.batch.submit_job(jobName="arr", jobQueue="jq", jobDefinition="def",
                                       arrayProperties={"size": 4})["jobId"]
        j = self.wait_job(parent)
        self.assertEqual(j["status"], "FAILED")
        self.assertEqual(j["arrayProperties"]["statusSummary"], {"SUCCEEDED": 3, "FAILED": 1})
        self.assertEqual(self.describe_job(f"{parent}:2")["status"], "FAILED")

    def test_ten_thousand_children_are_acknowledged_at_once_and_not_stored_one_by_one(self):
        gate = self.path("gate")
        self.define(f"while [ ! -e {gate} ]; do sleep 0.05; done")
        started = time.monotonic()
        parent = self.batch.submit_job(jobName="big", jobQueue="jq", jobDefinition="def",
                                       arrayProperties={"size": 10000})["jobId"]
        self.assertLess(time.monotonic() - started, 1.0)
        # Two vCPUs: two children run, the rest are counted without records of their own.
        deadline = time.time() + 30
        while True:
            summary = self.describe_job(parent)["arrayProperties"]["statusSummary"]
            if summary.get("RUNNING") == 2 or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(summary, {"RUNNING": 2, "RUNNABLE": 9998})
        self.assertLessEqual(self.stored_job_rows(), 3)  # the parent and the two children that started
        page = self.batch.list_jobs(arrayJobId=parent, jobStatus="RUNNABLE", maxResults=3)
        self.assertEqual([s["jobId"] for s in page["jobSummaryList"]], [f"{parent}:{i}" for i in (2, 3, 4)])
        self.batch.terminate_job(jobId=parent, reason="enough")
        j = self.wait_job(parent)
        self.assertEqual((j["status"], j["statusReason"]), ("FAILED", "enough"))
        self.assertEqual(j["arrayProperties"]["statusSummary"], {"FAILED": 10000})


if __name__ == "__main__":
    unittest.main()
