"""One trial's question to the model and its answer, streamed as a run's is, measured as a run's
is (tokens, time to first token, duration, cost at LLM_PRICES)."""

from __future__ import annotations

import logging
import time

from evals_app import replay
from evals_app.models import Trial, TrialStatus
from evals_app.store import Answer
from sessions_app.llm import client as llm
from sessions_app.llm.errors import LLMError
from sessions_app.llm.usage import price

log = logging.getLogger("parley.evals")

FAILED = "Parley failed while asking for this answer."


async def answer(trial: Trial, candidate: replay.Candidate) -> Answer:
    """The trial's answer, or its failure with the reason (the upstream's, or why the item
    cannot be asked); never raises but for cancellation."""
    try:
        request = replay.request_for(candidate, trial.item)
    except replay.Unreplayable as exc:
        return Answer(trial.pk, TrialStatus.ERROR, candidate.model, None, error=str(exc))
    try:
        return await _streamed(trial, request)
    except Exception:
        log.exception("trial %s failed", trial.pk)
        return Answer(trial.pk, TrialStatus.ERROR, request.model, request.messages, error=FAILED)


async def _streamed(trial: Trial, request: replay.Request) -> Answer:
    parts: list[str] = []
    started = time.perf_counter()
    first: float | None = None
    end: llm.StreamEnd | None = None
    try:
        stream = llm.stream_chat(request.model, request.messages, None, request.sampling)
        async for piece in stream:
            if isinstance(piece, llm.Delta):
                if first is None:
                    first = time.perf_counter() - started
                parts.append(piece.content)
            elif isinstance(piece, llm.StreamEnd):
                end = piece
    except LLMError as exc:
        failed = Answer(trial.pk, TrialStatus.ERROR, request.model, request.messages)
        failed.content, failed.error = "".join(parts), exc.message
        failed.time_to_first_token, failed.duration = first, time.perf_counter() - started
        failed.unavailable = exc.unavailable
        return failed
    assert end is not None  # stream_chat ends with its StreamEnd or raises
    model = end.model or request.model
    return Answer(
        trial.pk,
        TrialStatus.COMPLETED,
        model,
        request.messages,
        content="".join(parts),
        usage=end.usage,
        time_to_first_token=first,
        duration=time.perf_counter() - started,
        cost=price(model, end.usage),
    )
