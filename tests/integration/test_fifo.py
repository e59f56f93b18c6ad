"""FIFO order with capacity 1, queue priority, and the snapshot's account of who waits and why."""
import json
import os
import time
import unittest

from harness import ServerTest


class FifoTest(ServerTest):
    def test_jobs_run_one_at_a_time_in_submit_order(self):
        queue = self.create_queue("fifo", capacity=1)
        log = os.path.join(self.work_dir, "order.log")
        ids = []
        for n in range(4):
            cmd = f"echo start-{n} >> {log}; sleep 0.3; echo end-{n} >> {log}"
            ids.append(self.submit(queue, self.command_payload(f"fifo-{n}", cmd)))
        # While the first runs, the others wait, in order, each with a reason.
        deadline = time.time() + 30
        while self.batch.describe_service_job(jobId=ids[0])["status"] != "RUNNING" and time.time() < deadline:
            time.sleep(0.05)
        snap = self.server.raw_call("batch", "GetJobQueueSnapshot", {"jobQueue": queue})
        front = [j["jobArn"].split("/")[-1] for j in snap["frontOfQueue"]["jobs"]]
        self.assertEqual(front, ids[1:])
        self.assertEqual(snap["queueUtilization"]["totalCapacityUsage"], [{"capacityUnit": "ml.m5.large", "quantity": 1}])
        head = self.describe_raw(ids[1])
        self.assertEqual(head["status"], "RUNNABLE")
        self.assertIn("waiting for capacity", head["trainyardWaitReason"])
        behind = self.describe_raw(ids[2])
        self.assertIn("behind", behind["trainyardWaitReason"])

        jobs = self.wait_jobs(ids)
        self.assertTrue(all(j["status"] == "SUCCEEDED" for j in jobs), jobs)
        with open(log) as f:
            lines = f.read().split()
        self.assertEqual(lines, [f"{w}-{n}" for n in range(4) for w in ("start", "end")])
        for a, b in zip(jobs, jobs[1:]):
            self.assertLessEqual(a["stoppedAt"], b["startedAt"])

    def test_higher_priority_queue_goes_first_on_a_shared_environment(self):
        self.create_queue("low", capacity=1, env_name="shared", priority=1)
        self.batch.create_job_queue(jobQueueName="high", jobQueueType="SAGEMAKER_TRAINING", priority=10,
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "shared"}])
        blocker = self.submit("low", self.command_payload("blocker", "sleep 1"))
        self.wait_jobs([blocker], statuses=("RUNNING", "SUCCEEDED"))
        low = self.submit("low", self.command_payload("low-1", "true"))
        time.sleep(0.1)
        high = self.submit("high", self.command_payload("high-1", "true"))
        jobs = self.wait_jobs([blocker, low, high])
        by_name = {j["jobName"]: j for j in jobs}
        self.assertLessEqual(by_name["high-1"]["startedAt"], by_name["low-1"]["startedAt"])

    def test_job_larger_than_the_environment_is_misconfigured_and_others_pass(self):
        queue = self.create_queue("mis", capacity=1)
        p = self.command_payload("too-big", "true")
        p["ResourceConfig"]["InstanceCount"] = 2
        big = self.submit(queue, p)
        small = self.submit(queue, self.command_payload("small", "true"))
        self.wait_jobs([small])
        job = self.batch.describe_service_job(jobId=big)
        self.assertEqual(job["status"], "RUNNABLE")
        self.assertTrue(job["statusReason"].startswith("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"))
        self.batch.terminate_service_job(jobId=big, reason="cannot fit")
        job = self.batch.describe_service_job(jobId=big)
        self.assertEqual((job["status"], job["statusReason"], job["isTerminated"]), ("FAILED", "cannot fit", True))

    def test_backfill_starts_only_jobs_that_cannot_delay_the_blocked_head(self):
        queue = self.create_queue("bf", capacity=2)
        long = "trap 'exit 0' TERM; sleep 600 & wait"
        runner = self.submit(queue, self.command_payload("runner", long, StoppingCondition={"MaxRuntimeInSeconds": 600}))
        started = self.wait_jobs([runner], statuses=("RUNNING",))[0]["startedAt"]
        big = self.command_payload("big", "true", StoppingCondition={"MaxRuntimeInSeconds": 60})
        big["ResourceConfig"]["InstanceCount"] = 2
        head = self.submit(queue, big)
        too_long = self.submit(queue, self.command_payload("too-long", "true", StoppingCondition={"MaxRuntimeInSeconds": 3600}))
        short = self.submit(queue, self.command_payload("short", "true", StoppingCondition={"MaxRuntimeInSeconds": 60}))
        # The short job ends before the runner's bound frees the head's second instance: it runs
        # now. The long one could delay the head, so it waits behind it.
        self.assertEqual(self.wait_jobs([short])[0]["status"], "SUCCEEDED")
        self.assertEqual(self.describe_raw(too_long)["status"], "RUNNABLE")
        snap = self.server.raw_call("batch", "GetJobQueueSnapshot", {"jobQueue": queue})
        front = snap["frontOfQueue"]["jobs"]
        self.assertEqual([j["jobArn"].split("/")[-1] for j in front], [head, too_long])
        self.assertIn("capacity is reserved for it", front[0]["trainyardWaitReason"])
        # Estimates follow the runtime bounds: the head when the runner's 600 s are up, the long
        # job when the head's 60 s are.
        self.assertAlmostEqual(front[0]["trainyardEstimatedStartTime"], started + 600_000, delta=2000)
        self.assertAlmostEqual(front[1]["trainyardEstimatedStartTime"], started + 660_000, delta=2000)
        self.assertIn("behind job", self.batch.describe_service_job(jobId=too_long)["statusReason"])
        self.batch.terminate_service_job(jobId=runner, reason="test over")
        jobs = self.wait_jobs([head, too_long])
        self.assertTrue(all(j["status"] == "SUCCEEDED" for j in jobs), jobs)

    def test_backfill_can_be_turned_off_per_queue(self):
        self.batch.create_service_environment(
            serviceEnvironmentName="strict-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 2, "capacityUnit": "NUM_INSTANCES"}])
        self.batch.create_job_queue(jobQueueName="strict", jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    tags={"trainyard:backfill": "false"},
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "strict-env"}])
        runner = self.submit("strict", self.command_payload("s-runner", "trap 'exit 0' TERM; sleep 600 & wait"))
        self.wait_jobs([runner], statuses=("RUNNING",))
        big = self.command_payload("s-big", "true")
        big["ResourceConfig"]["InstanceCount"] = 2
        head = self.submit("strict", big)
        short = self.submit("strict", self.command_payload("s-short", "true", StoppingCondition={"MaxRuntimeInSeconds": 1}))
        time.sleep(1.5)
        self.assertEqual(self.describe_raw(short)["status"], "RUNNABLE")
        self.batch.terminate_service_job(jobId=runner, reason="test over")
        jobs = self.wait_jobs([head, short])
        self.assertLessEqual(jobs[0]["startedAt"], jobs[1]["startedAt"])


if __name__ == "__main__":
    unittest.main()
