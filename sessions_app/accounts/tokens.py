"""API tokens: shown once, stored as a SHA-256 hash, looked up by that hash."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Aggregate, OuterRef, Prefetch, Subquery, TextField
from django.utils import timezone

from sessions_app.models import Agent, ApiToken, User
from sessions_app.services.access import NotFound, limit_to_agents, usable_agents

PREFIX = "prl_"
LAST_USED_PRECISION = timedelta(seconds=60)


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def create_token(
    user: User,
    name: str = "",
    expires_at: datetime | None = None,
    agents: Iterable[Agent] = (),
) -> tuple[ApiToken, str]:
    """A new token and its raw value, shown once; `expires_at` None: it never expires. Given
    `agents` (each one `user` may use), it may use only those; none: every agent `user` may."""
    if expires_at is not None and expires_at <= timezone.now():
        raise ValueError("The expiry must be in the future.")
    scope = _usable(user, agents)
    raw = PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=raw[: len(PREFIX) + 6],
            token_hash=_digest(raw),
            expires_at=expires_at,
            scoped=bool(scope),
        )
        token.agents.set(scope)
    return token, raw


def _usable(user: User, agents: Iterable[Agent]) -> list[Agent]:
    """`agents`, when `user` may use each of them; ValueError naming those they may not."""
    wanted = {agent.pk: agent for agent in agents}
    allowed = set(usable_agents(user).filter(pk__in=wanted).values_list("pk", flat=True))
    refused = [str(agent) for pk, agent in wanted.items() if pk not in allowed]
    if refused:
        names = ", ".join(f"“{name}”" for name in sorted(refused))
        noun = "agent" if len(refused) == 1 else "agents"
        raise ValueError(f"{user.get_username()} may not use the {noun} {names}.")
    return list(wanted.values())


def expiry_in_days(days: int) -> datetime:
    if days < 1:
        raise ValueError("The number of days must be at least 1.")
    return timezone.now() + timedelta(days=days)


def expiry_on(day: date) -> datetime:
    """A token that expires on a date works through that day (in the server's time zone)."""
    if day < timezone.localdate():
        raise ValueError("The expiry date must be today or later.")
    return timezone.make_aware(datetime.combine(day + timedelta(days=1), time.min))


def describe_expiry(moment: datetime) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M %Z")


@dataclass(frozen=True)
class TokenClaim:
    """A bearer token presented but not checked yet: starting a run checks it in the same turn
    on the database thread as the run's creation (see `users_for_tokens`)."""

    raw: str = field(repr=False)  # a secret: never in a log line or a traceback's locals


class Unauthorized(Exception):
    """A claimed token that is unknown, revoked, expired, or whose user is inactive."""


class TokenExpired(Unauthorized):
    """A token past its expiry: said so, since its owner can do something about it."""

    def __init__(self, expires_at: datetime) -> None:
        super().__init__(f"This token expired on {describe_expiry(expires_at)}.")


class _Joined(Aggregate):
    """The values as one text, comma-separated."""

    function = "GROUP_CONCAT"  # SQLite's
    output_field = TextField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "%(function)s(%(expressions)s::text, ',')"
        return self.as_sql(compiler, connection, function="STRING_AGG", template=template, **extra)


def _scope_ids() -> Subquery:
    """A token's agents' ids, comma-separated, read in the token's own query."""
    through = ApiToken.agents.through.objects.filter(apitoken=OuterRef("pk"))
    return Subquery(through.values("apitoken").annotate(ids=_Joined("agent")).values("ids"))


def users_for_tokens(raws: list[str]) -> list[User | Unauthorized]:
    """Each token's active user, or why not; one query for them all. A token limited to some
    agents limits its user object to them (see services.access)."""
    digests = [_digest(raw) if raw.startswith(PREFIX) else None for raw in raws]
    wanted = {digest for digest in digests if digest is not None}
    if not wanted:
        return [Unauthorized()] * len(raws)
    now = timezone.now()
    refused: dict[str, Unauthorized] = {}
    found = {}
    tokens = ApiToken.objects.filter(token_hash__in=wanted).select_related("user")
    for token in tokens.annotate(scope=_scope_ids()):
        if token.expires_at is not None and token.expires_at <= now:
            refused[token.token_hash] = TokenExpired(token.expires_at)
        elif token.user.is_active:
            found[token.token_hash] = token
            if token.scoped:
                limit_to_agents(token.user, token.scope.split(",") if token.scope else ())
    # "Last used" to the minute is enough; a write on every request is not.
    stale = [
        token.pk
        for token in found.values()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_PRECISION
    ]
    if stale:
        ApiToken.objects.filter(pk__in=stale).update(last_used_at=now)
    return [
        found[digest].user if digest in found else refused.get(digest or "", Unauthorized())
        for digest in digests
    ]


def user_for_token(raw: str) -> User | None:
    """The token's active user; None for an unknown one. An expired one raises TokenExpired."""
    user = users_for_tokens([raw])[0]
    if isinstance(user, TokenExpired):
        raise user
    return None if isinstance(user, Unauthorized) else user


def tokens_for_user(user: User) -> list[ApiToken]:
    """One's tokens, each with the agents it is limited to, by name."""
    agents = Prefetch("agents", queryset=Agent.objects.order_by("name").only("pk", "name"))
    return list(ApiToken.objects.filter(user=user).prefetch_related(agents))


def get_token_for_user(user: User, token_id: int) -> ApiToken:
    """One's own token only; anyone else's id answers like a missing one."""
    token = ApiToken.objects.filter(user=user, pk=token_id).first()
    if token is None:
        raise NotFound
    return token


def rename_token(user: User, token_id: int, name: str) -> ApiToken:
    token = get_token_for_user(user, token_id)
    token.name = name.strip()[:100]
    token.save(update_fields=["name"])
    return token


def revoke_token(user: User, token_id: int) -> ApiToken:
    token = get_token_for_user(user, token_id)
    token.delete()
    return token
