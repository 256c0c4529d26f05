"""The access gates: every object a user names is fetched here, so ownership is checked once.

A foreign id answers exactly like a missing one (NotFound), so ids cannot be probed. Staff reach
other people's objects as far as their permissions go (services.permissions decides); without
the right they get PermissionDenied naming it.
"""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from sessions_app.ids import session_id_or_none
from sessions_app.models import Agent, Run, Session, User
from sessions_app.services.permissions import Action, is_staff, missing, staff_may

Owned = TypeVar("Owned", Session, Run)


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


def _owned(user: User, action: Action, objects: QuerySet[Owned], pk: Any) -> Owned:
    """One object by its key: its owner's, or anyone's for staff with the right to `action`
    it. Staff without that right are told which one they lack, whether or not the object
    exists (as in the admin); anyone else gets NotFound."""
    model = objects.model
    allowed = staff_may(user, action, model)
    if not allowed:
        objects = objects.filter(user=user)
    try:
        return objects.get(pk=pk)
    except model.DoesNotExist as exc:
        if is_staff(user) and not allowed:
            raise missing(action, model) from exc
        raise NotFound from exc


def sessions_for_user(user: User, owner: str | None = None) -> QuerySet[Session]:
    """The sessions `user` lists: their own, or those of `owner` (a username) for staff who may
    view sessions. For anyone else `owner` is ignored and the list stays their own."""
    if owner and owner != user.get_username() and is_staff(user):
        if not staff_may(user, "view", Session):
            raise missing("view", Session)
        return Session.objects.filter(user__username=owner)
    return Session.objects.filter(user=user)


def get_session_for_user(user: User, session_id: Any, action: Action = "view") -> Session:
    """A session to `action` (view, change or delete)."""
    sessions = Session.objects.select_related("agent", "user")
    return _owned(user, action, sessions, _session_id(session_id))


def get_run_for_user(user: User, run_id: Any, action: Action = "view") -> Run:
    """A run to `action`: view it, or change it (stop it)."""
    return _owned(user, action, Run.objects.select_related("session", "agent"), _uuid(run_id))


def get_sessions_for_owner(user: User, session_ids: list[Any]) -> list[Session | Exception]:
    """Sessions to act in (run, regenerate), in one query: each a Session, or why not. Only its
    owner speaks in a session: staff who may view it are told so (PermissionDenied); for anyone
    else a foreign id is NotFound, like a missing one."""
    wanted: list[str | Exception] = []
    for session_id in session_ids:
        try:
            wanted.append(_session_id(session_id))
        except NotFound as exc:
            wanted.append(exc)
    ids = [w for w in wanted if isinstance(w, str)]
    visible = Session.objects.filter(pk__in=ids).select_related("agent")
    if not staff_may(user, "view", Session):
        visible = visible.filter(user=user)
    found = {s.pk: s for s in visible}
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
    unlisted one (brought in by an import) only staff who may view agents and those with a
    session of it may see. Staff without the right are refused naming it for an unlisted or a
    missing agent alike, so which agents exist cannot be probed.
    `loaded` is one already fetched (a session's own, with the session): named again, it costs
    no query."""
    if agent_id is None:
        return default_agent()
    wanted = _uuid(agent_id)
    if loaded is not None and loaded.pk == wanted:
        return loaded
    agent = Agent.objects.filter(pk=wanted).first()
    if agent is not None:
        if agent.listed or staff_may(user, "view", Agent):
            return agent
        if Session.objects.filter(user=user, agent=agent).exists():
            return agent
    # As `_owned`: staff without the right hear which one, whether or not the agent exists.
    if is_staff(user) and not staff_may(user, "view", Agent):
        raise missing("view", Agent)
    raise NotFound


def agents_for_user(user: User) -> QuerySet[Agent]:
    """The agents `user` may list: the listed ones, and for staff who may view agents all."""
    agents = Agent.objects.all()
    return agents if staff_may(user, "view", Agent) else agents.filter(listed=True)


def default_agent() -> Agent:
    agent = Agent.objects.filter(listed=True).order_by("-is_default", "created_at").first()
    if agent is None:
        raise NotFound
    return agent
