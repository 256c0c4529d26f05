"""What rating a run does to datasets: rules add it ("every run of agent X rated up", for a
share of them), and a regeneration rated the other way makes a preference pair in every dataset
that holds either side."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from django.db.models import QuerySet

from datasets_app.models import DatasetItem, DatasetRule, ItemSource, Rater
from datasets_app.services import collect, pairs
from datasets_app.services.snapshot import NotCollectable
from sessions_app.models import Run

log = logging.getLogger(__name__)
CHUNK = 200


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


def on_run_rated(sender: object, runs: QuerySet[Run], rater: str, **kwargs: object) -> None:
    """The receiver of sessions_app's `run_rated` (`rater` is "user" or "staff"), sent once the
    ratings are committed: a failure here never undoes a rating."""
    rules = list(DatasetRule.objects.filter(active=True).select_related("dataset"))
    if not rules and not DatasetItem.objects.exists():
        return
    chunk: list[Run] = []
    for run in runs.select_related("session", "agent").iterator(chunk_size=CHUNK):
        chunk.append(run)
        if len(chunk) == CHUNK:
            _apply_chunk(chunk, rules, rater)
            chunk = []
    _apply_chunk(chunk, rules, rater)


def _apply_chunk(chunk: list[Run], rules: list[DatasetRule], rater: str) -> None:
    curated = set(
        DatasetItem.objects.filter(
            source_session_id__in={run.session_id for run in chunk}
        ).values_list("source_session_id", flat=True)
    )
    for run in chunk:
        for rule in rules:
            # No person chose the rule's status for this run: its item waits for a review.
            if matches(rule, run, rater) and _guarded(
                collect.add_run, rule.dataset, run, status=rule.status, reviewed=False
            ):
                curated.add(run.session_id)
        if run.session_id in curated:
            _pair_where_curated(run)


def _pair_where_curated(run: Run) -> None:
    """A pair this rating completes goes into every dataset holding one of its runs."""
    found = pairs.regeneration_pair(run)
    if found is None:
        return
    holding = DatasetItem.objects.filter(
        source=ItemSource.RUN, source_run_id__in=[found[0].pk, found[1].pk]
    ).select_related("dataset")
    for dataset in {item.dataset for item in holding}:
        _guarded(collect.add_pair, dataset, *found)


def _guarded(add: Callable[..., object], *args: object, **kwargs: object) -> bool:
    """Whether it added anything; what cannot be added is skipped, and logged if unexpected."""
    try:
        add(*args, **kwargs)
    except (collect.AlreadyInDataset, NotCollectable):
        return False
    except Exception:
        log.exception("Collecting a run after its rating failed")
        return False
    return True
