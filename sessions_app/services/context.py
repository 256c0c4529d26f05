"""What the model is sent for a run: system message, session history, the new user message.

The order and selection follow Agno 2.2 (CONTRACT §6). History is rebuilt from stored Message rows
of earlier COMPLETED runs; nothing of it is copied into the new run.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connections
from django.db.models import F, Q, Window
from django.db.models.functions import RowNumber

from sessions_app.models import Agent, Message, Role, Run, RunStatus, Session, User
from sessions_app.services import tools

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

SUMMARY_PREAMBLE = "Here is a brief summary of your previous interactions:"
SUMMARY_NOTE = (
    "Note: this information is from previous interactions and may be outdated. "
    "You should ALWAYS prefer information from this conversation over the past summary."
)


def fill_placeholders(text: str, values: dict[str, Any]) -> str:
    """Replace `{key}` with values[key]; unknown keys stay as written, like Agno's formatter."""

    def substitute(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            return match.group(0)
        value = values[key]
        return value if isinstance(value, str) else json.dumps(value)

    return _PLACEHOLDER.sub(substitute, text)


def system_message(
    agent: Agent, session: Session, username: str, extra: str | None = None
) -> dict[str, Any] | None:
    state = session.session_state or {}
    parts: list[str] = []
    if agent.instructions.strip():
        values = {"session_id": str(session.session_id), "user_id": username, **state}
        parts.append(fill_placeholders(agent.instructions.strip(), values))
    summary = (session.summary or {}).get("summary") if isinstance(session.summary, dict) else None
    if summary:
        parts.append(
            f"{SUMMARY_PREAMBLE}\n\n<summary_of_previous_interactions>\n{summary}\n"
            f"</summary_of_previous_interactions>\n\n{SUMMARY_NOTE}"
        )
    if agent.add_session_state_to_context:
        parts.append(f"<session_state>\n{json.dumps(state, sort_keys=True)}\n</session_state>")
    if extra:
        parts.append(extra)
    if not parts:
        return None
    return {"role": "system", "content": "\n\n".join(parts)}


@dataclass
class Place:
    """Where a run stands: its agent, its session, and its position."""

    agent: Agent
    session: Session
    position: int


def histories(places: Sequence[Place]) -> list[list[Message]]:
    """For each place, the stored messages of the earlier completed runs its agent is set to
    see (CONTRACT §6): the last `num_history_runs` runs, or the last `num_history_messages`
    messages; oldest first, system messages and dangling tool calls left out. Places are in
    different sessions; one query per kind of limit serves them all."""
    by_runs = [p for p in places if _limit(p) and p.agent.num_history_messages is None]
    by_messages = [p for p in places if _limit(p) and p.agent.num_history_messages is not None]
    of_runs = _by_session(_last_runs_messages(by_runs)) if by_runs else {}
    of_messages = _by_session(_last_messages(by_messages)) if by_messages else {}
    out = []
    for place in places:
        limit, session_id = _limit(place), place.session.pk
        if not limit:
            rows = []
        elif place.agent.num_history_messages is None:
            rows = of_runs.get(session_id, [])
            positions = sorted({m.run_position for m in rows})[-limit:]
            rows = [m for m in rows if m.run_position in positions]
        else:
            rows = of_messages.get(session_id, [])[-limit:]
        out.append(drop_dangling_tool_calls(rows))
    return out


def _limit(place: Place) -> int:
    """How many runs (or messages) of history the place's agent sees; 0 for none."""
    agent = place.agent
    if not agent.add_history_to_context or place.position <= 1:
        return 0
    if agent.num_history_messages is not None:
        return agent.num_history_messages
    return agent.num_history_runs


def _by_session(messages: list[Message]) -> dict[Any, list[Message]]:
    grouped: dict[Any, list[Message]] = defaultdict(list)
    for message in messages:
        grouped[message.session_id].append(message)
    return grouped


def _last_messages(places: list[Place]) -> list[Message]:
    """The last messages of each place's session before its position, as many as the deepest
    limit asks for, in conversation order."""
    before = Q()
    for place in places:
        before |= Q(session=place.session.pk, run__position__lt=place.position)
    newest_first = [F("run__position").desc(), F("order").desc()]
    rows = (
        Message.objects.filter(before, run__status=RunStatus.COMPLETED)
        .exclude(role=Role.SYSTEM)
        .annotate(rank=Window(RowNumber(), partition_by=F("session"), order_by=newest_first))
        .filter(rank__lte=max(_limit(p) for p in places))
        .order_by("session", "run__position", "order")
    )
    return list(rows)


# SQL, because every run's start asks for it (agents limit history by runs unless set otherwise),
# and the ORM takes longer to build this query than the database to run it (docs/performance.md,
# "SQL through the ORM"). The messages of each session's last runs before its position.
_LAST_RUNS = """
SELECT m.*, r."position" AS run_position
FROM {message} m INNER JOIN {run} r ON r.run_id = m.run_id
WHERE m.run_id IN (
    SELECT ranked.run_id FROM (
        SELECT run_id,
            ROW_NUMBER() OVER (PARTITION BY session_id ORDER BY "position" DESC) AS recent
        FROM {run} WHERE status = %s AND ({bounds})
    ) ranked WHERE ranked.recent <= %s
) AND m.role <> %s
ORDER BY m.session_id, r."position", m."order"
"""


def _last_runs_messages(places: list[Place]) -> list[Message]:
    """The messages of each place's session's last runs before its position, as many runs as
    the deepest limit asks for, in conversation order; each with its `run_position`."""
    connection = connections[Message.objects.db]
    quote, session_key = connection.ops.quote_name, Session._meta.pk
    bounds, params = [], [RunStatus.COMPLETED]
    for place in places:
        bounds.append('(session_id = %s AND "position" < %s)')
        params += [session_key.get_db_prep_value(place.session.pk, connection), place.position]
    sql = _LAST_RUNS.format(
        message=quote(Message._meta.db_table),
        run=quote(Run._meta.db_table),
        bounds=" OR ".join(bounds),
    )
    deepest = max(_limit(p) for p in places)
    return list(Message.objects.raw(sql, [*params, deepest, Role.SYSTEM]))


def history_messages(agent: Agent, session: Session, before_position: int) -> list[Message]:
    """The history a run at `before_position` was sent (or would be)."""
    return histories([Place(agent, session, before_position)])[0]


def drop_dangling_tool_calls(rows: list[Message]) -> list[Message]:
    """Keep a tool call only with all its results, and a result only with its call."""
    results = {m.tool_call_id for m in rows if m.role == Role.TOOL and m.tool_call_id}
    answered: set[str] = set()
    kept: list[Message] = []
    for message in rows:
        if message.role == Role.ASSISTANT and message.tool_calls:
            ids = {call.get("id") for call in message.tool_calls}
            if not ids <= results:
                continue
            answered |= ids
        if message.role == Role.TOOL and message.tool_call_id not in answered:
            continue
        kept.append(message)
    return kept


def tool_round(text: str | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """An answer's round that called tools, as the model is sent it back, as history sends it:
    its `content` a string, empty if it said nothing (llama-cpp-python and the chat templates
    it renders refuse a `null` or missing one)."""
    return {"role": "assistant", "content": text or "", "tool_calls": calls}


def as_openai(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = message.tool_calls
    if message.role == Role.TOOL:
        out["tool_call_id"] = message.tool_call_id
    return out


def _assemble(turn: Turn, history: list[Message]) -> list[dict[str, Any]]:
    agent, session, user = turn.agent, turn.session, turn.user
    messages: list[dict[str, Any]] = []
    past = None
    if agent.search_session_history and agent.add_past_sessions_to_context:
        past = tools.past_sessions_block(user, agent, session.session_id)
    extra = "\n\n".join(part for part in (past, turn.system) if part)
    system = system_message(agent, session, user.get_username(), extra)
    if system is not None:
        messages.append(system)
    # Where Agno puts `additional_input`: after the system message, before the history.
    messages.extend(turn.examples)
    messages.extend(as_openai(m) for m in history)
    messages.append({"role": "user", "content": turn.input})
    return messages


@dataclass
class Turn(Place):
    """One new run, for building the messages of many runs at once."""

    input: str
    user: User
    # Few-shot example turns (services/examples.py), sent before the history.
    examples: list[dict[str, Any]] = field(default_factory=list)
    system: str = ""  # the caller's own system text, after the agent's instructions


def build_messages_many(turns: list[Turn]) -> list[list[dict[str, Any]]]:
    """What each new run sends the model, for runs started together (in different sessions)."""
    found = histories(turns)
    return [_assemble(turn, history) for turn, history in zip(turns, found, strict=True)]
