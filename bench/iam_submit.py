#!/usr/bin/env python3
"""Submit throughput with ten users under realistic policies versus the root key, in one run.

Starts a server on a fresh data directory, creates a fair-share queue whose service environment
is DISABLED (jobs stay queued: the figure is the API's and the commit's, not the executor's), ten
users team0..team9 each tagged team=<name> with the team and guard-rail policies of
docs/security.md (plus an unused admin user), then runs `ty_loadgen submit` as root and as the ten
users (root first in even reps, users first in odd ones) (connection c signs as user c mod 10 and submits to its own share), each
run --jobs jobs from --connections connections, --reps times. Prints one JSON object.

usage: bench/iam_submit.py [--bin build/trainyard] [--loadgen build/bench/ty_loadgen]
                           [--jobs 4000] [--connections 10] [--reps 3]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.parse
import http.client

import botocore.auth
import botocore.awsrequest
import botocore.credentials

TEAM = {"Version": "2012-10-17", "Statement": [
    {"Sid": "SubmitToOwnShare", "Effect": "Allow", "Action": ["batch:SubmitServiceJob"],
     "Resource": ["arn:aws:batch:*:*:job-queue/shared", "arn:aws:batch:*:*:service-job/*"],
     "Condition": {"StringEquals": {"batch:ShareIdentifier": "${aws:PrincipalTag/team}"}}},
    {"Sid": "DescribeOwnJobs", "Effect": "Allow",
     "Action": ["batch:DescribeServiceJob", "batch:ListServiceJobs", "sagemaker:Describe*"], "Resource": "*",
     "Condition": {"StringEqualsIfExists": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
    {"Sid": "TerminateOwnJobs", "Effect": "Allow", "Action": "batch:TerminateServiceJob",
     "Resource": "arn:aws:batch:*:*:service-job/*",
     "Condition": {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}},
    # A submit is refused unless its principal may use the job's data (the loadgen's output path
    # is s3://bench/output): docs/security.md, "Jobs' data".
    {"Sid": "BenchData", "Effect": "Allow", "Action": "s3:*",
     "Resource": ["arn:aws:s3:::bench", "arn:aws:s3:::bench/*"]}]}
GUARD = {"Version": "2012-10-17", "Statement": [
    {"Sid": "DenyTerminateOthers", "Effect": "Deny", "Action": ["batch:TerminateServiceJob", "sagemaker:StopTrainingJob"],
     "Resource": "*", "Condition": {"StringNotEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}}]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/trainyard")
    ap.add_argument("--loadgen", default="build/bench/ty_loadgen")
    ap.add_argument("--jobs", type=int, default=4000)
    ap.add_argument("--connections", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    data = tempfile.mkdtemp(prefix="trainyard-iam-bench-")
    log = open(os.path.join(data, "server.log"), "wb")
    proc = subprocess.Popen([a.bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data],
                            stdout=subprocess.PIPE, stderr=log)
    try:
        url = proc.stdout.readline().decode().split()[-1]
        creds = dict(l.strip().split(" = ", 1) for l in open(os.path.join(data, "credentials")) if " = " in l)
        root = (creds["aws_access_key_id"], creds["aws_secret_access_key"])

        def call(path, body, service="sagemaker", headers=None):
            req = botocore.awsrequest.AWSRequest(method="POST", url=url + path, data=json.dumps(body),
                                                 headers=headers or {"Content-Type": "application/x-amz-json-1.1"})
            botocore.auth.SigV4Auth(botocore.credentials.Credentials(*root), service, "us-east-1").add_auth(req)
            u = urllib.parse.urlparse(url)
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            conn.request("POST", path, body=req.body, headers=dict(req.headers.items()))
            resp = conn.getresponse()
            out = json.loads(resp.read() or b"{}")
            if resp.status != 200:
                raise RuntimeError(f"{path}: {resp.status} {out}")
            return out

        batch = lambda op, body: call("/v1/" + op.lower(), body, "batch", {"Content-Type": "application/json"})
        iam = lambda op, body: call("/trainyard/v1/admin/iam/" + op, body)
        policy = batch("CreateSchedulingPolicy", {"name": "fair", "fairsharePolicy": {}})["arn"]
        batch("CreateServiceEnvironment", {"serviceEnvironmentName": "env", "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                                           "state": "DISABLED",
                                           "capacityLimits": [{"maxCapacity": 10, "capacityUnit": "NUM_INSTANCES"}]})
        batch("CreateJobQueue", {"jobQueueName": "shared", "jobQueueType": "SAGEMAKER_TRAINING", "priority": 1,
                                 "schedulingPolicyArn": policy,
                                 "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": "env"}]})
        iam("CreatePolicy", {"PolicyName": "team", "PolicyDocument": json.dumps(TEAM)})
        iam("CreatePolicy", {"PolicyName": "guard-rail", "PolicyDocument": json.dumps(GUARD)})
        users_file, root_file = os.path.join(data, "users.keys"), os.path.join(data, "root.keys")
        with open(users_file, "w") as uf, open(root_file, "w") as rf:
            for i in range(10):
                team = f"team{i}"
                iam("CreateUser", {"UserName": team, "Tags": [{"Key": "team", "Value": team}]})
                iam("AttachUserPolicy", {"UserName": team, "PolicyName": "team"})
                iam("AttachUserPolicy", {"UserName": team, "PolicyName": "guard-rail"})
                k = iam("CreateAccessKey", {"UserName": team})["AccessKey"]
                uf.write(f"{k['AccessKeyId']} {k['SecretAccessKey']} {team}\n")
                rf.write(f"{root[0]} {root[1]} {team}\n")
        runs = {"root": [], "users": []}
        for rep in range(a.reps):
            order = (("root", root_file), ("users", users_file))
            for who, keys in (order if rep % 2 == 0 else order[::-1]):  # neither always runs on the deeper queue
                out = subprocess.run([a.loadgen, "submit", "--endpoint", url, "--queue", "shared", "--keys", keys,
                                      "--jobs", str(a.jobs), "--connections", str(a.connections)],
                                     check=True, capture_output=True, text=True).stdout
                runs[who].append(json.loads(out))
                print(f"rep {rep} {who}: {runs[who][-1]['submits_per_second']:.0f}/s", file=sys.stderr)
        med = {w: statistics.median(r["submits_per_second"] for r in rs) for w, rs in runs.items()}
        print(json.dumps({"jobs": a.jobs, "connections": a.connections, "reps": a.reps,
                          "root_submits_per_second": med["root"], "users_submits_per_second": med["users"],
                          "users_vs_root": med["users"] / med["root"],
                          "root_p50_ms": statistics.median(r["request_ms_p50"] for r in runs["root"]),
                          "users_p50_ms": statistics.median(r["request_ms_p50"] for r in runs["users"]),
                          "runs": runs}, indent=1))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
