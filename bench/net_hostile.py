#!/usr/bin/env python3
"""The API under hostile clients: what signed callers see while others attack the listener.

Three phases, each against a fresh server with default settings (so main's older binary runs it
too, for the before figures):

1. hold: --idle idle connections and --loris slow-loris sockets (one header byte every 2 s,
   reopened whenever the server cuts one) stay open while --callers other clients make signed
   SageMaker calls (ListTrainingJobs, botocore-signed, a new connection each, as a fresh client
   would); latency
   p50 / p99 / max and the calls that failed (10 s timeout).
2. busy: --busy clients (one process each, one keep-alive connection) call as fast as they can for
   --seconds; per-client answered calls and the worst latency any client saw ("starved": a client
   whose worst wait was over 1 s).
3. flood: one unsigned --flood-mib MiB chunked body, then one --flood-mib MiB header, each on a
   fresh server; how much the server read before it cut the connection and its peak RSS
   (/proc/<pid>/status VmHWM).

    python3 bench/net_hostile.py [--bin build/trainyard] [--idle 10000] [--loris 1000] [--json out.json]
"""
import argparse
import json
import multiprocessing
import os
import resource
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from harness import REGION, Server  # noqa: E402

MIB = 1024 * 1024


def percentile(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def ms(x):
    return None if x is None else round(x * 1000, 1)


def vm(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def client(url, key, secret, timeout):
    import boto3
    import botocore.config
    cfg = botocore.config.Config(connect_timeout=timeout, read_timeout=timeout, retries={"total_max_attempts": 1},
                                 max_pool_connections=1)
    return boto3.client("sagemaker", endpoint_url=url, region_name=REGION, aws_access_key_id=key,
                        aws_secret_access_key=secret, config=cfg)


def signed_call(url, key, secret, timeout):
    """One signed ListTrainingJobs on a new connection, as a fresh client makes it."""
    import http.client
    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials
    body = json.dumps({"MaxResults": 1})
    req = botocore.awsrequest.AWSRequest(method="POST", url=url + "/", data=body, headers={
        "Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "SageMaker.ListTrainingJobs"})
    botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), "sagemaker", REGION).add_auth(req)
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("POST", "/", body=body, headers=dict(req.headers.items()))
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}")
    finally:
        conn.close()


class Attackers:
    """Idle and slow-loris sockets kept open (reopened when the server closes them)."""

    LORIS_HEAD = b"POST / HTTP/1.1\r\nHost: x\r\nX-Slow: "

    # The server takes at most server.max_connections_per_address (1,000 by default) from one
    # address: the attackers spread over 127.0.0.2 and up, this many each, as many hosts would.
    PER_SOURCE = 900

    def __init__(self, addr, idle, loris):
        self.addr = addr
        self.opened = 0
        self.idle = [self.open() for _ in range(idle)]
        self.loris = [self.open(self.LORIS_HEAD) for _ in range(loris)]
        self.reopened_loris = 0
        self.reopened_idle = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def open(self, first=b""):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(10)
        if self.addr[0].startswith("127."):
            s.bind(("127.0.%d.%d" % divmod(2 + self.opened // self.PER_SOURCE, 256), 0))
            self.opened += 1
        s.connect(self.addr)
        s.setblocking(False)
        if first:
            try:
                s.send(first)
            except OSError:
                pass
        return s

    def run(self):
        while not self.stop.wait(2.0):
            for i, s in enumerate(self.loris):
                try:
                    s.send(b"a")
                except OSError:
                    s.close()
                    try:
                        self.loris[i] = self.open(self.LORIS_HEAD)
                        self.reopened_loris += 1
                    except OSError:
                        pass
            for i, s in enumerate(self.idle):
                try:
                    if s.recv(1, socket.MSG_PEEK) == b"":
                        raise OSError("closed")
                except BlockingIOError:
                    continue
                except OSError:
                    s.close()
                    try:
                        self.idle[i] = self.open()
                        self.reopened_idle += 1
                    except OSError:
                        pass

    def close(self):
        self.stop.set()
        self.thread.join()
        for s in self.idle + self.loris:
            s.close()


def start_server(bin_path, root):
    d = tempfile.mkdtemp(prefix="net-hostile-", dir=root)
    return Server(d, bin=bin_path).start()


def phase_hold(args, root):
    srv = start_server(args.bin, root)
    try:
        u = urllib.parse.urlparse(srv.url)
        key, secret = srv.credentials()
        t0 = time.monotonic()
        attack = Attackers((u.hostname, u.port), args.idle, args.loris)
        opened_s = time.monotonic() - t0
        rss_held = vm(srv.proc.pid, "VmRSS")
        latencies, failures = [], []
        lock = threading.Lock()
        end = time.monotonic() + args.hold_seconds

        def caller():
            i = 0
            while time.monotonic() < end:  # the first call warms up botocore and is not counted
                i += 1
                t = time.monotonic()
                try:
                    signed_call(srv.url, key, secret, 10)
                    if i > 1:
                        with lock:
                            latencies.append(time.monotonic() - t)
                except Exception as e:  # timeouts and resets are what is measured
                    with lock:
                        failures.append(type(e).__name__)

        threads = [threading.Thread(target=caller) for _ in range(args.callers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        attack.close()
        return {"idle": args.idle, "loris": args.loris, "seconds": args.hold_seconds, "open_seconds": round(opened_s, 1),
                "server_rss_mib_while_held": round(rss_held / MIB, 1),
                "calls": len(latencies) + len(failures), "failed": len(failures),
                "failures": sorted(set(failures)),
                "p50_ms": ms(percentile(latencies, 50)), "p99_ms": ms(percentile(latencies, 99)),
                "max_ms": ms(max(latencies) if latencies else None),
                "loris_cut_and_reopened": attack.reopened_loris, "idle_cut_and_reopened": attack.reopened_idle}
    finally:
        srv.stop()


def busy_client(job):
    """Signed ListTrainingJobs calls back to back on one keep-alive connection (botocore signs;
    http.client sends, so the client's own CPU stays small beside the server's)."""
    import http.client
    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials
    url, key, secret, seconds = job
    u = urllib.parse.urlparse(url)
    signer = botocore.auth.SigV4Auth(botocore.credentials.Credentials(key, secret), "sagemaker", REGION)
    body = json.dumps({"MaxResults": 1})
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=seconds + 30)
    end = time.monotonic() + seconds
    lat, failed = [], 0
    while time.monotonic() < end:
        req = botocore.awsrequest.AWSRequest(method="POST", url=url + "/", data=body, headers={
            "Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "SageMaker.ListTrainingJobs"})
        signer.add_auth(req)
        t = time.monotonic()
        try:
            conn.request("POST", "/", body=body, headers=dict(req.headers.items()))
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}")
            lat.append(time.monotonic() - t)
        except Exception:
            failed += 1
            conn.close()
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=seconds + 30)
    conn.close()
    return lat, failed


def phase_busy(args, root):
    srv = start_server(args.bin, root)
    try:
        key, secret = srv.credentials()
        with multiprocessing.Pool(args.busy) as pool:
            results = pool.map(busy_client, [(srv.url, key, secret, args.seconds)] * args.busy)
        all_lat = [x for lat, _ in results for x in lat]
        per_client_max = [max(lat) if lat else None for lat, _ in results]
        answered = [len(lat) for lat, _ in results]
        starved = sum(1 for m in per_client_max if m is None or m > 1.0)
        return {"clients": args.busy, "seconds": args.seconds, "answered_total": len(all_lat),
                "per_second": round(len(all_lat) / args.seconds),
                "answered_per_client_min": min(answered), "answered_per_client_max": max(answered),
                "failed": sum(f for _, f in results),
                "p50_ms": ms(percentile(all_lat, 50)), "p99_ms": ms(percentile(all_lat, 99)),
                "max_ms": ms(max(all_lat) if all_lat else None), "starved_clients": starved}
    finally:
        srv.stop()


def flood(args, root, kind):
    srv = start_server(args.bin, root)
    try:
        u = urllib.parse.urlparse(srv.url)
        before = vm(srv.proc.pid, "VmHWM")
        s = socket.create_connection((u.hostname, u.port), timeout=10)
        if kind == "chunked":
            head = b"POST /v1/createjobqueue HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            piece = b"100000\r\n" + b"a" * MIB + b"\r\n"
        else:
            head = b"POST / HTTP/1.1\r\nHost: x\r\n"
            piece = (b"X-Pad: " + b"a" * 1000 + b"\r\n") * 1024
        sent, t0 = 0, time.monotonic()
        status = "read to the end"
        try:
            s.sendall(head)
            while sent < args.flood_mib * MIB:
                if time.monotonic() - t0 > args.budget:
                    status = f"still reading after {args.budget} s"
                    break
                s.sendall(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError, socket.timeout) as e:
            status = "cut: " + type(e).__name__
        answer = b""
        try:
            s.settimeout(2)
            answer = s.recv(200)
        except OSError:
            pass
        s.close()
        time.sleep(0.5)  # the server frees what it read; VmHWM is the peak either way
        return {"kind": kind, "flood_mib": args.flood_mib, "sent_mib": round(sent / MIB, 1), "outcome": status,
                "answer": answer.split(b"\r\n", 1)[0].decode(errors="replace"),
                "seconds": round(time.monotonic() - t0, 1),
                "peak_rss_mib_before": round(before / MIB, 1),
                "peak_rss_mib_after": round(vm(srv.proc.pid, "VmHWM") / MIB, 1),
                "server_alive": srv.proc.poll() is None}
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "trainyard"))
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--loris", type=int, default=1000)
    ap.add_argument("--hold-seconds", type=int, default=30, help="length of the hold phase (default 30)")
    ap.add_argument("--callers", type=int, default=4, help="threads making signed calls in it (default 4)")
    ap.add_argument("--busy", type=int, default=20)
    ap.add_argument("--seconds", type=int, default=15, help="length of the busy phase (default 15)")
    ap.add_argument("--flood-mib", type=int, default=1024)
    ap.add_argument("--budget", type=int, default=60, help="seconds at most for each attack (default 60)")
    ap.add_argument("--phases", default="hold,busy,flood")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.idle + args.loris + 200 > hard:
        sys.exit(f"net_hostile: need {args.idle + args.loris + 200} descriptors, the hard limit is {hard}")
    root = tempfile.mkdtemp(prefix="net-hostile-")
    out = {"bin": args.bin}
    try:
        phases = args.phases.split(",")
        if "hold" in phases:
            out["hold"] = phase_hold(args, root)
            print(json.dumps({"hold": out["hold"]}), flush=True)
        if "busy" in phases:
            out["busy"] = phase_busy(args, root)
            print(json.dumps({"busy": out["busy"]}), flush=True)
        if "flood" in phases:
            out["flood"] = [flood(args, root, "chunked"), flood(args, root, "header")]
            print(json.dumps({"flood": out["flood"]}), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
