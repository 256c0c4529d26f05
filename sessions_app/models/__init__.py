"""Parley's data, by family: accounts, agents and their versions, conversations (sessions, runs,
messages), usage (every call made to a model), the dashboard's daily rollups, and how deletion
treats them.
Everything is importable from here, as Django and the migrations name it."""

from sessions_app.models.accounts import ApiToken, ImportedIdentity, LoginFailure, User
from sessions_app.models.agents import (
    VERSIONED_FIELDS,
    Agent,
    AgentVersion,
    FewShotOrder,
    config_hash,
    config_of,
)
from sessions_app.models.conversations import (
    ACTIVE_STATUSES,
    METRIC_FIELDS,
    Message,
    NameSource,
    Role,
    Run,
    RunSource,
    RunStatus,
    Session,
    SessionSource,
    TokenMetrics,
    usage_known,
)
from sessions_app.models.deletion import CASCADE_LEAN, KEEP_USAGE
from sessions_app.models.rollups import CallDay, LatencyDay, RolledDay, RunDay
from sessions_app.models.usage import CallKind, DeletedRun, DeletedSession, LLMCall

__all__ = [
    "ACTIVE_STATUSES",
    "CASCADE_LEAN",
    "KEEP_USAGE",
    "METRIC_FIELDS",
    "VERSIONED_FIELDS",
    "Agent",
    "AgentVersion",
    "ApiToken",
    "CallDay",
    "CallKind",
    "DeletedRun",
    "DeletedSession",
    "FewShotOrder",
    "ImportedIdentity",
    "LLMCall",
    "LatencyDay",
    "LoginFailure",
    "Message",
    "NameSource",
    "Role",
    "RolledDay",
    "Run",
    "RunDay",
    "RunSource",
    "RunStatus",
    "Session",
    "SessionSource",
    "TokenMetrics",
    "User",
    "config_hash",
    "config_of",
    "usage_known",
]
