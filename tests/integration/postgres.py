"""A private PostgreSQL for tests: Debian's postgresql (initdb, pg_ctl) in a temporary directory,
reachable only through a Unix socket there, run as an unprivileged user when the tests run as root
(PostgreSQL refuses to run as root). Each test gets a database of its own from new_database()."""
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid


def bin_dir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else ""


def missing():
    """Why no private PostgreSQL can run here ("" when it can)."""
    if not bin_dir():
        return "PostgreSQL's initdb is not installed (scripts/install-deps installs Debian's postgresql)"
    return ""


class PrivatePostgres:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="trainyard-pg-")
        self.data = os.path.join(self.dir, "data")
        self.socket = self.dir
        self.bin = bin_dir()
        self.user = None
        if os.geteuid() == 0:
            self.user = "nobody"
            pw = pwd.getpwnam(self.user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o755)  # the socket must be reachable by the server, the data dir is initdb's own

    def _run(self, args, **kw):
        if self.user:
            args = ["runuser", "-u", self.user, "--"] + args
        return subprocess.run(args, check=True, capture_output=True, text=True, **kw)

    def start(self):
        self._run([os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "trainyard", "--auth=trust",
                   "--no-sync", "-E", "UTF8", "--locale=C"])
        # fsync off: the tests kill trainyard servers, never PostgreSQL or the machine, so what a
        # commit acknowledged stays in PostgreSQL's memory and the kernel's cache either way; a
        # flush per commit only cost the suite CPU and time in the kernel.
        opts = f"-k {self.socket} -c listen_addresses='' -c fsync=off -c max_connections=200"
        self._run([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l", os.path.join(self.dir, "log"), "-w",
                   "-o", opts, "start"])
        return self

    def url(self, database="postgres"):
        return f"host={self.socket} user=trainyard dbname={database}"

    def psql(self, sql, database="postgres"):
        out = self._run([os.path.join(self.bin, "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", self.socket,
                         "-U", "trainyard", "-d", database, "-c", sql])
        return out.stdout.strip()

    def session(self, database):
        """An interactive psql on `database` (line-buffered pipes), for a test that holds a
        transaction open while something else happens."""
        args = [os.path.join(self.bin, "psql"), "-X", "-A", "-t", "-q", "-h", self.socket, "-U", "trainyard", "-d", database]
        if self.user:
            args = ["runuser", "-u", self.user, "--"] + args
        return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                bufsize=1)

    def new_database(self):
        """A fresh, empty database: its connection string."""
        name = "t_" + uuid.uuid4().hex[:12]
        self.psql(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self):
        try:
            self._run([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "immediate", "-w", "stop"])
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self):
        try:
            with open(os.path.join(self.dir, "log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""
