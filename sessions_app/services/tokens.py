"""API tokens: shown once, stored as a SHA-256 hash, looked up by that hash."""

from __future__ import annotations

import hashlib
import secrets
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


def user_for_token(raw: str) -> User | None:
    if not raw.startswith(PREFIX):
        return None
    token = ApiToken.objects.select_related("user").filter(token_hash=_digest(raw)).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    # "Last used" to the minute is enough; a write on every request is not.
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_PRECISION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


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
