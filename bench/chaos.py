#!/usr/bin/env python3
"""Chaos benchmark: a few hundred short checkpointing jobs under random spot interruptions and
server restarts.

Starts a real trainyard server (executor.sandbox = "none", spot capacity only: --slots spot
instances of ml.m5.large, interrupted at random at --rate per spot instance-hour, with a
5 s notice) and submits --jobs Batch service jobs (managed spot training, CheckpointConfig) to a
FIFO queue. Each job counts to --steps in steps of --step-seconds, saving its step in its
checkpoint directory after each one and resuming from the saved step when it starts; on SIGTERM
(the interruption notice) it exits at once, its checkpoint already saved. While the jobs run the
server is killed with SIGKILL --restarts times, at random moments spaced over the run, and
restarted on the same data directory (new port, new clients): the attempts keep running under
their supervisors and the new server re-adopts them. Submissions go on through the restarts;
each carries a clientToken, so a submission whose answer was lost is retried safely.

Every run of a job records itself on the host, outside the data directory:
  * it takes a non-blocking exclusive flock on a per-job lock file; if another live run of the
    same job holds it, it appends a line to <work>/duplicates (two runs of one job at once);
  * it appends "start <pid> <step> <time>", "step <pid> <step> <time>" after each step,
    and "end"/"term" lines to <work>/log/<job>, from which the script checks overlaps itself
    and counts the steps done again after a restart.

At the end (every job SUCCEEDED or FAILED, or --timeout) it prints: jobs submitted, completed
(must be all), failed (with reasons), duplicate concurrent runs (must be 0), interruptions
(SpotInterruptions summed over the training jobs), server restarts, wall time, and work done
(completed jobs × steps × step time) versus instance-seconds spent (TrainingTimeInSeconds summed)
with the difference as work lost. --json FILE writes the figures.

Run from the repository root after a build: bench/chaos.py [--jobs N] [--restarts R] [--rate R]
"""
import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from harness import Server, kill_attempt_processes  # noqa: E402

BUCKET = "chaos"
QUEUE = "chaos-q"
ENV = "chaos-env"
INSTANCE_TYPE = "ml.m5.large"

# One run of a job (python3 <work>/job.py). The checkpoint is one file, replaced atomically after
# each step; the lock and the log are host files outside the data directory.
JOB_PY = r'''
import fcntl, os, signal, sys, time
chaos, job = os.environ["CHAOS_DIR"], os.environ["CHAOS_JOB"]
steps, step_s = int(os.environ["CHAOS_STEPS"]), float(os.environ["CHAOS_STEP_SECONDS"])
marker = os.environ["TRAINYARD_CHECKPOINT_MARKER"]
ckpt = os.path.dirname(marker)
os.makedirs(ckpt, exist_ok=True)
pid = os.getpid()
log = os.open(os.path.join(chaos, "log", job), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
def rec(kind, s, extra=""):
    os.write(log, f"{kind} {pid} {s} {time.time():.6f}{extra}\n".encode())
lock = os.open(os.path.join(chaos, "locks", job), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    with open(os.path.join(chaos, "duplicates"), "a") as f:
        f.write(f"{job} {pid} {time.time():.6f} {marker}\n")
try:
    with open(os.path.join(ckpt, "step")) as f:
        saved = int(f.read())
except (OSError, ValueError):
    saved = 0
rec("start", saved, " attempt=" + os.environ.get("AWS_BATCH_JOB_ATTEMPT", "?"))
stop = False
def on_term(signum, frame):
    # The interruption notice (or a stop): the step in progress is finished and saved, then it exits.
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
while saved < steps and not stop:
    time.sleep(step_s)
    tmp = os.path.join(ckpt, "step.tmp")
    with open(tmp, "w") as f:
        f.write(str(saved + 1))
    os.replace(tmp, os.path.join(ckpt, "step"))
    saved += 1
    os.utime(marker) if os.path.exists(marker) else open(marker, "w").close()
    rec("step", saved)
if saved < steps:
    notice = os.path.exists(os.environ.get("TRAINYARD_INTERRUPTION_NOTICE", "/nonexistent"))
    rec("term", saved, " notice" if notice else "")
    sys.exit(143)
rec("end", saved)
'''


def config_toml(args):
    return f"""
[executor]
sandbox = "none"
stop_grace_seconds = 5
spot_notice_seconds = 5
chaos_seed = {args.seed}

[object_store]
checkpoint_sync_seconds = 1

[[instance_types]]
name = "{INSTANCE_TYPE}"
count = 0
spot_count = {args.slots}
spot_interruptions_per_hour = {args.rate}
"""


