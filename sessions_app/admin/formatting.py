"""Figures as people read them in the admin: separators, units, dollars, percentages."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

NONE = "—"


def shown(value: Any, unit: str) -> str:
    if value is None or value == "":
        return NONE
    if unit in ("count", "tokens"):
        return f"{int(value):,}"
    if unit == "usd":
        return dollars(value)
    if unit == "ratio":
        return f"{float(value) * 100:.1f} %"
    if unit == "seconds":
        return f"{float(value):.2f} s"
    if unit == "time" and isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    return str(value)


def dollars(value: Decimal | float) -> str:
    """Cents for sums that reach a dollar, more digits below, where cents would all read 0.00."""
    amount = float(value)
    return f"${amount:,.2f}" if abs(amount) >= 1 or amount == 0 else f"${amount:.4f}"


def change(percent: float | None) -> str:
    if percent is None:
        return "no earlier data"
    arrow = "▲" if percent > 0 else "▼" if percent < 0 else "="
    return f"{arrow} {abs(percent):.1f} %"
