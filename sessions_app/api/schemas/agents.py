"""Agent configs: what an agent reads as, and the bodies that create or change one."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import BeforeValidator, StrictBool, StringConstraints

from sessions_app.api.pagination import ListQuery
from sessions_app.api.schemas.lists import Page, SortOrder
from sessions_app.api.types import (
    NO_NUL,
    VISIBLE,
    Body,
    Id,
    JSONObject,
    Text,
    json_integer,
    json_number,
)
from sessions_app.models import Agent


class AgentOut(Schema):
    agent_id: uuid.UUID
    name: str
    model: str
    instructions: str
    add_history_to_context: bool
    num_history_runs: int
    num_history_messages: int | None
    search_session_history: bool
    num_history_sessions: int
    enable_session_summaries: bool
    session_state: dict[str, Any]
    add_session_state_to_context: bool
    enable_agentic_state: bool
    add_past_sessions_to_context: bool
    fewshot_dataset_id: uuid.UUID | None = Field(
        description="Accepted items of this dataset are sent as example turns before the history."
    )
    fewshot_count: int = Field(description="How many examples (0 sends none).")
    fewshot_order: Literal["newest", "best"]
    temperature: float | None = Field(description="Sent to the model only when set.")
    top_p: float | None = Field(description="Sent to the model only when set.")
    max_tokens: int | None = Field(description="The longest answer; sent only when set.")
    version: int | None = Field(description="The number of the version users chat with.")
    version_id: uuid.UUID | None = Field(description="That version's id.")
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_version(obj: Agent) -> int | None:
        return obj.live_version.number if obj.live_version_id else None

    @staticmethod
    def resolve_version_id(obj: Agent) -> uuid.UUID | None:
        return obj.live_version_id  # type: ignore[no-any-return]


AgentName = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=100)]
ModelName = Annotated[str, StringConstraints(strict=True, max_length=200, pattern=NO_NUL)]
# Bounds first: constraints after a BeforeValidator would not reach the published schema.
HistoryRuns = Annotated[int, Field(ge=0, le=1000), BeforeValidator(json_integer)]
HistoryMessages = Annotated[int, Field(ge=0, le=100_000), BeforeValidator(json_integer)]
HistorySessions = Annotated[int, Field(ge=0, le=100), BeforeValidator(json_integer)]
FewShotCount = Annotated[int, Field(ge=0, le=20), BeforeValidator(json_integer)]
FewShotOrder = Literal["newest", "best"]
Temperature = Annotated[float, Field(ge=0, le=2), BeforeValidator(json_number)]
TopP = Annotated[float, Field(ge=0, le=1), BeforeValidator(json_number)]
MaxTokens = Annotated[int, Field(ge=1, le=1_000_000), BeforeValidator(json_integer)]


class AgentIn(Body):
    name: Annotated[AgentName, Field(pattern=VISIBLE)]
    model: ModelName = Field("", description="Empty: the deployment's LLM_MODEL.")
    instructions: Text = Field("", description="{key} is filled from the session state.")
    add_history_to_context: StrictBool = True
    num_history_runs: HistoryRuns = 3
    num_history_messages: HistoryMessages | None = None
    search_session_history: StrictBool = False
    num_history_sessions: HistorySessions = 2
    enable_session_summaries: StrictBool = False
    session_state: JSONObject = Field(default_factory=dict)
    add_session_state_to_context: StrictBool = False
    enable_agentic_state: StrictBool = False
    add_past_sessions_to_context: StrictBool = False
    fewshot_dataset_id: Id | None = Field(None, description="A dataset's id, or null for none.")
    fewshot_count: FewShotCount = 3
    fewshot_order: FewShotOrder = Field("newest", description="newest, or best rated first.")
    temperature: Temperature | None = Field(None, description="0–2; null: the model's default.")
    top_p: TopP | None = Field(None, description="0–1; null: the model's default.")
    max_tokens: MaxTokens | None = Field(None, description="At least 1; null: no limit set.")


class VersionedPatch(Body):
    """Only the fields sent change. A None default means "not sent"; null itself is refused,
    except for num_history_messages, where null means "use num_history_runs",
    fewshot_dataset_id, where it means no examples, and the sampling settings, where it means
    the model's own default."""

    model: ModelName = None
    instructions: Text = None
    add_history_to_context: StrictBool = None
    num_history_runs: HistoryRuns = None
    num_history_messages: HistoryMessages | None = None
    search_session_history: StrictBool = None
    num_history_sessions: HistorySessions = None
    enable_session_summaries: StrictBool = None
    session_state: JSONObject = None
    add_session_state_to_context: StrictBool = None
    enable_agentic_state: StrictBool = None
    add_past_sessions_to_context: StrictBool = None
    fewshot_dataset_id: Id | None = None
    fewshot_count: FewShotCount = None
    fewshot_order: FewShotOrder = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    max_tokens: MaxTokens | None = None


class AgentPatch(VersionedPatch):
    """Only the fields sent change, the name too (see VersionedPatch for null)."""

    name: Annotated[AgentName, Field(pattern=VISIBLE)] = None


class AgentListQuery(ListQuery):
    sort_by: Literal["name", "created_at", "updated_at"] = "name"
    sort_order: SortOrder = "asc"


class AgentList(Page[AgentOut]):
    pass
