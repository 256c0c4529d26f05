"""The dashboard's tables: who and what used the most, the slowest runs, the latest errors."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, Sum
from django.db.models.functions import Substr

from sessions_app.models import RunStatus
from sessions_app.services.dashboard.scope import Scope

LIMIT = 10
ERROR_CHARS = 300
Rows = list[dict[str, Any]]
RUN_COLUMNS = (
    "run_id", "created_at", "status", "model", "duration", "time_to_first_token", "user_id",
    "user__username", "agent_id", "agent__name", "session_id", "session__session_name",
)  # fmt: skip


def _top(scope: Scope, *columns: str) -> Rows:
    """The LIMIT keys of `columns[0]` with the most runs started (then by name, the last
    column): their runs and errors, and the tokens and cost of all their calls (title and
    summary calls included)."""
    key = columns[0]
    runs = (
        scope.runs()
        .values(*columns)
        .annotate(runs=Count("pk"), errors=Count("pk", filter=Q(status=RunStatus.ERROR)))
    )
    rows = list(runs.order_by("-runs", columns[-1], key)[:LIMIT])
    calls = scope.calls().filter(**{f"{key}__in": [row[key] for row in rows]}).values(key)
    sums = calls.annotate(
        input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"), cost=Sum("cost")
    )
    used = {row[key]: row for row in sums}
    empty = {"input_tokens": 0, "output_tokens": 0, "cost": None}
    return [{**row, **{k: used.get(row[key], empty)[k] for k in empty}} for row in rows]


def top_users(scope: Scope) -> Rows:
    return _top(scope, "user_id", "user__username")


def top_agents(scope: Scope) -> Rows:
    return _top(scope, "agent_id", "agent__name")


def top_models(scope: Scope) -> Rows:
    return _top(scope, "model")


def slowest_runs(scope: Scope) -> Rows:
    """The runs started in the range that took longest (their calls' durations summed)."""
    runs = scope.runs().filter(duration__isnull=False).values(*RUN_COLUMNS)
    return list(runs.order_by("-duration", "-created_at")[:LIMIT])


def latest_errors(scope: Scope) -> Rows:
    """The last runs started in the range that ended in an error, with the error's start."""
    runs = scope.runs().filter(status=RunStatus.ERROR)
    runs = runs.annotate(error_text=Substr("error", 1, ERROR_CHARS)).values(
        *RUN_COLUMNS, "error_text"
    )
    return list(runs.order_by("-created_at")[:LIMIT])


TABLES = {
    "top_users": top_users,
    "top_agents": top_agents,
    "top_models": top_models,
    "slowest_runs": slowest_runs,
    "latest_errors": latest_errors,
}
