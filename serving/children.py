"""What the processes Parley starts (the embedded model, daphne workers, nginx) have in common."""

from __future__ import annotations

import ctypes
import os
import signal
import socket

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
