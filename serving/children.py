"""What the processes Parley starts (the embedded model, daphne workers, nginx) have in common."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import time

# Enough for a program to run, and how its threads and libraries are tuned; none of Parley's
# own settings (keys, database URLs), which a child that is not Parley has no use for.
PLAIN_ENVIRONMENT = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def plain_environment(*prefixes: str) -> dict[str, str]:
    """This process's environment, down to PLAIN_ENVIRONMENT and names with these prefixes."""
    return {
        name: value
        for name, value in os.environ.items()
        if name in PLAIN_ENVIRONMENT or (prefixes and name.startswith(prefixes))
    }


def die_with_parent() -> None:
    """Linux, in the child before it runs: it gets SIGTERM when Parley dies, even by SIGKILL."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def describe(code: int | None) -> str:
    """A child's exit code, as people read it."""
    if code is not None and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"code {code}"


class QuickExits:
    """A child's exits soon after it started, in a row: the third is one too many (a child that
    cannot stay up is not started again and again)."""

    def __init__(self, within: float, limit: int = 3) -> None:
        self.within, self.limit, self.count = within, limit, 0

    def one_too_many(self, started: float) -> bool:
        """Count an exit of the child started at `started` (time.monotonic())."""
        self.count = self.count + 1 if time.monotonic() - started < self.within else 0
        return self.count >= self.limit
