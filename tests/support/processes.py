"""Processes for tests that need one to have lived and ended."""

from __future__ import annotations

import subprocess
import sys


def a_pid_gone() -> int:
    """The pid of a process of this host that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid
