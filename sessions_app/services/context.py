"""What the model is sent for a run: system message, session history, the new user message.

The order and selection follow Agno 2.2 (CONTRACT §6). History is rebuilt from stored Message rows
of earlier COMPLETED runs; nothing of it is copied into the new run.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sessions_app.models import Agent, Message, Role, Run, RunStatus, Session, User
from sessions_app.services import statements, tools

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


def history_messages(agent: Agent, session: Session, before_position: int) -> list[Message]:
    """The stored messages of earlier completed runs that the agent is configured to see."""
    if not agent.add_history_to_context or before_position <= 1:
        return []
    completed = Run.objects.filter(
        session=session, status=RunStatus.COMPLETED, position__lt=before_position
    ).order_by("-position")
    messages = Message.objects.filter(session=session).exclude(role=Role.SYSTEM)
    if agent.num_history_messages is not None:
        limit = agent.num_history_messages
        if limit == 0:
            return []
        rows = list(
            messages.filter(run__in=completed.values("pk")).order_by("-run__position", "-order")[
                :limit
            ]
        )
    else:
        if agent.num_history_runs == 0:
            return []
        last_runs = list(completed.values_list("pk", flat=True)[: agent.num_history_runs])
        rows = list(messages.filter(run__in=last_runs).order_by("-run__position", "-order"))
    rows.reverse()
    return drop_dangling_tool_calls(rows)


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
    system = system_message(agent, session, user.get_username(), past)
    if system is not None:
        messages.append(system)
    # Where Agno puts `additional_input`: after the system message, before the history.
    messages.extend(turn.examples)
    messages.extend(as_openai(m) for m in history)
    messages.append({"role": "user", "content": turn.input})
    return messages


@dataclass
class Turn:
    """One new run's place, for building the messages of many runs at once."""

    agent: Agent
    session: Session
    position: int
    input: str
    user: User
    # Few-shot example turns (datasets_app.services.fewshot), sent before the history.
    examples: list[dict[str, Any]] = field(default_factory=list)


def build_messages_many(turns: list[Turn]) -> list[list[dict[str, Any]]]:
    """What each new run sends the model, for runs started together (in different sessions):
    the history of every session counting its last runs comes from one query in all."""
    by_runs = [
        t
        for t in turns
        if t.agent.add_history_to_context
        and t.position > 1
        and t.agent.num_history_messages is None
        and t.agent.num_history_runs
    ]
    histories: dict[Any, list[Message]] = defaultdict(list)
    if by_runs:
        deepest = max(t.agent.num_history_runs for t in by_runs)
        wanted = {t.session.pk: t.agent.num_history_runs for t in by_runs}
        # One query: the messages of each session's last `deepest` completed runs (a window
        # function in a subquery); sessions whose agent sees fewer runs are cut below.
        rows = statements.last_runs_messages(list(wanted), deepest)
        positions: dict[Any, set[int]] = defaultdict(set)
        for message in rows:
            positions[message.session_id].add(message.run_position)
        kept = {
            session_id: set(sorted(found)[-wanted[session_id] :])
            for session_id, found in positions.items()
        }
        for message in rows:
            if message.run_position in kept[message.session_id]:
                histories[message.session_id].append(message)
    batched = {id(t) for t in by_runs}
    out = []
    for turn in turns:
        if id(turn) in batched:
            history = drop_dangling_tool_calls(histories.get(turn.session.pk, []))
        else:
            history = history_messages(turn.agent, turn.session, turn.position)
        out.append(_assemble(turn, history))
    return out
