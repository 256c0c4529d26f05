"""Parley in its deployed shape: `manage.py serve --workers 2` (two daphne processes behind
nginx) on the test's PostgreSQL database, Redis and the scripted model, started once for the
package and stopped with everything it started.

Fixtures, for plain ``def`` tests marked ``@pytest.mark.django_db(transaction=True)``:

- ``deployed -> ParleyProcess``: the package's deployment, ``base_url`` (nginx) and
  ``worker_urls()`` (a loopback URL relayed to each daphne's unix socket, so that a test can
  put a browser on one process and a client on the other); the scripted model reset for the
  test.
- ``serve_environment -> dict``: what it is started with, for a test that starts (and stops)
  one of its own with ``launch``.
- ``browser``, ``log_in``: Debian's Chromium, as in tests/e2e.

The package skips when the test database is not PostgreSQL (the SQLite pass), or when Redis or
nginx is missing outside CI.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.db import connection

from serving.nginx import find_nginx
from sessions_app.models import Run
from testkit.parley import ParleyProcess
from testkit.upstream import ScriptedUpstream
from tests.conftest import subprocess_env
from tests.e2e.conftest import browser, log_in  # noqa: F401 (fixtures of this package too)

REDIS_URL = os.getenv("REDIS_URL") or "redis://127.0.0.1:6379/0"
# A proxy in front of the deployment at one of these addresses is trusted as one on loopback is.
TRUSTED_PROXIES = "127.0.0.8/30"
STARTUP_TIMEOUT = 90.0  # two Django processes and nginx, on a loaded machine


def pid_of_run(run_id: str) -> int:
    """The process streaming a run, as the run itself records it (host:pid:nonce)."""
    return int(Run.objects.get(pk=run_id).worker.split(":")[1])


def _unavailable() -> str | None:
    if connection.vendor != "postgresql":
        return "the deployed shape runs on PostgreSQL: set DATABASE_URL=postgres://…"
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError:
        return f"no Redis at {REDIS_URL}"
    if find_nginx() is None:
        return "nginx is not installed (apt-get install nginx)"
    return None


def launch(env: dict[str, str], log: Path) -> ParleyProcess:
    """`serve --workers 2` on a free port, serving once this returns."""
    return ParleyProcess(env, workers=2, log=log).start(STARTUP_TIMEOUT, healthy=True)


@pytest.fixture(scope="package")
def serve_environment(
    django_db_setup: None, django_db_blocker, upstream_server: ScriptedUpstream
) -> Iterator[dict[str, str]]:
    """What `serve` is started with: the test database, Redis, the scripted model, production
    settings over plain HTTP, static files collected. Skips when a service is missing."""
    with django_db_blocker.unblock():
        missing = _unavailable()
    if missing is not None:
        if os.getenv("CI") and connection.vendor == "postgresql":
            pytest.fail(missing)
        pytest.skip(missing)
    # Readable by nginx's workers, which run as another user when the tests run as root.
    static = Path(tempfile.mkdtemp(prefix="parley-static-"))
    static.chmod(0o755)
    env = subprocess_env(
        LLM_BASE_URL=upstream_server.base_url,
        LLM_API_KEY="test-key",
        LLM_READ_TIMEOUT="10",
        PARLEY_GENERATE_TITLES="False",  # titles would take scripted replies meant for answers
        REDIS_URL=REDIS_URL,
        STATIC_ROOT=str(static),
        DEBUG="False",
        SECRET_KEY="deployed-shape-tests-" + "x" * 40,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_COOKIES="False",
        PARLEY_TRUSTED_PROXIES=TRUSTED_PROXIES,
    )
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set by the browser fixture for this process
    ParleyProcess(env).manage("collectstatic", "--noinput", "-v0")
    try:
        yield env
    finally:
        shutil.rmtree(static, ignore_errors=True)


@pytest.fixture(scope="package")
def deployment(
    serve_environment: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ParleyProcess]:
    """Started after the test database exists, stopped before it is dropped."""
    deployment = launch(serve_environment, tmp_path_factory.mktemp("serve") / "serve.log")
    try:
        yield deployment
    finally:
        deployment.stop()


@pytest.fixture
def deployed(deployment: ParleyProcess, upstream: ScriptedUpstream) -> ParleyProcess:
    """The deployment, still running; the scripted model reset for this test."""
    process = deployment.process
    if process is None or process.poll() is not None:
        code = None if process is None else process.returncode
        pytest.fail(f"serve exited with {code}:\n{deployment.tail()}")
    return deployment
