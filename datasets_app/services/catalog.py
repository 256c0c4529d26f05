"""Datasets as staff manage them: the access gate, creating one, counting its items, and the
reviewer's changes to an item. Every door asks for the admin's permissions on datasets and their
items (services.permissions); someone without the right gets PermissionDenied naming it."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Case, Count, DateTimeField, F, Model, QuerySet, Value, When
from django.utils import timezone

from datasets_app.models import Dataset, DatasetItem, ItemStatus, Split
from datasets_app.services import collect, snapshot
from sessions_app.models import User
from sessions_app.services.access import NotFound, get_run_for_user, get_session_for_user
from sessions_app.services.permissions import Action, require, staff_may

COUNT_KEYS = (*ItemStatus.values, *Split.values, "total")
ITEM_CHANGES = frozenset({"status", "split", "corrected_answer", "use_weights"})
# What many items can be given at once; a correction is one item's.
BULK_CHANGES = ITEM_CHANGES - {"corrected_answer"}


Rights = tuple[tuple[Action, type[Model]], ...]
READ: Rights = (("view", Dataset),)
READ_ITEMS: Rights = (("view", DatasetItem),)
ADD_ITEMS: Rights = (("add", DatasetItem),)
CHANGE_ITEMS: Rights = (("change", DatasetItem),)
# What the admin's download asks: the dataset and its items, each viewed (or changed).
EXPORT: Rights = (("view", Dataset), ("view", DatasetItem))


class NameTaken(ValueError):
    """Another dataset has this name already."""


def may(user: User, rights: Rights) -> bool:
    return all(staff_may(user, action, model) for action, model in rights)


def _require(user: User, rights: Rights) -> None:
    for action, model in rights:
        require(user, action, model)


def _uuid(value: Any) -> uuid.UUID:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError) as exc:
        raise NotFound from exc


def datasets_for_user(user: User) -> QuerySet[Dataset]:
    _require(user, READ)
    return Dataset.objects.all()


def get_dataset_for_user(user: User, dataset_id: Any, rights: Rights = READ) -> Dataset:
    """The one gate to a dataset: the `rights` first (PermissionDenied naming the one missing,
    whether or not the dataset exists, as in the admin), then NotFound when missing."""
    _require(user, rights)
    try:
        return Dataset.objects.get(pk=_uuid(dataset_id))
    except Dataset.DoesNotExist as exc:
        raise NotFound from exc


def get_item_for_user(user: User, dataset_id: Any, item_id: Any) -> DatasetItem:
    """An item to review: that takes the right to change items."""
    dataset = get_dataset_for_user(user, dataset_id, CHANGE_ITEMS)
    try:
        return DatasetItem.objects.select_related("dataset").get(dataset=dataset, pk=_uuid(item_id))
    except DatasetItem.DoesNotExist as exc:
        raise NotFound from exc


def create_dataset(
    user: User,
    *,
    name: str,
    description: str = "",
    validation_percent: int = 10,
    test_percent: int = 10,
) -> Dataset:
    require(user, "add", Dataset)
    if validation_percent + test_percent > 100:
        raise ValueError("validation_percent and test_percent together must not exceed 100.")
    dataset = Dataset(
        name=name,
        description=description.strip(),
        validation_percent=validation_percent,
        test_percent=test_percent,
        created_by=user,
    )
    if Dataset.objects.filter(name=name).exists():
        raise NameTaken(f"A dataset named “{name}” already exists.")
    try:
        with transaction.atomic():
            dataset.save(force_insert=True)
    except IntegrityError as exc:  # the same name, created a moment ago
        raise NameTaken(f"A dataset named “{name}” already exists.") from exc
    with_counts([dataset])
    return dataset


def with_counts(datasets: Iterable[Dataset]) -> None:
    """Set `counts` on each dataset: items by status, by split, and in all, in one query."""
    by_pk = {d.pk: d for d in datasets}
    for dataset in by_pk.values():
        dataset.counts = dict.fromkeys(COUNT_KEYS, 0)  # type: ignore[attr-defined]
    rows = (
        DatasetItem.objects.filter(dataset__in=list(by_pk))
        .values("dataset_id", "status", "split")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for row in rows:
        counts = by_pk[row["dataset_id"]].counts  # type: ignore[attr-defined]
        counts[row["status"]] += row["n"]
        counts[row["split"]] += row["n"]
        counts["total"] += row["n"]


def update_item(user: User, dataset_id: Any, item_id: Any, **changes: Any) -> DatasetItem:
    """A reviewer's verdict: status, split, a corrected final answer or whether to train with
    weights; only what is given. A status stamps `reviewed_at` where it changes, or where a
    rule set it and nobody had reviewed it yet; back to pending clears it."""
    _known(changes, ITEM_CHANGES)
    with transaction.atomic():
        item = get_item_for_user(user, dataset_id, item_id)
        item = DatasetItem.objects.select_for_update().get(pk=item.pk)
        fields = set(changes)
        if "corrected_answer" in changes:
            changes["corrected_answer"] = checked_correction(item, changes["corrected_answer"])
        if "status" in changes and (changes["status"] != item.status or not item.reviewed_at):
            item.reviewed_at = _reviewed_at(changes["status"])
            fields.add("reviewed_at")
        for name, value in changes.items():
            setattr(item, name, value)
        item.content_hash = snapshot.content_hash(
            item.messages, item.corrected_answer, item.rejected_answer
        )
        item.save(update_fields=[*fields, "content_hash"])
    return item


def checked_correction(item: DatasetItem, text: str) -> str:
    """The correction as it is kept; ValueError when the item has no answer to correct."""
    text = text.strip()
    if text and not item.original_answer:
        raise ValueError("This item has no final answer to correct.")
    return text


def review_items(items: QuerySet[DatasetItem], **changes: Any) -> int:
    """The same status, split or weighting for many items, in one statement; how many matched.
    As for one item, `reviewed_at` moves only where the status changes or was a rule's."""
    _known(changes, BULK_CHANGES)
    if "status" in changes:
        stamp = Value(_reviewed_at(changes["status"]), output_field=DateTimeField())
        kept = When(status=changes["status"], reviewed_at__isnull=False, then=F("reviewed_at"))
        changes["reviewed_at"] = Case(kept, default=stamp)
    return items.order_by().update(**changes)


