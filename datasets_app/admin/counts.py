"""A dataset's items counted by status and split, in one grouped query, each figure a link to
the items it counts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count

from datasets_app.models import DatasetItem, ItemStatus, Split
from sessions_app.admin import display


@dataclass
class Cell:
    count: int
    url: str


@dataclass
class Row:
    label: str
    status: str
    cells: list[Cell]
    total: Cell


def _url(dataset_id: Any, **filters: str) -> str:
    query = {"dataset__dataset_id__exact": dataset_id} if dataset_id else {}
    query |= {f"{name}__exact": value for name, value in filters.items() if value}
    return display.changelist_url(DatasetItem, **query)


def table(dataset_id: Any = None) -> dict[str, Any]:
    """Rows per status (and one for all), columns per split (and one for all)."""
    items = DatasetItem.objects.all()
    if dataset_id:
        items = items.filter(dataset_id=dataset_id)
    found = {
        (status, split): n
        for status, split, n in items.order_by()
        .values_list("status", "split")
        .annotate(n=Count("pk"))
        .values_list("status", "split", "n")
    }
    statuses = [(s.value, s.label) for s in ItemStatus] + [("", "all")]
    rows = []
    for status, label in statuses:
        cells = [
            Cell(
                sum(n for (st, sp), n in found.items() if sp == split and status in ("", st)),
                _url(dataset_id, status=status, split=split),
            )
            for split in Split.values
        ]
        total = Cell(sum(c.count for c in cells), _url(dataset_id, status=status))
        rows.append(Row(label, status, cells, total))
    return {"splits": Split.values, "rows": rows, "total": rows[-1].total.count}
