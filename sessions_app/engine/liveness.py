"""Which runs are really running: per-process heartbeats, and reaping runs whose process died.

Each process vouches for its active runs with one UPDATE per heartbeat interval (not per run, not
per token), and at the same beat looks for runs of other processes that died. A run of this host
is dead when its process is gone (its heartbeat may be late for a live process, as while the
database was away); a run of another host, when nobody has vouched for it for
PARLEY_STALE_RUN_AFTER seconds, counted only while this process's own beats reach the database,
and by the database's clock (`dbclock`), not by any host's.
A reaped run's viewers are told, wherever they watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from sessions_app import dbclock, signals
from sessions_app.engine.dbthread import in_db_thread
from sessions_app.engine.errors import INTERRUPTED
from sessions_app.engine.registry import registry
from sessions_app.events import publish_session
from sessions_app.models import ACTIVE_STATUSES, Message, Role, Run, RunStatus
from sessions_app.process import HOSTNAME, WORKER_ID, being_cancelled
from sessions_app.services import ratelimit

log = logging.getLogger("parley.runs")
T = TypeVar("T")


def _process_alive(worker: str) -> bool:
    """Whether the process of this host that `worker` names still runs."""
    pid_text = worker.partition(":")[2].partition(":")[0]
    if worker == WORKER_ID:
        return bool(registry.ids())
    if not pid_text.isdigit():
        return True  # not a worker id Parley writes: leave it be
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
    stale_before = dbclock.now() - timedelta(seconds=settings.PARLEY_STALE_RUN_AFTER)
    candidates = Run.objects.filter(status__in=ACTIVE_STATUSES)
    if session_id is not None:
        candidates = candidates.filter(session_id=session_id)
    local = set(registry.ids())
    dead: dict[Any, Q] = {}  # run id -> what must still hold when it is marked
    for run in candidates.only("pk", "worker", "heartbeat_at"):
        if run.pk in local:
            continue
        if run.worker.partition(":")[0] == HOSTNAME:
            if not _process_alive(run.worker):
                dead[run.pk] = Q()
        elif _beats_reach_database() and (run.heartbeat_at or stale_before) <= stale_before:
            # Not if its process vouched for it between this read and the update.
            dead[run.pk] = Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lte=stale_before)
    reaped: list[Reaped] = []
    statuses: dict[Any, str] = {}
    for run in Run.objects.filter(pk__in=dead).only(
        "pk", "session_id", "content", "cancel_requested"
    ):
        status = RunStatus.CANCELLED if run.cancel_requested else RunStatus.INTERRUPTED
        still = Run.objects.filter(dead[run.pk], pk=run.pk, status__in=ACTIVE_STATUSES)
        done = still.update(
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
            statuses[run.pk] = status
    if reaped:
        log.info("marked %d run(s) left by a stopped process as interrupted", len(reaped))
        _tell_ended(statuses)
    return reaped


def _tell_ended(statuses: dict[Any, str]) -> None:
    """The reaped runs' ends, to this app's listeners (signals.run_finished), on the engine's
    loop; nobody is told where no engine runs (a test reaping by hand)."""
    loop = registry.loop
    if loop is not None and registry.running():
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(signals.send_run_finished, statuses)


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
    """Start this process's heartbeat with the engine, once: as the server starts (reaping at
    once, `reap_now`, rather than at its first beat), else with the first run or chat socket
    (so that tests that need neither meet no beat). Nothing where the engine does not run."""
    if not registry.running() or registry.loop is not asyncio.get_running_loop():
        return
    if registry.heartbeat is None or registry.heartbeat.done():
        registry.heartbeat = registry.loop.create_task(_beat(reap_now), name="parley-heartbeat")


def _beats_reach_database() -> bool:
    """Whether this process's heartbeat has reached the database for a whole stale period: a
    heartbeat missing meanwhile says nothing of a process on another host while ours fail too."""
    failed = registry.heartbeat_failed_at
    return failed is None or time.monotonic() - failed > settings.PARLEY_STALE_RUN_AFTER


async def _beat(reap_now: bool) -> None:
    await _unless_failed(in_db_thread(dbclock.measure)(), "reading the database's clock failed")
    if reap_now:
        await _unless_failed(reap_and_announce(), "reaping stopped processes' runs failed")
    while True:
        await asyncio.sleep(settings.PARLEY_HEARTBEAT_INTERVAL)
        await _unless_failed(in_db_thread(dbclock.measure)(), "reading the database's clock failed")
        cancelled = await _unless_failed(_vouch(registry.ids()), "heartbeat failed")
        for pk in cancelled or ():
            registry.cancel_local(pk)
        reaped = await _unless_failed(reap_and_announce(), "reaping stopped processes' runs failed")
        if cancelled is None or reaped is None:
            registry.heartbeat_failed_at = time.monotonic()
        # Records of deleted sessions count for a minute only: old ones go now and then.
        await _unless_failed(in_db_thread(ratelimit.prune)(), "pruning deleted sessions failed")


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
        heartbeat_at=dbclock.now()
    )
    return [
        pk
        async for pk in Run.objects.filter(pk__in=ids, cancel_requested=True).values_list(
            "pk", flat=True
        )
    ]
