"""A streamed run's events (POST /api/runs with "stream": true), by their `event:` name."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from ninja import Field, Schema

from sessions_app.api.schemas.metrics import RunMetricsOut


class RunEventBase(Schema):
    run_id: uuid.UUID
    session_id: str
    seq: int = Field(ge=1, description="1, 2, … without gaps within a run.")


class RunStartedEvent(RunEventBase):
    model: str
    model_provider: str
    input: str
    position: int = Field(description="1-based order of the run in its session.")
    created_at: datetime


class RunContentEvent(RunEventBase):
    content: str = Field(description="The new piece of the answer only.")


class RunCompletedEvent(RunEventBase):
    content: str = Field(description="The whole answer.")
    metrics: RunMetricsOut
    error: str | None = Field(
        None, description="Only on an answer the model cut at its length limit: says so."
    )


class RunCancelledEvent(RunEventBase):
    content: str = Field(description="The answer up to where it was stopped.")
    metrics: RunMetricsOut


class RunErrorEvent(RunEventBase):
    error: str
    status: Literal["ERROR", "INTERRUPTED"]
    content: str = Field(description="The answer up to the failure.")
    metrics: RunMetricsOut


RUN_EVENTS: dict[str, type[Schema]] = {
    "RunStarted": RunStartedEvent,
    "RunContent": RunContentEvent,
    "RunCompleted": RunCompletedEvent,
    "RunError": RunErrorEvent,
    "RunCancelled": RunCancelledEvent,
}
