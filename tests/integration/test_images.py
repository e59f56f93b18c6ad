"""OCI images (docs/images.md): a training job with only a TrainingImage runs the image's `train`
in the sandbox with the image's root as `/`, its Env under the job's Environment and its
WorkingDir; an image that cannot be copied fails the job with CannotPullContainerError and
nothing else; a cached image is neither copied nor unpacked again; a hostile layer writes
nothing outside its root file system. The images are built offline (tiny_image.py)."""
import io
import json
import os
import stat
import tarfile
import tempfile
import time
import unittest

from botocore.exceptions import ClientError

import tiny_image
from harness import ServerTest

TRAIN = """#!/bin/sh
set -e
cp /opt/ml/input/config/hyperparameters.json /opt/ml/model/hps.json
{
  echo "greeting=$GREETING"
  echo "shared=$SHARED"
  echo "cwd=$(pwd)"
  if [ -e /etc/passwd ]; then echo "host=visible"; else echo "host=hidden"; fi
  if touch /root-write 2>/dev/null; then echo "root=writable"; else echo "root=readonly"; fi
  if [ -e /opt/ml/input/config/resourceconfig.json ]; then echo "opt_ml=mounted"; fi
} > /opt/ml/model/info.txt
echo "loss=0.25"
"""

ENTRY = """#!/bin/sh
echo "$@" > /opt/ml/model/args.txt
"""


