#!/usr/bin/env python3
"""The whole server-side scheduling pass at depth: a real server with N jobs queued through the API.

For each N (default 100,000 and 1,000,000) a fresh server (embedded defaults but for
[server] http_threads = --http-threads, its own data dir under /tmp) gets three queues on the
default catalogue's four ml.m5.large instances:

  fifo   a FIFO queue (priority 10)
  fair   a fair-share queue (priority 5) whose jobs carry one of --shares share identifiers
         (Zipf: a few teams submit most) and a scheduling priority 0..9
  quota  a quota-share queue with --quota-shares shares of 2 instances each

Four long jobs (one in fifo, one in fair, two in quota) hold every ml.m5.large instance, so the
N jobs filled in next (a third per queue, one in ten asking for two instances, from
`ty_loadgen fill` over --connections keep-alive connections with SigV4-signed SubmitServiceJob
calls) all wait on capacity, and every pass has all of them to consider. Each controller turn
runs a pass, so while passes are slow the fill's rate is the requests in flight (at most
http_threads; they share one turn and its commit) over the turn's duration: hence the many
connections. A fill that has not ended after --fill-timeout seconds is stopped and the passes
are measured at the depth it reached. Then passes are forced in two ways:

  ticks    nothing is sent for --tick-seconds: the fair-share queue's usage decays, so the
           controller runs a pass every 500 ms on its own
  trickle  --trickle single submits, in turn to each queue, each followed by the pass it causes

A pass's duration is read from GET /metrics: trainyard_scheduler_pass_duration_seconds' _sum and
_count are scraped every 20 ms, and a scrape that saw exactly one new pass gives that pass's
duration exactly (the difference of the sums; the buckets are too coarse at this depth), and a
scrape that saw k passes (at depth turns run back to back) gives their mean, counted k times.
Also reported: submit throughput of the fill, the mean pass duration during the fill, the
server's RSS (and its peak) before and after the fill, and the trickle submits' latency.

Usage:
  bench/pass_scale.py [--bin build/trainyard] [--jobs 100000,1000000] [--json FILE]

--bin is the server binary measured (trainyard-supervisor must lie beside it), so that the same
script measures any build; --loadgen is the load generator (default build/bench/ty_loadgen).
Everything the script started is stopped at the end, and the data dir removed.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LONG = "exec sleep 86400"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


class Server:
    def __init__(self, bin_path, http_threads):
        self.bin = bin_path
        self.data = tempfile.mkdtemp(prefix="trainyard-passbench-")
        cfg = os.path.join(self.data, "bench.toml")
        with open(cfg, "w") as f:
            f.write(f"[server]\nhttp_threads = {http_threads}\n[executor]\nstop_grace_seconds = 2\n")
        self.out = open(os.path.join(self.data, "out"), "w")
        self.err = open(os.path.join(self.data, "log"), "w")
        self.proc = subprocess.Popen([bin_path, "serve", "--listen", "127.0.0.1:0", "--data-dir", self.data,
                                      "--config", cfg, "--log-level", "warn"], stdout=self.out, stderr=self.err,
                                     start_new_session=True)  # a ^C reaches the script, which stops it in order
        deadline = time.time() + 30
        self.url = None
        while time.time() < deadline and not self.url:
            with open(os.path.join(self.data, "out")) as f:
                for line in f:
                    if line.startswith("listening on "):
                        self.url = line.split()[-1]
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.data}/log")
            time.sleep(0.05)
        if not self.url:
            raise RuntimeError("server did not start listening")
        creds = {}
        with open(os.path.join(self.data, "credentials")) as f:
            for line in f:
                if " = " in line:
                    k, v = line.strip().split(" = ", 1)
                    creds[k] = v
        self.key, self.secret = creds["aws_access_key_id"], creds["aws_secret_access_key"]
        import boto3
        import botocore.config
        cfg = botocore.config.Config(retries={"max_attempts": 0}, read_timeout=600)
        self.batch = boto3.client("batch", endpoint_url=self.url, region_name="us-east-1", aws_access_key_id=self.key,
                                  aws_secret_access_key=self.secret, config=cfg)
        host, port = self.url[len("http://"):].split(":")
        self.metrics_conn = http.client.HTTPConnection(host, int(port), timeout=600)

    def status(self, field):
        """VmRSS or VmHWM of the server, in KiB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def metrics(self):
        """(passes, sum of their seconds, {(queue, status): jobs}) from GET /metrics."""
        self.metrics_conn.request("GET", "/metrics")
        body = self.metrics_conn.getresponse().read().decode()
        count = total = 0.0
        jobs = {}
        for line in body.splitlines():
            if line.startswith("trainyard_scheduler_pass_duration_seconds_count "):
                count = float(line.split()[1])
            elif line.startswith("trainyard_scheduler_pass_duration_seconds_sum "):
                total = float(line.split()[1])
            elif line.startswith("trainyard_jobs{"):
                labels, value = line.rsplit(" ", 1)
                lab = dict(kv.split("=", 1) for kv in labels[len("trainyard_jobs{"):-1].split(","))
                jobs[(lab["queue"].strip('"'), lab["status"].strip('"'))] = int(float(value))
        return int(count), total, jobs

    def supervisors(self):
        """Pids of the attempts' supervisors (detached from the server): found by the data dir on
        their command line."""
        pids = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().decode(errors="replace")
            except OSError:
                continue
            if self.data in cmd and "supervis" in cmd:
                pids.append(int(pid))
        return pids

    def stop(self, long_jobs):
        """Ends the long jobs, the server, and waits for every supervisor it started to exit (each
        unmounts its job's volumes as it ends, so none is killed)."""
        try:
            # Nothing may start once the long jobs free their instances.
            for env in ("fifo-env", "fair-env", "quota-env"):
                self.batch.update_service_environment(serviceEnvironment=env, state="DISABLED")
            for j in long_jobs:
                self.batch.terminate_service_job(jobId=j, reason="benchmark over")
            deadline = time.time() + 60
            while time.time() < deadline:
                live = [j for q in ("fifo", "fair", "quota") for st in ("SCHEDULED", "STARTING", "RUNNING")
                        for j in self.batch.list_service_jobs(jobQueue=q, jobStatus=st)["jobSummaryList"]]
                if not live:
                    break
                time.sleep(0.5)
        except Exception as e:  # the server may already be gone
            log(f"ending the jobs: {e}")
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        deadline = time.time() + 60
        while self.supervisors() and time.time() < deadline:
            time.sleep(0.5)
        if self.supervisors():
            # The server could not end them (it was interrupted): SIGTERM stops a supervisor's job
            # within its grace, and the supervisor then unmounts and exits as after any stop.
            log("stopping the supervisors left running")
            for pid in self.supervisors():
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
            deadline = time.time() + 30
            while self.supervisors() and time.time() < deadline:
                time.sleep(0.5)
        left = self.supervisors()
        if left:
            log(f"supervisors still running after 60 s, left alone: {left}; data dir {self.data} kept")
            return
        shutil.rmtree(self.data, ignore_errors=True)


