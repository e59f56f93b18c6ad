"""EventBridge on the wire (docs/events.md, "EventBridge API"): rules with event patterns, API
destinations as targets delivered through the webhook delivery, PutEvents, through boto3 and the
aws CLI; configuration-file webhooks listed as read-only rules."""
import datetime
import json
import os
import shutil
import subprocess
import time
import unittest

import botocore.exceptions

from harness import Receiver, ServerTest

SERVICE_JOB = "Batch Service Job State Change"
# Failed service jobs, and the test's own markers that say {"status": "FAILED"} too.
FAILED = json.dumps({"detail": {"status": ["FAILED"]}})
SERVICE_JOB_FAILED = json.dumps({"source": ["aws.batch"], "detail-type": [SERVICE_JOB], "detail": {"status": ["FAILED"]}})
API_KEY = "s3cr3t-key-value-never-shown"


def error_code(ctx):
    return ctx.exception.response["Error"]["Code"]


class EventBridgeTest(ServerTest):
    def setUp(self):
        self.receiver = Receiver().start()
        self.configured = Receiver().start()
        # The API destinations' receiver listens on loopback, which the operator allows here.
        self.server_config = ('[events]\nallow_local_endpoints = true\n[[webhooks]]\nname = "from-config"\n'
                              f'url = "{self.configured.url}"\nsources = ["aws.batch"]\n')
        super().setUp()
        self.events = self.server.client("events")

    def tearDown(self):
        self.events.close()
        super().tearDown()
        self.receiver.stop()
        self.configured.stop()

    def destination(self, name="receiver"):
        conn = self.events.create_connection(
            Name=name + "-conn", AuthorizationType="API_KEY",
            AuthParameters={"ApiKeyAuthParameters": {"ApiKeyName": "x-api-key", "ApiKeyValue": API_KEY}})
        return self.events.create_api_destination(
            Name=name, ConnectionArn=conn["ConnectionArn"], InvocationEndpoint=self.receiver.url,
            HttpMethod="POST")["ApiDestinationArn"]

    def fail_job(self, q, name):
        job = self.submit(q, self.command_payload(name, "exit 3"), name=name)
        self.wait_jobs([job])
        return job

    def test_failed_job_reaches_the_api_destination_and_a_disabled_rule_delivers_nothing(self):
        dest = self.destination()
        arn = self.events.put_rule(Name="job-failed", EventPattern=FAILED, Description="failures")["RuleArn"]
        self.assertTrue(arn.endswith(":rule/job-failed"))
        self.events.put_targets(Rule="job-failed", Targets=[{"Id": "hook", "Arn": dest}])
        q = self.create_queue("ebq", capacity=1)
        ok = self.submit(q, self.command_payload("eb-ok", "true"), name="eb-ok")
        self.wait_jobs([ok])
        failed = self.fail_job(q, "eb-failed")
        got = self.receiver.wait(lambda ev: len(ev) >= 1, what="the FAILED event")
        # Delivery is in order: the succeeding job's events came first and none of them matched.
        self.assertEqual([(e["detail-type"], e["detail"]["jobId"], e["detail"]["status"]) for e in got],
                         [(SERVICE_JOB, failed, "FAILED")])
        headers, _, _ = self.receiver.posts[0]
        self.assertEqual(headers.get("x-api-key"), API_KEY)  # the connection's authorization

        # Disabled: a failure now is not delivered, not even once the rule is enabled again (the
        # marker sent after enabling arrives, and nothing before it).
        self.events.disable_rule(Name="job-failed")
        self.assertEqual(self.events.describe_rule(Name="job-failed")["State"], "DISABLED")
        self.fail_job(q, "eb-while-disabled")
        self.events.enable_rule(Name="job-failed")
        put = self.events.put_events(Entries=[{"Source": "test.marker", "DetailType": "Marker",
                                               "Detail": json.dumps({"status": "FAILED", "n": 1})}])
        self.assertEqual(put["FailedEntryCount"], 0)
        got = self.receiver.wait(lambda ev: len(ev) >= 2, what="the marker")
        self.assertEqual([e["detail"].get("jobName", e["detail"].get("n")) for e in got], ["eb-failed", 1])
        self.assertEqual(got[1]["id"], put["Entries"][0]["EventId"])
        self.assertEqual(got[1]["source"], "test.marker")

        # A new pattern for the same rule applies to the next event, from the same cursor.
        self.events.put_rule(Name="job-failed", EventPattern=json.dumps({"source": ["test.marker"]}))
        self.events.put_events(Entries=[
            {"Source": "test.other", "DetailType": "Marker", "Detail": json.dumps({"status": "FAILED", "n": 2})},
            {"Source": "test.marker", "DetailType": "Marker", "Detail": json.dumps({"n": 3})}])
        got = self.receiver.wait(lambda ev: len(ev) >= 3, what="the second marker")
        self.assertEqual([e["detail"].get("jobName", e["detail"].get("n")) for e in got], ["eb-failed", 1, 3])

        # The server's log and every answer keep the key's value to themselves.
        described = self.events.describe_connection(Name="receiver-conn")
        self.assertEqual(described["AuthParameters"], {"ApiKeyAuthParameters": {"ApiKeyName": "x-api-key"}})
        self.assertNotIn(API_KEY, json.dumps(described, default=str))
        self.assertNotIn(API_KEY, self.server.read_log())

    def test_a_rule_on_a_tag_inside_the_tags_array_delivers_only_that_owners_job(self):
        # detail.Tags is an array of {Key, Value}: the pattern's Key and Value must hold in one tag.
        dest = self.destination()
        pattern = {"source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"],
                   "detail": {"TrainingJobStatus": ["Completed"], "Tags": {"Key": ["owner"], "Value": ["alice"]}}}
        self.events.put_rule(Name="alices-jobs", EventPattern=json.dumps(pattern))
        self.events.put_targets(Rule="alices-jobs", Targets=[{"Id": "alice", "Arn": dest}])
        sm = self.server.client("sagemaker")
        # Bob's job names alice in another tag: no single tag is owner=alice.
        for name, tags in (("bobs-job", [{"Key": "owner", "Value": "bob"}, {"Key": "team", "Value": "alice"}]),
                           ("alices-job", [{"Key": "team", "Value": "nlp"}, {"Key": "owner", "Value": "alice"}])):
            sm.create_training_job(**self.command_payload(name, "true", Tags=tags))
            self.assertEqual(self.wait_training(name)["TrainingJobStatus"], "Completed")
        # Delivery is in event order: Bob's completion came first and was not delivered.
        got = self.receiver.wait(lambda ev: len(ev) >= 1, what="Alice's completion")
        self.assertEqual([e["detail"]["TrainingJobName"] for e in got], ["alices-job"])

    def test_rules_and_targets_survive_a_restart(self):
        dest = self.destination()
        self.events.put_rule(Name="durable", EventPattern=SERVICE_JOB_FAILED, State="DISABLED")
        self.events.put_targets(Rule="durable", Targets=[{"Id": "t1", "Arn": dest, "InputPath": "$.detail"}])
        self.server.stop()
        self.server = self.new_server()
        self.events = self.server.client("events")
        rule = self.events.describe_rule(Name="durable")
        self.assertEqual((rule["State"], json.loads(rule["EventPattern"])), ("DISABLED", json.loads(SERVICE_JOB_FAILED)))
        self.assertEqual(self.events.list_targets_by_rule(Rule="durable")["Targets"],
                         [{"Id": "t1", "Arn": dest, "InputPath": "$.detail"}])
        # Enabled after the restart, its target's InputPath sends only the detail.
        self.events.enable_rule(Name="durable")
        self.batch = self.server.client("batch")
        q = self.create_queue("dq", capacity=1)
        job = self.fail_job(q, "dq-failed")
        deadline = time.time() + 60
        while not self.receiver.posts and time.time() < deadline:
            time.sleep(0.05)
        body = self.receiver.posts[0][1]  # the detail alone: no event id to tell repeats apart
        self.assertEqual((body["jobId"], body["status"]), (job, "FAILED"))

        # Deleting needs the targets gone first, as in AWS.
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            self.events.delete_rule(Name="durable")
        self.assertEqual(error_code(ctx), "ValidationException")
        self.events.remove_targets(Rule="durable", Ids=["t1"])
        self.events.delete_rule(Name="durable")
        with self.assertRaises(self.events.exceptions.ResourceNotFoundException):
            self.events.describe_rule(Name="durable")

    def test_hostile_input_is_refused_and_changes_nothing(self):
        dest = self.destination()
        refusals = [
            (lambda: self.events.put_rule(Name="bad", EventPattern='{"detail": {"status": "FAILED"}}'),
             "InvalidEventPatternException"),
            (lambda: self.events.put_rule(Name="bad", EventPattern="not json"), "InvalidEventPatternException"),
            (lambda: self.events.put_rule(Name="x" * 65, EventPattern=FAILED), "ValidationException"),
            (lambda: self.events.put_rule(Name="sched", ScheduleExpression="cron(0 12 * * ? *)"), "ValidationException"),
            (lambda: self.events.put_rule(Name="sched", ScheduleExpression="rate(1 minutes)"), "ValidationException"),
            (lambda: self.events.put_rule(Name="bad", EventPattern=FAILED, EventBusName="other"),
             "ResourceNotFoundException"),
        ]
        for call, code in refusals:
            with self.assertRaises(botocore.exceptions.ClientError) as ctx:
                call()
            self.assertEqual(error_code(ctx), code)
        self.assertEqual([r["Name"] for r in self.events.list_rules()["Rules"]], ["from-config"])

        self.events.put_rule(Name="ok", EventPattern=FAILED)
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            self.events.put_targets(Rule="ok", Targets=[
                {"Id": "fine", "Arn": dest},
                {"Id": "fn", "Arn": "arn:aws:lambda:us-east-1:000000000000:function:f"}])
        self.assertEqual(error_code(ctx), "ValidationException")
        self.assertIn("lambda", ctx.exception.response["Error"]["Message"])
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            self.events.put_targets(Rule="ok", Targets=[
                {"Id": "gone", "Arn": dest.replace("/receiver", "/nothing")}])
        self.assertEqual(error_code(ctx), "ResourceNotFoundException")
        self.assertEqual(self.events.list_targets_by_rule(Rule="ok")["Targets"], [])  # the good one was not added
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            self.events.create_connection(Name="c2", AuthorizationType="OAUTH_CLIENT_CREDENTIALS",
                                          AuthParameters={})
        self.assertEqual(error_code(ctx), "ValidationException")

        # PutEvents answers per entry: aws.* sources are AWS's, Detail must be a JSON object.
        put = self.events.put_events(Entries=[
            {"Source": "aws.batch", "DetailType": "Fake", "Detail": "{}"},
            {"Source": "mine", "DetailType": "Mine", "Detail": "[1]"},
            {"Source": "mine", "DetailType": "Mine", "Detail": "{}"}])
        self.assertEqual(put["FailedEntryCount"], 2)
        self.assertEqual([e.get("ErrorCode") for e in put["Entries"]],
                         ["NotAuthorizedForSourceException", "MalformedDetail", None])
        self.assertIn("EventId", put["Entries"][2])

    def test_test_event_pattern_answers_as_a_rule_would_match(self):
        # EventBridge's documented EC2 example event and patterns (content filtering).
        event = {"id": "7bf73129-1428-4cd3-a780-95db273d1602", "detail-type": "EC2 Instance State-change Notification",
                 "source": "aws.ec2", "account": "123456789012", "time": "2015-11-11T21:29:54Z", "region": "us-east-1",
                 "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-abcd1111"],
                 "detail": {"instance-id": "i-abcd1111", "state": "pending", "c-count": 5, "d-count": 3,
                            "Tags": [{"Key": "owner", "Value": "alice"}, {"Key": "team", "Value": "ml"}]}}
        cases = [
            ({"source": ["aws.ec2"], "detail": {"state": ["pending"]}}, True),
            ({"source": ["aws.ec2"], "detail": {"state": ["running"]}}, False),
            ({"time": [{"prefix": "2015-11-11"}]}, True),
            ({"detail": {"instance-id": [{"suffix": "1111"}]}}, True),
            ({"detail": {"state": [{"anything-but": "initializing"}]}}, True),
            ({"detail": {"state": [{"anything-but": {"prefix": "pend"}}]}}, False),
            ({"detail": {"c-count": [{"numeric": [">", 0, "<=", 5]}], "d-count": [{"numeric": ["<", 10]}]}}, True),
            ({"detail": {"c-count": [{"numeric": [">", 5]}]}}, False),
            ({"detail": {"state": [{"exists": True}], "missing": [{"exists": False}]}}, True),
            ({"detail": {"state": [{"equals-ignore-case": "PENDING"}]}}, True),
            ({"detail": {"instance-id": [{"wildcard": "i-*11"}]}}, True),
            ({"source": ["aws.ec2"], "$or": [{"detail": {"c-count": [3]}}, {"detail": {"d-count": [3]}}]}, True),
            ({"detail": {"Tags": {"Key": ["owner"], "Value": ["alice"]}}}, True),
            ({"detail": {"Tags": {"Key": ["owner"], "Value": ["ml"]}}}, False),
        ]
        for pattern, expected in cases:
            got = self.events.test_event_pattern(EventPattern=json.dumps(pattern), Event=json.dumps(event))
            self.assertEqual(got["Result"], expected, pattern)
        # Hostile: a bad pattern, an event without AWS's required members, one nested too deep.
        refusals = [({"EventPattern": '{"detail": {"state": "pending"}}', "Event": json.dumps(event)},
                     "InvalidEventPatternException"),
                    ({"EventPattern": '{"source": ["aws.ec2"]}', "Event": json.dumps({"source": "aws.ec2"})},
                     "ValidationException"),
                    ({"EventPattern": '{"source": ["aws.ec2"]}', "Event": "[" * 10000 + "]" * 10000},
                     "ValidationException")]
        for request, code in refusals:
            with self.assertRaises(botocore.exceptions.ClientError) as ctx:
                self.events.test_event_pattern(**request)
            self.assertEqual(error_code(ctx), code, request["Event"][:80])

    def test_an_input_transformer_shapes_the_body_the_destination_gets(self):
        dest = self.destination()
        self.events.put_rule(Name="chat", EventPattern=json.dumps({"source": ["test.chat"]}))
        as_json = {"InputPathsMap": {"job": "$.detail.job", "status": "$.detail.status", "n": "$.detail.n",
                                     "first": "$.resources[0]", "none": "$.detail.missing"},
                   "InputTemplate": '{"text": "Job <job> is \\"<status>\\" (<n>)", "status": <status>, "n": <n>, '
                                    '"first": <first>, "none": <none>, "rule": <aws.events.rule-name>}'}
        as_text = {"InputPathsMap": {"job": "$.detail.job", "none": "$.detail.missing"},
                   "InputTemplate": "job <job> on <aws.events.rule-arn><none>"}
        # Refused, by member and rule, and nothing is added.
        for target, words in [({"Input": "{}", "InputTransformer": as_json}, "at most one"),
                              ({"InputTransformer": {"InputTemplate": "{<job>: 1}",
                                                     "InputPathsMap": {"job": "$.detail.job"}}}, "object key"),
                              ({"InputTransformer": {"InputTemplate": "x", "InputPathsMap": {"a.b": "$.x"}}},
                               "InputPathsMap")]:
            with self.assertRaises(botocore.exceptions.ClientError) as ctx:
                self.events.put_targets(Rule="chat", Targets=[{"Id": "t", "Arn": dest, **target}])
            self.assertEqual(error_code(ctx), "ValidationException")
            message = ctx.exception.response["Error"]["Message"]
            self.assertIn("Targets[0].", message)
            self.assertIn(words, message)
        self.assertEqual(self.events.list_targets_by_rule(Rule="chat")["Targets"], [])

        self.events.put_targets(Rule="chat", Targets=[{"Id": "json", "Arn": dest, "InputTransformer": as_json},
                                                      {"Id": "text", "Arn": dest, "InputTransformer": as_text}])
        self.assertEqual(self.events.list_targets_by_rule(Rule="chat")["Targets"],
                         [{"Id": "json", "Arn": dest, "InputTransformer": as_json},
                          {"Id": "text", "Arn": dest, "InputTransformer": as_text}])
        hostile = 'a "quoted" </script>\nline \u00e9\U0001F680 \\ end'
        self.events.put_events(Entries=[{"Source": "test.chat", "DetailType": "Chat", "Resources": ["arn:x:1"],
                                         "Detail": json.dumps({"job": hostile, "status": "FAILED", "n": 3})}])
        deadline = time.time() + 60
        while len(self.receiver.posts) < 2 and time.time() < deadline:
            time.sleep(0.05)
        bodies = {("json" if parsed is not None else "text"): (parsed, raw) for _, parsed, raw in self.receiver.posts}
        self.assertEqual(bodies["json"][0], {"text": f'Job {hostile} is "FAILED" (3)', "status": "FAILED", "n": 3,
                                             "first": "arn:x:1", "none": None, "rule": "chat"})
        rule_arn = self.events.describe_rule(Name="chat")["Arn"]
        self.assertEqual(bodies["text"][1].decode(), f"job {hostile} on {rule_arn}")

    def test_configuration_file_webhooks_are_read_only_rules(self):
        [rule] = self.events.list_rules(NamePrefix="from")["Rules"]
        self.assertEqual((rule["Name"], rule["ManagedBy"], json.loads(rule["EventPattern"])),
                         ("from-config", "trainyard.config", {"source": ["aws.batch"]}))
        self.assertEqual(self.events.list_targets_by_rule(Rule="from-config")["Targets"],
                         [{"Id": "webhook", "Arn": f"http://127.0.0.1:{self.configured.port}"}])  # no path
        for call in (lambda: self.events.disable_rule(Name="from-config"),
                     lambda: self.events.put_rule(Name="from-config", EventPattern=FAILED),
                     lambda: self.events.delete_rule(Name="from-config")):
            with self.assertRaises(botocore.exceptions.ClientError) as ctx:
                call()
            self.assertEqual(error_code(ctx), "ManagedRuleException")
            self.assertIn("configuration file", ctx.exception.response["Error"]["Message"])

    def test_list_rules_pages_by_name(self):
        for n in ("p-a", "p-b", "p-c", "other"):
            self.events.put_rule(Name=n, EventPattern=FAILED)
        page = self.events.list_rules(NamePrefix="p-", Limit=2)
        self.assertEqual([r["Name"] for r in page["Rules"]], ["p-a", "p-b"])
        rest = self.events.list_rules(NamePrefix="p-", Limit=2, NextToken=page["NextToken"])
        self.assertEqual([r["Name"] for r in rest["Rules"]], ["p-c"])
        self.assertNotIn("NextToken", rest)

    def test_a_user_without_events_put_rule_is_refused(self):
        policy = {"Version": "2012-10-17",
                  "Statement": [{"Effect": "Allow", "Action": "events:ListRules", "Resource": "*"},
                                {"Effect": "Allow", "Action": "events:DescribeRule",
                                 "Resource": "arn:aws:events:*:*:rule/from-*"}]}
        self.events.put_rule(Name="hidden", EventPattern=FAILED)
        self.server.admin("admin/iam/CreatePolicy", {"PolicyName": "watch", "PolicyDocument": json.dumps(policy)})
        self.server.admin("admin/iam/CreateUser", {"UserName": "watcher"})
        self.server.admin("admin/iam/AttachUserPolicy", {"UserName": "watcher", "PolicyName": "watch"})
        key = self.server.admin("admin/iam/CreateAccessKey", {"UserName": "watcher"})["AccessKey"]
        watcher = self.server.client("events", key=key["AccessKeyId"], secret=key["SecretAccessKey"])
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            watcher.put_rule(Name="sneaky", EventPattern=FAILED)
        self.assertEqual(error_code(ctx), "AccessDeniedException")
        self.assertIn("events:PutRule", ctx.exception.response["Error"]["Message"])
        self.assertIn(":rule/sneaky", ctx.exception.response["Error"]["Message"])
        # Listed: only the rules it may describe.
        self.assertEqual([r["Name"] for r in watcher.list_rules()["Rules"]], ["from-config"])
        self.assertEqual([r["Name"] for r in self.events.list_rules()["Rules"]], ["from-config", "hidden"])
        watcher.close()

        # Both the refusal and a change are audited, as events:<Operation> on the rule.
        self.events.put_rule(Name="audited", EventPattern=FAILED)
        self.destination()
        records = [json.loads(e["CloudTrailEvent"]) for e in self.server.admin("admin/audit", {})["Events"]]
        put_rules = [(r["eventSource"], r["eventName"], r.get("errorCode"), [x["name"] for x in r["resources"]])
                     for r in records if r["eventName"] == "PutRule"]
        self.assertIn(("events.amazonaws.com", "PutRule", "AccessDeniedException", ["sneaky"]), put_rules)
        self.assertIn(("events.amazonaws.com", "PutRule", None, ["audited"]), put_rules)
        self.assertIn("CreateConnection", [r["eventName"] for r in records])
        self.assertNotIn(API_KEY, json.dumps(records))


