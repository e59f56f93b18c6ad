"""Checkpoint-aware preemption through the real API with real processes: the victim is the job
that loses the least work since its last checkpoint, a preempted job that saves and exits frees
its capacity at once, and the next attempt resumes from the step it saved."""
import json
import os
import time
import unittest

from harness import ServerTest

# Checkpoints every 0.2 s through the marker file; exits at once on SIGTERM.
CHECKPOINTING = ("trap 'exit 0' TERM; while :; do touch \"$TRAINYARD_CHECKPOINT_MARKER\"; sleep 0.2; done")
# Never checkpoints.
LONG = "trap 'exit 0' TERM; while :; do sleep 0.1; done"
# Counts to 60 in steps of 0.1 s, saving the step in its checkpoint directory after each one and
# on SIGTERM, and logs where each attempt started and what it saved.
STEPS = ("M=$TRAINYARD_CHECKPOINT_MARKER; D=${M%/*}; s=$(cat $D/step || echo 0); echo start $s >> $D/log; "
         "trap 'echo saved $s >> $D/log; exit 0' TERM; "
         "while [ $s -lt 60 ]; do s=$((s+1)); echo $s > $D/step; touch $M; sleep 0.1; done; echo done $s >> $D/log")


class CheckpointPreemptionTest(ServerTest):
    # A long grace: a victim that exits early must not wait it out.
    server_config = "[executor]\nstop_grace_seconds = 90\n"

    def queue(self, name, capacity):
        arn = self.batch.create_scheduling_policy(
            name=name + "-policy", quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"})["arn"]
        self.batch.create_service_environment(
            serviceEnvironmentName=name + "-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": capacity, "capacityUnit": "ml.m5.large"}])
        self.batch.create_job_queue(jobQueueName=name, jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    schedulingPolicyArn=arn,
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": name + "-env"}])
        self.batch.create_quota_share(
            jobQueue=name, quotaShareName="S", capacityLimits=[{"maxCapacity": capacity, "capacityUnit": "ml.m5.large"}],
            resourceSharingConfiguration={"strategy": "RESERVE"}, preemptionConfiguration={"inSharePreemption": "ENABLED"})
        return name

    def submit_to(self, q, name, command, priority, **extra):
        return self.submit(q, self.command_payload(name, command, **extra), quotaShareName="S",
                           schedulingPriority=priority)

    def test_victim_is_the_job_that_loses_least_work_since_its_checkpoint(self):
        q = self.queue("ck", 2)
        # `saver` starts first and checkpoints; `plain` starts later and never does. By start
        # order `plain` would go; by work lost (instances x time since the last checkpoint) `saver`.
        saver = self.submit_to(q, "saver", CHECKPOINTING, 10)
        self.wait_jobs([saver], statuses=("RUNNING",))
        plain = self.submit_to(q, "plain", LONG, 10)
        self.wait_jobs([plain], statuses=("RUNNING",))
        started = time.time()
        while time.time() - started < 6:  # `plain` has 6 s of work to lose; `saver` at most ~2.5 s
            time.sleep(0.2)
        t0 = time.time()
        high = self.submit_to(q, "high", "true", 90)
        done = self.wait_jobs([high], timeout=60)[0]
        self.assertEqual(done["status"], "SUCCEEDED")
        # The victim saved and exited on SIGTERM: its capacity came back at once, not after the 90 s grace.
        self.assertLess(time.time() - t0, 30)
        s, p = self.describe_raw(saver), self.describe_raw(plain)
        self.assertEqual(s.get("preemptionSummary", {}).get("preemptedAttemptCount"), 1, s)
        self.assertNotIn("preemptionSummary", p)
        loss = s["trainyardPreemptionLoss"]
        self.assertGreater(loss["instanceHours"], 0)
        self.assertLess(loss["instanceHours"], 5 / 3600)  # since its last checkpoint, not since its start
        self.assertEqual(loss["gpuHours"], 0)  # ml.m5.large has no GPUs in the catalogue
        snap = self.server.raw_call("batch", "GetJobQueueSnapshot", {"jobQueue": q})
        self.assertAlmostEqual(snap["trainyardPreemptionLoss"]["instanceHours"], loss["instanceHours"])
        for j in (saver, plain):
            self.batch.terminate_service_job(jobId=j, reason="test over")

    def test_preempted_job_resumes_from_the_step_it_saved(self):
        q = self.queue("resume", 1)
        os.makedirs(self.bucket_path("trainyard-test"), exist_ok=True)
        job = self.submit_to(q, "counter", STEPS, 10,
                             CheckpointConfig={"S3Uri": "s3://trainyard-test/ckpt/counter"})
        self.wait_jobs([job], statuses=("RUNNING",))
        time.sleep(1.5)  # it counts a few steps
        t0 = time.time()
        high = self.submit_to(q, "urgent", "true", 90)
        self.assertEqual(self.wait_jobs([high], timeout=60)[0]["status"], "SUCCEEDED")
        self.assertLess(time.time() - t0, 30)  # the victim's early exit freed the instance
        done = self.wait_jobs([job], timeout=60)[0]
        self.assertEqual(done["status"], "SUCCEEDED", done)
        self.assertEqual(done["preemptionSummary"]["preemptedAttemptCount"], 1)
        with open(self.bucket_path("trainyard-test", "ckpt/counter/log")) as f:
            log = f.read().split("\n")
        log = [line for line in log if line]
        self.assertEqual(log[0], "start 0", log)
        self.assertTrue(log[1].startswith("saved "), log)
        saved = int(log[1].split()[1])
        self.assertGreater(saved, 0, log)
        self.assertEqual(log[2], f"start {saved}", log)  # the second attempt continues from the saved step
        self.assertEqual(log[3], "done 60", log)
        with open(self.bucket_path("trainyard-test", "ckpt/counter/step")) as f:
            self.assertEqual(f.read().strip(), "60")


if __name__ == "__main__":
    unittest.main()
