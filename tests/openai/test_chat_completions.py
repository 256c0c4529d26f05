"""`/v1/chat/completions` and `/v1/models` through the real `openai` SDK: answers, streams and
errors exactly as OpenAI's, each completion an ordinary Parley run in a session of the caller's."""

from __future__ import annotations

import asyncio
import json
import threading

import openai
import pytest
from asgiref.sync import sync_to_async

from sessions_app import engine
from sessions_app.accounts import create_token
from sessions_app.models import Agent, Run, Session
from testkit.upstream import Reply
from tests.openai.conftest import sdk
from tests.support.asgiclient import ASGIClient
from tests.support.chattab import cookie_for

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_models_are_the_callers_agents(client, agent):
    await Agent.objects.acreate(name="Hidden helper", model="scripted", listed=False)
    await Agent.objects.acreate(name="Code Reviewer", model="scripted")

    models = await client.models.list()

    assert [m.id for m in models.data] == ["assistant", "code-reviewer"]
    assert {m.object for m in models.data} == {"model"}
    assert {m.owned_by for m in models.data} == {"parley"}


async def test_a_completion_answers_and_is_kept_as_a_session(client, alice, upstream):
    upstream.script(Reply("Hello Alice.", prompt_tokens=7, completion_tokens=3))

    raw = await client.chat.completions.with_raw_response.create(
        model="assistant", messages=[{"role": "user", "content": "Hi there"}]
    )
    answer = raw.parse()

    assert answer.object == "chat.completion"
    assert answer.model == "assistant"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content == "Hello Alice."
    assert answer.choices[0].finish_reason == "stop"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (7, 3)
    assert answer.usage.total_tokens == 10
    run = await Run.objects.select_related("session").aget()
    assert answer.id == f"chatcmpl-{run.run_id.hex}"
    assert raw.headers["x-parley-session-id"] == run.session_id
    assert (run.source, run.input, run.content, run.user_id) == (
        "openai",
        "Hi there",
        "Hello Alice.",
        alice.pk,
    )
    assert run.session.session_name == "Hi there"  # as the chat page names a new chat


async def test_a_stream_sends_chunks_then_the_usage_then_done(client, upstream):
    upstream.script(Reply("One two three.", prompt_tokens=5, completion_tokens=3))

    stream = await client.chat.completions.create(
        model="assistant",
        messages=[{"role": "user", "content": "Count"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]

    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "One two three."
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finishing] == ["stop"]
    assert chunks[-1].choices == []
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (5, 3)
    assert all(c.usage is None for c in chunks[:-1])


async def test_a_stream_without_usage_asked_has_none(alice_key, agent, upstream):
    client = ASGIClient({"Authorization": f"Bearer {alice_key}"})
    body = {"model": "assistant", "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    response = await client.request("POST", "/v1/chat/completions", body)
    events = response.body.decode().split("\n\n")[:-2]  # then [DONE] and the end
    chunks = [json.loads(e.removeprefix("data: ")) for e in events]

    assert all(c["choices"] for c in chunks)
    assert not any("usage" in c for c in chunks)  # the key is left out, as OpenAI does


async def test_the_clients_system_message_follows_the_agents_instructions(client, agent, upstream):
    agent.instructions = "You are Parley's assistant."
    await sync_to_async(agent.save)()

    await client.chat.completions.create(
        model="assistant",
        messages=[
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "Hello"},
        ],
        temperature=0.2,
        max_completion_tokens=50,
        stop=["\n\n"],
    )

    sent = upstream.requests[-1]
    assert sent["messages"][0] == {
        "role": "system",
        "content": "You are Parley's assistant.\n\nAnswer in French.",
    }
    assert sent["messages"][-1] == {"role": "user", "content": "Hello"}
    assert (sent["temperature"], sent["max_tokens"], sent["stop"]) == (0.2, 50, ["\n\n"])


async def test_text_parts_are_read_as_text(client, upstream):
    answer = await client.chat.completions.create(
        model="assistant",
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "you"}],
            }
        ],
    )
    assert answer.choices[0].message.content == "Echo: Hi you"


