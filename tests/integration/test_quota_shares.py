"""Quota shares through the real API with real processes: borrowing, reclaim by preemption,
in-share priority preemption, and the misconfiguration reasons."""
import time
import unittest

from harness import ServerTest

LONG = "trap 'exit 0' TERM; while :; do sleep 0.1; done"


class QuotaShareTest(ServerTest):
    server_config = "[executor]\nstop_grace_seconds = 5\n"

    def submit_to(self, q, share, name, command, size=1, **kw):
        p = self.command_payload(name, command)
        p["ResourceConfig"]["InstanceCount"] = size
        return self.submit(q, p, quotaShareName=share, **kw)

    def test_borrowed_capacity_is_reclaimed_when_the_owner_submits(self):
        q = self.create_quota_queue("qm", 4, [("A", 2, "LEND_AND_BORROW", False), ("B", 2, "LEND_AND_BORROW", False)])
        a = [self.submit_to(q, "A", f"a-{n}", LONG) for n in range(4)]
        self.wait_jobs(a, statuses=("RUNNING",))  # A borrows B's idle 2
        shares = self.batch.list_quota_shares(jobQueue=q)["quotaShares"]
        self.assertEqual(sorted(s["quotaShareName"] for s in shares), ["A", "B"])
        util = self.batch.get_job_queue_snapshot(jobQueue=q)["queueUtilization"]["quotaShareUtilization"]
        self.assertEqual(util["topCapacityUtilization"],
                         [{"quotaShareName": "A", "capacityUsage": [{"capacityUnit": "ml.m5.large", "quantity": 4}]}])

        b = [self.submit_to(q, "B", f"b-{n}", "sleep 1") for n in range(2)]
        done = self.wait_jobs(b, timeout=60)
        self.assertTrue(all(j["status"] == "SUCCEEDED" for j in done), done)
        jobs = [self.describe_raw(j) for j in a]
        preempted = [j for j in jobs if j.get("preemptionSummary")]
        self.assertEqual(len(preempted), 2)  # exactly the borrowed capacity
        for j in preempted:
            self.assertEqual(j["preemptionSummary"]["preemptedAttemptCount"], 1)
            reason = j["attempts"][0]["statusReason"]
            self.assertTrue(reason.startswith("Preempted"), reason)
            self.assertTrue(any(bid in reason for bid in b), reason)
        # The preempted A jobs were the most recently started ones.
        self.assertEqual(sorted(j["jobName"] for j in preempted), ["a-2", "a-3"])
        for j in a:
            self.batch.terminate_service_job(jobId=j, reason="test over")

    def test_in_share_preemption_takes_the_lower_priority_job(self):
        q = self.create_quota_queue("ins", 2, [("S", 2, "RESERVE", True)])
        low = [self.submit_to(q, "S", f"low-{n}", LONG, schedulingPriority=10) for n in range(2)]
        self.wait_jobs(low, statuses=("RUNNING",))
        high = self.submit_to(q, "S", "high", "true", schedulingPriority=90)
        done = self.wait_jobs([high], timeout=60)[0]
        self.assertEqual(done["status"], "SUCCEEDED")
        jobs = [self.describe_raw(j) for j in low]
        self.assertEqual(sum(1 for j in jobs if j.get("preemptionSummary")), 1)
        for j in low:
            self.batch.terminate_service_job(jobId=j, reason="test over")

    def test_minimum_runtime_protects_young_jobs_from_preemption(self):
        q = self.create_quota_queue("minrt", 2, [("A", 1, "LEND_AND_BORROW", False), ("B", 1, "LEND_AND_BORROW", False)],
                             tags={"trainyard:minRuntimeSeconds": "3"})
        a = [self.submit_to(q, "A", f"y-{n}", LONG) for n in range(2)]
        self.wait_jobs(a, statuses=("RUNNING",))
        t0 = time.time()
        b = self.submit_to(q, "B", "owner", "true")
        done = self.wait_jobs([b], timeout=60)[0]
        self.assertEqual(done["status"], "SUCCEEDED")
        self.assertGreaterEqual(time.time() - t0, 2.0)  # it waited out the borrower's minimum runtime
        for j in a:
            self.batch.terminate_service_job(jobId=j, reason="test over")

    def test_misconfiguration_reason_for_a_job_over_the_share_limit(self):
        q = self.create_quota_queue("mis", 4, [("R", 2, "RESERVE", False)])
        job = self.submit_to(q, "R", "too-big", "true", size=3)
        deadline = time.time() + 10
        while "MISCONFIGURATION" not in self.batch.describe_service_job(jobId=job).get("statusReason", ""):
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        self.assertEqual(self.batch.describe_service_job(jobId=job)["statusReason"],
                         "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requirements exceed quota share capacity limits.")
        fronts = self.batch.get_job_queue_snapshot(jobQueue=q)["frontOfQuotaShares"]["quotaShares"]
        self.assertEqual(list(fronts), ["R"])
        self.assertEqual(fronts["R"][0]["jobArn"].split("/")[-1], job)

    def test_quota_share_name_rules(self):
        q = self.create_quota_queue("names", 2, [("S", 2, "RESERVE", False)])
        from botocore.exceptions import ClientError
        with self.assertRaises(ClientError) as e:
            self.submit(q, self.command_payload("no-share", "true"))
        self.assertIn("quotaShareName is required", e.exception.response["Error"]["Message"])
        with self.assertRaises(ClientError) as e:
            self.submit(q, self.command_payload("bad-share", "true"), quotaShareName="nope")
        self.assertIn("does not exist", e.exception.response["Error"]["Message"])


if __name__ == "__main__":
    unittest.main()
