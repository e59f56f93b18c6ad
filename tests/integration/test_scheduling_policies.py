"""Scheduling policies: create, describe, list, update, delete, and the rules they must follow."""
import unittest

from botocore.exceptions import ClientError

from harness import Server, ServerTest


class SchedulingPolicyTest(ServerTest):
    def error(self, fn, **kw):
        with self.assertRaises(ClientError) as e:
            fn(**kw)
        return e.exception.response["Error"]["Code"], e.exception.response["Error"]["Message"]

    def test_fair_share_policy_lifecycle(self):
        arn = self.batch.create_scheduling_policy(
            name="teams", fairsharePolicy={"shareDecaySeconds": 3600, "computeReservation": 10,
                                           "shareDistribution": [{"shareIdentifier": "HIGHPRI", "weightFactor": 1},
                                                                 {"shareIdentifier": "MID*", "weightFactor": 3}]},
            tags={"team": "platform"})["arn"]
        self.assertEqual(arn, "arn:aws:batch:us-east-1:000000000000:scheduling-policy/teams")
        [p] = self.batch.describe_scheduling_policies(arns=[arn])["schedulingPolicies"]
        self.assertEqual(p["fairsharePolicy"]["shareDistribution"][1], {"shareIdentifier": "MID*", "weightFactor": 3.0})
        self.assertEqual(p["tags"], {"team": "platform"})
        self.batch.update_scheduling_policy(arn=arn, fairsharePolicy={"shareDecaySeconds": 600})
        [p] = self.batch.describe_scheduling_policies(arns=[arn])["schedulingPolicies"]
        self.assertEqual(p["fairsharePolicy"], {"shareDecaySeconds": 600})
        # It survives a restart.
        self.server.stop()
        self.server = Server(self.data_dir).start()
        self.batch = self.server.client("batch")
        self.assertEqual([x["arn"] for x in self.batch.list_scheduling_policies()["schedulingPolicies"]], [arn])
        self.batch.delete_scheduling_policy(arn=arn)
        self.assertEqual(self.batch.list_scheduling_policies()["schedulingPolicies"], [])

    def test_quota_share_policy_type_cannot_be_switched(self):
        arn = self.batch.create_scheduling_policy(
            name="quotas", quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"})["arn"]
        code, msg = self.error(self.batch.update_scheduling_policy, arn=arn, fairsharePolicy={"shareDecaySeconds": 1})
        self.assertEqual(code, "ClientException")
        self.assertIn("can't be switched", msg)

    def test_rules(self):
        cases = [
            ({"shareDistribution": [{"shareIdentifier": "A*"}, {"shareIdentifier": "AB"}]}, "overlaps"),
            ({"shareDistribution": [{"shareIdentifier": "AB*"}, {"shareIdentifier": "A*"}]}, "overlaps"),
            ({"shareDistribution": [{"shareIdentifier": "X"}, {"shareIdentifier": "X"}]}, "overlaps"),
            ({"shareDistribution": [{"shareIdentifier": "bad-id"}]}, "shareIdentifier"),
            ({"shareDistribution": [{"shareIdentifier": "A", "weightFactor": 1000}]}, "weightFactor"),
            ({"computeReservation": 100}, "computeReservation"),
            ({"shareDecaySeconds": 604801}, "shareDecaySeconds"),
            ({"shareDistribution": [{"shareIdentifier": f"S{i}"} for i in range(501)]}, "500"),
        ]
        for policy, word in cases:
            code, msg = self.error(self.batch.create_scheduling_policy, name="p", fairsharePolicy=policy)
            self.assertEqual(code, "ClientException")
            self.assertIn(word, msg)
        code, msg = self.error(self.batch.create_scheduling_policy, name="both",
                               fairsharePolicy={}, quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"})
        self.assertIn("not both", msg)
        self.assertEqual(self.batch.list_scheduling_policies()["schedulingPolicies"], [])
        self.batch.create_scheduling_policy(name="p")
        code, msg = self.error(self.batch.create_scheduling_policy, name="p")
        self.assertIn("already exists", msg)


if __name__ == "__main__":
    unittest.main()
