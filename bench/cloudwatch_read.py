#!/usr/bin/env python3
"""CloudWatch API read cost (docs/metrics.md, "The CloudWatch API"): SERIES metrics filled through
PutMetricData with one point a minute for HOURS hours, then GetMetricData over all of them for the
whole window at 1-minute resolution (every page, MaxDatapoints 100,800 as AWS allows), a
SUM(METRICS()) over 499 of them, and GetMetricStatistics of one; plus the stored bytes per metric
per day (the documents in the state) and the server's resident memory after the fill and after
the reads. The whole-window read is also split into the time until the reply's bytes are in
(the server's work and the transfer) and the client's decoding of them (botocore's CBOR parser).

    python3 bench/cloudwatch_read.py [--series 1000] [--hours 24] [--reps 3] [--bin build/trainyard]
"""
import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("TRAINYARD_SOURCE_DIR", ROOT)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "trainyard"))
    args = ap.parse_args()
    os.environ["TRAINYARD_BIN"] = os.path.abspath(args.bin)
    from harness import Server  # after TRAINYARD_BIN is set
    data_dir = tempfile.mkdtemp(prefix="trainyard-cwbench-")
    server = Server(data_dir, config="[cloudwatch]\nmax_series = %d\n" % max(args.series, 1)).start()
    try:
        cw = server.client("cloudwatch")
        # Request signed -> reply received (the server's share) versus the reply's parsing (the client's).
        marks = {"server": 0.0, "sent": 0.0}
        cw.meta.events.register("request-created.cloudwatch.GetMetricData", lambda **_: marks.update(sent=time.perf_counter()))
        cw.meta.events.register("before-parse.cloudwatch.GetMetricData",
                                lambda **_: marks.update(server=marks["server"] + time.perf_counter() - marks["sent"]))

        def rss_mib():
            with open(f"/proc/{server.proc.pid}/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
        minutes = args.hours * 60
        end = datetime.datetime.now(datetime.timezone.utc).replace(second=0, microsecond=0)
        start = end - datetime.timedelta(minutes=minutes)
        t = time.perf_counter()
        calls = 0
        for s in range(args.series):
            dims = [{"Name": "Series", "Value": f"s{s:05d}"}]
            for first in range(0, minutes, 1000):
                cw.put_metric_data(Namespace="Bench/Read", MetricData=[
                    {"MetricName": "Value", "Dimensions": dims, "Value": float((s + m) % 97),
                     "Timestamp": start + datetime.timedelta(minutes=m)} for m in range(first, min(first + 1000, minutes))])
                calls += 1
        fill_s = time.perf_counter() - t
        rss_filled = rss_mib()
        stored = int(server.store_query("SELECT sum(length(doc)) FROM meta WHERE key LIKE 'cloudwatch/%'"))
        docs = int(server.store_query("SELECT count(*) FROM meta WHERE key LIKE 'cloudwatch/%'"))
        queries = [{"Id": f"m{s}", "MetricStat": {"Metric": {"Namespace": "Bench/Read", "MetricName": "Value",
                   "Dimensions": [{"Name": "Series", "Value": f"s{s:05d}"}]}, "Period": 60, "Stat": "Average"}}
                   for s in range(args.series)]

        def read_all():
            got, pages = 0, 0
            for chunk in range(0, len(queries), 500):
                token = None
                while True:
                    kw = {"NextToken": token} if token else {}
                    r = cw.get_metric_data(MetricDataQueries=queries[chunk:chunk + 500], StartTime=start, EndTime=end,
                                           MaxDatapoints=100800, **kw)
                    pages += 1
                    got += sum(len(x["Values"]) for x in r["MetricDataResults"])
                    token = r.get("NextToken")
                    if not token:
                        break
            return got, pages

        def timed(fn):
            out = []
            for _ in range(args.reps):
                t = time.perf_counter()
                result = fn()
                out.append(time.perf_counter() - t)
            return statistics.median(out), result

        print(f"series={args.series} hours={args.hours} points={args.series * minutes} fill={fill_s:.1f}s ({calls} PutMetricData calls)", flush=True)
        marks["server"] = 0.0
        whole, (points, pages) = timed(read_all)
        server_share = marks["server"] / args.reps
        summed, _ = timed(lambda: cw.get_metric_data(MetricDataQueries=[dict(q, ReturnData=False) for q in queries[:499]] + [
            {"Id": "total", "Expression": "SUM(METRICS())"}], StartTime=start, EndTime=end))
        one, _ = timed(lambda: cw.get_metric_statistics(Namespace="Bench/Read", MetricName="Value",
                                                        Dimensions=[{"Name": "Series", "Value": "s00000"}], StartTime=start,
                                                        EndTime=end, Period=60, Statistics=["Average", "Maximum"]))
        rss = rss_mib()
        days = args.hours / 24
        print(f"GetMetricData, every series, whole window, 1 min: {whole * 1000:.0f} ms median for {points} points in {pages} pages "
              f"({whole * 1000 / pages:.0f} ms per page; until the reply is in: {server_share * 1000:.0f} ms per read, "
              f"the rest is the client's parsing)")
        print(f"GetMetricData, SUM(METRICS()) over 499 series: {summed * 1000:.0f} ms median")
        print(f"GetMetricStatistics, one series, 1 min: {one * 1000:.1f} ms median")
        print(f"stored: {stored} bytes in {docs} documents = {stored / args.series / days:.0f} bytes per series per day; "
              f"server RSS {rss_filled:.0f} MiB after the fill, {rss:.0f} MiB after the reads")
    finally:
        server.stop()
        import shutil
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
