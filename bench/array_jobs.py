#!/usr/bin/env python3
"""Array jobs at size: the time to acknowledge a 10,000-child SubmitJob, children started per
second with real trivial commands (`true`, run by the local executor as any attempt), and the
server's resident memory per child, counted and made.

Starts a fresh server (build/trainyard) in a temporary data directory with one compute
environment of --vcpus vCPUs, submits one array of --size children, and samples the parent's
statusSummary for --seconds; then terminates the array and stops the server.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from harness import Server, kill_attempt_processes  # noqa: E402


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=10000)
    ap.add_argument("--vcpus", type=int, default=8, help="the compute environment's vCPUs (children at once)")
    ap.add_argument("--seconds", type=float, default=30, help="how long to watch children start")
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="trainyard-array-bench-")
    server = Server(data).start()
    batch = server.client("batch")
    try:
        batch.create_compute_environment(computeEnvironmentName="ce", type="MANAGED",
                                         computeResources={"type": "EC2", "maxvCpus": args.vcpus, "subnets": ["local"]})
        batch.create_job_queue(jobQueueName="jq", priority=1,
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        batch.register_job_definition(jobDefinitionName="noop", type="container",
                                      containerProperties={"image": "local/busybox", "command": ["true"],
                                                           "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                                                    {"type": "MEMORY", "value": "64"}]})
        pid = server.proc.pid
        before = rss_kib(pid)
        t0 = time.monotonic()
        parent = batch.submit_job(jobName="big", jobQueue="jq", jobDefinition="noop",
                                  arrayProperties={"size": args.size})["jobId"]
        ack_ms = (time.monotonic() - t0) * 1000
        acked = rss_kib(pid)
        start = time.monotonic()
        done = 0
        while time.monotonic() - start < args.seconds:
            summary = batch.describe_jobs(jobs=[parent])["jobs"][0]["arrayProperties"]["statusSummary"]
            done = summary.get("SUCCEEDED", 0) + summary.get("FAILED", 0)
            if done == args.size:
                break
            time.sleep(0.5)
        elapsed = time.monotonic() - start
        summary = batch.describe_jobs(jobs=[parent])["jobs"][0]["arrayProperties"]["statusSummary"]
        made = args.size - summary.get("RUNNABLE", 0) - summary.get("PENDING", 0)
        after = rss_kib(pid)
        print(f"size {args.size}, compute environment {args.vcpus} vCPUs")
        print(f"acknowledge: {ack_ms:.1f} ms")
        print(f"children ended in {elapsed:.1f} s: {done} ({done / elapsed:.1f} per second); made so far: {made}")
        print(f"server RSS: {before} KiB before, {acked} KiB after acknowledging "
              f"({(acked - before) * 1024 / args.size:.1f} bytes per counted child), {after} KiB after "
              f"({(after - acked) * 1024 / max(made, 1):.0f} bytes per made child)")
        batch.terminate_job(jobId=parent, reason="bench over")
    finally:
        server.stop()
        kill_attempt_processes(data)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
