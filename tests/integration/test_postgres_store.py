"""The state in PostgreSQL ([store] url; docs/operations.md, "PostgreSQL"): a private PostgreSQL
15 started for the test. Jobs, events and audit records live there; an acknowledged submit survives
kill -9 of the server; the schema is migrated on start and a newer schema is refused."""
import json
import os
import subprocess
import time
import unittest

import harness
import postgres

SKIP = postgres.missing()


@unittest.skipIf(SKIP, SKIP)
@unittest.skipIf(os.environ.get("TRAINYARD_TEST_STORE") == "postgres",
                 "runs in make test already, on a PostgreSQL of its own")
class PostgresStoreTest(harness.ServerTest):
    @classmethod
    def setUpClass(cls):
        cls.pg = postgres.PrivatePostgres().start()

    @classmethod
    def tearDownClass(cls):
        cls.pg.stop()

    def setUp(self):
        self.url = self.pg.new_database()
        self.server_config = f'[store]\nurl = "{self.url}"\n'
        super().setUp()

    def rows(self, table):
        return int(self.pg.psql(f"SELECT count(*) FROM {table}", self.url.split("dbname=")[1]))

    def test_state_events_and_audit_live_in_postgres_and_survive_kill_9(self):
        db = self.url.split("dbname=")[1]
        self.assertEqual(self.pg.psql("SELECT max(version) FROM schema_migrations", db), "8")
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "trainyard.db")))
        self.create_queue("q", capacity=1)
        done = self.submit("q", self.command_payload("first", "echo loss=0.25"))
        self.wait_jobs([done], timeout=60)
        gate = os.path.join(self.work_dir, "gate")
        waiting = [self.submit("q", self.command_payload(f"held-{i}", f"while [ ! -e {gate} ]; do sleep 0.1; done"))
                   for i in range(3)]
        self.wait_jobs(waiting[:1], statuses=("RUNNING",), timeout=60)
        self.assertGreaterEqual(self.rows("service_jobs"), 4)
        self.assertGreater(self.rows("events"), 0)
        # kill -9: every acknowledged job is there after a restart, and the held ones finish.
        self.server.kill9()
        self.server = self.new_server()
        self.batch = self.server.client("batch")
        ids = [j["jobId"] for st in ("RUNNABLE", "RUNNING", "SUCCEEDED")
               for j in self.batch.list_service_jobs(jobQueue="q", jobStatus=st)["jobSummaryList"]]
        self.assertEqual(sorted(ids), sorted([done] + waiting))
        open(gate, "w").close()
        finished = self.wait_jobs(waiting, timeout=120)
        self.assertEqual([j["status"] for j in finished], ["SUCCEEDED"] * 3)
        # Events replay from PostgreSQL, in order, and audit records are kept there too.
        replay = self.server.raw_call("events", "Events", {"Limit": 1000}, path="/trainyard/v1/events")
        seqs = [e["Seq"] for e in replay["Events"]]
        self.assertEqual(seqs, sorted(seqs))
        self.assertIn("SUCCEEDED", json.dumps(replay["Events"][-1]))
        self.assertGreater(self.rows("audit"), 0)

    def test_a_newer_schema_is_refused(self):
        db = self.url.split("dbname=")[1]
        self.server.stop()
        self.pg.psql("INSERT INTO schema_migrations (version) VALUES (99)", db)
        args = [harness.BIN, "serve", "--listen", "127.0.0.1:0", "--data-dir", self.data_dir,
                "--config", os.path.join(self.data_dir, "test-config.toml")]
        out = subprocess.run(args, capture_output=True, text=True, timeout=30)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("store schema version 99 is newer than this binary supports (8)", out.stderr)

    def test_an_unreachable_database_is_named_without_its_password(self):
        self.server.stop()
        config = os.path.join(self.data_dir, "bad.toml")
        with open(config, "w") as f:
            f.write('[store]\nurl = "postgresql://trainyard:s3cret@127.0.0.1:1/nowhere?connect_timeout=2"\n')
        out = subprocess.run([harness.BIN, "serve", "--listen", "127.0.0.1:0", "--data-dir", self.data_dir,
                              "--config", config], capture_output=True, text=True, timeout=30)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("cannot connect to postgresql://trainyard:***@127.0.0.1:1/nowhere", out.stderr)
        self.assertNotIn("s3cret", out.stderr + out.stdout)


if __name__ == "__main__":
    unittest.main()
