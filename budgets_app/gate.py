"""The budget check every run passes before its model is called: sessions_app's admission check
(set in this app's ready), made in the creation batch that the chat socket, the REST API and
the OpenAI API all go through, and before a paused run goes on.

A run is refused once any limit covering it is used up. Runs count as they start, so many
asks at once at the edge of a runs limit take exactly what is left; tokens and cost count as
calls end, so a limit on them is overshot at most by the runs in flight when it is reached.
The people and shared budgets a batch counts are locked (PostgreSQL; SQLite's transactions
take the write lock as they begin) so processes checking at once count one after the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from budgets_app import periods, rules, spend
from budgets_app.models import Budget, Measure, amount_text
from budgets_app.rules import Limit
from sessions_app.services.ratelimit import RateLimited

BUDGET = "budget"


class BudgetExceeded(RateLimited):
    """A limit covering the run is used up until `resets_at`."""

    code = "insufficient_quota"  # OpenAI's, for a 429 that waiting a minute does not end

    def __init__(self, limit: Limit, used: Decimal, now: datetime) -> None:
        self.limit, self.used = limit, used
        self.resets_at = periods.next_start(limit.period, now)
        wait = (self.resets_at - now).total_seconds()
        said = f"{_capital(limit.describe())} is used up ({self.spent} used)"
        super().__init__(wait, BUDGET, f"{said}; it renews at {self.resets_at.isoformat()}.")

    @property
    def spent(self) -> str:
        return amount_text(self.limit.measure, self.used)

    def in_words(self) -> str:
        """What the chat page says: when it renews, in the server's time zone."""
        when = timezone.localtime(self.resets_at)
        return (
            f"You have used {self.limit.describe()} ({self.spent} used). "
            f"It renews {when:%A} {when.day} {when:%B at %H:%M} ({when.tzname()})."
        )

    def fields(self) -> dict[str, Any]:
        """What a 429 says of it besides its message."""
        number = int if self.limit.measure != Measure.COST else float
        budget = {
            "measure": self.limit.measure,
            "period": self.limit.period,
            "limit": number(self.limit.amount),
            "used": number(self.used),
            "resets_at": self.resets_at.isoformat(),
            "shared": self.limit.shared,
            "agent_id": str(self.limit.agent_id) if self.limit.agent_id else None,
        }
        return {"budget": budget}


def refusals(asks: Sequence[tuple[Any, Any]], *, new_runs: bool = True) -> list[Exception | None]:
    """For runs asked at once, each (user, agent_id): each one's BudgetExceeded, or None for
    those admitted. `new_runs` false: runs going on, already counted as runs."""
    limits = rules.limits_for_many(list({user.pk: user for user, _ in asks}.values()))
    if not any(limits.values()):
        return [None] * len(asks)
    now = timezone.now()
    every = {limit for found in limits.values() for limit in found}
    if new_runs:
        _lock(every)
    staff = {user.pk for user, _ in asks if user.is_staff}
    used = spend.used(every, now, staff)
    out: list[Exception | None] = []
    for user, agent_id in asks:
        # A run going on was counted as it started: only tokens and cost hold it back.
        covering = [
            limit
            for limit in limits[user.pk]
            if limit.covers(agent_id) and (new_runs or limit.measure != Measure.RUNS)
        ]
        over = [limit for limit in covering if used[limit] >= limit.amount]
        if over:
            # The one that renews last: the run waits for all of them.
            binding = max(over, key=lambda limit: periods.next_start(limit.period, now))
            out.append(BudgetExceeded(binding, used[binding], now))
            continue
        out.append(None)
        for limit in covering:
            if limit.measure == Measure.RUNS:
                used[limit] += 1
    return out


def _lock(limits: set[Limit]) -> None:
    """Runs limits only: tokens and cost are counted as calls end, whoever checks first."""
    counted = [limit for limit in limits if limit.measure == Measure.RUNS]
    people = sorted({limit.pool[1] for limit in counted if not limit.shared})
    shared = sorted({limit.budget_id for limit in counted if limit.shared})
    if people:
        list(get_user_model().objects.select_for_update().filter(pk__in=people).order_by("pk"))
    if shared:
        list(Budget.objects.select_for_update().filter(pk__in=shared).order_by("pk"))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
