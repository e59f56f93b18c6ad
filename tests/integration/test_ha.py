"""Several servers over one PostgreSQL, one leading, behind HAProxy (docs/operations.md, "High
availability"): followers answer the API; kill -9 of the leader under a load of submits loses no
acknowledged job and runs no attempt twice at once; a leader paused past its lease is fenced."""
import collections
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import unittest

import boto3
import botocore.config

import ha
import postgres
from harness import BIN, REGION, Receiver, kill_attempt_processes

CONFIG = "[executor]\nstop_grace_seconds = 2\n"


def client(server, service, attempts=10):
    """A boto3 client that retries as a user's would across a failover (standard mode: 5xx and
    connection errors, with backoff)."""
    key, secret = server.credentials()
    cfg = botocore.config.Config(retries={"max_attempts": attempts, "mode": "standard"}, read_timeout=60,
                                 connect_timeout=5)
    return boto3.client(service, endpoint_url=server.url, region_name=REGION, aws_access_key_id=key,
                        aws_secret_access_key=secret, config=cfg)


def payload(name, command):
    return {
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
        "AlgorithmSpecification": {"TrainingImage": "local/shell", "TrainingInputMode": "File",
                                   "ContainerEntrypoint": ["/bin/sh", "-c"], "ContainerArguments": [command]},
        "OutputDataConfig": {"S3OutputPath": "s3://trainyard-test/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 300},
    }


@unittest.skipIf(ha.missing(), ha.missing())
@unittest.skipIf(os.environ.get("TRAINYARD_TEST_STORE") == "postgres",
                 "runs in make test already, on a PostgreSQL of its own")
class HighAvailabilityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = postgres.PrivatePostgres().start()

    @classmethod
    def tearDownClass(cls):
        cls.pg.stop()

    def setUp(self):
        self.work_dir = tempfile.mkdtemp(prefix="trainyard-work-")
        os.chmod(self.work_dir, 0o1777)
        self.cluster = None

    def tearDown(self):
        if self.cluster:
            self.cluster.stop()
            kill_attempt_processes(self.cluster.data_dir)
            if not os.environ.get("TRAINYARD_KEEP_TEST_DATA"):
                shutil.rmtree(self.cluster.data_dir, ignore_errors=True)
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def start(self, n=3, config=""):
        self.cluster = ha.Cluster(self.pg, n=n, config=CONFIG + config, shared_dirs=[self.work_dir])
        return self.cluster

    def create_queue(self, batch, name, capacity):
        batch.create_service_environment(
            serviceEnvironmentName=name + "-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": capacity, "capacityUnit": "NUM_INSTANCES"}])
        batch.create_job_queue(jobQueueName=name, jobQueueType="SAGEMAKER_TRAINING", priority=1,
                               serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": name + "-env"}])

    def logs(self):
        return "\n".join(f"--- server {i} ---\n{s.read_log()}" for i, s in enumerate(self.cluster.servers))

    def wait_final(self, batch, ids, timeout=180):
        deadline = time.time() + timeout
        pending = set(ids)
        final = {}
        while pending:
            for chunk in [sorted(pending)[i:i + 100] for i in range(0, len(pending), 100)]:
                for job_id in chunk:
                    j = batch.describe_service_job(jobId=job_id)
                    if j["status"] in ("SUCCEEDED", "FAILED"):
                        final[job_id] = j
                        pending.discard(job_id)
            if pending and time.time() > deadline:
                self.fail(f"{len(pending)} job(s) never ended, e.g. {sorted(pending)[:3]}\n{self.logs()}")
            if pending:
                time.sleep(0.3)
        return final

    def test_every_server_answers_and_status_names_the_leader(self):
        c = self.start(3)
        leader = c.leader()
        follower = (leader + 1) % 3
        # A write and a read through a follower: it passes them to the leader, signed as they came.
        batch = client(c.servers[follower], "batch")
        self.create_queue(batch, "q", 1)
        self.assertEqual([q["jobQueueName"] for q in client(c.servers[(leader + 2) % 3], "batch")
                          .describe_job_queues()["jobQueues"]], ["q"])
        # A forged signature is refused by the leader, whichever server it enters.
        bad = boto3.client("batch", endpoint_url=c.servers[follower].url, region_name=REGION,
                           aws_access_key_id=c.endpoint.credentials()[0], aws_secret_access_key="wrong" * 8,
                           config=botocore.config.Config(retries={"max_attempts": 1}))
        with self.assertRaises(bad.exceptions.ClientError) as e:
            bad.describe_job_queues()
        self.assertIn(e.exception.response["ResponseMetadata"]["HTTPStatusCode"], (401, 403))

        # /healthz: one leader, one term, every server listed (each within a lease of starting);
        # only the leader passes ?role=leader.
        deadline = time.time() + 10
        while True:
            bodies = [ha.health(s.url)[1] for s in c.servers]
            if all(len(b.get("servers", [])) == 3 for b in bodies) or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(sorted(b["role"] for b in bodies), ["follower", "follower", "leader"])
        self.assertEqual({b["leader"]["term"] for b in bodies}, {bodies[leader]["server"]["term"]})
        self.assertEqual(len(bodies[follower]["servers"]), 3)
        self.assertEqual([ha.health(s.url, role="leader")[0] for s in c.servers],
                         [200 if i == leader else 503 for i in range(3)])
        out = subprocess.run([BIN, "admin", "status", "--endpoint-url", c.servers[follower].url, "--data-dir", c.data_dir], capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("this server: follower", out.stdout)
        self.assertIn(f"leader: {bodies[leader]['server']['name']}", out.stdout)
        for b in bodies:
            self.assertIn(b["server"]["name"], out.stdout)

        # A clean stop hands over at once: the lease is released, not left to expire.
        term = bodies[leader]["server"]["term"]
        t0 = time.time()
        c.servers[leader].stop()
        nxt = c.leader(exclude=(leader,))
        handover = time.time() - t0
        self.assertEqual(ha.health(c.servers[nxt].url)[1]["server"]["term"], term + 1)
        self.assertLess(handover, 3.0, self.logs())  # well under the 3 s lease
        self.assertIn("released the lease", c.servers[leader].read_log())
        self.assertEqual([q["jobQueueName"] for q in client(c.endpoint, "batch").describe_job_queues()["jobQueues"]], ["q"])

    def test_kill9_of_the_leader_under_load_loses_nothing(self):
        receiver = Receiver().start()
        self.addCleanup(receiver.stop)
        c = self.start(3, config=f'[[webhooks]]\nname = "ha"\nurl = "{receiver.url}"\nmax_backoff_seconds = 1\n')
        batch = client(c.endpoint, "batch")
        self.create_queue(batch, "ha", 3)
        runs = os.path.join(self.work_dir, "runs.log")
        acked = {}  # name -> job id, for every submit that was answered
        stop = threading.Event()
        errors = []

        def submit_loop():
            b = client(c.endpoint, "batch")
            n = 0
            while not stop.is_set():
                name = f"ha-{n:04d}"
                cmd = f"echo start {name} $(date +%s%N) >> {runs}; sleep 0.3; echo end {name} $(date +%s%N) >> {runs}"
                try:
                    r = b.submit_service_job(jobName=name, jobQueue="ha", serviceJobType="SAGEMAKER_TRAINING",
                                             clientToken=name, serviceRequestPayload=json.dumps(payload(name, cmd)))
                    acked[name] = r["jobId"]
                    n += 1
                except Exception as e:  # an unanswered submit is retried with the same token
                    errors.append(repr(e))
                time.sleep(0.05)

        def answered(more, timeout=60):
            """Waits until `more` submits beyond those answered now are answered: each kill lands
            under load however fast this machine is."""
            want, deadline = len(acked) + more, time.time() + timeout
            while len(acked) < want:
                self.assertLess(time.time(), deadline, f"only {len(acked)} submits answered; {errors[-3:]}")
                time.sleep(0.05)

        t = threading.Thread(target=submit_loop)
        t.start()
        leaderless = []
        try:
            for round in range(3):
                time.sleep(1.0)
                answered(7)
                leader = c.leader()
                victim = c.servers[leader]
                victim.kill9()
                killed = time.time()
                nxt = c.leader(exclude=(leader,), timeout=30)
                leaderless.append(time.time() - killed)
                self.assertNotEqual(nxt, leader)
                c.start(leader)  # as a process manager would: it rejoins as a follower
            time.sleep(1.0)
            answered(7)
        finally:
            stop.set()
            t.join()
        print(f"\ntime without a leader after kill -9 (3 s lease): "
              f"{', '.join(f'{x:.2f}' for x in leaderless)} s; median {statistics.median(leaderless):.2f} s, "
              f"worst {max(leaderless):.2f} s; {len(acked)} submits acknowledged, {len(errors)} gave up")
        self.assertGreaterEqual(len(acked), 28)  # 7 before each kill and after the last (answered)
        self.assertLess(max(leaderless), 15, self.logs())

        # Every acknowledged submit exists and ends; none was stored twice.
        final = self.wait_final(batch, acked.values())
        self.assertEqual(set(final), set(acked.values()))
        statuses = collections.Counter(j["status"] for j in final.values())
        self.assertEqual(statuses, {"SUCCEEDED": len(acked)},
                         [(j["jobName"], j.get("statusReason")) for j in final.values() if j["status"] != "SUCCEEDED"])
        names = collections.Counter(j["jobName"] for j in final.values())
        self.assertEqual(max(names.values()), 1)
        stored = int(self.pg.psql("SELECT count(*) FROM service_jobs", c.url.split("dbname=")[1]))
        self.assertGreaterEqual(stored, len(acked))
        self.assertLessEqual(stored, len(acked) + 1)  # at most the one in flight when the load stopped

        # No attempt ran twice at once: each job's runs, from the shared log, never overlap.
        spans = collections.defaultdict(list)
        open_runs = {}
        with open(runs) as f:
            for line in f:
                what, name, ns = line.split()
                if what == "start":
                    open_runs.setdefault(name, []).append(int(ns))
                else:
                    spans[name].append((open_runs[name].pop(0), int(ns)))
        for name in acked:
            self.assertTrue(spans[name], f"{name} never ran")
            ordered = sorted(spans[name])
            for (a0, a1), (b0, b1) in zip(ordered, ordered[1:]):
                self.assertLessEqual(a1, b0, f"{name} ran twice at once")

        # The event log carried on across the leaders: sequence numbers with no gap and no repeat.
        seqs, after = [], 0
        while True:
            page = c.endpoint.raw_call("events", "Events", {"After": after, "Limit": 1000}, path="/trainyard/v1/events")
            seqs += [e["Seq"] for e in page["Events"]]
            if not page["Events"]:
                break
            after = page["NextCursor"]
        self.assertTrue(seqs)
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))))
        # ... and so did webhook delivery: every event reached the receiver, at least once.
        deadline = time.time() + 60
        while True:
            with receiver.lock:
                delivered = [int({k.lower(): v for k, v in h.items()}["x-trainyard-event-seq"]) for h, _, _ in receiver.posts]
            if set(seqs) <= set(delivered) or time.time() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(sorted(set(seqs) - set(delivered)), [])
        print(f"webhook: {len(delivered)} deliveries of {len(seqs)} events ({len(delivered) - len(set(delivered))} repeated)")

    def test_a_paused_leader_is_fenced(self):
        c = self.start(2)
        batch = client(c.endpoint, "batch")
        self.create_queue(batch, "q", 2)
        first = batch.submit_service_job(jobName="before", jobQueue="q", serviceJobType="SAGEMAKER_TRAINING",
                                         serviceRequestPayload=json.dumps(payload("before", "sleep 2")))["jobId"]
        old = c.leader()
        term = ha.health(c.servers[old].url)[1]["server"]["term"]
        victim = c.servers[old]
        victim.proc.send_signal(signal.SIGSTOP)
        try:
            new = c.leader(exclude=(old,), timeout=30)
            self.assertEqual(ha.health(c.servers[new].url)[1]["server"]["term"], term + 1)
            # The new leader decides: a job submitted now runs under it.
            second = batch.submit_service_job(jobName="after", jobQueue="q", serviceJobType="SAGEMAKER_TRAINING",
                                              serviceRequestPayload=json.dumps(payload("after", "sleep 1")))["jobId"]
            # A request reaches the paused leader: the kernel holds it until the process runs again.
            # Meanwhile a transaction holds the lease row FOR SHARE: the old leader's lease renewal
            # (an UPDATE) waits behind it, so the first thing the old leader writes on waking is
            # the request's commit, and its fence (FOR SHARE too) reads the new term.
            db = c.url.split("dbname=")[1]
            holder = self.pg.session(db)
            holder.stdin.write("BEGIN;\nSELECT term FROM leader WHERE id = 1 FOR SHARE;\n")
            self.assertEqual(holder.stdout.readline().strip(), str(term + 1))
            key, secret = c.endpoint.credentials()
            direct = boto3.client("batch", endpoint_url=victim.url, region_name=REGION, aws_access_key_id=key,
                                  aws_secret_access_key=secret,
                                  config=botocore.config.Config(retries={"max_attempts": 1}, read_timeout=30))
            answer = []

            def during():
                try:
                    answer.append(direct.submit_service_job(
                        jobName="during", jobQueue="q", serviceJobType="SAGEMAKER_TRAINING",
                        serviceRequestPayload=json.dumps(payload("during", "true"))))
                except Exception as e:
                    answer.append(e)

            sender = threading.Thread(target=during)
            sender.start()
            time.sleep(0.5)  # the request is in the paused server's socket
        finally:
            victim.proc.send_signal(signal.SIGCONT)
        # The old leader wakes believing it leads; the database refuses its commit, and it leaves.
        rc = victim.proc.wait(timeout=30)
        sender.join()
        holder.stdin.write("ROLLBACK;\n")
        holder.stdin.close()
        holder.wait(timeout=10)
        self.assertEqual(rc, 75, victim.read_log())
        log = victim.read_log()
        self.assertIn(f"the database refused a commit of", log)
        self.assertIn(f"fenced: term {term} no longer leads (the database holds term {term + 1})", log)
        self.assertIn("no longer the leader", log)
        self.assertIsInstance(answer[0], Exception)  # never acknowledged ...
        self.assertEqual(self.pg.psql("SELECT count(*) FROM service_jobs WHERE doc LIKE '%\"during\"%'", db), "0")  # ... nor stored
        # The refusal, straight from the database: a commit carrying the old token.
        with self.assertRaises(subprocess.CalledProcessError) as e:
            self.pg.psql(f"BEGIN; SELECT trainyard_fence({term}); COMMIT;", c.url.split("dbname=")[1])
        self.assertIn(f"fenced: term {term} no longer leads (the database holds term {term + 1})", e.exception.stderr)
        final = self.wait_final(batch, [first, second])
        self.assertEqual({j["status"] for j in final.values()}, {"SUCCEEDED"}, self.logs())
        c.servers[old].proc.stdout.close()
        c.servers[old].log.close()
        c.start(old)  # rejoins as a follower
        self.assertEqual(ha.health(c.servers[old].url)[1]["role"], "follower")


if __name__ == "__main__":
    unittest.main()
