"""Test harness: starts a real trainyard server on port 0 and hands out boto3 clients.

Every test gets its own data directory and server process; the server is stopped (SIGTERM,
then SIGKILL) and every process it started is cleaned up when the test ends.
"""
import contextlib
import http.server
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import boto3
import botocore.config
import botocore.model
import botocore.session

SOURCE_DIR = os.environ.get("TRAINYARD_SOURCE_DIR",
                            os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BIN = os.environ.get("TRAINYARD_BIN", os.path.join(SOURCE_DIR, "build", "trainyard"))
QUICKSTART = os.path.join(SOURCE_DIR, "examples", "quickstart")
REGION = "us-east-1"


@contextlib.contextmanager
def speaking(*protocols):
    """Clients made inside speak the first of `protocols` that their service offers (botocore
    picks JSON 1.0 for CloudWatch otherwise): "smithy-rpc-v2-cbor", "query", ..."""
    saved = botocore.model.PRIORITY_ORDERED_SUPPORTED_PROTOCOLS
    botocore.model.PRIORITY_ORDERED_SUPPORTED_PROTOCOLS = protocols
    try:
        yield
    finally:
        botocore.model.PRIORITY_ORDERED_SUPPORTED_PROTOCOLS = saved


def with_sandbox_binds(config, dirs):
    """config (TOML text, may be None) with executor.sandbox_binds = dirs."""
    import re
    line = "sandbox_binds = [" + ", ".join(json.dumps(d) for d in dirs) + "]"
    config = config or ""
    if re.search(r"^\[executor\][ \t]*$", config, re.M):
        return re.sub(r"^\[executor\][ \t]*$", "[executor]\n" + line, config, count=1, flags=re.M)
    return config + "\n[executor]\n" + line + "\n"


_POSTGRES = None
_POSTGRES_URLS = {}


def postgres_url_for(data_dir):
    """A database of the run's private PostgreSQL for this data directory (made on first use)."""
    global _POSTGRES
    import atexit
    import postgres
    if _POSTGRES is None:
        _POSTGRES = postgres.PrivatePostgres().start()
        atexit.register(_POSTGRES.stop)
    if data_dir not in _POSTGRES_URLS:
        _POSTGRES_URLS[data_dir] = _POSTGRES.new_database()
    return _POSTGRES_URLS[data_dir]


class Server:
    def __init__(self, data_dir, env=None, config=None, args=None, shared_dirs=None, bin=None, ca_bundle=None, name="",
                 listen="127.0.0.1:0"):
        """shared_dirs: host directories bound into every sandboxed job at the same path
        (executor.sandbox_binds), where a test and its jobs exchange files. bin: the trainyard
        binary (default BIN); the server starts the trainyard-supervisor beside it. ca_bundle: what
        clients trust when the server speaks https (default: its self-signed certificate in
        <data_dir>/tls, as with server.tls = "on" and no certificate configured). name: several
        servers sharing one data directory (tests/integration/ha.py) keep their logs and configs
        apart by it."""
        self.name = name
        self.listen = listen
        self.bin = bin or BIN
        self.ca_bundle = ca_bundle or os.path.join(data_dir, "tls", "certificate.pem")
        self.data_dir = data_dir
        self.args = list(args or [])
        if shared_dirs:
            config = with_sandbox_binds(config, shared_dirs)
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.config = config
        self.proc = None
        self.url = None

    def start(self, timeout=20):
        args = [self.bin, "serve", "--listen", self.listen, "--data-dir", self.data_dir] + self.args
        if os.environ.get("TRAINYARD_TEST_STORE") == "postgres" and "[store]" not in (self.config or ""):
            # The whole suite on PostgreSQL (make test-postgres): one private cluster for the run,
            # one database per data directory, so a restarted server finds its state again.
            self.config = (self.config or "") + f'\n[store]\nurl = "{postgres_url_for(self.data_dir)}"\n'
        if self.config:
            path = os.path.join(self.data_dir, f"test-config{self.name}.toml")
            with open(path, "w") as f:
                f.write(self.config)
            args += ["--config", path]
        self.log = open(os.path.join(self.data_dir, f"server{self.name}.log"), "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, env=self.env)
        deadline = time.time() + timeout
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            self.proc.kill()  # never leave a half-started server behind
            self.proc.wait()
            raise RuntimeError(f"server did not start: {line!r}; log: {self.read_log()}")
        self.url = line.split()[-1]
        self.tls = self.url.startswith("https://")
        assert time.time() < deadline
        return self

    def read_log(self):
        try:
            with open(os.path.join(self.data_dir, f"server{self.name}.log"), "rb") as f:
                return f.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.proc.stdout.close()
            self.log.close()

    def kill9(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.log.close()

    def store_query(self, sql):
        """One value a SELECT reads from this server's state, in whichever store holds it."""
        if self.data_dir in _POSTGRES_URLS:
            return _POSTGRES.psql(sql, _POSTGRES_URLS[self.data_dir].split("dbname=")[1])
        import sqlite3
        db = sqlite3.connect(f"file:{self.data_dir}/trainyard.db?mode=ro", uri=True)
        try:
            return str(db.execute(sql).fetchone()[0])
        finally:
            db.close()

    def credentials(self):
        key = secret = None
        with open(os.path.join(self.data_dir, "credentials")) as f:
            for line in f:
                if line.startswith("aws_access_key_id"):
                    key = line.split("=", 1)[1].strip()
                if line.startswith("aws_secret_access_key"):
                    secret = line.split("=", 1)[1].strip()
        return key, secret

    def raw_call(self, service, operation, body, path=None):
        """A signed call whose JSON answer is returned whole, trainyard's extension members included
        (boto3 drops members its model does not know). `path` posts to one of trainyard's own
        endpoints (/trainyard/v1/...) instead of an AWS operation."""
        import http.client
        import urllib.parse
        import botocore.auth
        import botocore.awsrequest
        import botocore.credentials
        key, secret = self.credentials()
        if path:
            headers = {"Content-Type": "application/x-amz-json-1.1"}
        elif service == "batch":
            path, headers = "/v1/" + operation.lower(), {"Content-Type": "application/json"}
        else:
            path, headers = "/", {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "SageMaker." + operation}
        req = botocore.awsrequest.AWSRequest(method="POST", url=self.url + path, data=json.dumps(body), headers=headers)
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), service, REGION).add_auth(req)
        u = urllib.parse.urlparse(self.url)
        if self.tls:
            import ssl
            conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=30,
                                               context=ssl.create_default_context(cafile=self.ca_bundle))
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("POST", path, body=req.body, headers=dict(req.headers.items()))
        resp = conn.getresponse()
        data = json.loads(resp.read() or b"{}")
        conn.close()
        if resp.status != 200:
            raise RuntimeError(f"{operation} failed: {resp.status} {data}")
        return data

    def admin(self, path, body):
        """POST to trainyard's own endpoint /trainyard/v1/<path>, signed as "sagemaker"."""
        return self.raw_call("sagemaker", path, body, path="/trainyard/v1/" + path)

    def client(self, service, **kw):
        """A boto3 client for this server. project_models=True: one that reads trainyard's own
        Batch model (models/), which has operations the installed botocore predates
        (TerminateServiceJobs)."""
        key, secret = self.credentials()
        cfg = botocore.config.Config(retries={"max_attempts": 1}, read_timeout=120,
                                     parameter_validation=kw.get("validate", True))
        session = boto3.Session(botocore_session=project_models_session()) if kw.get("project_models") else boto3
        return session.client(service, endpoint_url=self.url, region_name=kw.get("region", REGION),
                              aws_access_key_id=kw.get("key", key), aws_secret_access_key=kw.get("secret", secret),
                              config=cfg, verify=kw.get("verify", self.ca_bundle if self.tls else None))