def payload(name, command, runtime=600):
    return json.dumps({
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
        "AlgorithmSpecification": {"TrainingImage": "local/shell", "TrainingInputMode": "File",
                                   "ContainerEntrypoint": ["/bin/sh", "-c"], "ContainerArguments": [command]},
        "OutputDataConfig": {"S3OutputPath": "s3://bench/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": runtime}})


def setup(s, shares, quota_shares):
    b = s.batch
    for name, cap in (("fifo", 2), ("fair", 2)):
        b.create_service_environment(serviceEnvironmentName=name + "-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
                                     capacityLimits=[{"maxCapacity": cap, "capacityUnit": "NUM_INSTANCES"}])
    b.create_job_queue(jobQueueName="fifo", jobQueueType="SAGEMAKER_TRAINING", priority=10,
                       serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "fifo-env"}])
    # A few teams with weights of their own; the rest take the default weight.
    dist = [{"shareIdentifier": f"team{k}", "weightFactor": w} for k, w in ((0, 4.0), (1, 2.0), (2, 0.5))]
    arn = b.create_scheduling_policy(name="fair-policy", fairsharePolicy={"shareDecaySeconds": 600,
                                                                          "shareDistribution": dist})["arn"]
    b.create_job_queue(jobQueueName="fair", jobQueueType="SAGEMAKER_TRAINING", priority=5, schedulingPolicyArn=arn,
                       serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "fair-env"}])
    b.create_service_environment(serviceEnvironmentName="quota-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
                                 capacityLimits=[{"maxCapacity": 2 * quota_shares, "capacityUnit": "ml.m5.large"}])
    arn = b.create_scheduling_policy(name="quota-policy",
                                     quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"})["arn"]
    b.create_job_queue(jobQueueName="quota", jobQueueType="SAGEMAKER_TRAINING", priority=1, schedulingPolicyArn=arn,
                       serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "quota-env"}])
    for k in range(quota_shares):
        b.create_quota_share(jobQueue="quota", quotaShareName=f"q{k}",
                             capacityLimits=[{"maxCapacity": 2, "capacityUnit": "ml.m5.large"}],
                             resourceSharingConfiguration={"strategy": "LEND_AND_BORROW"},
                             preemptionConfiguration={"inSharePreemption": "DISABLED"})
    # The long jobs: they hold all four ml.m5.large instances for the whole run.
    long_jobs = []
    for q, extra in (("fifo", {}), ("fair", {"shareIdentifier": "team0"}), ("quota", {"quotaShareName": "q0"}),
                     ("quota", {"quotaShareName": "q1"})):
        name = f"long-{len(long_jobs)}"
        long_jobs.append(b.submit_service_job(jobName=name, jobQueue=q, serviceJobType="SAGEMAKER_TRAINING",
                                              serviceRequestPayload=payload(name, LONG, 86400), **extra)["jobId"])
    deadline = time.time() + 60
    while time.time() < deadline:
        if all(b.describe_service_job(jobId=j)["status"] == "RUNNING" for j in long_jobs):
            return long_jobs
        time.sleep(0.2)
    raise RuntimeError("the long jobs did not reach RUNNING")


