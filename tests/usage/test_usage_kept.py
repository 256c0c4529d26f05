"""Deleting a conversation keeps its accounting: the model calls stay, counted in /api/metrics
and the admin's totals, without a word of the conversation; the per-minute limits count what
was started, so "run, delete" meets them; new sessions have a per-minute limit of their own."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from django.apps import apps
from django.db import models
from django.test import Client

from sessions_app.models import CallKind, LLMCall, Run, Session
from testkit.upstream import Reply
from tests.support.apiclient import asgi_client
from tests.support.asgiclient import ASGIClient
from tests.support.chattab import open_tab

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "marmalade-under-the-stairs"


@pytest.fixture
async def as_alice(alice) -> ASGIClient:
    return await sync_to_async(asgi_client)(alice)


@pytest.fixture
def priced(upstream, settings) -> None:
    settings.LLM_PRICES = "scripted=1000:2000"


async def run(client: ASGIClient, text: str, session_id: str | None = None) -> dict:
    body = {"input": text, **({"session_id": session_id} if session_id else {})}
    response = await client.post("/api/runs", body)
    assert response.status_code == 200, response.json()
    return response.json()


async def delete(client: ASGIClient, session_id: str) -> None:
    response = await client.request("DELETE", f"/api/sessions/{session_id}")
    assert response.status_code == 204


async def metrics(client: ASGIClient, group_by: str = "day") -> list[dict]:
    response = await client.get(f"/api/metrics?group_by={group_by}")
    assert response.status_code == 200
    return response.json()["data"]


# -- the rate limits ---------------------------------------------------------------------------


async def test_run_then_delete_in_a_loop_still_meets_the_run_limit(
    as_alice, agent, upstream, settings
):
    settings.PARLEY_RUNS_PER_MINUTE = 3
    for n in range(3):
        await delete(as_alice, (await run(as_alice, f"run {n}"))["session_id"])
    assert await Run.objects.acount() == 0

    response = await as_alice.post("/api/runs", {"input": "one too many"})

    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "Too many runs" in response.json()["detail"]


async def test_creating_sessions_beyond_the_rate_answers_429_on_every_door(
    as_alice, agent, upstream, settings
):
    settings.PARLEY_SESSIONS_PER_MINUTE = 2
    made = await as_alice.post("/api/sessions", {})
    assert made.status_code == 201
    kept = made.json()["session_id"]
    second = await as_alice.post("/api/sessions", {})
    assert second.status_code == 201
    await delete(as_alice, second.json()["session_id"])  # deleting gives nothing back

    refused = await as_alice.post("/api/sessions", {})
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "Too many new sessions" in refused.json()["detail"]
    # A run that would make a session is refused too; one in an existing session is not.
    assert (await as_alice.post("/api/runs", {"input": "new chat"})).status_code == 429
    await run(as_alice, "in the old one", kept)
    assert await Session.objects.acount() == 1

    settings.PARLEY_SESSIONS_PER_MINUTE = 0
    assert (await as_alice.post("/api/sessions", {})).status_code == 201


async def test_the_chat_says_new_chats_are_started_too_fast(alice, agent, upstream, settings):
    settings.PARLEY_SESSIONS_PER_MINUTE = 1
    tab = await open_tab(alice)
    await tab.send(action="send", input="first chat")
    await tab.until('data-run-status="completed"')
    await tab.send(action="send", input="second chat", session_id="")
    assert "starting new chats too fast" in await tab.until("chat-notice")
    assert await Session.objects.filter(user=alice).acount() == 1
    await tab.close()


# -- usage stays -------------------------------------------------------------------------------


async def test_metrics_keep_a_deleted_sessions_tokens_cost_and_runs(
    as_alice, agent, upstream, priced
):
    for n in range(2):
        upstream.script(Reply(f"answer {n}", prompt_tokens=40, completion_tokens=7))
    first = await run(as_alice, "hello")
    await run(as_alice, "and again", first["session_id"])
    groupings = ("day", "model", "agent", "user")
    before = {g: await metrics(as_alice, g) for g in groupings}
    assert (before["day"][0]["total_tokens"], before["day"][0]["runs"]) == (94, 2)

    await delete(as_alice, first["session_id"])

    after = {g: await metrics(as_alice, g) for g in groupings}
    assert after == before
    assert after["day"][0]["cost"] == pytest.approx(2 * (40 * 1000 + 7 * 2000) / 1e6)


def text_columns() -> list[tuple[type[models.Model], str]]:
    """Every text and JSON column of Parley's own tables."""
    kinds = (models.CharField, models.TextField, models.JSONField)
    return [
        (model, field.attname)
        for model in apps.get_app_config("sessions_app").get_models()
        for field in model._meta.concrete_fields
        if isinstance(field, kinds)
    ]