_models_dir = None


def project_models_session():
    """A botocore session whose data path holds trainyard's Batch model (made once per process,
    removed at exit)."""
    global _models_dir
    if _models_dir is None:
        import atexit
        _models_dir = tempfile.mkdtemp(prefix="trainyard-models-")
        atexit.register(shutil.rmtree, _models_dir, True)
        os.makedirs(os.path.join(_models_dir, "batch", "2016-08-10"))
        shutil.copy(os.path.join(SOURCE_DIR, "models", "batch-2016-08-10.json"),
                    os.path.join(_models_dir, "batch", "2016-08-10", "service-2.json"))
    session = botocore.session.get_session()
    session.set_config_variable("data_path", _models_dir)
    return session


# boto3 and what it imports: what a job needs to call trainyard from the system's python3.
BOTO3_PACKAGES = ("boto3", "botocore", "jmespath", "dateutil", "six", "urllib3", "s3transfer")


def stage_packages(lib, names):
    """Copies this interpreter's packages `names` into the directory `lib` (made), readable by
    everyone: jobs run as an unprivileged user that may not read this interpreter's own."""
    import importlib
    os.makedirs(lib)
    for name in names:
        src = importlib.import_module(name).__file__
        if os.path.basename(src) == "__init__.py":
            shutil.copytree(os.path.dirname(src), os.path.join(lib, name), ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, lib)
    os.chmod(lib, 0o755)
    for root, dirs, files in os.walk(lib):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return lib


