"""The engine's life in a process: started on the event loop that serves, stopped before it ends.

`serve` starts it once daphne's loop runs and stops it before daphne's reactor stops (SIGTERM,
SIGINT); an ASGI server that sends lifespan events does the same through project.asgi, and under
one that sends none (daphne run directly) the application starts it with its first connection;
tests start it on each test's loop, scripts with `serving`. Runs are asked for only where it
runs.

Stopping is graceful: new runs are refused (NotServing), and every answer streaming here ends
as a server stopping ends it, INTERRUPTED, its end stored with everything it streamed, where a
process that dies keeps only its last checkpoint (up to a second older). What cannot be stored
within STOP_PATIENCE (a database away) is left to that rule too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from sessions_app.engine import liveness
from sessions_app.engine.registry import registry
from sessions_app.events import drain, forget
from sessions_app.models import Run

log = logging.getLogger("parley.runs")

# Seconds the answers streaming at a stop have to store their ends (serve --workers kills a
# worker that has not stopped after 10).
STOP_PATIENCE = 5.0

# What other apps do as the engine starts and stops here (registered from their AppConfig.ready,
# so this app names none of them): a start callback is called on the loop with whether a server
# is starting (`reap_now`); a stop callback is awaited, within STOP_PATIENCE, before the stop.
_started: list[Callable[[bool], None]] = []
_stopping: list[Callable[[], Awaitable[None]]] = []


def on_start(callback: Callable[[bool], None]) -> None:
    if callback not in _started:
        _started.append(callback)


def on_stop(callback: Callable[[], Awaitable[None]]) -> None:
    if callback not in _stopping:
        _stopping.append(callback)


def start(*, reap_now: bool = False) -> None:
    """Start the engine on the running loop (nothing if it runs there already; RuntimeError if
    it runs on another). `reap_now`: as a server starts, start the heartbeat now and mark
    interrupted at once the runs of processes that died."""
    registry.open(asyncio.get_running_loop())
    if reap_now:
        liveness.ensure_heartbeat(reap_now=True)
    for callback in list(_started):
        callback(reap_now)


def running() -> bool:
    return registry.running()


def call_soon(callback: Callable[..., object], *args: object) -> bool:
    """Have the engine's loop call `callback(*args)` soon, from any thread (a request's, the
    ORM's): how work that belongs on that loop gets there. False when the engine does not run
    in this process (a command without it, a server stopping)."""
    loop = registry.loop
    if loop is None or not registry.running():
        return False
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # closed meanwhile
        return False
    return True


def never_started() -> bool:
    """Whether no engine was started on a loop still alive: the application's cue to start one
    under a server that sends no lifespan events (not one that a stopping server stopped)."""
    return registry.loop is None or registry.loop.is_closed()


async def stop(patience: float = STOP_PATIENCE) -> None:
    """End every run streaming here, storing what each said; then the heartbeat. Nothing when
    the engine does not run (a signal before it started, a second stop)."""
    if not registry.running():
        return
    registry.stop_accepting()
    try:
        await _interrupt_runs(patience)
        await _stop_others(patience)
        await _stop_heartbeat()
        with contextlib.suppress(TimeoutError):  # Redis away: viewers elsewhere see it on reload
            await drain()  # the runs' last events, on their way to other processes' viewers
        try:
            async with asyncio.timeout(2.0):  # Redis away: the entries are forgotten in time
                await forget()  # off the lists of sessions' followers: others stop sending here
        except Exception:
            log.exception("could not leave the lists of sessions' followers")
    finally:
        registry.close()


@contextlib.asynccontextmanager
async def serving(*, reap_now: bool = False) -> AsyncIterator[None]:
    """The engine running on this loop for the block (a script, a benchmark), stopped after it
    unless it ran here already."""
    already = registry.running() and registry.loop is asyncio.get_running_loop()
    start(reap_now=reap_now)
    try:
        yield
    finally:
        if not already:
            await stop()


async def _interrupt_runs(patience: float) -> None:
    """Cancel each streaming run once (a second cancel would cut its store short) and wait for
    their ends; runs whose creation was under way launch meanwhile and are cancelled too."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    cancelled: set[asyncio.Task[Run]] = set()
    # A batch being created shows in `starts` before its runs are registered.
    while (registry.ids() or registry.starts.keys) and (left := deadline - loop.time()) > 0:
        tasks = {live.task for live in registry.streaming.values() if live.task is not None}
        for task in tasks - cancelled:
            task.cancel()
        cancelled |= tasks
        if tasks:
            await asyncio.wait(tasks, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        else:
            await asyncio.sleep(min(0.05, left))
    if registry.ids():
        log.warning(
            "stopped with %d run(s) not stored: they keep their last checkpoint",
            len(registry.ids()),
        )


async def _stop_others(patience: float) -> None:
    for callback in list(_stopping):
        try:
            await asyncio.wait_for(callback(), patience)
        except Exception:  # one app's failure to stop must not keep the others running
            log.exception("stopping %s failed", getattr(callback, "__qualname__", callback))


async def _stop_heartbeat() -> None:
    heartbeat = registry.heartbeat
    if heartbeat is not None and not heartbeat.done():
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat
