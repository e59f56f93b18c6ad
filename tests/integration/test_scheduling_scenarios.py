"""Scheduling scenarios from AWS's own material (the Amazon Search blog post on Batch quota
shares and AWS's quota-management notebook), reproduced through the real API with real processes:

* the Amazon Search blog's borrow-and-reclaim at full size (100 instances, shares of 60
  and 40; A grows to 75 while B uses 25, and is preempted back to 60 when B asks for its 40);
* the blog's in-share preemption (a share at 60/60 running priorities 80, 50, 30, 10; a
  priority-90 job preempts exactly the priority-10 one), and the same through UpdateServiceJob;
* AWS's quota-management notebook (§2.9.6: RESERVE, LEND and LEND_AND_BORROW shares, cross-share
  preemption, in-share preemption after UpdateServiceJob);
* every MISCONFIGURATION reason of §2.7, as the RUNNABLE job's statusReason.

The long jobs cost no CPU (`sleep` in the background, `wait` in the shell) and leave at once on
SIGTERM, so preemptions complete quickly; multi-instance jobs keep the number of jobs small.
"""
import time
import unittest

from harness import ServerTest

# A job that runs until it is stopped, without using the CPU; SIGTERM ends it at once (exit 0).
LONG = "trap 'exit 0' TERM; sleep 1000 & wait"

ACTIVE = ("SCHEDULED", "STARTING", "RUNNING")

# The host catalogue: 100 ml.m5.large (the blog's 100 instances), enough ml.m5.xlarge for §2.7's
# borrowing example, and the notebook's three ml.g5.xlarge.
# Scheduling, not sandboxing: a hundred instances at once would each hold a storage volume of
# 1 GB allocated on the test machine's disk (docs/configuration.md, "Disk reserve").
CONFIG = """
[executor]
stop_grace_seconds = 5
sandbox = "none"

[[instance_types]]
name = "ml.m5.large"
count = 100

[[instance_types]]
name = "ml.m5.xlarge"
count = 12

[[instance_types]]
name = "ml.g5.xlarge"
count = 3
"""

MAX_RESOURCE = ("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) associated with "
                "the job queue cannot meet the capacity requirement of the job.")
QUOTA_LIMIT = ("MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requirements exceed quota share "
               "capacity limits.")
QUOTA_BORROW_LIMIT = ("MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requirements exceed quota share "
                      "capacity limits and borrow limits.")
QUOTA_BORROWABLE = ("MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requires borrowing that exceeds all "
                    "configured borrowable capacity.")


def preempted_by(job_id):
    return "Preempted: yielded its capacity to service job " + job_id


