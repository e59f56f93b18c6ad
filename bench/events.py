#!/usr/bin/env python3
"""What events, webhooks, server-sent events and /metrics scrapes cost the server under load.

    python3 bench/events.py [--jobs 500] [--reps 3] [--parked 10000] [--json FILE]

One run measures, on this machine, with a fresh server (new data directory, default settings:
SQLite synchronous=FULL, the local executor with bubblewrap when available) for each
configuration and repetition, the configurations interleaved (rep 1: every configuration, then
rep 2 in a rotated order, ...):

  off     [events] enabled = false
  on      events stored (the default), nobody reading them
  hook    on + one webhook: a receiver in this script on 127.0.0.1 (HTTP/1.1 keep-alive)
  dead    on + one webhook whose URL is a closed port (every POST is refused; retried, backoff 1 s)
  sse     on + one GET /trainyard/v1/events/stream client (SigV4, service "events") in this script
  scrape  hook + GET /metrics every 1 s for the whole run (a usual Prometheus interval is 15 s)

Each run:
  1. submit: `ty_loadgen submit` of --parked jobs (8 connections) into a queue whose service
     environment is DISABLED: durable submits/s; the jobs stay queued (the queue depth of 3. and 5.).
  2. the webhook or stream takes what 1. produced: its delivery rate for that burst (events/s,
     from the first submit to the last receipt).
  3. e2e: `ty_loadgen e2e` of --jobs `true` jobs (8 connections) on --slots 1-vCPU instances:
     jobs/s from the first submit until none is live, and the server's own CPU per job.
  4. delivery lag of every event of 3. that the webhook/stream got: receipt wall time minus the
     event's time (X-Trainyard-Event-At for webhooks; the event's "time" for the stream), p50,
     p99, max; and events/s delivered while 3. ran.
  5. /metrics at depth: 50 scrapes back to back with the --parked jobs queued: latency p50/p99.

Prints a markdown table (medians over repetitions; ratios against off) and writes every
figure per run to --json (default bench/results/events.json).
"""
import argparse
import base64
import datetime
import http.client
import json
import os
import re
import shutil
import signal
import socket
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
REGION = "us-east-1"
CONFIGS = ["off", "on", "hook", "dead", "sse", "scrape"]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(values, p):
    """Nearest-rank percentile (as ty_loadgen computes its own)."""
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


class Records:
    """What a consumer got: (receipt ns, seq, ...) tuples, appended from its own thread."""

    def __init__(self):
        self.records = []
        self.lock = threading.Lock()

    def reset(self):
        with self.lock:
            self.records = []

    def snapshot(self):
        with self.lock:
            return list(self.records)

    def max_seq(self):
        with self.lock:
            return max((r[1] for r in self.records), default=0)


# ---------------------------------------------------------------- webhook receiver
class Receiver(Records):
    """A lean webhook receiver: a plain HTTP/1.1 parser with keep-alive (the server's libcurl
    reuses its connection), so that the receiver's own CPU on this 2-core box stays small.
    Records (receipt ns, seq, at ms, kind) per POST and answers 204."""

    def __init__(self):
        super().__init__()
        receiver = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                rfile, wfile = self.rfile, self.wfile
                while True:
                    line = rfile.readline()
                    if not line:
                        return
                    length = seq = at = 0
                    while True:
                        h = rfile.readline()
                        if h in (b"\r\n", b"\n", b""):
                            break
                        k, _, v = h.partition(b":")
                        k = k.strip().lower()
                        if k == b"content-length":
                            length = int(v)
                        elif k == b"x-trainyard-event-seq":
                            seq = int(v)
                        elif k == b"x-trainyard-event-at":
                            at = int(v)
                    body = rfile.read(length) if length else b""
                    now = time.time_ns()
                    kind = "service" if b'"source":"aws.batch"' in body else "training"
                    with receiver.lock:
                        receiver.records.append((now, seq, at, kind))
                    wfile.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
                    wfile.flush()

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/hook"


