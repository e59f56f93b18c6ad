"""The console's queue data over the wire (docs/api-coverage.md, "trainyard's own operations"):
QueueStandings agrees with GET /metrics, ShareHistory grows by one sample per
[console] share_history_interval_seconds of the server's (offset) clock, ListServiceJobs'
trainyard:tag filter, and `trainyard call trainyard ...`."""
import json
import os
import subprocess
import time
import unittest
import urllib.request

from harness import BIN, ServerTest
from test_metrics import parse_exposition


class ConsoleDataTest(ServerTest):
    server_args = ["--clock=offset"]

    def setUp(self):
        super().setUp()
        # shares: A weighs 1, B 3, on one instance: A runs (entitled to 0.75), B waits (0.25).
        arn = self.batch.create_scheduling_policy(
            name="fair", fairsharePolicy={"shareDecaySeconds": 600, "shareDistribution": [
                {"shareIdentifier": "A", "weightFactor": 1}, {"shareIdentifier": "B", "weightFactor": 3}]})["arn"]
        self.batch.create_service_environment(
            serviceEnvironmentName="env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}])
        self.batch.create_job_queue(jobQueueName="q", jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    schedulingPolicyArn=arn,
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "env"}])
        self.running = self.submit("q", self.command_payload("runs", "sleep 120"), shareIdentifier="A",
                                   tags={"team": "a", "stage": "prod"})
        self.wait_jobs([self.running], statuses=("RUNNING",))
        self.waiting = self.submit("q", self.command_payload("waits", "true"), shareIdentifier="B", tags={"team": "b"})
        self.wait_jobs([self.waiting], statuses=("RUNNABLE",))

    def standings(self, body):
        return self.server.admin("queue-standings", body)

    def history(self, body):
        return self.server.admin("share-history", body)

    def test_standings_are_the_metrics_gauges(self):
        q = self.standings({"JobQueue": "q"})["Queues"][0]
        self.assertEqual((q["JobQueue"], q["Kind"], q["State"]), ("q", "FAIR_SHARE", "ENABLED"))
        self.assertEqual(q["Counts"]["RUNNING"], 1)
        self.assertEqual(q["Counts"]["RUNNABLE"], 1)
        shares = {s["Share"]: s for s in q["Shares"]}
        self.assertEqual((shares["A"]["InUse"], shares["A"]["Entitlement"], shares["A"]["Borrowed"]), (1, 0.75, 0.25))
        self.assertEqual((shares["B"]["InUse"], shares["B"]["Entitlement"], shares["B"]["Lent"]), (0, 0.25, 0.25))
        self.assertEqual(shares["B"]["Waiting"], 1)
        with urllib.request.urlopen(self.server.url + "/metrics", timeout=10) as r:
            families = parse_exposition(r.read().decode())

        def gauge(family, share):
            for name, labels, value in families[family]["samples"]:
                if labels == {"queue": "q", "share": share}:
                    return value
            return 0.0
        for share, s in shares.items():
            self.assertEqual(gauge("trainyard_share_instances_in_use", share), s["InUse"], share)
            self.assertEqual(gauge("trainyard_fairshare_entitlement_instances", share), s["Entitlement"], share)
            self.assertEqual(gauge("trainyard_fairshare_entitlement_ratio", share), s["EntitlementRatio"], share)
        # Every queue without JobQueue; a queue that does not exist is not found.
        self.assertEqual([q["JobQueue"] for q in self.standings({})["Queues"]], ["q"])
        with self.assertRaises(RuntimeError) as e:
            self.standings({"JobQueue": "nope"})
        self.assertIn("ResourceNotFound", str(e.exception))

    def test_history_takes_one_sample_per_interval_of_the_servers_clock(self):
        def points():
            return self.history({"JobQueue": "q"})["Points"]

        def wait_for(n):
            deadline = time.time() + 10
            while len(points()) < n:
                if time.time() > deadline:
                    self.fail(f"{len(points())} samples, not {n}")
                time.sleep(0.05)
            return points()

        n = len(points())
        self.advance(60)  # [console] share_history_interval_seconds = 60 (the default)
        first = wait_for(n + 1)
        self.advance(60)
        second = wait_for(n + 2)
        self.assertEqual(len(second), n + 2)
        self.assertGreaterEqual(second[-1]["Timestamp"] - first[-1]["Timestamp"], 60)
        self.assertEqual(second[-1]["Shares"]["A"], {"InUse": 1, "Entitlement": 0.75, "Borrowed": 0.25, "Lent": 0})
        self.assertEqual(self.history({"JobQueue": "q"})["IntervalSeconds"], 60)
        # StartTime selects the newest only.
        self.assertEqual(len(self.history({"JobQueue": "q", "StartTime": second[-1]["Timestamp"]})["Points"]), 1)
        with self.assertRaises(RuntimeError) as e:
            self.history({"JobQueue": "q", "StartTime": "yesterday"})
        self.assertIn("ValidationException", str(e.exception))
        self.assertIn("StartTime", str(e.exception))

    def test_tag_filter_keeps_the_tagged_jobs_and_refuses_a_malformed_value(self):
        def ids(values, **extra):
            body = {"jobQueue": "q", "filters": [{"name": "trainyard:tag", "values": values}], **extra}
            return {j["jobId"] for j in self.server.raw_call("batch", "ListServiceJobs", body)["jobSummaryList"]}
        self.assertEqual(ids(["team=a"]), {self.running})
        self.assertEqual(ids(["team=b"]), {self.waiting})
        self.assertEqual(ids(["team=a", "stage=prod"]), {self.running})
        self.assertEqual(ids(["team=a", "stage=dev"]), set())
        self.assertEqual(ids(["team=b"], jobStatus="RUNNING"), set())
        with self.assertRaises(RuntimeError) as e:
            ids(["team"])
        self.assertIn("trainyard:tag", str(e.exception))
        self.assertIn("key=value", str(e.exception))

    def test_the_cli_calls_them(self):
        env = dict(os.environ, TRAINYARD_ENDPOINT_URL=self.server.url, TRAINYARD_DATA_DIR=self.data_dir)
        env.pop("AWS_ACCESS_KEY_ID", None)
        env.pop("AWS_SECRET_ACCESS_KEY", None)
        p = subprocess.run([BIN, "call", "trainyard", "QueueStandings", '{"JobQueue": "q"}'], env=env,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["Queues"][0]["JobQueue"], "q")
        p = subprocess.run([BIN, "call", "trainyard", "NoSuchThing"], env=env, capture_output=True, text=True, timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("NoSuchThing", p.stderr)


if __name__ == "__main__":
    unittest.main()
