"""GET /metrics: a valid Prometheus text exposition whose counters, gauges and histograms move as
jobs are submitted, run and finish (docs/metrics.md)."""
import math
import os
import re
import time
import unittest
import urllib.request

from harness import SOURCE_DIR, ServerTest

NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_labels(text, line):
    """Parses `a="x",b="y"` strictly (escapes \\\\, \\" and \\n); returns a dict."""
    labels, i = {}, 0
    while i < len(text):
        eq = text.index("=", i)
        name = text[i:eq]
        if not LABEL.match(name) or name in labels:
            raise ValueError(f"bad or repeated label name {name!r}: {line}")
        if text[eq + 1] != '"':
            raise ValueError(f"label value not quoted: {line}")
        j, value = eq + 2, []
        while text[j] != '"':
            if text[j] == "\\":
                esc = text[j + 1]
                if esc not in '\\"n':
                    raise ValueError(f"bad escape in {line}")
                value.append("\n" if esc == "n" else esc)
                j += 2
            else:
                value.append(text[j])
                j += 1
        labels[name] = "".join(value)
        i = j + 1
        if i < len(text):
            if text[i] != ",":
                raise ValueError(f"expected ',' in {line}")
            i += 1
    return labels


def parse_value(s, line):
    if s in ("+Inf", "-Inf", "NaN"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.match(r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$", s):
        raise ValueError(f"bad value {s!r}: {line}")
    return float(s)


def parse_exposition(text):
    """A strict parser of the text format 0.0.4. Returns {family: {"type", "help", "samples":
    [(name, labels, value)]}}; raises ValueError on anything invalid."""
    if not text.endswith("\n"):
        raise ValueError("the exposition must end with a newline")
    families, current, seen_done = {}, None, set()
    for line in text.split("\n")[:-1]:
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            if not NAME.match(name):
                raise ValueError(f"bad metric name {name!r}")
            if name in families:
                raise ValueError(f"family {name} appears twice")
            if current:
                seen_done.add(current)
            families[name] = {"help": line.split(" ", 3)[3] if line.count(" ") >= 3 else "", "type": None, "samples": []}
            current = name
        elif line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ")
            if name != current or families[name]["type"] is not None or families[name]["samples"]:
                raise ValueError(f"TYPE of {name} must follow its HELP, once, before its samples")
            if typ not in TYPES:
                raise ValueError(f"bad type {typ}")
            families[name]["type"] = typ
        elif line.startswith("#") or not line.strip():
            raise ValueError(f"unexpected line {line!r}")
        else:
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
            if not m:
                raise ValueError(f"bad sample line {line!r}")
            name, labels, value = m.group(1), parse_labels(m.group(3) or "", line), parse_value(m.group(4), line)
            fam = families.get(current)
            if fam is None or fam["type"] is None:
                raise ValueError(f"sample without a TYPE: {line}")
            allowed = {name} if fam["type"] in ("counter", "gauge") else \
                {current + "_bucket", current + "_sum", current + "_count"}
            if name not in allowed:
                raise ValueError(f"sample {name} outside its family {current}")
            fam["samples"].append((name, labels, value))
    for name, fam in families.items():
        if fam["type"] == "counter":
            if not name.endswith("_total"):
                raise ValueError(f"counter {name} must end in _total")
            for _, _, v in fam["samples"]:
                if v < 0 or math.isnan(v):
                    raise ValueError(f"counter {name} has value {v}")
        if fam["type"] == "histogram":
            check_histogram(name, fam["samples"])
    return families


def check_histogram(name, samples):
    series = {}
    for sname, labels, v in samples:
        key = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
        s = series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if sname.endswith("_bucket"):
            if "le" not in labels:
                raise ValueError(f"{name} bucket without le")
            s["buckets"].append((parse_value(labels["le"], labels["le"]), v))
        elif sname.endswith("_sum"):
            s["sum"] = v
        else:
            s["count"] = v
    for key, s in series.items():
        bounds = [b for b, _ in s["buckets"]]
        counts = [c for _, c in s["buckets"]]
        if not bounds or bounds[-1] != float("inf"):
            raise ValueError(f"{name}{key} has no le=\"+Inf\" bucket")
        if bounds != sorted(bounds) or counts != sorted(counts):
            raise ValueError(f"{name}{key} buckets are not cumulative in ascending order")
        if s["sum"] is None or s["count"] is None or s["count"] != counts[-1]:
            raise ValueError(f"{name}{key} needs _sum and _count, and _count equal to the +Inf bucket")


class MetricsTest(ServerTest):
    # One alarm rule and one webhook (to a port nobody listens on), so that their families show.
    server_config = """
[[alarms]]
name = "long-wait"
rule = "runnable_longer_than"
seconds = 3600

[[webhooks]]
name = "nowhere"
url = "http://127.0.0.1:9/hook"
max_backoff_seconds = 1
"""

    def scrape(self):
        with urllib.request.urlopen(self.server.url + "/metrics", timeout=10) as r:
            self.assertEqual(r.status, 200)
            self.assertTrue(r.headers["Content-Type"].startswith("text/plain; version=0.0.4"))
            return parse_exposition(r.read().decode())

    @staticmethod
    def value(families, name, default=0.0, **labels):
        family = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[: -len(suffix)] in families:
                family = name[: -len(suffix)]
        for sname, l, v in families.get(family, {"samples": []})["samples"]:
            if sname == name and all(l.get(k) == x for k, x in labels.items()) and \
                    set(l) - {"le"} == set(labels) - {"le"}:
                return v
        return default

    def test_parser_rejects_invalid_expositions(self):
        bad = [
            "x 1\n",                                               # no TYPE
            "# HELP x h\n# TYPE x counter\nx 1\n",                  # counter without _total
            "# HELP x_total h\n# TYPE x_total counter\nx_total{a=\"1\"} 1",  # no final newline
            "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",  # no +Inf
            "# HELP g h\n# TYPE g gauge\ng{a=b} 1\n",               # unquoted label
            "# HELP 1g h\n# TYPE 1g gauge\n",                       # bad name
        ]
        for text in bad:
            with self.assertRaises(ValueError, msg=text):
                parse_exposition(text)

    def test_exposition_is_valid_and_moves_with_jobs(self):
        queue = self.create_queue("mq", capacity=1)
        before = self.scrape()
        # Every family the docs promise is there, typed.
        for name, typ in [("trainyard_jobs_submitted_total", "counter"), ("trainyard_jobs_transitions_total", "counter"),
                          ("trainyard_jobs_preempted_total", "counter"), ("trainyard_jobs_retried_total", "counter"),
                          ("trainyard_preemption_lost_gpu_seconds_total", "counter"),
                          ("trainyard_spot_interruption_lost_gpu_seconds_total", "counter"),
                          ("trainyard_job_attempt_runnable_to_scheduled_seconds", "histogram"),
                          ("trainyard_job_attempt_execution_seconds", "histogram"),
                          ("trainyard_scheduler_pass_duration_seconds", "histogram"),
                          ("trainyard_host_instances_in_use", "gauge"), ("trainyard_host_instances_idle", "gauge"),
                          ("trainyard_warm_pool_instances", "gauge"),
                          ("trainyard_service_environment_instances_in_use", "gauge"),
                          ("trainyard_share_instances_in_use", "gauge")]:
            self.assertEqual(before.get(name, {}).get("type"), typ, name)
        # The dashboard and the docs name only metrics that exist.
        for doc in ("docs/grafana/trainyard.json", "docs/metrics.md"):
            with open(os.path.join(SOURCE_DIR, doc)) as f:
                names = set(re.findall(r"\btrainyard_[a-z_]+", f.read()))
            names = {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}
            self.assertEqual(sorted(n for n in names if n not in before), [], doc)
        passes_before = self.value(before, "trainyard_scheduler_pass_duration_seconds_count")
        self.assertEqual(self.value(before, "trainyard_host_instances", instance_type="ml.m5.large", market="on_demand"), 4)
        self.assertEqual(self.value(before, "trainyard_host_instances_idle", instance_type="ml.m5.large", market="on_demand"), 4)

        gate = os.path.join(self.work_dir, "gate")
        hold = f"while [ ! -f {gate} ]; do sleep 0.05; done"
        ids = [self.submit(queue, self.command_payload("m-hold", hold))]
        ids += [self.submit(queue, self.command_payload(f"m-{n}", "true")) for n in range(2)]
        self.wait_jobs(ids[:1], statuses=("RUNNING",))
        running = self.scrape()
        self.assertEqual(self.value(running, "trainyard_jobs_submitted_total", queue=queue), 3)
        self.assertEqual(self.value(running, "trainyard_host_instances_in_use", instance_type="ml.m5.large", market="on_demand"), 1)
        self.assertEqual(self.value(running, "trainyard_host_instances_idle", instance_type="ml.m5.large", market="on_demand"), 3)
        self.assertEqual(self.value(running, "trainyard_service_environment_instances_in_use",
                                    service_environment="mq-env", instance_type="ml.m5.large", market="on_demand"), 1)
        self.assertEqual(self.value(running, "trainyard_service_environment_instances_idle",
                                    service_environment="mq-env", capacity_unit="NUM_INSTANCES"), 0)
        self.assertEqual(self.value(running, "trainyard_jobs", queue=queue, status="RUNNING"), 1)
        self.assertEqual(self.value(running, "trainyard_jobs", queue=queue, status="RUNNABLE"), 2)
        self.assertEqual(self.value(running, "trainyard_jobs_transitions_total", queue=queue, status="RUNNING"), 1)
        self.assertEqual(self.value(running, "trainyard_job_submitted_to_runnable_seconds_count", queue=queue), 3)
        self.assertEqual(self.value(running, "trainyard_job_attempt_runnable_to_scheduled_seconds_count", queue=queue), 1)
        self.assertGreater(self.value(running, "trainyard_scheduler_pass_duration_seconds_count"), passes_before)

        open(gate, "w").close()
        jobs = self.wait_jobs(ids)
        self.assertTrue(all(j["status"] == "SUCCEEDED" for j in jobs), jobs)
        after = self.scrape()
        self.assertEqual(self.value(after, "trainyard_jobs_submitted_total", queue=queue), 3)
        self.assertEqual(self.value(after, "trainyard_jobs_transitions_total", queue=queue, status="SUCCEEDED"), 3)
        self.assertEqual(self.value(after, "trainyard_jobs_transitions_total", queue=queue, status="RUNNABLE"), 3)
        self.assertEqual(self.value(after, "trainyard_jobs_transitions_total", queue=queue, status="FAILED"), 0)
        self.assertEqual(self.value(after, "trainyard_jobs", queue=queue, status="SUCCEEDED"), 3)
        self.assertEqual(self.value(after, "trainyard_host_instances_in_use", instance_type="ml.m5.large", market="on_demand"), 0)
        self.assertEqual(self.value(after, "trainyard_service_environment_instances_idle",
                                    service_environment="mq-env", capacity_unit="NUM_INSTANCES"), 1)
        self.assertEqual(self.value(after, "trainyard_job_attempt_seconds_count", queue=queue), 3)
        self.assertEqual(self.value(after, "trainyard_job_attempt_execution_seconds_count", queue=queue), 3)
        self.assertEqual(self.value(after, "trainyard_job_attempt_seconds_bucket", queue=queue, le="+Inf"), 3)
        self.assertGreater(self.value(after, "trainyard_scheduler_pass_duration_seconds_count"),
                           self.value(running, "trainyard_scheduler_pass_duration_seconds_count"))
        # The held job ran until the gate opened: its attempt took a while.
        self.assertGreater(self.value(after, "trainyard_job_attempt_seconds_sum", queue=queue), 0)

    def test_warm_pool_instances(self):
        payload = self.command_payload("warm", "true")
        payload["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 600
        self.sm.create_training_job(**payload)
        self.assertEqual(self.wait_training("warm")["TrainingJobStatus"], "Completed")
        deadline = time.time() + 10
        while self.sm.describe_training_job(TrainingJobName="warm").get("WarmPoolStatus", {}).get("Status") != "Available":
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        m = self.scrape()
        self.assertEqual(self.value(m, "trainyard_warm_pool_instances", instance_type="ml.m5.large"), 1)
        self.assertEqual(self.value(m, "trainyard_warm_pools", status="Available"), 1)
        self.assertEqual(self.value(m, "trainyard_host_instances_in_use", instance_type="ml.m5.large", market="on_demand"), 0)
        self.assertEqual(self.value(m, "trainyard_host_instances_idle", instance_type="ml.m5.large", market="on_demand"), 3)
        self.sm.update_training_job(TrainingJobName="warm", ResourceConfig={"KeepAlivePeriodInSeconds": 0})
        m = self.scrape()
        self.assertEqual(self.value(m, "trainyard_warm_pool_instances", instance_type="ml.m5.large"), 0)
        self.assertEqual(self.value(m, "trainyard_host_instances_idle", instance_type="ml.m5.large", market="on_demand"), 4)

    def test_fair_share_gauges(self):
        self.batch.create_service_environment(
            serviceEnvironmentName="fs-env", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 2, "capacityUnit": "NUM_INSTANCES"}])
        policy = self.batch.create_scheduling_policy(
            name="fs-policy", fairsharePolicy={"shareDecaySeconds": 600,
                                               "shareDistribution": [{"shareIdentifier": "a", "weightFactor": 0.5}]})
        self.batch.create_job_queue(jobQueueName="fs", jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    schedulingPolicyArn=policy["arn"],
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "fs-env"}])
        gate = os.path.join(self.work_dir, "gate")
        hold = f"while [ ! -f {gate} ]; do sleep 0.05; done"
        ids = [self.submit("fs", self.command_payload(f"fs-{s}", hold), shareIdentifier=s) for s in ("a", "b")]
        self.wait_jobs(ids, statuses=("RUNNING",))
        m = self.scrape()
        self.assertIn(("trainyard_fairshare_usage_instance_seconds", {"queue": "fs", "share": "a"}),
                      [(n, l) for n, l, _ in m["trainyard_fairshare_usage_instance_seconds"]["samples"]])
        self.assertEqual(self.value(m, "trainyard_share_instances_in_use", queue="fs", share="a"), 1)
        self.assertEqual(self.value(m, "trainyard_share_unfinished_jobs", queue="fs", share="b"), 1)
        self.assertEqual(self.value(m, "trainyard_fairshare_weight_factor", queue="fs", share="a"), 0.5)
        self.assertEqual(self.value(m, "trainyard_fairshare_weight_factor", queue="fs", share="b"), 1)
        open(gate, "w").close()
        self.wait_jobs(ids)

    def poll(self, predicate, what, timeout=60):
        """Scrapes until predicate(families) holds; returns the families that satisfied it."""
        deadline = time.time() + timeout
        while True:
            m = self.scrape()
            if predicate(m):
                return m
            if time.time() > deadline:
                self.fail(f"timed out waiting for {what}\n{self.server.read_log()}")
            time.sleep(0.05)

    def test_fair_share_entitlement_and_weighted_usage(self):
        # Two environments: the queue's capacity is 2 + 1 = 3 instances.
        for env, cap in (("fe-env1", 2), ("fe-env2", 1)):
            self.batch.create_service_environment(
                serviceEnvironmentName=env, serviceEnvironmentType="SAGEMAKER_TRAINING",
                capacityLimits=[{"maxCapacity": cap, "capacityUnit": "NUM_INSTANCES"}])
        policy = self.batch.create_scheduling_policy(
            name="fe-policy", fairsharePolicy={"shareDecaySeconds": 300, "shareDistribution": [
                {"shareIdentifier": "a", "weightFactor": 0.5}, {"shareIdentifier": "b", "weightFactor": 1.5}]})
        self.batch.create_job_queue(jobQueueName="fe", jobQueueType="SAGEMAKER_TRAINING", priority=1,
                                    schedulingPolicyArn=policy["arn"],
                                    serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "fe-env1"},
                                                             {"order": 2, "serviceEnvironment": "fe-env2"}])
        gate = os.path.join(self.work_dir, "gate")
        hold = f"while [ ! -f {gate} ]; do sleep 0.05; done"
        ids = {s: [self.submit("fe", self.command_payload(f"fe-{s}-{n}", hold), shareIdentifier=s) for n in range(3)]
               for s in ("a", "b")}
        # Six jobs on three instances: three run, three wait, and both shares are active.
        held = lambda m, s: self.value(m, "trainyard_share_instances_in_use", queue="fe", share=s)
        m = self.poll(lambda m: held(m, "a") + held(m, "b") == 3 and
                      self.value(m, "trainyard_jobs", queue="fe", status="RUNNABLE") == 3,
                      "three of the six jobs to hold instances and three to wait")
        # ledger: 1/w a = 2, b = 2/3; sum 8/3 ⇒ a = .75, b = .25 of 3 instances.
        self.assertAlmostEqual(self.value(m, "trainyard_fairshare_entitlement_ratio", queue="fe", share="a"), 0.75)
        self.assertAlmostEqual(self.value(m, "trainyard_fairshare_entitlement_ratio", queue="fe", share="b"), 0.25)
        self.assertAlmostEqual(self.value(m, "trainyard_fairshare_entitlement_instances", queue="fe", share="a"), 2.25)
        self.assertAlmostEqual(self.value(m, "trainyard_fairshare_entitlement_instances", queue="fe", share="b"), 0.75)
        # Weighted usage is the scheduler's order key without the candidate job:
        # (4 x usage / shareDecaySeconds + held) x weightFactor.
        for s, w in (("a", 0.5), ("b", 1.5)):
            usage = self.value(m, "trainyard_fairshare_usage_instance_seconds", default=None, queue="fe", share=s)
            self.assertIsNotNone(usage, s)
            self.assertAlmostEqual(
                self.value(m, "trainyard_fairshare_weighted_usage_instances", default=None, queue="fe", share=s),
                (4 * usage / 300 + held(m, s)) * w, msg=s)

        # b's jobs end: a is the only active share and is entitled to the whole queue.
        for j in ids["b"]:
            self.batch.terminate_service_job(jobId=j, reason="test: b is done")
        ent = lambda m, s: self.value(m, "trainyard_fairshare_entitlement_ratio", default=None, queue="fe", share=s)
        m = self.poll(lambda m: self.value(m, "trainyard_share_unfinished_jobs", queue="fe", share="b") == 0
                      and ent(m, "a") == 1, "a to be the only active share")
        self.assertEqual(self.value(m, "trainyard_fairshare_entitlement_instances", queue="fe", share="a"), 3)
        # b (still listed while its usage decays) is entitled to nothing.
        self.assertIn(ent(m, "b"), (0, None))
        open(gate, "w").close()
        self.wait_jobs(ids["a"] + ids["b"])


