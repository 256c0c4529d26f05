"""What evaluation adds to the staff dashboard (through sessions_app.usage's dashboard parts):
live scores, a tile and a daily chart by agent version per scorer, and what evaluating cost,
counted apart from the chat's figures, which stay people's.

Live scores count on the day their run started, like the runs they score, and follow every
filter of the page. One tile and chart per scorer key: scorers have scales of their own, so
their scores are never averaged together.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, date
from decimal import Decimal
from typing import Any

from django.db.models import Avg, Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.http import HttpRequest

from evals_app.models import EvalRule, Score, Trial
from evals_app.scorer_labels import label_of, label_of_key
from evals_app.scorers import spec_key
from sessions_app.usage import (
    DashboardFigures,
    DashboardPart,
    ExtraChart,
    Scope,
    Tile,
    add_dashboard_part,
)

CURRENT, PREVIOUS = "current", "previous"  # the periods as Scope.period names them
# The scorers given a tile and a chart: those with the most scores in the range first.
MAX_SCORERS = 4


def may_view_scores(request: HttpRequest) -> bool:
    return request.user.has_perm("evals_app.view_score")


def may_view_experiments(request: HttpRequest) -> bool:
    return request.user.has_perm("evals_app.view_experiment")


def _scores(scope: Scope, *, both: bool = False) -> QuerySet[Score]:
    """The scores given to runs the page selects (started in the range, or `both` periods)."""
    runs = scope.runs(both=both)
    return Score.objects.order_by().filter(run__in=runs.values("pk"), value__isnull=False)


def _scorers(scope: Scope) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Mean and count of each scorer key's scores per period; the keys to show."""
    rows = (
        _scores(scope, both=True)
        .annotate(period=scope.period("run__created_at"))
        .values("scorer", "period")
        .annotate(mean=Avg("value"), scores=Count("pk"))
    )
    found: dict[str, dict[str, Any]] = defaultdict(dict)
    for row in rows:
        found[row["scorer"]][row["period"]] = row
    counted = {key: periods.get(CURRENT, {}).get("scores", 0) for key, periods in found.items()}
    shown = sorted(found, key=lambda key: (-counted[key], key))[:MAX_SCORERS]
    return found, shown


