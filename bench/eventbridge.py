#!/usr/bin/env python3
"""EventBridge on the wire: the latency of PutRule and PutTargets (each answers once its change is
committed and the delivery runs), and of an event from PutEvents returning to its arrival at an
API destination (a local receiver), one event at a time and in a burst.

Starts a fresh server (build/trainyard) in a temporary data directory, makes one connection, one
API destination and --rules rules (each with that destination as its target, all matching the
events sent), then sends --events events; stops the server.
"""
import argparse
import http.server
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from harness import Server  # noqa: E402


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def ms(values):
    return (f"median {statistics.median(values) * 1000:.1f} ms, p95 {pct(values, 95) * 1000:.1f} ms, "
            f"max {max(values) * 1000:.1f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--rules", type=int, default=5)
    args = ap.parse_args()

    arrived = {}  # event id -> arrival time (first arrival)
    count = {}    # event id -> arrivals (one per matching rule)
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                eid = json.loads(body)["id"]
                arrived.setdefault(eid, time.perf_counter())
                count[eid] = count.get(eid, 0) + 1
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"

    data_dir = tempfile.mkdtemp(prefix="trainyard-bench-eb-")
    # The receiver listens on loopback, which API destinations may reach only when the operator allows it.
    server = Server(data_dir, config="[events]\nallow_local_endpoints = true\n").start()
    try:
        events = server.client("events")
        conn = events.create_connection(Name="bench", AuthorizationType="API_KEY", AuthParameters={
            "ApiKeyAuthParameters": {"ApiKeyName": "x-api-key", "ApiKeyValue": "bench"}})
        dest = events.create_api_destination(Name="bench", ConnectionArn=conn["ConnectionArn"],
                                             InvocationEndpoint=url, HttpMethod="POST")
        put_rule, put_targets = [], []
        for i in range(args.rules):
            t0 = time.perf_counter()
            events.put_rule(Name=f"r{i}", EventPattern=json.dumps({"source": ["bench"]}))
            t1 = time.perf_counter()
            events.put_targets(Rule=f"r{i}", Targets=[{"Id": "t", "Arn": dest["ApiDestinationArn"]}])
            t2 = time.perf_counter()
            put_rule.append(t1 - t0)
            put_targets.append(t2 - t1)

        def wait_for(ids, copies=1, timeout=60):
            deadline = time.time() + timeout
            while time.time() < deadline:
                with lock:
                    if all(count.get(i, 0) >= copies for i in ids):
                        return
                time.sleep(0.001)
            raise SystemExit(f"timed out: {sum(1 for i in ids if i in arrived)} of {len(ids)} arrived")

        one = []
        for n in range(args.events):
            r = events.put_events(Entries=[{"Source": "bench", "DetailType": "One", "Detail": json.dumps({"n": n})}])
            sent = time.perf_counter()
            eid = r["Entries"][0]["EventId"]
            wait_for([eid])
            one.append(arrived[eid] - sent)

        t0 = time.perf_counter()
        ids = []
        for n in range(0, args.events, 10):
            r = events.put_events(Entries=[{"Source": "bench", "DetailType": "Burst", "Detail": json.dumps({"n": n + k})}
                                           for k in range(10)])
            ids += [e["EventId"] for e in r["Entries"]]
        wait_for(ids, copies=args.rules)
        burst = time.perf_counter() - t0

        print(f"PutRule ({args.rules}): {ms(put_rule)}")
        print(f"PutTargets ({args.rules}, each one more delivery): {ms(put_targets)}")
        print(f"PutEvents -> arrival at the API destination, one at a time ({args.events}, "
              f"{args.rules} rules match each; first arrival): {ms(one)}")
        print(f"burst: {len(ids)} events in PutEvents of 10, all arrived in {burst:.2f} s "
              f"by every rule's delivery ({len(ids) / burst:.0f} events/s, {len(ids) * args.rules / burst:.0f} POSTs/s)")
    finally:
        server.stop()
        receiver.shutdown()
        receiver.server_close()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
