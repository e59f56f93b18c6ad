#!/usr/bin/env python3
"""PyTorch through trainyard, with boto3 only: the same script (code/train.py) trained three ways.

1. script mode on one instance;
2. DistributedDataParallel over two instances (2 x 2 ranks of gloo), through the
   torch-distributed launch an estimator's `distribution={"torch_distributed": {"enabled": True}}`
   asks for (`sagemaker_torch_distributed_enabled`);
3. a hyperparameter tuning job over that DDP job (the learning rate, Bayesian, two trials).

Each job's loss curve is printed from its log (the `epoch=N loss=X accuracy=Y` lines its
MetricDefinitions read), and its final metrics from DescribeTrainingJob. The code is uploaded
through trainyard's S3 endpoint. Needs PyTorch on the host (Debian's python3-torch).

    AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... python3 examples/pytorch/run.py --endpoint-url http://127.0.0.1:8080
"""
import argparse
import io
import os
import sys
import tarfile
import time

import boto3

HERE = os.path.dirname(os.path.abspath(__file__))
ROLE = "arn:aws:iam::000000000000:role/SageMakerRole"
METRICS = [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}, {"Name": "test:accuracy", "Regex": "accuracy=([0-9.]+)"}]


def upload_code(s3, bucket):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(os.path.join(HERE, "code", "train.py"), arcname="train.py")
    try:
        s3.create_bucket(Bucket=bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    s3.put_object(Bucket=bucket, Key="pytorch/sourcedir.tar.gz", Body=buf.getvalue())
    return f"s3://{bucket}/pytorch/sourcedir.tar.gz"


def job_definition(code, bucket, instances, hyperparameters):
    return {
        "AlgorithmSpecification": {"TrainingImage": "local/python3", "TrainingInputMode": "File",
                                   "MetricDefinitions": METRICS},
        "RoleArn": ROLE,
        "HyperParameters": {"sagemaker_program": "train.py", "sagemaker_submit_directory": code, **hyperparameters},
        "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/pytorch/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": instances, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 900},
    }


def wait_training(sm, name, timeout=900):
    deadline = time.time() + timeout
    while True:
        tj = sm.describe_training_job(TrainingJobName=name)
        if tj["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
            return tj
        if time.time() > deadline:
            sys.exit(f"{name} did not finish in {timeout} s")
        time.sleep(0.5)


def show(sm, logs, name):
    tj = wait_training(sm, name)
    took = (tj["TrainingEndTime"] - tj["TrainingStartTime"]).total_seconds() if tj.get("TrainingEndTime") else 0
    print(f"   {name}: {tj['TrainingJobStatus']} in {took:.1f} s"
          + (f" ({tj['FailureReason']})" if tj.get("FailureReason") else ""))
    streams = logs.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=name + "/")
    first = sorted(s["logStreamName"] for s in streams["logStreams"])[:1]
    for stream in first:
        events = logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream,
                                     startFromHead=True)["events"]
        curve = [e["message"] for e in events if e["message"].startswith("epoch=")]
        for line in curve[::5] + ([curve[-1]] if curve and (len(curve) - 1) % 5 else []):
            print(f"     {line}")
    final = {m["MetricName"]: round(m["Value"], 4) for m in tj.get("FinalMetricDataList", [])}
    print(f"     final metrics: {final}")
    return tj


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL", "http://127.0.0.1:8080"))
    ap.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    ap.add_argument("--bucket", default="examples")
    ap.add_argument("--prefix", default="pytorch", help="the jobs' names start with this")
    ap.add_argument("--epochs", type=int, default=30)
    args = ap.parse_args()
    kw = dict(endpoint_url=args.endpoint_url, region_name=args.region)
    sm, logs, s3 = boto3.client("sagemaker", **kw), boto3.client("logs", **kw), boto3.client("s3", **kw)
    code = upload_code(s3, args.bucket)
    epochs = str(args.epochs)

    print("== 1. script mode, one instance")
    name = f"{args.prefix}-single"
    sm.create_training_job(TrainingJobName=name, **job_definition(code, args.bucket, 1, {"epochs": epochs}))
    single = show(sm, logs, name)

    print("== 2. DistributedDataParallel over two instances (2 ranks each, gloo)")
    name = f"{args.prefix}-ddp"
    sm.create_training_job(TrainingJobName=name, **job_definition(
        code, args.bucket, 2, {"epochs": epochs, "sagemaker_torch_distributed_enabled": "true"}))
    ddp = show(sm, logs, name)

    print("== 3. tuning the DDP job's learning rate (Bayesian, two trials, one at a time)")
    tuning = f"{args.prefix}-tune"
    definition = job_definition(code, args.bucket, 2, {"epochs": epochs, "sagemaker_torch_distributed_enabled": "true"})
    definition["StaticHyperParameters"] = definition.pop("HyperParameters")
    sm.create_hyper_parameter_tuning_job(
        HyperParameterTuningJobName=tuning,
        HyperParameterTuningJobConfig={
            "Strategy": "Bayesian",
            "HyperParameterTuningJobObjective": {"Type": "Minimize", "MetricName": "train:loss"},
            "ResourceLimits": {"MaxNumberOfTrainingJobs": 2, "MaxParallelTrainingJobs": 1},
            "ParameterRanges": {"ContinuousParameterRanges": [
                {"Name": "lr", "MinValue": "0.005", "MaxValue": "0.1", "ScalingType": "Logarithmic"}]}},
        TrainingJobDefinition=definition)
    deadline = time.time() + 1800
    while True:
        t = sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=tuning)
        if t["HyperParameterTuningJobStatus"] in ("Completed", "Failed", "Stopped"):
            break
        if time.time() > deadline:
            sys.exit(f"{tuning} did not finish")
        time.sleep(1)
    for summary in sm.list_training_jobs_for_hyper_parameter_tuning_job(HyperParameterTuningJobName=tuning)[
            "TrainingJobSummaries"]:
        value = summary.get("FinalHyperParameterTuningJobObjectiveMetric", {}).get("Value")
        print(f"   {summary['TrainingJobName']}: {summary['TrainingJobStatus']}, lr={summary['TunedHyperParameters']['lr']}, "
              f"train:loss={value}")
    best = t.get("BestTrainingJob", {})
    print(f"   {tuning}: {t['HyperParameterTuningJobStatus']}, best {best.get('TrainingJobName')} "
          f"(train:loss {best.get('FinalHyperParameterTuningJobObjectiveMetric', {}).get('Value')})")

    ok = single["TrainingJobStatus"] == ddp["TrainingJobStatus"] == "Completed" and \
        t["HyperParameterTuningJobStatus"] == "Completed"
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
