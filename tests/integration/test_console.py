"""The web console in a real headless Chromium (docs/console.md): sign-in and its cookie, a job
submitted through boto3 seen live, a waiting job's reason and estimated start, a running job's log
tail and loss curve, a stop from the console that the API reports (and the audit trail records),
no page or data without a session, and cross-site requests refused. Screenshots of every page go
to $TRAINYARD_TEST_OUTPUT/console/ (ctest sets it to build/test-output)."""
import http.client
import http.server
import json
import os
import tempfile
import threading
import time
import unittest
import urllib.parse

import browser
import harness

SKIP = browser.missing()
OUTPUT = os.path.join(os.environ.get("TRAINYARD_TEST_OUTPUT") or os.path.join(tempfile.gettempdir(), "trainyard-test-output"), "console")


@unittest.skipIf(SKIP, SKIP)
class ConsoleTest(harness.ServerTest):
    # The queue page's share chart gets a point a second.
    server_config = "[console]\nshare_history_interval_seconds = 1\n"

    def setUp(self):
        super().setUp()
        self.browser = browser.Browser()
        self.addCleanup(self.browser.close)
        self.key, self.secret = self.server.credentials()

    # ---- helpers ----
    def console(self, fragment=""):
        return self.server.url + "/console/" + fragment

    def sign_in(self, key=None, secret=None):
        b = self.browser
        self.assertEqual(b.goto(self.console())["url"], self.server.url + "/console/signin")
        b.fill("signin-access-key-id", key or self.key)
        b.fill("signin-secret-access-key", secret or self.secret)
        b.click("signin-button")
        b.wait("page-overview")

    def open(self, fragment, testid):
        self.browser.goto(self.console("#" + fragment))
        return self.browser.wait(testid)

    def shot(self, name):
        self.browser.screenshot(os.path.join(OUTPUT, name + ".png"))

    def gated_job(self, name, lines=()):
        """A job that prints `lines`, then waits for <work_dir>/<name>.gate."""
        gate = os.path.join(self.work_dir, name + ".gate")
        prints = "; sleep 1; ".join(f"echo '{line}'" for line in lines)  # a second apart: a curve, not a dot
        command = (f"{prints + '; ' if prints else ''}"
                   f"while [ ! -e {gate} ]; do sleep 0.1; done; echo done")
        payload = self.command_payload(name, command)
        payload["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]
        return payload, gate

    def running_gated_job(self, name):
        """A gated job RUNNING in a new FIFO queue "q" (let go when the test ends): its id."""
        self.create_queue("q", capacity=1)
        payload, gate = self.gated_job(name, ["started"])
        self.addCleanup(self.release, gate)
        job_id = self.submit("q", payload)
        self.wait_jobs([job_id], statuses=("RUNNING",), timeout=60)
        return job_id

    def release(self, gate):
        if os.path.isdir(os.path.dirname(gate)):  # a cleanup after tearDown took the directory: nothing waits
            open(gate, "w").close()

    def request(self, method, path, body=None, headers=None):
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request(method, path, body=body, headers=headers or {})
        res = conn.getresponse()
        data = res.read()
        conn.close()
        return res.status, dict(res.getheaders()), data

    def api_session(self):
        """Signs in over plain HTTP: (cookie header, csrf token)."""
        status, headers, data = self.request("POST", "/console/api/signin",
                                             json.dumps({"accessKeyId": self.key, "secretAccessKey": self.secret}),
                                             {"Content-Type": "application/json"})
        self.assertEqual(status, 200, data)
        cookie = headers["Set-Cookie"].split(";")[0]
        return cookie, json.loads(data)["csrfToken"]

    # ---- tests ----
    def test_no_page_or_data_without_a_session(self):
        # A page: sent to sign in. Data and calls: 401, whatever the path.
        status, headers, _ = self.request("GET", "/console/")
        self.assertEqual((status, headers.get("Location")), (302, "/console/signin"))
        for method, path in [("GET", "/console/api/session"), ("GET", "/console/api/events"),
                             ("POST", "/console/api/call"), ("POST", "/console/api/signout")]:
            status, _, data = self.request(method, path, json.dumps({"api": "batch", "action": "DescribeJobQueues"}),
                                           {"Cookie": "trainyard_console=" + "0" * 64})
            self.assertEqual(status, 401, (path, data))
            self.assertEqual(json.loads(data)["__type"], "MissingAuthenticationTokenException")
        # The browser lands on the sign-in page and a wrong secret is refused there.
        b = self.browser
        self.assertIn("/console/signin", b.goto(self.console("#/jobs"))["url"])
        b.fill("signin-access-key-id", self.key)
        b.fill("signin-secret-access-key", "not-the-secret")
        b.click("signin-button")
        self.assertIn("AccessDeniedException", b.wait("signin-error"))
        self.assertEqual(b.do("cookies")["cookies"], [])
        # Signed in, the cookie is HttpOnly, SameSite=Strict and expires; signed out, it is gone
        # and the old value opens nothing.
        self.sign_in()
        [cookie] = b.do("cookies")["cookies"]
        self.assertTrue(cookie["httpOnly"])
        self.assertEqual(cookie["sameSite"], "Strict")
        self.assertGreater(cookie["expires"], time.time())
        self.assertLess(cookie["expires"], time.time() + 8 * 3600 + 60)
        self.assertIsNone(b.eval("document.cookie.includes('trainyard_console') ? 'readable' : null"))
        self.shot("overview")
        b.click("signout-button")
        b.wait(sel="[data-testid=signin-form]")
        status, _, _ = self.request("GET", "/console/api/session",
                                    headers={"Cookie": "trainyard_console=" + cookie["value"]})
        self.assertEqual(status, 401)

    def test_job_submitted_through_boto3_moves_live(self):
        self.create_queue("q", capacity=1)
        self.sign_in()
        b = self.browser
        self.open("/jobs?queue=q", "page-jobs")
        b.wait("jobs-table")
        payload, gate = self.gated_job("live-1", ["epoch 1 loss=0.90", "epoch 2 loss=0.55", "epoch 3 loss=0.31"])
        job_id = self.submit("q", payload)
        row = f'[data-testid="job-row"][data-job-name="live-1"] [data-testid="job-status"]'
        # No reload: the row appears from the event stream and its status follows the job.
        b.wait(sel=row, text="RUNNING", timeout=30000)
        self.shot("jobs")
        # The running job's page: its log tail and its loss curve (three points parsed from the log).
        self.open(f"/jobs/live-1?id={job_id}", "page-job")
        self.assertIn("loss=0.31", b.wait("log-tail", text="loss=0.31", timeout=30000))
        # The chart holds the three points parsed from the log (it redraws every few seconds).
        b.wait(sel='[data-testid="metric-chart-loss"][data-points="3"]', timeout=30000)
        self.assertEqual(b.eval("document.querySelectorAll('[data-testid=\"metric-chart-loss\"] canvas').length"), 1)
        self.shot("job")
        # Back on the list, the row reaches SUCCEEDED live once the job is let go.
        self.open("/jobs?queue=q", "page-jobs")
        b.wait(sel=row, text="RUNNING", timeout=30000)
        self.release(gate)
        b.wait(sel=row, text="SUCCEEDED", timeout=60000)
        self.assertEqual(self.describe_raw(job_id)["status"], "SUCCEEDED")

    def test_waiting_job_shows_reason_and_estimated_start(self):
        self.create_fair_queue("q", [("vision", 1.0), ("speech", 2.0)])
        first, gate = self.gated_job("holder")
        self.addCleanup(self.release, gate)
        first_id = self.submit("q", first, shareIdentifier="vision")
        self.wait_jobs([first_id], statuses=("RUNNING",), timeout=60)
        waiting_id = self.submit("q", self.command_payload("waiter", "echo hi"), shareIdentifier="speech")
        deadline = time.time() + 30
        while time.time() < deadline:
            snap = self.server.raw_call("batch", "GetJobQueueSnapshot", {"jobQueue": "q"})
            front = snap["frontOfQueue"]["jobs"]
            if front and front[0].get("trainyardWaitReason"):
                break
            time.sleep(0.1)
        self.assertTrue(front and front[0].get("trainyardWaitReason"), snap)
        self.sign_in()
        b = self.browser
        # The queue page: the front of the queue, with the reason in words and the estimated start.
        self.open("/queues/q", "page-queue")
        cell = f'[data-testid="front-row"][data-job-id="{waiting_id}"]'
        reason = b.wait(sel=cell + ' [data-testid="wait-reason"]')
        self.assertTrue(reason.strip(), "the wait reason is empty")
        self.assertNotIn("undefined", reason)
        estimate = b.wait(sel=cell + ' [data-testid="estimated-start"]')
        self.assertTrue(estimate.strip() and estimate.strip() != "—", estimate)
        # Each share against its entitlement (QueueStandings), and over time (ShareHistory).
        self.assertIn("vision", b.wait(sel='[data-testid="share-row"][data-share="vision"]'))
        b.wait(sel='[data-testid="share-chart"] canvas', timeout=30000)
        self.shot("queue")
        # The waiting job's own page says the same.
        self.open(f"/jobs/waiter?id={waiting_id}", "page-job")
        self.assertTrue(b.wait("wait-reason").strip())
        self.assertTrue(b.wait("estimated-start").strip())
        self.shot("job-waiting")

    def test_stop_from_console_is_the_api_stop(self):
        job_id = self.running_gated_job("to-stop")
        self.sign_in()
        b = self.browser
        self.open(f"/jobs/to-stop?id={job_id}", "page-job")
        b.click("stop-button")
        b.wait("confirm-dialog")
        b.click("confirm-button")
        self.assertIn("The API answered", b.wait("action-result", text="The API answered"))
        # The API reports what the console did.
        deadline = time.time() + 60
        while self.sm.describe_training_job(TrainingJobName="to-stop")["TrainingJobStatus"] not in ("Stopping", "Stopped"):
            self.assertLess(time.time(), deadline, "the console's stop never reached the job")
            time.sleep(0.1)
        self.wait_jobs([job_id], statuses=("SUCCEEDED", "FAILED"), timeout=60)
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="to-stop")["TrainingJobStatus"], "Stopped")
        # The same audit trail as a signed call: StopTrainingJob by root, from the console.
        audit = self.server.admin("admin/audit", {"LookupAttributes": [
            {"AttributeKey": "EventName", "AttributeValue": "StopTrainingJob"}]})
        self.assertEqual(len(audit["Events"]), 1, audit)
        self.shot("job-stopped")

    def test_a_user_does_in_the_console_what_their_policies_allow(self):
        job_id = self.running_gated_job("not-yours")
        iam = lambda op, body: self.server.admin("admin/iam/" + op, body)
        read_only = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Resource": "*", "Action": [
            "sagemaker:Describe*", "sagemaker:List*", "batch:Describe*", "batch:List*", "batch:Get*",
            "logs:*", "trainyard:*"]}]}
        iam("CreatePolicy", {"PolicyName": "viewer", "PolicyDocument": json.dumps(read_only)})
        iam("CreateUser", {"UserName": "viewer"})
        iam("AttachUserPolicy", {"UserName": "viewer", "PolicyName": "viewer"})
        key = iam("CreateAccessKey", {"UserName": "viewer"})["AccessKey"]
        self.sign_in(key["AccessKeyId"], key["SecretAccessKey"])
        b = self.browser
        self.assertIn("user/viewer", b.wait("principal"))
        self.open(f"/jobs/not-yours?id={job_id}", "page-job")
        b.wait("job-status", text="InProgress")
        b.click("stop-button")
        b.click("confirm-button")
        refusal = b.wait("action-result", text="AccessDeniedException")
        self.assertIn("sagemaker:StopTrainingJob", refusal)
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="not-yours")["TrainingJobStatus"], "InProgress")
        # The refusal is in the audit trail under the user's name, as a signed call's would be.
        audit = self.server.admin("admin/audit", {"DeniedOnly": True, "LookupAttributes": [
            {"AttributeKey": "EventName", "AttributeValue": "StopTrainingJob"}]})
        self.assertEqual(len(audit["Events"]), 1, audit)
        self.assertIn("user/viewer", json.dumps(audit["Events"][0]))
        # Once the user's key is deleted, the session opens nothing more: the next read sends the
        # browser to sign in.
        iam("DeleteAccessKey", {"UserName": "viewer", "AccessKeyId": key["AccessKeyId"]})
        b.goto("about:blank")
        self.assertIn("/console/signin", b.goto(self.console("#/jobs"))["url"])

    def test_cross_site_actions_are_refused(self):
        job_id = self.running_gated_job("victim")
        stop = json.dumps({"api": "sagemaker", "action": "StopTrainingJob", "input": {"TrainingJobName": "victim"}})
        # Over plain HTTP: the session's cookie alone, or with a foreign Origin, changes nothing.
        cookie, token = self.api_session()
        refused = [
            {"Cookie": cookie},
            {"Cookie": cookie, "X-Trainyard-Csrf": "0" * 64},
            {"Cookie": cookie, "X-Trainyard-Csrf": token, "Origin": "http://attacker.example"},
            {"Cookie": cookie, "X-Trainyard-Csrf": token, "Sec-Fetch-Site": "cross-site"},
        ]
        for headers in refused:
            status, _, data = self.request("POST", "/console/api/call", stop, headers)
            self.assertEqual(status, 403, (headers, data))
            self.assertEqual(json.loads(data)["__type"], "AccessDeniedException")
            self.assertIn("Cross-site request refused", json.loads(data)["message"])
        # In the browser: a page of another origin on this host (same site, so the browser sends the
        # cookie) posts a form and a fetch at the console while the user is signed in.
        self.sign_in()
        port = urllib.parse.urlparse(self.server.url).port
        attack = f"""<!doctype html><body>
<form id=f method=POST action="http://127.0.0.1:{port}/console/api/call" enctype="text/plain">
<input name='{{"api":"sagemaker","action":"StopTrainingJob","input":{{"TrainingJobName":"victim"}},"x":"' value='"}}'>
</form><script>
fetch("http://127.0.0.1:{port}/console/api/call", {{method: "POST", mode: "no-cors", credentials: "include",
  body: {json.dumps(stop)}}}).finally(() => {{ document.title = "fetched"; document.getElementById("f").submit(); }});
</script></body>"""
        seen = []

        class Attacker(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append(self.path)
                body = attack.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
        threading.Thread(target=site.serve_forever, daemon=True).start()
        self.addCleanup(site.server_close)
        self.addCleanup(site.shutdown)
        b = self.browser
        b.goto(f"http://127.0.0.1:{site.server_address[1]}/attack.html")
        # The form's navigation lands on the console's refusal.
        b.wait(sel="body", text="Cross-site request refused", timeout=20000)
        self.assertIn("/attack.html", seen)
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="victim")["TrainingJobStatus"], "InProgress")
        self.assertEqual(self.describe_raw(job_id)["status"], "RUNNING")
        # Nothing was stopped, and no stop reached the audit trail.
        audit = self.server.admin("admin/audit", {"LookupAttributes": [
            {"AttributeKey": "EventName", "AttributeValue": "StopTrainingJob"}]})
        self.assertEqual(audit["Events"], [])

    def test_every_page_renders(self):
        """Each page loads without a script error, and its screenshot is kept."""
        self.create_queue("q", capacity=2)
        job_id = self.submit("q", self.command_payload("quick", "echo loss=0.5"), tags={"team": "vision"})
        other = self.submit("q", self.command_payload("untagged", "true"))
        self.wait_jobs([job_id, other], timeout=60)
        self.sign_in()
        b = self.browser
        # The tag filter is applied on the server: one row, the tagged job's.
        self.open("/jobs?queue=q&tag=team%3Dvision", "page-jobs")
        b.wait(sel='[data-testid="job-row"][data-job-name="quick"]')
        self.assertEqual(b.do("count", sel='[data-testid="job-row"]')["count"], 1)
        for fragment, testid, name in [("/", "page-overview", "overview-with-queue"),
                                       ("/queues/q", "page-queue", "queue-idle"),
                                       ("/jobs", "page-jobs", "jobs-all"),
                                       ("/jobs/quick", "page-job", "job-finished"),
                                       ("/warm-pools", "page-warm-pools", "warm-pools"),
                                       ("/tuning", "page-tuning", "tuning"),
                                       ("/what-if", "page-what-if", "what-if")]:
            self.open(fragment, testid)
            if testid == "page-overview":
                b.wait(sel='[data-testid="queue-row"][data-queue="q"]')
            if testid == "page-what-if":
                # The queue's own history replayed: both finished jobs are counted in the result.
                b.click("what-if-run")
                self.assertIn("2 jobs of queue q", b.wait("what-if-result", timeout=30000))
            time.sleep(0.3)  # the page's reads settle before the picture; nothing is asserted on time
            self.shot(name)
            self.assertEqual(b.do("errors")["errors"], [], fragment)


if __name__ == "__main__":
    unittest.main()
