"""An agent's versions: what one reads as, and the body that makes a draft."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import StringConstraints

from sessions_app.api.pagination import ListQuery
from sessions_app.api.schemas.agents import VersionedPatch
from sessions_app.api.schemas.lists import Page, SortOrder
from sessions_app.api.types import NO_NUL
from sessions_app.models import AgentVersion
from sessions_app.services import versions


class VersionOut(Schema):
    version_id: uuid.UUID
    agent_id: uuid.UUID
    number: int = Field(description="1, 2, … in the order the agent's versions were made.")
    label: str = Field(description='"v3", or "v3 draft".')
    state: Literal["draft", "live", "past"] = Field(
        description="draft: tried in experiments, not chatted with; live: what users chat with."
    )
    config: dict[str, Any] = Field(description="The versioned fields, as in the Agent.")
    note: str
    created_by: str | None = Field(description="The username of who made it, when known.")
    created_at: datetime
    promoted_at: datetime | None = Field(description="When it went live (null for a draft).")
    runs: int = Field(description="How many runs were made with it.")

    @staticmethod
    def resolve_state(obj: AgentVersion) -> str:
        return versions.state(obj)

    @staticmethod
    def resolve_config(obj: AgentVersion) -> dict[str, Any]:
        config = versions.full_config(obj)
        config["fewshot_dataset_id"] = config.pop("fewshot_dataset")
        return config

    @staticmethod
    def resolve_created_by(obj: AgentVersion) -> str | None:
        return obj.created_by.get_username() if obj.created_by else None

    @staticmethod
    def resolve_runs(obj: AgentVersion) -> int:
        counted = getattr(obj, "run_count", None)  # lists count a page's runs in one query
        return obj.runs.count() if counted is None else counted


class VersionIn(VersionedPatch):
    """A draft: the live configuration with the fields sent changed, and a note."""

    note: Annotated[str, StringConstraints(strict=True, max_length=200, pattern=NO_NUL)] = ""


class VersionListQuery(ListQuery):
    sort_by: Literal["number", "created_at"] = "number"
    sort_order: SortOrder = "desc"


class VersionList(Page[VersionOut]):
    pass
