"""The S3 endpoint's wire under hostile or unusual clients: aws-chunked uploads with chunk
signatures (the form the Java, Go and .NET SDKs send), boto3's own aws-chunked uploads with a
CRC32 trailer (what it sends over https), truncated bodies, and readers racing a writer.

Each refused upload must leave nothing behind: no object, no temporary file in the bucket.
"""
import hashlib
import hmac
import os
import socket
import threading
import unittest
import urllib.parse

import boto3
import botocore.auth
import botocore.awsrequest
import botocore.config
import botocore.credentials
import botocore.exceptions

from harness import REGION, ServerTest

MIB = 1024 * 1024
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"


class _StreamingSigner(botocore.auth.S3SigV4Auth):
    """botocore's S3 signer, with the body declared as signed aws-chunked."""

    def payload(self, request):
        return STREAMING


def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


class S3Base(ServerTest):
    """A server with bucket `wire`, its root key in self.key/self.secret and an S3 client."""

    def setUp(self):
        super().setUp()
        self.key, self.secret = self.server.credentials()
        self.s3 = boto3.client("s3", endpoint_url=self.server.url, region_name=REGION, aws_access_key_id=self.key,
                               aws_secret_access_key=self.secret,
                               config=botocore.config.Config(retries={"max_attempts": 1}, signature_version="s3v4",
                                                             s3={"addressing_style": "path"}))
        self.s3.create_bucket(Bucket="wire")

    def bucket_files(self):
        out = []
        for root, _, files in os.walk(self.bucket_path("wire")):
            out += [os.path.relpath(os.path.join(root, f), self.bucket_path("wire")) for f in files]
        return sorted(out)

    def send(self, method, path, headers, body):
        """Sends one request on a fresh connection and returns (status, body)."""
        u = urllib.parse.urlsplit(self.server.url)
        with socket.create_connection((u.hostname, u.port), timeout=30) as s:
            head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
            s.sendall(head.encode() + body)
            reply = b""
            while True:
                data = s.recv(65536)
                if not data:
                    break
                reply += data
                if b"\r\n\r\n" in reply:
                    hdr, _, rest = reply.partition(b"\r\n\r\n")
                    length = [int(line.split(b":")[1]) for line in hdr.split(b"\r\n") if line.lower().startswith(b"content-length:")]
                    if length and len(rest) >= length[0]:
                        break
        status = int(reply.split(b" ", 2)[1])
        return status, reply.partition(b"\r\n\r\n")[2]



