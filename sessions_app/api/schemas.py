"""The REST API's shapes (CONTRACT §5): explicit In/Out schemas with Agno's field names.

Out schemas read model instances (ninja Schema); In schemas are strict request bodies (Body).
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import BeforeValidator, StrictBool, StringConstraints

from sessions_app.api.pagination import ListQuery, PageMeta
from sessions_app.api.types import (
    NO_NUL,
    VISIBLE,
    Body,
    Id,
    JSONObject,
    SessionId,
    Text,
    When,
    json_integer,
    json_number,
)
from sessions_app.models import Agent, AgentVersion, Run, Session
from sessions_app.services import versions
from sessions_app.services.sessions import session_metrics


class ErrorOut(Schema):
    detail: str | list[dict[str, Any]]


class UpstreamErrorOut(Schema):
    detail: str
    run_id: uuid.UUID
    session_id: str


# -- metrics ---------------------------------------------------------------------------------


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


# -- agents ----------------------------------------------------------------------------------


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
    sort_order: Literal["asc", "desc"] = "asc"


class AgentList(Schema):
    data: list[AgentOut]
    meta: PageMeta


# -- agent versions --------------------------------------------------------------------------


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
    sort_order: Literal["asc", "desc"] = "desc"


class VersionList(Schema):
    data: list[VersionOut]
    meta: PageMeta


# -- sessions --------------------------------------------------------------------------------

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
    sort_order: Literal["asc", "desc"] = "desc"
    agent_id: Id | None = None
    # Text filters are "" when absent, not null: a query string has no null, and a schema
    # offering one lets generated clients send values that read back as valid text.
    session_name: Text = Field("", description="Part of the name, in any case.")
    user_id: Text = Field(
        "", description="A username; staff only (for anyone else the list stays their own)."
    )


class SessionList(Schema):
    data: list[SessionOut]
    meta: PageMeta


# -- runs ------------------------------------------------------------------------------------


class FeedbackOut(Schema):
    rating: int
    comment: str


class RunOut(Schema):
    run_id: uuid.UUID
    session_id: str
    agent_id: uuid.UUID
    user_id: str = Field(description="The username of who ran it.")
    status: Literal["PENDING", "RUNNING", "COMPLETED", "ERROR", "CANCELLED", "INTERRUPTED"]
    input: str
    content: str
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
    sort_order: Literal["asc", "desc"] = "asc"


class RunList(Schema):
    data: list[RunOut]
    meta: PageMeta


# -- messages --------------------------------------------------------------------------------


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
    sort_order: Literal["asc", "desc"] = "asc"


class MessageList(Schema):
    data: list[MessageOut]
    meta: PageMeta


# -- stream events (POST /api/runs with "stream": true) ------------------------------------------


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