async def test_the_model_may_be_named_by_the_agents_id_or_name(client, agent):
    for model in (str(agent.agent_id), "Assistant"):
        answer = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Hi"}]
        )
        assert answer.model == model


# -- errors, as OpenAI's ------------------------------------------------------------------------


async def test_a_bad_key_is_401(agent, upstream):
    async with sdk("prl_not-a-token") as stranger:
        with pytest.raises(openai.AuthenticationError) as refused:
            await stranger.chat.completions.create(
                model="assistant", messages=[{"role": "user", "content": "Hi"}]
            )
        with pytest.raises(openai.AuthenticationError):
            await stranger.models.list()
    assert refused.value.body["code"] == "invalid_api_key"
    assert await Run.objects.acount() == 0


async def test_an_unknown_or_hidden_model_is_404(client):
    hidden = await Agent.objects.acreate(name="Hidden", model="scripted", listed=False)
    for model in ("no-such-agent", str(hidden.agent_id)):
        with pytest.raises(openai.NotFoundError) as refused:
            await client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "Hi"}]
            )
        assert refused.value.body == {
            "message": f"The model `{model}` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"audio": {"voice": "alloy", "format": "mp3"}, "modalities": ["text", "audio"]}, "audio"),
        ({"temperature": "hot"}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
async def test_what_parley_does_not_offer_is_400_naming_it(client, extra, param):
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "Hi"}], **extra
        )
    assert refused.value.body["param"] == param
    assert await Run.objects.acount() == 0


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [{"role": "assistant", "content": "I speak first"}],
        [{"role": "user", "content": "   "}],
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}],
            }
        ],
        [{"role": "wizard", "content": "Hi"}],
    ],
)
async def test_messages_it_cannot_answer_are_400_and_nothing_is_kept(client, messages):
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="assistant", messages=messages)
    assert await Session.objects.acount() == 0
    assert await Run.objects.acount() == 0


async def test_a_failing_model_is_502_and_the_run_keeps_the_error(client, upstream):
    upstream.script(Reply(status=500, error_message="upstream broke"))
    with pytest.raises(openai.APIStatusError) as failed:
        await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "Hi"}]
        )
    assert failed.value.status_code == 502
    assert failed.value.body["type"] == "api_error"
    run = await Run.objects.aget()
    assert run.status == "ERROR" and "500" in run.error


async def test_a_model_failing_mid_stream_sends_an_error_event(client, upstream):
    upstream.script(Reply("Half an answer and then", error_after=2))
    stream = await client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "Hi"}], stream=True
    )
    said = []
    with pytest.raises(openai.APIError) as failed:
        async for chunk in stream:
            said.append(chunk.choices[0].delta.content or "")
    run = await Run.objects.aget()
    assert run.status == "ERROR"
    assert "".join(said) == "Half an " == run.content  # what came first arrived, and is kept
    assert failed.value.body["type"] == "api_error"


async def test_the_rate_limit_is_429_with_retry_after(client, settings):
    settings.PARLEY_SESSIONS_PER_MINUTE = 1
    await client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "1"}]
    )
    with pytest.raises(openai.RateLimitError) as refused:
        await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "2"}]
        )
    assert int(refused.value.response.headers["retry-after"]) >= 1
    assert refused.value.body["code"] == "rate_limit_exceeded"


async def test_a_token_limited_to_some_agents_sees_and_uses_only_those(alice, agent, upstream):
    reviewer = await Agent.objects.acreate(name="Code Reviewer", model="scripted")
    _, raw = await sync_to_async(create_token)(alice, "limited", agents=[reviewer])
    async with sdk(raw) as limited:
        models = await limited.models.list()
        answer = await limited.chat.completions.create(
            model="code-reviewer", messages=[{"role": "user", "content": "Review this"}]
        )
        with pytest.raises(openai.NotFoundError):
            await limited.chat.completions.create(
                model="assistant", messages=[{"role": "user", "content": "Hi"}]
            )
    assert [m.id for m in models.data] == ["code-reviewer"]
    assert answer.choices[0].message.content == "Echo: Review this"
    assert await Run.objects.filter(agent=agent).acount() == 0


