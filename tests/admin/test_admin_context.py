"""A run's page shows what the model was sent, as the engine sent it: history and tool results."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from sessions_app import engine
from sessions_app.models import Agent, CallKind, LLMCall
from sessions_app.services import memory
from testkit.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def instructed_searching_agent(agent: Agent) -> Agent:
    """The default agent with instructions and the past-session tools: what it sends holds a
    system message and, once it looks a session up, the tool's result."""
    agent.instructions = "Answer briefly."
    agent.search_session_history = True
    agent.save(update_fields=["instructions", "search_session_history"])
    return agent


async def test_each_model_call_keeps_the_messages_it_was_sent(
    alice, instructed_searching_agent, upstream, django_user_model
):
    first = await (await engine.start_run(alice, "My name is Alice.")).wait()
    lookup = {"id": "call_7", "name": "get_previous_session_messages", "arguments": {}}
    upstream.script(Reply(tool_calls=[lookup]), Reply("You are Alice."))
    second = await (await engine.start_run(alice, "Who am I?", session_id=first.session_id)).wait()

    calls = [c async for c in LLMCall.objects.filter(run=second).order_by("created_at", "pk")]
    assert [c.sent_messages for c in calls] == [
        upstream.requests[-2]["messages"],
        upstream.requests[-1]["messages"],
    ]
    assert [m["role"] for m in calls[1].sent_messages] == [
        "system", "user", "assistant", "user", "assistant", "tool",
    ]  # fmt: skip

    root = await sync_to_async(django_user_model.objects.create_superuser)("root", password="x")
    client = Client()
    await sync_to_async(client.force_login)(root)
    page = await sync_to_async(client.get)(f"/admin/sessions_app/run/{second.run_id}/change/")
    html = page.content.decode()
    assert html.count('data-testid="sent-context"') == 2
    assert "Context as sent (4 messages)" in html and "Context as sent (6 messages)" in html
    assert "My name is Alice." in html and "result of call_7" in html


async def test_title_calls_keep_what_they_were_sent(
    alice, instructed_searching_agent, upstream, settings
):
    settings.PARLEY_GENERATE_TITLES = True
    upstream.script(Reply("Bread is flour and water."), Reply("Baking bread at home"))
    run = await (await engine.start_run(alice, "How do I bake bread at home?")).wait()
    await memory.jobs.drain()
    title = await LLMCall.objects.aget(session_id=run.session_id, kind=CallKind.TITLE)
    assert title.sent_messages == upstream.requests[-1]["messages"]
    assert "How do I bake bread at home?" in title.sent_messages[-1]["content"]
