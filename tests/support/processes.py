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


def printed_by(code: str, **settings: str) -> list[str]:
    """What `code` prints, run by a Python process of its own on Parley's settings, with these
    in its environment."""
    from tests.conftest import subprocess_env

    env = subprocess_env(DJANGO_SETTINGS_MODULE="project.settings", **settings)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def loaded_as_daphne_loads_it(probe: str, **settings: str) -> list[str]:
    """What `probe` prints, run in a process of its own after importing the ASGI application
    without DEBUG, as daphne imports it, with these settings in its environment."""
    return printed_by("import project.asgi\n" + probe, **{"DEBUG": "false", **settings})
