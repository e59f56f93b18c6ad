"""Audit (docs/security.md, "Audit"): every mutating call and every refused call is recorded with
who made it, on what, from where, its request id and outcome; records are stored with the state
(surviving a restart and a kill -9 right after the answer), looked up with filters and pages, printed
by `trainyard admin audit`, and published as "AWS API Call via CloudTrail" events."""
import http.client
import json
import os
import subprocess
import time
import urllib.parse

import botocore.auth
import botocore.awsrequest
import botocore.credentials
from botocore.exceptions import ClientError

from harness import BIN, REGION, ServerTest

API_CALL = "AWS API Call via CloudTrail"


class AuditCase(ServerTest):
    """Helpers: lookups, records by request id, requests signed with any key."""

    def lookup(self, **body):
        return self.server.admin("admin/audit", body)

    def lookup_all(self, **body):
        """Every record the query matches, following NextToken."""
        events, pages = [], 0
        while True:
            page = self.lookup(**body)
            pages += 1
            events += page["Events"]
            if "NextToken" not in page:
                return events, pages
            body["NextToken"] = page["NextToken"]

    def record(self, request_id):
        found = self.lookup(LookupAttributes=[{"AttributeKey": "EventId", "AttributeValue": request_id}])["Events"]
        self.assertEqual(len(found), 1, f"no single record of request {request_id}")
        return json.loads(found[0]["CloudTrailEvent"])

    def raw(self, path, body, key, secret, headers=None, service="batch"):
        """A request signed with (key, secret), which the server may not know: (status, headers, body)."""
        headers = dict(headers or {"Content-Type": "application/json"})
        req = botocore.awsrequest.AWSRequest(method="POST", url=self.server.url + path, data=body, headers=headers)
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), service, REGION).add_auth(req)
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("POST", path, body=body, headers=dict(req.headers.items()))
        resp = conn.getresponse()
        data = resp.read()
        result = resp.status, {k.lower(): v for k, v in resp.getheaders()}, json.loads(data or b"{}")
        conn.close()
        return result

    def events(self, **filters):
        body = {"After": 0, "Limit": 1000}
        body.update(filters)
        return self.server.raw_call("events", "Events", body, path="/trainyard/v1/events")["Events"]


