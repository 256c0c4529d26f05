"""What a dashboard shows: a time range and optional filters, and the rows they select.

The daily rollups are keyed by agent, model and user, not by source: a page filtered by source
reads every day of its range from the rows themselves (as if nothing were rolled up yet)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import Case, F, Model, Q, QuerySet, Value, When
from django.db.models.functions import TruncDate

from sessions_app.models import DeletedRun, LLMCall, Run

CURRENT, PREVIOUS = "current", "previous"


@dataclass(frozen=True)
class Scope:
    """[start, end) in UTC, compared with the period of the same length just before it."""

    start: datetime
    end: datetime
    agent_id: uuid.UUID | None = None
    model: str = ""
    user_id: int | None = None
    source: str = ""  # a RunSource value: runs of that door, and the model calls of those runs
    # Whole days before this one are read from the daily rollups (None: every row is read).
    rolled_until: date | None = None

    @property
    def previous(self) -> Scope:
        return replace(self, start=self.start - (self.end - self.start), end=self.start)

    def days(self) -> list[date]:
        """The UTC calendar days the range touches; the first and last may be partial."""
        first = self.start.astimezone(UTC).date()
        last = (self.end - timedelta(microseconds=1)).astimezone(UTC).date()
        return [first + timedelta(days=i) for i in range((last - first).days + 1)]

    @property
    def filtered(self) -> bool:
        return (
            self.agent_id is not None
            or bool(self.model)
            or self.user_id is not None
            or bool(self.source)
        )

    @property
    def rollups_until(self) -> date | None:
        """`rolled_until`, but None with a source filter: the rollups cannot tell sources
        apart, so every row of the range is read instead."""
        return None if self.source else self.rolled_until

    def rolled_days(self, *, both: bool = False) -> list[date]:
        """The days read from the rollups: those before `rollups_until` lying wholly in one
        period; the rest of the range (a partial first day, the open days) is read live."""
        periods = [self.previous, self] if both else [self]
        return [d for p in periods for d in _whole_days(p.start, p.end, self.rollups_until)]

    def runs(
        self, field: str = "created_at", *, both: bool = False, live: bool = False
    ) -> QuerySet[Run]:
        """Runs whose `field` falls in the range (`both`: in this or the previous period;
        `live`: only outside the rolled-up days)."""
        return self._narrow(Run.objects.order_by(), field, both, live)

    def started(
        self,
        shape: Callable[[QuerySet[Any]], QuerySet[Any]],
        field: str = "created_at",
        *,
        both: bool = False,
        live: bool = False,
        beside: tuple[QuerySet[Any], ...] = (),
    ) -> QuerySet[Any]:
        """`shape` (the same grouping and sums) of the runs selected as `runs` selects them and
        of the records of deleted ones (models.DeletedRun), in one query with the rows `beside`
        (of the same columns): a deleted run stays counted. Their rows come one after the
        other, to be added up."""
        deleted = self._narrow(DeletedRun.objects.order_by(), field, both, live)
        runs = shape(self.runs(field, both=both, live=live))
        return runs.union(shape(deleted), *beside, all=True)

    def calls(self, *, both: bool = False, live: bool = False) -> QuerySet[LLMCall]:
        """Model calls of every kind made in the range (`both`: or in the previous period;
        `live`: only outside the rolled-up days)."""
        return self._narrow(LLMCall.objects.order_by(), "created_at", both, live)

    def rolled(self, model: type[Model], *, both: bool = False) -> QuerySet[Any]:
        """The rollup rows of the rolled-up days (none with a source filter), filtered as the
        live rows are."""
        rows = model.objects.order_by().filter(day__in=self.rolled_days(both=both))
        return self._keyed(rows)

    def rolled_period(self) -> Case:
        """CURRENT or PREVIOUS, for rollup rows (a rolled day lies wholly in one period)."""
        first = self.start.astimezone(UTC).date()
        return Case(When(day__gte=first, then=Value(CURRENT)), default=Value(PREVIOUS))

    def period(self, field: str = "created_at") -> Case:
        """CURRENT or PREVIOUS, for rows selected with `both`."""
        return Case(
            When(**{f"{field}__gte": self.start}, then=Value(CURRENT)), default=Value(PREVIOUS)
        )

    def _narrow(self, rows: QuerySet[Any], field: str, both: bool, live: bool) -> QuerySet[Any]:
        start = self.previous.start if both else self.start
        spans = _outside(start, self.end, self.rolled_days(both=both) if live else [])
        if not spans:
            return rows.none()
        return self._filter(
            rows.filter(
                reduce(or_, (Q(**{f"{field}__gte": a, f"{field}__lt": b}) for a, b in spans))
            )
        )

    def _filter(self, rows: QuerySet[Any]) -> QuerySet[Any]:
        """Runs, deleted runs' records or model calls, narrowed by every filter."""
        rows = self._keyed(rows)
        if self.source:
            rows = rows.filter(_of_source(rows.model, self.source))
        return rows

    def _keyed(self, rows: QuerySet[Any]) -> QuerySet[Any]:
        """Narrowed by the filters that the rollups' keys hold too (agent, model, user)."""
        if self.agent_id is not None:
            rows = rows.filter(agent_id=self.agent_id)
        if self.model:
            rows = rows.filter(model=self.model)
        if self.user_id is not None:
            rows = rows.filter(user_id=self.user_id)
        return rows


def _of_source(model: type[Model], source: str) -> Q:
    """Runs and their records carry their source. A model call has its run's: through the
    link while the run is there; once it is deleted, through the run's id the call keeps
    (`run_uuid`) and the DeletedRun record of that id, so calls need no copy of their own to
    keep in step. Title and summary calls belong to no run, so to no source."""
    if model is not LLMCall:
        return Q(source=source)
    deleted = DeletedRun.objects.filter(source=source).values("run_id")
    return Q(run__source=source) | Q(run_uuid__in=deleted)


def day(field: str = "created_at") -> TruncDate:
    """The UTC calendar day of a timestamp column."""
    return TruncDate(F(field), tzinfo=UTC)


def _midnight(day_: date) -> datetime:
    return datetime.combine(day_, time.min, tzinfo=UTC)


def _whole_days(start: datetime, end: datetime, until: date | None) -> list[date]:
    """The UTC days lying wholly within [start, end) and before `until`."""
    if until is None:
        return []
    first = start.astimezone(UTC).date()
    if _midnight(first) < start:
        first += timedelta(days=1)
    stop = min(end.astimezone(UTC).date(), until)
    return [first + timedelta(days=i) for i in range((stop - first).days)]


def _outside(start: datetime, end: datetime, days: list[date]) -> list[tuple[datetime, datetime]]:
    """[start, end) without the given days, as a list of spans."""
    spans, at = [], start
    for day_ in sorted(days):
        if _midnight(day_) > at:
            spans.append((at, _midnight(day_)))
        at = max(at, _midnight(day_ + timedelta(days=1)))
    if at < end:
        spans.append((at, end))
    return spans
