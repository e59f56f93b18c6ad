#!/usr/bin/env python3
"""trainyard on Slurm against plain sbatch, on one fresh private test cluster, in one run.

Starts a SlurmCluster (tests/integration/slurm_cluster.py) and measures, for plain `sbatch` and
for trainyard-on-Slurm (boto3 CreateTrainingJob against a trainyard server using the Slurm
executor on that cluster):

  (a) start latency: submit -> the job's first line, over M samples one at a time on the idle
      cluster. The job prints its own clock first (`date +%s%N`); latency = that clock minus the
      clock just before the submit call (sbatch is run / CreateTrainingJob is sent). Before each
      submit the bench waits a random 0-1 s, so samples do not lock onto slurmctld's 1 s tick.
      sbatch's first line is read from its -o file; trainyard's through the Logs API.
  (b) end-to-end throughput: N trivial jobs (`true`), 1 CPU each, submitted by P threads; from the
      first submit until every job has ended; jobs/s.
  (c) trainyard only, start latency from cold: --cold-samples jobs on a second server whose held
      allocations are kept 1 s, each submitted once none of them is left in Slurm (docs/slurm.md,
      "Held allocations"), so every one grows a new allocation through Slurm's scheduler.

trainyard runs with its defaults, so (a) and (b) start in held allocations. It prints both sides,
the ratios, and the distance to the targets: trainyard's throughput at least 1.5x sbatch's, its
start p50 at most 100 ms with allocations held and at most sbatch's + 50 ms from cold.
--only sbatch measures Slurm alone (no trainyard binary needed).
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from slurm_cluster import SlurmCluster  # noqa: E402

INSTANCE_TYPE = "ml.m5.large"
JOB_MEM_MIB = 256  # each job (and each trainyard instance) is 1 CPU and this much memory
# How often (b) looks whether every job has ended, on both sides: often enough to add at most
# 1% to a run of a few seconds, seldom enough that the looking (a squeue, or a ListTrainingJobs
# through boto3) does not take CPU from the jobs on a small machine.
POLL = 0.05


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(xs):
    return {"n": len(xs), "p50": pct(xs, 50), "p90": pct(xs, 90), "min": min(xs), "max": max(xs)}


def wait_for(predicate, timeout, what, interval=0.005):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def run_parallel(n, threads, submit_one):
    """submit_one(i) for i in 0..n-1 from `threads` threads; raises the first error."""
    errors = []
    lock = threading.Lock()
    nxt = [0]

    def worker():
        while True:
            with lock:
                if nxt[0] >= n or errors:
                    return
                i = nxt[0]
                nxt[0] += 1
            try:
                submit_one(i)
            except Exception as e:  # reported after the join
                with lock:
                    errors.append(e)
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


# ---------------------------------------------------------------------------------------- sbatch
class SbatchSide:
    name = "sbatch"

    def __init__(self, cluster, work):
        self.c = cluster
        self.work = os.path.join(work, "sbatch")
        os.makedirs(self.work)

    def sbatch(self, *args):
        return self.c.cmd("sbatch", "--parsable", "--ntasks=1", "--cpus-per-task=1",
                          f"--mem={JOB_MEM_MIB}", *args).strip()

    def first_line_ms(self, tag):
        out = os.path.join(self.work, f"{tag}.out")
        t0 = time.time()
        self.sbatch("-J", f"lat-{tag}", "-o", out, "--wrap", "date +%s%N; echo done")

        def read():
            try:
                with open(out) as f:
                    line = f.readline()
                return line if line.endswith("\n") else None
            except FileNotFoundError:
                return None
        line = wait_for(read, 120, f"the first line of sbatch job {tag}")
        return int(line) / 1e6 - t0 * 1000

    def throughput(self, n, threads):
        marks = os.path.join(self.work, "tput")
        os.makedirs(marks)
        t0 = time.monotonic()
        run_parallel(n, threads, lambda i: self.sbatch("-J", "tput", "-o", "/dev/null", "--wrap", f"touch {marks}/{i}"))
        submitted = time.monotonic() - t0
        wait_for(lambda: len(os.listdir(marks)) >= n, 3600, f"{n} sbatch jobs", POLL)
        # A job is over when slurmctld says so, not when its script ran its last line.
        wait_for(lambda: not self.c.cmd("squeue", "-h", "-n", "tput", "-t", "PD,R,CG,CF", "-o", "%i").strip(),
                 600, "the sbatch jobs to leave the queue", POLL)
        return n / (time.monotonic() - t0), submitted, n


# ------------------------------------------------------------------------------------- trainyard
def trainyard_config(cluster, slots, keep_alive=None):
    """The server's configuration for the Slurm executor on this cluster (docs/slurm.md)."""
    hold = f"hold_keep_alive_seconds = {keep_alive}" if keep_alive else ""
    return f"""
[executor]
kind = "slurm"

[executor.slurm]
partition = "{cluster.partition}"
account = ""
bin_dir = "{cluster.bin_dir}"
conf = "{cluster.conf_path}"
sbatch_args = []
{hold}

[[instance_types]]
name = "{INSTANCE_TYPE}"
count = {slots}
vcpus = 1
gpus = 0
memory_mib = {JOB_MEM_MIB}
slurm_partition = ""
slurm_constraint = ""
slurm_whole_node = false
"""


