"""How deletion treats what refers to a conversation: sessions and runs read only what their
deletion's record needs, model calls stay and lose the text, usage keeps its unchecked keys."""

from __future__ import annotations

from typing import Any

from django.db import models


def CASCADE_LEAN(collector: Any, field: models.Field, sub_objs: Any, using: str) -> None:
    """CASCADE reading of each row only the columns its deletion's record is written from
    (the model's `kept_when_deleted`; usage.deleted): as listeners see their deletion,
    Django would otherwise read whole sessions and runs, their texts and states."""
    # Historical models (in migrations) have no such list: they cascade as usual.
    kept = getattr(sub_objs.model, "kept_when_deleted", None)
    models.CASCADE(collector, field, sub_objs.only(*kept) if kept else sub_objs, using)


# Else Django reads the whole rows once to learn whether there are any, before calling it.
CASCADE_LEAN.lazy_sub_objs = True  # type: ignore[attr-defined]


class _ForgetsText(models.QuerySet):
    """Model calls losing their run or session: the UPDATE that clears the link clears the
    conversation's text (what the call was sent, its error) in the same statement, so the text
    goes whatever order Django runs a deletion's updates in (one filtered by the link that an
    earlier one cleared would match nothing)."""

    def update(self, **kwargs: Any) -> int:
        return super().update(**kwargs, sent_messages=None, error="")


def KEEP_USAGE(collector: Any, field: models.Field, sub_objs: Any, using: str) -> None:
    """on_delete of a model call's run and session: the call stays, so its tokens and cost stay
    counted, but loses its link and the conversation's text."""
    calls = _ForgetsText(model=sub_objs.model, query=sub_objs.query.chain(), using=using)
    collector.add_field_update(field, None, calls)


KEEP_USAGE.lazy_sub_objs = True  # type: ignore[attr-defined]  # as SET_NULL: no rows fetched


# Keys to users and agents without a database constraint, which outlive what they point at:
# usage already spent stays counted when a user, session or run is deleted later.
def unchecked_key(to: type[models.Model] | str, **extra: object) -> models.ForeignKey:
    return models.ForeignKey(
        to, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+", **extra
    )