class ImageTest(ServerTest):
    server_config = '[executor]\nsandbox = "bwrap"\nstop_grace_seconds = 5\n'

    def new_server(self, **kw):
        # The layouts the tests build are under the work directory, the one image directory.
        kw.setdefault("config", self.server_config.replace(
            "[executor]\n", f'[executor]\nimage_dirs = ["{self.work_dir}"]\n'))
        return super().new_server(**kw)

    def setUp(self):
        super().setUp()
        os.makedirs(self.bucket_path("trainyard-test"), exist_ok=True)
        self.images = os.path.join(self.work_dir, "images")

    def payload(self, name, image, **extra):
        p = {"TrainingJobName": name,
             "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
             "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File"},
             "HyperParameters": {"epochs": "3", "lr": "0.1"},
             "OutputDataConfig": {"S3OutputPath": "s3://trainyard-test/output"},
             "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
             "StoppingCondition": {"MaxRuntimeInSeconds": 120}}
        p.update(extra)
        return p

    def run_job(self, name, image, **extra):
        self.sm.create_training_job(**self.payload(name, image, **extra))
        return self.wait_training(name, timeout=90)

    def model_files(self, name):
        path = self.bucket_path("trainyard-test", f"output/{name}/output/model.tar.gz")
        with tarfile.open(path) as tar:
            return {m.name.lstrip("./"): tar.extractfile(m).read().decode()
                    for m in tar.getmembers() if m.isfile()}

    def attempt_status(self, name):
        with open(os.path.join(self.data_dir, "attempts", name, "status.json")) as f:
            return json.load(f)

    def cache(self, *parts):
        return os.path.join(self.data_dir, "images", *parts)

    def train_image(self, tag="v1"):
        layout = os.path.join(self.images, "train")
        # /work is not in the layer: it is made as Docker makes a missing WorkingDir.
        tiny_image.build(layout, tag, files={"usr/local/bin/train": (TRAIN, 0o755)},
                         env=["GREETING=from-image", "SHARED=image"], working_dir="/work")
        return f"oci:{layout}:{tag}"

    def test_a_training_image_runs_its_train_and_a_cached_one_is_not_unpacked_again(self):
        image = self.train_image()
        tj = self.run_job("img-train", image, Environment={"SHARED": "job"})
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        files = self.model_files("img-train")
        self.assertEqual(json.loads(files["hps.json"]), {"epochs": "3", "lr": "0.1"})
        info = dict(line.split("=", 1) for line in files["info.txt"].split())
        self.assertEqual(info, {"greeting": "from-image", "shared": "job", "cwd": "/work", "host": "hidden",
                                "root": "readonly", "opt_ml": "mounted"})
        first = self.attempt_status("img-train")["image"]
        self.assertTrue(first["copied"] and first["unpacked"], first)
        rootfs = self.cache("rootfs", first["digest"])
        inode = os.stat(rootfs).st_ino
        index_mtime = os.stat(self.cache("index.json")).st_mtime_ns
        with open(self.cache("index.json")) as f:
            self.assertEqual(json.load(f), {image: first["digest"]})

        tj = self.run_job("img-train-again", image)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        again = self.attempt_status("img-train-again")["image"]
        self.assertEqual(again, {**first, "copied": False, "unpacked": False})
        self.assertEqual(os.stat(rootfs).st_ino, inode)
        self.assertEqual(os.stat(self.cache("index.json")).st_mtime_ns, index_mtime)
        self.assertEqual(os.listdir(self.cache("rootfs")), [first["digest"]])
        self.assertEqual(os.listdir(self.cache("tmp")), [])

    def test_entrypoint_runs_with_train_or_with_the_container_arguments(self):
        layout = os.path.join(self.images, "entry")
        tiny_image.build(layout, "v1", files={"entry.sh": (ENTRY, 0o755)},
                         entrypoint=["/bin/sh", "/entry.sh"], cmd=["ignored-by-sagemaker"])
        image = f"oci:{layout}:v1"
        tj = self.run_job("img-entry", image)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual(self.model_files("img-entry")["args.txt"], "train\n")
        spec = self.payload("img-args", image)
        spec["AlgorithmSpecification"]["ContainerArguments"] = ["alpha", "beta"]
        self.sm.create_training_job(**spec)
        tj = self.wait_training("img-args", timeout=90)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual(self.model_files("img-args")["args.txt"], "alpha beta\n")
        # ContainerEntrypoint replaces the image's Entrypoint (resolved in the image).
        spec = self.payload("img-override", image)
        spec["AlgorithmSpecification"]["ContainerEntrypoint"] = ["/bin/sh", "-c", "echo override > /opt/ml/model/args.txt"]
        self.sm.create_training_job(**spec)
        tj = self.wait_training("img-override", timeout=90)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual(self.model_files("img-override")["args.txt"], "override\n")

    def test_a_missing_image_fails_with_cannot_pull_and_nothing_else(self):
        missing = os.path.join(self.images, "nowhere")
        tj = self.run_job("img-missing", f"oci:{missing}:v1")
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertIn("CannotPullContainerError", tj["FailureReason"])
        self.assertIn(missing, tj["FailureReason"])
        out = self.bucket_path("trainyard-test", "output/img-missing")
        self.assertFalse(os.path.exists(out))
        self.assertEqual(os.listdir(self.cache("rootfs")), [])
        self.assertFalse(os.path.exists(self.cache("index.json")))
        # A reference no transport accepts fails the same way, naming the rule.
        tj = self.run_job("img-bad-ref", "dir:/srv/image")
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertIn("CannotPullContainerError", tj["FailureReason"])
        self.assertIn("transport 'dir:' is not supported", tj["FailureReason"])

    def test_an_image_path_outside_the_image_directories_is_refused_whether_it_exists_or_not(self):
        # skopeo reads a path reference as the server's user: outside executor.image_dirs, the
        # refusal comes at create and reads the same for a file that exists and one that does not.
        answers = {}
        for path in ("/etc/passwd", "/etc/no-such-file-here"):
            with self.assertRaises(ClientError) as e:
                self.sm.create_training_job(**self.payload("img-probe", f"oci-archive:{path}"))
            err = e.exception.response["Error"]
            self.assertEqual(err["Code"], "ValidationException")
            self.assertIn("AlgorithmSpecification.TrainingImage", err["Message"])
            self.assertIn(f"executor.image_dirs: {self.work_dir}", err["Message"])
            answers[path] = err["Message"].replace(path, "PATH")
        self.assertEqual(answers["/etc/passwd"], answers["/etc/no-such-file-here"])
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])
        # A Batch container job's image: refused at SubmitJob the same way.
        self.batch.create_compute_environment(computeEnvironmentName="ce", type="UNMANAGED", unmanagedvCpus=2)
        self.batch.create_job_queue(jobQueueName="jq", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        self.batch.register_job_definition(jobDefinitionName="probe", type="container", containerProperties={
            "image": "oci:/etc:v1", "command": ["true"],
            "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "256"}]})
        with self.assertRaises(ClientError) as e:
            self.batch.submit_job(jobName="j", jobQueue="jq", jobDefinition="probe")
        self.assertEqual(e.exception.response["Error"]["Code"], "ClientException")
        self.assertIn("executor.image_dirs", e.exception.response["Error"]["Message"])
        for status in ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED", "FAILED"):
            self.assertEqual(self.batch.list_jobs(jobQueue="jq", jobStatus=status)["jobSummaryList"], [], status)

    def test_an_images_setuid_files_lose_the_bit_and_the_cache_is_private(self):
        layout = os.path.join(self.images, "setuid")
        tiny_image.build(layout, "v1", files={"usr/local/bin/train": ("#!/bin/sh\ntrue\n", 0o755),
                                              "usr/bin/rootshell": ("#!/bin/sh\nid\n", 0o4755),
                                              "usr/bin/groupshell": ("#!/bin/sh\nid\n", 0o2755)})
        tj = self.run_job("img-setuid", f"oci:{layout}:v1")
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        rootfs = self.cache("rootfs", self.attempt_status("img-setuid")["image"]["digest"])
        for name in ("rootshell", "groupshell"):
            mode = os.lstat(os.path.join(rootfs, "usr/bin", name)).st_mode
            self.assertEqual(stat.S_IMODE(mode), 0o755, name)
        self.assertEqual(stat.S_IMODE(os.stat(self.cache()).st_mode), 0o700)

    def test_a_host_software_image_without_an_entry_point_is_refused_at_the_edge(self):
        with self.assertRaises(Exception) as e:
            self.sm.create_training_job(**self.payload("img-host", "local/python3"))
        self.assertIn("ContainerEntrypoint", str(e.exception))
        self.assertIn("executor.host_images", str(e.exception))

    def test_a_hostile_layer_writes_nothing_outside_the_root(self):
        outside = tempfile.mkdtemp(prefix="trainyard-outside-", dir=self.work_dir)
        layout = os.path.join(self.images, "hostile")
        tiny_image.build(layout, "v1", files={"usr/local/bin/train": ("#!/bin/sh\ntrue\n", 0o755)}, raw_entries=[
            ("../../../escape-dotdot", tarfile.REGTYPE, b"dotdot", ""),
            ("abs", tarfile.SYMTYPE, None, outside),
            ("abs/pwned", tarfile.REGTYPE, b"through an absolute link", ""),
            ("rel", tarfile.SYMTYPE, None, "../../../../../../../.." + outside),
            ("rel/pwned-too", tarfile.REGTYPE, b"through a relative link", ""),
        ])
        tj = self.run_job("img-hostile", f"oci:{layout}:v1")
        # umoci applies the layer confined to the root: the entries land inside it, never outside.
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        rootfs = self.cache("rootfs", self.attempt_status("img-hostile")["image"]["digest"])
        self.assertTrue(os.path.isfile(os.path.join(rootfs, "escape-dotdot")))
        self.assertTrue(os.path.isfile(os.path.join(rootfs, outside.lstrip("/"), "pwned")))
        self.assertTrue(os.path.isfile(os.path.join(rootfs, outside.lstrip("/"), "pwned-too")))
        self.assertEqual(os.listdir(outside), [])
        for root, _dirs, files in os.walk(self.data_dir):
            self.assertNotIn("escape-dotdot", [f for f in files if not root.startswith(self.cache("rootfs"))], root)
        for root, _dirs, files in os.walk(self.work_dir):
            self.assertNotIn("escape-dotdot", files, root)


    def test_a_batch_container_job_runs_its_images_cmd_or_the_command_in_its_place(self):
        # The Cmd checks the image's Env and WorkingDir and exits 7; a submitted command replaces
        # the Cmd and keeps the Entrypoint. The exit code each attempt records tells which ran.
        layout = os.path.join(self.images, "batch")
        tiny_image.build(layout, "v1", entrypoint=["/bin/sh", "-c"],
                         cmd=['test "$GREETING" = from-image && test "$(pwd)" = /work && exit 7'],
                         env=["GREETING=from-image"], working_dir="/work")
        self.batch.create_compute_environment(computeEnvironmentName="ce", type="UNMANAGED", unmanagedvCpus=2)
        self.batch.create_job_queue(jobQueueName="jq", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        self.batch.register_job_definition(jobDefinitionName="img", type="container", containerProperties={
            "image": f"oci:{layout}:v1",
            "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "256"}]})

        def run(**kw):
            job_id = self.batch.submit_job(jobName="j", jobQueue="jq", jobDefinition="img", **kw)["jobId"]
            deadline = time.time() + 90
            while True:
                [j] = self.batch.describe_jobs(jobs=[job_id])["jobs"]
                if j["status"] in ("SUCCEEDED", "FAILED"):
                    return j
                self.assertLess(time.time(), deadline, j["status"])
                time.sleep(0.05)

        own = run()
        self.assertEqual(own["status"], "FAILED")
        self.assertEqual(own["attempts"][-1]["container"]["exitCode"], 7, own)
        replaced = run(containerOverrides={"command": ["exit 5"]})
        self.assertEqual(replaced["attempts"][-1]["container"]["exitCode"], 5, replaced)
        passed = run(containerOverrides={"command": ['test ! -e /etc/passwd']})
        self.assertEqual(passed["status"], "SUCCEEDED", passed)  # the host's root is not visible


class ImageFallbackTest(ImageTest):
    """executor.image_fallback_to_host: an image that cannot be copied runs with the host's software."""
    server_config = '[executor]\nsandbox = "bwrap"\nimage_fallback_to_host = true\n'

    def test_an_image_that_cannot_be_copied_runs_on_the_host(self):
        spec = self.payload("img-fallback", f"oci:{self.images}/nowhere:v1")
        spec["AlgorithmSpecification"]["ContainerEntrypoint"] = [
            "/bin/sh", "-c", "test -e /usr/bin/python3 && echo host > /opt/ml/model/where.txt"]
        self.sm.create_training_job(**spec)
        tj = self.wait_training("img-fallback", timeout=90)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        self.assertEqual(self.model_files("img-fallback")["where.txt"], "host\n")
        self.assertNotIn("image", self.attempt_status("img-fallback"))

    # The base class's tests run once, under the default settings.
    test_a_training_image_runs_its_train_and_a_cached_one_is_not_unpacked_again = None
    test_entrypoint_runs_with_train_or_with_the_container_arguments = None
    test_a_missing_image_fails_with_cannot_pull_and_nothing_else = None
    test_a_host_software_image_without_an_entry_point_is_refused_at_the_edge = None
    test_a_hostile_layer_writes_nothing_outside_the_root = None


if __name__ == "__main__":
    unittest.main()
