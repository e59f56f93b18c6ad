"""CloudWatch alarms on the wire (docs/alarms.md, "CloudWatch alarms (the AWS API)"): PutMetricAlarm
and the rest through boto3 (JSON 1.0 and rpc-v2-cbor) and the aws CLI; alarms on the AWS/Batch queue
metrics, on users' own metrics (M of N, each TreatMissingData) and on metric math, evaluated once a
minute of the server's clock; the configuration file's rules listed as alarms; hostile input
refused by name; alarms, state and history kept across kill -9; permissions.

Clock: the tests run the server with --clock=offset and move it a minute at a time with
`minute()`, which lands one second past the next whole minute, so each call makes exactly one
evaluation (the test's own steps take far less than a real minute, and a real minute boundary
passing during a step is that same evaluation). A "beat" alarm whose metric alternates each minute
tells the test that the evaluation has happened before it looks at the other alarms' states."""
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import time
import unittest
import urllib.request

from botocore.exceptions import ClientError

from harness import Receiver, ServerTest, REGION
from test_cloudwatch import cbor_protocol

NS = "Team/Train"
DIMS = [{"Name": "Run", "Value": "r1"}]
ALARM_CHANGE = "CloudWatch Alarm State Change"
SERVICE_JOB = "Batch Service Job State Change"
SERVICE_JOB_FAILED = json.dumps({"source": ["aws.batch"], "detail-type": [SERVICE_JOB],
                                 "detail": {"status": ["FAILED"]}})
ALARM_EVENTS = json.dumps({"source": ["aws.cloudwatch"], "detail-type": [ALARM_CHANGE]})
PAGER = "arn:aws:sns:us-east-1:000000000000:oncall"
BEAT = "zz-beat"  # sorts after the tests' own alarms


def error(ctx):
    return ctx.exception.response["Error"]["Code"], ctx.exception.response["Error"]["Message"]


