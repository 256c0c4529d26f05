"""How many wrong passwords an account, or a client address, may send before sign-in waits,
and the mixin that puts it in front of a sign-in form (Parley's login page and the admin's).

The LoginFailure table is the record, as the Run table is for the run limit: every process
counts the same rows, with nothing to configure. A sliding window: the `limit`-th newest failure
of the last `window` seconds leaving it frees the next try.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
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


# -- the sign-in forms' side ---------------------------------------------------------------------

THROTTLED = "throttled"


def client_address(form: AuthenticationForm) -> str:
    # daphne puts the client's address here; behind a proxy, with --proxy-headers, the one
    # the proxy forwarded.
    request = form.request
    return (request.META.get("REMOTE_ADDR") or "")[:45] if request is not None else ""


class ThrottledLogin:
    """After too many wrong passwords for an account or from an address, no password is
    checked until the window lets one more try in; the form says how long to wait."""

    retry_after: float | None = None

    def clean(self) -> dict[str, Any]:
        form: Any = self
        username = form.cleaned_data.get("username") or ""
        address = client_address(form)
        wait = wait_before_login(username, address)
        if wait is not None:
            self.retry_after = wait
            minutes = math.ceil(wait / 60)
            raise ValidationError(
                "Too many failed sign-ins for this account or from this address. "
                f"Try again in {minutes} minute{'s' if minutes != 1 else ''}.",
                code=THROTTLED,
            )
        try:
            return super().clean()  # type: ignore[misc,no-any-return]
        except ValidationError:
            if form.get_user() is None and username and form.cleaned_data.get("password"):
                record_failure(username, address)
            raise
        finally:
            if form.get_user() is not None:
                forget_failures(username)
