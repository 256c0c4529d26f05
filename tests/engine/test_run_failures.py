"""What a user keeps when the model fails, is stopped, or the server dies mid-answer."""

from __future__ import annotations

import asyncio
import html
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from sessions_app import engine
from sessions_app.engine import lifespan, liveness, store
from sessions_app.engine.registry import registry
from sessions_app.llm.usage import Usage
from sessions_app.models import LLMCall, Message, Role, Run, RunStatus, Session
from sessions_app.process import HOSTNAME
from testkit.upstream import Reply
from tests.conftest import ROOT, subprocess_env
from tests.support.apiclient import asgi_client, read_events
from tests.support.chattab import open_tab
from tests.support.processes import a_dead_worker
from tests.support.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)


async def finish(user, text: str, **kwargs) -> tuple[Run, list[dict]]:
    handle = await engine.start_run(user, text, **kwargs)
    events = [event async for event in handle.events()]
    return await handle.wait(), events


async def stored_messages(run: Run) -> list[tuple[str, str]]:
    rows = Message.objects.filter(run=run).order_by("order")
    return [(m.role, m.content) async for m in rows]


async def test_an_upstream_error_leaves_an_error_run_and_keeps_the_question(alice, agent, upstream):
    upstream.script(Reply(status=500, error_message="the GPU caught fire"))
    run, events = await finish(alice, "important question")
    assert run.status == RunStatus.ERROR
    assert run.error == "The model endpoint answered 500: the GPU caught fire"
    assert events[-1]["event"] == "RunError" and events[-1]["error"] == run.error
    assert await stored_messages(run) == [("user", "important question"), ("assistant", "")]
    # The session stays usable.
    again, _ = await finish(alice, "retry", session_id=run.session_id)
    assert again.status == RunStatus.COMPLETED and again.content == "Echo: retry"


async def test_an_upstreams_long_error_dump_is_clipped_to_one_readable_line(alice, agent, upstream):
    dump = "7 validation errors:\n" + "\n".join(
        f"  /srv/app/server.py line {n}" for n in range(200)
    )
    upstream.script(Reply(status=500, error_message=dump))

    run, _ = await finish(alice, "question")

    assert run.error.startswith("The model endpoint answered 500: 7 validation errors: /srv/app")
    assert run.error.endswith("…") and "\n" not in run.error
    assert len(run.error) < 400


async def test_a_rate_limited_upstream_is_reported_readably(alice, agent, upstream):
    upstream.script(Reply(status=429, error_message="Rate limit reached"))
    run, _ = await finish(alice, "hi")
    assert run.status == RunStatus.ERROR
    assert run.error == "The model endpoint answered 429: Rate limit reached"


@pytest.mark.parametrize(
    "headers,when",
    [
        ({"Retry-After": "20"}, "20 seconds"),
        ({"Retry-After": "1"}, "1 second"),
        ({"retry-after-ms": "1500"}, "2 seconds"),
        ({"Retry-After": format_datetime(datetime.now(UTC) + timedelta(hours=1), True)}, "seconds"),
        ({"Retry-After": "soon"}, None),
    ],
)
async def test_a_rate_limited_upstream_says_when_to_retry_and_keeps_the_question(
    alice, agent, upstream, headers, when
):
    upstream.script(Reply(status=429, error_message="Rate limit reached", headers=headers))
    run, events = await finish(alice, "important question")
    assert run.status == RunStatus.ERROR
    said = "The model endpoint answered 429: Rate limit reached"
    if when is None:  # a value that is neither seconds nor a date says nothing
        assert run.error == said
    else:
        assert run.error.startswith(f"{said}. Try again in ") and run.error.endswith(f" {when}.")
    assert events[-1]["event"] == "RunError" and events[-1]["error"] == run.error
    assert await stored_messages(run) == [("user", "important question"), ("assistant", "")]
    again, _ = await finish(alice, "now?", session_id=run.session_id)
    assert again.status == RunStatus.COMPLETED and again.content == "Echo: now?"
    assert again.position == 2


