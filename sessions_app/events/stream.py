"""The one subscription interface to a run's events, for the WebSocket, SSE and anything else.

A run streaming in this process has a RunStream: every event it published, in order, with a
gapless `seq`, so a subscriber can join late (a reload, a second tab) and replay what it missed
before receiving live events — no gap, no duplicate. Sinks see every event of every run in the
process; the channel-layer bridge uses one to reach listeners in other processes.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

Event = dict[str, Any]
TERMINAL_EVENTS = frozenset({"RunCompleted", "RunError", "RunCancelled"})

_streams: dict[uuid.UUID, RunStream] = {}
_sinks: list[Callable[[Event], None]] = []


class RunStream:
    def __init__(self, run_id: uuid.UUID, session_id: uuid.UUID) -> None:
        self.run_id = run_id
        self.session_id = session_id
        self.events: list[Event] = []
        self.finished = False
        self._queues: set[asyncio.Queue[Event | None]] = set()

    @property
    def seq(self) -> int:
        return len(self.events)

    def publish(self, event_type: str, **data: Any) -> Event:
        event: Event = {
            "event": event_type,
            "run_id": str(self.run_id),
            "session_id": str(self.session_id),
            "seq": len(self.events) + 1,
            **data,
        }
        self.events.append(event)
        for queue in self._queues:
            queue.put_nowait(event)
        for sink in _sinks:
            sink(event)
        if event_type in TERMINAL_EVENTS:
            self.finished = True
            for queue in self._queues:
                queue.put_nowait(None)
            _streams.pop(self.run_id, None)
        return event

    async def subscribe(
        self, after_seq: int = 0, *, idle: float | None = None
    ) -> AsyncIterator[Event | None]:
        """Every event with seq > after_seq, then live ones until the run ends; with `idle`,
        also None after each `idle` seconds without an event (for keep-alives)."""
        backlog = self.events[after_seq:]
        if self.finished:
            for event in backlog:
                yield event
            return
        # Registered before the first await, so nothing published meanwhile is missed.
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._queues.add(queue)
        try:
            for event in backlog:
                yield event
            while True:
                if idle is None or not queue.empty():
                    event = await queue.get()
                else:
                    try:
                        async with asyncio.timeout(idle):
                            event = await queue.get()
                    except TimeoutError:
                        yield None
                        continue
                if event is None:
                    return
                yield event
        finally:
            self._queues.discard(queue)

    def content_so_far(self) -> str:
        return "".join(e["content"] for e in self.events if e["event"] == "RunContent")


def open_stream(run_id: uuid.UUID, session_id: uuid.UUID) -> RunStream:
    stream = RunStream(run_id, session_id)
    _streams[run_id] = stream
    return stream


def get_stream(run_id: uuid.UUID) -> RunStream | None:
    """The live stream of a run running in this process, if any."""
    return _streams.get(run_id)


def add_sink(sink: Callable[[Event], None]) -> None:
    if sink not in _sinks:
        _sinks.append(sink)


def remove_sink(sink: Callable[[Event], None]) -> None:
    if sink in _sinks:
        _sinks.remove(sink)
