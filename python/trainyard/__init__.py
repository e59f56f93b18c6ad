"""trainyard: ModelTrainer and TrainingQueue with the SageMaker Python SDK's names, for a trainyard
server (or anything speaking the SageMaker, Batch, S3, STS and CloudWatch Logs APIs)."""
from .aws_batch import TrainingQueue, TrainingQueuedJob
from .session import Session
from .train import (Compute, InputData, Mode, ModelTrainer, OutputDataConfig, S3DataSource,
                    SourceCode, StoppingCondition, Torchrun)

__version__ = "0.1.0"
__all__ = ["ModelTrainer", "Mode", "SourceCode", "Compute", "InputData", "OutputDataConfig",
           "S3DataSource", "StoppingCondition", "Torchrun", "TrainingQueue", "TrainingQueuedJob",
           "Session"]
