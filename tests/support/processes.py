"""Processes for tests that need one to have lived and ended."""

from __future__ import annotations

import subprocess
import sys

from sessions_app.process import HOSTNAME


def a_pid_gone() -> int:
    """The pid of a process of this host that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def a_dead_worker() -> str:
    """A worker id, as a run records it, of a process of this host that has ended."""
    return f"{HOSTNAME}:{a_pid_gone()}:0123abcd"
