"""The dashboard's tables: who and what used the most, the slowest runs, the latest errors.

The top tables count deleted runs too (Scope.started); the slowest runs and latest errors list
runs that are still there, to be opened."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import Substr

from sessions_app.models import CallDay, RunDay, RunStatus
from sessions_app.usage.dashboard.scope import Scope

LIMIT = 10
ERROR_CHARS = 300
Rows = list[dict[str, Any]]
PEOPLE = ("user_id", "user__username", "agent_id", "agent__name", "model")
RUN_COLUMNS = (
    "run_id", "created_at", "status", "model", "duration", "time_to_first_token", "user_id",
    "user__username", "agent_id", "agent__name", "session_id", "session__session_name",
)  # fmt: skip


@dataclass
class Usage:
    """Runs and errors per user, agent and model, and the tokens and cost of their calls,
    over the range: the rolled-up days' sums added to the live rows' (see queries)."""

    runs: Rows
    calls: Rows


def usage(scope: Scope) -> Usage:
    """Four grouped queries, a row per user, agent and model each: few enough to rank here."""
    errors = Q(status=RunStatus.ERROR)

    def shape(runs: QuerySet[Any]) -> QuerySet[Any]:
        return runs.values(*PEOPLE).annotate(runs=Count("pk"), errors=Count("pk", filter=errors))

    rolled = scope.rolled(RunDay).filter(started__gt=0).values(*PEOPLE)
    keys = ("user_id", "agent_id", "model")
    return Usage(
        runs=[
            *scope.started(shape, live=True),
            *rolled.annotate(runs=Sum("started"), errors=Sum("started", filter=errors)),
        ],
        calls=[
            *scope.calls(live=True)
            .values(*keys)
            .annotate(
                input_tokens=Sum("input_tokens"),
                output_tokens=Sum("output_tokens"),
                cost=Sum("cost"),
            ),
            *scope.rolled(CallDay)
            .values(*keys)
            .annotate(
                input_tokens=Sum("tokens_in"), output_tokens=Sum("tokens_out"), cost=Sum("spent")
            ),
        ],
    )


def _top(used: Usage, key: str, label: str) -> Rows:
    """The LIMIT keys with the most runs started (then by label): their runs and errors, and
    the tokens and cost of all their calls (title and summary calls included)."""
    ranked: dict[Any, dict[str, Any]] = {}
    for row in used.runs:
        empty = {key: row[key], label: row[label], "runs": 0, "errors": 0}
        top = ranked.setdefault(row[key], empty)
        top["runs"] += row["runs"]
        top["errors"] += row["errors"] or 0
    rows = sorted(ranked.values(), key=lambda r: (-r["runs"], r[label], r[key]))[:LIMIT]
    totals = {r[key]: {"input_tokens": 0, "output_tokens": 0, "cost": None} for r in rows}
    for row in used.calls:
        for name, found in totals.get(row[key], {}).items():
            if row[name] is not None:
                totals[row[key]][name] = (found or 0) + row[name]
    return [{**row, **totals[row[key]]} for row in rows]


def top_users(scope: Scope, used: Usage | None = None) -> Rows:
    return _top(used or usage(scope), "user_id", "user__username")


def top_agents(scope: Scope, used: Usage | None = None) -> Rows:
    return _top(used or usage(scope), "agent_id", "agent__name")


def top_models(scope: Scope, used: Usage | None = None) -> Rows:
    return _top(used or usage(scope), "model", "model")


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


def build(scope: Scope) -> dict[str, Rows]:
    """Every table, the three top tables from one reading of the usage."""
    used = usage(scope)
    return {
        name: table(scope, used) if name in TOPS else table(scope) for name, table in TABLES.items()
    }


TOPS = ("top_users", "top_agents", "top_models")
TABLES = {
    "top_users": top_users,
    "top_agents": top_agents,
    "top_models": top_models,
    "slowest_runs": slowest_runs,
    "latest_errors": latest_errors,
}
