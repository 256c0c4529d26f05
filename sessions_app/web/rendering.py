"""HTML for runs and chat fragments, shared by the page views and the WebSocket consumer."""

from __future__ import annotations

from itertools import groupby
from operator import itemgetter
from typing import Any

from django.template.loader import render_to_string
from django.utils.html import format_html

from sessions_app.models import Message, Run, RunStatus, Session, usage_known
from sessions_app.services.markdown import render_markdown
from sessions_app.services.sessions import session_title
from sessions_app.web import links


def tools_by_run(session: Session) -> dict[str, list[dict[str, str]]]:
    """The tool calls of every run of a session, in one query, for folding under answers."""
    used: dict[str, list[dict[str, str]]] = {}
    rows = (
        Message.objects.filter(session=session, tool_calls__isnull=False)
        .order_by("run__position", "order")
        .values_list("run_id", "tool_calls")
    )
    for run_id, calls in rows:
        used.setdefault(str(run_id), []).extend(map(tool_shown, calls or ()))
    return used


def tools_of(
    session: Session, runs: list[Run]
) -> tuple[dict[str, list[dict[str, str]]], dict[str, list[str]]]:
    """The tool calls of every run of a session (see tools_by_run), and the tools each of
    `runs` that is paused waits for its client to run."""
    paused = [run.run_id for run in runs if run.status == RunStatus.PAUSED]
    return tools_by_run(session), waiting_for(paused)


def waiting_for(run_ids: list[Any]) -> dict[str, list[str]]:
    """For each paused run, its last round's calls that have no result yet, by name."""
    waiting: dict[str, list[str]] = {}
    rows = (
        Message.objects.filter(run_id__in=run_ids)
        .order_by("run_id", "order")
        .values_list("run_id", "tool_calls", "tool_call_id")
    )
    for run_id, of_run in groupby(rows, key=itemgetter(0)):
        last: list[dict[str, Any]] = []
        answered: set[str] = set()
        for _, calls, call_id in of_run:
            if calls:
                last, answered = calls, set()
            elif call_id:
                answered.add(call_id)
        waiting[str(run_id)] = [c["function"]["name"] for c in last if c["id"] not in answered]
    return waiting


def tool_shown(call: dict[str, Any]) -> dict[str, str]:
    """A tool call as the page lists it under its answer."""
    function = call.get("function", {})
    return {"name": function.get("name", ""), "arguments": function.get("arguments", "")}


def run_view(
    run: Run,
    *,
    streaming_text: str | None = None,
    tools: list[dict[str, str]] | None = None,
    waiting: list[str] | None = None,
) -> dict[str, Any]:
    """What the templates need of one run; `streaming_text` overrides the saved partial."""
    active = run.status in (RunStatus.PENDING, RunStatus.RUNNING)
    return answer_view(
        tools=tools,
        waiting=waiting,
        run_id=str(run.run_id),
        status=run.status,
        input=run.input,
        content=streaming_text if streaming_text is not None else run.content,
        error=run.error,
        metrics=None if active else run.metrics(),
        rating=run.feedback_rating,
    )


def answer_view(
    *,
    run_id: str,
    status: str,
    input: str,
    content: str,
    error: str = "",
    metrics: dict[str, Any] | None = None,
    rating: int | None = None,
    tools: list[dict[str, str]] | None = None,
    waiting: list[str] | None = None,
) -> dict[str, Any]:
    active = status in (RunStatus.PENDING, RunStatus.RUNNING)
    return {
        "tools": tools or [],
        "waiting": waiting or [],  # paused: the tools its client is to run
        "run_id": run_id,
        "status": status.lower(),
        "active": active,
        "input": input,
        "content": content,
        "html": None if active else render_markdown(content),
        "error": error,
        "metrics": metrics,
        # Zeros nobody counted (a run its process left) are not shown as "0 tokens".
        "usage_known": metrics is not None and usage_known(status, metrics),
        "rating": rating,
    }


def render_run(view: dict[str, Any]) -> str:
    return render_to_string("sessions_app/_run.html", {"r": view})


def render_assistant(view: dict[str, Any], *, oob: bool = False) -> str:
    return render_to_string("sessions_app/_assistant.html", {"r": view, "oob": oob})


def render_messages(runs: list[dict[str, Any]]) -> str:
    """The whole message list, swapped in place of what the page shows."""
    return render_to_string("sessions_app/_messages.html", {"runs": runs, "oob": True})


def render_composer_actions(active_run_id: str | None) -> str:
    return render_to_string(
        "sessions_app/_composer_actions.html", {"active_run_id": active_run_id, "oob": True}
    )


def render_session_item(session: Session, *, current: bool = False, oob: str = "") -> str:
    """One sidebar entry; `oob` is "afterbegin" (a new chat on top) or "outerHTML" (changed)."""
    return render_to_string(
        "sessions_app/_session_item.html", {"s": session, "current": current, "oob": oob}
    )


def render_piece(run_id: str, text: str) -> str:
    return format_html('<span hx-swap-oob="beforeend:#run-{}-text">{}</span>', run_id, text)


def render_notice(message: str) -> str:
    return format_html(
        '<div id="notice" hx-swap-oob="innerHTML"><div class="alert" role="alert" '
        'data-testid="chat-notice">{}</div></div>',
        message,
    )


def render_new_session(session: Session) -> str:
    """A first message created a session: the page now shows it (header, sidebar, composer)."""
    header = render_to_string(
        "sessions_app/_conv_header.html",
        # The asker's own new chat: every control is theirs.
        {
            "session": session,
            "title": session_title(session),
            "may_change": True,
            "may_delete": True,
            "links": links.links_for(session, own=True),
        },
    )
    return (
        format_html(
            '<input type="hidden" id="composer-session" name="session_id" value="{}" '
            'hx-swap-oob="true">',
            session.session_id,
        )
        + f'<header id="conv-header" hx-swap-oob="innerHTML">{header}</header>'
        + '<div id="agent-picker" hx-swap-oob="delete"></div>'
        + '<div id="agent-examples" hx-swap-oob="delete"></div>'
        + render_session_item(session, current=True, oob="afterbegin")
    )


def render_title(session: Session) -> str:
    """A new title for the header and the sidebar entry of the session shown."""
    return format_html(
        '<h1 class="session-title" data-testid="session-title" id="session-title" '
        'hx-swap-oob="true">{}</h1>',
        session_title(session),
    ) + render_session_item(session, current=True, oob="outerHTML")
