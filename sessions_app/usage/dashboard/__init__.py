"""The staff dashboard's figures, aggregated in SQL from the daily rollups of closed days and
from the runs and the per-call rows of the rest of the range (of the whole range when filtered
by source, which the rollups do not record).

Runs count by the day they started, tokens, cost and timings by the day of each model call,
ratings by the day they were given; days are UTC days.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessions_app.usage.dashboard import charts, latency, queries, tables, tiles
from sessions_app.usage.dashboard.scope import Scope
from sessions_app.usage.dashboard.tiles import Tile

__all__ = ["Dashboard", "Scope", "Tile", "build", "table"]


@dataclass
class Dashboard:
    scope: Scope
    tiles: list[Tile]
    charts: dict[str, charts.Chart]
    tables: dict[str, list[dict[str, Any]]]


def build(scope: Scope) -> Dashboard:
    queries.ensure_rolled(scope)
    runs = queries.runs_by_day(scope)
    calls = queries.calls_by_day(scope)
    feedback = queries.feedback_by_day(scope)
    by_period, by_day = latency.latency(scope)
    return Dashboard(
        scope=scope,
        tiles=[
            *tiles.run_tiles(runs, queries.people(scope)),
            *tiles.call_tiles(calls),
            *tiles.latency_tiles(by_period),
            tiles.feedback_tile(feedback),
        ],
        charts={
            "runs_by_status": charts.runs_by_status(scope, runs),
            "tokens_by_model": charts.tokens_by_model(scope, calls),
            "first_token": charts.first_token_by_day(scope, by_day),
            "cost_per_day": charts.cost_per_day(scope, calls),
            "feedback_per_day": charts.feedback_per_day(scope, feedback),
        },
        tables=tables.build(scope),
    )


def table(scope: Scope, name: str) -> list[dict[str, Any]]:
    """One of the tables alone (a CSV download)."""
    queries.ensure_rolled(scope)
    return tables.TABLES[name](scope)