def fill(s, args, n):
    """Submits n jobs, a third per queue, from three loadgens at once; returns figures."""
    per = [n // 3 + (1 if k < n % 3 else 0) for k in range(3)]
    extra = {"fifo": [], "fair": ["--share-ids", str(args.shares), "--priorities", "10"],
             "quota": ["--quota-shares", str(args.quota_shares)]}
    conns = max(1, args.connections // 3)
    procs = {}
    t0 = time.time()
    count0, sum0, _ = s.metrics()
    for q, k in zip(("fifo", "fair", "quota"), per):
        procs[q] = subprocess.Popen([args.loadgen, "fill", "--endpoint", s.url, "--key", s.key, "--secret", s.secret,
                                     "--queue", q, "--jobs", str(k), "--connections", str(conns), "--prefix", q + "-"]
                                    + extra[q],
                                    stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        return fill_wait(s, args, n, procs, t0, count0, sum0)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                p.wait()


def fill_wait(s, args, n, procs, t0, count0, sum0):
    # Progress: queued jobs and the mean pass duration, every --progress-seconds.
    progress = []
    stopped = False
    last = (t0, count0, sum0, 0)
    while True:
        time.sleep(0.1)
        if all(p.poll() is not None for p in procs.values()):
            break
        if time.time() - last[0] < args.progress_seconds:
            continue
        c, su, jobs = s.metrics()
        queued = sum(v for (q, st), v in jobs.items() if st in ("SUBMITTED", "RUNNABLE"))
        now = time.time()
        rate = (queued - last[3]) / (now - last[0])
        mean_pass = (su - last[2]) / (c - last[1]) if c > last[1] else None
        progress.append({"t": round(now - t0, 1), "queued": queued, "submits_per_second": round(rate),
                         "passes": c - last[1], "mean_pass_ms": None if mean_pass is None else round(mean_pass * 1e3, 2)})
        log(f"  {queued:,} queued, {rate:,.0f}/s, {c - last[1]} passes"
            + ("" if mean_pass is None else f", mean {mean_pass * 1e3:.1f} ms") + f", RSS {s.status('VmRSS') / 1024:.0f} MB")
        last = (now, c, su, queued)
        if args.fill_timeout and now - t0 > args.fill_timeout:
            log(f"  fill stopped after {args.fill_timeout} s")
            stopped = True
            for p in procs.values():
                if p.poll() is None:
                    p.terminate()
    secs = time.time() - t0
    results = {}
    for q, p in procs.items():
        out = p.stdout.read().strip()
        if p.wait() != 0 and not stopped:
            raise RuntimeError(f"ty_loadgen fill --queue {q} failed ({p.returncode})")
        results[q] = json.loads(out) if out else {"killed": True}
    count1, sum1, jobs = s.metrics()
    queued = sum(v for (q, st), v in jobs.items() if st in ("SUBMITTED", "RUNNABLE"))
    return {"jobs_asked": n, "queued": queued, "stopped_by_timeout": stopped, "seconds": secs, "submits_per_second": queued / secs,
            "passes": count1 - count0, "mean_pass_ms": (sum1 - sum0) / (count1 - count0) * 1e3 if count1 > count0 else None,
            "loadgens": results, "progress": progress}


def watch_passes(s, seconds, until=False, since=None):
    """Scrapes /metrics every 20 ms for `seconds` (with `until`, only until a pass was seen), from
    the scrape `since` (passes, sum) or a new one. Returns [(passes, seconds)] per scrape that saw
    any: one pass is timed exactly; k passes back to back (a scrape waits for the turn that holds
    the state lock, and at depth the next turn may start first) give their mean."""
    seen = []
    c0, s0 = since or s.metrics()[:2]
    deadline = time.time() + seconds
    while time.time() < deadline:
        time.sleep(0.02)
        c, su, _ = s.metrics()
        if c > c0:
            seen.append((c - c0, su - s0))
        c0, s0 = c, su
        if until and seen:
            break
    return seen


def measure(s, args):
    log(f"  ticks: {args.tick_seconds} s without requests")
    ticks = watch_passes(s, args.tick_seconds)
    log(f"  trickle: {args.trickle} single submits")
    trickle, submit_ms = [], []
    queues = [("fifo", {}), ("fair", {"shareIdentifier": "team7", "schedulingPriority": 3}), ("quota", {"quotaShareName": "q3"})]
    for i in range(args.trickle):
        q, extra = queues[i % 3]
        name = f"trickle-{i}"
        # Let the pass that a tick may be running end first, so that the next pass is the submit's.
        watch_passes(s, 0.05)
        before = s.metrics()[:2]
        t = time.time()
        s.batch.submit_service_job(jobName=name, jobQueue=q, serviceJobType="SAGEMAKER_TRAINING",
                                   serviceRequestPayload=payload(name, "true"), **extra)
        submit_ms.append((time.time() - t) * 1e3)
        trickle += watch_passes(s, 30, until=True, since=before)

    def summary(seen):
        # Each pass counts once: k passes seen by one scrape count k times at their mean.
        per_pass = [d / k * 1e3 for k, d in seen for _ in range(k)]
        exact = [d * 1e3 for k, d in seen if k == 1]
        return {"passes": len(per_pass), "timed_exactly": len(exact), "p50_ms": pct(per_pass, 0.5),
                "p99_ms": pct(per_pass, 0.99), "max_ms": max(per_pass) if per_pass else None,
                "mean_ms": statistics.mean(per_pass) if per_pass else None,
                "exact_p50_ms": pct(exact, 0.5), "exact_max_ms": max(exact) if exact else None}
    return {"ticks": summary(ticks), "trickle": summary(trickle), "all": summary(ticks + trickle),
            "trickle_submit_ms": {"p50": pct(submit_ms, 0.5), "p99": pct(submit_ms, 0.99), "max": max(submit_ms)}}


def run(args, n):
    log(f"N = {n:,}: starting {args.bin}")
    s = Server(args.bin, args.http_threads)
    long_jobs = []
    try:
        long_jobs = setup(s, args.shares, args.quota_shares)
        rss0 = s.status("VmRSS")
        log(f"  filling {n:,} jobs from {args.connections} connections")
        f = fill(s, args, n)
        rss1, hwm = s.status("VmRSS"), s.status("VmHWM")
        log(f"  {f['queued']:,} queued in {f['seconds']:.0f} s ({f['submits_per_second']:,.0f}/s), RSS {rss1 / 1024:.0f} MB")
        load0 = os.getloadavg()[0]
        m = measure(s, args)
        r = {"n": n, "bin": args.bin, "fill": f, "rss_before_mb": rss0 / 1024, "rss_after_mb": rss1 / 1024,
             "rss_peak_mb": s.status("VmHWM") / 1024, "rss_peak_after_fill_mb": hwm / 1024,
             "bytes_per_queued_job": (rss1 - rss0) * 1024 / max(1, f["queued"]),
             "load_average": [load0, os.getloadavg()[0]], **m}
        a = m["all"]
        log(f"  pass at {f['queued']:,} queued: p50 {a['p50_ms']:.1f} ms, p99 {a['p99_ms']:.1f} ms, "
            f"max {a['max_ms']:.1f} ms ({a['passes']} passes, {a['timed_exactly']} timed alone); "
            f"load average {r['load_average'][0]:.1f} -> {r['load_average'][1]:.1f}")
        return r
    finally:
        s.stop(long_jobs)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="See the module docstring (and bench/README.md) for what is measured.")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "trainyard"), help="trainyard binary to measure")
    p.add_argument("--loadgen", default=os.path.join(ROOT, "build", "bench", "ty_loadgen"), help="ty_loadgen binary")
    p.add_argument("--jobs", default="100000,1000000", help="queued depths, comma-separated (default 100000,1000000)")
    p.add_argument("--connections", type=int, default=1800,
                   help="fill connections in all, split over the three queues (default 1800)")
    p.add_argument("--http-threads", type=int, default=1800,
                   help="[server] http_threads: requests in flight, which share one turn and its commit (default 1800)")
    p.add_argument("--shares", type=int, default=500,
                   help="share identifiers of the fair-share queue's jobs (500 at most: the active-share limit)")
    p.add_argument("--quota-shares", type=int, default=10, help="quota shares of the quota-share queue")
    p.add_argument("--tick-seconds", type=float, default=15, help="seconds of fair-share ticks measured")
    p.add_argument("--trickle", type=int, default=30, help="single submits measured, each with its pass")
    p.add_argument("--fill-timeout", type=float, default=900,
                   help="stop filling after this many seconds and measure at the depth reached (default 900; 0: never)")
    p.add_argument("--progress-seconds", type=float, default=10, help="progress line interval during the fill")
    p.add_argument("--json", help="write every figure here (default bench/results/pass_scale.json)")
    args = p.parse_args()
    args.bin = os.path.abspath(args.bin)
    for path in (args.bin, args.loadgen, os.path.join(os.path.dirname(args.bin), "trainyard-supervisor")):
        if not os.access(path, os.X_OK):
            p.error(f"{path} is not an executable (build it first)")
    results = [run(args, int(n)) for n in args.jobs.split(",")]
    out = args.json or os.path.join(ROOT, "bench", "results", "pass_scale.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    print("| queued | fill submits/s | pass p50 ms | p99 ms | max ms | passes (timed alone) | mean pass ms during fill "
          "| server RSS MB (peak) | trickle submit p50 / p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        f, a, t = r["fill"], r["all"], r["trickle_submit_ms"]
        print(f"| {f['queued']:,} | {f['submits_per_second']:,.0f} | {a['p50_ms']:.1f} | {a['p99_ms']:.1f} | "
              f"{a['max_ms']:.1f} | {a['passes']} ({a['timed_exactly']}) | {f['mean_pass_ms'] or 0:.1f} | {r['rss_after_mb']:,.0f} "
              f"({r['rss_peak_mb']:,.0f}) | {t['p50']:.1f} / {t['p99']:.1f} |")
    log(f"figures in {out}")


if __name__ == "__main__":
    main()
