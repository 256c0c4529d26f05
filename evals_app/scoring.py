"""Scoring answers: an experiment's completed trials, or a live run, by each scorer that has not
scored them yet.

A score is written once per answer and scorer key, so scoring again (after a crash, or with a
scorer added or changed) scores only what lacks one. A scorer that fails gives a score with its
error: nothing is dropped. What judges spend is added to the experiment's spending, which its
budget is checked against.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F

from datasets_app.services.snapshot import EXAMPLE_NAMES, NotCollectable, clean, of_run
from evals_app.models import Experiment, Score, Trial, TrialStatus
from evals_app.scorers import Case, Scorer, SpecError, Verdict, build, spec_key
from sessions_app.engine.dbthread import in_db_thread
from sessions_app.models import Agent, Role, Run

ScorerSpecs = Sequence[Scorer | dict[str, Any] | str]


@dataclass
class Job:
    """One answer for one scorer: its case, or the verdict it already has (nothing to ask)."""

    scorer: Scorer | None  # None: a spec that builds no scorer, whose verdict says why
    answer_id: Any  # the trial's or the run's id
    case: Case | None = None
    verdict: Verdict | None = None
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key and self.scorer is not None:
            self.key = self.scorer.key


async def score_trials(
    experiment: Experiment, trials: Iterable[Trial | Any], scorers: ScorerSpecs
) -> int:
    """Score the completed ones of `trials` (objects or ids) with each scorer that has not yet
    scored them; returns how many scores were written.

    A pairwise scorer scores a candidate's trial once the baseline's trial of the same item and
    repeat has completed: a batch holding either of the two scores the pair, so whichever comes
    last brings it. A baseline's trial that failed gives its candidates an error score.
    """
    built = await in_db_thread(_built_for)(experiment, scorers)
    ids = [t.pk if isinstance(t, Trial) else t for t in trials]
    if not built or not ids:
        return 0
    jobs = await in_db_thread(_trial_jobs)(experiment, ids, built)
    verdicts = await _verdicts(jobs, experiment.concurrency)
    return len(await in_db_thread(_store)(jobs, verdicts, experiment.pk, "trial_id"))


async def score_run(
    run: Run | Any, scorers: Sequence[dict[str, Any] | str], judge: Agent | None = None
) -> list[Score]:
    """Score one live run (an object or its id) with each scorer (specs, built with `judge`)
    that has not scored it yet, on the conversation as its model was sent it; the scores
    written. A spec that cannot score a live run (no judge any more, pairwise, no reference)
    is stored as that scorer's error, so the rule's staff see why."""
    run_id = run.pk if isinstance(run, Run) else run
    jobs = await in_db_thread(_run_jobs)(run_id, [_for_a_run(spec, judge) for spec in scorers])
    verdicts = await _verdicts(jobs, len(jobs))
    return await in_db_thread(_store)(jobs, verdicts, None, "run_id")


def _for_a_run(spec: dict[str, Any] | str, judge: Agent | None) -> Job:
    """The spec's scorer, or the verdict that it cannot score a live run (answer id to come)."""
    try:
        scorer = build(spec, judge)
    except SpecError as exc:
        return Job(None, None, verdict=Verdict.failed(str(exc)), key=spec_key(spec))
    if scorer.pairwise:
        return Job(scorer, None, verdict=Verdict.failed(NO_BASELINE))
    if scorer.needs_reference:
        return Job(scorer, None, verdict=Verdict.failed("A live run has no reference answer."))
    return Job(scorer, None)


NO_BASELINE = "A live run has no baseline answer to compare with."


def _built_for(experiment: Experiment, scorers: ScorerSpecs) -> list[Scorer]:
    judge = None
    if experiment.judge_id is not None and not all(isinstance(s, Scorer) for s in scorers):
        judge = Agent.objects.select_related("live_version").filter(pk=experiment.judge_id).first()
    return _built(scorers, judge)


def _built(scorers: ScorerSpecs, judge: Agent | None) -> list[Scorer]:
    return [s if isinstance(s, Scorer) else build(s, judge) for s in scorers]


def _trial_jobs(experiment: Experiment, ids: list[Any], scorers: list[Scorer]) -> list[Job]:
    batch = _completed(Trial.objects.filter(experiment=experiment, pk__in=ids))
    single = [s for s in scorers if not s.pairwise]
    paired = [s for s in scorers if s.pairwise]
    candidates, baselines = _pairs(experiment, batch) if paired else ([], {})
    everyone = {t.pk for t in batch} | {t.pk for t in candidates}
    done = _scored("trial_id", everyone, scorers)
    jobs = [
        Job(scorer, trial.pk, _trial_case(trial))
        for trial in batch
        for scorer in single
        if (trial.pk, scorer.key) not in done
    ]
    for trial in candidates:
        baseline = baselines.get((trial.item_uuid, trial.repeat))
        for scorer in paired:
            if baseline is not None and (trial.pk, scorer.key) not in done:
                jobs.append(_pair_job(scorer, trial, baseline))
    return jobs


def _completed(trials: Any) -> list[Trial]:
    return list(
        trials.filter(status=TrialStatus.COMPLETED)
        .order_by()  # Trial's ordering joins the experiment to sort: needless here
        .select_related("item")
        .only(
            "trial_id",
            "item_uuid",
            "version_id",
            "repeat",
            "content",
            "sent_messages",
            "item__messages",
            "item__corrected_answer",
        )
    )


