"""What budgets add to the staff dashboard (sessions_app.usage's dashboard parts): how many
people have used up a limit of their own, and each budget's use as a share of its limit, as
things stand now whatever range the page shows."""

from __future__ import annotations

from decimal import Decimal

from django.http import HttpRequest
from django.utils import timezone

from budgets_app import overview, spend
from sessions_app.usage import DashboardFigures, DashboardPart, ExtraChart, Tile, add_dashboard_part

MAX_BARS = 20


def may_view_budgets(request: HttpRequest) -> bool:
    return request.user.has_perm("budgets_app.view_budget")


def budget_figures(scope: object) -> DashboardFigures:
    """As things stand now: the page's range and filters (`scope`) do not apply."""
    now = timezone.now()
    bars: list[tuple[str, float]] = []
    people_out: set[object] = set()
    for label, limit, people in overview.each_limit():
        if people is None:
            used = spend.used([limit], now)[limit]
            bars.append((label, _percent(used, limit.amount)))
            if not limit.shared and used >= limit.amount:
                people_out.add(limit.pool[1])
            continue
        out, top = spend.used_up(limit, people, now)
        bars.append((f"{label} (most used)", _percent(top, limit.amount)))
        people_out |= out
    tile = Tile(
        "budgets_used_up",
        "People at a budget limit",
        "count",
        len(people_out),
        None,
        "People who have used up a limit of their own (their budget, their group's for each "
        "member, or the default) in its current period; new runs wait until it renews.",
        lower_is_better=True,
    )
    if not bars:
        return DashboardFigures([tile])
    bars = sorted(bars, key=lambda bar: -bar[1])[:MAX_BARS]
    chart = {
        "labels": [label for label, _ in bars],
        "unit": "percent",
        "datasets": [{"key": "used", "label": "used, % of limit", "data": [p for _, p in bars]}],
    }
    note = (
        "Each budget's use in its current period as a share of its limit (for a limit of each "
        "person's, the person who used most of it); the most used first."
    )
    return DashboardFigures([tile], [ExtraChart("budgets", "Budgets used now", chart, note)])


def _percent(used: Decimal, limit: Decimal) -> float:
    return 100.0 if not limit else round(float(used * 100 / limit), 1)


def install() -> None:
    add_dashboard_part(DashboardPart(may_view_budgets, budget_figures))
