"""kill -9 the server while jobs run: after a restart every job is accounted for, running attempts
are re-adopted and finish, and none runs twice."""
import os
import time
import unittest

from harness import Server, ServerTest


class CrashTest(ServerTest):
    def test_kill9_while_jobs_run_then_restart(self):
        queue = self.create_queue("crash", capacity=2)
        runs = self.bucket_path("trainyard-test", "runs.log")
        os.makedirs(os.path.dirname(runs), exist_ok=True)
        ids = []
        for n in range(5):
            cmd = f"echo crash-{n} $$ >> {runs}; sleep 2; echo loss=0.{n}"
            p = self.command_payload(f"crash-{n}", cmd)
            p["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]
            ids.append(self.submit(queue, p))
        self.wait_jobs(ids[:2], statuses=("RUNNING",))

        self.server.kill9()
        time.sleep(0.5)  # the attempts go on without the server
        self.server = Server(self.data_dir).start()
        self.batch = self.server.client("batch")
        self.sm = self.server.client("sagemaker")

        jobs = self.wait_jobs(ids, timeout=120)
        self.assertEqual([j["status"] for j in jobs], ["SUCCEEDED"] * 5, [j.get("statusReason") for j in jobs])
        for n, j in enumerate(jobs):
            self.assertEqual(len(j["attempts"]), 1)
            tj = self.sm.describe_training_job(TrainingJobName=f"crash-{n}")
            self.assertEqual(tj["TrainingJobStatus"], "Completed")
            self.assertEqual(tj["FinalMetricDataList"][0]["Value"], float(f"0.{n}"))
        with open(runs) as f:
            started = [line.split()[0] for line in f]
        self.assertEqual(sorted(started), [f"crash-{n}" for n in range(5)])  # each ran exactly once

    def test_acknowledged_submissions_survive_kill9(self):
        queue = self.create_queue("ack", capacity=1)
        ids = [self.submit(queue, self.command_payload(f"ack-{n}", "sleep 0.2")) for n in range(20)]
        self.server.kill9()
        self.server = Server(self.data_dir).start()
        self.batch = self.server.client("batch")
        jobs = self.wait_jobs(ids, timeout=120)
        self.assertEqual(sorted(j["jobId"] for j in jobs), sorted(ids))
        self.assertTrue(all(j["status"] == "SUCCEEDED" for j in jobs))


if __name__ == "__main__":
    unittest.main()
