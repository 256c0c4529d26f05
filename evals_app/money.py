"""Costs as every evaluation page and report shows them, by one rule: unknown (no price is
configured for the model) is an en dash, a known zero is "$0", anything else in dollars with the
digits it needs to be told apart from its neighbours."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

UNKNOWN = "–"
UNKNOWN_WHY = "Unknown: no price is configured for the model (LLM_PRICES)."


def usd(value: Any, *, estimated: bool = False) -> str:
    """`estimated`: the usage behind it was counted here, not reported by the model ("~")."""
    if value is None or value == "":
        return UNKNOWN
    amount = Decimal(str(value))
    if amount == 0:
        shown = "$0"
    elif abs(amount) >= 1:
        shown = f"${amount:,.2f}"
    elif abs(amount) >= Decimal("0.0001"):
        shown = f"${amount:.4f}"
    else:
        shown = f"${amount:.6f}"
    return f"~{shown}" if estimated else shown
