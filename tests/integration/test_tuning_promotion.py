"""Hyperband promotions end to end (docs/tuning.md, "Hyperband promotions"): a real training
script that checkpoints its epoch, a Hyperband tuning job with a CheckpointConfig, one trial at a
time and a fixed seed. A trial stopped at a rung is later promoted: a new trial with the same
hyperparameters and the next rung's epochs, which restores its parent's checkpoint and trains on
from there instead of starting over.

The order is driven by gate files, never by sleeping: at each rung the script holds until the test
has seen the controller read its value there (the read and the stop decision are one commit) and
the trial is still running; a trial the controller stops gets SIGTERM while it holds."""
import os
import time
import unittest

import harness

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
MIN_RESOURCE, MAX_RESOURCE = 1, 9
RUNGS = (1, 3, 9)  # MinResource * 3^k below MaxResource, then MaxResource


# score(x, epoch): a known function of the hyperparameter and the epoch, the same in the script.
def score(x, epoch):
    return round(x * (1 - 0.5 ** epoch), 6)


# Reads its epoch from /opt/ml/checkpoints/epoch (the job's own /opt/ml without a sandbox), prints
# "start <epoch>", then for each epoch up to --epochs prints the objective and saves the epoch (and a
# line in the checkpoint folder's log). After an epoch in --hold_at (and below --epochs) it writes
# <gate_dir>/<job>.held (the epoch, how many values it printed) and waits for <gate_dir>/<job>.<epoch>;
# on SIGTERM it notes where it stopped and exits.
TRIAL = """import argparse, os, signal, sys, time
p = argparse.ArgumentParser()
p.add_argument("--x", type=int, required=True)
p.add_argument("--epochs", type=int, required=True)
p.add_argument("--hold_at", default="")
p.add_argument("--gate_dir", required=True)
a, _ = p.parse_known_args()
CKPT = os.path.dirname(os.environ["TRAINYARD_CHECKPOINT_MARKER"])  # /opt/ml/checkpoints in the sandbox
job = os.environ["TRAINING_JOB_NAME"]
hold_at = {int(e) for e in a.hold_at.split(",") if e}
def note(line):
    with open(os.path.join(CKPT, "log"), "a") as f:
        f.write(line + "\\n")
try:
    with open(os.path.join(CKPT, "epoch")) as f:
        epoch = int(f.read())
except OSError:
    epoch = 0
print(f"start {epoch}", flush=True)
note(f"{job} start {epoch}")
def term(*_):
    note(f"{job} stopped {epoch}")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
printed = 0
while epoch < a.epochs:
    epoch += 1
    print(f"epoch={epoch} score={round(a.x * (1 - 0.5 ** epoch), 6)}", flush=True)
    printed += 1
    with open(os.path.join(CKPT, "epoch"), "w") as f:
        f.write(str(epoch))
    note(f"{job} epoch {epoch}")
    open(os.environ["TRAINYARD_CHECKPOINT_MARKER"], "a").close()
    if epoch in hold_at and epoch < a.epochs:
        with open(os.path.join(a.gate_dir, job + ".held"), "w") as f:
            f.write(f"{epoch} {printed}")
        gate = os.path.join(a.gate_dir, f"{job}.{epoch}")
        while not os.path.exists(gate):
            time.sleep(0.02)
note(f"{job} done {epoch}")
"""


