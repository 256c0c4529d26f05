"""The dashboard's tiles: one figure each for the range, beside the previous period's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sessions_app.models import CallKind, RunStatus
from sessions_app.usage.dashboard.queries import Rows
from sessions_app.usage.dashboard.scope import CURRENT, PREVIOUS
from sessions_app.usage.percentiles import Spreads

Number = int | float | Decimal
BACKGROUND = "titles & summaries"
STOPPED = (RunStatus.CANCELLED, RunStatus.INTERRUPTED)


@dataclass(frozen=True)
class Tile:
    key: str
    label: str
    unit: str  # count, tokens, usd, ratio, score or seconds
    value: Number | None
    previous: Number | None
    hint: str
    # Parts of the value shown under it, e.g. chat calls and titles & summaries apart.
    parts: tuple[tuple[str, Number | None], ...] = ()
    # For a ratio: how many things it was taken over, e.g. ("ratings", 12).
    basis: tuple[str, int] | None = None
    lower_is_better: bool = False

    @property
    def change(self) -> float | None:
        """Percent change from the previous period; None when there is nothing to compare."""
        if self.value is None or not self.previous:
            return None
        return (float(self.value) - float(self.previous)) / float(self.previous) * 100


def _sum(rows: Rows, field: str, period: str, where: Callable[[dict[str, Any]], bool]) -> Any:
    """The sum of `field` over the rows of `period` that match; None when no value is known."""
    values = [r[field] for r in rows if r["period"] == period and where(r) and r[field] is not None]
    return sum(values) if values else None


def _ratio(part: Number | None, whole: Number | None) -> float | None:
    return float(part or 0) / float(whole) if whole else None


def _everything(row: dict[str, Any]) -> bool:
    return True


def _chat(row: dict[str, Any]) -> bool:
    return row["kind"] == CallKind.CHAT


def _background(row: dict[str, Any]) -> bool:
    return row["kind"] != CallKind.CHAT


def run_tiles(runs: Rows, people: dict[str, int]) -> list[Tile]:
    def count(period: str, statuses: tuple[str, ...] | None = None) -> int:
        where = _everything if statuses is None else (lambda r: r["status"] in statuses)
        return _sum(runs, "runs", period, where) or 0

    total = {p: count(p) for p in (CURRENT, PREVIOUS)}
    errors = {p: _ratio(count(p, (RunStatus.ERROR,)), total[p]) for p in total}
    stopped = {p: _ratio(count(p, STOPPED), total[p]) for p in total}
    return [
        Tile("active_users", "Active users", "count", people["users"], people["users_before"],
             "People who started at least one run."),
        Tile("sessions", "Sessions", "count", people["sessions"], people["sessions_before"],
             "Sessions in which at least one run started."),
        Tile("runs", "Runs", "count", total[CURRENT], total[PREVIOUS],
             "Runs started, whatever became of them."),
        Tile("error_rate", "Error rate", "ratio", errors[CURRENT], errors[PREVIOUS],
             "Runs that ended in an error, of the runs started.", lower_is_better=True),
        Tile("stopped_rate", "Cancelled or interrupted", "ratio", stopped[CURRENT],
             stopped[PREVIOUS], "Runs cancelled by their user or interrupted (server stopped), "
             "of the runs started.", lower_is_better=True),
    ]  # fmt: skip


def call_tiles(calls: Rows) -> list[Tile]:
    def split(field: str, key: str, label: str, unit: str, hint: str) -> Tile:
        chat = _sum(calls, field, CURRENT, _chat)
        background = _sum(calls, field, CURRENT, _background)
        return Tile(
            key, label, unit,
            _sum(calls, field, CURRENT, _everything), _sum(calls, field, PREVIOUS, _everything),
            hint, parts=(("chat", chat), (BACKGROUND, background)),
            lower_is_better=unit == "usd",
        )  # fmt: skip

    by_day = "counted on the day of each model call, title and summary calls included"
    return [
        split("input_tokens", "input_tokens", "Tokens in", "tokens", f"Prompt tokens, {by_day}."),
        split("output_tokens", "output_tokens", "Tokens out", "tokens",
              f"Generated tokens, {by_day}."),
        split("cost", "cost", "Estimated cost", "usd", "Each call's cost from the price table "
              f"(LLM_PRICES) when it was made, {by_day}; unpriced models add nothing."),
    ]  # fmt: skip


def latency_tiles(latency: Spreads) -> list[Tile]:
    def spread(field: str, which: int) -> tuple[float | None, float | None]:
        now, before = latency.get(CURRENT, {}), latency.get(PREVIOUS, {})
        return (now.get(field, [None, None])[which], before.get(field, [None, None])[which])

    tiles = []
    for field, label, hint in (
        ("time_to_first_token", "Time to first token", "from the request to the first token"),
        ("duration", "Duration", "from the request to the last token"),
    ):
        for which, name in enumerate(("p50", "p95")):
            value, previous = spread(field, which)
            tiles.append(
                Tile(f"{field}_{name}", f"{label} {name}", "seconds", value, previous,
                     f"{name} of chat calls, {hint}; title and summary calls left out.",
                     lower_is_better=True)
            )  # fmt: skip
    return tiles


def feedback_tile(feedback: Rows) -> Tile:
    def rated(period: str, rating: int | None) -> int:
        where = _everything if rating is None else (lambda r: r["feedback_rating"] == rating)
        return _sum(feedback, "runs", period, where) or 0

    ups = {p: _ratio(rated(p, 1), rated(p, None)) for p in (CURRENT, PREVIOUS)}
    return Tile(
        "thumbs_up", "Thumbs up", "ratio", ups[CURRENT], ups[PREVIOUS],
        "Thumbs up, of the ratings given in the range (counted on the day of the rating).",
        basis=("ratings", rated(CURRENT, None)),
    )  # fmt: skip
