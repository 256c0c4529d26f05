"""A paused run going on: its client's tool results stored, and the model asked again.

A run whose model called one of its client's tools (the OpenAI door's `tools`) is stored PAUSED,
the round with its calls (see generate). The client runs them and sends their results; the same
run goes on, in whichever process is asked: the results are stored as the run's tool messages
and the model is sent what its last call was sent, the round that called the tools and each of
their results, as OpenAI's protocol goes. Its tokens and time add up over its pauses.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from sessions_app.engine.errors import InputError, RunConflict
from sessions_app.engine.live import Ask, LiveRun, Resume, RunOptions
from sessions_app.engine.plan import Before, Plan
from sessions_app.engine.registry import registry
from sessions_app.engine.start import client_tool_names, launch, sampling_for
from sessions_app.models import CallKind, LLMCall, Message, Role, Run, RunStatus, Session, User
from sessions_app.process import WORKER_ID
from sessions_app.services import context, tools
from sessions_app.services.access import get_run_for_owner


async def continue_run(
    user: User, run_id: uuid.UUID, results: dict[str, str], *, options: RunOptions
) -> LiveRun:
    """Go on with the user's paused run, given the result of each tool call it waits for.
    NotFound (not theirs), RunConflict (not paused, or the session went on or is busy),
    InputError (a result missing, or for a call it does not wait for)."""
    registry.check_serving()
    live = LiveRun(Ask(user, "", None, None, None, options, resume=Resume(run_id, results)))
    resumer = registry.batcher(_resume_runs, then=launch, tracked=True)
    return await resumer.submit(live)


def _resume_runs(runs: list[LiveRun]) -> list[LiveRun | Exception]:
    """Each run gone on, or why not: one at a time (they are few)."""
    outcomes: list[LiveRun | Exception] = []
    for live in runs:
        try:
            _resume(live)
        except IntegrityError:
            outcomes.append(RunConflict("A run is already in progress in this session."))
        except Exception as exc:
            outcomes.append(exc)
        else:
            registry.created(live)
            outcomes.append(live)
    return outcomes


def _resume(live: LiveRun) -> None:
    ask = live.ask
    assert ask.resume is not None and isinstance(ask.user, User)
    run = get_run_for_owner(ask.user, ask.resume.run_id)
    live.session, live.agent = run.session, run.agent
    with transaction.atomic():
        round_, stored = _paused_round(run)
        results = _results(round_, stored, ask.resume.results)
        _take_up(run)
        order = _write_results(run, round_, results)
        answer = Message.objects.create(
            run=run, session_id=run.session_id, order=order, role=Role.ASSISTANT
        )
        calls = list(LLMCall.objects.filter(run=run, kind=CallKind.CHAT).order_by("pk"))
        Session.objects.filter(pk=run.session_id).update(updated_at=timezone.now())
    live.plan = Plan(
        run,
        run.session,
        answer.pk,
        _messages(calls, round_, stored, results),
        tools.tool_specs(run.agent) + ask.options.tools,
        sampling_for(live),
        next_order=order + 1,
        client_tools=client_tool_names(ask.options),
        tool_choice=ask.options.tool_choice,
        before=Before(
            run.content, run.time_to_first_token, run.content_seq, len(calls), run.metrics()
        ),
    )
    run.status, run.error, run.finished_at = RunStatus.RUNNING, "", None


def _paused_round(run: Run) -> tuple[Message, dict[str, str]]:
    """The round its model called the client's tools in, and the results already stored of
    it (its agent's own tools), by call id."""
    if run.status != RunStatus.PAUSED:
        raise RunConflict(f"This run is not waiting for tool results (it is {run.status}).")
    if Run.objects.filter(session_id=run.session_id, position__gt=run.position).exists():
        raise RunConflict(
            "The conversation went on after this run: its tool calls can no longer be answered."
        )
    rows = list(Message.objects.filter(run=run).order_by("order"))
    asking = [m for m in rows if m.role == Role.ASSISTANT and m.tool_calls]
    if not asking:
        raise RunConflict("This run has no tool calls to answer.")
    round_ = asking[-1]
    stored = {m.tool_call_id: m.content for m in rows if m.role == Role.TOOL}
    return round_, {
        call["id"]: stored[call["id"]] for call in round_.tool_calls if call["id"] in stored
    }


def _results(round_: Message, stored: dict[str, str], given: dict[str, str]) -> dict[str, str]:
    """The client's results, one for each call it was sent and no more."""
    waiting = [call for call in round_.tool_calls if call["id"] not in stored]
    for call in waiting:
        if call["id"] not in given:
            name = call["function"]["name"]
            raise InputError(f"No result was sent for the tool call {call['id']} ({name}).")
    unknown = sorted(set(given) - {call["id"] for call in waiting})
    if unknown:
        raise InputError(f"The run is not waiting for a result of the tool call {unknown[0]}.")
    return {call["id"]: given[call["id"]] for call in waiting}


def _take_up(run: Run) -> None:
    """PAUSED to RUNNING, once: a second answer of the same calls meets RunConflict, a run
    in progress in the session IntegrityError."""
    taken = Run.objects.filter(pk=run.pk, status=RunStatus.PAUSED).update(
        status=RunStatus.RUNNING,
        worker=WORKER_ID,
        heartbeat_at=timezone.now(),
        cancel_requested=False,
        finished_at=None,
        error="",
    )
    if not taken:
        raise RunConflict("This run's tool calls were answered already.")


def _write_results(run: Run, round_: Message, results: dict[str, str]) -> int:
    """The client's results as the run's tool messages; the order of the row after them."""
    last = Message.objects.filter(run=run).order_by("-order").values_list("order", flat=True)[0]
    rows = [
        Message(
            run=run,
            session_id=run.session_id,
            order=last + n,
            role=Role.TOOL,
            content=content,
            tool_call_id=call_id,
        )
        for n, (call_id, content) in enumerate(results.items(), 1)
    ]
    Message.objects.bulk_create(rows)
    return last + len(rows) + 1


def _messages(
    calls: list[LLMCall], round_: Message, stored: dict[str, str], results: dict[str, str]
) -> list[dict[str, Any]]:
    """What the model is sent: what its last call was, the round, each call's result."""
    if not calls or calls[-1].sent_messages is None:
        raise RunConflict("This run's request to the model was not kept: it cannot go on.")
    reply = context.tool_round(round_.content, round_.tool_calls)
    answered = {**stored, **results}
    return [
        *calls[-1].sent_messages,
        reply,
        *(
            {"role": "tool", "tool_call_id": call["id"], "content": answered[call["id"]]}
            for call in round_.tool_calls
        ),
    ]
