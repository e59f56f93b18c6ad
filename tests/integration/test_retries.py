"""Batch retryStrategy and SageMaker RetryStrategy through a real server and real processes
(docs/retries.md)."""
import json
import os
import signal
import time
import unittest

from botocore.exceptions import ClientError

from harness import ServerTest

FAST_GRACE = "[executor]\nstop_grace_seconds = 2\n"


def wait_for_file(path, timeout=60):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.05)


class RetryTestBase(ServerTest):
    server_config = FAST_GRACE

    def setUp(self):
        super().setUp()
        self.queue = self.create_queue("retries", capacity=1)

    def run_job(self, name, command, retry_strategy, **payload_extra):
        job = self.submit(self.queue, self.command_payload(name, command, **payload_extra),
                          retryStrategy=retry_strategy)
        return self.wait_jobs([job], timeout=90)[0]

    def kill_supervisor(self, training_job):
        """kill -9 of the attempt's supervisor, the way a crashed host agent would die."""
        status_path = os.path.join(self.data_dir, "attempts", training_job, "status.json")
        deadline = time.time() + 30
        while True:
            try:
                with open(status_path) as f:
                    pid = json.load(f).get("supervisor_pid")
                if pid:
                    break
            except (OSError, ValueError):
                pass
            if time.time() > deadline:
                self.fail(f"no supervisor pid for {training_job}")
            time.sleep(0.05)
        os.kill(int(pid), signal.SIGKILL)


class EvaluateOnExitTest(RetryTestBase):
    def test_first_matching_entry_decides(self):
        # Failure reason: "Received status from SageMaker: AlgorithmError: ... exited with code 3".
        done = self.run_job("order-exit", "exit 3", {"attempts": 3, "evaluateOnExit": [
            {"action": "EXIT", "onStatusReason": "*AlgorithmError*"},
            {"action": "RETRY", "onStatusReason": "*"}]})
        self.assertEqual((done["status"], len(done["attempts"])), ("FAILED", 1))
        done = self.run_job("order-retry", "exit 3", {"attempts": 3, "evaluateOnExit": [
            {"action": "RETRY", "onStatusReason": "Received status from SageMaker: AlgorithmError*"},
            {"action": "EXIT", "onStatusReason": "*"}]})
        self.assertEqual((done["status"], len(done["attempts"])), ("FAILED", 3))
        self.assertTrue(all("exited with code 3" in a["statusReason"] for a in done["attempts"]))

    def test_no_matching_entry_means_retry(self):
        done = self.run_job("nomatch", "exit 1", {"attempts": 2, "evaluateOnExit": [
            {"action": "EXIT", "onStatusReason": "Received status from SageMaker: ValidationException*"}]})
        self.assertEqual((done["status"], len(done["attempts"])), ("FAILED", 2))

    def test_entry_without_status_reason_matches_any(self):
        done = self.run_job("catchall", "exit 1", {"attempts": 4, "evaluateOnExit": [{"action": "EXIT"}]})
        self.assertEqual((done["status"], len(done["attempts"])), ("FAILED", 1))

    def test_attempts_exhausted_and_attempt_number_in_environment(self):
        record = os.path.join(self.work_dir, "attempt-numbers")
        done = self.run_job("exhaust", f'echo "$AWS_BATCH_JOB_ATTEMPT" >> {record}; exit 1', {"attempts": 3})
        self.assertEqual((done["status"], len(done["attempts"])), ("FAILED", 3))
        with open(record) as f:
            self.assertEqual(f.read().split(), ["1", "2", "3"])
        self.assertEqual(done["retryStrategy"], {"attempts": 3})

    def test_default_is_one_attempt(self):
        job = self.submit(self.queue, self.command_payload("once", "exit 1"))
        done = self.wait_jobs([job], timeout=60)[0]
        self.assertEqual((done["status"], len(done["attempts"])), ("FAILED", 1))

    def test_capacity_failure_is_retried_without_consuming_attempts(self):
        # The host cannot bring the first attempt's instances up: a file holds its attempt directory.
        os.makedirs(os.path.join(self.data_dir, "attempts"), exist_ok=True)
        open(os.path.join(self.data_dir, "attempts", "capfail"), "w").close()
        done = self.run_job("capfail", "true", {"attempts": 1})
        self.assertEqual(done["status"], "SUCCEEDED", done.get("statusReason"))
        self.assertEqual(len(done["attempts"]), 2)
        self.assertTrue(done["attempts"][0]["statusReason"].startswith("Received status from SageMaker: CapacityError"),
                        done["attempts"][0])
        tj = self.sm.describe_training_job(TrainingJobName="capfail")
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertTrue(tj["FailureReason"].startswith("CapacityError: the host could not start the instances"))
        # In between, it went back to RUNNABLE (the capacity failure) and was placed again.
        history = [h["status"] for h in self.describe_raw(done["jobId"])["trainyardStatusHistory"]]
        self.assertEqual(history.count("SCHEDULED"), 2, history)
        self.assertEqual(history.count("RUNNABLE"), 2, history)

    def test_an_instance_process_killed_by_a_signal_is_named_and_retried(self):
        # The way the out-of-memory killer ends a training process: SIGKILL, on the first attempt only.
        done = self.run_job("oom", 'if [ "$AWS_BATCH_JOB_ATTEMPT" = 1 ]; then kill -9 $$; fi', {"attempts": 2})
        self.assertEqual((done["status"], len(done["attempts"])), ("SUCCEEDED", 2), done.get("statusReason"))
        reason = done["attempts"][0]["statusReason"]
        self.assertIn("AlgorithmError: instance algo-1: the training process exited with code 137, killed by signal 9 (SIGKILL)",
                      reason)

    def test_max_runtime_exceeded_is_not_retried(self):
        done = self.run_job("too-long", "while true; do sleep 0.05; done", {"attempts": 3},
                            StoppingCondition={"MaxRuntimeInSeconds": 1})
        self.assertEqual((done["status"], len(done["attempts"])), ("FAILED", 1))
        self.assertIn("MaxRuntimeExceeded", done["statusReason"])


