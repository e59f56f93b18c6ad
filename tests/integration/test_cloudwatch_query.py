"""CloudWatch's query protocol (Action=...&Version=2010-08-01, what older SDKs send; docs/metrics.md,
"The CloudWatch API"): boto3 made to speak it reads and writes metrics and alarms exactly as the
JSON protocol does (the same answers, field for field), a large put arrives gzip-compressed, and
hostile parameter names are refused in the query protocol's XML error shape, changing nothing."""
import datetime
import http.client
import urllib.parse

import botocore.auth
import botocore.awsrequest
import botocore.credentials
from botocore.config import Config
from botocore.exceptions import ClientError

from harness import ServerTest, REGION, speaking

NS = "Team/Query"
DIMS = [{"Name": "Run", "Value": "r1"}]


def query_protocol():
    return speaking("query")


class CloudWatchQueryTest(ServerTest):
    def setUp(self):
        super().setUp()
        self.cw = self.server.client("cloudwatch")
        with query_protocol():
            self.q = self.server.client("cloudwatch")
        self.t0 = datetime.datetime.now(datetime.timezone.utc).replace(second=0, microsecond=0) - datetime.timedelta(minutes=10)

    def sent_protocol(self, client):
        seen = []
        client.meta.events.register("before-send.cloudwatch", lambda request, **_: seen.append(request))
        return seen

    def test_metrics_and_alarms_read_the_same_both_ways(self):
        sent = self.sent_protocol(self.q)
        self.q.put_metric_data(Namespace=NS, MetricData=[
            {"MetricName": "Loss", "Dimensions": DIMS, "Unit": "Count", "Value": v,
             "Timestamp": self.t0 + datetime.timedelta(minutes=m, seconds=5)}
            for m, v in [(0, 1.0), (0, 3.0), (1, 10.0), (3, 7.0)]] + [
            {"MetricName": "Stats", "Dimensions": DIMS, "Timestamp": self.t0,
             "StatisticValues": {"SampleCount": 2, "Sum": 5, "Minimum": 1, "Maximum": 4}},
            {"MetricName": "Hist", "Dimensions": DIMS, "Timestamp": self.t0, "Values": [1.5, 2.5], "Counts": [3, 1]}])
        body = sent[0].body.decode() if isinstance(sent[0].body, bytes) else sent[0].body
        self.assertIn("Action=PutMetricData", body)  # it really spoke the query protocol
        self.assertIn("MetricData.member.1.Dimensions.member.1.Value=r1", body)
        window = dict(StartTime=self.t0, EndTime=self.t0 + datetime.timedelta(minutes=5))
        for client in (self.q, self.cw):
            self.assertEqual(sorted(m["MetricName"] for m in client.list_metrics(Namespace=NS)["Metrics"]),
                             ["Hist", "Loss", "Stats"])
        stats = dict(Namespace=NS, MetricName="Loss", Dimensions=DIMS, Period=60, **window)
        for kind in ({"Statistics": ["Sum", "Maximum", "SampleCount"]}, {"ExtendedStatistics": ["p50", "p99"]}):
            a = self.q.get_metric_statistics(**stats, **kind)["Datapoints"]
            b = self.cw.get_metric_statistics(**stats, **kind)["Datapoints"]
            self.assertEqual(sorted(a, key=lambda d: d["Timestamp"]), sorted(b, key=lambda d: d["Timestamp"]))
            self.assertEqual(len(a), 3)
        self.assertEqual([d["Sum"] for d in sorted(self.q.get_metric_statistics(
            **{**stats, "MetricName": "Hist"}, Statistics=["Sum"])["Datapoints"], key=lambda d: d["Timestamp"])], [7.0])
        queries = [{"Id": "loss", "MetricStat": {"Metric": {"Namespace": NS, "MetricName": "Loss", "Dimensions": DIMS},
                                                 "Period": 60, "Stat": "Sum"}, "ReturnData": False},
                   {"Id": "filled", "Expression": "FILL(loss, 0) * 2", "Label": "twice"}]
        a = self.q.get_metric_data(MetricDataQueries=queries, ScanBy="TimestampAscending", **window)
        b = self.cw.get_metric_data(MetricDataQueries=queries, ScanBy="TimestampAscending", **window)
        self.assertEqual(a["MetricDataResults"], b["MetricDataResults"])
        self.assertEqual(a["MetricDataResults"][0]["Values"], [8.0, 20.0, 0.0, 14.0, 0.0])
        # Paging through MaxDatapoints.
        page = self.q.get_metric_data(MetricDataQueries=queries, MaxDatapoints=2, **window)
        self.assertEqual(len(page["MetricDataResults"][0]["Values"]), 2)
        self.assertIn("NextToken", page)

        # Alarms: put through the query protocol, read back identically through JSON.
        self.q.put_metric_alarm(AlarmName="q-loss", AlarmDescription="query & co <ok>", MetricName="Loss", Namespace=NS,
                                Dimensions=DIMS, Statistic="Maximum", Period=60, EvaluationPeriods=3,
                                DatapointsToAlarm=2, Threshold=5.5, ComparisonOperator="GreaterThanThreshold",
                                TreatMissingData="notBreaching", ActionsEnabled=False,
                                AlarmActions=["arn:aws:sns:us-east-1:000000000000:pager"],
                                Tags=[{"Key": "team", "Value": "vision"}])
        self.q.put_metric_alarm(AlarmName="q-math", Metrics=queries[:1] + [{"Id": "e", "Expression": "loss / 2"}],
                                EvaluationPeriods=1, Threshold=1, ComparisonOperator="LessThanThreshold")
        a = self.q.describe_alarms(AlarmNamePrefix="q-")["MetricAlarms"]
        b = self.cw.describe_alarms(AlarmNamePrefix="q-")["MetricAlarms"]
        self.assertEqual(a, b)
        self.assertEqual([(x["AlarmName"], x["StateValue"]) for x in a],
                         [("q-loss", "INSUFFICIENT_DATA"), ("q-math", "INSUFFICIENT_DATA")])
        self.assertEqual((a[0]["AlarmDescription"], a[0]["ActionsEnabled"], a[0]["Threshold"], a[0]["DatapointsToAlarm"]),
                         ("query & co <ok>", False, 5.5, 2))
        self.assertEqual(a[1]["Metrics"][1], {"Id": "e", "Expression": "loss / 2", "ReturnData": True})
        self.assertEqual(self.q.describe_alarms_for_metric(Namespace=NS, MetricName="Loss", Dimensions=DIMS)["MetricAlarms"],
                         self.cw.describe_alarms_for_metric(Namespace=NS, MetricName="Loss", Dimensions=DIMS)["MetricAlarms"])
        self.q.set_alarm_state(AlarmName="q-loss", StateValue="ALARM", StateReason="drill", StateReasonData='{"by": "test"}')
        self.q.enable_alarm_actions(AlarmNames=["q-loss"])
        [alarm] = self.cw.describe_alarms(AlarmNames=["q-loss"])["MetricAlarms"]
        self.assertEqual((alarm["StateValue"], alarm["StateReason"], alarm["ActionsEnabled"]), ("ALARM", "drill", True))
        h = self.q.describe_alarm_history(AlarmName="q-loss", ScanBy="TimestampAscending")["AlarmHistoryItems"]
        self.assertEqual(h, self.cw.describe_alarm_history(AlarmName="q-loss", ScanBy="TimestampAscending")["AlarmHistoryItems"])
        self.assertEqual([x["HistoryItemType"] for x in h], ["ConfigurationUpdate", "StateUpdate"])
        self.assertIsInstance(h[0]["Timestamp"], datetime.datetime)
        self.q.delete_alarms(AlarmNames=["q-loss", "q-math"])
        self.assertEqual(self.cw.describe_alarms()["MetricAlarms"], [])

    def test_a_large_put_arrives_compressed(self):
        with query_protocol():
            q = self.server.client("cloudwatch", config=Config(request_min_compression_size_bytes=1024))
        sent = self.sent_protocol(q)
        q.put_metric_data(Namespace=NS, MetricData=[
            {"MetricName": "Wide", "Dimensions": [{"Name": "Shard", "Value": str(i)}], "Value": float(i),
             "Timestamp": self.t0} for i in range(200)])
        encoding = sent[0].headers.get("Content-Encoding")
        self.assertEqual(encoding.decode() if isinstance(encoding, bytes) else encoding, "gzip")
        self.assertEqual(len(self.cw.list_metrics(Namespace=NS, MetricName="Wide")["Metrics"]), 200)

    def signed(self, body, method="POST"):
        key, secret = self.server.credentials()
        path = "/" if method == "POST" else "/?" + body.decode()
        req = botocore.awsrequest.AWSRequest(method=method, url=self.server.url + path, data=body if method == "POST" else b"",
                                             headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), "monitoring", REGION).add_auth(req)
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request(method, path, body=req.body, headers=dict(req.headers.items()))
        resp = conn.getresponse()
        out = resp.status, resp.read().decode()
        conn.close()
        return out

    def test_hostile_parameters_are_refused_in_xml_and_change_nothing(self):
        put = "Action=PutMetricData&Version=2010-08-01&Namespace=" + NS.replace("/", "%2F")
        for body, code, fragment in [
            (put + "&MetricData.member.99999.MetricName=x&MetricData.member.99999.Value=1", "InvalidParameterValue",
             "list index must be at most 10000"),
            (put + "&MetricData.member.1.MetricName=x&MetricData.member.1.Value=1&MetricData.member.1.Value=2",
             "InvalidParameterValue", "given twice"),
            (put + "&MetricData=x&MetricData.member.1.MetricName=y", "InvalidParameterValue", "mixes"),
            (put + "&MetricData.member.1.MetricName=x&MetricData.member.1.Value=abc", "InvalidParameterValue",
             "MetricData.member.1.Value"),
            (put + "&MetricData.member.1.MetricName=x&MetricData.member.1.Value=1&MetricData.member.1.Timestamp=yesterday",
             "InvalidParameterValue", "Timestamp"),
            (put + "&MetricData.member.2.MetricName=x&MetricData.member.2.Value=1", "InvalidParameterValue",
             "MetricData.member.1"),
            (put.replace("2010-08-01", "2099-01-01") + "&MetricData.member.1.MetricName=x&MetricData.member.1.Value=1",
             "InvalidParameterValue", "Version"),
            ("Version=2010-08-01&Namespace=x", "InvalidAction", "no Action"),
            ("Action=PutMetricAlarm&Version=2010-08-01&AlarmName=a&Namespace=n&MetricName=m&Statistic=Sum&Period=sixty"
             "&EvaluationPeriods=1&Threshold=1&ComparisonOperator=GreaterThanThreshold", "InvalidParameterValue", "Period"),
        ]:
            status, text = self.signed(body.encode())
            self.assertEqual(status, 400, text)
            self.assertIn(f"<Code>{code}</Code>", text, body)
            self.assertIn(fragment, text, body)
            self.assertIn("<ErrorResponse", text)
        self.assertEqual(self.cw.list_metrics()["Metrics"], [])
        self.assertEqual(self.cw.describe_alarms()["MetricAlarms"], [])
        # A GET with the parameters in the query string is served too.
        status, text = self.signed(b"Action=ListMetrics&Version=2010-08-01", method="GET")
        self.assertEqual(status, 200, text)
        self.assertIn("<ListMetricsResponse", text)
        # An unsigned query request is refused before anything is parsed.
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("POST", "/", body=put + "&MetricData.member.1.MetricName=x&MetricData.member.1.Value=1",
                     headers={"Content-Type": "application/x-www-form-urlencoded", "Authorization":
                              "AWS4-HMAC-SHA256 Credential=AKIAFAKE/20260101/us-east-1/monitoring/aws4_request, "
                              "SignedHeaders=host, Signature=00"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 403, resp.read())
        conn.close()
        self.assertEqual(self.cw.list_metrics()["Metrics"], [])


if __name__ == "__main__":
    import unittest
    unittest.main()
