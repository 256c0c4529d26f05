"""Parley's data, by family: accounts, conversations (agents, sessions, runs, messages), usage
(every call made to a model), the dashboard's daily rollups, and how deletion treats them.
Everything is importable from here, as Django and the migrations name it."""

from sessions_app.models.accounts import ApiToken, ImportedIdentity, LoginFailure, User
from sessions_app.models.conversations import (
    ACTIVE_STATUSES,
    METRIC_FIELDS,
    Agent,
    FewShotOrder,
    Message,
    NameSource,
    Role,
    Run,
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
    "Agent",
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
    "RunStatus",
    "Session",
    "SessionSource",
    "TokenMetrics",
    "User",
    "usage_known",
]