def job_name(i):
    return f"chaos-{i:04d}"  # lower case: training job ARNs are lower case


def payload(name, work, args):
    return {
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
        "AlgorithmSpecification": {"TrainingImage": "local/python3", "TrainingInputMode": "File",
                                   "ContainerEntrypoint": [sys.executable, os.path.join(work, "job.py")]},
        "Environment": {"CHAOS_DIR": work, "CHAOS_JOB": name, "CHAOS_STEPS": str(args.steps),
                        "CHAOS_STEP_SECONDS": str(args.step_seconds)},
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output"},
        "CheckpointConfig": {"S3Uri": f"s3://{BUCKET}/ckpt/{name}"},
        "ResourceConfig": {"InstanceType": INSTANCE_TYPE, "InstanceCount": 1, "VolumeSizeInGB": 1},
        "EnableManagedSpotTraining": True,
        "StoppingCondition": {"MaxRuntimeInSeconds": 1200, "MaxWaitTimeInSeconds": 3600},
    }


def is_connection_error(e):
    import botocore.exceptions as be
    return isinstance(e, (be.EndpointConnectionError, be.ConnectionClosedError, be.ReadTimeoutError,
                          be.ConnectTimeoutError, ConnectionError, OSError))


class Chaos:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.work = tempfile.mkdtemp(prefix="trainyard-chaos-")
        self.data = os.path.join(self.work, "data")
        for d in ("data", "log", "locks"):
            os.makedirs(os.path.join(self.work, d))
        os.makedirs(os.path.join(self.data, "buckets", BUCKET))
        with open(os.path.join(self.work, "job.py"), "w") as f:
            f.write(JOB_PY)
        self.server = None
        self.batch = None
        self.restarts = []          # (at, downtime) of the kills we made
        self.unplanned = []         # times the server was found dead without our kill
        self.acked = {}             # job name -> jobId, once SubmitServiceJob answered
        self.retried_submits = 0
        self.submit_errors = {}     # job name -> an error that was not a lost connection
        self.stopping = False

    # ---- the server ----
    def start_server(self):
        self.server = Server(self.data, config=config_toml(self.args)).start()
        self.batch = self.server.client("batch")

    def restart(self):
        t = time.time()
        self.server.kill9()
        down = self.rng.uniform(0.2, 2.0)  # supervisors and jobs go on alone meanwhile
        time.sleep(down)
        self.start_server()
        self.restarts.append((t - self.t0, time.time() - t))
        print(f"  [{t - self.t0:6.1f} s] server killed (SIGKILL) and restarted after {time.time() - t:.2f} s", flush=True)

    def check_alive(self):
        if self.server.proc.poll() is not None:
            print(f"  [{time.time() - self.t0:6.1f} s] server exited on its own (rc {self.server.proc.returncode}); "
                  f"log tail:\n{self.server.read_log()[-1500:]}", flush=True)
            self.unplanned.append(time.time() - self.t0)
            self.server.kill9()
            self.start_server()

    # ---- submissions and progress ----
    def setup(self):
        self.batch.create_service_environment(
            serviceEnvironmentName=ENV, serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": self.args.slots, "capacityUnit": "NUM_INSTANCES"}])
        self.batch.create_job_queue(jobQueueName=QUEUE, jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": ENV}])

    def submitter(self, rate):
        """Submits every job at `rate` per second, from a thread of its own, so that a server kill
        can land in the middle of a submission: a call that got no answer is sent again with the
        same clientToken (the server answers with the job it already has, if it committed it)."""
        clients = {}
        for i in range(self.args.jobs):
            name = job_name(i)
            while time.time() - self.t0 < i / rate:
                time.sleep(0.01)
            body = json.dumps(payload(name, self.work, self.args))
            while not self.stopping:
                server = self.server
                try:
                    if id(server) not in clients:
                        clients = {id(server): server.client("batch")}
                    r = clients[id(server)].submit_service_job(
                        jobName=name, jobQueue=QUEUE, serviceJobType="SAGEMAKER_TRAINING",
                        serviceRequestPayload=body, clientToken=name)
                    self.acked[name] = r["jobId"]
                    break
                except Exception as e:  # noqa: BLE001
                    status = getattr(e, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
                    if not is_connection_error(e) and status < 500:
                        self.submit_errors[name] = str(e)
                        break
                    self.retried_submits += 1
                    time.sleep(0.05)

    def list_all(self):
        """Every service job of the queue (all statuses): name -> summary."""
        jobs, token = {}, None
        while True:
            req = {"jobQueue": QUEUE, "filters": [{"name": "JOB_NAME", "values": ["chaos-*"]}], "maxResults": 1000}
            if token:
                req["nextToken"] = token
            r = self.server.raw_call("batch", "ListServiceJobs", req)
            for j in r["jobSummaryList"]:
                if j["jobName"] in jobs:
                    jobs.setdefault("__duplicate_names__", []).append(j["jobName"])
                jobs[j["jobName"]] = j
            token = r.get("nextToken")
            if not token:
                return jobs

    def run(self):
        a = self.args
        print(f"work dir {self.work}", flush=True)
        self.t0 = time.time()
        self.start_server()
        self.setup()
        # When to kill the server: spaced over the expected run (every job's steps plus ~1 s of
        # start and upload per run, on --slots instances), with jitter.
        expected = a.jobs * (a.steps * a.step_seconds + 1.0) / a.slots
        kills = sorted(expected * (k + self.rng.uniform(0.6, 1.4)) / (a.restarts + 1) for k in range(a.restarts))
        # Submissions are spread over the first third of it, so that restarts meet them too.
        submit_rate = a.jobs / max(1.0, expected / 3)
        print(f"{a.jobs} jobs × {a.steps} steps of {a.step_seconds} s on {a.slots} spot slots, "
              f"{a.rate:g} interruptions per instance-hour, {a.restarts} server restarts "
              f"(expected run ~{expected:.0f} s)", flush=True)
        import threading
        submitter = threading.Thread(target=self.submitter, args=(submit_rate,), daemon=True)
        submitter.start()
        last_poll = 0.0
        finished = {}
        jobs = None
        deadline = self.t0 + a.timeout
        while True:
            now = time.time()
            if kills and now - self.t0 >= kills[0]:
                kills.pop(0)
                if len(finished) < a.jobs:
                    self.restart()
                continue
            self.check_alive()
            if now - last_poll >= 1.0 and self.acked:
                last_poll = now
                try:
                    jobs = self.list_all()
                except Exception as e:  # noqa: BLE001
                    if not is_connection_error(e) and "failed: 5" not in str(e):
                        raise
                    jobs = None
                if jobs is not None:
                    finished = {n: j for n, j in jobs.items() if isinstance(j, dict) and j["status"] in ("SUCCEEDED", "FAILED")}
                    counts = {}
                    for j in jobs.values():
                        if isinstance(j, dict):
                            counts[j["status"]] = counts.get(j["status"], 0) + 1
                    if int(now - self.t0) % 10 == 0:
                        print(f"  [{now - self.t0:6.1f} s] submitted {len(self.acked)}: "
                              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
                    if len(self.acked) + len(self.submit_errors) == a.jobs and len(finished) == len(self.acked):
                        break
            if now > deadline:
                print("timed out", flush=True)
                break
            time.sleep(0.05)
        self.wall = time.time() - self.t0
        self.stopping = True
        submitter.join()
        return self.report(jobs if jobs is not None else self.list_all())

    # ---- the figures ----
    def runs_of(self, name):
        """The runs of one job from its host log: [{pid, start_step, last_step, t_start, t_last, how}]."""
        runs, by_pid = [], {}
        try:
            with open(os.path.join(self.work, "log", name)) as f:
                lines = f.read().splitlines()
        except OSError:
            return runs
        for line in lines:
            parts = line.split()
            if len(parts) < 4:
                continue
            kind, pid, step, at = parts[0], parts[1], int(parts[2]), float(parts[3])
            if kind == "start":
                r = {"pid": pid, "start_step": step, "last_step": step, "t_start": at, "t_last": at, "how": "killed"}
                runs.append(r)
                by_pid[pid] = r
                continue
            r = by_pid.get(pid)
            if r is None:
                continue
            r["last_step"] = max(r["last_step"], step)
            r["t_last"] = at
            if kind in ("end", "term"):
                r["how"] = kind + (" notice" if "notice" in parts[4:] else "")
        return runs

    def report(self, jobs):
        a = self.args
        names = [job_name(i) for i in range(a.jobs)]
        dup_names = jobs.pop("__duplicate_names__", [])
        lost_acks = [n for n in self.acked if n not in jobs]
        succeeded = [n for n in names if jobs.get(n, {}).get("status") == "SUCCEEDED"]
        failed = {}
        interruptions = 0
        spent_api = 0.0
        spent_exact = 0.0
        billable = 0.0
        training_jobs = 0
        service_attempts = 0
        launches = 0
        late_interruptions = 0
        for n in names:
            if n not in self.acked:
                continue
            d = self.server.raw_call("batch", "DescribeServiceJob", {"jobId": self.acked[n]})
            if d["status"] == "FAILED":
                failed[n] = d.get("statusReason", "")
            service_attempts += len(d.get("attempts", []))
            for att in d.get("attempts", []):
                arn = att["serviceResourceId"]["value"]
                tj_name = arn.split("training-job/")[-1]
                tj = self.server.raw_call("sagemaker", "DescribeTrainingJob", {"TrainingJobName": tj_name})
                training_jobs += 1
                interruptions += tj.get("SpotInterruptions", 0)
                spent_api += tj.get("TrainingTimeInSeconds", 0)
                billable += tj.get("BillableTimeInSeconds", 0)
                trs = tj.get("SecondaryStatusTransitions", [])
                for k, tr in enumerate(trs):
                    launches += tr["Status"] == "Starting"  # one per launch of its instances
                    # An interruption that came after the run had ended on its own: the outcome stands.
                    late_interruptions += tr["Status"] == "Interrupted" and k + 1 < len(trs) and trs[k + 1]["Status"] == "Completed"
                    if tr["Status"] in ("Downloading", "Training", "Uploading") and "EndTime" in tr:
                        spent_exact += tr["EndTime"] - tr["StartTime"]
        # Runs from the host logs: duplicates, overlaps, steps done again.
        with open(os.path.join(self.work, "duplicates"), "a+") as f:
            f.seek(0)
            dup_lines = f.read().splitlines()
        overlaps = 0
        runs_total = 0
        steps_executed = 0
        steps_redone = 0
        process_seconds = 0.0
        needless_runs = 0
        ends = {"end": 0, "term notice": 0, "term": 0, "killed": 0}
        for n in names:
            runs = self.runs_of(n)
            runs_total += len(runs)
            reached = 0
            for k, r in enumerate(runs):
                steps_executed += r["last_step"] - r["start_step"]
                process_seconds += r["t_last"] - r["t_start"]
                # Nothing left to do: the interruption came after its last step, while the run
                # was still exiting, so it was restarted and found its final checkpoint.
                needless_runs += r["start_step"] >= a.steps
                steps_redone += max(0, min(reached, r["last_step"]) - r["start_step"])
                reached = max(reached, r["last_step"])
                ends[r["how"]] = ends.get(r["how"], 0) + 1
                # A run that starts before the one before it recorded its last line overlapped it.
                if k > 0 and r["t_start"] < runs[k - 1]["t_last"]:
                    overlaps += 1
        done = len(succeeded) * a.steps * a.step_seconds
        figures = {
            "jobs_submitted": len(self.acked),
            "jobs_completed": len(succeeded),
            "jobs_failed": len(failed),
            "failures": failed,
            "acknowledged_but_missing": lost_acks,
            "duplicate_job_names": dup_names,
            "duplicate_concurrent_runs": len(dup_lines),
            "duplicate_lines": dup_lines[:20],
            "overlapping_runs_by_timestamps": overlaps,
            "interruptions": interruptions,
            "interruptions_after_the_run_ended": late_interruptions,
            "server_restarts": len(self.restarts),
            "unplanned_server_exits": len(self.unplanned),
            "submit_calls_retried": self.retried_submits,
            "submit_errors": self.submit_errors,
            "service_job_attempts": service_attempts,
            "training_jobs": training_jobs,
            "launches": launches,
            "runs": runs_total,
            "runs_gone_before_their_first_line": launches - runs_total,
            "runs_of_finished_jobs": needless_runs,
            "run_endings": ends,
            "wall_seconds": round(self.wall, 1),
            "work_done_seconds": round(done, 1),
            "instance_seconds_spent": spent_api,
            "instance_seconds_spent_exact": round(spent_exact, 1),
            "billable_seconds": billable,
            "work_lost_seconds": round(spent_exact - done, 1),
            "work_lost_percent": round(100.0 * (spent_exact - done) / spent_exact, 1) if spent_exact else 0.0,
            "steps_executed": steps_executed,
            "steps_redone": steps_redone,
            "steps_redone_seconds": round(steps_redone * a.step_seconds, 1),
            # Where the rest went: the job processes' own time (first to last log line of each
            # run: the steps with their file writes), and per run what is outside it (the
            # supervisor's preparing and checkpoint restore, the interpreter's start, the upload).
            "job_process_seconds": round(process_seconds, 1),
            "outside_job_process_seconds_per_run": round((spent_exact - process_seconds) / runs_total, 3) if runs_total else 0.0,
            "settings": {"jobs": a.jobs, "steps": a.steps, "step_seconds": a.step_seconds, "slots": a.slots,
                         "rate_per_instance_hour": a.rate, "restarts": a.restarts, "seed": a.seed},
        }
        return figures

    def cleanup(self):
        if self.server:
            try:
                self.server.stop()
            except Exception:  # noqa: BLE001
                pass
        kill_attempt_processes(self.data)
        # Anything of ours still running (a job process that outlived its supervisor) is a leak.
        leaked = []
        script = os.path.join(self.work, "job.py")
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if script.encode() in f.read():
                        leaked.append(int(pid))
                        os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        return leaked


def print_table(f):
    rows = [
        ("jobs completed", f"{f['jobs_completed']}/{f['jobs_submitted']}" + ("" if f["jobs_failed"] == 0 else f" ({f['jobs_failed']} failed)")),
        ("duplicate concurrent runs (flock)", f["duplicate_concurrent_runs"]),
        ("overlapping runs (timestamps)", f["overlapping_runs_by_timestamps"]),
        ("acknowledged submissions missing", len(f["acknowledged_but_missing"])),
        ("submit calls sent again (no answer)", f["submit_calls_retried"]),
        ("spot interruptions", f"{f['interruptions']} ({f['interruptions_after_the_run_ended']} after the run had ended)"),
        ("server restarts (kill -9)", f["server_restarts"]),
        ("unplanned server exits", f["unplanned_server_exits"]),
        ("runs launched / logged a start", f"{f['launches']} / {f['runs']}"),
        ("runs that found all steps done", f["runs_of_finished_jobs"]),
        ("wall time", f"{f['wall_seconds']} s"),
        ("work done (steps × step time)", f"{f['work_done_seconds']} s"),
        ("instance-seconds spent", f"{f['instance_seconds_spent_exact']} s (TrainingTimeInSeconds summed: {f['instance_seconds_spent']:g})"),
        ("work lost (spent - done)", f"{f['work_lost_seconds']} s = {f['work_lost_percent']} % of spent"),
        ("  of which steps re-done", f"{f['steps_redone']} steps = {f['steps_redone_seconds']} s"),
        ("job processes' own time", f"{f['job_process_seconds']} s over {f['steps_executed']} steps"),
        ("outside the job process, per run", f"{f['outside_job_process_seconds_per_run']} s"),
    ]
    w = max(len(r[0]) for r in rows)
    for k, v in rows:
        print(f"  {k:<{w}}  {v}")
    if f["failures"]:
        print("failures:")
        for n, why in sorted(f["failures"].items()):
            print(f"  {n}: {why}")
    if f["duplicate_lines"]:
        print("duplicates:", *f["duplicate_lines"], sep="\n  ")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=300, help="service jobs (default 300)")
    ap.add_argument("--steps", type=int, default=30, help="steps per job (default 30)")
    ap.add_argument("--step-seconds", type=float, default=0.1, help="seconds per step (default 0.1)")
    ap.add_argument("--slots", type=int, default=8, help="spot instances (default 8)")
    ap.add_argument("--rate", type=float, default=600, help="spot interruptions per instance-hour (default 600)")
    ap.add_argument("--restarts", type=int, default=5, help="server kills (SIGKILL) and restarts (default 5)")
    ap.add_argument("--seed", type=int, default=1, help="seeds the interruptions and the restart times (default 1)")
    ap.add_argument("--timeout", type=float, default=900, help="give up after this many seconds (default 900)")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, data dir)")
    args = ap.parse_args()

    chaos = Chaos(args)
    figures = None
    try:
        figures = chaos.run()
    finally:
        leaked = chaos.cleanup()
    figures["leaked_job_processes"] = len(leaked)
    print_table(figures)
    if leaked:
        print(f"  job processes left running after the cleanup: {len(leaked)} (killed)")
    if args.keep:
        print("kept", chaos.work)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    ok = (figures["jobs_completed"] == args.jobs and figures["duplicate_concurrent_runs"] == 0
          and figures["overlapping_runs_by_timestamps"] == 0 and not figures["acknowledged_but_missing"]
          and not figures["duplicate_job_names"] and not figures["unplanned_server_exits"]
          and not figures["submit_errors"])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
