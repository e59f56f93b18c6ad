"""TrainingQueuedJob: one service job submitted through a TrainingQueue."""
import logging
import time

from ..logs import LogFollower
from ..session import Session
from .constants import JOB_STATUS_COMPLETED, JOB_STATUS_FAILED, POLL_IN_SECONDS
from .exception import NoTrainingJob

logger = logging.getLogger("trainyard")

NO_TRAINING_JOB_STATUSES = {"SUBMITTED", "PENDING", "RUNNABLE"}


def training_job_name_from_arn(arn):
    """arn:aws:sagemaker:<region>:<account>:training-job/<name> -> <name> (None when not one)."""
    if not arn or ":training-job/" not in arn:
        return None
    return arn.split(":training-job/", 1)[1]


class TrainingQueuedJob:
    def __init__(self, job_arn, job_name, share_identifier=None, quota_share_name=None, session=None):
        self.job_arn = job_arn
        self.job_name = job_name
        self.share_identifier = share_identifier
        self.quota_share_name = quota_share_name
        self.session = session or Session()

    def __repr__(self):
        return f"TrainingQueuedJob(job_name={self.job_name!r}, job_arn={self.job_arn!r})"

    @property
    def _batch(self):
        return self.session.batch_client

    def describe(self):
        """DescribeServiceJob."""
        return self._batch.describe_service_job(jobId=self.job_arn)

    def terminate(self, reason="Default terminate reason"):
        """TerminateServiceJob."""
        self._batch.terminate_service_job(jobId=self.job_arn, reason=reason)

    def update(self, scheduling_priority):
        """UpdateServiceJob with a new scheduling priority."""
        return self._batch.update_service_job(jobId=self.job_arn, schedulingPriority=scheduling_priority)

    def training_job_name(self, describe_resp=None):
        """The name of the training job of the latest attempt; NoTrainingJob while queued."""
        d = describe_resp or self.describe()
        if d.get("status") in NO_TRAINING_JOB_STATUSES:
            for i, attempt in enumerate(d.get("attempts", [])):
                if attempt.get("statusReason"):
                    logger.info("Attempt %d - %s", i + 1, attempt["statusReason"])
            raise NoTrainingJob("No Training job created. Job is still waiting in queue")
        name = training_job_name_from_arn(d.get("latestAttempt", {}).get("serviceResourceId", {}).get("value"))
        if not name:
            raise NoTrainingJob(f"{self.job_name} is {d.get('status')} but names no training job yet")
        return name

    def wait(self, timeout=None, logs=False, poll=POLL_IN_SECONDS):
        """Polls DescribeServiceJob until SUCCEEDED or FAILED, or until timeout seconds have
        passed; returns the last answer. With logs, the training job's log is printed as it
        arrives (each new attempt's training job in turn)."""
        deadline = time.time() + timeout if timeout else None
        follower = None
        while True:
            d = self.describe()
            status = d.get("status", "")
            if logs and status not in NO_TRAINING_JOB_STATUSES:
                name = training_job_name_from_arn(d.get("latestAttempt", {}).get("serviceResourceId", {}).get("value"))
                if name and (follower is None or follower.job != name):
                    follower = LogFollower(self.session.logs_client, name)
                if follower:
                    follower.poll()
            if status in (JOB_STATUS_COMPLETED, JOB_STATUS_FAILED):
                return d
            if deadline and time.time() > deadline:
                logger.info("Timeout exceeded: %d seconds elapsed. Returning current results", timeout)
                return d
            time.sleep(poll)

    def result(self, timeout=None):
        """The DescribeServiceJob answer once SUCCEEDED; RuntimeError(statusReason) when FAILED;
        TimeoutError when neither within timeout seconds."""
        d = self.wait(timeout)
        if d.get("status") == JOB_STATUS_COMPLETED:
            return d
        if d.get("status") == JOB_STATUS_FAILED:
            raise RuntimeError(d.get("statusReason", "the job failed"))
        raise TimeoutError("Reached timeout before the Batch job reached a terminal status")

    async def fetch_job_results(self, timeout=None):
        return self.result(timeout)
