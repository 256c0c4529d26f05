"""What budgets add to the staff dashboard (sessions_app.usage's dashboard parts): how many
people have used up a limit of their own, and each budget's use as a share of its limit, as
things stand now whatever range the page shows."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from budgets_app import rules, spend
from budgets_app.defaults import default_budget
from budgets_app.models import Budget, amount_text
from budgets_app.rules import Limit
from sessions_app.usage import DashboardFigures, DashboardPart, ExtraChart, Tile, add_dashboard_part

MAX_BARS = 20


def may_view_budgets(request: HttpRequest) -> bool:
    return request.user.has_perm("budgets_app.view_budget")


def budget_figures(scope: object) -> DashboardFigures:
    now = timezone.now()
    bars: list[tuple[str, float]] = []
    people_out: set[object] = set()
    for label, limit, people in _each_limit():
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


def _each_limit() -> list[tuple[str, Limit, QuerySet[Any] | None]]:
    """(label, limit, whom): whom None for a pool's limit, else the people whose own limit it
    is (those a more specific budget of the same measure, period and agent does not govern)."""
    active = get_user_model().objects.filter(is_active=True)
    budgets = list(Budget.objects.select_related("user", "group", "agent"))
    found: list[tuple[str, Limit, QuerySet[Any] | None]] = []
    for budget in budgets:
        limit = rules.budget_limit(budget)
        if budget.user_id or budget.shared:
            found.append((str(budget), limit, None))
            continue
        members = active.filter(groups=budget.group_id) if budget.group_id else active
        level = 1 if budget.group_id else 2
        found.append((str(budget), limit, _governed(members, budgets, limit, level)))
    for measure, period, amount in default_budget():
        limit = Limit(measure, period, amount, None, ("user", None), None, "your")
        label = f"{amount_text(measure, amount)} per {period}, default"
        found.append((label, limit, _governed(active, budgets, limit, 3)))
    return found


def _governed(
    people: QuerySet[Any], budgets: list[Budget], limit: Limit, level: int
) -> QuerySet[Any]:
    """`people` less those a more specific budget of the same kind holds (rules.limits_for:
    their own, then their groups', then everyone's, then the default)."""
    key = (limit.measure, limit.period, limit.agent_id)
    same = [b for b in budgets if not b.shared and (b.measure, b.period, b.agent_id) == key]
    if level > 2 and any(not b.user_id and not b.group_id for b in same):
        return people.none()
    own = [b.user_id for b in same if b.user_id]
    groups = [b.group_id for b in same if b.group_id] if level > 1 else []
    return people.exclude(pk__in=own).exclude(groups__in=groups)


def _percent(used: Decimal, limit: Decimal) -> float:
    return 100.0 if not limit else round(float(used * 100 / limit), 1)


def install() -> None:
    add_dashboard_part(DashboardPart(may_view_budgets, budget_figures))
