"""EventBridge between teams (docs/events.md, "Who receives which events"; docs/security.md,
"Events and outbound calls"): users a and c, each allowed its own jobs. A rule's targets get only
the events its owner may read; PutEvents may not pass for AWS or the server; JSON text inside a
member is held to the nesting limit; API destinations may not reach this host unless the operator
allows it. Store-independent: skipped in the PostgreSQL pass."""
import json
import os
import unittest

import botocore.exceptions

from harness import Receiver, ServerTest

SERVICE_JOB = "Batch Service Job State Change"


def team_policy(account, user):
    """Everything on EventBridge; submit jobs (writing their output to the test bucket); describe
    only the jobs it submitted."""
    return {"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "events:*", "Resource": "*"},
                          {"Effect": "Allow", "Action": "s3:*",
                           "Resource": ["arn:aws:s3:::trainyard-test", "arn:aws:s3:::trainyard-test/*"]},
                          {"Effect": "Allow", "Action": "batch:SubmitServiceJob", "Resource": "*"},
                          {"Effect": "Allow", "Action": ["batch:DescribeServiceJob", "batch:ListServiceJobs"],
                           "Resource": "*",
                           "Condition": {"StringEquals": {"trainyard:JobOwner": f"arn:aws:iam::{account}:user/{user}"}}}]}


@unittest.skipIf(os.environ.get("TRAINYARD_TEST_STORE") == "postgres", "does not depend on the store")
class TeamsTest(ServerTest):
    def setUp(self):
        self.to_a, self.to_c, self.configured = Receiver().start(), Receiver().start(), Receiver().start()
        # The receivers listen on loopback: allowed here by the operator. The file's webhook wants
        # service job changes by their detail type, as an operator's alerting might.
        self.server_config = ("[events]\nallow_local_endpoints = true\n"
                              '[[webhooks]]\nname = "ops"\n'
                              f'url = "{self.configured.url}"\ndetail_types = ["{SERVICE_JOB}"]\n')
        super().setUp()
        self.account = self.server.client("sts").get_caller_identity()["Account"]
        self.clients = {}
        for user in ("a", "c"):
            self.server.admin("admin/iam/CreatePolicy", {"PolicyName": "team-" + user,
                                                         "PolicyDocument": json.dumps(team_policy(self.account, user))})
            self.server.admin("admin/iam/CreateUser", {"UserName": user})
            self.server.admin("admin/iam/AttachUserPolicy", {"UserName": user, "PolicyName": "team-" + user})
            key = self.server.admin("admin/iam/CreateAccessKey", {"UserName": user})["AccessKey"]
            self.clients[user] = {s: self.server.client(s, key=key["AccessKeyId"], secret=key["SecretAccessKey"])
                                  for s in ("events", "batch")}
        self.queue = self.create_queue("shared", capacity=1)

    def tearDown(self):
        for clients in getattr(self, "clients", {}).values():
            for c in clients.values():
                c.close()
        super().tearDown()
        for r in (self.to_a, self.to_c, self.configured):
            r.stop()

    def rule_to(self, user, receiver, pattern):
        events = self.clients[user]["events"]
        conn = events.create_connection(
            Name=user + "-conn", AuthorizationType="API_KEY",
            AuthParameters={"ApiKeyAuthParameters": {"ApiKeyName": "x-api-key", "ApiKeyValue": "k"}})
        dest = events.create_api_destination(Name=user + "-dest", ConnectionArn=conn["ConnectionArn"],
                                             InvocationEndpoint=receiver.url, HttpMethod="POST")
        events.put_rule(Name=user + "-all", EventPattern=json.dumps(pattern))
        events.put_targets(Rule=user + "-all", Targets=[{"Id": "t", "Arn": dest["ApiDestinationArn"]}])

    def marker(self, user, n):
        out = self.clients[user]["events"].put_events(
            Entries=[{"Source": "team." + user, "DetailType": "Marker", "Detail": json.dumps({"n": n})}])
        self.assertEqual(out["FailedEntryCount"], 0, out)

    def test_a_rule_gets_only_the_events_its_owner_may_read(self):
        everything = {"account": [self.account]}
        self.rule_to("a", self.to_a, everything)
        self.rule_to("c", self.to_c, everything)
        payload = self.command_payload("a-job", "true", Environment={"DB_PASSWORD": "a-secret"},
                                       HyperParameters={"lr": "0.1"})
        job = self.clients["a"]["batch"].submit_service_job(
            jobName="a-job", jobQueue=self.queue, serviceJobType="SAGEMAKER_TRAINING",
            serviceRequestPayload=json.dumps(payload))["jobId"]
        self.wait_jobs([job])
        self.server.admin("admin/iam/CreateUser", {"UserName": "z"})  # root's call: an audit record
        self.marker("c", 1)
        self.marker("a", 2)
        # In order: once c's marker is in, everything before it was handled for c's rule.
        got_c = self.to_c.wait(lambda ev: any(e["source"] == "team.c" for e in ev), what="c's marker")
        self.assertEqual([e["source"] for e in got_c if e["source"] != "team.a"], ["team.c"],
                         [(e["source"], e["detail-type"]) for e in got_c])
        self.assertNotIn("a-secret", json.dumps(got_c))
        # a's rule gets a's job's changes and its own marker; no audit record (a may not read them).
        got_a = self.to_a.wait(lambda ev: any(e["source"] == "team.a" for e in ev), what="a's marker")
        kinds = {(e["source"], e["detail-type"]) for e in got_a}
        self.assertIn(("aws.batch", SERVICE_JOB), kinds)
        self.assertNotIn("AWS API Call via CloudTrail", {d for _, d in kinds})
        self.assertEqual({e["detail"]["jobId"] for e in got_a if e["source"] == "aws.batch"}, {job})
        # The operator's webhook gets every job's changes.
        self.configured.wait(lambda ev: any(e["detail"].get("status") == "SUCCEEDED" for e in ev), what="SUCCEEDED")

    def test_sources_that_read_as_aws_or_the_servers_are_refused_and_never_reach_a_webhook(self):
        forged = json.dumps({"jobId": "forged", "status": "FAILED"})
        for source in ("aws.batch", "AWS.batch", " aws.batch", "aws\u2024batch", "aws\uff0ebatch", "trainyard"):
            out = self.clients["c"]["events"].put_events(
                Entries=[{"Source": source, "DetailType": SERVICE_JOB, "Detail": forged}])
            self.assertEqual(out["FailedEntryCount"], 1, source)
            self.assertIn(out["Entries"][0]["ErrorCode"], ("NotAuthorizedForSourceException", "InvalidArgument"), source)
        job = self.submit(self.queue, self.command_payload("after", "true"), name="after")
        self.wait_jobs([job])
        got = self.configured.wait(lambda ev: any(e["detail"].get("status") == "SUCCEEDED" for e in ev), what="SUCCEEDED")
        self.assertNotIn("forged", [e["detail"].get("jobId") for e in got])

    def test_a_detail_nested_deeper_than_the_limit_is_refused_and_the_server_lives(self):
        deep = '{"a":' * 60000 + "1" + "}" * 60000
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            self.clients["c"]["events"].put_events(Entries=[{"Source": "team.c", "DetailType": "x", "Detail": deep}])
        self.assertEqual(ctx.exception.response["Error"]["Code"], "ValidationException")
        self.assertIn("Entries[0].Detail", ctx.exception.response["Error"]["Message"])
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            self.clients["c"]["events"].put_rule(Name="deep", EventPattern='{"detail":' * 100 + '{"a":["b"]}' + "}" * 100)
        self.assertIn("EventPattern", ctx.exception.response["Error"]["Message"])
        self.marker("c", 1)  # still serving


