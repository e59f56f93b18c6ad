"""TrainingQueue and TrainingQueuedJob, as sagemaker.train.aws_batch names them."""
from .exception import MissingRequiredArgument, NoTrainingJob
from .training_queue import TrainingQueue
from .training_queued_job import TrainingQueuedJob

__all__ = ["TrainingQueue", "TrainingQueuedJob", "NoTrainingJob", "MissingRequiredArgument"]
