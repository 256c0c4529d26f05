"""Browser tests: the real server (daphne in a child process) driven by Debian's Chromium.

Fixtures, all usable from plain ``def`` tests marked ``@pytest.mark.django_db(transaction=True)``
(rows the test writes must be committed for the server process to see them):

- ``live_server_url -> str``: ``http://127.0.0.1:<port>`` of one daphne shared by the package;
  requesting it also resets the scripted model (the ``upstream`` fixture).
- ``page -> Page``: a fresh browser context and page whose ``base_url`` is the server, so
  ``page.goto("/accounts/login/")`` works.
- ``login -> Callable[[Page, str, str], None]``: logs in through the real login form.

Tests here must be sync: Playwright's sync API refuses to start inside a running asyncio loop.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from serving.children import free_port
from testkit.upstream import ScriptedUpstream
from tests.conftest import ROOT, subprocess_env

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
APPLICATION = "project.asgi:application"
STARTUP_TIMEOUT = 30.0
# Playwright's own default is 30 s; a page of ours that takes 10 s is already a failure.
ACTION_TIMEOUT_MS = 10_000


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _wait_until_healthy(server: LiveServer) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            break
        try:
            if httpx.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"daphne did not become healthy at {server.url}:\n{server.log_tail()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def daphne_environment(upstream_server: ScriptedUpstream) -> dict[str, str]:
    """The server's settings: the test database and the scripted model."""
    env = subprocess_env(
        LLM_BASE_URL=upstream_server.base_url,
        LLM_API_KEY="test-key",
        LLM_READ_TIMEOUT="10",  # as the `upstream` fixture sets for in-process tests
        PARLEY_GENERATE_TITLES="False",  # titles would take scripted replies meant for answers
        DEBUG="True",
    )
    # The browser fixture sets this for the test process; the server must keep Django's guard.
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


def start_daphne(env: dict[str, str], port: int, log: Path) -> LiveServer:
    """A daphne on `port`, healthy (stopped again if it never gets there); its log appended."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), APPLICATION],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = LiveServer(url=f"http://127.0.0.1:{port}", process=process, log=log)
    try:
        _wait_until_healthy(server)
    except BaseException:
        stop_daphne(server)
        raise
    return server


def stop_daphne(server: LiveServer) -> None:
    _stop(server.process)


@pytest.fixture(scope="package")
def daphne_server(
    django_db_setup: None,
    upstream_server: ScriptedUpstream,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LiveServer]:
    """One real daphne for the whole package, on the test database and the scripted model.

    Not named ``live_server``: pytest-django owns that name and hooks into tests requesting it.

    django_db_setup first: the child must be pointed at the test database, which exists only
    then. It is stopped before that fixture drops the database (PostgreSQL refuses to drop a
    database with open connections).
    """
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    server = start_daphne(daphne_environment(upstream_server), free_port(), log)
    try:
        yield server
    finally:
        stop_daphne(server)


@pytest.fixture
def live_server_url(daphne_server: LiveServer, upstream: ScriptedUpstream) -> str:
    """The running server's base URL; the scripted model is reset for this test."""
    server = daphne_server
    if server.process.poll() is not None:
        pytest.fail(f"daphne exited with {server.process.returncode}:\n{server.log_tail()}")
    return server.url


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        message = f"Chromium not found at {CHROMIUM}; apt-get install chromium"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    # Between calls, Playwright's sync API leaves its event loop marked as running on this
    # thread, so Django would refuse every ORM call made by the test or by pytest-django's
    # flush ("You cannot call this from an async context"). No coroutine shares this thread's
    # connection, so the guard protects nothing here. Package scope undoes both before any
    # async test outside tests/e2e runs.
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Browser, live_server_url: str) -> Iterator[Page]:
    context = browser.new_context(base_url=live_server_url)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def log_in(page: Page, username: str, password: str) -> None:
    """Log in through the login form, as a person would; fails loudly if the form refuses."""
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    # Either outcome is a navigation: the redirect on success, the re-rendered form on failure.
    with page.expect_navigation():
        page.get_by_role("button", name="Log in").click()
    if urlsplit(page.url).path == "/accounts/login/":
        errors = page.locator(".errorlist").all_inner_texts()
        raise AssertionError(f"logging in as {username!r} failed: {errors}")


@pytest.fixture
def login() -> Callable[[Page, str, str], None]:
    """``login(page, username, password)``: log in through the real form."""
    return log_in
