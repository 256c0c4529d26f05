"""Redis, the channel layer between processes, missing at start or restarted under a running
Parley. A private redis-server, so the machine's own is left alone."""

from __future__ import annotations

import asyncio
import contextlib
import html
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from channels.layers import get_channel_layer

from serving import layers
from serving.children import free_port
from sessions_app import events
from sessions_app.events.bridge import group_name
from testkit.parley import ParleyProcess
from testkit.services import PrivateRedis
from testkit.upstream import Reply, ScriptedUpstream
from tests.faults.conftest import PASSWORD, api_client, parley_env, prepare
from tests.support.chatsocket import ChatTab
from tests.support.waiting import until

pytestmark = [
    pytest.mark.services,  # a private Redis server in every test
    pytest.mark.skipif(bool(PrivateRedis.unavailable()), reason=str(PrivateRedis.unavailable())),
]

TOKENS = 60


@pytest.fixture
def redis_server() -> Iterator[PrivateRedis]:
    with PrivateRedis() as server:
        yield server


def sqlite_env(upstream: ScriptedUpstream, folder: Path, redis_url: str) -> dict[str, str]:
    return parley_env(
        upstream,
        DATABASE_URL=f"sqlite:///{folder / 'parley.sqlite3'}",
        REDIS_URL=redis_url,
        PARLEY_CHECKPOINT_INTERVAL="0.2",
    )


@pytest.mark.process
def test_serve_refuses_to_start_without_its_redis_and_names_redis_url(upstream_server, tmp_path):
    port = free_port()  # nothing listens there
    url = f"redis://:secret@127.0.0.1:{port}/3?password=hidden&socket_timeout=5"
    parley = ParleyProcess(sqlite_env(upstream_server, tmp_path, url))
    process = parley.launch()
    try:
        code = process.wait(timeout=60)  # a bound on a hang, not a measure of speed
    except subprocess.TimeoutExpired:
        parley.stop()
        pytest.fail(f"serve kept running without Redis:\n{parley.output()}")
    said = parley.output()
    assert code != 0
    assert f"REDIS_URL (redis://127.0.0.1:{port}/3) did not answer" in said
    assert "secret" not in said and "hidden" not in said
    assert "Parley is serving" not in said


def login_cookie(parley: ParleyProcess) -> str:
    with httpx.Client(base_url=parley.url(), timeout=30) as browser:
        form = browser.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        browser.post(
            "/accounts/login/",
            data={"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token},
        )
        return f"sessionid={browser.cookies['sessionid']}"


@pytest.mark.process
def test_healthz_says_the_channel_layer_is_down_while_redis_is(
    upstream_server, tmp_path, redis_server
):
    parley = ParleyProcess(sqlite_env(upstream_server, tmp_path, redis_server.url()))
    prepare(parley)
    with parley:
        assert httpx.get(parley.url("/healthz"), timeout=30).json()["channel_layer"] == "ok"
        redis_server.stop()
        down = httpx.get(parley.url("/healthz"), timeout=30)
        assert down.status_code == 503
        assert down.json() | {"llm": "ok"} == {"db": "ok", "channel_layer": "error", "llm": "ok"}
        redis_server.start()
        up = httpx.get(parley.url("/healthz"), timeout=30)
        assert (up.status_code, up.json()["channel_layer"]) == (200, "ok")


@pytest.mark.process
async def test_a_redis_restart_mid_answer_loses_no_run_and_the_chat_keeps_working(
    upstream_server, tmp_path, redis_server
):
    upstream_server.reset(counters=True)
    parley = ParleyProcess(sqlite_env(upstream_server, tmp_path, redis_server.url()))
    api = api_client(parley, prepare(parley))
    with parley:
        cookie = login_cookie(parley)
        tab = await ChatTab.open(parley, cookie)
        upstream_server.script(Reply(tokens=TOKENS, delay=0.05))
        await tab.send(action="send", session_id="", input="a long story")
        marker = await tab.until('id="composer-session"')
        session_id = re.search(r'value="([0-9a-f-]{36})"', marker).group(1)
        await tab.until("tok3 ")
        redis_server.restart()  # mid-answer: empty, every connection to it cut
        await tab.until('data-run-status="completed"')
        expected = "".join(f"tok{i} " for i in range(TOKENS))
        runs = api.get(f"/api/sessions/{session_id}/runs").json()["data"]
        assert [(r["status"], r["content"]) for r in runs] == [("COMPLETED", expected)]
        assert tab.text_of(runs[0]["run_id"]) == expected

        # The same socket goes on, and a new tab watches the chat as before.
        await tab.send(action="send", session_id=session_id, input="and now?")
        await tab.until("Echo: and now?")
        second = await ChatTab.open(parley, cookie)
        await second.send(action="watch", session_id=session_id)
        page = html.unescape(await second.until('data-testid="assistant-message"'))
        assert "Echo: and now?" in page
        await tab.socket.close()
        await second.socket.close()


@pytest.mark.django_db(transaction=True)
async def test_after_a_redis_restart_a_process_hears_the_sessions_it_watches_again(
    redis_server, settings
):
    """Another process's events reach this one through the session's group, which a Redis
    restarted empty has forgotten."""
    settings.CHANNEL_LAYERS = {"default": layers.redis_layer(redis_server.url())}
    layer = get_channel_layer()
    session_id = str(uuid.uuid4())
    heard: list[dict] = []

    async def watch() -> None:
        async for event in events.subscribe(session_id):
            heard.append(event)

    def from_elsewhere(nonce: str) -> dict:
        event = {"event": "SessionRenamed", "session_id": session_id, "nonce": nonce}
        return {"type": "event", "event": event, "origin": "another-host:1:abc"}

    async def heard_from_elsewhere(nonce: str) -> bool:
        if not any(e.get("nonce") == nonce for e in heard):
            with contextlib.suppress(redis.RedisError, OSError):  # Redis is starting again
                await layer.group_send(group_name(session_id), from_elsewhere(nonce))
            await asyncio.sleep(0.2)
        return any(e.get("nonce") == nonce for e in heard)

    watcher = asyncio.create_task(watch())
    try:
        await until(lambda: heard, "the session's snapshot")
        await until(lambda: heard_from_elsewhere("before"), "an event from elsewhere")
        redis_server.restart()
        await until(lambda: heard_from_elsewhere("after"), "an event from elsewhere, after")
    finally:
        watcher.cancel()
