"""Tags through boto3: Batch TagResource / UntagResource / ListTagsForResource on every kind of
resource trainyard has an ARN for, SageMaker AddTags / ListTags / DeleteTags on training jobs, the
rules AWS holds tags to, and tags kept across a restart. Also TerminateServiceJobs, a job's ARN
taken as its jobId, startedAt left out until a job starts, and wait reasons naming the job ahead."""
import json
import time
import unittest

import botocore.exceptions

from harness import REGION, ServerTest


class TagsTest(ServerTest):
    def error_of(self, call, **kw):
        with self.assertRaises(botocore.exceptions.ClientError) as cm:
            call(**kw)
        return cm.exception.response["Error"]

    def tags_of(self, arn):
        return self.batch.list_tags_for_resource(resourceArn=arn)["tags"]

    def blocked_queue(self):
        """A queue of one instance whose instance a sleeping job holds, so that later jobs wait."""
        self.create_queue("q", capacity=1)
        blocker = self.submit("q", self.command_payload("blocker", "sleep 60"))
        self.wait_jobs([blocker], statuses=("RUNNING",), timeout=60)
        return blocker

    def test_every_batch_resource_is_tagged_listed_and_untagged(self):
        policy = self.batch.create_scheduling_policy(
            name="p", quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"}, tags={"made": "create"})["arn"]
        self.create_quota_queue("qq", 2, [("s1", 1, "RESERVE")])
        share = self.batch.list_quota_shares(jobQueue="qq")["quotaShares"][0]["quotaShareArn"]
        self.create_queue("q", capacity=1)
        env = self.batch.describe_service_environments(serviceEnvironments=["q-env"])["serviceEnvironments"][0]
        queue = self.batch.describe_job_queues(jobQueues=["q"])["jobQueues"][0]["jobQueueArn"]
        job = self.batch.submit_service_job(jobName="j", jobQueue="q", serviceJobType="SAGEMAKER_TRAINING",
                                            serviceRequestPayload=json.dumps(self.command_payload("j", "true")),
                                            tags={"made": "submit"})
        arns = [env["serviceEnvironmentArn"], queue, policy, share, job["jobArn"]]
        self.assertEqual(self.tags_of(policy), {"made": "create"})  # tags given at creation are the resource's
        self.assertEqual(self.tags_of(job["jobArn"]), {"made": "submit"})
        for arn in arns:
            self.batch.tag_resource(resourceArn=arn, tags={"team": "a", "cost center": "42", "made": "tag"})
        for arn in arns:
            self.assertEqual(self.tags_of(arn), {"team": "a", "cost center": "42", "made": "tag"}, arn)
            # A key the resource does not have is ignored, as AWS does.
            self.batch.untag_resource(resourceArn=arn, tagKeys=["cost center", "made", "absent"])
            self.assertEqual(self.tags_of(arn), {"team": "a"}, arn)
        # The Describe and List calls that have a tags member show the same tags.
        self.assertEqual(self.batch.describe_service_environments()["serviceEnvironments"][0]["tags"], {"team": "a"})
        self.assertEqual(self.batch.describe_job_queues(jobQueues=["q"])["jobQueues"][0]["tags"], {"team": "a"})
        self.assertEqual(self.batch.describe_scheduling_policies(arns=[policy])["schedulingPolicies"][0]["tags"],
                         {"team": "a"})
        self.assertEqual(self.batch.describe_quota_share(quotaShareArn=share)["tags"], {"team": "a"})
        self.assertEqual(self.batch.describe_service_job(jobId=job["jobId"])["tags"], {"team": "a"})

    def test_tags_that_break_aws_rules_are_refused_and_change_nothing(self):
        self.create_queue("q")
        arn = self.batch.describe_job_queues(jobQueues=["q"])["jobQueues"][0]["jobQueueArn"]
        self.batch.tag_resource(resourceArn=arn, tags={f"k{i}": "v" for i in range(49)})
        cases = [
            ({f"n{i}": "v" for i in range(51)}, "50"),   # more than 50 in one request
            ({"n1": "v", "n2": "v"}, "50"),              # 49 + 2 > 50 on the resource
            ({"aws:team": "a"}, "reserved"),
            ({"AWS:team": "a"}, "reserved"),             # the prefix in any case
            ({"k" * 129: "v"}, "128"),
            ({"team": "v" * 257}, "256"),
            ({"a#b": "v"}, "regular expression"),
        ]
        for tags, said in cases:
            error = self.error_of(self.batch.tag_resource, resourceArn=arn, tags=tags)
            self.assertEqual(error["Code"], "ClientException", tags)
            self.assertIn(said, error["Message"], tags)
        self.assertEqual(self.tags_of(arn), {f"k{i}": "v" for i in range(49)})
        self.batch.tag_resource(resourceArn=arn, tags={"k0": "replaced", "n1": "v"})  # 49 + 1: allowed
        self.assertEqual(len(self.tags_of(arn)), 50)
        error = self.error_of(self.batch.untag_resource, resourceArn=arn, tagKeys=["aws:x"])
        self.assertIn("reserved", error["Message"])
        # Creates are held to the same rules.
        error = self.error_of(self.batch.create_scheduling_policy, name="p", tags={"aws:x": "1"})
        self.assertIn("reserved", error["Message"])
        self.assertEqual(self.batch.list_scheduling_policies()["schedulingPolicies"], [])

    def test_unknown_and_foreign_arns_are_refused_by_name(self):
        self.create_queue("q")
        arn = self.batch.describe_job_queues(jobQueues=["q"])["jobQueues"][0]["jobQueueArn"]
        account = arn.split(":")[4]
        cases = [
            (arn + "-gone", "does not exist"),
            (arn.replace(REGION, "eu-west-3"), "region 'eu-west-3'"),
            (arn.replace(account, "999999999999"), "account '999999999999'"),
            (arn.replace(":batch:", ":sagemaker:"), "not a batch resource"),
            (f"arn:aws:batch:{REGION}:{account}:job-definition/d:1", "does not exist"),
            (f"arn:aws:batch:{REGION}:{account}:compute-environment/ce", "does not exist"),
            (f"arn:aws:batch:{REGION}:{account}:consumable-resource/cr", "only service environments"),
            ("not-an-arn", "is not an ARN"),
        ]
        for bad, said in cases:
            for call, kw in ((self.batch.list_tags_for_resource, {}), (self.batch.tag_resource, {"tags": {"a": "b"}}),
                             (self.batch.untag_resource, {"tagKeys": ["a"]})):
                error = self.error_of(call, resourceArn=bad, **kw)
                self.assertEqual(error["Code"], "ClientException", bad)
                self.assertIn(said, error["Message"], bad)
        self.assertNotIn("tags", self.batch.describe_job_queues(jobQueues=["q"])["jobQueues"][0])

    def test_training_job_tags_through_sagemaker(self):
        arn = self.sm.create_training_job(**self.command_payload("tj", "true", Tags=[{"Key": "team", "Value": "a"}]))[
            "TrainingJobArn"]
        self.assertEqual(self.sm.list_tags(ResourceArn=arn)["Tags"], [{"Key": "team", "Value": "a"}])
        added = self.sm.add_tags(ResourceArn=arn, Tags=[{"Key": "stage", "Value": "dev"}, {"Key": "team", "Value": "b"}])
        self.assertEqual(added["Tags"], [{"Key": "stage", "Value": "dev"}, {"Key": "team", "Value": "b"}])
        self.assertEqual(self.sm.list_tags(ResourceArn=arn)["Tags"],
                         [{"Key": "stage", "Value": "dev"}, {"Key": "team", "Value": "b"}])
        self.sm.delete_tags(ResourceArn=arn, TagKeys=["team", "absent"])
        self.assertEqual(self.sm.list_tags(ResourceArn=arn)["Tags"], [{"Key": "stage", "Value": "dev"}])

        error = self.error_of(self.sm.add_tags, ResourceArn=arn, Tags=[{"Key": "aws:x", "Value": "1"}])
        self.assertEqual((error["Code"], "reserved" in error["Message"]), ("ValidationException", True))
        error = self.error_of(self.sm.add_tags, ResourceArn=arn,
                              Tags=[{"Key": "d", "Value": "1"}, {"Key": "d", "Value": "2"}])
        self.assertIn("more than once", error["Message"])
        error = self.error_of(self.sm.list_tags, ResourceArn=arn.replace("tj", "gone"))
        self.assertEqual(error["Code"], "ResourceNotFound")
        error = self.error_of(self.sm.list_tags, ResourceArn=arn.replace(REGION, "eu-west-3"))
        self.assertEqual(error["Code"], "ValidationException")
        self.assertIn("region 'eu-west-3'", error["Message"])
        self.assertEqual(self.sm.list_tags(ResourceArn=arn)["Tags"], [{"Key": "stage", "Value": "dev"}])
        # A training job created with reserved tags is not created.
        error = self.error_of(self.sm.create_training_job,
                              **self.command_payload("tj2", "true", Tags=[{"Key": "aws:x", "Value": "1"}]))
        self.assertIn("reserved", error["Message"])
        self.assertEqual([j["TrainingJobName"] for j in self.sm.list_training_jobs()["TrainingJobSummaries"]], ["tj"])

    def test_tags_survive_a_restart(self):
        self.create_queue("q")
        queue = self.batch.describe_job_queues(jobQueues=["q"])["jobQueues"][0]["jobQueueArn"]
        tj = self.sm.create_training_job(**self.command_payload("tj", "true"))["TrainingJobArn"]
        self.batch.tag_resource(resourceArn=queue, tags={"team": "a"})
        self.sm.add_tags(ResourceArn=tj, Tags=[{"Key": "team", "Value": "b"}])
        self.server.stop()
        self.server = self.new_server()
        self.batch = self.server.client("batch")
        self.sm = self.server.client("sagemaker")
        self.assertEqual(self.tags_of(queue), {"team": "a"})
        self.assertEqual(self.sm.list_tags(ResourceArn=tj)["Tags"], [{"Key": "team", "Value": "b"}])

    def test_terminate_service_jobs_answers_each_job(self):
        blocker = self.blocked_queue()
        waiting = self.submit("q", self.command_payload("waiting", "true"))
        waiting_arn = self.batch.describe_service_job(jobId=waiting)["jobArn"]
        unknown = "00000000-0000-4000-8000-000000000000"
        batch = self.server.client("batch", project_models=True)  # the installed botocore predates it
        out = batch.terminate_service_jobs(jobs=[blocker, waiting_arn, unknown], reason="clearing the queue")
        # Unknown jobs count as terminated, as AWS does.
        self.assertEqual((out["successful"], out["errors"]), ([blocker, waiting_arn, unknown], []))
        error = self.error_of(batch.terminate_service_jobs, jobs=[unknown] * 51, reason="too many")
        self.assertEqual(error["Code"], "ClientException")
        batch.close()
        jobs = {j["jobId"]: j for j in self.wait_jobs([blocker, waiting])}
        self.assertEqual({j["status"] for j in jobs.values()}, {"FAILED"})
        self.assertTrue(all(j["isTerminated"] for j in jobs.values()))
        self.assertEqual(jobs[waiting]["statusReason"], "clearing the queue")

    def test_a_job_that_has_not_started_has_no_started_at(self):
        self.blocked_queue()
        waiting = self.submit("q", self.command_payload("waiting", "true"))
        self.assertNotIn("startedAt", self.describe_raw(waiting))
        self.assertNotIn("startedAt", self.batch.describe_service_job(jobId=waiting))
        snapshot = self.server.raw_call("batch", "GetJobQueueSnapshot", {"jobQueue": "q"})
        self.assertGreater(snapshot["frontOfQueue"].get("lastUpdatedAt", 0), 0)

    def test_a_job_arn_is_taken_as_its_job_id(self):
        self.create_queue("q")
        out = self.batch.submit_service_job(jobName="j", jobQueue="q", serviceJobType="SAGEMAKER_TRAINING",
                                            serviceRequestPayload=json.dumps(self.command_payload("j", "sleep 60")))
        self.assertEqual(self.batch.describe_service_job(jobId=out["jobArn"])["jobId"], out["jobId"])
        other = out["jobArn"].replace(REGION, "eu-west-3")
        self.assertIn("does not exist", self.error_of(self.batch.describe_service_job, jobId=other)["Message"])
        self.batch.terminate_service_job(jobId=out["jobArn"], reason="by ARN")
        self.assertEqual(self.wait_jobs([out["jobId"]])[0]["status"], "FAILED")

    def test_a_wait_reason_names_the_job_ahead_by_id_and_name(self):
        self.blocked_queue()
        head = self.submit("q", self.command_payload("head", "true"))
        behind = self.submit("q", self.command_payload("behind", "true"))
        # Reasons come from the scheduling pass; wait for the pass that sees both jobs.
        deadline = time.time() + 30
        while not self.describe_raw(behind).get("trainyardWaitReason"):
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        reason = self.describe_raw(behind)["trainyardWaitReason"]
        self.assertIn(f"queued behind job {head} (head)", reason)
        self.assertNotIn("#", reason)


if __name__ == "__main__":
    unittest.main()
