"""The requests the SDK builds, without a server: SubmitServiceJob as the SageMaker SDK builds it,
the CreateTrainingJob request of a ModelTrainer, and the training-side driver run on a fake
/opt/ml tree."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import botocore.session
from botocore.stub import Stubber

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from trainyard.aws_batch import TrainingQueue  # noqa: E402
from trainyard.aws_batch.batch_api_helper import build_submit_service_job_request  # noqa: E402
from trainyard.aws_batch.constants import DEFAULT_SAGEMAKER_TRAINING_RETRY_CONFIG  # noqa: E402
from trainyard.session import Session  # noqa: E402
from trainyard.train import Compute, InputData, ModelTrainer, SourceCode, Torchrun  # noqa: E402
from trainyard.train.model_trainer import SM_DRIVERS_LOCAL_PATH, _role_from_caller  # noqa: E402

ROLE = "arn:aws:iam::111122223333:role/Trainer"


class FakeSession(Session):
    """A session whose account, bucket and uploads are recorded instead of sent."""

    def __init__(self, caller="arn:aws:sts::111122223333:assumed-role/Trainer/me"):
        super().__init__(boto_session=None)
        self._region = "eu-west-1"
        self.caller = caller
        self.uploads = []  # (local path, bucket, key_prefix, files)
        self._clients["batch"] = botocore.session.get_session().create_client(
            "batch", region_name="eu-west-1", aws_access_key_id="k", aws_secret_access_key="s")

    def account_id(self):
        return "111122223333"

    def caller_arn(self):
        return self.caller

    def default_bucket(self):
        return f"sagemaker-{self._region}-{self.account_id()}"

    def upload_data(self, path, bucket=None, key_prefix="data", extra_args=None):
        files = {}
        if os.path.isdir(path):
            for root, _, names in os.walk(path):
                for n in names:
                    with open(os.path.join(root, n), "rb") as f:
                        files[os.path.relpath(os.path.join(root, n), path)] = f.read()
        self.uploads.append((path, bucket, key_prefix, files))
        return f"s3://{bucket}/{key_prefix}"


def source_dir(files):
    d = tempfile.mkdtemp(prefix="sdk-src-")
    for rel, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
        with open(os.path.join(d, rel), "w") as f:
            f.write(text)
    return d


class SubmitServiceJobRequestTest(unittest.TestCase):
    def test_defaults_are_the_sdks(self):
        r = build_submit_service_job_request({"TrainingJobName": "t"}, "j", "q")
        self.assertEqual(r, {"jobName": "j", "jobQueue": "q", "retryStrategy": DEFAULT_SAGEMAKER_TRAINING_RETRY_CONFIG,
                             "serviceJobType": "SAGEMAKER_TRAINING",
                             "serviceRequestPayload": json.dumps({"TrainingJobName": "t"}),
                             "timeoutConfig": {"attemptDurationSeconds": 86400}})
        self.assertEqual(DEFAULT_SAGEMAKER_TRAINING_RETRY_CONFIG["attempts"], 1)

    def test_priority_zero_is_not_sent_as_the_sdk_tests_truthiness(self):
        self.assertNotIn("schedulingPriority", build_submit_service_job_request({}, "j", "q", scheduling_priority=0))
        self.assertEqual(build_submit_service_job_request({}, "j", "q", scheduling_priority=7)["schedulingPriority"], 7)

    def test_training_tags_leave_the_payload_and_win_over_batch_tags(self):
        payload = {"TrainingJobName": "t", "Tags": [{"Key": "team", "Value": "search"}, {"Key": "x", "Value": "1"}]}
        r = build_submit_service_job_request(payload, "j", "q", tags={"team": "ads", "cost": "c1"})
        self.assertEqual(r["tags"], {"team": "search", "cost": "c1", "x": "1"})
        self.assertNotIn("Tags", json.loads(r["serviceRequestPayload"]))
        self.assertIn("Tags", payload)  # the caller's dict is left as it was

    def test_optional_members(self):
        r = build_submit_service_job_request({}, "j", "q", retry_config={"attempts": 3}, share_identifier="A",
                                             timeout={"attemptDurationSeconds": 60}, quota_share_name=None,
                                             preemption_config={"preemptionRetriesBeforeTermination": 2})
        self.assertEqual((r["retryStrategy"], r["shareIdentifier"], r["timeoutConfig"], r["preemptionConfiguration"]),
                         ({"attempts": 3}, "A", {"attemptDurationSeconds": 60}, {"preemptionRetriesBeforeTermination": 2}))
        self.assertNotIn("quotaShareName", r)
        self.assertNotIn("tags", r)


class ModelTrainerRequestTest(unittest.TestCase):
    def setUp(self):
        self.src = source_dir({"train.py": "print('hi')\n", "requirements.txt": "setuptools\n",
                               ".git/HEAD": "x", "lib/util.py": ""})
        self.session = FakeSession()

    def trainer(self, **kw):
        args = dict(source_code=SourceCode(source_dir=self.src, requirements="requirements.txt", entry_script="train.py"),
                    base_job_name="seed_job", sagemaker_session=self.session)
        args.update(kw)
        return ModelTrainer(**args)

    def test_request_as_the_sdk_builds_it(self):
        t = self.trainer(hyperparameters={"epochs": 3, "name": "x", "layers": [1, 2]},
                         compute=Compute(instance_type="ml.m5.large", instance_count=2), environment={"A": "1"})
        r = t._create_training_job_args([InputData("train", "s3://data/train")], boto3=True)
        name = r["TrainingJobName"]
        self.assertRegex(name, r"^seed-job-\d{17}$")
        self.assertEqual(r["RoleArn"], "arn:aws:iam::111122223333:role/Trainer")  # from the assumed role
        self.assertEqual(r["HyperParameters"], {"epochs": "3", "name": "x", "layers": "[1, 2]"})
        self.assertEqual(r["ResourceConfig"], {"InstanceType": "ml.m5.large", "InstanceCount": 2, "VolumeSizeInGB": 30})
        self.assertEqual(r["StoppingCondition"], {"MaxRuntimeInSeconds": 3600})
        self.assertEqual(r["OutputDataConfig"], {"S3OutputPath": "s3://sagemaker-eu-west-1-111122223333/seed_job",
                                                 "CompressionType": "GZIP"})
        self.assertEqual(r["Environment"], {"A": "1"})
        spec = r["AlgorithmSpecification"]
        self.assertEqual(spec["ContainerEntrypoint"], ["/bin/bash"])
        self.assertIn("/input/data/sm_drivers/sm_train.sh", spec["ContainerArguments"][1])
        self.assertNotIn("TrainingImage", spec)
        chans = {c["ChannelName"]: c for c in r["InputDataConfig"]}
        self.assertEqual([c["ChannelName"] for c in r["InputDataConfig"]], ["train", "code", "sm_drivers"])
        self.assertEqual(chans["train"]["DataSource"]["S3DataSource"],
                         {"S3DataType": "S3Prefix", "S3Uri": "s3://data/train", "S3DataDistributionType": "FullyReplicated"})
        bucket = "sagemaker-eu-west-1-111122223333"
        self.assertEqual(chans["code"]["DataSource"]["S3DataSource"]["S3Uri"], f"s3://{bucket}/seed_job/{name}/input/code")
        self.assertEqual(chans["sm_drivers"]["DataSource"]["S3DataSource"]["S3Uri"],
                         f"s3://{bucket}/seed_job/{name}/input/sm_drivers")
        code, drivers = self.session.uploads
        self.assertEqual(sorted(code[3]), ["lib/util.py", "requirements.txt", "train.py"])  # .git ignored
        self.assertEqual(sorted(drivers[3]), ["distributed.json", "sm_train.sh", "sourcecode.json", "trainyard_driver.py"])
        self.assertEqual(json.loads(drivers[3]["sourcecode.json"])["entry_script"], "train.py")
        self.assertEqual(json.loads(drivers[3]["distributed.json"]), {})

    def test_local_input_is_uploaded_under_the_job(self):
        data = source_dir({"a.csv": "1"})
        r = self.trainer(source_code=None, role=ROLE)._create_training_job_args([InputData("train", data)])
        self.assertEqual(self.session.uploads[0][2], f"seed_job/{r['TrainingJobName']}/input/train")
        self.assertNotIn("ContainerEntrypoint", r["AlgorithmSpecification"])

    def test_torchrun_is_written_for_the_driver(self):
        self.trainer(distributed=Torchrun(process_count_per_node=2))._create_training_job_args()
        self.assertEqual(json.loads(self.session.uploads[1][3]["distributed.json"]),
                         {"type": "Torchrun", "process_count_per_node": 2})

    def test_bad_configurations_name_the_field(self):
        with self.assertRaisesRegex(ValueError, "source_code.entry_script: missing.py"):
            self.trainer(source_code=SourceCode(source_dir=self.src, entry_script="missing.py"))
        with self.assertRaisesRegex(ValueError, "source_code.requirements"):
            self.trainer(source_code=SourceCode(source_dir=self.src, requirements="nope.txt", entry_script="train.py"))
        with self.assertRaisesRegex(ValueError, "needs 'source_dir'"):
            self.trainer(source_code=SourceCode(entry_script="train.py"))
        with self.assertRaisesRegex(ValueError, "role: not given, and the caller"):
            ModelTrainer(sagemaker_session=FakeSession(caller="arn:aws:iam::111122223333:user/alice"))
        with self.assertRaisesRegex(ValueError, "channel name 'code'"):
            self.trainer()._create_training_job_args([InputData("code", "s3://b/c")])
        with self.assertRaisesRegex(ValueError, "not an s3:// URI or an existing local path"):
            self.trainer()._create_training_job_args([InputData("train", "/no/such/dir")])

    def test_role_from_caller(self):
        self.assertEqual(_role_from_caller("arn:aws:sts::1:assumed-role/R/s"), "arn:aws:iam::1:role/R")
        self.assertEqual(_role_from_caller("arn:aws:iam::1:role/path/R"), "arn:aws:iam::1:role/path/R")
        self.assertIsNone(_role_from_caller("arn:aws:iam::1:user/u"))


class TrainingQueueTest(unittest.TestCase):
    def test_submit_sends_the_sdks_request(self):
        session = FakeSession()
        trainer = ModelTrainer(base_job_name="b", role=ROLE, sagemaker_session=session,
                               tags=[{"Key": "team", "Value": "t"}])
        queue = TrainingQueue("q")
        with Stubber(session.batch_client) as stub:
            def expect(params):
                stub.add_response("submit_service_job", {"jobArn": "arn:aws:batch:eu-west-1:1:service-job/id1",
                                                         "jobName": params["jobName"], "jobId": "id1"}, params)
            from botocore.stub import ANY
            expect({"jobName": "low-0", "jobQueue": "q", "retryStrategy": DEFAULT_SAGEMAKER_TRAINING_RETRY_CONFIG,
                    "serviceJobType": "SAGEMAKER_TRAINING", "serviceRequestPayload": ANY,
                    "timeoutConfig": {"attemptDurationSeconds": 86400}, "schedulingPriority": 5,
                    "shareIdentifier": "LOWPRI", "tags": {"team": "t"}})
            job = queue.submit(trainer, [InputData("train", "s3://d/train")], "low-0", priority=5, share_identifier="LOWPRI")
            stub.assert_no_pending_responses()
        self.assertEqual((job.job_name, job.share_identifier), ("low-0", "LOWPRI"))
        with self.assertRaisesRegex(ValueError, "not both"):
            queue.submit(trainer, [], share_identifier="A", quota_share_name="B")
        with self.assertRaises(TypeError):
            queue.submit(object(), [])
        with self.assertRaisesRegex(ValueError, "must match the number of inputs"):
            queue.map(trainer, [[], []], job_names=["one"])

    def test_list_jobs_follows_next_token_and_get_job_filters_by_name(self):
        session = FakeSession()
        queue = TrainingQueue("q", session=session)
        with Stubber(session.batch_client) as stub:
            stub.add_response("list_service_jobs", {"jobSummaryList": [{"jobArn": "a1", "jobName": "n1", "jobId": "1", "serviceJobType": "SAGEMAKER_TRAINING"}],
                                                    "nextToken": "t"}, {"jobQueue": "q", "jobStatus": "RUNNING"})
            stub.add_response("list_service_jobs", {"jobSummaryList": [{"jobArn": "a2", "jobName": "n2", "jobId": "2", "serviceJobType": "SAGEMAKER_TRAINING"}]},
                              {"jobQueue": "q", "jobStatus": "RUNNING", "nextToken": "t"})
            self.assertEqual([j.job_name for j in queue.list_jobs()], ["n1", "n2"])
            stub.add_response("list_service_jobs", {"jobSummaryList": []},
                              {"jobQueue": "q", "filters": [{"name": "JOB_NAME", "values": ["x"]}]})
            with self.assertRaisesRegex(ValueError, "Cannot find job: x"):
                queue.get_job("x")


class DriverTest(unittest.TestCase):
    """sm_train.sh and the driver on a fake /opt/ml (TRAINYARD_OPT_ML, as trainyard sets it
    when jobs run without a sandbox)."""

    def run_driver(self, files, source, hps=None, dist=None):
        ml = tempfile.mkdtemp(prefix="sdk-optml-")
        code = os.path.join(ml, "input/data/code")
        drivers = os.path.join(ml, "input/data/sm_drivers")
        for d in (code, drivers, os.path.join(ml, "input/config"), os.path.join(ml, "output"), os.path.join(ml, "model")):
            os.makedirs(d, exist_ok=True)
        for rel, text in files.items():
            with open(os.path.join(code, rel), "w") as f:
                f.write(text)
        subprocess.check_call(["cp", "-r", SM_DRIVERS_LOCAL_PATH + "/.", drivers])
        with open(os.path.join(drivers, "sourcecode.json"), "w") as f:
            json.dump(source, f)
        with open(os.path.join(drivers, "distributed.json"), "w") as f:
            json.dump(dist or {}, f)
        with open(os.path.join(ml, "input/config/hyperparameters.json"), "w") as f:
            json.dump(hps or {}, f)
        env = dict(os.environ, TRAINYARD_OPT_ML=ml, SM_CHANNEL_CODE=code, SM_MODEL_DIR=os.path.join(ml, "model"))
        p = subprocess.run(["/bin/bash", "-c", 'exec /bin/bash "${TRAINYARD_OPT_ML:-/opt/ml}/input/data/sm_drivers/sm_train.sh"'],
                           env=env, capture_output=True, text=True, timeout=120)
        failure = os.path.join(ml, "output/failure")
        return p, (open(failure).read() if os.path.exists(failure) else None)

    def test_entry_script_gets_hyperparameters_after_requirements(self):
        p, failure = self.run_driver(
            {"train.py": "import sys, setuptools; print('args', sys.argv[1:])", "requirements.txt": "setuptools\n"},
            {"source_dir": "src", "requirements": "requirements.txt", "entry_script": "train.py"},
            hps={"epochs": "3", "lr": "0.1"})
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("args ['--epochs', '3', '--lr', '0.1']", p.stdout)
        self.assertIn("installing requirements", p.stdout)
        self.assertIsNone(failure)

    def test_a_failing_script_fails_the_job_with_a_reason(self):
        p, failure = self.run_driver({"train.py": "raise SystemExit(3)"}, {"source_dir": "s", "entry_script": "train.py"})
        self.assertEqual(p.returncode, 3)
        self.assertIn("exited with code 3", failure)

    def test_missing_requirements_file_is_named(self):
        p, failure = self.run_driver({"train.py": ""}, {"source_dir": "s", "requirements": "req.txt", "entry_script": "train.py"})
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("requirements file req.txt is not in the source directory", failure)

    def test_command_runs_in_the_code_directory(self):
        p, _ = self.run_driver({"marker": "m"}, {"source_dir": "s", "command": "cat marker; echo ran"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("mran", p.stdout)


if __name__ == "__main__":
    unittest.main()
