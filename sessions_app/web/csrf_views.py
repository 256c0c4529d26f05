"""The page a refused form gets: what went wrong, and what to do about it.

Django's own page only says "CSRF verification failed". The commonest cause in a new deployment
is Parley's secure cookies (DEBUG off, SECURE_COOKIES on) served over plain HTTP: the browser
keeps them to itself, so every form, the login first, is refused. That case is named here.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponseForbidden
from django.template.loader import render_to_string


def _https_url(request: HttpRequest) -> str:
    try:
        return f"https://{request.get_host()}{request.get_full_path()}"
    except DisallowedHost:
        return ""


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponseForbidden:
    # Rendered without the user: this runs on the event loop, where the database is refused.
    secure_cookies = settings.CSRF_COOKIE_SECURE or settings.SESSION_COOKIE_SECURE
    context = {
        "reason": reason,
        "secure_cookies_on_plain_http": secure_cookies and not request.is_secure(),
        "https_url": _https_url(request),
    }
    return HttpResponseForbidden(render_to_string("403_csrf.html", context, request=request))
