"""The quick-start walkthrough through boto3: jobs succeed, and the /opt/ml contract holds."""
import json
import os
import tarfile
import unittest

from harness import ServerTest

ORDER = ["SUBMITTED", "RUNNABLE", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED"]


class WalkthroughTest(ServerTest):
    def test_three_jobs_succeed_with_artifacts_and_metrics(self):
        self.stage_quickstart()
        queue = self.create_queue("walk", capacity=2)
        ids = [self.submit(queue, self.script_payload(f"walk-{n}", epochs=2 + n)) for n in range(1, 4)]
        jobs = self.wait_jobs(ids)
        for n, job in enumerate(jobs, start=1):
            name = f"walk-{n}"
            self.assertEqual(job["status"], "SUCCEEDED", job)
            self.assertEqual(job["statusReason"], "Received status from SageMaker: Training job completed")
            history = [h["status"] for h in job["trainyardStatusHistory"]]
            self.assertEqual(history, ORDER)
            self.assertEqual(len(job["attempts"]), 1)
            arn = job["latestAttempt"]["serviceResourceId"]["value"]
            self.assertEqual(arn, f"arn:aws:sagemaker:us-east-1:000000000000:training-job/{name}")
            self.assertGreater(job["startedAt"], 0)
            self.assertGreaterEqual(job["stoppedAt"], job["startedAt"])
            self.assertTrue(job["jobArn"].startswith("arn:aws:batch:us-east-1:000000000000:service-job/"))
            self.assertEqual(job["capacityUsage"], [{"capacityUnit": "ml.m5.large", "quantity": 1}])

            tj = self.sm.describe_training_job(TrainingJobName=name)
            self.assertEqual(tj["TrainingJobStatus"], "Completed")
            self.assertEqual(tj["SecondaryStatus"], "Completed")
            secondary = [t["Status"] for t in tj["SecondaryStatusTransitions"]]
            for s in ["Starting", "Downloading", "Training", "Uploading", "Completed"]:
                self.assertIn(s, secondary)
            metrics = {m["MetricName"]: m["Value"] for m in tj["FinalMetricDataList"]}
            self.assertIn("train:loss", metrics)
            self.assertLess(metrics["train:loss"], 0.7)  # the model learned something
            self.assertGreaterEqual(tj["BillableTimeInSeconds"], 1)
            self.assertIn("TrainingStartTime", tj)
            self.assertIn("TrainingEndTime", tj)

            artifact = tj["ModelArtifacts"]["S3ModelArtifacts"]
            self.assertEqual(artifact, f"s3://trainyard-test/output/{name}/output/model.tar.gz")
            path = self.bucket_path("trainyard-test", f"output/{name}/output/model.tar.gz")
            with tarfile.open(path) as t:
                names = {m.name.lstrip("./") for m in t.getmembers() if m.isfile()}
                self.assertIn("model.json", names)
                contract = json.load(t.extractfile([m for m in t.getmembers() if m.name.endswith("contract.json")][0]))
            model_epochs = 2 + n
            self.assertEqual(contract["hyperparameters"]["epochs"], str(model_epochs))
            self.assertEqual(contract["hyperparameters"]["sagemaker_program"], "train.py")
            self.assertEqual(contract["resourceconfig"]["current_host"], "algo-1")
            self.assertEqual(contract["resourceconfig"]["hosts"], ["algo-1"])
            self.assertIn("train", contract["inputdataconfig"])
            self.assertEqual(contract["channel_files"], ["train.csv"])
            env = contract["env"]
            self.assertEqual(env["TRAINING_JOB_NAME"], name)
            self.assertEqual(env["SM_CHANNELS"], '["train"]')
            self.assertEqual(env["AWS_BATCH_JOB_ID"], job["jobId"])
            self.assertEqual(env["AWS_BATCH_JOB_ATTEMPT"], "1")
            self.assertTrue(os.path.exists(self.bucket_path("trainyard-test", f"output/{name}/output/output.tar.gz")))

        # Each attempt is also visible as a training job in the SageMaker API.
        listed = self.sm.list_training_jobs(SortBy="Name", SortOrder="Ascending")["TrainingJobSummaries"]
        self.assertEqual([s["TrainingJobName"] for s in listed], ["walk-1", "walk-2", "walk-3"])


if __name__ == "__main__":
    unittest.main()
