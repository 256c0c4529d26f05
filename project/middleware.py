"""Middleware that keeps requests on the event loop.

One sync-only middleware makes Django run every request through a thread, and every hook of
Django's own middleware goes through one too: each a hand-over to another thread and back, and a
wait for the interpreter lock on both sides. WhiteNoise is served from an async-capable subclass;
Django's middleware runs its hooks on the loop where they do no I/O (`OnTheLoop`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.http import HttpRequest, HttpResponse
from django.middleware import clickjacking, common, csrf, security
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[..., Any]) -> None:
        super().__init__(get_response)
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        if self.autorefresh:  # development: look on disk, off the event loop
            static_file = await sync_to_async(self.find_file, thread_sensitive=False)(
                request.path_info
            )
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return self.serve(static_file, request)
        get_response: Callable[[HttpRequest], Awaitable[HttpResponse]] = self.get_response
        return await get_response(request)


class OnTheLoop:
    """For Django's middleware whose hooks do no I/O: on the async path they run on the event
    loop, where Django's MiddlewareMixin would send each through `sync_to_async`.

    Each of those is a round trip to the request's thread: about a dozen per request with the
    stock middleware, half of them before the view runs and the other half before a streamed
    response sends its first byte, each waiting for the interpreter lock while the loop streams
    other answers. Django refuses database access on the
    event loop (SynchronousOnlyOperation), so a hook that did touch the database would fail
    loudly, not block; the hooks that may save something say so in `response_needs_thread`.
    """

    get_response: Callable[[HttpRequest], Awaitable[HttpResponse]]

    def response_needs_thread(self, request: HttpRequest) -> bool:
        return False

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        response = None
        process_request = getattr(self, "process_request", None)
        if process_request is not None:
            response = process_request(request)
        response = response or await self.get_response(request)
        process_response = getattr(self, "process_response", None)
        if process_response is not None:
            if self.response_needs_thread(request):
                process_response = sync_to_async(process_response, thread_sensitive=True)
                response = await process_response(request, response)
            else:
                response = process_response(request, response)
        return response


class SecurityMiddleware(OnTheLoop, security.SecurityMiddleware):
    pass


class SessionMiddleware(OnTheLoop, sessions.SessionMiddleware):
    """Loading a session is lazy (the first read of `request.session` does it, in whoever reads
    it); only saving one at the end of the request needs the database."""

    def response_needs_thread(self, request: HttpRequest) -> bool:
        session = getattr(request, "session", None)
        return session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class CommonMiddleware(OnTheLoop, common.CommonMiddleware):
    pass


class CsrfViewMiddleware(OnTheLoop, csrf.CsrfViewMiddleware):
    """Its `process_view` (the token check) runs on the loop too."""

    def __init__(self, get_response: Callable[..., Any]) -> None:
        super().__init__(get_response)
        if self.async_mode:
            check = self.process_view

            async def process_view(
                request: HttpRequest, callback: Any, args: Any, kwargs: Any
            ) -> HttpResponse | None:
                return check(request, callback, args, kwargs)

            self.process_view = process_view  # type: ignore[method-assign]


class AuthenticationMiddleware(OnTheLoop, auth.AuthenticationMiddleware):
    """Only attaches the lazy `request.user`; reading it is what queries."""


class MessageMiddleware(OnTheLoop, messages.MessageMiddleware):
    """Messages read or added during the request are stored at its end, in a cookie or, when
    too many for one, in the session, which may need loading."""

    def response_needs_thread(self, request: HttpRequest) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is not None and (storage.used or storage.added_new)


class XFrameOptionsMiddleware(OnTheLoop, clickjacking.XFrameOptionsMiddleware):
    pass
