"""Several trainyard servers over one private PostgreSQL, behind Debian's HAProxy (docs/operations.md,
"High availability"): the set-up the high-availability tests and bench/failover.py run.

Every server shares one data directory (the credentials, buckets and attempts that a real set-up
keeps on shared storage) and one database. HAProxy health-checks GET /healthz?role=leader on each
and sends clients to the one that leads."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

import postgres
from harness import Server


def missing():
    """Why the set-up cannot run here ("" when it can)."""
    why = postgres.missing()
    if why:
        return why
    if not shutil.which("haproxy"):
        return "HAProxy is not installed (scripts/install-deps installs Debian's haproxy)"
    return ""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(url, role=None, timeout=1.0):
    """GET /healthz of one server: (HTTP status, JSON body); (0, {}) when it does not answer."""
    try:
        with urllib.request.urlopen(url + "/healthz" + (f"?role={role}" if role else ""), timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read())
        except ValueError:
            return e.code, {}
    except (OSError, ValueError):
        return 0, {}


class Haproxy:
    """HAProxy in the foreground on a free port, routing to the server that answers
    /healthz?role=leader with 200 (checked every 200 ms; one failure takes a server out, one
    success brings it in)."""

    def __init__(self, work_dir, backends):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = os.path.join(work_dir, "haproxy.cfg")
        lines = [
            "global", "  maxconn 2000",
            "defaults", "  mode http", "  timeout connect 1s", "  timeout client 130s", "  timeout server 130s",
            "  retries 3", "  option redispatch 1",
            "frontend trainyard", f"  bind 127.0.0.1:{self.port}", "  default_backend servers",
            "backend servers", "  option httpchk GET /healthz?role=leader", "  http-check expect status 200",
            "  default-server inter 200ms fastinter 200ms downinter 200ms fall 1 rise 1",
        ]
        for i, url in enumerate(backends):
            lines.append(f"  server s{i} {url.split('://', 1)[1]} check")
        with open(self.config, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.log_path = os.path.join(work_dir, "haproxy.log")
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", self.config], stdout=self.log, stderr=self.log)

    def wait_ready(self, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if health(self.url, role="leader")[0] == 200:
                return
            time.sleep(0.05)
        raise RuntimeError("HAProxy sends to no leader: " + open(self.log_path).read()[-2000:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Cluster:
    """`n` servers on one data directory and one database, and HAProxy in front. The servers listen
    on fixed ports, so a restarted one comes back where HAProxy looks for it."""

    def __init__(self, pg, n=3, config="", data_dir=None, shared_dirs=None):
        self.pg = pg
        self.url = pg.new_database()
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="trainyard-ha-")
        self.config = config + f'\n[store]\nurl = "{self.url}"\n'
        self.shared_dirs = shared_dirs
        self.ports = [free_port() for _ in range(n)]
        self.servers = [None] * n
        for i in range(n):
            self.start(i)
        self.proxy = Haproxy(self.data_dir, [s.url for s in self.servers])
        self.proxy.wait_ready()
        # A client of the cluster: the same credentials, HAProxy's address.
        self.endpoint = Server(self.data_dir, name="-endpoint")
        self.endpoint.url = self.proxy.url
        self.endpoint.tls = False

    def start(self, i):
        s = Server(self.data_dir, config=self.config, name=f"-{i}", shared_dirs=self.shared_dirs,
                   listen=f"127.0.0.1:{self.ports[i]}")
        self.servers[i] = s.start()
        return s

    def roles(self):
        """Each server's /healthz: (status, body), by index."""
        return [health(s.url) if s.proc.poll() is None else (0, {}) for s in self.servers]

    def leader(self, timeout=20, exclude=()):
        """The index of the server that serves as the leader (waits for one)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            for i, s in enumerate(self.servers):
                if i in exclude or s.proc.poll() is not None:
                    continue
                if health(s.url, role="leader", timeout=0.5)[0] == 200:
                    return i
            time.sleep(0.02)
        raise AssertionError("no server leads: " + json.dumps(self.roles()))

    def stop(self):
        for s in self.servers:
            if s:
                s.stop()
        self.proxy.stop()
