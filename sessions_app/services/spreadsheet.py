"""CSV cells a spreadsheet opens safely: text that it would run as a formula is quoted."""

from __future__ import annotations

from typing import Any

# A spreadsheet runs a cell that starts with one of these as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """The value for a CSV writer: None as an empty cell, formula-like text behind a quote."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return "" if value is None else value