@unittest.skipIf(os.environ.get("TRAINYARD_TEST_STORE") == "postgres", "does not depend on the store")
class OutboundTest(ServerTest):
    """The default: API destinations may not reach this host; the file's webhooks may."""

    def setUp(self):
        self.configured = Receiver().start()
        self.server_config = f'[[webhooks]]\nname = "ops"\nurl = "{self.configured.url}"\nsources = ["team.c"]\n'
        super().setUp()
        self.events = self.server.client("events")

    def tearDown(self):
        self.events.close()
        super().tearDown()
        self.configured.stop()

    def test_an_api_destination_on_this_host_is_refused(self):
        conn = self.events.create_connection(
            Name="conn", AuthorizationType="API_KEY",
            AuthParameters={"ApiKeyAuthParameters": {"ApiKeyName": "x-api-key", "ApiKeyValue": "k"}})["ConnectionArn"]
        port = self.server.url.rsplit(":", 1)[1].split("/")[0]
        for url in (f"http://127.0.0.1:{port}/trainyard/v1/admin/iam/CreateUser", "http://localhost:5432/",
                    "http://127.0.0.2/", "http://0.0.0.0:8080/", "http://[::1]/", "http://169.254.169.254/latest/"):
            with self.assertRaises(botocore.exceptions.ClientError) as ctx:
                self.events.create_api_destination(Name="internal", ConnectionArn=conn, InvocationEndpoint=url,
                                                   HttpMethod="PUT")
            self.assertEqual(ctx.exception.response["Error"]["Code"], "ValidationException", url)
            self.assertIn("InvocationEndpoint", ctx.exception.response["Error"]["Message"])
        self.assertEqual(self.events.list_api_destinations()["ApiDestinations"], [])
        # The operator's own webhook on loopback still gets its events.
        self.events.put_events(Entries=[{"Source": "team.c", "DetailType": "x", "Detail": "{}"}])
        self.configured.wait(lambda ev: len(ev) >= 1, what="the webhook's event")


if __name__ == "__main__":
    unittest.main()
