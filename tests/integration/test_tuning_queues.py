"""Trials through a Batch job queue (docs/tuning.md, "Trials in a job queue"): the
trainyard:job-queue tags on CreateHyperParameterTuningJob make each trial a service job, so trials
wait behind a fair-share queue's production share, are preempted in their quota share and resume
from their own checkpoint, take warm pools, and bad tags are refused with nothing stored.
Ordering is driven by gate files the jobs wait on, never by sleeping."""
import os
import time
import unittest

import botocore.exceptions

import harness

# A trial (script mode): counts epochs in its checkpoint directory, resuming from the one saved
# there, prints `epoch=N score=N` per epoch, holds after epoch `hold` until the file `gate`
# exists, and saves and exits on SIGTERM; it logs where each attempt started and what it saved.
TRIAL = """import argparse, os, signal, sys, time
p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--hold", type=int, default=-1)
p.add_argument("--gate", default="")
a, _ = p.parse_known_args()
marker = os.environ["TRAINYARD_CHECKPOINT_MARKER"]
d = os.path.dirname(marker)
def put(name, text, mode="w"):
    path = os.path.join(d, name)
    if mode == "a":
        with open(path, "a") as f:
            f.write(text)
        return
    with open(path + ".tmp", "w") as f:  # replaced whole: a stop mid-write leaves the old value
        f.write(text)
    os.replace(path + ".tmp", path)
try:
    s = int(open(os.path.join(d, "epoch")).read())
except OSError:
    s = 0
put("log", f"start {s}\\n", "a")
def term(*_):
    put("log", f"saved {s}\\n", "a")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
while s < a.epochs:
    if s == a.hold and not os.path.exists(a.gate):
        time.sleep(0.05)
        continue
    s += 1
    put("epoch", str(s))
    open(marker, "a").close()
    os.utime(marker)
    print(f"epoch={s} score={s}", flush=True)
put("log", f"done {s}\\n", "a")
"""