class HyperbandPromotionTest(harness.ServerTest):
    server_config = "[executor]\nstop_grace_seconds = 90\n"  # a stopped trial exits at SIGTERM, not after the grace

    def definition(self):
        self.code_job("promo", {"trial.py": TRIAL})
        return {
            "StaticHyperParameters": {"sagemaker_program": "trial.py",
                                      "sagemaker_submit_directory": "s3://trainyard-test/code/promo.tar.gz",
                                      "epochs": str(MAX_RESOURCE), "hold_at": ",".join(map(str, RUNGS)),
                                      "gate_dir": self.work_dir},
            "AlgorithmSpecification": {"TrainingImage": "local/python3", "TrainingInputMode": "File",
                                       "MetricDefinitions": [{"Name": "score", "Regex": "score=([-0-9.]+)"}]},
            "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
            "OutputDataConfig": {"S3OutputPath": "s3://trainyard-test/output"},
            "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
            "StoppingCondition": {"MaxRuntimeInSeconds": 300},
            "CheckpointConfig": {"S3Uri": "s3://trainyard-test/ckpt/"},
        }

    def config(self, max_jobs, seed):
        return {"Strategy": "Hyperband",
                "StrategyConfig": {"HyperbandStrategyConfig": {"MinResource": MIN_RESOURCE, "MaxResource": MAX_RESOURCE}},
                "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "score"},
                "ResourceLimits": {"MaxNumberOfTrainingJobs": max_jobs, "MaxParallelTrainingJobs": 1},
                "ParameterRanges": {"IntegerParameterRanges": [{"Name": "x", "MinValue": "0", "MaxValue": "99"}]},
                "RandomSeed": seed}

    def points(self, job):
        out = self.server.admin("metric-series", {"TrainingJobName": job, "MetricName": "score"})
        return [p["Value"] for s in out["Series"] for p in s["Points"]]

    def drive(self, name, timeout=60):
        """Releases each held trial once the controller has read its value at the rung and left it
        running; returns the tuning job's final description."""
        released = set()
        deadline = time.time() + timeout
        while True:
            d = self.sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
            c, o = d["TrainingJobStatusCounters"], d["ObjectiveStatusCounters"]
            self.assertEqual(sum(c.values()), sum(o.values()), d)
            if d["HyperParameterTuningJobStatus"] in ("Completed", "Stopped", "Failed"):
                return d
            for held in [f for f in os.listdir(self.work_dir) if f.endswith(".held")]:
                job = held[:-len(".held")]
                with open(os.path.join(self.work_dir, held)) as f:
                    fields = f.read().split()
                if len(fields) != 2:
                    continue  # the trial is still writing it (the shell's > truncates first)
                epoch, printed = map(int, fields)
                if (job, epoch) in released or len(self.points(job)) < printed:
                    continue
                # The controller has read this value; its stop decision was made in the same commit.
                if self.sm.describe_training_job(TrainingJobName=job)["TrainingJobStatus"] == "InProgress":
                    open(os.path.join(self.work_dir, f"{job}.{epoch}"), "w").close()
                    released.add((job, epoch))
            self.assertLess(time.time(), deadline, f"{name}: {d['TrainingJobStatusCounters']}\n{self.server.read_log()}")
            time.sleep(0.02)

    def trials(self, name):
        out, token = [], None
        while True:
            args = dict(HyperParameterTuningJobName=name, SortBy="CreationTime", SortOrder="Ascending", MaxResults=100)
            if token:
                args["NextToken"] = token
            page = self.sm.list_training_jobs_for_hyper_parameter_tuning_job(**args)
            out += page["TrainingJobSummaries"]
            token = page.get("NextToken")
            if not token:
                return sorted(out, key=lambda t: t["TrainingJobName"])  # <name>-NNN-...: suggestion order

    def log_lines(self, job):
        logs = self.server.client("logs")
        try:
            streams = logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=job + "/")["logStreams"]
            self.assertEqual(len(streams), 1, streams)
            events = logs.get_log_events(logGroupName=LOG_GROUP, logStreamName=streams[0]["logStreamName"],
                                         startFromHead=True)["events"]
        finally:
            logs.close()
        return [e["message"] for e in events if not e["message"].startswith("[trainyard]")]

    def test_promoted_trial_continues_from_its_parents_checkpoint(self):
        # With seed 2, trial 5 (x = 83) is stopped at rung 1 and, once enough worse values have
        # been recorded there, promoted as trial 12; trial 13 is a fresh one.
        max_jobs = 13
        os.makedirs(self.bucket_path("trainyard-test"), exist_ok=True)
        self.sm.create_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="promo", HyperParameterTuningJobConfig=self.config(max_jobs, 2),
            TrainingJobDefinition=self.definition())
        d = self.drive("promo")
        self.assertEqual(d["HyperParameterTuningJobStatus"], "Completed", d.get("FailureReason"))
        trials = self.trials("promo")
        self.assertEqual(len(trials), max_jobs)
        reported = {t["TrainingJobName"]: self.points(t["TrainingJobName"]) for t in trials}

        # Every trial ends at a rung: stopped there (with the objective it reached), or after its epochs.
        for t in trials:
            name = t["TrainingJobName"]
            values = reported[name]
            self.assertIn(t["TrainingJobStatus"], ("Completed", "Stopped"), t)
            if t["TrainingJobStatus"] == "Stopped":
                self.assertIn(len(values), RUNGS[:-1], name)
            self.assertEqual(t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"], values[-1], name)

        # Exactly one promotion: a later trial with an earlier trial's hyperparameters.
        first = {}
        promotions = []
        for t in trials:
            x = t["TunedHyperParameters"]["x"]
            if x in first:
                promotions.append((first[x], t))
            else:
                first[x] = t
        self.assertEqual(len(promotions), 1, [(p["TrainingJobName"], c["TrainingJobName"]) for p, c in promotions])
        parent, child = promotions[0]
        self.assertEqual((parent["TrainingJobName"][:9], child["TrainingJobName"][:9]), ("promo-005", "promo-012"))
        x, pname, cname = int(parent["TunedHyperParameters"]["x"]), parent["TrainingJobName"], child["TrainingJobName"]
        self.assertEqual(x, 83)

        # The parent: a fresh trial given MaxResource epochs, stopped at rung 1 with its epoch-1 value.
        self.assertEqual(parent["TunedHyperParameters"]["epochs"], str(MAX_RESOURCE))
        self.assertEqual(parent["TrainingJobStatus"], "Stopped")
        self.assertEqual(reported[pname], [score(x, 1)])
        stopped_at = len(reported[pname])
        # The promotion: the same hyperparameters, epochs = the next rung, the parent's checkpoint prefix.
        self.assertEqual(child["TunedHyperParameters"], {"x": str(x), "epochs": str(RUNGS[RUNGS.index(stopped_at) + 1])})
        self.assertEqual(child["TrainingJobStatus"], "Completed")
        tj = self.sm.describe_training_job(TrainingJobName=cname)
        self.assertEqual(tj["TuningJobArn"], d["HyperParameterTuningJobArn"])
        self.assertEqual(tj["CheckpointConfig"]["S3Uri"], f"s3://trainyard-test/ckpt/{pname}")
        self.assertEqual(tj["HyperParameters"]["epochs"], "3")
        # It restored the parent's last checkpointed epoch and trained epochs 2 and 3 only.
        self.assertEqual(self.log_lines(pname)[:2], ["start 0", f"epoch=1 score={score(x, 1)}"])
        self.assertEqual(self.log_lines(cname), ["start 1", f"epoch=2 score={score(x, 2)}", f"epoch=3 score={score(x, 3)}"])
        self.assertEqual(reported[cname], [score(x, 2), score(x, 3)])
        self.assertEqual(child["FinalHyperParameterTuningJobObjectiveMetric"]["Value"], score(x, 3))
        with open(self.bucket_path("trainyard-test", f"ckpt/{pname}/log")) as f:
            lineage = f.read().split("\n")[:-1]
        self.assertEqual(lineage, [f"{pname} start 0", f"{pname} epoch 1", f"{pname} stopped 1",
                                   f"{cname} start 1", f"{cname} epoch 2", f"{cname} epoch 3", f"{cname} done 3"])
        with open(self.bucket_path("trainyard-test", f"ckpt/{pname}/epoch")) as f:
            self.assertEqual(f.read(), "3")
        self.assertFalse(os.path.exists(self.bucket_path("trainyard-test", f"ckpt/{cname}")))
        # Every fresh trial started from nothing, in its own prefix.
        for t in trials:
            if t is not child:
                self.assertEqual(self.log_lines(t["TrainingJobName"])[0], "start 0", t["TrainingJobName"])

        # The counters add up to the trials listed.
        by_status = {s: sum(t["TrainingJobStatus"] == s for t in trials) for s in ("Completed", "Stopped")}
        self.assertEqual(d["TrainingJobStatusCounters"], {"Completed": by_status["Completed"], "InProgress": 0,
                                                          "RetryableError": 0, "NonRetryableError": 0,
                                                          "Stopped": by_status["Stopped"]})
        self.assertEqual(by_status["Completed"] + by_status["Stopped"], max_jobs)
        self.assertEqual(d["ObjectiveStatusCounters"], {"Succeeded": max_jobs, "Pending": 0, "Failed": 0})
        best = max(trials, key=lambda t: t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"])
        self.assertEqual(d["BestTrainingJob"]["TrainingJobName"], best["TrainingJobName"])

if __name__ == "__main__":
    unittest.main()