async def test_a_rate_limited_upstream_reaches_sse_and_chat_clients_as_run_error(
    alice, agent, upstream
):
    said = "The model endpoint answered 429: slow down. Try again in 30 seconds."
    upstream.script(
        *[Reply(status=429, error_message="slow down", headers={"Retry-After": "30"})] * 2
    )
    client = await sync_to_async(asgi_client)(alice)
    response = await client.open("POST", "/api/runs", {"input": "by the API", "stream": True})
    events = await read_events(response)
    assert [kind for kind, _ in events] == ["RunStarted", "RunError"]
    assert events[-1][1]["error"] == said
    session_id = events[-1][1]["session_id"]

    tab = await open_tab(alice)
    await tab.send(action="send", session_id=session_id, input="by the chat")
    final = await tab.until('data-run-status="error"')
    assert 'data-testid="run-error"' in final and said in html.unescape(final)
    # The limit lifted, the same chat answers.
    await tab.send(action="send", session_id=session_id, input="and now")
    await tab.until("Echo: and now")
    runs = [(r.status, r.input) async for r in Run.objects.filter(session_id=session_id)]
    assert sorted(runs, key=lambda r: r[1]) == [
        (RunStatus.COMPLETED, "and now"),
        (RunStatus.ERROR, "by the API"),
        (RunStatus.ERROR, "by the chat"),
    ]
    await tab.close()


async def test_a_silent_upstream_times_out(alice, agent, upstream, settings):
    settings.LLM_READ_TIMEOUT = 0.5
    upstream.script(Reply(hang=True))
    run, events = await finish(alice, "anyone there?")
    assert run.status == RunStatus.ERROR
    assert run.error == "The model did not answer in time."
    assert events[-1]["event"] == "RunError"


async def test_an_unreachable_upstream_is_an_error_not_a_crash(alice, agent, upstream, settings):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead_port = sock.getsockname()[1]
    settings.LLM_BASE_URL = f"http://127.0.0.1:{dead_port}/v1"
    run, _ = await finish(alice, "hello?")
    assert run.status == RunStatus.ERROR
    assert run.error == "The model endpoint could not be reached or closed the connection."
    assert await stored_messages(run) == [("user", "hello?"), ("assistant", "")]


async def test_a_cut_stream_keeps_the_partial_answer(alice, agent, upstream):
    upstream.script(Reply("one two three four five six", cut_after=3))
    run, events = await finish(alice, "count")
    assert run.status == RunStatus.ERROR
    assert run.content == "one two three "
    assert events[-1]["content"] == "one two three "
    assert await stored_messages(run) == [("user", "count"), ("assistant", "one two three ")]
    assert run.usage_estimated is True and run.output_tokens > 0


async def test_an_error_event_mid_stream_keeps_the_partial_answer(alice, agent, upstream):
    # The upstream had already answered 200 when it failed, so the error arrives as an event.
    upstream.script(Reply("one two three four", error_after=2, error_message="model overloaded"))
    run, events = await finish(alice, "count")
    assert run.status == RunStatus.ERROR
    assert run.error == "The model endpoint failed: model overloaded"
    assert run.content == "one two "
    assert events[-1]["event"] == "RunError" and events[-1]["content"] == "one two "
    assert await stored_messages(run) == [("user", "count"), ("assistant", "one two ")]


async def test_cancel_closes_the_upstream_request_and_keeps_the_partial(alice, agent, upstream):
    upstream.script(Reply(tokens=100, delay=0.05))
    handle = await engine.start_run(alice, "go on")
    await until(lambda: "tok1 " in handle.stream.content_so_far(), "two pieces of the answer")
    run = await engine.cancel_run(alice, handle.run_id)
    assert run.status == RunStatus.CANCELLED
    assert run.content.startswith("tok0 tok1 ")
    assert len(run.content.split()) < 100
    assert run.error == ""
    events = handle.stream.events
    assert events[-1]["event"] == "RunCancelled" and events[-1]["content"] == run.content
    await until(lambda: upstream.disconnects >= 1, "the model's request closed")
    assert await stored_messages(run) == [("user", "go on"), ("assistant", run.content)]


