"""The ASGI application as daphne runs it: requests on Django's async path, where middleware hooks
run on the event loop unless they must save (every hook sent through `sync_to_async` waits for
a thread and the interpreter lock; these tests record which callables took that trip), the
threads that run requests' synchronous code, and the process-wide settings the application
makes when it is loaded.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from asgiref.sync import SyncToAsync
from django.conf import settings as django_settings
from django.test import AsyncClient

from sessions_app.accounts import create_token
from tests.support.processes import loaded_as_daphne_loads_it

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hops(monkeypatch) -> Iterator[list[object]]:
    """Every callable handed to sync_to_async while the test runs."""
    sent: list[object] = []
    original = SyncToAsync.__init__

    def record(self, func, *args, **kwargs):
        sent.append(func)
        original(self, func, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__init__", record)
    yield sent


def middleware_hooks(sent: list[object]) -> list[str]:
    """The middleware hooks (process_request, process_view, process_response) among them."""
    return [
        f"{type(func.__self__).__name__}.{func.__name__}"
        for func in sent
        if hasattr(func, "__self__") and func.__name__.startswith("process_")
    ]


async def test_an_api_call_runs_no_middleware_hook_in_a_thread(alice, hops):
    _, raw = await create_token_async(alice)
    response = await AsyncClient().get("/api/sessions", headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 200
    assert response.json()["meta"]["total_count"] == 0
    # The stock middleware's headers are all there, set on the loop.
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert hops and middleware_hooks(hops) == []


async def test_with_the_stock_middleware_its_hooks_run_in_a_thread(alice, hops, settings):
    settings.MIDDLEWARE = loaded_as_daphne_loads_it(
        "from django.conf import settings\nprint(*settings.MIDDLEWARE)\n",
        PARLEY_TUNE_MIDDLEWARE="false",
    )
    assert settings.MIDDLEWARE[0] == "django.middleware.security.SecurityMiddleware"
    _, raw = await create_token_async(alice)
    response = await AsyncClient().get("/api/sessions", headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 200
    assert response["X-Frame-Options"] == "DENY"
    # Django's own: each hook a round trip to a thread (and WhiteNoise, sync only, takes the
    # middleware outside it there too).
    hooks = middleware_hooks(hops)
    assert "SessionMiddleware.process_request" in hooks
    assert "XFrameOptionsMiddleware.process_response" in hooks


async def test_a_login_saves_its_session_in_a_thread(alice, hops):
    client = AsyncClient()
    page = await client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    assert token is not None
    hops.clear()
    response = await client.post(
        "/accounts/login/",
        {"username": "alice", "password": "alice-pass-123", "csrfmiddlewaretoken": token[1]},
    )
    assert response.status_code == 302
    # Signing in changes the session: only its saving leaves the loop.
    assert middleware_hooks(hops) == ["SessionMiddleware.process_response"]
    home = await client.get("/")
    assert home.status_code == 200
    assert "alice" in home.content.decode()


async def test_a_form_post_without_its_csrf_token_is_refused_on_the_loop(alice, hops):
    client = AsyncClient(enforce_csrf_checks=True)
    response = await client.post(
        "/accounts/login/", {"username": "alice", "password": "alice-pass-123"}
    )
    assert response.status_code == 403
    assert middleware_hooks(hops) == []


async def create_token_async(user):
    from asgiref.sync import sync_to_async

    return await sync_to_async(create_token)(user)


async def threads_of_requests(user, n: int) -> tuple[list[str], list[str], list[object]]:
    """n API calls one after another through the ASGI application as it is: the thread each new
    database connection was made in, the thread each request ended in, and the connections."""
    import threading

    from django.core.signals import request_finished
    from django.db.backends.signals import connection_created

    from tests.support.asgiclient import ASGIClient

    _, raw = await create_token_async(user)
    client = ASGIClient({"authorization": f"Bearer {raw}"})
    connected: list[str] = []
    finished: list[str] = []
    connections: list[object] = []

    def on_connect(sender, connection, **kwargs):
        connected.append(threading.current_thread().name)
        connections.append(connection)

    def on_finish(sender, **kwargs):
        finished.append(threading.current_thread().name)

    connection_created.connect(on_connect)
    request_finished.connect(on_finish)
    try:
        for _ in range(n):
            response = await client.get("/api/sessions")
            assert response.status_code == 200
            assert response.json()["meta"]["total_count"] == 0
    finally:
        connection_created.disconnect(on_connect)
        request_finished.disconnect(on_finish)
    return connected, finished, connections


async def test_requests_share_long_lived_threads_that_keep_their_database_connection(alice):
    from serving import tuning

    connected, finished, _ = await threads_of_requests(alice, 5)
    # One after another, the requests ran in the same request thread (the least busy: all were
    # idle), and only the first of them had to connect to the database.
    assert len(finished) == 5 and len(set(finished)) == 1
    assert finished[0].startswith("parley-request-")
    assert connected == finished[:1]
    assert tuning.request_threads is not None
    assert tuning.request_threads.busy == [0] * len(tuning.request_threads.executors)


TUNING = [name for name in dir(django_settings) if name.startswith("PARLEY_TUNE_")]


async def test_without_request_threads_each_request_connects_in_a_thread_of_its_own(
    alice, settings, monkeypatch
):
    import tests.support.asgiclient
    from project import asgi
    from serving import tuning

    for name in TUNING:  # nothing else changed a second time in this process
        setattr(settings, name, False)
    http = tuning.apply(asgi.django_asgi_app)
    assert http is asgi.django_asgi_app  # Django's own handler
    monkeypatch.setattr(tests.support.asgiclient, "application", http)
    connected, finished, connections = await threads_of_requests(alice, 3)
    try:
        # Django's own: a new thread for every request, and so a new database connection.
        assert len(finished) == 3 and len(set(finished)) == 3
        assert connected == finished
        assert not any(name.startswith("parley-request-") for name in finished)
    finally:
        for connection in connections:  # their threads are gone; the test database must go too
            if connection.connection is not None:
                connection.connection.close()


def test_the_asgi_application_collects_garbage_less_often():
    import gc

    import project.asgi  # noqa: F401
    from serving import tuning

    assert gc.get_threshold()[0] == tuning.GC_THRESHOLD > 700
    assert gc.get_freeze_count() > 0  # what start-up loaded is left out of collections


def test_without_the_gc_setting_collections_are_pythons_own():
    probe = "import gc\nprint(gc.get_threshold()[0], gc.get_freeze_count())\n"
    assert loaded_as_daphne_loads_it(probe, PARLEY_TUNE_GC="false") == ["700", "0"]


def test_the_urls_and_the_api_are_loaded_with_the_application_not_by_the_first_request():
    probe = "import sys\nprint('project.api' in sys.modules)\n"
    assert loaded_as_daphne_loads_it(probe) == ["True"]
    assert loaded_as_daphne_loads_it(probe, PARLEY_TUNE_PRELOAD_URLS="false") == ["False"]