class QuotaShareMetricsTest(ServerTest):
    server_config = "[executor]\nstop_grace_seconds = 5\n"

    def test_borrowing_and_preemption(self):
        self.create_quota_queue("qm", 4, [("A", 2, "LEND_AND_BORROW"), ("B", 2, "LEND_AND_BORROW")])
        long = "trap 'exit 0' TERM; while :; do sleep 0.1; done"
        a = [self.submit("qm", self.command_payload(f"a-{n}", long), quotaShareName="A") for n in range(4)]
        self.wait_jobs(a, statuses=("RUNNING",))
        m = self.scrape()
        labels = {"queue": "qm", "share": "A", "instance_type": "ml.m5.large"}
        self.assertEqual(self.value(m, "trainyard_quota_share_limit_instances", **labels), 2)
        self.assertEqual(self.value(m, "trainyard_quota_share_instances_in_use", **labels), 4)
        self.assertEqual(self.value(m, "trainyard_quota_share_borrowed_instances", **labels), 2)
        self.assertEqual(self.value(m, "trainyard_service_environment_instances_idle",
                                    service_environment="qm-env", capacity_unit="ml.m5.large"), 0)
        self.assertEqual(self.value(m, "trainyard_jobs_preempted_total", queue="qm"), 0)

        b = [self.submit("qm", self.command_payload(f"b-{n}", "sleep 1"), quotaShareName="B") for n in range(2)]
        done = self.wait_jobs(b, timeout=60)
        self.assertTrue(all(j["status"] == "SUCCEEDED" for j in done), done)
        m = self.scrape()
        self.assertEqual(self.value(m, "trainyard_jobs_preempted_total", queue="qm"), 2)
        self.assertGreater(self.value(m, "trainyard_preemption_lost_instance_seconds_total", queue="qm"), 0)
        # ml.m5.large has no GPUs: no GPU-seconds lost.
        self.assertEqual(self.value(m, "trainyard_preemption_lost_gpu_seconds_total", queue="qm"), 0)
        self.assertEqual(self.value(m, "trainyard_jobs_retried_total", queue="qm"), 0)
        # Preempted attempts end (back to RUNNABLE) and their jobs are scheduled again.
        self.assertEqual(self.value(m, "trainyard_job_attempt_seconds_count", queue="qm"), 4)
        self.assertGreaterEqual(self.value(m, "trainyard_job_attempt_runnable_to_scheduled_seconds_count", queue="qm"), 8)
        self.assertEqual(self.value(m, "trainyard_job_submitted_to_first_scheduled_seconds_count", queue="qm"), 6)

        for j in a:
            self.batch.terminate_service_job(jobId=j, reason="test over")
        self.wait_jobs(a, timeout=60)
        m = self.scrape()
        self.assertEqual(self.value(m, "trainyard_jobs_terminated_total", queue="qm"), 4)
        self.assertEqual(self.value(m, "trainyard_jobs_transitions_total", queue="qm", status="FAILED"), 4)
        self.assertEqual(self.value(m, "trainyard_host_instances_in_use", instance_type="ml.m5.large", market="on_demand"), 0)
        self.assertEqual(self.value(m, "trainyard_quota_share_borrowed_instances", **labels), 0)

    def ledger(self, m, queue, shares):
        """{share: (in use, borrowed, lent)}; fails when a series is missing."""
        out = {}
        for share in shares:
            labels = {"queue": queue, "share": share, "instance_type": "ml.m5.large"}
            row = tuple(self.value(m, name, default=None, **labels) for name in (
                "trainyard_quota_share_instances_in_use", "trainyard_quota_share_borrowed_instances",
                "trainyard_quota_share_lent_instances"))
            self.assertNotIn(None, row, (share, row))
            out[share] = row
        return out

    def poll(self, predicate, what, timeout=60):
        return MetricsTest.poll(self, predicate, what, timeout)

    def test_lent_matches_borrowed(self):
        self.create_quota_queue("ql", 4, [("A", 2, "LEND_AND_BORROW"), ("B", 2, "LEND")])
        long = "trap 'exit 0' TERM; while :; do sleep 0.1; done"
        a = [self.submit("ql", self.command_payload(f"ql-a-{n}", long), quotaShareName="A") for n in range(3)]
        self.wait_jobs(a, statuses=("RUNNING",))
        m = self.poll(lambda m: self.value(m, "trainyard_quota_share_instances_in_use", queue="ql", share="A",
                                           instance_type="ml.m5.large") == 3, "A to hold 3 instances")
        # ledger: A holds 3 of its limit 2 ⇒ borrows 1; B (limit 2) is idle and lends 1 of its 2.
        self.assertEqual(self.ledger(m, "ql", "AB"), {"A": (3, 1, 0), "B": (0, 0, 1)})
        self.assertEqual(self.value(m, "trainyard_quota_unassigned_lent_instances", default=None, queue="ql",
                                    instance_type="ml.m5.large"), 0)
        self.assertEqual(self.value(m, "trainyard_quota_share_limit_instances", queue="ql", share="B",
                                    instance_type="ml.m5.large"), 2)

        for j in a:
            self.batch.terminate_service_job(jobId=j, reason="test over")
        self.wait_jobs(a, timeout=60)
        m = self.poll(lambda m: self.value(m, "trainyard_quota_share_instances_in_use", queue="ql", share="A",
                                           instance_type="ml.m5.large") == 0, "A's instances to be given back")
        self.assertEqual(self.ledger(m, "ql", "AB"), {"A": (0, 0, 0), "B": (0, 0, 0)})

    def test_lending_is_split_by_idle_limit(self):
        # AR is a RESERVE share: it never lends, and its idle limit is not counted. (Counted, it
        # would come first by name and take the instance C gets below.)
        self.create_quota_queue("qp", 5, [("A", 1, "LEND_AND_BORROW"), ("AR", 1, "RESERVE"), ("B", 2, "LEND"),
                                   ("C", 1, "LEND_AND_BORROW")])
        long = "trap 'exit 0' TERM; while :; do sleep 0.1; done"
        a = [self.submit("qp", self.command_payload(f"qp-a-{n}", long), quotaShareName="A") for n in range(3)]
        self.wait_jobs(a, statuses=("RUNNING",))
        m = self.poll(lambda m: self.value(m, "trainyard_quota_share_instances_in_use", queue="qp", share="A",
                                           instance_type="ml.m5.large") == 3, "A to hold 3 instances")
        # ledger: A borrows 2; idle limits B = 2, C = 1 (sum 3). Shares of 2: B 4/3, C 2/3 ⇒
        # floors B 1, C 0; the one left goes to the larger remainder, C's (2/3 > 1/3).
        self.assertEqual(self.ledger(m, "qp", ["A", "AR", "B", "C"]),
                         {"A": (3, 2, 0), "AR": (0, 0, 0), "B": (0, 0, 1), "C": (0, 0, 1)})
        self.assertEqual(self.value(m, "trainyard_quota_unassigned_lent_instances", default=None, queue="qp",
                                    instance_type="ml.m5.large"), 0)
        for j in a:
            self.batch.terminate_service_job(jobId=j, reason="test over")
        self.wait_jobs(a, timeout=60)

    def test_borrowing_beyond_all_limits_is_unassigned(self):
        # The environment offers 4, the shares' limits add up to 2: the other 2 belong to no share.
        self.create_quota_queue("qu", 4, [("A", 1, "LEND_AND_BORROW"), ("C", 1, "LEND_AND_BORROW")])
        long = "trap 'exit 0' TERM; while :; do sleep 0.1; done"
        jobs = []
        for share in "AC":
            ids = [self.submit("qu", self.command_payload(f"qu-{share}-{n}", long), quotaShareName=share)
                   for n in range(2)]
            self.wait_jobs(ids, statuses=("RUNNING",))
            jobs += ids
        m = self.poll(lambda m: self.value(m, "trainyard_quota_share_instances_in_use", queue="qu", share="C",
                                           instance_type="ml.m5.large") == 2, "C to hold 2 instances")
        # ledger: A and C each hold 2 on a limit of 1 ⇒ borrowed 1 + 1; no share is idle ⇒ lent
        # 0 + 0, and the 2 come from capacity no share's limit covers.
        self.assertEqual(self.ledger(m, "qu", "AC"), {"A": (2, 1, 0), "C": (2, 1, 0)})
        self.assertEqual(self.value(m, "trainyard_quota_unassigned_lent_instances", default=None, queue="qu",
                                    instance_type="ml.m5.large"), 2)
        for j in jobs:
            self.batch.terminate_service_job(jobId=j, reason="test over")
        self.wait_jobs(jobs, timeout=60)

    scrape = MetricsTest.scrape
    value = staticmethod(MetricsTest.value)