async def test_cancelling_a_finished_run_changes_nothing(alice, agent, upstream):
    run, _ = await finish(alice, "done")
    again = await engine.cancel_run(alice, run.run_id)
    assert again.status == RunStatus.COMPLETED and again.content == run.content


async def test_partial_answers_are_checkpointed_while_streaming(alice, agent, upstream, settings):
    settings.PARLEY_CHECKPOINT_INTERVAL = 0.2
    upstream.script(Reply(tokens=60, delay=0.04))
    handle = await engine.start_run(alice, "slowly")

    async def checkpointed() -> bool:
        return (await Run.objects.aget(pk=handle.run_id)).content_seq > 0

    await until(checkpointed, "a checkpoint of the partial answer")
    saved = await Run.objects.aget(pk=handle.run_id)
    assert saved.status == RunStatus.RUNNING
    assert saved.content.startswith("tok0 ") and len(saved.content.split()) < 60
    assert 0 < saved.content_seq <= handle.stream.seq
    run = await handle.wait()
    assert len(run.content.split()) == 60


async def test_checkpoints_of_many_runs_are_saved_together_and_stop_only_the_cancelled(
    alice, agent, upstream, settings
):
    settings.PARLEY_CHECKPOINT_INTERVAL = 0.1
    upstream.script(*[Reply(tokens=60, delay=0.02)] * 4)
    handles = await asyncio.gather(*(engine.start_run(alice, f"run {n}") for n in range(4)))
    ids = [h.run_id for h in handles]

    async def all_checkpointed() -> bool:
        return not await Run.objects.filter(pk__in=ids, content_seq=0).aexists()

    await until(all_checkpointed, "a checkpoint of each partial answer")
    saved = [await Run.objects.aget(pk=h.run_id) for h in handles]
    assert all(s.status == RunStatus.RUNNING and s.content.startswith("tok0 ") for s in saved)
    assert all(0 < s.content_seq <= h.stream.seq for s, h in zip(saved, handles, strict=True))
    # Another process asks one of them to stop: the next checkpoint stops it, and only it.
    await Run.objects.filter(pk=handles[1].run_id).aupdate(cancel_requested=True)
    done = [await h.wait() for h in handles]
    assert [r.status for r in done] == [
        RunStatus.COMPLETED,
        RunStatus.CANCELLED,
        RunStatus.COMPLETED,
        RunStatus.COMPLETED,
    ]
    assert len(done[1].content.split()) < 60
    assert [len(r.content.split()) for r in done if r.status == RunStatus.COMPLETED] == [60] * 3


async def test_a_cancel_from_another_process_stops_the_run(alice, agent, upstream, settings):
    settings.PARLEY_CHECKPOINT_INTERVAL = 0.1
    upstream.script(Reply(tokens=200, delay=0.02))
    handle = await engine.start_run(alice, "long")
    await until(lambda: handle.stream.content_so_far(), "a piece of the answer")
    # What another process's cancel does: it can only flag the row.
    await Run.objects.filter(pk=handle.run_id).aupdate(cancel_requested=True)
    run = await asyncio.wait_for(handle.wait(), 5)
    assert run.status == RunStatus.CANCELLED
    assert 0 < len(run.content.split()) < 200


async def test_a_run_marked_interrupted_elsewhere_keeps_that_record_when_it_ends(
    alice, agent, upstream
):
    upstream.script(Reply(tokens=30, delay=0.02))
    handle = await engine.start_run(alice, "long")
    await until(lambda: handle.stream.content_so_far(), "a piece of the answer")
    # What another process's reaper does when this one looks dead.
    await Run.objects.filter(pk=handle.run_id).aupdate(
        status=RunStatus.INTERRUPTED, error="The server stopped"
    )
    await asyncio.wait_for(handle.wait(), 5)
    stored = await Run.objects.aget(pk=handle.run_id)
    assert (stored.status, stored.error) == (RunStatus.INTERRUPTED, "The server stopped")


