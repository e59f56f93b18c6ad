#!/usr/bin/env python3
"""The web console's pages at depth: time to first paint and to data with N jobs queued.

A fresh server (as bench/pass_scale.py makes it: three queues, fifo, fair and quota, whose four
ml.m5.large instances are held by long jobs) is filled with N jobs (default 100,000, a third per
queue, through `ty_loadgen fill`), so that every one of them waits. Then headless Chromium
(Debian's, through console/tests/browser_driver.mjs) signs in and loads each page --runs times
from a fresh navigation:

  queue     #/queues/fair   data: the first row of the front of the queue
  jobs      #/jobs?queue=fifo&status=RUNNABLE   data: the first job row
  overview  #/              data: the fair queue's row
  job       #/jobs/<a queued job>?id=<its id>   data: its wait reason

For each page: first contentful paint (the browser's own mark) and time to data (from the
navigation's start until the data's element is in the page), median and max. The peer, measured
in the same run on the same server: the same pages with the queues nearly empty (before the
fill), so the ratio says what depth costs.

    python3 bench/console_load.py [--jobs 100000] [--runs 5] [--json FILE]
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import browser  # noqa: E402  (tests/integration/browser.py)
import pass_scale  # noqa: E402

PAGES = [
    ("queue", "/queues/fair", '[data-testid="front-row"]'),
    ("jobs", "/jobs?queue=fifo&status=RUNNABLE", '[data-testid="job-row"]'),
    ("overview", "/", '[data-testid="queue-row"][data-queue="fair"]'),
    ("job", None, '[data-testid="wait-reason"]'),
]


def sign_in(b, s):
    b.goto(s.url + "/console/")
    b.fill("signin-access-key-id", s.key)
    b.fill("signin-secret-access-key", s.secret)
    b.click("signin-button")
    b.wait("page-overview")


def load(b, s, fragment, selector):
    """One fresh load of a page: (first contentful paint ms, time to data ms)."""
    b.goto("about:blank")
    b.goto(s.url + "/console/#" + fragment)
    b.do("wait", sel=selector, timeout=60000)
    data_ms = b.eval("performance.now()")
    paint = b.do("paint")
    return paint["fcp"], data_ms


def measure(b, s, runs, job):
    out = {}
    for name, fragment, selector in PAGES:
        if fragment is None:
            fragment = f"/jobs/{job[0]}?id={job[1]}"
        fcp, data = [], []
        for _ in range(runs):
            f, d = load(b, s, fragment, selector)
            fcp.append(f)
            data.append(d)
        out[name] = {"fcp_ms_median": statistics.median(fcp), "fcp_ms_max": max(fcp),
                     "data_ms_median": statistics.median(data), "data_ms_max": max(data)}
        pass_scale.log(f"  {name}: first paint {out[name]['fcp_ms_median']:.0f} ms, data {out[name]['data_ms_median']:.0f} ms "
                       f"(median of {runs}; max {out[name]['data_ms_max']:.0f} ms)")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "trainyard"), help="trainyard binary")
    p.add_argument("--loadgen", default=os.path.join(ROOT, "build", "bench", "ty_loadgen"), help="ty_loadgen binary")
    p.add_argument("--jobs", type=int, default=100000, help="jobs queued (default 100,000)")
    p.add_argument("--runs", type=int, default=5, help="loads of each page (default 5)")
    p.add_argument("--connections", type=int, default=300, help="fill connections in all (default 300)")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    why = browser.missing()
    if why:
        sys.exit("console_load: " + why)
    # What pass_scale's fill reads from its arguments.
    args.shares, args.quota_shares, args.fill_timeout, args.progress_seconds = 50, 10, 900, 10
    s = pass_scale.Server(args.bin, 64)
    long_jobs = []
    b = None
    try:
        long_jobs = pass_scale.setup(s, args.shares, args.quota_shares)
        # One waiting job in each of the pages' queues, so the peer's pages have their data too.
        for q, extra in (("fifo", {}), ("fair", {"shareIdentifier": "team1"})):
            job_id = s.batch.submit_service_job(jobName=f"probe-{q}", jobQueue=q, serviceJobType="SAGEMAKER_TRAINING",
                                                serviceRequestPayload=pass_scale.payload(f"probe-{q}", "true"),
                                                **extra)["jobId"]
        job = ("probe-fair", job_id)
        b = browser.Browser()
        sign_in(b, s)
        pass_scale.log("pages with the queues nearly empty (the peer)")
        empty = measure(b, s, args.runs, job)
        pass_scale.log(f"filling {args.jobs:,} jobs")
        fill = pass_scale.fill(s, args, args.jobs)
        _, _, jobs = s.metrics()
        queued = sum(v for (q, st), v in jobs.items() if st == "RUNNABLE")
        pass_scale.log(f"pages with {queued:,} jobs queued")
        deep = measure(b, s, args.runs, job)
        result = {"queued": queued, "fill": fill, "empty": empty, "deep": deep}
        print(f"\n{queued:,} jobs queued; {args.runs} loads of each page, median (max), ms\n")
        print("| page | first paint, empty | first paint, deep | data, empty | data, deep | deep / empty |")
        print("|---|---|---|---|---|---|")
        for name, _, _ in PAGES:
            e, d = empty[name], deep[name]
            print(f"| {name} | {e['fcp_ms_median']:.0f} | {d['fcp_ms_median']:.0f} | {e['data_ms_median']:.0f} "
                  f"({e['data_ms_max']:.0f}) | {d['data_ms_median']:.0f} ({d['data_ms_max']:.0f}) | "
                  f"{d['data_ms_median'] / max(e['data_ms_median'], 1):.2f}× |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
    finally:
        if b:
            b.close()
        s.stop(long_jobs)


if __name__ == "__main__":
    main()
