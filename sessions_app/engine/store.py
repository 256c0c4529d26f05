"""The rows a streaming run writes: its tool rounds, its partial answer, and how it ended.

Checkpoints and finishes are batched across runs (see dbthread): under load many runs save in
the same moment. Each save is one conditional UPDATE, so a run finished or stopped elsewhere
meanwhile is never overwritten.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import Count
from django.utils import timezone

from sessions_app import dbclock, signals
from sessions_app.engine import toolcalls
from sessions_app.engine.live import LiveRun
from sessions_app.engine.plan import Plan
from sessions_app.engine.registry import registry
from sessions_app.llm import client as llm
from sessions_app.llm.usage import Usage
from sessions_app.models import (
    ACTIVE_STATUSES,
    CallKind,
    LLMCall,
    Message,
    Role,
    Run,
    RunStatus,
    Session,
)
from sessions_app.services import outage, tools
from sessions_app.usage import accounting

log = logging.getLogger("parley.runs")

# How long a finished answer, held only in memory, waits for an unavailable database (a restart,
# a failover, a full disk being cleared) before it is given up.
FINISH_PATIENCE = 60.0


@dataclass
class Call:
    """One request to the model within a run, as it will be recorded in LLMCall."""

    usage: Usage
    model: str
    time_to_first_token: float | None
    duration: float
    ok: bool
    sent: list[dict[str, Any]]
    error: str = ""


def record_call(
    run: Run,
    messages: list[dict[str, Any]],
    text: str,
    end: llm.StreamEnd | None,
    first: float | None,
    duration: float,
) -> Call:
    sent = list(messages)  # the caller extends its list with the next round's messages
    if end is not None:
        return Call(end.usage, end.model or run.model, first, duration, ok=True, sent=sent)
    # The upstream never reported usage for a broken or stopped answer: count what we have.
    usage = Usage(
        input_tokens=sum(len(m.get("content") or "") for m in messages) // 4,
        output_tokens=(len(text) + 3) // 4,
        estimated=True,
    )
    return Call(usage, run.model, first, duration, ok=False, sent=sent)


def save_tool_round(
    plan: Plan, assistant_id: int, text: str, asked: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], int]:
    """Store the model's tool calls, run them, store their results; a new answer row follows.
    The results as the model is sent them, and the new answer row's id."""
    run = plan.run
    results: list[dict[str, Any]] = []
    with transaction.atomic():
        Message.objects.filter(pk=assistant_id).update(content=text, tool_calls=asked)
        for call in asked:
            result = tools.run_tool(run, call)
            Message.objects.create(
                run=run,
                session_id=run.session_id,
                order=plan.next_order,
                role=Role.TOOL,
                content=result,
                tool_call_id=call.get("id", ""),
            )
            plan.next_order += 1
            results.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": result})
        answer = Message.objects.create(
            run=run, session_id=run.session_id, order=plan.next_order, role=Role.ASSISTANT
        )
        plan.next_order += 1
    return results, answer.pk