class SchedulingScenarioTest(ServerTest):
    server_config = CONFIG

    def setUp(self):
        super().setUp()
        self.long_jobs = []

    def tearDown(self):
        # Terminate whatever long job is still queued or running, and let the supervisors stop
        # them (SIGTERM to every process of each instance) before the server goes: the harness
        # SIGKILLs supervisors that are still alive, which would leave the backgrounded `sleep`s
        # running as orphans.
        for job in self.long_jobs:
            try:
                self.batch.terminate_service_job(jobId=job, reason="test over")
            except Exception:
                pass
        deadline = time.time() + 20
        pending = list(self.long_jobs)
        while pending and time.time() < deadline:
            try:
                pending = [j for j in pending if self.describe_raw(j)["status"] not in ("SUCCEEDED", "FAILED")]
            except Exception:
                break
            if pending:
                time.sleep(0.2)
        super().tearDown()

    # ---- helpers ----
    def quota_queue(self, name, capacity, shares, itype="ml.m5.large"):
        """A quota-management queue; shares: (name, limit, strategy, borrowLimit or None, inSharePreemption)."""
        arn = self.batch.create_scheduling_policy(
            name=name + "-policy", quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"})["arn"]
        self.batch.create_service_environment(
            serviceEnvironmentName=name + "-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": capacity, "capacityUnit": itype}])
        self.batch.create_job_queue(jobQueueName=name, jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    schedulingPolicyArn=arn,
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": name + "-env"}])
        for share, limit, strategy, borrow, in_share in shares:
            sharing = {"strategy": strategy}
            if borrow is not None:
                sharing["borrowLimit"] = borrow
            self.batch.create_quota_share(
                jobQueue=name, quotaShareName=share,
                capacityLimits=[{"maxCapacity": limit, "capacityUnit": itype}],
                resourceSharingConfiguration=sharing,
                preemptionConfiguration={"inSharePreemption": "ENABLED" if in_share else "DISABLED"})
        return name

    def submit_to(self, q, share, name, size=1, command=LONG, itype="ml.m5.large", **kw):
        # The Batch job name as given; the training job name without "_" (SageMaker's pattern).
        p = self.command_payload(name.replace("_", "-"), command)
        p["ResourceConfig"]["InstanceCount"] = size
        p["ResourceConfig"]["InstanceType"] = itype
        if share is not None:
            kw["quotaShareName"] = share
        job = self.submit(q, p, name=name, **kw)
        self.long_jobs.append(job)
        return job

    def held(self, q):
        """{share: instances} held by SCHEDULED/STARTING/RUNNING jobs, from GetJobQueueSnapshot."""
        util = self.batch.get_job_queue_snapshot(jobQueue=q)["queueUtilization"]["quotaShareUtilization"]
        return {u["quotaShareName"]: sum(c["quantity"] for c in u["capacityUsage"])
                for u in util["topCapacityUtilization"]}

    def running(self, q):
        """{share: instances} of RUNNING jobs, from ListServiceJobs."""
        out = {}
        for j in self.batch.list_service_jobs(jobQueue=q, jobStatus="RUNNING", maxResults=100)["jobSummaryList"]:
            out[j["quotaShareName"]] = out.get(j["quotaShareName"], 0) + sum(c["quantity"] for c in j["capacityUsage"])
        return out

    def wait_settled(self, q, expected, timeout=20):
        """Waits until the shares hold exactly `expected` instances, all of them RUNNING."""
        deadline = time.time() + timeout
        while True:
            held, running = self.held(q), self.running(q)
            if held == expected and running == expected:
                return
            if time.time() > deadline:
                self.fail(f"shares never settled at {expected}: held {held}, running {running}\n"
                          f"{self.server.read_log()}")
            time.sleep(0.2)

    def wait_reason(self, job_id, timeout=10):
        deadline = time.time() + timeout
        while True:
            j = self.batch.describe_service_job(jobId=job_id)
            if j.get("statusReason", "").startswith("MISCONFIGURATION:"):
                return j
            if time.time() > deadline:
                self.fail(f"{j['jobName']} never got a MISCONFIGURATION reason: {j['status']} {j.get('statusReason')}")
            time.sleep(0.05)

    def assert_untouched(self, job, status="RUNNING"):
        """Started once, never preempted, still `status`."""
        self.assertEqual(job["status"], status, job["jobName"])
        self.assertEqual(len(job["attempts"]), 1, job["jobName"])
        self.assertNotIn("preemptionSummary", job, job["jobName"])

    def assert_preempted_once(self, job, for_job):
        """Preempted exactly once, for `for_job`, and back in RUNNABLE."""
        self.assertEqual(job["status"], "RUNNABLE", job["jobName"])
        self.assertEqual(len(job["attempts"]), 1, job["jobName"])
        self.assertEqual(job["attempts"][0]["statusReason"], preempted_by(for_job), job["jobName"])
        summary = job["preemptionSummary"]
        self.assertEqual(summary["preemptedAttemptCount"], 1, job["jobName"])
        self.assertEqual([a["statusReason"] for a in summary["recentPreemptedAttempts"]], [preempted_by(for_job)])

    # ---- 1. the blog's borrow and reclaim at full size (§2.9.7) ----
    def test_borrow_to_75_then_reclaim_to_60(self):
        q = self.quota_queue("search", 100, [("ProdExp1", 60, "LEND_AND_BORROW", None, False),
                                             ("ProdExp2", 40, "LEND_AND_BORROW", None, False)])
        # ProdExp2 uses 25 of its 40.
        b = [self.submit_to(q, "ProdExp2", f"b-{n:02}", 5) for n in range(1, 6)]
        self.wait_settled(q, {"ProdExp2": 25})
        # ProdExp1 fills its own 60 ...
        a = [self.submit_to(q, "ProdExp1", f"a-{n:02}", 5) for n in range(1, 13)]
        self.wait_settled(q, {"ProdExp1": 60, "ProdExp2": 25})
        # ... and has more work than that: it borrows ProdExp2's idle 15 and grows to 75.
        a += [self.submit_to(q, "ProdExp1", f"a-{n:02}", 5) for n in range(13, 18)]
        self.wait_settled(q, {"ProdExp1": 75, "ProdExp2": 25})
        jobs = {j["jobName"]: j for j in (self.describe_raw(x) for x in a + b)}
        self.assertEqual(sorted(n for n, j in jobs.items() if j["status"] == "RUNNABLE"), ["a-16", "a-17"])
        self.assertTrue(all(jobs[n]["attempts"] == [] for n in ("a-16", "a-17")))
        borrowers = ["a-13", "a-14", "a-15"]
        last_own_start = max(jobs[f"a-{n:02}"]["attempts"][0]["startedAt"] for n in range(1, 13))
        for n in borrowers:  # the borrowers are the most recently started ProdExp1 jobs
            self.assertGreater(jobs[n]["attempts"][0]["startedAt"], last_own_start, n)

        # ProdExp2 now needs its full 40: exactly the 15 borrowed instances are preempted.
        b2 = [self.submit_to(q, "ProdExp2", f"b-{n:02}", 5) for n in range(6, 9)]
        self.wait_jobs(b2, statuses=("RUNNING",), timeout=30)
        self.wait_settled(q, {"ProdExp1": 60, "ProdExp2": 40})
        jobs = {j["jobName"]: j for j in (self.describe_raw(x) for x in a + b + b2)}
        preempted = sorted(n for n, j in jobs.items() if "preemptionSummary" in j)
        self.assertEqual(preempted, borrowers)
        for_jobs = []
        for n in borrowers:
            reason = jobs[n]["attempts"][0]["statusReason"]
            for_jobs.append(reason.rsplit(" ", 1)[-1])
            self.assert_preempted_once(jobs[n], for_jobs[-1])
        self.assertEqual(sorted(for_jobs), sorted(b2))  # each new ProdExp2 job reclaimed one
        # Most recently started goes first: a-15 yields to the first reclaiming job.
        self.assertEqual(for_jobs[borrowers.index("a-15")], b2[0])
        self.assertEqual(for_jobs[borrowers.index("a-13")], b2[2])
        for n in [f"a-{k:02}" for k in range(1, 13)] + [f"b-{k:02}" for k in range(1, 9)]:
            self.assert_untouched(jobs[n])
        self.assertEqual(sorted(n for n, j in jobs.items() if j["status"] == "RUNNABLE"),
                         ["a-13", "a-14", "a-15", "a-16", "a-17"])
        # Nothing more happens: both shares are at their quota.
        time.sleep(1)
        self.assertEqual(self.held(q), {"ProdExp1": 60, "ProdExp2": 40})

    # ---- 2. the blog's in-share preemption (§2.9.7) ----
    def blog_share_at_60(self):
        q = self.quota_queue("prio", 100, [("ProdExp1", 60, "LEND_AND_BORROW", None, True),
                                           ("ProdExp2", 40, "LEND_AND_BORROW", None, False)])
        # ProdExp2 uses all of its 40, so nothing is idle and ProdExp1 cannot borrow.
        other = [self.submit_to(q, "ProdExp2", f"other-{n}", 20) for n in (1, 2)]
        jobs = {}
        for name, prio in (("A", 80), ("B", 50), ("C", 30), ("D", 10)):
            jobs[name] = self.submit_to(q, "ProdExp1", name, 15, schedulingPriority=prio)
        self.wait_settled(q, {"ProdExp1": 60, "ProdExp2": 40})
        return q, jobs, other

    def test_priority_90_job_preempts_only_the_priority_10_job(self):
        q, jobs, other = self.blog_share_at_60()
        new = self.submit_to(q, "ProdExp1", "E", 15, schedulingPriority=90)
        self.wait_jobs([new], statuses=("RUNNING",), timeout=30)
        self.wait_settled(q, {"ProdExp1": 60, "ProdExp2": 40})
        d = {n: self.describe_raw(j) for n, j in jobs.items()}
        self.assert_preempted_once(d["D"], new)
        for n in ("A", "B", "C"):
            self.assert_untouched(d[n])
        for j in other:
            self.assert_untouched(self.describe_raw(j))
        self.assert_untouched(self.describe_raw(new))
        self.assertEqual(self.describe_raw(new)["schedulingPriority"], 90)

        # UpdateServiceJob: D, now waiting, becomes the most important job of the share and
        # preempts the lowest-priority running job, C (30); nothing else moves.
        self.batch.update_service_job(jobId=jobs["D"], schedulingPriority=95)
        self.wait_jobs([jobs["C"]], statuses=("RUNNABLE",), timeout=30)
        self.wait_jobs([jobs["D"]], statuses=("RUNNING",), timeout=30)
        self.wait_settled(q, {"ProdExp1": 60, "ProdExp2": 40})
        d = {n: self.describe_raw(j) for n, j in jobs.items()}
        self.assert_preempted_once(d["C"], jobs["D"])
        self.assertEqual(d["D"]["status"], "RUNNING")
        self.assertEqual(len(d["D"]["attempts"]), 2)
        self.assertEqual(d["D"]["preemptionSummary"]["preemptedAttemptCount"], 1)
        self.assertEqual(d["D"]["schedulingPriority"], 95)
        for n in ("A", "B"):
            self.assert_untouched(d[n])
        self.assert_untouched(self.describe_raw(new))

    # ---- 3. AWS's quota-management notebook (§2.9.6) ----
    def test_quota_management_notebook(self):
        itype = "ml.g5.xlarge"
        q = self.quota_queue("nb", 3, [("QS1", 1, "LEND_AND_BORROW", 200, True),
                                       ("QS2", 1, "LEND", None, False),
                                       ("QS3", 1, "RESERVE", None, False)], itype=itype)
        shares = {s["quotaShareName"]: s for s in self.batch.list_quota_shares(jobQueue=q)["quotaShares"]}
        self.assertEqual(shares["QS1"]["resourceSharingConfiguration"], {"strategy": "LEND_AND_BORROW", "borrowLimit": 200})
        self.assertEqual(shares["QS2"]["resourceSharingConfiguration"], {"strategy": "LEND"})
        self.assertEqual(shares["QS3"]["resourceSharingConfiguration"], {"strategy": "RESERVE"})

        # Step 1: three QS1 jobs. high runs on QS1's own capacity, med borrows QS2's idle
        # capacity, low waits (QS3 reserves its capacity; QS1 may not borrow it).
        high = self.submit_to(q, "QS1", "qs1_job_high", itype=itype, schedulingPriority=3)
        med = self.submit_to(q, "QS1", "qs1_job_med", itype=itype, schedulingPriority=2)
        low = self.submit_to(q, "QS1", "qs1_job_low", itype=itype, schedulingPriority=1)
        self.wait_jobs([high, med], statuses=("RUNNING",), timeout=30)
        self.wait_settled(q, {"QS1": 2})
        self.assertEqual(self.describe_raw(low)["status"], "RUNNABLE")
        time.sleep(0.5)  # low keeps waiting: QS3's idle capacity is not lent
        self.assertEqual(self.describe_raw(low)["status"], "RUNNABLE")

        # Step 2: a QS2 job reclaims QS2's capacity by cross-share preemption of med.
        # (QS3's idle capacity stays reserved for QS3, so QS2 may not simply start on it.)
        qs2 = self.submit_to(q, "QS2", "qs2_job_1", itype=itype, schedulingPriority=1)
        self.wait_jobs([qs2], statuses=("RUNNING",), timeout=30)
        self.wait_settled(q, {"QS1": 1, "QS2": 1})
        self.assert_preempted_once(self.describe_raw(med), qs2)
        self.assert_untouched(self.describe_raw(high))
        self.assertEqual(self.describe_raw(low)["status"], "RUNNABLE")

        # Step 3: low becomes the most important QS1 job: in-share preemption of high.
        self.batch.update_service_job(jobId=low, schedulingPriority=4)
        self.wait_jobs([low], statuses=("RUNNING",), timeout=30)
        self.wait_jobs([high], statuses=("RUNNABLE",), timeout=30)
        self.wait_settled(q, {"QS1": 1, "QS2": 1})
        d = {n: self.describe_raw(j) for n, j in (("high", high), ("med", med), ("low", low), ("qs2", qs2))}
        self.assert_preempted_once(d["high"], low)
        self.assertEqual(d["med"]["status"], "RUNNABLE")
        self.assertEqual(d["med"]["preemptionSummary"]["preemptedAttemptCount"], 1)  # not preempted again
        self.assert_untouched(d["low"])
        self.assertEqual(d["low"]["schedulingPriority"], 4)
        self.assert_untouched(d["qs2"])

    # ---- 4. every MISCONFIGURATION reason of §2.7 ----
    def test_misconfiguration_reasons(self):
        cases = []  # (job id, expected statusReason)
        # FIFO queue, NUM_INSTANCES: 11 instances > maxCapacity 10.
        fifo = self.create_queue("fifo", capacity=10)
        cases.append((self.submit_to(fifo, None, "fifo-11", 11, command="true"), MAX_RESOURCE))
        # Fair-share queue, NUM_INSTANCES: the same.
        arn = self.batch.create_scheduling_policy(
            name="fss-policy", fairsharePolicy={"shareDistribution": [{"shareIdentifier": "A", "weightFactor": 1}]})["arn"]
        self.batch.create_service_environment(
            serviceEnvironmentName="fss-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 10, "capacityUnit": "NUM_INSTANCES"}])
        self.batch.create_job_queue(jobQueueName="fss", jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    schedulingPolicyArn=arn,
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "fss-env"}])
        p = self.command_payload("fss-11", "true")
        p["ResourceConfig"]["InstanceCount"] = 11
        cases.append((self.submit("fss", p, shareIdentifier="A"), MAX_RESOURCE))
        # Quota management: more of the instance type than the environment's limit for it (5 > 4),
        # on a LEND_AND_BORROW share whose borrowing would otherwise allow it.
        qm = self.quota_queue("qm-max", 4, [("A", 4, "LEND_AND_BORROW", None, False),
                                            ("B", 4, "LEND", None, False)])
        cases.append((self.submit_to(qm, "A", "qm-max-5", 5, command="true"), MAX_RESOURCE))
        # RESERVE and LEND shares: more than the share's limit (5 > 4).
        qr = self.quota_queue("qm-limit", 10, [("R", 4, "RESERVE", None, False),
                                               ("L", 4, "LEND", None, False),
                                               ("X", 2, "LEND", None, False)])
        cases.append((self.submit_to(qr, "R", "reserve-5", 5, command="true"), QUOTA_LIMIT))
        cases.append((self.submit_to(qr, "L", "lend-5", 5, command="true"), QUOTA_LIMIT))
        # LEND_AND_BORROW: limit 2, borrowLimit 100 => at most 4; a job of 5 exceeds it, though the
        # environment (10) and the lenders (2 + 6) could hold it.
        qb = self.quota_queue("qm-borrow", 10, [("LB", 2, "LEND_AND_BORROW", 100, False),
                                                ("L", 6, "LEND", None, False)])
        cases.append((self.submit_to(qb, "LB", "borrow-5", 5, command="true"), QUOTA_BORROW_LIMIT))
        # LEND_AND_BORROW: A and B each 4 x ml.m5.xlarge, borrowLimit 200; a job of 10 on A is within
        # A's 4 + 8 but exceeds all borrowable capacity (A's 4 + B's 4).
        qx = self.quota_queue("qm-borrowable", 12, [("A", 4, "LEND_AND_BORROW", 200, False),
                                                    ("B", 4, "LEND_AND_BORROW", 200, False)], itype="ml.m5.xlarge")
        cases.append((self.submit_to(qx, "A", "borrowable-10", 10, command="true", itype="ml.m5.xlarge"),
                      QUOTA_BORROWABLE))

        for job, reason in cases:
            j = self.wait_reason(job)
            self.assertEqual((j["jobName"], j["status"], j["statusReason"]), (j["jobName"], "RUNNABLE", reason))
            self.assertEqual(self.batch.list_service_jobs(
                jobQueue=j["jobQueue"], filters=[{"name": "JOB_NAME", "values": [j["jobName"]]}])
                ["jobSummaryList"][0]["statusReason"], reason)

        # The reasons stay (the jobs never fit), and a job that fits is not blocked by them.
        ok = self.submit_to(qx, "A", "fits-4", 4, command="true", itype="ml.m5.xlarge")
        self.assertEqual(self.wait_jobs([ok], timeout=30)[0]["status"], "SUCCEEDED")
        for job, reason in cases:
            j = self.batch.describe_service_job(jobId=job)
            self.assertEqual((j["status"], j["statusReason"]), ("RUNNABLE", reason), j["jobName"])


if __name__ == "__main__":
    unittest.main()
