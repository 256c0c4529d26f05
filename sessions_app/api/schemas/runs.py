"""Runs: what one reads as, the body that starts one, and a user's feedback on it."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import BeforeValidator, StrictBool, StringConstraints

from sessions_app.api.pagination import ListQuery
from sessions_app.api.schemas.lists import Page, SortOrder
from sessions_app.api.schemas.metrics import RunMetricsOut
from sessions_app.api.types import NO_NUL, VISIBLE, Body, Id, JSONObject, SessionId, json_integer
from sessions_app.models import Run


class FeedbackOut(Schema):
    rating: int
    comment: str


class RunOut(Schema):
    run_id: uuid.UUID
    session_id: str
    agent_id: uuid.UUID
    user_id: str = Field(description="The username of who ran it.")
    status: Literal[
        "PENDING", "RUNNING", "COMPLETED", "ERROR", "CANCELLED", "INTERRUPTED", "PAUSED"
    ] = Field(
        description="PAUSED: waiting for its client to send the results of the tools the model "
        "called (a run of the OpenAI-compatible endpoint with the client's own `tools`)."
    )
    input: str
    content: str
    source: Literal["chat", "api", "openai", "import", "history", ""] = Field(
        description="The door it came in by: the chat page, the REST API, the OpenAI-compatible "
        "API, an Agno import, or a turn an OpenAI client sent as a new session's history (no "
        "model was asked); empty before doors were recorded."
    )
    model: str
    model_provider: str
    metrics: RunMetricsOut
    error: str
    created_at: datetime
    finished_at: datetime | None
    feedback: FeedbackOut | None
    session_state: dict[str, Any] | None = Field(
        description="The session state as this run left it (null while it runs)."
    )
    agent_version: int | None = Field(
        description="The number of the agent's version it was made with (null before versions)."
    )
    agent_version_id: uuid.UUID | None

    @staticmethod
    def resolve_user_id(obj: Run) -> str:
        return obj.user.get_username()

    @staticmethod
    def resolve_agent_version(obj: Run) -> int | None:
        return obj.agent_version.number if obj.agent_version_id else None

    @staticmethod
    def resolve_metrics(obj: Run) -> dict[str, Any]:
        return obj.metrics()

    @staticmethod
    def resolve_feedback(obj: Run) -> dict[str, Any] | None:
        if obj.feedback_rating is None:
            return None
        return {"rating": obj.feedback_rating, "comment": obj.feedback_comment}


class RunIn(Body):
    # At least one visible character; the length limit (PARLEY_MAX_INPUT_CHARS) answers 413.
    input: Annotated[str, StringConstraints(strict=True, pattern=VISIBLE)] = Field(
        description="The user's message. Longer than the server's limit: 413."
    )
    agent_id: Id | None = Field(None, description="Default: the session's agent.")
    session_id: SessionId | None = Field(None, description="Omitted: a new session is created.")
    stream: StrictBool = Field(False, description="Answer text/event-stream instead of JSON.")
    session_state: JSONObject | None = Field(None, description="Merged into the session's.")


class FeedbackIn(Body):
    rating: Annotated[Literal[1, -1] | None, BeforeValidator(json_integer)] = Field(
        description="1 good, -1 bad, null clears the rating."
    )
    comment: Annotated[str, StringConstraints(strict=True, max_length=2000, pattern=NO_NUL)] = ""


class RunListQuery(ListQuery):
    sort_by: Literal["position", "created_at"] = "position"
    sort_order: SortOrder = "asc"


class RunList(Page[RunOut]):
    pass
