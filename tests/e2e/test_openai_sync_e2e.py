"""The synchronous `openai` SDK against a real daphne serving Parley, over HTTP, as a script
would use it: a completion, a stream with usage, and the conversation kept as one session."""

from __future__ import annotations

import openai
import pytest

from sessions_app.accounts import create_token
from sessions_app.models import Run
from testkit.upstream import Reply
from tests.support.apiclient import default_agent

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_sync_sdk_holds_a_conversation_over_http(live_server_url, upstream, alice):
    default_agent()
    _, raw = create_token(alice, "script")
    client = openai.OpenAI(base_url=f"{live_server_url}/v1", api_key=raw, max_retries=0)
    upstream.script(Reply("Hello over HTTP."))

    messages = [{"role": "user", "content": "Hi"}]
    answer = client.chat.completions.create(model="assistant", messages=messages)
    messages += [answer.choices[0].message, {"role": "user", "content": "Count to three"}]
    upstream.script(Reply("One two three.", prompt_tokens=9, completion_tokens=3))
    chunks = list(
        client.chat.completions.create(
            model="assistant",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
    )

    assert answer.choices[0].message.content == "Hello over HTTP."
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "One two three."
    )
    assert chunks[-1].usage.completion_tokens == 3
    assert [m.id for m in client.models.list().data] == ["assistant"]
    runs = list(Run.objects.order_by("position").values_list("session_id", "input", "source"))
    assert [(r[1], r[2]) for r in runs] == [("Hi", "openai"), ("Count to three", "openai")]
    assert len({r[0] for r in runs}) == 1


def test_a_bad_key_over_http_is_openais_401(live_server_url, upstream):
    client = openai.OpenAI(base_url=f"{live_server_url}/v1", api_key="prl_wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        client.models.list()
    assert refused.value.body["code"] == "invalid_api_key"


def test_the_sync_sdk_runs_a_client_tool_streamed_over_http(live_server_url, upstream, alice):
    default_agent()
    _, raw = create_token(alice, "script")
    client = openai.OpenAI(base_url=f"{live_server_url}/v1", api_key=raw, max_retries=0)
    tools = [{"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}]
    upstream.script(Reply(tool_calls=[{"name": "now", "arguments": {}}]), Reply("It is noon."))
    messages = [{"role": "user", "content": "What time is it?"}]

    stream = client.chat.completions.create(
        model="assistant", messages=messages, tools=tools, stream=True
    )
    calls = [
        c for chunk in stream if chunk.choices for c in chunk.choices[0].delta.tool_calls or ()
    ]
    messages.append(
        {
            "role": "assistant",
            "tool_calls": [
                {"id": c.id, "type": "function", "function": c.function.model_dump()} for c in calls
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": calls[0].id, "content": "12:00"})
    answer = client.chat.completions.create(model="assistant", messages=messages, tools=tools)

    assert [c.function.name for c in calls] == ["now"]
    assert answer.choices[0].message.content == "It is noon."
    run = Run.objects.get()
    assert (run.status, run.content, run.source) == ("COMPLETED", "It is noon.", "openai")
