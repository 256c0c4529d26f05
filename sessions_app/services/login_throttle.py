"""How many wrong passwords an account, or a client address, may send before sign-in waits.

The LoginFailure table is the record, as the Run table is for the run limit: every process
counts the same rows, with nothing to configure. A sliding window: the `limit`-th newest failure
of the last `window` seconds leaving it frees the next try.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from sessions_app.models import LoginFailure


def _window() -> timedelta:
    return timedelta(seconds=settings.PARLEY_LOGIN_WINDOW)


def _key(username: str) -> str:
    # Usernames differ from each other in any case: "Alice" must not get ten more tries.
    return username.strip().lower()[:150]


def wait_before_login(username: str, address: str) -> float | None:
    """Seconds before this username or address may try again, or None: it may now."""
    limit = settings.PARLEY_LOGIN_FAILURES
    if limit <= 0:
        return None
    now = timezone.now()
    recent = LoginFailure.objects.filter(created_at__gt=now - _window()).order_by("-created_at")
    waits = []
    for failures in (recent.filter(username=_key(username)), recent.filter(address=address)):
        oldest_counted = failures.values_list("created_at", flat=True)[limit - 1 : limit]
        waits += [(at + _window() - now).total_seconds() for at in oldest_counted]
    return max(max(waits), 1.0) if waits else None


def record_failure(username: str, address: str) -> None:
    now = timezone.now()
    LoginFailure.objects.filter(created_at__lt=now - _window()).delete()
    LoginFailure.objects.create(username=_key(username), address=address, created_at=now)


def forget_failures(username: str) -> None:
    """A right password clears its account's count; its address's stays, so one account of
    one's own cannot reset the count of guesses at others."""
    LoginFailure.objects.filter(username=_key(username)).delete()
