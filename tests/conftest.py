from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection

from testkit.upstream import ScriptedUpstream

if TYPE_CHECKING:
    from django.test import Client

    from sessions_app.models import Agent

ROOT = Path(__file__).resolve().parent.parent

# What each marker means (pyproject registers them). A test gets its marker from the fixtures it
# uses, wherever its file is; one that starts such a thing itself says so with the marker.
MARKED_BY_FIXTURE = {
    "browser": {"browser"},  # drives Debian's Chromium
    "model": {"embedded"},  # the real embedded model
    # Parley as a process of its own (daphne, serve), nginx, PostgreSQL or Redis
    "services": {"daphne_server", "serve_environment"},
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in MARKED_BY_FIXTURE.items():
            if used & fixtures:
                item.add_marker(marker)
        # Private PostgreSQL and Redis servers, which these tests break, are services too.
        if item.get_closest_marker("process"):
            item.add_marker("services")


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's own PBKDF2 at one iteration instead of a million (a quarter of a second of CPU
    per password, several per test). The count is written in each hash, so Django verifies
    these hashes as it does any other."""

    iterations = 1


@pytest.fixture(autouse=True)
def _quick_password_hashing(request: pytest.FixtureRequest) -> Iterator[None]:
    """Quick hashes for the passwords of tests run in this process. Tests whose users sign in
    to a server process or a browser keep Django's hasher: a server would otherwise store a
    stronger hash at the first sign-in, which ends the sessions made with the old one."""
    if any(request.node.get_closest_marker(m) for m in ("services", "browser")):
        yield
        return
    from django.test import override_settings

    quick = f"{__name__}.{QuickPBKDF2PasswordHasher.__name__}"
    with override_settings(PASSWORD_HASHERS=[quick, *settings.PASSWORD_HASHERS]):
        yield


@pytest.fixture(autouse=True)
def _starts_servers_only_when_marked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test that starts Parley, PostgreSQL or Redis as a process without the `services`
    marker fails, naming it: `make test-fast` leaves tests out by their markers."""
    if request.node.get_closest_marker("services"):
        return
    from testkit.parley import ParleyProcess
    from testkit.services import PrivatePostgres, PrivateRedis

    def refuse(what: str):
        def refused(*args: object, **kwargs: object) -> None:
            pytest.fail(f"this test starts {what}: mark it @pytest.mark.services")

        return refused

    monkeypatch.setattr(ParleyProcess, "launch", refuse("Parley as a process"))
    monkeypatch.setattr(PrivatePostgres, "start", refuse("a PostgreSQL server"))
    monkeypatch.setattr(PrivateRedis, "start", refuse("a Redis server"))


@pytest.fixture(scope="session")
def upstream_server() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(tokenize=True) as server:
        yield server


@pytest.fixture
def upstream(upstream_server: ScriptedUpstream, settings) -> ScriptedUpstream:
    """The scripted OpenAI-compatible model every test talks to, fresh per test."""
    upstream_server.reset(counters=True)
    settings.LLM_BASE_URL = upstream_server.base_url
    settings.LLM_API_KEY = "test-key"
    settings.LLM_READ_TIMEOUT = 10.0
    settings.PARLEY_CHECKPOINT_INTERVAL = 1.0
    # Titles are extra model calls; the tests about them turn them back on.
    settings.PARLEY_GENERATE_TITLES = False
    return upstream_server


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-pass-123")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-pass-123")


@pytest.fixture
def staff(django_user_model):
    """A staff member who may read the record of every run and model call (the admin's lists
    and the metrics dashboard), and change nothing there."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("staff", password="staff-pass-123", is_staff=True)
    reading = Permission.objects.filter(codename__in=["view_run", "view_llmcall"])
    user.user_permissions.add(*reading)
    return user


@pytest.fixture
def support(django_user_model):
    """A staff member of the group "Support": may view everything of Parley's apps (sessions,
    runs, messages, model calls, agents, datasets and their items), and change nothing."""
    from tests.support.roles import support_group

    user = django_user_model.objects.create_user("support", password="x", is_staff=True)
    user.groups.add(support_group())
    return user


@pytest.fixture
def manager(django_user_model):
    """A staff member with every permission of Parley's apps, and no superuser."""
    from tests.support.roles import every_permission

    user = django_user_model.objects.create_user("manager", password="x", is_staff=True)
    user.user_permissions.add(*every_permission())
    return user


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser("root", password="root-pass-123")


