#!/usr/bin/env python3
"""Durable signed submits of two builds, alternated in one run (bench/README.md, "Durable signed
submits").

Each round starts a fresh server of each build with the embedded defaults (SQLite,
synchronous=FULL), a queue whose service environment is DISABLED (nothing runs), and sends
`ty_loadgen submit --jobs N --connections C --command true` to it; the builds take turns, so both
see the same machine.

    python3 bench/submit_ab.py --bin before/build/trainyard --bin build/trainyard [--jobs 20000]
        [--connections 16] [--rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess

from store_compare import ROOT, running


def submits(args, bin_path):
    with running(bin_path, "") as (url, key, secret):
        out = subprocess.run([args.loadgen, "submit", "--endpoint", url, "--key", key, "--secret", secret,
                              "--queue", "parked", "--jobs", str(args.jobs), "--connections", str(args.connections),
                              "--command", "true"], capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", action="append", required=True, help="a trainyard binary; give two")
    p.add_argument("--loadgen", default=os.path.join(ROOT, "build", "bench", "ty_loadgen"))
    p.add_argument("--jobs", type=int, default=20000)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    runs = {b: [] for b in args.bin}
    for _ in range(args.rounds):
        for b in args.bin:
            r = submits(args, b)
            runs[b].append(r)
            print(f"{b}: {r['submits_per_second']:,.0f}/s", flush=True)
    print(f"| build (median of {args.rounds}) | submits/s | p50 ms | p99 ms |")
    print("|---|---|---|---|")
    for b, rs in runs.items():
        med = lambda k: statistics.median(r[k] for r in rs if k in r)
        print(f"| {b} | {med('submits_per_second'):,.0f} | {med('request_ms_p50'):.1f} | {med('request_ms_p99'):.1f} |")


if __name__ == "__main__":
    main()
