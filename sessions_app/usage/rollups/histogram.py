"""Times kept as counts per bucket, so percentiles of many days are read from a few rows.

Buckets are 2 % wide on a log scale and a bucket stands for its geometric middle, so a
percentile read from them is within 1 % of the exact one. Every percentile of the dashboard
goes through these buckets, from rolled-up days and from raw rows alike, so both give the same
numbers on every database.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

BASE = 1.02
ZERO = -1_000_000  # the bucket of times of zero (or less): it stands for 0.0
Histogram = Counter[int]


def bucket(seconds: float) -> int:
    return math.floor(math.log(seconds) / math.log(BASE)) if seconds > 0 else ZERO


def middle(bucket_: int) -> float:
    return 0.0 if bucket_ == ZERO else BASE ** (bucket_ + 0.5)


def of(values: Iterable[float | None]) -> Histogram:
    """The histogram of the values; nulls are left out."""
    return Counter(bucket(v) for v in values if v is not None)


def percentile(counts: Mapping[int, int], fraction: float) -> float | None:
    """Linear interpolation between closest ranks (as usage.percentiles does) over the
    buckets' middles; None when there are no values."""
    total = sum(counts.values())
    if not total:
        return None
    position = (total - 1) * fraction
    low, high = math.floor(position), math.ceil(position)
    at_low = at_high = None
    seen = 0
    for key in sorted(counts):
        seen += counts[key]
        if at_low is None and seen > low:
            at_low = middle(key)
        if seen > high:
            at_high = middle(key)
            break
    assert at_low is not None and at_high is not None
    return at_low + (at_high - at_low) * (position - low)


def percentiles(counts: Mapping[int, int], fractions: Sequence[float]) -> list[float | None]:
    return [percentile(counts, f) for f in fractions]
