"""A database that cannot take writes (its disk full, or read-only): the user is told, and
nothing is half-written.

SQLite answers SQLITE_FULL for real once the file may not grow (`PRAGMA max_page_count`), and
SQLITE_READONLY under `PRAGMA query_only`; both are set on the connection that writes runs.
"""

from __future__ import annotations

import asyncio
import html

import pytest
from asgiref.sync import sync_to_async
from django.db import DatabaseError, connection

from sessions_app import engine
from sessions_app.engine import liveness, store
from sessions_app.engine.dbthread import in_db_thread
from sessions_app.engine.errors import UNSAVED
from sessions_app.models import Message, Run, RunStatus, Session
from testkit.upstream import Reply
from tests.support.apiclient import asgi_client
from tests.support.chattab import open_tab
from tests.support.waiting import until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's pragmas make the fault"),
]

# Longer than a page: storing it needs new pages, which a full disk cannot give.
LONG_QUESTION = "Why is the sky blue? " * 1000


def _pragma(sql: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql)


def _fill_the_disk() -> None:
    """From now on the file may not grow: what a full disk does to SQLite."""
    _pragma("VACUUM")  # no free pages left inside the file either
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA page_count")
        (pages,) = cursor.fetchone()
        cursor.execute(f"PRAGMA max_page_count = {pages}")


def _free_the_disk() -> None:
    _pragma("PRAGMA max_page_count = 1073741823")


def _read_only(on: bool) -> None:
    _pragma(f"PRAGMA query_only = {'ON' if on else 'OFF'}")


FAULTS = {
    "disk full": (_fill_the_disk, _free_the_disk, "full"),
    "read-only": (lambda: _read_only(True), lambda: _read_only(False), "read-only"),
}


async def counts() -> tuple[int, int, int]:
    return (
        await Session.objects.acount(),
        await Run.objects.acount(),
        await Message.objects.acount(),
    )


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_run_the_database_cannot_store_answers_503_and_writes_nothing(
    alice, agent, upstream, fault
):
    cause, cure, word = FAULTS[fault]
    client = await sync_to_async(asgi_client)(alice)
    first = await client.post("/api/runs", {"input": "hello"})
    assert first.status_code == 200
    session_id = first.json()["session_id"]
    before = await counts()

    await in_db_thread(cause)()
    try:
        for body in ({"input": LONG_QUESTION}, {"input": LONG_QUESTION, "session_id": session_id}):
            response = await client.post("/api/runs", body)
            assert response.status_code == 503, response.body
            detail = response.json()["detail"]
            assert word in detail and "nothing was saved" in detail
        assert await counts() == before
    finally:
        await in_db_thread(cure)()
    again = await client.post("/api/runs", {"input": LONG_QUESTION, "session_id": session_id})
    assert again.status_code == 200 and again.json()["status"] == "COMPLETED"


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_message_the_database_cannot_store_is_refused_visibly_in_the_chat(
    alice, agent, upstream, fault
):
    cause, cure, word = FAULTS[fault]
    tab = await open_tab(alice)
    await in_db_thread(cause)()
    try:
        await tab.send(action="send", input=LONG_QUESTION)
        notice = html.unescape(await tab.until('data-testid="chat-notice"'))
        assert word in notice and "nothing was saved" in notice
        assert await counts() == (0, 0, 0)
    finally:
        await in_db_thread(cure)()
    # The socket stays open, and once the database takes writes again the message goes through.
    await tab.send(action="send", input="hello again")
    await tab.until('data-run-status="completed"')
    assert await counts() == (1, 1, 2)
    await tab.close()


async def test_an_answer_ending_while_the_database_refuses_writes_is_saved_once_it_takes_them(
    alice, agent, upstream, settings
):
    settings.PARLEY_CHECKPOINT_INTERVAL = 0.1
    upstream.script(Reply(tokens=30, delay=0.02))
    handle = await engine.start_run(alice, "count")
    await until(lambda: "tok3 " in handle.stream.content_so_far(), "a piece of the answer")
    await in_db_thread(_read_only)(True)
    try:
        # The answer streams to its end; its saves are refused meanwhile.
        await until(lambda: "tok29 " in handle.stream.content_so_far(), "the whole answer")
        await asyncio.sleep(0.5)
        assert not handle.task.done()
    finally:
        await in_db_thread(_read_only)(False)
    run = await handle.wait()
    expected = "".join(f"tok{i} " for i in range(30))
    assert (run.status, run.content) == (RunStatus.COMPLETED, expected)
    stored = [(m.role, m.content) async for m in Message.objects.filter(run=run).order_by("order")]
    assert stored == [("user", "count"), ("assistant", expected)]
    assert handle.stream.events[-1]["event"] == "RunCompleted"


async def test_an_answer_the_database_never_takes_ends_its_stream_and_is_interrupted_later(
    alice, agent, upstream, settings, monkeypatch
):
    settings.PARLEY_CHECKPOINT_INTERVAL = 0.1
    monkeypatch.setattr(store, "FINISH_PATIENCE", 0.5)
    upstream.script(Reply(tokens=30, delay=0.02))
    handle = await engine.start_run(alice, "count")

    async def checkpointed() -> bool:
        return "tok3 " in (await Run.objects.aget(pk=handle.run_id)).content

    await until(checkpointed, "a checkpoint of the partial answer")
    await in_db_thread(_read_only)(True)
    try:
        with pytest.raises(DatabaseError):
            await handle.wait()
    finally:
        await in_db_thread(_read_only)(False)
    last = handle.stream.events[-1]
    assert (last["event"], last["status"], last["error"]) == ("RunError", "INTERRUPTED", UNSAVED)
    assert last["content"] == "".join(f"tok{i} " for i in range(30))
    # Kept as last saved, and marked interrupted like the runs of a process that died.
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == RunStatus.RUNNING and run.content.startswith("tok0 tok1 tok2 tok3 ")
    assert len(await sync_to_async(liveness.reap_stale_runs)()) == 1
    await run.arefresh_from_db()
    assert run.status == RunStatus.INTERRUPTED
    answer = await Message.objects.aget(run=run, role="assistant")
    assert answer.content == run.content
