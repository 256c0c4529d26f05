"""Tools an agent may offer its model, and what they return.

Every tool runs as the user who owns the run: the sessions it can read are that user's own,
filtered by owner in the query itself, whatever ids the model makes up. (Agno 2.2's async path
read other users' sessions here.) A run started with a token limited to some agents reads only
their sessions, as the token itself could.
"""

from __future__ import annotations

import json
from typing import Any

from sessions_app.ids import session_id_or_none
from sessions_app.models import Agent, Message, Role, Run, RunStatus, Session, User
from sessions_app.services import statesize
from sessions_app.services.access import in_scope

# Bounds on what a tool hands back, so one call cannot flood the context window.
MAX_CHARS_PER_MESSAGE = 2_000
MAX_CHARS_PER_SESSION = 8_000
MAX_SESSIONS = 10

GET_PREVIOUS = "get_previous_session_messages"
READ_PAST = "read_past_session"
UPDATE_STATE = "update_session_state"


class ToolError(Exception):
    """A tool call the model got wrong; its message goes back to the model as the result."""


def tool_specs(agent: Agent) -> list[dict[str, Any]]:
    specs: list[dict[str, Any]] = []
    if agent.search_session_history and not agent.add_past_sessions_to_context:
        specs.append(
            _function(
                GET_PREVIOUS,
                "Get the user and assistant messages of the user's most recent previous "
                "sessions (newest first), to recall earlier conversations.",
                {"type": "object", "properties": {}, "required": []},
            )
        )
        specs.append(
            _function(
                READ_PAST,
                "Read one whole previous session of the user, by its session_id.",
                {
                    "type": "object",
                    "properties": {"session_id": {"type": "string"}},
                    "required": ["session_id"],
                },
            )
        )
    if agent.enable_agentic_state:
        specs.append(
            _function(
                UPDATE_STATE,
                "Set keys of the session state (a JSON object kept with this conversation). "
                "Keys given replace their values; a null value removes the key.",
                {
                    "type": "object",
                    "properties": {"changes": {"type": "object"}},
                    "required": ["changes"],
                },
            )
        )
    return specs


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _dialogue(session: Session, limit: int = MAX_CHARS_PER_SESSION) -> list[dict[str, str]]:
    """The user and final assistant messages of a session's completed runs, in order."""
    rows = (
        Message.objects.filter(
            session=session,
            run__status=RunStatus.COMPLETED,
            role__in=(Role.USER, Role.ASSISTANT),
            tool_calls__isnull=True,
        )
        .order_by("run__position", "order")
        .values_list("role", "content")
    )
    out: list[dict[str, str]] = []
    used = 0
    for role, content in rows:
        if not content:
            continue
        piece = _clip(content, MAX_CHARS_PER_MESSAGE)
        if used + len(piece) > limit:
            break
        used += len(piece)
        out.append({"role": role, "content": piece})
    return out


def previous_sessions(user: User, current_session_id: Any, count: int) -> list[dict[str, Any]]:
    """The user's last `count` sessions other than the current one, newest first."""
    sessions = (
        in_scope(user, Session.objects.filter(user=user))  # the owner's: the whole point
        .exclude(pk=current_session_id)
        .order_by("-created_at")[: max(0, min(count, MAX_SESSIONS))]
    )
    return [
        {
            "session_id": str(s.session_id),
            "session_name": s.session_name,
            "created_at": s.created_at.isoformat(),
            "messages": _dialogue(s),
        }
        for s in sessions
    ]


def read_past_session(user: User, current_session_id: Any, session_id: Any) -> dict[str, Any]:
    wanted = session_id_or_none(session_id)
    if wanted is None:
        raise ToolError("No such session.")
    owned = in_scope(user, Session.objects.filter(user=user, pk=wanted))
    session = owned.exclude(pk=current_session_id).first()
    if session is None:
        raise ToolError("No such session.")
    return {
        "session_id": str(session.session_id),
        "session_name": session.session_name,
        "created_at": session.created_at.isoformat(),
        "messages": _dialogue(session, limit=MAX_CHARS_PER_SESSION * 2),
    }


def update_session_state(session_id: Any, changes: Any) -> dict[str, Any]:
    if not isinstance(changes, dict):
        raise ToolError("changes must be a JSON object.")
    session = Session.objects.select_for_update().get(pk=session_id)
    state = dict(session.session_state or {})
    for key, value in changes.items():
        if value is None:
            state.pop(str(key), None)
        else:
            state[str(key)] = value
    try:
        statesize.check("session_state", state)
    except statesize.StateTooLarge as exc:
        # Told to the model, which may store less; the state stays as it was.
        raise ToolError(f"{exc} Nothing was changed.") from exc
    session.session_state = state
    session.save(update_fields=["session_state", "updated_at"])
    return state


def run_tool(run: Run, call: dict[str, Any]) -> str:
    """Execute one tool call for `run`; the result (or a readable error) as the tool message."""
    from django.db import transaction

    name = call.get("function", {}).get("name", "")
    raw = call.get("function", {}).get("arguments") or "{}"
    try:
        arguments = json.loads(raw) if raw.strip() else {}
        if not isinstance(arguments, dict):
            raise ToolError("Arguments must be a JSON object.")
        agent = run.agent
        if name == GET_PREVIOUS and agent.search_session_history:
            result: Any = previous_sessions(run.user, run.session_id, agent.num_history_sessions)
        elif name == READ_PAST and agent.search_session_history:
            result = read_past_session(run.user, run.session_id, arguments.get("session_id"))
        elif name == UPDATE_STATE and agent.enable_agentic_state:
            with transaction.atomic():
                result = update_session_state(run.session_id, arguments.get("changes"))
        else:
            raise ToolError(f"Unknown tool {name!r}.")
    except json.JSONDecodeError:
        return json.dumps({"error": "Arguments were not valid JSON."})
    except ToolError as exc:
        return json.dumps({"error": str(exc)})
    return json.dumps(result, ensure_ascii=False)


def past_sessions_block(user: User, agent: Agent, current_session_id: Any) -> str | None:
    """The same material as the tool, for the system message of models without tools."""
    sessions = previous_sessions(user, current_session_id, agent.num_history_sessions)
    if not sessions:
        return None
    return (
        "Here are messages from the user's previous sessions, newest first:\n\n"
        f"<previous_sessions>\n{json.dumps(sessions, ensure_ascii=False)}\n</previous_sessions>"
    )
