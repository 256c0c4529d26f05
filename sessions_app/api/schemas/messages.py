"""A session's stored messages, in conversation order."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema

from sessions_app.api.pagination import ListQuery
from sessions_app.api.schemas.lists import Page, SortOrder


class MessageOut(Schema):
    id: int
    run_id: uuid.UUID
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str
    from_history: bool = Field(description="Always false as stored.")
    created_at: datetime


class MessageListQuery(ListQuery):
    sort_by: Literal["position"] = Field("position", description="Conversation order.")
    sort_order: SortOrder = "asc"


class MessageList(Page[MessageOut]):
    pass