class RetryValidationTest(RetryTestBase):
    def assert_rejected(self, retry_strategy, fragment, **kw):
        with self.assertRaises(ClientError) as e:
            self.submit(self.queue, self.command_payload("bad", "true"), retryStrategy=retry_strategy, **kw)
        self.assertEqual(e.exception.response["Error"]["Code"], "ClientException")
        self.assertIn(fragment, e.exception.response["Error"]["Message"])

    def test_bad_retry_strategies_are_rejected_and_change_nothing(self):
        self.assert_rejected({"attempts": 0}, "retryStrategy.attempts")
        self.assert_rejected({"attempts": 11}, "retryStrategy.attempts")
        self.assert_rejected({"attempts": 2, "evaluateOnExit": [{"action": "EXIT", "onStatusReason": "*"}] * 6},
                             "at most 5 entries")
        self.assert_rejected({"attempts": 2, "evaluateOnExit": [{"onStatusReason": "*"}]},
                             "evaluateOnExit[0].action is required")
        self.assert_rejected({"attempts": 2, "evaluateOnExit": [{"action": "RETRY", "onStatusReason": "x" * 513}]},
                             "onStatusReason' failed to satisfy constraint: Member must have length less than or equal to 512")
        with self.assertRaises(ClientError) as e:
            self.submit(self.queue, self.command_payload("bad", "true"), retryStrategy={"attempts": 2},
                        timeoutConfig={"attemptDurationSeconds": 59})
        self.assertIn("attemptDurationSeconds", e.exception.response["Error"]["Message"])
        listed = self.batch.list_service_jobs(jobQueue=self.queue, jobStatus="RUNNABLE")["jobSummaryList"]
        listed += self.batch.list_service_jobs(jobQueue=self.queue, jobStatus="FAILED")["jobSummaryList"]
        self.assertEqual(listed, [])

    def test_container_job_conditions_are_not_service_job_fields(self):
        # ServiceJobEvaluateOnExit has action and onStatusReason only (raw call: boto3 would refuse).
        with self.assertRaises(RuntimeError) as e:
            self.server.raw_call("batch", "SubmitServiceJob", {
                "jobName": "bad", "jobQueue": self.queue, "serviceJobType": "SAGEMAKER_TRAINING",
                "serviceRequestPayload": json.dumps(self.command_payload("bad", "true")),
                "retryStrategy": {"attempts": 2, "evaluateOnExit": [{"action": "EXIT", "onExitCode": "1"}]}})
        self.assertIn("onExitCode", str(e.exception))