def rows_saying(text: str) -> list[str]:
    found = []
    for model, column in text_columns():
        for value in model.objects.values_list(column, flat=True):
            if text in (value if isinstance(value, str) else json.dumps(value)):
                found.append(f"{model.__name__}.{column}")
    return found


async def test_a_deleted_sessions_calls_stay_without_a_word_of_it(
    as_alice, agent, upstream, priced, settings
):
    settings.PARLEY_GENERATE_TITLES = True
    upstream.script(Reply(f"So {SECRET}, then."), Reply(f"Title {SECRET}"))
    first = await run(as_alice, f"Where is the {SECRET}?")
    session_id = first["session_id"]
    await until_exists(LLMCall.objects.filter(kind=CallKind.TITLE))
    upstream.script(Reply(status=400, error_message=f"cannot talk about {SECRET}"))
    answer = await as_alice.post("/api/runs", {"input": SECRET, "session_id": session_id})
    assert answer.status_code in (502, 504)
    calls = [c async for c in LLMCall.objects.values("kind", "ok", "total_tokens", "cost")]
    said = await sync_to_async(rows_saying)(SECRET)
    assert {"LLMCall.sent_messages", "LLMCall.error", "Message.content"} <= set(said), said

    await delete(as_alice, session_id)

    assert await sync_to_async(rows_saying)(SECRET) == []
    kept = [c async for c in LLMCall.objects.values("kind", "ok", "total_tokens", "cost")]
    assert sorted(kept, key=str) == sorted(calls, key=str)
    assert {c["kind"] for c in kept} == {CallKind.CHAT, CallKind.TITLE}
    assert [c["ok"] for c in kept if c["kind"] == CallKind.CHAT].count(False) == 1


