"""TrainingQueue: submits ModelTrainer jobs to a SAGEMAKER_TRAINING job queue as service jobs."""
import logging

from ..session import Session
from ..train.model_trainer import Mode, ModelTrainer
from .batch_api_helper import build_submit_service_job_request, list_service_jobs
from .constants import DEFAULT_TIMEOUT, JOB_STATUS_RUNNING
from .exception import MissingRequiredArgument
from .training_queued_job import TrainingQueuedJob

logger = logging.getLogger("trainyard")


class TrainingQueue:
    def __init__(self, queue_name, session=None):
        self.queue_name = queue_name
        self.session = session

    def _session(self, training_job=None):
        if self.session is None:
            self.session = training_job.sagemaker_session if training_job is not None else Session()
        return self.session

    def submit(self, training_job, inputs, job_name=None, retry_config=None, priority=None,
               share_identifier=None, timeout=None, tags=None, quota_share_name=None,
               preemption_config=None):
        """Builds the trainer's CreateTrainingJob request (uploading its code and local inputs)
        and submits it as a SAGEMAKER_TRAINING service job; returns a TrainingQueuedJob."""
        if not isinstance(training_job, ModelTrainer):
            raise TypeError(f"training_job must be an instance of ModelTrainer, but got {type(training_job)}")
        if training_job.training_mode != Mode.SAGEMAKER_TRAINING_JOB:
            raise ValueError("TrainingQueue requires using a ModelTrainer with Mode.SAGEMAKER_TRAINING_JOB")
        if share_identifier is not None and quota_share_name is not None:
            raise ValueError("Either share_identifier or quota_share_name can be specified, but not both")
        payload = training_job._create_training_job_args(input_data_config=inputs, boto3=True)
        if timeout is None:
            timeout = DEFAULT_TIMEOUT
        if job_name is None:
            job_name = payload["TrainingJobName"]
        request = build_submit_service_job_request(
            payload, job_name, self.queue_name, retry_config, priority, timeout, share_identifier,
            tags, quota_share_name, preemption_config)
        session = self._session(training_job)
        resp = session.batch_client.submit_service_job(**request)
        if "jobArn" not in resp or "jobName" not in resp:
            raise MissingRequiredArgument("jobArn or jobName is missing in response from Batch submit_service_job API")
        return TrainingQueuedJob(resp["jobArn"], resp["jobName"], share_identifier, quota_share_name, session=session)

    def map(self, training_job, inputs, job_names=None, retry_config=None, priority=None,
            share_identifier=None, timeout=None, tags=None, quota_share_name=None):
        """submit() once per element of inputs (each a list of InputData)."""
        if job_names is not None:
            if len(job_names) != len(inputs):
                raise ValueError("When specified, the number of job names must match the number of inputs")
        else:
            job_names = [None] * len(inputs)
        return [self.submit(training_job, value, job_names[i], retry_config, priority, share_identifier,
                            timeout, tags, quota_share_name)
                for i, value in enumerate(inputs)]

    def _jobs(self, status, filters):
        session = self._session()
        out = []
        for page in list_service_jobs(session.batch_client, self.queue_name, status, filters):
            for j in page.get("jobSummaryList", []):
                if "jobArn" in j and "jobName" in j:
                    out.append(TrainingQueuedJob(j["jobArn"], j["jobName"], j.get("shareIdentifier"),
                                                 j.get("quotaShareName"), session=session))
                else:
                    logger.warning("Missing JobArn or JobName in Batch ListJobs API")
        return out

    def list_jobs(self, job_name=None, status=JOB_STATUS_RUNNING):
        """The queue's jobs in status (RUNNING by default); with job_name, the jobs of that name
        in any status (the status is then ignored, as in the SDK)."""
        filters = None
        if job_name:
            filters = [{"name": "JOB_NAME", "values": [job_name]}]
            status = None
        return self._jobs(status, filters)

    def list_jobs_by_share(self, status=JOB_STATUS_RUNNING, share_identifier=None, quota_share_name=None):
        if share_identifier is not None and quota_share_name is not None:
            raise ValueError("Either share_identifier or quota_share_name can be specified, but not both")
        filters = None
        if share_identifier:
            filters = [{"name": "SHARE_IDENTIFIER", "values": [share_identifier]}]
        elif quota_share_name:
            filters = [{"name": "QUOTA_SHARE_NAME", "values": [quota_share_name]}]
        return self._jobs(status, filters)

    def get_job(self, job_name):
        jobs = self.list_jobs(job_name)
        if not jobs:
            raise ValueError(f"Cannot find job: {job_name}")
        return jobs[0]
