"""A client's own `tools` through the real `openai` SDK: the model's call of one is returned to
the client (`finish_reason: "tool_calls"`), the run waits PAUSED, and the client's next request,
its `tool` messages, makes the same run go on, as OpenAI's protocol goes."""

from __future__ import annotations

import json

import openai
import pytest
from asgiref.sync import sync_to_async

from sessions_app.accounts import create_token
from sessions_app.models import LLMCall, Message, Run
from testkit.upstream import Reply
from tests.openai.conftest import sdk
from tests.support.asgiclient import ASGIClient

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Rome?"}]


def calls_weather(city: str = "Rome") -> Reply:
    call = {"id": "upstream_1", "name": "get_weather", "arguments": {"city": city}}
    return Reply(tool_calls=[call], prompt_tokens=20, completion_tokens=6)


def answered(message, result: str = "Sunny, 21 °C") -> list[dict]:
    """The conversation as a client sends it back: its question, the call, its result."""
    return [
        *ASK,
        message.model_dump(exclude_none=True),
        *(
            {"role": "tool", "tool_call_id": call.id, "content": result}
            for call in message.tool_calls
        ),
    ]


async def test_a_call_of_a_client_tool_is_returned_and_its_result_goes_on_with_the_run(
    client, upstream
):
    upstream.script(calls_weather(), Reply("It is sunny in Rome.", prompt_tokens=30))

    raw = await client.chat.completions.with_raw_response.create(
        model="assistant", messages=ASK, tools=[WEATHER]
    )
    first = raw.parse()
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert (call.type, call.function.name) == ("function", "get_weather")
    assert json.loads(call.function.arguments) == {"city": "Rome"}
    assert upstream.requests[0]["tools"] == [WEATHER]
    run = await Run.objects.aget()
    assert run.status == "PAUSED"
    assert raw.headers["x-parley-run-id"] == str(run.run_id)

    again = await client.chat.completions.with_raw_response.create(
        model="assistant", messages=answered(choice.message), tools=[WEATHER]
    )
    second = again.parse()

    assert second.choices[0].message.content == "It is sunny in Rome."
    assert second.choices[0].finish_reason == "stop"
    assert second.id != first.id
    assert again.headers["x-parley-run-id"] == str(run.run_id)  # the same run went on
    # The model is sent its own ids; the client's name the run as well.
    assert call.id == f"call_{run.run_id.hex}_upstream_1"
    sent = upstream.requests[1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == "upstream_1"
    assert sent[-1] == {"role": "tool", "tool_call_id": "upstream_1", "content": "Sunny, 21 °C"}
    run = await Run.objects.aget()
    assert (run.status, run.content, run.position) == ("COMPLETED", "It is sunny in Rome.", 1)
    rows = [
        (m.role, m.content, m.tool_call_id)
        async for m in Message.objects.filter(run=run).order_by("order")
    ]
    assert rows == [
        ("user", "What is the weather in Rome?", ""),
        ("assistant", "", ""),
        ("tool", "Sunny, 21 °C", "upstream_1"),
        ("assistant", "It is sunny in Rome.", ""),
    ]


async def test_the_runs_tokens_add_up_and_each_response_counts_its_own(client, upstream):
    upstream.script(calls_weather(), Reply("Sunny.", prompt_tokens=30, completion_tokens=2))

    first = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    second = await client.chat.completions.create(
        model="assistant", messages=answered(first.choices[0].message), tools=[WEATHER]
    )

    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (20, 6)
    assert (second.usage.prompt_tokens, second.usage.completion_tokens) == (30, 2)
    run = await Run.objects.aget()
    assert (run.input_tokens, run.output_tokens, run.total_tokens) == (50, 8, 58)
    assert await LLMCall.objects.filter(run=run).acount() == 2


async def test_a_stream_returns_the_call_as_deltas_and_goes_on_streamed(client, upstream):
    upstream.script(calls_weather("Oslo"), Reply("Cold in Oslo.", prompt_tokens=30))

    stream = await client.chat.completions.create(
        model="assistant",
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
        tools=[WEATHER],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]

    deltas = [c.choices[0].delta.tool_calls for c in chunks if c.choices]
    [call] = [call for found in deltas if found for call in found]
    assert (call.index, call.function.name) == (0, "get_weather")
    assert json.loads(call.function.arguments) == {"city": "Oslo"}
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert [f for f in finishes if f] == ["tool_calls"]
    assert chunks[-1].usage.prompt_tokens == 20

    stream = await client.chat.completions.create(
        model="assistant",
        messages=[
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call.id, "type": "function", "function": call.function.model_dump()}
                ],
            },
            {"role": "tool", "tool_call_id": call.id, "content": "-3 °C"},
        ],
        tools=[WEATHER],
        stream=True,
    )
    chunks = [chunk async for chunk in stream]

    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Cold in Oslo."
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == ["stop"]
    assert (await Run.objects.aget()).status == "COMPLETED"


