"""The default budget for everyone, from PARLEY_DEFAULT_BUDGET: a comma-separated list such as
"200000 tokens/day, 5 usd/month, 500 runs/week" (measures tokens, usd or runs; periods day,
week or month). Each part is each person's limit unless a budget of their own, or one of
their groups', sets the same measure and period."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from budgets_app.models import Measure
from budgets_app.periods import Period

_PART = re.compile(r"^\s*([0-9][0-9_,.]*)\s*(tokens|usd|runs)\s*/\s*(day|week|month)\s*$", re.I)
_MEASURES = {"tokens": Measure.TOKENS, "usd": Measure.COST, "runs": Measure.RUNS}


def parse(text: str) -> list[tuple[str, str, Decimal]]:
    """(measure, period, amount) of each part; ImproperlyConfigured naming a bad one."""
    found: dict[tuple[str, str], Decimal] = {}
    for part in filter(str.strip, text.split(",")):
        match = _PART.match(part)
        if match is None:
            raise ImproperlyConfigured(
                f"PARLEY_DEFAULT_BUDGET: cannot read {part.strip()!r}; "
                'write e.g. "200000 tokens/day, 5 usd/month, 500 runs/week".'
            )
        number, unit, period = match.groups()
        try:
            amount = Decimal(number.replace("_", "").replace(",", ""))
        except InvalidOperation:
            message = f"PARLEY_DEFAULT_BUDGET: {number!r} is not a number."
            raise ImproperlyConfigured(message) from None
        key = (_MEASURES[unit.lower()], Period(period.lower()))
        if key in found:
            raise ImproperlyConfigured(f"PARLEY_DEFAULT_BUDGET: {unit}/{period} is set twice.")
        found[key] = amount
    return [(measure, period, amount) for (measure, period), amount in found.items()]


def default_budget() -> list[tuple[str, str, Decimal]]:
    return parse(settings.PARLEY_DEFAULT_BUDGET)
