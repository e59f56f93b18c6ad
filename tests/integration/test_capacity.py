"""`trainyard admin capacity` (POST /trainyard/v1/admin/capacity) on the local executor: the
configured counts stand ("configured"), in use and free follow the jobs that run, and the request
takes no members. The Slurm executor's view (reported counts, nodes and why they are unusable) is
pinned by tests/unit/slurm_nodes_test.cpp and the controller's use of it by controller_test."""
import os
import subprocess
import unittest

from harness import BIN, ServerTest


class CapacityTest(ServerTest):
    server_config = ('[[instance_types]]\nname = "ml.m5.large"\ncount = 3\nspot_count = 2\n'
                     'slurm_partition = "cpu"\nslurm_constraint = "avx512"\n')

    def capacity(self):
        return {row["CapacityKey"]: row for row in self.server.admin("admin/capacity", {})["Capacity"]}

    def test_configured_counts_in_use_and_free(self):
        out = self.server.admin("admin/capacity", {})
        self.assertEqual(out["Source"], "configured")
        self.assertNotIn("Nodes", out)  # the local executor has no nodes of its own
        rows = self.capacity()
        large = rows["ml.m5.large"]
        self.assertEqual((large["Configured"], large["Offered"], large["InUse"], large["Free"]), (3, 3, 0, 3))
        self.assertNotIn("Reported", large)
        self.assertEqual((large["SlurmPartition"], large["SlurmConstraint"]), ("cpu", "avx512"))
        self.assertEqual(rows["ml.m5.large#spot"]["Configured"], 2)

        gate = os.path.join(self.work_dir, "gate")
        queue = self.create_queue("cap", capacity=3)
        self.submit(queue, self.command_payload("holder", f"while [ ! -e {gate} ]; do sleep 0.05; done"))
        try:
            self.wait_secondary("holder", "Training")
            large = self.capacity()["ml.m5.large"]
            self.assertEqual((large["InUse"], large["Free"]), (1, 2))
        finally:
            open(gate, "w").close()
        self.wait_training("holder")

    def test_the_request_takes_no_members(self):
        with self.assertRaises(RuntimeError) as e:
            self.server.admin("admin/capacity", {"Nodes": True})
        self.assertIn("ValidationException", str(e.exception))
        self.assertIn("Nodes", str(e.exception))

    def test_cli_prints_the_table(self):
        env = dict(os.environ, TRAINYARD_ENDPOINT_URL=self.server.url, TRAINYARD_DATA_DIR=self.data_dir)
        env.pop("AWS_ACCESS_KEY_ID", None)
        env.pop("AWS_SECRET_ACCESS_KEY", None)
        p = subprocess.run([BIN, "admin", "capacity"], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"ml\.m5\.large\s+on-demand\s+3\s+configured\s+0\s+0\s+3")
        self.assertRegex(p.stdout, r"ml\.m5\.large\s+spot\s+2\s+configured")


if __name__ == "__main__":
    unittest.main()