def utc(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


def threshold_alarm(name, **kw):
    """PutMetricAlarm arguments: Maximum of Team/Train Loss (Run=r1) over 60 s above 5."""
    args = dict(AlarmName=name, Namespace=NS, MetricName="Loss", Dimensions=DIMS, Statistic="Maximum",
                Period=60, EvaluationPeriods=1, Threshold=5.0, ComparisonOperator="GreaterThanThreshold")
    args.update(kw)
    return args


class AlarmTestBase(ServerTest):
    def setUp(self):
        super().setUp()
        self.cw = self.server.client("cloudwatch")

    def tearDown(self):
        self.cw.close()
        super().tearDown()

    def alarm(self, name, cw=None):
        found = (cw or self.cw).describe_alarms(AlarmNames=[name])["MetricAlarms"]
        self.assertEqual(len(found), 1, f"{name} is not listed")
        return found[0]

    def wait_state(self, name, state, timeout=30):
        deadline = time.time() + timeout
        while True:
            got = self.alarm(name)
            if got["StateValue"] == state:
                return got
            if time.time() > deadline:
                self.fail(f"{name} is {got['StateValue']} ({got.get('StateReason')}), not {state}")
            time.sleep(0.05)  # the server's evaluation runs on its own tick

    def history(self, name, kind=None):
        args = dict(AlarmName=name, ScanBy="TimestampAscending", MaxRecords=100)
        if kind:
            args["HistoryItemType"] = kind
        return self.cw.describe_alarm_history(**args)["AlarmHistoryItems"]

    def transitions(self, name):
        """The alarm's state changes, oldest first, as (from, to) read from its StateUpdate items."""
        out = []
        for item in self.history(name, "StateUpdate"):
            m = re.fullmatch(r"Alarm updated from (\w+) to (\w+)", item["HistorySummary"])
            self.assertIsNotNone(m, item["HistorySummary"])
            out.append(m.groups())
        return out

    def alarm_events(self, prefix):
        """The "CloudWatch Alarm State Change" events of alarms named prefix*, from the event log."""
        out = self.server.raw_call("events", "Events", {"After": 0, "DetailTypes": [ALARM_CHANGE], "Limit": 1000},
                                   path="/trainyard/v1/events")
        return [e["Event"] for e in out["Events"] if e["Event"]["detail"]["alarmName"].startswith(prefix)]

    def gauge(self, alarm):
        with urllib.request.urlopen(self.server.url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        m = re.search(r'^trainyard_alarm_active\{alarm="' + re.escape(alarm) + r'",rule="metric"\} (\d)$', text, re.M)
        self.assertIsNotNone(m, f"no trainyard_alarm_active for {alarm}")
        return int(m.group(1))

    def iam_user(self, name, actions):
        admin = lambda op, body: self.server.admin("admin/iam/" + op, body)
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
        admin("CreatePolicy", {"PolicyName": name + "-policy", "PolicyDocument": json.dumps(policy)})
        admin("CreateUser", {"UserName": name})
        admin("AttachUserPolicy", {"UserName": name, "PolicyName": name + "-policy"})
        key = admin("CreateAccessKey", {"UserName": name})["AccessKey"]
        return self.server.client("cloudwatch", key=key["AccessKeyId"], secret=key["SecretAccessKey"])


class ClockedAlarmTest(AlarmTestBase):
    """A server on --clock=offset that the test moves a minute at a time."""
    server_args = ["--clock=offset"]

    def setUp(self):
        super().setUp()
        self.offset = None
        self.advance(1)  # learns the server's clock
        self.beat = 0
        self.cw.put_metric_alarm(AlarmName=BEAT, Namespace="Test/Beat", MetricName="Beat", Statistic="Maximum",
                                 Period=60, EvaluationPeriods=1, Threshold=0.5,
                                 ComparisonOperator="GreaterThanThreshold", TreatMissingData="ignore")

    def advance(self, seconds):
        out = super().advance(seconds)
        self.offset = out["now"] - time.time()
        return out

    def server_now(self):
        return time.time() + self.offset

    def minute_start(self):
        """The whole minute (epoch seconds) the server's clock is in."""
        return math.floor(self.server_now() / 60) * 60

    def put(self, value, minute=None, name="Loss", ns=NS, dims=DIMS):
        """One datum in the server's current minute (the period the next evaluation looks at)."""
        at = self.minute_start() if minute is None else minute
        self.cw.put_metric_data(Namespace=ns, MetricData=[
            {"MetricName": name, "Dimensions": dims, "Value": float(value), "Timestamp": utc(at + 1)}])

    def minute(self):
        """Moves the server's clock to one second past the next whole minute and waits for that
        minute's evaluation (the beat alarm flips: its datum for this minute alternates 1 and 0)."""
        self.beat ^= 1
        start = self.minute_start()
        self.put(self.beat, minute=start, name="Beat", ns="Test/Beat", dims=[])
        self.advance(max(1, math.ceil(start + 61 - self.server_now())))
        self.wait_state(BEAT, "ALARM" if self.beat else "OK")


class SeedMonitoringTest(ClockedAlarmTest):
    """The issue's first "Done when": a team's monitoring written as the AWS docs show it."""
    # Its API destination is a receiver on loopback, which the operator allows here.
    server_config = "[events]\nallow_local_endpoints = true\n"

    def setUp(self):
        self.receiver = Receiver().start()
        super().setUp()
        self.events = self.server.client("events")

    def tearDown(self):
        self.events.close()
        super().tearDown()
        self.receiver.stop()

    def test_a_long_wait_and_a_failure_raise_the_alarms_and_the_failed_rule_delivers(self):
        q = self.create_queue("seed-gpu", capacity=1)
        by_queue = [{"Name": "JobQueueName", "Value": q}]
        self.cw.put_metric_alarm(
            AlarmName="seed-long-wait", AlarmDescription="A job waited over 10 minutes for capacity",
            Namespace="AWS/Batch", MetricName="JobAttemptRunnableToScheduledDuration", Dimensions=by_queue,
            Statistic="Maximum", Period=60, EvaluationPeriods=1, Threshold=600000,
            ComparisonOperator="GreaterThanThreshold", TreatMissingData="notBreaching")
        self.cw.put_metric_alarm(
            AlarmName="seed-failures", AlarmDescription="A job failed",
            Namespace="AWS/Batch", MetricName="JobsMovedToFailed", Dimensions=by_queue,
            Statistic="Sum", Period=60, EvaluationPeriods=1, Threshold=1,
            ComparisonOperator="GreaterThanOrEqualToThreshold", TreatMissingData="notBreaching")
        created = self.alarm("seed-long-wait")
        self.assertEqual((created["StateValue"], created["StateReason"]),
                         ("INSUFFICIENT_DATA", "Unchecked: Initial alarm creation"))
        conn = self.events.create_connection(
            Name="seed-conn", AuthorizationType="API_KEY",
            AuthParameters={"ApiKeyAuthParameters": {"ApiKeyName": "x-api-key", "ApiKeyValue": "k"}})
        dest = self.events.create_api_destination(
            Name="seed-hook", ConnectionArn=conn["ConnectionArn"], InvocationEndpoint=self.receiver.url,
            HttpMethod="POST")["ApiDestinationArn"]
        for rule, pattern in (("seed-job-failed", SERVICE_JOB_FAILED), ("seed-alarms", ALARM_EVENTS)):
            self.events.put_rule(Name=rule, EventPattern=pattern)
            self.events.put_targets(Rule=rule, Targets=[{"Id": "hook", "Arn": dest}])

        gate = os.path.join(self.work_dir, "gate")
        holder = self.submit(q, self.command_payload("seed-holder", f"while [ ! -e {gate} ]; do sleep 0.1; done",
                                                     StoppingCondition={"MaxRuntimeInSeconds": 86400}))
        self.wait_jobs([holder], statuses=("RUNNING",))
        waiter = self.submit(q, self.command_payload("seed-waiter", "true"))
        self.wait_jobs([waiter], statuses=("RUNNABLE",))
        self.minute()  # nothing yet: with notBreaching, no data is OK
        self.assertEqual([self.alarm(n)["StateValue"] for n in ("seed-failures", "seed-long-wait")], ["OK", "OK"])
        self.advance(660)  # the waiter has waited 11 minutes
        self.minute()
        self.assertEqual(self.alarm("seed-long-wait")["StateValue"], "OK")  # still waiting: not measured yet
        open(gate, "w").close()
        self.wait_jobs([holder, waiter])
        broken = self.submit(q, self.command_payload("seed-broken", "exit 3"))
        self.assertEqual(self.wait_jobs([broken])[0]["status"], "FAILED")

        # Sampled at the next minute, seen by the evaluation after it (two minutes on); a quiet
        # minute after that is OK again. The job's wait and the failure are normally sampled in the
        # same minute; the steps below do not depend on it.
        names = ("seed-failures", "seed-long-wait")
        seen = {n: [] for n in names}
        wait = None
        for _ in range(5):
            self.minute()
            for n in names:
                seen[n].append(self.alarm(n)["StateValue"])
            if seen["seed-long-wait"][-1] == "ALARM":
                self.assertEqual(self.gauge("seed-long-wait"), 1)
                wait = self.alarm("seed-long-wait")
            if all("ALARM" in states and states[-1] == "OK" for states in seen.values()):
                break
        for n in names:  # each was OK, then ALARM for exactly one minute, then OK
            self.assertEqual([s for i, s in enumerate(seen[n]) if i == 0 or s != seen[n][i - 1]][-3:],
                             ["OK", "ALARM", "OK"], (n, seen[n]))
            self.assertEqual(seen[n].count("ALARM"), 1, (n, seen[n]))
        self.assertEqual(self.gauge("seed-long-wait"), 0)
        self.assertEqual((wait["Namespace"], wait["MetricName"], wait["Dimensions"], wait["Statistic"], wait["Threshold"]),
                         ("AWS/Batch", "JobAttemptRunnableToScheduledDuration", by_queue, "Maximum", 600000.0))
        self.assertTrue(wait["AlarmArn"].startswith(f"arn:aws:cloudwatch:{REGION}:"), wait["AlarmArn"])
        self.assertTrue(wait["AlarmArn"].endswith(":alarm:seed-long-wait"), wait["AlarmArn"])
        self.assertGreaterEqual(wait["StateTransitionedTimestamp"], wait["AlarmConfigurationUpdatedTimestamp"])
        self.assertIn("600000", wait["StateReason"])
        json.loads(wait["StateReasonData"])
        for name in ("seed-failures", "seed-long-wait"):
            self.assertEqual(self.transitions(name),
                             [("INSUFFICIENT_DATA", "OK"), ("OK", "ALARM"), ("ALARM", "OK")], name)

        # Delivered through the rules' HTTP target: the failed job (only it), and each alarm's changes.
        got = self.receiver.wait(lambda ev: len([e for e in ev if e["detail"].get("alarmName", "").startswith("seed-")]) >= 6
                                 and any(e["detail-type"] == SERVICE_JOB for e in ev), what="the FAILED job and 6 alarm events")
        self.assertEqual([(e["detail"]["jobId"], e["detail"]["status"]) for e in got if e["detail-type"] == SERVICE_JOB],
                         [(broken, "FAILED")])
        alarms = [e for e in got if e["detail-type"] == ALARM_CHANGE and e["detail"]["alarmName"].startswith("seed-")]
        for name in ("seed-failures", "seed-long-wait"):
            mine = [e for e in alarms if e["detail"]["alarmName"] == name]
            self.assertEqual([e["detail"]["state"]["value"] for e in mine], ["OK", "ALARM", "OK"], name)
        fired = next(e for e in alarms if e["detail"]["alarmName"] == "seed-long-wait" and e["detail"]["state"]["value"] == "ALARM")
        self.assertEqual((fired["source"], fired["resources"]), ("aws.cloudwatch", [wait["AlarmArn"]]))
        self.assertEqual(fired["detail"]["previousState"]["value"], "OK")
        reason_data = json.loads(fired["detail"]["state"]["reasonData"])
        self.assertIsInstance(reason_data, dict)
        config = fired["detail"]["configuration"]
        self.assertEqual(config["description"], "A job waited over 10 minutes for capacity")
        [metric] = config["metrics"]
        self.assertEqual(metric["metricStat"], {"metric": {"namespace": "AWS/Batch",
                                                           "name": "JobAttemptRunnableToScheduledDuration",
                                                           "dimensions": {"JobQueueName": q}},
                                                "period": 60, "stat": "Maximum"})
        self.assertTrue(metric["returnData"])
        # The same events are in the server's event log.
        self.assertEqual([e["detail"]["state"]["value"] for e in self.alarm_events("seed-long-wait")], ["OK", "ALARM", "OK"])


class UserMetricAlarmTest(ClockedAlarmTest):
    def test_m_of_n_with_each_treat_missing_data_makes_exactly_these_transitions(self):
        treatments = {"m": "missing", "nb": "notBreaching", "b": "breaching", "ig": "ignore"}
        for name, treat in treatments.items():
            self.cw.put_metric_alarm(**threshold_alarm(name, EvaluationPeriods=3, DatapointsToAlarm=2,
                                                       TreatMissingData=treat))
        # Each step: the minute's value (None: nothing put), then the states after its evaluation.
        # 2 of the last 3 minutes above 5 is ALARM; `breaching` counts missing minutes as above.
        steps = [
            (None, dict(m="INSUFFICIENT_DATA", nb="OK", b="ALARM", ig="INSUFFICIENT_DATA")),  # [_ _ _]
            (10, dict(m="OK", nb="OK", b="ALARM", ig="OK")),                                  # [_ _ 10]
            (10, dict(m="ALARM", nb="ALARM", b="ALARM", ig="ALARM")),                         # [_ 10 10]
            (1, dict(m="ALARM", nb="ALARM", b="ALARM", ig="ALARM")),                          # [10 10 1]
            (None, dict(m="OK", nb="OK", b="ALARM", ig="OK")),                                # [10 1 _]
            (None, dict(m="OK", nb="OK", b="ALARM", ig="OK")),                                # [1 _ _]
            ("set", dict(m="ALARM", nb="OK", b="ALARM", ig="ALARM")),  # SetAlarmState, no evaluation
            (None, dict(m="INSUFFICIENT_DATA", nb="OK", b="ALARM", ig="ALARM")),              # [_ _ _]: ignore keeps
            (1, dict(m="OK", nb="OK", b="ALARM", ig="OK")),                                   # [_ _ 1]
            (1, dict(m="OK", nb="OK", b="OK", ig="OK")),                                      # [_ 1 1]
        ]
        for i, (value, want) in enumerate(steps):
            if value == "set":
                for name in ("m", "ig"):
                    self.cw.set_alarm_state(AlarmName=name, StateValue="ALARM", StateReason="drill",
                                            StateReasonData=json.dumps({"step": i}))
            else:
                if value is not None:
                    self.put(value)
                self.minute()
            got = {name: self.alarm(name)["StateValue"] for name in treatments}
            self.assertEqual(got, want, f"step {i} (value {value})")
        self.assertEqual(self.transitions("m"), [("INSUFFICIENT_DATA", "OK"), ("OK", "ALARM"), ("ALARM", "OK"),
                                                 ("OK", "ALARM"), ("ALARM", "INSUFFICIENT_DATA"),
                                                 ("INSUFFICIENT_DATA", "OK")])
        self.assertEqual(self.transitions("nb"), [("INSUFFICIENT_DATA", "OK"), ("OK", "ALARM"), ("ALARM", "OK")])
        self.assertEqual(self.transitions("b"), [("INSUFFICIENT_DATA", "ALARM"), ("ALARM", "OK")])
        self.assertEqual(self.transitions("ig"), [("INSUFFICIENT_DATA", "OK"), ("OK", "ALARM"), ("ALARM", "OK"),
                                                  ("OK", "ALARM"), ("ALARM", "OK")])
        # Every change is an event, in the same order.
        self.assertEqual([e["detail"]["state"]["value"] for e in self.alarm_events("ig")],
                         ["OK", "ALARM", "OK", "ALARM", "OK"])
        drill = [e for e in self.alarm_events("m") if e["detail"]["state"]["reason"] == "drill"]
        self.assertEqual(len(drill), 1)
        self.assertEqual(json.loads(drill[0]["detail"]["state"]["reasonData"]), {"step": 6})

    def test_a_metric_math_alarm_on_the_failure_ratio(self):
        metric = lambda name: {"Namespace": NS, "MetricName": name, "Dimensions": DIMS}
        self.cw.put_metric_alarm(
            AlarmName="ratio", EvaluationPeriods=1, Threshold=0.5, ComparisonOperator="GreaterThanThreshold",
            Metrics=[{"Id": "bad", "MetricStat": {"Metric": metric("Failed"), "Period": 60, "Stat": "Sum"},
                      "ReturnData": False},
                     {"Id": "all", "MetricStat": {"Metric": metric("Ended"), "Period": 60, "Stat": "Sum"},
                      "ReturnData": False},
                     {"Id": "ratio", "Expression": "FILL(bad, 0) / all", "Label": "failure ratio"}])
        stored = self.alarm("ratio")
        self.assertEqual([q["Id"] for q in stored["Metrics"]], ["bad", "all", "ratio"])
        self.assertNotIn("MetricName", stored)
        for failed, ended, want in ((3, 4, "ALARM"), (None, 4, "OK"), (2, 2, "ALARM")):
            if failed is not None:
                self.put(failed, name="Failed")
            self.put(ended, name="Ended")
            self.minute()
            self.assertEqual(self.alarm("ratio")["StateValue"], want, (failed, ended))
        self.assertEqual(self.transitions("ratio"), [("INSUFFICIENT_DATA", "ALARM"), ("ALARM", "OK"), ("OK", "ALARM")])
        [event] = [e for e in self.alarm_events("ratio") if e["detail"]["previousState"]["value"] == "INSUFFICIENT_DATA"]
        self.assertEqual([(m["id"], m["returnData"]) for m in event["detail"]["configuration"]["metrics"]],
                         [("bad", False), ("all", False), ("ratio", True)])


class PercentileAlarmTest(ClockedAlarmTest):
    def test_an_extended_statistic_alarm_reads_the_percentile(self):
        for p in ("p50", "p99"):
            self.cw.put_metric_alarm(**{k: v for k, v in threshold_alarm(p, ExtendedStatistic=p).items()
                                        if k != "Statistic"})
        self.assertEqual(self.alarm("p99")["ExtendedStatistic"], "p99")
        self.assertNotIn("Statistic", self.alarm("p99"))
        at = utc(self.minute_start() + 1)
        self.cw.put_metric_data(Namespace=NS, MetricData=[
            {"MetricName": "Loss", "Dimensions": DIMS, "Value": v, "Timestamp": at} for v in (1.0, 2.0, 3.0, 100.0)])
        self.minute()
        self.assertEqual((self.alarm("p50")["StateValue"], self.alarm("p99")["StateValue"]), ("OK", "ALARM"))


class ConfigurationRulesTest(AlarmTestBase):
    server_args = ["--clock=offset"]
    server_config = """
[[alarms]]
name = "cfg-long-wait"
rule = "runnable_longer_than"
seconds = 600
queue = "cq"

[[alarms]]
name = "cfg-failures"
rule = "failure_ratio"
threshold = 0.5
window_seconds = 600
min_jobs = 2
"""

    def test_configuration_file_rules_are_listed_as_alarms_and_cannot_be_changed(self):
        self.cw.put_metric_alarm(**threshold_alarm("api-alarm", TreatMissingData="ignore"))
        listed = self.cw.describe_alarms()
        self.assertEqual(listed["CompositeAlarms"], [])
        self.assertEqual([a["AlarmName"] for a in listed["MetricAlarms"]], ["api-alarm", "cfg-failures", "cfg-long-wait"])
        wait = self.alarm("cfg-long-wait")
        self.assertEqual((wait["Namespace"], wait["MetricName"], wait["Dimensions"], wait["ComparisonOperator"],
                          wait["Threshold"], wait["StateValue"]),
                         ("trainyard/AlarmRules", "runnable_longer_than", [{"Name": "JobQueueName", "Value": "cq"}],
                          "GreaterThanThreshold", 600.0, "OK"))
        self.assertIn("configuration file", wait["AlarmDescription"])
        ratio = self.alarm("cfg-failures")
        self.assertEqual((ratio["MetricName"], ratio.get("Dimensions", []), ratio["Threshold"]),
                         ("failure_ratio", [], 0.5))
        for call in (lambda: self.cw.put_metric_alarm(**threshold_alarm("cfg-long-wait")),
                     lambda: self.cw.delete_alarms(AlarmNames=["api-alarm", "cfg-failures"])):
            with self.assertRaises(ClientError) as ctx:
                call()
            code, message = error(ctx)
            self.assertEqual(code, "InvalidParameterValue")
            self.assertIn("configuration file", message)
        self.assertEqual(len(self.cw.describe_alarms()["MetricAlarms"]), 3)  # nothing deleted
        self.assertEqual(self.alarm("cfg-long-wait")["Namespace"], "trainyard/AlarmRules")

        # The rule fires as before, and DescribeAlarms shows it.
        q = self.create_queue("cq", capacity=1)
        gate = os.path.join(self.work_dir, "gate")
        holder = self.submit(q, self.command_payload("cq-holder", f"while [ ! -e {gate} ]; do sleep 0.1; done",
                                                     StoppingCondition={"MaxRuntimeInSeconds": 86400}))
        waiter = self.submit(q, self.command_payload("cq-waiter", "true"))
        self.wait_jobs([waiter], statuses=("RUNNABLE",))
        self.advance(700)
        self.wait_state("cfg-long-wait", "ALARM")
        self.assertEqual([a["AlarmName"] for a in self.cw.describe_alarms(StateValue="ALARM")["MetricAlarms"]],
                         ["cfg-long-wait"])
        open(gate, "w").close()
        self.wait_jobs([holder, waiter])
        self.wait_state("cfg-long-wait", "OK")


class AlarmApiTest(AlarmTestBase):
    """The operations through boto3 on the server's real clock: every alarm here treats missing data
    as `ignore`, so a real minute's evaluation (no data) leaves the states the test sets."""

    def test_boto3_put_describe_history_set_state_actions_and_delete(self):
        self.cw.put_metric_alarm(**threshold_alarm("b-pager", AlarmDescription="pages on loss", Unit="Count",
                                                   TreatMissingData="ignore", AlarmActions=[PAGER],
                                                   OKActions=["arn:aws:sns:us-east-1:000000000000:ok"]))
        for name in ("a-quiet", "c-other"):
            self.cw.put_metric_alarm(**threshold_alarm(name, TreatMissingData="ignore", ActionsEnabled=False,
                                                       Statistic="Average", EvaluationPeriods=5, DatapointsToAlarm=3,
                                                       Period=300))
        a = self.alarm("b-pager")
        want = {"AlarmName": "b-pager", "AlarmDescription": "pages on loss", "ActionsEnabled": True,
                "OKActions": ["arn:aws:sns:us-east-1:000000000000:ok"], "AlarmActions": [PAGER],
                "InsufficientDataActions": [], "StateValue": "INSUFFICIENT_DATA",
                "StateReason": "Unchecked: Initial alarm creation", "MetricName": "Loss", "Namespace": NS,
                "Statistic": "Maximum", "Dimensions": DIMS, "Period": 60, "Unit": "Count", "EvaluationPeriods": 1,
                "DatapointsToAlarm": 1, "Threshold": 5.0, "ComparisonOperator": "GreaterThanThreshold",
                "TreatMissingData": "ignore"}
        self.assertEqual({k: a.get(k) for k in want}, want)
        for k in ("AlarmArn", "AlarmConfigurationUpdatedTimestamp", "StateUpdatedTimestamp"):
            self.assertIn(k, a)
        self.assertEqual(self.alarm("c-other")["DatapointsToAlarm"], 3)

        # Filters and paging, sorted by name.
        names = lambda **kw: [x["AlarmName"] for x in self.cw.describe_alarms(**kw)["MetricAlarms"]]
        self.assertEqual(names(), ["a-quiet", "b-pager", "c-other"])
        self.assertEqual(names(AlarmNamePrefix="b-"), ["b-pager"])
        self.assertEqual(names(AlarmNames=["c-other", "nope", "a-quiet"]), ["a-quiet", "c-other"])
        self.assertEqual(names(ActionPrefix="arn:aws:sns:us-east-1:000000000000:onc"), ["b-pager"])
        page = self.cw.describe_alarms(MaxRecords=2)
        self.assertEqual([x["AlarmName"] for x in page["MetricAlarms"]], ["a-quiet", "b-pager"])
        rest = self.cw.describe_alarms(MaxRecords=2, NextToken=page["NextToken"])
        self.assertEqual([x["AlarmName"] for x in rest["MetricAlarms"]], ["c-other"])
        self.assertNotIn("NextToken", rest)
        for_metric = lambda **kw: sorted(x["AlarmName"] for x in self.cw.describe_alarms_for_metric(
            Namespace=NS, MetricName="Loss", **kw)["MetricAlarms"])
        self.assertEqual(for_metric(), ["a-quiet", "b-pager", "c-other"])
        self.assertEqual(for_metric(Statistic="Maximum", Dimensions=DIMS, Period=60), ["b-pager"])
        self.assertEqual(for_metric(Period=300), ["a-quiet", "c-other"])
        self.assertEqual(self.cw.describe_alarms_for_metric(Namespace=NS, MetricName="Other")["MetricAlarms"], [])

        # SetAlarmState: the state, an event, history, the gauge; the ALARM action is recorded as Failed.
        self.cw.set_alarm_state(AlarmName="b-pager", StateValue="ALARM", StateReason="drill",
                                StateReasonData=json.dumps({"why": "test"}))
        a = self.alarm("b-pager")
        self.assertEqual((a["StateValue"], a["StateReason"], json.loads(a["StateReasonData"])),
                         ("ALARM", "drill", {"why": "test"}))
        self.assertEqual(self.gauge("b-pager"), 1)
        self.assertEqual(self.names_in_state("ALARM"), ["b-pager"])
        [event] = self.alarm_events("b-pager")
        self.assertEqual((event["source"], event["detail-type"], event["resources"]),
                         ("aws.cloudwatch", ALARM_CHANGE, [a["AlarmArn"]]))
        self.assertEqual((event["detail"]["state"]["value"], event["detail"]["previousState"]["value"]),
                         ("ALARM", "INSUFFICIENT_DATA"))
        actions = self.history("b-pager", "Action")
        self.assertEqual(len(actions), 1)
        self.assertEqual(json.loads(actions[0]["HistoryData"])["actionState"], "Failed")
        self.assertIn(PAGER, actions[0]["HistoryData"] + actions[0]["HistorySummary"])
        kinds = [(h["HistoryItemType"], h["AlarmType"]) for h in self.history("b-pager")]
        self.assertEqual(sorted(kinds), [("Action", "MetricAlarm"), ("ConfigurationUpdate", "MetricAlarm"),
                                         ("StateUpdate", "MetricAlarm")])
        [created] = self.history("b-pager", "ConfigurationUpdate")
        self.assertEqual(created["HistorySummary"], 'Alarm "b-pager" created')
        json.loads(created["HistoryData"])
        hour = datetime.timedelta(hours=1)
        window = lambda start, end: len(self.cw.describe_alarm_history(AlarmName="b-pager", StartDate=start,
                                                                       EndDate=end)["AlarmHistoryItems"])
        self.assertEqual((window(created["Timestamp"] - hour, created["Timestamp"] + hour),
                          window(created["Timestamp"] + hour, created["Timestamp"] + 2 * hour),
                          window(created["Timestamp"] - 2 * hour, created["Timestamp"] - hour)), (3, 0, 0))
        composite = self.cw.describe_alarms(AlarmTypes=["CompositeAlarm"])  # none are served
        self.assertEqual((composite.get("MetricAlarms", []), composite.get("CompositeAlarms", [])), ([], []))
        self.assertEqual(names(AlarmTypes=["CompositeAlarm", "MetricAlarm"]), ["a-quiet", "b-pager", "c-other"])
        newest = self.cw.describe_alarm_history(AlarmName="b-pager", MaxRecords=1)
        self.assertEqual(len(newest["AlarmHistoryItems"]), 1)
        older = self.cw.describe_alarm_history(AlarmName="b-pager", MaxRecords=1, NextToken=newest["NextToken"])
        self.assertGreaterEqual(newest["AlarmHistoryItems"][0]["Timestamp"], older["AlarmHistoryItems"][0]["Timestamp"])

        # Disabled actions record no Action item; enabling them again does.
        self.cw.disable_alarm_actions(AlarmNames=["b-pager", "not-there"])
        self.assertFalse(self.alarm("b-pager")["ActionsEnabled"])
        self.cw.set_alarm_state(AlarmName="b-pager", StateValue="OK", StateReason="quiet")
        self.cw.set_alarm_state(AlarmName="b-pager", StateValue="ALARM", StateReason="again")
        self.assertEqual(len(self.history("b-pager", "Action")), 1)
        self.cw.enable_alarm_actions(AlarmNames=["b-pager"])
        self.assertTrue(self.alarm("b-pager")["ActionsEnabled"])
        self.cw.set_alarm_state(AlarmName="b-pager", StateValue="OK", StateReason="ok action")
        self.assertEqual(len(self.history("b-pager", "Action")), 2)  # the OK action
        self.assertEqual(self.transitions("b-pager"), [("INSUFFICIENT_DATA", "ALARM"), ("ALARM", "OK"),
                                                       ("OK", "ALARM"), ("ALARM", "OK")])
        self.assertEqual(self.gauge("b-pager"), 0)

        # Putting an existing name replaces its configuration and keeps its state.
        self.cw.set_alarm_state(AlarmName="a-quiet", StateValue="ALARM", StateReason="kept")
        self.cw.put_metric_alarm(**threshold_alarm("a-quiet", Threshold=9.0, TreatMissingData="ignore"))
        a = self.alarm("a-quiet")
        self.assertEqual((a["Threshold"], a["Statistic"], a["StateValue"], a["StateReason"]), (9.0, "Maximum", "ALARM", "kept"))
        self.assertEqual([h["HistorySummary"] for h in self.history("a-quiet", "ConfigurationUpdate")],
                         ['Alarm "a-quiet" created', 'Alarm "a-quiet" updated'])

        # DeleteAlarms: any unknown name refuses the whole call.
        with self.assertRaises(ClientError) as ctx:
            self.cw.delete_alarms(AlarmNames=["a-quiet", "nope"])
        self.assertEqual(error(ctx)[0], "ResourceNotFound")
        self.assertEqual(names(), ["a-quiet", "b-pager", "c-other"])
        self.cw.delete_alarms(AlarmNames=["a-quiet", "c-other"])
        self.assertEqual(names(), ["b-pager"])
        with self.assertRaises(ClientError) as ctx:
            self.cw.set_alarm_state(AlarmName="a-quiet", StateValue="OK", StateReason="gone")
        self.assertEqual(error(ctx)[0], "ResourceNotFound")

    def names_in_state(self, state):
        return [x["AlarmName"] for x in self.cw.describe_alarms(StateValue=state)["MetricAlarms"]]

    def test_rpc_v2_cbor_round_trip(self):
        with cbor_protocol():
            cw = self.server.client("cloudwatch", validate=False)  # EvaluationPeriods=0 below reaches the server
            cw.put_metric_alarm(**threshold_alarm("cbor", TreatMissingData="ignore", AlarmActions=[PAGER]))
            cw.set_alarm_state(AlarmName="cbor", StateValue="ALARM", StateReason="over CBOR")
            a = self.alarm("cbor", cw)
            history = cw.describe_alarm_history(AlarmName="cbor", HistoryItemType="StateUpdate")["AlarmHistoryItems"]
            for_metric = cw.describe_alarms_for_metric(Namespace=NS, MetricName="Loss")["MetricAlarms"]
            cw.disable_alarm_actions(AlarmNames=["cbor"])
            disabled = self.alarm("cbor", cw)["ActionsEnabled"]
            cw.enable_alarm_actions(AlarmNames=["cbor"])
            with self.assertRaises(ClientError) as ctx:
                cw.put_metric_alarm(**threshold_alarm("cbor-bad", EvaluationPeriods=0))
            cw.delete_alarms(AlarmNames=["cbor"])
            left = cw.describe_alarms()["MetricAlarms"]
            cw.close()
        self.assertEqual((a["StateValue"], a["StateReason"], a["AlarmActions"]), ("ALARM", "over CBOR", [PAGER]))
        self.assertIsInstance(a["StateUpdatedTimestamp"], datetime.datetime)
        self.assertEqual([h["HistorySummary"] for h in history], ["Alarm updated from INSUFFICIENT_DATA to ALARM"])
        self.assertEqual([x["AlarmName"] for x in for_metric], ["cbor"])
        self.assertFalse(disabled)
        self.assertEqual(error(ctx)[0], "InvalidParameterValue")
        self.assertIn("EvaluationPeriods", error(ctx)[1])
        self.assertEqual(left, [])

    def test_hostile_input_is_refused_by_name_and_stores_nothing(self):
        cw = self.server.client("cloudwatch", validate=False)  # what botocore would refuse itself reaches the server
        metric_q = lambda i, **kw: dict({"Id": i, "MetricStat": {"Metric": {"Namespace": NS, "MetricName": "Loss"},
                                                                 "Period": 60, "Stat": "Sum"}}, **kw)
        without = lambda *keys: {k: v for k, v in threshold_alarm("bad").items() if k not in keys}
        refusals = [
            (threshold_alarm(""), ("InvalidParameterValue", "MissingParameter"), "AlarmName"),
            (threshold_alarm("x" * 256), "InvalidParameterValue", "AlarmName"),
            (threshold_alarm("bad", AlarmDescription="d" * 1025), "InvalidParameterValue", "AlarmDescription"),
            (threshold_alarm("bad", AlarmActions=[PAGER + str(i) for i in range(6)]), "InvalidParameterValue", "AlarmActions"),
            (threshold_alarm("bad", OKActions=["sns:not-an-arn"]), "InvalidParameterValue", "OKActions"),
            (threshold_alarm("bad", InsufficientDataActions=["nope"]), "InvalidParameterValue", "InsufficientDataActions"),
            (without("EvaluationPeriods"), "MissingParameter", "EvaluationPeriods"),
            (threshold_alarm("bad", EvaluationPeriods=0), "InvalidParameterValue", "EvaluationPeriods"),
            (threshold_alarm("bad", EvaluationPeriods=3, DatapointsToAlarm=4), "InvalidParameterValue", "DatapointsToAlarm"),
            (threshold_alarm("bad", DatapointsToAlarm=0), "InvalidParameterValue", "DatapointsToAlarm"),
            (without("Threshold"), "MissingParameter", "Threshold"),
            (without("ComparisonOperator"), "MissingParameter", "ComparisonOperator"),
            (threshold_alarm("bad", ComparisonOperator="LessThanLowerOrGreaterThanUpperThreshold"),
             "InvalidParameterValue", "ComparisonOperator"),
            (threshold_alarm("bad", ComparisonOperator="Sideways"), "InvalidParameterValue", "ComparisonOperator"),
            (threshold_alarm("bad", ThresholdMetricId="band"), "InvalidParameterValue", "ThresholdMetricId"),
            (threshold_alarm("bad", TreatMissingData="sometimes"), "InvalidParameterValue", "TreatMissingData"),
            (threshold_alarm("bad", EvaluateLowSampleCountPercentile="maybe"), "InvalidParameterValue",
             "EvaluateLowSampleCountPercentile"),
            (threshold_alarm("bad", Statistic="Median"), "InvalidParameterValue", "Statistic"),
            (threshold_alarm("bad", ExtendedStatistic="p99"), "InvalidParameterCombination", "ExtendedStatistic"),
            (threshold_alarm("bad", EvaluationPeriods=1441), "InvalidParameterValue", "Period"),  # 60 s x 1441 > 86400 s
            (threshold_alarm("bad", Metrics=[metric_q("m")]), "InvalidParameterCombination", "Metrics"),
            (without("MetricName", "Namespace", "Dimensions", "Statistic", "Period") | {
                "Metrics": [metric_q("a"), metric_q("b")]}, "InvalidParameterValue", "ReturnData"),
            (without("MetricName", "Namespace", "Dimensions", "Statistic", "Period") | {
                "Metrics": [metric_q(f"m{i}", ReturnData=i == 0) for i in range(11)]}, "InvalidParameterValue", "Metrics"),
            (without("MetricName", "Namespace", "Dimensions", "Statistic", "Period") | {
                "Metrics": [{"Id": "m", "MetricStat": {"Metric": {"Namespace": NS, "MetricName": "Loss"}, "Stat": "Sum"}}]},
             ("MissingParameter", "InvalidParameterValue"), "Period"),
            (without("MetricName", "Namespace", "Dimensions", "Statistic", "Period") | {
                "Metrics": [metric_q("m", ReturnData=False), {"Id": "e", "Expression": "nope * 2"}]},
             "InvalidParameterValue", "nope"),
        ]
        for args, code, member in refusals:
            with self.assertRaises(ClientError, msg=str(args)[:200]) as ctx:
                cw.put_metric_alarm(**args)
            got_code, message = error(ctx)
            self.assertIn(got_code, code if isinstance(code, tuple) else (code,), f"{str(args)[:200]}: {message}")
            self.assertIn(member, message, str(args)[:200])
        self.assertEqual(self.cw.describe_alarms()["MetricAlarms"], [])

        self.cw.put_metric_alarm(**threshold_alarm("good", TreatMissingData="ignore"))
        other = [
            (lambda: cw.set_alarm_state(AlarmName="good", StateValue="MAYBE", StateReason="x"),
             "InvalidParameterValue", "StateValue"),
            (lambda: cw.set_alarm_state(AlarmName="good", StateValue="ALARM"), "MissingParameter", "StateReason"),
            (lambda: cw.set_alarm_state(AlarmName="good", StateValue="ALARM", StateReason="r" * 1024),
             "InvalidParameterValue", "StateReason"),
            (lambda: cw.set_alarm_state(AlarmName="good", StateValue="ALARM", StateReason="x", StateReasonData="{not json"),
             "InvalidParameterValue", "StateReasonData"),
            (lambda: cw.set_alarm_state(AlarmName="good", StateValue="ALARM", StateReason="x",
                                        StateReasonData=json.dumps({"k": "v" * 4000})),
             "InvalidParameterValue", "StateReasonData"),
            (lambda: cw.describe_alarms(AlarmNames=["good"], AlarmNamePrefix="g"), "InvalidParameterCombination",
             "AlarmNamePrefix"),
            (lambda: cw.describe_alarms(MaxRecords=101), "InvalidParameterValue", "MaxRecords"),
            (lambda: cw.describe_alarms(AlarmNames=[f"a{i}" for i in range(101)]), "InvalidParameterValue", "AlarmNames"),
            (lambda: cw.describe_alarm_history(AlarmName="good", MaxRecords=0), "InvalidParameterValue", "MaxRecords"),
            (lambda: cw.describe_alarm_history(AlarmName="good", HistoryItemType="Everything"),
             "InvalidParameterValue", "HistoryItemType"),
            (lambda: cw.delete_alarms(AlarmNames=[]), ("InvalidParameterValue", "MissingParameter"), "AlarmNames"),
            (lambda: cw.delete_alarms(AlarmNames=["good"] * 101), "InvalidParameterValue", "AlarmNames"),
            (lambda: cw.describe_alarms_for_metric(MetricName="Loss"), "MissingParameter", "Namespace"),
        ]
        for call, code, member in other:
            with self.assertRaises(ClientError) as ctx:
                call()
            got_code, message = error(ctx)
            self.assertIn(got_code, code if isinstance(code, tuple) else (code,), message)
            self.assertIn(member, message)
        a = self.alarm("good")
        self.assertEqual((a["StateValue"], a["Threshold"]), ("INSUFFICIENT_DATA", 5.0))
        self.assertEqual(len(self.history("good")), 1)  # its creation only
        cw.close()

    def test_a_user_without_put_metric_alarm_is_refused(self):
        watcher = self.iam_user("watcher", ["cloudwatch:DescribeAlarms", "cloudwatch:DescribeAlarmHistory"])
        self.cw.put_metric_alarm(**threshold_alarm("watched", TreatMissingData="ignore"))
        for call, action in ((lambda: watcher.put_metric_alarm(**threshold_alarm("sneaky")), "cloudwatch:PutMetricAlarm"),
                             (lambda: watcher.set_alarm_state(AlarmName="watched", StateValue="ALARM", StateReason="x"),
                              "cloudwatch:SetAlarmState"),
                             (lambda: watcher.delete_alarms(AlarmNames=["watched"]), "cloudwatch:DeleteAlarms")):
            with self.assertRaises(ClientError) as ctx:
                call()
            code, message = error(ctx)
            self.assertEqual(code, "AccessDeniedException", message)
            self.assertIn(action, message)
        self.assertEqual([a["AlarmName"] for a in watcher.describe_alarms()["MetricAlarms"]], ["watched"])
        self.assertEqual(self.alarm("watched")["StateValue"], "INSUFFICIENT_DATA")
        watcher.close()
        # Both the refusal and the change are audited.
        found = self.server.admin("admin/audit", {"LookupAttributes": [
            {"AttributeKey": "EventName", "AttributeValue": "PutMetricAlarm"}]})["Events"]
        codes = sorted((json.loads(e["CloudTrailEvent"]).get("errorCode") or "") for e in found)
        self.assertEqual(codes, ["", "AccessDeniedException"])


class AlarmLimitTest(AlarmTestBase):
    server_config = "[cloudwatch]\nmax_alarms = 2\n"

    def test_max_alarms_refuses_a_new_alarm_but_not_a_replacement(self):
        for name in ("one", "two"):
            self.cw.put_metric_alarm(**threshold_alarm(name, TreatMissingData="ignore"))
        with self.assertRaises(self.cw.exceptions.LimitExceededFault) as ctx:  # as PutMetricAlarm's model names it
            self.cw.put_metric_alarm(**threshold_alarm("three"))
        code, message = error(ctx)
        self.assertEqual(code, "LimitExceeded")
        self.assertIn("max_alarms", message)
        self.cw.put_metric_alarm(**threshold_alarm("two", Threshold=7.0, TreatMissingData="ignore"))
        self.assertEqual([(a["AlarmName"], a["Threshold"]) for a in self.cw.describe_alarms()["MetricAlarms"]],
                         [("one", 5.0), ("two", 7.0)])


class AlarmRestartTest(AlarmTestBase):
    def test_kill_9_keeps_alarms_state_and_history(self):
        self.cw.put_metric_alarm(**threshold_alarm("durable", AlarmDescription="before", TreatMissingData="ignore",
                                                   AlarmActions=[PAGER]))
        self.cw.set_alarm_state(AlarmName="durable", StateValue="ALARM", StateReason="drill",
                                StateReasonData=json.dumps({"n": 1}))
        self.cw.put_metric_alarm(**threshold_alarm("durable", AlarmDescription="after", TreatMissingData="ignore",
                                                   AlarmActions=[PAGER], Threshold=8.0))
        self.cw.put_metric_alarm(**threshold_alarm("last", TreatMissingData="ignore"))  # acknowledged, then killed
        before = {a["AlarmName"]: a for a in self.cw.describe_alarms()["MetricAlarms"]}
        history = self.history("durable")
        self.cw.close()
        self.server.kill9()
        self.server = self.new_server()
        self.cw = self.server.client("cloudwatch")
        after = {a["AlarmName"]: a for a in self.cw.describe_alarms()["MetricAlarms"]}
        self.assertEqual(after, before)
        self.assertEqual((after["durable"]["StateValue"], after["durable"]["StateReason"],
                          after["durable"]["AlarmDescription"], after["durable"]["Threshold"]),
                         ("ALARM", "drill", "after", 8.0))
        self.assertEqual(self.history("durable"), history)
        self.assertEqual(sorted(h["HistoryItemType"] for h in history),
                         ["Action", "ConfigurationUpdate", "ConfigurationUpdate", "StateUpdate"])
        self.assertEqual(self.gauge("durable"), 1)
        # It goes on from there: an evaluation or a SetAlarmState changes it as before.
        self.cw.set_alarm_state(AlarmName="durable", StateValue="OK", StateReason="after the restart")
        self.assertEqual(self.transitions("durable"), [("INSUFFICIENT_DATA", "ALARM"), ("ALARM", "OK")])


@unittest.skipUnless(shutil.which("aws"), "the aws CLI is not installed")
class AlarmCliTest(AlarmTestBase):
    def aws(self, *args, check=True):
        key, secret = self.server.credentials()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION=REGION,
                   AWS_PAGER="", AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
        r = subprocess.run(["aws", "--endpoint-url", self.server.url, "--output", "json", "cloudwatch", *args],
                           capture_output=True, text=True, env=env, timeout=120)
        if check and r.returncode != 0:
            self.fail(f"aws cloudwatch {' '.join(args)} failed: {r.stderr}")
        return json.loads(r.stdout) if r.stdout.strip() else r

    def test_the_aws_cli(self):
        self.aws("put-metric-alarm", "--alarm-name", "cli-loss", "--alarm-description", "from the CLI",
                 "--namespace", NS, "--metric-name", "Loss", "--dimensions", "Name=Run,Value=r1",
                 "--statistic", "Maximum", "--period", "60", "--evaluation-periods", "2", "--datapoints-to-alarm", "1",
                 "--threshold", "5", "--comparison-operator", "GreaterThanThreshold",
                 "--treat-missing-data", "ignore", "--alarm-actions", PAGER)
        [a] = self.aws("describe-alarms", "--alarm-names", "cli-loss")["MetricAlarms"]
        self.assertEqual((a["AlarmDescription"], a["EvaluationPeriods"], a["DatapointsToAlarm"], a["Threshold"],
                          a["StateValue"], a["AlarmActions"], a["Dimensions"]),
                         ("from the CLI", 2, 1, 5.0, "INSUFFICIENT_DATA", [PAGER], DIMS))
        self.assertIsInstance(a["StateUpdatedTimestamp"], (int, float))  # JSON 1.0 epoch seconds, printed as they came
        self.aws("set-alarm-state", "--alarm-name", "cli-loss", "--state-value", "ALARM", "--state-reason", "cli drill")
        self.assertEqual(self.aws("describe-alarms", "--state-value", "ALARM")["MetricAlarms"][0]["AlarmName"], "cli-loss")
        items = self.aws("describe-alarm-history", "--alarm-name", "cli-loss", "--scan-by", "TimestampAscending")
        self.assertEqual(items["AlarmHistoryItems"][0]["HistoryItemType"], "ConfigurationUpdate")
        self.assertEqual({h["HistoryItemType"] for h in items["AlarmHistoryItems"]},
                         {"ConfigurationUpdate", "StateUpdate", "Action"})
        self.assertEqual([x["AlarmName"] for x in self.aws("describe-alarms-for-metric", "--namespace", NS,
                                                            "--metric-name", "Loss")["MetricAlarms"]], ["cli-loss"])
        self.aws("disable-alarm-actions", "--alarm-names", "cli-loss")
        self.assertFalse(self.alarm("cli-loss")["ActionsEnabled"])
        self.aws("enable-alarm-actions", "--alarm-names", "cli-loss")
        self.assertTrue(self.alarm("cli-loss")["ActionsEnabled"])
        r = self.aws("put-metric-alarm", "--alarm-name", "cli-bad", "--namespace", NS, "--metric-name", "Loss",
                     "--statistic", "Maximum", "--period", "60", "--evaluation-periods", "1", "--threshold", "1",
                     "--comparison-operator", "GreaterThanThreshold", "--treat-missing-data", "sometimes", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("InvalidParameterValue", r.stderr)
        self.assertIn("TreatMissingData", r.stderr)
        r = self.aws("delete-alarms", "--alarm-names", "cli-loss", "nope", check=False)
        self.assertIn("ResourceNotFound", r.stderr)
        self.aws("delete-alarms", "--alarm-names", "cli-loss")
        self.assertEqual(self.aws("describe-alarms")["MetricAlarms"], [])


if __name__ == "__main__":
    unittest.main()
