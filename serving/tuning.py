"""Every change Parley makes to how the libraries it runs on behave, each behind a setting.

`apply()` makes the process-wide ones when the ASGI application is loaded. The middleware below
is chosen in settings.MIDDLEWARE (PARLEY_TUNE_MIDDLEWARE); the admin's checkbox
(PARLEY_TUNE_ADMIN_CHECKBOX) is drawn by sessions_app.admin.base. What each one gained against
the stock behaviour, side by side, is in docs/performance.md.
"""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from asgiref.sync import (
    ThreadSensitiveContext,
    iscoroutinefunction,
    markcoroutinefunction,
    sync_to_async,
)
from csp import middleware as csp
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.http import HttpRequest, HttpResponse
from django.middleware import clickjacking, common, csrf, security
from whitenoise import middleware as whitenoise

# Collect the youngest generation every this many net new objects (Python's default: 700).
GC_THRESHOLD = 10_000

# The request threads `apply()` started, if PARLEY_TUNE_REQUEST_THREADS.
request_threads: RequestThreads | None = None


def apply(http: Any) -> Any:
    """Make the process-wide changes the settings ask for; return the HTTP app to serve."""
    global request_threads
    if settings.PARLEY_TUNE_PRELOAD_URLS:
        load_the_urls()
    if settings.PARLEY_TUNE_GC:  # last: what start-up loaded is frozen
        collect_garbage_less_often()
    if settings.PARLEY_TUNE_REQUEST_THREADS:
        request_threads = RequestThreads(http, settings.PARLEY_REQUEST_THREADS)
        return request_threads
    return http


def load_the_urls() -> None:
    """The URLconf and the API imported at start-up, not by the first request, which waited."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 (the property imports the module)


def collect_garbage_less_often() -> None:
    """A full collection stops every stream while it walks every object: fewer, and smaller."""
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, middle, oldest)


class RequestThreads:
    """Django starts a thread and a database connection per request: a few lasting ones here."""

    def __init__(self, app: Any, size: int) -> None:
        # However many requests are in progress, the process holds these threads' connections.
        self.app = app
        self.executors = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"parley-request-{i}")
            for i in range(max(size, 1))
        ]
        self.busy = [0] * len(self.executors)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        i = self.busy.index(min(self.busy))  # the least busy; all the request's sync code there
        self.busy[i] += 1
        try:
            # Django's own per-request context, entered inside, finds this one and keeps it.
            async with ThreadSensitiveContext(executor=self.executors[i]):
                await self.app(scope, receive, send)
        finally:
            self.busy[i] -= 1

    def submit_to_each(self, fn: Callable[[], Any]) -> list[Future[Any]]:
        """Run fn once in every request thread (tests close their connections this way)."""
        return [executor.submit(fn) for executor in self.executors]


# -- middleware: Django's and WhiteNoise's, with their hooks on the event loop -----------------
# Django sends each hook to a thread and back, a dozen a request; the loop refuses the database
# (SynchronousOnlyOperation), so a hook that needed it would fail loudly, not block.


class OnTheLoop:
    """Hooks on the event loop; `process_response` on a thread when it may save something."""

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


class WhiteNoiseMiddleware(whitenoise.WhiteNoiseMiddleware):
    """WhiteNoise is sync-only, which would put every request through a thread."""

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


class SecurityMiddleware(OnTheLoop, security.SecurityMiddleware):
    pass


class SessionMiddleware(OnTheLoop, sessions.SessionMiddleware):
    """Loading a session is lazy: only saving one needs the database."""

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
    """Messages used or added are stored at the end, maybe in the session."""

    def response_needs_thread(self, request: HttpRequest) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is not None and (storage.used or storage.added_new)


class XFrameOptionsMiddleware(OnTheLoop, clickjacking.XFrameOptionsMiddleware):
    pass


class CSPMiddleware(OnTheLoop, csp.CSPMiddleware):
    """django-csp's: a header built from settings, nothing to wait for."""
