"""The page a refused form gets: what went wrong, and what to do about it.

Django's own page only says "CSRF verification failed". The commonest cause in a new deployment
is Parley's secure cookies (DEBUG off, SECURE_COOKIES on) served over plain HTTP, other than on
loopback (safety/cookies.py): the browser keeps them to itself, so every form, the login first,
is refused. That case is named here.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponseForbidden
from django.template.loader import render_to_string

from safety.cookies import is_loopback_http


def _https_url(request: HttpRequest) -> str:
    try:
        return f"https://{request.get_host()}{request.get_full_path()}"
    except DisallowedHost:
        return ""


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponseForbidden:
    # Rendered without the user: this runs on the event loop, where the database is refused.
    secure_cookies = settings.CSRF_COOKIE_SECURE or settings.SESSION_COOKIE_SECURE
    # On loopback they are sent without Secure (safety/cookies.py): not the cause there.
    plain_http = not request.is_secure() and not is_loopback_http(request)
    context = {
        "reason": reason,
        "secure_cookies_on_plain_http": secure_cookies and plain_http,
        "https_url": _https_url(request),
    }
    return HttpResponseForbidden(render_to_string("403_csrf.html", context, request=request))
