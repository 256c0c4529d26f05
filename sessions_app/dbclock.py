"""The database's clock, as this process reads it: what heartbeats (of runs, of experiments) are
stamped with and judged by, so that hosts whose clocks disagree agree on which work is stale.
Each process keeps the difference between its clock and the database's, measured as it starts
and at each heartbeat."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from django.db import DatabaseError, connection
from django.utils import timezone

log = logging.getLogger("parley.runs")

_offset = timedelta(0)
_measured = False


def now() -> datetime:
    """The database's time now, from this process's clock and the last measured difference
    (measured first, when it never was and this thread may ask the database outside a
    transaction, which a failed read would spoil)."""
    if not _measured and not _in_event_loop() and not connection.in_atomic_block:
        try:
            measure()
        except DatabaseError as exc:  # the next heartbeat tries again
            log.warning("could not read the database's clock: %s", exc)
    return timezone.now() + _offset


def measure() -> timedelta:
    """Read the database's time (in a thread that may ask the database) and keep how far this
    process's clock is from it, half the round trip counted out."""
    global _offset, _measured
    connection.ensure_connection()  # opened now, not counted in the round trip
    if connection.vendor != "postgresql":
        _measured = True
        return _offset  # SQLite: a file on this host, whose clock is ours
    before = timezone.now()
    with connection.cursor() as cursor:
        # The time of the statement itself: CURRENT_TIMESTAMP is its transaction's start.
        cursor.execute("SELECT clock_timestamp()")
        (database,) = cursor.fetchone()
    after = timezone.now()
    _offset, _measured = database - (before + (after - before) / 2), True
    return _offset


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