class ScheduledRuleTest(ServerTest):
    """rate() rules fire on the server's clock, moved here with admin/advance-clock."""
    server_args = ["--clock=offset"]
    server_config = "[events]\nallow_local_endpoints = true\n"  # the receiver listens on loopback

    def setUp(self):
        self.receiver = Receiver().start()
        super().setUp()
        self.events = self.server.client("events")

    def tearDown(self):
        self.events.close()
        super().tearDown()
        self.receiver.stop()

    def test_a_rate_rule_sends_one_scheduled_event_per_period_and_no_burst(self):
        conn = self.events.create_connection(
            Name="c", AuthorizationType="API_KEY",
            AuthParameters={"ApiKeyAuthParameters": {"ApiKeyName": "x-api-key", "ApiKeyValue": "k"}})
        dest = self.events.create_api_destination(Name="d", ConnectionArn=conn["ConnectionArn"],
                                                  InvocationEndpoint=self.receiver.url,
                                                  HttpMethod="POST")["ApiDestinationArn"]
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            self.events.put_rule(Name="nightly", ScheduleExpression="cron(0 2 * * ? *)")
        self.assertIn("cron", ctx.exception.response["Error"]["Message"])
        arn = self.events.put_rule(Name="every5", ScheduleExpression="rate(5 minutes)")["RuleArn"]
        self.assertEqual(self.events.describe_rule(Name="every5")["ScheduleExpression"], "rate(5 minutes)")
        self.assertEqual([(r["Name"], r.get("ScheduleExpression")) for r in self.events.list_rules()["Rules"]],
                         [("every5", "rate(5 minutes)")])
        self.events.put_targets(Rule="every5", Targets=[{"Id": "t", "Arn": dest}])

        def at(e):
            return datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()

        self.advance(300)
        [first] = self.receiver.wait(lambda ev: len(ev) >= 1, what="the first scheduled event")
        self.assertEqual((first["source"], first["detail-type"], first["resources"], first["detail"]),
                         ("aws.events", "Scheduled Event", [arn], {}))
        self.advance(3000)  # ten periods at once: one event, for the last of them
        self.receiver.wait(lambda ev: len(ev) >= 2, what="the second scheduled event")
        self.advance(300)
        got = self.receiver.wait(lambda ev: len(ev) >= 3, what="the third scheduled event")
        # In the order of the event log: a burst for the skipped periods would have come first.
        self.assertEqual([at(e) - at(got[0]) for e in got], [0, 3000, 3300])

