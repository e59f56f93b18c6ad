"""Following a training job's log streams through the CloudWatch Logs API, as the SageMaker SDK
does: DescribeLogStreams by the prefix <job name>/ in /aws/sagemaker/TrainingJobs, then
GetLogEvents on each stream from its head, carrying each stream's nextForwardToken."""
import sys

import botocore.exceptions

LOG_GROUP = "/aws/sagemaker/TrainingJobs"


class LogFollower:
    def __init__(self, logs_client, training_job_name, out=None):
        self.client = logs_client
        self.job = training_job_name
        self.out = out or sys.stdout
        self.tokens = {}  # stream -> nextForwardToken

    def poll(self):
        """Prints the events that arrived since the last poll; returns how many."""
        try:
            streams = []
            kwargs = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": self.job + "/"}
            while True:
                page = self.client.describe_log_streams(**kwargs)
                streams += [s["logStreamName"] for s in page.get("logStreams", [])]
                if not page.get("nextToken"):
                    break
                kwargs["nextToken"] = page["nextToken"]
        except botocore.exceptions.ClientError as e:
            if e.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return 0
            raise
        printed = 0
        many = len(streams) > 1
        for stream in sorted(streams):
            while True:
                kwargs = {"logGroupName": LOG_GROUP, "logStreamName": stream, "startFromHead": True}
                if stream in self.tokens:
                    kwargs["nextToken"] = self.tokens[stream]
                page = self.client.get_log_events(**kwargs)
                events = page.get("events", [])
                for e in events:
                    line = e["message"].rstrip("\n")
                    self.out.write((f"[{stream.split('/')[-1]}] " if many else "") + line + "\n")
                printed += len(events)
                token = page.get("nextForwardToken")
                done = not events or token == self.tokens.get(stream)
                if token:
                    self.tokens[stream] = token
                if done:
                    break
        if printed:
            self.out.flush()
        return printed
