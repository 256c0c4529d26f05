"""What a share link shows, taken from a session as it is: its title, agent and finished runs
(an answer still streaming is left out), and the tools used only when the owner chose so."""

from __future__ import annotations

from typing import Any

from sessions_app.models import ACTIVE_STATUSES, Message, Role, Run, Session
from sessions_app.services.sessions import session_title


def take(session: Session, show_tools: bool) -> dict[str, Any]:
    runs = list(
        Run.objects.filter(session=session)
        .exclude(status__in=ACTIVE_STATUSES)
        .order_by("position")
        .values("run_id", "status", "input", "content")
    )
    tools = _tools(session) if show_tools else {}
    return {
        "title": session_title(session),
        "agent": session.agent.name,
        "runs": [
            {
                "input": run["input"],
                "content": run["content"],
                "status": run["status"].lower(),
                "tools": tools.get(str(run["run_id"]), []),
            }
            for run in runs
        ],
    }


def _tools(session: Session) -> dict[str, list[dict[str, str]]]:
    """Each run's tool calls, with what each returned, in order."""
    rows = (
        Message.objects.filter(session=session)
        .exclude(tool_calls__isnull=True, tool_call_id="")
        .order_by("run__position", "order")
        .values_list("run_id", "role", "tool_calls", "tool_call_id", "content")
    )
    found: dict[str, list[dict[str, str]]] = {}
    by_id: dict[str, dict[str, str]] = {}
    for run_id, role, calls, call_id, content in rows:
        if role == Role.ASSISTANT and calls:
            for call in calls:
                function = call.get("function", {})
                shown = {
                    "name": function.get("name", ""),
                    "arguments": function.get("arguments", ""),
                    "result": "",
                }
                found.setdefault(str(run_id), []).append(shown)
                by_id[call.get("id", "")] = shown
        elif role == Role.TOOL and call_id in by_id:
            by_id[call_id]["result"] = content
    return found
