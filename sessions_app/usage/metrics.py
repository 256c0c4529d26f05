"""Usage over time, summed from the per-call rows (LLMCall), grouped by day, model, agent or user.

Sums and counts are SQL aggregates; percentiles come from usage.percentiles, in SQL where the
database can.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, Literal

from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from sessions_app.models import LLMCall, User
from sessions_app.services.access import in_scope
from sessions_app.services.permissions import staff_may
from sessions_app.usage.percentiles import percentiles

GroupBy = Literal["day", "model", "agent", "user"]
DEFAULT_DAYS = 30


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
    """The calls `user` may count (their own; everyone's for staff who may view model calls;
    of their token's agents only, when it is limited to some), within start..end inclusive.

    A bare date means the whole calendar day (UTC), so end=2025-01-31 includes that day.
    """
    calls = in_scope(user, LLMCall.objects.all())
    if not staff_may(user, "view", LLMCall):
        calls = calls.filter(user=user)
    if start is not None:
        calls = _bound(calls, start, "gte")
    if end is not None:
        calls = _bound(calls, end, "lte")
    return calls


def _bound(calls: QuerySet[LLMCall], when: date | datetime, op: str) -> QuerySet[LLMCall]:
    if isinstance(when, datetime):
        return calls.filter(**{f"created_at__{op}": when})
    return calls.filter(**{f"created_at__date__{op}": when})


def _grouping(group_by: GroupBy) -> dict[str, Any]:
    """The expressions a grouping adds to each call: its key and, for agents, their name."""
    if group_by == "day":
        # The current time zone's calendar, as the `__date` lookups that bound the range.
        return {"group_key": TruncDate("created_at")}
    if group_by == "model":
        return {"group_key": F("model")}
    if group_by == "agent":
        return {"group_key": F("agent_id"), "group_label": F("agent__name")}
    return {"group_key": F("user__username")}


def aggregate(calls: QuerySet[LLMCall], group_by: GroupBy) -> list[dict[str, Any]]:
    """One row per group, ordered by key (days ascending, names alphabetically)."""
    grouping = _grouping(group_by)
    keyed = calls.order_by().annotate(**grouping)
    rows = keyed.values(*grouping).annotate(
        runs=Count("run_uuid", distinct=True),  # kept when a run is deleted
        calls=Count("pk"),
        errors=Count("pk", filter=Q(ok=False)),
        input_tokens=Sum("input_tokens"),
        output_tokens=Sum("output_tokens"),
        total_tokens=Sum("total_tokens"),
        cost=Sum("cost"),
    )
    spreads = percentiles(keyed, "group_key", ["time_to_first_token", "duration"])
    out = [_shaped(row, spreads[row["group_key"]], group_by) for row in rows]
    return sorted(out, key=lambda g: (g["key"] is None, g["key"] or ""))


def _shaped(
    row: dict[str, Any], spread: dict[str, list[float | None]], group_by: GroupBy
) -> dict[str, Any]:
    key = row["group_key"]
    if group_by == "day":
        key = label = key.isoformat()
    elif group_by == "agent":
        key, label = (None, "(deleted agent)") if key is None else (str(key), row["group_label"])
    else:
        label = key
    return {
        "key": key,
        "label": label,
        **{
            name: row[name]
            for name in ("runs", "calls", "errors", "input_tokens", "output_tokens", "total_tokens")
        },
        "cost": float(row["cost"]) if row["cost"] is not None else None,
        "time_to_first_token": dict(
            zip(("p50", "p95"), spread["time_to_first_token"], strict=True)
        ),
        "duration": dict(zip(("p50", "p95"), spread["duration"], strict=True)),
    }
