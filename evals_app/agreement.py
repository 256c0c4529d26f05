"""How much people agree when they rate the same answers: the share of pairs of raters who chose
alike, and Fleiss' kappa, which discounts the agreement their choices would reach by chance.

Each subject (an answer pair shown to several people) is the list of choices its raters made;
subjects with fewer than two raters say nothing about agreement and are left out. Raters may
differ in number from subject to subject: each subject's agreement is over its own pairs of
raters, and the chance agreement over every choice made (Fleiss 1971, with per-subject counts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

Subjects = Iterable[Sequence[Hashable]]


def _rated_twice(subjects: Subjects) -> list[Counter[Hashable]]:
    return [Counter(choices) for choices in subjects if len(choices) >= 2]


def _agreement_of(counts: Counter[Hashable]) -> float:
    """The share of this subject's pairs of raters who made the same choice."""
    n = sum(counts.values())
    return sum(c * (c - 1) for c in counts.values()) / (n * (n - 1))


def percent_agreement(subjects: Subjects) -> float | None:
    """The mean over subjects of the share of rater pairs that agree (0 to 1); None when no
    subject has two raters."""
    rated = _rated_twice(subjects)
    if not rated:
        return None
    return sum(_agreement_of(c) for c in rated) / len(rated)


def fleiss_kappa(subjects: Subjects) -> float | None:
    """Agreement beyond chance: 1 when all agree, 0 when no more than chance, below 0 when
    less. None when it is undefined: no subject with two raters, or every choice the same (the
    chance of agreeing is then 1 and nothing is left to beat)."""
    rated = _rated_twice(subjects)
    if not rated:
        return None
    observed = sum(_agreement_of(c) for c in rated) / len(rated)
    totals: Counter[Hashable] = Counter()
    for counts in rated:
        totals.update(counts)
    choices = sum(totals.values())
    expected = sum((n / choices) ** 2 for n in totals.values())
    if expected >= 1:
        return None
    return (observed - expected) / (1 - expected)
