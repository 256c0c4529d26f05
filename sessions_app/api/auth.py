"""Who is calling the API: a Bearer token, or the browser's session cookie with its CSRF token."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja.errors import HttpError
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from sessions_app.accounts import PREFIX, TokenClaim, user_for_token


class BearerToken(HttpBearer):
    """`Authorization: Bearer prl_…`; no CSRF: a browser never sends this header by itself.

    With `claim=True` (starting a run) the token is taken as a claim, on the event loop, and
    checked where the run is created, in the same turn on the database thread: a lookup of its
    own would be one more hand-over to a thread and back before the first token. A refused claim
    answers 401 there, with the same body as here.
    """

    def __init__(self, *, claim: bool = False) -> None:
        super().__init__()
        self.claim = claim
        self.is_async = claim  # ninja sends a sync authenticator to a thread

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        if not self.claim:
            return user_for_token(token)
        return _taken(TokenClaim(token)) if token.startswith(PREFIX) else None


class SessionCookie(APIKeyCookie):
    """The signed-in browser. Unsafe methods need the CSRF token, as everywhere in Django.

    Unlike ninja's SessionAuth, a request without a signed-in session is not checked for CSRF at
    all, so an anonymous call answers 401 rather than 403.
    """

    param_name = settings.SESSION_COOKIE_NAME

    def _get_key(self, request: HttpRequest) -> str | None:
        key = request.COOKIES.get(self.param_name)
        if key is None or not request.user.is_authenticated:
            return None
        if self.csrf and not getattr(request, "_ninja_csrf_exempt", False):
            if check_csrf(request) is not None:
                raise HttpError(403, "CSRF check failed: send the X-CSRFToken header.")
        return key

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        return request.user if key is not None else None


async def _taken(claim: TokenClaim) -> TokenClaim:
    return claim


AUTH = [BearerToken(), SessionCookie()]
# Starting a run: the same schemes, the token checked as the run is created.
RUN_AUTH = [BearerToken(claim=True), SessionCookie()]
