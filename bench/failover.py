#!/usr/bin/env python3
"""Failover time of several servers over one PostgreSQL (docs/operations.md, "High availability").

Three servers on one private PostgreSQL 15 (tests/integration/postgres.py) behind HAProxy
(tests/integration/ha.py), the default 3 s lease. A client keeps calling DescribeJobQueues through
HAProxy, one call at a time; --kills times, the leader gets kill -9 and is started again as a
follower. For each kill:

  leaderless   kill -9 -> a server answers GET /healthz?role=leader with 200 (polled every 20 ms)
  client gap   kill -9 -> the client's first answered call through HAProxy after it

and the median and the worst of each, with the lease they are bounded by.

    python3 bench/failover.py [--kills 5] [--servers 3]
"""
import argparse
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import boto3  # noqa: E402
import botocore.config  # noqa: E402

import ha  # noqa: E402
import postgres  # noqa: E402
from harness import REGION, kill_attempt_processes  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--servers", type=int, default=3)
    args = ap.parse_args()
    if ha.missing():
        sys.exit(ha.missing())
    pg = postgres.PrivatePostgres().start()
    cluster = None
    try:
        cluster = ha.Cluster(pg, n=args.servers)
        key, secret = cluster.endpoint.credentials()
        batch = boto3.client("batch", endpoint_url=cluster.proxy.url, region_name=REGION, aws_access_key_id=key,
                             aws_secret_access_key=secret,
                             config=botocore.config.Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10))
        answered = []  # monotonic times of answered calls
        stop = threading.Event()

        def load():
            while not stop.is_set():
                try:
                    batch.describe_job_queues()
                    answered.append(time.monotonic())
                except Exception:
                    time.sleep(0.01)

        t = threading.Thread(target=load)
        t.start()
        leaderless, gaps = [], []
        for k in range(args.kills):
            time.sleep(2.0)
            leader = cluster.leader()
            cluster.servers[leader].kill9()
            killed = time.monotonic()
            cluster.leader(exclude=(leader,), timeout=60)
            leaderless.append(time.monotonic() - killed)
            while not any(a > killed for a in answered[-50:]):
                time.sleep(0.01)
            gaps.append(min(a for a in answered[-50:] if a > killed) - killed)
            print(f"kill {k + 1}: leaderless {leaderless[-1]:.2f} s, client gap {gaps[-1]:.2f} s", flush=True)
            cluster.start(leader)
        stop.set()
        t.join()
        print(f"\n{args.servers} servers, lease 3 s, {args.kills} kills of the leader:")
        print(f"  leaderless  median {statistics.median(leaderless):.2f} s, worst {max(leaderless):.2f} s")
        print(f"  client gap  median {statistics.median(gaps):.2f} s, worst {max(gaps):.2f} s (target <= 5 s)")
    finally:
        if cluster:
            cluster.stop()
            kill_attempt_processes(cluster.data_dir)
        pg.stop()


if __name__ == "__main__":
    main()
