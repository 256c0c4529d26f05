"""Budgets as each door answers them: the REST API, the OpenAI API and the chat socket all
refuse a run once a limit covering it is used up, with the limit, the use and when it renews,
and write nothing."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from decimal import Decimal

import openai
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.utils import timezone

from budgets_app import periods
from budgets_app.models import Budget
from sessions_app.accounts import create_token
from sessions_app.models import Agent, CallKind, LLMCall, Run, Session
from testkit.upstream import Reply
from tests.openai.conftest import sdk
from tests.support.apiclient import asgi_client
from tests.support.chattab import open_tab

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_rate_limits(settings):
    settings.PARLEY_RUNS_PER_MINUTE = 0
    settings.PARLEY_SESSIONS_PER_MINUTE = 0


async def client_of(user):
    return await sync_to_async(asgi_client)(user)


async def run(client, text: str = "hi", **more):
    return await client.post("/api/runs", {"input": text, **more})


def next_midnight() -> datetime:
    return periods.next_start("day", timezone.now())


async def test_a_default_runs_budget_answers_429_with_its_figures_and_writes_nothing(
    alice, agent, upstream, settings
):
    settings.PARLEY_DEFAULT_BUDGET = "2 runs/day"
    as_alice = await client_of(alice)
    for n in range(2):
        assert (await run(as_alice, f"turn {n}")).status_code == 200
    response = await run(as_alice, "one more")
    assert response.status_code == 429
    body = response.json()
    assert body["budget"] == {
        "measure": "runs",
        "period": "day",
        "limit": 2,
        "used": 2,
        "resets_at": next_midnight().isoformat(),
        "shared": False,
        "agent_id": None,
    }
    assert "Your daily budget of 2 runs is used up (2 runs used)" in body["detail"]
    wait = int(response["Retry-After"])
    left = (next_midnight() - timezone.now()).total_seconds()
    assert left - 5 <= wait <= left + 5
    assert await Run.objects.acount() == 2
    assert await Session.objects.acount() == 2  # the refused run made no session


async def test_tokens_spent_count_through_every_door(alice, agent, upstream, settings):
    await Budget.objects.acreate(user=alice, measure="tokens", period="week", limit=100)
    upstream.script(Reply("Sixty tokens.", prompt_tokens=20, completion_tokens=40))
    upstream.script(Reply("Again.", prompt_tokens=20, completion_tokens=40))
    as_alice = await client_of(alice)
    assert (await run(as_alice)).status_code == 200  # 0 of 100 used
    assert (await run(as_alice)).status_code == 200  # 60 of 100: still room
    refused = await run(as_alice)
    assert refused.status_code == 429
    assert refused.json()["budget"]["used"] == 120

    _, key = await sync_to_async(create_token)(alice, "sdk")
    async with sdk(key) as client:
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(
                model=agent.name, messages=[{"role": "user", "content": "hi"}]
            )
    error = caught.value.body
    assert error["code"] == "insufficient_quota" and error["type"] == "insufficient_quota"
    assert error["budget"]["limit"] == 100 and error["budget"]["period"] == "week"
    assert "weekly budget of 100 tokens" in error["message"]
    assert caught.value.response.headers["Retry-After"]

    tab = await open_tab(alice)
    await tab.send(action="send", session_id="", input="and now?")
    notice = await tab.until("chat-notice")
    monday = timezone.localtime(periods.next_start("week", timezone.now()))
    assert "You have used your weekly budget of 100 tokens (120 tokens used)." in notice
    assert f"It renews {monday:%A %-d %B} at 00:00 (UTC)." in notice
    await tab.close()
    assert await Run.objects.acount() == 2


async def test_titles_and_summaries_count_to_the_sessions_owner(alice, agent, upstream):
    await Budget.objects.acreate(user=alice, measure="tokens", period="day", limit=50)
    await LLMCall.objects.acreate(user=alice, kind=CallKind.TITLE, model="m", total_tokens=50)
    response = await run(await client_of(alice))
    assert response.status_code == 429
    assert response.json()["budget"]["used"] == 50


async def test_last_periods_use_does_not_count(alice, agent, upstream):
    await Budget.objects.acreate(user=alice, measure="tokens", period="day", limit=50)
    call = await LLMCall.objects.acreate(user=alice, model="m", total_tokens=500)
    yesterday = periods.start("day", timezone.now()) - timedelta(seconds=1)
    await LLMCall.objects.filter(pk=call.pk).aupdate(created_at=yesterday)
    assert (await run(await client_of(alice))).status_code == 200


async def test_own_budget_overrides_the_default_and_the_groups_most_generous_wins(
    alice, bob, agent, upstream, settings
):
    settings.PARLEY_DEFAULT_BUDGET = "1 runs/day"
    small = await Group.objects.acreate(name="small")
    large = await Group.objects.acreate(name="large")
    await sync_to_async(bob.groups.add)(small, large)
    await Budget.objects.acreate(group=small, measure="runs", period="day", limit=2)
    await Budget.objects.acreate(group=large, measure="runs", period="day", limit=3)
    await Budget.objects.acreate(user=alice, measure="runs", period="day", limit=4)
    as_alice, as_bob = await client_of(alice), await client_of(bob)
    assert [(await run(as_alice)).status_code for _ in range(5)] == [200] * 4 + [429]
    assert [(await run(as_bob)).status_code for _ in range(4)] == [200] * 3 + [429]


async def test_a_shared_group_budget_counts_its_members_together(alice, bob, agent, upstream):
    team = await Group.objects.acreate(name="team")
    await sync_to_async(team.user_set.add)(alice, bob)
    await Budget.objects.acreate(group=team, shared=True, measure="runs", period="month", limit=3)
    as_alice, as_bob = await client_of(alice), await client_of(bob)
    assert (await run(as_alice)).status_code == 200
    assert (await run(as_alice)).status_code == 200
    assert (await run(as_bob)).status_code == 200
    refused = await run(as_bob)
    assert refused.status_code == 429
    assert "Group team's monthly budget of 3 runs" in refused.json()["detail"]
    assert refused.json()["budget"]["shared"] is True


async def test_an_agents_budget_counts_only_that_agent(alice, agent, upstream):
    other = await Agent.objects.acreate(name="Other", model="scripted")
    await Budget.objects.acreate(agent=other, measure="runs", period="day", limit=1)
    as_alice = await client_of(alice)
    assert (await run(as_alice, agent_id=str(other.pk))).status_code == 200
    refused = await run(as_alice, agent_id=str(other.pk))
    assert refused.status_code == 429
    assert refused.json()["budget"]["agent_id"] == str(other.pk)
    assert "on agent Other" in refused.json()["detail"]
    assert (await run(as_alice)).status_code == 200  # the default agent is not held by it


async def test_a_zero_limit_refuses_every_run(alice, agent, upstream):
    await Budget.objects.acreate(measure="cost", period="month", limit=Decimal("0"))
    response = await run(await client_of(alice))
    assert response.status_code == 429
    assert response.json()["budget"]["limit"] == 0.0


async def test_a_hundred_runs_at_once_at_the_edge_take_exactly_what_is_left(alice, agent, upstream):
    await Budget.objects.acreate(user=alice, measure="runs", period="day", limit=5)
    as_alice = await client_of(alice)
    assert (await run(as_alice)).status_code == 200  # 4 left
    upstream.script(*[Reply("ok", first_delay=0.2) for _ in range(100)])
    answers = await asyncio.gather(*(run(as_alice, f"at once {n}") for n in range(100)))
    codes = sorted(answer.status_code for answer in answers)
    assert codes == [200] * 4 + [429] * 96
    assert await Run.objects.acount() == 5


async def test_tokens_overshoot_by_at_most_the_runs_in_flight_when_reached(alice, agent, upstream):
    """Tokens count as calls end: runs started before the limit was reached finish; none
    starts after."""
    await Budget.objects.acreate(user=alice, measure="tokens", period="day", limit=100)
    as_alice = await client_of(alice)
    upstream.script(
        *[Reply("x", first_delay=0.3, prompt_tokens=30, completion_tokens=30) for _ in range(3)]
    )
    first = await asyncio.gather(*(run(as_alice, f"{n}") for n in range(3)))
    assert [r.status_code for r in first] == [200] * 3  # in flight together: 180 tokens
    assert (await run(as_alice)).status_code == 429
    spent = sum([c.total_tokens async for c in LLMCall.objects.filter(user=alice)])
    assert spent == 180


async def test_a_paused_run_goes_on_at_a_full_runs_budget_but_not_past_a_tokens_one(
    alice, agent, upstream
):
    """A run waiting for its client's tool results was counted as it started: the last run a
    runs budget allows still goes on; a used-up tokens budget stops it before the model call."""
    from tests.openai.test_client_tools import ASK, WEATHER, answered, calls_weather

    await Budget.objects.acreate(user=alice, measure="runs", period="day", limit=1)
    _, key = await sync_to_async(create_token)(alice, "sdk")
    upstream.script(calls_weather(), Reply("Sunny."))
    async with sdk(key) as client:
        first = await client.chat.completions.create(
            model=agent.name, messages=ASK, tools=[WEATHER]
        )
        messages = answered(first.choices[0].message)
        done = await client.chat.completions.create(
            model=agent.name, messages=messages, tools=[WEATHER]
        )
        assert done.choices[0].message.content == "Sunny."

        upstream.script(calls_weather())
        await Budget.objects.filter(measure="runs").adelete()
        paused = await client.chat.completions.create(
            model=agent.name, messages=ASK, tools=[WEATHER]
        )
        await Budget.objects.acreate(user=alice, measure="tokens", period="day", limit=1)
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(
                model=agent.name, messages=answered(paused.choices[0].message), tools=[WEATHER]
            )
    assert caught.value.body["budget"]["measure"] == "tokens"
    assert len(upstream.requests) == 3  # the refused continuation asked the model nothing
