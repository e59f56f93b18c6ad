"""ModelTrainer: builds the CreateTrainingJob request the SageMaker Python SDK's ModelTrainer
builds, uploading what it names locally to the default bucket, and runs it (train) or hands it
to a TrainingQueue (_create_training_job_args)."""
import copy
import datetime
import enum
import json
import logging
import os
import shutil
import tempfile
import time

from ..logs import LogFollower
from ..session import Session
from .configs import (Compute, InputData, OutputDataConfig, S3DataSource, SourceCode,
                      StoppingCondition, Torchrun)

logger = logging.getLogger("trainyard")

SM_CODE = "code"
SM_DRIVERS = "sm_drivers"
SM_DRIVERS_LOCAL_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "container_drivers")
SOURCE_CODE_JSON = "sourcecode.json"
DISTRIBUTED_JSON = "distributed.json"
TRAIN_SCRIPT = "sm_train.sh"
DEFAULT_CONTAINER_ENTRYPOINT = ["/bin/bash"]
# /opt/ml inside trainyard's sandbox; without one the tree is elsewhere and TRAINYARD_OPT_ML names it.
DEFAULT_CONTAINER_ARGUMENTS = ["-c", f'exec /bin/bash "${{TRAINYARD_OPT_ML:-/opt/ml}}/input/data/{SM_DRIVERS}/{TRAIN_SCRIPT}"']

DEFAULT_INSTANCE_TYPE = "ml.m5.xlarge"
DEFAULT_INSTANCE_COUNT = 1
DEFAULT_VOLUME_SIZE = 30
DEFAULT_MAX_RUNTIME_IN_SECONDS = 3600
POLL_IN_SECONDS = 2
TERMINAL_TRAINING_STATUSES = ("Completed", "Failed", "Stopped")


class Mode(enum.Enum):
    SAGEMAKER_TRAINING_JOB = "SAGEMAKER_TRAINING_JOB"
    LOCAL_CONTAINER = "LOCAL_CONTAINER"


