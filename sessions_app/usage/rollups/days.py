"""Rolling closed days up: each day once, by whichever process claims it first."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, QuerySet, Sum
from django.db.models.functions import Coalesce, TruncDate

from sessions_app.models import (
    CallDay,
    CallKind,
    DeletedRun,
    LatencyDay,
    LLMCall,
    RolledDay,
    Run,
    RunDay,
)
from sessions_app.usage.rollups import histogram

LATENCY = ("time_to_first_token", "duration")
RUN_KEY = ("day", "session_id", "user_id", "agent_id", "model", "status")
BATCH = 5000
# First key of the PostgreSQL advisory locks that keep rolling a day up and adding late rows to
# it apart ("PRLY"); the second is the day's ordinal.
DAY_LOCKS = 0x50524C59


def closed_before(now: datetime) -> date:
    """Days before the one returned are closed: every day before yesterday (UTC), so runs
    still finishing and ratings of the last hours are in before a day is summed."""
    return now.astimezone(UTC).date() - timedelta(days=1)


def fill(days: Iterable[date]) -> int:
    """Roll up those of `days` (closed days only) not rolled up yet; how many this call did.

    All in one transaction. A day is claimed by inserting its RolledDay row: a second process
    wanting the same day waits on that row and skips the day once the first commits. Rows added
    late (add_late) wait for the day's lock, so they are summed here or added after, never both.
    """
    days = set(days)
    done = set(RolledDay.objects.filter(day__in=days).values_list("day", flat=True))
    wanted = sorted(days - done)  # claimed in order, so two fillers never wait on each other
    if not wanted:
        return 0
    with transaction.atomic():
        _lock(wanted)
        claimed = [day for day in wanted if _claim(day)]
        if claimed:
            _store_runs(claimed)
            _store_calls(claimed)
            _store_latency(claimed)
    return len(claimed)


def _lock(days: Iterable[date]) -> None:
    """Hold the days' locks until the transaction ends; taken in order, so no two holders wait
    on each other. SQLite needs none: it lets one transaction write at a time."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for day in sorted(set(days)):
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [DAY_LOCKS, day.toordinal()])


def _claim(day: date) -> bool:
    try:
        with transaction.atomic():
            RolledDay.objects.create(day=day)
    except IntegrityError:
        return False
    return True


def _within(rows: QuerySet[Any], days: list[date], field: str = "created_at") -> QuerySet[Any]:
    start = datetime.combine(days[0], time.min, tzinfo=UTC)
    end = datetime.combine(days[-1] + timedelta(days=1), time.min, tzinfo=UTC)
    rows = rows.order_by().filter(**{f"{field}__gte": start, f"{field}__lt": end})
    return rows.annotate(day=TruncDate(F(field), tzinfo=UTC))


def _store_runs(days: list[date]) -> None:
    # Runs deleted before their day was rolled up count through their records.
    started = _run_days([Run.objects, DeletedRun.objects], days)
    RunDay.objects.bulk_create(started, batch_size=BATCH)


def _store_calls(days: list[date]) -> None:
    CallDay.objects.bulk_create(_call_days(LLMCall.objects, days), batch_size=BATCH)


def _store_latency(days: list[date]) -> None:
    LatencyDay.objects.bulk_create(_latency_days(LLMCall.objects, days), batch_size=BATCH)


def _run_days(sources: Iterable[QuerySet[Any]], days: list[date]) -> list[RunDay]:
    """Runs by the day they started, ratings by the day they were given, from querysets of
    runs or of deleted runs' records (the same columns)."""
    wanted = set(days)
    sums: dict[tuple[Any, ...], Counter[str]] = defaultdict(Counter)
    for runs in sources:
        started = _within(runs, days).values(*RUN_KEY).annotate(n=Count("pk"))
        for row in started:
            sums[tuple(row[k] for k in RUN_KEY)]["started"] += row["n"]
        rated = _within(runs.filter(feedback_rating__isnull=False), days, "feedback_at")
        for row in rated.values(*RUN_KEY, "feedback_rating").annotate(n=Count("pk")):
            counter = "rated_up" if row["feedback_rating"] == 1 else "rated_down"
            sums[tuple(row[k] for k in RUN_KEY)][counter] += row["n"]
    return [
        RunDay(**dict(zip(RUN_KEY, key, strict=True)), **counts)
        for key, counts in sums.items()
        if key[0] in wanted
    ]


def _call_days(calls: QuerySet[LLMCall], days: list[date]) -> list[CallDay]:
    wanted = set(days)
    rows = _within(calls, days).values("day", "kind", "model", "agent_id", "user_id")
    sums = rows.annotate(
        made=Count("pk"),
        tokens_in=Sum("input_tokens"),
        tokens_out=Sum("output_tokens"),
        spent=Sum("cost"),
    )
    return [CallDay(**row) for row in sums if row["day"] in wanted]


def _latency_days(calls: QuerySet[LLMCall], days: list[date]) -> list[LatencyDay]:
    wanted = set(days)
    counts: Counter[tuple[date, str, int]] = Counter()
    chats = _within(calls.filter(kind=CallKind.CHAT), days)
    for day, *times in chats.values_list("day", *LATENCY).iterator(chunk_size=BATCH):
        if day in wanted:
            for field, seconds in zip(LATENCY, times, strict=True):
                if seconds is not None:
                    counts[day, field, histogram.bucket(seconds)] += 1
    return [LatencyDay(day=d, field=f, bucket=b, calls=n) for (d, f, b), n in counts.items()]


def add_late(runs: QuerySet[Run], calls: QuerySet[LLMCall]) -> None:
    """Runs and calls stored after their day was rolled up (imported from elsewhere): added to
    that day's sums, so the dashboard counts them on the days they happened.

    Call it in the transaction that stores them: the days' locks, held to its end, make a
    concurrent fill() of those days either see these rows or run before this reads RolledDay.
    """
    with transaction.atomic():
        theirs = _days_of(runs, calls)
        _lock(theirs)
        days = sorted(RolledDay.objects.filter(day__in=theirs).values_list("day", flat=True))
        if not days:
            return
        _add(_run_days([runs], days), RUN_KEY, ("started", "rated_up", "rated_down"))
        call_key = ("day", "kind", "model", "agent_id", "user_id")
        _add(_call_days(calls, days), call_key, ("made", "tokens_in", "tokens_out", "spent"))
        _add(_latency_days(calls, days), ("day", "field", "bucket"), ("calls",))


def _days_of(runs: QuerySet[Run], calls: QuerySet[LLMCall]) -> set[date]:
    found: set[date] = set()
    for rows, field in ((runs, "created_at"), (runs, "feedback_at"), (calls, "created_at")):
        dated = rows.order_by().filter(**{f"{field}__isnull": False})
        days = dated.annotate(day=TruncDate(F(field), tzinfo=UTC)).values_list("day", flat=True)
        found.update(days.distinct())
    return found


def _add(rows: list[Any], key: tuple[str, ...], counters: tuple[str, ...]) -> None:
    for row in rows:
        same = type(row).objects.filter(**{name: getattr(row, name) for name in key})
        added = {
            name: Coalesce(F(name), 0, output_field=type(row)._meta.get_field(name))
            + getattr(row, name)
            for name in counters
            if getattr(row, name) is not None
        }
        if not same.update(**added):
            row.save()