class TuningQueueTest(harness.ServerTest):
    server_config = "[executor]\nstop_grace_seconds = 90\n"

    def gate(self, name):
        return os.path.join(self.work_dir, name)

    def open_gate(self, name):
        open(self.gate(name), "w").close()

    def definition(self, epochs=2, hold=-1, gate="", **extra):
        self.code_job("trial", {"trial.py": TRIAL})
        d = {
            "StaticHyperParameters": {"sagemaker_program": "trial.py",
                                      "sagemaker_submit_directory": "s3://trainyard-test/code/trial.tar.gz",
                                      "epochs": str(epochs), "hold": str(hold), "gate": gate or "none"},
            "AlgorithmSpecification": {"TrainingImage": "local/python3", "TrainingInputMode": "File",
                                       "MetricDefinitions": [{"Name": "score", "Regex": "score=([-0-9.]+)"}]},
            "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
            "OutputDataConfig": {"S3OutputPath": "s3://trainyard-test/output"},
            "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
            "StoppingCondition": {"MaxRuntimeInSeconds": 300},
        }
        d.update(extra)
        return d

    def config(self, max_jobs, parallel):
        return {"Strategy": "Random",
                "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "score"},
                "ResourceLimits": {"MaxNumberOfTrainingJobs": max_jobs, "MaxParallelTrainingJobs": parallel},
                "ParameterRanges": {"IntegerParameterRanges": [{"Name": "x", "MinValue": "0", "MaxValue": "6"}]},
                "RandomSeed": 3}

    def create(self, name, definition, tags, max_jobs=2, parallel=2):
        return self.sm.create_hyper_parameter_tuning_job(
            HyperParameterTuningJobName=name, HyperParameterTuningJobConfig=self.config(max_jobs, parallel),
            TrainingJobDefinition=definition, Tags=[{"Key": k, "Value": v} for k, v in tags.items()])

    def wait_tuning(self, name, timeout=120):
        deadline = time.time() + timeout
        while True:
            d = self.sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
            c, o = d["TrainingJobStatusCounters"], d["ObjectiveStatusCounters"]
            self.assertEqual(sum(c.values()), sum(o.values()), d)
            if d["HyperParameterTuningJobStatus"] in ("Completed", "Stopped", "Failed"):
                return d
            if time.time() > deadline:
                self.fail(f"{name}: {d['HyperParameterTuningJobStatus']} {c}\n{self.server.read_log()}")
            time.sleep(0.1)

    def trial_jobs(self, queue, tuning):
        """The queue's service jobs that are trials of `tuning`, by name."""
        out = {}
        for status in ("SUBMITTED", "PENDING", "RUNNABLE", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED"):
            for j in self.batch.list_service_jobs(jobQueue=queue, jobStatus=status)["jobSummaryList"]:
                if j["jobName"].startswith(tuning + "-"):
                    out[j["jobName"]] = j
        return out

    def wait_trials(self, queue, tuning, count, statuses, timeout=60):
        deadline = time.time() + timeout
        while True:
            jobs = self.trial_jobs(queue, tuning)
            if len(jobs) == count and all(j["status"] in statuses for j in jobs.values()):
                return jobs
            if time.time() > deadline:
                self.fail(f"trials of {tuning}: {[(n, j['status']) for n, j in jobs.items()]}")
            time.sleep(0.05)

    # ---- (a) fair share: trials wait behind production ----
    def test_trials_wait_behind_the_production_share_then_run(self):
        arn = self.batch.create_scheduling_policy(
            name="fs-policy", fairsharePolicy={"shareDecaySeconds": 600, "shareDistribution": [
                {"shareIdentifier": "production", "weightFactor": 0.0001},
                {"shareIdentifier": "sweep", "weightFactor": 1}]})["arn"]
        self.batch.create_service_environment(
            serviceEnvironmentName="fs-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}])
        self.batch.create_job_queue(jobQueueName="fs", jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    schedulingPolicyArn=arn,
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "fs-env"}])
        hold = lambda g: f"while [ ! -e {self.gate(g)} ]; do sleep 0.05; done"
        prod1 = self.submit("fs", self.command_payload("prod-1", hold("p1")), shareIdentifier="production")
        self.wait_jobs([prod1], statuses=("RUNNING",))
        self.open_gate("trials")
        self.create("sweep", self.definition(epochs=2, hold=0, gate=self.gate("trials")), {"trainyard:job-queue": "fs", "trainyard:share-identifier": "sweep"})
        prod2 = self.submit("fs", self.command_payload("prod-2", hold("p2")), shareIdentifier="production")
        trials = self.wait_trials("fs", "sweep", 2, ("RUNNABLE",))
        d = self.sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="sweep")
        self.assertEqual(d["TrainingJobStatusCounters"]["InProgress"], 2)
        self.assertEqual(d["ObjectiveStatusCounters"]["Pending"], 2)
        for t in self.sm.list_training_jobs_for_hyper_parameter_tuning_job(HyperParameterTuningJobName="sweep")["TrainingJobSummaries"]:
            self.assertIn(t["TrainingJobName"], trials)
            self.assertEqual(t["TrainingJobStatus"], "InProgress")
        # production's second job goes before the sweep's trials, which still wait behind it
        self.open_gate("p1")
        self.wait_jobs([prod2], statuses=("RUNNING",))
        self.assertEqual({j["status"] for j in self.trial_jobs("fs", "sweep").values()}, {"RUNNABLE"})
        self.open_gate("p2")
        d = self.wait_tuning("sweep")
        self.assertEqual(d["HyperParameterTuningJobStatus"], "Completed", d)
        self.assertEqual(d["TrainingJobStatusCounters"]["Completed"], 2)
        self.assertEqual(d["BestTrainingJob"]["FinalHyperParameterTuningJobObjectiveMetric"]["Value"], 2)
        jobs = {j["jobName"]: j for j in self.wait_jobs([prod1, prod2] + [j["jobArn"].split("/")[-1] for j in trials.values()])}
        self.assertTrue(all(j["status"] == "SUCCEEDED" for j in jobs.values()), jobs)
        order = sorted(jobs, key=lambda n: jobs[n]["startedAt"])
        self.assertEqual(order[:2], ["prod-1", "prod-2"])
        for name in trials:
            tj = self.sm.describe_training_job(TrainingJobName=name)
            self.assertEqual(tj["TuningJobArn"], d["HyperParameterTuningJobArn"])

    # ---- (b) quota share: a trial is preempted in its share and resumes from its checkpoint ----
    def test_preempted_trial_resumes_from_its_checkpoint(self):
        os.makedirs(self.bucket_path("trainyard-test"), exist_ok=True)
        q = self.create_quota_queue("qs", 1, [("S", 1, "RESERVE", True)])
        definition = self.definition(epochs=4, hold=2, gate=self.gate("resume"), CheckpointConfig={"S3Uri": "s3://trainyard-test/ckpt/"})
        self.create("hold", definition, {"trainyard:job-queue": q, "trainyard:quota-share-name": "S",
                                         "trainyard:scheduling-priority": "10"}, max_jobs=1, parallel=1)
        trial = next(iter(self.wait_trials(q, "hold", 1, ("RUNNING",))))
        ckpt = self.bucket_path("trainyard-test", f"ckpt/{trial}")
        # wait until it saved epoch 2 (it holds there for the gate)
        def saved():
            try:
                with open(os.path.join(ckpt, "epoch")) as f:
                    return f.read().strip()
            except OSError:
                return ""
        deadline = time.time() + 30
        while saved() != "2":
            self.assertLess(time.time(), deadline, "the trial never checkpointed epoch 2")
            time.sleep(0.05)
        urgent = self.submit(q, self.command_payload("urgent", "true"), quotaShareName="S", schedulingPriority=90)
        # The gate opens only once the preempted attempt has saved and exited: opened earlier, the
        # attempt could run on and be stopped mid-write of its epoch file.
        def logged():
            try:
                with open(os.path.join(ckpt, "log")) as f:
                    return f.read().split("\n")
            except OSError:
                return []
        deadline = time.time() + 30
        while "saved 2" not in logged():
            self.assertLess(time.time(), deadline, "the trial was never preempted")
            time.sleep(0.05)
        self.open_gate("resume")  # the resumed attempt runs on past epoch 2
        self.assertEqual(self.wait_jobs([urgent], timeout=60)[0]["status"], "SUCCEEDED")
        d = self.wait_tuning("hold")
        self.assertEqual(d["HyperParameterTuningJobStatus"], "Completed", d)
        self.assertEqual(d["TrainingJobStatusCounters"], {"Completed": 1, "InProgress": 0, "RetryableError": 0,
                                                          "NonRetryableError": 0, "Stopped": 0})
        self.assertEqual(d["ObjectiveStatusCounters"], {"Succeeded": 1, "Pending": 0, "Failed": 0})
        summaries = self.sm.list_training_jobs_for_hyper_parameter_tuning_job(HyperParameterTuningJobName="hold")["TrainingJobSummaries"]
        self.assertEqual(len(summaries), 1)
        # the current attempt's training job, and the objective it ended with
        self.assertEqual(summaries[0]["TrainingJobName"], trial + "-attempt-2")
        self.assertEqual(summaries[0]["FinalHyperParameterTuningJobObjectiveMetric"]["Value"], 4)
        self.assertEqual(self.sm.describe_training_job(TrainingJobName=trial)["TrainingJobStatus"], "Stopped")
        with open(os.path.join(ckpt, "log")) as f:
            log = [line for line in f.read().split("\n") if line]
        self.assertEqual(log, ["start 0", "saved 2", "start 2", "done 4"])
        sj = [j for j in self.batch.list_service_jobs(jobQueue=q, jobStatus="SUCCEEDED")["jobSummaryList"] if j["jobName"] == trial]
        self.assertEqual(len(sj), 1)
        raw = self.describe_raw(sj[0]["jobArn"].split("/")[-1])
        self.assertEqual(raw["preemptionSummary"]["preemptedAttemptCount"], 1)

    # ---- warm pools: the second trial takes the first's pool ----
    def test_second_trial_takes_the_first_trials_warm_pool(self):
        q = self.create_queue("wq", capacity=1)
        rc = {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1, "KeepAlivePeriodInSeconds": 600}
        self.create("warm", self.definition(epochs=1, ResourceConfig=rc), {"trainyard:job-queue": q},
                    max_jobs=2, parallel=1)
        d = self.wait_tuning("warm")
        self.assertEqual(d["HyperParameterTuningJobStatus"], "Completed", d)
        names = sorted(t["TrainingJobName"] for t in self.sm.list_training_jobs_for_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="warm")["TrainingJobSummaries"])
        first = self.sm.describe_training_job(TrainingJobName=names[0])["WarmPoolStatus"]
        self.assertEqual(first.get("ReusedByJob"), names[1], first)
        self.assertEqual(first["Status"], "Reused")

    # ---- (c) refusals that store nothing ----
    def test_bad_queue_tags_are_refused_and_store_nothing(self):
        fifo = self.create_queue("fifo", capacity=1)
        self.create_quota_queue("quota", 1, [("S", 1, "RESERVE")])
        cases = [
            ({"trainyard:share-identifier": "sweep"}, "trainyard:share-identifier needs the tag trainyard:job-queue"),
            ({"trainyard:job-queue": "nope"}, "trainyard:job-queue: job queue nope does not exist"),
            ({"trainyard:job-queue": fifo, "trainyard:share-identifier": "a"}, "has no fair-share scheduling policy"),
            ({"trainyard:job-queue": fifo, "trainyard:scheduling-priority": "10000"}, "between 0 and 9999"),
            ({"trainyard:job-queue": fifo, "trainyard:scheduling-priority": "high"}, "between 0 and 9999"),
            ({"trainyard:job-queue": "quota"}, "trainyard:quota-share-name is required"),
            ({"trainyard:job-queue": "quota", "trainyard:quota-share-name": "T"}, "quota share T does not exist"),
        ]
        for i, (tags, message) in enumerate(cases):
            with self.subTest(tags=tags):
                with self.assertRaises(botocore.exceptions.ClientError) as e:
                    self.create(f"bad-{i}", self.definition(epochs=1), tags)
                self.assertEqual(e.exception.response["Error"]["Code"], "ValidationException")
                self.assertIn(message, e.exception.response["Error"]["Message"])
        self.assertEqual(self.sm.list_hyper_parameter_tuning_jobs()["HyperParameterTuningJobSummaries"], [])
        self.assertEqual(self.batch.list_service_jobs(jobQueue=fifo)["jobSummaryList"], [])


if __name__ == "__main__":
    unittest.main()
