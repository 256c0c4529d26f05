"""What a created run's generation needs, read in the transaction that created it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessions_app.models import Run, Session


@dataclass
class Plan:
    run: Run
    session: Session
    assistant_message_id: int  # the answer's row, filled in as it streams
    messages: list[dict[str, Any]]  # what the model is sent
    tools: list[dict[str, Any]] = field(default_factory=list)
    sampling: dict[str, Any] = field(default_factory=dict)  # the agent version's settings
    next_order: int = 2  # of the run's next message row (tool rounds add some)
