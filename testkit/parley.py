"""Parley as its own process (`manage.py serve`) on a free loopback port, for tests that need a
server to outlive what they break (its database, its Redis) or to fail to start.

Usage::

    parley = ParleyProcess(env)          # DATABASE_URL, REDIS_URL, LLM_BASE_URL, ...
    parley.manage("migrate")             # other commands, against the same settings
    with parley:                         # serve, once /healthz answers (whatever it says)
        httpx.get(parley.url("/healthz"))
    parley.output()                      # what it printed, for a failure's message
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from testkit.services import free_port

ROOT = Path(__file__).resolve().parent.parent


class ParleyProcess:
    def __init__(self, env: dict[str, str], port: int | None = None) -> None:
        self.env = {**env, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = tempfile.NamedTemporaryFile(prefix="parley-serve-", suffix=".log")

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

    def launch(self) -> subprocess.Popen[bytes]:
        """Start `serve` without waiting for it (to watch it refuse to start)."""
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(self.port)],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        return self.process

    def start(self, timeout: float = 60.0) -> ParleyProcess:
        """Start `serve` and wait until it answers HTTP."""
        process = self.launch()
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"serve exited with {process.returncode}:\n{self.output()}")
            if time.monotonic() >= deadline:
                raise RuntimeError(f"serve did not answer within {timeout} s:\n{self.output()}")
            try:
                httpx.get(self.url("/healthz"), timeout=5)
                return self
            except httpx.HTTPError:
                time.sleep(0.2)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> ParleyProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def url(self, path: str = "/", scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def output(self) -> str:
        """Everything serve printed so far."""
        return Path(self.log.name).read_text(errors="replace")
