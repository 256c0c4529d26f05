"""What this app tells other apps, so they can act on it without being called by name.

`run_rated`: runs were rated, by their user (the chat buttons, POST /api/runs/{id}/feedback) or
by staff (the runs admin's actions). Sent once the ratings are committed, with `sender=Run`,
`runs` (a queryset of the rated runs) and `rater` ("user" or "staff"). A receiver's failure
never undoes a rating. Datasets' rules are its receiver (`datasets_app.hooks`).

`run_finished`: runs' ends were stored, whatever they ended as (COMPLETED, ERROR, CANCELLED,
INTERRUPTED, or PAUSED for their client's tools, a run that ends again once it goes on), by the
engine that ran them or, for runs whose process died, by the one that reaped them. Sent on the
engine's event loop once the ends are committed, runs that ended together at once, with
`sender=Run`, `runs` (a queryset of them) and `statuses` ({run id: status}). Its receivers are
awaited in a task of their own (`Signal.asend_robust`: async ones on the loop, sync ones in the
ORM's thread), so none delays the answers' last events; a receiver's failure is logged and ends
nothing. Live evaluation is its receiver (`evals_app.live`).

`transcript_read`: staff opened someone else's conversation (a session, a run, a model call or
a message): through the API's access gate (services.access) or in the admin. Sent with
`sender` (the model), `reader`, `owner_id` and `obj`. The audit log is its receiver
(`audit_app.listeners`).

`data_exported`: staff downloaded conversations (the admin's JSON export of sessions or runs).
Sent with `sender` (the model), `reader`, `count` and `owner_ids` (whose they were). The audit
log is its receiver.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.dispatch import Signal

from sessions_app.models import Run

run_rated = Signal()
run_finished = Signal()
transcript_read = Signal()
data_exported = Signal()
log = logging.getLogger("parley.signals")


def send_transcript_read(reader: Any, obj: Any, owner_id: Any) -> None:
    """Tell the receivers that `reader` opened `obj` of someone else's, if it is."""
    if owner_id is not None and owner_id != reader.pk:
        transcript_read.send(type(obj), reader=reader, owner_id=owner_id, obj=obj)


def send_run_rated(runs: QuerySet[Run], rater: str) -> None:
    """Tell the receivers once the ratings being saved are committed (at once outside a
    transaction)."""
    transaction.on_commit(lambda: _send(runs, rater))


def _send(runs: QuerySet[Run], rater: str) -> None:
    """Every receiver is told, whichever fails: a failure is logged, and the rating that was
    committed is answered as saved."""
    for receiver, outcome in run_rated.send_robust(sender=Run, runs=runs, rater=rater):
        if isinstance(outcome, Exception):
            log.error("%s failed on a rating", receiver, exc_info=outcome)


# Sends under way: the loop keeps only weak references to its tasks.
_sending: set[asyncio.Task[None]] = set()


def send_run_finished(statuses: Mapping[Any, str]) -> None:
    """On the engine's loop, once the ends are committed: tell the receivers, after this turn of
    the loop, in a task of their own. A fresh context: sync receivers must not be sent to the
    thread of a request that started the run (it ends with the response)."""
    task = asyncio.get_running_loop().create_task(
        _send_finished(dict(statuses)), name="run-ends", context=contextvars.Context()
    )
    _sending.add(task)
    task.add_done_callback(_sending.discard)


async def _send_finished(statuses: dict[Any, str]) -> None:
    runs = Run.objects.filter(pk__in=list(statuses))
    told = await run_finished.asend_robust(sender=Run, runs=runs, statuses=statuses)
    for receiver, outcome in told:
        if isinstance(outcome, Exception):
            log.error("%s failed on runs' ends", receiver, exc_info=outcome)


async def sent() -> None:
    """Until the runs' ends told so far have reached every receiver (tests use it)."""
    while sending := [task for task in _sending if not task.done()]:
        await asyncio.gather(*sending, return_exceptions=True)
