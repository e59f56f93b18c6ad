"""Every program the project builds or ships answers --help with its usage and exit status 0.

The subcommands are read from `trainyard --help` itself (and from each subcommand's own help), so
a new one is covered without a change here. The bench programs are found beside the server
binary (build/bench/) and the scripts in bench/; fuzz targets are left out.
"""
import os
import re
import socket
import subprocess
import unittest

from harness import BIN, SOURCE_DIR

BUILD = os.path.dirname(os.path.abspath(BIN))


def subcommands(help_text):
    """The names listed under "Subcommands:" in a CLI11 help text."""
    names, inside = [], False
    for line in help_text.splitlines():
        if line.startswith("Subcommands:"):
            inside = True
        elif inside and re.match(r"^  [a-z][a-z0-9-]*( |$)", line):
            names.append(line.split()[0])
        elif inside and line and not line.startswith(" "):
            inside = False
    return names


class HelpTest(unittest.TestCase):
    def run_help(self, argv, flag="--help"):
        """Runs argv + [flag]; fails unless it exits 0 having printed a usage line."""
        r = subprocess.run(argv + [flag], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        shown = " ".join(os.path.relpath(a, SOURCE_DIR) if os.path.isabs(a) else a for a in argv)
        self.assertEqual(r.returncode, 0, f"{shown} {flag}: exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        # CLI11 and argparse print "usage"; Google Benchmark lists its --benchmark_ flags.
        self.assertRegex(r.stdout + r.stderr, re.compile(r"usage|\[--", re.I), f"{shown} {flag} printed no usage")
        return r.stdout

    def test_trainyard_and_every_subcommand(self):
        top = self.run_help([BIN])
        names = subcommands(top)
        self.assertIn("serve", names)
        self.assertIn("simulate", names)
        for name in names:
            with self.subTest(subcommand=name):
                for sub in subcommands(self.run_help([BIN, name])):
                    with self.subTest(subcommand=f"{name} {sub}"):
                        self.run_help([BIN, name, sub])
        self.run_help([BIN], "-h")

    def test_the_supervisor_and_its_subcommand(self):
        self.run_help([os.path.join(BUILD, "trainyard-supervisor")])
        self.run_help([os.path.join(BUILD, "trainyard-supervisor")], "-h")
        self.run_help([BIN, "supervise"])

    def test_bench_programs(self):
        # Every program built into build/bench, so that a new one is covered without a change here.
        bench = os.path.join(BUILD, "bench")
        names = sorted(f for f in os.listdir(bench)
                       if os.path.isfile(os.path.join(bench, f)) and os.access(os.path.join(bench, f), os.X_OK))
        for name in ("ty_loadgen", "sched_bench", "sched_depth_bench", "controller_pass_bench"):
            if name not in names:
                self.skipTest(f"{os.path.join(bench, name)} is not built")
        for name in names:
            with self.subTest(program=name):
                self.run_help([os.path.join(bench, name)])
        self.run_help([os.path.join(BUILD, "bench", "ty_loadgen")], "-h")

    def test_bench_scripts(self):
        bench = os.path.join(SOURCE_DIR, "bench")
        scripts = sorted(f for f in os.listdir(bench) if f.endswith((".py", ".sh")))
        self.assertIn("pass_scale.py", scripts)
        for f in scripts:
            with self.subTest(script=f):
                cmd = ["python3"] if f.endswith(".py") else ["bash"]
                self.run_help(cmd + [os.path.join(bench, f)])


if __name__ == "__main__":
    unittest.main()


class UnreachableServerTest(unittest.TestCase):
    def test_a_command_against_no_server_says_where_and_why(self):
        # A bound socket that does not listen refuses every connection, and keeps its port ours.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            endpoint = f"http://127.0.0.1:{s.getsockname()[1]}"
            env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="secret")
            for argv in (["jobs", "-q", "q"], ["describe", "some-job"]):
                with self.subTest(command=argv[0]):
                    r = subprocess.run([BIN, *argv, "--endpoint-url", endpoint], capture_output=True, text=True,
                                       timeout=60, env=env, stdin=subprocess.DEVNULL)
                    self.assertNotEqual(r.returncode, 0)
                    self.assertIn(f"cannot reach the server at {endpoint}: the connection was refused", r.stderr)
                    self.assertIn("trainyard serve", r.stderr)
