"""Rules that add runs to a dataset as they are rated ("every run of agent X rated up", for a
share of them)."""

from __future__ import annotations

import hashlib
from typing import Any

from datasets_app.models import DatasetRule, Rater
from datasets_app.services import collect
from datasets_app.services.snapshot import NotCollectable
from sessions_app.models import Run


def sampled(rule: DatasetRule, run: Run) -> bool:
    """The same run is in or out of a rule's sample every time it is rated."""
    digest = hashlib.sha256(f"{rule.pk}:{run.pk}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 100 < rule.sample_percent


def _rating_by(run: Run, rater: str) -> int | None:
    return run.feedback_rating if rater == Rater.USER else run.staff_rating


def matches(rule: DatasetRule, run: Run, rater: str) -> bool:
    if rule.agent_id is not None and rule.agent_id != run.agent_id:
        return False
    if rule.rated_by not in (Rater.EITHER, rater):
        return False
    return _rating_by(run, rater) == rule.rating and sampled(rule, run)


def on_runs_rated(sender: Any, run_ids: list[Any], rater: str, **_: Any) -> None:
    rules = list(DatasetRule.objects.filter(active=True).select_related("dataset"))
    if not rules:
        return
    for run in Run.objects.filter(pk__in=run_ids).select_related("session", "agent"):
        for rule in rules:
            if not matches(rule, run, rater):
                continue
            try:
                collect.add_run(rule.dataset, run, status=rule.status)
            except (collect.AlreadyInDataset, NotCollectable):
                continue
