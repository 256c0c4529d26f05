"""`serve --workers N`: N daphne processes and nginx in front of them, children of one process
that watches them.

Each daphne listens on a unix socket in a directory only serve's user and nginx's workers may
enter (see nginx.let_in): no other local user can reach a worker, or take its place
while it restarts, as one could take a loopback port. A daphne that dies is started again on
its socket, nginx sending its requests to the others meanwhile, as an operator expects of a
server with workers; the runs it was streaming are interrupted by the others (see
sessions_app/engine/liveness.py). A worker that dies again and again right after starting, or
nginx dying, stops everything, and serve exits non-zero for the service manager to see. SIGINT
or SIGTERM stops everything, nginx first. Each child is in a session of its own, so a Ctrl-C
reaches only serve, which stops them in that order, and gets SIGTERM should serve itself be
killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from serving.children import QuickExits, describe, die_with_parent

READY_TIMEOUT = 60.0  # seconds for a worker to listen once started
STOP_TIMEOUT = 10.0  # seconds for a child to stop before it is killed
QUICK_EXIT = 10.0  # a worker exiting this soon after it started, three times in a row, is not
# started again
RESTART_DELAY = 1.0


class Child:
    """One process serve starts, and starts again if it is a worker."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], cwd: Path) -> None:
        self.name, self.command, self.env, self.cwd = name, command, env, cwd
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.quick_exits = QuickExits(within=QUICK_EXIT)

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.command,
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self.started = time.monotonic()

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)

    def wait_stopped(self, timeout: float) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Worker(Child):
    def __init__(
        self, name: str, command: list[str], env: dict[str, str], cwd: Path, path: Path
    ) -> None:
        super().__init__(name, command, env, cwd)
        self.path = path  # its unix socket

    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):  # left by the process it replaces
            os.unlink(self.path)
        super().start()

    def listening(self) -> bool:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(1)
            try:
                sock.connect(str(self.path))
            except OSError:
                return False
            return True


class Supervisor:
    def __init__(self, workers: list[Worker], proxy: Child, say: Callable[[str], None]) -> None:
        self.workers, self.proxy, self.say = workers, proxy, say
        self.stopping = threading.Event()

    def run(self, ready_message: str) -> int:
        """Until a signal (0) or a failure (1); every child is stopped either way."""
        handlers = {
            signum: signal.signal(signum, lambda *_: self.stopping.set())
            for signum in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            for worker in self.workers:
                worker.start()
            if not all(self._wait_listening(worker) for worker in self.workers):
                return 0 if self.stopping.is_set() else 1
            self.proxy.start()
            self.say(ready_message)
            while not self.stopping.wait(0.2):
                if not self._watch():
                    return 1
            return 0
        finally:
            self._stop_all()
            for signum, handler in handlers.items():
                signal.signal(signum, handler)

    def _wait_listening(self, worker: Worker) -> bool:
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.stopping.is_set():
            if worker.exit_code() is not None:
                self.say(f"{worker.name} exited while starting ({describe(worker.exit_code())}).")
                return False
            if worker.listening():
                return True
            if time.monotonic() > deadline:
                self.say(f"{worker.name} did not listen on {worker.path} in time.")
                return False
            time.sleep(0.1)
        return False

    def _watch(self) -> bool:
        """Start again the workers that exited; False when serve must stop."""
        code = self.proxy.exit_code()
        if code is not None:
            self.say(f"nginx exited ({describe(code)}); stopping.")
            return False
        for worker in self.workers:
            code = worker.exit_code()
            if code is None:
                continue
            if worker.quick_exits.one_too_many(worker.started):
                self.say(f"{worker.name} keeps exiting right after it starts; stopping.")
                return False
            self.say(f"{worker.name} exited ({describe(code)}); starting it again.")
            if self.stopping.wait(RESTART_DELAY):
                return True
            worker.start()
        return True

    def _stop_all(self) -> None:
        # nginx first, so that no new request reaches a worker that is stopping.
        self.proxy.signal(signal.SIGTERM)
        self.proxy.wait_stopped(STOP_TIMEOUT)
        for worker in self.workers:
            worker.signal(signal.SIGTERM)
        for worker in self.workers:
            worker.wait_stopped(STOP_TIMEOUT)