class SpotMetricsTest(ServerTest):
    server_config = """
[executor]
stop_grace_seconds = 2
spot_notice_seconds = 30

[[instance_types]]
name = "ml.m5.xlarge"
count = 1
spot_count = 1
gpus = 2
"""

    def test_interruption_counts_lost_gpu_seconds(self):
        long = "trap 'exit 143' TERM; while :; do sleep 0.1; done"
        payload = self.command_payload("spotty", long, EnableManagedSpotTraining=True,
                                       StoppingCondition={"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 1200})
        payload["ResourceConfig"]["InstanceType"] = "ml.m5.xlarge"
        self.sm.create_training_job(**payload)
        self.wait_secondary("spotty", "Training")
        m = self.scrape()
        self.assertEqual(self.value(m, "trainyard_host_instances_in_use", instance_type="ml.m5.xlarge", market="spot"), 1)
        self.assertEqual(self.value(m, "trainyard_host_instances_idle", instance_type="ml.m5.xlarge", market="spot"), 0)
        self.assertEqual(self.value(m, "trainyard_host_instances_in_use", instance_type="ml.m5.xlarge", market="on_demand"), 0)
        time.sleep(0.5)
        self.server.admin("admin/interrupt", {"TrainingJobName": "spotty"})
        deadline = time.time() + 30
        while True:
            m = self.scrape()
            lost = self.value(m, "trainyard_spot_interruption_lost_instance_seconds_total", instance_type="ml.m5.xlarge")
            if lost > 0 or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(self.value(m, "trainyard_spot_interruptions_total", instance_type="ml.m5.xlarge"), 1)
        self.assertGreater(lost, 0.4)
        self.assertAlmostEqual(
            self.value(m, "trainyard_spot_interruption_lost_gpu_seconds_total", instance_type="ml.m5.xlarge"), 2 * lost)
        self.sm.stop_training_job(TrainingJobName="spotty")
        self.wait_training("spotty", timeout=60)

    scrape = MetricsTest.scrape
    value = staticmethod(MetricsTest.value)


if __name__ == "__main__":
    unittest.main()
