"""Which items are exported, read a page at a time in a fixed order, and turned into lines.

Pages are keyset pages on (created_at, item_id), the order of the `item_export` index, so an
export of any size holds one page in memory and a re-export writes the same bytes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.db.models import Q, QuerySet

from datasets_app.export import redact as redaction
from datasets_app.export.formats import FORMATS_BY_NAME, Format
from datasets_app.export.turns import Text
from datasets_app.models import Dataset, DatasetItem, ItemStatus, Split

PAGE = 500


class UnknownFormat(ValueError):
    """Not one of FORMATS."""


def export_format(name: str) -> Format:
    try:
        return FORMATS_BY_NAME[name]
    except KeyError:
        known = ", ".join(FORMATS_BY_NAME)
        raise UnknownFormat(f"Unknown export format “{name}”; choose one of {known}.") from None


def check_split(split: str | None) -> str | None:
    if split in (None, ""):
        return None
    if split not in Split.values:
        raise ValueError(f"Unknown split “{split}”; choose one of {', '.join(Split.values)}.")
    return split


def exported_items(dataset: Dataset, split: str | None = None) -> QuerySet[DatasetItem]:
    """Accepted items whose owner allows training use, of one split or all."""
    items = DatasetItem.objects.trainable().filter(dataset=dataset, status=ItemStatus.ACCEPTED)
    split = check_split(split)
    return items.filter(split=split) if split else items


def format_items(dataset: Dataset, fmt: str, split: str | None = None) -> QuerySet[DatasetItem]:
    """The exported items this format writes (pairs only in preferences, for instance)."""
    return exported_items(dataset, split).filter(export_format(fmt).items)


def page(items: QuerySet[DatasetItem], after: tuple[Any, Any] | None) -> list[DatasetItem]:
    rows = items.order_by("created_at", "item_id")
    if after is not None:
        rows = rows.filter(
            Q(created_at__gt=after[0]) | Q(created_at=after[0], item_id__gt=after[1])
        )
    return list(rows[:PAGE])


def pages(items: QuerySet[DatasetItem]) -> Iterator[list[DatasetItem]]:
    after = None
    while found := page(items, after):
        yield found
        after = (found[-1].created_at, found[-1].item_id)


def text_filter(redact: bool) -> Text:
    return redaction.Redactor() if redact else redaction.keep


def render(fmt: Format, items: list[DatasetItem], redact: bool) -> list[str]:
    text = text_filter(redact)
    return [line for item in items for line in fmt.render(item, text)]


def chunks(
    dataset: Dataset, fmt: str, split: str | None = None, *, redact: bool = False
) -> Iterator[tuple[int, str]]:
    """(items written, text) a page at a time; the header first, with no item. Every way out
    (a file, the command, a download) reads the export through this."""
    chosen = export_format(fmt)
    items = format_items(dataset, fmt, split)
    if chosen.header:
        yield 0, chosen.header
    for found in pages(items):
        yield len(found), "".join(render(chosen, found, redact))


def lines(
    dataset: Dataset, fmt: str, split: str | None = None, *, redact: bool = False
) -> Iterator[str]:
    """The export's text, the header and then a page of lines at a time."""
    for _, text in chunks(dataset, fmt, split, redact=redact):
        yield text


async def alines(
    dataset: Dataset, fmt: str, split: str | None = None, *, redact: bool = False
) -> AsyncIterator[str]:
    """`lines` for ASGI: each page read and rendered in a worker thread, sent as it comes (a
    sync iterator would be read to its end before Django sends the first byte)."""
    pending = chunks(dataset, fmt, split, redact=redact)
    while (chunk := await sync_to_async(next)(pending, None)) is not None:
        yield chunk[1]
