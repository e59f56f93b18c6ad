"""Fair-share queues through the real API: the tutorial order, and priority inside a share."""
import time
import unittest

from botocore.exceptions import ClientError

from harness import ServerTest


class FairShareTest(ServerTest):
    def test_tutorial_order(self):
        q = self.create_fair_queue("tut", [("HIGHPRI", 1), ("MIDPRI", 3), ("LOWPRI", 5)])
        blocker = self.submit(q, self.command_payload("blocker", "sleep 1.5"), shareIdentifier="OTHER")
        self.wait_jobs([blocker], statuses=("RUNNING",))
        low = self.submit(q, self.command_payload("low", "sleep 1"), shareIdentifier="LOWPRI")
        mid = self.submit(q, self.command_payload("mid", "sleep 1"), shareIdentifier="MIDPRI")
        self.wait_jobs([mid], statuses=("RUNNING", "SUCCEEDED"))
        self.assertEqual(self.batch.describe_service_job(jobId=low)["status"], "RUNNABLE")
        fsu = self.batch.get_job_queue_snapshot(jobQueue=q)["queueUtilization"]["fairshareUtilization"]
        self.assertEqual(fsu["activeShareCount"], 2)  # MIDPRI runs, LOWPRI waits
        self.assertEqual(fsu["topCapacityUtilization"],
                         [{"shareIdentifier": "MIDPRI", "capacityUsage": [{"capacityUnit": "ml.m5.large", "quantity": 1}]}])
        high = self.submit(q, self.command_payload("high", "true"), shareIdentifier="HIGHPRI")
        jobs = {j["jobName"]: j for j in self.wait_jobs([blocker, low, mid, high], timeout=60)}
        order = sorted(jobs, key=lambda n: jobs[n]["startedAt"])
        self.assertEqual(order, ["blocker", "mid", "high", "low"])
        self.assertTrue(all(j["status"] == "SUCCEEDED" for j in jobs.values()))

    def test_priority_orders_jobs_inside_a_share_and_can_be_updated(self):
        q = self.create_fair_queue("prio", [("A", 1)])
        blocker = self.submit(q, self.command_payload("p-blocker", "sleep 1"), shareIdentifier="A")
        self.wait_jobs([blocker], statuses=("RUNNING",))
        first = self.submit(q, self.command_payload("p-first", "true"), shareIdentifier="A", schedulingPriority=10)
        second = self.submit(q, self.command_payload("p-second", "true"), shareIdentifier="A", schedulingPriority=10)
        self.batch.update_service_job(jobId=second, schedulingPriority=50)
        snap = self.server.raw_call("batch", "GetJobQueueSnapshot", {"jobQueue": q})
        front = [j["jobArn"].split("/")[-1] for j in snap["frontOfQueue"]["jobs"]]
        self.assertEqual(front, [second, first])
        jobs = {j["jobName"]: j for j in self.wait_jobs([blocker, first, second], timeout=60)}
        self.assertLess(jobs["p-second"]["startedAt"], jobs["p-first"]["startedAt"])

    def test_share_identifier_rules(self):
        q = self.create_fair_queue("rules", [("A", 1)])
        with self.assertRaises(ClientError) as e:
            self.submit(q, self.command_payload("no-share", "true"))
        self.assertIn("shareIdentifier is required", e.exception.response["Error"]["Message"])
        fifo = self.create_queue("fifo-q")
        with self.assertRaises(ClientError) as e:
            self.submit(fifo, self.command_payload("share-on-fifo", "true"), shareIdentifier="A")
        self.assertIn("shareIdentifier", e.exception.response["Error"]["Message"])
        with self.assertRaises(ClientError) as e:
            self.batch.update_job_queue(jobQueue=fifo, schedulingPolicyArn="arn:aws:batch:us-east-1:000000000000:scheduling-policy/rules-policy")
        self.assertIn("can't have one added", e.exception.response["Error"]["Message"])


class ArrivalBatchTest(ServerTest):
    """Jobs that reach an idle fair-share queue together are weighed together ([scheduler]
    batch_ms): share and schedulingPriority order them, not the order in which they arrived. The
    batch is long and closed by moving the server's clock, so the test does not depend on how
    fast the submissions land."""
    server_config = "[scheduler]\nbatch_ms = 60000\n"
    server_args = ["--clock=offset"]

    def test_back_to_back_submissions_start_by_share_not_by_arrival(self):
        q = self.create_fair_queue("seed", [("HIGH", 1), ("MID", 3), ("LOW", 5)])
        low = self.submit(q, self.command_payload("low", "true"), shareIdentifier="LOW")
        high = self.submit(q, self.command_payload("high", "true"), shareIdentifier="HIGH")
        mid = self.submit(q, self.command_payload("mid", "true"), shareIdentifier="MID")
        # All three wait for the batch to close, and say so.
        for job in self.wait_jobs([low, high, mid], statuses=("RUNNABLE",)):
            self.assertIn("arrival batch", job.get("statusReason", ""))
        self.advance(60)
        jobs = {j["jobName"]: j for j in self.wait_jobs([low, high, mid], timeout=60)}
        self.assertTrue(all(j["status"] == "SUCCEEDED" for j in jobs.values()))
        # One instance: HIGH (key 0.5 x 1) first, then MID (0.5 x 3), then LOW (0.5 x 5).
        self.assertEqual(sorted(jobs, key=lambda n: jobs[n]["startedAt"]), ["high", "mid", "low"])

    def test_priority_orders_a_batch_inside_one_share(self):
        q = self.create_fair_queue("prio-batch", [("A", 1)])
        first = self.submit(q, self.command_payload("b-first", "true"), shareIdentifier="A", schedulingPriority=1)
        second = self.submit(q, self.command_payload("b-second", "true"), shareIdentifier="A", schedulingPriority=9)
        self.wait_jobs([first, second], statuses=("RUNNABLE",))
        self.advance(60)
        jobs = {j["jobName"]: j for j in self.wait_jobs([first, second], timeout=60)}
        self.assertLess(jobs["b-second"]["startedAt"], jobs["b-first"]["startedAt"])


if __name__ == "__main__":
    unittest.main()