def _known(changes: dict[str, Any], allowed: frozenset[str]) -> None:
    unknown = set(changes) - allowed
    if unknown:
        raise ValueError(f"Cannot set {', '.join(sorted(unknown))}.")


def _reviewed_at(status: str) -> Any:
    return timezone.now() if status != ItemStatus.PENDING else None


def items_for_user(
    user: User,
    dataset_id: Any,
    *,
    status: str | None = None,
    split: str | None = None,
    source: str | None = None,
) -> QuerySet[DatasetItem]:
    dataset = get_dataset_for_user(user, dataset_id, READ_ITEMS)
    wanted = {"status": status, "split": split, "source": source}
    return DatasetItem.objects.filter(
        dataset=dataset, **{k: v for k, v in wanted.items() if v is not None}
    )


def add_items(
    user: User,
    dataset_id: Any,
    *,
    run_id: Any = None,
    session_id: Any = None,
    status: str = ItemStatus.PENDING,
    split: str | None = None,
    use_weights: bool = False,
) -> list[DatasetItem]:
    """A run (with its preference pair, if it has one) or a whole session, as staff add them:
    as in the admin, that takes adding items and viewing the run or session (one's own
    aside)."""
    if (run_id is None) == (session_id is None):
        raise ValueError("Give exactly one of run_id and session_id.")
    dataset = get_dataset_for_user(user, dataset_id, ADD_ITEMS)
    how = {"by": user, "status": status, "split": split, "use_weights": use_weights}
    if run_id is not None:
        return collect.add_run(dataset, get_run_for_user(user, run_id), **how)
    return [collect.add_session(dataset, get_session_for_user(user, session_id), **how)]
