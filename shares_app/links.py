"""Making, updating and revoking share links: what the owner's pages and the admin call."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from shares_app import snapshot
from shares_app.models import ShareLink, token_hash

# 32 random bytes: 256 bits, far past guessing.
TOKEN_BYTES = 32
EXPIRIES = {"": None, "1": 1, "7": 7, "30": 30}  # the form's choices, in days


def live_link(session: Any) -> ShareLink | None:
    """Its one unrevoked link (share_one_live_link), unless that has expired."""
    link = ShareLink.objects.filter(session=session, revoked_at=None).first()
    return link if link is not None and link.live() else None


def create(session: Any, *, show_owner: bool, show_tools: bool, days: int | None) -> str:
    """A new link to a snapshot of `session` as it is now, replacing its live one if any; the
    token, which is shown once and never stored."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    with transaction.atomic():
        revoke_all(session)
        ShareLink.objects.create(
            owner_id=session.user_id,
            session=session,
            token_hash=token_hash(token),
            prefix=token[:6],
            snapshot=snapshot.take(session, show_tools),
            show_owner=show_owner,
            show_tools=show_tools,
            expires_at=_expiry(days),
        )
    return token


def update(link: ShareLink) -> None:
    """A new snapshot behind the same link: what was added since becomes visible."""
    link.snapshot = snapshot.take(link.session, link.show_tools)
    link.snapshot_at = timezone.now()
    link.save(update_fields=["snapshot", "snapshot_at"])


def revoke(link: ShareLink) -> bool:
    """Revoke it now (every process reads the link on each view); whether it was live. Its
    copy of the chat goes: the owner's list keeps only that there was a link."""
    return bool(_revoked(ShareLink.objects.filter(pk=link.pk, revoked_at=None)))


def revoke_all(session: Any) -> int:
    return _revoked(ShareLink.objects.filter(session=session, revoked_at=None))


def _revoked(links: Any) -> int:
    title = {"title": "(revoked)"}
    return links.update(revoked_at=timezone.now(), snapshot=title)


def find(token: str) -> ShareLink | None:
    """The live link a token opens, or None (unknown, revoked and expired look the same)."""
    link = (
        ShareLink.objects.select_related("owner")
        .filter(token_hash=token_hash(token), revoked_at=None)
        .first()
    )
    return link if link is not None and link.live() else None


def _expiry(days: int | None) -> datetime | None:
    return timezone.now() + timedelta(days=days) if days else None
