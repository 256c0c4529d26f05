"""The database's clock, as this process reads it: what a run's heartbeat is stamped with and
judged by. Hosts whose clocks disagree then agree on which runs are stale; each process keeps
the difference between its clock and the database's, measured at each heartbeat."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

_offset = timedelta(0)


def now() -> datetime:
    """The database's time now, from this process's clock and the last measured difference."""
    return timezone.now() + _offset


def measure() -> timedelta:
    """Read the database's time (in the thread that does database work) and keep how far this
    process's clock is from it, half the round trip counted out."""
    global _offset
    if connection.vendor == "sqlite":
        return _offset  # a file on this host: its clock is ours
    before = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT CURRENT_TIMESTAMP")
        (database,) = cursor.fetchone()
    after = timezone.now()
    _offset = database - (before + (after - before) / 2)
    return _offset
