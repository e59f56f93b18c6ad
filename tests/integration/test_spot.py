"""Managed spot training through a real server and real processes (docs/spot.md):
each lifecycle of §7 (no interruption, one, two plus MaxWaitTimeExceeded, never launched), the
interruption notice, resuming from the saved checkpoint, billing and the cost report. Long waits
use the offset clock."""
import json
import os
import time
import unittest

from botocore.exceptions import ClientError

from harness import Server, ServerTest

# Counts to $1 in steps of 0.1 s, saving the step in its checkpoint directory after each one. On
# SIGTERM it logs whether the interruption notice was there with the step it saved, and exits at
# once (its checkpoint is already saved), which frees the spot capacity without waiting out the
# notice. The trap is in place before the "start" line: a run whose start is in the store
# handles its SIGTERM. The trap reads the saved step back, as the next run will: $s can be one
# ahead of it.
COUNTER = ("M=$TRAINYARD_CHECKPOINT_MARKER; D=${M%/*}; s=$(cat $D/step 2>/dev/null || echo 0); "
           "trap 'if [ -e \"$TRAINYARD_INTERRUPTION_NOTICE\" ]; then read s < $D/step; echo notice $s >> $D/log; fi; "
           "exit 143' TERM; "
           "echo start $s >> $D/log; "
           "while [ $s -lt {steps} ]; do s=$((s+1)); echo $s > $D/step; touch $M; sleep 0.1; done; "
           "echo done $s >> $D/log")

CONFIG = """
[executor]
stop_grace_seconds = 2
spot_notice_seconds = 30

[object_store]
checkpoint_sync_seconds = 1

[[instance_types]]
name = "ml.m5.xlarge"
count = 2
spot_count = 1
price_per_hour = 0.23
spot_price_per_hour = 0.069
"""


