"""Users, access keys and policies (docs/security.md, "Users and keys"): three teams share one
server under the documented policies; each submits only to its own share, sees only its own jobs
and logs, and cannot stop another team's job; an administrator sees everything; keys survive a
restart, a deleted key stops working, and no secret reaches the log or the events."""
import json
import os
import time
import unittest

from botocore.exceptions import ClientError

from harness import ServerTest, REGION

ACCOUNT = "000000000000"

TEAM_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Sid": "SubmitToOwnShare", "Effect": "Allow",
         "Action": ["batch:SubmitServiceJob"],
         "Resource": ["arn:aws:batch:*:*:job-queue/shared", "arn:aws:batch:*:*:service-job/*"],
         "Condition": {"StringEquals": {"batch:ShareIdentifier": "${aws:PrincipalTag/team}"}}},
        {"Sid": "DescribeOwnJobs", "Effect": "Allow",
         "Action": ["batch:DescribeServiceJob", "batch:ListServiceJobs", "sagemaker:Describe*",
                    "logs:DescribeLogStreams", "logs:GetLogEvents", "logs:FilterLogEvents"],
         "Resource": "*",
         "Condition": {"StringEqualsIfExists": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
        {"Sid": "TerminateOwnJobs", "Effect": "Allow",
         "Action": "batch:TerminateServiceJob", "Resource": "arn:aws:batch:*:*:service-job/*",
         "Condition": {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
        {"Sid": "TeamData", "Effect": "Allow", "Action": "s3:*",
         "Resource": ["arn:aws:s3:::team-${aws:PrincipalTag/team}-data",
                      "arn:aws:s3:::team-${aws:PrincipalTag/team}-data/*"]},
    ]}

GUARD_RAIL = {
    "Version": "2012-10-17",
    "Statement": [
        {"Sid": "DenyTerminateOthers", "Effect": "Deny",
         "Action": ["batch:TerminateServiceJob", "sagemaker:StopTrainingJob"], "Resource": "*",
         "Condition": {"StringNotEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
    ]}

ADMIN = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}

GROUP = "/aws/sagemaker/TrainingJobs"


class IamTest(ServerTest):
    def iam(self, op, body):
        return self.server.admin("admin/iam/" + op, body)

    def setUp(self):
        super().setUp()
        self.keys = {}
        self.clients = []
        self.iam("CreatePolicy", {"PolicyName": "team", "PolicyDocument": json.dumps(TEAM_POLICY)})
        self.iam("CreatePolicy", {"PolicyName": "guard-rail", "PolicyDocument": json.dumps(GUARD_RAIL)})
        self.iam("CreatePolicy", {"PolicyName": "admin", "PolicyDocument": json.dumps(ADMIN)})
        for team in "abc":
            user = "member-" + team
            self.iam("CreateUser", {"UserName": user, "Tags": [{"Key": "team", "Value": team}]})
            for policy in ("team", "guard-rail"):
                self.iam("AttachUserPolicy", {"UserName": user, "PolicyName": policy})
            self.keys[team] = self.iam("CreateAccessKey", {"UserName": user})["AccessKey"]
        self.iam("CreateUser", {"UserName": "ops"})
        self.iam("AttachUserPolicy", {"UserName": "ops", "PolicyName": "admin"})
        self.keys["ops"] = self.iam("CreateAccessKey", {"UserName": "ops"})["AccessKey"]
        # One fair-share queue, "shared", with room for one job per team.
        policy = self.batch.create_scheduling_policy(name="fair", fairsharePolicy={"shareDecaySeconds": 0})["arn"]
        self.batch.create_service_environment(
            serviceEnvironmentName="shared-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 3, "capacityUnit": "NUM_INSTANCES"}])
        self.batch.create_job_queue(jobQueueName="shared", jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    schedulingPolicyArn=policy,
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "shared-env"}])
        self.gate = os.path.join(self.work_dir, "gate")
        for who in self.keys:  # each team's outputs go to its own bucket
            os.makedirs(self.bucket_path(f"team-{who}-data"), exist_ok=True)

    def tearDown(self):
        for c in self.clients:
            c.close()
        super().tearDown()

    def client_as(self, who, service):
        k = self.keys[who]
        c = self.server.client(service, key=k["AccessKeyId"], secret=k["SecretAccessKey"], project_models=True)
        self.clients.append(c)
        return c

    def submit_as(self, who, share, name):
        # Prints a line, then runs until the test opens the gate.
        payload = self.command_payload(
            name, f"echo hello from {name}; while [ ! -f {self.gate} ]; do sleep 0.1; done", bucket=f"team-{who}-data")
        return self.client_as(who, "batch").submit_service_job(
            jobName=name, jobQueue="shared", serviceJobType="SAGEMAKER_TRAINING", shareIdentifier=share,
            schedulingPriority=1, tags={"team": share}, serviceRequestPayload=json.dumps(payload))["jobId"]

    def assertDenied(self, call, action):
        with self.assertRaises(ClientError) as e:
            call()
        err = e.exception.response
        self.assertEqual(err["ResponseMetadata"]["HTTPStatusCode"], 403, err)
        self.assertEqual(err["Error"]["Code"], "AccessDeniedException", err)
        self.assertIn("is not authorized to perform: " + action, err["Error"]["Message"])
        return err["Error"]["Message"]

    def wait_status(self, job_id, status, timeout=60):
        deadline = time.time() + timeout
        while True:
            job = self.batch.describe_service_job(jobId=job_id)
            if job["status"] == status:
                return job
            if time.time() > deadline:
                self.fail(f"{job_id} is {job['status']}, not {status}")
            time.sleep(0.05)

    def test_teams_submit_only_to_their_own_share(self):
        jobs = {team: self.submit_as(team, team, "job-" + team) for team in "abc"}
        for job in jobs.values():
            self.wait_status(job, "RUNNING")  # ListServiceJobs lists RUNNING jobs by default
        message = self.assertDenied(lambda: self.submit_as("c", "b", "sneaky"), "batch:SubmitServiceJob")
        self.assertEqual(
            message,
            f"User: arn:aws:iam::{ACCOUNT}:user/member-c is not authorized to perform: batch:SubmitServiceJob on "
            f"resource: arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/shared because no identity-based policy allows "
            "the batch:SubmitServiceJob action")
        # Nothing was created by the refusal.
        names = [j["jobName"] for j in self.batch.list_service_jobs(jobQueue="shared")["jobSummaryList"]]
        self.assertEqual(sorted(names), ["job-a", "job-b", "job-c"])
        detail = self.server.raw_call("batch", "DescribeServiceJob", {"jobId": jobs["a"]})
        self.assertEqual(detail["tags"], {"team": "a"})

    def test_each_team_sees_only_its_own_jobs_and_logs(self):
        jobs = {team: self.submit_as(team, team, "job-" + team) for team in "abc"}
        for team in "abc":
            self.wait_status(jobs[team], "RUNNING")
        batch_a = self.client_as("a", "batch")
        listed = batch_a.list_service_jobs(jobQueue="shared")["jobSummaryList"]
        self.assertEqual([j["jobId"] for j in listed], [jobs["a"]])
        self.assertEqual(batch_a.describe_service_job(jobId=jobs["a"])["jobName"], "job-a")
        self.assertDenied(lambda: batch_a.describe_service_job(jobId=jobs["b"]), "batch:DescribeServiceJob")
        sm_a = self.client_as("a", "sagemaker")
        self.assertEqual(sm_a.describe_training_job(TrainingJobName="job-a")["TrainingJobName"], "job-a")
        self.assertDenied(lambda: sm_a.describe_training_job(TrainingJobName="job-b"), "sagemaker:DescribeTrainingJob")
        # Logs: the streams of the team's own jobs only.
        logs_a = self.client_as("a", "logs")
        deadline = time.time() + 30
        while True:
            streams = [s["logStreamName"] for s in logs_a.describe_log_streams(logGroupName=GROUP)["logStreams"]]
            if streams or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertTrue(streams and all(s.startswith("job-a/") for s in streams), streams)
        admin_logs = self.client_as("ops", "logs")
        all_streams = [s["logStreamName"] for s in admin_logs.describe_log_streams(logGroupName=GROUP)["logStreams"]]
        other = [s for s in all_streams if s.startswith("job-b/")]
        self.assertTrue(other, all_streams)
        self.assertDenied(lambda: logs_a.get_log_events(logGroupName=GROUP, logStreamName=other[0]), "logs:GetLogEvents")
        events = logs_a.filter_log_events(logGroupName=GROUP)["events"]
        self.assertTrue(all(e["logStreamName"].startswith("job-a/") for e in events), events)
        # The administrator sees every job.
        listed = self.client_as("ops", "batch").list_service_jobs(jobQueue="shared")["jobSummaryList"]
        self.assertEqual(sorted(j["jobId"] for j in listed), sorted(jobs.values()))
        open(self.gate, "w").close()

    def test_a_team_cannot_terminate_another_teams_job(self):
        job_a = self.submit_as("a", "a", "job-a")
        self.wait_status(job_a, "RUNNING")
        batch_c = self.client_as("c", "batch")
        message = self.assertDenied(lambda: batch_c.terminate_service_job(jobId=job_a, reason="mine now"),
                                    "batch:TerminateServiceJob")
        self.assertIn("with an explicit deny in an identity-based policy: guard-rail", message)
        # The batch form is checked job by job: naming another team's job refuses the whole call.
        self.assertDenied(lambda: batch_c.terminate_service_jobs(jobs=[job_a], reason="mine now"),
                          "batch:TerminateServiceJobs")
        sm_c = self.client_as("c", "sagemaker")
        self.assertDenied(lambda: sm_c.stop_training_job(TrainingJobName="job-a"), "sagemaker:StopTrainingJob")
        self.assertEqual(self.batch.describe_service_job(jobId=job_a)["status"], "RUNNING")
        # The refusal is in the audit trail under the user, with the statement that decided it.
        found = self.server.admin("admin/audit", {"LookupAttributes": [
            {"AttributeKey": "Principal", "AttributeValue": f"arn:aws:iam::{ACCOUNT}:user/member-c"},
            {"AttributeKey": "Action", "AttributeValue": "batch:TerminateServiceJob"}]})["Events"]
        self.assertEqual(len(found), 1, found)
        record = json.loads(found[0]["CloudTrailEvent"])
        self.assertEqual(record["errorCode"], "AccessDeniedException")
        self.assertEqual(record["decidingStatement"], "guard-rail/DenyTerminateOthers")
        self.assertEqual(record["userIdentity"]["type"], "IAMUser")
        # Its own team may.
        self.client_as("a", "batch").terminate_service_job(jobId=job_a, reason="done")
        self.wait_status(job_a, "FAILED")

    def test_keys_survive_a_restart_and_a_deleted_key_stops_working(self):
        self.wait_status(self.submit_as("a", "a", "job-a"), "RUNNING")
        self.server.stop()
        self.server = self.new_server()
        self.batch = self.server.client("batch")
        self.sm = self.server.client("sagemaker")
        batch_a = self.client_as("a", "batch")
        self.assertEqual(len(batch_a.list_service_jobs(jobQueue="shared")["jobSummaryList"]), 1)
        self.iam("DeleteAccessKey", {"UserName": "member-a", "AccessKeyId": self.keys["a"]["AccessKeyId"]})
        with self.assertRaises(ClientError) as e:
            batch_a.list_service_jobs(jobQueue="shared")
        self.assertEqual(e.exception.response["Error"]["Code"], "UnrecognizedClientException")
        # Listing keys never shows a secret.
        listed = self.iam("ListAccessKeys", {})
        self.assertNotIn("SecretAccessKey", json.dumps(listed))
        self.assertEqual(sorted(k["UserName"] for k in listed["AccessKeyMetadata"]), ["member-b", "member-c", "ops"])

    def test_secrets_are_absent_from_the_log_and_the_events(self):
        self.submit_as("b", "b", "job-b")
        self.iam("CreateAccessKey", {"UserName": "member-b"})
        self.server.stop()
        with open(os.path.join(self.data_dir, "server.log"), "rb") as f:
            log = f.read().decode(errors="replace")
        self.server = self.new_server()
        events = self.server.raw_call("events", "Events", {"After": "0", "Limit": 1000}, path="/trainyard/v1/events")
        self.assertIn("job-b", json.dumps(events))  # the events were read: the check below is not vacuous
        self.assertTrue(log)
        for k in self.keys.values():
            self.assertNotIn(k["SecretAccessKey"], log)
            self.assertNotIn(k["SecretAccessKey"], json.dumps(events))

    def test_admin_endpoints_need_permission(self):
        iam_c = lambda op, body: self.signed_admin("c", op, body)
        status, body = iam_c("CreateUser", {"UserName": "mallory"})
        self.assertEqual(status, 403, body)
        self.assertEqual(body["__type"], "AccessDeniedException")
        self.assertIn("trainyard:CreateUser", body["message"])
        self.assertNotIn("mallory", [u["UserName"] for u in self.iam("ListUsers", {})["Users"]])
        status, body = self.signed_admin("ops", "CreateUser", {"UserName": "mallory"})
        self.assertEqual(status, 200, body)

    def test_malformed_policy_is_refused_naming_the_rule(self):
        with self.assertRaises(RuntimeError) as e:
            self.iam("CreatePolicy", {"PolicyName": "bad", "PolicyDocument": json.dumps(
                {"Version": "2012-10-17", "Statement": [{"Effect": "Permit", "Action": "*", "Resource": "*"}]})})
        self.assertIn("MalformedPolicyDocument", str(e.exception))
        self.assertIn("Effect", str(e.exception))
        self.assertNotIn("bad", [p["PolicyName"] for p in self.iam("ListPolicies", {})["Policies"]])

    def signed_admin(self, who, op, body):
        import http.client
        import urllib.parse
        import botocore.auth
        import botocore.awsrequest
        import botocore.credentials
        k = self.keys[who]
        path = "/trainyard/v1/admin/iam/" + op
        req = botocore.awsrequest.AWSRequest(method="POST", url=self.server.url + path, data=json.dumps(body),
                                             headers={"Content-Type": "application/x-amz-json-1.1"})
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(k["AccessKeyId"], k["SecretAccessKey"]),
                                "sagemaker", REGION).add_auth(req)
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("POST", path, body=req.body, headers=dict(req.headers.items()))
        resp = conn.getresponse()
        data = json.loads(resp.read() or b"{}")
        conn.close()
        return resp.status, data


class MetricsTokenTest(ServerTest):
    """With server.metrics_token set, /metrics takes the token, root, or a user allowed trainyard:GetMetrics."""
    server_config = '[server]\nmetrics_token = "scrape-me"\n'

    def get(self, headers):
        import http.client
        import urllib.parse
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("GET", "/metrics", headers=headers)
        resp = conn.getresponse()
        body = resp.read().decode()
        conn.close()
        return resp.status, body

    def signed(self, key, secret):
        import botocore.auth
        import botocore.awsrequest
        import botocore.credentials
        req = botocore.awsrequest.AWSRequest(method="GET", url=self.server.url + "/metrics")
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), "sagemaker", REGION).add_auth(req)
        return dict(req.headers.items())

    def test_a_scrape_needs_the_token_or_a_permitted_signature(self):
        self.assertEqual(self.get({})[0], 403)
        status, body = self.get({"Authorization": "Bearer wrong"})
        self.assertEqual(status, 403)
        self.assertNotIn("scrape-me", body)
        status, body = self.get({"Authorization": "Bearer scrape-me"})
        self.assertEqual(status, 200)
        self.assertIn("trainyard_", body)
        self.assertEqual(self.get(self.signed(*self.server.credentials()))[0], 200)
        admin = lambda op, body: self.server.admin("admin/iam/" + op, body)
        admin("CreateUser", {"UserName": "viewer"})
        k = admin("CreateAccessKey", {"UserName": "viewer"})["AccessKey"]
        status, body = self.get(self.signed(k["AccessKeyId"], k["SecretAccessKey"]))
        self.assertEqual(status, 403)
        self.assertIn("trainyard:GetMetrics", body)
        admin("CreatePolicy", {"PolicyName": "scrape", "PolicyDocument": json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "trainyard:GetMetrics", "Resource": "*"}]})})
        admin("AttachUserPolicy", {"UserName": "viewer", "PolicyName": "scrape"})
        self.assertEqual(self.get(self.signed(k["AccessKeyId"], k["SecretAccessKey"]))[0], 200)


if __name__ == "__main__":
    unittest.main()