# ---------------------------------------------------------------- server
class TrainyardServer:
    def __init__(self, args, work, extra_toml):
        self.args = args
        self.data = os.path.join(work, "data")
        shutil.rmtree(self.data, ignore_errors=True)
        os.makedirs(self.data)
        cfg = os.path.join(work, "config.toml")
        with open(cfg, "w") as f:
            f.write(extra_toml + f"""
[[instance_types]]
name = "ml.m5.large"
count = {args.slots}
vcpus = 1
memory_mib = 2000
""")
        self.log = open(os.path.join(work, "server.log"), "wb")
        self.proc = subprocess.Popen([args.bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0",
                                      "--data-dir", self.data, "--log-level", "warn"],
                                     stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r}")
        self.url = line.split()[-1]
        u = urllib.parse.urlparse(self.url)
        self.host, self.port = u.hostname, u.port
        creds = open(os.path.join(self.data, "credentials")).read()
        self.key = re.search(r"aws_access_key_id = (\S+)", creds).group(1)
        self.secret = re.search(r"aws_secret_access_key = (\S+)", creds).group(1)
        env = dict(os.environ, AWS_ACCESS_KEY_ID=self.key, AWS_SECRET_ACCESS_KEY=self.secret)
        calls = [
            ("CreateServiceEnvironment", {"serviceEnvironmentName": "parked", "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                                          "state": "DISABLED",
                                          "capacityLimits": [{"maxCapacity": args.slots, "capacityUnit": "NUM_INSTANCES"}]}),
            ("CreateJobQueue", {"jobQueueName": "parked", "jobQueueType": "SAGEMAKER_TRAINING", "priority": 1,
                                "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": "parked"}]}),
            ("CreateServiceEnvironment", {"serviceEnvironmentName": "run", "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                                          "capacityLimits": [{"maxCapacity": args.slots, "capacityUnit": "NUM_INSTANCES"}]}),
            ("CreateJobQueue", {"jobQueueName": "run", "jobQueueType": "SAGEMAKER_TRAINING", "priority": 1,
                                "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": "run"}]}),
        ]
        for op, body in calls:
            subprocess.run([args.bin, "call", "batch", op, json.dumps(body), "--endpoint-url", self.url],
                           env=env, check=True, stdout=subprocess.DEVNULL)

    def cpu_s(self):
        """The server's own CPU (user + system) and its reaped children's, in seconds."""
        f = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        tck = os.sysconf("SC_CLK_TCK")
        return (int(f[11]) + int(f[12])) / tck, (int(f[13]) + int(f[14])) / tck

    def loadgen(self, mode, queue, jobs, connections):
        out = subprocess.run([self.args.loadgen, mode, "--endpoint", self.url, "--key", self.key, "--secret", self.secret,
                              "--queue", queue, "--jobs", str(jobs), "--connections", str(connections)],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    def scrape(self):
        """GET /metrics on a new connection (as Prometheus does after its keep-alive times out);
        returns (seconds, body)."""
        t0 = time.perf_counter()
        c = http.client.HTTPConnection(self.host, self.port, timeout=30)
        c.request("GET", "/metrics")
        r = c.getresponse()
        body = r.read()
        c.close()
        return time.perf_counter() - t0, body.decode()

    def latest_seq(self):
        _, text = self.scrape()
        m = re.search(r"^trainyard_events_latest_sequence (\S+)", text, re.M)
        return int(float(m.group(1))) if m else 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


# ---------------------------------------------------------------- consumers
class Scraper:
    """GET /metrics every `interval` seconds; records (start wall time, latency s)."""

    def __init__(self, server, interval):
        self.server, self.interval, self.samples = server, interval, []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        nxt = time.monotonic()
        while not self.stopping.is_set():
            t = time.time()
            try:
                dt, _ = self.server.scrape()
                self.samples.append((t, dt))
            except OSError:
                pass
            nxt += self.interval
            self.stopping.wait(max(0, nxt - time.monotonic()))

    def stop(self):
        self.stopping.set()
        self.thread.join()


ISO_TIME = re.compile(rb'"time":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z"')


class SseClient(Records):
    """One server-sent-event stream from the newest event on; records (receipt ns, seq, event ms)."""

    def __init__(self, server):
        import botocore.auth
        import botocore.awsrequest
        import botocore.credentials
        path = "/trainyard/v1/events/stream"
        req = botocore.awsrequest.AWSRequest(method="GET", url=server.url + path)
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(server.key, server.secret), "events",
                                REGION).add_auth(req)
        self.conn = http.client.HTTPConnection(server.host, server.port, timeout=120)
        self.conn.request("GET", path, headers=dict(req.headers.items()))
        self.resp = self.conn.getresponse()
        if self.resp.status != 200:
            raise RuntimeError(f"stream: HTTP {self.resp.status}: {self.resp.read()[:300]!r}")
        super().__init__()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        seq = 0
        try:
            for line in self.resp:
                if line.startswith(b"id: "):
                    seq = int(line[4:])
                elif line.startswith(b"data: "):
                    now = time.time_ns()
                    m = ISO_TIME.search(line)
                    at = 0
                    if m:
                        dt = datetime.datetime.strptime(m.group(1).decode(), "%Y-%m-%dT%H:%M:%S")
                        at = int(dt.replace(tzinfo=datetime.timezone.utc).timestamp()) * 1000 + int(m.group(2))
                    kind = "service" if b'"source":"aws.batch"' in line else "training"
                    with self.lock:
                        self.records.append((now, seq, at, kind))
        except Exception:  # the stream closed under us (close() from the main thread)
            pass

    def close(self):
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()