async def test_a_run_refused_after_its_session_was_made_leaves_no_empty_chat(client, settings):
    settings.PARLEY_RUNS_PER_MINUTE = 1
    await client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "1"}]
    )
    with pytest.raises(openai.RateLimitError):
        await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "2"}]
        )
    assert [s.session_name async for s in Session.objects.all()] == ["1"]
    # With history to copy into the new session, the copy goes too.
    with pytest.raises(openai.RateLimitError):
        await client.chat.completions.create(
            model="assistant",
            messages=[
                {"role": "user", "content": "elsewhere"},
                {"role": "assistant", "content": "an answer from elsewhere"},
                {"role": "user", "content": "3"},
            ],
        )
    assert [s.session_name async for s in Session.objects.all()] == ["1"]
    assert await Run.objects.acount() == 1


async def test_the_raw_stream_is_openais_event_stream(alice_key, agent, upstream):
    upstream.script(Reply("Hi there.", prompt_tokens=2, completion_tokens=2))
    client = ASGIClient({"Authorization": f"Bearer {alice_key}"})
    body = {
        "model": "assistant",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    response = await client.request("POST", "/v1/chat/completions", body)

    assert response.status_code == 200
    assert response["content-type"].startswith("text/event-stream")
    events = response.body.decode().split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert all(e.startswith("data: ") for e in events[:-2])
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert [c["choices"][0]["finish_reason"] for c in chunks[1:-1]][-1] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 4
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}


async def test_a_streams_role_comes_at_once_and_its_end_in_one_write(alice_key, agent, upstream):
    # Every write costs the server a trip through Django, daphne and the socket: the end's
    # chunks go together, as the REST API's RunCompleted is one.
    upstream.script(Reply("Hi there.", first_delay=0.2))
    client = ASGIClient({"Authorization": f"Bearer {alice_key}"})
    body = {
        "model": "assistant",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    response = await client.open("POST", "/v1/chat/completions", body)
    writes = [chunk.decode() async for chunk in response.chunks()]

    first = json.loads(writes[0].removeprefix("data: "))
    assert first["choices"][0]["delta"]["role"] == "assistant"  # before the model answered
    assert "Hi" in "".join(writes[1:-1])
    end = writes[-1].split("\n\n")
    assert end[-2:] == ["data: [DONE]", ""]
    finish, usage = (json.loads(e.removeprefix("data: ")) for e in end[:-2])
    assert finish["choices"][0]["finish_reason"] == "stop" and usage["usage"]["total_tokens"]


async def test_a_browsers_cookie_is_no_key(alice, agent, upstream):
    signed_in = ASGIClient({"Cookie": (await cookie_for(alice)).decode()})
    for method, path, body in (
        ("GET", "/v1/models", None),
        (
            "POST",
            "/v1/chat/completions",
            {"model": "assistant", "messages": [{"role": "user", "content": "Hi"}]},
        ),
    ):
        refused = await signed_in.request(method, path, body)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_api_key"
    assert await Run.objects.acount() == 0


async def test_a_body_that_is_not_json_is_400(alice_key, agent):
    client = ASGIClient({"Authorization": f"Bearer {alice_key}"})
    response = await client.request("POST", "/v1/chat/completions", "not json")
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


async def test_a_stopped_answer_is_what_there_is_of_it(client, alice, upstream):
    held = threading.Event()
    upstream.script(Reply("Partly said", chunks=["Partly ", "said"], held=held))
    asking = asyncio.create_task(
        client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "Talk"}]
        )
    )
    await upstream.wait_for_requests(1)
    run = await Run.objects.aget()
    await engine.cancel_run(alice, run.run_id)
    held.set()
    answer = await asking

    assert answer.choices[0].finish_reason == "stop"
    await run.arefresh_from_db()
    assert run.status == "CANCELLED"
    assert answer.choices[0].message.content == run.content


