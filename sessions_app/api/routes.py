"""The REST API (CONTRACT §5): thin adapters from HTTP to the services, one router per area.

Endpoints validate, call a service and shape the answer; ownership is checked by the access gates
inside the services, and every exception becomes {"detail": ...} in api_errors.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Status

from sessions_app import engine
from sessions_app.api import sse
from sessions_app.api.auth import RUN_AUTH
from sessions_app.api.pagination import paginate
from sessions_app.api.schemas.agents import AgentIn, AgentList, AgentListQuery, AgentOut, AgentPatch
from sessions_app.api.schemas.errors import ErrorOut, UpstreamErrorOut
from sessions_app.api.schemas.messages import MessageList, MessageListQuery
from sessions_app.api.schemas.metrics import MetricsOut, MetricsQuery
from sessions_app.api.schemas.runs import FeedbackIn, RunIn, RunList, RunListQuery, RunOut
from sessions_app.api.schemas.sessions import (
    SessionIn,
    SessionList,
    SessionListQuery,
    SessionOut,
    SessionPatch,
)
from sessions_app.api.schemas.versions import VersionIn, VersionList, VersionListQuery, VersionOut
from sessions_app.llm.errors import status_for_error
from sessions_app.models import AgentVersion, Run, RunStatus, User
from sessions_app.services import agents as agent_service
from sessions_app.services import feedback, versions
from sessions_app.services import sessions as session_service
from sessions_app.services.access import get_agent_for_user, get_run_for_user, get_session_for_user
from sessions_app.usage import metrics

# What any authenticated call may answer besides success: 403 is a staff member without the
# permission the call needs (or, on writes, a missing CSRF token); writes add 400 (a body that
# is not JSON).
READ_ERRORS: dict[int, Any] = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 422: ErrorOut}
WRITE_ERRORS: dict[int, Any] = {**READ_ERRORS, 400: ErrorOut}
# Writes of session state or metadata: over PARLEY_MAX_STATE_BYTES, 413.
STATE_WRITE_ERRORS: dict[int, Any] = {**WRITE_ERRORS, 413: ErrorOut}

agents_router = Router(tags=["agents"])
sessions_router = Router(tags=["sessions"])
runs_router = Router(tags=["runs"])
metrics_router = Router(tags=["metrics"])


def _user(request: HttpRequest) -> User:
    return request.auth  # type: ignore[attr-defined,no-any-return]


# -- agents ----------------------------------------------------------------------------------


@agents_router.get("", response={200: AgentList, **READ_ERRORS})
def list_agents(request: HttpRequest, query: Query[AgentListQuery]) -> dict[str, Any]:
    orderings = {"name": ["name"], "created_at": ["created_at"], "updated_at": ["updated_at"]}
    return paginate(agent_service.list_agents(_user(request)), query, orderings)


@agents_router.post("", response={201: AgentOut, 409: ErrorOut, **STATE_WRITE_ERRORS})
def create_agent(request: HttpRequest, payload: AgentIn) -> Status[Any]:
    """Staff with the “add agent” permission. 409 when `fewshot_dataset_id` names a dataset
    with a rule that adds items as accepted without review: the agent's examples are shown to
    everyone who chats with it."""
    return Status(201, agent_service.create_agent(_user(request), **payload.model_dump()))


@agents_router.get("/{agent_id}", response={200: AgentOut, **READ_ERRORS})
def get_agent(request: HttpRequest, agent_id: uuid.UUID) -> Any:
    return get_agent_for_user(_user(request), agent_id)


@agents_router.patch("/{agent_id}", response={200: AgentOut, 409: ErrorOut, **STATE_WRITE_ERRORS})
def update_agent(request: HttpRequest, agent_id: uuid.UUID, payload: AgentPatch) -> Any:
    """Staff with the “change agent” permission. Only the fields sent are changed; 409 for a
    few-shot dataset with a rule that adds items as accepted without review, as when creating
    one."""
    changes = payload.model_dump(exclude_unset=True)
    return agent_service.update_agent(_user(request), agent_id, **changes)


# -- agent versions --------------------------------------------------------------------------


@agents_router.get("/{agent_id}/versions", response={200: VersionList, **READ_ERRORS})
def list_versions(
    request: HttpRequest, agent_id: uuid.UUID, query: Query[VersionListQuery]
) -> dict[str, Any]:
    """Staff with the “view agent” permission: the agent's versions, newest first by default;
    `state` tells the live one, past ones and drafts."""
    found = versions.versions_for_user(_user(request), agent_id)
    return paginate(found, query, {"number": ["number"], "created_at": ["created_at"]})


@agents_router.post(
    "/{agent_id}/versions",
    response={200: VersionOut, 201: VersionOut, 409: ErrorOut, **STATE_WRITE_ERRORS},
)
def create_version(request: HttpRequest, agent_id: uuid.UUID, payload: VersionIn) -> Status[Any]:
    """Staff with the “change agent” permission: a draft version, the live configuration with
    the fields sent changed, to try in experiments; users go on chatting with the live version
    until it is promoted. 201 for a new draft; 200 with the version the agent has already with
    that configuration (live, past or draft); 422 for values the agent's form would refuse; 404
    for an unknown `fewshot_dataset_id` and 409 for one whose items skip review, as in PATCH."""
    user = _user(request)
    agent = versions.agent_for_user(user, agent_id, "change")
    changes = payload.model_dump(exclude_unset=True)
    note = changes.pop("note", "")
    version, made = versions.draft(agent, changes, user, note)
    return Status(201 if made else 200, version)


@agents_router.post(
    "/{agent_id}/versions/{version_id}/promote",
    response={200: AgentOut, 409: ErrorOut, **STATE_WRITE_ERRORS},
)
def promote_version(request: HttpRequest, agent_id: uuid.UUID, version_id: uuid.UUID) -> Any:
    """Staff with the “change agent” permission: make this version the one users chat with
    (a draft goes live itself; a past version comes back). Answers the agent as it now is; 422
    or 409 when its configuration is refused now (its few-shot dataset is gone, or takes items
    without review)."""
    user = _user(request)
    version = versions.get_version_for_user(user, agent_id, version_id, "change")
    return versions.promote(version, user)


# -- sessions --------------------------------------------------------------------------------

SESSION_ORDERINGS = {
    "updated_at": ["updated_at"],
    "created_at": ["created_at"],
    "session_name": ["session_name"],
}


@sessions_router.get("", response={200: SessionList, **READ_ERRORS})
def list_sessions(request: HttpRequest, query: Query[SessionListQuery]) -> dict[str, Any]:
    """One's own sessions. Staff with the “view session” permission may pass another `user_id`
    (a username); for anyone else who is not staff `user_id` is ignored and the list stays
    their own."""
    sessions = session_service.list_sessions(
        _user(request),
        agent_id=query.agent_id,
        session_name=query.session_name,
        owner=query.user_id,
    )
    return paginate(sessions, query, SESSION_ORDERINGS, shape=session_service.with_metrics)


@sessions_router.post(
    "", response={201: SessionOut, 409: ErrorOut, 429: ErrorOut, **STATE_WRITE_ERRORS}
)
def create_session(request: HttpRequest, payload: SessionIn) -> Status[Any]:
    """A new session; `session_id` may be chosen by the caller, 409 when one has it already,
    429 beyond PARLEY_SESSIONS_PER_MINUTE."""
    session = session_service.create_session(
        _user(request),
        agent_id=payload.agent_id,
        session_name=payload.session_name.strip(),
        session_state=payload.session_state,
        metadata=payload.metadata,
        session_id=payload.session_id,
    )
    return Status(201, session)


@sessions_router.get("/{session_id}", response={200: SessionOut, **READ_ERRORS})
def get_session(request: HttpRequest, session_id: str) -> Any:
    return get_session_for_user(_user(request), session_id)


@sessions_router.patch("/{session_id}", response={200: SessionOut, **STATE_WRITE_ERRORS})
def update_session(request: HttpRequest, session_id: str, payload: SessionPatch) -> Any:
    """Change `session_name`, `session_state` or `metadata`; only the fields sent. Another's
    session takes the “change session” permission."""
    changes = payload.model_dump(exclude_unset=True)
    return session_service.update_session(_user(request), session_id, **changes)


@sessions_router.delete("/{session_id}", response={204: None, 409: ErrorOut, **WRITE_ERRORS})
def delete_session(request: HttpRequest, session_id: str) -> Status[None]:
    """409 while a run is in progress in it: cancel that first. Another's session takes the
    “delete session” permission."""
    session_service.delete_session(_user(request), session_id)
    return Status(204, None)


@sessions_router.get("/{session_id}/runs", response={200: RunList, **READ_ERRORS})
def list_session_runs(
    request: HttpRequest, session_id: str, query: Query[RunListQuery]
) -> dict[str, Any]:
    """Its runs, oldest first by default, each with its metrics."""
    session = get_session_for_user(_user(request), session_id)
    orderings = {"position": ["position"], "created_at": ["created_at"]}
    session_runs = Run.objects.filter(session=session).select_related("user", "agent_version")
    return paginate(session_runs, query, orderings)


@sessions_router.get("/{session_id}/messages", response={200: MessageList, **READ_ERRORS})
def list_session_messages(
    request: HttpRequest, session_id: str, query: Query[MessageListQuery]
) -> dict[str, Any]:
    """Its stored messages in conversation order (Agno's `get_messages_for_session`)."""
    messages = session_service.get_messages_for_session(_user(request), session_id)
    return paginate(messages, query, {"position": ["run__position", "order"]})


# -- runs ------------------------------------------------------------------------------------


RUN_ERRORS: dict[int, Any] = {
    **WRITE_ERRORS,
    409: ErrorOut,
    413: ErrorOut,
    429: ErrorOut,
    502: UpstreamErrorOut,
    503: ErrorOut,  # the database cannot store the run (full, read-only, down), or Parley stops
    504: UpstreamErrorOut,
}
SSE_DOC = {
    "responses": {
        200: {
            "description": 'The finished Run, or with "stream": true a text/event-stream of '
            "RunStarted, RunContent…, then RunCompleted, RunError or RunCancelled.",
            "content": sse.openapi_media_type(),
        }
    }
}


@runs_router.post("", response={200: RunOut, **RUN_ERRORS}, openapi_extra=SSE_DOC, auth=RUN_AUTH)
async def create_run(request: HttpRequest, payload: RunIn) -> Any:
    """Run the agent: Agno's `agent.run(input, session_id=...)`. Without `session_id` a new
    session is created. A client that disconnects does not stop the run; cancel does."""
    # A signed-in user, or a bearer token checked as the run is created (RUN_AUTH). The run's
    # work runs in tasks of the engine's own, in fresh contexts: not in this request's, whose
    # thread ends with the response. A client leaving before the run starts only stops waiting.
    handle = await engine.start_run(
        request.auth,  # type: ignore[attr-defined]
        payload.input,
        agent_id=payload.agent_id,
        session_id=payload.session_id,
        session_state=payload.session_state,
    )
    if payload.stream:
        return sse.event_stream(handle)
    run = await handle.wait()
    if run.status == RunStatus.ERROR:
        body = {"detail": run.error, "run_id": run.run_id, "session_id": run.session_id}
        return Status(status_for_error(run.error), body)
    return await _with_version(run)


async def _with_version(run: Run) -> Run:
    """The run with its agent version loaded: an async endpoint's answer is shaped on the event
    loop, where the ORM may not be asked synchronously."""
    if run.agent_version_id is not None and not Run.agent_version.is_cached(run):
        run.agent_version = await AgentVersion.objects.aget(pk=run.agent_version_id)
    return run


@runs_router.get("/{run_id}", response={200: RunOut, **READ_ERRORS})
def get_run(request: HttpRequest, run_id: uuid.UUID) -> Any:
    return get_run_for_user(_user(request), run_id)


@runs_router.post("/{run_id}/cancel", response={200: RunOut, **WRITE_ERRORS})
async def cancel_run(request: HttpRequest, run_id: uuid.UUID) -> Any:
    """Stop a run; answers the run as it now stands (CANCELLED once stopped, or unchanged if it
    had already finished). Another's run takes the “change run” permission."""
    return await _with_version(await engine.cancel_run(_user(request), run_id))


@runs_router.post("/{run_id}/feedback", response={200: RunOut, **WRITE_ERRORS})
def rate_run(request: HttpRequest, run_id: uuid.UUID, payload: FeedbackIn) -> Any:
    """Rate one's own run 1 (good) or -1 (bad); null clears the rating."""
    return feedback.set_feedback(_user(request), run_id, payload.rating, payload.comment)


# -- metrics ---------------------------------------------------------------------------------


@metrics_router.get("", response={200: MetricsOut, **READ_ERRORS})
def get_metrics(request: HttpRequest, query: Query[MetricsQuery]) -> dict[str, Any]:
    """Totals and p50/p95 timings of model calls, per day, model, agent or user. Everyone sees
    their own calls; staff with the “view llm call” permission see everyone's."""
    start = query.start if query.start is not None else metrics.default_start(query.end)
    calls = metrics.calls_in_range(_user(request), start, query.end)
    return {
        "group_by": query.group_by,
        "start": start,
        "end": query.end,
        "data": metrics.aggregate(calls, query.group_by),
    }
