"""Sessions: what one reads as, and the bodies and filters of /api/sessions."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import StringConstraints

from sessions_app.api.pagination import ListQuery
from sessions_app.api.schemas.lists import Page, SortOrder
from sessions_app.api.schemas.metrics import SessionMetricsOut
from sessions_app.api.types import NO_NUL, Body, Id, JSONObject, SessionId, Text
from sessions_app.models import Session
from sessions_app.services.sessions import session_metrics

SessionName = Annotated[str, StringConstraints(strict=True, max_length=200, pattern=NO_NUL)]


class SessionOut(Schema):
    session_id: str
    session_type: str
    agent_id: uuid.UUID
    user_id: str = Field(description="The owner's username.")
    session_name: str
    session_state: dict[str, Any]
    metadata: dict[str, Any]
    summary: dict[str, Any] | None
    metrics: SessionMetricsOut
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_user_id(obj: Session) -> str:
        return obj.user.get_username()

    @staticmethod
    def resolve_metrics(obj: Session) -> dict[str, Any]:
        # Lists sum a whole page's metrics in one query (sessions.with_metrics); one session asks.
        return getattr(obj, "page_metrics", None) or session_metrics(obj)


class SessionIn(Body):
    session_id: SessionId | None = Field(
        None,
        description="Default: a new UUID. Letters, digits and ._:- (up to 128); 409 when taken.",
    )
    agent_id: Id | None = Field(None, description="Default: the default agent.")
    session_name: SessionName = ""
    session_state: JSONObject | None = Field(None, description="Merged over the agent's.")
    metadata: JSONObject | None = None


class SessionPatch(Body):
    """Only the fields sent change. A None default means "not sent"; null itself is refused."""

    session_name: SessionName = None
    session_state: JSONObject = None
    metadata: JSONObject = None


class SessionListQuery(ListQuery):
    sort_by: Literal["updated_at", "created_at", "session_name"] = "updated_at"
    sort_order: SortOrder = "desc"
    agent_id: Id | None = None
    # Text filters are "" when absent, not null: a query string has no null, and a schema
    # offering one lets generated clients send values that read back as valid text.
    session_name: Text = Field("", description="Part of the name, in any case.")
    user_id: Text = Field(
        "", description="A username; staff only (for anyone else the list stays their own)."
    )


class SessionList(Page[SessionOut]):
    pass