def _pairs(
    experiment: Experiment, batch: list[Trial]
) -> tuple[list[Trial], dict[tuple[Any, int], Trial]]:
    """The candidates' trials to score against the baseline (the batch's, and those waiting for
    a baseline trial of the batch), and the finished baseline trials of their items."""
    base = experiment.baseline_id
    keys = {(t.item_uuid, t.repeat) for t in batch}
    uuids = {u for u, _ in keys}
    mine = Trial.objects.filter(experiment=experiment, item_uuid__in=uuids).order_by()
    finished = mine.filter(version_id=base).exclude(
        status__in=(TrialStatus.PENDING, TrialStatus.RUNNING)
    )
    baselines = {
        (t.item_uuid, t.repeat): t
        for t in finished.only("trial_id", "item_uuid", "repeat", "status", "content", "error")
        if (t.item_uuid, t.repeat) in keys
    }
    candidates = [t for t in batch if t.version_id != base]
    brought = {(t.item_uuid, t.repeat) for t in batch if t.version_id == base}
    if brought:
        others = mine.filter(item_uuid__in={u for u, _ in brought}).exclude(version_id=base)
        waiting = _completed(others.exclude(pk__in=[t.pk for t in batch]))
        candidates += [t for t in waiting if (t.item_uuid, t.repeat) in brought]
    return candidates, baselines


def _pair_job(scorer: Scorer, trial: Trial, baseline: Trial) -> Job:
    if baseline.status != TrialStatus.COMPLETED:
        reason = f"The baseline gave no answer to compare with: {baseline.error or 'it failed'}"
        return Job(scorer, trial.pk, verdict=Verdict.failed(reason))
    return Job(scorer, trial.pk, _trial_case(trial, baseline.content))


def _trial_case(trial: Trial, baseline_answer: str | None = None) -> Case:
    """The trial's answer, the conversation it was sent (no system message, no few-shot
    examples), and the item's reference: its corrected answer, else its original."""
    conversation = [
        m
        for m in trial.sent_messages or []
        if m.get("role") != Role.SYSTEM and m.get("name") not in EXAMPLE_NAMES
    ]
    reference = trial.item.final_answer if trial.item is not None else ""
    return Case(conversation, trial.content, reference or None, baseline_answer)


def _run_jobs(run_id: Any, planned: list[Job]) -> list[Job]:
    done = set(Score.objects.filter(run_id=run_id).values_list("scorer", flat=True))
    wanted = {job.key: job for job in planned if job.key not in done}  # a key once
    if not wanted:
        return []
    run = Run.objects.select_related("session__user", "agent").get(pk=run_id)
    try:
        messages = of_run(run).messages
    except NotCollectable as exc:
        failed = Verdict.failed(str(exc))
        return [
            Job(j.scorer, run_id, verdict=j.verdict or failed, key=j.key) for j in wanted.values()
        ]
    conversation = [clean(m) for m in messages[:-1] if m.get("role") != Role.SYSTEM]
    case = Case(conversation, run.content)
    return [Job(j.scorer, run_id, case, j.verdict, j.key) for j in wanted.values()]


def _scored(field: str, ids: set[Any], scorers: list[Scorer]) -> set[tuple[Any, str]]:
    keys = {s.key for s in scorers}
    found = Score.objects.filter(**{f"{field}__in": ids, "scorer__in": keys})
    return set(found.values_list(field, "scorer"))


async def _verdicts(jobs: list[Job], concurrency: int) -> list[Verdict]:
    """Every job's verdict, at most `concurrency` scorers at work at once."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(job: Job) -> Verdict:
        if job.verdict is not None:
            return job.verdict
        async with gate:
            assert job.scorer is not None  # a job without one has its verdict
            return await _safely(job.scorer, job.case)

    return list(await asyncio.gather(*(one(job) for job in jobs)))


async def _safely(scorer: Scorer, case: Case | None) -> Verdict:
    """A scorer's verdict; a scorer that breaks gives an error score, not a lost one."""
    try:
        verdict = await scorer.score(case) if case is not None else None
    except Exception as exc:
        return Verdict.failed(f"The {scorer.label} scorer failed: {exc}")
    if verdict is None or (verdict.value is None and not verdict.error):
        return Verdict.failed(f"The {scorer.label} scorer gave no value.")
    return verdict


def _store(jobs: list[Job], verdicts: list[Verdict], experiment_id: Any, field: str) -> list[Score]:
    rows = [_row(job, verdict, field) for job, verdict in zip(jobs, verdicts, strict=True)]
    tokens = sum(v.tokens for v in verdicts)
    cost = sum((v.cost for v in verdicts if v.cost is not None), Decimal(0))
    with transaction.atomic():
        # Another process scoring the same answers at once wrote the same scores: theirs stand.
        Score.objects.bulk_create(rows, ignore_conflicts=True)
        if experiment_id is not None and (tokens or cost):
            Experiment.objects.filter(pk=experiment_id).update(
                used_tokens=F("used_tokens") + tokens, used_cost=F("used_cost") + cost
            )
    return rows


def _row(job: Job, verdict: Verdict, field: str) -> Score:
    return Score(
        **{field: job.answer_id},
        scorer=job.key,
        value=verdict.value,
        reason=verdict.reason,
        error=verdict.error if verdict.value is None else "",
        details=verdict.details,
        judge_version_id=verdict.judge_version_id,
        judge_prompt=verdict.judge_prompt,
        judge_tokens=verdict.tokens,
        judge_cost=verdict.cost,
    )
