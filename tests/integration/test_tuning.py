"""Hyperparameter tuning through boto3 (docs/tuning.md): each strategy end to end on a real
script whose objective is a known function of its hyperparameters (examples/tuning/objective.py),
the counters, BestTrainingJob, the trials' list, events, stop and refusals that store nothing."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.request

import botocore.exceptions

import harness

OBJECTIVE = os.path.join(harness.SOURCE_DIR, "examples", "tuning", "objective.py")


def score(hps):
    x, y = float(hps.get("x", 0)), float(hps.get("y", 0))
    epochs = int(hps.get("epochs", 3))
    base = 10 - (x - 3) ** 2 - (y - 0.2) ** 2 * 10 - (0 if hps.get("opt", "good") == "good" else 2)
    return base * (1 - 0.5 ** epochs)


class TuningTest(harness.ServerTest):
    server_args = ["--clock=offset"]  # MaxRuntimeInSeconds is at least 120 s: the test moves the clock

    def stage(self):
        src = tempfile.mkdtemp(prefix="trainyard-tune-")
        try:
            shutil.copy(OBJECTIVE, os.path.join(src, "objective.py"))
            os.makedirs(self.bucket_path("trainyard-test", "code"), exist_ok=True)
            subprocess.check_call(["tar", "-czf", self.bucket_path("trainyard-test", "code/tune.tar.gz"), "-C", src, "."])
        finally:
            shutil.rmtree(src)

    def definition(self, **static):
        hps = {"sagemaker_program": "objective.py", "sagemaker_submit_directory": "s3://trainyard-test/code/tune.tar.gz",
               "epochs": "3"}
        hps.update(static)
        return {
            "StaticHyperParameters": hps,
            "AlgorithmSpecification": {"TrainingImage": "local/python3", "TrainingInputMode": "File",
                                       "MetricDefinitions": [{"Name": "score", "Regex": "score=([-0-9.]+)"}]},
            "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
            "OutputDataConfig": {"S3OutputPath": "s3://trainyard-test/output"},
            "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
            "StoppingCondition": {"MaxRuntimeInSeconds": 300},
        }

    def config(self, strategy="Random", max_jobs=4, parallel=2, **extra):
        c = {"Strategy": strategy,
             "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "score"},
             "ResourceLimits": {"MaxNumberOfTrainingJobs": max_jobs, "MaxParallelTrainingJobs": parallel},
             "ParameterRanges": {
                 "ContinuousParameterRanges": [{"Name": "y", "MinValue": "0", "MaxValue": "1"}],
                 "IntegerParameterRanges": [{"Name": "x", "MinValue": "0", "MaxValue": "6"}],
                 "CategoricalParameterRanges": [{"Name": "opt", "Values": ["good", "bad"]}]},
             "RandomSeed": 7}
        c.update(extra)
        return c

    def create(self, name, config, definition=None, **extra):
        return self.sm.create_hyper_parameter_tuning_job(
            HyperParameterTuningJobName=name, HyperParameterTuningJobConfig=config,
            TrainingJobDefinition=definition or self.definition(), **extra)

    def wait_tuning(self, name, statuses=("Completed", "Stopped", "Failed"), timeout=120):
        deadline = time.time() + timeout
        while True:
            d = self.sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
            self.check_consistent(d)
            if d["HyperParameterTuningJobStatus"] in statuses:
                return d
            if time.time() > deadline:
                self.fail(f"{name} is {d['HyperParameterTuningJobStatus']}: {d['TrainingJobStatusCounters']}\n"
                          f"{self.server.read_log()}")
            time.sleep(0.1)

    def trials(self, name, **kw):
        out, token = [], None
        while True:
            args = dict(HyperParameterTuningJobName=name, MaxResults=2, **kw)
            if token:
                args["NextToken"] = token
            page = self.sm.list_training_jobs_for_hyper_parameter_tuning_job(**args)
            out += page["TrainingJobSummaries"]
            token = page.get("NextToken")
            if not token:
                return out

    def check_consistent(self, d):
        # The counters add up to the trials listed at the same moment's describe (each read is one snapshot).
        c, o = d["TrainingJobStatusCounters"], d["ObjectiveStatusCounters"]
        self.assertEqual(sum(c.values()), sum(o.values()))

    def run_strategy(self, strategy, max_jobs, **extra):
        self.stage()
        name = "tune-" + strategy.lower()
        self.create(name, self.config(strategy, max_jobs=max_jobs, **extra))
        d = self.wait_tuning(name)
        self.assertEqual(d["HyperParameterTuningJobStatus"], "Completed")
        trials = self.trials(name)
        self.assertEqual(len(trials), max_jobs)
        self.assertEqual(len({t["TrainingJobName"] for t in trials}), max_jobs)
        for t in trials:
            self.assertRegex(t["TrainingJobName"], rf"^{name}-\d{{3}}-[0-9a-f]{{8}}$")
            self.assertEqual(t["TrainingJobStatus"], "Completed")
            expected = score(t["TunedHyperParameters"])
            self.assertAlmostEqual(t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"], expected, places=4)
            tj = self.sm.describe_training_job(TrainingJobName=t["TrainingJobName"])
            self.assertEqual(tj["TuningJobArn"], d["HyperParameterTuningJobArn"])
        self.assertEqual(d["TrainingJobStatusCounters"]["Completed"], max_jobs)
        self.assertEqual(d["ObjectiveStatusCounters"]["Succeeded"], max_jobs)
        best = max(trials, key=lambda t: t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"])
        self.assertEqual(d["BestTrainingJob"]["TrainingJobName"], best["TrainingJobName"])
        ranked = self.trials(name, SortBy="FinalObjectiveMetricValue", SortOrder="Descending")
        self.assertEqual(ranked[0]["TrainingJobName"], best["TrainingJobName"])
        return d, trials

    def test_random_runs_every_trial_and_reports_the_best(self):
        self.run_strategy("Random", 4)

    def test_bayesian_runs_every_trial_and_reports_the_best(self):
        self.run_strategy("Bayesian", 4)

    def test_hyperband_gives_trials_epochs_and_stops_them(self):
        self.stage()
        config = self.config("Hyperband", max_jobs=6, parallel=2,
                             StrategyConfig={"HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": 4}})
        self.create("tune-hb", config, self.definition(epochs="4"))
        d = self.wait_tuning("tune-hb")
        self.assertEqual(d["HyperParameterTuningJobStatus"], "Completed", d.get("FailureReason"))
        trials = self.trials("tune-hb")
        self.assertGreater(len(trials), 0)
        for t in trials:
            # The resource is the epochs static hyperparameter, each trial's own.
            self.assertIn(int(t["TunedHyperParameters"]["epochs"]), range(1, 5))
        c = d["TrainingJobStatusCounters"]
        self.assertEqual(c["InProgress"], 0)
        self.assertEqual(sum(c.values()), len(trials))
        self.assertIn("BestTrainingJob", d)

    def test_early_stopping_auto_stops_poor_trials_with_their_objective(self):
        self.stage()
        config = self.config("Random", max_jobs=8, parallel=2, TrainingJobEarlyStoppingType="Auto")
        self.create("tune-es", config, self.definition(epochs="8", epoch_ms="100"))
        d = self.wait_tuning("tune-es")
        self.assertEqual(d["HyperParameterTuningJobStatus"], "Completed")
        trials = self.trials("tune-es")
        self.assertEqual(len(trials), 8)
        stopped = [t for t in trials if t["TrainingJobStatus"] == "Stopped"]
        self.assertEqual(d["TrainingJobStatusCounters"]["Stopped"], len(stopped))
        for t in stopped:  # stopped early: its objective counts
            self.assertEqual(t["ObjectiveStatus"], "Succeeded")
        self.assertEqual(d["ObjectiveStatusCounters"]["Succeeded"], 8)

    def test_cli_tune_shows_the_trials_best_first(self):
        d, trials = self.run_strategy("Random", 3)
        cli = [harness.BIN, "--endpoint-url", self.server.url, "--data-dir", self.data_dir]
        out = subprocess.run([cli[0], "tune", "tune-random"] + cli[1:], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertIn("status:     Completed", lines)
        header = next(i for i, line in enumerate(lines) if line.startswith("TRIAL"))
        self.assertEqual(len(lines) - header - 1, 3)
        self.assertTrue(lines[header + 1].startswith(d["BestTrainingJob"]["TrainingJobName"]))
        listed = subprocess.run([cli[0], "tune"] + cli[1:], capture_output=True, text=True, timeout=30)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertIn("tune-random", listed.stdout)

    def test_grid_walks_every_categorical_combination(self):
        self.stage()
        config = self.config("Grid", parallel=2)
        del config["ResourceLimits"]["MaxNumberOfTrainingJobs"]
        config["ParameterRanges"] = {"CategoricalParameterRanges": [
            {"Name": "opt", "Values": ["good", "bad"]}, {"Name": "x", "Values": ["1", "3"]}]}
        self.create("tune-grid", config)
        d = self.wait_tuning("tune-grid")
        self.assertEqual(d["HyperParameterTuningJobStatus"], "Completed")
        combos = {(t["TunedHyperParameters"]["opt"], t["TunedHyperParameters"]["x"]) for t in self.trials("tune-grid")}
        self.assertEqual(combos, {("good", "1"), ("good", "3"), ("bad", "1"), ("bad", "3")})
        self.assertEqual(d["BestTrainingJob"]["TunedHyperParameters"], {"opt": "good", "x": "3"})

    def test_stop_stops_running_trials_and_ends_stopped(self):
        self.stage()
        self.create("tune-stop", self.config("Random", max_jobs=4, parallel=2),
                    self.definition(epoch_ms="60000", epochs="2"))
        deadline = time.time() + 30
        while self.sm.describe_hyper_parameter_tuning_job(
                HyperParameterTuningJobName="tune-stop")["TrainingJobStatusCounters"]["InProgress"] < 2:
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        self.sm.stop_hyper_parameter_tuning_job(HyperParameterTuningJobName="tune-stop")
        d = self.wait_tuning("tune-stop", statuses=("Stopped",))
        self.assertEqual(d["TrainingJobStatusCounters"]["Stopped"], 2)
        self.assertEqual(len(self.trials("tune-stop")), 2)  # nothing new started after the stop
        with self.assertRaises(botocore.exceptions.ClientError):
            self.sm.stop_hyper_parameter_tuning_job(HyperParameterTuningJobName="tune-stop")
        # Events: the tuning job's own state changes, in order, shaped as SageMaker's.
        stored = self.server.raw_call("events", "Events", {"After": 0, "Limit": 1000}, path="/trainyard/v1/events")["Events"]
        mine = [e["Event"] for e in stored
                if e["Event"]["detail-type"] == "SageMaker HyperParameter Tuning Job State Change"]
        self.assertEqual([e["detail"]["HyperParameterTuningJobStatus"] for e in mine], ["InProgress", "Stopping", "Stopped"])
        self.assertEqual(mine[-1]["source"], "aws.sagemaker")
        self.assertEqual(mine[-1]["resources"], [d["HyperParameterTuningJobArn"]])
        self.assertEqual(mine[-1]["detail"]["TrainingJobStatusCounters"]["Stopped"], 2)
        with urllib.request.urlopen(self.server.url + "/metrics", timeout=10) as r:
            metrics = r.read().decode()
        self.assertIn('trainyard_tuning_jobs{status="Stopped"} 1\n', metrics)
        self.assertIn('trainyard_tuning_jobs{status="InProgress"} 0\n', metrics)

    def test_max_runtime_stops_the_trials_and_ends_stopped(self):
        self.stage()
        config = self.config("Random", max_jobs=4, parallel=2)
        config["ResourceLimits"]["MaxRuntimeInSeconds"] = 120
        self.create("tune-runtime", config, self.definition(epoch_ms="60000", epochs="2"))
        deadline = time.time() + 30
        while self.sm.describe_hyper_parameter_tuning_job(
                HyperParameterTuningJobName="tune-runtime")["TrainingJobStatusCounters"]["InProgress"] < 2:
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        self.advance(100)  # its turn steps the tuning job at the moved clock: still within the limit
        d = self.sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="tune-runtime")
        self.assertEqual(d["HyperParameterTuningJobStatus"], "InProgress")
        self.advance(25)
        d = self.wait_tuning("tune-runtime", statuses=("Stopped",))
        self.assertEqual(d["TrainingJobStatusCounters"], {"Completed": 0, "InProgress": 0, "RetryableError": 0,
                                                          "NonRetryableError": 0, "Stopped": 2})
        self.assertGreaterEqual(d["ConsumedResources"]["RuntimeInSeconds"], 120)

    def test_warm_start_seeds_the_child_and_reports_the_overall_best(self):
        self.stage()
        self.create("tune-parent", self.config("Random", max_jobs=3, parallel=3))
        self.wait_tuning("tune-parent")
        parent = self.trials("tune-parent")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.create("tune-child", self.config("Random", max_jobs=2, parallel=1),
                        WarmStartConfig={"ParentHyperParameterTuningJobs": [{"HyperParameterTuningJobName": "nope"}],
                                         "WarmStartType": "IdenticalDataAndAlgorithm"})
        self.assertEqual(e.exception.response["Error"]["Code"], "ResourceNotFound")
        self.create("tune-child", self.config("Bayesian", max_jobs=2, parallel=1),
                    WarmStartConfig={"ParentHyperParameterTuningJobs": [{"HyperParameterTuningJobName": "tune-parent"}],
                                     "WarmStartType": "IdenticalDataAndAlgorithm"})
        d = self.wait_tuning("tune-child")
        child = self.trials("tune-child")
        self.assertEqual(len(child), 2)
        everyone = parent + child
        best = max(everyone, key=lambda t: t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"])
        self.assertEqual(d["OverallBestTrainingJob"]["TrainingJobName"], best["TrainingJobName"])
        mine = max(child, key=lambda t: t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"])
        self.assertEqual(d["BestTrainingJob"]["TrainingJobName"], mine["TrainingJobName"])
        # A parent that a live job warm-starts from, or that is running, cannot be deleted; an ended one can.
        self.sm.delete_hyper_parameter_tuning_job(HyperParameterTuningJobName="tune-child")
        self.sm.delete_hyper_parameter_tuning_job(HyperParameterTuningJobName="tune-parent")
        self.assertEqual(self.sm.list_hyper_parameter_tuning_jobs()["HyperParameterTuningJobSummaries"], [])
        self.assertEqual(len(self.sm.list_training_jobs(MaxResults=100)["TrainingJobSummaries"]), 5)

    def test_refusals_store_nothing(self):
        self.stage()
        bad = [
            ("Hyperband with early stopping", self.config("Hyperband", TrainingJobEarlyStoppingType="Auto")),
            ("StrategyConfig without Hyperband", self.config("Random", StrategyConfig={"HyperbandStrategyConfig": {"MaxResource": 3}})),
            ("parallel above max", self.config("Random", max_jobs=2, parallel=3)),
            ("unknown objective", self.config(HyperParameterTuningJobObjective={"Type": "Maximize", "MetricName": "nope"})),
            ("bad range", self.config(ParameterRanges={"IntegerParameterRanges": [{"Name": "x", "MinValue": "5", "MaxValue": "1"}]})),
            ("grid with continuous", self.config("Grid")),
            # AWS's caps (docs/tuning.md, "Limits"): the review's 10^9 / 10^6 used to loop the
            # creating turn until the server was killed.
            ("a billion trials", self.config("Random", max_jobs=10 ** 9, parallel=10 ** 6)),
            ("parallel above 100", self.config("Random", max_jobs=750, parallel=101)),
            ("runtime above the model's range", self.config(ResourceLimits={
                "MaxNumberOfTrainingJobs": 4, "MaxParallelTrainingJobs": 2, "MaxRuntimeInSeconds": 10 ** 9})),
        ]
        for why, config in bad:
            with self.subTest(why):
                with self.assertRaises(botocore.exceptions.ClientError) as e:
                    self.create("tune-bad", config)
                self.assertEqual(e.exception.response["Error"]["Code"], "ValidationException")
                if why == "a billion trials":
                    self.assertIn("MaxNumberOfTrainingJobs must be between 1 and 750",
                                  e.exception.response["Error"]["Message"])
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.create("tune-bad", self.config(), self.definition(x="1"))  # static and tuned
        self.assertIn("StaticHyperParameters", e.exception.response["Error"]["Message"])
        self.assertEqual(self.sm.list_hyper_parameter_tuning_jobs()["HyperParameterTuningJobSummaries"], [])
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])

    def test_kill9_mid_search_loses_and_duplicates_no_trial(self):
        # MaxParallelTrainingJobs 1, RandomSeed 7: the trials after the restart are the ones an
        # uncrashed run with the same seed suggests, each started once.
        self.stage()
        config = self.config("Random", max_jobs=5, parallel=1)
        self.create("tune-crash", config, self.definition(epoch_ms="150"))
        deadline = time.time() + 60
        while len(self.trials("tune-crash")) < 2:
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        self.server.kill9()
        self.server = self.new_server()
        self.sm = self.server.client("sagemaker")
        d = self.wait_tuning("tune-crash")
        self.assertEqual(d["HyperParameterTuningJobStatus"], "Completed")
        crashed = sorted(self.trials("tune-crash"), key=lambda t: t["TrainingJobName"])
        self.assertEqual(len(crashed), 5)
        self.assertEqual([t["TrainingJobName"][:len("tune-crash-000")] for t in crashed],
                         [f"tune-crash-{n:03d}" for n in range(1, 6)])
        self.assertEqual(d["TrainingJobStatusCounters"]["Completed"], 5)
        self.assertEqual(len(self.sm.list_training_jobs(MaxResults=100)["TrainingJobSummaries"]), 5)

        self.create("tune-calm", config)
        self.wait_tuning("tune-calm")
        calm = sorted(self.trials("tune-calm"), key=lambda t: t["TrainingJobName"])
        self.assertEqual([t["TunedHyperParameters"] for t in crashed], [t["TunedHyperParameters"] for t in calm])

    def test_name_taken_is_resource_in_use(self):
        self.stage()
        self.create("tune-dup", self.config(max_jobs=1, parallel=1))
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.create("TUNE-dup", self.config(max_jobs=1, parallel=1))
        self.assertEqual(e.exception.response["Error"]["Code"], "ResourceInUse")
        d = self.wait_tuning("tune-dup")
        arn = d["HyperParameterTuningJobArn"]
        self.sm.add_tags(ResourceArn=arn, Tags=[{"Key": "team", "Value": "search"}])
        self.assertEqual(self.sm.list_tags(ResourceArn=arn)["Tags"], [{"Key": "team", "Value": "search"}])
        self.sm.delete_tags(ResourceArn=arn, TagKeys=["team"])
        self.assertEqual(self.sm.list_tags(ResourceArn=arn)["Tags"], [])
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.sm.list_tags(ResourceArn=arn.replace("tune-dup", "tune-none"))
        self.assertEqual(e.exception.response["Error"]["Code"], "ResourceNotFound")
        listed = self.sm.list_hyper_parameter_tuning_jobs(NameContains="dup")["HyperParameterTuningJobSummaries"]
        self.assertEqual([j["HyperParameterTuningJobName"] for j in listed], ["tune-dup"])

    def test_permissions_are_scoped_to_the_tuning_job(self):
        # A user allowed the tuning actions on team-a-* tuning jobs only: its own are served, another
        # team's are refused with the ARN named, and listing shows only its own.
        self.stage()
        admin = lambda op, body: self.server.admin("admin/iam/" + op, body)  # noqa: E731
        arn = "arn:aws:sagemaker:us-east-1:000000000000:hyper-parameter-tuning-job/team-a-*"
        admin("CreatePolicy", {"PolicyName": "team-a-tuning", "PolicyDocument": json.dumps({
            "Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": ["sagemaker:*HyperParameterTuningJob*"], "Resource": arn},
                {"Effect": "Allow", "Action": ["sagemaker:ListHyperParameterTuningJobs", "sagemaker:CreateTrainingJob",
                                               "iam:PassRole"], "Resource": "*"},
                # Its trials read and write the data bucket as the tuner (docs/security.md, "Jobs' data").
                {"Effect": "Allow", "Action": "s3:*",
                 "Resource": ["arn:aws:s3:::trainyard-test", "arn:aws:s3:::trainyard-test/*"]}]})})
        admin("CreateUser", {"UserName": "tuner"})
        admin("AttachUserPolicy", {"UserName": "tuner", "PolicyName": "team-a-tuning"})
        key = admin("CreateAccessKey", {"UserName": "tuner"})["AccessKey"]
        tuner = self.server.client("sagemaker", key=key["AccessKeyId"], secret=key["SecretAccessKey"])
        self.create("team-b-sweep", self.config(max_jobs=1, parallel=1))
        tuner.create_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="team-a-sweep", HyperParameterTuningJobConfig=self.config(max_jobs=1, parallel=1),
            TrainingJobDefinition=self.definition())
        self.assertEqual(tuner.describe_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="team-a-sweep")["HyperParameterTuningJobName"], "team-a-sweep")
        for call in (lambda: tuner.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="team-b-sweep"),
                     lambda: tuner.stop_hyper_parameter_tuning_job(HyperParameterTuningJobName="team-b-sweep"),
                     lambda: tuner.list_training_jobs_for_hyper_parameter_tuning_job(
                         HyperParameterTuningJobName="team-b-sweep"),
                     lambda: tuner.create_hyper_parameter_tuning_job(
                         HyperParameterTuningJobName="team-b-other",
                         HyperParameterTuningJobConfig=self.config(max_jobs=1, parallel=1),
                         TrainingJobDefinition=self.definition())):
            with self.assertRaises(botocore.exceptions.ClientError) as e:
                call()
            self.assertEqual(e.exception.response["Error"]["Code"], "AccessDeniedException")
            self.assertIn("hyper-parameter-tuning-job/team-b-", e.exception.response["Error"]["Message"])
        listed = [j["HyperParameterTuningJobName"] for j in
                  tuner.list_hyper_parameter_tuning_jobs()["HyperParameterTuningJobSummaries"]]
        self.assertEqual(listed, ["team-a-sweep"])
        tuner.close()


if __name__ == "__main__":
    unittest.main()
