"""Which session a `/v1` conversation is: named by a header or `metadata.session_id`, continued
when the caller's earlier turns are a session of theirs, forked when they differ; never another
user's."""

from __future__ import annotations

import asyncio

import openai
import pytest
from asgiref.sync import sync_to_async

from sessions_app.accounts import create_token
from sessions_app.models import Agent, Run, Session
from testkit.upstream import Reply
from tests.openai.conftest import sdk

pytestmark = pytest.mark.django_db(transaction=True)


async def talk(client, turns: list[str], **kwargs) -> list[dict]:
    """A client keeping its own history, as OpenAI clients do: each request sends it all."""
    messages: list[dict] = []
    for text in turns:
        messages.append({"role": "user", "content": text})
        answer = await client.chat.completions.create(
            model="assistant", messages=messages, **kwargs
        )
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})
    return messages


async def runs_by_session() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    async for run in Run.objects.order_by("session_id", "position"):
        found.setdefault(run.session_id, []).append(run.input)
    return found


async def test_a_conversation_held_from_a_client_is_one_session(client, upstream):
    await talk(client, ["one", "two", "three"])

    assert list((await runs_by_session()).values()) == [["one", "two", "three"]]
    # The agent saw the stored history, as a browser run would.
    assert [m["content"] for m in upstream.requests[-1]["messages"]] == [
        "one", "Echo: one", "two", "Echo: two", "three",
    ]  # fmt: skip


async def test_a_hundred_ten_turn_conversations_make_a_hundred_sessions(client, settings):
    settings.PARLEY_RUNS_PER_MINUTE = settings.PARLEY_SESSIONS_PER_MINUTE = 10_000
    conversations = [[f"c{c} turn {t}" for t in range(10)] for c in range(100)]

    await asyncio.gather(*(talk(client, turns) for turns in conversations))

    found = await runs_by_session()
    assert len(found) == 100
    assert sorted(found.values()) == sorted(conversations)


async def test_an_edited_turn_forks_a_new_session_linked_to_the_first(client):
    messages = await talk(client, ["one", "two"])
    first = await Session.objects.aget()
    edited = [messages[0], {"role": "assistant", "content": "Another answer"}, messages[2]]
    edited += [messages[3], {"role": "user", "content": "three"}]

    await client.chat.completions.create(model="assistant", messages=edited)

    fork = await Session.objects.exclude(pk=first.pk).aget()
    assert fork.metadata == {"forked_from": first.session_id}
    runs = [
        (r.input, r.content, r.source)
        async for r in Run.objects.filter(session=fork).order_by("position")
    ]
    # The client's turns are its history, said so (no model was asked); the new turn is a run.
    assert runs == [
        ("one", "Another answer", "history"),
        ("two", "Echo: two", "history"),
        ("three", "Echo: three", "openai"),
    ]
    assert [r.input async for r in Run.objects.filter(session=first)] == ["one", "two"]


async def test_a_named_session_is_made_on_first_use_then_continued(client, upstream):
    headers = {"X-Parley-Session-Id": "ticket-4711"}
    for text in ("first", "second"):
        await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": text}], extra_headers=headers
        )
    await client.chat.completions.create(
        model="assistant",
        messages=[{"role": "user", "content": "third"}],
        metadata={"session_id": "ticket-4711"},
    )

    assert await runs_by_session() == {"ticket-4711": ["first", "second", "third"]}
    assert [m["content"] for m in upstream.requests[-1]["messages"]][:2] == ["first", "Echo: first"]


async def test_open_webuis_chat_id_names_the_session(client):
    for text in ("a", "b"):
        await client.chat.completions.create(
            model="assistant",
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-OpenWebUI-Chat-Id": "owui-chat-1"},
        )
    assert await runs_by_session() == {"owui-chat-1": ["a", "b"]}


