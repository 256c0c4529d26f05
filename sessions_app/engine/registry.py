"""This process's runs, and the engine state that goes with them, in one object.

Tests run each on an event loop of its own; what belongs to a loop (the batchers, the starts
being tracked, model requests sent ahead) is dropped with it when another loop first asks.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from sessions_app.engine.dbthread import Batcher, Starts
from sessions_app.events import Event, RunStream, subscribe
from sessions_app.models import Run


@dataclass
class RunHandle:
    """A run streaming in this process, as its starter gets it."""

    run_id: uuid.UUID
    session_id: str
    stream: RunStream
    task: asyncio.Task[Run] = field(repr=False)
    cancel_requested: bool = False

    def events(
        self, after_seq: int = 0, *, idle: float | None = None
    ) -> AsyncIterator[Event | None]:
        return subscribe(self.session_id, run_id=self.run_id, after_seq=after_seq, idle=idle)

    async def wait(self) -> Run:
        """The run as stored when it ended, its agent, session and user loaded: the engine's
        own object, not read back."""
        return await asyncio.shield(self.task)


class ProcessRuns:
    def __init__(self) -> None:
        self.active: dict[uuid.UUID, RunHandle] = {}
        # Created here and about to stream: not orphans, though no task runs them yet.
        self.launching: set[uuid.UUID] = set()
        self.heartbeat: asyncio.Task[None] | None = None
        # When a beat of this process last failed to reach the database (time.monotonic()).
        self.heartbeat_failed_at: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._batchers: dict[str, Batcher] = {}
        self._starts = Starts()
        self._early: dict[uuid.UUID, Any] = {}  # early.EarlyRequest, by run

    def ids(self) -> list[uuid.UUID]:
        """Runs this process vouches for."""
        return [*self.active, *self.launching]

    def cancel_local(self, run_id: uuid.UUID) -> asyncio.Task[Run] | None:
        """Cancel a run streaming here as the user's wish; its task, if it was here."""
        handle = self.active.get(run_id)
        if handle is None:
            return None
        handle.cancel_requested = True
        handle.task.cancel()
        return handle.task

    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._batchers, self._starts, self._early = {}, Starts(), {}

    @property
    def starts(self) -> Starts:
        """Runs being started on this loop (see generate: answers give way to them)."""
        self._bind()
        return self._starts

    @property
    def early(self) -> dict[uuid.UUID, Any]:
        """Model requests sent for runs being created, until their runs start."""
        self._bind()
        return self._early

    def batcher(
        self,
        fn: Callable[[list[Any]], list[Any]],
        then: Callable[[Any], Any] | None = None,
        after: Callable[[], None] | None = None,
        tracked: bool = False,
    ) -> Batcher:
        """This loop's batcher of `fn`."""
        self._bind()
        batcher = self._batchers.get(fn.__name__)
        if batcher is None:
            tracker = self._starts if tracked else None
            batcher = self._batchers[fn.__name__] = Batcher(fn, then, after, tracker)
        return batcher


registry = ProcessRuns()
