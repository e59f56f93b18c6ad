"""The exceptions of the SageMaker Python SDK's aws_batch module."""


class NoTrainingJob(Exception):
    """The service job has not made a training job yet."""


class MissingRequiredArgument(Exception):
    """An answer lacks a member the SDK needs."""
