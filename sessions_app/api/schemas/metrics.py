"""Usage figures: a run's and a session's metrics, and GET /api/metrics."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from ninja import Field, Schema

from sessions_app.api.types import When


class SessionMetricsOut(Schema):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cache_read_tokens: int
    reasoning_tokens: int
    duration: float | None = Field(description="seconds")
    cost: float | None = Field(description="USD; null when the price is unknown")


class RunMetricsOut(SessionMetricsOut):
    time_to_first_token: float | None = Field(description="seconds")
    tokens_per_second: float | None
    usage_estimated: bool = Field(description="true when the upstream reported no usage")


class Spread(Schema):
    p50: float | None
    p95: float | None


class MetricsGroupOut(Schema):
    key: str | None = Field(description="ISO date, model name, agent_id or username.")
    label: str
    runs: int
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost: float | None
    time_to_first_token: Spread
    duration: Spread


class MetricsQuery(Schema):
    start: When | None = Field(
        None,
        description="ISO date (from the start of that day, UTC) or datetime (UTC unless it has "
        "an offset); default: 30 days before `end`.",
    )
    end: When | None = Field(None, description="ISO date (to the end of that day) or datetime.")
    group_by: Literal["day", "model", "agent", "user"] = "day"


class MetricsOut(Schema):
    group_by: str
    start: datetime | date | None
    end: datetime | date | None
    data: list[MetricsGroupOut]
