"""The one shape of every list in the API: {"data": [...], "meta": {page, limit, totals}}."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

from django.db.models import QuerySet
from ninja import Field, Schema
from pydantic import BeforeValidator

from sessions_app.api.types import integer_text

MAX_LIMIT = 100


class ListQuery(Schema):
    """Paging parameters; each list adds its own `sort_by` and `sort_order` (a whitelist)."""

    page: Annotated[int, Field(ge=1), BeforeValidator(integer_text)] = 1
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT), BeforeValidator(integer_text)] = 20


class PageMeta(Schema):
    page: int
    limit: int
    total_pages: int
    total_count: int


def paginate(
    queryset: QuerySet[Any],
    query: ListQuery,
    orderings: Mapping[str, Sequence[str]],
    *,
    shape: Callable[[list[Any]], None] | None = None,
) -> dict[str, Any]:
    """One page of `queryset`, ordered by `orderings[query.sort_by]` (then pk, so pages are stable).

    `shape` adds what only the rows of the page need (e.g. sums), to those rows only.
    """
    descending = getattr(query, "sort_order", "asc") == "desc"
    fields = [*orderings[query.sort_by], "pk"]  # type: ignore[attr-defined]
    ordering = [f"-{name}" if descending else name for name in fields]
    total = queryset.order_by().count()
    offset = (query.page - 1) * query.limit
    rows: list[Any] = []
    if offset < total:  # past the end: no query, and no huge OFFSET for the database to refuse
        rows = list(queryset.order_by(*ordering)[offset : offset + query.limit])
        if shape is not None and rows:
            shape(rows)
    return {
        "data": rows,
        "meta": {
            "page": query.page,
            "limit": query.limit,
            "total_pages": (total + query.limit - 1) // query.limit,
            "total_count": total,
        },
    }