async def test_a_busy_session_is_409_and_says_not_to_retry(alice_key, agent, upstream):
    held = threading.Event()
    upstream.script(Reply("Slow", held=held))
    headers = {"Authorization": f"Bearer {alice_key}", "X-Parley-Session-Id": "busy-1"}
    client = ASGIClient(headers)
    body = {"model": "assistant", "messages": [{"role": "user", "content": "one"}]}
    first = asyncio.create_task(client.request("POST", "/v1/chat/completions", body))
    await upstream.wait_for_requests(1)
    second = await client.request("POST", "/v1/chat/completions", body)
    held.set()
    await first

    assert second.status_code == 409
    assert second.json()["error"]["code"] == "session_busy"
    assert second["x-should-retry"] == "false"  # OpenAI's SDKs would ask again otherwise


async def test_a_body_too_large_is_413_in_openais_shape(alice_key, agent, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    client = ASGIClient({"Authorization": f"Bearer {alice_key}"})
    body = {"model": "assistant", "messages": [{"role": "user", "content": "x" * 2000}]}
    response = await client.request("POST", "/v1/chat/completions", body)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "invalid_request_error"


async def test_a_client_may_lower_the_agents_max_tokens_but_not_raise_it(client, agent, upstream):
    agent.max_tokens = 100
    await sync_to_async(agent.save)()
    for asked, sent in ((20, 20), (5000, 100)):
        await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "Hi"}], max_tokens=asked
        )
        assert upstream.requests[-1]["max_tokens"] == sent


async def test_an_answer_cut_at_its_limit_finishes_with_length(client, upstream):
    upstream.script(Reply("Cut short", finish_reason="length"))
    answer = await client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "Go on"}]
    )
    upstream.script(Reply("Cut short", finish_reason="length"))
    stream = await client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "Go on"}], stream=True
    )
    reasons = [c.choices[0].finish_reason async for c in stream if c.choices]

    assert answer.choices[0].finish_reason == "length"
    assert reasons[-1] == "length"


async def test_a_session_id_that_cannot_be_one_is_400(client):
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="assistant",
            messages=[{"role": "user", "content": "Hi"}],
            extra_headers={"X-Parley-Session-Id": "../etc/passwd"},
        )
    assert refused.value.body["param"] == "session_id"
    assert await Session.objects.acount() == 0


async def test_a_model_is_retrieved_by_its_id_and_an_unknown_one_is_404(client, agent):
    found = await client.models.retrieve("assistant")

    with pytest.raises(openai.NotFoundError) as missing:
        await client.models.retrieve("no-such-agent")

    assert (found.id, found.object, found.owned_by) == ("assistant", "model", "parley")
    assert missing.value.code == "model_not_found"


async def test_a_key_that_is_not_parleys_is_told_so(agent, upstream):
    async with sdk("sk-not-parleys") as stranger:
        with pytest.raises(openai.AuthenticationError) as refused:
            await stranger.models.list()

    assert refused.value.code == "invalid_api_key"
    assert "not a Parley API token" in refused.value.message


async def test_a_failed_answer_asks_the_sdk_not_to_retry_it(client, upstream):
    upstream.script(*[Reply(status=500, error_message="boom")] * 3)
    retrying = client.with_options(max_retries=2)  # the SDK's default

    with pytest.raises(openai.InternalServerError) as failed:
        await retrying.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "Hi"}]
        )

    assert failed.value.status_code == 502
    assert failed.value.response.headers["x-should-retry"] == "false"
    assert await Run.objects.acount() == 1  # the SDK would retry a 502: one run, kept
