"""A private Slurm cluster on this machine, for tests and the bench (docs/slurm.md, "The test cluster").

    with SlurmCluster(nodes=4) as cluster:
        subprocess.run(["sbatch", "--wrap", "hostname"], env=cluster.env)

One slurmctld and one slurmd per node (`slurmd -N nK`, Debian's Slurm is built with
MULTIPLE_SLURMD), with its own munged (own key, own socket), all in one temporary directory.
Every listener is on loopback at a port that was free when the cluster started, so two clusters
can run at once (`ctest -j2`). Node nK's NodeAddr is 127.0.200.K: instances on different nodes
have different addresses. GPUs are GRES declared by count; nothing binds or confines them
(proctrack/linuxproc, task/none, no cgroups).

stop() ends exactly what start() started: the daemons it spawned, then any slurmstepd still
holding a socket in this cluster's spool directory and the job processes under them (found by
their open files and their environment, never by name). It runs from the context manager, from
the test's cleanup and, as a last resort, at interpreter exit.
"""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

SBIN = "/usr/sbin"
NODE_NET = "127.0.200."  # node K listens on 127.0.200.K; 127.0.1.x belongs to the local executor

# The scheduler reacts to each submission instead of waiting for its 1 s background tick:
# batch_sched_delay=0 lets a batch job start in the pass its submission triggers, and
# sched_min_interval=0 lets those passes run back to back (docs/slurm.md, "The test cluster").
SCHEDULER_PARAMETERS = ("batch_sched_delay=0,sched_min_interval=0,default_queue_depth=1000,"
                        "partition_job_depth=1000,bf_interval=30,bf_continue,max_rpc_cnt=150")


def _free_port(addr):
    """A TCP port nothing listens on at addr now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _processes():
    """{pid: ppid} of every process now."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                out[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return out


def _descendants(roots, parents):
    found, frontier = set(), set(roots)
    while frontier:
        found |= frontier
        frontier = {p for p, pp in parents.items() if pp in frontier} - found
    return found


class SlurmError(RuntimeError):
    pass


