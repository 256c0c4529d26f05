"""A session's events as the chat page shows them: the snapshot as the whole conversation, each
later event as the fragment (htmx out-of-band swap) that updates it."""

from __future__ import annotations

from channels.db import database_sync_to_async

from sessions_app import events
from sessions_app.models import ACTIVE_STATUSES, Run, Session
from sessions_app.web import rendering

STATUS_OF = {"RunCompleted": "COMPLETED", "RunCancelled": "CANCELLED", "RunPaused": "PAUSED"}


async def page(session: Session, snapshot: events.Event, new: bool, known: tuple) -> str:
    """The session as it stands: every run, the streaming one with its answer so far."""
    runs, streamed = snapshot["runs"], snapshot["streamed"]
    used, waiting = await database_sync_to_async(rendering.tools_of)(session, runs)
    views = [
        rendering.run_view(
            run,
            streaming_text=streamed.get(str(run.run_id)),
            tools=used.get(str(run.run_id)),
            waiting=waiting.get(str(run.run_id)),
        )
        for run in runs
    ]
    active = next((str(run.run_id) for run in runs if run.is_active), None)
    last = runs[-1] if runs else None
    unchanged = not active and last is not None and known == (str(last.run_id), last.status)
    parts = [] if unchanged else [rendering.render_messages(views)]
    parts.append(rendering.render_composer_actions(active))
    if new:
        parts.append(rendering.render_new_session(session))
    return "".join(parts)


async def fragment(event: events.Event) -> str:
    """An event as the HTML that shows it."""
    kind, run_id = event["event"], event.get("run_id")
    if kind == "RunStarted":
        view = rendering.answer_view(
            run_id=run_id, status="RUNNING", input=event["input"], content=""
        )
        run = rendering.render_run(view)
        messages = f'<div id="messages" hx-swap-oob="beforeend">{run}</div>'
        return messages + rendering.render_composer_actions(run_id)
    if kind == "RunContent":
        return rendering.render_piece(run_id, event["content"])
    if kind == "RunContinued":  # a paused run's client sent its tools' results
        view = rendering.answer_view(
            run_id=run_id, status="RUNNING", input="", content=event["content"]
        )
        return rendering.render_assistant(view, oob=True) + rendering.render_composer_actions(
            run_id
        )
    if kind == "SessionRenamed":
        return rendering.render_title(await Session.objects.aget(pk=event["session_id"]))
    if kind == "RunReaped":  # its process died: the run as stored, up to its last checkpoint
        reaped = await Run.objects.aget(pk=event["reaped_run_id"])
        # A run started since (the reap may have made room for it) keeps the Stop button.
        active = Run.objects.filter(session_id=reaped.session_id, status__in=ACTIVE_STATUSES)
        newer = await active.values_list("pk", flat=True).afirst()
        view = rendering.run_view(reaped)
        actions = rendering.render_composer_actions(str(newer) if newer else None)
        return rendering.render_assistant(view, oob=True) + actions
    if kind == "RunSnapshot":  # what another process has streamed, or the run as stored
        run = event["run"]
        view = rendering.run_view(run, streaming_text=event["content"] if run.is_active else None)
        finished = "" if run.is_active else rendering.render_composer_actions(None)
        return rendering.render_assistant(view, oob=True) + finished
    view = rendering.answer_view(
        run_id=run_id,
        status=STATUS_OF.get(kind, event.get("status", "ERROR")),
        input="",
        content=event.get("content", ""),
        error=event.get("error", ""),
        metrics=event.get("metrics"),
        tools=event.get("tools"),
        waiting=[call["function"]["name"] for call in event.get("tool_calls", ())],
    )
    return rendering.render_assistant(view, oob=True) + rendering.render_composer_actions(None)
