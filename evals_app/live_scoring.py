"""Scoring one live run's answer: each scorer once, each verdict stored, a failure as an error.

A live run has no reference answer and no baseline: the scorers that need one are refused with
that reason, as a score's error, and the others judge the answer alone against the turns its
model was sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Any

from asgiref.sync import sync_to_async

from evals_app.models import Score
from evals_app.scorers import Case, Scorer, SpecError, Verdict, build
from sessions_app.models import Agent, CallKind, LLMCall, Role, Run

log = logging.getLogger("parley.evals")

Spec = dict[str, Any] | str


async def score_run(run: Run, scorers: Sequence[Spec], judge: Agent | None) -> list[Score]:
    """Score the run with each scorer (specs, built with `judge`) it has no score of yet; the
    scores written. A run is scored once per scorer key, whichever process gets there first."""
    done = {key async for key in Score.objects.filter(run=run).values_list("scorer", flat=True)}
    todo: dict[str, Scorer | Verdict] = {}
    for spec in scorers:
        key, scorer = _built(spec, judge)
        if key not in done:
            todo.setdefault(key, scorer)
    if not todo:
        return []
    case = await sync_to_async(case_of)(run)
    verdicts = await asyncio.gather(*(_verdict(scorer, case) for scorer in todo.values()))
    rows = [_row(run, key, verdict) for key, verdict in zip(todo, verdicts, strict=True)]
    await Score.objects.abulk_create(rows, ignore_conflicts=True)
    return rows


def case_of(run: Run) -> Case:
    """The answer, with the turns its model was sent first (system message left out): what the
    first model call of the run was sent, else its user turn alone."""
    sent = (
        LLMCall.objects.filter(run=run, kind=CallKind.CHAT)
        .order_by("created_at", "pk")
        .values_list("sent_messages", flat=True)
        .first()
    )
    turns = sent or [{"role": Role.USER.value, "content": run.input}]
    return Case([m for m in turns if m.get("role") != Role.SYSTEM], run.content or "")


def _built(spec: Spec, judge: Agent | None) -> tuple[str, Scorer | Verdict]:
    """The scorer's key and the scorer, or the verdict that it cannot score a live run."""
    try:
        scorer = build(spec, judge)
    except SpecError as exc:
        return spec_key(spec), Verdict.failed(str(exc))
    if scorer.pairwise:
        return scorer.key, Verdict.failed("A live run has no baseline answer to compare with.")
    if scorer.needs_reference:
        return scorer.key, Verdict.failed("A live run has no reference answer.")
    return scorer.key, scorer


def spec_key(spec: Spec) -> str:
    """The key a spec's scorer would have (as Scorer.key makes it), for a spec that builds none."""
    if not isinstance(spec, dict):
        return str(spec)[:100]
    options = {k: v for k, v in spec.items() if k != "name"}
    name = str(spec.get("name"))[:90]
    if not options:
        return name
    text = json.dumps(options, sort_keys=True, separators=(",", ":"), default=str)
    return f"{name}:{hashlib.sha256(text.encode()).hexdigest()[:8]}"


async def _verdict(scorer: Scorer | Verdict, case: Case) -> Verdict:
    if isinstance(scorer, Verdict):
        return scorer
    try:
        return await scorer.score(case)
    except Exception as exc:
        log.warning("scorer %s failed on a live run", scorer.key, exc_info=True)
        return Verdict.failed(f"The scorer failed: {exc}")


def _row(run: Run, key: str, verdict: Verdict) -> Score:
    return Score(
        run=run,
        scorer=key,
        value=verdict.value,
        reason=verdict.reason,
        error=verdict.error or ("" if verdict.value is not None else "The scorer gave no value."),
        details=verdict.details,
        judge_version_id=verdict.judge_version_id,
        judge_prompt=verdict.judge_prompt,
        judge_tokens=verdict.tokens,
        judge_cost=verdict.cost,
    )
