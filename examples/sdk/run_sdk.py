"""The quick start on the SDK path: uploads three channels with the SDK, trains once with
ModelTrainer.train() (CreateTrainingJob, its log followed), then submits the same trainer to a
job queue with TrainingQueue and waits for it with live logs.

Every client finds trainyard through AWS_ENDPOINT_URL and its keys through the usual variables:
    AWS_ENDPOINT_URL=http://127.0.0.1:8080 AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \\
    AWS_DEFAULT_REGION=us-east-1 python3 examples/sdk/run_sdk.py --queue quickstart-queue
"""
import argparse
import os
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
try:
    import trainyard  # noqa: F401  (pip install ./python)
except ImportError:
    sys.path.insert(0, os.path.join(here, "..", "..", "python"))

from trainyard import Session  # noqa: E402
from trainyard.aws_batch import TrainingQueue  # noqa: E402
from trainyard.train import ModelTrainer  # noqa: E402
from trainyard.train.configs import Compute, InputData, SourceCode, StoppingCondition  # noqa: E402

import make_data  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queue", help="a SAGEMAKER_TRAINING job queue to submit to as well (FIFO; fair share needs a share)")
    p.add_argument("--role", default="arn:aws:iam::000000000000:role/SageMakerRole")
    args = p.parse_args()

    session = Session()
    bucket = session.default_bucket()
    print(f"== default bucket s3://{bucket}")
    data = tempfile.mkdtemp(prefix="sdk-example-")
    make_data.make(data)
    inputs = [InputData(channel_name=c, data_source=session.upload_data(os.path.join(data, c), bucket, f"sdk-example/data/{c}"))
              for c in ("train", "validation", "test")]

    trainer = ModelTrainer(
        source_code=SourceCode(source_dir=os.path.join(here, "code"), requirements="requirements.txt", entry_script="train.py"),
        base_job_name="sdk-example",
        compute=Compute(instance_type="ml.m5.large", instance_count=1, volume_size_in_gb=1),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=300),
        hyperparameters={"epochs": 5, "lr": 0.1},
        role=args.role,
        sagemaker_session=session,
    )
    print("== ModelTrainer.train(): CreateTrainingJob, following its log")
    job = trainer.train(input_data_config=inputs, wait=True, logs=True)
    print(f"   {job['TrainingJobName']}: {job['TrainingJobStatus']}, model {job['ModelArtifacts']['S3ModelArtifacts']}")

    if args.queue:
        print(f"== TrainingQueue('{args.queue}').submit(...), then wait(logs=True)")
        queued = TrainingQueue(args.queue).submit(trainer, inputs, "sdk-example-queued", priority=5)
        final = queued.wait(timeout=300, logs=True, poll=1)
        print(f"   {queued.job_name}: {final['status']}")
        if final["status"] != "SUCCEEDED":
            sys.exit(1)


if __name__ == "__main__":
    main()
