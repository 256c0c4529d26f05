"""The access gates: every object a user names is fetched here, so ownership is checked once.

A foreign id answers exactly like a missing one (NotFound), so ids cannot be probed. Staff reach
other people's objects as far as their permissions go (services.permissions decides); without
the right they get PermissionDenied naming it.

A user who came with an API token limited to some agents carries their ids (`limit_to_agents`,
set where the token is checked): every gate then treats other agents, and their sessions and
runs, as missing, staff included. A browser's user carries none and is never limited.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any, NoReturn, TypeVar

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet

from sessions_app import signals
from sessions_app.ids import session_id_or_none
from sessions_app.models import Agent, Run, Session, User
from sessions_app.services.permissions import SCOPE, Action, is_staff, missing, staff_may

Owned = TypeVar("Owned", Session, Run)


class NotFound(Exception):
    """The object does not exist, or the acting user may not see it."""


def limit_to_agents(user: User, agent_ids: Iterable[Any]) -> User:
    """Limit `user`, as this object knows it, to these agents (by id)."""
    setattr(user, SCOPE, frozenset(_uuid(pk) for pk in agent_ids))
    return user


def agent_scope(user: User) -> frozenset[uuid.UUID] | None:
    """The agents `user` is limited to; None: not limited."""
    return getattr(user, SCOPE, None)


def in_scope(user: User, objects: QuerySet[Any], agent: str = "agent") -> QuerySet[Any]:
    """`objects` whose agent (the field `agent` names) is one `user` is limited to, if any."""
    scope = agent_scope(user)
    return objects if scope is None else objects.filter(**{f"{agent}__in": scope})


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


def _owned(
    user: User, action: Action, objects: QuerySet[Owned], pk: Any, agent: str = "agent"
) -> Owned:
    """One object by its key: its owner's, or anyone's for staff with the right to `action`
    it. Staff without that right are told which one they lack, whether or not the object
    exists (as in the admin); anyone else gets NotFound. One of an agent out of the user's
    scope (`agent` names the field) is missing."""
    model = objects.model
    allowed = staff_may(user, action, model)
    objects = in_scope(user, objects, agent)
    if not allowed:
        objects = objects.filter(user=user)
    try:
        found = objects.get(pk=pk)
    except model.DoesNotExist as exc:
        if is_staff(user) and not allowed:
            raise missing(action, model) from exc
        raise NotFound from exc
    if action == "view":
        signals.send_transcript_read(user, found, found.user_id)
    return found


def sessions_for_user(user: User, owner: str | None = None) -> QuerySet[Session]:
    """The sessions `user` lists: their own, or those of `owner` (a username) for staff who may
    view sessions. For anyone else `owner` is ignored and the list stays their own."""
    if owner and owner != user.get_username() and is_staff(user):
        if not staff_may(user, "view", Session):
            raise missing("view", Session)
        return in_scope(user, Session.objects.filter(user__username=owner))
    return in_scope(user, Session.objects.filter(user=user))


def get_session_for_user(user: User, session_id: Any, action: Action = "view") -> Session:
    """A session to `action` (view, change or delete)."""
    sessions = Session.objects.select_related("agent", "user")
    return _owned(user, action, sessions, _session_id(session_id))


def get_run_for_user(user: User, run_id: Any, action: Action = "view") -> Run:
    """A run to `action`: view it, or change it (stop it). It is reachable as its session is."""
    runs = Run.objects.select_related("session", "agent")
    return _owned(user, action, runs, _uuid(run_id), agent="session__agent")


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
    visible = in_scope(user, Session.objects.filter(pk__in=ids).select_related("agent"))
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
    runs = in_scope(user, Run.objects.select_related("session", "agent"), "session__agent")
    try:
        return runs.get(pk=_uuid(run_id), user=user)
    except Run.DoesNotExist as exc:
        raise NotFound from exc


def get_agent_for_user(user: User, agent_id: Any = None, *, loaded: Agent | None = None) -> Agent:
    """Listed agents are shared configs: everyone signed in may chat with any of them. An
    unlisted one (brought in by an import) only staff who may view agents and those with a
    session of it may see. Staff without the right are refused naming it for an unlisted or a
    missing agent alike, so which agents exist cannot be probed. Out of the user's scope, an
    agent is missing; without `agent_id`, the default agent is taken when in scope, else the
    scope's first by name.
    `loaded` is one already fetched (a session's own, with the session): named again, it costs
    no query."""
    scope = agent_scope(user)
    if agent_id is None:
        return default_agent() if scope is None else _first_in_scope(user)
    wanted = _uuid(agent_id)
    if scope is not None and wanted not in scope:
        _refuse_agent(user)
    if loaded is not None and loaded.pk == wanted:
        return loaded
    agent = Agent.objects.filter(pk=wanted).first()
    if agent is not None:
        if agent.listed or staff_may(user, "view", Agent):
            return agent
        if Session.objects.filter(user=user, agent=agent).exists():
            return agent
    _refuse_agent(user)


def _refuse_agent(user: User) -> NoReturn:
    # As `_owned`: staff without the right hear which one, whether or not the agent exists.
    if is_staff(user) and not staff_may(user, "view", Agent):
        raise missing("view", Agent)
    raise NotFound


def _first_in_scope(user: User) -> Agent:
    ordered = usable_agents(user).order_by("-is_default", "name", "created_at")
    agent = ordered.first()
    if agent is None:
        _refuse_agent(user)
    return agent


def agents_for_user(user: User) -> QuerySet[Agent]:
    """The agents `user` may list: the listed ones, and for staff who may view agents all;
    within the user's scope."""
    agents = Agent.objects.all()
    agents = agents if staff_may(user, "view", Agent) else agents.filter(listed=True)
    return in_scope(user, agents, "pk")


def usable_agents(user: User) -> QuerySet[Agent]:
    """Every agent `user` may chat with, by `get_agent_for_user`'s rule: those they may list,
    and the unlisted ones they have a session of."""
    if staff_may(user, "view", Agent):
        return agents_for_user(user)
    theirs = Session.objects.filter(user=user).values("agent")
    return in_scope(user, Agent.objects.filter(Q(listed=True) | Q(pk__in=theirs)), "pk")


def default_agent() -> Agent:
    agent = Agent.objects.filter(listed=True).order_by("-is_default", "created_at").first()
    if agent is None:
        raise NotFound
    return agent
