"""The Batch calls behind TrainingQueue and TrainingQueuedJob, building each request as the
SageMaker Python SDK's batch_api_helper builds it."""
import json

from .constants import DEFAULT_SAGEMAKER_TRAINING_RETRY_CONFIG, DEFAULT_TIMEOUT, SAGEMAKER_TRAINING


def build_submit_service_job_request(training_payload, job_name, job_queue, retry_config=None,
                                     scheduling_priority=None, timeout=None, share_identifier=None,
                                     tags=None, quota_share_name=None, preemption_config=None):
    """The SubmitServiceJob request. training_payload (a CreateTrainingJob request) loses its
    Tags, which are merged into the Batch tags (the training tags win on a clash); the payload
    travels as JSON text. Optional members are sent only when truthy, exactly as the SDK does, so
    scheduling_priority=0 is never sent (the queue then uses its default, 0 as well)."""
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    training_payload = dict(training_payload)
    training_tags = training_payload.pop("Tags", None)
    payload = {
        "jobName": job_name,
        "jobQueue": job_queue,
        "retryStrategy": DEFAULT_SAGEMAKER_TRAINING_RETRY_CONFIG,
        "serviceJobType": SAGEMAKER_TRAINING,
        "serviceRequestPayload": json.dumps(training_payload),
        "timeoutConfig": timeout,
    }
    if retry_config:
        payload["retryStrategy"] = retry_config
    if scheduling_priority:
        payload["schedulingPriority"] = scheduling_priority
    if share_identifier:
        payload["shareIdentifier"] = share_identifier
    if tags or training_tags:
        payload["tags"] = merge_tags(tags, training_tags)
    if quota_share_name:
        payload["quotaShareName"] = quota_share_name
    if preemption_config:
        payload["preemptionConfiguration"] = preemption_config
    return payload


def merge_tags(batch_tags, training_tags):
    """batch_tags (a dict) with training_tags ([{"Key", "Value"}]) laid over it."""
    if not training_tags:
        return batch_tags
    merged = dict(batch_tags or {})
    merged.update({t["Key"]: t["Value"] for t in training_tags})
    return merged


def list_service_jobs(client, job_queue, job_status=None, filters=None):
    """Every page of ListServiceJobs, following nextToken."""
    request = {"jobQueue": job_queue}
    if filters:
        request["filters"] = filters
    if job_status:
        request["jobStatus"] = job_status
    while True:
        page = client.list_service_jobs(**request)
        yield page
        if not page.get("nextToken"):
            return
        request["nextToken"] = page["nextToken"]
