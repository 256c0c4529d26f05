"""Several processes behind one Redis: a tab follows an answer streamed by another process."""

from __future__ import annotations

import asyncio
import html
import os
import re
import sys
import textwrap
import uuid

import pytest
import redis
from channels.layers import get_channel_layer

from serving import layers
from sessions_app import engine, events
from sessions_app.events import crossing, followers
from sessions_app.events.bridge import group_name
from sessions_app.models import Agent, Run, RunStatus, Session
from testkit.upstream import Reply
from tests.conftest import ROOT, subprocess_env
from tests.support.chattab import open_tab

REDIS_URL = os.getenv("REDIS_URL") or "redis://127.0.0.1:6379/0"


def redis_available() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


pytestmark = [
    pytest.mark.services,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not redis_available() and not os.getenv("CI"), reason=f"no Redis at {REDIS_URL}"
    ),
]

OTHER_PROCESS = textwrap.dedent(
    """
    import asyncio, django, os
    django.setup()
    from django.contrib.auth import get_user_model
    from sessions_app import events
    from sessions_app import engine

    async def main():
        engine.lifespan.start()  # as serve starts it
        user = await get_user_model().objects.aget(username="alice")
        session_id = os.environ.get("SESSION_ID") or None
        handle = await engine.start_run(user, "a long answer, please", session_id=session_id)
        print(handle.session_id, handle.run_id, flush=True)
        await handle.wait()
        await events.drain()
        # Skip the loop's teardown, where a Redis client's cancelled blocking read can keep it
        # waiting: everything this process had to say has been said.
        os._exit(0)

    asyncio.run(main())
    """
)


@pytest.fixture
def redis_layer(settings):
    settings.CHANNEL_LAYERS = {"default": layers.redis_layer(REDIS_URL)}


async def _scripted_default_agent() -> Agent:
    await Agent.objects.filter(is_default=True).aupdate(model="scripted", instructions="")
    agent = await Agent.objects.filter(is_default=True).afirst()
    return agent or await Agent.objects.acreate(name="Assistant", model="scripted", is_default=True)


async def _other_process(**env: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        OTHER_PROCESS,
        cwd=ROOT,
        env=subprocess_env(DJANGO_SETTINGS_MODULE="project.settings", REDIS_URL=REDIS_URL, **env),
        stdout=asyncio.subprocess.PIPE,
    )


async def _ended(child: asyncio.subprocess.Process) -> None:
    if child.returncode is None:
        try:
            await asyncio.wait_for(child.wait(), 15)
        except TimeoutError:
            child.kill()
            await child.wait()
            raise


async def test_a_tab_follows_an_answer_streamed_by_another_process(alice, upstream, redis_layer):
    await _scripted_default_agent()
    upstream.script(Reply(tokens=80, delay=0.03))
    child = await _other_process()
    try:
        line = await asyncio.wait_for(child.stdout.readline(), 30)
        session_id, run_id = line.decode().split()
        await asyncio.sleep(0.6)  # it is well into its answer when the tab opens

        tab = await open_tab(alice)
        await tab.send(action="watch", session_id=session_id)
        await tab.until(f'data-run-id="{run_id}" data-run-status="completed"', timeout=20)
        run = await Run.objects.aget(pk=run_id)
        assert run.status == RunStatus.COMPLETED
        expected = "".join(f"tok{i} " for i in range(80))
        # What the other process had streamed before the tab came, then everything after:
        # the whole answer, once.
        assert tab.text_of(run_id) == expected == run.content
        snapshots = [
            html.unescape(m)
            for frame in tab.frames
            for m in re.findall(rf'id="run-{run_id}-text" class="stream-text">(.*?)</span>', frame)
        ]
        # The process running the answer told this one what it had streamed so far.
        assert any(s and expected.startswith(s) and s != expected for s in snapshots)
        await tab.close()
    finally:
        await _ended(child)


async def test_a_tab_open_before_another_process_starts_a_run_sees_all_of_it(
    alice, upstream, redis_layer
):
    """The process that runs the answer finds the tab's process among the session's followers
    when the run starts, and sends it every event, the first ones included."""
    agent = await _scripted_default_agent()
    session = await Session.objects.acreate(user=alice, agent=agent)
    tab = await open_tab(alice)
    await tab.send(action="watch", session_id=str(session.session_id))
    await tab.until('id="composer-actions"')
    upstream.script(Reply(tokens=40, delay=0.01))
    child = await _other_process(SESSION_ID=str(session.session_id))
    try:
        _, run_id = (await asyncio.wait_for(child.stdout.readline(), 30)).decode().split()
        await tab.until(f'data-run-id="{run_id}" data-run-status="completed"', timeout=20)
        expected = "".join(f"tok{i} " for i in range(40))
        assert tab.text_of(run_id) == expected == (await Run.objects.aget(pk=run_id)).content
        await tab.close()
    finally:
        await _ended(child)


