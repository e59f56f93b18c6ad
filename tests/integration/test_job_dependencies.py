"""Job dependencies (docs/batch-jobs.md, "Dependencies"): a job waits in PENDING for the jobs it
names to succeed, N_TO_N pairs the children of two arrays, SEQUENTIAL runs an array's children
one after another, depending on an array waits for all of it, and a failure fails the jobs that
wait on it with "Dependent Job failed", transitively."""
import os
import time
import unittest

from harness import ServerTest


class DependencyTest(ServerTest):
    def setUp(self):
        super().setUp()
        self.batch.create_compute_environment(computeEnvironmentName="ce", type="MANAGED",
                                              computeResources={"type": "EC2", "maxvCpus": 4, "subnets": ["local"]})
        self.batch.create_job_queue(jobQueueName="jq", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        self.log = os.path.join(self.work_dir, "order.log")
        self.batch.register_job_definition(
            jobDefinitionName="def", type="container", parameters={"tag": "x", "code": "0"},
            containerProperties={"image": "local/busybox",
                                 "command": ["/bin/sh", "-c",
                                             f'echo "Ref::tag ${{AWS_BATCH_JOB_ARRAY_INDEX:-}}" >> {self.log}; exit Ref::code'],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "256"}]})

    def submit(self, tag, code="0", **kw):
        return self.batch.submit_job(jobName=tag, jobQueue="jq", jobDefinition="def",
                                     parameters={"tag": tag, "code": code}, **kw)["jobId"]

    def order(self):
        with open(self.log) as f:
            return [line.split() for line in f.read().splitlines()]

    def test_a_job_runs_after_the_job_it_depends_on(self):
        gate = os.path.join(self.work_dir, "gate")
        self.batch.register_job_definition(
            jobDefinitionName="gated", type="container",
            containerProperties={"image": "local/busybox", "command": ["/bin/sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done; echo first >> {self.log}"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "256"}]})
        first = self.batch.submit_job(jobName="first", jobQueue="jq", jobDefinition="gated")["jobId"]
        second = self.submit("second", dependsOn=[{"jobId": first}])
        deadline = time.time() + 30
        while self.describe_job(first)["status"] != "RUNNING" and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.describe_job(second)["status"], "PENDING")
        open(gate, "w").close()
        self.assertEqual(self.wait_job(second)["status"], "SUCCEEDED")
        self.assertEqual([o[0] for o in self.order()], ["first", "second"])

    def test_sequential_children_run_in_index_order(self):
        parent = self.submit("seq", arrayProperties={"size": 4}, dependsOn=[{"type": "SEQUENTIAL"}])
        self.assertEqual(self.wait_job(parent)["status"], "SUCCEEDED")
        self.assertEqual(self.order(), [["seq", str(i)] for i in range(4)])

    def test_n_to_n_children_wait_for_their_partner_and_a_failed_partner_fails_them(self):
        # Child 1 of `a` fails: child 1 of `b` fails with it, the others run after their partner.
        self.batch.register_job_definition(
            jobDefinitionName="picky", type="container",
            containerProperties={"image": "local/busybox", "command": ["/bin/sh", "-c", f'echo "a $AWS_BATCH_JOB_ARRAY_INDEX" >> {self.log}; [ "$AWS_BATCH_JOB_ARRAY_INDEX" != 1 ]'],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "256"}]})
        a = self.batch.submit_job(jobName="a", jobQueue="jq", jobDefinition="picky", arrayProperties={"size": 3})["jobId"]
        b = self.submit("b", arrayProperties={"size": 3}, dependsOn=[{"jobId": a, "type": "N_TO_N"}])
        self.assertEqual(self.wait_job(a)["status"], "FAILED")
        jb = self.wait_job(b)
        self.assertEqual(jb["status"], "FAILED")
        self.assertEqual(jb["arrayProperties"]["statusSummary"], {"SUCCEEDED": 2, "FAILED": 1})
        c1 = self.describe_job(f"{b}:1")
        self.assertEqual((c1["status"], c1["statusReason"]), ("FAILED", "Dependent Job failed"))
        order = self.order()
        for i in ("0", "2"):
            self.assertLess(order.index(["a", i]), order.index(["b", i]))
        self.assertNotIn(["b", "1"], order)

    def test_depending_on_an_array_waits_for_all_of_it(self):
        arr = self.submit("arr", arrayProperties={"size": 3})
        after = self.submit("after", dependsOn=[{"jobId": arr}])
        self.assertEqual(self.wait_job(after)["status"], "SUCCEEDED")
        order = self.order()
        self.assertEqual(order[-1], ["after"])
        self.assertEqual(sorted(order[:-1]), [["arr", str(i)] for i in range(3)])

    def test_a_failure_fails_its_dependents_transitively(self):
        bad = self.submit("bad", code="1")
        mid = self.submit("mid", dependsOn=[{"jobId": bad}])
        last = self.submit("last", dependsOn=[{"jobId": mid}])
        arr = self.submit("arr", arrayProperties={"size": 3}, dependsOn=[{"jobId": mid}])
        self.assertEqual(self.wait_job(bad)["status"], "FAILED")
        for job_id in (mid, last, arr):
            j = self.wait_job(job_id)
            self.assertEqual((j["status"], j["statusReason"]), ("FAILED", "Dependent Job failed"))
        self.assertEqual(self.describe_job(arr)["arrayProperties"]["statusSummary"], {"FAILED": 3})
        self.assertEqual(self.order(), [["bad"]])


if __name__ == "__main__":
    unittest.main()
