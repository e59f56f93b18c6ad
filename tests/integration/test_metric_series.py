"""A training job's MetricDefinitions series through trainyard's endpoint and `trainyard metrics`,
and the live view `trainyard top`."""
import os
import subprocess
import time
import unittest
import urllib.request

from harness import BIN, ServerTest

PRINT = "for i in 1 2 3; do echo loss=0.$i acc=0.9$i; done"


class MetricSeriesTest(ServerTest):
    def test_every_point_in_order_and_filters(self):
        p = self.command_payload("series", PRINT)
        p["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=([0-9.]+)"},
                                                            {"Name": "acc", "Regex": "acc=([0-9.]+)"},
                                                            {"Name": "never", "Regex": "nothing=([0-9.]+)"}]
        self.sm.create_training_job(**p)
        self.assertEqual(self.wait_training("series")["TrainingJobStatus"], "Completed")
        out = self.server.admin("metric-series", {"TrainingJobName": "series"})
        series = {s["MetricName"]: [pt["Value"] for pt in s["Points"]] for s in out["Series"]}
        self.assertEqual(series, {"loss": [0.1, 0.2, 0.3], "acc": [0.91, 0.92, 0.93], "never": []})
        self.assertEqual([s["MetricName"] for s in out["Series"]], ["loss", "acc", "never"])
        only = self.server.admin("metric-series", {"TrainingJobName": "series", "MetricName": "acc"})
        self.assertEqual([s["MetricName"] for s in only["Series"]], ["acc"])
        first = out["Series"][0]["Points"][0]["Timestamp"]
        none = self.server.admin("metric-series", {"TrainingJobName": "series", "EndTime": first - 10})
        self.assertEqual([s["Points"] for s in none["Series"]], [[], [], []])
        for body, fragment in (({"TrainingJobName": "nope"}, "ResourceNotFound"),
                               ({"TrainingJobName": "series", "MetricName": "x"}, "defines no metric x"),
                               ({}, "TrainingJobName is required")):
            with self.assertRaises(RuntimeError) as e:
                self.server.admin("metric-series", body)
            self.assertIn(fragment, str(e.exception))
        key, secret = self.server.credentials()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
        table = subprocess.run([BIN, "metrics", "series", "--metric", "loss", "--endpoint-url", self.server.url],
                               env=env, capture_output=True, text=True, check=True).stdout.splitlines()
        self.assertEqual(table[0].split(), ["METRIC", "TIME", "VALUE"])
        self.assertEqual([row.split()[-1] for row in table[1:]], ["0.1", "0.2", "0.3"])


class TopTest(ServerTest):
    server_config = '[[alarms]]\nname = "topq-failing"\nrule = "failure_ratio"\nthreshold = 0.5\nqueue = "topq"\n'

    def metrics_text(self):
        with urllib.request.urlopen(self.server.url + "/metrics", timeout=10) as r:
            return r.read().decode()

    def test_once_shows_queues_capacity_alarms_and_running_jobs(self):
        q = self.create_queue("topq", capacity=2)
        self.wait_jobs([self.submit(q, self.command_payload("broken", "exit 1"))])
        deadline = time.time() + 30  # rules are checked about once a second
        while 'trainyard_alarm_active{alarm="topq-failing",rule="failure_ratio"} 1' not in self.metrics_text():
            self.assertLess(time.time(), deadline, "the alarm never fired")
            time.sleep(0.1)
        job = self.submit(q, self.command_payload("sleeper", "sleep 30"))
        self.wait_jobs([job], statuses=("RUNNING",), timeout=30)
        key, secret = self.server.credentials()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
        out = subprocess.run([BIN, "top", "--once", "--endpoint-url", self.server.url], env=env,
                             capture_output=True, text=True, check=True).stdout
        rows = [line.split() for line in out.splitlines()]
        header = next(r for r in rows if r and r[0] == "QUEUE")
        queue = next(r for r in rows if r and r[0] == "topq" and len(r) == len(header))
        self.assertEqual(queue[header.index("RUNNING")], "1", out)
        self.assertIn(["ml.m5.large", "on_demand", "1/4"], rows, out)
        self.assertTrue(any(r[:3] == ["topq", "sleeper", job] for r in rows if len(r) >= 3), out)
        self.assertIn(["topq-failing", "failure_ratio"], rows, out)
        self.batch.terminate_service_job(jobId=job, reason="done looking")


if __name__ == "__main__":
    unittest.main()