class SlurmCluster:
    def __init__(self, nodes=4, cpus_per_node=4, gpus_per_node=2, memory_mib=8192,
                 slurmd_timeout=5, message_timeout=2, min_job_age=120, partition="main", features=None,
                 bin_dir=None, base_dir=None, debug="error"):
        """nodes n1..nN, each with cpus_per_node CPUs, gpus_per_node GPUs (GRES gpu:N, by count)
        and memory_mib MiB of memory (scheduled: CR_CPU_Memory). slurmd_timeout: seconds after
        which a node whose slurmd does not answer is marked DOWN. message_timeout: how long one
        message may take (Slurm retries a refused connection until then, so a dead slurmd is
        found out only after it: DOWN comes about slurmd_timeout + 2 x message_timeout after). min_job_age: seconds a finished
        job stays visible to squeue and scontrol. features: {node name: "a,b"} node features
        (for --constraint). bin_dir: where sbatch, squeue, ... are (default: beside sbatch on
        PATH). base_dir: the parent of the cluster's temporary directory (default: the system's)."""
        if nodes < 1 or nodes > 250:
            raise ValueError("nodes must be 1..250 (one loopback address 127.0.200.K each)")
        self.nodes = [f"n{k}" for k in range(1, nodes + 1)]
        self.addresses = {n: NODE_NET + n[1:] for n in self.nodes}
        self.cpus_per_node = cpus_per_node
        self.gpus_per_node = gpus_per_node
        self.memory_mib = memory_mib
        self.slurmd_timeout = slurmd_timeout
        self.message_timeout = message_timeout
        self.min_job_age = min_job_age
        self.partition = partition
        self.features = dict(features or {})
        sbatch = shutil.which("sbatch")
        self.bin_dir = bin_dir or (os.path.dirname(sbatch) if sbatch else "/usr/bin")
        self.base_dir = base_dir
        self.debug = debug
        self.dir = None
        self.procs = {}  # "slurmctld", "munged", node name -> Popen of what we started
        self.started = False
        self._atexit = None

    # ------------------------------------------------------------------ paths and environment
    def _p(self, *parts):
        return os.path.join(self.dir, *parts)

    @property
    def conf_path(self):
        return self._p("etc", "slurm.conf")

    @property
    def spool_dir(self):
        return self._p("spool")

    @property
    def log_dir(self):
        return self._p("log")

    @property
    def munge_socket(self):
        return self._p("munge", "munge.socket")

    @property
    def env(self):
        """The environment for Slurm's client commands against this cluster: the caller's,
        without any SLURM_* it inherited, with SLURM_CONF set and bin_dir first on PATH."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = self.conf_path
        env["PATH"] = self.bin_dir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
        return env

    def cmd(self, *args, timeout=30, check=True):
        """Runs a Slurm client command (sbatch, squeue, ...) against this cluster; its stdout."""
        r = subprocess.run([os.path.join(self.bin_dir, args[0]), *args[1:]], env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise SlurmError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    # ------------------------------------------------------------------ configuration
    def _write_config(self):
        host = socket.gethostname()
        lines = [
            "# Written by tests/integration/slurm_cluster.py for one private test cluster.",
            f"ClusterName=ty{self.ctld_port}",  # unique among the clusters running now
            f"SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            # slurmctld listens on 127.0.0.1 only. A slurmd binds its port on every address
            # (0.0.0.0): with NoInAddrAny it would bind the address the machine's own name resolves
            # to, never its NodeAddr 127.0.200.K, and slurmctld could not reach it. Every message
            # to it is munge-signed with this cluster's private key.
            "CommunicationParameters=NoCtldInAddrAny",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "CredType=cred/munge",
            f"StateSaveLocation={self._p('ctld')}",
            f"SlurmdSpoolDir={self.spool_dir}/%n",
            f"SlurmctldPidFile={self._p('run', 'slurmctld.pid')}",
            f"SlurmdPidFile={self._p('run', 'slurmd-%n.pid')}",
            f"SlurmctldLogFile={self._p('log', 'slurmctld.log')}",
            f"SlurmdLogFile={self._p('log', 'slurmd-%n.log')}",
            f"SlurmctldDebug={self.debug}",
            f"SlurmdDebug={self.debug}",
            # No cgroups on the test machines: track processes by parentage, bind nothing.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            "PriorityType=priority/basic",
            "MpiDefault=none",
            # The configured CPUs, memory and GPUs win over what this machine has.
            "SlurmdParameters=config_overrides",
            # A node whose slurmd comes back is usable again without an admin.
            "ReturnToService=2",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU_Memory" if self.memory_mib else "SelectTypeParameters=CR_CPU",
            "GresTypes=gpu",
            f"MinJobAge={self.min_job_age}",
            "MaxJobCount=100000",
            # A dead slurmd is noticed within seconds (node failure tests kill one).
            f"SlurmdTimeout={self.slurmd_timeout}",
            "SlurmctldTimeout=120",
            f"MessageTimeout={self.message_timeout}",
            f"TCPTimeout={min(self.message_timeout, 5)}",
            "KillWait=5",
            "InactiveLimit=0",
            "Waittime=0",
            "SchedulerType=sched/backfill",
            f"SchedulerParameters={SCHEDULER_PARAMETERS}",
        ]
        for n in self.nodes:
            feat = f" Feature={self.features[n]}" if self.features.get(n) else ""
            gres = f" Gres=gpu:{self.gpus_per_node}" if self.gpus_per_node else ""
            mem = f" RealMemory={self.memory_mib}" if self.memory_mib else ""
            lines.append(
                f"NodeName={n} NodeHostname={host} NodeAddr={self.addresses[n]} Port={self.node_ports[n]}"
                f" CPUs={self.cpus_per_node} Boards=1 SocketsPerBoard=1 CoresPerSocket={self.cpus_per_node}"
                f" ThreadsPerCore=1{mem}{gres}{feat} State=UNKNOWN")
        lines.append(f"PartitionName={self.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO")
        with open(self.conf_path, "w") as f:
            f.write("\n".join(lines) + "\n")
        # GPUs by count. slurmd's gpu plugin drops GPUs that name no device file, so each has a
        # placeholder: a plain empty file that nothing opens (task/none, no cgroup device rules).
        with open(self._p("etc", "gres.conf"), "w") as f:
            f.write("AutoDetect=off\n")
            if self.gpus_per_node:
                gdir = self._p("gpu")
                os.makedirs(gdir, exist_ok=True)
                for g in range(self.gpus_per_node):
                    open(os.path.join(gdir, f"gpu{g}"), "w").close()
                f.write(f"NodeName={','.join(self.nodes)} Name=gpu File={gdir}/gpu[0-{self.gpus_per_node - 1}]\n")
        # No cgroup.conf: the plugins above never read one.

    # ------------------------------------------------------------------ start
    def start(self, timeout=60):
        if self.started:
            return self
        for tool in ("slurmctld", "slurmd", "munged"):
            if not os.access(os.path.join(SBIN, tool), os.X_OK):
                raise SlurmError(f"{SBIN}/{tool} is missing: run scripts/install-deps")
        self.dir = tempfile.mkdtemp(prefix="ty-slurm-", dir=self.base_dir)
        # munged runs as the munge user and must reach its directory inside ours.
        os.chmod(self.dir, 0o755)
        for d in ("etc", "run", "log", "ctld", "spool", "munge"):
            os.mkdir(self._p(d))
        self.started = True
        self._atexit = atexit.register(self.stop)
        try:
            self.ctld_port = _free_port("127.0.0.1")
            self.node_ports = {n: _free_port(self.addresses[n]) for n in self.nodes}
            self._write_config()
            self._start_munged()
            self._start_slurmctld(timeout)
            for n in self.nodes:
                self._spawn_slurmd(n)
            self.wait_idle(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, key, args, log, **kw):
        out = open(self._p("log", log), "ab")
        # Its own session: a signal meant for the test (Ctrl-C) does not reach the daemons
        # before stop() can end them in order.
        self.procs[key] = subprocess.Popen(args, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                           env=self.env, start_new_session=True, **kw)
        out.close()
        return self.procs[key]

    def _start_munged(self):
        mdir = self._p("munge")
        key = os.path.join(mdir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        shutil.chown(key, "munge", "munge")
        shutil.chown(mdir, "munge", "munge")
        os.chmod(mdir, 0o711)
        # Started directly as the munge user (no runuser in between), so it is our own child
        # and stop() reaps it.
        self._spawn("munged", [os.path.join(SBIN, "munged"), "--foreground",
                               "--num-threads=4", f"--socket={self.munge_socket}", f"--key-file={key}",
                               f"--pid-file={os.path.join(mdir, 'munged.pid')}",
                               f"--log-file={os.path.join(mdir, 'munged.log')}",
                               f"--seed-file={os.path.join(mdir, 'munged.seed')}"], "munged.out",
                    user="munge", group="munge", extra_groups=[])
        self._wait(lambda: os.path.exists(self.munge_socket), 10, "munged to create its socket",
                   watch="munged", log=os.path.join(mdir, "munged.log"))

    def _start_slurmctld(self, timeout):
        # -i: ignore any state (there is none: a new directory); -D: stay our child.
        self._spawn("slurmctld", [os.path.join(SBIN, "slurmctld"), "-D", "-i", "-f", self.conf_path],
                    "slurmctld.out")

        def up():
            r = subprocess.run([os.path.join(self.bin_dir, "scontrol"), "ping"], env=self.env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=10)
            return "UP" in r.stdout
        self._wait(up, timeout, "slurmctld to answer", watch="slurmctld", log=self._p("log", "slurmctld.log"))

    def _spawn_slurmd(self, node):
        os.makedirs(os.path.join(self.spool_dir, node), exist_ok=True)
        self._spawn(node, [os.path.join(SBIN, "slurmd"), "-D", "-N", node, "-f", self.conf_path],
                    f"slurmd-{node}.out")

    def _wait(self, predicate, timeout, what, watch=None, log=None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if watch and self.procs[watch].poll() is not None:
                raise SlurmError(f"{watch} exited ({self.procs[watch].returncode}) while waiting for {what}; "
                                 f"{self._tail(log)}")
            time.sleep(0.05)
        raise SlurmError(f"timed out after {timeout}s waiting for {what}; {self._tail(log)}")

    def _tail(self, path, n=2000):
        if not path:
            return ""
        try:
            with open(path, "rb") as f:
                return path + ":\n" + f.read().decode(errors="replace")[-n:]
        except OSError:
            return f"{path}: absent"

    # ------------------------------------------------------------------ nodes
    def node_state(self, node):
        """Slurm's state of node, lower case, flags included ("idle", "down*", "mixed", "alloc", ...)."""
        return self.cmd("sinfo", "-h", "-N", "-n", node, "-o", "%T").strip().split("\n")[0]

    def node_states(self):
        out = {}
        for line in self.cmd("sinfo", "-h", "-N", "-o", "%N %T").splitlines():
            name, state = line.split()
            out[name] = state
        return out

    def wait_idle(self, nodes=None, timeout=60):
        """Waits until every node (or those named) is idle and no job of this cluster is left."""
        want = set(nodes or self.nodes)

        def idle():
            states = self.node_states()
            return all(states.get(n) == "idle" for n in want)
        self._wait(idle, timeout, f"nodes {sorted(want)} to be idle", log=self._p("log", "slurmctld.log"))

    def wait_state(self, node, predicate, timeout=60):
        """Waits until predicate(node_state(node)) holds; returns that state."""
        seen = []

        def check():
            seen[:] = [self.node_state(node)]
            return predicate(seen[0])
        self._wait(check, timeout, f"node {node} (last state {seen})")
        return seen[0]

    def kill_slurmd(self, node):
        """SIGKILL of node's slurmd, as a crashed machine: its job steps stay as they are."""
        p = self.procs.get(node)
        if p is None or p.poll() is not None:
            raise SlurmError(f"slurmd of {node} is not running")
        p.kill()
        p.wait()

    def restart_slurmd(self, node):
        """Starts node's slurmd again (after kill_slurmd); the node returns (ReturnToService=2)."""
        p = self.procs.get(node)
        if p is not None and p.poll() is None:
            raise SlurmError(f"slurmd of {node} is still running")
        self._spawn_slurmd(node)

    def node_of_address(self, addr):
        for n, a in self.addresses.items():
            if a == addr:
                return n
        return None

    # ------------------------------------------------------------------ stop
    def stop(self):
        """Ends everything this cluster started and removes its directory. Safe to call twice."""
        if not self.started:
            return
        self.started = False
        if self._atexit:
            atexit.unregister(self.stop)
            self._atexit = None
        ctld = self.procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            # Ask for every job to end so its slurmstepd ends in order; what is left is killed below.
            subprocess.run([os.path.join(self.bin_dir, "scancel"), "--quiet", "--full", "--user=root"],
                           env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=15)
        # All slurmd at once (each takes a moment to exit), then the controller, then munged.
        self._end([self.procs.get(n) for n in self.nodes], grace=5)
        self._end([self.procs.get("slurmctld")], grace=5)
        self._end([self.procs.get("munged")], grace=3)
        self._end_leftovers()
        shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def _end(procs, grace):
        """SIGTERM to each of procs still running, SIGKILL to those alive after grace seconds."""
        procs = [p for p in procs if p is not None and p.poll() is None]
        for p in procs:
            p.terminate()
        deadline = time.monotonic() + grace
        for p in procs:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def leftovers(self):
        """Processes of this cluster still alive: slurmstepd holding a file under its directory,
        their descendants, and job processes whose environment names its slurm.conf."""
        me = os.getpid()
        parents = _processes()
        mine = set()
        prefix = self.dir + "/"
        marker = ("SLURM_CONF=" + self.conf_path).encode()
        for pid in parents:
            if pid == me:
                continue
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    try:
                        if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix):
                            mine.add(pid)
                            break
                    except OSError:
                        pass
            except OSError:
                continue
            if pid in mine:
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
                if marker in env and any(e.startswith(b"SLURM_JOB_ID=") for e in env):
                    mine.add(pid)
            except OSError:
                pass
        # Our own daemons are ended by _end(); here only what they left behind.
        ours = {p.pid for p in self.procs.values()}
        found = _descendants(mine, parents) - {me} - ours
        return sorted(p for p in found if _alive(p))

    def _end_leftovers(self):
        left = self.leftovers()
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(p) for p in left):
            time.sleep(0.05)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


if __name__ == "__main__":
    # A manual check: start a cluster, show it, stop it.
    import sys
    if "--help" in sys.argv or "-h" in sys.argv:
        print("usage: python3 tests/integration/slurm_cluster.py [NODES]\n"
              "Starts a private Slurm test cluster, prints sinfo and its SLURM_CONF, waits for Enter, stops it.")
        sys.exit(0)
    with SlurmCluster(nodes=int(sys.argv[1]) if len(sys.argv) > 1 else 4) as c:
        print(c.cmd("sinfo", "-N", "-o", "%N %T %c %m %G %f"))
        print(f"SLURM_CONF={c.conf_path}")
        try:
            input("Enter stops the cluster ")
        except EOFError:
            pass
