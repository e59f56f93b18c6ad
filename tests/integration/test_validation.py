"""Bad input: each class of validation rule gets a clear, AWS-shaped error and changes nothing."""
import json
import os
import unittest

from botocore.exceptions import ClientError, ParamValidationError

from harness import ServerTest


class ValidationTest(ServerTest):
    def setUp(self):
        super().setUp()
        self.create_queue("vq", capacity=1)
        # botocore validates parameters client-side; turn that off to reach the server's checks.
        self.batch = self.server.client("batch", validate=False)
        self.sm = self.server.client("sagemaker", validate=False)

    def error(self, fn, **kw):
        with self.assertRaises(ClientError) as e:
            fn(**kw)
        return e.exception.response["Error"]["Code"], e.exception.response["Error"]["Message"], \
            e.exception.response["ResponseMetadata"]["HTTPStatusCode"]

    def assertUnchanged(self):
        self.assertEqual(len(self.batch.describe_service_environments()["serviceEnvironments"]), 1)
        self.assertEqual(len(self.batch.describe_job_queues()["jobQueues"]), 1)
        for status in ("SUBMITTED", "RUNNABLE", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED"):
            self.assertEqual(self.batch.list_service_jobs(jobQueue="vq", jobStatus=status)["jobSummaryList"], [])
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])

    def submit_payload(self, payload, **kw):
        return self.error(self.batch.submit_service_job, jobName="j", jobQueue="vq",
                          serviceJobType="SAGEMAKER_TRAINING", serviceRequestPayload=json.dumps(payload), **kw)

    # ---- rule classes, Batch (ClientException) ----
    def test_missing_required_member(self):
        code, msg, status = self.error(self.batch.submit_service_job, jobQueue="vq", serviceJobType="SAGEMAKER_TRAINING",
                                       serviceRequestPayload="{}")
        self.assertEqual((code, status), ("ClientException", 400))
        self.assertIn("jobName", msg)
        self.assertIn("must not be null", msg)
        self.assertUnchanged()

    def test_wrong_type(self):
        code, msg, _ = self.error(self.batch.create_job_queue, jobQueueName="x", priority="high",
                                  serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "vq-env"}],
                                  jobQueueType="SAGEMAKER_TRAINING")
        self.assertEqual(code, "ClientException")
        self.assertIn("priority", msg)
        self.assertUnchanged()

    def test_enum(self):
        code, msg, _ = self.error(self.batch.submit_service_job, jobName="j", jobQueue="vq",
                                  serviceJobType="EKS_TRAINING", serviceRequestPayload="{}")
        self.assertEqual(code, "ClientException")
        self.assertIn("serviceJobType", msg)
        self.assertIn("enum", msg)
        self.assertUnchanged()

    def test_range(self):
        code, msg, _ = self.submit_payload(self.command_payload("ok-name", "true"), schedulingPriority=10000)
        self.assertEqual(code, "ClientException")
        self.assertIn("schedulingPriority", msg)
        self.assertUnchanged()

    def test_retry_attempts_range(self):
        code, msg, _ = self.submit_payload(self.command_payload("ok-name", "true"), retryStrategy={"attempts": 11})
        self.assertEqual(code, "ClientException")
        self.assertIn("attempts", msg)
        self.assertUnchanged()

    def test_unknown_queue(self):
        code, msg, _ = self.error(self.batch.submit_service_job, jobName="j", jobQueue="nope",
                                  serviceJobType="SAGEMAKER_TRAINING",
                                  serviceRequestPayload=json.dumps(self.command_payload("n", "true")))
        self.assertEqual(code, "ClientException")
        self.assertIn("nope", msg)
        self.assertUnchanged()

    def test_share_identifier_forbidden_on_fifo_queue(self):
        code, msg, _ = self.submit_payload(self.command_payload("ok-name", "true"), shareIdentifier="team-a")
        self.assertEqual(code, "ClientException")
        self.assertIn("shareIdentifier", msg)
        self.assertUnchanged()

    # ---- the payload: beyond AWS, checked at submit time ----
    def test_payload_is_not_json(self):
        code, msg, _ = self.error(self.batch.submit_service_job, jobName="j", jobQueue="vq",
                                  serviceJobType="SAGEMAKER_TRAINING", serviceRequestPayload="not json")
        self.assertEqual(code, "ClientException")
        self.assertIn("serviceRequestPayload", msg)
        self.assertUnchanged()

    def test_payload_pattern(self):
        code, msg, _ = self.submit_payload(self.command_payload("bad_name!", "true"))
        self.assertEqual(code, "ClientException")
        self.assertIn("serviceRequestPayload.TrainingJobName", msg)
        self.assertIn("pattern", msg)
        self.assertUnchanged()

    def test_payload_range_and_missing_member(self):
        p = self.command_payload("ok-name", "true")
        p["ResourceConfig"]["InstanceCount"] = -1
        del p["RoleArn"]
        code, msg, _ = self.submit_payload(p)
        self.assertIn("serviceRequestPayload.ResourceConfig.InstanceCount", msg)
        self.assertIn("serviceRequestPayload.RoleArn", msg)
        self.assertUnchanged()

    def test_payload_length(self):
        p = self.command_payload("ok-name", "true")
        p["HyperParameters"] = {"k": "v" * 2501}
        code, msg, _ = self.submit_payload(p)
        self.assertIn("HyperParameters", msg)
        self.assertIn("length", msg)
        self.assertUnchanged()

    def test_payload_instance_type_not_offered(self):
        p = self.command_payload("ok-name", "true")
        p["ResourceConfig"]["InstanceType"] = "ml.p4d.24xlarge"
        code, msg, _ = self.submit_payload(p)
        self.assertEqual(code, "ClientException")
        self.assertIn("ml.p4d.24xlarge", msg)
        self.assertUnchanged()

    def test_payload_without_anything_to_run(self):
        p = self.command_payload("ok-name", "true")
        del p["AlgorithmSpecification"]["ContainerEntrypoint"]
        del p["AlgorithmSpecification"]["ContainerArguments"]
        code, msg, _ = self.submit_payload(p)
        self.assertIn("ContainerEntrypoint", msg)
        self.assertUnchanged()

    # ---- SageMaker (ValidationException and friends) ----
    def test_sagemaker_validation_exception_names_the_field(self):
        p = self.command_payload("ok-name", "true")
        p["StoppingCondition"]["MaxRuntimeInSeconds"] = 0
        code, msg, status = self.error(self.sm.create_training_job, **p)
        self.assertEqual((code, status), ("ValidationException", 400))
        self.assertIn("StoppingCondition.MaxRuntimeInSeconds", msg)
        p = self.command_payload("ok-name", "true")
        p["AlgorithmSpecification"]["TrainingInputMode"] = "Stream"
        code, msg, _ = self.error(self.sm.create_training_job, **p)
        self.assertIn("AlgorithmSpecification.TrainingInputMode", msg)
        self.assertUnchanged()

    def test_sagemaker_not_found(self):
        code, _, _ = self.error(self.sm.describe_training_job, TrainingJobName="missing")
        self.assertEqual(code, "ResourceNotFound")
        code, _, _ = self.error(self.sm.stop_training_job, TrainingJobName="missing")
        self.assertEqual(code, "ResourceNotFound")

    def test_sagemaker_limit_exceeded_for_instance_type_not_in_catalogue(self):
        p = self.command_payload("ok-name", "true")
        p["ResourceConfig"]["InstanceType"] = "ml.g5.xlarge"
        code, msg, _ = self.error(self.sm.create_training_job, **p)
        self.assertEqual(code, "ResourceLimitExceeded")
        self.assertIn("ml.g5.xlarge", msg)
        self.assertUnchanged()

    def test_body_over_the_limit_is_refused(self):
        code, msg, status = self.error(self.batch.submit_service_job, jobName="j", jobQueue="vq",
                                       serviceJobType="SAGEMAKER_TRAINING", serviceRequestPayload="x" * (7 << 20))
        self.assertEqual(status, 413)
        self.assertIn("exceeds", msg)
        self.assertUnchanged()

    def test_duplicate_names_are_refused(self):
        code, msg, _ = self.error(self.batch.create_service_environment, serviceEnvironmentName="vq-env",
                                  serviceEnvironmentType="SAGEMAKER_TRAINING",
                                  capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}])
        self.assertEqual(code, "ClientException")
        self.assertIn("already exists", msg)
        self.assertUnchanged()

    def test_delete_enabled_environment_is_refused(self):
        code, msg, _ = self.error(self.batch.delete_service_environment, serviceEnvironment="vq-env")
        self.assertIn("DISABLED", msg)
        self.assertUnchanged()

    # ---- rules the Batch reference states only in prose ----
    def test_documented_batch_rules(self):
        cases = [
            ("serviceEnvironmentName", self.batch.create_service_environment,
             dict(serviceEnvironmentName="bad env!", serviceEnvironmentType="SAGEMAKER_TRAINING",
                  capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}]),
             "Value 'bad env!' at 'serviceEnvironmentName' failed to satisfy constraint: "
             "Member must satisfy regular expression pattern"),
            ("jobQueueName", self.batch.create_job_queue,
             dict(jobQueueName="q" * 129, priority=1, jobQueueType="SAGEMAKER_TRAINING",
                  serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "vq-env"}]),
             "at 'jobQueueName' failed to satisfy constraint: Member must have length less than or equal to 128"),
            ("jobName", self.batch.submit_service_job,
             dict(jobName="j" * 129, jobQueue="vq", serviceJobType="SAGEMAKER_TRAINING",
                  serviceRequestPayload=json.dumps(self.command_payload("ok-name", "true"))),
             "at 'jobName' failed to satisfy constraint: Member must have length less than or equal to 128"),
            ("maxResults", self.batch.list_service_jobs, dict(jobQueue="vq", maxResults=101),
             "Value '101' at 'maxResults' failed to satisfy constraint: "
             "Member must have value less than or equal to 100"),
        ]
        for member, call, kw, wanted in cases:
            code, msg, status = self.error(call, **kw)
            self.assertEqual((code, status), ("ClientException", 400), member)
            self.assertTrue(msg.startswith("1 validation error detected: "), msg)
            self.assertIn(wanted, msg)
        self.assertUnchanged()

    def test_every_response_has_a_date_near_now(self):
        from email.utils import parsedate_to_datetime
        import time
        answers = [
            self.raw("POST", "/v1/describejobqueues", {"Content-Type": "application/json"}),  # 200
            self.raw("POST", "/v1/createjobqueue", {"Content-Type": "application/json"}),  # 400
            self.raw("POST", "/v1/listconsumableresources", {"Content-Type": "application/json"}),  # 404
            self.raw("POST", "/", {"X-Amz-Target": "SageMaker.ListTrainingJobs",
                                   "Content-Type": "application/x-amz-json-1.1"}, sign=False),  # 403
            self.raw("GET", "/metrics", {}, body=None, as_json=False),
            self.raw("POST", "/v1/describejobqueues", {"Content-Type": "application/json",
                                                       "X-Pad": "a" * (64 << 10)}, sign=False),  # 431
        ]
        statuses = [a[0] for a in answers]
        self.assertEqual(statuses, [200, 400, 404, 403, 200, 431])
        for status, headers, _ in answers:
            date = headers.get("Date")
            self.assertIsNotNone(date, status)
            self.assertRegex(date, r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                                   r"\d{4} \d\d:\d\d:\d\d GMT$")
            self.assertLess(abs(parsedate_to_datetime(date).timestamp() - time.time()), 5, (status, date))

    # ---- operations this server does not serve: one answer per protocol ----
    def test_unknown_operation_batch_is_an_unknown_route(self):
        # rest-json routes by path: a Batch operation not served here and a path in no model alike.
        code, _, status = self.error(self.batch.list_consumable_resources)
        self.assertEqual((code, status), ("UnknownOperationException", 404))
        status, headers, body = self.raw("POST", "/v1/nosuchoperation", {"Content-Type": "application/json"})
        self.assertEqual((status, headers.get("x-amzn-ErrorType"), body["__type"]),
                         (404, "UnknownOperationException", "UnknownOperationException"))

    def test_unknown_operation_sagemaker_is_a_400(self):
        code, _, status = self.error(self.sm.list_endpoints)
        self.assertEqual((code, status), ("UnknownOperationException", 400))
        for target in ("SageMaker.NoSuchOperation", "Other.CreateTrainingJob", None):
            headers = {"Content-Type": "application/x-amz-json-1.1"}
            if target:
                headers["X-Amz-Target"] = target
            status, _, body = self.raw("POST", "/", headers)
            self.assertEqual((status, body["__type"]), (400, "UnknownOperationException"), target)

    def test_unknown_operation_is_answered_before_authentication(self):
        # Unsigned: the route is resolved first, so the answer is the same as for a signed request.
        status, _, body = self.raw("POST", "/v1/listconsumableresources", {"Content-Type": "application/json"}, sign=False)
        self.assertEqual((status, body["__type"]), (404, "UnknownOperationException"))
        status, _, body = self.raw("POST", "/", {"Content-Type": "application/x-amz-json-1.1",
                                                 "X-Amz-Target": "SageMaker.ListEndpoints"}, sign=False)
        self.assertEqual((status, body["__type"]), (400, "UnknownOperationException"))

    def raw(self, method, path, headers, body=b"{}", sign=True, as_json=True):
        """One request as sent, signed as the service its path belongs to; (status, headers, JSON)."""
        import http.client
        import urllib.parse
        import botocore.auth
        import botocore.awsrequest
        import botocore.credentials
        from harness import REGION
        headers = dict(headers)
        if sign:
            key, secret = self.server.credentials()
            service = "batch" if path.startswith("/v1/") else "sagemaker"
            req = botocore.awsrequest.AWSRequest(method=method, url=self.server.url + path, data=body, headers=headers)
            botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), service, REGION).add_auth(req)
            headers = dict(req.headers.items())
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k: v for k, v in resp.getheaders()}, (json.loads(data or b"{}") if as_json else data)
        finally:
            conn.close()

    def test_client_side_checks_are_not_needed_for_a_clear_error(self):
        # The aws CLI and boto3 also check parameters locally; both paths say what is wrong.
        strict = self.server.client("batch")
        with self.assertRaises(ParamValidationError):
            strict.submit_service_job(jobName="j", jobQueue="vq", serviceJobType="SAGEMAKER_TRAINING")


if __name__ == "__main__":
    unittest.main()
