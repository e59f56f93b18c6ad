"""StoppingCondition and timeoutConfig through a real server (docs/retries.md). Long waits use the offset clock."""
import json
import os
import signal
import time
import unittest

from botocore.exceptions import ClientError

from harness import ServerTest


class StoppingConditionTest(ServerTest):
    server_args = ["--clock=offset"]
    server_config = "[executor]\nstop_grace_seconds = 2\n"

    def assert_invalid(self, stopping, fragment, **extra):
        # Raw calls: boto3 itself refuses values below a model minimum.
        with self.assertRaises(RuntimeError) as e:
            self.server.raw_call("sagemaker", "CreateTrainingJob",
                                 self.command_payload("bad", "true", StoppingCondition=stopping, **extra))
        self.assertIn("ValidationException", str(e.exception))
        self.assertIn(fragment, str(e.exception))

    def test_validation_of_each_condition(self):
        self.assert_invalid({"MaxRuntimeInSeconds": 0}, "MaxRuntimeInSeconds")
        self.assert_invalid({"MaxRuntimeInSeconds": 28 * 86400 + 1}, "MaxRuntimeInSeconds")
        self.assert_invalid({"MaxRuntimeInSeconds": 60, "MaxPendingTimeInSeconds": 7199}, "MaxPendingTimeInSeconds")
        self.assert_invalid({"MaxRuntimeInSeconds": 60, "MaxPendingTimeInSeconds": 2419201}, "MaxPendingTimeInSeconds")
        self.assert_invalid({"MaxRuntimeInSeconds": 60, "MaxWaitTimeInSeconds": 120},
                            "MaxWaitTimeInSeconds applies only to managed spot training")
        self.assert_invalid({"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 300},
                            "must be greater than or equal to MaxRuntimeInSeconds", EnableManagedSpotTraining=True)
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])
        # A service job's payload is held to the same rules.
        q = self.create_queue("stop-v", capacity=1)
        with self.assertRaises(ClientError) as e:
            self.submit(q, self.command_payload("bad-sj", "true", StoppingCondition={"MaxRuntimeInSeconds": 2419201}))
        self.assertIn("StoppingCondition.MaxRuntimeInSeconds", e.exception.response["Error"]["Message"])

    def test_max_runtime_exceeded(self):
        self.sm.create_training_job(**self.command_payload("runtime", "while true; do sleep 0.05; done",
                                                           StoppingCondition={"MaxRuntimeInSeconds": 1}))
        tj = self.wait_training("runtime", timeout=60)
        self.assertEqual((tj["TrainingJobStatus"], tj["SecondaryStatus"]), ("Stopped", "MaxRuntimeExceeded"))

    def test_max_pending_time_stops_a_job_that_never_got_capacity(self):
        gate = os.path.join(self.work_dir, "gate")
        blocker = self.command_payload("blocker", f"while [ ! -e {gate} ]; do sleep 0.05; done")
        blocker["ResourceConfig"].update({"InstanceType": "ml.m5.xlarge", "InstanceCount": 2})
        self.sm.create_training_job(**blocker)
        self.wait_secondary("blocker", "Training")
        waiting = self.command_payload("waits", "true", StoppingCondition={"MaxRuntimeInSeconds": 60,
                                                                           "MaxPendingTimeInSeconds": 7200})
        waiting["ResourceConfig"]["InstanceType"] = "ml.m5.xlarge"
        self.sm.create_training_job(**waiting)
        self.wait_secondary("waits", "Pending")
        self.advance(7100)
        time.sleep(1)  # several controller turns: still within its pending time
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="waits")["TrainingJobStatus"], "InProgress")
        self.advance(100)
        tj = self.wait_training("waits", timeout=30)
        self.assertEqual((tj["TrainingJobStatus"], tj["SecondaryStatus"]), ("Stopped", "Stopped"))
        self.assertIn("MaxPendingTimeInSeconds", tj["SecondaryStatusTransitions"][-1]["StatusMessage"])
        self.assertTrue(tj["FailureReason"].startswith("MaxPendingTimeExceeded:"), tj["FailureReason"])
        self.assertNotIn("TrainingStartTime", tj)
        with open(gate, "w"):
            pass
        self.assertEqual(self.wait_training("blocker")["TrainingJobStatus"], "Completed")

    def test_max_runtime_counts_across_restarts(self):
        # RetryStrategy restarts a lost run with what is left of MaxRuntimeInSeconds: 3600 s, of
        # which 3000 s were used by the first run, leaves 600 s for the second.
        marker = os.path.join(self.work_dir, "first-run")
        self.sm.create_training_job(**self.command_payload(
            "budget", f"touch {marker}; while true; do sleep 0.05; done",
            StoppingCondition={"MaxRuntimeInSeconds": 3600}, RetryStrategy={"MaximumRetryAttempts": 1}))
        self.wait_secondary("budget", "Training")
        self.advance(3000)
        status_path = os.path.join(self.data_dir, "attempts", "budget", "status.json")
        with open(status_path) as f:
            first_pid = json.load(f)["supervisor_pid"]
        os.kill(int(first_pid), signal.SIGKILL)
        deadline = time.time() + 30
        while True:
            transitions = [t["Status"] for t in
                           self.sm.describe_training_job(TrainingJobName="budget")["SecondaryStatusTransitions"]]
            if "Restarting" in transitions:
                break
            self.assertLess(time.time(), deadline, transitions)
            time.sleep(0.05)
        self.wait_secondary("budget", "Training")
        with open(os.path.join(self.data_dir, "attempts", "budget", "spec.json")) as f:
            budget = json.load(f)["attempt"]["max_runtime_seconds"]
        self.assertTrue(595 <= budget <= 600, budget)
        self.sm.stop_training_job(TrainingJobName="budget")
        self.assertEqual(self.wait_training("budget")["TrainingJobStatus"], "Stopped")

    def test_attempt_duration_timeout_fails_without_retry(self):
        q = self.create_queue("stop-t", capacity=1)
        job = self.submit(q, self.command_payload("attempt-timeout", "while true; do sleep 0.05; done"),
                          retryStrategy={"attempts": 3}, timeoutConfig={"attemptDurationSeconds": 60})
        self.wait_jobs([job], statuses=("RUNNING",), timeout=60)
        self.advance(61)
        done = self.wait_jobs([job], timeout=60)[0]
        self.assertEqual((done["status"], len(done["attempts"])), ("FAILED", 1))
        self.assertEqual(done["statusReason"], "Job attempt duration exceeded timeout")


if __name__ == "__main__":
    unittest.main()
