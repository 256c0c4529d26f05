"""A session or a run as its user saw it, for staff: the turns rendered and sanitized as in the
chat (Markdown on the server, then nh3), tool calls folded, figures formatted for people."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.utils.html import escape, linebreaks
from django.utils.safestring import SafeString, mark_safe

from sessions_app.admin import display
from sessions_app.models import LLMCall, Message, Role, Run, Session
from sessions_app.services.markdown import render_markdown

RUNS_PER_PAGE = 100


@dataclass
class Turn:
    role: str
    html: SafeString
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    tool_call_id: str = ""


@dataclass
class RunEntry:
    run: Run
    turns: list[Turn]
    metrics: list[tuple[str, str]]
    state: Any = None  # the session state as this run left it, when the run changed it
    state_changed: bool = False


def turn(role: str, content: str | None, tool_calls: Any = None, tool_call_id: str = "") -> Turn:
    """One message as HTML: the model's Markdown rendered, everything else shown as written."""
    if role == Role.ASSISTANT:
        html = mark_safe(render_markdown(content or ""))  # sanitized by nh3
    elif role == Role.TOOL:
        html = mark_safe(f"<pre>{escape(content or '')}</pre>")
    else:
        html = mark_safe(linebreaks(escape(content or "")))
    return Turn(role, html, [_call(c) for c in tool_calls or ()], tool_call_id or "")


def _call(call: dict[str, Any]) -> dict[str, str]:
    function = call.get("function") or {}
    arguments = function.get("arguments") or ""
    try:
        arguments = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        pass
    return {"id": call.get("id", ""), "name": function.get("name", ""), "arguments": arguments}


def run_entries(runs: list[Run], messages: list[Message], state_before: Any) -> list[RunEntry]:
    by_run: dict[Any, list[Turn]] = {}
    for m in messages:
        by_run.setdefault(m.run_id, []).append(
            turn(m.role, m.content, m.tool_calls, m.tool_call_id)
        )
    entries = []
    for run in runs:
        entry = RunEntry(run, by_run.get(run.pk, []), display.metrics(run), run.session_state)
        entry.state_changed = run.session_state is not None and run.session_state != state_before
        if run.session_state is not None:
            state_before = run.session_state
        entries.append(entry)
    return entries


def session_transcript(session: Session, page_number: Any = 1) -> dict[str, Any]:
    """One page of a session's runs with their messages, and its other model calls."""
    runs = Run.objects.filter(session=session).order_by("position")
    page: Page = Paginator(runs, RUNS_PER_PAGE).get_page(page_number)
    shown = list(page.object_list)
    messages = Message.objects.filter(run__in=[r.pk for r in shown]).order_by("run_id", "order")
    before = _state_before(session, shown[0]) if shown else None
    return {
        "entries": run_entries(shown, list(messages), before),
        "page": page,
        "other_calls": [_shown(call) for call in _other_calls(session)],
    }


def _other_calls(session: Session) -> list[LLMCall]:
    """Its title and summary calls, which belong to no run."""
    calls = LLMCall.objects.filter(session=session, run__isnull=True).defer("sent_messages")
    return list(calls.order_by("created_at"))


def _shown(call: LLMCall) -> LLMCall:
    call.tokens_shown = display.tokens(call.total_tokens)
    call.duration_shown = display.duration(call.duration)
    call.cost_shown = display.cost(call.cost, call.usage_estimated)
    return call


def _state_before(session: Session, first: Run) -> Any:
    if first.position == 1:
        return {}
    earlier = Run.objects.filter(session=session, position__lt=first.position)
    return (
        earlier.exclude(session_state=None)
        .order_by("-position")
        .values_list("session_state", flat=True)
        .first()
    )


def run_detail(run: Run) -> dict[str, Any]:
    """A run's own messages, and each model call with what it was sent."""
    messages = list(run.messages.order_by("order"))
    calls = list(run.llm_calls.order_by("created_at", "pk"))
    return {
        "turns": [turn(m.role, m.content, m.tool_calls, m.tool_call_id) for m in messages],
        "calls": [
            {
                "call": call,
                "metrics": display.metrics(call),
                "sent": sent_turns(call),
            }
            for call in calls
        ],
    }


def sent_turns(call: LLMCall) -> list[Turn]:
    """What the model saw in this call: system message, history, tool results, the question."""
    return [
        turn(m.get("role", ""), m.get("content"), m.get("tool_calls"), m.get("tool_call_id", ""))
        for m in call.sent_messages or ()
    ]