async def test_tool_choice_is_sent_with_the_first_call_of_a_request_only(client, upstream):
    upstream.script(calls_weather(), Reply("Sunny."))
    forced = {"type": "function", "function": {"name": "get_weather"}}

    first = await client.chat.completions.create(
        model="assistant", messages=ASK, tools=[WEATHER], tool_choice=forced
    )
    await client.chat.completions.create(
        model="assistant", messages=answered(first.choices[0].message), tools=[WEATHER]
    )

    asked = upstream.requests
    assert asked[0]["tool_choice"] == forced
    assert "tool_choice" not in asked[1]


async def test_the_agents_own_tools_run_in_the_round_and_only_the_clients_are_returned(
    client, agent, upstream
):
    agent.enable_agentic_state = True
    await agent.asave()
    both = [
        {"id": "u1", "name": "update_session_state", "arguments": {"changes": {"city": "Rome"}}},
        {"id": "u2", "name": "get_weather", "arguments": {"city": "Rome"}},
    ]
    upstream.script(Reply(tool_calls=both), Reply("Sunny, and noted."))

    first = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    [call] = first.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    await client.chat.completions.create(
        model="assistant", messages=answered(first.choices[0].message), tools=[WEATHER]
    )

    sent = upstream.requests[1]["messages"]
    assert [m["role"] for m in sent[-3:]] == ["assistant", "tool", "tool"]
    assert [c["function"]["name"] for c in sent[-3]["tool_calls"]] == [
        "update_session_state",
        "get_weather",
    ]
    assert sent[-2]["tool_call_id"] == "u1" and "city" in sent[-2]["content"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "u2", "content": "Sunny, 21 °C"}
    assert call.id.endswith("_u2")
    run = await Run.objects.select_related("session").aget()
    assert run.session.session_state == {"city": "Rome"}


async def test_a_later_turn_sees_the_answer_after_the_tool_as_history(client, upstream):
    upstream.script(calls_weather(), Reply("It is sunny in Rome."), Reply("You are welcome."))

    first = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    second = await client.chat.completions.create(
        model="assistant", messages=answered(first.choices[0].message), tools=[WEATHER]
    )
    turns = [
        *answered(first.choices[0].message),
        {"role": "assistant", "content": second.choices[0].message.content},
        {"role": "user", "content": "Thanks!"},
    ]
    await client.chat.completions.create(model="assistant", messages=turns, tools=[WEATHER])

    runs = [r async for r in Run.objects.order_by("position")]
    assert [(r.position, r.status) for r in runs] == [(1, "COMPLETED"), (2, "COMPLETED")]
    assert runs[0].session_id == runs[1].session_id  # recognised as going on
    history = [m for m in upstream.requests[2]["messages"] if m["role"] != "system"]
    assert [(m["role"], m.get("content")) for m in history] == [
        ("user", "What is the weather in Rome?"),
        ("assistant", ""),  # its call of the client's tool, and the result
        ("tool", "Sunny, 21 °C"),
        ("assistant", "It is sunny in Rome."),
        ("user", "Thanks!"),
    ]
    assert history[1]["tool_calls"][0]["id"] == history[2]["tool_call_id"]


async def test_results_answered_twice_or_after_the_session_went_on_are_refused(client, upstream):
    upstream.script(calls_weather(), Reply("Sunny."), Reply("Hello again."))
    first = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    messages = answered(first.choices[0].message)
    await client.chat.completions.create(model="assistant", messages=messages, tools=[WEATHER])

    with pytest.raises(openai.ConflictError) as twice:
        await client.chat.completions.create(model="assistant", messages=messages, tools=[WEATHER])

    assert "not waiting for tool results" in twice.value.message
    assert twice.value.response.headers["x-should-retry"] == "false"


