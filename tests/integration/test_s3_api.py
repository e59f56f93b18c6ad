"""The S3 endpoint of `trainyard serve` for the embedded buckets, driven by boto3 and the aws CLI
unchanged (docs/object-store.md, "The S3 endpoint")."""
import datetime
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

import botocore.auth
import botocore.awsrequest
import botocore.config
import botocore.credentials
import botocore.exceptions
import boto3
import boto3.s3.transfer

from harness import QUICKSTART, REGION, ServerTest

MIB = 1024 * 1024


class S3Test(ServerTest):
    def setUp(self):
        super().setUp()
        self.s3 = self.s3_client()

    def s3_client(self, **kw):
        key, secret = self.server.credentials()
        cfg = botocore.config.Config(retries={"max_attempts": 1}, signature_version="s3v4",
                                     s3=kw.pop("s3", {"addressing_style": "path"}))
        return boto3.client("s3", endpoint_url=kw.pop("endpoint", self.server.url), region_name=REGION,
                            aws_access_key_id=kw.pop("key", key), aws_secret_access_key=kw.pop("secret", secret),
                            config=cfg)

    def error_code(self, call):
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            call()
        return e.exception.response["Error"]["Code"]

    def signed_raw(self, method, path, body=b"", headers=None, key=None, secret=None, host=None):
        """A request signed for s3 as botocore signs it, sent as given (the path is not cleaned).
        host: the Host header to sign and send (the connection still goes to the server)."""
        k, s = self.server.credentials()
        url = (f"http://{host}" if host else self.server.url) + path
        req = botocore.awsrequest.AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
        req.headers["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest()
        botocore.auth.S3SigV4Auth(botocore.credentials.Credentials(key or k, secret or s), "s3", REGION).add_auth(req)
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        sent = dict(req.headers.items())
        sent["Host"] = urllib.parse.urlparse(url).netloc
        conn.request(method, path, body=body, headers=sent)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, data

    # ---- objects ----

    def test_objects_round_trip_with_metadata_and_content_type(self):
        self.s3.create_bucket(Bucket="bkt")
        put = self.s3.put_object(Bucket="bkt", Key="dir/a.txt", Body=b"hello world", ContentType="text/plain",
                                 Metadata={"Owner": "ana", "run": "7"}, CacheControl="no-cache",
                                 ContentDisposition="attachment")
        self.assertEqual(put["ETag"], '"%s"' % hashlib.md5(b"hello world").hexdigest())
        got = self.s3.get_object(Bucket="bkt", Key="dir/a.txt")
        self.assertEqual(got["Body"].read(), b"hello world")
        self.assertEqual(got["ContentType"], "text/plain")
        self.assertEqual(got["Metadata"], {"owner": "ana", "run": "7"})
        self.assertEqual(got["CacheControl"], "no-cache")
        self.assertEqual(got["ContentDisposition"], "attachment")
        self.assertEqual(got["ETag"], put["ETag"])
        head = self.s3.head_object(Bucket="bkt", Key="dir/a.txt")
        self.assertEqual(head["ContentLength"], 11)
        self.assertEqual(head["AcceptRanges"], "bytes")
        # The object is the file a job would read.
        with open(self.bucket_path("bkt", "dir/a.txt"), "rb") as f:
            self.assertEqual(f.read(), b"hello world")
        self.s3.delete_object(Bucket="bkt", Key="dir/a.txt")
        self.assertEqual(self.error_code(lambda: self.s3.get_object(Bucket="bkt", Key="dir/a.txt")), "NoSuchKey")
        self.assertEqual(self.error_code(lambda: self.s3.head_object(Bucket="bkt", Key="dir/a.txt")), "404")
        self.assertEqual(self.error_code(lambda: self.s3.get_object(Bucket="nope", Key="k")), "NoSuchBucket")
        self.assertEqual(self.error_code(lambda: self.s3.create_bucket(Bucket="bkt")), "BucketAlreadyOwnedByYou")
        self.assertEqual(self.s3.get_bucket_location(Bucket="bkt")["LocationConstraint"], None)
        self.assertIn("bkt", [x["Name"] for x in self.s3.list_buckets()["Buckets"]])

    def test_bad_content_md5_stores_nothing(self):
        self.s3.create_bucket(Bucket="bkt")
        import base64
        wrong = base64.b64encode(hashlib.md5(b"other").digest()).decode()
        self.assertEqual(self.error_code(lambda: self.s3.put_object(Bucket="bkt", Key="k", Body=b"data", ContentMD5=wrong)),
                         "BadDigest")
        self.assertFalse(os.path.exists(self.bucket_path("bkt", "k")))

    def test_ranges_and_conditional_gets(self):
        self.s3.create_bucket(Bucket="bkt")
        data = bytes(range(256)) * 8
        etag = self.s3.put_object(Bucket="bkt", Key="r", Body=data)["ETag"]
        r = self.s3.get_object(Bucket="bkt", Key="r", Range="bytes=10-19")
        self.assertEqual(r["Body"].read(), data[10:20])
        self.assertEqual(r["ContentRange"], "bytes 10-19/2048")
        self.assertEqual(r["ResponseMetadata"]["HTTPStatusCode"], 206)
        self.assertEqual(self.s3.get_object(Bucket="bkt", Key="r", Range="bytes=2040-")["Body"].read(), data[2040:])
        self.assertEqual(self.s3.get_object(Bucket="bkt", Key="r", Range="bytes=-5")["Body"].read(), data[-5:])
        self.assertEqual(self.error_code(lambda: self.s3.get_object(Bucket="bkt", Key="r", Range="bytes=5000-")),
                         "InvalidRange")
        self.assertEqual(self.error_code(lambda: self.s3.get_object(Bucket="bkt", Key="r", IfNoneMatch=etag)), "304")
        self.assertEqual(self.error_code(lambda: self.s3.get_object(Bucket="bkt", Key="r", IfMatch='"0000"')),
                         "PreconditionFailed")
        self.assertEqual(self.s3.get_object(Bucket="bkt", Key="r", IfMatch=etag)["Body"].read(), data)
        later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
        earlier = datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc)
        self.assertEqual(self.error_code(lambda: self.s3.get_object(Bucket="bkt", Key="r", IfModifiedSince=later)), "304")
        self.assertEqual(self.error_code(lambda: self.s3.get_object(Bucket="bkt", Key="r", IfUnmodifiedSince=earlier)),
                         "PreconditionFailed")
        self.assertEqual(self.s3.get_object(Bucket="bkt", Key="r", IfModifiedSince=earlier)["ContentLength"], 2048)

    def test_copy_and_delete_objects(self):
        self.s3.create_bucket(Bucket="bkt")
        self.s3.put_object(Bucket="bkt", Key="src key+1", Body=b"payload", ContentType="text/x", Metadata={"a": "1"})
        self.s3.copy_object(Bucket="bkt", Key="copy", CopySource={"Bucket": "bkt", "Key": "src key+1"})
        got = self.s3.get_object(Bucket="bkt", Key="copy")
        self.assertEqual((got["Body"].read(), got["ContentType"], got["Metadata"]), (b"payload", "text/x", {"a": "1"}))
        self.s3.copy_object(Bucket="bkt", Key="copy2", CopySource="bkt/src key+1", MetadataDirective="REPLACE",
                            ContentType="text/y", Metadata={"b": "2"})
        got = self.s3.head_object(Bucket="bkt", Key="copy2")
        self.assertEqual((got["ContentType"], got["Metadata"]), ("text/y", {"b": "2"}))
        self.assertEqual(self.error_code(lambda: self.s3.copy_object(Bucket="bkt", Key="x", CopySource="bkt/missing")),
                         "NoSuchKey")
        out = self.s3.delete_objects(Bucket="bkt", Delete={"Objects": [{"Key": "copy"}, {"Key": "copy2"}, {"Key": "gone"}]})
        self.assertEqual(sorted(d["Key"] for d in out["Deleted"]), ["copy", "copy2", "gone"])
        quiet = self.s3.delete_objects(Bucket="bkt", Delete={"Objects": [{"Key": "src key+1"}], "Quiet": True})
        self.assertNotIn("Deleted", quiet)
        self.assertEqual(self.s3.list_objects_v2(Bucket="bkt")["KeyCount"], 0)

    # ---- listing ----

    def test_list_objects_v2_paginates_2500_keys_with_and_without_delimiter(self):
        self.s3.create_bucket(Bucket="many")
        expected = []
        # Files written beside the endpoint (as a job writes them) are objects too.
        for i in range(2500):
            key = f"d{i % 5}/k{i:05d}"
            os.makedirs(os.path.dirname(self.bucket_path("many", key)), exist_ok=True)
            with open(self.bucket_path("many", key), "w") as f:
                f.write(str(i))
            expected.append(key)
        pages = list(self.s3.get_paginator("list_objects_v2").paginate(Bucket="many"))
        self.assertEqual([len(p.get("Contents", [])) for p in pages], [1000, 1000, 500])
        self.assertEqual([o["Key"] for p in pages for o in p["Contents"]], sorted(expected))
        self.assertEqual(pages[0]["Contents"][0]["ETag"], '"%s"' % hashlib.md5(b"0").hexdigest())
        prefixes = [c["Prefix"] for p in self.s3.get_paginator("list_objects_v2").paginate(
            Bucket="many", Delimiter="/", PaginationConfig={"PageSize": 2}) for c in p.get("CommonPrefixes", [])]
        self.assertEqual(prefixes, ["d0/", "d1/", "d2/", "d3/", "d4/"])
        under = [o["Key"] for p in self.s3.get_paginator("list_objects_v2").paginate(Bucket="many", Prefix="d3/",
                                                                                    StartAfter="d3/k01000")
                 for o in p.get("Contents", [])]
        self.assertEqual(under, sorted(k for k in expected if k.startswith("d3/") and k > "d3/k01000"))
        v1 = list(self.s3.get_paginator("list_objects").paginate(Bucket="many", Prefix="d1/"))
        self.assertEqual(sum(len(p["Contents"]) for p in v1), 500)
        self.assertEqual(self.error_code(lambda: self.s3.list_objects_v2(Bucket="many", ContinuationToken="!!notatoken")),
                         "InvalidArgument")

    def test_encoding_type_url_round_trips_odd_keys(self):
        self.s3.create_bucket(Bucket="odd")
        # (control characters are refused: keys are file names, see test_traversal_keys...)
        keys = ["a b", "plus+sign", "pct%41", "q?x=1&y", "ünï/cöde", "amp&lt;", "quote\"'", "~tilde*star"]
        for k in keys:
            self.s3.put_object(Bucket="odd", Key=k, Body=k.encode())
        listed = [o["Key"] for o in self.s3.list_objects_v2(Bucket="odd")["Contents"]]
        self.assertEqual(listed, sorted(keys, key=lambda k: k.encode()))
        for k in keys:
            self.assertEqual(self.s3.get_object(Bucket="odd", Key=k)["Body"].read(), k.encode())
        prefixes = self.s3.list_objects_v2(Bucket="odd", Delimiter="/")["CommonPrefixes"]
        self.assertEqual([p["Prefix"] for p in prefixes], ["ünï/"])

    # ---- multipart and transfers ----

    def test_upload_file_and_download_file_of_20_mib(self):
        self.s3.create_bucket(Bucket="big")
        src = os.path.join(self.work_dir, "src.bin")
        data = os.urandom(20 * MIB)
        with open(src, "wb") as f:
            f.write(data)
        cfg = boto3.s3.transfer.TransferConfig(multipart_threshold=8 * MIB, multipart_chunksize=8 * MIB)
        self.s3.upload_file(src, "big", "blob", Config=cfg)
        head = self.s3.head_object(Bucket="big", Key="blob")
        self.assertEqual(head["ContentLength"], 20 * MIB)
        self.assertTrue(head["ETag"].endswith('-3"'), head["ETag"])
        dst = os.path.join(self.work_dir, "dst.bin")
        self.s3.download_file("big", "blob", dst, Config=cfg)
        with open(dst, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), hashlib.sha256(data).hexdigest())
        self.assertEqual(self.s3.list_multipart_uploads(Bucket="big").get("Uploads", []), [])

    def test_complete_with_a_wrong_etag_makes_nothing_visible(self):
        self.s3.create_bucket(Bucket="mpu")
        up = self.s3.create_multipart_upload(Bucket="mpu", Key="obj")["UploadId"]
        p1 = self.s3.upload_part(Bucket="mpu", Key="obj", UploadId=up, PartNumber=1, Body=b"x" * (5 * MIB))["ETag"]
        self.s3.upload_part(Bucket="mpu", Key="obj", UploadId=up, PartNumber=2, Body=b"tail")
        parts = self.s3.list_parts(Bucket="mpu", Key="obj", UploadId=up)["Parts"]
        self.assertEqual([(p["PartNumber"], p["Size"]) for p in parts], [(1, 5 * MIB), (2, 4)])
        bad = {"Parts": [{"PartNumber": 1, "ETag": p1}, {"PartNumber": 2, "ETag": '"%s"' % ("0" * 32)}]}
        self.assertEqual(self.error_code(lambda: self.s3.complete_multipart_upload(
            Bucket="mpu", Key="obj", UploadId=up, MultipartUpload=bad)), "InvalidPart")
        self.assertEqual(self.error_code(lambda: self.s3.head_object(Bucket="mpu", Key="obj")), "404")
        self.assertFalse(os.path.exists(self.bucket_path("mpu", "obj")))
        self.assertEqual([u["UploadId"] for u in self.s3.list_multipart_uploads(Bucket="mpu")["Uploads"]], [up])
        self.s3.abort_multipart_upload(Bucket="mpu", Key="obj", UploadId=up)
        self.assertEqual(self.error_code(lambda: self.s3.list_parts(Bucket="mpu", Key="obj", UploadId=up)), "NoSuchUpload")

    def test_list_multipart_uploads_pages_with_markers(self):
        self.s3.create_bucket(Bucket="pages")
        want = []  # (key, upload id) in S3's order: by key, then by start
        for i in range(30):
            key = f"run/{i % 10:02d}" if i % 5 else f"top-{i:02d}"
            want.append((key, self.s3.create_multipart_upload(Bucket="pages", Key=key)["UploadId"]))
        want.sort(key=lambda u: u[0])  # stable: one key's uploads stay in the order they were started
        pages = list(self.s3.get_paginator("list_multipart_uploads").paginate(
            Bucket="pages", PaginationConfig={"PageSize": 7}))
        self.assertEqual([len(p.get("Uploads", [])) for p in pages], [7, 7, 7, 7, 2])
        self.assertEqual([p["IsTruncated"] for p in pages], [True] * 4 + [False])
        self.assertEqual([p["MaxUploads"] for p in pages], [7] * 5)
        self.assertEqual([(u["Key"], u["UploadId"]) for p in pages for u in p["Uploads"]], want)
        # A page's next markers are the last upload it holds.
        self.assertEqual((pages[0]["NextKeyMarker"], pages[0]["NextUploadIdMarker"]),
                         (pages[0]["Uploads"][-1]["Key"], pages[0]["Uploads"][-1]["UploadId"]))
        # With a delimiter, run/ is one common prefix; with a prefix, only its keys.
        rolled = self.s3.list_multipart_uploads(Bucket="pages", Delimiter="/")
        self.assertEqual([c["Prefix"] for c in rolled["CommonPrefixes"]], ["run/"])
        self.assertEqual(len(rolled["Uploads"]), 6)
        under = self.s3.list_multipart_uploads(Bucket="pages", Prefix="run/0")
        self.assertEqual(len(under["Uploads"]), 24)
        self.assertEqual(under["Prefix"], "run/0")
        # A key-marker alone skips that key's uploads; with an upload-id-marker, those up to it.
        after = self.s3.list_multipart_uploads(Bucket="pages", KeyMarker="run/01")
        self.assertEqual(after["Uploads"][0]["Key"], "run/02")
        first = [u for u in want if u[0] == "run/01"]
        after = self.s3.list_multipart_uploads(Bucket="pages", KeyMarker="run/01", UploadIdMarker=first[0][1])
        self.assertEqual([u["UploadId"] for u in after["Uploads"][:2]], [first[1][1], first[2][1]])
        for bad in (0, -1):
            self.assertEqual(self.error_code(lambda: self.s3.list_multipart_uploads(Bucket="pages", MaxUploads=bad)),
                             "InvalidArgument")

    # ---- presigned URLs ----

    def test_presigned_get_and_put(self):
        self.s3.create_bucket(Bucket="pre")
        put_url = self.s3.generate_presigned_url("put_object", Params={"Bucket": "pre", "Key": "up"}, ExpiresIn=300)
        try:
            urllib.request.urlopen(urllib.request.Request(put_url, data=b"via url", method="PUT"), timeout=30).read()
        except urllib.error.HTTPError as e:
            self.fail(e.read())
        get_url = self.s3.generate_presigned_url("get_object", Params={"Bucket": "pre", "Key": "up"}, ExpiresIn=300)
        self.assertEqual(urllib.request.urlopen(get_url, timeout=30).read(), b"via url")
        tampered = get_url.replace("Key=up", "Key=up").replace("/pre/up", "/pre/other")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(tampered, timeout=30)
        self.assertEqual(e.exception.code, 403)
        self.assertIn(b"SignatureDoesNotMatch", e.exception.read())
        # Signed an hour ago for one second.
        key, secret = self.server.credentials()
        signer = botocore.auth.S3SigV4QueryAuth(botocore.credentials.Credentials(key, secret), "s3", REGION, expires=1)
        req = botocore.awsrequest.AWSRequest(method="GET", url=self.server.url + "/pre/up")
        then = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - datetime.timedelta(hours=1)
        import unittest.mock
        with unittest.mock.patch("botocore.auth.get_current_datetime", return_value=then):
            signer.add_auth(req)
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req.url, timeout=30)
        self.assertEqual(e.exception.code, 403)
        self.assertIn(b"AccessDenied", e.exception.read())

    def test_presigned_urls_with_boto3_defaults_use_signature_version_2(self):
        # A client made with no signature_version: boto3 presigns S3 URLs with Signature Version 2
        # (AWSAccessKeyId, Signature, Expires), which S3 still accepts.
        key, secret = self.server.credentials()
        plain = boto3.client("s3", endpoint_url=self.server.url, region_name=REGION, aws_access_key_id=key,
                             aws_secret_access_key=secret)
        plain.create_bucket(Bucket="pre2")
        plain.put_object(Bucket="pre2", Key="a b+c.txt", Body=b"hello")
        url = plain.generate_presigned_url("get_object", Params={"Bucket": "pre2", "Key": "a b+c.txt"})
        self.assertIn("AWSAccessKeyId=", url)
        self.assertEqual(urllib.request.urlopen(url, timeout=30).read(), b"hello")
        # response-* parameters are signed and choose the reply's headers.
        url = plain.generate_presigned_url("get_object", Params={
            "Bucket": "pre2", "Key": "a b+c.txt", "ResponseContentType": "text/x-note",
            "ResponseContentDisposition": 'attachment; filename="n.txt"'})
        r = urllib.request.urlopen(url, timeout=30)
        self.assertEqual((r.read(), r.headers["Content-Type"], r.headers["Content-Disposition"]),
                         (b"hello", "text/x-note", 'attachment; filename="n.txt"'))
        # A PUT with no Content-Type, as signed.
        put = urllib.parse.urlsplit(plain.generate_presigned_url("put_object", Params={"Bucket": "pre2", "Key": "up"}))
        conn = http.client.HTTPConnection(put.hostname, put.port, timeout=30)
        conn.request("PUT", put.path + "?" + put.query, body=b"uploaded")
        self.assertEqual(conn.getresponse().status, 200)
        conn.close()
        self.assertEqual(plain.get_object(Bucket="pre2", Key="up")["Body"].read(), b"uploaded")
        for bad in (url.replace("Signature=", "Signature=A"), url.replace("/pre2/", "/pre2/x"),
                    url.replace("text%2Fx-note", "text%2Fhtml")):
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(bad, timeout=30)
            self.assertEqual(e.exception.code, 403, bad)
            self.assertIn(b"SignatureDoesNotMatch", e.exception.read())
        # Presigned for a minute, an hour ago.
        import unittest.mock
        with unittest.mock.patch("time.time", return_value=time.time() - 3600):
            old = plain.generate_presigned_url("get_object", Params={"Bucket": "pre2", "Key": "up"}, ExpiresIn=60)
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(old, timeout=30)
        self.assertEqual(e.exception.code, 403)
        self.assertIn(b"AccessDenied", e.exception.read())
        # The wrong secret.
        other = boto3.client("s3", endpoint_url=self.server.url, region_name=REGION, aws_access_key_id=key,
                             aws_secret_access_key="wrong")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(other.generate_presigned_url("get_object", Params={"Bucket": "pre2", "Key": "up"}),
                                   timeout=30)
        self.assertEqual(e.exception.code, 403)

    # ---- refusals ----

    def test_wrong_secret_and_unknown_key_are_refused(self):
        key, _ = self.server.credentials()
        self.assertEqual(self.error_code(lambda: self.s3_client(secret="wrong").list_buckets()), "SignatureDoesNotMatch")
        self.assertEqual(self.error_code(lambda: self.s3_client(key="AKIANOSUCHKEY0000000").list_buckets()),
                         "InvalidAccessKeyId")
        self.assertEqual(self.error_code(lambda: self.s3_client(secret="wrong").create_bucket(Bucket="x")),
                         "SignatureDoesNotMatch")
        self.assertFalse(os.path.exists(self.bucket_path("x")))

    def test_traversal_keys_are_refused_and_nothing_leaves_the_buckets(self):
        self.s3.create_bucket(Bucket="safe")
        before = set(os.listdir(self.data_dir))
        for path in ["/safe/../escape", "/safe/%2e%2e/escape", "/safe/a/%2E%2E/%2E%2E/escape", "/safe/nul%00key",
                     "/safe/" + "k" * 1100]:
            status, body = self.signed_raw("PUT", path, b"evil")
            self.assertIn(status, (400, 403), (path, body))
            self.assertIn(b"<Error><Code>", body)
        self.assertEqual(set(os.listdir(self.data_dir)), before)
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "escape")))
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "buckets", "escape")))
        self.assertEqual(self.s3.list_objects_v2(Bucket="safe")["KeyCount"], 0)

    def test_a_user_allowed_one_prefix_is_refused_elsewhere(self):
        self.s3.create_bucket(Bucket="team")
        self.s3.put_object(Bucket="team", Key="public/a", Body=b"a")
        self.s3.put_object(Bucket="team", Key="private/b", Body=b"b")
        admin = lambda op, body: self.server.admin("admin/iam/" + op, body)
        admin("CreateUser", {"UserName": "reader"})
        k = admin("CreateAccessKey", {"UserName": "reader"})["AccessKey"]
        admin("CreatePolicy", {"PolicyName": "read-public", "PolicyDocument": json.dumps({
            "Version": "2012-10-17", "Statement": [{"Sid": "PublicOnly", "Effect": "Allow", "Action": "s3:GetObject",
                                                    "Resource": "arn:aws:s3:::team/public/*"}]})})
        admin("AttachUserPolicy", {"UserName": "reader", "PolicyName": "read-public"})
        reader = self.s3_client(key=k["AccessKeyId"], secret=k["SecretAccessKey"])
        self.assertEqual(reader.get_object(Bucket="team", Key="public/a")["Body"].read(), b"a")
        self.assertEqual(self.error_code(lambda: reader.get_object(Bucket="team", Key="private/b")), "AccessDenied")
        self.assertEqual(self.error_code(lambda: reader.put_object(Bucket="team", Key="public/c", Body=b"c")),
                         "AccessDenied")
        self.assertEqual(self.error_code(lambda: reader.list_objects_v2(Bucket="team")), "AccessDenied")
        self.assertEqual(self.error_code(lambda: reader.delete_bucket(Bucket="team")), "AccessDenied")
        self.assertFalse(os.path.exists(self.bucket_path("team", "public/c")))
        found = self.server.admin("admin/audit", {"DeniedOnly": True})["Events"]
        names = [e["EventName"] for e in found]
        self.assertIn("PutObject", names)
        self.assertIn("DeleteBucket", names)

    def test_unserved_subresources_are_not_implemented(self):
        self.s3.create_bucket(Bucket="bkt")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.get_bucket_acl(Bucket="bkt")
        self.assertEqual(e.exception.response["Error"]["Code"], "NotImplemented")
        self.assertIn("acl", e.exception.response["Error"]["Message"])
        self.assertEqual(e.exception.response["ResponseMetadata"]["HTTPStatusCode"], 501)

    def test_virtual_host_style(self):
        self.s3.create_bucket(Bucket="vhost")
        port = urllib.parse.urlparse(self.server.url).port
        status, body = self.signed_raw("PUT", "/k/v", b"virtual", host=f"vhost.localhost:{port}")
        self.assertEqual(status, 200, body)
        self.assertEqual(self.s3.get_object(Bucket="vhost", Key="k/v")["Body"].read(), b"virtual")
        status, body = self.signed_raw("GET", "/?list-type=2", host=f"vhost.localhost:{port}")
        self.assertEqual(status, 200, body)
        self.assertIn(b"<Key>k/v</Key>", body)
        status, body = self.signed_raw("GET", "/k/v", host=f"nosuch.localhost:{port}")
        self.assertEqual(status, 404)
        self.assertIn(b"<Code>NoSuchBucket</Code>", body)


    def test_jobs_read_what_s3_wrote_and_their_model_is_downloadable(self):
        # The code and training data go up through S3; the job reads them as its channel and
        # code, and its model.tar.gz comes back down through S3.
        staging = tempfile.mkdtemp(dir=self.work_dir)
        subprocess.check_call(["tar", "-czf", os.path.join(staging, "sourcedir.tar.gz"), "-C",
                               os.path.join(QUICKSTART, "code"), "."])
        subprocess.check_call(["python3", os.path.join(QUICKSTART, "make_data.py"), os.path.join(staging, "train.csv")])
        self.s3.create_bucket(Bucket="trainyard-test")
        self.s3.upload_file(os.path.join(staging, "sourcedir.tar.gz"), "trainyard-test", "code/sourcedir.tar.gz")
        self.s3.upload_file(os.path.join(staging, "train.csv"), "trainyard-test", "data/train/train.csv")
        self.sm.create_training_job(**self.script_payload("s3-fed", epochs=1))
        self.assertEqual(self.wait_training("s3-fed")["TrainingJobStatus"], "Completed")
        got = self.s3.get_object(Bucket="trainyard-test", Key="output/s3-fed/output/model.tar.gz")["Body"].read()
        with open(self.bucket_path("trainyard-test", "output/s3-fed/output/model.tar.gz"), "rb") as f:
            self.assertEqual(got, f.read())
        self.assertGreater(len(got), 0)

