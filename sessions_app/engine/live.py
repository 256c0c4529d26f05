"""One run of this process, from the ask to its end: the one object that holds its state.

`start_run` makes it from the ask; the creation batch, in the database thread, fills in its
session, agent and plan (or why it was refused) and sends its model request ahead; the registry
launches it (its event stream and task) and forgets it once its end is stored. Its starter gets
it back as the run's handle.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sessions_app.events import Event, RunStream, subscribe

if TYPE_CHECKING:
    from sessions_app import accounts
    from sessions_app.engine.early import EarlyRequest
    from sessions_app.engine.plan import Plan
    from sessions_app.models import Agent, Run, Session, User


@dataclass(frozen=True)
class Placement:
    """Where a run goes, as a door's `place` decided it for the asker."""

    agent_id: Any
    session_id: Any  # None: a new session, made with the run (as an ask without one)
    created: bool = False  # the session was made for this run: removed if the run is refused
    # The asker's session, as the placement read it with the batch's others: not read again.
    session: Session | None = None
    # A new session made with the run: its metadata, and its id when the caller chose one.
    metadata: dict[str, Any] = field(default_factory=dict)
    new_id: str | None = None


@dataclass(frozen=True)
class RunOptions:
    """What a door adds to a run beyond its input."""

    source: str  # RunSource: the door
    # The caller's own system text, sent after the agent's instructions (the OpenAI door's
    # `system` messages); kept in the model call's record of what was sent.
    system: str = ""
    # Sampling settings over the agent version's own (temperature, top_p, max_tokens, stop).
    sampling: dict[str, Any] = field(default_factory=dict)
    # Where the run goes, decided in the creation batch once the asker is known (the OpenAI
    # door: the agent its model names, the session its turns are): one trip to the database
    # for both. In the ORM's thread, given the asker and the session `named_session` names if
    # it is the asker's (else None); what it raises refuses the run.
    place: Callable[[User, Session | None], Placement] | None = None
    # The session id the ask names, for `place`: read with those the batch's other asks name,
    # in one query for each asker.
    named_session: str | None = None
    # The client's own tools (OpenAI's `tools`), offered beside the agent's: a call to one
    # pauses the run until the client sends its result (see continue_run).
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = None  # OpenAI's, for the first model call of the request (see Plan)

    @property
    def client_tools(self) -> frozenset[str]:
        return frozenset(spec["function"]["name"] for spec in self.tools)


@dataclass(frozen=True)
class Resume:
    """A paused run to go on with: the results of the client's tools, by tool call id."""

    run_id: uuid.UUID
    results: dict[str, str]


@dataclass
class Ask:
    """What the asker sent, as start_run got it."""

    user: User | accounts.TokenClaim | accounts.SignedIn  # a claim until the batch checks it
    text: str
    agent_id: Any
    session_id: Any  # None: a new session
    session_state: dict[str, Any] | None
    options: RunOptions
    resume: Resume | None = None  # a paused run goes on, rather than a new one starting


@dataclass(eq=False)
class LiveRun:
    ask: Ask
    # Found while it is created; a creation tried again (see start) starts these over.
    refusal: Exception | None = None
    session: Session | None = None
    agent: Agent | None = None
    plan: Plan | None = None  # set once its rows are committed
    early: EarlyRequest | None = field(default=None, repr=False)  # its model request, sent ahead
    # Once launched.
    stream: RunStream | None = field(default=None, repr=False)
    task: asyncio.Task[Run] | None = field(default=None, repr=False)
    cancel_requested: bool = False  # stopped as its user asked (CANCELLED, not INTERRUPTED)
    placed: Placement | None = None  # where its options' `place` put it
    # The client's tool calls it paused for (PAUSED), as its client is sent them.
    pending: list[dict[str, Any]] = field(default_factory=list)

    @property
    def run_id(self) -> uuid.UUID:
        assert self.plan is not None, "not created"
        return self.plan.run.run_id

    @property
    def session_id(self) -> Any:
        assert self.plan is not None, "not created"
        return self.plan.run.session_id

    def events(
        self, after_seq: int = 0, *, idle: float | None = None
    ) -> AsyncIterator[Event | None]:
        return subscribe(self.session_id, run_id=self.run_id, after_seq=after_seq, idle=idle)

    async def wait(self) -> Run:
        """The run as stored when it ended, its agent, session and user loaded: the engine's
        own object, not read back."""
        assert self.task is not None, "not launched"
        return await asyncio.shield(self.task)


# What adapters hold: a launched run.
RunHandle = LiveRun