class SpotTest(ServerTest):
    server_args = ["--clock=offset"]
    server_config = CONFIG

    def spot_payload(self, name, steps=30, max_wait=3600, max_runtime=1800, **extra):
        # ContainerArguments entries hold at most 256 characters: the script goes in pieces.
        script = COUNTER.replace("{steps}", str(steps))
        pieces = [script[i:i + 200] for i in range(0, len(script), 200)]
        payload = self.command_payload(name, "eval \"" + "".join(f"${{{i + 1}}}" for i in range(len(pieces))) + "\"",
                                       EnableManagedSpotTraining=True,
                                       StoppingCondition={"MaxRuntimeInSeconds": max_runtime,
                                                          "MaxWaitTimeInSeconds": max_wait},
                                       CheckpointConfig={"S3Uri": f"s3://trainyard-test/ckpt/{name}"}, **extra)
        payload["AlgorithmSpecification"]["ContainerArguments"] += ["sh"] + pieces
        payload["ResourceConfig"]["InstanceType"] = "ml.m5.xlarge"
        return payload

    def ckpt_log(self, name):
        path = self.bucket_path("trainyard-test", f"ckpt/{name}/log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return f.read().split("\n")[:-1]

    @staticmethod
    def starts(log):
        return sum(1 for line in log if line.startswith("start "))

    def wait_log(self, name, ready, timeout=30):
        """The checkpoint log in the store once ready(log) holds."""
        deadline = time.time() + timeout
        while True:
            log = self.ckpt_log(name)
            if ready(log):
                return log
            if time.time() > deadline:
                self.fail(f"{name}'s checkpoint log never got there: {log}")
            time.sleep(0.05)

    def wait_transitions(self, name, status, count, timeout=30):
        """Once `status` is `count` times in the job's transitions. A run that exits at once on its
        notice can be Training again before a poll of SecondaryStatus sees it Interrupted."""
        deadline = time.time() + timeout
        while True:
            tj = self.sm.describe_training_job(TrainingJobName=name)
            if self.statuses(tj).count(status) >= count:
                return tj
            if time.time() > deadline:
                self.fail(f"{name} never went {status} {count} times: {self.statuses(tj)}")
            time.sleep(0.05)

    def wait_step(self, name, at_least, timeout=30):
        path = self.bucket_path("trainyard-test", f"ckpt/{name}/step")
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with open(path) as f:
                    if int(f.read().strip() or 0) >= at_least:
                        return
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        self.fail(f"{name} never saved step {at_least}")

    def interrupt(self, name):
        return self.server.admin("admin/interrupt", {"TrainingJobName": name})

    def statuses(self, tj):
        return [t["Status"] for t in tj["SecondaryStatusTransitions"]]

    def test_no_interruption(self):
        self.sm.create_training_job(**self.spot_payload("calm", steps=20))
        tj = self.wait_training("calm", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertTrue(tj["EnableManagedSpotTraining"])
        self.assertEqual(self.statuses(tj), ["Starting", "Downloading", "Training", "Uploading", "Completed"])
        # Billable time is the run time at the spot price: 30% of on-demand here.
        self.assertGreaterEqual(tj["TrainingTimeInSeconds"], 2)
        self.assertLess(tj["BillableTimeInSeconds"], tj["TrainingTimeInSeconds"])
        costs = self.server.admin("costs", {})
        row = next(j for j in costs["Jobs"] if j["TrainingJobName"] == "calm")
        self.assertTrue(row["ManagedSpot"])
        self.assertEqual(row["SavingsPercent"], 70.0)
        self.assertAlmostEqual(row["CostUsd"], row["OnDemandCostUsd"] * 0.3, places=9)
        self.assertAlmostEqual(row["OnDemandCostUsd"], row["TrainingTimeInSeconds"] * 0.23 / 3600, delta=0.23 / 3600)

    def test_one_interruption_resumes_from_the_saved_step(self):
        self.sm.create_training_job(**self.spot_payload("once", steps=40))
        self.wait_step("once", 5)
        self.interrupt("once")
        self.wait_transitions("once", "Interrupted", 1)
        tj = self.wait_training("once", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual(self.statuses(tj), ["Starting", "Downloading", "Training", "Interrupted", "Starting",
                                             "Downloading", "Training", "Uploading", "Completed"])
        raw = self.server.raw_call("sagemaker", "DescribeTrainingJob", {"TrainingJobName": "once"})
        self.assertEqual(raw["SpotInterruptions"], 1)
        # It saved a step every 0.1 s and exited on the notice: little work was thrown away.
        self.assertGreater(raw["InterruptionLossInstanceSeconds"], 0)
        self.assertLess(raw["InterruptionLossInstanceSeconds"], 5)
        log = self.ckpt_log("once")
        # The first run saw the notice, the second started at the step the first one saved.
        self.assertEqual(log[0], "start 0", log)
        self.assertTrue(log[1].startswith("notice "), log)
        saved = int(log[1].split()[1])
        self.assertGreaterEqual(saved, 5)
        self.assertEqual(log[2], f"start {saved}", log)
        self.assertEqual(log[3], "done 40", log)
        restart = tj["SecondaryStatusTransitions"][4]["StatusMessage"]
        self.assertIn("restarting after interruption 1", restart)

    def test_an_interruption_after_the_run_finished_keeps_its_outcome(self):
        # The job's process exits 0 at once, leaving a model that takes the supervisor seconds to
        # pack; the interruption comes while it uploads, so it never reaches the run. The run's
        # outcome stands: the job is Completed, and is not run a second time. (bench/chaos.py
        # found this: jobs that had finished all their steps ran again after such a late interruption.)
        script = ("M=$TRAINYARD_CHECKPOINT_MARKER; D=${M%/*}; mkdir -p $D; echo start >> $D/log; "
                  "head -c 150000000 /dev/urandom > $SM_MODEL_DIR/weights; echo done >> $D/log")
        payload = self.spot_payload("late")
        payload["AlgorithmSpecification"]["ContainerArguments"] = [script]
        self.sm.create_training_job(**payload)
        self.wait_secondary("late", "Uploading", timeout=60)
        self.interrupt("late")
        tj = self.wait_training("late", timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual(self.ckpt_log("late"), ["start", "done"])
        self.assertNotIn("Starting", self.statuses(tj)[1:])  # launched once
        self.assertTrue(tj["ModelArtifacts"]["S3ModelArtifacts"].endswith("/late/output/model.tar.gz"))

    def test_two_interruptions_then_max_wait_exceeded(self):
        self.sm.create_training_job(**self.spot_payload("twice", steps=100000, max_wait=3600, max_runtime=1800))
        for n in (1, 2):
            # Run n is interrupted once its trap is in place (its start line is in the store,
            # synced every second) and it has saved steps of its own: Training is reported once the
            # process is started, and the step restored from the run before already satisfies
            # any fixed wait, so neither says that the run can handle its notice yet.
            log = self.wait_log("twice", lambda log: self.starts(log) == n)
            self.wait_step("twice", int(log[-1].split()[1]) + 3)
            self.interrupt("twice")
            self.wait_transitions("twice", "Interrupted", n)
            self.wait_transitions("twice", "Training", n + 1)
        # The third run's start, before MaxWaitTime stops it.
        self.wait_log("twice", lambda log: self.starts(log) == 3)
        self.advance(3600)
        tj = self.wait_training("twice", timeout=60)
        self.assertEqual((tj["TrainingJobStatus"], tj["SecondaryStatus"]), ("Stopped", "MaxWaitTimeExceeded"))
        self.assertEqual(self.statuses(tj), ["Starting", "Downloading", "Training", "Interrupted", "Starting",
                                             "Downloading", "Training", "Interrupted", "Starting", "Downloading",
                                             "Training", "Stopping", "MaxWaitTimeExceeded"])
        # Every line each run wrote, those of its notice included, reached the next run: each
        # notice names the step saved, and the next run resumed exactly there.
        log = self.ckpt_log("twice")
        self.assertEqual(len(log), 3 + 2, log)  # three starts, two notices
        first, second = int(log[1].split()[1]), int(log[3].split()[1])
        self.assertEqual(log, ["start 0", f"notice {first}", f"start {first}", f"notice {second}", f"start {second}"])
        self.assertGreaterEqual(first, 3)
        self.assertGreaterEqual(second, first + 3)

    def test_never_launched_stops_with_max_wait_exceeded(self):
        # The only spot instance of the type is held: the second job never launches.
        self.sm.create_training_job(**self.spot_payload("holder", steps=100000, max_wait=100000, max_runtime=90000))
        self.wait_secondary("holder", "Training")
        self.sm.create_training_job(**self.spot_payload("starved", max_wait=600, max_runtime=300))
        time.sleep(1)
        tj = self.sm.describe_training_job(TrainingJobName="starved")
        self.assertEqual((tj["TrainingJobStatus"], tj["SecondaryStatus"]), ("InProgress", "Starting"))
        self.advance(600)
        tj = self.wait_training("starved", timeout=30)
        self.assertEqual((tj["TrainingJobStatus"], tj["SecondaryStatus"]), ("Stopped", "MaxWaitTimeExceeded"))
        self.assertEqual(self.statuses(tj), ["Starting", "Stopping", "MaxWaitTimeExceeded"])
        self.assertEqual(self.ckpt_log("starved"), [])
        self.sm.stop_training_job(TrainingJobName="holder")

    def test_service_job_on_spot_keeps_its_attempt_through_an_interruption(self):
        q = self.create_queue("spotq", capacity=2)
        job = self.submit(q, self.spot_payload("svc", steps=30))
        deadline = time.time() + 30
        while self.describe_raw(job)["status"] != "RUNNING":
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        self.wait_step("svc", 3)
        self.interrupt("svc")
        self.wait_transitions("svc", "Interrupted", 1)
        self.assertEqual(self.describe_raw(job)["status"], "RUNNING")  # Batch sees one attempt, still running
        done = self.wait_jobs([job], timeout=60)[0]
        self.assertEqual(done["status"], "SUCCEEDED", done.get("statusReason"))
        self.assertEqual(len(done["attempts"]), 1)
        self.assertEqual(self.ckpt_log("svc")[-1], "done 30")

    def test_validation_and_refusals(self):
        def refused(payload, fragment, code="ValidationException"):
            with self.assertRaises(RuntimeError) as e:
                self.server.raw_call("sagemaker", "CreateTrainingJob", payload)
            self.assertIn(code, str(e.exception))
            self.assertIn(fragment, str(e.exception))
        p = self.spot_payload("bad")
        del p["StoppingCondition"]["MaxWaitTimeInSeconds"]
        refused(p, "MaxWaitTimeInSeconds is required")
        p = self.spot_payload("bad")
        p["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 60
        refused(p, "cannot use warm pools")
        p = self.spot_payload("bad")
        p["ResourceConfig"]["InstanceCount"] = 2
        refused(p, "spot training job usage", code="ResourceLimitExceeded")
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])
        # Interruptions need a running spot job.
        with self.assertRaises(RuntimeError) as e:
            self.interrupt("nope")
        self.assertIn("ResourceNotFound", str(e.exception))
        self.sm.create_training_job(**self.command_payload("ondemand", "sleep 30"))
        with self.assertRaises(RuntimeError) as e:
            self.interrupt("ondemand")
        self.assertIn("does not use managed spot training", str(e.exception))
        self.sm.stop_training_job(TrainingJobName="ondemand")


# Ignores SIGTERM, so that an interruption lasts its whole notice. The first run never ends on
# its own (only the interruption's kill ends it, however long the server takes to come back);
# a run that finds an earlier start in the restored log finishes five steps later.
STUBBORN = ("M=$TRAINYARD_CHECKPOINT_MARKER; D=${M%/*}; s=$(cat $D/step || echo 0); "
            "e=$((s+5)); [ -s $D/log ] || e=999999; echo start $s >> $D/log; "
            "trap '' TERM; while [ $s -lt $e ]; do s=$((s+1)); echo $s > $D/step; touch $M; sleep 0.1; done")


class SpotCrashTest(ServerTest):
    """kill -9 of the server while a spot interruption is under way: after the restart the
    interruption goes on, and the job restarts once, from its checkpoint."""
    server_config = CONFIG.replace("spot_notice_seconds = 30", "spot_notice_seconds = 3")

    def test_kill9_during_an_interruption(self):
        payload = self.command_payload("stubborn", STUBBORN, EnableManagedSpotTraining=True,
                                       StoppingCondition={"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 3600},
                                       CheckpointConfig={"S3Uri": "s3://trainyard-test/ckpt/stubborn"})
        payload["ResourceConfig"]["InstanceType"] = "ml.m5.xlarge"
        self.sm.create_training_job(**payload)
        SpotTest.wait_step(self, "stubborn", 3)
        self.server.admin("admin/interrupt", {"TrainingJobName": "stubborn"})
        self.wait_secondary("stubborn", "Interrupted")
        self.server.kill9()
        time.sleep(0.5)
        self.server = Server(self.data_dir, config=self.server_config).start()
        self.sm = self.server.client("sagemaker")
        tj = self.wait_training("stubborn", timeout=90)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual([t["Status"] for t in tj["SecondaryStatusTransitions"]].count("Interrupted"), 1)
        log = SpotTest.ckpt_log(self, "stubborn")
        self.assertEqual(len(log), 2, log)  # two runs, one after the other
        self.assertEqual(log[0], "start 0")
        self.assertGreaterEqual(int(log[1].split()[1]), 3)  # the second resumed from a saved step


LADDER_CONFIG = """
[executor]
stop_grace_seconds = 2
spot_notice_seconds = 30

[object_store]
checkpoint_sync_seconds = 1

[[instance_types]]
name = "ml.m5.xlarge"
count = 1
spot_count = 1
"""


class CapacityLadderTest(ServerTest):
    """The trainyard:capacity-ladder tag: fallback rungs on saturation or after interruptions, and
    back to the preferred rung when it has room again."""
    server_config = LADDER_CONFIG

    def in_use(self, name):
        return self.server.raw_call("sagemaker", "DescribeTrainingJob", {"TrainingJobName": name})["CapacityInUse"]

    def test_falls_back_when_the_preferred_type_is_full_and_returns_to_it(self):
        self.sm.create_training_job(**self.command_payload(
            "holder", "sleep 600", ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1}))
        self.wait_secondary("holder", "Training")
        q = self.create_queue("ladder", capacity=4)
        # The first attempt fails on its own (after the test has freed the preferred type); the
        # second one succeeds.
        fail_once = ("M=$TRAINYARD_CHECKPOINT_MARKER; D=${M%/*}; if [ -e $D/failed-once ]; then exit 0; fi; "
                     "touch $D/failed-once $M; sleep 6; exit 1")
        payload = self.command_payload("climber", fail_once, CheckpointConfig={"S3Uri": "s3://trainyard-test/ckpt/climber"},
                                       ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1})
        job = self.submit(q, payload, retryStrategy={"attempts": 2},
                          tags={"trainyard:capacity-ladder": "ml.m5.xlarge ml.m5.2xlarge"})
        first = self.wait_secondary("climber", "Training")
        used = self.in_use("climber")
        self.assertEqual((used["InstanceType"], used["Market"], used["Rung"]), ("ml.m5.2xlarge", "on-demand", 2))
        self.assertIn("rung 2 of 2", first["SecondaryStatusTransitions"][0]["StatusMessage"])
        # The service job's capacityUsage names what it asked for, not the rung it runs on.
        self.assertEqual(self.batch.describe_service_job(jobId=job)["capacityUsage"],
                         [{"capacityUnit": "ml.m5.xlarge", "quantity": 1}])
        self.sm.stop_training_job(TrainingJobName="holder")
        self.wait_training("holder")
        done = self.wait_jobs([job], timeout=60)[0]
        self.assertEqual(done["status"], "SUCCEEDED", done.get("statusReason"))
        self.assertEqual(len(done["attempts"]), 2)
        used = self.in_use("climber-attempt-2")
        self.assertEqual((used["InstanceType"], used["Market"], used["Rung"]), ("ml.m5.xlarge", "on-demand", 1))

    def test_spot_then_on_demand_after_an_interruption(self):
        payload = SpotTest.spot_payload(self, "ladderspot", steps=40,
                                        Tags=[{"Key": "trainyard:capacity-ladder", "Value": "ml.m5.xlarge:spot ml.m5.xlarge"},
                                              {"Key": "trainyard:fallback-after-interruptions", "Value": "1"}])
        self.sm.create_training_job(**payload)
        SpotTest.wait_step(self, "ladderspot", 5)
        self.assertEqual(self.in_use("ladderspot")["Market"], "spot")
        self.server.admin("admin/interrupt", {"TrainingJobName": "ladderspot"})
        tj = self.wait_training("ladderspot", timeout=60)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        used = self.in_use("ladderspot")
        self.assertEqual((used["InstanceType"], used["Market"], used["Rung"]), ("ml.m5.xlarge", "on-demand", 2))
        log = SpotTest.ckpt_log(self, "ladderspot")
        saved = int(log[1].split()[1])
        self.assertEqual(log[2], f"start {saved}", log)
        restart = [t["StatusMessage"] for t in tj["SecondaryStatusTransitions"] if t["Status"] == "Starting"][-1]
        self.assertIn("spot rungs are skipped after 1 interruptions", restart)
        # Billed at the spot price while on spot, at on-demand after: between the two.
        row = next(j for j in self.server.admin("costs", {})["Jobs"] if j["TrainingJobName"] == "ladderspot")
        self.assertGreater(row["SavingsPercent"], 0)
        self.assertLess(row["SavingsPercent"], 70)

    def test_a_queue_tries_its_service_environments_in_order(self):
        for env, capacity in (("env-a", 1), ("env-b", 2)):
            self.batch.create_service_environment(
                serviceEnvironmentName=env, serviceEnvironmentType="SAGEMAKER_TRAINING",
                capacityLimits=[{"maxCapacity": capacity, "capacityUnit": "NUM_INSTANCES"}])
        # Listed out of order: `order` decides, not the position in the list.
        self.batch.create_job_queue(jobQueueName="two-envs", jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    serviceEnvironmentOrder=[{"order": 2, "serviceEnvironment": "env-b"},
                                                             {"order": 1, "serviceEnvironment": "env-a"}])
        record = "M=$TRAINYARD_CHECKPOINT_MARKER; echo $AWS_BATCH_SE_NAME > ${M%/*}/se; touch $M; sleep 2"
        jobs = []
        for n in range(3):
            jobs.append(self.submit("two-envs", self.command_payload(
                f"env{n}", record, CheckpointConfig={"S3Uri": f"s3://trainyard-test/ckpt/env{n}"})))
            # One at a time, so that each is placed by a pass that sees the ones before it.
            deadline = time.time() + 30
            while self.describe_raw(jobs[-1])["status"] not in ("RUNNING", "SUCCEEDED"):
                self.assertLess(time.time(), deadline)
                time.sleep(0.05)
        for j in self.wait_jobs(jobs, timeout=60):
            self.assertEqual(j["status"], "SUCCEEDED", j.get("statusReason"))
        placed = []
        for n in range(3):
            with open(self.bucket_path("trainyard-test", f"ckpt/env{n}/se")) as f:
                placed.append(f.read().strip())
        self.assertEqual(placed, ["env-a", "env-b", "env-b"])

    def test_bad_ladders_are_refused(self):
        def refused(tags, fragment, **extra):
            p = self.command_payload("bad", "true", Tags=[{"Key": k, "Value": v} for k, v in tags.items()], **extra)
            with self.assertRaises(RuntimeError) as e:
                self.server.raw_call("sagemaker", "CreateTrainingJob", p)
            self.assertIn("ValidationException", str(e.exception))
            self.assertIn(fragment, str(e.exception))
        refused({"trainyard:capacity-ladder": "ml.nope.large"}, "not in this host's catalogue")
        refused({"trainyard:capacity-ladder": "ml.m5.xlarge:preemptible"}, "must be <instance type>")
        refused({"trainyard:capacity-ladder": "ml.m5.large ml.m5.large"}, "listed twice")
        refused({"trainyard:capacity-ladder": "ml.m5.2xlarge:spot"}, "offers 0 instances")
        refused({"trainyard:fallback-after-interruptions": "two"}, "whole number")
        refused({"trainyard:capacity-ladder": "ml.m5.xlarge"}, "cannot use warm pools",
                ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1,
                                "KeepAlivePeriodInSeconds": 60})
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])


