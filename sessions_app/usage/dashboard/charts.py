"""The dashboard's charts: one value per UTC day of the range for each series."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import date
from typing import Any

from sessions_app.models import CallKind, RunStatus
from sessions_app.usage.dashboard.queries import Rows
from sessions_app.usage.dashboard.scope import CURRENT, Scope
from sessions_app.usage.dashboard.tiles import BACKGROUND
from sessions_app.usage.percentiles import Spreads

Chart = dict[str, Any]
Field = Callable[[dict[str, Any]], Any]


def _chart(
    days: list[date], series: dict[str, tuple[str, dict[date, Any]]], unit: str, fill: Any = 0
) -> Chart:
    """{labels, unit, datasets: [{key, label, data}]}: a value for every day (`fill` if none)."""
    return {
        "labels": [d.isoformat() for d in days],
        "unit": unit,
        "datasets": [
            {"key": key, "label": label, "data": [by_day.get(d, fill) for d in days]}
            for key, (label, by_day) in series.items()
        ],
    }


def _per_day(rows: Rows, value_of: Field, series_of: Field) -> dict[str, dict[date, Any]]:
    """{series: {day: sum of values}} over this period's rows, `series_of(row)` naming the
    series; null values are left out."""
    out: dict[str, dict[date, Any]] = defaultdict(dict)
    for row in rows:
        value = value_of(row)
        if row["period"] == CURRENT and value is not None:
            days = out[series_of(row)]
            days[row["day"]] = days.get(row["day"], 0) + value
    return out


def _field(name: str) -> Field:
    return lambda row: row[name]


def runs_by_status(scope: Scope, runs: Rows) -> Chart:
    counts = _per_day(runs, _field("runs"), _field("status"))
    series = {s.value: (s.label, counts[s.value]) for s in RunStatus if s.value in counts}
    return _chart(scope.days(), series, "runs")


def tokens_by_model(scope: Scope, calls: Rows) -> Chart:
    """Tokens in and out of chat calls per model, and of title and summary calls apart."""

    def tokens(row: dict[str, Any]) -> int:
        return (row["input_tokens"] or 0) + (row["output_tokens"] or 0)

    chats = _per_day(calls, tokens, lambda r: r["model"] if r["kind"] == CallKind.CHAT else "")
    background = chats.pop("", None)
    biggest_first = sorted(chats, key=lambda m: (-sum(chats[m].values()), m))
    series = {f"model:{m}": (m, chats[m]) for m in biggest_first}
    if background:
        series["background"] = (BACKGROUND, background)
    return _chart(scope.days(), series, "tokens")


def _kind(row: dict[str, Any]) -> str:
    return "chat" if row["kind"] == CallKind.CHAT else "background"


def cost_per_day(scope: Scope, calls: Rows) -> Chart:
    costs = _per_day(calls, _field("cost"), _kind)
    series = {
        key: (label, {d: float(v) for d, v in costs[key].items()})
        for key, label in (("chat", "chat"), ("background", BACKGROUND))
        if key in costs
    }
    return _chart(scope.days(), series, "usd")


def first_token_by_day(scope: Scope, spreads: Spreads) -> Chart:
    series = {
        name: (name, {d: s["time_to_first_token"][i] for d, s in spreads.items()})
        for i, name in enumerate(("p50", "p95"))
    }
    return _chart(scope.days(), series, "seconds", fill=None)


def feedback_per_day(scope: Scope, feedback: Rows) -> Chart:
    counts = _per_day(
        feedback, _field("runs"), lambda r: "up" if r["feedback_rating"] == 1 else "down"
    )
    series = {"up": ("thumbs up", counts["up"]), "down": ("thumbs down", counts["down"])}
    return _chart(scope.days(), series, "ratings")
