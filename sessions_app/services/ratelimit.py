"""How many runs and new sessions a user may start per minute, on every door alike.

What was started is counted, not what is still stored: a user's runs and sessions made in the
last minute, and the records that deleted ones leave (DeletedRun, DeletedSession; see
usage.deleted), all in one query. So it works across any number of processes without a
shared cache, costs the start of a run no write of its own, and deleting gives nothing back.
Two requests arriving in the same instant can both pass; the limits are there to stop runaway
clients, not to meter exactly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Model, QuerySet, Value
from django.utils import timezone

from sessions_app.models import DeletedRun, DeletedSession, Run, Session, User

RUN, SESSION = "run", "session"
WINDOW = timedelta(seconds=60)
# Deleted sessions older than this are of no use to the limit; they are pruned every PRUNE_EVERY.
KEEP = timedelta(hours=1)
PRUNE_EVERY = 300.0  # seconds
_NAMES = {RUN: "runs", SESSION: "new sessions"}
_COUNTED: dict[str, tuple[type[Model], ...]] = {
    RUN: (Run, DeletedRun),
    SESSION: (Session, DeletedSession),
}
_last_pruned: float | None = None


class RateLimited(Exception):
    """Too many runs (or sessions) in the last minute; `retry_after` is in seconds."""

    code = "rate_limit_exceeded"  # what the OpenAI API calls it

    def __init__(self, retry_after: float, kind: str = RUN, message: str = "") -> None:
        self.retry_after = retry_after
        self.kind = kind
        name = _NAMES.get(kind, "runs")
        super().__init__(message or f"Too many {name}; try again in {self.seconds} seconds.")

    def in_words(self) -> str | None:
        """What the chat page says instead of its own words, if anything."""
        return None

    def fields(self) -> dict[str, Any]:
        """What a 429 says of it besides its message."""
        return {}

    @property
    def seconds(self) -> int:
        """The wait in whole seconds, rounded up: what Retry-After and every message say."""
        return max(1, math.ceil(self.retry_after))


def _limits() -> dict[str, int]:
    return {RUN: settings.PARLEY_RUNS_PER_MINUTE, SESSION: settings.PARLEY_SESSIONS_PER_MINUTE}


def refusals(user: User, asks: Sequence[Sequence[str]]) -> list[RateLimited | None]:
    """For starts `user` asks for at once, each naming the kinds it starts (a run, and a
    session when it makes one): each one's refusal, None for those allowed now. One query."""
    limits = _limits()
    counted = sorted({kind for kinds in asks for kind in kinds if limits[kind] > 0})
    if not counted:
        return [None] * len(asks)
    now = timezone.now()
    stamps: dict[str, list[datetime]] = {kind: [] for kind in counted}
    for kind, at in _recent(user, {kind: limits[kind] for kind in counted}, now - WINDOW):
        stamps[kind].append(at)  # newest first
    out: list[RateLimited | None] = []
    for kinds in asks:
        mine = [kind for kind in kinds if kind in stamps]
        waits = [(_wait(stamps[kind], limits[kind], now), kind) for kind in mine]
        refused = max(((w, k) for w, k in waits if w is not None), default=None)
        if refused is None:
            for kind in mine:
                stamps[kind].insert(0, now)
            out.append(None)
        else:
            out.append(RateLimited(*refused))
    return out


def _recent(user: User, limits: dict[str, int], since: datetime) -> list[tuple[str, datetime]]:
    """(kind, created_at) of what `user` started since then, newest first, at most each kind's
    limit of each kind: one query, each table read up to its kind's limit, so the rows of one
    kind (say runs past their limit) never crowd out another's."""
    parts = [
        # A compound statement may not LIMIT its parts on SQLite; a subquery in IN may.
        model.objects.order_by()
        .filter(pk__in=_newest(model.objects.filter(user=user, created_at__gt=since), most))
        .annotate(kind=Value(kind))
        .values_list("kind", "created_at")
        for kind, most in limits.items()
        for model in _COUNTED[kind]
    ]
    rows = sorted(parts[0].union(*parts[1:], all=True), key=lambda row: row[1], reverse=True)
    seen = dict.fromkeys(limits, 0)
    newest = []
    for kind, at in rows:
        seen[kind] += 1
        if seen[kind] <= limits[kind]:
            newest.append((kind, at))
    return newest


def _newest(rows: QuerySet[Any], most: int) -> QuerySet[Any]:
    return rows.order_by("-created_at").values("pk")[:most]


def _wait(stamps: list[datetime], limit: int, now: datetime) -> float | None:
    """None when a start is allowed now, else how long until the oldest of the last `limit`
    starts leaves the window and frees a slot."""
    if len(stamps) < limit:
        return None
    return max((stamps[limit - 1] + WINDOW - now).total_seconds(), 0.001)


def check(user: User, *kinds: str) -> None:
    """Raise RateLimited unless `user` may start these now."""
    refusal = refusals(user, [kinds])[0]
    if refusal is not None:
        raise refusal


def prune() -> int:
    """Delete the records of deleted sessions no limit looks at any more, at most once every
    PRUNE_EVERY seconds in this process; how many went."""
    global _last_pruned
    moment = time.monotonic()
    if _last_pruned is not None and moment - _last_pruned < PRUNE_EVERY:
        return 0
    _last_pruned = moment
    deleted, _ = DeletedSession.objects.filter(created_at__lt=timezone.now() - KEEP).delete()
    return deleted
