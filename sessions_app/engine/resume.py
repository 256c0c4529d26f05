"""A paused run going on: its client's tool results stored, and the model asked again.

A run whose model called one of its client's tools (the OpenAI door's `tools`) is stored PAUSED,
the round with its calls (see generate). The client runs them and sends their results; the same
run goes on, in whichever process is asked: the results are stored as the run's tool messages
and the model is sent what its last call was sent, the round that called the tools and each of
their results, as OpenAI's protocol goes. Its tokens and time add up over its pauses.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from sessions_app import dbclock
from sessions_app.engine import toolcalls
from sessions_app.engine.creation import sampling_for
from sessions_app.engine.errors import InputError, RunConflict
from sessions_app.engine.live import Ask, LiveRun, Resume, RunOptions
from sessions_app.engine.plan import Before, Plan
from sessions_app.engine.registry import registry
from sessions_app.engine.start import launch
from sessions_app.models import CallKind, LLMCall, Message, Role, Run, RunStatus, Session, User
from sessions_app.process import WORKER_ID
from sessions_app.services import admission, context, ratelimit, tools
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
    """Everything the run is sent is read before it is taken up: a failure leaves it as it was."""
    ask = live.ask
    assert ask.resume is not None and isinstance(ask.user, User)
    run = get_run_for_owner(ask.user, ask.resume.run_id)
    live.session, live.agent = run.session, run.agent
    refusal = ratelimit.refusals(ask.user, [(ratelimit.RUN,)])[0]
    if refusal is not None:
        raise refusal
    admission.check(ask.user, run.agent_id)
    with transaction.atomic():
        round_ = _last_round(run)
        given = ask.resume.results
        again = _asked_again(run, round_, given)
        results = {} if again else _results(run, round_, given)
        calls = list(LLMCall.objects.filter(run=run, kind=CallKind.CHAT).order_by("pk"))
        messages = _messages(calls, round_, results, again)
        before = Before(
            round_.said, run.time_to_first_token, run.content_seq, len(calls), run.metrics()
        )
        _take_up(run)
        answer, order = _answer_row(run, round_, results, again)
        Session.objects.filter(pk=run.session_id).update(updated_at=timezone.now())
    live.plan = Plan(
        run,
        run.session,
        answer,
        messages,
        tools.tool_specs(run.agent) + ask.options.tools,
        sampling_for(live),
        next_order=order + 1,
        client_tools=ask.options.client_tools,
        tool_choice=ask.options.tool_choice,
        before=before,
    )
    run.status, run.error, run.finished_at = RunStatus.RUNNING, "", None


@dataclass
class _Round:
    """A run's last round of tool calls, as stored."""

    asking: Message  # the model's message with the calls
    results: dict[str, str]  # stored, by the model's call id
    said: str  # the run's text up to and with it
    answer: Message | None  # after its results: the answer of a try that failed


def _last_round(run: Run) -> _Round:
    if Run.objects.filter(session_id=run.session_id, position__gt=run.position).exists():
        raise RunConflict(
            "The conversation went on after this run: its tool calls can no longer be answered."
        )
    rows = list(Message.objects.filter(run=run).order_by("order"))
    asking = [m for m in rows if m.role == Role.ASSISTANT and m.tool_calls]
    if not asking:
        raise RunConflict(f"This run is not waiting for tool results (it is {run.status}).")
    last = asking[-1]
    said = "".join(m.content for m in rows if m.role == Role.ASSISTANT and m.order <= last.order)
    results = {
        m.tool_call_id: m.content for m in rows if m.role == Role.TOOL and m.order > last.order
    }
    later = [m for m in rows if m.role == Role.ASSISTANT and m.order > last.order]
    return _Round(last, results, said, later[-1] if later else None)


def _asked_again(run: Run, round_: _Round, given: dict[str, str]) -> bool:
    """The same results sent again after the answer to them failed (the model endpoint or the
    server stopped; OpenAI's SDKs retry such a request): the run is asked again."""
    failed = run.status in (RunStatus.ERROR, RunStatus.INTERRUPTED)
    return failed and bool(given) and all(round_.results.get(k) == v for k, v in given.items())


def _results(run: Run, round_: _Round, given: dict[str, str]) -> dict[str, str]:
    """The client's results, one for each call it was sent and no more."""
    if run.status != RunStatus.PAUSED:
        raise RunConflict(f"This run is not waiting for tool results (it is {run.status}).")
    waiting = [call for call in round_.asking.tool_calls if call["id"] not in round_.results]
    for call in waiting:
        if call["id"] not in given:
            shown = toolcalls.for_client(run.run_id, call)
            name = call["function"]["name"]
            raise InputError(f"No result was sent for the tool call {shown['id']} ({name}).")
    unknown = sorted(set(given) - {call["id"] for call in waiting})
    if unknown:
        shown = toolcalls.for_client(run.run_id, {"id": unknown[0]})
        raise InputError(f"The run is not waiting for a result of the tool call {shown['id']}.")
    limit = settings.PARLEY_MAX_INPUT_CHARS
    for text in given.values():
        if len(text) > limit:
            message = f"A tool result is too long ({len(text)} characters; the limit is {limit})."
            raise InputError(message, 413)
    return {call["id"]: given[call["id"]] for call in waiting}


def _take_up(run: Run) -> None:
    """To RUNNING, once: a second answer of the same calls meets RunConflict, a run in
    progress in the session IntegrityError."""
    taken = Run.objects.filter(pk=run.pk, status=run.status).update(
        status=RunStatus.RUNNING,
        worker=WORKER_ID,
        heartbeat_at=dbclock.now(),
        cancel_requested=False,
        finished_at=None,
        error="",
    )
    if not taken:
        raise RunConflict("This run's tool calls were answered already, or it was stopped.")


def _answer_row(run: Run, round_: _Round, results: dict[str, str], again: bool) -> tuple[int, int]:
    """The results stored as the run's tool messages, and the row the answer streams into
    (a failed try's, asked again); its id and order."""
    if again and round_.answer is not None:
        Message.objects.filter(pk=round_.answer.pk).update(content="")
        return round_.answer.pk, round_.answer.order
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
    rows.append(
        Message(run=run, session_id=run.session_id, order=last + len(rows) + 1, role=Role.ASSISTANT)
    )
    Message.objects.bulk_create(rows)
    return rows[-1].pk, rows[-1].order


def _messages(
    calls: list[LLMCall], round_: _Round, results: dict[str, str], again: bool
) -> list[dict[str, Any]]:
    """What the model is sent: what its last call was, the round, each call's result (asked
    again: what the failed try was sent)."""
    if not calls or calls[-1].sent_messages is None:
        raise RunConflict("This run's request to the model was not kept: it cannot go on.")
    if again:
        return list(calls[-1].sent_messages)
    asking = round_.asking
    reply = context.tool_round(asking.content, asking.tool_calls)
    answered = {**round_.results, **results}
    return [
        *calls[-1].sent_messages,
        reply,
        *(
            {"role": "tool", "tool_call_id": call["id"], "content": answered[call["id"]]}
            for call in asking.tool_calls
        ),
    ]
