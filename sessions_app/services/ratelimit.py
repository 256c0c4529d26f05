"""How many runs a user may start per minute, for the REST API and the WebSocket alike.

The Run table is the record: counting the user's runs of the last minute works across any number
of processes without a shared cache. Two requests arriving in the same instant can both pass; the
limit is there to stop runaway clients, not to meter exactly.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from sessions_app.models import Run, User

WINDOW = timedelta(seconds=60)


class RateLimited(Exception):
    """Too many runs in the last minute; `retry_after` is in seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"Too many runs; try again in {retry_after:.0f} seconds.")
        self.retry_after = retry_after


def run_waits(user: User, count: int) -> list[float | None]:
    """For `count` runs `user` starts at once: each one's wait, None for those allowed now."""
    limit = settings.PARLEY_RUNS_PER_MINUTE
    if limit <= 0:
        return [None] * count
    now = timezone.now()
    recent = (
        Run.objects.filter(user=user, created_at__gt=now - WINDOW)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[:limit]
    )
    stamps = list(recent)  # newest first
    waits: list[float | None] = []
    for _ in range(count):
        if len(stamps) < limit:
            stamps.insert(0, now)
            waits.append(None)
        else:
            # The oldest of the last `limit` runs leaving the window frees one slot.
            waits.append(max((stamps[limit - 1] + WINDOW - now).total_seconds(), 0.001))
    return waits