async def test_results_for_calls_the_run_does_not_wait_for_are_refused(client, upstream):
    two = [
        {"id": "a", "name": "get_weather", "arguments": {"city": "Rome"}},
        {"id": "b", "name": "get_weather", "arguments": {"city": "Oslo"}},
    ]
    upstream.script(Reply(tool_calls=two))
    first = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    message = first.choices[0].message
    rome, oslo = message.tool_calls
    one_only = [*ASK, message.model_dump(exclude_none=True)]
    one_only.append({"role": "tool", "tool_call_id": rome.id, "content": "Sunny"})

    with pytest.raises(openai.BadRequestError) as missing:
        await client.chat.completions.create(model="assistant", messages=one_only)
    made_up = [*one_only, {"role": "tool", "tool_call_id": oslo.id, "content": "Cold"}]
    made_up.append({"role": "tool", "tool_call_id": f"{oslo.id[:-1]}0", "content": "?"})
    with pytest.raises(openai.BadRequestError) as extra:
        await client.chat.completions.create(model="assistant", messages=made_up)

    assert f"No result was sent for the tool call {oslo.id}" in missing.value.message
    assert "not waiting for a result" in extra.value.message
    assert (await Run.objects.aget()).status == "PAUSED"  # nothing lost: it still waits


async def test_another_users_tool_calls_cannot_be_answered(client, bob, upstream):
    upstream.script(calls_weather())
    first = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    _, bobs = await sync_to_async(create_token)(bob, "bob's sdk")

    async with sdk(bobs) as bob_client:
        with pytest.raises(openai.NotFoundError) as refused:
            await bob_client.chat.completions.create(
                model="assistant", messages=answered(first.choices[0].message)
            )

    assert refused.value.code == "tool_call_not_found"
    assert (await Run.objects.aget()).status == "PAUSED"
    assert len(upstream.requests) == 1


async def test_tool_messages_answering_no_call_of_parleys_are_refused(client, upstream):
    messages = [
        *ASK,
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "x"},
    ]

    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model="assistant", messages=messages)

    assert refused.value.code == "tool_call_not_found"
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": [{"type": "code_interpreter"}]}, "tools[0]"),
        (
            {"tools": [{"type": "function", "function": {"name": "bad name"}}]},
            "tools[0].function.name",
        ),
        ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name"),
        ({"tool_choice": "auto"}, "tool_choice"),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "x"}}},
            "tool_choice",
        ),
        ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
    ],
)
async def test_malformed_tools_are_refused_naming_the_parameter(client, upstream, extra, param):
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model="assistant", messages=ASK, **extra)

    assert refused.value.param == param
    assert upstream.requests == []
    assert await Run.objects.acount() == 0


async def test_a_client_tool_may_not_take_the_name_of_the_agents_own(client, agent, upstream):
    agent.enable_agentic_state = True
    await agent.asave()
    mine = {"type": "function", "function": {"name": "update_session_state"}}

    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model="assistant", messages=ASK, tools=[mine])

    assert refused.value.param == "tools"
    assert "update_session_state" in refused.value.message
    assert await Run.objects.acount() == 0


async def test_a_run_waiting_for_tools_can_be_cancelled_and_then_takes_no_results(
    client, alice_key, upstream
):
    upstream.script(calls_weather())
    first = await client.chat.completions.create(model="assistant", messages=ASK, tools=[WEATHER])
    run = await Run.objects.aget()
    api = ASGIClient({"Authorization": f"Bearer {alice_key}"})

    cancelled = await api.request("POST", f"/api/runs/{run.run_id}/cancel")
    with pytest.raises(openai.ConflictError) as late:
        await client.chat.completions.create(
            model="assistant", messages=answered(first.choices[0].message), tools=[WEATHER]
        )

    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "CANCELLED")
    assert "it is CANCELLED" in late.value.message
    assert len(upstream.requests) == 1


async def test_a_run_may_pause_again_and_its_parts_add_up_to_its_answer(client, upstream):
    upstream.script(
        Reply(chunks=["Let me look. "], tool_calls=[{"name": "get_weather", "arguments": {}}]),
        Reply(chunks=["Rome done. "], tool_calls=[{"name": "get_weather", "arguments": {}}]),
        Reply("Both sunny."),
    )
    messages = list(ASK)
    contents = []
    for _ in range(3):
        answer = await client.chat.completions.create(
            model="assistant", messages=messages, tools=[WEATHER]
        )
        message = answer.choices[0].message
        contents.append((message.content, answer.choices[0].finish_reason))
        messages = [*messages, message.model_dump(exclude_none=True)]
        for call in message.tool_calls or ():
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "Sunny"})

    assert contents == [
        ("Let me look. ", "tool_calls"),
        ("Rome done. ", "tool_calls"),
        ("Both sunny.", "stop"),
    ]
    run = await Run.objects.aget()
    assert (run.status, run.content) == ("COMPLETED", "Let me look. Rome done. Both sunny.")
    assert await LLMCall.objects.filter(run=run).acount() == 3