# ---------------------------------------------------------------- one run
def wait_drained(consumer, server, timeout):
    """Waits until the consumer has received the newest stored event; returns seconds waited or
    None on timeout."""
    target = server.latest_seq()
    t0 = time.monotonic()
    while consumer.max_seq() < target:
        if time.monotonic() - t0 > timeout:
            return None
        time.sleep(0.02)
    return time.monotonic() - t0


def lag_figures(records, after_seq, window):
    """Delivery lag of the records with seq > after_seq (first receipt of each seq)."""
    seen, lags, times, dups = set(), [], [], 0
    by_kind = {}
    for now, seq, at, kind in records:
        if seq <= after_seq:
            continue
        if seq in seen:
            dups += 1
            continue
        seen.add(seq)
        lag = now / 1e6 - at
        lags.append(lag)
        times.append(now / 1e9)
        by_kind.setdefault(kind, []).append(lag)
    if not lags:
        return {"events": 0}
    out = {"events": len(lags), "duplicates": dups,
           "lag_ms_p50": pct(lags, 0.5), "lag_ms_p99": pct(lags, 0.99), "lag_ms_max": max(lags),
           "events_per_s": len(lags) / window if window > 0 else None}
    for kind, v in by_kind.items():
        out[f"lag_ms_p50_{kind}"] = pct(v, 0.5)
        out[f"lag_ms_p99_{kind}"] = pct(v, 0.99)
    return out


def one_run(args, work, cfg, rep):
    receiver = None
    toml = ""
    if cfg == "off":
        toml += "[events]\nenabled = false\n"
    if cfg in ("hook", "scrape"):
        receiver = Receiver()
        toml += f'[[webhooks]]\nname = "bench"\nurl = "{receiver.url}"\nmax_backoff_seconds = 1\n'
    if cfg == "dead":
        toml += f'[[webhooks]]\nname = "dead"\nurl = "{closed_port_url()}"\nmax_backoff_seconds = 1\n'
    server = TrainyardServer(args, work, toml)
    r = {"config": cfg, "rep": rep, "started": time.strftime("%H:%M:%S")}
    scraper = sse = None
    try:
        consumer = receiver
        if cfg == "sse":
            sse = consumer = SseClient(server)
        if cfg == "scrape":
            scraper = Scraper(server, args.scrape_interval)

        # 1. Durable submits into the parked queue.
        c0 = server.cpu_s()
        t_submit = time.time()
        j = server.loadgen("submit", "parked", args.parked, args.connections)
        c1 = server.cpu_s()
        r["submit_per_s"] = j["submits_per_second"]
        r["submit_request_ms_p99"] = j["request_ms_p99"]
        r["submit_server_cpu_us_per_job"] = (c1[0] - c0[0]) * 1e6 / args.parked

        # 2. Let the consumer take what that produced, so that 4. sees only the e2e events; the
        #    rate it took them at, from the first submit to the last receipt, is its delivery rate
        #    for a burst (the POSTs start while the submits still run).
        if consumer is not None:
            target = server.latest_seq()
            waited = wait_drained(consumer, server, args.drain_timeout)
            got = [x for x in consumer.snapshot() if 0 < x[1] <= target]
            r["burst_events"] = len({x[1] for x in got})
            if got and waited is not None:
                r["burst_delivery_events_per_s"] = r["burst_events"] / (max(x[0] for x in got) / 1e9 - t_submit)
            r["burst_drain_after_submit_s"] = waited if waited is not None else f">{args.drain_timeout}"

        # 3. End to end.
        start_seq = server.latest_seq()
        if scraper:
            n_before = len(scraper.samples)
        c0, d0 = server.cpu_s(), os.times()
        t_start = time.time()
        j = server.loadgen("e2e", "run", args.jobs, args.connections)
        t_end = time.time()
        c1, d1 = server.cpu_s(), os.times()
        r["e2e_jobs_per_s"] = j["jobs_per_second"]
        r["e2e_submit_phase_jobs_per_s"] = j["submit_phase_jobs_per_second"]
        r["e2e_failed"] = j["failed"]
        r["e2e_server_cpu_ms_per_job"] = (c1[0] - c0[0]) * 1e3 / args.jobs
        r["e2e_children_cpu_ms_per_job"] = (c1[1] - c0[1]) * 1e3 / args.jobs
        # This script's own CPU (the webhook receiver, the stream reader, the scraper), which
        # shares the two cores with the server: not a cost of the server, but it slows the e2e.
        r["e2e_driver_cpu_ms_per_job"] = (d1.user + d1.system - d0.user - d0.system) * 1e3 / args.jobs
        end_seq = server.latest_seq()
        r["e2e_events"] = end_seq - start_seq
        if scraper:
            lat = [dt * 1e3 for t, dt in scraper.samples[n_before:] if t_start <= t <= t_end]
            r["scrape_under_load_n"] = len(lat)
            r["scrape_under_load_ms_p50"] = pct(lat, 0.5)
            r["scrape_under_load_ms_max"] = max(lat) if lat else None
            r["_scrape_under_load_ms"] = lat

        # 4. Delivery lag of the e2e events.
        if consumer is not None:
            caught = wait_drained(consumer, server, args.drain_timeout)
            r["catch_up_after_e2e_s"] = caught if caught is not None else f">{args.drain_timeout}"
            recs = [x for x in consumer.snapshot() if x[1] <= end_seq]
            got = [x for x in recs if x[1] > start_seq]
            window = (max(x[0] for x in got) / 1e9 - t_start) if got else 0
            r["delivery"] = lag_figures(recs, start_seq, window)
            r["delivery"]["missing"] = (end_seq - start_seq) - r["delivery"]["events"]

        # 5. /metrics at depth (the parked jobs are still queued).
        lat, size = [], 0
        for _ in range(args.scrapes):
            dt, body = server.scrape()
            lat.append(dt * 1e3)
            size = len(body)
        r["scrape_at_depth_ms_p50"] = pct(lat, 0.5)
        r["scrape_at_depth_ms_p99"] = pct(lat, 0.99)
        r["metrics_bytes"] = size
    finally:
        if scraper:
            scraper.stop()
            r["scrapes_total"] = len(scraper.samples)
        if sse:
            sse.close()
        server.stop()
        if receiver:
            receiver.close()
    return r


