"""The access gates: every object a user names is fetched here, so ownership is checked once.

A foreign id answers exactly like a missing one (NotFound), so ids cannot be probed.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from sessions_app.ids import session_id_or_none
from sessions_app.models import Agent, Run, Session, User


class NotFound(Exception):
    """The object does not exist, or the acting user may not see it."""


def _uuid(value: Any) -> uuid.UUID:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError) as exc:
        raise NotFound from exc


def _session_id(value: Any) -> str:
    session_id = session_id_or_none(value)
    if session_id is None:
        raise NotFound
    return session_id


def sessions_for_user(user: User) -> QuerySet[Session]:
    sessions = Session.objects.all()
    return sessions if user.is_staff else sessions.filter(user=user)


def runs_for_user(user: User) -> QuerySet[Run]:
    runs = Run.objects.all()
    return runs if user.is_staff else runs.filter(user=user)


def get_session_for_user(user: User, session_id: Any) -> Session:
    try:
        sessions = sessions_for_user(user).select_related("agent", "user")
        return sessions.get(pk=_session_id(session_id))
    except Session.DoesNotExist as exc:
        raise NotFound from exc


def get_run_for_user(user: User, run_id: Any) -> Run:
    try:
        return runs_for_user(user).select_related("session", "agent").get(pk=_uuid(run_id))
    except Run.DoesNotExist as exc:
        raise NotFound from exc


def get_sessions_for_owner(user: User, session_ids: list[Any]) -> list[Session | Exception]:
    """Sessions to act in (run, regenerate), in one query: each a Session, or why not. Staff may
    see anyone's session (PermissionDenied), only its owner speaks in it; for anyone else a
    foreign id is NotFound, like a missing one."""
    wanted: list[str | Exception] = []
    for session_id in session_ids:
        try:
            wanted.append(_session_id(session_id))
        except NotFound as exc:
            wanted.append(exc)
    ids = [w for w in wanted if isinstance(w, str)]
    found = {s.pk: s for s in sessions_for_user(user).filter(pk__in=ids).select_related("agent")}
    out: list[Session | Exception] = []
    for w in wanted:
        session = found.get(w) if isinstance(w, str) else None
        if session is None:
            out.append(w if isinstance(w, Exception) else NotFound())
        elif session.user_id != user.pk:
            out.append(PermissionDenied("Only the owner of a session can run in it."))
        else:
            out.append(session)
    return out


def get_run_for_owner(user: User, run_id: Any) -> Run:
    """A run to judge or repeat (feedback, regenerate): someone else's is not found, even for
    staff, since a rating speaks for the person who asked."""
    try:
        return Run.objects.select_related("session", "agent").get(pk=_uuid(run_id), user=user)
    except Run.DoesNotExist as exc:
        raise NotFound from exc


def get_agent_for_user(user: User, agent_id: Any = None, *, loaded: Agent | None = None) -> Agent:
    """Listed agents are shared configs: everyone signed in may chat with any of them. An
    unlisted one (brought in by an import) only staff and those with a session of it may see.
    `loaded` is one already fetched (a session's own, with the session): named again, it costs
    no query."""
    if agent_id is None:
        return default_agent()
    wanted = _uuid(agent_id)
    if loaded is not None and loaded.pk == wanted:
        return loaded
    try:
        agent = Agent.objects.get(pk=wanted)
    except Agent.DoesNotExist as exc:
        raise NotFound from exc
    if agent.listed or user.is_staff or Session.objects.filter(user=user, agent=agent).exists():
        return agent
    raise NotFound


def agents_for_user(user: User) -> QuerySet[Agent]:
    """The agents `user` may list: the listed ones, and for staff (who manage them) all."""
    return Agent.objects.all() if user.is_staff else Agent.objects.filter(listed=True)


def default_agent() -> Agent:
    agent = Agent.objects.filter(listed=True).order_by("-is_default", "created_at").first()
    if agent is None:
        raise NotFound
    return agent
