"""An item's words as a list shows them, read inside the database: a list of items never loads
their whole conversations."""

from __future__ import annotations

from typing import Any

from django.db.models import F, QuerySet
from django.db.models.fields.json import KT

from sessions_app.admin import display


def with_excerpt(items: QuerySet) -> QuerySet:
    # A run's item is known by the run's own question (its snapshot starts with the history);
    # a session's, or one whose run is gone, by its first user message: the first message,
    # or the second after a system message.
    return items.annotate(
        own_input=F("run__input"),
        first_role=KT("messages__0__role"),
        first_text=KT("messages__0__content"),
        second_text=KT("messages__1__content"),
    )


def excerpt(item: Any, length: int = 80) -> str:
    """The item's words, from `with_excerpt`'s columns."""
    text = item.second_text if item.first_role == "system" else item.first_text
    if item.source != "session" and item.own_input:
        text = item.own_input
    return display.excerpt(text or "", length) or str(item.item_id)
