"""kill -9 the server while jobs run, and while a service job is SCHEDULED or STARTING: after a
restart every job is accounted for, running attempts are re-adopted and finish, and none runs
twice."""
import collections
import os
import shutil
import tempfile
import time
import unittest

from harness import BIN, Server, ServerTest, kill_attempt_processes

GRACE = "[executor]\nstop_grace_seconds = 2\n"


class CrashTest(ServerTest):
    server_config = GRACE

    def restart(self):
        self.server = self.new_server(config=GRACE)
        self.batch = self.server.client("batch")
        self.sm = self.server.client("sagemaker")
    def test_kill9_while_jobs_run_then_restart(self):
        queue = self.create_queue("crash", capacity=2)
        runs = os.path.join(self.work_dir, "runs.log")
        ids = []
        for n in range(5):
            cmd = f"echo crash-{n} $$ >> {runs}; sleep 2; echo loss=0.{n}"
            p = self.command_payload(f"crash-{n}", cmd)
            p["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]
            ids.append(self.submit(queue, p))
        self.wait_jobs(ids[:2], statuses=("RUNNING",))

        self.server.kill9()
        time.sleep(0.5)  # the attempts go on without the server
        self.restart()

        jobs = self.wait_jobs(ids, timeout=120)
        self.assertEqual([j["status"] for j in jobs], ["SUCCEEDED"] * 5, [j.get("statusReason") for j in jobs])
        for n, j in enumerate(jobs):
            self.assertEqual(len(j["attempts"]), 1)
            tj = self.sm.describe_training_job(TrainingJobName=f"crash-{n}")
            self.assertEqual(tj["TrainingJobStatus"], "Completed")
            self.assertEqual(tj["FinalMetricDataList"][0]["Value"], float(f"0.{n}"))
        with open(runs) as f:
            started = [line.split()[0] for line in f]
        self.assertEqual(sorted(started), [f"crash-{n}" for n in range(5)])  # each ran exactly once

    def test_acknowledged_submissions_survive_kill9(self):
        queue = self.create_queue("ack", capacity=1)
        ids = [self.submit(queue, self.command_payload(f"ack-{n}", "sleep 0.2")) for n in range(20)]
        self.server.kill9()
        self.restart()
        jobs = self.wait_jobs(ids, timeout=120)
        self.assertEqual(sorted(j["jobId"] for j in jobs), sorted(ids))
        self.assertTrue(all(j["status"] == "SUCCEEDED" for j in jobs))

    def test_kill9_with_jobs_in_every_state(self):
        # Host: 4 ml.m5.large. Ledger before the kill:
        #   done-ok SUCCEEDED, done-fail FAILED (finished before the others start)
        #   run-a, run-b RUNNING; retrying RUNNING its 2nd attempt; stopping being terminated
        #   queued RUNNABLE (the queue's 4 instances are in use); pend: a training job Pending
        queue = self.create_queue("states", capacity=4)
        work = self.work_dir
        locks = os.path.join(work, "locks")
        os.makedirs(locks)
        os.chmod(locks, 0o1777)  # jobs run as an unprivileged user
        runs, gate, count = (os.path.join(work, n) for n in ("runs.log", "gate", "count"))

        # A run of a job holds its lock while it runs: two overlapping runs of one job show up as
        # DUPLICATE in the log.
        script = os.path.join(work, "gated.sh")
        with open(script, "w") as f:
            f.write(f'mkdir {locks}/$1 2>/dev/null || echo DUPLICATE $1 >> {runs}\n'
                    f'echo start $1 >> {runs}\n'
                    f'while [ ! -e {gate} ]; do sleep 0.05; done\n'
                    f'rmdir {locks}/$1\n')

        def gated(name):
            return f"sh {script} {name}"

        ids = {}
        ids["done-ok"] = self.submit(queue, self.command_payload("done-ok", "true"))
        ids["done-fail"] = self.submit(queue, self.command_payload("done-fail", "exit 1"))
        self.wait_jobs([ids["done-ok"], ids["done-fail"]])
        for name in ("run-a", "run-b"):
            ids[name] = self.submit(queue, self.command_payload(name, gated(name)))
        first_fails = f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}; [ $n -eq 0 ] && exit 1; "
        ids["retrying"] = self.submit(queue, self.command_payload("retrying", first_fails + gated("retrying")),
                                      retryStrategy={"attempts": 3})
        ids["stopping"] = self.submit(queue, self.command_payload("stopping", "trap '' TERM; " + gated("stopping")))
        self.wait_jobs([ids[n] for n in ("run-a", "run-b", "stopping")], statuses=("RUNNING",))
        deadline = time.time() + 60
        while len(self.describe_raw(ids["retrying"])["attempts"]) < 2 or \
                self.describe_raw(ids["retrying"])["status"] != "RUNNING":
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        ids["queued"] = self.submit(queue, self.command_payload("queued", gated("queued")))
        self.sm.create_training_job(**self.command_payload("pend", gated("pend")))
        self.batch.terminate_service_job(jobId=ids["stopping"], reason="crash test")

        self.server.kill9()
        self.restart()

        def status(name):
            return self.describe_raw(ids[name])["status"]
        self.assertEqual([status(n) for n in ("done-ok", "done-fail", "run-a", "run-b", "retrying", "queued")],
                         ["SUCCEEDED", "FAILED", "RUNNING", "RUNNING", "RUNNING", "RUNNABLE"])
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="pend")["TrainingJobStatus"], "InProgress")
        # The terminated job's stop is carried out after the restart: SIGKILL after the grace.
        stopped = self.wait_jobs([ids["stopping"]], timeout=30)[0]
        self.assertEqual((stopped["status"], stopped["isTerminated"]), ("FAILED", True))

        with open(gate, "w"):
            pass
        jobs = {n: j for n, j in zip(ids, self.wait_jobs(list(ids.values()), timeout=120))}
        self.assertEqual({n: j["status"] for n, j in jobs.items()},
                         {"done-ok": "SUCCEEDED", "done-fail": "FAILED", "run-a": "SUCCEEDED", "run-b": "SUCCEEDED",
                          "retrying": "SUCCEEDED", "stopping": "FAILED", "queued": "SUCCEEDED"})
        self.assertEqual({n: len(j["attempts"]) for n, j in jobs.items()},
                         {"done-ok": 1, "done-fail": 1, "run-a": 1, "run-b": 1, "retrying": 2, "stopping": 1,
                          "queued": 1})
        self.assertEqual(self.wait_training("pend")["TrainingJobStatus"], "Completed")
        with open(runs) as f:
            lines = f.read().split("\n")
        self.assertNotIn("DUPLICATE", " ".join(lines))
        starts = collections.Counter(line.split()[1] for line in lines if line.startswith("start "))
        self.assertEqual(starts, {"run-a": 1, "run-b": 1, "retrying": 1, "stopping": 1, "queued": 1, "pend": 1})

    def test_supervisor_dies_while_the_server_is_down(self):
        # Server down, then the attempt's supervisor and instance are killed too: after the
        # restart the attempt is found lost, reported with InternalServerError, and retried once.
        queue = self.create_queue("lost", capacity=1)
        work = self.work_dir
        runs, count = os.path.join(work, "runs.log"), os.path.join(work, "count")
        script = os.path.join(work, "job.sh")
        with open(script, "w") as f:
            f.write(f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}\n"
                    f"echo start $AWS_BATCH_JOB_ATTEMPT >> {runs}\n"
                    f"[ $n -eq 0 ] && while true; do sleep 0.05; done\n"
                    "exit 0\n")
        job = self.submit(queue, self.command_payload("lost", f"sh {script}"), retryStrategy={"attempts": 2})
        self.wait_jobs([job], statuses=("RUNNING",))
        # RUNNING comes when the instance is launched; the kill must come after its first line
        # ran, or the retry would find no count and wait forever too.
        deadline = time.time() + 30
        while not (os.path.exists(runs) and os.path.getsize(runs) > 0):
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        self.server.kill9()
        kill_attempt_processes(self.data_dir)
        self.restart()
        done = self.wait_jobs([job], timeout=60)[0]
        self.assertEqual((done["status"], len(done["attempts"])), ("SUCCEEDED", 2))
        self.assertIn("InternalServerError: the instance was lost", done["attempts"][0]["statusReason"])
        with open(runs) as f:
            self.assertEqual(f.read().split(), ["start", "1", "start", "2"])



