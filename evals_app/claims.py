"""Which process runs an experiment: one at a time, by a conditional UPDATE that only one can win.

A process claims an experiment that is queued, or running for a process that stopped vouching
(no heartbeat for PARLEY_STALE_RUN_AFTER seconds, or a process of this host that is gone), and
then vouches for it every PARLEY_HEARTBEAT_INTERVAL. Trials a dead claimant left running go back
to pending as it is claimed: a completed trial is never asked again. Sync functions: the
runner calls them from the database's side.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

from evals_app.models import Experiment, ExperimentStatus, Trial, TrialStatus
from sessions_app import dbclock
from sessions_app.process import HOSTNAME, WORKER_ID


def worker_gone(worker: str, local: Collection[Any] = (), experiment_id: Any = None) -> bool:
    """Whether the process of this host that `worker` names has ended (another host's is
    judged by its heartbeat alone). This process is gone for an experiment it is not running."""
    if worker == WORKER_ID:
        return experiment_id not in local
    host, _, rest = worker.partition(":")
    pid = rest.partition(":")[0]
    if host != HOSTNAME or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return True  # our pid, another boot of it
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _stale_before() -> Any:
    return dbclock.now() - timedelta(seconds=settings.PARLEY_STALE_RUN_AFTER)


def _claimable(row: dict[str, Any], local: Collection[Any]) -> Q | None:
    """What must still hold for this process to take the experiment, or None if it may not."""
    if row["status"] == ExperimentStatus.QUEUED:
        return Q(status=ExperimentStatus.QUEUED)
    if row["status"] != ExperimentStatus.RUNNING:
        return None
    stale = _stale_before()
    if row["heartbeat_at"] is None or row["heartbeat_at"] < stale:
        silent = Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale)
        return Q(status=ExperimentStatus.RUNNING) & silent
    if worker_gone(row["worker"], local, row["experiment_id"]):
        return Q(status=ExperimentStatus.RUNNING, worker=row["worker"])
    return None


def claim(experiment_id: Any, local: Collection[Any] = ()) -> bool:
    """Take the experiment for this process if nobody live runs it; whether it was taken."""
    fields = ("experiment_id", "status", "worker", "heartbeat_at")
    row = Experiment.objects.filter(pk=experiment_id).values(*fields).first()
    condition = None if row is None else _claimable(row, local)
    if condition is None:
        return False
    now = dbclock.now()
    with transaction.atomic():
        taken = Experiment.objects.filter(condition, pk=experiment_id).update(
            status=ExperimentStatus.RUNNING,
            worker=WORKER_ID,
            heartbeat_at=now,
            started_at=Coalesce(F("started_at"), Value(now)),
        )
        if taken:
            _unclaim_trials(experiment_id)
    return bool(taken)


def claimable(local: Collection[Any] = (), limit: int = 5) -> list[Any]:
    """Experiments this process may take now, the longest waiting first."""
    queued = Experiment.objects.filter(status=ExperimentStatus.QUEUED).order_by("created_at")
    found = list(queued.values_list("pk", flat=True)[:limit])
    fields = ("experiment_id", "status", "worker", "heartbeat_at")
    running = Experiment.objects.filter(status=ExperimentStatus.RUNNING).exclude(pk__in=local)
    for row in running.order_by("heartbeat_at").values(*fields)[:limit]:
        if _claimable(row, local) is not None:
            found.append(row["experiment_id"])
    return found


def vouch(experiment_id: Any) -> tuple[bool, bool]:
    """Heartbeat: whether the experiment is still this process's, and whether its cancel was
    asked for (from any process)."""
    ours = Experiment.objects.filter(
        pk=experiment_id, worker=WORKER_ID, status=ExperimentStatus.RUNNING
    ).update(heartbeat_at=dbclock.now())
    cancel = Experiment.objects.filter(pk=experiment_id).values_list("cancel_requested", flat=True)
    return bool(ours), bool(cancel.first())


def release(experiment_id: Any) -> None:
    """This process stops (the engine stopping, Ctrl-C): queued again at once, its trials
    in flight pending, for another process or a restart to take it."""
    with transaction.atomic():
        mine = Experiment.objects.filter(
            pk=experiment_id, worker=WORKER_ID, status=ExperimentStatus.RUNNING
        ).update(status=ExperimentStatus.QUEUED, worker="", heartbeat_at=None)
        if mine:
            _unclaim_trials(experiment_id)


def finish(experiment_id: Any, status: str, error: str = "") -> bool:
    """Its end, written only while it is still this process's; whether it was."""
    with transaction.atomic():
        mine = Experiment.objects.filter(
            pk=experiment_id, worker=WORKER_ID, status=ExperimentStatus.RUNNING
        ).update(
            status=status, error=error, finished_at=dbclock.now(), worker="", heartbeat_at=None
        )
        if mine:
            _unclaim_trials(experiment_id)
    return bool(mine)


def requeue(experiment_id: Any, status: str) -> bool:
    """Queued again after it ended with `status` (nothing if it changed meanwhile)."""
    return bool(
        Experiment.objects.filter(pk=experiment_id, status=status).update(
            status=ExperimentStatus.QUEUED
        )
    )


def _unclaim_trials(experiment_id: Any) -> None:
    Trial.objects.filter(experiment_id=experiment_id, status=TrialStatus.RUNNING).update(
        status=TrialStatus.PENDING, started_at=None
    )
