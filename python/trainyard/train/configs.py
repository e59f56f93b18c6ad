"""The configuration objects a ModelTrainer is built from, with the SageMaker Python SDK's names.

Each is a plain dataclass; `_to_request()` gives the CreateTrainingJob member it stands for, with
unset (None) fields left out, as the SDK's serializer leaves them out.
"""
from dataclasses import dataclass, field
from typing import List, Optional, Union

DEFAULT_IGNORE_PATTERNS = [".env", ".git", "__pycache__", ".DS_Store", ".cache", ".ipynb_checkpoints"]


def _drop_none(d):
    return {k: v for k, v in d.items() if v is not None}


@dataclass
class SourceCode:
    """The training code: a local directory (or .tar.gz) uploaded as the `code` channel, a
    requirements file in it that is pip-installed first, and the script (or command) to run."""
    source_dir: Optional[str] = None
    requirements: Optional[str] = None
    entry_script: Optional[str] = None
    command: Optional[str] = None
    ignore_patterns: Optional[List[str]] = field(default_factory=lambda: list(DEFAULT_IGNORE_PATTERNS))

    def _to_json(self):
        return {"source_dir": self.source_dir, "requirements": self.requirements,
                "entry_script": self.entry_script, "command": self.command,
                "ignore_patterns": self.ignore_patterns}


@dataclass
class Compute:
    """ResourceConfig, plus EnableManagedSpotTraining."""
    instance_type: Optional[str] = None
    instance_count: Optional[int] = None
    volume_size_in_gb: Optional[int] = 30
    volume_kms_key_id: Optional[str] = None
    keep_alive_period_in_seconds: Optional[int] = None
    enable_managed_spot_training: Optional[bool] = None

    def _to_request(self):
        return _drop_none({"InstanceType": self.instance_type, "InstanceCount": self.instance_count,
                           "VolumeSizeInGB": self.volume_size_in_gb, "VolumeKmsKeyId": self.volume_kms_key_id,
                           "KeepAlivePeriodInSeconds": self.keep_alive_period_in_seconds})


@dataclass
class StoppingCondition:
    max_runtime_in_seconds: Optional[int] = None
    max_pending_time_in_seconds: Optional[int] = None
    max_wait_time_in_seconds: Optional[int] = None

    def _to_request(self):
        return _drop_none({"MaxRuntimeInSeconds": self.max_runtime_in_seconds,
                           "MaxPendingTimeInSeconds": self.max_pending_time_in_seconds,
                           "MaxWaitTimeInSeconds": self.max_wait_time_in_seconds})


@dataclass
class OutputDataConfig:
    s3_output_path: Optional[str] = None
    kms_key_id: Optional[str] = None
    compression_type: Optional[str] = None

    def _to_request(self):
        return _drop_none({"S3OutputPath": self.s3_output_path, "KmsKeyId": self.kms_key_id,
                           "CompressionType": self.compression_type})


@dataclass
class S3DataSource:
    """A channel's S3DataSource, given whole (its members as CreateTrainingJob names them)."""
    s3_uri: str
    s3_data_type: str = "S3Prefix"
    s3_data_distribution_type: Optional[str] = "FullyReplicated"

    def _to_request(self):
        return _drop_none({"S3DataType": self.s3_data_type, "S3Uri": self.s3_uri,
                           "S3DataDistributionType": self.s3_data_distribution_type})


@dataclass
class InputData:
    """A channel: `data_source` is an s3:// URI, a local file or directory (uploaded to the
    default bucket under <base_job_name>/<job name>/input/<channel_name>), or an S3DataSource."""
    channel_name: str
    data_source: Union[str, S3DataSource]
    content_type: Optional[str] = None


@dataclass
class Torchrun:
    """Run entry_script under torchrun on every instance: process_count_per_node processes per
    instance (default: one per GPU, at least one), rendezvous at algo-1."""
    process_count_per_node: Optional[int] = None
    smp: Optional[dict] = None

    driver_script = "torchrun_driver"

    def _to_json(self):
        return {"type": "Torchrun", "process_count_per_node": self.process_count_per_node}
