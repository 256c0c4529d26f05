"""Which few-shot examples a run was given (`Run.fewshot_items`), as links to those items, with
"item deleted" for those gone since."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from datasets_app.admin.excerpts import excerpt, with_excerpt
from datasets_app.models import DatasetItem
from sessions_app.admin import display
from sessions_app.models import Run


@dataclass
class Example:
    item_id: str
    label: str = ""
    dataset: str = ""
    url: str = ""  # empty: the item was deleted


def _key(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def examples_by_run(runs: Iterable[Run]) -> dict[Any, list[Example]]:
    """Every run's examples, in the order they were sent, in one query for all the runs."""
    runs = list(runs)
    wanted = {_key(i) for run in runs for i in run.fewshot_items or ()} - {None}
    found = {}
    if wanted:
        items = with_excerpt(DatasetItem.objects.filter(pk__in=wanted)).select_related("dataset")
        found = {item.pk: item for item in items.only("item_id", "source", "dataset__name")}
    out: dict[Any, list[Example]] = {}
    for run in runs:
        examples = []
        for raw in run.fewshot_items or ():
            item = found.get(_key(raw))
            if item is None:
                examples.append(Example(str(raw)))
            else:
                url = display.change_url(DatasetItem, item.pk)
                examples.append(Example(str(raw), excerpt(item, 60), item.dataset.name, url))
        out[run.pk] = examples
    return out
