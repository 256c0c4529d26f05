"""A run's events as it streams in this process: every one kept, in order, with a gapless `seq`.

A subscriber that joins late (a reload, a second tab) is given what was streamed so far, as a
snapshot or as the events themselves, and only later events after it: no gap, no duplicate.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

Event = dict[str, Any]
TERMINAL_EVENTS = frozenset({"RunCompleted", "RunError", "RunCancelled", "RunPaused"})


class RunStream:
    def __init__(
        self,
        run_id: uuid.UUID,
        session_id: str,
        deliver: Callable[[Event, RunStream], None],
        *,
        seq_from: int = 0,
        said: str = "",
    ) -> None:
        self.run_id = run_id
        self.session_id = session_id
        # A paused run going on: its events follow those it sent before its pause.
        self.seq_from = seq_from
        self.said = said
        self.events: list[Event] = []
        self.finished = False
        # Whether its events go to other processes: only once one follows its session.
        self.crossing = False
        self._deliver = deliver  # to this process's subscribers, and on to other processes

    @property
    def seq(self) -> int:
        return self.seq_from + len(self.events)

    def publish(self, event_type: str, **data: Any) -> Event:
        event: Event = {
            "event": event_type,
            "run_id": str(self.run_id),
            "session_id": str(self.session_id),
            "seq": self.seq + 1,
            **data,
        }
        self.events.append(event)
        if event_type in TERMINAL_EVENTS:
            self.finished = True
        self._deliver(event, self)
        return event

    def content_so_far(self) -> str:
        pieces = (e["content"] for e in self.events if e["event"] == "RunContent")
        return self.said + "".join(pieces)
