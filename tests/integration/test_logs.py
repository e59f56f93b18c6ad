"""CloudWatch Logs (a subset) over the training jobs' instance logs: docs/logs.md."""
import http.client
import json
import os
import shutil
import subprocess
import time
import unittest
import urllib.parse

import botocore.auth
import botocore.awsrequest
import botocore.credentials
from botocore.exceptions import ClientError

from harness import REGION, ServerTest

GROUP = "/aws/sagemaker/TrainingJobs"
# 30 numbered lines, one with a phrase to find, on every instance.
SCRIPT = ("for i in $(seq -w 1 30); do echo \"line-$i of algo\"; done; "
          "echo 'the needle \"in\" a haystack'; echo done-$SM_CURRENT_HOST")


class LogsTest(ServerTest):
    def setUp(self):
        super().setUp()
        self.logs = self.server.client("logs")

    def tearDown(self):
        self.logs.close()
        super().tearDown()

    def run_job(self, name, count=1, script=SCRIPT):
        payload = self.command_payload(name, script)
        payload["ResourceConfig"]["InstanceCount"] = count
        self.sm.create_training_job(**payload)
        tj = self.wait_training(name)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        start = int(tj["TrainingStartTime"].timestamp())
        return [f"{name}/algo-{n}-{start}" for n in range(1, count + 1)]

    def get(self, stream, **kw):
        return self.logs.get_log_events(logGroupName=GROUP, logStreamName=stream, **kw)

    def test_streams_events_tokens_and_filters(self):
        streams = self.run_job("logged", count=2)

        groups = self.logs.describe_log_groups(logGroupNamePrefix="/aws/sagemaker")["logGroups"]
        self.assertEqual([g["logGroupName"] for g in groups], [GROUP])
        # Container jobs' group is listed too (test_batch_logs.py), even with no stream yet.
        batch = self.logs.describe_log_groups(logGroupNamePrefix="/aws/batch")["logGroups"]
        self.assertEqual([(g["logGroupName"], g["storedBytes"]) for g in batch], [("/aws/batch/job", 0)])

        listed = self.logs.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix="logged/")["logStreams"]
        self.assertEqual([s["logStreamName"] for s in listed], streams)
        self.assertIn("lastEventTimestamp", listed[0])
        first_ev = self.get(streams[0], startFromHead=True)["events"]
        self.assertEqual(listed[0]["firstEventTimestamp"], first_ev[0]["timestamp"])
        self.assertEqual(listed[0]["lastEventTimestamp"], first_ev[-1]["timestamp"])
        page = self.logs.describe_log_streams(logGroupName=GROUP, limit=1)
        self.assertEqual([s["logStreamName"] for s in page["logStreams"]], streams[:1])
        rest = self.logs.describe_log_streams(logGroupName=GROUP, limit=1, nextToken=page["nextToken"])
        self.assertEqual([s["logStreamName"] for s in rest["logStreams"]], streams[1:])

        # Everything from the head, then paging forwards 10 at a time.
        whole = self.get(streams[0], startFromHead=True)
        msgs = [e["message"] for e in whole["events"]]
        self.assertIn("line-01 of algo", msgs)
        self.assertEqual(msgs[-1], "done-algo-1")
        self.assertEqual(msgs.index("line-30 of algo") + 1, msgs.index('the needle "in" a haystack'))
        self.assertEqual(self.get(streams[1], startFromHead=True)["events"][-1]["message"], "done-algo-2")

        got, token = [], None
        for _ in range(100):
            kw = {"nextToken": token} if token else {"startFromHead": True}
            r = self.get(streams[0], limit=10, **kw)
            if token == r["nextForwardToken"]:
                self.assertEqual(r["events"], [])
                break
            self.assertLessEqual(len(r["events"]), 10)
            got += [e["message"] for e in r["events"]]
            token = r["nextForwardToken"]
        self.assertEqual(got, msgs)

        # From the tail (the default): the last events; the backward token pages towards the head.
        tail = self.get(streams[0], limit=5)
        self.assertEqual([e["message"] for e in tail["events"]], msgs[-5:])
        back = self.get(streams[0], limit=5, nextToken=tail["nextBackwardToken"])
        self.assertEqual([e["message"] for e in back["events"]], msgs[-10:-5])
        # The forward token of a backward page resumes after it.
        fwd = self.get(streams[0], limit=5, nextToken=back["nextForwardToken"])
        self.assertEqual([e["message"] for e in fwd["events"]], msgs[-5:])
        # Tokens are stable: asking again gives the same page.
        self.assertEqual(self.get(streams[0], limit=5, nextToken=tail["nextBackwardToken"])["events"], back["events"])

        # Time window.
        ts = whole["events"][0]["timestamp"]
        self.assertEqual(self.get(streams[0], startFromHead=True, endTime=ts)["events"], [])
        self.assertEqual(len(self.get(streams[0], startFromHead=True, startTime=ts)["events"]), len(msgs))

        # filter-log-events: a term, a quoted phrase, an exclusion, by names and by prefix, paged.
        hits = self.logs.filter_log_events(logGroupName=GROUP, logStreamNamePrefix="logged/",
                                           filterPattern="needle")["events"]
        self.assertEqual(sorted(e["logStreamName"] for e in hits), streams)
        self.assertEqual(hits[0]["message"], 'the needle "in" a haystack')
        hits = self.logs.filter_log_events(logGroupName=GROUP, logStreamNames=[streams[1]],
                                           filterPattern='"needle" haystack')["events"]
        self.assertEqual([e["logStreamName"] for e in hits], [streams[1]])
        hits = self.logs.filter_log_events(logGroupName=GROUP, logStreamNames=[streams[0]],
                                           filterPattern='"line-0" -line-05')["events"]
        self.assertEqual(len(hits), 8)
        both = [e["timestamp"] for st in streams for e in self.get(st, startFromHead=True)["events"]]
        self.assertEqual(self.logs.filter_log_events(logGroupName=GROUP, filterPattern="needle",
                                                     startTime=max(both) + 1)["events"], [])
        self.assertEqual(self.logs.filter_log_events(logGroupName=GROUP, filterPattern="needle",
                                                     endTime=min(both))["events"], [])
        self.assertEqual(len(self.logs.filter_log_events(logGroupName=GROUP, filterPattern="needle",
                                                         startTime=min(both), endTime=max(both) + 1)["events"]), 2)
        seen, token = [], None
        while True:
            kw = {"nextToken": token} if token else {}
            r = self.logs.filter_log_events(logGroupName=GROUP, filterPattern="algo", limit=7, **kw)
            seen += [(e["logStreamName"], e["message"]) for e in r["events"]]
            token = r.get("nextToken")
            if not token:
                break
        self.assertEqual(len(seen), 62)
        self.assertEqual(len(set(seen)), 62)
        with self.assertRaises(ClientError) as e:
            self.logs.filter_log_events(logGroupName=GROUP, filterPattern="{ $.level = \"x\" }")
        self.assertEqual(e.exception.response["Error"]["Code"], "InvalidParameterException")

    def test_pages_stop_near_one_megabyte(self):
        streams = self.run_job("big", script="awk 'BEGIN { s = sprintf(\"%1000s\", \"\"); gsub(/ /, \"x\", s); "
                                              "for (i = 0; i < 1500; i++) print s }'")
        page = self.get(streams[0], startFromHead=True)
        self.assertLess(len(page["events"]), 1100)
        self.assertGreater(len(page["events"]), 900)
        rest = self.get(streams[0], nextToken=page["nextForwardToken"])
        self.assertEqual(len(page["events"]) + len(rest["events"]), 1500)
        hits = self.logs.filter_log_events(logGroupName=GROUP, filterPattern="xxx")
        self.assertLess(len(hits["events"]), 1100)
        more = self.logs.filter_log_events(logGroupName=GROUP, filterPattern="xxx", nextToken=hits["nextToken"])
        self.assertEqual(len(hits["events"]) + len(more["events"]), 1500)
        self.assertNotIn("nextToken", more)

    def test_a_search_through_more_than_64_mib_goes_on_in_a_later_call(self):
        # 70,000 lines of 1,000 bytes (71 MB), then the only match: FilterLogEvents reads at most
        # 64 MiB a call, so the first call finds nothing and says where to go on from.
        streams = self.run_job("huge", script="awk 'BEGIN { s = sprintf(\"%1000s\", \"\"); gsub(/ /, \"x\", s); "
                                               "for (i = 0; i < 70000; i++) print s; print \"the needle\" }'")
        first = self.logs.filter_log_events(logGroupName=GROUP, logStreamNames=streams, filterPattern="needle")
        self.assertEqual(first["events"], [])
        self.assertEqual(first["searchedLogStreams"], [{"logStreamName": streams[0], "searchedCompletely": False}])
        rest = self.logs.filter_log_events(logGroupName=GROUP, logStreamNames=streams, filterPattern="needle",
                                           nextToken=first["nextToken"])
        self.assertEqual([e["message"] for e in rest["events"]], ["the needle"])
        self.assertEqual(rest["searchedLogStreams"], [{"logStreamName": streams[0], "searchedCompletely": True}])
        self.assertNotIn("nextToken", rest)
        # The tail is read backwards from the end, not from the head.
        tail = self.get(streams[0], limit=2)
        self.assertEqual([e["message"] for e in tail["events"]], ["x" * 1000, "the needle"])

    def test_tokens_that_no_page_returned_are_refused(self):
        streams = self.run_job("tokens", script="echo one; echo two")
        for token in ("f/ffffffffffffffff", "b/-000000000000001", "f/00000000000000001", "n/00"):
            with self.assertRaises(ClientError) as e:
                self.get(streams[0], nextToken=token)
            self.assertEqual(e.exception.response["Error"]["Code"], "InvalidParameterException", token)
        for token in ("f/0000000000000000", "n/zz", "n/3432"):
            with self.assertRaises(ClientError) as e:
                self.logs.filter_log_events(logGroupName=GROUP, nextToken=token)
            self.assertEqual(e.exception.response["Error"]["Code"], "InvalidParameterException", token)
        # A forward token inside a line starts at the next line; one past the end waits there.
        self.assertEqual([e["message"] for e in self.get(streams[0], nextToken="f/0000000000000001")["events"]],
                         ["two"])
        end = self.get(streams[0], nextToken="f/00000000000fffff")
        self.assertEqual((end["events"], end["nextForwardToken"]), ([], "f/00000000000fffff"))

    def test_unknown_resources_and_bad_parameters(self):
        streams = self.run_job("small", script="echo hi")
        for kw, field in ((dict(logGroupName="/aws/nope", logStreamName=streams[0]), "group"),
                          (dict(logGroupName=GROUP, logStreamName="small/algo-9-1"), "stream"),
                          (dict(logGroupName=GROUP, logStreamName="nope/algo-1-1"), "stream")):
            with self.assertRaises(ClientError) as e:
                self.logs.get_log_events(**kw)
            self.assertEqual(e.exception.response["Error"]["Code"], "ResourceNotFoundException")
            self.assertIn(field, e.exception.response["Error"]["Message"])
        with self.assertRaises(ClientError) as e:
            self.logs.describe_log_streams(logGroupName="/aws/nope")
        self.assertEqual(e.exception.response["Error"]["Code"], "ResourceNotFoundException")
        with self.assertRaises(ClientError) as e:
            self.logs.get_log_events(logGroupName=GROUP, logStreamName=streams[0], nextToken="garbage")
        self.assertEqual(e.exception.response["Error"]["Code"], "InvalidParameterException")
        self.assertIn("nextToken", e.exception.response["Error"]["Message"])
        with self.assertRaises(ClientError) as e:
            self.logs.filter_log_events(logGroupName=GROUP, logStreamNames=streams, logStreamNamePrefix="s")
        self.assertEqual(e.exception.response["Error"]["Code"], "InvalidParameterException")
        with self.assertRaises(ClientError) as e:
            self.server.client("logs", validate=False).get_log_events(
                logGroupName=GROUP, logStreamName=streams[0], limit=0)
        self.assertEqual(e.exception.response["Error"]["Code"], "InvalidParameterException")
        self.assertIn("limit", e.exception.response["Error"]["Message"])
        with self.assertRaises(ClientError) as e:
            self.logs.describe_metric_filters(logGroupName=GROUP)
        self.assertEqual(e.exception.response["Error"]["Code"], "UnknownOperationException")

    def post(self, headers, body=b"{}"):
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("POST", "/", body=body, headers=headers)
        resp = conn.getresponse()
        data = json.loads(resp.read() or b"{}")
        conn.close()
        return resp.status, data

    def test_unsigned_and_wrongly_signed_requests_are_refused(self):
        headers = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "Logs_20140328.DescribeLogGroups"}
        status, data = self.post(headers)
        self.assertEqual(status, 403)
        self.assertEqual(data["__type"], "MissingAuthenticationTokenException")
        key, secret = self.server.credentials()
        for service, secret_used in (("logs", secret + "x"), ("sagemaker", secret)):
            req = botocore.awsrequest.AWSRequest(method="POST", url=self.server.url + "/", data="{}", headers=headers)
            botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret_used), service, REGION).add_auth(req)
            status, data = self.post(dict(req.headers.items()), req.body)
            self.assertEqual(status, 403, (service, data))
        with self.assertRaises(ClientError) as e:
            self.server.client("logs", secret="wrong").describe_log_groups()
        self.assertEqual(e.exception.response["Error"]["Code"], "InvalidSignatureException")

    def aws(self, *args):
        key, secret = self.server.credentials()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION=REGION,
                   AWS_PAGER="", AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
        r = subprocess.run(["aws", "--endpoint-url", self.server.url, *args],
                           capture_output=True, text=True, env=env, timeout=120)
        if r.returncode != 0:
            self.fail(f"aws {' '.join(args)} failed: {r.stderr}")
        return r.stdout

    @unittest.skipUnless(shutil.which("aws"), "the aws CLI is not installed")
    def test_aws_cli(self):
        streams = self.run_job("cli-logged")
        out = json.loads(self.aws("--output", "json", "logs", "get-log-events", "--log-group-name", GROUP,
                                  "--log-stream-name", streams[0], "--start-from-head"))
        self.assertEqual(out["events"][-1]["message"], "done-algo-1")
        out = json.loads(self.aws("--output", "json", "logs", "describe-log-streams", "--log-group-name", GROUP,
                                  "--log-stream-name-prefix", "cli-logged"))
        self.assertEqual([s["logStreamName"] for s in out["logStreams"]], streams)
        out = json.loads(self.aws("--output", "json", "logs", "describe-log-groups"))
        self.assertEqual([g["logGroupName"] for g in out["logGroups"]], ["/aws/batch/job", GROUP])
        out = json.loads(self.aws("--output", "json", "logs", "filter-log-events", "--log-group-name", GROUP,
                                  "--filter-pattern", "needle"))
        self.assertEqual([e["logStreamName"] for e in out["events"]], streams)
        if not self.aws("--version").startswith("aws-cli/2"):
            return  # `aws logs tail` is AWS CLI v2 only
        text = self.aws("logs", "tail", GROUP, "--log-stream-name-prefix", "cli-logged", "--since", "1h")
        self.assertIn("line-30 of algo", text)
        self.assertIn(streams[0], text)


