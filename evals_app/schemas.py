"""The experiments API's shapes: explicit In/Out schemas, strict request bodies (Body)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import BeforeValidator, StrictFloat, StringConstraints

from evals_app.experiments import MAX_CONCURRENCY, MAX_COST, MAX_REPEATS
from evals_app.models import Experiment
from sessions_app.api.pagination import ListQuery, PageMeta
from sessions_app.api.types import NO_NUL, Body, Id, JSONObject, json_integer
from sessions_app.models import AgentVersion

StatusName = Literal["queued", "running", "completed", "cancelled", "budget", "failed"]
SCORERS = (
    "Scorer specs: a name (`contains`) or an object with its options "
    '(`{"name": "regex", "pattern": "\\\\d+"}`).'
)
ScorerSpec = (
    Annotated[str, StringConstraints(strict=True, min_length=1, max_length=100)] | JSONObject
)


class ExperimentIn(Body):
    dataset_id: Id
    versions: list[Id] | None = Field(
        None, max_length=20, description="The agent versions to compare (or give `agents`)."
    )
    agents: list[Id] | None = Field(
        None, max_length=20, description="Agents whose live versions to compare."
    )
    baseline: Id | None = Field(None, description="One of the ids given; default the first.")
    repeats: Annotated[int, Field(ge=1, le=MAX_REPEATS), BeforeValidator(json_integer)] = 1
    scorers: list[ScorerSpec] = Field(default_factory=list, max_length=20, description=SCORERS)
    judge_id: Id | None = Field(None, description="The agent the judge scorers ask.")
    split: Literal["", "train", "validation", "test"] = Field("", description="Empty: all.")
    concurrency: (
        Annotated[int, Field(ge=1, le=MAX_CONCURRENCY), BeforeValidator(json_integer)] | None
    ) = Field(None, description="Answers asked at once; default PARLEY_EVAL_CONCURRENCY.")
    budget_tokens: (
        Annotated[int, Field(ge=0, le=2**63 - 1), BeforeValidator(json_integer)] | None
    ) = Field(None, description="No answer is started once this many tokens are spent.")
    budget_cost: Annotated[StrictFloat, Field(ge=0, le=float(MAX_COST))] | None = Field(
        None, description="No answer is started once this much (USD) is spent."
    )
    name: Annotated[str, StringConstraints(strict=True, max_length=200, pattern=NO_NUL)] = ""


class ResumeIn(Body):
    budget_tokens: (
        Annotated[int, Field(ge=0, le=2**63 - 1), BeforeValidator(json_integer)] | None
    ) = Field(None, description="A new token budget; null keeps it.")
    budget_cost: Annotated[StrictFloat, Field(ge=0, le=float(MAX_COST))] | None = Field(
        None, description="A new cost budget (USD); null keeps it."
    )


class RescoreIn(Body):
    scorers: list[ScorerSpec] = Field(min_length=1, max_length=20, description=SCORERS)


class VersionOut(Schema):
    version_id: uuid.UUID
    agent_id: uuid.UUID
    agent_name: str
    label: str = Field(description="v3, or v3 draft.")

    @staticmethod
    def resolve_agent_name(obj: AgentVersion) -> str:
        return obj.agent.name


class ScorerProgressOut(Schema):
    scorer: str = Field(description="The scorer's key, as its scores name it.")
    done: int = Field(description="Scores written.")
    total: int = Field(description="Scores its answers so far call for.")


class ProgressOut(Schema):
    status: StatusName
    total: int
    done: int = Field(description="Trials answered or failed.")
    errors: int = Field(description="Trials that failed.")
    scores_done: int = Field(description="Scores written, every scorer together.")
    scores_total: int = Field(
        description="Scores called for: each scorer's, one per answered trial (for a scorer "
        "against the baseline, per candidate's answered trial)."
    )
    scoring: list[ScorerProgressOut] = Field(description="Per scorer.")
    used_tokens: int
    used_cost: float
    budget_tokens: int | None
    budget_cost: float | None


class ExperimentOut(Schema):
    experiment_id: uuid.UUID
    name: str
    dataset_id: uuid.UUID
    split: str
    versions: list[VersionOut]
    baseline_id: uuid.UUID
    repeats: int
    scorers: list[dict[str, Any]]
    judge_id: uuid.UUID | None
    concurrency: int
    budget_tokens: int | None
    budget_cost: float | None
    used_tokens: int
    used_cost: float
    status: StatusName
    error: str = Field(description="Why it stopped, when it did not complete.")
    cancel_requested: bool
    created_by: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @staticmethod
    def resolve_versions(obj: Experiment) -> list[Any]:
        return sorted(obj.versions.all(), key=lambda v: (v.pk != obj.baseline_id, v.agent.name))

    @staticmethod
    def resolve_created_by(obj: Experiment) -> str | None:
        return obj.created_by.get_username() if obj.created_by is not None else None


class ExperimentDetailOut(ExperimentOut):
    progress: ProgressOut


class ExperimentListQuery(ListQuery):
    sort_by: Literal["created_at", "name", "status"] = "created_at"
    sort_order: Literal["asc", "desc"] = "desc"
    status: StatusName | None = None


class ExperimentList(Schema):
    data: list[ExperimentOut]
    meta: PageMeta


class ReportQuery(Schema):
    format: Literal["json", "csv"] = "json"