class TrainyardSide:
    name = "trainyard"

    def __init__(self, cluster, work, bin_path, slots, keep_alive=None, tag="trainyard"):
        from harness import Server  # boto3 is needed only for this side
        self.c = cluster
        self.data = os.path.join(work, tag)
        os.makedirs(self.data)
        self.server = Server(self.data, config=trainyard_config(cluster, slots, keep_alive), bin=bin_path).start()
        self.sm = self.server.client("sagemaker")
        self.logs = self.server.client("logs")

    def stop(self):
        self.server.stop()
        from harness import kill_attempt_processes
        kill_attempt_processes(self.data)

    def create(self, name, command):
        self.sm.create_training_job(
            TrainingJobName=name, RoleArn="arn:aws:iam::000000000000:role/SageMakerRole",
            AlgorithmSpecification={"TrainingImage": "local/shell", "TrainingInputMode": "File",
                                    "ContainerEntrypoint": ["/bin/sh", "-c"], "ContainerArguments": [command]},
            OutputDataConfig={"S3OutputPath": "s3://bench-bucket/out"},
            ResourceConfig={"InstanceType": INSTANCE_TYPE, "InstanceCount": 1, "VolumeSizeInGB": 1},
            StoppingCondition={"MaxRuntimeInSeconds": 600})

    def first_event(self, name):
        group = "/aws/sagemaker/TrainingJobs"
        streams = self.logs.describe_log_streams(logGroupName=group, logStreamNamePrefix=name + "/").get("logStreams", [])
        for s in streams:
            ev = self.logs.get_log_events(logGroupName=group, logStreamName=s["logStreamName"],
                                          startFromHead=True, limit=1).get("events", [])
            if ev:
                return ev[0]["message"]
        return None

    def first_line_ms(self, tag):
        name = f"lat-{tag}"
        t0 = time.time()
        self.create(name, "date +%s%N; echo done")
        line = wait_for(lambda: self.first_event(name), 120, f"the first line of training job {name}")
        return int(line.strip()) / 1e6 - t0 * 1000

    def held(self):
        out = self.c.cmd("squeue", "-h", "-t", "PD,R,CF,CG", "-o", "%j|%Z")
        return [line for line in out.splitlines() if line.startswith("ty-hold-") and self.data + "/" in line]

    def cold_first_line_ms(self, tag, rng):
        wait_for(lambda: not self.held(), 60, "the held allocations to go back to Slurm")
        time.sleep(rng.random())  # as before every sample: not locked onto slurmctld's tick
        return self.first_line_ms(tag)

    def in_progress(self):
        return self.sm.list_training_jobs(StatusEquals="InProgress", MaxResults=1)["TrainingJobSummaries"]

    def throughput(self, n, threads):
        t0 = time.monotonic()
        run_parallel(n, threads, lambda i: self.create(f"tput-{i}", "true"))
        submitted = time.monotonic() - t0
        wait_for(lambda: not self.in_progress(), 3600, f"{n} training jobs", POLL)
        elapsed = time.monotonic() - t0
        done, token = 0, None
        while True:
            kw = {"StatusEquals": "Completed", "NameContains": "tput-", "MaxResults": 100}
            if token:
                kw["NextToken"] = token
            r = self.sm.list_training_jobs(**kw)
            done += len(r["TrainingJobSummaries"])
            token = r.get("NextToken")
            if not token:
                break
        return n / elapsed, submitted, done


# ------------------------------------------------------------------------------------------ main
def measure(side, samples, jobs, threads, rng):
    side.first_line_ms("warmup")  # the first job after start pays for things no later one does
    lat = []
    for i in range(samples):
        time.sleep(rng.random())
        lat.append(side.first_line_ms(str(i)))
    rate, submitted, ok = side.throughput(jobs, threads)
    return {"latency_ms": summary(lat), "throughput_jobs_per_s": rate, "submit_phase_s": submitted,
            "jobs_completed": ok, "jobs": jobs}