@pytest.fixture
def root(superuser) -> Client:
    """The admin as the superuser sees it, logged in."""
    from django.test import Client

    client = Client()
    client.force_login(superuser)
    return client


@pytest.fixture
def agent(db) -> Agent:
    """The default agent, Assistant, on the scripted model and with no instructions."""
    from tests.support.apiclient import default_agent

    return default_agent()


@pytest.fixture
def brief_agent(agent: Agent) -> Agent:
    """The default agent told "Be brief.": its requests start with that system message."""
    agent.instructions = "Be brief."
    agent.save(update_fields=["instructions"])
    return agent


def database_url_for_subprocess() -> str:
    """The URL of the test database, so a child process works on the same rows."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    auth = db.get("USER") or "postgres"
    if db.get("PASSWORD"):
        auth += f":{db['PASSWORD']}"
    return f"postgres://{auth}@{host}:{port}/{db['NAME']}"


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": database_url_for_subprocess(), **extra}
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("LLM_BASE_URL", settings.LLM_BASE_URL)
    env.setdefault("LLM_API_KEY", "test-key")
    return env


@pytest.fixture(autouse=True)
def _close_worker_thread_connections() -> Iterator[None]:
    """The async ORM's worker thread and the request threads keep their own connections; close
    them so teardown can drop the test database."""
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    from serving import tuning

    futures = [SyncToAsync.single_thread_executor.submit(connections.close_all)]
    if tuning.request_threads is not None:
        futures += tuning.request_threads.submit_to_each(connections.close_all)
    try:
        for future in futures:
            future.result(timeout=15)
    except TimeoutError:
        import faulthandler
        import sys

        faulthandler.dump_traceback(file=sys.stderr)
        raise


@pytest.fixture(autouse=True)
def _fresh_channel_layer() -> Iterator[None]:
    """Each async test runs on its own event loop; a Redis layer object remembers the loop that
    last received on it, so every test gets a new one (a server has one loop and one layer)."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def _engine_serves_async_tests(request, _settle_background_tasks) -> Iterator[None]:
    """Each async test runs on its own event loop, with the run engine started on it as `serve`
    starts it on daphne's, and stopped after it as a server stops (answers still streaming are
    interrupted and stored), before what is left is cancelled."""
    import inspect

    from sessions_app.engine import lifespan

    if not inspect.iscoroutinefunction(getattr(request, "function", None)):
        yield
        return
    loop = request.getfixturevalue("_function_scoped_runner").get_loop()

    async def start() -> None:
        lifespan.start()

    loop.run_until_complete(start())
    try:
        yield
    finally:
        loop.run_until_complete(lifespan.stop())


@pytest.fixture(autouse=True)
def _settle_background_tasks(request) -> Iterator[None]:
    """After an async test, stop what it left running (heartbeats, fan-out, snapshot server)
    while its loop can still run, and say which task refuses to stop."""
    import asyncio
    import inspect

    if not inspect.iscoroutinefunction(getattr(request, "function", None)):
        yield
        return
    runner = request.getfixturevalue("_function_scoped_runner")
    yield
    loop = runner.get_loop()
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        _done, stuck = loop.run_until_complete(asyncio.wait(pending, timeout=10))
        for task in stuck:
            task.print_stack()
        assert not stuck, f"tasks that ignore cancellation: {[t.get_name() for t in stuck]}"
    from sessions_app.llm import pool

    loop.run_until_complete(pool.close_clients())  # the model client's pool is this loop's
