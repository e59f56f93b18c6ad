"""TLS on the listener: the self-signed certificate made on first start, a configured certificate,
and the hostile clients a TLS port meets (plaintext, a handshake that never finishes).

Clients verify the server as they would any other: boto3 and the aws CLI trust the certificate
only when told to (verify= / --ca-bundle), and refuse it otherwise.
"""
import os
import re
import socket
import ssl
import stat
import subprocess
import tempfile
import time
import urllib.parse

import botocore.exceptions

from harness import BIN, REGION, Server, ServerTest

TLS_ON = '[server]\ntls = "on"\n'


def openssl_fingerprint(path):
    out = subprocess.check_output(["openssl", "x509", "-in", path, "-noout", "-fingerprint", "-sha256"], text=True)
    return out.strip().split("=", 1)[1]


def served_fingerprint(url):
    """The SHA-256 fingerprint of the certificate the server presents, as openssl prints it."""
    u = urllib.parse.urlparse(url)
    der = ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate((u.hostname, u.port)))
    import hashlib
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def client_env():
    """The environment of a client that trusts only what it is told to (no AWS_CA_BUNDLE from the host)."""
    env = dict(os.environ)
    for k in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE"):
        env.pop(k, None)
    return env


class SelfSignedTest(ServerTest):
    server_config = TLS_ON

    def test_boto3_trusting_the_certificate_reaches_batch_and_sagemaker(self):
        self.assertTrue(self.server.url.startswith("https://127.0.0.1:"), self.server.url)
        self.create_queue("q")
        self.assertEqual([q["jobQueueName"] for q in self.batch.describe_job_queues()["jobQueues"]], ["q"])
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])
        # The log names the certificate and the fingerprint a person compares clients against.
        cert = self.server.ca_bundle
        self.assertIn(openssl_fingerprint(cert), self.server.read_log())
        self.assertEqual(served_fingerprint(self.server.url), openssl_fingerprint(cert))
        # The key is the server's alone.
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.data_dir, "tls", "key.pem")).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.data_dir, "tls")).st_mode), 0o700)

    def test_the_certificate_names_localhost_and_the_loopback_addresses(self):
        text = subprocess.check_output(["openssl", "x509", "-in", self.server.ca_bundle, "-noout", "-ext",
                                        "subjectAltName,basicConstraints"], text=True)
        for name in ("DNS:localhost", "IP Address:127.0.0.1", "IP Address:0:0:0:0:0:0:0:1", "CA:FALSE"):
            self.assertIn(name, text)
        # Reached by name, the certificate verifies too.
        port = urllib.parse.urlparse(self.server.url).port
        key, secret = self.server.credentials()
        import boto3
        sm = boto3.client("sagemaker", endpoint_url=f"https://localhost:{port}", region_name=REGION,
                          aws_access_key_id=key, aws_secret_access_key=secret, verify=self.server.ca_bundle)
        self.addCleanup(sm.close)
        sm.list_training_jobs()

    def test_default_verification_refuses_the_self_signed_certificate(self):
        sm = self.server.client("sagemaker", verify=True)
        self.addCleanup(sm.close)
        with self.assertRaises(botocore.exceptions.SSLError):
            sm.list_training_jobs()

    def test_aws_cli_needs_the_ca_bundle(self):
        key, secret = self.server.credentials()
        env = client_env()
        env.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION=REGION)
        base = ["aws", "--endpoint-url", self.server.url]
        ok = subprocess.run(base + ["--ca-bundle", self.server.ca_bundle, "batch", "describe-job-queues"],
                            env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("jobQueues", ok.stdout)
        refused = subprocess.run(base + ["batch", "describe-job-queues"], env=env, capture_output=True, text=True,
                                 timeout=60)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("SSL", refused.stderr)

    def test_trainyard_cli_trusts_the_servers_own_certificate_and_takes_a_ca_bundle(self):
        env = client_env()
        env.pop("AWS_ACCESS_KEY_ID", None)
        env.pop("AWS_SECRET_ACCESS_KEY", None)
        call = [BIN, "call", "batch", "DescribeJobQueues", "{}", "--endpoint-url", self.server.url]
        # With the data directory it finds both the credentials and the certificate.
        ok = subprocess.run(call + ["--data-dir", self.data_dir], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("jobQueues", ok.stdout)
        # Told to trust something else, it refuses the server, and says how to fix it.
        other = subprocess.run(call + ["--data-dir", self.data_dir, "--ca-bundle", self.make_other_certificate()],
                               env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(other.returncode, 1)
        self.assertIn("not trusted", other.stderr)
        self.assertIn("--ca-bundle", other.stderr)
        # AWS_CA_BUNDLE works as --ca-bundle does.
        env["AWS_CA_BUNDLE"] = self.server.ca_bundle
        key, secret = self.server.credentials()
        env.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
        ok = subprocess.run(call + ["--data-dir", self.work_dir], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(ok.returncode, 0, ok.stderr)

    def make_other_certificate(self):
        cert = os.path.join(self.work_dir, "other.pem")
        subprocess.check_call(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                               "-nodes", "-keyout", os.path.join(self.work_dir, "other.key"), "-out", cert,
                               "-days", "1", "-subj", "/CN=localhost",
                               "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], stderr=subprocess.DEVNULL)
        return cert

    def test_a_restart_keeps_the_certificate(self):
        before = openssl_fingerprint(self.server.ca_bundle)
        with open(self.server.ca_bundle, "rb") as f:
            pem = f.read()
        self.server.stop()
        self.server = self.new_server()
        with open(self.server.ca_bundle, "rb") as f:
            self.assertEqual(f.read(), pem)
        self.assertEqual(served_fingerprint(self.server.url), before)
        sm = self.server.client("sagemaker")  # trusts the certificate saved before the restart
        self.addCleanup(sm.close)
        sm.list_training_jobs()

    def test_a_request_over_tls_is_signed_and_checked_as_over_http(self):
        sm = self.server.client("sagemaker", secret="x" * 40)
        self.addCleanup(sm.close)
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            sm.list_training_jobs()
        self.assertEqual(e.exception.response["ResponseMetadata"]["HTTPStatusCode"], 403)


class HostileTlsTest(ServerTest):
    server_config = TLS_ON + "header_timeout_seconds = 2\n"

    def setUp(self):
        super().setUp()
        u = urllib.parse.urlparse(self.server.url)
        self.addr = (u.hostname, u.port)

    def connect(self):
        s = socket.create_connection(self.addr, timeout=10)
        self.addCleanup(s.close)
        return s

    def read_all(self, s, limit_s):
        """What the server sends until it closes the connection; fails if it is still open after limit_s."""
        s.settimeout(limit_s)
        out = b""
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    return out
                out += data
        except ConnectionResetError:
            return out
        except socket.timeout:
            self.fail(f"the server kept the connection open for more than {limit_s} s")

    def test_plaintext_to_the_tls_port_is_answered_with_a_plain_400_and_closed(self):
        s = self.connect()
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = self.read_all(s, 10)
        head, _, body = answer.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 400 "), head[:80])
        self.assertIn(b"ValidationException", body)
        self.assertIn(b"https://", body)
        self.sm.list_training_jobs()  # others are answered as before

    def test_stalled_handshakes_are_cut_off_without_stopping_others(self):
        silent = [self.connect() for _ in range(20)]
        # A TLS record header announcing a ClientHello that never comes.
        partial = [self.connect() for _ in range(20)]
        for s in partial:
            s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        t0 = time.monotonic()
        self.sm.list_training_jobs()  # answered while 40 handshakes hang
        self.assertLess(time.monotonic() - t0, 1.5)
        for s in silent + partial:
            self.assertEqual(self.read_all(s, 10), b"")
        # Cut off by server.header_timeout_seconds (2 s), not by the idle timeout (60 s).
        self.assertLess(time.monotonic() - t0, 8)
        self.sm.list_training_jobs()

    def test_tls_1_1_is_refused(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(self.server.ca_bundle)
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        ctx.set_ciphers("ALL:@SECLEVEL=0")
        with self.assertRaises(ssl.SSLError):
            with socket.create_connection(self.addr, timeout=10) as raw:
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
                    pass
        ctx = ssl.create_default_context(cafile=self.server.ca_bundle)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        with socket.create_connection(self.addr, timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                self.assertEqual(s.version(), "TLSv1.2")


class ConfiguredCertificateTest(ServerTest):
    def setUp(self):
        # A CA and a certificate it signed for 127.0.0.1, made with the openssl command line.
        self.pki = tempfile.mkdtemp(prefix="trainyard-pki-")
        self.ca, self.cert, self.key = (os.path.join(self.pki, n) for n in ("ca.pem", "server.pem", "server.key"))
        run = lambda *a: subprocess.check_call(list(a), stderr=subprocess.DEVNULL, cwd=self.pki)
        run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test CA")
        run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
        with open(os.path.join(self.pki, "ext.cnf"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "1", "-extfile", "ext.cnf")
        self.server_config = (f'[server]\ntls_certificate_file = "{self.cert}"\ntls_key_file = "{self.key}"\n')
        self.kw = {"ca_bundle": self.ca}
        super().setUp()

    def tearDown(self):
        super().tearDown()
        import shutil
        shutil.rmtree(self.pki, ignore_errors=True)

    def new_server(self, **kw):
        return super().new_server(**{**self.kw, **kw})

    def test_the_configured_certificate_is_served_and_verifies_against_its_ca(self):
        # A configured certificate turns TLS on even on a loopback address (server.tls = "auto").
        self.assertTrue(self.server.url.startswith("https://"))
        self.assertEqual(served_fingerprint(self.server.url), openssl_fingerprint(self.cert))
        self.assertIn(openssl_fingerprint(self.cert), self.server.read_log())
        self.create_queue("q")
        self.assertEqual(len(self.batch.describe_job_queues()["jobQueues"]), 1)
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "tls")))

    def start_failure(self, config):
        """The message a server that fails to start leaves, and that it ended."""
        d = tempfile.mkdtemp(prefix="trainyard-test-")
        import shutil
        self.addCleanup(shutil.rmtree, d, True)
        server = Server(d, config=config)
        with self.assertRaises(RuntimeError) as e:
            server.start()
        server.log.close()
        server.proc.stdout.close()
        return str(e.exception)

    def test_bad_certificate_or_key_paths_stop_the_start_with_a_clear_message(self):
        missing = os.path.join(self.pki, "missing.pem")
        msg = self.start_failure(f'[server]\ntls_certificate_file = "{missing}"\ntls_key_file = "{self.key}"\n')
        self.assertIn(missing, msg)
        self.assertIn("does not exist", msg)
        msg = self.start_failure(f'[server]\ntls_certificate_file = "{self.cert}"\ntls_key_file = "{missing}"\n')
        self.assertIn(missing, msg)
        # A key that is not the certificate's.
        msg = self.start_failure(f'[server]\ntls_certificate_file = "{self.cert}"\n'
                                 f'tls_key_file = "{os.path.join(self.pki, "ca.key")}"\n')
        self.assertIn("does not belong", msg)
        # Not PEM at all.
        msg = self.start_failure(f'[server]\ntls_certificate_file = "{self.key}"\ntls_key_file = "{self.key}"\n')
        self.assertIn("no PEM certificate in " + self.key, msg)
        msg = self.start_failure(f'[server]\ntls_certificate_file = "{self.cert}"\n')
        self.assertIn("set both or neither", msg)
        msg = self.start_failure(f'[server]\ntls = "off"\ntls_certificate_file = "{self.cert}"\n'
                                 f'tls_key_file = "{self.key}"\n')
        self.assertIn("server.tls is off", msg)
        msg = self.start_failure('[server]\ntls = "yes"\n')
        self.assertIn("server.tls must be one of auto, on, off", msg)


class PlainByDefaultOnLoopbackTest(ServerTest):
    def test_the_embedded_default_on_a_loopback_address_is_plain_http(self):
        self.assertTrue(self.server.url.startswith("http://127.0.0.1:"), self.server.url)
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "tls")))
        self.sm.list_training_jobs()


if __name__ == "__main__":
    import unittest
    unittest.main()
