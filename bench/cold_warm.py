#!/usr/bin/env python3
"""Cold versus warm start of a script-mode training job with real data.

Measures the time from sending CreateTrainingJob to the first line the user's train.py prints
(the timestamp the supervisor gave that line), for:

  * a script-mode job whose sagemaker_submit_directory has a requirements.txt, installed with
    pip from a local wheel directory (--no-index), into a virtualenv made by the instance
    type's setup command (`python3 -m venv venv`);
  * a File-mode channel of --channel-mib MiB (1 GiB by default) in 16 objects, served by a
    moto_server on loopback (the S3 protocol, SigV4 signed), as is the submit directory.

Cold: a job that nothing matches (a new RoleArn), on a host whose object cache was emptied
first, so it runs the setup command, fetches and unpacks the code, installs the requirements
and downloads the whole channel. Warm: a job that takes over the warm pool of the job before
it; the channel comes from the host's object cache. Prints p50 and p90 of both, and their ratio.

Run from the repository root after a build: bench/cold_warm.py [--jobs N] [--channel-mib M]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from harness import MotoServer, Server, kill_attempt_processes  # noqa: E402
from test_warm_pools import make_wheel  # noqa: E402

BUCKET = "bench-data"
PARTS = 16


def percentile(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def payload(name, role):
    return {
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::000000000000:role/" + role,
        "AlgorithmSpecification": {"TrainingImage": "local/python3", "TrainingInputMode": "File"},
        "HyperParameters": {"sagemaker_program": "train.py",
                            "sagemaker_submit_directory": f"s3://{BUCKET}/code/sourcedir.tar.gz"},
        "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/data/train/"}}}],
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1,
                           "KeepAlivePeriodInSeconds": 600},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
    }


def stage(s3, work, channel_mib):
    s3.create_bucket(Bucket=BUCKET)
    src = os.path.join(work, "src")
    os.makedirs(src)
    with open(os.path.join(src, "train.py"), "w") as f:
        f.write("print('first line of user code', flush=True)\n"
                "import os, tinydep\n"
                "d = os.environ['SM_CHANNEL_TRAIN']\n"
                "print('files', len(os.listdir(d)), 'value', tinydep.VALUE)\n")
    with open(os.path.join(src, "requirements.txt"), "w") as f:
        f.write("tinydep\n")
    tarball = os.path.join(work, "sourcedir.tar.gz")
    subprocess.check_call(["tar", "-czf", tarball, "-C", src, "."])
    s3.upload_file(tarball, BUCKET, "code/sourcedir.tar.gz")
    part = os.path.join(work, "part")
    size = channel_mib * 1024 * 1024 // PARTS
    for i in range(PARTS):
        with open(part, "wb") as f:
            f.write(os.urandom(size))
        s3.upload_file(part, BUCKET, f"data/train/part-{i:02d}.bin")
    os.remove(part)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10, help="jobs per path (default 10)")
    ap.add_argument("--channel-mib", type=int, default=1024, help="size of the File-mode channel (default 1024)")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="trainyard-coldwarm-")
    data = os.path.join(work, "data")
    wheels = os.path.join(work, "wheels")
    os.makedirs(wheels)
    os.makedirs(data)
    make_wheel(wheels)
    moto = MotoServer().start()
    server = None
    try:
        print(f"staging {args.channel_mib} MiB in moto_server ...", flush=True)
        stage(moto.client(), work, args.channel_mib)
        config = moto.object_store_toml([BUCKET]) + f"""
[executor]
pip_no_index = true
pip_find_links = "{wheels}"

[[instance_types]]
name = "ml.m5.large"
count = 4
setup_command = "python3 -m venv venv"
"""
        server = Server(data, config=config).start()
        sm = server.client("sagemaker")

        def run(name, role, empty_cache):
            if empty_cache:
                shutil.rmtree(os.path.join(data, "cache"), ignore_errors=True)
            t0 = time.time()
            sm.create_training_job(**payload(name, role))
            while True:
                d = sm.describe_training_job(TrainingJobName=name)
                if d["TrainingJobStatus"] != "InProgress":
                    break
                time.sleep(0.01)
            if d["TrainingJobStatus"] != "Completed":
                raise RuntimeError(f"{name}: {d['TrainingJobStatus']}: {d.get('FailureReason')}")
            with open(os.path.join(data, "attempts", name, "logs", "algo-1.log")) as f:
                first = f.readline()
            assert "first line of user code" in first, first
            return int(first.split(" ", 1)[0]) - t0 * 1000

        cold = []
        for i in range(args.jobs):
            cold.append(run(f"cold-{i}", f"Cold{i}", empty_cache=True))
            # Release the pool it made, so that capacity stays free for the next one.
            sm.update_training_job(TrainingJobName=f"cold-{i}", ResourceConfig={"KeepAlivePeriodInSeconds": 0})
            print(f"cold-{i}: {cold[-1]:.0f} ms", flush=True)
        run("seed", "Warm", empty_cache=True)
        warm = []
        for i in range(args.jobs):
            warm.append(run(f"warm-{i}", "Warm", empty_cache=False))
            print(f"warm-{i}: {warm[-1]:.0f} ms", flush=True)
        print()
        for label, xs in (("cold", cold), ("warm", warm)):
            print(f"{label}: p50 {percentile(xs, 50):.0f} ms, p90 {percentile(xs, 90):.0f} ms, "
                  f"min {min(xs):.0f} ms, max {max(xs):.0f} ms ({len(xs)} jobs)")
        print(f"warm/cold at p50: 1/{statistics.median(cold) / statistics.median(warm):.0f}")
    finally:
        if server:
            server.stop()
            kill_attempt_processes(data)
        moto.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
