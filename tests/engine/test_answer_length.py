"""The embedded model's answers are capped in length; a configured endpoint's are left alone."""

from __future__ import annotations

import pytest

from sessions_app import engine
from sessions_app.engine.errors import CUT
from sessions_app.llm import client as llm
from sessions_app.models import RunStatus
from testkit.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)


async def run_to_end(user, text: str):
    handle = await engine.start_run(user, text)
    events = [event async for event in handle.events()]
    return await handle.wait(), events


@pytest.fixture
def embedded_stand_in(upstream, settings):
    """The scripted upstream standing in for the embedded model `serve` starts."""
    settings.LLM_EMBEDDED = True
    settings.PARLEY_EMBEDDED_MAX_TOKENS = 7
    return upstream


async def test_the_embedded_model_is_asked_for_at_most_the_configured_tokens(
    alice, agent, embedded_stand_in
):
    await run_to_end(alice, "Write a long story")
    await llm.complete(agent.model, [{"role": "user", "content": "A title?"}])
    chat, plain = embedded_stand_in.requests
    assert chat["max_tokens"] == 7 and chat["stream"] is True
    assert plain["max_tokens"] == 7 and "stream" not in plain


async def test_a_zero_cap_sends_no_limit_to_the_embedded_model(
    alice, agent, embedded_stand_in, settings
):
    settings.PARLEY_EMBEDDED_MAX_TOKENS = 0
    await run_to_end(alice, "Write a long story")
    assert "max_tokens" not in embedded_stand_in.requests[0]


async def test_a_configured_endpoint_is_sent_no_length_limit(alice, agent, upstream, settings):
    settings.PARLEY_EMBEDDED_MAX_TOKENS = 7
    await run_to_end(alice, "Write a long story")
    await llm.complete(agent.model, [{"role": "user", "content": "A title?"}])
    assert all("max_tokens" not in request for request in upstream.requests)
    assert len(upstream.requests) == 2


async def test_an_answer_cut_at_the_length_limit_completes_and_says_so(
    alice, agent, embedded_stand_in
):
    embedded_stand_in.script(Reply("Once upon a time there", finish_reason="length"))
    run, events = await run_to_end(alice, "Write a long story")
    assert run.status == RunStatus.COMPLETED
    assert run.content == "Once upon a time there"
    assert run.error == CUT
    assert events[-1]["event"] == "RunCompleted" and events[-1]["error"] == CUT


async def test_a_whole_answer_says_nothing_of_a_limit(alice, agent, embedded_stand_in):
    run, events = await run_to_end(alice, "Hello")
    assert run.status == RunStatus.COMPLETED and run.error == ""
    assert events[-1]["event"] == "RunCompleted" and "error" not in events[-1]
