"""Which limits a person's runs are held to.

For each measure, period and agent (or every agent), a person's own limit is the most specific
one set: their own budget, else the most generous of their groups' (each member's), else
everyone's (each person's), else for every agent the default from settings. Shared budgets (a
group's or everyone's together) hold on top of it. A run must fit every limit that covers its
agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Q

from budgets_app.defaults import default_budget
from budgets_app.models import Budget, amount_text
from budgets_app.periods import ADJECTIVE
from sessions_app.models import User

# Whose use a limit counts: ("user", pk), ("group", pk) or ("everyone", None).
Pool = tuple[str, Any]
_LEVEL = {"user": 0, "group": 1, "everyone": 2}  # the most specific first


@dataclass(frozen=True)
class Limit:
    measure: str
    period: str
    amount: Decimal
    agent_id: Any  # None: every agent
    pool: Pool
    budget_id: int | None  # None: the default from settings
    whom: str  # "your", "group staff's", "everyone's"
    agent_name: str = ""

    @property
    def shared(self) -> bool:
        return self.pool[0] != "user"

    def covers(self, agent_id: Any) -> bool:
        return self.agent_id is None or self.agent_id == agent_id

    def describe(self) -> str:
        """ "your daily budget of 10,000 tokens on agent Helper" """
        on = f" on agent {self.agent_name}" if self.agent_name else ""
        return (
            f"{self.whom} {ADJECTIVE[self.period]} budget of "
            f"{amount_text(self.measure, self.amount)}{on}"
        )


def limits_for(user: Any) -> list[Limit]:
    """Every limit `user`'s runs are held to."""
    return limits_for_many([user])[user.pk]


def limits_for_many(users: Sequence[Any]) -> dict[Any, list[Limit]]:
    """Every limit each of `users` is held to, by their key: one query, and one more for
    their groups when a group has a budget."""
    pks = {user.pk for user in users}
    members = User.groups.through.objects.filter(user__in=pks)
    rows = list(
        Budget.objects.filter(
            Q(user__in=pks) | Q(group__in=members.values("group")) | Q(user=None, group=None)
        ).select_related("group", "agent")
    )
    groups_of: dict[Any, set[Any]] = {pk: set() for pk in pks}
    if any(budget.group_id for budget in rows):
        for user_id, group_id in members.values_list("user_id", "group_id"):
            groups_of[user_id].add(group_id)
    found = {}
    for user in users:
        theirs = [b for b in rows if _holds(b, user.pk, groups_of[user.pk])]
        found[user.pk] = _personal(user, [b for b in theirs if not b.shared]) + [
            _limit(user, b) for b in theirs if b.shared
        ]
    return found


def _holds(budget: Budget, user_id: Any, groups: set[Any]) -> bool:
    if budget.user_id:
        return budget.user_id == user_id
    return budget.group_id in groups if budget.group_id else True


def _personal(user: Any, rows: list[Budget]) -> list[Limit]:
    chosen: dict[tuple[str, str, Any], Budget] = {}
    for budget in rows:
        key = (budget.measure, budget.period, budget.agent_id)
        held = chosen.get(key)
        if held is None or _better(budget, held):
            chosen[key] = budget
    limits = [_limit(user, budget) for budget in chosen.values()]
    for measure, period, amount in default_budget():
        if (measure, period, None) not in chosen:
            limits.append(Limit(measure, period, amount, None, ("user", user.pk), None, "your"))
    return limits


def _better(budget: Budget, held: Budget) -> bool:
    """Whether `budget` rather than `held` is a person's limit: the more specific, or among
    their groups' the more generous."""
    mine, theirs = _level(budget), _level(held)
    return mine < theirs or (mine == theirs and budget.limit > held.limit)


def _level(budget: Budget) -> int:
    return _LEVEL["user" if budget.user_id else "group" if budget.group_id else "everyone"]


def budget_limit(budget: Budget) -> Limit:
    """A budget as a limit on its own pool: its user's, its group's or everyone's (for one of
    each person's, the pool is filled in per person: see spend.by_people)."""
    if budget.user_id:
        return _limit(budget.user, budget)
    return _limit(None, budget)


def _limit(user: Any, budget: Budget) -> Limit:
    if not budget.shared:
        pool, whom = ("user", user.pk if user is not None else None), "your"
    elif budget.group_id:
        pool, whom = ("group", budget.group_id), f"group {budget.group}'s"
    else:
        pool, whom = ("everyone", None), "everyone's"
    agent = budget.agent.name if budget.agent_id else ""
    return Limit(
        budget.measure, budget.period, budget.limit, budget.agent_id, pool, budget.pk, whom, agent
    )
