"""API tokens: shown once, stored as a SHA-256 hash, looked up by that hash."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from django.utils import timezone

from sessions_app.models import ApiToken, User
from sessions_app.services.access import NotFound

PREFIX = "prl_"
LAST_USED_PRECISION = timedelta(seconds=60)


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def create_token(
    user: User, name: str = "", expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """A new token and its raw value, shown once; `expires_at` None: it never expires."""
    if expires_at is not None and expires_at <= timezone.now():
        raise ValueError("The expiry must be in the future.")
    raw = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=raw[: len(PREFIX) + 6],
        token_hash=_digest(raw),
        expires_at=expires_at,
    )
    return token, raw


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


def users_for_tokens(raws: list[str]) -> list[User | Unauthorized]:
    """Each token's active user, or why not; one query for them all."""
    digests = [_digest(raw) if raw.startswith(PREFIX) else None for raw in raws]
    wanted = {digest for digest in digests if digest is not None}
    if not wanted:
        return [Unauthorized()] * len(raws)
    now = timezone.now()
    refused: dict[str, Unauthorized] = {}
    found = {}
    for token in ApiToken.objects.filter(token_hash__in=wanted).select_related("user"):
        if token.expires_at is not None and token.expires_at <= now:
            refused[token.token_hash] = TokenExpired(token.expires_at)
        elif token.user.is_active:
            found[token.token_hash] = token
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
    return list(ApiToken.objects.filter(user=user))


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
