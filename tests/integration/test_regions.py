"""Several regions behind one endpoint (docs/regions.md): three servers on loopback, one region
each, joined by a shared peer secret. A client that knows only region A's endpoint reaches region B
by its region_name: the request is authenticated at A and forwarded to B, which authorizes it
against its own resources and answers; B's state changes, A's does not. A forged, stale or
replayed forwarded request is refused; a peer that is down is a 503 naming the region, with
nothing done locally; a region that is neither this one nor a peer is refused as AWS refuses it."""
import hashlib
import hmac
import http.client
import json
import os
import shutil
import socket
import tempfile
import time
import unittest
import urllib.parse

import botocore.config
from botocore.exceptions import ClientError

import harness

A, B, C, DOWN = "us-east-1", "eu-west-1", "ap-south-1", "sa-east-1"
KEY, SECRET = "AKIAREGIONSTEST00001", "regions-test-secret-0123456789abcdefghijk"
PEER_SECRET = "f3c1b2a4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8"


class RegionServer(harness.Server):
    """A server whose root key is the federation's shared bootstrap key (from the environment)."""

    def credentials(self):
        return KEY, SECRET


def region_config(region, secret_file, peers=None):
    text = f'[server]\nregion = "{region}"\n\n[regions]\npeer_secret_file = "{secret_file}"\n'
    if peers:
        text += "peers = { " + ", ".join(f'"{r}" = "{u}"' for r, u in peers.items()) + " }\n"
    return text


