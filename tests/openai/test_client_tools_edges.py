"""Client tools over /v1 at their edges: a conversation that goes on after a text-and-tool round,
continuations racing, failing and retried, limited, and how the chat page shows a paused run."""

from __future__ import annotations

import asyncio

import openai
import pytest

from sessions_app import events
from sessions_app.models import Run, Session
from sessions_app.web import feed
from testkit.upstream import Reply
from tests.openai.test_client_tools import ASK, WEATHER, answered, calls_weather
from tests.support.chattab import open_tab

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_next_turn_after_text_then_a_client_tool_stays_in_its_session(client, upstream):
    """The model says something, then calls the client's tool: the client holds two assistant
    messages for the turn, the run one content. No session is named: the next turn must still
    be found to go on in the same session (not fork a new one)."""
    call = {"id": "u1", "name": "get_weather", "arguments": {"city": "Rome"}}
    upstream.script(
        Reply(chunks=["Let me look. "], tool_calls=[call]),
        Reply("It is sunny."),
        Reply("You are welcome."),
    )
    first = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    messages = answered(first.choices[0].message)
    second = await client.chat.completions.create(
        model="assistant", messages=messages, tools=[WEATHER]
    )
    messages += [
        {"role": "assistant", "content": second.choices[0].message.content},
        {"role": "user", "content": "Thanks!"},
    ]
    await client.chat.completions.create(model="assistant", messages=messages, tools=[WEATHER])

    assert await Session.objects.acount() == 1


async def test_two_continuations_at_once_one_goes_on_the_other_is_409(client, upstream):
    upstream.script(calls_weather(), Reply("Sunny.", first_delay=0.2))
    first = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    messages = answered(first.choices[0].message)

    async def go_on() -> str:
        try:
            await client.chat.completions.create(
                model="assistant", messages=messages, tools=[WEATHER]
            )
        except openai.ConflictError:
            return "409"
        return "answered"

    outcomes = sorted(await asyncio.gather(go_on(), go_on()))

    assert outcomes == ["409", "answered"]
    assert len(upstream.requests) == 2


async def test_an_upstream_error_in_a_continuation_leaves_results_that_can_be_sent_again(
    client, upstream
):
    """OpenAI's SDKs retry a 5xx: the retry of the same tool results should not meet a 409."""
    upstream.script(calls_weather(), Reply(status=500), Reply("Sunny."))
    first = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    messages = answered(first.choices[0].message)
    with pytest.raises(openai.APIStatusError):
        await client.chat.completions.create(model="assistant", messages=messages, tools=[WEATHER])

    again = await client.chat.completions.create(
        model="assistant", messages=messages, tools=[WEATHER]
    )

    assert again.choices[0].message.content == "Sunny."


async def test_a_tab_sees_contiguous_seqs_across_a_pause_and_its_continuation(client, upstream):
    upstream.script(
        Reply(chunks=["Let me ", "look. "], tool_calls=[{"name": "get_weather", "arguments": {}}]),
        Reply(chunks=["Sunny ", "in ", "Rome."]),
    )
    first = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    run = await Run.objects.aget()
    seen: list[tuple[str, int]] = []

    async def watch() -> None:
        async for event in events.subscribe(run.session_id):
            if event.get("run_id") == str(run.run_id) and "seq" in event:
                seen.append((event["event"], event["seq"]))
                if event["event"] == "RunCompleted":
                    return

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.1)
    await client.chat.completions.create(
        model="assistant", messages=answered(first.choices[0].message), tools=[WEATHER]
    )
    await asyncio.wait_for(watcher, 10)

    seqs = [seq for _, seq in seen]
    assert seen[0] == ("RunContinued", run.content_seq + 1)
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


async def test_the_paused_notice_names_the_clients_tool_not_the_agents(
    client, agent, alice, upstream
):
    agent.enable_agentic_state = True
    await agent.asave()
    both = [
        {"id": "u2", "name": "get_weather", "arguments": {"city": "Rome"}},
        {"id": "u1", "name": "update_session_state", "arguments": {"changes": {"c": 1}}},
    ]
    upstream.script(Reply(tool_calls=both))
    await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    run = await Run.objects.aget()

    tab = await open_tab(alice)
    await tab.send(action="watch", session_id=run.session_id)
    paused = await tab.until('data-testid="run-paused"')
    await tab.close()

    notice = paused.split('data-testid="run-paused"')[1].split("</p>")[0]
    assert "<code>get_weather</code>" in notice


async def test_a_later_plain_answer_shown_live_lists_no_tools_of_earlier_runs(client, upstream):
    upstream.script(calls_weather(), Reply("Sunny."), Reply("Hello."))
    first = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    await client.chat.completions.create(
        model="assistant", messages=answered(first.choices[0].message), tools=[WEATHER]
    )
    run = await Run.objects.aget()
    seen: list[dict] = []

    async def watch() -> None:
        async for event in events.subscribe(run.session_id):
            if event["event"] == "RunCompleted":
                seen.append(event)
                return

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.1)
    await client.chat.completions.create(
        model="assistant",
        messages=[{"role": "user", "content": "Hi"}],
        extra_headers={"X-Parley-Session-Id": run.session_id},
    )
    await asyncio.wait_for(watcher, 10)

    html = await feed.fragment(seen[0])
    assert seen[0]["tools"] == [] and 'data-testid="run-tools"' not in html


async def test_a_tool_choice_whose_function_is_not_an_object_is_a_400(client, upstream):
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="assistant",
            messages=ASK,
            tools=[WEATHER],
            tool_choice={"type": "function", "function": "get_weather"},
        )

    assert refused.value.param == "tool_choice"


async def test_a_paused_runs_call_arguments_are_escaped_on_the_page(client, alice, upstream):
    call = {
        "id": "u1",
        "name": "get_weather",
        "arguments": {"city": "<img src=x onerror=alert(1)>"},
    }
    upstream.script(Reply(tool_calls=[call]))
    await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    run = await Run.objects.aget()

    tab = await open_tab(alice)
    await tab.send(action="watch", session_id=run.session_id)
    paused = await tab.until('data-testid="run-paused"')
    await tab.close()

    assert "<img src=x" not in paused and "&lt;img src=x" in paused


async def test_continuations_count_against_the_runs_per_minute_limit(client, upstream, settings):
    """Each continuation is a model call the caller asked for: with a limit of one run a
    minute, a loop of tool results is not a way around it."""
    settings.PARLEY_RUNS_PER_MINUTE = 1
    loop = [calls_weather() for _ in range(4)]
    upstream.script(*loop)
    answer = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    messages = list(ASK)
    with pytest.raises(openai.RateLimitError):
        for _ in range(3):
            messages = [*messages[: len(messages)], *answered(answer.choices[0].message)[1:]]
            answer = await client.chat.completions.create(
                model="assistant", messages=messages, tools=[WEATHER]
            )
