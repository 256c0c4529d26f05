"""Each budget as staff read it (the admin's list, the dashboard): a pool's use, or for a limit
of each person's, the people it is the limit of."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from budgets_app import rules
from budgets_app.defaults import default_budget
from budgets_app.models import Budget, amount_text
from budgets_app.rules import Limit


def each_limit() -> list[tuple[str, Limit, QuerySet[Any] | None]]:
    """(label, limit, whom): whom None for a pool's limit, else the people whose own limit it
    is (those a more specific budget of the same measure, period and agent does not govern)."""
    active = get_user_model().objects.filter(is_active=True)
    budgets = list(Budget.objects.select_related("user", "group", "agent"))
    found: list[tuple[str, Limit, QuerySet[Any] | None]] = []
    for budget in budgets:
        limit = rules.budget_limit(budget)
        mine = budget.user_id or budget.shared
        found.append((str(budget), limit, None if mine else people_of(budget, budgets)))
    for measure, period, amount in default_budget():
        limit = Limit(measure, period, amount, None, ("user", None), None, "your")
        label = f"{amount_text(measure, amount)} per {period}, default"
        found.append((label, limit, governed(active, budgets, limit, 3)))
    return found


def governed(
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


def people_of(budget: Budget, budgets: list[Budget]) -> QuerySet[Any]:
    """The active people a budget of each person's (a group's or everyone's) is the limit of."""
    active = get_user_model().objects.filter(is_active=True)
    members = active.filter(groups=budget.group_id) if budget.group_id else active
    return governed(members, budgets, rules.budget_limit(budget), 1 if budget.group_id else 2)