# ---------------------------------------------------------------- report
def med(runs, key, sub=None):
    vals = []
    for r in runs:
        v = r.get(sub, {}).get(key) if sub else r.get(key)
        if isinstance(v, (int, float)):
            vals.append(v)
    return statistics.median(vals) if vals else None


def fmt(v, digits=0):
    if v is None:
        return "–"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def each(runs, key, digits=0, sub=None):
    vals = [(r.get(sub, {}) if sub else r).get(key) for r in runs]
    return " / ".join(fmt(v, digits) if isinstance(v, (int, float)) else "–" for v in vals)


def table(results, configs, args):
    by = {c: [r for r in results if r["config"] == c] for c in configs}
    base = by.get("off") or []

    def ratio(c, key):
        a, b = med(by[c], key), med(base, key)
        return f"{a / b:.2f}" if a and b else "–"

    lines = []
    lines.append(f"| configuration | durable submits/s ({args.parked:,} jobs, {args.connections} conn.) | vs off "
                 f"| e2e jobs/s ({args.jobs} `true` jobs) | vs off | server CPU ms/job (e2e) | vs off "
                 f"| this script's CPU ms/job (e2e) | /metrics at depth p50 / p99 ms |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for c in configs:
        rs = by[c]
        lines.append(f"| {c} | **{fmt(med(rs, 'submit_per_s'))}** ({each(rs, 'submit_per_s')}) | {ratio(c, 'submit_per_s')} "
                     f"| **{fmt(med(rs, 'e2e_jobs_per_s'), 1)}** ({each(rs, 'e2e_jobs_per_s', 1)}) | {ratio(c, 'e2e_jobs_per_s')} "
                     f"| {fmt(med(rs, 'e2e_server_cpu_ms_per_job'), 2)} ({each(rs, 'e2e_server_cpu_ms_per_job', 2)}) "
                     f"| {ratio(c, 'e2e_server_cpu_ms_per_job')} | {fmt(med(rs, 'e2e_driver_cpu_ms_per_job'), 2)} "
                     f"| {fmt(med(rs, 'scrape_at_depth_ms_p50'), 1)} / {fmt(med(rs, 'scrape_at_depth_ms_p99'), 1)} |")
    lines.append("")
    lines.append("| consumer | events per e2e run | lag p50 ms | lag p99 ms | lag max ms | events/s delivered during e2e "
                 "| burst delivery events/s (the submits' events) | missing / duplicates "
                 "| service-job events only: lag p50 / p99 ms |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for c in configs:
        rs = [r for r in by[c] if "delivery" in r]
        if not rs:
            continue
        lines.append(f"| {c} | {fmt(med(rs, 'events', sub='delivery'))} "
                     f"| **{fmt(med(rs, 'lag_ms_p50', sub='delivery'), 1)}** ({each(rs, 'lag_ms_p50', 1, 'delivery')}) "
                     f"| **{fmt(med(rs, 'lag_ms_p99', sub='delivery'), 1)}** ({each(rs, 'lag_ms_p99', 1, 'delivery')}) "
                     f"| {fmt(med(rs, 'lag_ms_max', sub='delivery'), 1)} ({each(rs, 'lag_ms_max', 1, 'delivery')}) "
                     f"| {fmt(med(rs, 'events_per_s', sub='delivery'))} "
                     f"| {fmt(med(rs, 'burst_delivery_events_per_s'))} ({each(rs, 'burst_delivery_events_per_s')}) "
                     f"| {sum(r['delivery'].get('missing', 0) for r in rs)} / {sum(r['delivery'].get('duplicates', 0) for r in rs)} "
                     f"| {fmt(med(rs, 'lag_ms_p50_service', sub='delivery'), 1)} / {fmt(med(rs, 'lag_ms_p99_service', sub='delivery'), 1)} |")
    sc = [r for r in by.get("scrape", [])]
    if sc:
        pooled = [x for r in sc for x in r.get("_scrape_under_load_ms", [])]
        lines.append("")
        lines.append(f"/metrics every {args.scrape_interval:g} s during e2e (scrape configuration, {len(pooled)} scrapes "
                     f"over {len(sc)} runs, {args.parked:,} jobs queued): p50 {fmt(pct(pooled, 0.5), 1)} ms, "
                     f"p99 {fmt(pct(pooled, 0.99), 1)} ms, max {fmt(max(pooled) if pooled else None, 1)} ms; "
                     f"/metrics body {fmt(med(sc, 'metrics_bytes'))} bytes.")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=500, help="e2e jobs per run (default 500)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--parked", type=int, default=10000, help="jobs submitted into the parked queue (default 10000)")
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--slots", type=int, default=100, help="1-vCPU instances of the e2e environment")
    p.add_argument("--scrapes", type=int, default=50, help="back-to-back /metrics scrapes at depth per run")
    p.add_argument("--scrape-interval", type=float, default=1.0)
    p.add_argument("--drain-timeout", type=float, default=60)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "trainyard"))
    p.add_argument("--loadgen", default=os.path.join(ROOT, "build", "bench", "ty_loadgen"))
    p.add_argument("--json", default=os.path.join(ROOT, "bench", "results", "events.json"))
    args = p.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if c not in CONFIGS:
            p.error(f"unknown configuration {c}; known: {', '.join(CONFIGS)}")
    work = tempfile.mkdtemp(prefix="ty-events-bench-")
    results = []
    t0 = time.time()
    try:
        for rep in range(1, args.reps + 1):
            k = (rep - 1) % len(configs)
            for cfg in configs[k:] + configs[:k]:
                r = one_run(args, work, cfg, rep)
                results.append(r)
                d = r.get("delivery", {})
                log(f"rep {rep} {cfg}: submit {r['submit_per_s']:.0f}/s, e2e {r['e2e_jobs_per_s']:.1f} jobs/s, "
                    f"server {r['e2e_server_cpu_ms_per_job']:.2f} ms/job"
                    + (f", lag p50 {d.get('lag_ms_p50', 0):.1f} p99 {d.get('lag_ms_p99', 0):.1f} ms" if d else "")
                    + f", scrape p50 {r['scrape_at_depth_ms_p50']:.1f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)), "seconds": round(time.time() - t0),
            "git": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True).stdout.strip(),
            "loadavg_end": os.getloadavg(), "args": {k: v for k, v in vars(args).items() if k not in ("json",)}}
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"meta": meta, "runs": results}, f, indent=1)
    print(f"{meta['date']}, commit {meta['git']}, {meta['seconds']} s, load average at the end "
          f"{meta['loadavg_end'][0]:.1f}")
    print(table(results, configs, args))


if __name__ == "__main__":
    main()
