"""Checks another app adds to the start of every run (budgets, in its AppConfig.ready), so this
app never names it: called in the creation batch every door goes through, and before a paused
run goes on. With none set, every run passes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sessions_app.models import User


class AdmissionCheck(Protocol):
    def refusals(
        self, asks: Sequence[tuple[User, Any]], *, new_runs: bool = True
    ) -> list[Exception | None]:
        """For runs asked at once, each (user, agent pk): each one's refusal, or None. Called
        on the database thread inside the batch's transaction. `new_runs` false: runs going
        on, which were counted as they started."""
        ...


_check: AdmissionCheck | None = None


def set_admission_check(check: AdmissionCheck | None) -> None:
    global _check
    _check = check


def refusals(asks: Sequence[tuple[User, Any]], *, new_runs: bool = True) -> list[Exception | None]:
    if _check is None or not asks:
        return [None] * len(asks)
    return _check.refusals(asks, new_runs=new_runs)


def check(user: User, agent_id: Any) -> None:
    """Raise the refusal, if any, of a run already counted calling its model again."""
    refusal = refusals([(user, agent_id)], new_runs=False)[0]
    if refusal is not None:
        raise refusal