def kill_attempt_processes(data_dir):
    """Kills every supervisor (and with it every job process) started for data_dir."""
    attempts = os.path.join(data_dir, "attempts")
    if not os.path.isdir(attempts):
        return
    for name in os.listdir(attempts):
        try:
            with open(os.path.join(attempts, name, "status.json")) as f:
                status = json.load(f)
        except (OSError, ValueError):
            continue
        # The instances' process groups first: a supervisor killed outright cannot take them along.
        for pgid in status.get("instance_pgids") or []:
            try:
                if int(pgid) > 0:
                    os.killpg(int(pgid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        try:
            if status.get("supervisor_pid"):
                os.kill(int(status["supervisor_pid"]), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    # A supervisor that had not yet written its status.json: found by the attempt directory it
    # was started with (it would otherwise go on to mount its volumes after the sweep below).
    prefix = (os.path.realpath(attempts) + "/").encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if any(os.path.realpath(a.decode(errors="replace")).encode().startswith(prefix) for a in argv[1:3] if a):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
    release_attempt_leftovers(attempts)


def release_attempt_leftovers(attempts):
    """What supervisors killed outright leave behind when the server is root: their instances'
    storage volumes (mounts under the attempts directory) and cgroups (named after the attempts
    directory's device and inode, exec/local/cgroup.h)."""
    attempts = os.path.realpath(attempts)
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4]
            if point.startswith(attempts + "/"):
                points.append(point)
    for point in reversed(points):
        subprocess.call(["umount", "-l", point], stderr=subprocess.DEVNULL)
    st = os.stat(attempts)
    import glob
    for group in glob.glob(f"/sys/fs/cgroup/**/trainyard/{st.st_dev}-{st.st_ino}.*", recursive=True):
        deadline = time.time() + 5
        while os.path.isdir(group) and time.time() < deadline:
            try:
                with open(os.path.join(group, "cgroup.procs")) as f:
                    for pid in f.read().split():
                        os.kill(int(pid), signal.SIGKILL)
                os.rmdir(group)
            except OSError:
                time.sleep(0.01)


class ServerTest(unittest.TestCase):
    """Base class: self.server is running; self.batch and self.sm are boto3 clients."""

    server_env = None
    server_config = None
    server_args = None  # extra `trainyard serve` arguments
    data_dir_parent = None  # where the data directory is made; None: the temp dir

    def setUp(self):
        self.data_dir = tempfile.mkdtemp(prefix="trainyard-test-", dir=self.data_dir_parent)
        # Where the test and its jobs exchange files directly (gates, logs of runs): outside the
        # data directory, which a sandboxed job cannot see, and bound into every sandbox.
        self.work_dir = tempfile.mkdtemp(prefix="trainyard-work-")
        # Jobs run as an unprivileged user (executor.job_user) even when the server is root.
        os.chmod(self.work_dir, 0o1777)
        self.server = self.new_server()
        self.batch = self.server.client("batch")
        self.sm = self.server.client("sagemaker")

    def tearDown(self):
        for c in (getattr(self, "batch", None), getattr(self, "sm", None)):
            try:
                c.close()
            except Exception:
                pass
        self.server.stop()
        kill_attempt_processes(self.data_dir)
        if os.environ.get("TRAINYARD_KEEP_TEST_DATA"):
            print("kept", self.data_dir, self.work_dir)
        else:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def new_server(self, **kw):
        """A started server on self.data_dir with the class's settings (kw overrides them)."""
        settings = dict(env=self.server_env, config=self.server_config, args=self.server_args,
                        shared_dirs=[self.work_dir])
        settings.update(kw)
        return Server(self.data_dir, **settings).start()

    # ---- helpers ----
    def advance(self, seconds):
        """Moves the server's clock on (the server must run with --clock=offset)."""
        return self.server.admin("admin/advance-clock", {"seconds": seconds})

    def wait_secondary(self, name, status, timeout=30):
        deadline = time.time() + timeout
        while True:
            tj = self.sm.describe_training_job(TrainingJobName=name)
            if tj["SecondaryStatus"] == status:
                return tj
            if time.time() > deadline:
                self.fail(f"{name} is {tj['TrainingJobStatus']}/{tj['SecondaryStatus']}, not {status}")
            time.sleep(0.05)

    def bucket_path(self, bucket, key=""):
        return os.path.join(self.data_dir, "buckets", bucket, key)

    def stage_quickstart(self, bucket="trainyard-test"):
        os.makedirs(self.bucket_path(bucket, "code"), exist_ok=True)
        os.makedirs(self.bucket_path(bucket, "data/train"), exist_ok=True)
        subprocess.check_call(["tar", "-czf", self.bucket_path(bucket, "code/sourcedir.tar.gz"), "-C",
                               os.path.join(QUICKSTART, "code"), "."])
        subprocess.check_call(["python3", os.path.join(QUICKSTART, "make_data.py"),
                               self.bucket_path(bucket, "data/train/train.csv")])

    def create_queue(self, name="q", capacity=1, env_name=None, priority=1):
        env_name = env_name or name + "-env"
        self.batch.create_service_environment(
            serviceEnvironmentName=env_name, serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": capacity, "capacityUnit": "NUM_INSTANCES"}])
        self.batch.create_job_queue(jobQueueName=name, jobQueueType="SAGEMAKER_TRAINING", priority=priority,
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": env_name}])
        return name

    def create_fair_queue(self, name, shares, capacity=1):
        """A fair-share queue on `capacity` instances; shares: (shareIdentifier, weightFactor)."""
        arn = self.batch.create_scheduling_policy(
            name=name + "-policy",
            fairsharePolicy={"shareDecaySeconds": 600,
                             "shareDistribution": [{"shareIdentifier": s, "weightFactor": w} for s, w in shares]})["arn"]
        self.batch.create_service_environment(
            serviceEnvironmentName=name + "-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": capacity, "capacityUnit": "NUM_INSTANCES"}])
        self.batch.create_job_queue(jobQueueName=name, jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    schedulingPolicyArn=arn,
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": name + "-env"}])
        return name

    def create_quota_queue(self, name, capacity, shares, tags=None):
        """A quota-share queue on `capacity` ml.m5.large; shares: (name, limit, strategy) or
        (name, limit, strategy, in-share preemption enabled)."""
        arn = self.batch.create_scheduling_policy(
            name=name + "-policy", quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"})["arn"]
        self.batch.create_service_environment(
            serviceEnvironmentName=name + "-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": capacity, "capacityUnit": "ml.m5.large"}])
        self.batch.create_job_queue(jobQueueName=name, jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    schedulingPolicyArn=arn, tags=tags or {"owner": "tests"},
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": name + "-env"}])
        for share, limit, strategy, *in_share in shares:
            self.batch.create_quota_share(
                jobQueue=name, quotaShareName=share,
                capacityLimits=[{"maxCapacity": limit, "capacityUnit": "ml.m5.large"}],
                resourceSharingConfiguration={"strategy": strategy},
                preemptionConfiguration={"inSharePreemption": "ENABLED" if in_share and in_share[0] else "DISABLED"})
        return name

    def script_payload(self, name, bucket="trainyard-test", epochs=3, **extra):
        payload = {
            "TrainingJobName": name,
            "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
            "AlgorithmSpecification": {
                "TrainingImage": "local/python3", "TrainingInputMode": "File",
                "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}]},
            "HyperParameters": {"sagemaker_program": "train.py",
                                "sagemaker_submit_directory": f"s3://{bucket}/code/sourcedir.tar.gz",
                                "epochs": str(epochs)},
            "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/data/train/"}}}],
            "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/output"},
            "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
            "StoppingCondition": {"MaxRuntimeInSeconds": 300},
        }
        payload.update(extra)
        return payload

    def code_job(self, name, files, **extra):
        """A script-mode job whose source directory holds `files` (relative path -> text), packed
        into s3://trainyard-test/code/<name>.tar.gz; the first file is the program."""
        src = tempfile.mkdtemp(prefix="trainyard-code-")
        try:
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
                with open(os.path.join(src, rel), "w") as f:
                    f.write(text)
            os.makedirs(self.bucket_path("trainyard-test", "code"), exist_ok=True)
            subprocess.check_call(["tar", "-czf", self.bucket_path("trainyard-test", f"code/{name}.tar.gz"),
                                   "-C", src, "."])
        finally:
            shutil.rmtree(src)
        p = self.script_payload(name, **extra)
        del p["InputDataConfig"]
        p["HyperParameters"] = {"sagemaker_program": next(iter(files)),
                                "sagemaker_submit_directory": f"s3://trainyard-test/code/{name}.tar.gz"}
        return p

    def supervisor_log(self, attempt):
        """The supervisor's log of an attempt (attempts/<name>/supervisor.log), for failure messages."""
        try:
            with open(os.path.join(self.data_dir, "attempts", attempt, "supervisor.log"), errors="replace") as f:
                return f.read()[-4000:]
        except OSError as e:
            return f"(unreadable: {e})"

    def command_payload(self, name, command, bucket="trainyard-test", **extra):
        payload = {
            "TrainingJobName": name,
            "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
            "AlgorithmSpecification": {"TrainingImage": "local/shell", "TrainingInputMode": "File",
                                       "ContainerEntrypoint": ["/bin/sh", "-c"],
                                       "ContainerArguments": [command]},
            "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/output"},
            "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
            "StoppingCondition": {"MaxRuntimeInSeconds": 300},
        }
        payload.update(extra)
        return payload

    def submit(self, queue, payload, name=None, **kw):
        return self.batch.submit_service_job(jobName=name or payload["TrainingJobName"], jobQueue=queue,
                                             serviceJobType="SAGEMAKER_TRAINING",
                                             serviceRequestPayload=json.dumps(payload), **kw)["jobId"]

    def describe_raw(self, job_id):
        return self.server.raw_call("batch", "DescribeServiceJob", {"jobId": job_id})

    def wait_jobs(self, job_ids, timeout=120, statuses=("SUCCEEDED", "FAILED")):
        deadline = time.time() + timeout
        while True:
            jobs = [self.describe_raw(j) for j in job_ids]
            if all(j["status"] in statuses for j in jobs):
                return jobs
            if time.time() > deadline:
                self.fail(f"timed out waiting for {statuses}: {[(j['jobName'], j['status']) for j in jobs]}\n"
                          f"{self.server.read_log()}")
            time.sleep(0.1)

    def describe_job(self, job_id):
        """A Batch container job (or array parent or child) as DescribeJobs answers it."""
        [j] = self.batch.describe_jobs(jobs=[job_id])["jobs"]
        return j

    def wait_job(self, job_id, statuses=("SUCCEEDED", "FAILED"), timeout=90):
        """Polls DescribeJobs until the container job is in one of `statuses`."""
        deadline = time.time() + timeout
        while True:
            j = self.describe_job(job_id)
            if j["status"] in statuses:
                return j
            if time.time() > deadline:
                self.fail(f"timed out waiting for {statuses}: {j['status']} {j.get('arrayProperties', '')}\n"
                          f"{self.server.read_log()}")
            time.sleep(0.05)

    def wait_training(self, name, statuses=("Completed", "Failed", "Stopped"), timeout=120):
        deadline = time.time() + timeout
        while True:
            tj = self.sm.describe_training_job(TrainingJobName=name)
            if tj["TrainingJobStatus"] in statuses:
                return tj
            if time.time() > deadline:
                self.fail(f"timed out waiting for {name}: {tj['TrainingJobStatus']}/{tj['SecondaryStatus']}")
            time.sleep(0.1)


