"""Preference pairs from regenerations: the same question answered twice in a row, one answer
rated up and the other down."""

from __future__ import annotations

from datasets_app.services.snapshot import effective_rating
from sessions_app.models import Run, RunStatus


def regeneration_pair(run: Run) -> tuple[Run, Run] | None:
    """(chosen, rejected) when `run` and an adjacent regeneration of the same input were rated
    oppositely; the nearest such sibling wins."""
    rating = effective_rating(run)
    if rating not in (1, -1):
        return None
    block = _regenerations(run)
    opposite = [
        other
        for other in block
        if other.pk != run.pk
        and other.status == RunStatus.COMPLETED
        and effective_rating(other) == -rating
    ]
    if not opposite:
        return None
    other = min(opposite, key=lambda r: abs(r.position - run.position))
    return (run, other) if rating == 1 else (other, run)


def first_asked(run: Run) -> Run:
    """The first of the unbroken series of runs asking what `run` asked (`run` itself when it
    was not regenerated)."""
    return _regenerations(run)[0]


def _regenerations(run: Run) -> list[Run]:
    same_input = list(
        Run.objects.filter(session_id=run.session_id, input=run.input).order_by("position")
    )
    return _contiguous(same_input, run.position)


def _contiguous(runs: list[Run], position: int) -> list[Run]:
    """The runs whose positions follow one another without a gap around `position`."""
    positions = {r.position for r in runs}
    low = high = position
    while low - 1 in positions:
        low -= 1
    while high + 1 in positions:
        high += 1
    return [r for r in runs if low <= r.position <= high]