class S3WireTest(S3Base):
    def chunked_put(self, key, data, chunk=64 * 1024, tamper=None):
        """PUTs `data` as signed aws-chunked chunks; tamper(index, chunk_bytes) may change a chunk after signing."""
        chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)] + [b""]
        encoded_len = sum(len(f"{len(c):x};chunk-signature=".encode()) + 64 + 2 + len(c) + 2 for c in chunks)
        path = f"/wire/{key}"
        request = botocore.awsrequest.AWSRequest(method="PUT", url=self.server.url + path, headers={
            "Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data)),
            "Content-Length": str(encoded_len)})
        _StreamingSigner(botocore.credentials.Credentials(self.key, self.secret), "s3", REGION).add_auth(request)
        auth = request.headers["Authorization"]
        seed = auth.rsplit("Signature=", 1)[1]
        amz_date = request.headers["X-Amz-Date"]
        scope = f"{amz_date[:8]}/{REGION}/s3/aws4_request"
        signing_key = _hmac(_hmac(_hmac(_hmac(("AWS4" + self.secret).encode(), amz_date[:8]), REGION), "s3"), "aws4_request")
        body, previous = b"", seed
        for i, c in enumerate(chunks):
            to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous, EMPTY_SHA256,
                                 hashlib.sha256(c).hexdigest()])
            previous = hmac.new(signing_key, to_sign.encode(), hashlib.sha256).hexdigest()
            if tamper:
                c = tamper(i, c)
            body += f"{len(c):x};chunk-signature={previous}\r\n".encode() + c + b"\r\n"
        headers = dict(request.headers.items())
        headers["Host"] = urllib.parse.urlsplit(self.server.url).netloc
        headers["Content-Length"] = str(len(body))
        return self.send("PUT", path, headers, body)

    def test_signed_chunks_upload_and_a_changed_chunk_is_refused(self):
        data = os.urandom(200 * 1024 + 17)  # four chunks, the last one short
        status, reply = self.chunked_put("chunked.bin", data)
        self.assertEqual(status, 200, reply)
        got = self.s3.get_object(Bucket="wire", Key="chunked.bin")
        self.assertEqual(got["Body"].read(), data)
        self.assertEqual(got["ETag"].strip('"'), hashlib.md5(data).hexdigest())

        def flip(i, c):
            return bytes([c[0] ^ 1]) + c[1:] if i == 2 else c
        status, reply = self.chunked_put("tampered.bin", data, tamper=flip)
        self.assertEqual(status, 403, reply)
        self.assertIn(b"SignatureDoesNotMatch", reply)

        def drop_last_byte(i, c):
            return c[:-1] if i == 1 else c
        status, reply = self.chunked_put("short.bin", data, tamper=drop_last_byte)
        self.assertGreaterEqual(status, 400, reply)
        self.assertEqual(self.bucket_files(), ["chunked.bin"])

    def test_a_truncated_body_writes_nothing(self):
        data = os.urandom(2 * MIB)
        request = botocore.awsrequest.AWSRequest(method="PUT", url=self.server.url + "/wire/cut.bin", data=data)
        botocore.auth.S3SigV4Auth(botocore.credentials.Credentials(self.key, self.secret), "s3", REGION).add_auth(request)
        headers = dict(request.headers.items())
        headers["Host"] = urllib.parse.urlsplit(self.server.url).netloc
        headers["Content-Length"] = str(len(data))
        u = urllib.parse.urlsplit(self.server.url)
        with socket.create_connection((u.hostname, u.port), timeout=30) as s:
            s.sendall(("PUT /wire/cut.bin HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) +
                       "\r\n").encode() + data[:MIB])
            s.shutdown(socket.SHUT_WR)  # the client goes away half way through its body
            while s.recv(65536):
                pass
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.head_object(Bucket="wire", Key="cut.bin")
        self.assertEqual(e.exception.response["Error"]["Code"], "404")
        self.assertEqual(self.bucket_files(), [])
        # The same upload whole: the signature itself was good.
        status, reply = self.send("PUT", "/wire/cut.bin", headers, data)
        self.assertEqual(status, 200, reply)
        self.assertEqual(self.s3.get_object(Bucket="wire", Key="cut.bin")["Body"].read(), data)

    def test_readers_see_one_whole_version_while_a_writer_replaces_it(self):
        versions = [os.urandom(8 * MIB), os.urandom(8 * MIB)]
        digests = {hashlib.md5(v).hexdigest() for v in versions}
        self.s3.put_object(Bucket="wire", Key="hot", Body=versions[0])
        seen, problems = [], []

        def read():
            reader = boto3.client("s3", endpoint_url=self.server.url, region_name=REGION, aws_access_key_id=self.key,
                                  aws_secret_access_key=self.secret,
                                  config=botocore.config.Config(signature_version="s3v4",
                                                                s3={"addressing_style": "path"}))
            for _ in range(12):
                got = reader.get_object(Bucket="wire", Key="hot")
                body = got["Body"].read()
                digest = hashlib.md5(body).hexdigest()
                if digest not in digests or got["ETag"].strip('"') != digest:
                    problems.append((len(body), digest, got["ETag"]))
                seen.append(digest)

        readers = [threading.Thread(target=read) for _ in range(2)]
        for t in readers:
            t.start()
        for i in range(12):
            self.s3.put_object(Bucket="wire", Key="hot", Body=versions[i % 2])
        for t in readers:
            t.join()
        self.assertEqual(problems, [])
        self.assertEqual(len(seen), 24)
        self.assertEqual(self.bucket_files(), ["hot"])


