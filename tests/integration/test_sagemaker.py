"""SageMaker training jobs created directly, stopping, failures, retries and listing rules."""
import json
import os
import time
import unittest

from botocore.exceptions import ClientError

from harness import ServerTest

FAST_GRACE = "[executor]\nstop_grace_seconds = 2\n"


class TrainingJobTest(ServerTest):
    server_config = FAST_GRACE

    def test_create_describe_and_complete(self):
        arn = self.sm.create_training_job(**self.command_payload(
            "direct-1", "echo 'Loss = 0.25;'; mkdir -p $SM_MODEL_DIR/sub; echo w > $SM_MODEL_DIR/sub/w.txt",
            Environment={"GREETING": "hi"},
            AlgorithmSpecification={"TrainingImage": "local/shell", "TrainingInputMode": "File",
                                    "ContainerEntrypoint": ["/bin/sh", "-c"],
                                    "ContainerArguments": ["echo \"Loss = 0.25;\"; echo $GREETING; mkdir -p $SM_MODEL_DIR/sub; echo w > $SM_MODEL_DIR/sub/w.txt"],
                                    "MetricDefinitions": [{"Name": "loss", "Regex": "Loss = (.*?);"}]}))["TrainingJobArn"]
        self.assertEqual(arn, "arn:aws:sagemaker:us-east-1:000000000000:training-job/direct-1")
        tj = self.wait_training("direct-1")
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual(tj["FinalMetricDataList"][0]["MetricName"], "loss")
        self.assertEqual(tj["FinalMetricDataList"][0]["Value"], 0.25)
        self.assertEqual(tj["Environment"], {"GREETING": "hi"})
        self.assertTrue(os.path.exists(self.bucket_path("trainyard-test", "output/direct-1/output/model.tar.gz")))
        with self.assertRaises(ClientError) as e:
            self.sm.create_training_job(**self.command_payload("direct-1", "true"))
        self.assertEqual(e.exception.response["Error"]["Code"], "ResourceInUse")

    def test_failure_reason_comes_from_the_failure_file(self):
        self.sm.create_training_job(**self.command_payload(
            "fails", "echo 'bad hyperparameter: lr' > /opt/ml/output/failure 2>/dev/null || "
                     "echo 'bad hyperparameter: lr' > $TRAINYARD_OPT_ML/output/failure; exit 3"))
        tj = self.wait_training("fails")
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertEqual(tj["FailureReason"].strip(), "bad hyperparameter: lr")

    def test_stop_sends_sigterm_and_job_ends_stopped(self):
        self.sm.create_training_job(**self.command_payload(
            "stopme", "trap 'echo got-term; exit 0' TERM; while true; do sleep 0.1; done"))
        deadline = time.time() + 20
        while self.sm.describe_training_job(TrainingJobName="stopme")["SecondaryStatus"] != "Training":
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        self.sm.stop_training_job(TrainingJobName="stopme")
        self.assertIn(self.sm.describe_training_job(TrainingJobName="stopme")["TrainingJobStatus"],
                      ("Stopping", "Stopped"))
        tj = self.wait_training("stopme", timeout=30)
        self.assertEqual((tj["TrainingJobStatus"], tj["SecondaryStatus"]), ("Stopped", "Stopped"))
        with open(os.path.join(self.data_dir, "attempts", "stopme", "logs", "algo-1.log")) as f:
            self.assertIn("got-term", f.read())  # the job saw SIGTERM and could clean up
        with self.assertRaises(ClientError) as e:
            self.sm.stop_training_job(TrainingJobName="stopme")
        self.assertEqual(e.exception.response["Error"]["Code"], "ValidationException")

    def test_job_ignoring_sigterm_is_killed_after_the_grace(self):
        self.sm.create_training_job(**self.command_payload("stubborn", "trap '' TERM; while true; do sleep 0.1; done"))
        self.wait_training("stubborn", statuses=("InProgress",))
        time.sleep(1)
        t0 = time.time()
        self.sm.stop_training_job(TrainingJobName="stubborn")
        tj = self.wait_training("stubborn", timeout=30)
        self.assertEqual(tj["TrainingJobStatus"], "Stopped")
        self.assertGreaterEqual(time.time() - t0, 1.5)

    def test_max_runtime_exceeded(self):
        p = self.command_payload("slow", "sleep 30")
        p["StoppingCondition"] = {"MaxRuntimeInSeconds": 1}
        self.sm.create_training_job(**p)
        tj = self.wait_training("slow", timeout=30)
        self.assertEqual((tj["TrainingJobStatus"], tj["SecondaryStatus"]), ("Stopped", "MaxRuntimeExceeded"))

    def test_list_training_jobs_filters_sorting_and_pagination(self):
        for name in ("b-job", "a-job", "c-other"):
            self.sm.create_training_job(**self.command_payload(name, "true"))
            time.sleep(0.01)
        for name in ("b-job", "a-job", "c-other"):
            self.wait_training(name)
        names = lambda r: [s["TrainingJobName"] for s in r["TrainingJobSummaries"]]
        self.assertEqual(names(self.sm.list_training_jobs()), ["c-other", "a-job", "b-job"])  # newest first
        self.assertEqual(names(self.sm.list_training_jobs(SortBy="Name", SortOrder="Ascending")),
                         ["a-job", "b-job", "c-other"])
        self.assertEqual(names(self.sm.list_training_jobs(NameContains="JOB", SortBy="Name")), ["b-job", "a-job"])
        self.assertEqual(names(self.sm.list_training_jobs(StatusEquals="Failed")), [])
        page1 = self.sm.list_training_jobs(SortBy="Name", SortOrder="Ascending", MaxResults=2)
        self.assertEqual(names(page1), ["a-job", "b-job"])
        page2 = self.sm.list_training_jobs(SortBy="Name", SortOrder="Ascending", MaxResults=2,
                                           NextToken=page1["NextToken"])
        self.assertEqual(names(page2), ["c-other"])
        self.assertNotIn("NextToken", page2)
        paginator = self.sm.get_paginator("list_training_jobs")
        all_names = [s["TrainingJobName"] for page in paginator.paginate(PaginationConfig={"PageSize": 1})
                     for s in page["TrainingJobSummaries"]]
        self.assertEqual(sorted(all_names), ["a-job", "b-job", "c-other"])

    def test_multi_instance_job_starts_all_instances_together(self):
        p = self.command_payload("gang", 'echo "host=$SM_CURRENT_HOST hosts=$SM_HOSTS"; sleep 0.5')
        p["ResourceConfig"]["InstanceCount"] = 2
        self.sm.create_training_job(**p)
        tj = self.wait_training("gang")
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        for n in (1, 2):
            with open(os.path.join(self.data_dir, "attempts", "gang", "logs", f"algo-{n}.log")) as f:
                text = f.read()
            self.assertIn(f"host=algo-{n}", text)
            self.assertIn('["algo-1","algo-2"]', text.replace(" ", ""))


