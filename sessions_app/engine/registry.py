"""This process's runs, and the engine's parts that live on the event loop it serves on.

A run is registered once created (`created`), moves to streaming when launched (`launch`) and is
forgotten when its end is stored (`finished`); nothing else writes these. The loop's parts (the
batchers, the starts, the heartbeat) exist from `open` to `close`, which the lifespan calls
(see lifespan): a run is asked for only on the loop the engine was started on.
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from sessions_app.engine.dbthread import Batcher, Starts
from sessions_app.engine.errors import NotServing
from sessions_app.engine.live import LiveRun
from sessions_app.models import Run


class Registry:
    def __init__(self) -> None:
        # Created here and about to stream: not orphans, though no task runs them yet.
        self.launching: dict[uuid.UUID, LiveRun] = {}
        self.streaming: dict[uuid.UUID, LiveRun] = {}
        # When a beat of this process last failed to reach the database (time.monotonic()).
        self.heartbeat_failed_at: float | None = None
        # The loop it serves on, from open; after close, the loop it served on, `stopping` left
        # set so that runs asked for there meanwhile are refused (the server is ending).
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping = False  # new runs are refused, streaming ones end
        self.heartbeat: asyncio.Task[None] | None = None
        self.starts = Starts()
        self._batchers: dict[str, Batcher] = {}

    # -- the engine's life (see lifespan) ---------------------------------------------------

    def running(self) -> bool:
        """Started and not stopped. An engine whose loop has closed (a script's, a test's that
        ran without stopping it) went with it."""
        return self.loop is not None and not self.loop.is_closed() and not self.stopping

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve on `loop`; nothing if the engine runs there already."""
        if self.running():
            if self.loop is not loop:
                raise RuntimeError("The run engine is already running on another event loop.")
            return
        self.loop, self.stopping, self.heartbeat = loop, False, None
        self.starts, self._batchers = Starts(), {}

    def stop_accepting(self) -> None:
        """New runs are refused from now on: the engine is stopping."""
        self.stopping = True

    def close(self) -> None:
        self.stopping, self.heartbeat, self._batchers = True, None, {}

    def check_serving(self) -> None:
        """Raise unless new runs may start on the running loop."""
        if self.loop is not asyncio.get_running_loop():
            raise RuntimeError(
                "The run engine is not running on this event loop: start it first "
                "(sessions_app.engine.lifespan)."
            )
        if self.stopping:
            raise NotServing("The server is stopping; please try again in a moment.")

    # -- a run's stages ----------------------------------------------------------------------

    def created(self, live: LiveRun) -> None:
        """Its rows are committed (in the database thread): this process vouches for it."""
        self.launching[live.run_id] = live

    def launch(self, live: LiveRun, work: Coroutine[Any, Any, Run]) -> None:
        """Run `work` (its answer) in a task of the engine's own. A fresh context: the task
        must not inherit the asker's (whose thread executor ends with the response)."""
        run_id = live.run_id
        live.task = asyncio.create_task(work, name=f"run-{run_id}", context=contextvars.Context())
        self.streaming[run_id] = live
        self.launching.pop(run_id, None)
        # Starting until its first piece (see generate), or its end if none comes.
        starts = self.starts
        starts.add(run_id)
        live.task.add_done_callback(lambda _: starts.done(run_id))

    def finished(self, live: LiveRun) -> None:
        """Its end is stored (or given up): nothing more of it is this process's."""
        self.streaming.pop(live.run_id, None)

    def ids(self) -> list[uuid.UUID]:
        """Runs this process vouches for."""
        return [*self.launching, *self.streaming]

    def cancel_local(self, run_id: uuid.UUID) -> asyncio.Task[Run] | None:
        """Cancel a run streaming here as the user's wish; its task, if it was here."""
        live = self.streaming.get(run_id)
        if live is None or live.task is None:
            return None
        live.cancel_requested = True
        live.task.cancel()
        return live.task

    # -- the loop's parts --------------------------------------------------------------------

    def batcher(
        self,
        fn: Callable[[list[Any]], list[Any]],
        then: Callable[[Any], Any] | None = None,
        after: Callable[[list[Any]], None] | None = None,
        tracked: bool = False,
    ) -> Batcher:
        """The engine's batcher of `fn`, made on first use."""
        batcher = self._batchers.get(fn.__name__)
        if batcher is None:
            tracker = self.starts if tracked else None
            batcher = self._batchers[fn.__name__] = Batcher(fn, then, after, tracker)
        return batcher


registry = Registry()