def save_paused_round(
    plan: Plan, assistant_id: int, text: str, asked: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A round that called the client's tools: stored with the calls, the agent's own among
    them run now (their results stored). The client's calls, as the client is given them."""
    run = plan.run
    calls = toolcalls.with_ids(asked)
    theirs = [call for call in calls if call["function"]["name"] in plan.client_tools]
    with transaction.atomic():
        Message.objects.filter(pk=assistant_id).update(content=text, tool_calls=calls)
        for call in calls:
            if call in theirs:
                continue
            Message.objects.create(
                run=run,
                session_id=run.session_id,
                order=plan.next_order,
                role=Role.TOOL,
                content=tools.run_tool(run, call),
                tool_call_id=call["id"],
            )
            plan.next_order += 1
    return [toolcalls.for_client(run.run_id, call) for call in theirs]


async def checkpoint(live: LiveRun, content: str, seq: int) -> bool:
    """Save the partial answer; False when the run was cancelled from elsewhere. A database
    that is unavailable for now skips this one: the answer goes on, and the next save has it."""
    try:
        saved = await registry.batcher(_save_checkpoints).submit((live.run_id, content, seq))
    except DatabaseError as exc:
        if outage.describe(exc) is None:
            raise
        log.warning("run %s: partial answer not saved: %s", live.run_id, exc)
        return True
    if not saved:
        live.cancel_requested = True
    return bool(saved)


def _save_checkpoints(items: list[tuple[uuid.UUID, str, int]]) -> list[bool]:
    """Every due checkpoint in one transaction: which runs may go on (still running, and not
    asked to stop by another process). One conditional UPDATE each: a bulk update's CASE per
    column and row costs Django more to build than separate statements cost to run."""
    now = dbclock.now()
    with transaction.atomic() if len(items) > 1 else contextlib.nullcontext():
        return [
            bool(
                Run.objects.filter(
                    pk=run_id, status=RunStatus.RUNNING, cancel_requested=False
                ).update(content=content, content_seq=seq, heartbeat_at=now)
            )
            for run_id, content, seq in items
        ]


@dataclass
class Finish:
    """How a run ended, to be stored."""

    run: Run
    status: str
    content: str
    error: str
    calls: list[Call]
    assistant_id: int
    final_text: str  # of the last answer row (earlier rounds' text is in their rows)
    first_token: float | None
    # Set when a try failed: it may have been committed all the same (a connection lost as it
    # committed), so the calls are written only if they are not there yet.
    retried: bool = False
    # The status this finish stored, once committed (empty: not stored by it).
    stored: str = ""
    seq: int = 0  # paused: the seq of its pause event, which a run going on streams after
    # A paused run gone on: how many of its model calls were stored before (its totals
    # count them too).
    calls_before: int = 0


async def finish(ending: Finish) -> Run:
    """Store how the run ended; the run as stored (or as another process left it). While the
    database is unavailable, tried again for FINISH_PATIENCE seconds; then DatabaseError."""
    deadline = time.monotonic() + FINISH_PATIENCE
    pause = 0.1
    while True:
        try:
            return await registry.batcher(_finish_runs, after=_tell_ended).submit(ending)
        except DatabaseError as exc:
            if outage.describe(exc) is None or time.monotonic() + pause > deadline:
                raise
            log.warning("run %s: its end not saved yet (%s); trying again", ending.run.pk, exc)
            ending.retried = True
        await asyncio.sleep(pause)
        pause = min(pause * 2, 2.0)


def _finish_runs(items: list[Finish]) -> list[Run]:
    """The outcomes of runs that ended together, in one transaction."""
    now = timezone.now()
    with transaction.atomic():
        rows = [[_call_row(item.run, call) for call in item.calls] for item in items]
        LLMCall.objects.bulk_create(_calls_not_stored(items, rows))
        resumed = _all_calls([item.run.pk for item in items if item.calls_before])
        session_ids = {item.run.session_id for item in items}
        states = dict(Session.objects.filter(pk__in=session_ids).values_list("pk", "session_state"))
        outcomes = [
            {
                "status": item.status,
                "content": item.content,
                "error": item.error,
                "finished_at": now,
                "content_seq": item.seq,
                "session_state": states.get(item.run.session_id),
                **accounting.totals(resumed.get(item.run.pk, per_run)),
                # The first token the user saw, whatever tool rounds came first.
                "time_to_first_token": item.first_token,
            }
            for item, per_run in zip(items, rows, strict=True)
        ]
        finished = set()
        for item, outcome in zip(items, outcomes, strict=True):
            # Not over a run that another process marked interrupted meanwhile.
            if Run.objects.filter(pk=item.run.pk, status__in=ACTIVE_STATUSES).update(**outcome):
                finished.add(item.run.pk)
            Message.objects.filter(pk=item.assistant_id).update(content=item.final_text)
        Session.objects.filter(pk__in=session_ids).update(updated_at=now)
    stored = []
    for item, outcome in zip(items, outcomes, strict=True):
        run = item.run
        if run.pk not in finished:  # reaped meanwhile: that record stands
            found = Run.objects.select_related("agent", "session", "user").get(pk=run.pk)
            if item.retried and found.status == item.status:  # the failed try was committed
                item.stored = item.status
            stored.append(found)
            continue
        for name, value in outcome.items():
            setattr(run, name, value)
        item.stored = item.status
        stored.append(run)
    return stored


def _tell_ended(items: list[Finish]) -> None:
    """After each batch of ends, on the loop: the runs it ended, to whoever listens
    (signals.run_finished). Never raises: the batcher's next items must be stored."""
    ended = {item.run.pk: item.stored for item in items if item.stored}
    if not ended:
        return
    try:
        signals.send_run_finished(ended)
    except Exception:
        log.exception("the ends of %d run(s) were not told", len(ended))


def _all_calls(run_ids: list[Any]) -> dict[Any, list[LLMCall]]:
    """The model calls stored of runs gone on after a pause, those of this finish included."""
    found: dict[Any, list[LLMCall]] = {}
    if run_ids:
        stored = LLMCall.objects.filter(run_id__in=run_ids, kind=CallKind.CHAT)
        for call in stored.defer("sent_messages"):
            found.setdefault(call.run_id, []).append(call)
    return found


def _calls_not_stored(items: list[Finish], rows: list[list[Any]]) -> list[Any]:
    """The call rows to write: a retried finish's only if its first try left none."""
    retried = [item.run.pk for item in items if item.retried]
    stored: dict[Any, int] = {}
    if retried:
        chat_calls = LLMCall.objects.filter(run_id__in=retried, kind=CallKind.CHAT)
        counted = chat_calls.order_by().values("run_id").annotate(n=Count("pk"))
        stored = dict(counted.values_list("run_id", "n"))
    kept = [
        per_run
        for item, per_run in zip(items, rows, strict=True)
        if stored.get(item.run.pk, 0) <= item.calls_before
    ]
    return [row for per_run in kept for row in per_run]


def _call_row(run: Run, call: Call) -> Any:
    return accounting.call_row(
        usage=call.usage,
        model=call.model,
        model_provider=run.model_provider,
        duration=call.duration,
        ok=call.ok,
        error=call.error,
        time_to_first_token=call.time_to_first_token,
        sent_messages=call.sent,
        kind=CallKind.CHAT,
        run=run,
        session_id=run.session_id,
        user_id=run.user_id,
        agent_id=run.agent_id,
    )
