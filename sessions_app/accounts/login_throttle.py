"""How many wrong passwords a client address may send before sign-in waits, how an account
guessed at from many addresses slows down, and the mixin that puts this in front of a sign-in
form (Parley's login page and the admin's).

Three counts over the failures of the last PARLEY_LOGIN_WINDOW seconds:
- one account from one address (PARLEY_LOGIN_FAILURES): that address gets no more passwords
  checked for that account;
- one address, whatever the accounts (PARLEY_LOGIN_FAILURES_PER_ADDRESS, higher: many people may
  share one): that address gets no more passwords checked at all;
- one account from every address: once it reaches PARLEY_LOGIN_FAILURES, an address that has
  failed for that account waits between its tries, a second doubling with each further failure,
  up to PARLEY_LOGIN_DELAY_MAX. It only slows: an address that has not failed for the account is
  never held back by it, so whoever guesses at `admin` cannot keep `admin` out.

The LoginFailure table is the record, as the Run table is for the run limit: every process
counts the same rows, with nothing to configure. A try is recorded before its password is
checked, and withdrawn if it is refused unchecked or its password is right: tries sent at the
same moment see each other, and no more than a limit's wrong passwords are checked.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from sessions_app.models import LoginFailure

ACCOUNT_FROM_ADDRESS = "Too many failed sign-ins for this account from this address."
FROM_ADDRESS = "Too many failed sign-ins from this address."
SLOWED = "Many wrong passwords have been sent for this account; sign-ins from here are slowed."


@dataclass(frozen=True)
class Wait:
    """How long before this address may send a password again, and why."""

    seconds: float
    reason: str

    def message(self) -> str:
        return f"{self.reason} Try again in {_duration(self.seconds)}."


def _duration(seconds: float) -> str:
    amount, unit = math.ceil(seconds), "second"
    if amount > 60:
        amount, unit = math.ceil(seconds / 60), "minute"
    return f"{amount} {unit}{'s' if amount != 1 else ''}"


def _window() -> timedelta:
    return timedelta(seconds=settings.PARLEY_LOGIN_WINDOW)


def _key(username: str) -> str:
    # Usernames differ from each other in any case: "Alice" must not get ten more tries.
    return username.strip().lower()[:150]


def begin_attempt(username: str, address: str) -> LoginFailure | None:
    """This try, counted as a failure before its password is checked, so that tries at the same
    moment count each other; None when the throttle is off."""
    if settings.PARLEY_LOGIN_FAILURES <= 0:
        return None
    now = timezone.now()
    LoginFailure.objects.filter(created_at__lt=now - _window()).delete()
    return LoginFailure.objects.create(username=_key(username), address=address, created_at=now)


def wait_before_checking(attempt: LoginFailure) -> Wait | None:
    """How long before this try's password may be checked, or None: now. Counts every failure of
    the window but this try, those begun at the same moment included."""
    now = timezone.now()
    others = LoginFailure.objects.filter(created_at__gt=now - _window()).exclude(pk=attempt.pk)
    account = others.filter(username=attempt.username)
    pair = account.filter(address=attempt.address)
    waits = [
        _over_limit(pair, settings.PARLEY_LOGIN_FAILURES, now, ACCOUNT_FROM_ADDRESS),
        _over_limit(
            others.filter(address=attempt.address),
            settings.PARLEY_LOGIN_FAILURES_PER_ADDRESS,
            now,
            FROM_ADDRESS,
        ),
        _slowed(account, pair, now),
    ]
    return max((w for w in waits if w is not None), key=lambda w: w.seconds, default=None)


def _newest(failures: QuerySet[LoginFailure], count: int) -> list[datetime]:
    return list(failures.order_by("-created_at").values_list("created_at", flat=True)[:count])


def _over_limit(
    others: QuerySet[LoginFailure], limit: int, now: datetime, reason: str
) -> Wait | None:
    """With `limit` failures already counted, the next try may come once the limit-th newest
    has left the window."""
    if limit <= 0:
        return None
    times = _newest(others, limit)
    if len(times) < limit:
        return None
    return Wait((times[-1] + _window() - now).total_seconds(), reason)


def _slowed(
    account: QuerySet[LoginFailure], pair: QuerySet[LoginFailure], now: datetime
) -> Wait | None:
    """An account that has had PARLEY_LOGIN_FAILURES failures from anywhere makes an address
    that failed for it wait after its last failure: 1 s, doubling with each further one."""
    threshold, cap = settings.PARLEY_LOGIN_FAILURES, settings.PARLEY_LOGIN_DELAY_MAX
    if cap <= 0:
        return None
    last = _newest(pair, 1)
    if not last:
        return None  # this address has not failed for the account: the owner, perhaps
    beyond = account.count() - threshold
    if beyond < 0:
        return None
    delay = min(float(cap), 2.0 ** min(beyond, 32))
    remaining = (last[0] + timedelta(seconds=delay) - now).total_seconds()
    return Wait(remaining, SLOWED) if remaining > 0 else None


def withdraw(attempt: LoginFailure | None) -> None:
    """A try that was refused unchecked, or whose password was right, is no failure."""
    if attempt is not None:
        LoginFailure.objects.filter(pk=attempt.pk).delete()


def forget_failures(username: str, address: str) -> None:
    """A right password clears its account's failures from its address: the owner's own typos.
    Others' stay: signing in must not give whoever guesses elsewhere a fresh count."""
    LoginFailure.objects.filter(username=_key(username), address=address).delete()


def client_address(request: HttpRequest | None) -> str:
    """The address the throttle counts: daphne's REMOTE_ADDR (behind a proxy, with
    --proxy-headers, the one the proxy forwarded). An IPv6 client counts as its /64, the
    block one connection is usually given whole, or it would have billions of fresh addresses."""
    raw = (request.META.get("REMOTE_ADDR") or "") if request is not None else ""
    try:
        address = ipaddress.ip_address(raw)
    except ValueError:
        return raw[:45]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


# -- the sign-in forms' side ---------------------------------------------------------------------

THROTTLED = "throttled"


class ThrottledLogin:
    """Puts the throttle before a sign-in form's password check: a try it holds back is refused
    unchecked, saying how long to wait (`retry_after`, seconds)."""

    retry_after: float | None = None

    def clean(self) -> dict[str, Any]:
        form: Any = self
        username = form.cleaned_data.get("username") or ""
        if not (username and form.cleaned_data.get("password")):
            return super().clean()  # type: ignore[misc,no-any-return]
        address = client_address(form.request)
        attempt = begin_attempt(username, address)
        wait = wait_before_checking(attempt) if attempt is not None else None
        if wait is not None:
            withdraw(attempt)
            self.retry_after = wait.seconds
            raise ValidationError(wait.message(), code=THROTTLED)
        try:
            return super().clean()  # type: ignore[misc,no-any-return]
        finally:
            if form.get_user() is not None:
                withdraw(attempt)
                forget_failures(username, address)
