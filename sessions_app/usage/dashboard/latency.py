"""p50 and p95 of chat calls' times, per period and per day, read from histograms
(usage.rollups.histogram): the rolled-up days' stored ones beside those of the live rows.

A filter (agent, model, user, source) is not in the stored histograms' key: a filtered page
makes its histograms from the calls themselves, the same way, so the figures mean the same.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, date

from sessions_app.models import CallKind, LatencyDay
from sessions_app.usage.dashboard.scope import CURRENT, PREVIOUS, Scope, day
from sessions_app.usage.percentiles import FRACTIONS, Spreads
from sessions_app.usage.rollups import histogram
from sessions_app.usage.rollups.days import LATENCY

Histograms = dict[str, Counter[int]]


def latency(scope: Scope) -> tuple[Spreads, Spreads]:
    """({period: {field: [p50, p95]}}, {day of this period: {"time_to_first_token": [...]}})."""
    periods: dict[str, Histograms] = {p: _empty() for p in (CURRENT, PREVIOUS)}
    days: dict[date, Histograms] = defaultdict(_empty)
    stored = not scope.filtered and scope.rollups_until is not None
    if stored:
        first = scope.start.astimezone(UTC).date()
        rows = scope.rolled(LatencyDay, both=True).values_list("day", "field", "bucket", "calls")
        for when, field, bucket, calls in rows:
            periods[CURRENT if when >= first else PREVIOUS][field][bucket] += calls
            if when >= first:
                days[when][field][bucket] += calls
    chats = scope.calls(both=True, live=stored).filter(kind=CallKind.CHAT)
    chats = chats.annotate(period=scope.period(), day=day()).values_list("period", "day", *LATENCY)
    for period, when, *times in chats.iterator(chunk_size=5000):
        for field, seconds in zip(LATENCY, times, strict=True):
            if seconds is not None:
                bucket = histogram.bucket(seconds)
                periods[period][field][bucket] += 1
                if period == CURRENT:
                    days[when][field][bucket] += 1
    by_period = {p: _spread(found, LATENCY) for p, found in periods.items()}
    by_day = {d: _spread(found, ("time_to_first_token",)) for d, found in days.items()}
    return by_period, by_day


def _empty() -> Histograms:
    return {field: Counter() for field in LATENCY}


def _spread(found: Histograms, fields: tuple[str, ...]) -> dict[str, list[float | None]]:
    return {field: histogram.percentiles(found[field], FRACTIONS) for field in fields}