async def test_another_users_session_is_never_continued(client, bob, agent):
    bobs = await Session.objects.acreate(session_id="shared-name", user=bob, agent=agent)
    with pytest.raises(openai.ConflictError) as refused:
        await client.chat.completions.create(
            model="assistant",
            messages=[{"role": "user", "content": "let me in"}],
            extra_headers={"X-Parley-Session-Id": "shared-name"},
        )
    assert refused.value.body["code"] == "session_id_taken"
    assert not await Run.objects.filter(session=bobs).aexists()


async def test_another_users_identical_turns_are_not_continued(client, bob, agent, upstream):
    _, raw = await sync_to_async(create_token)(bob, "bob")
    async with sdk(raw) as bobs_client:
        await talk(bobs_client, ["hello"])
    await client.chat.completions.create(
        model="assistant",
        messages=[
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "Echo: hello"},
            {"role": "user", "content": "again"},
        ],
    )
    sessions = {s.user_id: s async for s in Session.objects.all()}
    assert len(sessions) == 2
    alices = [r.input async for r in Run.objects.filter(session__user__username="alice")]
    assert alices == ["hello", "again"]
    assert "forked_from" not in (await Session.objects.aget(user__username="alice")).metadata


async def test_a_session_of_another_agent_is_refused(client, agent):
    await client.chat.completions.create(
        model="assistant",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"X-Parley-Session-Id": "mine"},
    )
    await Agent.objects.acreate(name="Other", model="scripted")
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="other",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Parley-Session-Id": "mine"},
        )
    assert refused.value.body["param"] == "model"


async def test_the_readmes_example_continues_one_session(client):
    messages: list = [{"role": "user", "content": "Hello!"}]
    answer = await client.chat.completions.create(model="assistant", messages=messages)
    messages += [answer.choices[0].message, {"role": "user", "content": "And again?"}]
    stream = await client.chat.completions.create(model="assistant", messages=messages, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert text == "Echo: And again?"
    assert list((await runs_by_session()).values()) == [["Hello!", "And again?"]]


async def test_two_first_turns_naming_one_new_session_at_once_make_one_session(client, upstream):
    upstream.script(Reply("First.", first_delay=0.3), Reply("Second.", first_delay=0.3))
    headers = {"X-Parley-Session-Id": "born-twice"}

    async def ask(text: str) -> str:
        try:
            await client.chat.completions.create(
                model="assistant",
                messages=[{"role": "user", "content": text}],
                extra_headers=headers,
            )
        except openai.ConflictError as refused:
            return refused.code
        return "answered"

    outcomes = await asyncio.gather(ask("one"), ask("two"))

    # Both in one batch: one is answered, the other told the session is busy; never a 500.
    assert sorted(outcomes) in (["answered", "answered"], ["answered", "session_busy"])
    assert await Session.objects.acount() == 1
    assert len((await runs_by_session())["born-twice"]) == outcomes.count("answered")


async def test_completions_at_once_into_named_sessions_read_them_in_one_query(client, settings):
    from testkit.querycount import count_queries

    settings.PARLEY_RUNS_PER_MINUTE = 10_000
    names = [f"desk-{n}" for n in range(10)]

    async def ask(name: str) -> None:
        await client.chat.completions.create(
            model="assistant",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Parley-Session-Id": name},
        )

    await asyncio.gather(*(ask(name) for name in names))
    with count_queries() as counted:
        await asyncio.gather(*(ask(name) for name in names))

    assert {name: len(runs) for name, runs in (await runs_by_session()).items()} == dict.fromkeys(
        names, 2
    )
    # However the asks fell into creation batches, each batch checked its token once and read
    # the named sessions once, to place its runs (their creation takes them as read).
    tokens = [sql for sql in counted.statements if 'FROM "sessions_app_apitoken"' in sql]
    session_reads = [
        sql
        for sql in counted.statements
        if sql.startswith('SELECT "sessions_app_session"."session_id", "sessions_app_session"."')
        and '"sessions_app_session"."session_type"' in sql
    ]
    assert len(session_reads) == len(tokens), counted.described()
