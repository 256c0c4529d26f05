"""What every list answers, `{"data": [...], "meta": {...}}`, and the sort order it takes."""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

from ninja import Schema

from sessions_app.api.pagination import PageMeta

Row = TypeVar("Row", bound=Schema)
SortOrder = Literal["asc", "desc"]


class Page(Schema, Generic[Row]):
    data: list[Row]
    meta: PageMeta
