"""What a dashboard shows: a time range and optional filters, and the rows they select."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db.models import Case, F, QuerySet, Value, When
from django.db.models.functions import TruncDate

from sessions_app.models import LLMCall, Run

CURRENT, PREVIOUS = "current", "previous"


@dataclass(frozen=True)
class Scope:
    """[start, end) in UTC, compared with the period of the same length just before it."""

    start: datetime
    end: datetime
    agent_id: uuid.UUID | None = None
    model: str = ""
    user_id: int | None = None

    @property
    def previous(self) -> Scope:
        return replace(self, start=self.start - (self.end - self.start), end=self.start)

    def days(self) -> list[date]:
        """The UTC calendar days the range touches; the first and last may be partial."""
        first = self.start.astimezone(UTC).date()
        last = (self.end - timedelta(microseconds=1)).astimezone(UTC).date()
        return [first + timedelta(days=i) for i in range((last - first).days + 1)]

    def runs(self, field: str = "created_at", *, both: bool = False) -> QuerySet[Run]:
        """Runs whose `field` falls in the range (`both`: in this or the previous period)."""
        return self._narrow(Run.objects.order_by(), field, both)

    def calls(self, *, both: bool = False) -> QuerySet[LLMCall]:
        """Model calls of every kind made in the range (`both`: or in the previous period)."""
        return self._narrow(LLMCall.objects.order_by(), "created_at", both)

    def period(self, field: str = "created_at") -> Case:
        """CURRENT or PREVIOUS, for rows selected with `both`."""
        return Case(
            When(**{f"{field}__gte": self.start}, then=Value(CURRENT)), default=Value(PREVIOUS)
        )

    def _narrow(self, rows: QuerySet[Any], field: str, both: bool) -> QuerySet[Any]:
        start = self.previous.start if both else self.start
        rows = rows.filter(**{f"{field}__gte": start, f"{field}__lt": self.end})
        if self.agent_id is not None:
            rows = rows.filter(agent_id=self.agent_id)
        if self.model:
            rows = rows.filter(model=self.model)
        if self.user_id is not None:
            rows = rows.filter(user_id=self.user_id)
        return rows


def day(field: str = "created_at") -> TruncDate:
    """The UTC calendar day of a timestamp column."""
    return TruncDate(F(field), tzinfo=UTC)
