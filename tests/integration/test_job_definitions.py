"""Batch job definitions: revisions, describe by every form, paging, deregister, refusals, restart, tags."""
import unittest

from botocore.exceptions import ClientError

from harness import Server, ServerTest

ARN = "arn:aws:batch:us-east-1:000000000000:job-definition/"

CONTAINER = {
    "image": "busybox:latest",
    "command": ["echo", "Ref::greeting"],
    "environment": [{"name": "STAGE", "value": "test"}],
    "resourceRequirements": [{"type": "VCPU", "value": "2"}, {"type": "MEMORY", "value": "2048"},
                             {"type": "GPU", "value": "1"}],
    "jobRoleArn": "arn:aws:iam::000000000000:role/seed",
    "volumes": [{"name": "data", "host": {"sourcePath": "/srv/data"}}],
    "mountPoints": [{"sourceVolume": "data", "containerPath": "/data", "readOnly": True}],
}


class JobDefinitionTest(ServerTest):
    def error(self, fn, **kw):
        with self.assertRaises(ClientError) as e:
            fn(**kw)
        return e.exception.response["Error"]["Code"], e.exception.response["Error"]["Message"]

    def register(self, name="seed", **kw):
        args = dict(jobDefinitionName=name, type="container", containerProperties=CONTAINER)
        args.update(kw)
        return self.batch.register_job_definition(**args)

    def all_definitions(self, **kw):
        return self.batch.describe_job_definitions(**kw)["jobDefinitions"]

    def test_registering_a_name_again_adds_the_next_revision(self):
        first = self.register(parameters={"greeting": "hello"}, retryStrategy={"attempts": 3},
                              timeout={"attemptDurationSeconds": 600}, propagateTags=True, tags={"team": "seed"})
        second = self.register(parameters={"greeting": "again"})
        self.assertEqual((first["revision"], first["jobDefinitionArn"]), (1, ARN + "seed:1"))
        self.assertEqual((second["revision"], second["jobDefinitionArn"]), (2, ARN + "seed:2"))
        [d] = self.all_definitions(jobDefinitions=["seed:1"])
        self.assertEqual(d["status"], "ACTIVE")
        self.assertEqual(d["type"], "container")
        self.assertEqual(d["parameters"], {"greeting": "hello"})
        self.assertEqual(d["containerProperties"]["resourceRequirements"], CONTAINER["resourceRequirements"])
        self.assertEqual(d["containerProperties"]["mountPoints"], CONTAINER["mountPoints"])
        self.assertEqual(d["retryStrategy"], {"attempts": 3})
        self.assertEqual(d["timeout"], {"attemptDurationSeconds": 600})
        self.assertTrue(d["propagateTags"])
        self.assertEqual(d["platformCapabilities"], ["EC2"])
        self.assertEqual(d["tags"], {"team": "seed"})

    def test_describe_by_each_form(self):
        self.register()
        self.register()
        self.register(name="other")
        revs = lambda ds: [(d["jobDefinitionName"], d["revision"]) for d in ds]
        self.assertEqual(revs(self.all_definitions(jobDefinitions=["seed:2"])), [("seed", 2)])
        self.assertEqual(revs(self.all_definitions(jobDefinitions=[ARN + "seed:1"])), [("seed", 1)])
        self.assertEqual(revs(self.all_definitions(jobDefinitions=["seed"])), [("seed", 1), ("seed", 2)])
        self.assertEqual(revs(self.all_definitions(jobDefinitionName="seed")), [("seed", 1), ("seed", 2)])
        self.assertEqual(revs(self.all_definitions()), [("other", 1), ("seed", 1), ("seed", 2)])
        # Revisions and ARNs that name nothing of this server give nothing.
        self.assertEqual(self.all_definitions(jobDefinitions=["seed:3", "arn:aws:batch:eu-west-1:000000000000:job-definition/seed:1"]), [])

    def test_paging_visits_every_revision_once(self):
        for _ in range(5):
            self.register()
        seen, token = [], None
        while True:
            kw = {"maxResults": 2}
            if token:
                kw["nextToken"] = token
            page = self.batch.describe_job_definitions(**kw)
            self.assertLessEqual(len(page["jobDefinitions"]), 2)
            seen += [d["revision"] for d in page["jobDefinitions"]]
            token = page.get("nextToken")
            if not token:
                break
        self.assertEqual(seen, [1, 2, 3, 4, 5])

    def test_deregister_makes_a_revision_inactive_and_keeps_it(self):
        self.register()
        self.register()
        self.batch.deregister_job_definition(jobDefinition="seed:1")
        self.batch.deregister_job_definition(jobDefinition=ARN + "seed:2")
        [d1, d2] = self.all_definitions(jobDefinitionName="seed")
        self.assertEqual((d1["status"], d2["status"]), ("INACTIVE", "INACTIVE"))
        self.assertEqual(self.all_definitions(jobDefinitionName="seed", status="ACTIVE"), [])
        self.assertEqual(len(self.all_definitions(status="INACTIVE")), 2)
        # The next registration still takes the next revision.
        self.assertEqual(self.register()["revision"], 3)
        code, msg = self.error(self.batch.deregister_job_definition, jobDefinition="seed:9")
        self.assertEqual(code, "ClientException")
        self.assertIn("does not exist", msg)

    def test_refusals_name_the_rule_and_store_nothing(self):
        bad_container = lambda **kw: {**CONTAINER, **kw}
        cases = [
            (dict(type="multinode", nodeProperties={"numNodes": 2, "mainNode": 0, "nodeRangeProperties": []}), "type"),
            (dict(containerProperties=bad_container(image="")), "image"),
            (dict(containerProperties=bad_container(resourceRequirements=[{"type": "VCPU", "value": "0.5"}])), "VCPU"),
            (dict(containerProperties=bad_container(resourceRequirements=[{"type": "MEMORY", "value": "2"}])), "MEMORY"),
            (dict(containerProperties=bad_container(vcpus=2)), "can't both be given"),
            (dict(containerProperties=bad_container(environment=[{"name": "AWS_BATCH_JOB_ID", "value": "x"}])), "AWS_BATCH"),
            (dict(containerProperties=bad_container(jobRoleArn="seed")), "jobRoleArn"),
            (dict(containerProperties=bad_container(volumes=[{"name": "data", "host": {"sourcePath": "rel"}}])), "absolute"),
            (dict(containerProperties=bad_container(mountPoints=[{"sourceVolume": "none", "containerPath": "/x"}])), "sourceVolume"),
            (dict(platformCapabilities=["FARGATE"]), "platformCapabilities"),
            (dict(retryStrategy={"attempts": 11}), "retryStrategy.attempts"),
            (dict(retryStrategy={"evaluateOnExit": [{"action": "RETRY", "onExitCode": "1;2"}]}), "onExitCode"),
            (dict(timeout={"attemptDurationSeconds": 59}), "attemptDurationSeconds"),
            (dict(schedulingPriority=10000), "schedulingPriority"),
            (dict(jobDefinitionName="bad name"), "jobDefinitionName"),
            (dict(tags={"aws:reserved": "x"}), "aws:"),
        ]
        for kw, word in cases:
            with self.subTest(word=word):
                code, msg = self.error(self.register, **kw)
                self.assertEqual(code, "ClientException")
                self.assertIn(word, msg)
        self.assertEqual(self.all_definitions(), [])
        # A refused request takes no revision either.
        self.assertEqual(self.register()["revision"], 1)

    def test_a_restart_keeps_revisions_status_and_tags(self):
        self.register(tags={"team": "seed"})
        self.register()
        self.batch.deregister_job_definition(jobDefinition="seed:1")
        self.server.stop()
        self.server = Server(self.data_dir).start()
        self.batch = self.server.client("batch")
        ds = self.all_definitions(jobDefinitionName="seed")
        self.assertEqual([(d["revision"], d["status"]) for d in ds], [(1, "INACTIVE"), (2, "ACTIVE")])
        self.assertEqual(ds[0]["tags"], {"team": "seed"})
        self.assertEqual(self.register()["revision"], 3)

    def test_tags_on_a_revision_arn(self):
        arn = self.register(tags={"team": "seed"})["jobDefinitionArn"]
        self.batch.tag_resource(resourceArn=arn, tags={"stage": "prod"})
        self.assertEqual(self.batch.list_tags_for_resource(resourceArn=arn)["tags"], {"team": "seed", "stage": "prod"})
        self.batch.untag_resource(resourceArn=arn, tagKeys=["team"])
        self.server.stop()
        self.server = Server(self.data_dir).start()
        self.batch = self.server.client("batch")
        self.assertEqual(self.batch.list_tags_for_resource(resourceArn=arn)["tags"], {"stage": "prod"})
        code, _ = self.error(self.batch.list_tags_for_resource, resourceArn=ARN + "seed:7")
        self.assertEqual(code, "ClientException")


if __name__ == "__main__":
    unittest.main()