class S3DisabledTest(ServerTest):
    server_config = "[s3]\nenabled = false\n"

    def test_every_s3_request_is_not_implemented(self):
        key, secret = self.server.credentials()
        s3 = boto3.client("s3", endpoint_url=self.server.url, region_name=REGION, aws_access_key_id=key,
                          aws_secret_access_key=secret, config=botocore.config.Config(retries={"max_attempts": 1}))
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            s3.list_buckets()
        self.assertEqual(e.exception.response["Error"]["Code"], "NotImplemented")
        self.assertIn("[s3] enabled = false", e.exception.response["Error"]["Message"])


@unittest.skipUnless(shutil.which("aws"), "the aws CLI is not installed")
class S3AwsCliTest(ServerTest):
    def aws(self, *args, check=True):
        key, secret = self.server.credentials()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION=REGION,
                   AWS_PAGER="", AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
        r = subprocess.run(["aws", "--endpoint-url", self.server.url, *args], capture_output=True, text=True, env=env,
                           timeout=300)
        if check and r.returncode != 0:
            self.fail(f"aws {' '.join(args)} failed: {r.stderr}")
        return r

    def test_mb_cp_sync_ls_rm(self):
        self.aws("s3", "mb", "s3://cli")
        src = tempfile.mkdtemp(dir=self.work_dir)
        big = os.path.join(src, "big.bin")
        with open(big, "wb") as f:
            for _ in range(100):
                f.write(os.urandom(MIB))
        for name in ("a.txt", "sub/b.txt"):
            os.makedirs(os.path.dirname(os.path.join(src, name)), exist_ok=True)
            with open(os.path.join(src, name), "w") as f:
                f.write(name)
        self.aws("s3", "cp", big, "s3://cli/one/big.bin")
        with open(big, "rb") as f:
            want = hashlib.md5(f.read()).hexdigest()
        with open(self.bucket_path("cli", "one/big.bin"), "rb") as f:
            self.assertEqual(hashlib.md5(f.read()).hexdigest(), want)
        back = os.path.join(self.work_dir, "back.bin")
        self.aws("s3", "cp", "s3://cli/one/big.bin", back)
        with open(back, "rb") as f:
            self.assertEqual(hashlib.md5(f.read()).hexdigest(), want)
        first = self.aws("s3", "sync", src, "s3://cli/tree").stdout
        self.assertEqual(first.count("upload:"), 3, first)
        second = self.aws("s3", "sync", src, "s3://cli/tree").stdout
        self.assertEqual(second.count("upload:"), 0, second)
        with open(os.path.join(src, "new.txt"), "w") as f:
            f.write("new")
        third = self.aws("s3", "sync", src, "s3://cli/tree").stdout
        self.assertEqual(third.count("upload:"), 1, third)
        self.assertIn("new.txt", third)
        listing = self.aws("s3", "ls", "--recursive", "s3://cli/tree/").stdout
        self.assertEqual(sorted(line.split()[-1] for line in listing.splitlines()),
                         ["tree/a.txt", "tree/big.bin", "tree/new.txt", "tree/sub/b.txt"])
        self.aws("s3", "rm", "--recursive", "s3://cli/")
        self.assertEqual(self.aws("s3", "ls", "--recursive", "s3://cli/").stdout, "")
        self.aws("s3", "rb", "s3://cli")
        self.assertFalse(os.path.exists(self.bucket_path("cli")))


if __name__ == "__main__":
    unittest.main()
