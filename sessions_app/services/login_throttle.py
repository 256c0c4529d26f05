"""How many wrong passwords an account, or a client address, may send before sign-in waits,
and the mixin that puts it in front of a sign-in form (Parley's login page and the admin's).

The LoginFailure table is the record, as the Run table is for the run limit: every process
counts the same rows, with nothing to configure. A sliding window: the `limit`-th newest failure
of the last `window` seconds leaving it frees the next try. A try is recorded before its
password is checked, and withdrawn if it is refused unchecked or its password is right: tries
sent at the same moment see each other, and no more than `limit` wrong passwords are checked.
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


def _limits() -> tuple[int, int]:
    """Tries per account, and per address (higher: many people may share one, behind a NAT or
    a proxy); 0 turns a count off, and PARLEY_LOGIN_FAILURES=0 the whole throttle."""
    per_account = settings.PARLEY_LOGIN_FAILURES
    per_address = settings.PARLEY_LOGIN_FAILURES_PER_ADDRESS if per_account > 0 else 0
    return per_account, per_address


def begin_attempt(username: str, address: str) -> LoginFailure | None:
    """This try, counted as a failure before its password is checked, so that tries at the same
    moment count each other; None when nothing is counted."""
    if _limits() == (0, 0):
        return None
    now = timezone.now()
    LoginFailure.objects.filter(created_at__lt=now - _window()).delete()
    return LoginFailure.objects.create(username=_key(username), address=address, created_at=now)


def wait_before_checking(attempt: LoginFailure) -> float | None:
    """Seconds before this try's account or address may try again, or None: its password may be
    checked now. Counts every try of the window, this one and those begun at the same time."""
    now = timezone.now()
    recent = LoginFailure.objects.filter(created_at__gt=now - _window()).order_by("-created_at")
    waits = []
    per_account, per_address = _limits()
    for limit, tries in (
        (per_account, recent.filter(username=attempt.username)),
        (per_address, recent.filter(address=attempt.address)),
    ):
        if limit <= 0 or tries.count() <= limit:
            continue
        # The next try may come once the limit-th newest of the others has left the window.
        others = tries.exclude(pk=attempt.pk).values_list("created_at", flat=True)
        waits += [(at + _window() - now).total_seconds() for at in others[limit - 1 : limit]]
        waits.append(1.0)
    return max(waits) if waits else None


def withdraw(attempt: LoginFailure | None) -> None:
    """A try that was refused unchecked, or whose password was right, is no failure."""
    if attempt is not None:
        LoginFailure.objects.filter(pk=attempt.pk).delete()


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
        if not (username and form.cleaned_data.get("password")):
            return super().clean()  # type: ignore[misc,no-any-return]
        attempt = begin_attempt(username, client_address(form))
        wait = wait_before_checking(attempt) if attempt is not None else None
        if wait is not None:
            withdraw(attempt)
            self.retry_after = wait
            minutes = math.ceil(wait / 60)
            raise ValidationError(
                "Too many failed sign-ins for this account or from this address. "
                f"Try again in {minutes} minute{'s' if minutes != 1 else ''}.",
                code=THROTTLED,
            )
        try:
            return super().clean()  # type: ignore[misc,no-any-return]
        finally:
            if form.get_user() is not None:
                withdraw(attempt)
                forget_failures(username)