SERVER_THAT_DIES = textwrap.dedent(
    """
    import asyncio, django, os, sys
    django.setup()
    from django.contrib.auth import get_user_model
    from sessions_app import events
    from sessions_app import engine

    async def main():
        engine.lifespan.start()  # as serve starts it
        user = await get_user_model().objects.aget(username="alice")
        handle = await engine.start_run(user, "tell me a long story")
        print(handle.run_id, flush=True)
        await handle.wait()
        await events.drain()
        # Skip the loop's teardown, where a Redis client's cancelled blocking read can keep it
        # waiting: everything this process had to say has been said.
        os._exit(0)

    asyncio.run(main())
    """
)


def test_runs_of_a_server_that_died_are_marked_interrupted(alice, agent, upstream):
    upstream.script(Reply(tokens=500, delay=0.05))
    child = subprocess.Popen(
        [sys.executable, "-c", SERVER_THAT_DIES],
        cwd=ROOT,
        env=subprocess_env(
            DJANGO_SETTINGS_MODULE="project.settings", PARLEY_CHECKPOINT_INTERVAL="0.1"
        ),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        run_id = child.stdout.readline().strip()
        assert run_id, "the child process did not start a run"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if len(Run.objects.get(pk=run_id).content.split()) >= 5:
                break
            time.sleep(0.1)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    run = Run.objects.get(pk=run_id)
    assert run.status == RunStatus.RUNNING  # nobody finished it
    partial = run.content
    assert partial.startswith("tok0 ")

    assert len(liveness.reap_stale_runs()) == 1  # what a server does when it starts

    run.refresh_from_db()
    assert run.status == RunStatus.INTERRUPTED
    assert run.error == "The server stopped before this answer finished."
    assert run.content == partial
    assistant = Message.objects.get(run=run, role="assistant")
    assert assistant.content == partial
    # The session is usable again.
    assert liveness.reap_stale_runs() == []


def _running_on(alice, agent, worker: str, heartbeat_age: float) -> Run:
    session = Session.objects.create(user=alice, agent=agent)
    return Run.objects.create(
        session=session,
        user=alice,
        agent=agent,
        position=1,
        status=RunStatus.RUNNING,
        input="x",
        worker=worker,
        heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age),
    )


def test_a_live_process_elsewhere_keeps_its_run_until_it_goes_stale(alice, agent, settings):
    run = _running_on(alice, agent, "another-host:123:abc", heartbeat_age=0)
    assert liveness.reap_stale_runs() == []
    stale = timezone.now() - timedelta(seconds=settings.PARLEY_STALE_RUN_AFTER + 1)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=stale)
    assert len(liveness.reap_stale_runs()) == 1


def test_a_live_process_of_this_host_keeps_its_run_however_late_its_heartbeat(
    alice, agent, settings
):
    # As after the database was away for longer than the stale period.
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as alive:
        try:
            worker = f"{HOSTNAME}:{alive.pid}:abc"
            run = _running_on(alice, agent, worker, settings.PARLEY_STALE_RUN_AFTER * 3)
            assert liveness.reap_stale_runs() == []
        finally:
            alive.kill()
    alive.wait()
    assert liveness.reap_stale_runs() == [(run.pk, run.session_id)]


def test_no_run_elsewhere_goes_stale_while_this_process_cannot_reach_the_database(
    alice, agent, settings, monkeypatch
):
    _running_on(alice, agent, "another-host:123:abc", settings.PARLEY_STALE_RUN_AFTER + 1)
    monkeypatch.setattr(registry, "heartbeat_failed_at", time.monotonic())
    assert liveness.reap_stale_runs() == []
    long_ago = time.monotonic() - settings.PARLEY_STALE_RUN_AFTER - 1
    monkeypatch.setattr(registry, "heartbeat_failed_at", long_ago)
    assert len(liveness.reap_stale_runs()) == 1


