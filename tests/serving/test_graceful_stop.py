"""A graceful stop (SIGTERM, as a service manager sends it) keeps every piece of an answer its
client saw: `serve` stores what the answers streaming in it said before it exits, INTERRUPTED,
where a killed process keeps only its last checkpoint (see test_run_failures)."""

from __future__ import annotations

import asyncio
import signal

import pytest
import redis
from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator

from project.asgi import application
from serving.nginx import find_nginx
from sessions_app import engine
from sessions_app.engine import lifespan
from sessions_app.engine.errors import INTERRUPTED
from sessions_app.models import Message, Role, Run, RunStatus
from testkit.parley import ParleyProcess
from testkit.upstream import Reply
from tests.conftest import subprocess_env
from tests.deployed.streams import StreamedRun
from tests.support.apiclient import asgi_client, bearer
from tests.support.waiting import until

REDIS_URL = "redis://127.0.0.1:6379/0"


def _several_unavailable() -> str | None:
    """Why `serve --workers 2` cannot run here (it needs Redis and nginx), if it cannot."""
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError:
        return f"no Redis at {REDIS_URL}"
    return None if find_nginx() else "nginx is not installed"


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("workers", [1, 2], ids=["one process", "two workers"])
def test_a_sigterm_under_an_answer_stores_everything_its_client_saw(
    alice, agent, upstream, workers
):
    if workers > 1 and (missing := _several_unavailable()):
        pytest.skip(missing)
    # A long, slow answer, and no checkpoint while it streams: what is stored comes from the stop.
    upstream.script(Reply(tokens=3000, delay=0.02))
    env = subprocess_env(PARLEY_CHECKPOINT_INTERVAL="3600", PARLEY_GENERATE_TITLES="False")
    if workers > 1:
        env["REDIS_URL"] = REDIS_URL
    server = ParleyProcess(env, workers=workers).start(90, healthy=True)
    try:
        follower = StreamedRun(server.base_url, bearer(alice), input="Tell me a long story.")
        follower.wait_for(5)
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        code = server.process.wait(timeout=60)
        follower.join()
    finally:
        server.stop()
    assert code == 0, server.tail()

    seen = follower.content()
    run = Run.objects.get(pk=follower.run_id)
    assert (run.status, run.error) == (RunStatus.INTERRUPTED, INTERRUPTED)
    assert seen and run.content.startswith(seen), (seen, run.content)
    assert Message.objects.get(run=run, role=Role.ASSISTANT).content == run.content


@pytest.mark.django_db(transaction=True)
async def test_while_the_engine_stops_new_runs_are_refused_and_streaming_ones_stored(
    alice, agent, upstream
):
    upstream.script(Reply(tokens=3000, delay=0.02))
    client = await sync_to_async(asgi_client)(alice)
    handle = await engine.start_run(alice, "Tell me a long story.")
    await until(lambda: len(handle.stream.content_so_far()) > 20, "a few pieces of the answer")

    stopping = asyncio.ensure_future(lifespan.stop())
    await asyncio.sleep(0)  # the stop has begun
    refused = await client.post("/api/runs", {"input": "and another"})
    await stopping

    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "2"
    assert refused.json() == {"detail": "The server is stopping; please try again in a moment."}
    # Nor once it has stopped, while the server's loop winds down.
    assert (await client.post("/api/runs", {"input": "and yet another"})).status_code == 503
    run = await Run.objects.aget(pk=handle.run_id)
    assert (run.status, run.error) == (RunStatus.INTERRUPTED, INTERRUPTED)
    assert run.content == handle.stream.content_so_far()
    # Its clients were told how it ended, the whole answer with it.
    assert handle.stream.events[-1]["event"] == "RunError"
    assert handle.stream.events[-1]["content"] == run.content
    assert await Run.objects.acount() == 1


@pytest.mark.django_db(transaction=True)
async def test_an_asgi_server_s_lifespan_events_start_and_stop_the_engine(alice, agent, upstream):
    """As uvicorn drives the application: startup starts the engine, shutdown stops it as
    SIGTERM stops serve, the answer streaming then stored as far as it went."""
    await lifespan.stop()  # the test's own engine: this server starts one of its own
    server = ApplicationCommunicator(application, {"type": "lifespan", "asgi": {"version": "3.0"}})
    await server.send_input({"type": "lifespan.startup"})
    assert await server.receive_output(10) == {"type": "lifespan.startup.complete"}
    assert lifespan.running()

    upstream.script(Reply(tokens=3000, delay=0.02))
    handle = await engine.start_run(alice, "Tell me a long story.")
    await until(lambda: len(handle.stream.content_so_far()) > 20, "a few pieces of the answer")
    await server.send_input({"type": "lifespan.shutdown"})
    assert await server.receive_output(30) == {"type": "lifespan.shutdown.complete"}

    assert not lifespan.running()
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == RunStatus.INTERRUPTED
    assert run.content == handle.stream.content_so_far()
