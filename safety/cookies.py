"""Secure cookies, except where the browser talks to this machine itself.

With SECURE_COOKIES (the default with DEBUG off) the session and CSRF cookies are marked
`Secure`: sent over HTTPS only, so nobody on the network can read them. A browser on the server's
own machine, at http://127.0.0.1:8000 or http://localhost:8000 as `make run` prints, sends nothing
over the network. Chromium accepts Secure cookies there, but other clients (Python's cookie
jar, some browsers) keep them to themselves over any plain HTTP, and could not sign in.
Responses to such a request therefore carry their cookies without `Secure`; every other response
keeps Django's.

"Such a request" is one nothing but this machine took part in: not secure, addressed to a
loopback Host (which ALLOWED_HOSTS has vetted), from a loopback client address, with no header a
proxy adds, and an Origin and Referer, when sent, on a loopback http origin. The Host alone is not
enough: a proxy that ends TLS in front of Parley and names it by 127.0.0.1 (nginx's default
`proxy_set_header Host $proxy_host`) would have every production cookie lose `Secure`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port

# What a proxy adds to the requests it passes on (nginx, Apache, Caddy, load balancers).
PROXY_HEADERS = (
    "HTTP_FORWARDED",
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_FORWARDED_PROTO",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_REAL_IP",
)


def is_loopback_name(name: str) -> bool:
    """127.0.0.0/8, ::1, localhost and its subdomains (which browsers resolve to loopback)."""
    name = name.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    # ::ffff:127.0.0.1, as a socket listening on both IPv6 and IPv4 reports a loopback client.
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or bool(mapped and mapped.is_loopback)


def _is_loopback_http_origin(url: str) -> bool:
    try:
        parts = urlsplit(url)
        return parts.scheme == "http" and is_loopback_name(parts.hostname or "")
    except ValueError:
        return False


def is_loopback_http(request: HttpRequest) -> bool:
    """A plain-HTTP request between a browser and a server both on this machine, with no proxy
    between them (see above)."""
    if request.is_secure() or any(request.META.get(name) for name in PROXY_HEADERS):
        return False
    if not is_loopback_name(request.META.get("REMOTE_ADDR") or ""):
        return False
    pages = (request.headers.get(name) for name in ("Origin", "Referer"))
    if not all(_is_loopback_http_origin(page) for page in pages if page is not None):
        return False
    try:
        domain, _port = split_domain_port(request.get_host())
    except DisallowedHost:
        return False
    return is_loopback_name(domain)


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
