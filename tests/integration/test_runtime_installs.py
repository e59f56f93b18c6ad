"""Installing Python packages at run time in a host-software job (docs/user-guide.md, "Runtime
installs"): `pip install --user` and a plain `pip install` work in the sandbox on Debian's Python
(which refuses installs outside a virtual environment, PEP 668), the host's Python stays
untouched, and with a warm pool what was installed is there for the next job on the pool."""
import base64
import glob
import hashlib
import io
import json
import os
import subprocess
import unittest
import zipfile

from harness import ServerTest

PACKAGE = "trainyard_tiny_pkg"


def tiny_wheel():
    """A minimal wheel (a zip with the module and its dist-info), built without any tool."""
    name = f"{PACKAGE}-1.0"
    files = {f"{PACKAGE}.py": b"VALUE = 42\n",
             f"{name}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 1.0\n".encode(),
             f"{name}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: trainyard-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    record += f"{name}.dist-info/RECORD,,\n"
    files[f"{name}.dist-info/RECORD"] = record.encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return buf.getvalue()


# Installs the wheel from its code directory as asked (--user, plain, or not at all), then imports
# it in a fresh interpreter and reports.
INSTALL = r'''
import json, os, subprocess, sys
out = sys.argv[sys.argv.index("--out") + 1]
mode = sys.argv[sys.argv.index("--mode") + 1]
here = os.path.dirname(os.path.abspath(__file__))
wheel = [f for f in os.listdir(here) if f.endswith(".whl")][0]
report = {"mode": mode}
if mode != "none":
    args = [sys.executable, "-m", "pip", "install", "--no-index", "--disable-pip-version-check"]
    if mode == "user":
        args.append("--user")
    p = subprocess.run(args + [os.path.join(here, wheel)], capture_output=True, text=True)
    report["install"] = [p.returncode, p.stdout[-2000:], p.stderr[-2000:]]
p = subprocess.run([sys.executable, "-c", "import trainyard_tiny_pkg as m; print(m.VALUE, m.__file__)"],
                   capture_output=True, text=True)
report["import"] = [p.returncode, p.stdout.strip(), p.stderr[-1000:]]
with open(os.path.join(out, os.environ["TRAINING_JOB_NAME"] + ".json"), "w") as f:
    json.dump(report, f)
'''

DEBIAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


class RuntimeInstallTest(ServerTest):
    def setUp(self):
        super().setUp()
        self.out = os.path.join(self.work_dir, "reports")
        os.makedirs(self.out)
        os.chmod(self.out, 0o1777)

    def run_job(self, name, mode, keep=0):
        p = self.code_job(name, {"train.py": INSTALL, f"{PACKAGE}-1.0-py3-none-any.whl": None})
        p["HyperParameters"].update({"out": self.out, "mode": mode})
        p["Environment"] = {"PATH": DEBIAN_PATH}
        if keep:
            p["ResourceConfig"]["KeepAlivePeriodInSeconds"] = keep
        self.sm.create_training_job(**p)
        tj = self.wait_training(name, timeout=120)
        self.assertEqual(tj["TrainingJobStatus"], "Completed", tj.get("FailureReason"))
        with open(os.path.join(self.out, name + ".json")) as f:
            return json.load(f)

    def code_job(self, name, files, **extra):
        # The wheel is binary: write it beside the program after the harness packs the text files.
        wheel_name = next(k for k, v in files.items() if v is None)
        texts = {k: v for k, v in files.items() if v is not None}
        p = super().code_job(name, texts, **extra)
        tarball = self.bucket_path("trainyard-test", f"code/{name}.tar.gz")
        src = os.path.join(self.work_dir, f"src-{name}")
        os.makedirs(src)
        subprocess.check_call(["tar", "-xzf", tarball, "-C", src])
        with open(os.path.join(src, wheel_name), "wb") as f:
            f.write(tiny_wheel())
        subprocess.check_call(["tar", "-czf", tarball, "-C", src, "."])
        return p

    def assert_host_untouched(self):
        host = subprocess.run(["/usr/bin/python3", "-c", f"import {PACKAGE}"], capture_output=True)
        self.assertNotEqual(host.returncode, 0, "the package reached the host's Python")
        self.assertEqual(glob.glob(f"/usr/local/lib/python3*/dist-packages/{PACKAGE}*"), [])
        self.assertEqual(glob.glob(os.path.expanduser(f"~/.local/lib/python3*/site-packages/{PACKAGE}*")), [])

    def test_pip_install_user_and_plain_work_in_the_sandbox(self):
        for mode in ("user", "plain"):
            r = self.run_job(f"pip-{mode}", mode)
            self.assertEqual(r["install"][0], 0, r["install"])
            self.assertEqual(r["import"][0], 0, r["import"])
            self.assertTrue(r["import"][1].startswith("42 "), r["import"])
        self.assert_host_untouched()
        # Nothing carried over to another job without a warm pool.
        r = self.run_job("pip-none", "none")
        self.assertNotEqual(r["import"][0], 0, r["import"])

    def test_a_warm_pool_keeps_what_was_installed_for_the_next_job(self):
        first = self.run_job("wp-install", "user", keep=600)
        self.assertEqual(first["install"][0], 0, first["install"])
        self.assertIn("/sagemaker/warmpoolcache/", first["import"][1])
        second = self.run_job("wp-reuse", "none", keep=600)
        tj = self.sm.describe_training_job(TrainingJobName="wp-install")
        self.assertEqual(tj["WarmPoolStatus"]["Status"], "Reused")
        self.assertEqual(second["import"][0], 0, second["import"])
        self.assertTrue(second["import"][1].startswith("42 "), second["import"])
        self.assert_host_untouched()


if __name__ == "__main__":
    unittest.main()
