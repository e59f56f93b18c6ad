"""Faults of the host around an attempt: the object store unreachable during download. The
attempt fails with InternalServerError, which the retry rules treat as transient; a job's own
missing data is a ClientError and is not retried (docs/retries.md)."""
import socket
import unittest

from harness import ServerTest, object_store_toml


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class ObjectStoreDownTest(ServerTest):
    def setUp(self):
        # Bucket "remote" lives behind an endpoint where nothing listens; other buckets are local.
        self.server_config = "[executor]\nstop_grace_seconds = 2\n\n" + object_store_toml(
            f"http://127.0.0.1:{closed_port()}", ["remote"])
        super().setUp()

    def payload(self, name, bucket, **extra):
        p = self.command_payload(name, "true", **extra)
        p["InputDataConfig"] = [{"ChannelName": "train", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/data/"}}}]
        return p

    def test_unreachable_store_is_an_infrastructure_failure_and_retried(self):
        self.sm.create_training_job(**self.payload("down", "remote", RetryStrategy={"MaximumRetryAttempts": 2}))
        tj = self.wait_training("down", timeout=90)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertTrue(tj["FailureReason"].startswith("InternalServerError: input channel train:"), tj["FailureReason"])
        self.assertIn("127.0.0.1", tj["FailureReason"])
        statuses = [t["Status"] for t in tj["SecondaryStatusTransitions"]]
        self.assertEqual(statuses.count("Restarting"), 2, statuses)

    def test_unreachable_store_retried_by_service_job_rules(self):
        queue = self.create_queue("faults", capacity=1)
        job = self.submit(queue, self.payload("down-sj", "remote"), retryStrategy={"attempts": 2, "evaluateOnExit": [
            {"action": "RETRY", "onStatusReason": "Received status from SageMaker: InternalServerError*"},
            {"action": "EXIT", "onStatusReason": "*"}]})
        done = self.wait_jobs([job], timeout=90)[0]
        self.assertEqual((done["status"], len(done["attempts"])), ("FAILED", 2))
        for a in done["attempts"]:
            self.assertTrue(a["statusReason"].startswith(
                "Received status from SageMaker: InternalServerError: input channel train:"), a["statusReason"])

    def test_missing_input_data_is_the_jobs_error_and_not_retried(self):
        self.sm.create_training_job(**self.payload("nodata", "trainyard-test", RetryStrategy={"MaximumRetryAttempts": 2}))
        tj = self.wait_training("nodata", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertTrue(tj["FailureReason"].startswith("ClientError: input channel train:"), tj["FailureReason"])
        self.assertNotIn("Restarting", [t["Status"] for t in tj["SecondaryStatusTransitions"]])


if __name__ == "__main__":
    unittest.main()
