"""Adding runs and sessions to a dataset: the one place items are made."""

from __future__ import annotations

import contextlib
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from datasets_app.models import Dataset, DatasetItem, ItemSource, ItemStatus, Split
from datasets_app.services import pairs, snapshot
from datasets_app.services.snapshot import NotCollectable
from sessions_app.models import Run, RunStatus, Session, User

__all__ = [
    "AlreadyInDataset",
    "NotCollectable",
    "add_run",
    "add_session",
    "add_variant",
    "split_for",
]


class AlreadyInDataset(ValueError):
    """The run (or session, or pair) is in this dataset already."""


def split_for(dataset: Dataset, item_id: Any) -> str:
    """The item's split, from its id alone: the same item lands in the same split every time."""
    bucket = item_id.int % 100
    if bucket < dataset.test_percent:
        return Split.TEST
    if bucket < dataset.test_percent + dataset.validation_percent:
        return Split.VALIDATION
    return Split.TRAIN


def add_run(
    dataset: Dataset,
    run: Run,
    *,
    by: User | None = None,
    status: str = ItemStatus.PENDING,
    split: str | None = None,
    with_pair: bool = True,
    use_weights: bool = False,
    reviewed: bool = True,
) -> list[DatasetItem]:
    """The run as an item; and when it was regenerated with the opposite rating, the pair too.

    A run in the dataset already still brings its pair when that is missing (its sibling may
    have been rated since); AlreadyInDataset only when nothing new was added. All or nothing.
    `reviewed` is false when no person chose the status (a rule's): see `_save`.
    """
    with transaction.atomic():
        items: list[DatasetItem] = []
        if not _has_run(dataset, run):
            fields = _provenance(run) | {"source": ItemSource.RUN, "run": run}
            fields["use_weights"] = use_weights
            shot = snapshot.of_run(run)
            item = _save(
                dataset,
                shot,
                fields,
                by=by,
                status=status,
                split=split,
                what="Run",
                reviewed=reviewed,
            )
            items.append(item)
        found = pairs.regeneration_pair(run) if with_pair else None
        if found is not None:
            # A pair the sibling cannot make (no answer) or already there leaves the run as is.
            with contextlib.suppress(AlreadyInDataset, NotCollectable):
                items.append(add_pair(dataset, *found, by=by))
        if not items:
            raise AlreadyInDataset(f"Run {run.pk} is already in the dataset “{dataset.name}”.")
    return items


def _has_run(dataset: Dataset, run: Run) -> bool:
    return DatasetItem.objects.filter(
        dataset=dataset, source=ItemSource.RUN, source_run_id=run.pk
    ).exists()


def add_session(
    dataset: Dataset,
    session: Session,
    *,
    by: User | None = None,
    status: str = ItemStatus.PENDING,
    split: str | None = None,
    use_weights: bool = False,
) -> DatasetItem:
    if DatasetItem.objects.filter(
        dataset=dataset, source=ItemSource.SESSION, source_session_id=session.pk
    ).exists():
        raise AlreadyInDataset(f"Session {session.pk} is already in the dataset “{dataset.name}”.")
    shot = snapshot.of_session(session)
    # The conversation ends with the last completed run; a failed one after it is left out.
    last = session.runs.filter(status=RunStatus.COMPLETED).order_by("-position").first()
    fields = {
        "source": ItemSource.SESSION,
        "run": None,
        "source_run_id": None,
        "source_session_id": session.pk,
        "owner": session.user,
        "agent": session.agent,
        "source_created_at": last.created_at if last else session.created_at,
        "use_weights": use_weights,
    }
    return _save(dataset, shot, fields, by=by, status=status, split=split, what="Session")


def add_pair(
    dataset: Dataset, chosen: Run, rejected: Run, *, by: User | None = None
) -> DatasetItem:
    """A preference pair: the context and chosen answer as a conversation, the other answer
    as the rejected one."""
    if DatasetItem.objects.filter(
        dataset=dataset,
        source=ItemSource.PAIR,
        source_run_id=chosen.pk,
        other_run_id=rejected.pk,
    ).exists():
        raise AlreadyInDataset("This preference pair is already in the dataset.")
    shot = snapshot.of_pair(chosen, pairs.first_asked(chosen))
    fields = _provenance(chosen) | {
        "source": ItemSource.PAIR,
        "run": chosen,
        "other_run_id": rejected.pk,
        "rejected_answer": rejected.content,
    }
    return _save(dataset, shot, fields, by=by, status=ItemStatus.PENDING, split=None, what="Pair")


def add_variant(
    dataset: Dataset, item: DatasetItem, answer: str, *, model: str = "", by: User | None = None
) -> DatasetItem:
    """Another answer to an item's conversation, as a pending item to review: the item's turns
    up to its final answer, then `answer`. It keeps the item's provenance (owner and so
    consent, agent, session) but not the id its source is unique by (the run's, or for a whole
    session the session's), so that it may join the dataset its item is in; the same
    conversation twice is refused. A whole session's variant is a session's; a run's or a
    pair's is an experiment's answer (a single turn answered, no pair)."""
    if not answer.strip():
        raise NotCollectable("There is no answer to add.")
    # What the variant's answer was given: the turns up to the question, not the tool rounds
    # the item's own answer went through.
    before = snapshot.up_to_last_question(item.messages)
    shot = snapshot.Snapshot([*before, {"role": "assistant", "content": answer}], item.tools, model)
    whole = item.source == ItemSource.SESSION
    fields = {
        "source": ItemSource.SESSION if whole else ItemSource.EXPERIMENT,
        "run": None,
        "source_run_id": None,
        "source_session_id": None if whole else item.source_session_id,
        "owner_id": item.owner_id,
        "agent_id": item.agent_id,
        "source_created_at": item.source_created_at,
    }
    digest = snapshot.content_hash(shot.messages)
    if DatasetItem.objects.filter(dataset=dataset, content_hash=digest).exists():
        raise AlreadyInDataset(f"This answer is already in the dataset “{dataset.name}”.")
    return _save(dataset, shot, fields, by=by, status=ItemStatus.PENDING, split=None, what="It")


def _provenance(run: Run) -> dict[str, Any]:
    return {
        "source_run_id": run.pk,
        "source_session_id": run.session_id,
        "owner_id": run.user_id,
        "agent_id": run.agent_id,
        "source_created_at": run.created_at,
    }


def _save(
    dataset: Dataset,
    shot: snapshot.Snapshot,
    fields: dict[str, Any],
    *,
    by: User | None,
    status: str,
    split: str | None,
    what: str,
    reviewed: bool = True,
) -> DatasetItem:
    """`reviewed_at` says when a person gave the item its status: an item a rule added, even as
    accepted, has none until someone reviews it, and is never a few-shot example before."""
    item = DatasetItem(
        dataset=dataset,
        messages=shot.messages,
        tools=shot.tools,
        model=shot.model,
        rating=shot.rating,
        status=status,
        added_by=by,
        reviewed_at=timezone.now() if reviewed and status != ItemStatus.PENDING else None,
        **fields,
    )
    item.split = split or split_for(dataset, item.item_id)
    item.content_hash = snapshot.content_hash(item.messages, "", item.rejected_answer)
    try:
        with transaction.atomic():
            item.save(force_insert=True)
    except IntegrityError as exc:  # added by someone else a moment ago
        raise AlreadyInDataset(f"{what} is already in the dataset “{dataset.name}”.") from exc
    return item
