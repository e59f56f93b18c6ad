#!/usr/bin/env python3
"""CloudWatch read cost and series memory (docs/metrics.md, "Limits on what a read may cost"):
METRICS metrics filled through PutMetricData with DAYS days of minute points of VALUES values
each, then GetMetricData with EXPRS `SUM(METRICS())` expressions over the whole window (the
security review's call: 20 metrics, 480 expressions, 13 days), once alone and PARALLEL at once,
and the heaviest call the limit lets through (as many expressions as fit), PARALLEL at once. Prints
each call's time and answer, and the server's resident memory before and after each step.

    python3 bench/cloudwatch_cost.py [--metrics 20] [--days 13] [--values 16] [--exprs 480] [--parallel 4]
                                     [--bin build/trainyard]
"""
import argparse
import concurrent.futures
import datetime
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("TRAINYARD_SOURCE_DIR", ROOT)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", type=int, default=20)
    ap.add_argument("--days", type=int, default=13)
    ap.add_argument("--values", type=int, default=16)
    ap.add_argument("--exprs", type=int, default=480)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "trainyard"))
    args = ap.parse_args()
    os.environ["TRAINYARD_BIN"] = os.path.abspath(args.bin)
    from harness import Server  # after TRAINYARD_BIN is set
    from botocore.exceptions import ClientError
    data_dir = tempfile.mkdtemp(prefix="trainyard-cwcost-")
    server = Server(data_dir, config="[cloudwatch]\nmax_series_bytes = 1073741824\n").start()
    try:
        cw = server.client("cloudwatch")

        def rss_mib():
            with open(f"/proc/{server.proc.pid}/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
        rss_empty = rss_mib()
        minutes = args.days * 1440
        end = datetime.datetime.now(datetime.timezone.utc).replace(second=0, microsecond=0)
        start = end - datetime.timedelta(minutes=minutes)
        values = [float(k) for k in range(args.values)]
        t = time.perf_counter()
        for m in range(args.metrics):
            dims = [{"Name": "Series", "Value": f"s{m:03d}"}]
            for first in range(0, minutes, 1000):
                cw.put_metric_data(Namespace="Bench/Cost", MetricData=[
                    {"MetricName": "Value", "Dimensions": dims, "Values": values,
                     "Timestamp": start + datetime.timedelta(minutes=k)} for k in range(first, min(first + 1000, minutes))])
        rss_filled = rss_mib()
        print(f"fill: {args.metrics} metrics x {minutes} minutes x {args.values} values in {time.perf_counter() - t:.0f} s; "
              f"RSS {rss_empty:.0f} -> {rss_filled:.0f} MiB = {(rss_filled - rss_empty) / args.metrics:.2f} MiB per metric",
              flush=True)
        metric_queries = [{"Id": f"m{m}", "ReturnData": False, "MetricStat": {"Metric": {
            "Namespace": "Bench/Cost", "MetricName": "Value", "Dimensions": [{"Name": "Series", "Value": f"s{m:03d}"}]},
            "Period": 60, "Stat": "Sum"}} for m in range(args.metrics)]

        def call(exprs):
            q = metric_queries + [{"Id": f"e{i}", "Expression": "SUM(METRICS())"} for i in range(exprs)]
            t = time.perf_counter()
            try:
                r = cw.get_metric_data(MetricDataQueries=q, StartTime=start, EndTime=end, MaxDatapoints=100800)
                what = f"{sum(len(x['Values']) for x in r['MetricDataResults'])} points"
            except ClientError as e:
                what = f"{e.response['Error']['Code']}: {e.response['Error']['Message'][:90]}..."
            return time.perf_counter() - t, what

        def step(name, exprs, n):
            before = rss_mib()
            with concurrent.futures.ThreadPoolExecutor(n) as pool:
                results = list(pool.map(lambda _: call(exprs), range(n)))
            after = rss_mib()
            for took, what in results[:1]:
                print(f"{name}: {n} call(s) of {exprs} expressions: {max(r[0] for r in results):.2f} s (slowest); {what}; "
                      f"RSS {before:.0f} -> {after:.0f} MiB", flush=True)
        step("review's call, alone", args.exprs, 1)
        step("review's call, in parallel", args.exprs, args.parallel)
        # The most expressions the 2,000,000-point limit lets through over this window.
        grid = minutes
        fit = max(0, (2_000_000 - args.metrics * grid) // ((args.metrics + 1) * grid))
        step("heaviest allowed call, alone", fit, 1)
        step("heaviest allowed call, in parallel", fit, args.parallel)
    finally:
        server.stop()
        import shutil
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