async def test_a_run_nobody_follows_elsewhere_sends_nothing_across(alice, upstream, redis_layer):
    """A listener in the session's group that is not listed among its followers hears nothing of
    a run; once another process is listed, the next run is sent to the group from its first
    event to its last."""
    agent = await _scripted_default_agent()
    session = await Session.objects.acreate(user=alice, agent=agent)
    layer = get_channel_layer()
    listener = await layer.new_channel()
    await layer.group_add(group_name(session.session_id), listener)
    upstream.script(Reply(tokens=30), Reply(tokens=30))
    elsewhere = None
    try:
        handle = await engine.start_run(alice, "one", session_id=session.session_id)
        await handle.wait()
        await events.drain()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(layer.receive(listener), 0.5)

        elsewhere = followers.Followers(layer.redis_client(), "another-host:1:x")
        await elsewhere.add([str(session.session_id)])
        handle = await engine.start_run(alice, "two", session_id=session.session_id)
        await handle.wait()
        await events.drain()
        sent = []
        while not sent or sent[-1]["event"] != "RunCompleted":
            sent.append((await asyncio.wait_for(layer.receive(listener), 5))["event"])
        assert [e["seq"] for e in sent] == list(range(1, len(sent) + 1))
        assert sent[0]["event"] == "RunStarted"
        assert "".join(e["content"] for e in sent if e["event"] == "RunContent") == "".join(
            f"tok{i} " for i in range(30)
        )
    finally:
        await layer.group_discard(group_name(session.session_id), listener)
        if elsewhere is not None:
            await elsewhere.remove(str(session.session_id))
            await elsewhere.close()


async def test_a_process_listed_late_among_followers_still_gets_the_run(
    alice, upstream, redis_layer, monkeypatch
):
    """Listed after the run started (its entry was lost with a Redis restart, say): the
    process running the answer looks again, and sends the run from its first event."""
    monkeypatch.setattr(crossing, "RECHECK_EVERY", 0.2)
    agent = await _scripted_default_agent()
    session = await Session.objects.acreate(user=alice, agent=agent)
    layer = get_channel_layer()
    listener = await layer.new_channel()
    await layer.group_add(group_name(session.session_id), listener)
    elsewhere = followers.Followers(layer.redis_client(), "another-host:1:y")
    upstream.script(Reply(tokens=30, delay=0.05))
    try:
        handle = await engine.start_run(alice, "late", session_id=session.session_id)
        await asyncio.sleep(0.5)  # well into the answer, and looked at once
        await elsewhere.add([str(session.session_id)])
        sent = []
        while not sent or sent[-1]["event"] != "RunCompleted":
            sent.append((await asyncio.wait_for(layer.receive(listener), 5))["event"])
        await handle.wait()
        assert [e["seq"] for e in sent] == list(range(1, len(sent) + 1))
        assert sent[0]["event"] == "RunStarted"
    finally:
        await layer.group_discard(group_name(session.session_id), listener)
        await elsewhere.remove(str(session.session_id))
        await elsewhere.close()


async def test_more_sessions_at_once_than_the_pool_has_connections_lose_no_event(redis_layer):
    """One process streaming into more sessions than it has connections to Redis, each session
    watched from elsewhere: every event arrives, none is refused for want of a connection."""
    layer = get_channel_layer()
    sessions = [str(uuid.uuid4()) for _ in range(layers.POOL_SIZE + 50)]
    watchers = [await layer.new_channel() for _ in sessions]
    groups = [group_name(s) for s in sessions]
    # As many sockets joining their sessions' groups at once.
    await asyncio.gather(*map(layer.group_add, groups, watchers))
    for seq, session_id in enumerate(sessions):
        events.hub.bridge.forward({"event": "RunContent", "session_id": session_id, "seq": seq})
    await events.drain()
    received = await asyncio.wait_for(asyncio.gather(*(layer.receive(w) for w in watchers)), 10)
    assert [m["event"]["session_id"] for m in received] == sessions
    assert [m["event"]["seq"] for m in received] == list(range(len(sessions)))
    await asyncio.gather(*map(layer.group_discard, groups, watchers))
