"""Which runs are really running: per-process heartbeats, and reaping runs whose process died.

Each process vouches for its active runs with one UPDATE per heartbeat interval (not per run, not
per token), and at the same beat looks for runs of other processes that died. A run is dead when
its process is gone from this host, or when nobody has vouched for it for PARLEY_STALE_RUN_AFTER
seconds (a process on another host). A reaped run's viewers are told, wherever they watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from sessions_app.engine.dbthread import in_db_thread
from sessions_app.engine.errors import INTERRUPTED
from sessions_app.engine.registry import registry
from sessions_app.events import publish_session
from sessions_app.models import ACTIVE_STATUSES, Message, Role, Run, RunStatus
from sessions_app.process import HOSTNAME, WORKER_ID, being_cancelled

log = logging.getLogger("parley.runs")
T = TypeVar("T")


def _process_alive(worker: str) -> bool:
    host, _, rest = worker.partition(":")
    pid_text = rest.partition(":")[0]
    if worker == WORKER_ID:
        return bool(registry.ids())
    if host != HOSTNAME or not pid_text.isdigit():
        return True  # can't tell from here; the heartbeat age decides
    if int(pid_text) == os.getpid():
        return False  # our pid, but another boot of it: that process is gone
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


Reaped = tuple[Any, Any]  # (run id, session id)


def reap_stale_runs(*, session_id: Any = None) -> list[Reaped]:
    """Mark INTERRUPTED the active runs whose process is gone; which ones. Their viewers learn
    of it from `announce`."""
    stale_before = timezone.now() - timedelta(seconds=settings.PARLEY_STALE_RUN_AFTER)
    candidates = Run.objects.filter(status__in=ACTIVE_STATUSES)
    if session_id is not None:
        candidates = candidates.filter(session_id=session_id)
    local = set(registry.ids())
    dead = [
        run.pk
        for run in candidates.only("pk", "worker", "heartbeat_at")
        if run.pk not in local
        and (
            not _process_alive(run.worker)
            or run.heartbeat_at is None
            or run.heartbeat_at < stale_before
        )
    ]
    reaped = []
    for run in Run.objects.filter(pk__in=dead).only(
        "pk", "session_id", "content", "cancel_requested"
    ):
        status = RunStatus.CANCELLED if run.cancel_requested else RunStatus.INTERRUPTED
        done = Run.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES).update(
            status=status,
            error="" if run.cancel_requested else INTERRUPTED,
            finished_at=timezone.now(),
        )
        if done:
            # Whatever the last checkpoint saved is the answer the user keeps.
            Message.objects.filter(run_id=run.pk, role=Role.ASSISTANT).filter(
                Q(content="") | Q(content__isnull=True)
            ).update(content=run.content)
            reaped.append((run.pk, run.session_id))
    if reaped:
        log.info("marked %d run(s) left by a stopped process as interrupted", len(reaped))
    return reaped


def announce(reaped: list[Reaped]) -> None:
    """Tell the viewers of each reaped run's session, in every process, that it has ended.

    Not as the run's own last event: its process numbered those, and died with the count."""
    for run_id, session_id in reaped:
        publish_session(session_id, "RunReaped", reaped_run_id=str(run_id))


async def reap_and_announce(*, session_id: Any = None) -> int:
    reaped = await in_db_thread(reap_stale_runs)(session_id=session_id)
    announce(reaped)
    return len(reaped)


def ensure_heartbeat(*, reap_now: bool = False) -> None:
    """Start this process's heartbeat on the running loop, once: by its first run, its first
    chat socket, or the server as it starts (so that a process with neither reaps too), whose
    heartbeat reaps at once (`reap_now`) rather than at its first beat.

    A heartbeat left on another loop that goes on running (a thread's, a test tool's) is
    stopped: it would vouch for runs of this loop, and cancel them from its own thread."""
    loop = asyncio.get_running_loop()
    previous = registry.heartbeat
    if previous is not None and not previous.done():
        if previous.get_loop() is loop:
            return
        with contextlib.suppress(RuntimeError):  # that loop was closed meanwhile
            previous.get_loop().call_soon_threadsafe(previous.cancel)
    registry.heartbeat = loop.create_task(_beat(reap_now), name="parley-heartbeat")


async def _beat(reap_now: bool) -> None:
    if reap_now:
        await _unless_failed(reap_and_announce(), "reaping stopped processes' runs failed")
    while True:
        await asyncio.sleep(settings.PARLEY_HEARTBEAT_INTERVAL)
        for pk in await _unless_failed(_vouch(registry.ids()), "heartbeat failed") or ():
            registry.cancel_local(pk)
        await _unless_failed(reap_and_announce(), "reaping stopped processes' runs failed")


async def _unless_failed(work: Awaitable[T], what: str) -> T | None:
    """The work's result, or None once its failure is logged: the next beat tries again."""
    try:
        return await work
    except Exception:
        if being_cancelled():
            raise asyncio.CancelledError from None
        log.exception(what)
        return None


async def _vouch(ids: list[Any]) -> list[Any]:
    """Mark this process's runs alive; those whose cancel was asked for elsewhere."""
    if not ids:
        return []
    await Run.objects.filter(pk__in=ids, status=RunStatus.RUNNING).aupdate(
        heartbeat_at=timezone.now()
    )
    return [
        pk
        async for pk in Run.objects.filter(pk__in=ids, cancel_requested=True).values_list(
            "pk", flat=True
        )
    ]
