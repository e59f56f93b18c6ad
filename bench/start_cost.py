#!/usr/bin/env python3
"""The cost of starting a job with the default sandbox, and whether it grows with the jobs
already running.

For each --running count (default 0 and 200), a fresh server (build/trainyard, default settings:
SQLite with synchronous=FULL, the local executor with bubblewrap, a storage volume per instance
when the server is root) first starts that many `sleep` jobs on a queue of their own and waits
until every one runs, then measures on another queue, with build/bench/ty_loadgen:

- e2e: --jobs trivial jobs (`true`) from --connections signed clients, until each has ended:
  jobs/s end to end, and CPU per job of the server itself and of its reaped children (each
  attempt's supervisor, bubblewrap, the job);
- startlat: --samples jobs one at a time, submit -> the job's first line (p50, p99);
- the host's mount table (lines of /proc/self/mountinfo) and attached loop devices while the
  background jobs run.

Prints one JSON object per --running count and a summary with the ratio of the CPU per start
between the largest and the smallest count. Run as root for the volume and cgroups.

    python3 bench/start_cost.py [--jobs 1000] [--connections 8] [--running 0 200] [--samples 50]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import Server, kill_attempt_processes  # noqa: E402

LOADGEN = os.path.join(ROOT, "build", "bench", "ty_loadgen")


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After "pid (comm)": utime stime cutime cstime are fields 14-17, here 11-14 (0-based).
    return [int(x) for x in fields[11:15]]


def mount_lines():
    with open("/proc/self/mountinfo") as f:
        return sum(1 for _ in f)


def loop_devices():
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return len([line for line in out.splitlines() if line.strip()])


def environment(ty, name, slots):
    ty("CreateServiceEnvironment", {"serviceEnvironmentName": name, "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                                    "capacityLimits": [{"maxCapacity": slots, "capacityUnit": "NUM_INSTANCES"}]})
    ty("CreateJobQueue", {"jobQueueName": name, "jobQueueType": "SAGEMAKER_TRAINING", "priority": 1,
                          "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": name}]})


def measure(args, running):
    data = tempfile.mkdtemp(prefix="trainyard-start-cost-")
    mark = tempfile.mkdtemp(prefix="trainyard-start-cost-mark-")
    os.chmod(mark, 0o1777)
    slots = args.slots + running
    config = f"""
[executor]
sandbox_binds = ["{mark}"]

[[instance_types]]
name = "ml.m5.large"
count = {slots}
vcpus = 1
memory_mib = 2000
"""
    server = Server(data, config=config).start()
    key, secret = server.credentials()
    env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)

    def ty(op, body):
        subprocess.run([server.bin, "call", "batch", "--endpoint-url", server.url, op, json.dumps(body)],
                       env=env, check=True, capture_output=True)

    def loadgen(mode, *extra):
        out = subprocess.run([LOADGEN, mode, "--endpoint", server.url, "--key", key, "--secret", secret, *extra],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out)

    try:
        environment(ty, "run", args.slots)
        result = {"running": running, "mounts_before": mount_lines(), "loops_before": loop_devices()}
        if running:
            environment(ty, "busy", running)
            loadgen("submit", "--queue", "busy", "--jobs", str(running), "--connections", "4",
                    "--command", "sleep 3600")
            deadline = time.time() + 600
            sm = server.client("sagemaker")
            while True:
                n = 0
                for page in sm.get_paginator("list_training_jobs").paginate(StatusEquals="InProgress"):
                    n += len(page["TrainingJobSummaries"])
                if n >= running:
                    break
                if time.time() > deadline:
                    raise RuntimeError(f"only {n} of {running} background jobs running")
                time.sleep(1)
            time.sleep(2)  # their supervisors settle
        result["mounts_while_running"] = mount_lines()
        result["loops_while_running"] = loop_devices()
        pid = server.proc.pid
        c0 = cpu_ticks(pid)
        e2e = loadgen("e2e", "--queue", "run", "--jobs", str(args.jobs), "--connections", str(args.connections))
        c1 = cpu_ticks(pid)
        hz = os.sysconf("SC_CLK_TCK")
        result["e2e_jobs_per_s"] = round(e2e["jobs_per_second"], 1)
        result["e2e_failed"] = e2e.get("failed", 0)
        result["cpu_server_ms_per_job"] = round((c1[0] + c1[1] - c0[0] - c0[1]) * 1000 / hz / args.jobs, 2)
        result["cpu_children_ms_per_job"] = round((c1[2] + c1[3] - c0[2] - c0[3]) * 1000 / hz / args.jobs, 2)
        result["cpu_ms_per_job"] = round(result["cpu_server_ms_per_job"] + result["cpu_children_ms_per_job"], 2)
        if args.samples:
            lat = loadgen("startlat", "--queue", "run", "--jobs", str(args.samples), "--mark-dir", mark)
            result["first_line_p50_ms"] = round(lat["start_ms_p50"], 1)
            result["first_line_p99_ms"] = round(lat["start_ms_p99"], 1)
        return result
    finally:
        server.stop()
        kill_attempt_processes(data)
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(mark, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1000, help="trivial jobs measured end to end")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--slots", type=int, default=100, help="instances for the measured jobs")
    ap.add_argument("--running", type=int, nargs="+", default=[0, 200], help="background jobs already running")
    ap.add_argument("--samples", type=int, default=50, help="first-line latency samples (0: none)")
    args = ap.parse_args()
    results = []
    for running in args.running:
        r = measure(args, running)
        print(json.dumps(r), flush=True)
        results.append(r)
    lo, hi = results[0], results[-1]
    if len(results) > 1 and lo["cpu_ms_per_job"]:
        print(json.dumps({"cpu_per_start_ratio": round(hi["cpu_ms_per_job"] / lo["cpu_ms_per_job"], 3),
                          "jobs_per_s_ratio": round(hi["e2e_jobs_per_s"] / lo["e2e_jobs_per_s"], 3)}))


if __name__ == "__main__":
    main()
