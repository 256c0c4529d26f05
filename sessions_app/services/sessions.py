"""Sessions as their owner sees them: list, search, create, rename, update, delete."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet, Sum

from sessions_app.models import ACTIVE_STATUSES, Message, NameSource, Run, Session, User
from sessions_app.services import ratelimit, statesize
from sessions_app.services.access import (
    get_agent_for_user,
    get_session_for_user,
    sessions_for_user,
)

SESSION_NAME_MAX = 200
# Where a list by activity stopped: the last session shown, as (updated_at, session_id).
ActivityCursor = tuple[datetime, str]
_SUMMED = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
    "duration",
    "cost",
)


class SessionBusy(Exception):
    """The session has a run in progress."""


class SessionIdTaken(Exception):
    """A session with the id asked for exists already (anyone's)."""


def default_session_name(text: str, limit: int = 60) -> str:
    """A new session is named after its first message until someone renames it."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def list_sessions(
    user: User,
    *,
    agent_id: Any = None,
    session_name: str | None = None,
    search: str | None = None,
    owner: str | None = None,
) -> QuerySet[Session]:
    """The sessions `user` may see, newest activity first. `owner` (a username) is for staff
    who may view sessions."""
    sessions = sessions_for_user(user, owner).select_related("agent", "user")
    if agent_id:
        sessions = sessions.filter(agent_id=agent_id)
    if session_name:
        sessions = sessions.filter(session_name__icontains=session_name)
    if search:
        in_messages = Message.objects.filter(session=OuterRef("pk"), content__icontains=search)
        sessions = sessions.filter(Q(session_name__icontains=search) | Exists(in_messages))
    return sessions.order_by("-updated_at", "-created_at")


def page_by_activity(
    sessions: QuerySet[Session], size: int, *, after: ActivityCursor | None = None
) -> tuple[list[Session], ActivityCursor | None]:
    """Up to `size` of `sessions`, latest activity first, from just below `after` (the last
    session shown); with the cursor of the next page, if there is one. A position rather than
    an offset, as a chat that becomes active meanwhile moves to the top and would shift every
    later page by one: a session shown twice, another never shown."""
    ordered = sessions.order_by("-updated_at", "-session_id")
    if after is not None:
        when, session_id = after
        ordered = ordered.filter(
            Q(updated_at__lt=when) | Q(updated_at=when, session_id__lt=session_id)
        )
    rows = list(ordered[: size + 1])
    if len(rows) <= size:
        return rows, None
    last = rows[size - 1]
    return rows[:size], (last.updated_at, last.session_id)


def active_since(sessions: QuerySet[Session], since: datetime, limit: int) -> list[Session]:
    """The sessions active after `since`, at most `limit` of the latest, oldest first (each put
    on top of a list in turn leaves the latest on top)."""
    latest = sessions.filter(updated_at__gt=since).order_by("-updated_at", "-session_id")
    return list(reversed(latest[:limit]))


def create_session(
    user: User,
    *,
    agent_id: Any = None,
    session_name: str = "",
    session_state: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    session_id: str | None = None,
) -> Session:
    """A new session; `session_id` is the caller's choice of id (ids.py), else a new UUID.
    Counted against PARLEY_SESSIONS_PER_MINUTE: RateLimited beyond it."""
    agent = get_agent_for_user(user, agent_id)
    state = {**agent.session_state, **(session_state or {})}
    statesize.check("session_state", state)
    statesize.check("metadata", metadata or {})
    session = Session(
        user=user,
        agent=agent,
        session_name=session_name[:SESSION_NAME_MAX],
        name_source=NameSource.USER if session_name else NameSource.FIRST_MESSAGE,
        session_state=state,
        metadata=metadata or {},
    )
    if session_id:
        session.session_id = session_id
    try:
        with transaction.atomic():
            ratelimit.check(user, ratelimit.SESSION)
            session.save(force_insert=True)
    except IntegrityError as exc:
        # Only a clash on the chosen id is the caller's to fix; anything else is a real fault.
        if session_id and Session.objects.filter(pk=session_id).exists():
            raise SessionIdTaken("A session with this id exists already.") from exc
        raise
    return session


def update_session(user: User, session_id: Any, **changes: Any) -> Session:
    """Change `session_name`, `session_state` or `metadata` of one's own session (or, for staff
    who may change sessions, anyone's)."""
    allowed = {"session_name", "session_state", "metadata"}
    unknown = set(changes) - allowed
    if unknown:
        raise ValueError(f"Cannot change {', '.join(sorted(unknown))}.")
    with transaction.atomic():
        session = get_session_for_user(user, session_id, "change")
        fields = [*changes, "updated_at"]
        for name, value in changes.items():
            if name == "session_name":
                value = (value or "").strip()[:SESSION_NAME_MAX]
                # A name given by a person is final: generated titles never replace it.
                session.name_source = NameSource.USER
                fields.append("name_source")
            elif not isinstance(value, dict):
                raise ValueError(f"{name} must be a JSON object.")
            else:
                statesize.check(name, value)
            setattr(session, name, value)
        session.save(update_fields=fields)
    return session


def delete_session(user: User, session_id: Any) -> None:
    with transaction.atomic():
        session = get_session_for_user(user, session_id, "delete")
        if Run.objects.filter(session=session, status__in=ACTIVE_STATUSES).exists():
            raise SessionBusy("Stop the answer in progress before deleting this session.")
        session.delete()


def get_messages_for_session(user: User, session_id: Any) -> QuerySet[Message]:
    """Every stored message of a session in conversation order (Agno's name for it)."""
    session = get_session_for_user(user, session_id)
    return Message.objects.filter(session=session).order_by("run__position", "order")


def session_title(session: Session) -> str:
    return session.session_name or "New chat"


def _shape_metrics(sums: dict[str, Any]) -> dict[str, Any]:
    return {
        **{k: sums.get(k) or 0 for k in _SUMMED if k not in ("duration", "cost")},
        "duration": sums.get("duration"),
        "cost": float(sums["cost"]) if sums.get("cost") is not None else None,
    }


def session_metrics(session: Session) -> dict[str, Any]:
    """A session's metrics are the sum of its runs'."""
    return _shape_metrics(session.runs.aggregate(**{name: Sum(name) for name in _SUMMED}))


def with_metrics(sessions: list[Session]) -> None:
    """Sum the run metrics of a page of sessions in one query (not one per row, and not over
    every session the user has before the page is cut); kept as `page_metrics`."""
    sums = {
        row.pop("session_id"): row
        for row in Run.objects.filter(session_id__in=[s.pk for s in sessions])
        .values("session_id")
        .annotate(**{name: Sum(name) for name in _SUMMED})
        .order_by()
    }
    for session in sessions:
        session.page_metrics = _shape_metrics(sums.get(session.pk, {}))