class AuditTest(AuditCase):
    def test_mutating_calls_are_recorded_with_who_what_where_and_outcome(self):
        key, _ = self.server.credentials()
        env = self.batch.create_service_environment(
            serviceEnvironmentName="audit-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}])
        queue = self.batch.create_job_queue(jobQueueName="audit-q", jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "audit-env"}])
        submit = self.batch.submit_service_job(
            jobName="audit-job", jobQueue="audit-q", serviceJobType="SAGEMAKER_TRAINING",
            serviceRequestPayload=json.dumps(self.command_payload("audit-job", "sleep 30")))
        terminate = self.batch.terminate_service_job(jobId=submit["jobId"], reason="audit test")
        with self.assertRaises(ClientError) as refused:
            self.batch.submit_service_job(jobName="nowhere", jobQueue="no-such-queue", serviceJobType="SAGEMAKER_TRAINING",
                                          serviceRequestPayload=json.dumps(self.command_payload("nowhere", "true")))

        r = self.record(queue["ResponseMetadata"]["RequestId"])
        self.assertEqual(r["action"], "batch:CreateJobQueue")
        self.assertEqual(r["resources"], [{"type": "AWS::Batch::JobQueue", "name": "audit-q"}])
        self.assertEqual(self.record(env["ResponseMetadata"]["RequestId"])["resources"],
                         [{"type": "AWS::Batch::ServiceEnvironment", "name": "audit-env"}])

        r = self.record(submit["ResponseMetadata"]["RequestId"])
        self.assertEqual(r["requestID"], submit["ResponseMetadata"]["RequestId"])
        self.assertEqual((r["action"], r["eventName"], r["eventSource"]),
                         ("batch:SubmitServiceJob", "SubmitServiceJob", "batch.amazonaws.com"))
        self.assertEqual(r["principal"], "root")
        self.assertEqual(r["userIdentity"]["type"], "Root")
        self.assertEqual(r["userIdentity"]["accessKeyId"], key)
        self.assertEqual(r["sourceIPAddress"], "127.0.0.1")
        self.assertIn("Boto3", r["userAgent"])
        self.assertEqual(r["resources"], [{"type": "AWS::Batch::JobQueue", "name": "audit-q"},
                                          {"type": "AWS::Batch::ServiceJob", "name": "audit-job"}])
        self.assertEqual((r["httpStatus"], r["denied"], r["readOnly"]), (200, False, False))
        self.assertNotIn("errorCode", r)
        self.assertLess(abs(r["eventTimeMs"] / 1000 - time.time()), 60)

        r = self.record(terminate["ResponseMetadata"]["RequestId"])
        self.assertEqual(r["action"], "batch:TerminateServiceJob")
        self.assertEqual(r["resources"], [{"type": "AWS::Batch::ServiceJob", "name": submit["jobId"]}])

        # A mutating call that failed is recorded with its error and status.
        r = self.record(refused.exception.response["ResponseMetadata"]["RequestId"])
        self.assertEqual((r["action"], r["errorCode"], r["httpStatus"], r["denied"]),
                         ("batch:SubmitServiceJob", "ClientException", 400, False))
        self.assertIn("no-such-queue", r["errorMessage"])

    def test_successful_reads_are_not_recorded(self):
        self.create_queue("reads")
        self.batch.describe_job_queues()
        self.batch.list_service_jobs(jobQueue="reads")
        self.sm.list_training_jobs()
        events, _ = self.lookup_all()
        self.assertEqual(sorted(json.loads(e["CloudTrailEvent"])["action"] for e in events),
                         ["batch:CreateJobQueue", "batch:CreateServiceEnvironment"])
        self.assertTrue(all(e["ReadOnly"] == "false" for e in events))

    def test_refused_credentials_are_recorded_as_denied_with_the_claimed_key_and_no_secret(self):
        key, secret = self.server.credentials()
        wrong_secret = "W" * 40
        body = json.dumps({"jobQueues": []})
        status, headers, answer = self.raw("/v1/describejobqueues", body, key, wrong_secret)
        self.assertEqual((status, answer["__type"]), (403, "InvalidSignatureException"))
        bad_signature = headers["x-amzn-requestid"]
        status, headers, answer = self.raw("/v1/describejobqueues", body, "AKIAUNKNOWNKEY000001", wrong_secret)
        self.assertEqual((status, answer["__type"]), (403, "UnrecognizedClientException"))
        unknown_key = headers["x-amzn-requestid"]

        r = self.record(bad_signature)
        self.assertEqual((r["action"], r["errorCode"], r["httpStatus"], r["denied"]),
                         ("batch:DescribeJobQueues", "InvalidSignatureException", 403, True))
        self.assertEqual((r["principal"], r["userIdentity"]["type"]), ("", "Unknown"))
        self.assertEqual(r["userIdentity"]["accessKeyId"], key)  # claimed, not verified
        r = self.record(unknown_key)
        self.assertEqual((r["errorCode"], r["denied"]), ("UnrecognizedClientException", True))
        self.assertEqual(r["userIdentity"]["accessKeyId"], "AKIAUNKNOWNKEY000001")

        denied, _ = self.lookup_all(DeniedOnly=True)
        self.assertEqual({e["EventId"] for e in denied}, {bad_signature, unknown_key})
        # Neither secret is in a record, an event or the server's log.
        stored = json.dumps(self.lookup_all()[0]) + json.dumps(self.events())
        for s in (secret, wrong_secret):
            self.assertNotIn(s, stored)
            self.assertNotIn(s, self.server.read_log())

    def test_records_survive_a_restart_and_a_kill9_right_after_the_answer(self):
        queue = self.create_queue("durable")
        first = self.batch.submit_service_job(
            jobName="before-restart", jobQueue=queue, serviceJobType="SAGEMAKER_TRAINING",
            serviceRequestPayload=json.dumps(self.command_payload("before-restart", "true")))
        self.server.stop()
        self.server = self.new_server()
        self.batch = self.server.client("batch")
        self.assertEqual(self.record(first["ResponseMetadata"]["RequestId"])["resources"][1]["name"], "before-restart")

        key, _ = self.server.credentials()
        _, headers, _ = self.raw("/v1/describejobqueues", "{}", key, "X" * 40)
        denied = headers["x-amzn-requestid"]
        acked = self.batch.submit_service_job(
            jobName="acked", jobQueue=queue, serviceJobType="SAGEMAKER_TRAINING",
            serviceRequestPayload=json.dumps(self.command_payload("acked", "true")))
        self.server.kill9()
        self.server = self.new_server()
        self.batch = self.server.client("batch")
        self.assertEqual(self.batch.describe_service_job(jobId=acked["jobId"])["jobName"], "acked")
        self.assertEqual(self.record(acked["ResponseMetadata"]["RequestId"])["action"], "batch:SubmitServiceJob")
        self.assertTrue(self.record(denied)["denied"])

    def test_filters_and_pages(self):
        queue = self.create_queue("filters")
        ids = [self.submit(queue, self.command_payload(f"f-{n}", "sleep 30")) for n in range(5)]
        self.batch.terminate_service_job(jobId=ids[0], reason="filter test")
        # 2 creates, 5 submits, 1 terminate.
        every, _ = self.lookup_all()
        self.assertEqual(len(every), 8)
        times = [e["EventTime"] for e in every]
        self.assertEqual(times, sorted(times, reverse=True))  # newest first

        submits, pages = self.lookup_all(MaxResults=2, LookupAttributes=[
            {"AttributeKey": "Action", "AttributeValue": "batch:SubmitServiceJob"}])
        self.assertEqual(pages, 3)
        self.assertEqual([json.loads(e["CloudTrailEvent"])["resources"][1]["name"] for e in submits],
                         [f"f-{n}" for n in reversed(range(5))])
        self.assertEqual(len({e["EventId"] for e in submits}), 5)

        by_job = self.lookup(LookupAttributes=[{"AttributeKey": "ResourceName", "AttributeValue": ids[0]}])["Events"]
        self.assertEqual([e["EventName"] for e in by_job], ["TerminateServiceJob"])
        by_queue = self.lookup(LookupAttributes=[{"AttributeKey": "ResourceName", "AttributeValue": "filters"},
                                                 {"AttributeKey": "EventName", "AttributeValue": "CreateJobQueue"}])
        self.assertEqual(len(by_queue["Events"]), 1)
        self.assertEqual(len(self.lookup(LookupAttributes=[{"AttributeKey": "Principal", "AttributeValue": "root"}])["Events"]), 8)
        self.assertEqual(self.lookup(LookupAttributes=[{"AttributeKey": "Principal", "AttributeValue": "someone"}])["Events"], [])
        self.assertEqual(self.lookup(DeniedOnly=True)["Events"], [])

        # The time range: everything before the terminate, nothing after now.
        terminate_time = every[0]["EventTime"]
        earlier, _ = self.lookup_all(EndTime=terminate_time - 0.001)
        self.assertEqual(len(earlier), 7)
        self.assertEqual(self.lookup(StartTime=time.time() + 60)["Events"], [])
        self.assertEqual(len(self.lookup(StartTime=terminate_time)["Events"]), 1)

        for bad, member in (({"MaxResults": 51}, "MaxResults"), ({"NextToken": "junk"}, "NextToken"),
                            ({"LookupAttributes": [{"AttributeKey": "Secret", "AttributeValue": "x"}]}, "AttributeKey"),
                            ({"StartTime": 10, "EndTime": 5}, "StartTime"), ({"Bogus": 1}, "Bogus")):
            with self.assertRaises(RuntimeError) as e:
                self.lookup(**bad)
            self.assertIn("ValidationException", str(e.exception))
            self.assertIn(member, str(e.exception))

    def test_cli_prints_the_records(self):
        queue = self.create_queue("cli")
        job = self.submit(queue, self.command_payload("cli-job", "true"))
        env = dict(os.environ, TRAINYARD_ENDPOINT_URL=self.server.url, TRAINYARD_DATA_DIR=self.data_dir)
        env.pop("AWS_ACCESS_KEY_ID", None)
        env.pop("AWS_SECRET_ACCESS_KEY", None)

        def cli(*args):
            p = subprocess.run([BIN, "admin", "audit", *args], env=env, capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
            return p.stdout

        out = cli("--action", "batch:SubmitServiceJob")
        lines = out.strip().splitlines()
        self.assertEqual(lines[0].split()[:3], ["TIME", "PRINCIPAL", "ACCESS"])
        self.assertEqual(len(lines), 2, out)
        self.assertIn("root", lines[1])
        self.assertIn("batch:SubmitServiceJob", lines[1])
        self.assertIn("cli-job", lines[1])
        self.assertIn("OK 200", lines[1])
        self.assertEqual(len(cli("--since", "10m").strip().splitlines()), 4)  # header, 2 creates, 1 submit
        self.assertEqual(len(cli("--until", "2001-01-01").strip().splitlines()), 1)  # the header only
        self.assertEqual(len(cli("--denied").strip().splitlines()), 1)
        records = json.loads(cli("--json", "--limit", "2"))["Events"]
        self.assertEqual(len(records), 2)
        self.assertEqual(json.loads(records[0]["CloudTrailEvent"])["resources"][1]["name"], "cli-job")
        self.assertIn("--denied", cli("--help"))
        p = subprocess.run([BIN, "admin", "audit", "--since", "yesterday"], env=env, capture_output=True, text=True,
                           timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--since", p.stderr)
        self.assertTrue(job)

    def test_records_are_published_as_events(self):
        queue = self.create_queue("ev")
        submit = self.batch.submit_service_job(
            jobName="ev-job", jobQueue=queue, serviceJobType="SAGEMAKER_TRAINING",
            serviceRequestPayload=json.dumps(self.command_payload("ev-job", "true")))
        calls = [e["Event"] for e in self.events(DetailTypes=[API_CALL])]
        self.assertEqual([e["detail"]["eventName"] for e in calls],
                         ["CreateServiceEnvironment", "CreateJobQueue", "SubmitServiceJob"])
        e = calls[-1]
        self.assertEqual((e["source"], e["detail-type"]), ("aws.batch", API_CALL))
        self.assertEqual(e["detail"]["requestID"], submit["ResponseMetadata"]["RequestId"])
        self.assertEqual(e["detail"], self.record(submit["ResponseMetadata"]["RequestId"]))
        # The queue a call names is the event's queue, for the events API's and webhooks' filters.
        self.assertEqual([x["Event"]["detail"]["eventName"] for x in self.events(DetailTypes=[API_CALL], JobQueues=["ev"])],
                         ["CreateJobQueue", "SubmitServiceJob"])

    def test_forwarded_for_is_ignored_unless_the_peer_is_a_trusted_proxy(self):
        key, secret = self.server.credentials()
        _, headers, _ = self.raw("/v1/deletejobqueue", json.dumps({"jobQueue": "none"}), key, secret,
                                 headers={"Content-Type": "application/json", "X-Forwarded-For": "203.0.113.7"})
        self.assertEqual(self.record(headers["x-amzn-requestid"])["sourceIPAddress"], "127.0.0.1")


class TrustedProxyAuditTest(AuditCase):
    server_config = '[audit]\ntrusted_proxies = ["127.0.0.1"]\n'

    def test_forwarded_for_names_the_client_behind_a_trusted_proxy(self):
        key, secret = self.server.credentials()
        _, headers, _ = self.raw("/v1/deletejobqueue", json.dumps({"jobQueue": "none"}), key, secret,
                                 headers={"Content-Type": "application/json",
                                          "X-Forwarded-For": "198.51.100.9, 203.0.113.7, 127.0.0.1"})
        self.assertEqual(self.record(headers["x-amzn-requestid"])["sourceIPAddress"], "203.0.113.7")


if __name__ == "__main__":
    import unittest
    unittest.main()
