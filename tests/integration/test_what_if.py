"""WhatIf (POST /trainyard/v1/what-if; docs/simulate.md, "What if"): a fair-share queue's own
history replayed through the simulator. Jobs hold their instance until the test opens their gate,
and the server's clock is moved on by hand, so every job runs 600 s of server time whatever the
machine's speed."""
import os
import subprocess
import time
import unittest

from harness import BIN, ServerTest

RUN_S = 600
# Each job's real start-up and the test's own calls add well under a second per job to what the
# server records; the replay works in whole seconds.
TOLERANCE_S = 15


class WhatIfTest(ServerTest):
    server_args = ["--clock=offset"]
    # No arrival batches: the first job starts alone, as the replay starts it; a small job limit
    # so that the limit can be reached.
    server_config = "[scheduler]\nbatch_ms = 0\n\n[console]\nwhat_if_max_jobs = 6\n"

    def setUp(self):
        super().setUp()
        arn = self.batch.create_scheduling_policy(
            name="wi-policy",
            fairsharePolicy={"shareDecaySeconds": 600,
                             "shareDistribution": [{"shareIdentifier": "A", "weightFactor": 1},
                                                   {"shareIdentifier": "B", "weightFactor": 1}]})["arn"]
        self.batch.create_service_environment(
            serviceEnvironmentName="wi-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}])
        self.batch.create_job_queue(jobQueueName="wi", jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    schedulingPolicyArn=arn,
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "wi-env"}])

    def gated(self, name, share):
        gate = os.path.join(self.work_dir, "gate-" + name)
        payload = self.command_payload(name, f"while [ ! -e {gate} ]; do sleep 0.05; done",
                                       StoppingCondition={"MaxRuntimeInSeconds": 7200})
        return self.submit("wi", payload, shareIdentifier=share), gate

    def what_if(self, **body):
        return self.server.admin("what-if", dict(JobQueue="wi", **body))

    def run_history(self):
        """Two shares, three jobs each, on one instance: each job runs RUN_S seconds of server
        time, in the order the server's own fair-share passes choose."""
        jobs = {}
        first, gate = self.gated("a1", "A")
        jobs[first] = gate
        self.wait_jobs([first], statuses=("RUNNING",))
        for name in ("a2", "a3", "b1", "b2", "b3"):
            job_id, gate = self.gated(name, name[0].upper())
            jobs[job_id] = gate
        order = []
        for _ in range(len(jobs)):
            running = self.next_running(jobs, order)
            self.advance(RUN_S)
            with open(jobs[running["jobId"]], "w"):
                pass
            self.wait_jobs([running["jobId"]])
            order.append(running["jobName"])
        return order

    def next_running(self, jobs, done):
        """The one job that runs now (the instance holds one), once it is RUNNING."""
        deadline = time.time() + 60
        while True:
            described = [self.describe_raw(j) for j in jobs]
            running = [j for j in described if j["status"] == "RUNNING" and j["jobName"] not in done]
            if running:
                self.assertEqual(len(running), 1, [(j["jobName"], j["status"]) for j in described])
                return running[0]
            if time.time() > deadline:
                self.fail(f"no job runs: {[(j['jobName'], j['status']) for j in described]}")
            time.sleep(0.05)

    def test_baseline_matches_what_happened_and_a_lower_weight_factor_waits_less(self):
        order = self.run_history()
        report = self.what_if(ShareWeights={"B": 0.1})
        self.assertEqual(report["JobQueue"], "wi")
        self.assertEqual(report["Jobs"], 6)
        self.assertEqual(report["Capacity"], {"Current": 1, "Simulated": 1})
        shares = {s["Share"]: s for s in report["Shares"]}
        self.assertEqual(sorted(shares), ["A", "B"], report)
        for name, share in shares.items():
            actual, baseline = share["Actual"], share["Baseline"]
            self.assertEqual(actual["Jobs"], 3)
            self.assertEqual(baseline["Jobs"], 3)
            # The model of the server's own passes starts the jobs in the same order, so each
            # share waits as long in the replay as it did (order: the real one).
            for k in ("MeanWaitSeconds", "P50WaitSeconds", "P90WaitSeconds"):
                self.assertAlmostEqual(baseline[k], actual[k], delta=TOLERANCE_S, msg=f"{name} {k} {order} {report}")
            # Three jobs of RUN_S seconds on one instance, all inside the window.
            self.assertAlmostEqual(actual["InstanceHours"], 3 * RUN_S / 3600, delta=0.05)
            self.assertAlmostEqual(baseline["InstanceHours"], 3 * RUN_S / 3600, delta=0.05)
        # The jobs ran one after another: the six waits are 0, 600, ..., 3000 s in some order.
        waits = sorted([shares["A"]["Actual"]["MeanWaitSeconds"] * 3, shares["B"]["Actual"]["MeanWaitSeconds"] * 3])
        self.assertAlmostEqual(sum(waits), sum(range(0, 6 * RUN_S, RUN_S)), delta=6 * TOLERANCE_S)
        # B's weight factor 0.1 entitles it to ten times A's share: its jobs go first, so B waits
        # less and A longer than with equal weights. (The replay weighs jobs submitted in one second
        # together, so b1 even goes before a1 there.)
        b, a = shares["B"], shares["A"]
        self.assertLess(b["Simulated"]["MeanWaitSeconds"], b["Baseline"]["MeanWaitSeconds"] - RUN_S / 2, report)
        self.assertGreater(a["Simulated"]["MeanWaitSeconds"], a["Baseline"]["MeanWaitSeconds"] + RUN_S / 2, report)
        totals = report["Totals"]
        self.assertEqual(totals["Actual"]["Jobs"], 6)
        # Nothing changed the capacity: the same work fits the same window.
        self.assertAlmostEqual(totals["Simulated"]["InstanceHours"], totals["Actual"]["InstanceHours"], delta=0.05)

        # The window is bounded by [console] what_if_max_jobs (6 here): a seventh job is refused.
        seventh, gate = self.gated("a4", "A")
        with self.assertRaises(RuntimeError) as e:
            self.what_if()
        self.assertIn("ValidationException", str(e.exception))
        self.assertIn("what_if_max_jobs (6)", str(e.exception))
        with open(gate, "w"):
            pass
        self.wait_jobs([seventh])
        # One hour of history leaves out the first six jobs (submitted over an hour of server time ago).
        self.assertEqual(self.what_if(HistoryHours=1)["Jobs"], 1)

    def test_a_still_waiting_job_is_counted_up_to_now(self):
        first, first_gate = self.gated("w1", "A")
        self.wait_jobs([first], statuses=("RUNNING",))
        second, _ = self.gated("w2", "B")
        self.wait_jobs([second], statuses=("RUNNABLE",))
        self.advance(RUN_S)
        report = self.what_if()
        shares = {s["Share"]: s for s in report["Shares"]}
        # w2 has waited RUN_S seconds so far; w1 has run as long and still runs.
        self.assertAlmostEqual(shares["B"]["Actual"]["MeanWaitSeconds"], RUN_S, delta=TOLERANCE_S)
        self.assertAlmostEqual(shares["B"]["Baseline"]["MeanWaitSeconds"], RUN_S, delta=TOLERANCE_S)
        notes = " ".join(report["Notes"])
        self.assertIn("1 jobs still wait", notes)
        self.assertIn("1 jobs still run", notes)
        with open(first_gate, "w"):
            pass
        self.wait_jobs([first])

    def test_malformed_requests_are_refused(self):
        def refused(body, fragment, error="ValidationException"):
            with self.assertRaises(RuntimeError) as e:
                self.server.admin("what-if", body)
            self.assertIn(error, str(e.exception))
            self.assertIn(fragment, str(e.exception))

        job, gate = self.gated("m1", "A")
        self.wait_jobs([job], statuses=("RUNNING",))
        refused({}, "JobQueue is required")
        refused({"JobQueue": 7}, "JobQueue is required")
        refused({"JobQueue": "nope"}, "job queue nope", "ResourceNotFound")
        refused({"JobQueue": "wi", "Extra": 1}, "unknown member Extra")
        refused({"JobQueue": "wi", "HistoryHours": 0}, "HistoryHours must be an integer from 1 to 720")
        refused({"JobQueue": "wi", "HistoryHours": 721}, "HistoryHours must be an integer from 1 to 720")
        refused({"JobQueue": "wi", "HistoryHours": "24"}, "HistoryHours must be an integer")
        refused({"JobQueue": "wi", "ShareWeights": {"A": 0}}, "ShareWeights.A must be a number from 0.0001 to 999.9999")
        refused({"JobQueue": "wi", "ShareWeights": {"A": 1000}}, "ShareWeights.A must be a number from 0.0001")
        refused({"JobQueue": "wi", "ShareWeights": {"A": "1"}}, "ShareWeights.A must be a number")
        refused({"JobQueue": "wi", "ShareWeights": ["A"]}, "ShareWeights must be an object")
        refused({"JobQueue": "wi", "ShareWeights": {"C": 1}}, "ShareWeights.C: no job of share 'C' is in the window")
        refused({"JobQueue": "wi", "QuotaLimits": {"x": -1}}, "QuotaLimits.x must be an integer from 0")
        refused({"JobQueue": "wi", "QuotaLimits": {"x": 1}}, "QuotaLimits applies to a quota-share queue")
        refused({"JobQueue": "wi", "Capacity": 0}, "Capacity must be an integer from 1")
        refused({"JobQueue": "wi", "Capacity": 1.5}, "Capacity must be an integer from 1")
        # A valid request still answers, with the job that runs.
        self.assertEqual(self.what_if(Capacity=2, ShareWeights={"A": 0.5})["Jobs"], 1)

        # The CLI prints the three runs of each share and the totals.
        env = dict(os.environ, TRAINYARD_ENDPOINT_URL=self.server.url, TRAINYARD_DATA_DIR=self.data_dir)
        env.pop("AWS_ACCESS_KEY_ID", None)
        env.pop("AWS_SECRET_ACCESS_KEY", None)

        def cli(*args):
            return subprocess.run([BIN, "what-if", *args], env=env, capture_output=True, text=True, timeout=30)

        p = cli("--queue", "wi", "--weight", "A=0.5", "--hours", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = [line.split() for line in p.stdout.splitlines()]
        self.assertIn(["SHARE", "RUN", "JOBS"], [r[:3] for r in rows])
        self.assertEqual([r[:3] for r in rows if r and r[0] in ("A", "total")],
                         [["A", "Actual", "1"], ["A", "Baseline", "1"], ["A", "Simulated", "1"],
                          ["total", "Actual", "1"], ["total", "Baseline", "1"], ["total", "Simulated", "1"]])
        p = cli("--queue", "wi", "--weight", "A=heavy")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--weight A=heavy", p.stderr)
        p = cli("--queue", "wi", "--weight", "Z=2")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ShareWeights.Z", p.stderr)
        self.assertIn("--weight", cli("--help").stdout)
        with open(gate, "w"):
            pass
        self.wait_jobs([job])


if __name__ == "__main__":
    unittest.main()