async def test_a_watching_tab_sees_a_run_of_a_dead_process_interrupted_untouched(
    alice, agent, settings
):
    settings.PARLEY_HEARTBEAT_INTERVAL = 0.2
    session = await Session.objects.acreate(user=alice, agent=agent)
    run = await Run.objects.acreate(
        session=session,
        user=alice,
        agent=agent,
        position=1,
        status=RunStatus.RUNNING,
        input="a long question",
        content="the answer up to its last checkpoint",
        worker=a_dead_worker(),
        heartbeat_at=timezone.now(),
    )
    await Message.objects.acreate(run=run, session=session, order=0, role="user", content=run.input)
    await Message.objects.acreate(run=run, session=session, order=1, role="assistant", content="")
    tab = await open_tab(alice)
    await tab.send(action="watch", session_id=str(session.session_id))
    # Nobody sends, stops or reloads: this process's heartbeat finds the run's process gone.
    frame = await tab.until(f'data-run-id="{run.run_id}" data-run-status="interrupted"')
    assert "the answer up to its last checkpoint" in frame
    # The page may send again: Send enabled, no Stop.
    assert '<button type="submit" class="btn" data-testid="chat-send">' in frame
    assert "chat-stop" not in frame
    await run.arefresh_from_db()
    assert run.status == RunStatus.INTERRUPTED
    assert await stored_messages(run) == [
        ("user", "a long question"),
        ("assistant", "the answer up to its last checkpoint"),
    ]
    await tab.close()


CONTINUE_IN_NEW_PROCESS = textwrap.dedent(
    """
    import asyncio, django, os, sys
    django.setup()
    from django.contrib.auth import get_user_model
    from sessions_app import events
    from sessions_app import engine

    async def main():
        engine.lifespan.start()  # as serve starts it
        user = await get_user_model().objects.aget(username="alice")
        handle = await engine.start_run(user, "What was my last question?", session_id=sys.argv[1])
        run = await handle.wait()
        print(run.status, flush=True)
        await events.drain()
        os._exit(0)

    asyncio.run(main())
    """
)


async def test_a_session_continued_from_a_new_process_has_its_history(alice, agent, upstream):
    first, _ = await finish(alice, "What is the capital of France?")
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CONTINUE_IN_NEW_PROCESS,
        str(first.session_id),
        cwd=ROOT,
        env=subprocess_env(DJANGO_SETTINGS_MODULE="project.settings"),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(child.communicate(), 60)
    assert out.decode().strip() == "COMPLETED"
    assert [(m["role"], m["content"]) for m in upstream.requests[-1]["messages"]] == [
        ("user", "What is the capital of France?"),
        ("assistant", "Echo: What is the capital of France?"),
        ("user", "What was my last question?"),
    ]


async def test_the_engine_runs_on_the_one_loop_it_was_started_on(alice, agent, upstream):
    # Another loop of this process (a thread's, or a test tool's) neither takes the engine over
    # nor starts runs, which would be vouched for and cancelled from the wrong thread.
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()

    async def start_there() -> None:
        lifespan.start()

    async def ask_there() -> None:
        await engine.start_run(alice, "from elsewhere")

    try:
        with pytest.raises(RuntimeError, match="already running"):
            asyncio.run_coroutine_threadsafe(start_there(), other).result(5)
        with pytest.raises(RuntimeError, match="not running on this event loop"):
            asyncio.run_coroutine_threadsafe(ask_there(), other).result(5)
        liveness.ensure_heartbeat()  # what a run started here does
        heartbeat = registry.heartbeat
        assert heartbeat is not None and heartbeat.get_loop() is asyncio.get_running_loop()
        liveness.ensure_heartbeat()  # and once here is enough
        assert registry.heartbeat is heartbeat and not heartbeat.done()
        run = await (await engine.start_run(alice, "from here")).wait()
        assert run.status == RunStatus.COMPLETED
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(5)
        other.close()


async def test_a_finish_tried_again_after_it_was_committed_writes_its_calls_once(
    alice, agent, upstream
):
    # As when the connection is lost while the first try commits: the try is made again.
    run, _ = await finish(alice, "hello")
    answer = await Message.objects.aget(run=run, role=Role.ASSISTANT)
    call = store.Call(Usage(input_tokens=5, output_tokens=3), run.model, 0.1, 0.2, True, [])
    again = store.Finish(
        run, RunStatus.COMPLETED, run.content, "", [call], answer.pk, run.content, 0.1, True
    )
    calls = LLMCall.objects.filter(run=run)
    before = await calls.acount()
    await sync_to_async(store._finish_runs)([again])
    assert await calls.acount() == before == 1