class InfrastructureRetryTest(RetryTestBase):
    def gated_command(self, marker):
        # The first run leaves a marker and waits to be killed; a later run finishes at once.
        return f'if [ -e {marker} ]; then echo second run; exit 0; fi; touch {marker}; while true; do sleep 0.05; done'

    def test_lost_attempt_is_retried_by_batch_rules(self):
        marker = os.path.join(self.work_dir, "lost-batch")
        job = self.submit(self.queue, self.command_payload("lost-b", self.gated_command(marker)), retryStrategy={
            "attempts": 2, "evaluateOnExit": [
                {"action": "RETRY", "onStatusReason": "Received status from SageMaker: InternalServerError*"},
                {"action": "EXIT", "onStatusReason": "*"}]})
        wait_for_file(marker)
        self.kill_supervisor("lost-b")
        done = self.wait_jobs([job], timeout=60)[0]
        self.assertEqual((done["status"], len(done["attempts"])), ("SUCCEEDED", 2))
        self.assertIn("InternalServerError", done["attempts"][0]["statusReason"])
        self.assertIn("supervisor", done["attempts"][0]["statusReason"])

    def test_sagemaker_retry_strategy_restarts_a_lost_training_job(self):
        marker = os.path.join(self.work_dir, "lost-sm")
        self.sm.create_training_job(**self.command_payload("lost-sm", self.gated_command(marker),
                                                           RetryStrategy={"MaximumRetryAttempts": 1}))
        wait_for_file(marker)
        self.kill_supervisor("lost-sm")
        tj = self.wait_training("lost-sm", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Completed")
        statuses = [t["Status"] for t in tj["SecondaryStatusTransitions"]]
        self.assertEqual(statuses.count("Restarting"), 1, statuses)
        self.assertEqual(tj["RetryStrategy"], {"MaximumRetryAttempts": 1})

    def test_without_retry_strategy_a_lost_training_job_fails(self):
        marker = os.path.join(self.work_dir, "lost-none")
        self.sm.create_training_job(**self.command_payload("lost-none", self.gated_command(marker)))
        wait_for_file(marker)
        self.kill_supervisor("lost-none")
        tj = self.wait_training("lost-none", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertTrue(tj["FailureReason"].startswith("InternalServerError:"), tj["FailureReason"])

    def test_sagemaker_retry_strategy_does_not_retry_algorithm_errors(self):
        self.sm.create_training_job(**self.command_payload("algo-err", "exit 2",
                                                           RetryStrategy={"MaximumRetryAttempts": 3}))
        tj = self.wait_training("algo-err", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertNotIn("Restarting", [t["Status"] for t in tj["SecondaryStatusTransitions"]])

    def test_maximum_retry_attempts_bounds(self):
        for n in (0, 31):  # raw calls: boto3 itself refuses 0
            with self.assertRaises(RuntimeError) as e:
                self.server.raw_call("sagemaker", "CreateTrainingJob", self.command_payload(
                    f"mra-{n}", "true", RetryStrategy={"MaximumRetryAttempts": n}))
            self.assertIn("ValidationException", str(e.exception))
            self.assertIn("MaximumRetryAttempts", str(e.exception))
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])
        # In a service job's payload too (Batch does not model-validate the payload).
        with self.assertRaises(ClientError) as e:
            self.submit(self.queue, self.command_payload("mra-sj", "true", RetryStrategy={"MaximumRetryAttempts": 31}))
        self.assertIn("MaximumRetryAttempts", e.exception.response["Error"]["Message"])


if __name__ == "__main__":
    unittest.main()
