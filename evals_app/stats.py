"""The statistics of a report: pure functions, deterministic for a seed.

The interval of a mean is a percentile bootstrap: `n` resamples of the values, each drawn with
replacement as `numpy.random.default_rng(seed).integers(0, k, size=(n, k))` (one row of k
indices per resample), the mean of each, and the (1 - level) / 2 and (1 + level) / 2
percentiles of those means (numpy's default, linear interpolation). Two versions are compared
item by item: each item's mean over its repeats, the candidate's minus the baseline's, and the
same bootstrap over those differences.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

Values = Sequence[float]


BLOCK = 100


def bootstrap_mean(
    values: Values, seed: int, n: int = 2000, level: float = 0.95
) -> tuple[float | None, float | None, float | None]:
    """(mean, low, high): the mean and its percentile bootstrap interval; Nones for no values."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return None, None, None
    rng = np.random.default_rng(seed)
    means = np.empty(n)
    # Drawn BLOCK resamples at a time (the same indices as one (n, k) draw, row by row), so
    # 10,000 items take a few megabytes rather than hundreds.
    for start in range(0, n, BLOCK):
        rows = min(BLOCK, n - start)
        drawn = rng.integers(0, data.size, size=(rows, data.size))
        means[start : start + rows] = data[drawn].mean(axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return float(data.mean()), float(low), float(high)


def item_mean(value: float | Values) -> float:
    """One item's figure: its value, or the mean of its repeats' values."""
    if isinstance(value, int | float):
        return float(value)
    return float(np.mean(np.asarray(value, dtype=float)))


def paired(
    base_by_item: Mapping[Any, float | Values],
    cand_by_item: Mapping[Any, float | Values],
    seed: int,
    n: int = 2000,
    level: float = 0.95,
) -> tuple[float | None, float | None, float | None, int, int, int]:
    """(mean difference, low, high, wins, ties, losses) of the candidate against the baseline,
    over the items both have a value for: per item the mean over repeats, candidate minus baseline;
    an item is a win, tie or loss by the sign of its difference."""
    differences = differences_by_item(base_by_item, cand_by_item)
    diffs = list(differences.values())
    mean, low, high = bootstrap_mean(diffs, seed, n, level)
    wins = sum(1 for d in diffs if d > 0)
    losses = sum(1 for d in diffs if d < 0)
    return mean, low, high, wins, len(diffs) - wins - losses, losses


def differences_by_item(
    base_by_item: Mapping[Any, float | Values], cand_by_item: Mapping[Any, float | Values]
) -> dict[Any, float]:
    """Per item both have values for, in the candidate's order: candidate minus baseline. Tiny
    rounding differences (repeats averaged in another order) count as none."""
    out = {}
    for item, candidate in cand_by_item.items():
        base = base_by_item.get(item)
        if base is None or _empty(base) or _empty(candidate):
            continue
        difference = item_mean(candidate) - item_mean(base)
        out[item] = 0.0 if abs(difference) < 1e-12 else difference
    return out


def percentile(values: Values, p: float) -> float | None:
    """The p-th percentile (0 to 100, linear interpolation); None for no values."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return None
    return float(np.percentile(data, p))


def _empty(value: float | Values) -> bool:
    return not isinstance(value, int | float) and len(value) == 0
