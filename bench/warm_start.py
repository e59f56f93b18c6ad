#!/usr/bin/env python3
"""Warm-pool start time: CreateTrainingJob -> the first line the user code prints, cold and warm.

Starts a fresh server (build/trainyard) in a temporary data directory, runs N jobs that each
print one line (`/bin/sh -c 'echo first'`), and reports the median and maximum of the time from
sending CreateTrainingJob to the timestamp the supervisor gave that line. Cold jobs each get a
new pool (a different RoleArn, so nothing matches); warm jobs take over the pool of the one
before. With --setup-command (e.g. "python3 -m venv venv") the cold path includes it.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from harness import Server, kill_attempt_processes  # noqa: E402


def payload(name, role):
    return {"TrainingJobName": name, "RoleArn": "arn:aws:iam::000000000000:role/" + role,
            "AlgorithmSpecification": {"TrainingImage": "local/shell", "TrainingInputMode": "File",
                                       "ContainerEntrypoint": ["/bin/sh", "-c"], "ContainerArguments": ["echo first"]},
            "OutputDataConfig": {"S3OutputPath": "s3://bench-bucket/out"},
            "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1,
                               "KeepAlivePeriodInSeconds": 600},
            "StoppingCondition": {"MaxRuntimeInSeconds": 60}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10, help="jobs per path (default 10)")
    ap.add_argument("--setup-command", default="", help="[[instance_types]] setup_command for ml.m5.large")
    args = ap.parse_args()
    config = ""
    if args.setup_command:
        config = f'[[instance_types]]\nname = "ml.m5.large"\ncount = 4\nsetup_command = "{args.setup_command}"\n'
    data = tempfile.mkdtemp(prefix="trainyard-warm-bench-")
    server = Server(data, config=config or None).start()
    sm = server.client("sagemaker")

    def run(name, role):
        t0 = time.time()
        sm.create_training_job(**payload(name, role))
        while sm.describe_training_job(TrainingJobName=name)["TrainingJobStatus"] == "InProgress":
            time.sleep(0.01)
        with open(os.path.join(data, "attempts", name, "logs", "algo-1.log")) as f:
            return int(f.readline().split(" ", 1)[0]) - t0 * 1000

    try:
        cold = [run(f"cold-{i}", f"Cold{i}") for i in range(args.jobs)]
        run("seed", "Warm")
        warm = [run(f"warm-{i}", "Warm") for i in range(args.jobs)]
        for label, xs in (("cold", cold), ("warm", warm)):
            print(f"{label}: median {statistics.median(xs):.0f} ms, max {max(xs):.0f} ms ({len(xs)} jobs)")
    finally:
        server.stop()
        kill_attempt_processes(data)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