async def until_exists(rows, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await rows.aexists():
        assert asyncio.get_running_loop().time() < deadline, "never came"
        await asyncio.sleep(0.05)


def test_the_admins_user_list_keeps_counting_a_deleted_sessions_tokens(alice, agent):
    from tests.support.apiclient import api_client, stored_run

    session = Session.objects.create(user=alice, agent=agent)
    stored_run(session, "question", "answer", tokens=(300, 33))
    admin = type(alice).objects.create_superuser("root", password="root-pass-123")
    client = Client()
    client.force_login(admin)
    assert "333" in client.get("/admin/sessions_app/user/").content.decode()

    assert api_client(alice).delete(f"/api/sessions/{session.pk}").status_code == 204

    assert "333" in client.get("/admin/sessions_app/user/").content.decode()


def test_deleting_a_user_takes_their_usage_with_them(alice, bob, agent):
    from sessions_app.models import DeletedRun, DeletedSession
    from tests.support.apiclient import api_client, stored_run

    for owner in (alice, bob):
        session = Session.objects.create(user=owner, agent=agent)
        stored_run(session, "question", "answer")
        assert api_client(owner).delete(f"/api/sessions/{session.pk}").status_code == 204
    Session.objects.create(user=alice, agent=agent)
    stored_run(Session.objects.get(user=alice), "question", "answer")

    alice.delete()

    assert list(DeletedRun.objects.values_list("user", flat=True)) == [bob.pk]
    assert list(LLMCall.objects.values_list("user", flat=True)) == [bob.pk]
    assert list(DeletedSession.objects.values_list("user", flat=True)) == [bob.pk]


# -- a run deleted on its own ------------------------------------------------------------------


def secret_run(session: Session, secret: str) -> Run:
    """A stored run whose every text names `secret`: its messages, its call's error and what
    that call was sent."""
    from tests.support.apiclient import stored_run

    run = stored_run(session, f"Where is the {secret}?", f"Under the {secret}.")
    LLMCall.objects.filter(run=run).update(
        sent_messages=[{"role": "user", "content": f"Where is the {secret}?"}],
        error=f"cannot talk about {secret}",
    )
    return run


def staff_client() -> Client:
    from sessions_app.models import User

    client = Client()
    client.force_login(User.objects.create_superuser("root", password="root-pass-123"))
    return client


@pytest.mark.parametrize("door", ["delete page", "delete selected"])
def test_a_run_deleted_alone_in_the_admin_leaves_its_call_without_a_word_of_it(alice, agent, door):
    session = Session.objects.create(user=alice, agent=agent)
    gone = secret_run(session, SECRET)
    kept = secret_run(session, "teapot-in-the-attic")
    calls = sorted(LLMCall.objects.values_list("total_tokens", flat=True))
    client = staff_client()

    if door == "delete page":
        response = client.post(f"/admin/sessions_app/run/{gone.pk}/delete/", {"post": "yes"})
    else:
        form = {"action": "delete_selected", "_selected_action": [str(gone.pk)], "post": "yes"}
        response = client.post("/admin/sessions_app/run/", form)

    assert response.status_code == 302
    assert list(Run.objects.values_list("pk", flat=True)) == [kept.pk]
    assert rows_saying(SECRET) == []
    assert "LLMCall.sent_messages" in rows_saying("teapot-in-the-attic")  # the other run's stay
    assert sorted(LLMCall.objects.values_list("total_tokens", flat=True)) == calls


# -- what deleting costs -----------------------------------------------------------------------


def test_deleting_a_session_costs_the_same_queries_with_50_runs_as_with_5(alice, agent):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessions_app.models import DeletedRun
    from tests.support.apiclient import api_client, stored_run

    costs, texts_read = [], []
    for runs in (5, 50):
        client = api_client(alice)  # a new token each time: its first use is written down
        session = Session.objects.create(user=alice, agent=agent)
        for n in range(runs):
            stored_run(session, f"question {n} {SECRET}", f"answer {n}")
        with CaptureQueriesContext(connection) as queries:
            assert client.delete(f"/api/sessions/{session.pk}").status_code == 204
        costs.append(len(queries))
        texts_read += [q["sql"] for q in queries if '"input"' in q["sql"]]

    assert costs[0] == costs[1]
    assert DeletedRun.objects.count() == 55
    assert texts_read == []  # what a run's record needs is read, not what was said in it


# -- each limit counts its own kind ------------------------------------------------------------


def test_more_runs_than_their_limit_do_not_hide_the_sessions_from_theirs(alice, agent, settings):
    from sessions_app.services import ratelimit
    from tests.support.apiclient import stored_run

    settings.PARLEY_RUNS_PER_MINUTE = 2
    settings.PARLEY_SESSIONS_PER_MINUTE = 2
    first = Session.objects.create(user=alice, agent=agent)
    Session.objects.create(user=alice, agent=agent)
    for n in range(5):  # stored while the run limit was higher, newer than both sessions
        stored_run(first, f"question {n}", f"answer {n}")

    session_only, both = ratelimit.refusals(alice, [(ratelimit.SESSION,), (ratelimit.RUN,)])

    assert isinstance(session_only, ratelimit.RateLimited)
    assert session_only.kind == ratelimit.SESSION
    assert isinstance(both, ratelimit.RateLimited) and both.kind == ratelimit.RUN
