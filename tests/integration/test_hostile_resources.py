"""Jobs that try to take the server down through what they write: a million metric lines (every
read of the series must stay paged and the server's memory bounded), a job that fills the data
dir's file system (the server must stay up, fail that job, hold back starts while the disk is
short, and start again on a full disk after kill -9), and a multipart upload left incomplete
(its parts stop at the reserve, and jobs still start)."""
import os
import subprocess
import tempfile
import time
import unittest

from harness import ServerTest

MILLION = "seq 0 999999 | sed 's/^/loss=/'"


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no " + field)


class MetricFloodTest(ServerTest):
    def test_a_million_metric_lines_are_read_in_bounded_pages_with_bounded_memory(self):
        p = self.command_payload("flood", MILLION)
        p["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=([0-9]+)"}]
        self.sm.create_training_job(**p)
        tj = self.wait_training("flood", timeout=240)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        # The newest value is kept, so the final metric and the series agree.
        self.assertEqual([(m["MetricName"], m["Value"]) for m in tj["FinalMetricDataList"]], [("loss", 999999.0)])
        pid = self.server.proc.pid
        before = rss_kib(pid)
        for _ in range(12):
            out = self.server.admin("metric-series", {"TrainingJobName": "flood"})
            points = out["Series"][0]["Points"]
            # A page holds at most 10,000 points; the job's series is downsampled to at most that.
            self.assertLessEqual(len(points), 10000)
            self.assertGreaterEqual(len(points), 2500)
            self.assertNotIn("NextToken", out)
            values = [pt["Value"] for pt in points]
            self.assertEqual((values[0], values[-1]), (0.0, 999999.0))
            steps = {b - a for a, b in zip(values[:-2], values[1:-1])}
            self.assertEqual(len(steps), 1, "the kept points are evenly spread")
        after = rss_kib(pid)
        print(f"server VmRSS before the reads {before} KiB, after twelve reads {after} KiB")
        # Before pages and downsampling one read left ~720 MB behind and twelve 8.8 GB.
        self.assertLess(after, 200 * 1024)
        self.assertLess(after - before, 64 * 1024)
        # Smaller pages cover the same points once each, in order.
        paged, token, pages = [], None, 0
        while True:
            body = {"TrainingJobName": "flood", "MaxResults": 1000}
            if token:
                body["NextToken"] = token
            out = self.server.admin("metric-series", body)
            pages += 1
            n = sum(len(s["Points"]) for s in out["Series"])
            self.assertLessEqual(n, 1000)
            paged += [pt["Value"] for s in out["Series"] for pt in s["Points"]]
            token = out.get("NextToken")
            if not token:
                break
        self.assertEqual(paged, values)
        self.assertEqual(pages, (len(values) + 999) // 1000)
        for bad in ({"MaxResults": 0}, {"MaxResults": 10001}, {"NextToken": "garbage"}):
            with self.assertRaises(RuntimeError) as e:
                self.server.admin("metric-series", dict({"TrainingJobName": "flood"}, **bad))
            self.assertIn("ValidationException", str(e.exception))
        # Log reads of the same job obey CloudWatch's page limits (10,000 events or 1 MB) and read
        # only what the page needs: the 26 MB log is never held whole.
        logs = self.server.client("logs")
        group = "/aws/sagemaker/TrainingJobs"
        stream = logs.describe_log_streams(logGroupName=group,
                                           logStreamNamePrefix="flood/")["logStreams"][0]["logStreamName"]

        def messages(page):
            return [e["message"] for e in page["events"]]

        for _ in range(5):
            page = logs.get_log_events(logGroupName=group, logStreamName=stream, startFromHead=True)
            self.assertEqual(messages(page), [f"loss={i}" for i in range(10000)])
            page = logs.get_log_events(logGroupName=group, logStreamName=stream, nextToken=page["nextForwardToken"])
            self.assertEqual(messages(page), [f"loss={i}" for i in range(10000, 20000)])
            # From the tail, then backwards.
            page = logs.get_log_events(logGroupName=group, logStreamName=stream)
            self.assertEqual(messages(page), [f"loss={i}" for i in range(990000, 1000000)])
            page = logs.get_log_events(logGroupName=group, logStreamName=stream, nextToken=page["nextBackwardToken"])
            self.assertEqual(messages(page), [f"loss={i}" for i in range(980000, 990000)])
            # A window past every event reads the whole file and returns nothing.
            last = page["events"][-1]["timestamp"]
            page = logs.get_log_events(logGroupName=group, logStreamName=stream, startFromHead=True,
                                       startTime=last + 10**9)
            self.assertEqual(page["events"], [])
            # A search through the whole log keeps only its matches.
            hits = logs.filter_log_events(logGroupName=group, filterPattern='"loss=99999"')
            self.assertEqual(messages(hits), ["loss=99999"] + [f"loss={i}" for i in range(999990, 1000000)])
            self.assertNotIn("nextToken", hits)
            hits = logs.filter_log_events(logGroupName=group, filterPattern="loss")
            self.assertEqual(messages(hits), [f"loss={i}" for i in range(10000)])
            hits = logs.filter_log_events(logGroupName=group, filterPattern="loss", nextToken=hits["nextToken"])
            self.assertEqual(messages(hits)[0], "loss=10000")
        after_logs, peak = rss_kib(pid), rss_kib(pid, "VmHWM")
        print(f"server VmRSS after the log reads {after_logs} KiB ({after_logs - after:+d} KiB), peak {peak} KiB")
        # When every read loaded the whole log, these reads peaked near 1 GB and left 850 MB behind;
        # paged, but without giving the freed heap back (malloc_trim), they left 180 MB behind.
        self.assertLess(peak, 120 * 1024)
        self.assertLess(after_logs, 120 * 1024)
        self.assertLess(after_logs - after, 32 * 1024)
        logs.close()


# Fills the model directory until the disk is full and goes on trying, as a hostile job would.
FILLER = ("python3 -c \"\nimport os, time\nb = os.urandom(1 << 20)\n"
          "f = open(os.path.join(os.environ['SM_MODEL_DIR'], 'fill'), 'wb', 0)\n"
          "while True:\n    try:\n        f.write(b)\n    except OSError:\n        time.sleep(0.05)\n\"")

RESERVE_MIB = 16


@unittest.skipUnless(os.geteuid() == 0, "mounting a small tmpfs for the data dir needs root")
class DataDirFillerTest(ServerTest):
    # No sandbox: a sandboxed root server gives each instance a volume allocated in full, above the
    # reserve, which a 64 MiB disk cannot hold; there a job can fill only its own volume. Without
    # the sandbox (or without root) a job writes straight into the data dir, which these tests fill.
    server_config = f"[server]\ndata_dir_reserve_mib = {RESERVE_MIB}\n\n[executor]\nsandbox = \"none\"\n"

    def setUp(self):
        self.mount = tempfile.mkdtemp(prefix="trainyard-smallfs-")
        subprocess.check_call(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", self.mount])
        self.data_dir_parent = self.mount
        try:
            super().setUp()
        except BaseException:
            subprocess.call(["umount", "-l", self.mount])
            raise

    def tearDown(self):
        try:
            super().tearDown()
        finally:
            subprocess.call(["umount", "-l", self.mount])
            os.rmdir(self.mount)

    def free_bytes(self):
        v = os.statvfs(self.mount)
        return v.f_bavail * v.f_frsize

    def ballast(self, leave_bytes):
        """Fills the file system (outside the data dir) until about leave_bytes are free."""
        path = os.path.join(self.mount, "ballast")
        chunk = b"\xa5" * (1 << 20)
        with open(path, "ab") as f:
            while self.free_bytes() - len(chunk) >= leave_bytes:
                f.write(chunk)
                f.flush()
            try:
                while leave_bytes == 0:
                    f.write(chunk)
                    f.flush()
            except OSError:
                pass
        return path

    def wait_log(self, text, timeout=30):
        deadline = time.time() + timeout
        while text not in self.server.read_log():
            self.assertLess(time.time(), deadline, f"the server never logged {text!r}")
            time.sleep(0.05)

    def assert_answers(self):
        self.assertIsNone(self.server.proc.poll(), "the server exited:\n" + self.server.read_log())
        self.sm.list_training_jobs()

    def test_the_job_that_fills_the_data_dir_fails_and_the_server_stays_up(self):
        self.sm.create_training_job(**self.command_payload("filler", FILLER))
        tj = self.wait_training("filler", timeout=90)
        self.assert_answers()
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertIn("data dir ran short of space", tj["FailureReason"])
        self.assertIn(f"reserve of {RESERVE_MIB} MiB", tj["FailureReason"])
        # Its scratch was reclaimed: the next job runs.
        self.sm.create_training_job(**self.command_payload("after", "echo fine"))
        self.assertEqual(self.wait_training("after")["TrainingJobStatus"], "Completed")

    def test_no_job_starts_while_the_disk_is_under_the_reserve(self):
        ballast = self.ballast(RESERVE_MIB // 2 << 20)
        self.wait_log("no job starts until space is freed")
        self.sm.create_training_job(**self.command_payload("waiter", "echo ran"))
        deadline = time.time() + 30
        while True:
            tj = self.sm.describe_training_job(TrainingJobName="waiter")
            last = tj["SecondaryStatusTransitions"][-1]
            if last["Status"] == "Pending" and "data_dir_reserve_mib" in last["StatusMessage"]:
                break
            self.assertLess(time.time(), deadline, f"not held back: {tj['SecondaryStatusTransitions']}")
            time.sleep(0.05)
        self.assertEqual(tj["TrainingJobStatus"], "InProgress")
        os.unlink(ballast)
        self.assertEqual(self.wait_training("waiter")["TrainingJobStatus"], "Completed")

    def test_an_incomplete_upload_stops_at_the_reserve_and_jobs_still_start(self):
        import botocore.exceptions
        s3 = self.server.client("s3")
        s3.create_bucket(Bucket="filler")
        upload = s3.create_multipart_upload(Bucket="filler", Key="never-completed")["UploadId"]
        part = b"\x5a" * (4 << 20)
        for number in range(1, 64):  # 64 MiB of tmpfs: it runs out well before that
            try:
                s3.upload_part(Bucket="filler", Key="never-completed", UploadId=upload, PartNumber=number, Body=part)
            except botocore.exceptions.ClientError as e:
                self.assertEqual(e.response["Error"]["Code"], "InsufficientStorage", e.response)
                self.assertEqual(e.response["ResponseMetadata"]["HTTPStatusCode"], 507)
                self.assertIn(f"reserve of {RESERVE_MIB} MiB", e.response["Error"]["Message"])
                break
        else:
            self.fail("every part was taken")
        self.assertGreater(number, 2)  # the parts that fitted above the reserve were taken
        self.assertGreaterEqual(self.free_bytes(), RESERVE_MIB << 20)
        # The upload is left incomplete (as for the 7 days before it is aborted): jobs still start.
        self.sm.create_training_job(**self.command_payload("after-upload", "echo fine"))
        self.assertEqual(self.wait_training("after-upload")["TrainingJobStatus"], "Completed")
        self.assertNotIn("no job starts until space is freed", self.server.read_log())

    def test_a_full_disk_neither_loses_what_was_acknowledged_nor_stops_a_restart(self):
        self.sm.create_training_job(**self.command_payload("before", "echo before"))
        self.assertEqual(self.wait_training("before")["TrainingJobStatus"], "Completed")
        ballast = self.ballast(0)
        self.assertLess(self.free_bytes(), 1 << 20)
        # A change that cannot be stored is refused (503), never acknowledged and then lost.
        # (raw_call: boto3 would retry, and its retry would find the job the first call left in memory.)
        acknowledged = True
        try:
            self.server.raw_call("sagemaker", "CreateTrainingJob", self.command_payload("during", "echo during"))
        except RuntimeError as e:
            acknowledged = False
            self.assertIn("503", str(e))
            self.assertIn("ServiceUnavailable", str(e))
        self.assert_answers()
        self.server.kill9()
        self.server = self.new_server()  # on the full disk
        self.sm = self.server.client("sagemaker")
        self.assert_answers()
        names = {j["TrainingJobName"] for j in self.sm.list_training_jobs()["TrainingJobSummaries"]}
        self.assertIn("before", names)
        if acknowledged:
            self.assertIn("during", names)
        os.unlink(ballast)
        self.sm.create_training_job(**self.command_payload("next", "echo next"))
        self.assertEqual(self.wait_training("next")["TrainingJobStatus"], "Completed")


if __name__ == "__main__":
    unittest.main()
