"""The network layer against hostile clients: every attack here once stopped or crashed the server.

Hostile clients speak raw sockets; the well-behaved ones are boto3 (real SigV4) and must keep being
answered promptly. Each test is bounded in time (deadlines on observable conditions) and in memory
(the server's peak RSS, /proc/<pid>/status VmHWM, is measured around the attack).
"""
import json
import resource
import socket
import threading
import time
import unittest
import urllib.parse

import botocore.auth
import botocore.awsrequest
import botocore.config
import botocore.credentials
import boto3
from botocore.exceptions import ClientError

from harness import REGION, ServerTest

MIB = 1024 * 1024


def raise_nofile(wanted):
    """Lifts this process's open-file soft limit towards `wanted`; returns what it allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        soft = min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return soft


class HostileTest(ServerTest):
    # A small body limit keeps the floods quick; the header limit and deadlines are the defaults
    # unless a test class says otherwise.
    server_config = "[server]\nmax_request_bytes = 1048576\n"

    def setUp(self):
        super().setUp()
        u = urllib.parse.urlparse(self.server.url)
        self.addr = (u.hostname, u.port)
        self.sockets = []

    def tearDown(self):
        for s in self.sockets:
            s.close()
        super().tearDown()

    # ---- helpers ----
    def connect(self, timeout=10):
        s = socket.create_connection(self.addr, timeout=timeout)
        self.sockets.append(s)
        return s

    def vm_hwm_bytes(self):
        with open(f"/proc/{self.server.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def quick_client(self, service):
        """boto3 with short timeouts and no retries: a starved call fails instead of waiting."""
        key, secret = self.server.credentials()
        cfg = botocore.config.Config(connect_timeout=5, read_timeout=5, retries={"total_max_attempts": 1})
        c = boto3.client(service, endpoint_url=self.server.url, region_name=REGION, aws_access_key_id=key,
                         aws_secret_access_key=secret, config=cfg)
        self.addCleanup(c.close)
        return c

    def timed_signed_call(self):
        """Seconds one signed SageMaker call took (a fresh connection, as a new client would)."""
        sm = self.quick_client("sagemaker")
        t0 = time.monotonic()
        sm.list_training_jobs(MaxResults=1)
        return time.monotonic() - t0

    def flood(self, sock, head, piece, total, budget_s=30):
        """Sends `head` then `piece` until `total` bytes or until the server cuts the connection;
        returns (bytes sent, the response bytes read, if any)."""
        sent = 0
        deadline = time.monotonic() + budget_s
        try:
            sock.sendall(head)
            while sent < total and time.monotonic() < deadline:
                sock.sendall(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            pass
        answer = b""
        try:
            sock.settimeout(2)
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        except (ConnectionResetError, socket.timeout, OSError):
            pass
        return sent, answer

    def metric(self, name):
        """A sample of GET /metrics (on a new connection), as a number."""
        import urllib.request
        with urllib.request.urlopen(self.server.url + "/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        raise AssertionError(f"no {name} in /metrics")

    def assert_refusal(self, answer, status, error_type):
        """The refusal, when it reached the client before the reset, is AWS-shaped."""
        if not answer:
            return
        head, _, body = answer.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 %d " % status), head[:80])
        self.assertIn(error_type.encode(), head + body)

    def signed(self, body, service, target=None, sign_target=True, path="/"):
        """(headers, body) of a request signed by botocore; when not sign_target, X-Amz-Target and
        Content-Type are added after signing (SignedHeaders=host;x-amz-date)."""
        key, secret = self.server.credentials()
        headers = {}
        if sign_target:
            headers = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": target}
        req = botocore.awsrequest.AWSRequest(method="POST", url=self.server.url + path, data=body, headers=headers)
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), service, REGION).add_auth(req)
        out = dict(req.headers.items())
        if not sign_target:
            out["Content-Type"] = "application/x-amz-json-1.1"
            out["X-Amz-Target"] = target
        return out, req.body

    def post(self, path, headers, body, timeout=10):
        import http.client
        conn = http.client.HTTPConnection(*self.addr, timeout=timeout)
        try:
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.getheader("x-amzn-ErrorType"), json.loads(resp.read() or b"{}")
        finally:
            conn.close()


class DeepJsonTest(HostileTest):
    def test_deep_json_is_refused_before_parsing_and_the_server_survives(self):
        # 500,000 levels in 1 MB (under the body limit): it once overflowed the stack while the
        # validation message was rendered (SIGSEGV).
        deep = '{"TrainingJobName": ' + "[" * 500000 + "]" * 500000 + "}"
        headers, body = self.signed(deep, "sagemaker", "SageMaker.DescribeTrainingJob")
        status, error, doc = self.post("/", headers, body)
        self.assertEqual((status, error), (400, "ValidationException"), doc)
        self.assertIn("more than 64 deep", doc["message"])
        # Batch's rest-json says the same as a ClientException.
        status, error, doc = self.post("/v1/describeserviceenvironments", *self.resign_batch(deep))
        self.assertEqual((status, error), (400, "ClientException"), doc)
        self.assertIn("server.max_json_depth", doc["message"])
        self.assertIsNone(self.server.proc.poll(), "the server died")
        self.assertLess(self.timed_signed_call(), 2)

    def test_json_inside_a_string_member_is_held_to_the_same_depth(self):
        # An events filter's EventPattern is JSON in a string, parsed and compiled recursively.
        pattern = '{"detail":' * 60000 + '["x"]' + "}" * 60000
        status, error, doc = self.post("/trainyard/v1/events",
                                       *self.resign("events", json.dumps({"EventPattern": pattern}),
                                                    "/trainyard/v1/events"))
        self.assertEqual((status, error), (400, "ValidationException"), doc)
        self.assertIn("EventPattern nests JSON", doc["message"])
        self.assertIsNone(self.server.proc.poll(), "the server died")

    def resign_batch(self, body):
        return self.resign("batch", body, "/v1/describeserviceenvironments", content_type="application/json")

    def resign(self, service, body, path, content_type="application/x-amz-json-1.1"):
        key, secret = self.server.credentials()
        req = botocore.awsrequest.AWSRequest(method="POST", url=self.server.url + path, data=body,
                                             headers={"Content-Type": content_type})
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), service, REGION).add_auth(req)
        return dict(req.headers.items()), req.body


class FloodTest(HostileTest):
    def test_chunked_body_over_the_limit_is_refused_early_in_bounded_memory(self):
        before = self.vm_hwm_bytes()
        s = self.connect()
        head = (b"POST /v1/createjobqueue HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
        piece = b"10000\r\n" + b"a" * 0x10000 + b"\r\n"  # 64 KiB chunks
        sent, answer = self.flood(s, head, piece, total=512 * MIB)
        grown = self.vm_hwm_bytes() - before
        # Cut off after the 1 MiB limit (plus what the socket buffers held), not read to the end.
        self.assertLess(sent, 64 * MIB, "the server read the chunked body far past max_request_bytes")
        self.assertLess(grown, 1 * MIB + 48 * MIB, f"peak RSS grew by {grown / MIB:.0f} MiB")
        self.assert_refusal(answer, 413, "ClientException")
        self.assertLess(self.timed_signed_call(), 2)

    def test_content_length_over_the_limit_is_refused_before_the_body(self):
        s = self.connect()
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: SageMaker.ListTrainingJobs\r\n"
                  b"Content-Length: 1073741824\r\n\r\n")
        answer = s.recv(65536)
        self.assertTrue(answer.startswith(b"HTTP/1.1 413 "), answer[:80])
        self.assertIn(b"ValidationException", answer)
        self.assertIn(b"1048576 bytes", answer)

    def test_header_flood_is_refused_in_bounded_memory(self):
        before = self.vm_hwm_bytes()
        socks = [self.connect(), self.connect()]
        results = [None, None]

        def attack(i):
            line = b"X-Pad: " + b"a" * 1000 + b"\r\n"
            results[i] = self.flood(socks[i], b"POST / HTTP/1.1\r\nHost: x\r\n", line * 1024, total=256 * MIB)

        threads = [threading.Thread(target=attack, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        grown = self.vm_hwm_bytes() - before
        for sent, answer in results:
            self.assertLess(sent, 64 * MIB, "the server read headers far past max_header_bytes")
            self.assert_refusal(answer, 431, "ValidationException")
        self.assertLess(grown, 48 * MIB, f"peak RSS grew by {grown / MIB:.0f} MiB")
        self.assertLess(self.timed_signed_call(), 2)


class SlowLorisTest(HostileTest):
    server_config = "[server]\nheader_timeout_seconds = 3\n"

    def test_slow_loris_sockets_beyond_the_thread_count_do_not_stop_signed_calls(self):
        # 40 > the 16 threads that once each served one connection: every one of them held.
        loris = [self.connect() for _ in range(40)]
        stop = threading.Event()
        closed = set()

        def trickle():
            for s in loris:
                s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            while not stop.is_set():
                for i, s in enumerate(loris):
                    if i in closed:
                        continue
                    try:
                        s.sendall(b"a")
                    except OSError:
                        closed.add(i)
                stop.wait(0.5)

        t = threading.Thread(target=trickle)
        t.start()
        try:
            latencies = [self.timed_signed_call() for _ in range(5)]
            self.assertLess(max(latencies), 2, latencies)
            # The head's deadline runs from its first byte: each trickling socket is closed
            # although it never goes quiet.
            deadline = time.monotonic() + 20
            while len(closed) < len(loris) and time.monotonic() < deadline:
                time.sleep(0.2)
            self.assertEqual(len(closed), len(loris), "slow heads were not cut off by header_timeout_seconds")
        finally:
            stop.set()
            t.join()


class IdleConnectionsTest(HostileTest):
    # Every connection here comes from 127.0.0.1: its per-address allowance must hold them all.
    server_config = HostileTest.server_config + "max_connections_per_address = 5000\n"

    def test_thousands_of_idle_connections_do_not_stop_signed_calls(self):
        n = min(2000, raise_nofile(2200) - 200)
        idle = [self.connect() for _ in range(n)]
        # Keep-alive clients that made one request and went quiet hold their connections too.
        for s in idle[:100]:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        latencies = [self.timed_signed_call() for _ in range(5)]
        self.assertLess(max(latencies), 2, latencies)
        for s in idle[:100]:
            self.assertTrue(s.recv(64).startswith(b"HTTP/1.1 200 "))


class ConnectionCapTest(HostileTest):
    server_config = "[server]\nmax_connections = 50\n"

    def test_connections_over_the_cap_get_an_aws_shaped_503_at_once(self):
        held = [self.connect() for _ in range(50)]
        # The 50 are counted once accepted; a request on the last proves all were.
        held[-1].sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(held[-1].recv(64).startswith(b"HTTP/1.1 200 "))
        s = self.connect(timeout=5)
        t0 = time.monotonic()
        answer = b""
        while True:
            data = s.recv(65536)
            if not data:
                break
            answer += data
        self.assertLess(time.monotonic() - t0, 2)
        self.assertTrue(answer.startswith(b"HTTP/1.1 503 "), answer[:80])
        self.assertIn(b"ServiceUnavailableException", answer)
        self.assertIn(b"server.max_connections = 50", answer)
        # Room again once one closes.
        held[0].close()
        deadline = time.monotonic() + 10
        while True:
            try:
                self.assertLess(self.timed_signed_call(), 2)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        held[1].close()
        self.assertGreaterEqual(self.metric("trainyard_http_refused_connections_total"), 1)


class SignedHeadersTest(HostileTest):
    def test_unsigned_target_cannot_swap_the_operation(self):
        # Signed as a Describe with SignedHeaders=host;x-amz-date, then sent as a Stop.
        body = json.dumps({"TrainingJobName": "nobody"})
        headers, body = self.signed(body, "sagemaker", "SageMaker.StopTrainingJob", sign_target=False)
        self.assertIn("SignedHeaders=host;x-amz-date,", headers["Authorization"])
        status, error, doc = self.post("/", headers, body)
        self.assertEqual((status, error), (403, "InvalidSignatureException"), doc)
        self.assertIn("not signed: content-type, x-amz-target.", doc["message"])
        # Signed as boto3 signs it, the same request is served.
        with self.assertRaises(ClientError) as e:
            self.sm.stop_training_job(TrainingJobName="nobody")
        self.assertNotEqual(e.exception.response["Error"]["Code"], "InvalidSignatureException")


class ThrottlingTest(HostileTest):
    # Two calls at once, then one every 20 s: the third call in a row is refused.
    server_config = "[server]\nthrottle_rate = 0.05\nthrottle_burst = 2\n"

    def test_calls_over_the_rate_get_throttling_exception(self):
        sm, batch = self.quick_client("sagemaker"), self.quick_client("batch")
        sm.list_training_jobs(MaxResults=1)
        batch.describe_service_environments()
        with self.assertRaises(ClientError) as e:
            sm.list_training_jobs(MaxResults=1)
        err = e.exception.response
        self.assertEqual(err["Error"]["Code"], "ThrottlingException")
        self.assertEqual(err["ResponseMetadata"]["HTTPStatusCode"], 400)
        self.assertIn("server.throttle_rate", err["Error"]["Message"])
        with self.assertRaises(ClientError) as e:
            batch.create_service_environment(serviceEnvironmentName="throttled", serviceEnvironmentType="SAGEMAKER_TRAINING",
                                             capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}])
        self.assertEqual(e.exception.response["Error"]["Code"], "ThrottlingException")
        # Unauthenticated scrapes are not the key's to spend; they count what was refused.
        self.assertEqual(self.metric("trainyard_http_throttled_requests_total"), 2)



def read_answer(sock, timeout=5):
    """What the server sends until it closes the connection, or until `timeout` passes quietly."""
    sock.settimeout(timeout)
    answer = b""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    except (socket.timeout, ConnectionResetError):
        pass
    return answer


def connect_from(source, addr, timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(addr)
    return s


class WireTest(HostileTest):
    """The listener's rules at the request's edge: heads that prove nobody hold no body budget,
    framing two hops could read differently is refused, one address holds a bounded number of
    connections, and console sign-in attempts are throttled per address."""
    server_config = HostileTest.server_config + "max_connections_per_address = 20\n"

    def test_forged_heads_are_refused_before_their_bodies_and_hold_no_budget(self):
        key, _ = self.server.credentials()
        amz = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        host = "%s:%d" % self.addr
        # Two heads of a 256 MiB PutObject (both together: the whole 512 MiB budget), a made-up
        # signature with a real key; nothing more is ever sent.
        forged = ("PUT /wire-bucket/big HTTP/1.1\r\nHost: %s\r\nAuthorization: AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3/"
                  "aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=%s\r\n"
                  "x-amz-content-sha256: UNSIGNED-PAYLOAD\r\nx-amz-date: %s\r\nContent-Length: 268435456\r\n\r\n"
                  % (host, key, amz[:8], REGION, "0" * 64, amz)).encode()
        heads = [self.connect(timeout=5) for _ in range(2)]
        for s in heads:
            s.sendall(forged)
        # Any other signed request's head with an unknown key: refused before its 1 MiB body too.
        unknown = ("POST / HTTP/1.1\r\nHost: %s\r\nX-Amz-Target: SageMaker.ListTrainingJobs\r\nAuthorization: "
                   "AWS4-HMAC-SHA256 Credential=AKIANOBODY0000000000/%s/%s/sagemaker/aws4_request, SignedHeaders=host;"
                   "x-amz-date;x-amz-target, Signature=%s\r\nx-amz-date: %s\r\nContent-Length: 1048576\r\n\r\n"
                   % (host, amz[:8], REGION, "0" * 64, amz)).encode()
        other = self.connect(timeout=5)
        other.sendall(unknown)
        for s in heads:
            answer = read_answer(s)
            self.assertTrue(answer.startswith(b"HTTP/1.1 403 "), answer[:300])
            self.assertIn(b"SignatureDoesNotMatch", answer)
        answer = read_answer(other)
        self.assertTrue(answer.startswith(b"HTTP/1.1 403 "), answer[:300])
        self.assertIn(b"UnrecognizedClientException", answer)
        # Signed uploads are read meanwhile.
        s3 = self.quick_client("s3")
        s3.create_bucket(Bucket="wire-bucket")
        for i in range(3):
            s3.put_object(Bucket="wire-bucket", Key="k%d" % i, Body=b"x" * (2 * MIB))
        self.assertEqual(s3.head_object(Bucket="wire-bucket", Key="k2")["ContentLength"], 2 * MIB)
        self.assertEqual(s3.list_objects_v2(Bucket="wire-bucket").get("KeyCount"), 3)

    def test_ambiguous_framing_is_refused(self):
        cases = [
            (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\nContent-Length: 2\r\n\r\n{}", 400,
             b"both Transfer-Encoding and Content-Length"),
            (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, b"only 'chunked'"),
            (b"GET /metrics HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, b"more than one Host"),
            (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400,
             b"more than one Content-Length"),
            (b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n", 400, b"obs-fold"),
        ]
        for request, status, why in cases:
            with self.subTest(request=request):
                s = self.connect(timeout=5)
                s.sendall(request)
                answer = read_answer(s)
                self.assertTrue(answer.startswith(b"HTTP/1.1 %d " % status), answer[:200])
                self.assertIn(why, answer)
        self.assertLess(self.timed_signed_call(), 2)

    def test_one_address_holds_at_most_its_connections(self):
        held = [self.connect() for _ in range(20)]
        held[-1].sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(held[-1].recv(64).startswith(b"HTTP/1.1 200 "))
        answer = read_answer(self.connect(timeout=5))
        self.assertTrue(answer.startswith(b"HTTP/1.1 503 "), answer[:80])
        self.assertIn(b"server.max_connections_per_address = 20", answer)
        # Another address is served beside them.
        other = connect_from("127.0.0.2", self.addr)
        self.sockets.append(other)
        other.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(other.recv(64).startswith(b"HTTP/1.1 200 "))

    def test_console_sign_in_attempts_are_throttled_per_address(self):
        import http.client
        key, _ = self.server.credentials()
        outcomes = []
        t0 = time.monotonic()
        for _ in range(40):
            conn = http.client.HTTPConnection(*self.addr, timeout=10)
            conn.request("POST", "/console/api/signin", json.dumps({"accessKeyId": key, "secretAccessKey": "wrong"}),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            doc = json.loads(resp.read() or b"{}")
            conn.close()
            outcomes.append((resp.status, doc.get("__type"), doc.get("message", "")))
            if doc.get("__type") == "ThrottlingException":
                break
        self.assertNotEqual(outcomes[0][1], "ThrottlingException", outcomes[0])
        status, kind, message = outcomes[-1]
        self.assertEqual((status, kind), (400, "ThrottlingException"), outcomes)
        self.assertIn("console.signin_rate", message)
        # At most the burst (20), and one more for each second the attempts took, got through before.
        self.assertLessEqual(len(outcomes) - 1, 20 + int(time.monotonic() - t0) + 1, outcomes)


if __name__ == "__main__":
    unittest.main()
