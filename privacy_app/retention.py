"""The retention period: sessions whose last activity is older than their agent's
`retention_days` (else PARLEY_RETENTION_DAYS; 0 or unset: forever) are deleted by
`manage.py purge_expired`, except those staff keep. Dataset items are snapshots: they stay,
and have their own delete button.

Deleted in small batches of about `batch` messages, each its own short transaction (on SQLite
it holds the one write lock), each followed by a pause three times as long as it took (`pause`
fixes it instead): the purge takes at most a quarter of the database's time, and chats go on
while a large backlog goes (each deleted run leaves its usage counted:
sessions_app.usage.deleted).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from sessions_app.models import ACTIVE_STATUSES, Agent, Message, Run, Session

BATCH_MESSAGES = 250
LEAST_PAUSE = 0.05  # seconds between batches, however quick the last one was
PAUSE_FACTOR = 3.0  # the pause after a batch, in times what it took
CANDIDATES = 500  # sessions looked at for a batch, at most


@dataclass
class Purged:
    sessions: int = 0
    runs: int = 0
    messages: int = 0
    batches: int = 0


def expired(now: datetime | None = None) -> QuerySet[Session]:
    """Sessions past their retention period and not kept."""
    now = now or timezone.now()
    default = settings.PARLEY_RETENTION_DAYS
    past = Q()
    for days, agents in _periods().items():
        if days > 0:
            past |= Q(agent__in=agents, updated_at__lt=now - timedelta(days=days))
    if default > 0:
        past |= Q(agent__retention_days__isnull=True, updated_at__lt=now - timedelta(days=default))
    if not past:
        return Session.objects.none()
    return Session.objects.filter(past, kept=False)


def _periods() -> dict[int, list[object]]:
    """Agents with a period of their own, by period."""
    found: dict[int, list[object]] = {}
    rows = Agent.objects.filter(retention_days__isnull=False).values_list("pk", "retention_days")
    for pk, days in rows:
        found.setdefault(days, []).append(pk)
    return found


def count(sessions: QuerySet[Session]) -> Purged:
    """What deleting them would remove (for --dry-run)."""
    totals = sessions.aggregate(n=Count("pk", distinct=True))
    runs = sessions.aggregate(n=Count("runs", distinct=True))
    messages = Message.objects.filter(session__in=sessions.values("pk")).count()
    return Purged(totals["n"], runs["n"], messages)


def purge(
    sessions: QuerySet[Session],
    batch: int = BATCH_MESSAGES,
    pause: float | None = None,
    progress: Callable[[Purged], None] | None = None,
) -> Purged:
    """Delete them batch by batch, oldest first; what was removed. `pause`: seconds between
    batches; None: PAUSE_FACTOR times what the last batch took."""
    done = Purged()
    left: set[str] = set()  # chosen but not to go (see below): not chosen again
    while True:
        started = time.monotonic()
        chosen = _next_batch(sessions.exclude(pk__in=left), batch)
        if not chosen:
            return done
        with transaction.atomic():
            # Read again as they go: one used or kept since it was chosen stays, and so does
            # one with an answer under way.
            going = list(
                sessions.filter(pk__in=chosen)
                .exclude(runs__status__in=ACTIVE_STATUSES)
                .values_list("pk", flat=True)
            )
            runs = Run.objects.filter(session__in=going).count()
            messages = Message.objects.filter(session__in=going).count()
            removed = Session.objects.filter(pk__in=going).delete()[1]
        left.update(set(chosen) - set(going))
        done.sessions += removed.get("sessions_app.Session", 0)
        done.runs += runs
        done.messages += messages
        done.batches += 1
        if progress:
            progress(done)
        took = time.monotonic() - started
        time.sleep(max(LEAST_PAUSE, took * PAUSE_FACTOR) if pause is None else pause)


def _next_batch(sessions: QuerySet[Session], batch: int) -> list[str]:
    """The oldest sessions whose messages add up to about `batch` (at least one session): read
    by the index on last activity, then their messages counted, never the whole backlog's."""
    oldest = list(sessions.order_by("updated_at", "pk").values_list("pk", flat=True)[:CANDIDATES])
    sizes = dict(
        Message.objects.filter(session__in=oldest)
        .order_by()
        .values("session")
        .annotate(n=Count("pk"))
        .values_list("session", "n")
    )
    chosen: list[str] = []
    total = 0
    for pk in oldest:
        size = sizes.get(pk, 0)
        if chosen and total + size > batch:
            break
        chosen.append(pk)
        total += size
    return chosen