def _unique_name(base, max_length=63):
    """<base>-<UTC time to the millisecond>, the base cut so that the time always fits."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d%H%M%S%f")[:-3]
    base = base.replace("_", "-")[: max_length - len(stamp) - 1].rstrip("-")
    return f"{base}-{stamp}"


def _is_s3_uri(s):
    return isinstance(s, str) and s.startswith("s3://") and len(s) > 5


def _role_from_caller(arn):
    """The role an assumed-role session stands for; a role ARN as it is; None for anything else."""
    parts = arn.split(":", 5)
    if len(parts) != 6:
        return None
    resource = parts[5]
    if parts[2] == "iam" and resource.startswith("role/"):
        return arn
    if parts[2] == "sts" and resource.startswith("assumed-role/"):
        return f"arn:{parts[1]}:iam::{parts[4]}:role/{resource.split('/')[1]}"
    return None


class ModelTrainer:
    def __init__(self, training_image=None, source_code=None, compute=None, networking=None,
                 stopping_condition=None, training_mode=Mode.SAGEMAKER_TRAINING_JOB, algorithm_name=None,
                 hyperparameters=None, role=None, base_job_name=None, output_data_config=None,
                 input_data_config=None, checkpoint_config=None, training_input_mode="File",
                 environment=None, distributed=None, tags=None, sagemaker_session=None,
                 boto_session=None):
        if training_mode != Mode.SAGEMAKER_TRAINING_JOB:
            raise ValueError("training_mode: only Mode.SAGEMAKER_TRAINING_JOB is available (trainyard has no local container mode)")
        if algorithm_name:
            raise ValueError("algorithm_name: built-in and marketplace algorithms are not available on trainyard")
        if networking is not None:
            raise ValueError("networking: VPC settings are not available on trainyard")
        if distributed is not None and not isinstance(distributed, Torchrun):
            raise ValueError(f"distributed: only Torchrun() is available, not {type(distributed).__name__}")
        self._validate_source_code(source_code)
        if distributed is not None and (source_code is None or not (source_code.entry_script or source_code.command)):
            raise ValueError("distributed: needs source_code with an entry_script")
        if hyperparameters is not None and not isinstance(hyperparameters, dict):
            raise ValueError("hyperparameters: must be a dict of names to values")
        self.training_mode = training_mode
        self.training_image = training_image
        self.algorithm_name = None
        self.source_code = source_code
        self.distributed = distributed
        self.hyperparameters = dict(hyperparameters or {})
        self.environment = environment
        self.tags = tags
        self.training_input_mode = training_input_mode
        self.checkpoint_config = checkpoint_config
        self.input_data_config = list(input_data_config or [])
        self.sagemaker_session = sagemaker_session or Session(boto_session=boto_session)
        self.role = role or self._default_role()
        if base_job_name is None:
            base_job_name = (training_image.split("/")[-1].split(":")[0] + "-job") if training_image else "trainyard-job"
        self.base_job_name = base_job_name
        self.compute = compute or Compute(instance_type=DEFAULT_INSTANCE_TYPE, instance_count=DEFAULT_INSTANCE_COUNT)
        if self.compute.instance_type is None:
            self.compute.instance_type = DEFAULT_INSTANCE_TYPE
        if self.compute.instance_count is None:
            self.compute.instance_count = DEFAULT_INSTANCE_COUNT
        if self.compute.volume_size_in_gb is None:
            self.compute.volume_size_in_gb = DEFAULT_VOLUME_SIZE
        self.stopping_condition = stopping_condition or StoppingCondition()
        if self.stopping_condition.max_runtime_in_seconds is None:
            self.stopping_condition.max_runtime_in_seconds = DEFAULT_MAX_RUNTIME_IN_SECONDS
        self.output_data_config = output_data_config or OutputDataConfig(compression_type="GZIP")
        if self.output_data_config.s3_output_path is None:
            self.output_data_config.s3_output_path = f"s3://{self._bucket_prefix()}/{self.base_job_name}"
        self._latest_training_job = None

    # ---- validation and defaults ----
    @staticmethod
    def _validate_source_code(source_code):
        if source_code is None:
            return
        if not isinstance(source_code, SourceCode):
            raise ValueError(f"source_code: must be a SourceCode, not {type(source_code).__name__}")
        src = source_code.source_dir
        if source_code.requirements or source_code.entry_script:
            if not src:
                raise ValueError("source_code: 'requirements' or 'entry_script' needs 'source_dir'")
            if _is_s3_uri(src):
                return
            if not os.path.exists(src):
                raise ValueError(f"source_code.source_dir: {src} does not exist")
            if os.path.isdir(src):
                for what in ("entry_script", "requirements"):
                    rel = getattr(source_code, what)
                    if rel and not os.path.isfile(os.path.join(src, rel)):
                        raise ValueError(f"source_code.{what}: {rel} is not a file in {src}")
            elif not src.endswith(".tar.gz"):
                raise ValueError(f"source_code.source_dir: {src} must be a directory or a .tar.gz")
        if source_code.entry_script and not source_code.command and not source_code.entry_script.endswith((".py", ".sh")):
            raise ValueError(f"source_code.entry_script: {source_code.entry_script} must end in .py or .sh")

    def _default_role(self):
        arn = self.sagemaker_session.caller_arn()
        role = _role_from_caller(arn)
        if role is None:
            raise ValueError(f"role: not given, and the caller {arn} is not a role; pass role='arn:aws:iam::<account>:role/<name>'")
        return role

    def _bucket_prefix(self):
        bucket = self.sagemaker_session.default_bucket()
        prefix = self.sagemaker_session.default_bucket_prefix
        return f"{bucket}/{prefix.strip('/')}" if prefix else bucket

    # ---- channels ----
    def create_input_data_channel(self, channel_name, data_source, key_prefix=None, ignore_patterns=None):
        if isinstance(data_source, S3DataSource):
            return {"ChannelName": channel_name, "DataSource": {"S3DataSource": data_source._to_request()}}
        if not isinstance(data_source, str):
            raise ValueError(f"InputData '{channel_name}': data_source must be an s3:// URI, a local path or an S3DataSource")
        if _is_s3_uri(data_source):
            uri = data_source
        elif os.path.exists(data_source):
            key_prefix = f"{key_prefix}/{channel_name}" if key_prefix else f"{self.base_job_name}/input/{channel_name}"
            if self.sagemaker_session.default_bucket_prefix:
                key_prefix = f"{self.sagemaker_session.default_bucket_prefix.strip('/')}/{key_prefix}"
            bucket = self.sagemaker_session.default_bucket()
            if ignore_patterns and os.path.isdir(data_source):
                with tempfile.TemporaryDirectory() as tmp:
                    copied = os.path.join(tmp, os.path.basename(os.path.normpath(data_source)))
                    shutil.copytree(data_source, copied, ignore=shutil.ignore_patterns(*ignore_patterns))
                    uri = self.sagemaker_session.upload_data(copied, bucket=bucket, key_prefix=key_prefix)
            else:
                uri = self.sagemaker_session.upload_data(data_source, bucket=bucket, key_prefix=key_prefix)
        else:
            raise ValueError(f"InputData '{channel_name}': not an s3:// URI or an existing local path: {data_source}")
        return {"ChannelName": channel_name,
                "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                                "S3DataDistributionType": "FullyReplicated"}},
                "InputMode": "File"}

    def _merge_inputs(self, input_data_config):
        channels = {c.channel_name: c for c in self.input_data_config}
        for c in input_data_config or []:
            channels[c.channel_name] = c  # the method's inputs win
        names = [c.channel_name for c in channels.values()]
        for reserved in (SM_CODE, SM_DRIVERS):
            if self.source_code and reserved in names:
                raise ValueError(f"InputData: the channel name '{reserved}' is taken by the source code")
        return list(channels.values())

    # ---- the request ----
    def _create_training_job_args(self, input_data_config=None, boto3=True):
        """The CreateTrainingJob request (boto3's member names), uploading local channels, the
        source directory and the drivers first."""
        job_name = _unique_name(self.base_job_name)
        key_prefix = f"{self.base_job_name}/{job_name}/input"
        channels = []
        for c in self._merge_inputs(input_data_config):
            if not isinstance(c, InputData):
                raise ValueError(f"input_data_config: expected InputData, got {type(c).__name__}")
            ch = self.create_input_data_channel(c.channel_name, c.data_source, key_prefix=key_prefix)
            if c.content_type:
                ch["ContentType"] = c.content_type
            channels.append(ch)

        hyperparameters = {k: v if isinstance(v, str) else json.dumps(v) for k, v in self.hyperparameters.items()}
        algorithm = {"TrainingImage": self.training_image, "TrainingInputMode": self.training_input_mode}
        if self.source_code:
            if self.source_code.source_dir:
                channels.append(self.create_input_data_channel(
                    SM_CODE, self.source_code.source_dir, key_prefix=key_prefix,
                    ignore_patterns=self.source_code.ignore_patterns))
            with tempfile.TemporaryDirectory() as drivers:
                shutil.copytree(SM_DRIVERS_LOCAL_PATH, drivers, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__"))
                with open(os.path.join(drivers, SOURCE_CODE_JSON), "w") as f:
                    json.dump(self.source_code._to_json(), f)
                with open(os.path.join(drivers, DISTRIBUTED_JSON), "w") as f:
                    json.dump(self.distributed._to_json() if self.distributed else {}, f)
                channels.append(self.create_input_data_channel(SM_DRIVERS, drivers, key_prefix=key_prefix))
            algorithm["ContainerEntrypoint"] = list(DEFAULT_CONTAINER_ENTRYPOINT)
            algorithm["ContainerArguments"] = list(DEFAULT_CONTAINER_ARGUMENTS)

        request = {
            "TrainingJobName": job_name,
            "AlgorithmSpecification": {k: v for k, v in algorithm.items() if v is not None},
            "HyperParameters": hyperparameters,
            "InputDataConfig": channels,
            "ResourceConfig": self.compute._to_request(),
            "RoleArn": self.role,
            "Tags": copy.deepcopy(self.tags) if self.tags else None,
            "StoppingCondition": self.stopping_condition._to_request(),
            "OutputDataConfig": self.output_data_config._to_request(),
            "CheckpointConfig": self.checkpoint_config,
            "Environment": self.environment,
            "EnableManagedSpotTraining": self.compute.enable_managed_spot_training,
        }
        return {k: v for k, v in request.items() if v is not None and v != []}

    # ---- running it ----
    def train(self, input_data_config=None, wait=True, logs=True):
        """CreateTrainingJob; with wait, follows the job (and its log with logs) to its end and
        raises RuntimeError when it does not complete."""
        request = self._create_training_job_args(input_data_config=input_data_config)
        sm = self.sagemaker_session.sagemaker_client
        sm.create_training_job(**request)
        name = request["TrainingJobName"]
        logger.info("Training Job Name: %s", name)
        self._latest_training_job = sm.describe_training_job(TrainingJobName=name)
        if wait:
            self._latest_training_job = wait_for_training_job(self.sagemaker_session, name, logs=logs)
            status = self._latest_training_job["TrainingJobStatus"]
            if status != "Completed":
                raise RuntimeError(f"Training job {name} {status}: {self._latest_training_job.get('FailureReason', '')}")
        return self._latest_training_job


def wait_for_training_job(session, name, logs=True, timeout=None, poll=POLL_IN_SECONDS):
    """Polls DescribeTrainingJob until the job ends (or timeout seconds), printing its log."""
    sm = session.sagemaker_client
    follower = LogFollower(session.logs_client, name) if logs else None
    deadline = time.time() + timeout if timeout else None
    while True:
        tj = sm.describe_training_job(TrainingJobName=name)
        if follower:
            follower.poll()
        if tj["TrainingJobStatus"] in TERMINAL_TRAINING_STATUSES:
            if follower:
                follower.poll()
            return tj
        if deadline and time.time() > deadline:
            return tj
        time.sleep(poll)
