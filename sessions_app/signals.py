"""What this app tells other apps, so they can act on it without being called by name.

`run_rated`: runs were rated, by their user (the chat buttons, POST /api/runs/{id}/feedback) or
by staff (the runs admin's actions). Sent once the ratings are committed, with `sender=Run`,
`runs` (a queryset of the rated runs) and `rater` ("user" or "staff"). A receiver's failure
never undoes a rating. Datasets' rules are its receiver (`datasets_app.hooks`).
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import QuerySet
from django.dispatch import Signal

from sessions_app.models import Run

run_rated = Signal()
log = logging.getLogger("parley.signals")


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
