"""Session: the boto3 session the SDK's calls go through, the caller's account and its default
bucket, and uploads.

Every client is made by boto3 with no endpoint of its own, so AWS_ENDPOINT_URL (and the
per-service AWS_ENDPOINT_URL_<SERVICE>), the usual credential chain, AWS_PROFILE and the region
settings apply exactly as they do to any boto3 program.
"""
import logging
import os

import boto3
import botocore.exceptions

logger = logging.getLogger("trainyard")

DEFAULT_REGION = "us-east-1"


class Session:
    """Mirrors the parts of sagemaker.Session that ModelTrainer and TrainingQueue use."""

    def __init__(self, boto_session=None, default_bucket=None, default_bucket_prefix=None):
        self.boto_session = boto_session or boto3.Session()
        self._region = self.boto_session.region_name or DEFAULT_REGION
        self._default_bucket_name = default_bucket
        self._default_bucket = None
        self.default_bucket_prefix = default_bucket_prefix
        self._account = None
        self._clients = {}

    @property
    def boto_region_name(self):
        return self._region

    def client(self, service):
        if service not in self._clients:
            self._clients[service] = self.boto_session.client(service, region_name=self._region)
        return self._clients[service]

    @property
    def sagemaker_client(self):
        return self.client("sagemaker")

    @property
    def batch_client(self):
        return self.client("batch")

    @property
    def s3_client(self):
        return self.client("s3")

    @property
    def logs_client(self):
        return self.client("logs")

    def account_id(self):
        """The caller's account, from STS GetCallerIdentity (asked once)."""
        if self._account is None:
            self._account = self.client("sts").get_caller_identity()["Account"]
        return self._account

    def caller_arn(self):
        return self.client("sts").get_caller_identity()["Arn"]

    def default_bucket(self):
        """sagemaker-<region>-<account>, created when it does not exist (as the SageMaker SDK does)."""
        if self._default_bucket:
            return self._default_bucket
        name = self._default_bucket_name or f"sagemaker-{self._region}-{self.account_id()}"
        s3 = self.s3_client
        try:
            s3.head_bucket(Bucket=name)
        except botocore.exceptions.ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code not in ("404", "NoSuchBucket", "NotFound"):
                raise
            kwargs = {"Bucket": name}
            if self._region != "us-east-1":
                kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self._region}
            try:
                s3.create_bucket(**kwargs)
                logger.info("Created the default bucket s3://%s", name)
            except botocore.exceptions.ClientError as ce:
                if ce.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou",):
                    raise
        self._default_bucket = name
        return name

    def upload_data(self, path, bucket=None, key_prefix="data", extra_args=None):
        """Uploads a file or a directory tree. A file lands at <key_prefix>/<file name> and its URI
        is returned; a directory's files land at <key_prefix>/<path in the directory> and
        s3://<bucket>/<key_prefix> (no trailing slash) is returned, as the SageMaker SDK does."""
        bucket = bucket or self.default_bucket()
        key_prefix = key_prefix.strip("/")
        s3 = self.s3_client
        if os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    local = os.path.join(root, name)
                    rel = os.path.relpath(local, path).replace(os.sep, "/")
                    s3.upload_file(local, bucket, f"{key_prefix}/{rel}", ExtraArgs=extra_args)
            return f"s3://{bucket}/{key_prefix}"
        key = f"{key_prefix}/{os.path.basename(path)}"
        s3.upload_file(path, bucket, key, ExtraArgs=extra_args)
        return f"s3://{bucket}/{key}"
