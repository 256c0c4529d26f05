"""Runs are judged alive or dead by the database's clock: a process on another host whose clock
is minutes off neither has its live runs ended by this one nor keeps its dead ones alive.

The other host is a process in a namespace of its own (its own hostname, so that this one
cannot look for its pid) with its clock moved by libfaketime."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sessions_app.engine import liveness
from sessions_app.models import Run, RunStatus
from testkit.upstream import Reply
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

# Five beats, not the three the system check allows: on a machine this loaded (two suites, the
# embedded model) a beat came more than two seconds late.
BEAT, STALE = 1.0, 5.0
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")

OTHER_HOST = textwrap.dedent(
    """
    import asyncio, django
    django.setup()
    from django.contrib.auth import get_user_model
    from sessions_app import engine
    from sessions_app import dbclock

    dbclock.measure()  # as serve does before it listens

    async def main():
        engine.lifespan.start(reap_now=True)
        user = await get_user_model().objects.aget(username="alice")
        handle = await engine.start_run(user, "a long answer, please")
        print(handle.run_id, flush=True)
        await handle.wait()

    asyncio.run(main())
    """
)


def _other_host(env: dict[str, str], skew: str) -> subprocess.Popen[str]:
    if not shutil.which("unshare") or not LIBFAKETIME.exists():
        missing = "needs unshare and libfaketime (apt-get install faketime)"
        pytest.fail(missing) if os.getenv("CI") else pytest.skip(missing)
    clock = {"LD_PRELOAD": str(LIBFAKETIME), "FAKETIME": skew, "DONT_FAKE_MONOTONIC": "1"}
    timing = {"PARLEY_HEARTBEAT_INTERVAL": str(BEAT), "PARLEY_STALE_RUN_AFTER": str(STALE)}
    host = ["unshare", "--uts", "--fork", "--kill-child=SIGKILL"]
    command = [*host, "sh", "-c", 'hostname other-host && exec "$@"', "-"]
    return subprocess.Popen(
        [*command, sys.executable, "-c", OTHER_HOST],
        cwd=ROOT,
        env={**env, **clock, **timing},
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("skew", ["-600", "+600"], ids=["ten-minutes-slow", "ten-minutes-fast"])
def test_a_host_whose_clock_is_off_neither_loses_live_runs_nor_keeps_dead_ones(
    serve_environment, upstream, alice, agent, settings, skew
):
    settings.PARLEY_HEARTBEAT_INTERVAL, settings.PARLEY_STALE_RUN_AFTER = BEAT, STALE
    upstream.script(Reply(tokens=400, delay=0.05))
    other = _other_host(serve_environment, skew)
    try:
        run_id = other.stdout.readline().strip()
        assert run_id, "the other host started no run"
        assert Run.objects.get(pk=run_id).worker.startswith("other-host:")
        # Live: this host looks again and again for two stale windows and ends nothing.
        deadline = time.monotonic() + 2 * STALE
        while time.monotonic() < deadline:
            assert liveness.reap_stale_runs() == []
            time.sleep(0.25)
        assert Run.objects.get(pk=run_id).status == RunStatus.RUNNING

        os.kill(other.pid, signal.SIGKILL)  # and with it, every process of that host
        other.wait()
        killed = time.monotonic()
        while not liveness.reap_stale_runs():
            assert time.monotonic() - killed <= STALE + BEAT + 1.0, "the dead run was kept"
            time.sleep(0.1)
        assert Run.objects.get(pk=run_id).status == RunStatus.INTERRUPTED
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
