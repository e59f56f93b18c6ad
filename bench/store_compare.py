#!/usr/bin/env python3
"""The state in PostgreSQL against SQLite, in one run (docs/operations.md, "PostgreSQL").

Two fresh servers, one on SQLite in its data directory (synchronous=FULL, the default) and one
on a private PostgreSQL 15 on this machine (tests/integration/postgres.py: a Unix socket, fsync
on), measured one after the other, --rounds times alternating, with build/bench/ty_loadgen:

  submit    durable SubmitServiceJob throughput into a disabled environment (jobs stay queued),
            --jobs from 4 and from 16 keep-alive connections: each answer after its commit
  latency   submit -> RUNNING on an idle 1-instance environment, one job at a time (--latency-jobs)

    python3 bench/store_compare.py [--jobs 5000] [--latency-jobs 100] [--rounds 2]
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import postgres  # noqa: E402


def start(bin_path, config):
    data = tempfile.mkdtemp(prefix="trainyard-storebench-")
    cfg = os.path.join(data, "bench.toml")
    with open(cfg, "w") as f:
        f.write(config)
    out = open(os.path.join(data, "out"), "w+")
    proc = subprocess.Popen([bin_path, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--config", cfg,
                             "--log-level", "warn"], stdout=out, stderr=open(os.path.join(data, "log"), "w"))
    import time
    for _ in range(300):
        out.seek(0)
        line = out.readline()
        if line.startswith("listening on "):
            break
        if proc.poll() is not None:
            raise RuntimeError(open(os.path.join(data, "log")).read())
        time.sleep(0.05)
    url = line.split()[-1]
    creds = dict(l.strip().split(" = ", 1) for l in open(os.path.join(data, "credentials")) if " = " in l)
    return proc, data, url, creds["aws_access_key_id"], creds["aws_secret_access_key"]


def setup(url, key, secret):
    import boto3
    b = boto3.client("batch", endpoint_url=url, region_name="us-east-1", aws_access_key_id=key, aws_secret_access_key=secret)
    for name, state in (("parked", "DISABLED"), ("idle", "ENABLED")):
        b.create_service_environment(serviceEnvironmentName=name + "-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
                                     state=state, capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}])
        b.create_job_queue(jobQueueName=name, jobQueueType="SAGEMAKER_TRAINING", priority=1,
                           serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": name + "-env"}])


def loadgen(args, mode, url, key, secret, queue, jobs, connections):
    out = subprocess.run([args.loadgen, mode, "--endpoint", url, "--key", key, "--secret", secret, "--queue", queue,
                          "--jobs", str(jobs), "--connections", str(connections)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def running(bin_path, config):
    """A fresh server with the queues of setup(); yields (url, key, secret) and removes it after."""
    proc, data, url, key, secret = start(bin_path, config)
    try:
        setup(url, key, secret)
        yield url, key, secret
    finally:
        proc.terminate()
        proc.wait(60)
        shutil.rmtree(data, ignore_errors=True)


def measure(args, config):
    with running(args.bin, config) as (url, key, secret):
        r = {}
        for c in (4, 16):
            r[f"submit_{c}"] = loadgen(args, "submit", url, key, secret, "parked", args.jobs, c)
        r["latency"] = loadgen(args, "latency", url, key, secret, "idle", args.latency_jobs, 1)
        return r


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "trainyard"))
    p.add_argument("--loadgen", default=os.path.join(ROOT, "build", "bench", "ty_loadgen"))
    p.add_argument("--jobs", type=int, default=5000, help="submits per throughput run (default 5000)")
    p.add_argument("--latency-jobs", type=int, default=100, help="jobs of the latency run (default 100)")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds of both stores (default 2)")
    args = p.parse_args()
    why = postgres.missing()
    if why:
        sys.exit("store_compare: " + why)
    pg = postgres.PrivatePostgres().start()
    results = {"sqlite": [], "postgres": []}
    try:
        for _ in range(args.rounds):
            results["sqlite"].append(measure(args, ""))
            results["postgres"].append(measure(args, f'[store]\nurl = "{pg.new_database()}"\n'))
    finally:
        pg.stop()
    print(json.dumps(results, indent=1), file=sys.stderr)

    def med(store, f):
        return statistics.median(f(r) for r in results[store])

    rows = [("durable submits/s, 4 connections", lambda r: r["submit_4"]["submits_per_second"]),
            ("durable submits/s, 16 connections", lambda r: r["submit_16"]["submits_per_second"])]
    print(f"| figure (median of {args.rounds}) | SQLite | PostgreSQL | PostgreSQL / SQLite |")
    print("|---|---|---|---|")
    for name, f in rows:
        s, q = med("sqlite", f), med("postgres", f)
        print(f"| {name} | {s:,.0f} | {q:,.0f} | {q / s:.2f}× |")
    for pct in ("p50", "p99"):
        f = lambda r, pct=pct: r["latency"][f"submit_to_running_ms_{pct}"]
        s, q = med("sqlite", f), med("postgres", f)
        print(f"| submit → RUNNING {pct}, ms | {s:.1f} | {q:.1f} | {q / s:.2f}× |")


if __name__ == "__main__":
    main()
