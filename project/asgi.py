"""ASGI entry point: HTTP through Django, WebSockets through Channels behind origin and auth."""

from __future__ import annotations

import gc
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from sessions_app.web.routing import websocket_urlpatterns  # noqa: E402


def _send_small_writes_at_once() -> None:
    """Turn Nagle's algorithm off on daphne's connections: each streamed event is a small
    write, and waiting for the client's delayed ACK would add tens of milliseconds to it."""
    try:
        from twisted.web import http
    except ImportError:  # served by something other than daphne
        return
    original = http.HTTPChannel.connectionMade
    if getattr(original, "parley_nodelay", False):
        return

    def connection_made(self: http.HTTPChannel) -> None:
        original(self)
        try:
            self.transport.setTcpNoDelay(True)
        except (AttributeError, OSError):
            pass  # a UNIX socket has no Nagle to turn off

    connection_made.parley_nodelay = True  # type: ignore[attr-defined]
    http.HTTPChannel.connectionMade = connection_made


_send_small_writes_at_once()


def _start_requests_without_a_thread() -> None:
    """Django closes stale database connections when a request starts and again when it ends.
    On ASGI each is a turn on the request's thread, and the one at the start comes before any
    code of the request's own: under load an API request waited there for the interpreter lock.
    The check at the end stays; it also re-arms the health check
    (CONN_HEALTH_CHECKS) that the next request's first query runs. The other receiver there
    empties the log of queries that only DEBUG keeps: without it, requests start with no turn
    on a thread at all."""
    from django.conf import settings
    from django.core import signals
    from django.db import close_old_connections, reset_queries

    signals.request_started.disconnect(close_old_connections)
    if not settings.DEBUG:
        signals.request_started.disconnect(reset_queries)


_start_requests_without_a_thread()


def _share_the_interpreter_finely() -> None:
    """The event loop and the thread all ORM work runs in share one interpreter lock. With
    Python's default 5 ms switch interval, whichever of them waits for the lock may wait that
    long each time: a run's few statements take tens of milliseconds while the loop streams
    other answers, and streamed pieces wait behind database batches. A shorter interval trades a
    little throughput for much shorter waits on both sides."""
    from django.conf import settings

    sys.setswitchinterval(settings.PARLEY_SWITCH_INTERVAL)


_share_the_interpreter_finely()


def _load_the_urls() -> None:
    """Django imports the URLconf at the first request, and with it the API: its routers and
    every schema class (about 130 ms here, which the first request after a start waited for).
    Loaded now, it is also among the start-up objects frozen out of garbage collection below."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 (the property imports the module)


_load_the_urls()


GC_THRESHOLD = 10_000


def _collect_garbage_less_often() -> None:
    """Python's cycle collector stops the whole process while it walks every object it tracks:
    with Django, daphne and a few hundred live runs loaded, a full pass took about 190 ms on two
    cores, several times a minute, and every stream stalled for it. What is loaded at start-up is
    frozen out of those passes (it lives as long as the process), and passes come less often:
    every 10 000 net new objects rather than 700, as servers commonly tune it."""
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, middle, oldest)


_collect_garbage_less_often()


class RequestThreads:
    """Django runs each request's synchronous code (sync views and authenticators, the database
    work they do, closing the response) in a thread of that request's own: a new thread, and
    so a new database connection, for every request, kept connections (CONN_MAX_AGE) never
    reused. Starting the thread blocked the event loop about 1.5 ms while it waited for the
    interpreter lock, and on PostgreSQL the connection cost a login. Here each request gets one
    of a few long-lived threads instead, the least busy, and that thread keeps its connection
    from one request to the next. A request's synchronous code still runs on one thread."""

    def __init__(self, app: Any, size: int) -> None:
        self.app = app
        self.executors = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"parley-request-{i}")
            for i in range(max(size, 1))
        ]
        self.busy = [0] * len(self.executors)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        i = self.busy.index(min(self.busy))
        self.busy[i] += 1
        try:
            # Django's own per-request context, entered inside, finds this one and keeps it.
            async with ThreadSensitiveContext(executor=self.executors[i]):
                await self.app(scope, receive, send)
        finally:
            self.busy[i] -= 1

    def submit_to_each(self, fn: Any) -> list[Any]:
        """Run fn once in every request thread (tests close their connections this way)."""
        return [executor.submit(fn) for executor in self.executors]


def _request_threads() -> RequestThreads:
    from django.conf import settings

    return RequestThreads(django_asgi_app, settings.PARLEY_REQUEST_THREADS)


request_threads = _request_threads()

application = ProtocolTypeRouter(
    {
        "http": request_threads,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