@unittest.skipUnless(shutil.which("aws"), "the aws CLI is not installed")
class EventBridgeCliTest(ServerTest):
    server_config = "[events]\nallow_local_endpoints = true\n"  # the receiver listens on loopback
    def setUp(self):
        self.receiver = Receiver().start()
        super().setUp()

    def tearDown(self):
        super().tearDown()
        self.receiver.stop()

    def aws(self, *args, check=True):
        key, secret = self.server.credentials()
        # The CLI would fetch an http:// argument (--invocation-endpoint) as the value's source.
        config = os.path.join(self.work_dir, "aws-config")
        with open(config, "w") as f:
            f.write("[default]\ncli_follow_urlparam = false\n")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION="us-east-1",
                   AWS_PAGER="", AWS_CONFIG_FILE=config, AWS_SHARED_CREDENTIALS_FILE="/dev/null")
        r = subprocess.run(["aws", "--endpoint-url", self.server.url, "--output", "json", *args],
                           capture_output=True, text=True, env=env, timeout=120)
        if check and r.returncode != 0:
            self.fail(f"aws {' '.join(args)} failed: {r.stderr}")
        return json.loads(r.stdout) if r.stdout.strip() else r

    def test_rule_and_target_with_the_aws_cli(self):
        conn = self.aws("events", "create-connection", "--name", "cli-conn", "--authorization-type", "BASIC",
                        "--auth-parameters", "BasicAuthParameters={Username=u,Password=pw}")
        dest = self.aws("events", "create-api-destination", "--name", "cli-dest", "--connection-arn",
                        conn["ConnectionArn"], "--invocation-endpoint", self.receiver.url, "--http-method", "POST")
        self.aws("events", "put-rule", "--name", "cli-rule", "--event-pattern", SERVICE_JOB_FAILED)
        self.aws("events", "put-targets", "--rule", "cli-rule",
                 "--targets", json.dumps([{"Id": "1", "Arn": dest["ApiDestinationArn"]}]))
        self.assertEqual([r["Name"] for r in self.aws("events", "list-rules")["Rules"]], ["cli-rule"])
        self.assertEqual(self.aws("events", "describe-rule", "--name", "cli-rule")["State"], "ENABLED")
        self.assertEqual(self.aws("events", "list-targets-by-rule", "--rule", "cli-rule")["Targets"],
                         [{"Id": "1", "Arn": dest["ApiDestinationArn"]}])
        q = self.create_queue("cliq", capacity=1)
        job = self.submit(q, self.command_payload("cli-failed", "exit 1"), name="cli-failed")
        self.wait_jobs([job])
        [e] = self.receiver.wait(lambda ev: len(ev) >= 1, what="the FAILED event")
        self.assertEqual((e["detail"]["jobId"], e["detail"]["status"]), (job, "FAILED"))
        headers, _, _ = self.receiver.posts[0]
        self.assertEqual(headers.get("Authorization"), "Basic dTpwdw==")  # u:pw

        self.aws("events", "disable-rule", "--name", "cli-rule")
        self.assertEqual(self.aws("events", "describe-rule", "--name", "cli-rule")["State"], "DISABLED")
        self.aws("events", "enable-rule", "--name", "cli-rule")
        put = self.aws("events", "put-events", "--entries",
                       json.dumps([{"Source": "cli.test", "DetailType": "T", "Detail": "{}"}]))
        self.assertEqual(put["FailedEntryCount"], 0)
        r = self.aws("events", "delete-rule", "--name", "cli-rule", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ValidationException", r.stderr)
        self.assertIn("targets", r.stderr)
        self.aws("events", "remove-targets", "--rule", "cli-rule", "--ids", "1")
        self.aws("events", "delete-rule", "--name", "cli-rule")
        self.assertEqual(self.aws("events", "list-rules")["Rules"], [])
        r = self.aws("events", "put-rule", "--name", "bad name", "--event-pattern", FAILED, check=False)
        self.assertIn("ValidationException", r.stderr)

    def test_an_input_transformer_with_the_aws_cli(self):
        conn = self.aws("events", "create-connection", "--name", "cli-conn", "--authorization-type", "API_KEY",
                        "--auth-parameters", "ApiKeyAuthParameters={ApiKeyName=x-api-key,ApiKeyValue=k}")
        dest = self.aws("events", "create-api-destination", "--name", "cli-dest", "--connection-arn",
                        conn["ConnectionArn"], "--invocation-endpoint", self.receiver.url,
                        "--http-method", "POST")["ApiDestinationArn"]
        self.aws("events", "put-rule", "--name", "cli-chat", "--event-pattern", json.dumps({"source": ["cli.chat"]}))
        transformer = {"InputPathsMap": {"status": "$.detail.status", "who": "$.detail.who"},
                       "InputTemplate": '{"text": "<who>: <status>", "id": <aws.events.rule-name>}'}
        self.aws("events", "put-targets", "--rule", "cli-chat", "--targets",
                 json.dumps([{"Id": "chat", "Arn": dest, "InputTransformer": transformer}]))
        self.assertEqual(self.aws("events", "list-targets-by-rule", "--rule", "cli-chat")["Targets"],
                         [{"Id": "chat", "Arn": dest, "InputTransformer": transformer}])
        self.aws("events", "put-events", "--entries", json.dumps([
            {"Source": "cli.chat", "DetailType": "T", "Detail": json.dumps({"status": "SUCCEEDED", "who": 'x"y'})}]))
        [body] = self.receiver.wait(lambda ev: len(ev) >= 1, what="the rendered body")
        self.assertEqual(body, {"text": 'x"y: SUCCEEDED', "id": "cli-chat"})
        r = self.aws("events", "put-targets", "--rule", "cli-chat", "--targets", json.dumps(
            [{"Id": "chat", "Arn": dest, "InputTransformer": {"InputTemplate": '{"a": <who> <who>}',
                                                              "InputPathsMap": {"who": "$.detail.who"}}}]), check=False)
        self.assertIn("ValidationException", r.stderr)
        self.assertIn("InputTemplate", r.stderr)


if __name__ == "__main__":
    unittest.main()
