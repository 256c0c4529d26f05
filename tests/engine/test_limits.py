"""Oversized request bodies and chat socket messages are refused with a clear error, from their
announced or counted size, before they are read whole."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator

from project.asgi import application
from sessions_app.models import Run
from tests.support.apiclient import asgi_client
from tests.support.chattab import open_tab

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 4000


@pytest.fixture(autouse=True)
def small_limits(settings) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = LIMIT
    settings.PARLEY_MAX_SOCKET_MESSAGE_BYTES = LIMIT


async def test_an_api_body_over_the_limit_answers_413_and_starts_nothing(alice, agent, upstream):
    client = await sync_to_async(asgi_client)(alice)

    response = await client.post("/api/runs", {"input": "x" * LIMIT})

    assert response.status_code == 413
    assert response.json() == {"detail": f"Request body too large: at most {LIMIT} bytes."}
    assert await Run.objects.acount() == 0
    assert upstream.requests == []


async def test_a_body_within_the_limit_is_served(alice, agent, upstream):
    client = await sync_to_async(asgi_client)(alice)

    response = await client.post("/api/runs", {"input": "x" * (LIMIT - 100)})

    assert response.status_code == 200
    assert response.json()["status"] == "COMPLETED"


async def chunked_post(path: str, chunks: list[bytes]) -> tuple[int, bytes]:
    """A POST without Content-Length, its body in pieces; returns status and body."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    communicator = ApplicationCommunicator(application, scope)
    for i, chunk in enumerate(chunks):
        more = i < len(chunks) - 1
        await communicator.send_input({"type": "http.request", "body": chunk, "more_body": more})
    start = await communicator.receive_output(timeout=10)
    body = await communicator.receive_output(timeout=10)
    await communicator.wait(timeout=10)
    return start["status"], body["body"]


async def test_a_chunked_body_is_refused_once_what_arrived_passes_the_limit(alice, agent):
    status, body = await chunked_post("/api/runs", [b"x" * 1500] * 4)

    assert status == 413
    assert json.loads(body)["detail"] == f"Request body too large: at most {LIMIT} bytes."


async def test_a_chunked_body_within_the_limit_reaches_the_view():
    status, body = await chunked_post("/api/runs", [b'{"input": ', b'"hi"}'])

    assert status == 401  # read whole and answered by the API: no credentials
    assert json.loads(body)["detail"].startswith("Authentication required")


async def test_a_page_form_over_the_limit_answers_413_in_plain_text():
    scope_body = b"username=" + b"a" * LIMIT
    communicator = ApplicationCommunicator(
        application,
        {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/accounts/login/",
            "raw_path": b"/accounts/login/",
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"testserver"),
                (b"content-type", b"application/x-www-form-urlencoded"),
                (b"content-length", str(len(scope_body)).encode()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        },
    )
    await communicator.send_input({"type": "http.request", "body": scope_body})
    start = await communicator.receive_output(timeout=10)
    body = await communicator.receive_output(timeout=10)

    assert start["status"] == 413
    assert (b"content-type", b"text/plain; charset=utf-8") in start["headers"]
    assert body["body"] == f"Request body too large: at most {LIMIT} bytes.".encode()


async def test_a_socket_message_over_the_limit_is_refused_and_the_socket_closed(
    alice, agent, upstream
):
    tab = await open_tab(alice)

    await tab.send(action="send", input="x" * LIMIT)

    notice = await tab.until("too large")
    assert f"That message is too large: at most {LIMIT} bytes." in notice
    closed = await tab.ws.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 1009}
    assert await Run.objects.acount() == 0