def _described(key: str, specs: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """A scorer key's label in words (as a rule gives its options, when one still does), and
    those options."""
    spec = specs.get(key)
    label = label_of(spec) if spec is not None else label_of_key(key)
    options = {k: v for k, v in (spec or {}).items() if k != "name"}
    return label, f" {json.dumps(options, ensure_ascii=False)}" if options else ""


def _rule_specs() -> dict[str, dict[str, Any]]:
    specs = (
        spec for scorers in EvalRule.objects.values_list("scorers", flat=True) for spec in scorers
    )
    return {spec_key(s): s if isinstance(s, dict) else {"name": s} for s in specs}


def live_scores(scope: Scope) -> DashboardFigures:
    """A tile and a chart per scorer key (the most scored first), or a tile that says how to
    get scores."""
    found, shown = _scorers(scope)
    if not shown:
        return DashboardFigures([Tile("live_score", "Live score", "score", None, None,
            "No run started in the range has a live score: an evaluation rule (Evaluation › "
            "Evaluation rules) scores a sample of an agent's runs.")])  # fmt: skip
    specs = _rule_specs()
    lines = _lines(scope, shown)
    return DashboardFigures(
        [_score_tile(key, found[key], _described(key, specs)) for key in shown],
        [_chart(scope, key, lines[key]) for key in shown],
    )


def _score_tile(key: str, periods: dict[str, Any], described: tuple[str, str]) -> Tile:
    now, before = periods.get(CURRENT, {}), periods.get(PREVIOUS, {})
    label, options = described
    hint = (
        f"Mean {label} score ({key}{options}) of the runs started in the range that live "
        "evaluation scored; failed scores left out. One tile per scorer, as their scales differ."
    )
    return Tile(f"score:{key}", f"Live score: {label}", "score", now.get("mean"),
                before.get("mean"), hint, basis=("scores", now.get("scores", 0)))  # fmt: skip


Line = tuple[tuple[str, int], str, dict[date, float]]  # (order, label, mean per day)


def _lines(scope: Scope, keys: list[str]) -> dict[str, dict[Any, Line]]:
    """Per scorer key, per agent version: the mean score of the runs started each day."""
    rows = (
        _scores(scope)
        .filter(scorer__in=keys)
        .annotate(day=TruncDate("run__created_at", tzinfo=UTC))
        .values("scorer", "day", "run__agent__name", "run__agent_version__number")
        .annotate(mean=Avg("value"))
    )
    lines: dict[str, dict[Any, Line]] = defaultdict(dict)
    for row in rows:
        agent, number = row["run__agent__name"], row["run__agent_version__number"]
        label = f"{agent} v{number}" if number is not None else f"{agent} (before versions)"
        version = (agent, number or 0)
        _, _, days = lines[row["scorer"]].setdefault(version, (version, label, {}))
        days[row["day"]] = round(row["mean"], 4)
    return lines


def _chart(scope: Scope, key: str, lines: dict[Any, Line]) -> ExtraChart:
    days = scope.days()
    label, _ = _described(key, {})
    chart = {
        "labels": [d.isoformat() for d in days],
        "unit": "score",
        "type": "line",
        "datasets": [
            {"key": f"version:{name}", "label": name, "data": [by_day.get(d) for d in days]}
            for _, name, by_day in sorted(lines.values(), key=lambda line: line[:2])
        ],
    }
    note = (
        f"Mean {key} score of the runs started each day, one line per agent version "
        "(“Helper v3”: the third configuration of Helper); a day with no scored run is a gap."
    )
    return ExtraChart(f"live_score:{key}", f"Live score per day by agent version: {label}",
                      chart, note)  # fmt: skip


def evaluation_usage(scope: Scope) -> DashboardFigures:
    """Tokens and cost of experiment answers (on the day each finished) and of judges, live
    and in experiments (on the day of the score)."""
    trials = Trial.objects.order_by().filter(
        finished_at__gte=scope.previous.start, finished_at__lt=scope.end
    )
    judged = Score.objects.order_by().filter(
        Q(judge_tokens__gt=0) | Q(judge_cost__isnull=False),
        created_at__gte=scope.previous.start,
        created_at__lt=scope.end,
    )
    if scope.agent_id is not None:  # the agent evaluated
        trials = trials.filter(version__agent_id=scope.agent_id)
        judged = judged.filter(
            Q(run__agent_id=scope.agent_id) | Q(trial__version__agent_id=scope.agent_id)
        )
    answers = _by_period(trials, "finished_at", "total_tokens", "cost", scope)
    judges = _by_period(judged, "created_at", "judge_tokens", "judge_cost", scope)
    hint = (
        "{} of experiment answers (on the day each finished) and of judges' verdicts, live "
        "and in experiments (on the day of the score); not in the chat's figures. Narrowed "
        "by the agent evaluated, not by model or user."
    )
    tiles = []
    for field, unit in (("tokens", "tokens"), ("cost", "usd")):
        now = [answers[CURRENT][field], judges[CURRENT][field]]
        before = [answers[PREVIOUS][field], judges[PREVIOUS][field]]
        tiles.append(Tile(f"evaluation_{field}", f"Evaluation {field}", unit, _total(now),
                          _total(before), hint.format(field.capitalize()),
                          parts=(("experiments", now[0]), ("judges", now[1])),
                          lower_is_better=unit == "usd"))  # fmt: skip
    return DashboardFigures(tiles)


def _by_period(
    rows: QuerySet[Any], field: str, tokens: str, cost: str, scope: Scope
) -> dict[str, dict[str, Any]]:
    sums = rows.annotate(period=scope.period(field)).values("period")
    found = {period: {"tokens": 0, "cost": None} for period in (CURRENT, PREVIOUS)}
    for row in sums.annotate(tokens=Sum(tokens), cost=Sum(cost)):
        found[row["period"]] = {"tokens": row["tokens"] or 0, "cost": row["cost"]}
    return found


def _total(values: list[int | Decimal | None]) -> int | Decimal | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def install() -> None:
    """Called once, as this app's admin modules load."""
    add_dashboard_part(DashboardPart(may_view_scores, live_scores))
    add_dashboard_part(DashboardPart(may_view_experiments, evaluation_usage))
