"""The start path's promises that are counts, not timings: a running instance adds nothing to the
host's mount table; a supervisor killed with SIGKILL leaves no mount and no loop device once the
server has noticed; a storage volume larger than the free disk (above the data dir's reserve)
waits with a capacity reason and disturbs no running job; a volume image reused from the pool
holds nothing of the job that used it before.

The server runs as root with the default sandbox (bubblewrap), so each instance gets its cgroup
and its loop-mounted volume of VolumeSizeInGB.
"""
import glob
import json
import os
import shutil
import signal
import time
import unittest

from botocore.exceptions import ClientError

from harness import ServerTest

CONFIG = """[executor]
sandbox = "bwrap"
stop_grace_seconds = 2

[[instance_types]]
name = "ml.m5.large"
count = 2
vcpus = 1
memory_mib = 256
"""


def setUpModule():
    if os.geteuid() != 0:
        raise unittest.SkipTest("storage volumes need the server to run as root")
    if shutil.which("bwrap") is None or not os.access("/dev/loop-control", os.W_OK):
        raise unittest.SkipTest("needs bubblewrap and loop devices")


def host_mounts():
    """The mount points of the host's mount namespace (this test runs in it)."""
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f]


def loop_backing_files():
    """The backing file of every attached loop device."""
    files = []
    for path in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(path) as f:
                files.append(f.read().strip())
        except OSError:
            pass  # detached meanwhile
    return files


def pooled_images(data_dir):
    """The volume images waiting for reuse in the data dir's pool."""
    return glob.glob(os.path.join(data_dir, "run", "volume-pool", "*", "*", "*.img"))


def marker_count(path, marker):
    """How many times `marker` is in the file (read whole: a wiped image is unwritten extents)."""
    count, tail = 0, b""
    with open(path, "rb") as f:
        while chunk := f.read(16 << 20):
            count += (tail + chunk).count(marker)
            tail = chunk[-(len(marker) - 1):]
    return count


