"""Percentiles of a column, per group, computed where the database allows it.

PostgreSQL has `percentile_cont`; SQLite has nothing like it, so there the values are read and
interpolated here the same way (linear between closest ranks), and both give the same numbers.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.db import connections
from django.db.models import Aggregate, FloatField, QuerySet

FRACTIONS = (0.5, 0.95)


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class PercentileCont(Aggregate):
    """PostgreSQL's continuous percentile; the fraction is ours, never user input."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(%(fraction)r) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: str, fraction: float, **extra: Any) -> None:
        super().__init__(expression, fraction=float(fraction), **extra)


Spreads = dict[Any, dict[str, list[float | None]]]


def percentiles(
    rows: QuerySet[Any],
    key: str | None,
    fields: Sequence[str],
    fractions: Sequence[float] = FRACTIONS,
) -> Spreads:
    """{group key: {field: [its percentile at each fraction]}}; null values are left out.

    `key` names a column or annotation of `rows` to group by (groups without rows are absent);
    None makes one group, keyed None, present even without rows.
    """
    rows = rows.order_by()
    if connections[rows.db].vendor == "postgresql":
        return _in_sql(rows, key, fields, fractions)
    return _in_python(rows, key, fields, fractions)


def _in_sql(
    rows: QuerySet[Any], key: str | None, fields: Sequence[str], fractions: Sequence[float]
) -> Spreads:
    aggregates = {
        f"{field}_p{i}": PercentileCont(field, fraction)
        for field in fields
        for i, fraction in enumerate(fractions)
    }
    found = (
        [rows.aggregate(**aggregates)] if key is None else rows.values(key).annotate(**aggregates)
    )
    out: Spreads = {}
    for row in found:
        group = None if key is None else row[key]
        out[group] = {
            field: [row[f"{field}_p{i}"] for i in range(len(fractions))] for field in fields
        }
    return out


def _in_python(
    rows: QuerySet[Any], key: str | None, fields: Sequence[str], fractions: Sequence[float]
) -> Spreads:
    columns = ([key] if key is not None else []) + list(fields)
    values: dict[Any, dict[str, list[float]]] = defaultdict(lambda: {f: [] for f in fields})
    offset = 0 if key is None else 1
    if key is None:  # the one group exists even without rows, as in SQL
        values[None] = {f: [] for f in fields}
    for row in rows.values_list(*columns).iterator(chunk_size=5000):
        group = values[None if key is None else row[0]]
        for i, field in enumerate(fields):
            if row[offset + i] is not None:
                group[field].append(row[offset + i])
    return {
        group: {field: [percentile(found[field], f) for f in fractions] for field in fields}
        for group, found in values.items()
    }
