"""The training-side driver of a ModelTrainer job, shipped in the job's sm_drivers channel.

Reads sourcecode.json and distributed.json beside it, then, in the code channel's directory:
installs `requirements` with pip, and runs `command` (with /bin/sh), or `entry_script` (.py with
this Python, .sh with /bin/sh) with the hyperparameters as --name value arguments, under torchrun
when distributed.json names Torchrun. The exit code is the job's; a failure with no
<opt_ml>/output/failure written by the script writes one naming what failed.

Standard library only: it runs with whatever Python the host has.
"""
import json
import os
import shlex
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OPT_ML = os.environ.get("TRAINYARD_OPT_ML") or "/opt/ml"


def log(msg):
    print(f"[driver] {msg}", flush=True)


def read_json(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return default


def fail(msg, code=1):
    path = os.path.join(OPT_ML, "output", "failure")
    try:
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(msg)
    except OSError:
        pass
    log(msg)
    sys.exit(code)


def code_dir(source):
    d = os.environ.get("SM_CHANNEL_CODE") or os.path.join(OPT_ML, "input", "data", "code")
    src = source.get("source_dir") or ""
    if src.endswith(".tar.gz"):
        archive = os.path.join(d, os.path.basename(src))
        out = tempfile.mkdtemp(prefix="code-")
        with tarfile.open(archive, "r:gz") as t:
            if hasattr(tarfile, "data_filter"):
                t.extractall(out, filter="data")
            else:
                for m in t.getmembers():
                    if m.name.startswith("/") or ".." in m.name.split("/") or not (m.isfile() or m.isdir()):
                        fail(f"the source archive {src} has an unsafe entry {m.name!r}")
                t.extractall(out)
        return out
    return d


def in_venv():
    return sys.prefix != getattr(sys, "base_prefix", sys.prefix)


def install_requirements(req):
    """pip install -r req. Outside a virtual environment, what is missing goes to a user site of
    the job's own (PYTHONUSERBASE, kept for the entry script): the host's site-packages are
    read-only to a job and may be marked externally managed; what is present is used as it is."""
    if not os.path.isfile(req):
        fail(f"requirements file {req} is not in the source directory")
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-r", req]
    if not in_venv():
        os.environ.setdefault("PYTHONUSERBASE", tempfile.mkdtemp(prefix="pyuser-"))
        os.environ["PIP_BREAK_SYSTEM_PACKAGES"] = "1"
        cmd.insert(4, "--user")
    log("installing requirements: " + " ".join(shlex.quote(c) for c in cmd))
    rc = subprocess.call(cmd)
    if rc != 0:
        fail(f"pip install -r {req} failed with exit code {rc}", rc)


def hyperparameter_args():
    hps = read_json(os.path.join(OPT_ML, "input", "config", "hyperparameters.json"), {})
    args = []
    for k, v in hps.items():
        args += [f"--{k}", v if isinstance(v, str) else json.dumps(v)]
    return args


def torchrun_prefix(dist):
    resource = read_json(os.path.join(OPT_ML, "input", "config", "resourceconfig.json"), {})
    hosts = resource.get("hosts") or json.loads(os.environ.get("SM_HOSTS", '["algo-1"]'))
    current = resource.get("current_host") or os.environ.get("SM_CURRENT_HOST", "algo-1")
    nproc = dist.get("process_count_per_node") or max(1, int(os.environ.get("SM_NUM_GPUS", "0") or 0))
    return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={len(hosts)}",
            f"--nproc_per_node={nproc}", f"--node_rank={sorted(hosts).index(current)}",
            f"--master_addr={sorted(hosts)[0]}", "--master_port=7777"]


def main():
    source = read_json(os.path.join(HERE, "sourcecode.json"), {})
    dist = read_json(os.path.join(HERE, "distributed.json"), {})
    os.chdir(code_dir(source))
    log(f"working directory {os.getcwd()}")
    if source.get("requirements"):
        install_requirements(source["requirements"])

    command = source.get("command")
    entry = source.get("entry_script")
    if command:
        cmd = ["/bin/sh", "-c", command]
    elif entry and dist.get("type") == "Torchrun":
        cmd = torchrun_prefix(dist) + [entry] + hyperparameter_args()
    elif entry and entry.endswith(".py"):
        cmd = [sys.executable, entry] + hyperparameter_args()
    elif entry and entry.endswith(".sh"):
        cmd = ["/bin/sh", entry] + hyperparameter_args()
    else:
        fail(f"nothing to run: entry_script {entry!r} is neither .py nor .sh and no command is given")
    log("running: " + " ".join(shlex.quote(c) for c in cmd))
    rc = subprocess.call(cmd)
    if rc != 0:
        fail(f"{' '.join(cmd[:3])} ... exited with code {rc}", rc if 0 < rc < 256 else 1)
    log("training completed")


if __name__ == "__main__":
    main()
