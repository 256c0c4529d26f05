"""No password or key in what users and developers are shown: the model endpoint's errors (API,
server-sent events, the chat page), Django's debug pages, and the log of failed requests."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from project.asgi import application
from sessions_app.models import Run, RunStatus
from testkit.upstream import Reply
from tests.conftest import ROOT
from tests.support.apiclient import asgi_client, read_events

# A key as OpenAI's answers quote one, and what must not be seen of it.
LEAKED_KEY = "sk-proj-Q9xT2mVb7LkP4wZr8NcJ3hYd6FgS1aE5"
KEY_TAIL = "Q9xT2mVb7LkP4wZr8NcJ3hYd6FgS1aE5"
DB_PASSWORD = "s3cret-db-pw"
REDIS_PASSWORD = "r3dis-pw-77"
SECRET_KEY = "error-reports-" + "x" * 40

# -- error reports ------------------------------------------------------------------------------

FAILING_REQUEST = """
import django
django.setup()
from django.test import Client
answer = Client(raise_request_exception=False).post(
    "/accounts/login/", {"username": "alice", "password": "alice-pass-123"}
)
print(answer.status_code)
print(answer.content.decode())
"""


def failing_request(**extra: str) -> subprocess.CompletedProcess[str]:
    """A sign-in whose database is unreachable, in a process with these settings."""
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "SECRET_KEY": SECRET_KEY,
        # Port 9 (discard) refuses the connection at once.
        "DATABASE_URL": f"postgres://parley:{DB_PASSWORD}@127.0.0.1:9/parley",
        "REDIS_URL": f"redis://:{REDIS_PASSWORD}@127.0.0.1:9/0",
        "LLM_API_KEY": LEAKED_KEY,
        **extra,
    }
    return subprocess.run(
        [sys.executable, "-c", FAILING_REQUEST],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_debug_page_shows_no_password_nor_key():
    done = failing_request(DEBUG="true")

    assert done.returncode == 0, done.stderr
    status, _, page = done.stdout.partition("\n")
    assert status == "500"
    assert "OperationalError" in page and "DATABASE_URL" in page  # the debug page itself
    for secret in (DB_PASSWORD, REDIS_PASSWORD, KEY_TAIL, SECRET_KEY):
        assert secret not in page
        assert secret not in done.stderr
    assert "postgres://parley:********@127.0.0.1:9/parley" in page


def test_without_debug_a_failed_request_is_logged_without_secrets():
    done = failing_request(DEBUG="false")

    assert done.returncode == 0, done.stderr
    status, _, page = done.stdout.partition("\n")
    assert status == "500" and "Traceback" not in page
    assert "Internal Server Error: /accounts/login/" in done.stderr
    assert "OperationalError" in done.stderr
    for secret in (DB_PASSWORD, REDIS_PASSWORD, KEY_TAIL, SECRET_KEY):
        assert secret not in done.stderr


# -- what the model endpoint said, shown to users ------------------------------------------------

UPSTREAM_COMPLAINT = (
    f"Incorrect API key provided: {LEAKED_KEY}. You can find your API key at "
    "https://platform.openai.com/account/api-keys."
)


@pytest.mark.django_db(transaction=True)
async def test_an_upstream_error_quoting_a_key_answers_masked(alice, agent, upstream):
    as_alice = await sync_to_async(asgi_client)(alice)
    upstream.script(Reply(status=401, error_message=UPSTREAM_COMPLAINT))

    response = await as_alice.post("/api/runs", {"input": "hello"})

    assert response.status_code == 502
    detail = response.json()["detail"]
    assert detail.startswith("The model endpoint answered 401: Incorrect API key provided: sk-")
    assert "platform.openai.com/account/api-keys" in detail
    run = await as_alice.get(f"/api/runs/{response.json()['run_id']}")
    assert run.json()["status"] == RunStatus.ERROR
    for shown in (response.body, run.body):
        assert KEY_TAIL.encode() not in shown


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "said",
    [
        "This model's maximum context length is 4096 tokens. However, you requested 5000 "
        "tokens (max_tokens: 1000).",
        "The model `gpt-4o-mini-2024-07-18` does not exist or you do not have access to it.",
        "Rate limit reached for gpt-4o-mini in organization org-abc123 (RPM): Limit 3, Used 3.",
    ],
)
async def test_an_upstream_error_without_a_key_is_shown_as_said(alice, agent, upstream, said):
    as_alice = await sync_to_async(asgi_client)(alice)
    upstream.script(Reply(status=400, error_message=said))

    response = await as_alice.post("/api/runs", {"input": "hello"})

    assert response.json()["detail"] == f"The model endpoint answered 400: {said}"


@pytest.mark.django_db(transaction=True)
async def test_an_upstream_error_quoting_a_key_streams_masked(alice, agent, upstream):
    as_alice = await sync_to_async(asgi_client)(alice)
    upstream.script(Reply("never finished", error_after=1, error_message=UPSTREAM_COMPLAINT))

    response = await as_alice.open("POST", "/api/runs", {"input": "hello", "stream": True})
    events = await read_events(response)

    event, data = events[-1]
    assert event == "RunError" and "Incorrect API key provided: sk-" in data["error"]
    assert KEY_TAIL.encode() not in response.body


@pytest.mark.django_db(transaction=True)
async def test_an_upstream_error_quoting_a_key_reaches_the_chat_page_masked(alice, agent, upstream):
    upstream.script(Reply("never finished", error_after=1, error_message=UPSTREAM_COMPLAINT))
    client = Client()
    await sync_to_async(client.force_login)(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    tab = WebsocketCommunicator(
        application, "/ws/chat/", headers=[(b"origin", b"http://testserver"), (b"cookie", cookie)]
    )
    connected, _ = await tab.connect()
    assert connected
    await tab.send_to(text_data=json.dumps({"action": "send", "input": "hello?"}))
    frames = []
    while 'data-run-status="error"' not in "".join(frames):
        frames.append(await tab.receive_from(timeout=10))
    await tab.disconnect()

    shown = "".join(frames)
    assert "Incorrect API key provided: sk-" in shown
    assert KEY_TAIL not in shown
    assert KEY_TAIL not in (await Run.objects.aget(user=alice)).error