def report(results, args):
    print(f"\ncluster: {args.nodes} nodes x {args.cpus} CPUs; {args.samples} latency samples; "
          f"{args.jobs} jobs from {args.threads} threads")
    print(f"{'':15} {'p50 ms':>9} {'p90 ms':>9} {'max ms':>9} {'jobs/s':>8} {'completed':>10}")
    for name, r in results.items():
        lat = r["latency_ms"]
        if "throughput_jobs_per_s" in r:
            print(f"{name:15} {lat['p50']:9.0f} {lat['p90']:9.0f} {lat['max']:9.0f} "
                  f"{r['throughput_jobs_per_s']:8.2f} {r['jobs_completed']:>5}/{r['jobs']}")
        else:
            print(f"{name:15} {lat['p50']:9.0f} {lat['p90']:9.0f} {lat['max']:9.0f}")
    if "sbatch" in results and "trainyard" in results:
        s, t = results["sbatch"], results["trainyard"]
        d50 = t["latency_ms"]["p50"] - s["latency_ms"]["p50"]
        d90 = t["latency_ms"]["p90"] - s["latency_ms"]["p90"]
        ratio = t["throughput_jobs_per_s"] / s["throughput_jobs_per_s"]
        overhead = (1 - ratio) * 100
        p50 = t["latency_ms"]["p50"]
        print(f"\nstart latency with allocations held: p50 {p50:.0f} ms, {d50:+.0f} ms against sbatch "
              f"(target: at most 100 ms; {'met' if p50 <= 100 else f'{p50 - 100:.0f} ms over'})")
        if "trainyard_cold" in results:
            c50 = results["trainyard_cold"]["latency_ms"]["p50"] - s["latency_ms"]["p50"]
            print(f"start latency from cold: p50 {c50:+.0f} ms against sbatch "
                  f"(target: at most +50 ms; {'met' if c50 <= 50 else f'{c50 - 50:.0f} ms over'})")
        print(f"throughput: trainyard/sbatch = {ratio:.2f}x "
              f"(target: at least 1.5x; {'met' if ratio >= 1.5 else f'{1.5 / ratio:.2f}x short'})")
        results["comparison"] = {"latency_p50_overhead_ms": d50, "latency_p90_overhead_ms": d90,
                                 "throughput_ratio": ratio, "throughput_overhead_pct": overhead}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["sbatch", "trainyard"], help="measure one side only")
    ap.add_argument("--samples", type=int, default=30, help="start latency samples per side (default 30)")
    ap.add_argument("--jobs", type=int, default=200, help="jobs for the throughput run (default 200)")
    ap.add_argument("--threads", type=int, default=4, help="parallel submitters (default 4)")
    ap.add_argument("--cold-samples", type=int, default=10,
                    help="trainyard start latency samples with nothing held (default 10; 0: none)")
    ap.add_argument("--nodes", type=int, default=4, help="test cluster nodes (default 4)")
    ap.add_argument("--cpus", type=int, default=4, help="CPUs per node (default 4)")
    ap.add_argument("--bin", default=os.environ.get("TRAINYARD_BIN", os.path.join(HERE, "..", "build", "trainyard")),
                    help="the trainyard binary (default build/trainyard, or $TRAINYARD_BIN)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random pauses before submits")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()

    sides = [args.only] if args.only else ["sbatch", "trainyard"]
    if "trainyard" in sides and not os.access(args.bin, os.X_OK):
        sys.exit(f"slurm_bench: {args.bin} is not an executable trainyard (build it, or --only sbatch)")
    work = tempfile.mkdtemp(prefix="ty-slurm-bench-")
    os.chmod(work, 0o755)
    results = {}
    cluster = SlurmCluster(nodes=args.nodes, cpus_per_node=args.cpus, gpus_per_node=0,
                           memory_mib=args.cpus * 2 * JOB_MEM_MIB)
    try:
        cluster.start()
        for name in sides:
            print(f"[{time.strftime('%H:%M:%S')}] measuring {name}", file=sys.stderr)
            side = SbatchSide(cluster, work) if name == "sbatch" else \
                TrainyardSide(cluster, work, args.bin, args.nodes * args.cpus)
            try:
                results[name] = measure(side, args.samples, args.jobs, args.threads, random.Random(args.seed))
            finally:
                if name == "trainyard":
                    side.stop()
            cluster.wait_idle(timeout=120)
        if "trainyard" in sides and args.cold_samples:
            print(f"[{time.strftime('%H:%M:%S')}] measuring trainyard from cold", file=sys.stderr)
            side = TrainyardSide(cluster, work, args.bin, args.nodes * args.cpus, keep_alive=1, tag="trainyard-cold")
            try:
                rng = random.Random(args.seed)
                side.cold_first_line_ms("warmup", rng)
                results["trainyard_cold"] = {"latency_ms": summary([side.cold_first_line_ms(str(i), rng)
                                                                    for i in range(args.cold_samples)])}
            finally:
                side.stop()
            cluster.wait_idle(timeout=120)
        report(results, args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
