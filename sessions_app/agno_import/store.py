"""Storing one parsed Agno session in Parley, whole or not at all.

Ids are kept: the session's as Agno has it, each run's (a UUID; any other run id maps to a fixed
UUID derived from it), each agent's (likewise). So a second import finds what the first stored
and adds only the runs Agno has gained since.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Max

from sessions_app.agno_import.identities import Directory, Placed
from sessions_app.agno_import.parse import (
    AgnoAgent,
    AgnoMessage,
    AgnoRun,
    AgnoSession,
    Skip,
)
from sessions_app.models import (
    Agent,
    CallKind,
    LLMCall,
    Message,
    NameSource,
    Run,
    RunSource,
    Session,
    SessionSource,
    User,
)
from sessions_app.services.sessions import default_session_name
from sessions_app.usage import add_late

METRIC_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
    "time_to_first_token",
    "duration",
)


@dataclass
class Stored:
    """What importing one session did."""

    outcome: str  # "imported" (new), "grew" (new runs), "unchanged"
    runs: list[Run] = field(default_factory=list)
    messages: int = 0
    calls: list[LLMCall] = field(default_factory=list)
    agno_user: str = ""
    placed: Placed | None = None
    agent_created: str | None = None


def agent_uuid(agno_agent_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(agno_agent_id)
    except ValueError:
        return uuid.uuid5(uuid.NAMESPACE_URL, f"agno:agent:{agno_agent_id}")


@transaction.atomic
def store_session(parsed: AgnoSession, directory: Directory) -> Stored:
    session = Session.objects.select_related("user").filter(pk=parsed.session_id).first()
    if session is not None and session.source != SessionSource.AGNO:
        raise Skip("a Parley session has this id already", "conflict")
    placed = directory.place(parsed.user_id)
    user = placed.user
    if session is not None and session.user_id != user.pk:
        raise Skip(
            f"imported before for {session.user.get_username()!r}, not "
            f"{user.get_username()!r} (see --map-user)",
            "conflict",
        )
    agent, agent_created = _agent(parsed.agent)
    stored = Stored(
        "imported" if session is None else "unchanged",
        agno_user=parsed.user_id,
        placed=placed,
        agent_created=agent.name if agent_created else None,
    )
    if session is None:
        session = _new_session(parsed, user, agent)
    known = set(Run.objects.filter(session=session).values_list("run_id", flat=True))
    new_runs = [r for r in parsed.runs if r.run_id not in known]
    if not new_runs:
        return stored
    last = Run.objects.filter(session=session).aggregate(last=Max("position"))["last"] or 0
    _add_runs(stored, session, agent, new_runs, start=last + 1)
    # Counted on days already rolled up in this same transaction, so a crash never leaves
    # stored runs out of the dashboard.
    add_late(
        Run.objects.filter(pk__in=[r.pk for r in stored.runs]),
        LLMCall.objects.filter(pk__in=[c.pk for c in stored.calls]),
    )
    if stored.outcome == "unchanged":
        stored.outcome = "grew"
    Session.objects.filter(pk=session.pk).update(
        session_state=parsed.session_state,
        summary=parsed.summary,
        metadata=parsed.metadata,
        updated_at=max(parsed.updated_at, new_runs[-1].created_at),
    )
    return stored


def _agent(agno: AgnoAgent) -> tuple[Agent, bool]:
    return Agent.objects.get_or_create(
        pk=agent_uuid(agno.agent_id),
        # Not offered to everyone for new chats: its instructions are Agno's, unreviewed here.
        defaults={
            "name": agno.name,
            "model": agno.model,
            "instructions": agno.instructions,
            "listed": False,
        },
    )


def _new_session(parsed: AgnoSession, user: User, agent: Agent) -> Session:
    session = Session.objects.create(
        session_id=parsed.session_id,
        user=user,
        agent=agent,
        source=SessionSource.AGNO,
        # Named as Parley names its own sessions when Agno kept no name.
        session_name=parsed.session_name or _first_input(parsed),
        name_source=NameSource.USER if parsed.session_name else NameSource.FIRST_MESSAGE,
        session_state=parsed.session_state,
        metadata=parsed.metadata,
        summary=parsed.summary,
    )
    # The row's own times are Agno's; auto_now would put the import's there.
    Session.objects.filter(pk=session.pk).update(
        created_at=parsed.created_at, updated_at=parsed.updated_at
    )
    return session


def _first_input(parsed: AgnoSession) -> str:
    return default_session_name(parsed.runs[0].input) if parsed.runs else ""


def _add_runs(
    stored: Stored, session: Session, agent: Agent, runs: list[AgnoRun], start: int
) -> None:
    rows = [_run_row(session, agent, run, start + i) for i, run in enumerate(runs)]
    stored.runs = Run.objects.bulk_create(rows)
    messages: list[Message] = []
    message_times: list[datetime] = []
    call_times: list[datetime] = []
    for row, run in zip(stored.runs, runs, strict=True):
        for order, message in enumerate(run.messages):
            messages.append(_message_row(row, message, order))
            message_times.append(message.created_at or run.created_at)
        for call, when in _call_rows(row, run):
            stored.calls.append(call)
            call_times.append(when)
    Message.objects.bulk_create(messages)
    LLMCall.objects.bulk_create(stored.calls)
    # Creation times are Agno's, not the import's, which auto_now_add put there on insert.
    Run.objects.bulk_update(_timed(stored.runs, [r.created_at for r in runs]), ["created_at"])
    Message.objects.bulk_update(_timed(messages, message_times), ["created_at"])
    LLMCall.objects.bulk_update(_timed(stored.calls, call_times), ["created_at"])
    stored.messages = len(messages)


def _run_row(session: Session, agent: Agent, run: AgnoRun, position: int) -> Run:
    row = Run(
        run_id=run.run_id,
        session=session,
        user=session.user,
        agent=agent,
        position=position,
        status=run.status,
        input=run.input,
        content=run.content,
        source=RunSource.IMPORT,
        error=run.error,
        model=run.model,
        model_provider=run.model_provider,
        finished_at=run.finished_at,
        session_state=run.session_state,
    )
    for name in METRIC_COLUMNS:
        setattr(row, name, run.metrics[name])
    return row


def _message_row(run: Run, message: AgnoMessage, order: int) -> Message:
    return Message(
        run=run,
        session_id=run.session_id,
        order=order,
        role=message.role,
        content=message.content,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
    )


def _call_rows(run: Run, agno: AgnoRun) -> list[tuple[LLMCall, datetime]]:
    """One row per model call Agno measured (its assistant messages' metrics); without those,
    one for the whole run, so token totals add up as they do for Parley's own runs."""
    measured = [(m.metrics, m.created_at) for m in agno.messages if m.metrics]
    if not measured and agno.metrics["total_tokens"]:
        measured = [(agno.metrics, agno.created_at)]
    rows = []
    for metrics, when in measured:
        row = LLMCall(
            run=run,
            session_id=run.session_id,
            user_id=run.user_id,
            agent_id=run.agent_id,
            kind=CallKind.CHAT,
            model=run.model or "unknown",
            model_provider=run.model_provider,
            ok=agno.status != "ERROR",
            **{name: metrics[name] for name in METRIC_COLUMNS},
        )
        rows.append((row, when or agno.created_at))
    return rows


def _timed(rows: list[Any], times: list[datetime]) -> list[Any]:
    for row, when in zip(rows, times, strict=True):
        row.created_at = when
    return rows