class ServiceJobTest(ServerTest):
    server_config = FAST_GRACE

    def test_terminate_a_running_job(self):
        queue = self.create_queue("t", capacity=1)
        job = self.submit(queue, self.command_payload("term", "sleep 60"))
        self.wait_jobs([job], statuses=("RUNNING",))
        self.batch.terminate_service_job(jobId=job, reason="no longer needed")
        done = self.wait_jobs([job], timeout=30)[0]
        self.assertEqual((done["status"], done["statusReason"], done["isTerminated"]),
                         ("FAILED", "no longer needed", True))
        tj = self.sm.describe_training_job(TrainingJobName="term")
        self.assertEqual(tj["TrainingJobStatus"], "Stopped")

    def test_failed_attempts_are_retried_as_the_strategy_says(self):
        queue = self.create_queue("r", capacity=1)
        marker = os.path.join(self.work_dir, "tries")
        job = self.submit(queue, self.command_payload("flaky", f"echo x >> {marker}; test $(wc -l < {marker}) -ge 3"),
                          retryStrategy={"attempts": 3})
        done = self.wait_jobs([job], timeout=60)[0]
        self.assertEqual(done["status"], "SUCCEEDED")
        self.assertEqual(len(done["attempts"]), 3)
        names = [a["serviceResourceId"]["value"].split("/")[-1] for a in done["attempts"]]
        self.assertEqual(names, ["flaky", "flaky-attempt-2", "flaky-attempt-3"])
        env = {"flaky-attempt-3"}
        self.assertTrue(all("Received status from SageMaker" in a["statusReason"] for a in done["attempts"]))
        # EXIT rules stop retries at once.
        job = self.submit(queue, self.command_payload("exit-now", "exit 1"),
                          retryStrategy={"attempts": 5, "evaluateOnExit": [{"action": "EXIT", "onStatusReason": "*"}]})
        done = self.wait_jobs([job], timeout=60)[0]
        self.assertEqual((done["status"], len(done["attempts"])), ("FAILED", 1))

    def test_client_token_makes_submit_idempotent(self):
        queue = self.create_queue("idem", capacity=1)
        p = json.dumps(self.command_payload("idem-1", "true"))
        a = self.batch.submit_service_job(jobName="idem", jobQueue=queue, serviceJobType="SAGEMAKER_TRAINING",
                                          serviceRequestPayload=p, clientToken="tok-1")
        b = self.batch.submit_service_job(jobName="idem", jobQueue=queue, serviceJobType="SAGEMAKER_TRAINING",
                                          serviceRequestPayload=p, clientToken="tok-1")
        self.assertEqual(a["jobId"], b["jobId"])
        with self.assertRaises(ClientError):
            self.batch.submit_service_job(jobName="other", jobQueue=queue, serviceJobType="SAGEMAKER_TRAINING",
                                          serviceRequestPayload=p, clientToken="tok-1")

    def test_list_service_jobs_rules(self):
        queue = self.create_queue("ls", capacity=1)
        running = self.submit(queue, self.command_payload("ls-run", "sleep 30"))
        self.wait_jobs([running], statuses=("RUNNING",))
        waiting = [self.submit(queue, self.command_payload(f"ls-wait-{n}", "true")) for n in range(3)]
        ids = lambda r: [j["jobId"] for j in r["jobSummaryList"]]
        # No status and no filter: RUNNING only.
        self.assertEqual(ids(self.batch.list_service_jobs(jobQueue=queue)), [running])
        deadline = time.time() + 10
        while len(ids(self.batch.list_service_jobs(jobQueue=queue, jobStatus="RUNNABLE"))) < 3:
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        self.assertEqual(ids(self.batch.list_service_jobs(jobQueue=queue, jobStatus="RUNNABLE")), waiting)
        # A filter ignores jobStatus and lists newest first.
        r = self.batch.list_service_jobs(jobQueue=queue, jobStatus="RUNNING",
                                         filters=[{"name": "JOB_NAME", "values": ["LS-WAIT*"]}])
        self.assertEqual(ids(r), list(reversed(waiting)))
        # Pagination.
        page = self.batch.list_service_jobs(jobQueue=queue, jobStatus="RUNNABLE", maxResults=2)
        self.assertEqual(ids(page), waiting[:2])
        rest = self.batch.list_service_jobs(jobQueue=queue, jobStatus="RUNNABLE", maxResults=2,
                                            nextToken=page["nextToken"])
        self.assertEqual(ids(rest), waiting[2:])
        self.batch.terminate_service_job(jobId=running, reason="done")


if __name__ == "__main__":
    unittest.main()
