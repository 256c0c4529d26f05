"""The grouped aggregates the tiles and charts are made of: one SQL statement each, over this
period and the previous one at once, each answering a few hundred rows at most."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, Sum

from sessions_app.models import CallKind
from sessions_app.services.dashboard.scope import Scope, day
from sessions_app.services.percentiles import Spreads, percentiles

Rows = list[dict[str, Any]]
LATENCY = ("time_to_first_token", "duration")


def runs_by_day(scope: Scope) -> Rows:
    """Runs started, per period, day and status."""
    rows = scope.runs(both=True).annotate(period=scope.period(), day=day())
    return list(rows.values("period", "day", "status").annotate(runs=Count("pk")))


def calls_by_day(scope: Scope) -> Rows:
    """Per period, day, model and kind of call: tokens in and out, and cost."""
    rows = scope.calls(both=True).annotate(period=scope.period(), day=day())
    return list(
        rows.values("period", "day", "model", "kind").annotate(
            calls=Count("pk"),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
            cost=Sum("cost"),
        )
    )


def feedback_by_day(scope: Scope) -> Rows:
    """Ratings given, per period, day (of the rating) and rating."""
    rows = scope.runs("feedback_at", both=True).filter(feedback_rating__isnull=False)
    rows = rows.annotate(period=scope.period("feedback_at"), day=day("feedback_at"))
    return list(rows.values("period", "day", "feedback_rating").annotate(runs=Count("pk")))


def people(scope: Scope) -> dict[str, int]:
    """Distinct users and sessions with a run started in this period and in the previous one."""
    now, before = Q(created_at__gte=scope.start), Q(created_at__lt=scope.start)
    return scope.runs(both=True).aggregate(
        users=Count("user_id", distinct=True, filter=now),
        users_before=Count("user_id", distinct=True, filter=before),
        sessions=Count("session_id", distinct=True, filter=now),
        sessions_before=Count("session_id", distinct=True, filter=before),
    )


def latency(scope: Scope) -> Spreads:
    """p50 and p95 time to first token and duration of chat calls, per period."""
    chats = scope.calls(both=True).filter(kind=CallKind.CHAT).annotate(period=scope.period())
    return percentiles(chats, "period", LATENCY)


def first_token_by_day(scope: Scope) -> Spreads:
    """p50 and p95 time to first token of chat calls, per day of this period."""
    chats = scope.calls().filter(kind=CallKind.CHAT).annotate(day=day())
    return percentiles(chats, "day", ["time_to_first_token"])
