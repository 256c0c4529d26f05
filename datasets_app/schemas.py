"""The datasets API's shapes: explicit In/Out schemas, strict request bodies (Body)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    StrictBool,
    StringConstraints,
    model_validator,
)

from datasets_app import export
from datasets_app.models import DatasetItem
from sessions_app.api.pagination import ListQuery, PageMeta
from sessions_app.api.types import NO_NUL, Body, Id, SessionId, Text, json_integer

Status = Literal["pending", "accepted", "rejected"]
SplitName = Literal["train", "validation", "test"]
Source = Literal["run", "session", "pair"]
DatasetName = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=100, pattern=r"^[-a-zA-Z0-9_]+$")
]
WEIGHTS = (
    "Train only on turns not rated down: in exports that carry weights (openai-chat), assistant "
    "turns rated down get weight 0, the others 1."
)
# At most half each, so the two always fit together: a sum the schema could not say.
SplitPercent = Annotated[int, Field(ge=0, le=50), BeforeValidator(json_integer)]


class CountsOut(Schema):
    pending: int
    accepted: int
    rejected: int
    train: int = Field(description="Items in the split, whatever their status.")
    validation: int
    test: int
    total: int


class DatasetOut(Schema):
    dataset_id: uuid.UUID
    name: str
    description: str
    validation_percent: int
    test_percent: int
    counts: CountsOut
    created_at: datetime
    updated_at: datetime


class DatasetIn(Body):
    name: DatasetName = Field(description="Letters, digits, - and _; unique (taken: 409).")
    description: Text = ""
    validation_percent: SplitPercent = Field(10, description="% of items in the validation split.")
    test_percent: SplitPercent = Field(10, description="% of items in the test split.")


class DatasetListQuery(ListQuery):
    sort_by: Literal["name", "created_at", "updated_at"] = "name"
    sort_order: Literal["asc", "desc"] = "asc"


class DatasetList(Schema):
    data: list[DatasetOut]
    meta: PageMeta


class ItemOut(Schema):
    item_id: uuid.UUID
    dataset_id: uuid.UUID
    source: Source
    run_id: uuid.UUID | None = Field(description="The run it was taken from (a pair: the chosen).")
    session_id: str | None
    status: Status
    split: SplitName
    messages: list[dict[str, Any]] = Field(
        description="OpenAI-shaped, the final answer last, as it was when added; assistant "
        'turns may carry the run\'s "rating".'
    )
    tools: list[dict[str, Any]]
    corrected_answer: str = Field(description="Replaces the final answer in exports when set.")
    rejected_answer: str = Field(description="For a pair: the losing answer.")
    rating: int | None
    use_weights: bool = Field(description=WEIGHTS)
    created_at: datetime

    @staticmethod
    def resolve_run_id(obj: DatasetItem) -> uuid.UUID | None:
        return obj.source_run_id

    @staticmethod
    def resolve_session_id(obj: DatasetItem) -> str | None:
        return obj.source_session_id


class ItemsOut(Schema):
    data: list[ItemOut]


class ItemIn(Body):
    """Exactly one of run_id and session_id (422 otherwise)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"oneOf": [{"required": ["run_id"]}, {"required": ["session_id"]}]},
    )

    # A None default means "not sent"; null itself is refused.
    run_id: Id = Field(None, description="A completed run with an answer; or:")
    session_id: SessionId = Field(None, description="A session with at least one completed run.")
    status: Status = "pending"
    split: SplitName | None = Field(None, description="Default: from the item's id.")
    use_weights: StrictBool = Field(False, description=WEIGHTS)

    @model_validator(mode="after")
    def _one_source(self) -> ItemIn:
        if (self.run_id is None) == (self.session_id is None):
            raise ValueError("Give exactly one of run_id and session_id.")
        return self


class ItemPatch(Body):
    """Only the fields sent change; null is refused."""

    status: Status = None
    split: SplitName = None
    corrected_answer: Annotated[str, StringConstraints(strict=True, pattern=NO_NUL)] = Field(
        None,
        description="The reviewer's final answer; empty keeps the original.",
    )
    use_weights: StrictBool = Field(None, description=WEIGHTS)


class ItemListQuery(ListQuery):
    sort_by: Literal["created_at"] = "created_at"
    sort_order: Literal["asc", "desc"] = "asc"
    status: Status | None = None
    split: SplitName | None = None
    source: Source | None = None


class ItemList(Schema):
    data: list[ItemOut]
    meta: PageMeta


# Checked by the export itself, whose 422 names the valid ones; listed in the published schema.
FORMAT_ENUM = {"enum": list(export.FORMATS)}


class ExportQuery(Schema):
    format: Text = Field(json_schema_extra=FORMAT_ENUM)
    # `&split=` with no value, as the contract spells it, means every split: "" is in the
    # published enum, so what the schema allows and what the API accepts are the same.
    split: Annotated[
        Literal["train", "validation", "test", ""], AfterValidator(lambda v: v or None)
    ] = Field("", description="Empty (the default): every split.")
    redact: bool = Field(False, description="Mask e-mail addresses, phone numbers and the like.")


class CardQuery(ExportQuery):
    """The card of the export these parameters would make."""
