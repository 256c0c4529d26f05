"""The login throttle and the run rate limit hold across processes: what one server process
counted, another one refuses. And daphne, as `serve` starts it, closes a socket sent a message
over PARLEY_MAX_SOCKET_MESSAGE_BYTES while it arrives, before the application sees it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import httpx
import pytest
import websockets
from django.contrib.auth import get_user
from django.db import connections
from django.test import Client
from websockets.sync.client import connect

from sessions_app.models import Run, User
from testkit.parley import ParleyProcess
from tests.conftest import subprocess_env
from tests.support.apiclient import bearer
from tests.support.asgiclient import request_served

T = TypeVar("T")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("agent"),
    pytest.mark.services,
]


def in_a_thread_of_its_own(work: Callable[[], T]) -> T:
    """Django's test client calls an async view through async_to_sync, which Playwright's event
    loop, left marked as running on this thread by the browser tests, would refuse."""

    def work_and_close() -> T:
        try:
            return work()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(work_and_close).result(timeout=60)


def logged_in(base_url: str, username: str, password: str) -> httpx.Client:
    """A client that went through the login form of the server at base_url."""
    client = httpx.Client(base_url=base_url, timeout=30)
    form = client.get("/accounts/login/").text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
    assert token is not None
    answer = client.post(
        "/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token[1]},
    )
    client.last_login_status = answer.status_code  # type: ignore[attr-defined]
    return client


def test_wrong_passwords_sent_to_one_process_are_counted_in_another(
    live_server_url: str, alice: User
):
    for _ in range(10):
        assert logged_in(live_server_url, "alice", "wrong").last_login_status == 200

    # The server process refuses the eleventh from that address...
    assert logged_in(live_server_url, "alice", "alice-pass-123").last_login_status == 429
    # ...and so does this one, which saw none of the ten, to the same address (the server's
    # clients, like the test client, come from 127.0.0.1).
    here = Client(REMOTE_ADDR="127.0.0.1")
    response = here.post("/accounts/login/", {"username": "alice", "password": "alice-pass-123"})
    assert response.status_code == 429
    assert get_user(here).is_anonymous


@pytest.fixture
def parley(alice: User, upstream) -> Iterator[str]:
    """`manage.py serve` on the test database and the scripted model; its base URL."""
    server = ParleyProcess(subprocess_env()).start(healthy=True)
    try:
        yield server.base_url
    finally:
        server.stop()


def test_runs_started_in_one_process_count_against_the_limit_in_another(
    parley: str, alice: User, settings
):
    limit = settings.PARLEY_RUNS_PER_MINUTE  # the server process's, from the same default
    headers = bearer(alice)
    with httpx.Client(base_url=parley, headers=headers, timeout=30) as server:
        for _ in range(limit):
            assert server.post("/api/runs", json={"input": "hi"}).status_code == 200
        assert server.post("/api/runs", json={"input": "one more"}).status_code == 429

    # This process, with its own run engine, saw none of them.
    response = in_a_thread_of_its_own(
        lambda: request_served("POST", "/api/runs", {"input": "and here"}, headers)
    )

    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert Run.objects.count() == limit


@pytest.fixture
def served(alice: User) -> Iterator[str]:
    """`manage.py serve` with a socket message limit of 5000 bytes; its base URL."""
    env = subprocess_env(PARLEY_MAX_SOCKET_MESSAGE_BYTES="5000", DEBUG="True")
    server = ParleyProcess(env).start(healthy=True)
    try:
        yield server.base_url
    finally:
        server.stop()


def answers_to(url: str, cookie: str, message: str) -> tuple[list[str], int | None]:
    """Send one message; every frame received until the socket closes (or goes quiet), and the
    close code, None when the connection was dropped without one."""
    ws_url = url.replace("http://", "ws://") + "/ws/chat/"
    received: list[str] = []
    with connect(ws_url, origin=url, additional_headers={"Cookie": cookie}) as socket:
        socket.send(message)
        try:
            while True:
                received.append(str(socket.recv(timeout=3)))
        except TimeoutError:
            return received, socket.close_code
        except websockets.ConnectionClosed as closed:
            return received, closed.rcvd.code if closed.rcvd else None


def test_serve_drops_a_socket_sent_a_message_over_the_limit_as_it_arrives(served: str):
    client = logged_in(served, "alice", "alice-pass-123")
    cookie = f"sessionid={client.cookies['sessionid']}"

    within, open_code = answers_to(served, cookie, "x" * 4900)
    over, closed_code = answers_to(served, cookie, "x" * 6000)

    assert open_code is None and "could not be read" in within[0]  # read, and answered
    # autobahn, under daphne, stops reading and drops the connection (1009 is its reason,
    # which it does not wait to send): the consumer never had the message to answer.
    assert over == [] and closed_code in (None, 1009)
