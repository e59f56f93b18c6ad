"""CloudWatch's metrics API (docs/metrics.md, "The CloudWatch API") through boto3 and the aws CLI:
PutMetricData then ListMetrics, GetMetricStatistics (statistics and percentiles) and GetMetricData
(metric math, MaxDatapoints paging) read exactly what was put, in JSON 1.0 and in rpc-v2-cbor;
the data survives a restart; hostile input is refused with CloudWatch's error naming the member
and stores nothing; a user without cloudwatch:GetMetricData is refused."""
import datetime
import json
import os
import re
import time
import urllib.request
import shutil
import subprocess
import unittest
import urllib.parse
import http.client

import botocore.auth
import botocore.awsrequest
import botocore.credentials
from botocore.config import Config
from botocore.exceptions import ClientError
import boto3

from harness import ServerTest, REGION, speaking

NS = "Team/Train"
DIMS = [{"Name": "Run", "Value": "r1"}]
ALLOW_GET_DATA = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["cloudwatch:GetMetricData", "cloudwatch:PutMetricData"], "Resource": "*"}]}
ALLOW_LIST = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "cloudwatch:ListMetrics", "Resource": "*"}]}


def cbor_protocol():
    """Clients made inside speak Smithy RPC v2 CBOR (botocore 1.43 prefers JSON 1.0 for CloudWatch)."""
    return speaking("smithy-rpc-v2-cbor")


