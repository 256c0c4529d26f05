"""API tokens: shown once, stored as a SHA-256 hash, looked up by that hash."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from datetime import timedelta

from django.utils import timezone

from sessions_app.models import ApiToken, User
from sessions_app.services.access import NotFound

PREFIX = "prl_"
LAST_USED_PRECISION = timedelta(seconds=60)


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def create_token(user: User, name: str = "") -> tuple[ApiToken, str]:
    raw = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=raw[: len(PREFIX) + 6], token_hash=_digest(raw)
    )
    return token, raw


@dataclass(frozen=True)
class TokenClaim:
    """A bearer token presented but not checked yet: starting a run checks it in the same turn
    on the database thread as the run's creation (see `users_for_tokens`)."""

    raw: str = field(repr=False)  # a secret: never in a log line or a traceback's locals


class Unauthorized(Exception):
    """A claimed token that is unknown, revoked, or whose user is inactive."""


def users_for_tokens(raws: list[str]) -> list[User | None]:
    """Each token's active user, or None; one query for them all."""
    digests = [_digest(raw) if raw.startswith(PREFIX) else None for raw in raws]
    wanted = {digest for digest in digests if digest is not None}
    if not wanted:
        return [None] * len(raws)
    found = {
        token.token_hash: token
        for token in ApiToken.objects.filter(token_hash__in=wanted).select_related("user")
        if token.user.is_active
    }
    now = timezone.now()
    # "Last used" to the minute is enough; a write on every request is not.
    stale = [
        token.pk
        for token in found.values()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_PRECISION
    ]
    if stale:
        ApiToken.objects.filter(pk__in=stale).update(last_used_at=now)
    return [found[digest].user if digest in found else None for digest in digests]


def user_for_token(raw: str) -> User | None:
    return users_for_tokens([raw])[0]


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
