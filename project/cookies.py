"""Secure cookies, except where the browser talks to this machine itself.

With SECURE_COOKIES (the default with DEBUG off) the session and CSRF cookies are marked
`Secure`: sent over HTTPS only, so nobody on the network can read them. A browser on the server's
own machine, at http://127.0.0.1:8000 or http://localhost:8000 as `make run` prints, sends nothing
over the network. Chromium accepts Secure cookies there, but other clients (Python's cookie
jar, some browsers) keep them to themselves over any plain HTTP, and could not sign in.
Responses to a plain-HTTP request addressed to a loopback name or address therefore carry their
cookies without `Secure`; every other response keeps Django's.

The address is the request's Host, which ALLOWED_HOSTS has vetted: a browser elsewhere that
names this server by a loopback address reaches its own machine, not this one.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port


def is_loopback_http(request: HttpRequest) -> bool:
    """A plain-HTTP request addressed to this machine's loopback (127.0.0.0/8, ::1, localhost
    and its subdomains, which browsers resolve to loopback themselves)."""
    if request.is_secure():
        return False
    try:
        domain, _port = split_domain_port(request.get_host())
    except DisallowedHost:
        return False
    if domain == "localhost" or domain.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(domain.strip("[]")).is_loopback
    except ValueError:
        return False


class LoopbackCookiesMiddleware:
    """Drops `Secure` from the cookies of responses to plain HTTP on loopback (see above).

    Listed before the session, CSRF and messages middleware, so it sees the cookies they set.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        return self.unsecure(request, self.get_response(request))

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        get_response: Callable[[HttpRequest], Awaitable[HttpResponse]] = self.get_response
        return self.unsecure(request, await get_response(request))

    @staticmethod
    def unsecure(request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if response.cookies and is_loopback_http(request):
            for cookie in response.cookies.values():
                cookie["secure"] = ""
        return response
