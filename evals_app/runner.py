"""Running experiments: what the doors (API, admin, command) call.

An experiment is run by one process at a time (evals_app.claims): the server's poller takes
queued ones (evals_app.poller), the `evaluate` command runs its own. Whoever runs it dies, and
another process (or the same one, restarted) resumes it from its pending trials.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import logging
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from evals_app import claims, poller
from evals_app.experiments import ExperimentError, scorer_specs
from evals_app.experiments import progress as progress_of
from evals_app.models import (
    FINISHED_STATUSES,
    Experiment,
    ExperimentStatus,
    Trial,
    TrialStatus,
)
from evals_app.run import ExperimentRun, Progress, prepare
from evals_app.scorers import SpecError
from sessions_app.engine.dbthread import in_db_thread as db

log = logging.getLogger("parley.evals")

# The experiments this process runs, by id (None while one is being claimed).
_local: dict[Any, ExperimentRun | None] = {}
# Ended but not done: queued again when asked for (request, --resume).
RESUMABLE = (ExperimentStatus.CANCELLED, ExperimentStatus.BUDGET, ExperimentStatus.FAILED)


def resumable(experiment: Experiment) -> bool:
    """Ended with something left to ask: stopped (cancelled, at its budget, failed), or
    completed with answers that failed."""
    if experiment.status in RESUMABLE:
        return True
    failed = Trial.objects.filter(experiment=experiment, status=TrialStatus.ERROR)
    return experiment.status == ExperimentStatus.COMPLETED and failed.exists()


def request(experiment: Experiment) -> None:
    """Queue it for a runner: this process's poller is woken when it serves (else the next
    look of any server's, or `evaluate --resume`). One that ended with something left to ask
    resumes from its pending trials and those whose answer failed, its cancel forgotten."""
    if experiment.status not in (ExperimentStatus.QUEUED, ExperimentStatus.RUNNING):
        if not resumable(experiment):
            return
    with transaction.atomic():
        queued = Experiment.objects.filter(
            pk=experiment.pk, status__in=(*RESUMABLE, ExperimentStatus.COMPLETED)
        ).update(status=ExperimentStatus.QUEUED, cancel_requested=False, error="", finished_at=None)
        if queued:  # failed answers are asked again, as if never asked
            Trial.objects.filter(experiment=experiment, status=TrialStatus.ERROR).update(
                status=TrialStatus.PENDING, error="", content="", started_at=None, finished_at=None
            )
    transaction.on_commit(poller.poke)


def cancel(experiment: Experiment) -> None:
    """Stop it: a queued one at once; a running one stops starting trials, its trials in flight
    go back to pending, wherever it runs (heard at its next heartbeat, at once here). One that
    has ended is left as it is."""
    # One statement: between two, a claim could turn it from queued to running and neither
    # would match.
    queued = Q(status=ExperimentStatus.QUEUED)
    Experiment.objects.filter(
        pk=experiment.pk, status__in=(ExperimentStatus.QUEUED, ExperimentStatus.RUNNING)
    ).update(
        cancel_requested=True,
        status=Case(When(queued, then=Value(ExperimentStatus.CANCELLED)), default=F("status")),
        finished_at=Case(When(queued, then=Value(timezone.now())), default=F("finished_at")),
    )
    transaction.on_commit(functools.partial(_cancel_here, experiment.pk))


def _cancel_here(experiment_id: Any) -> None:
    run = _local.get(experiment_id)
    if run is not None:
        run.loop.call_soon_threadsafe(run.cancel_now, context=contextvars.Context())


def rescore(experiment: Experiment, specs: list[dict[str, Any] | str]) -> Experiment:
    """Add scorers (a changed one is a new scorer: its options make its key) and score with
    them what lacks their score; the answers are not asked again. Raises ExperimentError."""
    given, problems = scorer_specs(specs, experiment.judge)
    if problems:
        raise ExperimentError(problems)
    if not given:
        raise ExperimentError([("scorers", "Give at least one scorer.")])
    with transaction.atomic():
        fresh = Experiment.objects.select_for_update().get(pk=experiment.pk)
        known = {_canonical(spec) for spec in fresh.scorers}
        fresh.scorers = fresh.scorers + [s for s in given if _canonical(s) not in known]
        Experiment.objects.filter(pk=fresh.pk).update(scorers=fresh.scorers)
        # An ended experiment is taken again to score; a queued or running one scores them
        # as it ends (it reads its scorers again then).
        Experiment.objects.filter(Q(pk=fresh.pk), Q(status__in=FINISHED_STATUSES)).update(
            status=ExperimentStatus.QUEUED
        )
    transaction.on_commit(poller.poke)
    fresh.refresh_from_db()
    return fresh


def _canonical(spec: dict[str, Any]) -> str:
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


async def run_experiment(experiment_id: Any, progress: Progress | None = None) -> Experiment:
    """See the experiment through from this process (the `evaluate` command): run it, or,
    while another live process runs it, follow it (reporting progress) and take it over if
    that process stops vouching. Returns it ended."""
    while True:
        await try_run(experiment_id, progress)
        experiment = await Experiment.objects.aget(pk=experiment_id)
        if experiment.status in FINISHED_STATUSES:
            return experiment
        if progress is not None:
            progress(await db(progress_of)(experiment))
        await asyncio.sleep(settings.PARLEY_HEARTBEAT_INTERVAL)


async def try_run(experiment_id: Any, progress: Progress | None = None) -> bool:
    """Claim the experiment and run it to its end here; whether it was claimed. A database
    failure is raised (the experiment, left running, is resumed once its claim goes stale)."""
    if experiment_id in _local:
        return False
    _local[experiment_id] = None
    try:
        others = set(_local) - {experiment_id}
        if not await db(claims.claim)(experiment_id, others):
            return False
        try:
            plan = await db(prepare)(experiment_id)
        except SpecError as exc:
            await db(claims.finish)(experiment_id, ExperimentStatus.FAILED, str(exc))
            return True
        run = _local[experiment_id] = ExperimentRun(plan, progress)
        await _run(run)
        return True
    finally:
        _local.pop(experiment_id, None)


async def _run(run: ExperimentRun) -> None:
    try:
        await run.go()
    except DatabaseError:
        raise
    except Exception as exc:
        log.exception("experiment %s failed", run.id)
        await db(claims.finish)(run.id, ExperimentStatus.FAILED, f"The runner failed: {exc}")


async def run_waiting() -> None:
    """The poller's look: run, one after another, the experiments this process may take."""
    while True:
        for experiment_id in await db(claims.claimable)(list(_local)):
            if await try_run(experiment_id):
                break
        else:
            return
