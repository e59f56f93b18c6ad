"""Events (docs/events.md): EventBridge-shaped state changes stored with the state, replayed from a
cursor, streamed over server-sent events, and delivered to webhooks at least once, in order,
across restarts of the receiver and of the server."""
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

from harness import BIN, REGION, Receiver, Server, ServerTest

SERVICE_JOB = "Batch Service Job State Change"
TRAINING_JOB = "SageMaker Training Job State Change"
SUCCESS_PATH = ["RUNNABLE", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED"]


def summary(e):
    d = e["detail"]
    if e["detail-type"] == TRAINING_JOB:
        return (d["TrainingJobName"], d["TrainingJobStatus"], d["SecondaryStatus"])
    if "jobName" in d:
        return (d["jobName"], d["status"])
    return (d.get("alarmName"), d.get("state", {}).get("value"))


def statuses_of(events, job_name):
    return [e["detail"]["status"] for e in events
            if e["detail-type"] == SERVICE_JOB and e["detail"]["jobName"] == job_name]


def webhook_toml(name, url, **filters):
    lines = ["[[webhooks]]", f'name = "{name}"', f'url = "{url}"', "max_backoff_seconds = 1"]
    for k, v in filters.items():
        if k == "tags":
            lines.append("tags = { " + ", ".join(f'{tk} = "{tv}"' for tk, tv in v.items()) + " }")
        else:
            lines.append(f"{k} = {json.dumps(v)}")
    return "\n".join(lines) + "\n"


class EventTest(ServerTest):
    def setUp(self):
        self.receiver = Receiver().start()
        self.only_success = Receiver().start()
        self.other_queue = Receiver().start()
        self.server_config = (
            webhook_toml("all", self.receiver.url, secret="hook-secret")
            + webhook_toml("succeeded", self.only_success.url,
                           pattern='{"source": ["aws.batch"], "detail": {"status": ["SUCCEEDED"]}}')
            + webhook_toml("other", self.other_queue.url, queues=["elsewhere"]))
        super().setUp()

    def tearDown(self):
        super().tearDown()
        for r in (self.receiver, self.only_success, self.other_queue):
            r.stop()

    def events_call(self, body):
        return self.server.raw_call("events", "Events", body, path="/trainyard/v1/events")

    def test_webhook_gets_each_state_change_in_order_through_receiver_and_server_restarts(self):
        q = self.create_queue("evq", capacity=1)
        first = self.submit(q, self.command_payload("ev-first", "true"), name="ev-first")
        self.wait_jobs([first])
        events = self.receiver.wait(lambda ev: statuses_of(ev, "ev-first")[-1:] == ["SUCCEEDED"], what="ev-first")
        self.assertEqual(statuses_of(events, "ev-first"), SUCCESS_PATH)
        e = next(e for e in events if e["detail-type"] == SERVICE_JOB and e["detail"]["status"] == "RUNNING")
        self.assertEqual(e["source"], "aws.batch")
        self.assertEqual(e["version"], "0")
        self.assertEqual(e["region"], REGION)
        self.assertEqual(e["resources"], [e["detail"]["jobArn"]])
        self.assertEqual(e["detail"]["jobId"], first)
        self.assertTrue(e["detail"]["jobQueue"].endswith(":job-queue/evq"))
        self.assertNotIn("serviceRequestPayload", e["detail"])  # as AWS's: no payload, no tags
        self.assertNotIn("tags", e["detail"])
        training = [summary(e)[1:] for e in events if e["detail-type"] == TRAINING_JOB]
        self.assertEqual(training[0], ("InProgress", "Starting"))
        self.assertEqual(training[-1], ("Completed", "Completed"))
        self.assertIn(("InProgress", "Training"), training)

        # The receiver is down for a whole job: the server retries; nothing is lost or reordered.
        self.receiver.stop()
        second = self.submit(q, self.command_payload("ev-second", "true"), name="ev-second")
        self.wait_jobs([second])
        time.sleep(1.5)  # at least one failed delivery and a backoff
        self.receiver.start()
        events = self.receiver.wait(lambda ev: statuses_of(ev, "ev-second")[-1:] == ["SUCCEEDED"], what="ev-second")
        self.assertEqual(statuses_of(events, "ev-second"), SUCCESS_PATH)

        # A receiver that answers 500 gets the same event again until it takes it.
        self.receiver.fail_next = 2
        # The server is killed while a job runs, and restarted: delivery goes on from the cursor.
        gate = os.path.join(self.work_dir, "gate")
        third = self.submit(q, self.command_payload("ev-third", f"while [ ! -e {gate} ]; do sleep 0.1; done"),
                            name="ev-third")
        self.receiver.wait(lambda ev: "RUNNING" in statuses_of(ev, "ev-third"), what="ev-third RUNNING")
        self.server.kill9()
        open(gate, "w").close()
        self.server = self.new_server()
        self.batch = self.server.client("batch")
        self.wait_jobs([third])
        events = self.receiver.wait(lambda ev: statuses_of(ev, "ev-third")[-1:] == ["SUCCEEDED"], what="ev-third")
        self.assertEqual(statuses_of(events, "ev-third"), SUCCESS_PATH)

        # Every job's events, in commit order, with no gap in what the webhook was sent.
        stored = self.events_call({"After": 0, "Limit": 1000})["Events"]
        self.assertEqual([e["Event"]["id"] for e in stored], [e["id"] for e in events])
        seqs = [e["Seq"] for e in stored]
        self.assertEqual(seqs, sorted(seqs))
        self.assertEqual(len(seqs), len(set(seqs)))

        # Filters: only SUCCEEDED service-job events; nothing for a queue the jobs are not in.
        self.assertEqual([summary(e) for e in self.only_success.wait(lambda ev: len(ev) >= 3)],
                         [("ev-first", "SUCCEEDED"), ("ev-second", "SUCCEEDED"), ("ev-third", "SUCCEEDED")])
        self.assertEqual(self.other_queue.events(), [])
        text = self.scrape()
        self.assertRegex(text, r'trainyard_webhook_delivered_total\{webhook="all"\} [1-9]')
        self.assertRegex(text, r'trainyard_webhook_backlog_events\{webhook="other"\} 0')

    def test_blocked_queue_events_and_signed_bodies(self):
        q = self.create_queue("bq", capacity=1)
        p = self.command_payload("too-big", "true")
        p["ResourceConfig"]["InstanceCount"] = 2  # the environment has 1: it can never fit
        job = self.submit(q, p, name="too-big")
        events = self.receiver.wait(lambda ev: any(e["detail-type"] == "Batch Job Queue Blocked" for e in ev),
                                    what="a blocked event", show=summary)
        blocked = next(e for e in events if e["detail-type"] == "Batch Job Queue Blocked")
        self.assertEqual(blocked["source"], "aws.batch")
        self.assertEqual(blocked["detail"]["jobId"], job)
        self.assertEqual(blocked["detail"]["status"], "RUNNABLE")
        self.assertTrue(blocked["detail"]["statusReason"].startswith("MISCONFIGURATION:"), blocked["detail"])
        self.assertEqual(len(blocked["resources"]), 2)
        self.assertTrue(blocked["resources"][1].endswith(":job-queue/bq"), blocked["resources"])
        # Every body is signed with the webhook's secret, and names its event.
        import hashlib
        import hmac
        for headers, body, raw in self.receiver.posts:
            want = "sha256=" + hmac.new(b"hook-secret", raw, hashlib.sha256).hexdigest()
            self.assertEqual(headers["X-Trainyard-Signature"], want)
            self.assertEqual(headers["X-Trainyard-Event-Id"], body["id"])
            self.assertEqual(headers["X-Trainyard-Webhook"], "all")
        self.batch.terminate_service_job(jobId=job, reason="never fits")

    def scrape(self):
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        return text

    def test_replay_from_a_cursor_with_filters_and_clear_errors(self):
        q = self.create_queue("rq", capacity=1)
        job = self.submit(q, self.command_payload("replayed", "true"), name="replayed", tags={"team": "nlp"})
        self.wait_jobs([job])
        self.receiver.wait(lambda ev: statuses_of(ev, "replayed")[-1:] == ["SUCCEEDED"])
        everything = self.events_call({"After": 0})
        self.assertGreaterEqual(len(everything["Events"]), len(SUCCESS_PATH))
        self.assertEqual(everything["NextCursor"], everything["LatestSeq"])
        batch = self.events_call({"After": 0, "DetailTypes": [SERVICE_JOB]})["Events"]
        self.assertEqual([e["Event"]["detail"]["status"] for e in batch], SUCCESS_PATH)
        self.assertEqual({e["Queue"] for e in batch}, {"rq"})
        # Page by page from a cursor: the same events.
        cursor, paged = 0, []
        while True:
            page = self.events_call({"After": cursor, "Limit": 2, "DetailTypes": SERVICE_JOB})
            paged += page["Events"]
            if not page["Events"]:
                break
            cursor = page["NextCursor"]
        self.assertEqual([e["Seq"] for e in paged], [e["Seq"] for e in batch])
        tagged = self.events_call({"After": 0, "Tags": {"team": "nlp"}, "Sources": ["aws.batch"]})["Events"]
        self.assertEqual(len(tagged), len(SUCCESS_PATH))
        self.assertEqual(self.events_call({"After": 0, "Tags": {"team": "cv"}})["Events"], [])
        # A training job's events carry its Tags, and filter on them.
        self.sm.create_training_job(**self.command_payload("alices", "true"), Tags=[{"Key": "owner", "Value": "alice"}])
        self.wait_training("alices")
        mine = self.events_call({"After": 0, "Tags": {"owner": "alice"}, "DetailTypes": [TRAINING_JOB]})["Events"]
        self.assertEqual([e["Event"]["detail"]["SecondaryStatus"] for e in mine][-1], "Completed")
        self.assertEqual(mine[0]["Event"]["detail"]["Tags"], [{"Key": "owner", "Value": "alice"}])
        pattern = {"detail": {"status": [{"anything-but": ["RUNNABLE", "SCHEDULED", "STARTING"]}]},
                   "source": ["aws.batch"]}
        self.assertEqual([e["Event"]["detail"]["status"] for e in self.events_call({"After": 0, "EventPattern": pattern})["Events"]],
                         ["RUNNING", "SUCCEEDED"])
        # Long polling: nothing newer comes, so the call waits and returns empty at the cursor.
        t0 = time.time()
        latest = self.events_call({"After": "latest", "WaitSeconds": 1})
        self.assertGreaterEqual(time.time() - t0, 0.9)
        self.assertEqual(latest["Events"], [])
        for body, fragment in (({"Limit": 0}, "Limit must be"), ({"After": -1}, "After must be"),
                               ({"WaitSeconds": 99}, "WaitSeconds must be"),
                               ({"EventPattern": {"detail": {"status": "RUNNING"}}}, "detail.status must be an array"),
                               ({"EventPattern": {"source": [{"prefix": 3}]}}, '"prefix" takes a string'),
                               ({"EventPattern": "{not json"}, "not valid JSON"),
                               ({"Sources": 7}, "Sources must be")):
            with self.assertRaises(RuntimeError) as e:
                self.events_call(body)
            self.assertIn("ValidationException", str(e.exception))
            self.assertIn(fragment, str(e.exception))

    def test_server_sent_events_and_the_cli(self):
        key, secret = self.server.credentials()
        u = urllib.parse.urlparse(self.server.url)
        query = "after=0&source=aws.batch&detail-type=" + urllib.parse.quote(SERVICE_JOB)
        req = botocore.awsrequest.AWSRequest(method="GET", url=f"{self.server.url}/trainyard/v1/events/stream?{query}")
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), "events", REGION).add_auth(req)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        conn.request("GET", f"/trainyard/v1/events/stream?{query}", headers=dict(req.headers.items()))
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertTrue(resp.getheader("Content-Type").startswith("text/event-stream"))
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
        follower = subprocess.Popen([BIN, "events", "-f", "--source", "aws.batch", "--detail-type", SERVICE_JOB,
                                     "--endpoint-url", self.server.url],
                                    env=env, stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(0.5)  # the follower starts from the newest event
            q = self.create_queue("sq", capacity=1)
            job = self.submit(q, self.command_payload("streamed", "true"), name="streamed")
            self.wait_jobs([job])
            got, ids = [], []
            while len(got) < len(SUCCESS_PATH):
                line = resp.fp.readline().decode()
                self.assertNotEqual(line, "", "the stream ended")
                if line.startswith("id: "):
                    ids.append(int(line[4:]))
                if line.startswith("data: "):
                    got.append(json.loads(line[6:])["detail"]["status"])
            self.assertEqual(got, SUCCESS_PATH)
            self.assertEqual(ids, sorted(ids))
            lines = [follower.stdout.readline().split() for _ in SUCCESS_PATH]
            self.assertEqual([line[-1] if line[-1] in SUCCESS_PATH else line[-2] for line in lines][:1], ["RUNNABLE"])
            self.assertTrue(all("streamed" in line for line in lines), lines)
        finally:
            follower.kill()
            follower.wait()
            follower.stdout.close()
            conn.close()
        # A client that reconnects with Last-Event-ID resumes right after that event.
        path = "/trainyard/v1/events/stream?" + query.replace("after=0&", "")
        req = botocore.awsrequest.AWSRequest(method="GET", url=self.server.url + path)
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), "events", REGION).add_auth(req)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        conn.request("GET", path, headers=dict(req.headers.items(), **{"Last-Event-ID": str(ids[1])}))
        resp = conn.getresponse()
        resumed = []
        while len(resumed) < len(SUCCESS_PATH) - 2:
            line = resp.fp.readline().decode()
            self.assertNotEqual(line, "", "the resumed stream ended")
            if line.startswith("data: "):
                resumed.append(json.loads(line[6:])["detail"]["status"])
        self.assertEqual(resumed, SUCCESS_PATH[2:])
        conn.close()
        out = subprocess.run([BIN, "events", "--detail-type", SERVICE_JOB, "--json", "--endpoint-url", self.server.url],
                             env=env, capture_output=True, text=True, check=True).stdout.splitlines()
        self.assertEqual([json.loads(line)["detail"]["status"] for line in out], SUCCESS_PATH)
        # Unsigned stream requests are refused.
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("GET", "/trainyard/v1/events/stream")
        self.assertEqual(conn.getresponse().status // 100, 4)
        conn.close()


class EventConfigTest(unittest.TestCase):
    def test_bad_webhook_and_event_settings_are_refused_by_name(self):
        import tempfile
        for text, fragment in (('[[webhooks]]\nname = "a"\nurl = "ftp://x"\n', "webhooks[0].url must start with http"),
                               ('[[webhooks]]\nurl = "http://x"\n', "webhooks[0].name is required"),
                               ('[[webhooks]]\nname = "a"\nurl = "http://x"\ncolour = 1\n', "unknown key 'colour'"),
                               ('[[webhooks]]\nname = "a"\nurl = "http://x"\npattern = "{\\"a\\": 1}"\n',
                                "a must be an array"),
                               ("[events]\nmax_events = 0\n", "events.max_events must be >= 1")):
            d = tempfile.mkdtemp(prefix="trainyard-test-")
            self.addCleanup(shutil.rmtree, d, ignore_errors=True)
            with self.assertRaises(RuntimeError) as e:
                Server(d, config=text).start()
            self.assertIn(fragment, str(e.exception))


if __name__ == "__main__":
    unittest.main()
