"""Parley as its own process (`manage.py serve`) on a free loopback port: one daphne, or with
``workers=N`` the deployed shape (N daphne processes behind nginx), for tests that need a server
to outlive what they break (its database, its Redis), to fail to start, or to run as deployed.

Usage::

    parley = ParleyProcess(env)          # DATABASE_URL, REDIS_URL, LLM_BASE_URL, ...
    parley.manage("migrate")             # other commands, against the same settings
    with parley:                         # serve, once /healthz answers (whatever it says)
        httpx.get(parley.url("/healthz"))
    parley.output()                      # what it printed, for a failure's message

    deployed = ParleyProcess(env, workers=2).start(healthy=True)
    deployed.base_url                    # nginx's
    deployed.worker_sockets()            # each daphne's unix socket, as serve printed them
    deployed.worker_urls()               # a loopback URL in front of each of those
    deployed.stop()
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from serving.children import free_port
from testkit.unixrelay import UnixRelay

ROOT = Path(__file__).resolve().parent.parent
# serve --workers N names each daphne it starts, and its own socket, before it serves.
WORKER_LINE = re.compile(r"^(worker \d+): daphne on unix:(\S+)$", re.MULTILINE)


class ParleyProcess:
    def __init__(
        self,
        env: dict[str, str],
        port: int | None = None,
        *,
        workers: int = 1,
        extra_args: Sequence[str] = (),
        log: Path | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.env = {**env, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.host = host  # a loopback address: this machine's tests reach it
        self.port = port or free_port()
        self.workers = workers
        self.extra_args = list(extra_args)
        self.process: subprocess.Popen[bytes] | None = None
        self._relays: dict[Path, UnixRelay] = {}
        if log is None:  # removed with this object
            self._log_file = tempfile.NamedTemporaryFile(prefix="parley-serve-", suffix=".log")
            log = Path(self._log_file.name)
        self.log = log

    def manage(self, *args: str) -> str:
        """Run another management command with the same settings; its output."""
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def command(self) -> list[str]:
        """`serve` as this process runs it (for a test that runs it its own way)."""
        options = ["--host", self.host, "--port", str(self.port)]
        if self.workers > 1:
            options += ["--workers", str(self.workers)]
        return [sys.executable, "manage.py", "serve", *options, *self.extra_args]

    def launch(self) -> subprocess.Popen[bytes]:
        """Start `serve` without waiting for it (to watch it refuse to start)."""
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command(), cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        return self.process

    def start(self, timeout: float = 60.0, *, healthy: bool = False) -> ParleyProcess:
        """Start `serve` and wait until it answers HTTP (with `healthy`, until /healthz says
        200); with several workers, until serve has said it serves too. Stopped on failure."""
        process = self.launch()
        deadline = time.monotonic() + timeout
        try:
            while not self._serving(healthy):
                if process.poll() is not None:
                    raise RuntimeError(f"serve exited with {process.returncode}:\n{self.tail()}")
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"serve did not answer within {timeout} s:\n{self.tail()}")
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise
        found = len(self.worker_urls())
        if self.workers > 1 and found != self.workers:
            self.stop()
            raise RuntimeError(f"serve named {found} of {self.workers} workers:\n{self.tail()}")
        return self

    def _serving(self, healthy: bool) -> bool:
        if self.workers > 1 and f"({self.workers} workers)" not in self.output():
            return False
        try:
            status = httpx.get(self.url("/healthz"), timeout=5).status_code
        except httpx.HTTPError:
            return False
        return status == 200 or not healthy

    def stop(self) -> None:
        """Ctrl-C, as a person stops it; killed if it has not stopped within 30 s."""
        process, self.process = self.process, None
        try:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        finally:
            relays, self._relays = list(self._relays.values()), {}
            for relay in relays:
                relay.close()

    def __enter__(self) -> ParleyProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """http://HOST:PORT, without a slash: nginx's, with several workers."""
        return f"http://{self.host}:{self.port}"

    def url(self, path: str = "/", scheme: str = "http") -> str:
        return f"{scheme}://{self.host}:{self.port}{path}"

    def worker_sockets(self) -> list[Path]:
        """Each daphne's unix socket, in serve's order (none with one worker); the latest
        start's, when it was started more than once."""
        return [Path(p) for p in dict(WORKER_LINE.findall(self.output())).values()]

    def worker_urls(self) -> list[str]:
        """A base URL of its own for each daphne (a relay to its socket), in serve's order."""
        for path in self.worker_sockets():
            if path not in self._relays:
                self._relays[path] = UnixRelay(path)
        return [self._relays[path].url for path in self.worker_sockets()]

    def output(self) -> str:
        """Everything serve printed so far."""
        return self.log.read_text(errors="replace")

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.output().splitlines()[-lines:])
