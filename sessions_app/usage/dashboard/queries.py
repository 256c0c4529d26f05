"""The grouped aggregates the tiles and charts are made of, over this period and the previous
one at once: rollup rows for the rolled-up days, beside the same aggregate of the live rows
for the rest of the range. A day is one or the other, so downstream the rows simply add up.
Runs deleted since they started count through their records (Scope.started)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import Count, Q, QuerySet, Sum

from sessions_app.models import CallDay, RunDay
from sessions_app.usage.dashboard.scope import CURRENT, PREVIOUS, Scope, day
from sessions_app.usage.rollups import fill

Rows = list[dict[str, Any]]


def ensure_rolled(scope: Scope) -> None:
    """Roll up the days of the range (and the previous period) that are not yet (none when
    the page reads no rollups: see Scope.rollups_until)."""
    if scope.rollups_until is not None:
        fill(scope.rolled_days(both=True))


def runs_by_day(scope: Scope) -> Rows:
    """Runs started, per period, day and status."""

    def shape(runs: QuerySet[Any]) -> QuerySet[Any]:
        runs = runs.annotate(period=scope.period(), day=day())
        return runs.values("period", "day", "status").annotate(runs=Count("pk"))

    rolled = scope.rolled(RunDay, both=True).filter(started__gt=0)
    rolled = rolled.annotate(period=scope.rolled_period())
    return [
        *scope.started(shape, both=True, live=True),
        *rolled.values("period", "day", "status").annotate(runs=Sum("started")),
    ]


def calls_by_day(scope: Scope) -> Rows:
    """Per period, day, model and kind of call: tokens in and out, and cost."""
    live = scope.calls(both=True, live=True).annotate(period=scope.period(), day=day())
    rolled = scope.rolled(CallDay, both=True).annotate(period=scope.rolled_period())
    return [
        *live.values("period", "day", "model", "kind").annotate(
            calls=Count("pk"),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
            cost=Sum("cost"),
        ),
        *rolled.values("period", "day", "model", "kind").annotate(
            calls=Sum("made"),
            input_tokens=Sum("tokens_in"),
            output_tokens=Sum("tokens_out"),
            cost=Sum("spent"),
        ),
    ]


def feedback_by_day(scope: Scope) -> Rows:
    """Ratings given, per period, day (of the rating) and rating."""

    def shape(runs: QuerySet[Any]) -> QuerySet[Any]:
        runs = runs.filter(feedback_rating__isnull=False)
        runs = runs.annotate(period=scope.period("feedback_at"), day=day("feedback_at"))
        return runs.values("period", "day", "feedback_rating").annotate(runs=Count("pk"))

    rows = list(scope.started(shape, "feedback_at", both=True, live=True))
    rolled = scope.rolled(RunDay, both=True).filter(Q(rated_up__gt=0) | Q(rated_down__gt=0))
    rolled = rolled.annotate(period=scope.rolled_period()).values("period", "day")
    for row in rolled.annotate(up=Sum("rated_up"), down=Sum("rated_down")):
        for rating, count in ((1, row["up"]), (-1, row["down"])):
            if count:
                rows.append({"period": row["period"], "day": row["day"],
                             "feedback_rating": rating, "runs": count})  # fmt: skip
    return rows


def people(scope: Scope) -> dict[str, int]:
    """Distinct users and sessions with a run started in this period and in the previous one:
    counted over the rolled-up and the live days together, so each is counted once."""
    columns = ("period", "user_id", "session_id")

    def shape(runs: QuerySet[Any]) -> QuerySet[Any]:
        return runs.annotate(period=scope.period()).values_list(*columns)

    rolled = scope.rolled(RunDay, both=True).filter(started__gt=0)
    rolled = rolled.annotate(period=scope.rolled_period())
    both = scope.started(shape, both=True, live=True, beside=(rolled.values_list(*columns),))
    try:
        sql, params = both.query.sql_with_params()
    except EmptyResultSet:  # nothing rolled up and nothing live
        sql, params = "SELECT NULL AS period, NULL AS user_id, NULL AS session_id", ()
    with connections[both.db].cursor() as cursor:
        cursor.execute(
            "SELECT period, COUNT(DISTINCT user_id), COUNT(DISTINCT session_id) "
            f"FROM ({sql}) AS started GROUP BY period",
            params,
        )
        found = {period: (users, sessions) for period, users, sessions in cursor.fetchall()}
    now, before = found.get(CURRENT, (0, 0)), found.get(PREVIOUS, (0, 0))
    return {"users": now[0], "sessions": now[1], "users_before": before[0],
            "sessions_before": before[1]}  # fmt: skip