class StartPathTest(ServerTest):
    server_config = CONFIG

    def hold(self, name, **extra):
        """Starts a job that runs until its gate file appears; returns the gate."""
        gate = os.path.join(self.work_dir, "release-" + name)
        self.sm.create_training_job(**self.command_payload(
            name, f"while [ ! -e {gate} ]; do sleep 0.05; done", **extra))
        return gate

    def attempt_dir(self, name):
        return os.path.join(self.data_dir, "attempts", name)

    def test_a_running_instance_adds_nothing_to_the_host_mount_table(self):
        before = host_mounts()
        gate = self.hold("holder")
        try:
            self.wait_secondary("holder", "Training", timeout=60)
            with open(os.path.join(self.attempt_dir("holder"), "supervisor.log")) as f:
                self.assertIn("storage volume of", f.read())  # the volume is there, in its own namespace
            during = host_mounts()
        finally:
            open(gate, "w").close()
        self.assertEqual(len(during), len(before), sorted(set(during) - set(before)))
        self.assertFalse([m for m in during if m.startswith(self.data_dir)])
        self.assertEqual(self.wait_training("holder", timeout=60)["TrainingJobStatus"], "Completed")

    def test_a_killed_supervisor_leaves_no_mount_and_no_loop_device(self):
        gate = self.hold("victim")
        self.wait_secondary("victim", "Training", timeout=60)
        attempt = self.attempt_dir("victim")
        with open(os.path.join(attempt, "status.json")) as f:
            supervisor = json.load(f)["supervisor_pid"]
        self.assertEqual(len([b for b in loop_backing_files() if b.startswith(attempt)]), 1)
        os.kill(supervisor, signal.SIGKILL)
        try:
            tj = self.wait_training("victim", timeout=60)
        finally:
            open(gate, "w").close()
        self.assertEqual(tj["TrainingJobStatus"], "Failed")
        self.assertIn("supervisor exited without recording an outcome", tj["FailureReason"])
        # The server noticed: it ended the instance, so the namespace that held the volume went.
        # The kernel detaches the loop device when its last mount goes (autoclear), which it
        # finishes on its own work queue: a moment after the instance's last process ends.
        deadline = time.time() + 10
        while [b for b in loop_backing_files() if b.startswith(attempt)] and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual([b for b in loop_backing_files() if b.startswith(attempt)], [])
        self.assertFalse([m for m in host_mounts() if m.startswith(attempt)])

    def test_a_pooled_volume_image_holds_nothing_of_the_job_that_used_it(self):
        # The first job writes a marker onto its volume; its image, still in its attempt dir while
        # it runs, holds it. Once the job ends the image waits in the pool, wiped: not one copy of
        # the marker is left in it, and the next job's volume is that image, with a fresh file system.
        marker = b"trainyard-pool-marker-" + os.urandom(8).hex().encode()
        gate = os.path.join(self.work_dir, "release-first")
        self.sm.create_training_job(**self.command_payload(
            "first", f"for i in $(seq 4096); do echo {marker.decode()}; done > /tmp/secret && sync && "
                     f"while [ ! -e {gate} ]; do sleep 0.05; done"))
        self.wait_secondary("first", "Training", timeout=60)
        image = os.path.join(self.attempt_dir("first"), "volumes", "algo-1.img")
        deadline = time.time() + 30
        while marker_count(image, marker) == 0 and time.time() < deadline:
            time.sleep(0.1)  # the job's write reaches the image when it syncs
        self.assertGreater(marker_count(image, marker), 0)
        open(gate, "w").close()
        self.assertEqual(self.wait_training("first", timeout=60)["TrainingJobStatus"], "Completed")
        deadline = time.time() + 30
        while not pooled_images(self.data_dir) and time.time() < deadline:
            time.sleep(0.05)  # the supervisor wipes and pools the image after recording the outcome
        [pooled] = pooled_images(self.data_dir)
        self.assertEqual(os.path.getsize(pooled), 1 << 30)
        self.assertEqual(marker_count(pooled, marker), 0)
        self.assertFalse(os.path.exists(image))
        self.sm.create_training_job(**self.command_payload(
            "second", "test ! -e /tmp/secret"))
        self.assertEqual(self.wait_training("second", timeout=60)["TrainingJobStatus"], "Completed")
        with open(os.path.join(self.attempt_dir("second"), "supervisor.log")) as f:
            self.assertIn("a wiped image from the pool", f.read())

    def test_volumes_that_could_never_fit_are_refused_at_create(self):
        # Larger than the whole file system: no amount of waiting would make room.
        disk_gb = shutil.disk_usage(self.data_dir).total >> 30
        for count, gb in ((1, disk_gb + 1), (2, disk_gb // 2 + 1)):
            p = self.command_payload(f"huge-{count}", "true", ResourceConfig={
                "InstanceType": "ml.m5.large", "InstanceCount": count, "VolumeSizeInGB": gb})
            with self.assertRaises(ClientError) as e:
                self.sm.create_training_job(**p)
            error = e.exception.response["Error"]
            self.assertEqual(error["Code"], "ValidationException")
            self.assertIn("ResourceConfig.VolumeSizeInGB", error["Message"])
            self.assertIn("can never fit", error["Message"])
        self.assertEqual(self.sm.list_training_jobs()["TrainingJobSummaries"], [])
        # One that fits an empty disk is taken (and waits, if it must, as below).
        self.sm.create_training_job(**self.command_payload("fits", "true", ResourceConfig={
            "InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1}))
        self.assertEqual(self.wait_training("fits", timeout=60)["TrainingJobStatus"], "Completed")

    def test_a_volume_larger_than_the_free_disk_waits_and_no_running_job_is_disturbed(self):
        # The reserve is set so that 30 GiB is free above it: a running job's 14 GiB volume fits,
        # and then a 24 GiB volume does not, until that job has ended. Each way the margin is
        # 6 GiB or more, against the rest of the machine (other tests run beside this one)
        # freeing or taking space meanwhile. Allocating is instant (fallocate) and nothing is
        # written into the volumes.
        free = shutil.disk_usage(self.data_dir).free
        if free < 40 << 30:
            self.skipTest("needs 40 GiB free in the data dir's file system")
        self.server.stop()
        reserve_mib = (free >> 20) - 30 * 1024
        self.server = self.new_server(config=CONFIG + f"\n[server]\ndata_dir_reserve_mib = {reserve_mib}\n")
        self.batch, self.sm = self.server.client("batch"), self.server.client("sagemaker")
        queue = self.create_queue("q", capacity=2)
        gate = self.hold("small", ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1,
                                                  "VolumeSizeInGB": 14})
        self.wait_secondary("small", "Training", timeout=60)
        big = self.submit(queue, self.command_payload("big", "echo ran", ResourceConfig={
            "InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 24}))
        deadline = time.time() + 60
        while True:
            job = self.describe_raw(big)
            if job["status"] == "RUNNABLE" and job.get("attempts"):
                break
            if time.time() > deadline:
                with open(os.path.join(self.attempt_dir("big"), "supervisor.log")) as f:
                    self.fail(f"the big job did not come back to wait: {job}\n{f.read()}")
            time.sleep(0.1)
        self.assertIn("capacity", job["statusReason"].lower())
        first = self.sm.describe_training_job(TrainingJobName="big")
        self.assertIn("CapacityError", first["FailureReason"])
        self.assertIn("does not fit", first["FailureReason"])
        self.assertIn("data_dir_reserve_mib", first["FailureReason"])
        # The running job was not touched: still training, with its volume.
        small = self.sm.describe_training_job(TrainingJobName="small")
        self.assertEqual((small["TrainingJobStatus"], small["SecondaryStatus"]), ("InProgress", "Training"))
        open(gate, "w").close()
        self.assertEqual(self.wait_training("small", timeout=60)["TrainingJobStatus"], "Completed")
        # Its space back, the big job runs (after its capacity backoff) and succeeds.
        [done] = self.wait_jobs([big], timeout=120)
        self.assertEqual(done["status"], "SUCCEEDED", done)


if __name__ == "__main__":
    unittest.main()