class S3CrashTest(S3Base):
    def test_acknowledged_objects_survive_kill9_and_a_killed_upload_leaves_nothing(self):
        small = os.urandom(100 * 1024)
        self.s3.put_object(Bucket="wire", Key="small", Body=small, ContentType="text/x-small",
                           Metadata={"team": "vision"})
        up = self.s3.create_multipart_upload(Bucket="wire", Key="multi")["UploadId"]
        parts = [os.urandom(5 * MIB), os.urandom(MIB)]
        etags = [self.s3.upload_part(Bucket="wire", Key="multi", UploadId=up, PartNumber=i + 1, Body=p)["ETag"]
                 for i, p in enumerate(parts)]
        done = self.s3.complete_multipart_upload(Bucket="wire", Key="multi", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]})
        pending = self.s3.create_multipart_upload(Bucket="wire", Key="pending")["UploadId"]
        self.s3.upload_part(Bucket="wire", Key="pending", UploadId=pending, PartNumber=1, Body=parts[0])
        # An upload under way when the server dies: its head and half its body have arrived.
        data = os.urandom(8 * MIB)
        request = botocore.awsrequest.AWSRequest(method="PUT", url=self.server.url + "/wire/cut", data=data)
        botocore.auth.S3SigV4Auth(botocore.credentials.Credentials(self.key, self.secret), "s3", REGION).add_auth(request)
        u = urllib.parse.urlsplit(self.server.url)
        s = socket.create_connection((u.hostname, u.port), timeout=30)
        headers = dict(request.headers.items(), Host=u.netloc, **{"Content-Length": str(len(data))})
        s.sendall(("PUT /wire/cut HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) +
                   "\r\n").encode() + data[:4 * MIB])
        self.server.kill9()
        s.close()
        self.server = self.new_server()
        self.key, self.secret = self.server.credentials()
        s3 = boto3.client("s3", endpoint_url=self.server.url, region_name=REGION, aws_access_key_id=self.key,
                          aws_secret_access_key=self.secret,
                          config=botocore.config.Config(retries={"max_attempts": 1}, signature_version="s3v4",
                                                        s3={"addressing_style": "path"}))
        got = s3.get_object(Bucket="wire", Key="small")
        self.assertEqual((got["Body"].read(), got["ContentType"], got["Metadata"]), (small, "text/x-small", {"team": "vision"}))
        got = s3.get_object(Bucket="wire", Key="multi")
        self.assertEqual(got["Body"].read(), b"".join(parts))
        self.assertEqual(got["ETag"], done["ETag"])
        # The unfinished multipart upload is still there to complete.
        listed = s3.list_parts(Bucket="wire", Key="pending", UploadId=pending)["Parts"]
        self.assertEqual([p["Size"] for p in listed], [5 * MIB])
        s3.complete_multipart_upload(Bucket="wire", Key="pending", UploadId=pending, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": listed[0]["ETag"]}]})
        self.assertEqual(s3.get_object(Bucket="wire", Key="pending")["Body"].read(), parts[0])
        with self.assertRaises(botocore.exceptions.ClientError):
            s3.head_object(Bucket="wire", Key="cut")
        self.assertEqual(sorted(k["Key"] for k in s3.list_objects_v2(Bucket="wire")["Contents"]),
                         ["multi", "pending", "small"])


class S3OverTlsTest(ServerTest):
    """Over https boto3 sends uploads as aws-chunked with a CRC32 trailer (no SHA-256 of the body)."""
    server_config = '[server]\ntls = "on"\n'

    def test_boto3_trailer_checksum_uploads(self):
        key, secret = self.server.credentials()
        s3 = boto3.client("s3", endpoint_url=self.server.url, region_name=REGION, aws_access_key_id=key,
                          aws_secret_access_key=secret, verify=self.server.ca_bundle,
                          config=botocore.config.Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}))
        s3.create_bucket(Bucket="tls")
        seen = []
        s3.meta.events.register("before-send.s3.PutObject",
                                lambda request, **kw: seen.append(dict(request.headers.items())))
        data = os.urandom(3 * MIB + 5)
        s3.put_object(Bucket="tls", Key="a.bin", Body=data)
        self.assertEqual(seen[0].get("X-Amz-Content-SHA256"), b"STREAMING-UNSIGNED-PAYLOAD-TRAILER", seen[0])
        got = s3.get_object(Bucket="tls", Key="a.bin")
        self.assertEqual(got["Body"].read(), data)
        self.assertEqual(got["ETag"].strip('"'), hashlib.md5(data).hexdigest())
        # upload_file: multipart, each part aws-chunked with its own trailer.
        path = os.path.join(self.work_dir, "big.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(18 * MIB))
        s3.upload_file(path, "tls", "big.bin")
        back = os.path.join(self.work_dir, "back.bin")
        s3.download_file("tls", "big.bin", back)
        with open(path, "rb") as a, open(back, "rb") as b:
            self.assertEqual(hashlib.sha256(a.read()).digest(), hashlib.sha256(b.read()).digest())
        # Many parts at once, each sent without Content-Length: each holds of the caller's share of
        # the request budget what its declared length needs, not the largest upload allowed.
        many = boto3.s3.transfer.TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB,
                                                max_concurrency=8)
        s3.upload_file(path, "tls", "parallel.bin", Config=many)
        self.assertEqual(s3.head_object(Bucket="tls", Key="parallel.bin")["ContentLength"], 18 * MIB)


if __name__ == "__main__":
    unittest.main()
