"""This server process's look for experiments to run: one task on the engine's loop that, every
PARLEY_HEARTBEAT_INTERVAL and whenever poked (a request made here), takes a queued experiment or
one whose process stopped vouching, and runs it, one at a time.

It starts with the engine as a server starts (so experiments a stopped server left are resumed),
or at the first poke of a process whose engine was started otherwise (tests, daphne run by
hand); it stops with the engine, which cancels the experiment running here: its trials in flight
go back to pending and it is queued again, for another process or a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable

from django.conf import settings

from sessions_app.engine import lifespan
from sessions_app.process import being_cancelled

log = logging.getLogger("parley.evals")

Look = Callable[[], Awaitable[None]]

_look: Look | None = None
_loop: asyncio.AbstractEventLoop | None = None
_task: asyncio.Task[None] | None = None
_wake: asyncio.Event | None = None


def connect(look: Look) -> None:
    """From the AppConfig's ready(): `look` takes and runs what there is to run."""
    global _look
    _look = look
    lifespan.on_start(engine_started)
    lifespan.on_stop(engine_stopping)


def engine_started(server: bool) -> None:
    global _loop
    _loop = asyncio.get_running_loop()
    if server:
        _ensure()


async def engine_stopping() -> None:
    global _loop, _task
    task, _task, _loop = _task, None, None
    if task is not None and not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def poke() -> None:
    """Look now (from any thread): nothing where no engine runs in this process."""
    loop = _loop
    if loop is None or loop.is_closed() or not lifespan.running():
        return
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    if here is loop:
        _ensure()
    else:
        # A context of its own: the caller's (a sync_to_async thread's) would tell the poller
        # it runs inside that call, and asgiref would refuse its database calls.
        loop.call_soon_threadsafe(_ensure, context=contextvars.Context())


def _ensure() -> None:
    """The poller running on this loop, and told to look."""
    global _task, _wake
    if _loop is None or _look is None:
        return  # the engine stopped meanwhile
    if _task is None or _task.done():
        _wake = asyncio.Event()
        _task = _loop.create_task(
            _poll(_wake, _look), name="parley-experiments", context=contextvars.Context()
        )
    assert _wake is not None
    _wake.set()


async def _poll(wake: asyncio.Event, look: Look) -> None:
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), settings.PARLEY_HEARTBEAT_INTERVAL)
        wake.clear()
        try:
            await look()
        except Exception:
            if being_cancelled():
                raise asyncio.CancelledError from None
            log.exception("running experiments failed; looking again in a moment")