class CrashBeforeRunningTest(ServerTest):
    """kill -9 while a service job is SCHEDULED (its training job waits for the host's instances)
    and while it is STARTING (its instance's setup command runs): after the restart the job is
    still accounted for in the same state, then runs to the end, once."""

    def setUp(self):
        # The setup command of ml.m5.xlarge runs outside the sandbox, in the supervisor: it logs
        # each run and waits for a gate in a directory of its own.
        self.setup_dir = tempfile.mkdtemp(prefix="trainyard-setup-")
        self.addCleanup(shutil.rmtree, self.setup_dir, True)
        self.server_config = GRACE + f"""
[[instance_types]]
name = "ml.m5.large"
count = 4

[[instance_types]]
name = "ml.m5.xlarge"
count = 2
setup_command = "echo setup >> {self.setup_dir}/setups.log; while [ ! -e {self.setup_dir}/gate ]; do sleep 0.05; done"
"""
        super().setUp()
        self.locks = os.path.join(self.work_dir, "locks")
        os.makedirs(self.locks)
        os.chmod(self.locks, 0o1777)  # jobs run as an unprivileged user
        self.runs = os.path.join(self.work_dir, "runs.log")
        self.gate = os.path.join(self.work_dir, "gate")

    def restart(self):
        self.server = self.new_server()
        self.batch = self.server.client("batch")
        self.sm = self.server.client("sagemaker")

    def gated(self, name):
        # A run holds its lock while it runs: two overlapping runs of one job log DUPLICATE.
        script = os.path.join(self.work_dir, "gated.sh")
        if not os.path.exists(script):
            with open(script, "w") as f:
                f.write(f'mkdir {self.locks}/$1 2>/dev/null || echo DUPLICATE $1 >> {self.runs}\n'
                        f'echo start $1 >> {self.runs}\n'
                        f'while [ ! -e {self.gate} ]; do sleep 0.05; done\n'
                        f'rmdir {self.locks}/$1\n')
        return f"sh {script} {name}"

    def wait_status(self, job, status, timeout=60):
        deadline = time.time() + timeout
        while self.describe_raw(job)["status"] != status:
            self.assertLess(time.time(), deadline, (self.describe_raw(job)["status"], self.server.read_log()))
            time.sleep(0.05)

    def starts(self):
        with open(self.runs) as f:
            lines = f.read().split("\n")
        self.assertNotIn("DUPLICATE", " ".join(lines))
        return collections.Counter(line.split()[1] for line in lines if line.startswith("start "))

    def gated_supervisor(self):
        """A trainyard binary whose trainyard-supervisor waits for a gate first (logging each
        start): an attempt the server has started stays SCHEDULED until the gate opens."""
        bindir = tempfile.mkdtemp(prefix="trainyard-bin-")
        self.addCleanup(shutil.rmtree, bindir, True)
        exe = os.path.join(bindir, "trainyard")
        try:
            os.link(os.path.realpath(BIN), exe)
        except OSError:
            shutil.copy2(os.path.realpath(BIN), exe)
        real = os.path.join(os.path.dirname(os.path.realpath(BIN)), "trainyard-supervisor")
        self.assertTrue(os.path.exists(real), real)
        wrapper = os.path.join(bindir, "trainyard-supervisor")
        with open(wrapper, "w") as f:
            f.write(f"#!/bin/sh\necho supervisor $$ >> {self.setup_dir}/supervisors.log\n"
                    f"while [ ! -e {self.setup_dir}/supervisor-gate ]; do sleep 0.05; done\n"
                    f'exec {real} "$@"\n')
        os.chmod(wrapper, 0o755)
        return exe

    def test_kill9_while_a_service_job_is_scheduled(self):
        # The server started the attempt, but its supervisor has not begun: the job is SCHEDULED.
        exe = self.gated_supervisor()
        self.server.stop()
        self.server = self.new_server(bin=exe)
        self.batch = self.server.client("batch")
        self.sm = self.server.client("sagemaker")
        queue = self.create_queue("sched", capacity=2)
        job = self.submit(queue, self.command_payload("sched", self.gated("sched")))
        other = self.submit(queue, self.command_payload("queued-behind", self.gated("queued-behind")))
        supervisors = os.path.join(self.setup_dir, "supervisors.log")

        def started():
            try:
                with open(supervisors) as f:
                    return len(f.read().split())
            except OSError:
                return 0
        deadline = time.time() + 60
        while started() < 2 * 2:  # "supervisor PID" for each of the two attempts
            self.assertLess(time.time(), deadline, self.server.read_log())
            time.sleep(0.05)
        self.assertEqual([self.describe_raw(j)["status"] for j in (job, other)], ["SCHEDULED", "SCHEDULED"])

        self.server.kill9()
        self.server = self.new_server(bin=exe)
        self.batch = self.server.client("batch")
        self.sm = self.server.client("sagemaker")

        # Both accounted for, not yet further along (no supervisor has run). The restarted server
        # finds neither attempt's supervisor alive and starts each again while the first still
        # waits: when the gate opens, the attempt lock lets only one of each pair run.
        self.assertEqual([self.describe_raw(j)["status"] for j in (job, other)], ["SCHEDULED", "SCHEDULED"])
        with open(os.path.join(self.setup_dir, "supervisor-gate"), "w"):
            pass
        self.wait_status(job, "RUNNING")
        self.wait_status(other, "RUNNING")
        with open(self.gate, "w"):
            pass
        done = self.wait_jobs([job, other], timeout=120)
        self.assertEqual([(d["status"], len(d["attempts"])) for d in done], [("SUCCEEDED", 1)] * 2,
                         [d.get("statusReason") for d in done])
        self.assertEqual(self.starts(), {"sched": 1, "queued-behind": 1})

    def test_kill9_while_a_service_job_is_starting(self):
        queue = self.create_queue("starting", capacity=2)
        p = self.command_payload("starting", self.gated("starting"))
        p["ResourceConfig"]["InstanceType"] = "ml.m5.xlarge"
        job = self.submit(queue, p)
        setups = os.path.join(self.setup_dir, "setups.log")
        deadline = time.time() + 60
        while not os.path.exists(setups):  # the attempt is in its setup: STARTING
            self.assertLess(time.time(), deadline, self.server.read_log())
            time.sleep(0.05)
        self.wait_status(job, "STARTING")

        self.server.kill9()
        self.restart()

        self.assertEqual(self.describe_raw(job)["status"], "STARTING")
        self.assertEqual(self.sm.describe_training_job(TrainingJobName="starting")["SecondaryStatus"], "Downloading")
        with open(os.path.join(self.setup_dir, "gate"), "w"):
            pass
        self.wait_status(job, "RUNNING")
        with open(self.gate, "w"):
            pass
        done = self.wait_jobs([job], timeout=120)[0]
        self.assertEqual((done["status"], len(done["attempts"])), ("SUCCEEDED", 1), done.get("statusReason"))
        self.assertEqual(self.wait_training("starting")["TrainingJobStatus"], "Completed")
        self.assertEqual(self.starts(), {"starting": 1})
        with open(setups) as f:
            self.assertEqual(f.read().split(), ["setup"])  # the instance was prepared once


if __name__ == "__main__":
    unittest.main()
