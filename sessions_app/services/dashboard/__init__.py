"""The staff dashboard's figures, all aggregated in SQL from the runs and the per-call rows.

Runs count by the day they started, tokens, cost and timings by the day of each model call,
ratings by the day they were given; days are UTC days.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessions_app.services.dashboard import charts, queries, tables, tiles
from sessions_app.services.dashboard.scope import Scope
from sessions_app.services.dashboard.tiles import Tile

__all__ = ["Dashboard", "Scope", "Tile", "build"]


@dataclass
class Dashboard:
    scope: Scope
    tiles: list[Tile]
    charts: dict[str, charts.Chart]
    tables: dict[str, list[dict[str, Any]]]


def build(scope: Scope) -> Dashboard:
    runs = queries.runs_by_day(scope)
    calls = queries.calls_by_day(scope)
    feedback = queries.feedback_by_day(scope)
    return Dashboard(
        scope=scope,
        tiles=[
            *tiles.run_tiles(runs, queries.people(scope)),
            *tiles.call_tiles(calls),
            *tiles.latency_tiles(queries.latency(scope)),
            tiles.feedback_tile(feedback),
        ],
        charts={
            "runs_by_status": charts.runs_by_status(scope, runs),
            "tokens_by_model": charts.tokens_by_model(scope, calls),
            "first_token": charts.first_token_by_day(scope, queries.first_token_by_day(scope)),
            "cost_per_day": charts.cost_per_day(scope, calls),
            "feedback_per_day": charts.feedback_per_day(scope, feedback),
        },
        tables={name: table(scope) for name, table in tables.TABLES.items()},
    )
