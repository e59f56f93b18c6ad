"""The console's browser for tests: headless Debian Chromium driven through
console/tests/browser_driver.mjs (playwright-core), one JSON command per line."""
import json
import os
import shutil
import subprocess

ROOT = os.environ.get("TRAINYARD_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DRIVER = os.path.join(ROOT, "console", "tests", "browser_driver.mjs")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def missing():
    """Why the browser tests cannot run here ("" when they can)."""
    if not shutil.which("node"):
        return "node is not installed (scripts/install-deps)"
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is not installed (scripts/install-deps installs Debian's chromium)"
    if not os.path.isdir(os.path.join(ROOT, "console", "node_modules", "playwright-core")):
        return "console/node_modules is not installed (scripts/install-console-deps)"
    return ""


class BrowserError(AssertionError):
    pass


class Browser:
    def __init__(self):
        self.proc = subprocess.Popen(["node", DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     cwd=os.path.dirname(DRIVER), env=dict(os.environ, CHROMIUM=CHROMIUM))
        first = self._read()
        if not first.get("ready"):
            raise BrowserError(f"the browser driver did not start: {first}")

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise BrowserError("the browser driver exited")
        return json.loads(line)

    def do(self, cmd, **kw):
        kw["cmd"] = cmd
        self.proc.stdin.write((json.dumps(kw) + "\n").encode())
        self.proc.stdin.flush()
        answer = self._read()
        if "error" in answer:
            raise BrowserError(f"{cmd} {kw}: {answer['error']}")
        return answer

    def try_do(self, cmd, **kw):
        """As do(), but an error is returned as {"error": ...} rather than raised."""
        try:
            return self.do(cmd, **kw)
        except BrowserError as e:
            return {"error": str(e)}

    def goto(self, url, **kw):
        return self.do("goto", url=url, **kw)

    def wait(self, testid=None, sel=None, text=None, timeout=20000):
        sel = sel or f'[data-testid="{testid}"]'
        kw = {"sel": sel, "timeout": timeout}
        if text is not None:
            kw["text"] = text
        return self.do("wait", **kw)["text"]

    def click(self, testid=None, sel=None):
        return self.do("click", sel=sel or f'[data-testid="{testid}"]')

    def fill(self, testid, value):
        return self.do("fill", sel=f'[data-testid="{testid}"]', value=value)

    def eval(self, js):
        return self.do("eval", js=js)["value"]

    def screenshot(self, path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return self.do("screenshot", path=path)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b'{"cmd": "close"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()
                self.proc.wait()