def object_store_toml(endpoint, buckets, **settings):
    """An [object_store] section routing `buckets` to `endpoint` with moto's test credentials."""
    lines = ["[object_store]", f'endpoint = "{endpoint}"', 'access_key_id = "testing"',
             'secret_access_key = "testing"', "buckets = [" + ", ".join(f'"{b}"' for b in buckets) + "]"]
    lines += [f"{k} = {v}" for k, v in settings.items()]
    return "\n".join(lines) + "\n"


class MotoServer:
    """A moto_server (an S3 look-alike) on a free port of 127.0.0.1, for object-store tests."""

    def __init__(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self, timeout=30):
        import urllib.request
        self.proc = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + timeout
        while True:
            try:
                urllib.request.urlopen(self.url + "/", timeout=1).read()
                return self
            except Exception:
                if self.proc.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise RuntimeError("moto_server did not start")
                time.sleep(0.1)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def object_store_toml(self, buckets, **settings):
        return object_store_toml(self.url, buckets, **settings)

    def client(self):
        return boto3.client("s3", endpoint_url=self.url, region_name=REGION, aws_access_key_id="testing",
                            aws_secret_access_key="testing",
                            config=botocore.config.Config(retries={"max_attempts": 1}))


class MotoPerClass:
    """Mixed into a test class (before its ServerTest): one moto_server for all its tests, as
    `cls.moto`, started before the first and stopped after the last. A class that sets
    `start_moto = False` (a run against another endpoint) gets `cls.moto = None`."""
    moto = None
    start_moto = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if cls.start_moto:
            cls.moto = MotoServer().start()
            cls.addClassCleanup(cls.moto.stop)


class Receiver:
    """A webhook receiver on a fixed port: records every POST; can answer 500 on purpose, and be
    stopped and started again on the same port."""

    def __init__(self, port=0):
        self.posts = []  # (headers, body as JSON, raw body), in arrival order
        self.fail_next = 0
        self.lock = threading.Lock()
        self.port = port
        self.httpd = None

    def start(self):
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    if receiver.fail_next > 0:
                        receiver.fail_next -= 1
                        self.send_response(500)
                        self.end_headers()
                        return
                    try:
                        parsed = json.loads(body)
                    except ValueError:  # a text body (an InputTransformer's text template)
                        parsed = None
                    receiver.posts.append((dict(self.headers), parsed, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/hook"

    def events(self):
        """Events received, duplicates (at-least-once redeliveries) removed, in arrival order."""
        with self.lock:
            seen, out = set(), []
            for _, e, _ in self.posts:
                if e["id"] not in seen:
                    seen.add(e["id"])
                    out.append(e)
            return out

    def wait(self, predicate, timeout=60, what="events", show=None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate(self.events()):
                return self.events()
            time.sleep(0.1)
        got = [show(e) for e in self.events()] if show else self.events()
        raise AssertionError(f"timed out waiting for {what}; got {got}")