class CloudWatchTest(ServerTest):
    def setUp(self):
        super().setUp()
        self.cw = self.server.client("cloudwatch")
        # Whole minutes, a few minutes back: the data lands in three known minute buckets.
        self.t0 = datetime.datetime.now(datetime.timezone.utc).replace(second=0, microsecond=0) - datetime.timedelta(minutes=10)

    def put_loss(self, cw=None):
        (cw or self.cw).put_metric_data(Namespace=NS, MetricData=[
            {"MetricName": "Loss", "Dimensions": DIMS, "Value": v, "Unit": "Count",
             "Timestamp": self.t0 + datetime.timedelta(minutes=m, seconds=5)}
            for m, v in [(0, 1.0), (0, 3.0), (1, 10.0), (3, 7.0)]])

    def stats(self, cw=None, **kw):
        args = dict(Namespace=NS, MetricName="Loss", Dimensions=DIMS, StartTime=self.t0,
                    EndTime=self.t0 + datetime.timedelta(minutes=5), Period=60)
        args.update(kw)
        return sorted((cw or self.cw).get_metric_statistics(**args)["Datapoints"], key=lambda d: d["Timestamp"])

    def signed(self, path, body, headers):
        key, secret = self.server.credentials()
        req = botocore.awsrequest.AWSRequest(method="POST", url=self.server.url + path, data=body, headers=headers)
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), "monitoring", REGION).add_auth(req)
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("POST", path, body=req.body, headers=dict(req.headers.items()))
        resp = conn.getresponse()
        out = resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), resp.read()
        conn.close()
        return out

    def test_put_then_read_back_with_statistics_percentiles_and_metric_math(self):
        self.put_loss()
        # The put is audited like every call (docs/security.md, "Audit").
        found = self.server.admin("admin/audit", {"LookupAttributes": [
            {"AttributeKey": "EventName", "AttributeValue": "PutMetricData"}]})["Events"]
        self.assertEqual(len(found), 1)
        record = json.loads(found[0]["CloudTrailEvent"])
        self.assertEqual((record["eventName"], record.get("errorCode")), ("PutMetricData", None))
        listed = self.cw.list_metrics(Namespace=NS)["Metrics"]
        self.assertEqual(listed, [{"Namespace": NS, "MetricName": "Loss", "Dimensions": DIMS}])
        self.assertEqual(self.cw.list_metrics(Namespace=NS, Dimensions=[{"Name": "Other"}])["Metrics"], [])
        points = self.stats(Statistics=["SampleCount", "Sum", "Average", "Minimum", "Maximum"])
        self.assertEqual([(p["Timestamp"], p["SampleCount"], p["Sum"], p["Average"], p["Minimum"], p["Maximum"], p["Unit"])
                          for p in points],
                         [(self.t0, 2.0, 4.0, 2.0, 1.0, 3.0, "Count"),
                          (self.t0 + datetime.timedelta(minutes=1), 1.0, 10.0, 10.0, 10.0, 10.0, "Count"),
                          (self.t0 + datetime.timedelta(minutes=3), 1.0, 7.0, 7.0, 7.0, 7.0, "Count")])
        whole = self.stats(Period=300, ExtendedStatistics=["p50", "p100"])
        self.assertEqual([p["ExtendedStatistics"] for p in whole], [{"p50": 3.0, "p100": 10.0}])
        # An unknown dimension is another metric: no data, no error.
        self.assertEqual(self.stats(Dimensions=[{"Name": "Nope", "Value": "x"}], Statistics=["Sum"]), [])
        window = dict(StartTime=self.t0, EndTime=self.t0 + datetime.timedelta(minutes=5))
        metric = {"Namespace": NS, "MetricName": "Loss", "Dimensions": DIMS}
        r = self.cw.get_metric_data(MetricDataQueries=[
            {"Id": "m", "MetricStat": {"Metric": metric, "Period": 60, "Stat": "Sum"}, "ReturnData": False},
            {"Id": "doubled", "Expression": "m * 2 - 1"},
            {"Id": "filled", "Expression": "FILL(m, 0)"},
            {"Id": "repeat", "Expression": "FILL(m, REPEAT)"},
            {"Id": "total", "Expression": "SUM([m, m])"},
            {"Id": "avg", "Expression": "AVG(m)"}], ScanBy="TimestampAscending", **window)["MetricDataResults"]
        by = {x["Id"]: x for x in r}
        self.assertNotIn("m", by)
        minute = lambda k: self.t0 + datetime.timedelta(minutes=k)
        self.assertEqual(by["doubled"]["Values"], [7.0, 19.0, 13.0])
        self.assertEqual(list(zip(by["filled"]["Timestamps"], by["filled"]["Values"])),
                         [(minute(0), 4.0), (minute(1), 10.0), (minute(2), 0.0), (minute(3), 7.0), (minute(4), 0.0)])
        self.assertEqual(by["repeat"]["Values"], [4.0, 10.0, 10.0, 7.0, 7.0])
        self.assertEqual(by["total"]["Values"], [8.0, 20.0, 14.0])
        self.assertEqual(by["avg"]["Values"], [7.0] * 5)
        # MaxDatapoints pages: 2 then the last one, newest first, with a NextToken between.
        q = [{"Id": "m", "MetricStat": {"Metric": metric, "Period": 60, "Stat": "Maximum"}}]
        first = self.cw.get_metric_data(MetricDataQueries=q, MaxDatapoints=2, **window)
        self.assertEqual((first["MetricDataResults"][0]["Values"], first["MetricDataResults"][0]["StatusCode"]),
                         ([7.0, 10.0], "PartialData"))
        rest = self.cw.get_metric_data(MetricDataQueries=q, MaxDatapoints=2, NextToken=first["NextToken"], **window)
        self.assertEqual(rest["MetricDataResults"][0]["Values"], [3.0])
        self.assertNotIn("NextToken", rest)

    def test_rpc_v2_cbor_round_trip_and_a_restart_keeps_the_data(self):
        with cbor_protocol():
            cw = self.server.client("cloudwatch")
            self.put_loss(cw)
            points = self.stats(cw, Statistics=["Sum"])
            listed = cw.list_metrics(Namespace=NS)["Metrics"]
            data = cw.get_metric_data(MetricDataQueries=[
                {"Id": "m", "MetricStat": {"Metric": {"Namespace": NS, "MetricName": "Loss", "Dimensions": DIMS},
                                           "Period": 60, "Stat": "Sum"}}, {"Id": "half", "Expression": "m / 2"}],
                StartTime=self.t0, EndTime=self.t0 + datetime.timedelta(minutes=5), ScanBy="TimestampAscending")
            with self.assertRaises(ClientError) as e:
                cw.put_metric_data(Namespace="AWS/x", MetricData=[{"MetricName": "x", "Value": 1}])
        self.assertEqual(e.exception.response["Error"]["Code"], "InvalidParameterValue")
        half = data["MetricDataResults"][1]
        self.assertEqual(list(zip(half["Timestamps"], half["Values"])),
                         [(self.t0, 2.0), (self.t0 + datetime.timedelta(minutes=1), 5.0),
                          (self.t0 + datetime.timedelta(minutes=3), 3.5)])
        self.assertEqual([(p["Timestamp"], p["Sum"]) for p in points],
                         [(self.t0, 4.0), (self.t0 + datetime.timedelta(minutes=1), 10.0),
                          (self.t0 + datetime.timedelta(minutes=3), 7.0)])
        self.assertEqual(len(listed), 1)
        self.server.stop()
        self.server = self.new_server()
        self.cw = self.server.client("cloudwatch")
        self.assertEqual([p["Sum"] for p in self.stats(Statistics=["Sum"])], [4.0, 10.0, 7.0])

    def test_hostile_input_is_refused_by_name_and_changes_nothing(self):
        self.put_loss()
        refusals = [
            (dict(Namespace="AWS/Batch", MetricData=[{"MetricName": "x", "Value": 1}]), "InvalidParameterValue", "Namespace"),
            (dict(Namespace=NS, MetricData=[{"MetricName": "x", "Value": 1, "StatisticValues": {
                "SampleCount": 1, "Sum": 1, "Minimum": 1, "Maximum": 1}}]), "InvalidParameterCombination", "Value"),
            (dict(Namespace=NS, MetricData=[{"MetricName": "x", "Value": 1,
                                             "Timestamp": datetime.datetime(2001, 1, 1)}]), "InvalidParameterValue", "Timestamp"),
            (dict(Namespace=NS, MetricData=[{"MetricName": "x", "Value": 1, "Dimensions": [
                {"Name": "a", "Value": "1"}, {"Name": "a", "Value": "2"}]}]), "InvalidParameterValue", "Dimensions"),
            (dict(Namespace=NS, MetricData=[{"MetricName": "x", "Value": 1}] * 1001), "InvalidParameterValue", "MetricData"),
        ]
        for args, code, member in refusals:
            with self.assertRaises(ClientError) as e:
                self.cw.put_metric_data(**args)
            self.assertEqual(e.exception.response["Error"]["Code"], code, args)
            self.assertIn(member, e.exception.response["Error"]["Message"])
        metric = {"Namespace": NS, "MetricName": "Loss", "Dimensions": DIMS}
        window = dict(StartTime=self.t0, EndTime=self.t0 + datetime.timedelta(minutes=5))
        for queries, extra, member in [
                ([{"Id": "m", "MetricStat": {"Metric": metric, "Period": 60, "Stat": "Sum"}}], {"MaxDatapoints": 10 ** 9}, "MaxDatapoints"),
                ([{"Id": "M", "MetricStat": {"Metric": metric, "Period": 60, "Stat": "Sum"}}], {}, "Id"),
                ([{"Id": "m", "MetricStat": {"Metric": metric, "Period": 61, "Stat": "Sum"}}], {}, "Period"),
                ([{"Id": "e", "Expression": "nope + 1"}], {}, "nope"),
                ([{"Id": "e", "Expression": "LOG(m)"}], {}, "LOG")]:
            with self.assertRaises(ClientError) as e:
                self.cw.get_metric_data(MetricDataQueries=queries, **window, **extra)
            self.assertEqual(e.exception.response["Error"]["Code"], "InvalidParameterValue")
            self.assertIn(member, e.exception.response["Error"]["Message"])
        with self.assertRaises(ClientError) as e:
            self.stats(Statistics=["Sum"], StartTime=self.t0 - datetime.timedelta(days=2))
        self.assertEqual(e.exception.response["Error"]["Code"], "InvalidParameterCombination")
        with self.assertRaises(ClientError) as e:
            self.cw.get_metric_statistics(Namespace=NS, MetricName="Loss", StartTime=self.t0, EndTime=self.t0, Period=60)
        self.assertEqual(e.exception.response["Error"]["Code"], "InvalidParameterCombination")
        # Bytes that are not CBOR, and CBOR nested past the depth limit: refused, the server answers on.
        cbor_path = "/service/GraniteServiceVersion20100801/operation/PutMetricData"
        headers = {"Content-Type": "application/cbor", "smithy-protocol": "rpc-v2-cbor"}
        for body in (b"\xbf\x61", b"\x81" * 100000, b"\xff\xff"):
            status, h, raw = self.signed(cbor_path, body, headers)
            self.assertEqual((status, h.get("x-amzn-query-error")), (400, "InvalidParameterValue;Sender"), raw[:200])
            self.assertIn(b"InvalidParameterValueException", raw)
        status, h, raw = self.signed("/", b"{}", {"Content-Type": "application/x-amz-json-1.0",
                                                 "X-Amz-Target": "GraniteServiceVersion20100801.DeleteEverything"})
        self.assertEqual(status, 400)
        self.assertIn(b"UnknownOperationException", raw)
        # An unknown action in the query protocol is refused in its own XML shape, naming what is served.
        status, h, raw = self.signed("/", b"Action=DeleteEverything&Version=2010-08-01",
                                     {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
        self.assertEqual(status, 400)
        self.assertIn(b"<Code>InvalidAction</Code>", raw)
        self.assertIn(b"GetMetricData", raw)
        self.assertEqual(self.cw.list_metrics()["Metrics"], [{"Namespace": NS, "MetricName": "Loss", "Dimensions": DIMS}])
        self.assertEqual([p["Sum"] for p in self.stats(Statistics=["Sum"])], [4.0, 10.0, 7.0])

    def test_a_user_needs_cloudwatch_get_metric_data(self):
        self.put_loss()
        admin = lambda op, body: self.server.admin("admin/iam/" + op, body)
        admin("CreatePolicy", {"PolicyName": "cw-read", "PolicyDocument": json.dumps(ALLOW_GET_DATA)})
        admin("CreatePolicy", {"PolicyName": "cw-list", "PolicyDocument": json.dumps(ALLOW_LIST)})
        for user, policy in (("reader", "cw-read"), ("lister", "cw-list")):
            admin("CreateUser", {"UserName": user})
            admin("AttachUserPolicy", {"UserName": user, "PolicyName": policy})
        keys = {u: admin("CreateAccessKey", {"UserName": u})["AccessKey"] for u in ("reader", "lister")}
        client = lambda u: self.server.client("cloudwatch", key=keys[u]["AccessKeyId"], secret=keys[u]["SecretAccessKey"])
        q = dict(MetricDataQueries=[{"Id": "m", "MetricStat": {"Metric": {"Namespace": NS, "MetricName": "Loss",
                                                                         "Dimensions": DIMS}, "Period": 300, "Stat": "Sum"}}],
                 StartTime=self.t0, EndTime=self.t0 + datetime.timedelta(minutes=5))
        self.assertEqual(client("reader").get_metric_data(**q)["MetricDataResults"][0]["Values"], [21.0])
        with self.assertRaises(ClientError) as e:
            client("lister").get_metric_data(**q)
        self.assertEqual(e.exception.response["Error"]["Code"], "AccessDeniedException")
        self.assertIn("cloudwatch:GetMetricData", e.exception.response["Error"]["Message"])
        self.assertEqual(len(client("lister").list_metrics()["Metrics"]), 1)

    @unittest.skipUnless(shutil.which("aws"), "the aws CLI is not installed")
    def test_the_aws_cli(self):
        key, secret = self.server.credentials()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION=REGION,
                   AWS_PAGER="", AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")

        def aws(*args, check=True):
            r = subprocess.run(["aws", "--endpoint-url", self.server.url, "--output", "json", "cloudwatch", *args],
                               capture_output=True, text=True, env=env, timeout=120)
            if check and r.returncode != 0:
                self.fail(f"aws cloudwatch {' '.join(args)} failed: {r.stderr}")
            return r

        at = (self.t0 + datetime.timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
        aws("put-metric-data", "--namespace", NS, "--metric-name", "Loss", "--dimensions", "Run=r1",
            "--value", "4", "--timestamp", at)
        start = self.t0.strftime("%Y-%m-%dT%H:%M:%SZ")
        end = (self.t0 + datetime.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
        out = json.loads(aws("get-metric-statistics", "--namespace", NS, "--metric-name", "Loss", "--dimensions",
                             "Name=Run,Value=r1", "--start-time", start, "--end-time", end, "--period", "60",
                             "--statistics", "Sum").stdout)
        # JSON 1.0 carries epoch seconds, which aws CLI v1 prints as they came.
        self.assertEqual([(p["Timestamp"], p["Sum"]) for p in out["Datapoints"]], [(self.t0.timestamp(), 4.0)])
        queries = json.dumps([{"Id": "m", "MetricStat": {"Metric": {"Namespace": NS, "MetricName": "Loss",
                              "Dimensions": DIMS}, "Period": 60, "Stat": "Sum"}}, {"Id": "e", "Expression": "m / 2"}])
        data = json.loads(aws("get-metric-data", "--metric-data-queries", queries, "--start-time", start,
                              "--end-time", end).stdout)
        self.assertEqual([r["Values"] for r in data["MetricDataResults"]], [[4.0], [2.0]])
        self.assertEqual(json.loads(aws("list-metrics", "--namespace", NS).stdout)["Metrics"][0]["MetricName"], "Loss")
        r = aws("put-metric-data", "--namespace", "AWS/Batch", "--metric-name", "x", "--value", "1", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("InvalidParameterValue", r.stderr)
        self.assertIn("AWS/", r.stderr)


class TrainingJobMetricsTest(ServerTest):
    """/aws/sagemaker/TrainingJobs: a job's MetricDefinitions series read as CloudWatch metrics."""

    def test_metric_definitions_series_per_host(self):
        p = self.command_payload("cwjob", "for i in 1 2 3; do echo loss=0.$i; done")
        p["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]
        self.sm.create_training_job(**p)
        self.assertEqual(self.wait_training("cwjob")["TrainingJobStatus"], "Completed")
        cw = self.server.client("cloudwatch")
        host = [{"Name": "Host", "Value": "cwjob/algo-1"}]
        listed = cw.list_metrics(Namespace="/aws/sagemaker/TrainingJobs", MetricName="loss")["Metrics"]
        self.assertEqual(listed, [{"Namespace": "/aws/sagemaker/TrainingJobs", "MetricName": "loss", "Dimensions": host}])
        own = self.server.admin("metric-series", {"TrainingJobName": "cwjob"})["Series"][0]["Points"]
        start = datetime.datetime.fromtimestamp(own[0]["Timestamp"] - 120, datetime.timezone.utc)
        end = start + datetime.timedelta(hours=1)
        stats = cw.get_metric_statistics(Namespace="/aws/sagemaker/TrainingJobs", MetricName="loss", Dimensions=host,
                                         StartTime=start, EndTime=end, Period=3600,
                                         Statistics=["SampleCount", "Minimum", "Maximum", "Sum"])["Datapoints"]
        self.assertEqual([(d["SampleCount"], d["Minimum"], d["Maximum"]) for d in stats], [(3.0, 0.1, 0.3)])
        self.assertAlmostEqual(stats[0]["Sum"], sum(pt["Value"] for pt in own))
        # Another host of the job, or a job that does not exist: no data, as CloudWatch answers.
        for dims in ([{"Name": "Host", "Value": "cwjob/algo-2"}], [{"Name": "Host", "Value": "nope/algo-1"}]):
            self.assertEqual(cw.get_metric_statistics(Namespace="/aws/sagemaker/TrainingJobs", MetricName="loss",
                                                      Dimensions=dims, StartTime=start, EndTime=end, Period=3600,
                                                      Statistics=["Sum"])["Datapoints"], [])
        with self.assertRaises(ClientError) as e:
            cw.put_metric_data(Namespace="/aws/sagemaker/TrainingJobs", MetricData=[{"MetricName": "loss", "Value": 1}])
        self.assertEqual(e.exception.response["Error"]["Code"], "InvalidParameterValue")


TEAM_METRICS = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics", "cloudwatch:ListMetrics",
                                   "cloudwatch:PutMetricAlarm", "cloudwatch:DescribeAlarms"], "Resource": "*"},
    {"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
     "Condition": {"StringLike": {"cloudwatch:namespace": "${aws:PrincipalTag/team}/*"}}},
    {"Effect": "Allow", "Action": ["sagemaker:DescribeTrainingJob", "batch:DescribeJobQueues"], "Resource": "*",
     "Condition": {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}}]}


class TeamMetricsTest(ServerTest):
    """docs/security.md, "CloudWatch metrics": a training job's series are read as its describe, so a
    team sees its own jobs' metrics and not another team's; PutMetricData honours cloudwatch:namespace."""

    def test_a_team_reads_its_own_jobs_metrics_and_not_another_teams(self):
        p = self.command_payload("team-a-job", "for i in 1 2 3; do echo loss=0.$i; done")
        p["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]
        p["Tags"] = [{"Key": "team", "Value": "a"}]
        self.sm.create_training_job(**p)
        self.assertEqual(self.wait_training("team-a-job")["TrainingJobStatus"], "Completed")
        admin = lambda op, body: self.server.admin("admin/iam/" + op, body)
        admin("CreatePolicy", {"PolicyName": "team-metrics", "PolicyDocument": json.dumps(TEAM_METRICS)})
        cws = {}
        for team in ("a", "b"):
            admin("CreateUser", {"UserName": "member-" + team, "Tags": [{"Key": "team", "Value": team}]})
            admin("AttachUserPolicy", {"UserName": "member-" + team, "PolicyName": "team-metrics"})
            key = admin("CreateAccessKey", {"UserName": "member-" + team})["AccessKey"]
            cws[team] = self.server.client("cloudwatch", key=key["AccessKeyId"], secret=key["SecretAccessKey"])
        ns, host = "/aws/sagemaker/TrainingJobs", [{"Name": "Host", "Value": "team-a-job/algo-1"}]
        metric = {"Namespace": ns, "MetricName": "loss", "Dimensions": host}
        # Listing: team a sees its job's series, team b none of them.
        self.assertIn(metric, cws["a"].list_metrics(Namespace=ns)["Metrics"])
        self.assertEqual(cws["b"].list_metrics(Namespace=ns)["Metrics"], [])
        self.assertNotIn(metric, cws["b"].list_metrics()["Metrics"])
        # Reading: team a gets the points, team b is refused as DescribeTrainingJob would refuse it.
        start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
        end = start + datetime.timedelta(hours=2)
        q = dict(MetricDataQueries=[{"Id": "m", "MetricStat": {"Metric": metric, "Period": 3600, "Stat": "SampleCount"}},
                                    {"Id": "e", "Expression": "SUM(METRICS())"}], StartTime=start, EndTime=end)
        self.assertEqual(sum(cws["a"].get_metric_data(**q)["MetricDataResults"][0]["Values"]), 3)
        stats = dict(StartTime=start, EndTime=end, Period=3600, Statistics=["SampleCount"], **metric)
        self.assertEqual(sum(d["SampleCount"] for d in cws["a"].get_metric_statistics(**stats)["Datapoints"]), 3)
        for call in (lambda: cws["b"].get_metric_data(**q), lambda: cws["b"].get_metric_statistics(**stats),
                     lambda: cws["b"].put_metric_alarm(AlarmName="peek", EvaluationPeriods=1, Threshold=1,
                                                       ComparisonOperator="GreaterThanThreshold", Statistic="Maximum",
                                                       Period=60, **metric)):
            with self.assertRaises(ClientError) as e:
                call()
            self.assertEqual(e.exception.response["Error"]["Code"], "AccessDeniedException")
            self.assertIn("sagemaker:DescribeTrainingJob", e.exception.response["Error"]["Message"])
        # An alarm on the job's series is shown to team a only.
        cws["a"].put_metric_alarm(AlarmName="loss-high", EvaluationPeriods=1, Threshold=1, Statistic="Maximum",
                                  ComparisonOperator="GreaterThanThreshold", Period=60, **metric)
        self.assertEqual([a["AlarmName"] for a in cws["a"].describe_alarms()["MetricAlarms"]], ["loss-high"])
        self.assertEqual(cws["b"].describe_alarms()["MetricAlarms"], [])
        # PutMetricData: a team writes under its own namespace prefix only (cloudwatch:namespace).
        cws["b"].put_metric_data(Namespace="b/train", MetricData=[{"MetricName": "x", "Value": 1}])
        with self.assertRaises(ClientError) as e:
            cws["b"].put_metric_data(Namespace="a/train", MetricData=[{"MetricName": "x", "Value": 1}])
        self.assertEqual(e.exception.response["Error"]["Code"], "AccessDeniedException")
        self.assertEqual([m["Namespace"] for m in self.server.client("cloudwatch").list_metrics(MetricName="x")["Metrics"]],
                         ["b/train"])


class BatchMetricsTest(ServerTest):
    """AWS/Batch, sampled once a minute of the server's clock, equals what /metrics counts."""
    server_args = ["--clock=offset"]

    def scrape(self):
        with urllib.request.urlopen(self.server.url + "/metrics", timeout=10) as r:
            return r.read().decode()

    @staticmethod
    def sample(text, name, **labels):
        want = ",".join(f'{k}="{v}"' for k, v in labels.items())
        m = re.search("^" + re.escape(name + "{" + want + "}") + r" (\S+)$", text, re.M)
        return float(m.group(1)) if m else 0.0

    def test_queue_metrics_equal_the_scrape_for_the_same_window(self):
        cw = self.server.client("cloudwatch")
        start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
        q = self.create_queue("cwq", capacity=2)
        jobs = [self.submit(q, self.command_payload("ok-1", "true")), self.submit(q, self.command_payload("ok-2", "true")),
                self.submit(q, self.command_payload("bad", "exit 3"))]
        self.wait_jobs(jobs)
        text = self.scrape()
        want = {
            "JobsSubmitted": self.sample(text, "trainyard_jobs_submitted_total", queue=q),
            "JobsMovedToSucceeded": self.sample(text, "trainyard_jobs_transitions_total", queue=q, status="SUCCEEDED"),
            "JobsMovedToFailed": self.sample(text, "trainyard_jobs_transitions_total", queue=q, status="FAILED"),
            "JobAttemptExecutionDuration": self.sample(text, "trainyard_job_attempt_execution_seconds_count", queue=q),
        }
        self.assertEqual((want["JobsSubmitted"], want["JobsMovedToSucceeded"], want["JobsMovedToFailed"]), (3, 2, 1))
        self.advance(60)  # the next tick samples the minute
        metric = lambda name: {"Namespace": "AWS/Batch", "MetricName": name,
                               "Dimensions": [{"Name": "JobQueueName", "Value": q}]}
        queries = [{"Id": f"m{i}", "MetricStat": {"Metric": metric(n), "Period": 3600,
                                                   "Stat": "SampleCount" if n.endswith("Duration") else "Sum"}}
                   for i, n in enumerate(want)]
        deadline = time.time() + 30
        while True:
            end = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5)
            r = cw.get_metric_data(MetricDataQueries=queries, StartTime=start, EndTime=end)["MetricDataResults"]
            got = {n: sum(x["Values"]) for n, x in zip(want, r)}
            if got == want or time.time() > deadline:
                break
            time.sleep(0.1)  # waits for the server's next tick, which the test cannot drive
        self.assertEqual(got, want)
        listed = {m["MetricName"] for m in cw.list_metrics(Namespace="AWS/Batch")["Metrics"]}
        self.assertTrue(set(want) <= listed, listed)
        # Sampled data is stored: a restart keeps it.
        self.server.stop()
        self.server = self.new_server()
        cw = self.server.client("cloudwatch")
        r = cw.get_metric_data(MetricDataQueries=queries[:1], StartTime=start, EndTime=end)["MetricDataResults"]
        self.assertEqual(sum(r[0]["Values"]), 3)


if __name__ == "__main__":
    unittest.main()