class Federation:
    """Starts region servers sharing KEY/SECRET and PEER_SECRET; the entry one knows the others."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="trainyard-regions-")
        self.secret_file = os.path.join(self.root, "peer-secret")
        with open(os.open(self.secret_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(PEER_SECRET + "\n")
        self.servers = {}
        # A port bound but never listening: connecting to it is refused at once, and nothing else
        # can take it while the test runs.
        self.dead = socket.socket()
        self.dead.bind(("127.0.0.1", 0))

    def start(self, region, peers=None, extra=""):
        data_dir = os.path.join(self.root, region)
        os.makedirs(data_dir, exist_ok=True)
        env = {"TRAINYARD_ROOT_ACCESS_KEY_ID": KEY, "TRAINYARD_ROOT_SECRET_ACCESS_KEY": SECRET}
        server = RegionServer(data_dir, env=env, config=region_config(region, self.secret_file, peers) + extra)
        self.servers[region] = server.start()
        return server

    def dead_url(self):
        return "http://127.0.0.1:%d" % self.dead.getsockname()[1]

    def stop(self):
        for region, server in self.servers.items():
            server.stop()
            harness.kill_attempt_processes(server.data_dir)
        self.dead.close()
        shutil.rmtree(self.root, ignore_errors=True)


def client(server, service, region, key=KEY, secret=SECRET, **config):
    cfg = botocore.config.Config(retries={"max_attempts": 1}, **config)
    import boto3
    return boto3.client(service, endpoint_url=server.url, region_name=region, aws_access_key_id=key,
                        aws_secret_access_key=secret, config=cfg)


# The headers a peer signature must cover when sent (api/forward.h, PeerMustSign).
PEER_MUST_SIGN = {"host", "content-type", "content-md5", "content-encoding", "range", "if-match", "if-none-match",
                  "if-modified-since", "if-unmodified-since"}


def peer_headers(method, path, query, body, sent_ms, caller, headers, server):
    """The request's `headers` with its Host (`server`'s) and what a region adds to a request it
    forwards (api/forward.h), signed with PEER_SECRET."""
    import base64
    blob = base64.b64encode(json.dumps(caller).encode()).decode()
    headers = dict(headers, Host=urllib.parse.urlparse(server.url).netloc)
    names = sorted({k.lower() for k in headers if k.lower() in PEER_MUST_SIGN or k.lower().startswith("x-amz-")})
    lines = ["%s:%s" % (n, ",".join(v.strip() for k, v in headers.items() if k.lower() == n)) for n in names]
    digest = hashlib.sha256(body).hexdigest()
    to_sign = "\n".join(["TRAINYARD-PEER-HMAC-SHA256-V2", method, path, query] + lines +
                        ["", ";".join(names), digest, str(sent_ms), blob])
    signature = hmac.new(PEER_SECRET.encode(), to_sign.encode(), hashlib.sha256).hexdigest()
    return dict(headers, **{"X-Trainyard-Peer-Caller": blob, "X-Trainyard-Peer-Time": str(sent_ms),
                            "X-Trainyard-Peer-Content-Sha256": digest,
                            "X-Trainyard-Peer-Signed-Headers": ";".join(names),
                            "X-Trainyard-Peer-Signature": signature})


def old_peer_headers(method, path, query, body, sent_ms, caller):
    """What a region of the previous version added: a signature over the method, path, query, body,
    time and caller only."""
    import base64
    blob = base64.b64encode(json.dumps(caller).encode()).decode()
    to_sign = "\n".join(["TRAINYARD-PEER-HMAC-SHA256", method, path, query, hashlib.sha256(body).hexdigest(),
                         str(sent_ms), blob])
    signature = hmac.new(PEER_SECRET.encode(), to_sign.encode(), hashlib.sha256).hexdigest()
    return {"X-Trainyard-Peer-Caller": blob, "X-Trainyard-Peer-Time": str(sent_ms),
            "X-Trainyard-Peer-Signature": signature}


ROOT_CALLER = {"type": "root", "arn": "", "roleArn": "", "name": "", "userId": "", "accessKeyId": KEY, "tags": [],
               "policyNames": [], "policyDocuments": [], "sessionExpires": 0, "entryRegion": A}


class RegionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fed = Federation()
        try:
            cls.b = cls.fed.start(B)
            cls.c = cls.fed.start(C)
            cls.a = cls.fed.start(A, peers={B: cls.b.url, C: cls.c.url, DOWN: cls.fed.dead_url()})
        except Exception:
            cls.fed.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.fed.stop()

    def queues(self, server, region):
        return {q["jobQueueName"] for q in client(server, "batch", region).describe_job_queues()["jobQueues"]}

    def create_queue(self, batch, name):
        batch.create_service_environment(serviceEnvironmentName=name + "-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
                                         capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}])
        batch.create_job_queue(jobQueueName=name, jobQueueType="SAGEMAKER_TRAINING", priority=1,
                               serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": name + "-env"}])

    def test_queue_created_through_a_lives_in_b_only(self):
        self.create_queue(client(self.a, "batch", B), "via-a")
        self.assertIn("via-a", self.queues(self.b, B))        # B itself has it
        self.assertIn("via-a", self.queues(self.a, B))        # and A shows B's
        self.assertNotIn("via-a", self.queues(self.a, A))     # A's own state is untouched
        self.assertNotIn("via-a", self.queues(self.c, C))
        arn = client(self.b, "batch", B).describe_job_queues(jobQueues=["via-a"])["jobQueues"][0]["jobQueueArn"]
        self.assertIn(":" + B + ":", arn)

    def test_training_job_created_through_a_runs_in_b(self):
        sm = client(self.a, "sagemaker", B)
        sm.create_training_job(
            TrainingJobName="made-via-a", RoleArn="arn:aws:iam::000000000000:role/SageMakerRole",
            AlgorithmSpecification={"TrainingImage": "local/shell", "TrainingInputMode": "File",
                                    "ContainerEntrypoint": ["/bin/sh", "-c"], "ContainerArguments": ["exit 0"]},
            OutputDataConfig={"S3OutputPath": "s3://out-b/output"},
            ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
            StoppingCondition={"MaxRuntimeInSeconds": 60})
        self.assertIn(":" + B + ":", client(self.b, "sagemaker", B).describe_training_job(
            TrainingJobName="made-via-a")["TrainingJobArn"])
        with self.assertRaises(ClientError) as e:
            client(self.a, "sagemaker", A).describe_training_job(TrainingJobName="made-via-a")
        self.assertEqual(e.exception.response["Error"]["Code"], "ResourceNotFound")

    def test_s3_in_b_through_a(self):
        s3 = client(self.a, "s3", B, s3={"addressing_style": "path"}, signature_version="s3v4")
        s3.create_bucket(Bucket="data-b", CreateBucketConfiguration={"LocationConstraint": B})
        body = os.urandom(300_000)
        s3.put_object(Bucket="data-b", Key="train/part-0", Body=body)
        # A signed aws-chunked upload: its chunk signatures are checked at A, the bytes go on to B
        # decoded; a chunk changed after signing is refused at A.
        status, reply = self.chunked_put(self.a, B, "/data-b/train/part-1", body)
        self.assertEqual(status, 200, reply)
        flip = lambda i, c: bytes([c[0] ^ 1]) + c[1:] if i == 2 else c
        status, reply = self.chunked_put(self.a, B, "/data-b/train/tampered", body, tamper=flip)
        self.assertEqual(status, 403, reply)
        self.assertIn(b"SignatureDoesNotMatch", reply)
        self.assertEqual(s3.get_object(Bucket="data-b", Key="train/part-0")["Body"].read(), body)
        self.assertEqual(s3.get_object(Bucket="data-b", Key="train/part-1")["Body"].read(), body)
        self.assertEqual([o["Key"] for o in s3.list_objects_v2(Bucket="data-b")["Contents"]],
                         ["train/part-0", "train/part-1"])
        self.assertTrue(os.path.isdir(os.path.join(self.b.data_dir, "buckets", "data-b")))
        self.assertFalse(os.path.exists(os.path.join(self.a.data_dir, "buckets", "data-b")))
        self.assertEqual(s3.head_object(Bucket="data-b", Key="train/part-0")["ContentLength"], len(body))
        with self.assertRaises(ClientError) as e:  # S3's own error, in S3's shape, from B
            s3.get_object(Bucket="data-b", Key="missing")
        self.assertEqual(e.exception.response["Error"]["Code"], "NoSuchKey")

    def chunked_put(self, server, region, path, data, chunk=64 * 1024, tamper=None):
        """PUTs `data` as signed aws-chunked chunks (STREAMING-AWS4-HMAC-SHA256-PAYLOAD)."""
        import botocore.auth
        import botocore.awsrequest
        import botocore.credentials

        class Streaming(botocore.auth.S3SigV4Auth):
            def payload(self, request):
                return "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"

        def mac(key, msg):
            return hmac.new(key, msg.encode(), hashlib.sha256).digest()
        chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)] + [b""]
        request = botocore.awsrequest.AWSRequest(method="PUT", url=server.url + path, headers={
            "Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data))})
        Streaming(botocore.credentials.Credentials(KEY, SECRET), "s3", region).add_auth(request)
        previous = request.headers["Authorization"].rsplit("Signature=", 1)[1]
        amz_date = request.headers["X-Amz-Date"]
        scope = f"{amz_date[:8]}/{region}/s3/aws4_request"
        key = mac(mac(mac(mac(("AWS4" + SECRET).encode(), amz_date[:8]), region), "s3"), "aws4_request")
        body = b""
        for i, c in enumerate(chunks):
            to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous, hashlib.sha256(b"").hexdigest(),
                                 hashlib.sha256(c).hexdigest()])
            previous = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
            c = tamper(i, c) if tamper else c
            body += f"{len(c):x};chunk-signature={previous}\r\n".encode() + c + b"\r\n"
        u = urllib.parse.urlparse(server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("PUT", path, body=body, headers=dict(request.headers.items()))
        resp = conn.getresponse()
        reply = resp.read()
        conn.close()
        return resp.status, reply

    def test_sts_in_b_through_a(self):
        identity = client(self.a, "sts", B).get_caller_identity()
        self.assertEqual(identity["Account"], "000000000000")
        self.assertTrue(identity["Arn"].endswith(":root"), identity)

    def test_unknown_region_is_refused_naming_it(self):
        with self.assertRaises(ClientError) as e:
            client(self.a, "batch", "xx-nowhere-1").describe_job_queues()
        err = e.exception.response["Error"]
        self.assertEqual(err["Code"], "InvalidSignatureException")
        self.assertIn("xx-nowhere-1", err["Message"])

    def test_peer_down_is_503_naming_it_and_changes_nothing_here(self):
        before = self.queues(self.a, A)
        with self.assertRaises(ClientError) as e:
            self.create_queue(client(self.a, "batch", DOWN), "never")
        err = e.exception.response
        self.assertEqual(err["ResponseMetadata"]["HTTPStatusCode"], 503)
        self.assertEqual(err["Error"]["Code"], "ServiceUnavailableException")
        self.assertIn(DOWN, err["Error"]["Message"])
        self.assertIn("failed to connect", err["Error"]["Message"].lower())
        self.assertEqual(self.queues(self.a, A), before)
        # A records the call that never reached its region.
        found = self.a.admin("admin/audit", {"LookupAttributes": [
            {"AttributeKey": "EventId", "AttributeValue": err["ResponseMetadata"]["RequestId"]}]})["Events"]
        self.assertEqual(len(found), 1)
        record = json.loads(found[0]["CloudTrailEvent"])
        self.assertEqual((record["eventName"], record["httpStatus"], record["principal"]), ("ForwardToRegion", 503, "root"))

    def raw(self, server, method, path, body=b"", headers=None):
        u = urllib.parse.urlparse(server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, json.loads(data or b"{}")

    def test_forged_stale_and_replayed_forwarded_requests_are_refused(self):
        path, body = "/v1/describejobqueues", b"{}"
        now = int(time.time() * 1000)
        base = {"Content-Type": "application/json"}
        good = peer_headers("POST", path, "", body, now, ROOT_CALLER, base, self.b)
        # Forged: signed with another secret (here: the right HMAC over another body).
        forged = dict(good, **{"X-Trainyard-Peer-Signature": peer_headers("POST", path, "", b"{ }", now,
                                                                          ROOT_CALLER, base, self.b)["X-Trainyard-Peer-Signature"]})
        status, err = self.raw(self.b, "POST", path, body, dict(base, **forged))
        self.assertEqual((status, err["__type"]), (403, "InvalidSignatureException"))
        # Stale: outside the 300 s replay window.
        stale = peer_headers("POST", path, "", body, now - 301_000, ROOT_CALLER, base, self.b)
        status, err = self.raw(self.b, "POST", path, body, dict(base, **stale))
        self.assertEqual((status, err["__type"]), (403, "InvalidSignatureException"))
        self.assertIn("replay window", err["message"])
        # The genuine one once, then its replay.
        status, reply = self.raw(self.b, "POST", path, body, dict(base, **good))
        self.assertEqual(status, 200, reply)
        self.assertIn("jobQueues", reply)
        status, err = self.raw(self.b, "POST", path, body, dict(base, **good))
        self.assertEqual((status, err["__type"]), (403, "InvalidSignatureException"))
        self.assertIn("replay", err["message"])
        # A forwarded request signed for another region is not this region's, and is never sent on.
        scoped_a = dict(base, Authorization=f"AWS4-HMAC-SHA256 Credential={KEY}/20260101/{A}/batch/aws4_request, "
                                            "SignedHeaders=host, Signature=" + "0" * 64)
        status, err = self.raw(self.b, "POST", path, body,
                               peer_headers("POST", path, "", body, now + 1, ROOT_CALLER, scoped_a, self.b))
        self.assertEqual((status, err["__type"]), (403, "InvalidSignatureException"))
        self.assertIn("never forwarded again", err["message"])
        # Another region's root is root here only with this region's own root key.
        other_root = dict(ROOT_CALLER, accessKeyId="AKIASOMEONEELSE00001")
        status, err = self.raw(self.b, "POST", path, body,
                               peer_headers("POST", path, "", body, now + 2, other_root, base, self.b))
        self.assertEqual((status, err["__type"]), (403, "AccessDeniedException"))

    def test_a_forwarded_operation_cannot_be_changed_on_the_way(self):
        # A DescribeTrainingJob forwarded to B, turned by a proxy on the link into a StopTrainingJob
        # (same path, same body): the peer signature covers X-Amz-Target, Host, Content-Type and every
        # x-amz-* header, so the change is refused; so is the previous version's signature, which
        # covered none of them.
        path, body = "/", json.dumps({"TrainingJobName": "nobody"}).encode()
        base = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "SageMaker.DescribeTrainingJob"}
        now = int(time.time() * 1000)
        signed = peer_headers("POST", path, "", body, now, ROOT_CALLER, base, self.b)
        swapped = dict(signed, **{"X-Amz-Target": "SageMaker.StopTrainingJob"})
        status, err = self.raw(self.b, "POST", path, body, swapped)
        self.assertEqual((status, err["__type"]), (403, "InvalidSignatureException"), err)
        old = dict(base, **{"X-Amz-Target": "SageMaker.StopTrainingJob"},
                   **old_peer_headers("POST", path, "", body, now + 1, ROOT_CALLER))
        status, err = self.raw(self.b, "POST", path, body, old)
        self.assertEqual(status, 403, err)
        self.assertIn("older trainyard", err["message"])
        # Unchanged, the forwarded Describe is answered (the job does not exist there).
        status, err = self.raw(self.b, "POST", path, body, signed)
        self.assertEqual((status, err["__type"]), (400, "ResourceNotFound"), err)
        self.assertIn("training job nobody", err["message"])

    def test_the_peer_decides_with_the_carried_policies_and_the_clients_address(self):
        only_from = {"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": "batch:DescribeJobQueues", "Resource": "*",
            "Condition": {"IpAddress": {"aws:SourceIp": "10.1.2.0/24"}}}]}
        user = dict(ROOT_CALLER, type="user", arn="arn:aws:iam::000000000000:user/far", name="far", userId="AIDAFAR",
                    accessKeyId="AKIAFARAWAY000000001", policyNames=["only-from"],
                    policyDocuments=[json.dumps(only_from)])
        path, body, base = "/v1/describejobqueues", b"{}", {"Content-Type": "application/json"}
        for source, expected in (("10.1.2.3", 200), ("10.9.9.9", 403)):
            caller = dict(user, sourceIp=source)
            status, reply = self.raw(self.b, "POST", path, body,
                                     peer_headers("POST", path, "", body, int(time.time() * 1000), caller, base, self.b))
            self.assertEqual(status, expected, (source, reply))
        self.assertEqual(reply["__type"], "AccessDeniedException")
        self.assertIn("user/far", reply["message"])

    def test_a_user_is_authorized_in_b_with_the_policies_it_has_in_a(self):
        describe_only = {"Version": "2012-10-17", "Statement": [
            {"Sid": "ReadQueues", "Effect": "Allow", "Action": "batch:DescribeJobQueues", "Resource": "*"}]}
        self.a.admin("admin/iam/CreateUser", {"UserName": "reader"})
        self.a.admin("admin/iam/CreatePolicy", {"PolicyName": "read-queues", "PolicyDocument": json.dumps(describe_only)})
        self.a.admin("admin/iam/AttachUserPolicy", {"UserName": "reader", "PolicyName": "read-queues"})
        key = self.a.admin("admin/iam/CreateAccessKey", {"UserName": "reader"})["AccessKey"]
        batch = client(self.a, "batch", B, key=key["AccessKeyId"], secret=key["SecretAccessKey"])
        self.assertIn("jobQueues", batch.describe_job_queues())  # allowed by the policy from A
        with self.assertRaises(ClientError) as e:
            self.create_queue(batch, "not-allowed")
        self.assertEqual(e.exception.response["Error"]["Code"], "AccessDeniedException")
        self.assertIn("user/reader", e.exception.response["Error"]["Message"])
        self.assertNotIn("not-allowed", self.queues(self.b, B))
        # The key is A's: B itself does not know it.
        with self.assertRaises(ClientError) as e:
            client(self.b, "batch", B, key=key["AccessKeyId"], secret=key["SecretAccessKey"]).describe_job_queues()
        self.assertEqual(e.exception.response["Error"]["Code"], "UnrecognizedClientException")


    def test_a_role_session_from_a_is_authorized_in_b_with_the_roles_policies(self):
        describe_only = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "batch:DescribeJobQueues", "Resource": "*"}]}
        self.a.admin("admin/iam/CreatePolicy", {"PolicyName": "role-reads", "PolicyDocument": json.dumps(describe_only)})
        role = self.a.admin("admin/iam/CreateRole", {"RoleName": "trainer"})["Role"]
        self.a.admin("admin/iam/AttachRolePolicy", {"RoleName": "trainer", "PolicyName": "role-reads"})
        creds = client(self.a, "sts", A).assume_role(RoleArn=role["Arn"], RoleSessionName="seed")["Credentials"]
        import boto3
        batch = boto3.client("batch", endpoint_url=self.a.url, region_name=B, aws_access_key_id=creds["AccessKeyId"],
                             aws_secret_access_key=creds["SecretAccessKey"], aws_session_token=creds["SessionToken"],
                             config=botocore.config.Config(retries={"max_attempts": 1}))
        self.assertIn("jobQueues", batch.describe_job_queues())
        with self.assertRaises(ClientError) as e:
            self.create_queue(batch, "session-made")
        self.assertEqual(e.exception.response["Error"]["Code"], "AccessDeniedException")
        self.assertIn("assumed-role/trainer/seed", e.exception.response["Error"]["Message"])
        # A wrong session token is refused where the request enters.
        bad = boto3.client("batch", endpoint_url=self.a.url, region_name=B, aws_access_key_id=creds["AccessKeyId"],
                           aws_secret_access_key=creds["SecretAccessKey"], aws_session_token="not-the-token",
                           config=botocore.config.Config(retries={"max_attempts": 1}))
        with self.assertRaises(ClientError) as e:
            bad.describe_job_queues()
        self.assertEqual(e.exception.response["Error"]["Code"], "UnrecognizedClientException")


class SecretFileTest(unittest.TestCase):
    def test_a_secret_others_may_read_is_refused_at_start(self):
        root = tempfile.mkdtemp(prefix="trainyard-regions-")
        try:
            secret = os.path.join(root, "peer-secret")
            with open(secret, "w") as f:
                f.write(PEER_SECRET)
            os.chmod(secret, 0o644)
            server = RegionServer(root, config=region_config(A, secret, {B: "http://127.0.0.1:1"}))
            with self.assertRaises(RuntimeError):
                server.start()
            server.log.close()
            server.proc.stdout.close()
            self.assertIn("make it 0600", server.read_log())
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
