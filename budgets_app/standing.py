"""Where a person stands against each of their limits: what the settings page shows them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.http import HttpRequest
from django.utils import timezone

from budgets_app import periods, rules, spend
from budgets_app.models import amount_text
from budgets_app.rules import Limit


@dataclass(frozen=True)
class Standing:
    limit: Limit
    used: Decimal
    resets_at: datetime

    @property
    def left(self) -> str:
        return amount_text(self.limit.measure, max(self.limit.amount - self.used, Decimal(0)))

    @property
    def spent(self) -> str:
        return amount_text(self.limit.measure, self.used)

    @property
    def percent(self) -> int:
        if not self.limit.amount:
            return 100
        return min(100, int(self.used * 100 / self.limit.amount))

    @property
    def used_up(self) -> bool:
        return self.used >= self.limit.amount


def standings(user: Any, now: datetime | None = None) -> list[Standing]:
    now = now or timezone.now()
    limits = rules.limits_for(user)
    used = spend.used(limits, now, {user.pk} if user.is_staff else set())
    found = [
        Standing(limit, used[limit], periods.next_start(limit.period, now)) for limit in limits
    ]
    return sorted(found, key=lambda s: (s.limit.shared, s.limit.measure, s.resets_at))


def settings_section(request: HttpRequest) -> dict[str, Any] | None:
    """The settings page's budgets section: shown to everyone, saying so when there is none."""
    return {"standings": standings(request.user)}
