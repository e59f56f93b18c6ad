"""The package installs as Python packages do: `pip install` of the python/ directory gives an
importable `trainyard` with its driver scripts (package data) and boto3 as its only dependency.

pip builds the wheel with setuptools. Offline (as in these tests) the build needs setuptools and
wheel already installed in the interpreter that runs pip (--no-build-isolation); the test uses the
first interpreter that has both: the one running the tests, else the system's /usr/bin/python3.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)


def _builder():
    for python in (sys.executable, "/usr/bin/python3"):
        if not python or not os.path.exists(python):
            continue
        probe = subprocess.run([python, "-c", "import setuptools, wheel, pip"], capture_output=True)
        if probe.returncode == 0:
            return python
    return None


class PackagingTest(unittest.TestCase):
    def test_pip_install_gives_the_package_with_its_drivers(self):
        python = _builder()
        if python is None:
            self.skipTest("no interpreter here has pip, setuptools and wheel to build the package offline")
        target = tempfile.mkdtemp(prefix="trainyard-pip-")
        build = tempfile.mkdtemp(prefix="trainyard-pip-src-")
        try:
            # A copy: building writes build/ and *.egg-info beside the sources.
            src = os.path.join(build, "python")
            shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
            r = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                                "--disable-pip-version-check", "--target", target, src],
                               capture_output=True, text=True, timeout=240)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            drivers = os.path.join(target, "trainyard", "train", "container_drivers")
            self.assertTrue(os.path.isfile(os.path.join(drivers, "sm_train.sh")), os.listdir(target))
            self.assertTrue(os.path.isfile(os.path.join(drivers, "trainyard_driver.py")))
            meta = [d for d in os.listdir(target) if d.startswith("trainyard-") and d.endswith(".dist-info")]
            self.assertEqual(len(meta), 1, os.listdir(target))
            with open(os.path.join(target, meta[0], "METADATA")) as f:
                requires = [line.split(":", 1)[1].strip() for line in f if line.startswith("Requires-Dist:")]
            self.assertEqual(requires, ["boto3"])
            # The installed copy imports on its own, with the SageMaker SDK's names.
            code = ("import trainyard, trainyard.train, trainyard.aws_batch, trainyard.train.configs as c;"
                    "print(trainyard.__file__);"
                    "assert all(hasattr(c, n) for n in ('SourceCode','Compute','InputData','OutputDataConfig',"
                    "'StoppingCondition','Torchrun'));"
                    "assert hasattr(trainyard.train, 'ModelTrainer') and hasattr(trainyard.aws_batch, 'TrainingQueue')")
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env=dict(os.environ, PYTHONPATH=target), cwd=target)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.strip().startswith(target), r.stdout)
        finally:
            shutil.rmtree(target, ignore_errors=True)
            shutil.rmtree(build, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