class LogsRetentionTest(ServerTest):
    server_args = ["--clock=offset"]
    server_config = "[logs]\nretention_days = 1\nmax_bytes_per_stream = 2000\n"

    def test_size_cap_and_retention(self):
        self.sm.create_training_job(**self.command_payload(
            "chatty", "for i in $(seq 1 500); do echo \"chatter line $i\"; done"))
        tj = self.wait_training("chatty")
        self.assertEqual(tj["TrainingJobStatus"], "Completed")
        stream = f"chatty/algo-1-{int(tj['TrainingStartTime'].timestamp())}"
        logs = self.server.client("logs")
        path = os.path.join(self.data_dir, "attempts", "chatty", "logs", "algo-1.log")
        self.assertLessEqual(os.path.getsize(path), 2200)
        events = logs.get_log_events(logGroupName=GROUP, logStreamName=stream, startFromHead=True)["events"]
        self.assertEqual(events[0]["message"], "chatter line 1")
        self.assertIn("log truncated", events[-1]["message"])
        self.assertEqual(logs.describe_log_groups()["logGroups"][0]["retentionInDays"], 1)
        # Two days on: the finished job's logs are past retention; the sweep deletes them.
        self.advance(2 * 86400)
        deadline = time.time() + 20
        while os.path.exists(path):
            self.assertLess(time.time(), deadline, "the retention sweep did not delete the log")
            time.sleep(0.2)
        self.assertEqual(logs.get_log_events(logGroupName=GROUP, logStreamName=stream)["events"], [])
        logs.close()


if __name__ == "__main__":
    unittest.main()