class RandomInterruptionTest(ServerTest):
    """A configured interruption rate reclaims spot runs at random; checkpoints carry the work over."""
    server_config = CONFIG.replace("spot_price_per_hour = 0.069",
                                   "spot_price_per_hour = 0.069\nspot_interruptions_per_hour = 7200")

    def test_the_job_finishes_through_random_interruptions(self):
        payload = SpotTest.spot_payload(self, "chaos", steps=30, max_wait=3600)
        self.sm.create_training_job(**payload)
        tj = self.wait_training("chaos", timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        raw = self.server.raw_call("sagemaker", "DescribeTrainingJob", {"TrainingJobName": "chaos"})
        self.assertGreaterEqual(raw["SpotInterruptions"], 1)
        log = SpotTest.ckpt_log(self, "chaos")
        self.assertEqual(log[-1], "done 30", log)
        # Every run started where the one before it stopped. A run can be reclaimed before its
        # script printed anything (while its instances were still being prepared), so there are
        # at most as many starts as runs.
        starts = [int(line.split()[1]) for line in log if line.startswith("start ")]
        self.assertGreaterEqual(len(starts), 1, log)
        self.assertLessEqual(len(starts), raw["SpotInterruptions"] + 1, log)
        self.assertEqual(starts, sorted(starts))


if __name__ == "__main__":
    unittest.main()
