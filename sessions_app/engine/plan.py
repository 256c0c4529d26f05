"""What a created run's generation needs, read in the transaction that created it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessions_app.models import Run, Session


@dataclass
class Plan:
    run: Run
    session: Session
    assistant_message_id: int  # the answer's row, filled in as it streams (0: not written yet)
    messages: list[dict[str, Any]]  # what the model is sent
    tools: list[dict[str, Any]] = field(default_factory=list)
    sampling: dict[str, Any] = field(default_factory=dict)  # the agent version's settings
    next_order: int = 2  # of the run's next message row (tool rounds add some)
    client_tools: frozenset[str] = frozenset()  # names of the tools its client runs
    tool_choice: Any = None  # for its first model call
    before: Before | None = None  # a paused run going on: the run so far

    def first_sampling(self) -> dict[str, Any]:
        """The sampling settings of a request's first model call: with its `tool_choice` (a
        forced call, repeated in every round, would never let the model answer)."""
        if self.tool_choice is None or not self.tools:
            return self.sampling
        return {**self.sampling, "tool_choice": self.tool_choice}


@dataclass(frozen=True)
class Before:
    """A paused run going on: what it said, measured and streamed before it went on."""

    said: str
    first_token: float | None
    seq: int  # of its last event (its pause, or a failed try's end): it goes on after it
    calls: int  # model calls stored
    metrics: dict[str, Any]
