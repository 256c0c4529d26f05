"""A run made through `/v1` is an ordinary run: it streams into the owner's open chat tab, its
session is in the sidebar named as the page names it, and it takes feedback."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from sessions_app.models import Run
from testkit.upstream import Reply
from tests.support.chattab import open_tab

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_v1_answer_streams_into_the_owners_open_tab(client, alice, upstream):
    headers = {"X-Parley-Session-Id": "desk-7"}
    await client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "first"}], extra_headers=headers
    )
    tab = await open_tab(alice)
    await tab.send(action="watch", session_id="desk-7")
    await tab.until('data-testid="user-message"')

    upstream.script(Reply("Streamed to the tab too.", first_delay=0.2, delay=0.02))
    asking = asyncio.create_task(
        client.chat.completions.create(
            model="assistant",
            messages=[{"role": "user", "content": "second"}],
            stream=True,
            extra_headers=headers,
        )
    )
    run = None
    while run is None:
        run = await Run.objects.filter(session_id="desk-7", input="second").afirst()
        await asyncio.sleep(0.02)
    await tab.until(f'id="run-{run.run_id}"')
    stream = await asking
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    ended = f'id="run-{run.run_id}" data-testid="assistant-message"'
    while not any(ended in f and 'data-run-status="completed"' in f for f in tab.frames):
        tab.frames.append(await tab.ws.receive_from(timeout=10))

    assert text == "Streamed to the tab too."
    assert tab.text_of(str(run.run_id)) == "Streamed to the tab too."
    await tab.close()


async def test_the_session_is_in_the_sidebar_and_the_run_takes_feedback(client, alice):
    await client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "Plan my week"}]
    )
    run = await Run.objects.select_related("session").aget()

    browser = Client()
    await sync_to_async(browser.force_login)(alice)
    page = await sync_to_async(browser.get)("/")
    assert 'data-testid="session-item"' in page.content.decode()
    assert "Plan my week" in page.content.decode()
    rated = await sync_to_async(browser.post)(f"/runs/{run.run_id}/feedback", {"rating": "1"})
    assert rated.status_code in (200, 204)
    await run.arefresh_from_db()
    assert run.feedback_rating == 1


WEATHER = {"type": "function", "function": {"name": "get_weather"}}


async def test_an_open_tab_shows_a_run_waiting_for_the_clients_tool_and_then_its_answer(
    client, alice, upstream
):
    headers = {"X-Parley-Session-Id": "desk-9"}
    ask = [{"role": "user", "content": "Weather?"}]
    call = {"id": "c1", "name": "get_weather", "arguments": {"city": "Rome"}}
    upstream.script(Reply(tool_calls=[call]))
    first = await client.chat.completions.create(
        model="assistant", messages=ask, tools=[WEATHER], extra_headers=headers
    )
    run = await Run.objects.aget()
    tab = await open_tab(alice)
    await tab.send(action="watch", session_id="desk-9")
    paused = await tab.until('data-testid="run-paused"')
    assert 'data-run-status="paused"' in paused and "<code>get_weather</code>" in paused

    upstream.script(Reply("Sunny in Rome.", first_delay=0.2, delay=0.02))
    message = first.choices[0].message
    result = {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "Sunny"}
    answer = await client.chat.completions.create(
        model="assistant",
        messages=[*ask, message.model_dump(exclude_none=True), result],
        extra_headers=headers,
    )
    going_on = await tab.until('data-run-status="running"')
    ended = f'id="run-{run.run_id}" data-testid="assistant-message"'
    while not any(ended in f and 'data-run-status="completed"' in f for f in tab.frames):
        tab.frames.append(await tab.ws.receive_from(timeout=10))

    assert f'id="run-{run.run_id}"' in going_on and 'data-testid="chat-stop"' in going_on
    assert answer.choices[0].message.content == "Sunny in Rome."
    assert tab.text_of(str(run.run_id)) == "Sunny in Rome."
    await tab.close()
