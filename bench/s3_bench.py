#!/usr/bin/env python3
"""S3 PUT and GET throughput on loopback: trainyard's S3 endpoint against moto_server, one run.

Starts a trainyard server (embedded buckets, its defaults) and a moto_server on this host, then
for each object size (1 MiB and 64 MiB by default) and each server:

  PUT: boto3 put_object of one object (a single request, the body in memory), --reps times;
  GET: boto3 get_object of that object, the body read whole, --reps times.

Reports the median MiB/s of each, per server, and trainyard's ratio to moto's, and the CPU time
each server process spent per PUT (user + system, from /proc, over all the PUTs of a size). The client is
boto3 on the same two cores as the servers, and it hashes every body it sends (SHA-256 for the
signature over http, CRC32 for the checksum), so the figures are what a Python client on this
host gets, not the server's ceiling; compare the ratio. --sizes takes MiB values.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import boto3  # noqa: E402
import botocore.config  # noqa: E402
from harness import REGION, MotoServer, Server  # noqa: E402


def trainyard_client(server):
    key, secret = server.credentials()
    return boto3.client("s3", endpoint_url=server.url, region_name=REGION, aws_access_key_id=key,
                        aws_secret_access_key=secret,
                        config=botocore.config.Config(retries={"max_attempts": 1},
                                                      s3={"addressing_style": "path"}))


def cpu_seconds(pid):
    """User + system CPU time of process `pid` so far (its threads included)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(client, bucket, size, reps, pid):
    body = os.urandom(size)
    put, get = [], []
    cpu0 = cpu_seconds(pid)
    for i in range(reps):
        t0 = time.perf_counter()
        client.put_object(Bucket=bucket, Key=f"bench/{size}", Body=body)
        put.append(time.perf_counter() - t0)
    put_cpu_ms = (cpu_seconds(pid) - cpu0) / reps * 1000
    for i in range(reps):
        t0 = time.perf_counter()
        data = client.get_object(Bucket=bucket, Key=f"bench/{size}")["Body"].read()
        get.append(time.perf_counter() - t0)
        assert len(data) == size
    mib = size / (1024 * 1024)
    return mib / statistics.median(put), mib / statistics.median(get), put_cpu_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,64", help="object sizes in MiB, comma-separated (default 1,64)")
    ap.add_argument("--reps", type=int, default=15, help="requests per size, operation and server (default 15)")
    ap.add_argument("--bin", default=None, help="the trainyard binary (default build/trainyard)")
    args = ap.parse_args()
    sizes = [int(float(s) * 1024 * 1024) for s in args.sizes.split(",")]

    with tempfile.TemporaryDirectory(prefix="ty-s3bench-") as data:
        server = Server(data, bin=args.bin).start()
        moto = MotoServer().start()
        try:
            clients = {"trainyard": trainyard_client(server), "moto": moto.client()}
            pids = {"trainyard": server.proc.pid, "moto": moto.proc.pid}
            for c in clients.values():
                c.create_bucket(Bucket="bench")
            print(f"{'size':>8} {'server':>10} {'PUT MiB/s':>10} {'GET MiB/s':>10} {'CPU ms/PUT':>11}")
            for size in sizes:
                rows = {}
                for name, c in clients.items():
                    rows[name] = measure(c, "bench", size, args.reps, pids[name])
                    print(f"{size // (1024 * 1024):>6}Mi {name:>10} {rows[name][0]:>10.1f} {rows[name][1]:>10.1f}"
                          f" {rows[name][2]:>11.1f}")
                t, m = rows["trainyard"], rows["moto"]
                print(f"{size // (1024 * 1024):>6}Mi {'ratio':>10} {t[0] / m[0]:>9.2f}x {t[1] / m[1]:>9.2f}x")
        finally:
            moto.stop()
            server.stop()


if __name__ == "__main__":
    main()
