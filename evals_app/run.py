"""One experiment run by this process, from its claim to its end.

Its pending trials are read a chunk at a time and asked with at most `concurrency` model calls at
once; answers are written in batches (whatever ended while the last batch was being written),
each with what it spent, so a kill loses at most the answers in flight. Then the answers are
scored, each scorer on what it has not scored yet. A heartbeat vouches for the claim and hears
of a cancel asked elsewhere. It stops starting trials at a cancel, at its budget (those in
flight finish) or when another process took it over (it had stopped vouching).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from evals_app import asking, claims, replay, store
from evals_app.away import ModelAway
from evals_app.experiments import progress as progress_of
from evals_app.models import Experiment, ExperimentStatus, Trial, TrialStatus
from evals_app.scorers import Scorer, SpecError, build
from evals_app.scoring import score_trials
from evals_app.writer import AnswerWriter
from sessions_app.engine.dbthread import in_db_thread as db
from sessions_app.process import being_cancelled

log = logging.getLogger("parley.evals")

Progress = Callable[[dict[str, Any]], None]
SCORE_CHUNK = 100


@dataclass
class Plan:
    """What a run reads as it starts: the experiment, each version as asked, the scorers."""

    experiment: Experiment
    candidates: dict[Any, replay.Candidate]
    scorers: list[Scorer]
    counts: dict[str, Any]


def prepare(experiment_id: Any) -> Plan:
    """Raises SpecError when a scorer cannot be built any more (its judge was deleted)."""
    experiment = Experiment.objects.select_related("judge", "baseline").get(pk=experiment_id)
    versions = experiment.versions.select_related("agent")
    return Plan(
        experiment=experiment,
        candidates={version.pk: replay.candidate(version) for version in versions},
        scorers=[build(spec, experiment.judge) for spec in experiment.scorers],
        counts=progress_of(experiment),
    )


def added_scorers(experiment_id: Any, known: set[str]) -> list[Scorer]:
    """Scorers given to the experiment (a rescore) since the run read them."""
    experiment = Experiment.objects.select_related("judge").get(pk=experiment_id)
    new = []
    for spec in experiment.scorers:
        try:
            scorer = build(spec, experiment.judge)
        except SpecError:
            log.warning("experiment %s: scorer %r cannot be built", experiment_id, spec)
            continue
        if scorer.key not in known:
            new.append(scorer)
    return new


class ExperimentRun:
    def __init__(self, plan: Plan, report: Progress | None = None) -> None:
        experiment = plan.experiment
        self.experiment, self.id = experiment, experiment.pk
        self.candidates, self.scorers = plan.candidates, list(plan.scorers)
        self.report = report
        self.loop = asyncio.get_running_loop()
        self.slots = asyncio.Semaphore(experiment.concurrency)
        self.in_flight: set[asyncio.Task[None]] = set()
        self.scoring: asyncio.Task[None] | None = None
        # A cancel asked before this run keeps its answers stopped. One that ended cancelled
        # (it has its end) and was queued again by a rescore lets the scoring run, whoever
        # takes it up; one that never ended (its process died while cancelling) ends cancelled,
        # asking nothing more, as does a cancel asked during this run.
        self.cancel_seen = experiment.cancel_requested and experiment.finished_at is not None
        self.cancelled = experiment.cancel_requested
        self.lost = False  # another process took it over
        self.used_tokens, self.used_cost = experiment.used_tokens, experiment.used_cost
        self.counts = {name: plan.counts[name] for name in ("total", "done", "errors")}
        self.scored: set[str] = set()
        self.writer = AnswerWriter(self.id, self.answered)
        self.away = ModelAway()

    # -- its state -------------------------------------------------------------------------

    def over_budget(self) -> bool:
        e = self.experiment
        tokens = e.budget_tokens is not None and self.used_tokens >= e.budget_tokens
        return tokens or (e.budget_cost is not None and self.used_cost >= e.budget_cost)

    def stops_answering(self) -> bool:
        broken = self.writer.failure is not None
        return self.cancelled or self.lost or broken or self.over_budget()

    def stops_scoring(self) -> bool:
        return self.lost or (self.cancelled and not self.cancel_seen)

    def snapshot(self, status: str = ExperimentStatus.RUNNING) -> dict[str, Any]:
        e = self.experiment
        return {
            "status": status,
            **self.counts,
            "used_tokens": self.used_tokens,
            "used_cost": self.used_cost,
            "budget_tokens": e.budget_tokens,
            "budget_cost": e.budget_cost,
        }

    def spent(self, tokens: int, cost: Decimal) -> None:
        self.used_tokens += tokens
        self.used_cost += cost

    def answered(self, answers: list[store.Answer]) -> None:
        self.counts["done"] += len(answers)
        self.counts["errors"] += sum(a.status == TrialStatus.ERROR for a in answers)
        if self.report is not None:
            self.report(self.snapshot())

    def cancel_now(self) -> None:
        """A cancel: no trial starts any more, those in flight are stopped (back to pending)."""
        self.cancelled = True
        self._stop_tasks()

    def _stop_tasks(self) -> None:
        for task in self.in_flight:
            task.cancel()
        if self.scoring is not None and self.stops_scoring():
            self.scoring.cancel()

    # -- its course ------------------------------------------------------------------------

    async def go(self) -> None:
        """Answer, score, end. Cancelled (the engine stopping, Ctrl-C): queued again for
        another process. Failed: what was in flight is stopped, the error raised."""
        beat = asyncio.create_task(self._beat(), name=f"experiment-heartbeat-{self.id}")
        try:
            await self._answer_all()
            await self._score_all()
            await self._end()
        except asyncio.CancelledError:
            await asyncio.shield(self._leave())
            raise
        except BaseException:
            self._stop_tasks()
            await asyncio.shield(self._settle())
            raise
        finally:
            beat.cancel()

    async def _answer_all(self) -> None:
        after: store.Key | None = None
        size = max(4 * self.experiment.concurrency, 50)
        while not self.stops_answering():
            chunk = await db(store.next_chunk)(self.id, after, size)
            if chunk.cancel_requested and not self.cancelled:
                self.cancel_now()
            if not chunk.trials:
                break
            after = store.key_of(chunk.trials[-1])
            for trial in chunk.trials:
                await self.slots.acquire()
                if self.stops_answering():
                    self.slots.release()
                    break
                task = asyncio.create_task(self._trial(trial))
                self.in_flight.add(task)
                task.add_done_callback(self.in_flight.discard)
        await self._settle()

    async def _trial(self, trial: Trial) -> None:
        try:
            answer = await self._ask(trial)
            # Counted before the slot is free: the next trial is started against it.
            self.spent(answer.tokens, answer.cost or Decimal(0))
        finally:
            self.slots.release()
        await self.writer.write(answer)

    async def _ask(self, trial: Trial) -> store.Answer:
        """The trial's answer; while the endpoint is away, asked again once it is back."""
        while True:
            await self.away.wait()
            answer = await asking.answer(trial, self.candidates[trial.version_id])
            if not answer.unavailable:
                self.away.answered()
                return answer
            if not self.away.failed():
                return answer

    async def _settle(self) -> None:
        """Wait for the trials in flight and the answers being written; a failed write
        (the database away) is raised."""
        while self.in_flight:
            await asyncio.wait(set(self.in_flight))
        await self.writer.drained()

    async def _score_all(self) -> None:
        while not self.stops_scoring():
            todo = [s for s in self.scorers if s.key not in self.scored]
            if not todo:
                todo = await db(added_scorers)(self.id, self.scored)
                if not todo:
                    return
                self.scorers += todo
            for scorer in todo:
                self.scoring = asyncio.create_task(self._score_with(scorer))
                try:
                    await self.scoring
                except asyncio.CancelledError:
                    if being_cancelled():
                        raise
                    return  # a cancel stopped the scoring
                finally:
                    self.scoring = None
                self.scored.add(scorer.key)

    async def _score_with(self, scorer: Scorer) -> None:
        after = None
        # Judges spend too: past the budget, what is left stays unscored (a rescore with a
        # larger budget scores it).
        while not self.stops_scoring() and not (scorer.needs_judge and self.over_budget()):
            ids = await db(store.unscored)(self.experiment, scorer, after, SCORE_CHUNK)
            if not ids:
                return
            after = ids[-1]
            await score_trials(self.experiment, ids, [scorer])
            if scorer.needs_judge:  # score_trials added what the judge spent
                self.used_tokens, self.used_cost = await db(store.spending)(self.id)

    async def _end(self) -> None:
        if self.lost:
            return
        pending = await db(store.unanswered)(self.id)
        status, error = ExperimentStatus.COMPLETED, ""
        if self.cancelled:
            status = ExperimentStatus.CANCELLED
        elif pending and self.over_budget():
            status, error = ExperimentStatus.BUDGET, self._budget_note()
        elif pending:
            status, error = ExperimentStatus.FAILED, "Some trials were left unanswered."
        if await db(claims.finish)(self.id, status, error):
            # A rescore that came as it ended is run next, by whichever process takes it.
            known = {scorer.key for scorer in self.scorers}
            if await db(added_scorers)(self.id, known):
                await db(claims.requeue)(self.id, status)
        if self.report is not None:
            self.report(self.snapshot(status))

    def _budget_note(self) -> str:
        e = self.experiment
        if e.budget_tokens is not None and self.used_tokens >= e.budget_tokens:
            return f"Stopped at its budget: {self.used_tokens} tokens used of {e.budget_tokens}."
        return f"Stopped at its budget: {self.used_cost} spent of {e.budget_cost}."

    async def _leave(self) -> None:
        self._stop_tasks()
        try:
            await self._settle()
        except DatabaseError:
            log.warning("experiment %s: answers in flight not written as it stopped", self.id)
        await db(claims.release)(self.id)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(settings.PARLEY_HEARTBEAT_INTERVAL)
            try:
                ours, cancel = await db(claims.vouch)(self.id)
            except Exception:
                if being_cancelled():
                    raise asyncio.CancelledError from None
                log.exception("experiment %s: heartbeat failed", self.id)
                continue
            if not ours:
                log.warning("experiment %s was taken over by another process", self.id)
                self.lost = True
                self._stop_tasks()
            elif cancel and not self.cancelled:
                self.cancel_now()
