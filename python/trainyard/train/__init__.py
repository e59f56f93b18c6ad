"""ModelTrainer and its configs, as sagemaker.train names them."""
from .configs import (Compute, InputData, OutputDataConfig, S3DataSource, SourceCode,
                      StoppingCondition, Torchrun)
from .model_trainer import Mode, ModelTrainer

__all__ = ["ModelTrainer", "Mode", "SourceCode", "Compute", "InputData", "OutputDataConfig",
           "S3DataSource", "StoppingCondition", "Torchrun"]
