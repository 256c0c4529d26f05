"""Usage over time, summed from the per-call rows (LLMCall), grouped by day, model, agent or user.

Sums are cheap in SQL, percentiles are not portable, so one query fetches the few columns of each
call in the range and the grouping happens here; fine for the volumes of a self-hosted server.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from django.db.models import QuerySet
from django.utils import timezone

from sessions_app.models import LLMCall, User

GroupBy = Literal["day", "model", "agent", "user"]
DEFAULT_DAYS = 30


@dataclass
class _Group:
    key: str | None
    label: str
    runs: set[Any] = field(default_factory=set)
    calls: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost: Decimal | None = None
    first_token: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "runs": len(self.runs),
            "calls": self.calls,
            "errors": self.errors,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cost": float(self.cost) if self.cost is not None else None,
            "time_to_first_token": _spread(self.first_token),
            "duration": _spread(self.durations),
        }


def percentile(values: list[float], fraction: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _spread(values: list[float]) -> dict[str, float | None]:
    return {"p50": percentile(values, 0.5), "p95": percentile(values, 0.95)}


def default_start(end: date | datetime | None) -> date | datetime | None:
    """DEFAULT_DAYS before `end` (or now); None when that would be before year 1."""
    reference = end if end is not None else timezone.now()
    try:
        return reference - timedelta(days=DEFAULT_DAYS)
    except OverflowError:
        return None


def calls_in_range(
    user: User, start: date | datetime | None, end: date | datetime | None
) -> QuerySet[LLMCall]:
    """The calls `user` may count (staff: everyone's), within start..end inclusive.

    A bare date means the whole calendar day (UTC), so end=2025-01-31 includes that day.
    """
    calls = LLMCall.objects.all() if user.is_staff else LLMCall.objects.filter(user=user)
    if start is not None:
        calls = _bound(calls, start, "gte")
    if end is not None:
        calls = _bound(calls, end, "lte")
    return calls


def _bound(calls: QuerySet[LLMCall], when: date | datetime, op: str) -> QuerySet[LLMCall]:
    if isinstance(when, datetime):
        return calls.filter(**{f"created_at__{op}": when})
    return calls.filter(**{f"created_at__date__{op}": when})


def _keyer(group_by: GroupBy) -> tuple[list[str], Callable[[dict[str, Any]], tuple[Any, str]]]:
    """The extra columns a grouping needs, and how to read (key, label) from a row."""
    if group_by == "day":
        # localdate: the same calendar as the `__date` lookups that bound the range.
        return ["created_at"], lambda r: (timezone.localdate(r["created_at"]).isoformat(),) * 2
    if group_by == "model":
        return ["model"], lambda r: (r["model"], r["model"])
    if group_by == "agent":

        def agent(r: dict[str, Any]) -> tuple[Any, str]:
            if r["agent_id"] is None:
                return None, "(deleted agent)"
            return str(r["agent_id"]), r["agent__name"]

        return ["agent_id", "agent__name"], agent
    return ["user__username"], lambda r: (r["user__username"], r["user__username"])


def aggregate(calls: QuerySet[LLMCall], group_by: GroupBy) -> list[dict[str, Any]]:
    """One row per group, ordered by key (days ascending, names alphabetically)."""
    columns, key_of = _keyer(group_by)
    rows: Iterable[dict[str, Any]] = (
        calls.order_by()
        .values(
            *columns,
            "run_id",
            "ok",
            "input_tokens",
            "output_tokens",
            "total_tokens",
            "cost",
            "time_to_first_token",
            "duration",
        )
        .iterator(chunk_size=2000)
    )
    groups: dict[Any, _Group] = {}
    for row in rows:
        key, label = key_of(row)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(key=key, label=label)
        if row["run_id"] is not None:
            group.runs.add(row["run_id"])
        group.calls += 1
        group.errors += not row["ok"]
        group.input_tokens += row["input_tokens"]
        group.output_tokens += row["output_tokens"]
        group.total_tokens += row["total_tokens"]
        if row["cost"] is not None:
            group.cost = (group.cost or Decimal(0)) + row["cost"]
        if row["time_to_first_token"] is not None:
            group.first_token.append(row["time_to_first_token"])
        if row["duration"] is not None:
            group.durations.append(row["duration"])
    ordered = sorted(groups.values(), key=lambda g: (g.key is None, g.key or ""))
    return [group.as_dict() for group in ordered]
