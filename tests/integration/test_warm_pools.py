"""Managed warm pools through the sagemaker boto3 client against a real server
(docs/warm-pools.md)."""
import json
import os
import subprocess
import time
import unittest

from botocore.exceptions import ClientError

from harness import BIN, Server, ServerTest

ROLE = "arn:aws:iam::000000000000:role/SageMakerRole"
OTHER_ROLE = "arn:aws:iam::000000000000:role/OtherRole"

# Each job prints where it runs, whether its cache variable is set, and what the cache holds,
# then leaves a file in the cache for the next job on the pool.
PROBE = ('C=$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY; echo "cache=${C:-none}"; '
         '[ -n "$C" ] && { ls "$C" | sed "s/^/seen=/"; touch "$C/from-$TRAINING_JOB_NAME"; }; true')


class WarmPoolBase(ServerTest):
    """Helpers; the server runs with the offset clock so tests can move time on."""
    server_args = ["--clock=offset"]

    # ---- helpers ----
    def job(self, name, keep=600, command=PROBE, role=ROLE, **extra):
        p = self.command_payload(name, command, **extra)
        p["RoleArn"] = role
        p["ResourceConfig"]["KeepAlivePeriodInSeconds"] = keep
        return p

    def create(self, name, **kw):
        self.sm.create_training_job(**self.job(name, **kw))
        return self.wait_training(name)

    def pool(self, name):
        return self.sm.describe_training_job(TrainingJobName=name).get("WarmPoolStatus")

    def raw(self, name):
        return self.server.raw_call("sagemaker", "DescribeTrainingJob", {"TrainingJobName": name})

    def messages(self, name):
        return [t.get("StatusMessage", "") for t in self.raw(name)["SecondaryStatusTransitions"]]

    def log(self, name):
        path = os.path.join(self.data_dir, "attempts", name, "logs", "algo-1.log")
        with open(path) as f:
            return [line.split(" ", 1)[1].rstrip("\n") for line in f]

    def advance(self, seconds):
        return self.post("/trainyard/v1/admin/advance-clock", {"seconds": seconds})

    def post(self, path, body):
        import http.client
        import urllib.parse
        import botocore.auth
        import botocore.awsrequest
        import botocore.credentials
        key, secret = self.server.credentials()
        req = botocore.awsrequest.AWSRequest(method="POST", url=self.server.url + path, data=json.dumps(body),
                                             headers={"Content-Type": "application/x-amz-json-1.1"})
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), "sagemaker",
                                "us-east-1").add_auth(req)
        u = urllib.parse.urlparse(self.server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("POST", path, body=req.body, headers=dict(req.headers.items()))
        resp = conn.getresponse()
        data = json.loads(resp.read() or b"{}")
        conn.close()
        return resp.status, data

    def wait_pool(self, name, status, timeout=30):
        deadline = time.time() + timeout
        while True:
            w = self.pool(name)
            if w and w["Status"] == status:
                return w
            if time.time() > deadline:
                self.fail(f"warm pool of {name} is {w}, not {status}: {self.raw(name).get('WarmPoolEndReason')}")
            time.sleep(0.05)

    def pool_dirs(self, expect=None, timeout=10):
        """The pool workspaces on disk; with `expect`, waits (briefly) until there are that many."""
        root = os.path.join(self.data_dir, "pools")
        deadline = time.time() + timeout
        while True:
            dirs = sorted(os.listdir(root)) if os.path.isdir(root) else []
            if expect is None or len(dirs) == expect or time.time() > deadline:
                return dirs
            time.sleep(0.02)


class WarmPoolTest(WarmPoolBase):
    def test_keep_alive_is_validated_and_bad_input_changes_nothing(self):
        for bad in (-1, 21601):
            p = self.job("bad-keep", keep=bad)
            with self.assertRaises(RuntimeError) as e:
                self.server.raw_call("sagemaker", "CreateTrainingJob", p)
            self.assertIn("ValidationException", str(e.exception))
            self.assertIn("KeepAlivePeriodInSeconds", str(e.exception))
        with self.assertRaises(ClientError):
            self.sm.create_training_job(**self.job("bad-keep", keep=21601))
        with self.assertRaises(ClientError) as e:
            self.sm.describe_training_job(TrainingJobName="bad-keep")
        self.assertEqual(e.exception.response["Error"]["Code"], "ResourceNotFound")

    def test_matching_job_reuses_pool_and_cache_lives_as_long_as_the_pool(self):
        a = self.create("wp-a")
        self.assertEqual(a["TrainingJobStatus"], "Completed")
        self.assertEqual(self.wait_pool("wp-a", "Available")["Status"], "Available")
        self.assertIn("cold start", " ".join(self.messages("wp-a")))
        self.assertEqual(len(self.pool_dirs(expect=1)), 1)
        # Different hyperparameters and command: still a match (§5.3).
        b = self.create("wp-b", command=PROBE + "; echo second")
        self.assertEqual(b["TrainingJobStatus"], "Completed")
        wa = self.pool("wp-a")
        self.assertEqual(wa["Status"], "Reused")
        self.assertEqual(wa["ReusedByJob"], "wp-b")
        self.assertEqual(self.pool("wp-b")["Status"], "Available")
        self.assertIn("Reusing the warm pool of training job wp-a", " ".join(self.messages("wp-b")))
        self.assertEqual(self.raw("wp-b")["WarmPoolReusedFromJob"], "wp-a")
        log_b = self.log("wp-b")
        self.assertIn("seen=from-wp-a", log_b)  # the cache persisted across the jobs
        # Listing by warm-pool status.
        avail = self.sm.list_training_jobs(WarmPoolStatusEquals="Available")["TrainingJobSummaries"]
        self.assertEqual([s["TrainingJobName"] for s in avail], ["wp-b"])
        self.assertEqual(avail[0]["WarmPoolStatus"]["Status"], "Available")
        reused = self.sm.list_training_jobs(WarmPoolStatusEquals="Reused")["TrainingJobSummaries"]
        self.assertEqual([s["TrainingJobName"] for s in reused], ["wp-a"])
        # Release: the cache goes with the pool; the next job starts cold with an empty cache.
        self.sm.update_training_job(TrainingJobName="wp-b", ResourceConfig={"KeepAlivePeriodInSeconds": 0})
        self.assertEqual(self.pool("wp-b")["Status"], "Terminated")
        self.assertEqual(self.pool_dirs(expect=0), [])
        c = self.create("wp-c")
        self.assertNotIn("seen=from-wp-a", self.log("wp-c"))
        self.assertIn("cold start", " ".join(self.messages("wp-c")))

    def test_no_pool_without_keep_alive_and_no_cache_variable(self):
        self.create("plain", keep=0)
        self.assertIsNone(self.pool("plain"))
        self.assertIn("cache=none", self.log("plain"))
        self.assertEqual(self.pool_dirs(expect=0), [])

    def test_no_reuse_when_role_differs(self):
        self.create("r-a")
        self.wait_pool("r-a", "Available")
        self.create("r-b", role=OTHER_ROLE)
        self.assertEqual(self.pool("r-a")["Status"], "Available")
        self.assertNotIn("seen=from-r-a", self.log("r-b"))
        self.assertEqual(len(self.pool_dirs(expect=2)), 2)

    def test_second_pool_when_the_first_is_in_use(self):
        self.create("s-a")
        gate = os.path.join(self.work_dir, "gate")
        wait_gate = f"while [ ! -e {gate} ]; do sleep 0.05; done; " + PROBE
        self.sm.create_training_job(**self.job("s-b", command=wait_gate))
        self.wait_pool("s-b", "InUse")
        self.assertEqual(self.pool("s-a")["Status"], "Reused")
        self.sm.create_training_job(**self.job("s-c"))
        self.wait_training("s-c")
        self.assertIn("cold start", " ".join(self.messages("s-c")))
        open(gate, "w").close()
        self.wait_training("s-b")
        self.assertEqual(self.pool("s-b")["Status"], "Available")
        self.assertEqual(self.pool("s-c")["Status"], "Available")
        self.assertEqual(len(self.pool_dirs(expect=2)), 2)

    def test_expiry_and_keep_alive_update(self):
        self.create("e-a", keep=60)
        self.wait_pool("e-a", "Available")
        # Lengthen to 600 s: 120 s later it is still Available, and it bills the retained time.
        self.sm.update_training_job(TrainingJobName="e-a", ResourceConfig={"KeepAlivePeriodInSeconds": 600})
        self.assertEqual(self.advance(120)[0], 200)
        w = self.pool("e-a")
        self.assertEqual(w["Status"], "Available")
        self.assertGreaterEqual(w["ResourceRetainedBillableTimeInSeconds"], 120)
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="e-a")["ResourceConfig"]
                         ["KeepAlivePeriodInSeconds"], 600)
        self.advance(500)
        w = self.wait_pool("e-a", "Terminated")
        self.assertGreaterEqual(w["ResourceRetainedBillableTimeInSeconds"], 600)
        self.assertIn("keep-alive period ended", self.raw("e-a")["WarmPoolEndReason"])
        out = subprocess.run([BIN, "describe", "e-a", "--endpoint-url", self.server.url, "--data-dir", self.data_dir],
                             capture_output=True, text=True,
                             env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")})
        self.assertIn("warm pool:    Terminated", out.stdout, out.stderr)
        self.assertEqual(self.pool_dirs(expect=0), [])
        # Updating a terminated pool, an unknown job, or out of range: AWS's errors, nothing changes.
        with self.assertRaises(ClientError) as e:
            self.sm.update_training_job(TrainingJobName="e-a", ResourceConfig={"KeepAlivePeriodInSeconds": 60})
        self.assertEqual(e.exception.response["Error"]["Code"], "ValidationException")
        self.assertIn("KeepAlivePeriodInSeconds", e.exception.response["Error"]["Message"])
        with self.assertRaises(ClientError) as e:
            self.sm.update_training_job(TrainingJobName="nope", ResourceConfig={"KeepAlivePeriodInSeconds": 60})
        self.assertEqual(e.exception.response["Error"]["Code"], "ResourceNotFound")
        self.create("e-b", keep=60)
        with self.assertRaises(ClientError) as e:
            self.sm.update_training_job(TrainingJobName="e-b", ResourceConfig={"KeepAlivePeriodInSeconds": 21601})
        self.assertEqual(e.exception.response["Error"]["Code"], "ValidationException")
        self.assertEqual(self.pool("e-b")["Status"], "Available")

    def test_chain_is_limited_to_28_days(self):
        day = 86400
        self.create("c-a", keep=21600)
        self.wait_pool("c-a", "Available")
        gate = os.path.join(self.work_dir, "gate")
        self.sm.create_training_job(**self.job("c-b", keep=21600,
                                               command=f"while [ ! -e {gate} ]; do sleep 0.05; done"))
        self.wait_pool("c-b", "InUse")
        # 27 days and 23 hours into the chain, c-b finishes: its 6 h keep-alive is cut to ~1 h.
        self.advance(27 * day + 23 * 3600)
        open(gate, "w").close()
        self.wait_training("c-b")
        self.assertEqual(self.wait_pool("c-b", "Available")["Status"], "Available", self.raw("c-b"))
        # Through the CLI this time.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        out = subprocess.run([BIN, "admin", "advance-clock", str(3600 + 60), "--endpoint-url", self.server.url,
                              "--data-dir", self.data_dir], capture_output=True, text=True, env=env)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("server clock now", out.stdout)
        self.wait_pool("c-b", "Terminated")
        self.assertIn("28 days", self.raw("c-b")["WarmPoolEndReason"])
        self.create("c-c", keep=21600)
        self.assertIn("cold start", " ".join(self.messages("c-c")))

    def test_clock_cannot_move_without_offset_mode(self):
        self.server.stop()
        self.server = Server(self.data_dir).start()
        status, body = self.advance(60)
        self.assertEqual(status, 400)
        self.assertEqual(body["__type"], "ValidationException")
        self.assertIn("--clock=offset", body["message"])
        out = subprocess.run([BIN, "admin", "advance-clock", "60", "--endpoint-url", self.server.url,
                              "--data-dir", self.data_dir], capture_output=True, text=True,
                             env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")})
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("--clock=offset", out.stderr)
        out = subprocess.run([BIN, "admin", "advance-clock", "--help"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0)
        self.assertIn("SECONDS", out.stdout)

    def test_pool_survives_a_restart(self):
        self.create("p-a")
        self.wait_pool("p-a", "Available")
        self.server.stop()
        self.server = Server(self.data_dir, args=self.server_args).start()
        self.sm.close()
        self.sm = self.server.client("sagemaker")
        self.assertEqual(self.pool("p-a")["Status"], "Available")
        self.create("p-b")
        self.assertEqual(self.pool("p-a")["Status"], "Reused")

    def test_algorithm_error_keeps_the_pool(self):
        f = self.create("f-alg", command="exit 3")
        self.assertEqual(f["TrainingJobStatus"], "Failed")
        self.assertEqual(self.wait_pool("f-alg", "Available")["Status"], "Available")

    def test_a_stop_after_the_start_keeps_the_pool(self):
        self.sm.create_training_job(**self.job("stop-a", command="echo up; exec sleep 60"))
        deadline = time.time() + 30
        while "up" not in (self.log("stop-a") if os.path.exists(
                os.path.join(self.data_dir, "attempts", "stop-a", "logs", "algo-1.log")) else []):
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        self.sm.stop_training_job(TrainingJobName="stop-a")
        self.assertEqual(self.wait_training("stop-a")["TrainingJobStatus"], "Stopped")
        self.assertEqual(self.wait_pool("stop-a", "Available")["Status"], "Available")


def make_wheel(directory, name="tinydep", version="1.0"):
    """A minimal pure-Python wheel, so that requirements install offline (--no-index)."""
    import base64
    import hashlib
    import zipfile
    files = {f"{name}.py": "VALUE = 42\n",
             f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{name}-{version}.dist-info/RECORD,,")
    files[f"{name}-{version}.dist-info/RECORD"] = "\n".join(record) + "\n"
    path = os.path.join(directory, f"{name}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as z:
        for p, text in files.items():
            z.writestr(p, text)
    return path


class WarmPoolRequirementsTest(WarmPoolBase):
    """Script mode: the submit directory's requirements are installed once per pool, offline."""
    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.wheels = tempfile.mkdtemp(prefix="trainyard-wheels-")
        os.chmod(cls.wheels, 0o755)  # pip runs as the job, an unprivileged user
        make_wheel(cls.wheels)
        cls.server_config = f"""
[executor]
pip_no_index = true
pip_find_links = "{cls.wheels}"
"""

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.wheels, ignore_errors=True)

    def script_job(self, name):
        code = self.bucket_path("trainyard-test", "code")
        if not os.path.exists(os.path.join(code, "sourcedir.tar.gz")):
            self.write_archive(code)
        p = self.script_payload(name)
        del p["InputDataConfig"]
        p["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 600
        return p

    def write_archive(self, code, revision=1):
        os.makedirs(code, exist_ok=True)
        src = os.path.join(self.data_dir, "src")
        os.makedirs(src, exist_ok=True)
        with open(os.path.join(src, "train.py"), "w") as f:
            f.write(f"# revision {revision}\n"
                    "import tinydep\nprint('first line of user code', flush=True)\nprint('value', tinydep.VALUE)\n")
        with open(os.path.join(src, "requirements.txt"), "w") as f:
            f.write("tinydep\n")
        subprocess.check_call(["tar", "-czf", os.path.join(code, "sourcedir.tar.gz"), "-C", src, "."])

    def first_user_line_ms(self, name):
        path = os.path.join(self.data_dir, "attempts", name, "logs", "algo-1.log")
        with open(path) as f:
            return next(int(line.split(" ", 1)[0]) for line in f if "first line of user code" in line)

    def test_requirements_install_once_and_the_warm_start_is_fast(self):
        cold_start = time.time()
        self.sm.create_training_job(**self.script_job("pip-a"))
        self.assertEqual(self.wait_training("pip-a")["TrainingJobStatus"], "Completed")
        self.assertIn("value 42", self.log("pip-a"))
        (pool,) = self.pool_dirs(expect=1)
        installed = os.path.join(self.data_dir, "pools", pool, "algo-1", "pylib", "tinydep.py")
        mtime = os.stat(installed).st_mtime_ns
        # The warm job: same archive, so nothing is unpacked or installed again.
        start = time.time()
        self.sm.create_training_job(**self.script_job("pip-b"))
        self.assertEqual(self.wait_training("pip-b")["TrainingJobStatus"], "Completed")
        self.assertEqual(self.pool("pip-a")["Status"], "Reused")
        self.assertIn("value 42", self.log("pip-b"))
        self.assertEqual(os.stat(installed).st_mtime_ns, mtime)
        # Overhead of the warm path: CreateTrainingJob -> the first line the user code printed.
        overhead_ms = self.first_user_line_ms("pip-b") - start * 1000
        cold_ms = self.first_user_line_ms("pip-a") - cold_start * 1000
        print(f"\nCreateTrainingJob -> first line of user code: cold {cold_ms:.0f} ms (pip install), "
              f"warm {overhead_ms:.0f} ms (both include the python3 interpreter start)")
        self.assertLess(overhead_ms, 2000)
        # A new archive is unpacked and its requirements installed again, on the same pool. Its
        # content differs: an archive rewritten within the same second (tar keeps whole seconds)
        # would be the same bytes, and so the same object.
        self.write_archive(self.bucket_path("trainyard-test", "code"), revision=2)
        self.sm.create_training_job(**self.script_job("pip-c"))
        self.assertEqual(self.wait_training("pip-c")["TrainingJobStatus"], "Completed")
        self.assertEqual(self.pool("pip-b")["Status"], "Reused")
        self.assertNotEqual(os.stat(installed).st_mtime_ns, mtime)


class WarmPoolNoSandboxTest(WarmPoolBase):
    """Without bubblewrap the /opt/ml tree links to the workspace instead of binding it."""
    server_config = '[executor]\nsandbox = "none"\n'

    def test_reuse_and_cache_without_a_sandbox(self):
        self.create("ns-a")
        self.create("ns-b")
        self.assertEqual(self.pool("ns-a")["Status"], "Reused")
        self.assertIn("seen=from-ns-a", self.log("ns-b"))
        self.sm.update_training_job(TrainingJobName="ns-b", ResourceConfig={"KeepAlivePeriodInSeconds": 0})
        self.assertEqual(self.pool_dirs(expect=0), [])


class WarmPoolQuotaTest(WarmPoolBase):
    server_config = """
[[instance_types]]
name = "ml.m5.large"
count = 4
warm_pool_quota = 1
"""

    def test_quota_limits_retained_pools(self):
        self.create("q-a")
        self.wait_pool("q-a", "Available")
        self.create("q-b", role=OTHER_ROLE)  # no match: would need a second pool
        w = self.pool("q-b")
        self.assertEqual(w["Status"], "Terminated")
        self.assertIn("warm pool quota", self.raw("q-b")["WarmPoolEndReason"])
        self.assertEqual(self.pool("q-a")["Status"], "Available")


class WarmPoolSetupTest(WarmPoolBase):
    """The per-instance-type setup command runs on a cold start only; warm jobs skip it."""
    server_config = """
[[instance_types]]
name = "ml.m5.large"
count = 4
setup_command = "mkdir -p venv/bin && echo x >> setups && sleep 0.3"

[[instance_types]]
name = "ml.m5.xlarge"
count = 2
setup_command = "echo cannot provision; exit 1"
"""

    def test_an_infrastructure_failure_keeps_no_pool(self):
        p = self.job("broken-setup")
        p["ResourceConfig"]["InstanceType"] = "ml.m5.xlarge"
        self.sm.create_training_job(**p)
        tj = self.wait_training("broken-setup")
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertTrue(tj["FailureReason"].startswith("InternalServerError"), tj["FailureReason"])
        self.assertEqual(self.pool("broken-setup")["Status"], "Terminated")
        self.assertIn("infrastructure error", self.raw("broken-setup")["WarmPoolEndReason"])
        self.assertEqual(self.pool_dirs(expect=0), [])

    def test_setup_runs_once_per_pool(self):
        self.create("u-a")
        self.create("u-b")
        self.assertEqual(self.pool("u-a")["Status"], "Reused")
        (pool,) = self.pool_dirs(expect=1)
        with open(os.path.join(self.data_dir, "pools", pool, "algo-1", "setups")) as f:
            self.assertEqual(f.read(), "x\n")
        b = self.raw("u-b")
        starts = {t["Status"]: t for t in b["SecondaryStatusTransitions"]}
        # Warm path: from creation to Training well under the setup command's 0.3 s.
        self.assertLess(starts["Training"]["StartTime"] - b["CreationTime"], 0.3)


class WarmCapacityTest(WarmPoolBase):
    """An Available pool holds its instances but yields them to work that needs them."""
    server_config = """
[[instance_types]]
name = "ml.m5.large"
count = 2
"""

    def test_a_job_that_needs_the_instances_releases_the_pool(self):
        self.create("h-a", keep=3600)
        self.wait_pool("h-a", "Available")
        # Needs both instances, matches nothing: the pool must not block it.
        p = self.job("h-big", keep=0)
        p["ResourceConfig"]["InstanceCount"] = 2
        self.sm.create_training_job(**p)
        self.assertEqual(self.wait_training("h-big")["TrainingJobStatus"], "Completed")
        self.assertEqual(self.pool("h-a")["Status"], "Terminated")
        self.assertIn("needed by training job h-big", self.raw("h-a")["WarmPoolEndReason"])

    def test_a_pool_that_a_waiting_job_matches_is_released_last(self):
        self.create("old-wanted", keep=3600)
        self.create("new-unwanted", keep=3600, role=OTHER_ROLE)
        # A queued job that matches the older pool waits (its service environment is disabled).
        q = self.create_queue("held", capacity=2)
        self.batch.update_service_environment(serviceEnvironment="held-env", state="DISABLED")
        jq = self.submit(q, self.job("queued-match", keep=600))
        self.wait_jobs([jq], statuses=("RUNNABLE",))
        # A job that needs one instance: the pool nobody waits for goes, though it is newer.
        self.create("needs-one", keep=0, role="arn:aws:iam::000000000000:role/Third")
        self.assertEqual(self.pool("new-unwanted")["Status"], "Terminated")
        self.assertEqual(self.pool("old-wanted")["Status"], "Available")

    def test_service_jobs_from_a_queue_reuse_a_pool(self):
        q = self.create_queue("wq", capacity=2)
        j1 = self.submit(q, self.job("svc-1"))
        self.wait_jobs([j1])
        self.wait_pool("svc-1", "Available")
        j2 = self.submit(q, self.job("svc-2"))
        (d2,) = self.wait_jobs([j2])
        self.assertEqual(d2["status"], "SUCCEEDED")
        self.assertEqual(self.pool("svc-1")["Status"], "Reused")
        self.assertEqual(self.pool("svc-1")["ReusedByJob"], "svc-2")
        self.assertIn("seen=from-svc-1", self.log("svc-2"))

    def quota_queue(self, strategy_a="LEND_AND_BORROW", strategy_b="LEND_AND_BORROW"):
        self.batch.create_service_environment(
            serviceEnvironmentName="qe", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 2, "capacityUnit": "ml.m5.large"}])
        pol = self.batch.create_scheduling_policy(name="qp", quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"})
        self.batch.create_job_queue(jobQueueName="qq", jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    schedulingPolicyArn=pol["arn"],
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "qe"}])
        for share in ("a", "b"):
            self.batch.create_quota_share(
                quotaShareName=share, jobQueue="qq",
                capacityLimits=[{"maxCapacity": 1, "capacityUnit": "ml.m5.large"}],
                resourceSharingConfiguration={"strategy": strategy_a if share == "a" else strategy_b},
                preemptionConfiguration={"inSharePreemption": "DISABLED"})

    def test_another_quota_share_reclaims_warm_capacity(self):
        self.quota_queue()
        # Share a borrows b's idle instance: a two-instance pool, one instance of it borrowed.
        p = self.job("qa-1", keep=3600)
        p["ResourceConfig"]["InstanceCount"] = 2
        ja = self.submit("qq", p, quotaShareName="a")
        self.wait_jobs([ja])
        self.wait_pool("qa-1", "Available")
        snap = self.server.raw_call("batch", "GetJobQueueSnapshot", {"jobQueue": "qq"})
        self.assertEqual([(w["trainingJobName"], w["instanceCount"], w["quotaShareName"])
                          for w in snap["trainyardWarmPools"]], [("qa-1", 2, "a")])
        # b wants its own instance back: the pool is released rather than blocking it.
        jb = self.submit("qq", self.job("qb-1", keep=0), quotaShareName="b")
        (db,) = self.wait_jobs([jb])
        self.assertEqual(db["status"], "SUCCEEDED")
        self.assertEqual(self.pool("qa-1")["Status"], "Terminated")
        # b may borrow too, so a's pool already counts as free, and b's job releases it as it starts.
        self.assertIn("qb-1", self.raw("qa-1")["WarmPoolEndReason"])

    def test_a_lending_share_reclaims_warm_capacity_by_preemption(self):
        self.quota_queue(strategy_b="LEND")
        p = self.job("qa-2", keep=3600)
        p["ResourceConfig"]["InstanceCount"] = 2
        ja = self.submit("qq", p, quotaShareName="a")
        self.wait_jobs([ja])
        self.wait_pool("qa-2", "Available")
        # b (which may not borrow) wants its own instance back: the quota pass preempts the pool.
        jb = self.submit("qq", self.job("qb-2", keep=0), quotaShareName="b")
        (db,) = self.wait_jobs([jb])
        self.assertEqual(db["status"], "SUCCEEDED")
        self.assertEqual(self.pool("qa-2")["Status"], "Terminated")
        self.assertIn("reclaims its capacity", self.raw("qa-2")["WarmPoolEndReason"])

    def test_a_pool_never_blocks_its_own_share(self):
        self.quota_queue()
        ja = self.submit("qq", self.job("own-1", keep=3600), quotaShareName="a")
        self.wait_jobs([ja])
        self.wait_pool("own-1", "Available")
        # a's next job does not match (two instances) and needs the pool's instance too.
        p = self.job("own-2", keep=0)
        p["ResourceConfig"]["InstanceCount"] = 2
        j2 = self.submit("qq", p, quotaShareName="a")
        (d2,) = self.wait_jobs([j2])
        self.assertEqual(d2["status"], "SUCCEEDED")
        self.assertEqual(self.pool("own-1")["Status"], "Terminated")
        self.assertIn("needed by training job own-2", self.raw("own-1")["WarmPoolEndReason"])

    def test_a_borrower_releases_a_pool_of_a_lending_share(self):
        self.quota_queue()
        ja = self.submit("qq", self.job("lend-1", keep=600), quotaShareName="a")
        self.wait_jobs([ja])
        self.wait_pool("lend-1", "Available")
        # b wants to borrow a's instance, which a's idle pool holds: a lends what it does not use,
        # and a warm pool is not use, so the pool is released and b's job runs at once.
        p = self.job("borrow-1", keep=0)
        p["ResourceConfig"]["InstanceCount"] = 2
        jb = self.submit("qq", p, quotaShareName="b")
        (db,) = self.wait_jobs([jb])
        self.assertEqual(db["status"], "SUCCEEDED")
        self.assertEqual(self.pool("lend-1")["Status"], "Terminated")
        self.assertIn("needed by training job", self.raw("lend-1")["WarmPoolEndReason"])

    def test_a_pool_of_a_reserve_share_is_not_lent(self):
        self.quota_queue(strategy_a="RESERVE")
        ja = self.submit("qq", self.job("keep-1", keep=600), quotaShareName="a")
        self.wait_jobs([ja])
        self.wait_pool("keep-1", "Available")
        # a lends nothing: b may not borrow its instance, pool or not; b waits, the pool stays.
        p = self.job("borrow-2", keep=0)
        p["ResourceConfig"]["InstanceCount"] = 2
        jb = self.submit("qq", p, quotaShareName="b")
        deadline = time.time() + 30
        while not self.describe_raw(jb).get("trainyardWaitReason"):
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        self.assertEqual(self.describe_raw(jb)["status"], "RUNNABLE")
        self.assertEqual(self.pool("keep-1")["Status"], "Available")


if __name__ == "__main__":
    unittest.main()
