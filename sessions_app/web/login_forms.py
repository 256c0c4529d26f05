"""Sign-in forms that stop answering password guesses: Parley's login page and the admin's."""

from __future__ import annotations

import math
from typing import Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from sessions_app.services import login_throttle

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
        wait = login_throttle.wait_before_login(username, address)
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
                login_throttle.record_failure(username, address)
            raise
        finally:
            if form.get_user() is not None:
                login_throttle.forget_failures(username)


class LoginForm(ThrottledLogin, AuthenticationForm):
    pass


class AdminLoginForm(ThrottledLogin, AdminAuthenticationForm):
    pass
