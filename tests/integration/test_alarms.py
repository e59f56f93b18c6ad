"""Alarm rules (docs/alarms.md): each fires and clears under the server's simulated clock, as a
CloudWatch-shaped event, a webhook call and a /metrics gauge."""
import http.client
import json
import os
import re
import shutil
import urllib.parse

from harness import Receiver, ServerTest

ALARM = "CloudWatch Alarm State Change"


class AlarmTest(ServerTest):
    server_args = ["--clock=offset"]

    def setUp(self):
        self.receiver = Receiver().start()
        self.server_config = f"""
[[webhooks]]
name = "alarms"
url = "{self.receiver.url}"
sources = ["aws.cloudwatch"]
max_backoff_seconds = 1

[[alarms]]
name = "long-wait"
rule = "runnable_longer_than"
seconds = 600
queue = "aq"

[[alarms]]
name = "failing"
rule = "failure_ratio"
threshold = 0.5
window_seconds = 600
min_jobs = 2
queue = "fq"

[[alarms]]
name = "idle-while-waiting"
rule = "idle_capacity_while_waiting"
threshold = 2
seconds = 60
instance_type = "ml.m5.large"
queue = "iq"

[[alarms]]
name = "pool-expiring"
rule = "warm_pool_expiring"
seconds = 120
"""
        super().setUp()

    def tearDown(self):
        super().tearDown()
        self.receiver.stop()

    def transitions(self, alarm):
        """The alarm's state changes from the event log, in order."""
        out = self.server.raw_call("events", "Events", {"After": 0, "DetailTypes": [ALARM], "Limit": 1000},
                                   path="/trainyard/v1/events")
        return [e["Event"]["detail"]["state"]["value"] for e in out["Events"] if e["Event"]["detail"]["alarmName"] == alarm]

    def wait_state(self, alarm, states, timeout=30):
        import time
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = self.transitions(alarm)
            if got == states:
                return
            time.sleep(0.1)
        self.fail(f"{alarm}: wanted {states}, got {self.transitions(alarm)}")

    def gauge(self, alarm, family="trainyard_alarm_active"):
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        m = re.search(r'^' + family + r'\{alarm="' + alarm + r'",rule="[a-z_]+"\} (\d)$', text, re.M)
        return int(m.group(1))

    def test_runnable_longer_than_fires_and_clears(self):
        q = self.create_queue("aq", capacity=1)
        gate = os.path.join(self.work_dir, "gate")
        self.submit(q, self.command_payload("holder", f"while [ ! -e {gate} ]; do sleep 0.1; done",
                                            StoppingCondition={"MaxRuntimeInSeconds": 86400}))
        waiter = self.submit(q, self.command_payload("waiter", "true"))
        self.wait_jobs([waiter], statuses=("RUNNABLE",))
        self.advance(300)
        self.wait_state("long-wait", [])  # not yet: 300 s < 600 s
        self.advance(400)
        self.wait_state("long-wait", ["ALARM"])
        self.assertEqual(self.gauge("long-wait"), 1)
        event = self.receiver.wait(lambda ev: len(ev) >= 1)[0]
        self.assertEqual(event["source"], "aws.cloudwatch")
        self.assertEqual(event["detail-type"], ALARM)
        self.assertEqual(event["detail"]["previousState"]["value"], "OK")
        self.assertIn(waiter, event["detail"]["state"]["reason"])
        self.assertIn("RUNNABLE for longer than 600 s", event["detail"]["state"]["reason"])
        self.assertEqual(event["detail"]["configuration"]["rule"], "runnable_longer_than")
        self.assertEqual(json.loads(event["detail"]["state"]["reasonData"])["jobs"][0]["jobId"], waiter)
        open(gate, "w").close()
        self.wait_jobs([waiter])
        self.wait_state("long-wait", ["ALARM", "OK"])
        self.assertEqual(self.gauge("long-wait"), 0)
        alarm_events = self.receiver.wait(lambda ev: len(ev) >= 2)
        self.assertEqual([e["detail"]["state"]["value"] for e in alarm_events], ["ALARM", "OK"])

    def test_failure_ratio_fires_and_clears_when_the_window_passes(self):
        q = self.create_queue("fq", capacity=2)
        ok = self.submit(q, self.command_payload("fine", "true"))
        self.wait_jobs([ok])
        bad = [self.submit(q, self.command_payload(f"broken-{i}", "exit 3")) for i in range(2)]
        self.wait_jobs(bad)
        # 2 of 3 failed: 67% > 50%.
        self.wait_state("failing", ["ALARM"])
        self.assertIn("2 of 3 jobs", self.receiver.wait(lambda ev: len(ev) >= 1)[0]["detail"]["state"]["reason"])
        self.advance(700)
        self.wait_state("failing", ["ALARM", "OK"])

    def test_idle_capacity_while_jobs_wait_fires_after_its_duration_and_clears(self):
        q = self.create_queue("iq", capacity=8)
        gate = os.path.join(self.work_dir, "gate")
        holder = self.command_payload("two", f"while [ ! -e {gate} ]; do sleep 0.1; done",
                                      StoppingCondition={"MaxRuntimeInSeconds": 86400})
        holder["ResourceConfig"]["InstanceCount"] = 2
        h = self.submit(q, holder)
        self.wait_jobs([h], statuses=("RUNNING",))
        big = self.command_payload("three", "true")
        big["ResourceConfig"]["InstanceCount"] = 3  # 2 of the host's 4 are free: it waits, 2 idle
        b = self.submit(q, big)
        self.wait_jobs([b], statuses=("RUNNABLE",))
        import time
        deadline = time.time() + 30
        while self.gauge("idle-while-waiting", "trainyard_alarm_pending") != 1:  # holds, not yet for 60 s
            self.assertLess(time.time(), deadline, "the idle condition was never seen")
            time.sleep(0.1)
        self.assertEqual(self.transitions("idle-while-waiting"), [])
        self.advance(61)
        self.wait_state("idle-while-waiting", ["ALARM"])
        reason = self.receiver.wait(lambda ev: len(ev) >= 1)[0]["detail"]["state"]["reason"]
        self.assertEqual(reason, "2 instance(s) idle while 1 job(s) wait in RUNNABLE")
        open(gate, "w").close()
        self.wait_jobs([b])
        self.wait_state("idle-while-waiting", ["ALARM", "OK"])

    def test_warm_pool_about_to_expire_fires_and_clears(self):
        p = self.command_payload("warm", "true")
        p["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 600
        self.sm.create_training_job(**p)
        self.wait_training("warm")
        self.advance(400)
        self.wait_state("pool-expiring", [])  # 200 s left > 120 s
        self.advance(100)
        self.wait_state("pool-expiring", ["ALARM"])
        event = self.receiver.wait(lambda ev: len(ev) >= 1)[0]
        self.assertRegex(event["detail"]["state"]["reason"], r"of warm, in (9[5-9]|100) s$")
        self.advance(200)  # the pool expires
        self.wait_state("pool-expiring", ["ALARM", "OK"])
        # Restarting the server does not raise an alarm again.
        self.server.stop()
        self.server = self.new_server()
        self.assertEqual(self.gauge("pool-expiring"), 0)
        self.wait_state("pool-expiring", ["ALARM", "OK"])

    def test_bad_rules_are_refused_by_name(self):
        from harness import Server
        import tempfile
        for text, fragment in (('[[alarms]]\nname = "a"\nrule = "sometimes"\n', "alarms[0].rule must be one of"),
                               ('[[alarms]]\nname = "a"\nrule = "failure_ratio"\nthreshold = 2.0\n', "threshold must be in (0, 1]"),
                               ('[[alarms]]\nname = "a"\nrule = "runnable_longer_than"\n', "seconds must be >= 1"),
                               ('[[alarms]]\nrule = "warm_pool_expiring"\nseconds = 5\n', "alarms[0].name is required")):
            d = tempfile.mkdtemp(prefix="trainyard-test-")
            self.addCleanup(shutil.rmtree, d, ignore_errors=True)
            with self.assertRaises(RuntimeError) as e:
                Server(d, config=text).start()
            self.assertIn(fragment, str(e.exception))
