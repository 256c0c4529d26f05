"""The scripted upstream must look like OpenAI to the real ``openai`` client, or tests lie."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from testkit.upstream import Reply, ScriptedUpstream

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello you"}]


@pytest.fixture
def up():
    with ScriptedUpstream(tokenize=True) as server:
        yield server


@pytest.fixture
def client(up):
    with openai.OpenAI(base_url=up.base_url, api_key="x", max_retries=0) as c:
        yield c


def stream(client, **kwargs):
    return list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True, **kwargs))


def text_of(chunks):
    return [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]


def test_stream_text_in_order(up, client):
    up.script(Reply("Hello there,  world!\n"), Reply(chunks=["He", "llo"]), Reply(tokens=3))
    chunks = stream(client)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert text_of(chunks) == ["Hello ", "there,  ", "world!\n"]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert text_of(stream(client)) == ["He", "llo"]
    assert "".join(text_of(stream(client))) == "tok0 tok1 tok2 "
    assert "".join(text_of(stream(client))) == "Echo: hello you"  # default reply
    # The client has the last chunk a moment before the server counts the answer as done.
    assert up.wait_until(lambda: up.completed == 4 and up.active_streams == 0)


def test_usage_chunk_only_when_asked(up, client):
    assert all(c.usage is None for c in stream(client))
    chunks = stream(client, stream_options={"include_usage": True})
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 3
    assert chunks[-1].usage.prompt_tokens == 2 + 2 + 4 * 2  # words + 4 per message
    assert all(c.usage is None for c in chunks[:-1])
    up.script(Reply("x", usage=False))
    assert all(c.usage is None for c in stream(client, stream_options={"include_usage": True}))
    up.script(Reply("x", usage=True, prompt_tokens=7, completion_tokens=9))
    assert stream(client)[-1].usage.total_tokens == 16
    full = client.chat.completions.create(model="m", messages=MESSAGES)
    assert full.choices[0].message.content == "Echo: hello you" and full.usage.total_tokens == 15


@pytest.mark.parametrize("streaming", [False, True])
def test_error_status(up, client, streaming):
    up.script(Reply(status=429, error_message="slow down"), Reply(status=503))
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="m", messages=MESSAGES, stream=streaming)
    assert info.value.status_code == 429 and "slow down" in str(info.value)
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="m", messages=MESSAGES, stream=streaming)
    assert info.value.status_code == 503
    assert client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content


def test_cut_stream(up, client):
    up.script(Reply("one two three four", cut_after=2))
    received = []
    # What the client sees: the chunks before the cut, then a connection error (no finish chunk).
    with pytest.raises(openai.APIConnectionError):
        for chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):
            received.append(chunk)
    assert text_of(received) == ["one ", "two "]
    assert all(c.choices[0].finish_reason is None for c in received)
    assert up.completed == 0
    assert "".join(text_of(stream(client))) == "Echo: hello you"  # server still fine


def test_tool_call_stream(up, client):
    calls = [
        {"id": "call_a", "name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}},
        {"id": "call_b", "name": "now", "arguments": "{}"},
    ]
    up.script(Reply(tool_calls=calls), Reply(tool_calls=calls))
    chunks = stream(client)
    first = chunks[0].choices[0].delta
    assert first.role == "assistant" and first.tool_calls[0].function.arguments == ""
    assembled: dict[int, dict] = {}
    for chunk in chunks:
        for tc in chunk.choices[0].delta.tool_calls or []:
            slot = assembled.setdefault(tc.index, {"id": tc.id, "name": "", "arguments": ""})
            slot["name"] += tc.function.name or ""
            slot["arguments"] += tc.function.arguments or ""
    assert [(s["id"], s["name"], json.loads(s["arguments"])) for s in assembled.values()] == [
        ("call_a", "get_weather", {"city": "Paris", "unit": "C"}),
        ("call_b", "now", {}),
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    full = client.chat.completions.create(model="m", messages=MESSAGES)
    assert full.choices[0].finish_reason == "tool_calls"
    assert full.choices[0].message.tool_calls[0].function.name == "get_weather"


def test_requests_recorded_and_other_routes(up, client):
    client.chat.completions.create(model="first", messages=MESSAGES, temperature=0.5)
    stream(client)
    assert [r["model"] for r in up.requests] == ["first", "m"]
    assert up.requests[0]["messages"] == MESSAGES and up.requests[1]["stream"] is True
    up.script(Reply("queued"))
    up.reset()
    assert up.requests == [] and up.pending == 0
    root = up.base_url.removesuffix("/v1")
    with httpx.Client() as http:
        assert http.get(f"{up.base_url}/models").json()["data"][0]["id"] == "scripted"
        assert http.get(f"{root}/health").json() == {"status": "ok"}
        assert http.get(f"{root}/nope").status_code == 404
        assert http.post(f"{root}/extras/tokenize/count", json={"input": "a b  c"}).json() == {
            "count": 3
        }
    with ScriptedUpstream() as plain, httpx.Client() as http:
        url = plain.base_url.removesuffix("/v1") + "/extras/tokenize/count"
        assert http.post(url, json={"input": "a"}).status_code == 404


def test_hang_times_out_and_disconnect_is_recorded(up, client):
    up.script(Reply(hang=True))
    with pytest.raises(openai.APITimeoutError):
        client.with_options(timeout=0.3).chat.completions.create(model="m", messages=MESSAGES)
    assert up.wait_until(lambda: up.disconnects == 1)
    up.script(Reply(tokens=100, delay=0.01))
    with client.chat.completions.create(model="m", messages=MESSAGES, stream=True) as s:
        next(iter(s))
    assert up.wait_until(lambda: up.disconnects == 2 and up.active_streams == 0)
    assert up.completed == 0


def test_hang_released_by_stop():
    up = ScriptedUpstream(default=Reply(hang=True)).start()
    with openai.OpenAI(base_url=up.base_url, api_key="x", max_retries=0, timeout=10) as c:
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(c.chat.completions.create, model="m", messages=MESSAGES)
            assert up.wait_until(lambda: len(up.requests) == 1)
            up.stop()
            with pytest.raises(openai.APIConnectionError):
                future.result(timeout=5)


def test_fifty_concurrent_streams(up, client):
    up.default = Reply(tokens=20, first_delay=0.05, delay=0.005)

    def one(_):
        return "".join(text_of(stream(client)))

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(one, range(50)))
    assert results == ["".join(f"tok{i} " for i in range(20))] * 50
    assert up.wait_until(lambda: up.completed == 50 and up.active_streams == 0)
    assert up.disconnects == 0
    assert up.peak_streams > 10
