"""Agent memory: past sessions as tools, session state, summaries and titles."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from sessions_app import engine
from sessions_app.models import (
    Agent,
    CallKind,
    LLMCall,
    Message,
    NameSource,
    Run,
    RunStatus,
    Session,
)
from sessions_app.services import memory, sessions, tools
from testkit.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def searching_agent(agent: Agent) -> Agent:
    """The default agent, given the tools that look up the user's past sessions (two of them)."""
    agent.search_session_history = True
    agent.num_history_sessions = 2
    agent.save(update_fields=["search_session_history", "num_history_sessions"])
    return agent


async def finish(user, text: str, **kwargs) -> Run:
    handle = await engine.start_run(user, text, **kwargs)
    return await handle.wait()


def call(name: str, arguments: dict | None = None, call_id: str = "call_1") -> Reply:
    return Reply(tool_calls=[{"id": call_id, "name": name, "arguments": arguments or {}}])


def tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


async def test_past_sessions_are_offered_as_tools_and_the_loop_answers(
    alice, bob, searching_agent, upstream
):
    for text in ("alice first", "alice second", "alice third"):
        await finish(alice, text)
    await finish(bob, "bob's private matter")
    current = await finish(alice, "warm up")
    upstream.script(call("get_previous_session_messages"), Reply("You asked about alice things."))

    run = await finish(alice, "What did we talk about before?", session_id=current.session_id)

    assert run.status == RunStatus.COMPLETED and run.content == "You asked about alice things."
    first, second = upstream.requests[-2:]
    assert tool_names(first) == ["get_previous_session_messages", "read_past_session"]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == (
        "get_previous_session_messages"
    )
    result = json.loads(second["messages"][-1]["content"])
    # The two newest other sessions of alice, newest first; never the current one, never bob's.
    assert [s["messages"][0]["content"] for s in result] == ["alice third", "alice second"]
    assert "bob" not in second["messages"][-1]["content"]
    stored = [
        (m.role, bool(m.tool_calls))
        async for m in Message.objects.filter(run=run).order_by("order")
    ]
    assert stored == [("user", False), ("assistant", True), ("tool", False), ("assistant", False)]
    # Both model calls are recorded, and the run's tokens are their sum.
    calls = [c async for c in LLMCall.objects.filter(run=run)]
    assert len(calls) == 2
    assert run.total_tokens == sum(c.total_tokens for c in calls)


async def test_read_past_session_refuses_someone_elses_session(
    alice, bob, searching_agent, upstream
):
    bobs = await finish(bob, "bob's secret recipe")
    mine = await finish(alice, "my old chat")
    upstream.script(
        call("read_past_session", {"session_id": str(bobs.session_id)}),
        Reply("I can't see that."),
        call("read_past_session", {"session_id": str(mine.session_id)}, call_id="call_2"),
        Reply("Found it."),
    )
    current = await finish(alice, "read bob's session")
    refused = json.loads(upstream.requests[-1]["messages"][-1]["content"])
    assert refused == {"error": "No such session."}
    await finish(alice, "read my old one", session_id=current.session_id)
    found = json.loads(upstream.requests[-1]["messages"][-1]["content"])
    assert found["messages"][0]["content"] == "my old chat"


def test_the_past_session_functions_only_ever_return_the_owners_sessions(
    alice, bob, searching_agent
):
    bobs = Session.objects.create(user=bob, agent=searching_agent, session_name="bob's")
    mine = Session.objects.create(user=alice, agent=searching_agent, session_name="alice's")
    current = Session.objects.create(user=alice, agent=searching_agent)
    listed = tools.previous_sessions(alice, current.session_id, 10)
    assert [s["session_id"] for s in listed] == [str(mine.session_id)]
    with pytest.raises(tools.ToolError):
        tools.read_past_session(alice, current.session_id, bobs.session_id)
    with pytest.raises(tools.ToolError):
        tools.read_past_session(alice, current.session_id, current.session_id)


async def test_without_function_calling_past_sessions_go_into_the_system_message(
    alice, searching_agent, upstream
):
    await Agent.objects.filter(pk=searching_agent.pk).aupdate(add_past_sessions_to_context=True)
    await finish(alice, "an earlier chat about tea")
    await finish(alice, "what did I ask before?")
    request = upstream.requests[-1]
    assert "tools" not in request
    system = request["messages"][0]["content"]
    assert "<previous_sessions>" in system and "an earlier chat about tea" in system


async def test_a_model_that_keeps_calling_tools_must_answer_after_five_rounds(
    alice, searching_agent, upstream
):
    upstream.script(*[call("get_previous_session_messages", call_id=f"c{i}") for i in range(5)])
    upstream.script(Reply("Enough looking."))
    run = await finish(alice, "loop forever")
    assert run.status == RunStatus.COMPLETED and run.content == "Enough looking."
    assert len(upstream.requests) == 6
    assert "tools" not in upstream.requests[-1]


async def test_the_state_tool_changes_state_and_each_run_keeps_its_own(
    alice, searching_agent, upstream
):
    await Agent.objects.filter(pk=searching_agent.pk).aupdate(
        search_session_history=False, enable_agentic_state=True
    )
    upstream.script(call("update_session_state", {"changes": {"city": "Paris"}}), Reply("Noted."))
    first = await finish(alice, "I live in Paris", session_state={"lang": "fr"})
    assert tool_names(upstream.requests[0]) == ["update_session_state"]
    upstream.script(call("update_session_state", {"changes": {"city": "Lyon"}}), Reply("Noted."))
    second = await finish(alice, "I moved to Lyon", session_id=first.session_id)
    session = await Session.objects.aget(pk=first.session_id)
    assert session.session_state == {"lang": "fr", "city": "Lyon"}
    assert first.session_state == {"lang": "fr", "city": "Paris"}
    assert second.session_state == {"lang": "fr", "city": "Lyon"}


async def test_history_keeps_tool_calls_with_their_results(alice, searching_agent, upstream):
    upstream.script(call("get_previous_session_messages"), Reply("Nothing before."))
    first = await finish(alice, "look back")
    await finish(alice, "and now?", session_id=first.session_id)
    history = upstream.requests[-1]["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant", "user"]
    assert history[1]["tool_calls"][0]["id"] == history[2]["tool_call_id"]
    # The last four messages start with the tool result, whose call was cut: it is dropped.
    await Agent.objects.filter(pk=searching_agent.pk).aupdate(num_history_messages=4)
    await finish(alice, "once more", session_id=first.session_id)
    assert [m["role"] for m in upstream.requests[-1]["messages"]] == [
        "assistant",
        "user",
        "assistant",
        "user",
    ]


async def test_a_summary_is_made_after_the_answer_and_used_later(alice, searching_agent, upstream):
    await Agent.objects.filter(pk=searching_agent.pk).aupdate(
        search_session_history=False, enable_session_summaries=True
    )
    summary = json.dumps({"summary": "The user likes hiking.", "topics": ["hiking"]})
    upstream.script(Reply("Hiking is great."), Reply(summary))
    handle = await engine.start_run(alice, "I like hiking")
    events = [e async for e in handle.events()]
    assert events[-1]["event"] == "RunCompleted"
    await memory.jobs.drain()
    assert len(upstream.requests) == 2
    # The answer was complete before the summary was even asked for.
    assert "Assistant: Hiking is great." in upstream.requests[1]["messages"][-1]["content"]
    session = await Session.objects.aget(pk=handle.session_id)
    assert session.summary["summary"] == "The user likes hiking."
    assert session.summary["topics"] == ["hiking"] and session.summary["updated_at"]
    call_row = await LLMCall.objects.aget(kind=CallKind.SUMMARY)
    assert call_row.run_id is None and call_row.session_id == session.session_id
    await finish(alice, "what do I like?", session_id=handle.session_id)
    await memory.jobs.drain()
    assert "The user likes hiking." in upstream.requests[2]["messages"][0]["content"]


async def test_the_embedded_model_is_asked_for_a_summary_of_bounded_length(
    alice, searching_agent, upstream, settings
):
    """It answers one request at a time: a summary must not hold it for a whole answer's length."""
    settings.LLM_EMBEDDED = True
    await Agent.objects.filter(pk=searching_agent.pk).aupdate(enable_session_summaries=True)
    summary = json.dumps({"summary": "The user likes tea.", "topics": ["tea"]})
    upstream.script(Reply("Tea is nice."), Reply(summary))
    await finish(alice, "I like tea")
    await memory.jobs.drain()
    assert upstream.requests[-1]["max_tokens"] == 320
    assert upstream.requests[0]["max_tokens"] == settings.PARLEY_EMBEDDED_MAX_TOKENS  # the answer


async def test_a_failing_summary_never_fails_the_run(alice, searching_agent, upstream):
    await Agent.objects.filter(pk=searching_agent.pk).aupdate(enable_session_summaries=True)
    upstream.script(Reply("Fine."), Reply(status=500, error_message="summary broke"))
    run = await finish(alice, "hello")
    await memory.jobs.drain()
    assert run.status == RunStatus.COMPLETED
    session = await Session.objects.aget(pk=run.session_id)
    assert session.summary is None
    failed = await LLMCall.objects.aget(kind=CallKind.SUMMARY)
    assert failed.ok is False and "summary broke" in failed.error


async def test_a_title_is_asked_for_after_the_first_answer(
    alice, searching_agent, upstream, settings
):
    settings.PARLEY_GENERATE_TITLES = True
    upstream.script(Reply("Sure."), Reply('"Planning a Trip to Lisbon."'))
    run = await finish(alice, "help me plan a trip to lisbon next spring please")
    session = await Session.objects.aget(pk=run.session_id)
    assert session.session_name.startswith("help me plan a trip")  # the first-message fallback
    await memory.jobs.drain()
    await session.arefresh_from_db()
    assert session.session_name == "Planning a Trip to Lisbon"
    assert session.name_source == NameSource.MODEL
    assert await LLMCall.objects.filter(kind=CallKind.TITLE, ok=True).acount() == 1
    await finish(alice, "second question", session_id=run.session_id)
    await memory.jobs.drain()
    assert await LLMCall.objects.filter(kind=CallKind.TITLE).acount() == 1  # only once


async def test_a_users_rename_wins_over_a_generated_title(
    alice, searching_agent, upstream, settings
):
    settings.PARLEY_GENERATE_TITLES = True
    upstream.script(Reply("Sure."), Reply("Model Title", first_delay=0.5))
    run = await finish(alice, "name me")
    await sync_to_async(sessions.update_session)(alice, run.session_id, session_name="Mine")
    await memory.jobs.drain()
    session = await Session.objects.aget(pk=run.session_id)
    assert session.session_name == "Mine" and session.name_source == NameSource.USER


async def test_a_title_is_asked_of_the_first_message_alone_shown_examples(
    alice, searching_agent, upstream, settings
):
    settings.PARLEY_GENERATE_TITLES = True
    upstream.script(Reply("Flour, water, salt and time."), Reply("Home Bread Baking"))
    run = await finish(alice, "How do I bake bread at home?")
    await memory.jobs.drain()
    session = await Session.objects.aget(pk=run.session_id)
    assert session.session_name == "Home Bread Baking"

    asked = upstream.requests[-1]["messages"]
    assert [m["role"] for m in asked] == ["system"] + ["user", "assistant"] * 5 + ["user"]
    assert "How do I bake bread at home?" in asked[-1]["content"]
    assert not any("Flour, water" in m["content"] for m in asked)  # never the answer
    # A configured endpoint is sent no sampling settings: some models refuse them.
    assert not {"temperature", "seed", "max_tokens"} & set(upstream.requests[-1])


async def test_the_embedded_model_is_asked_for_a_title_without_chance_and_briefly(
    alice, searching_agent, upstream, settings
):
    settings.PARLEY_GENERATE_TITLES = True
    settings.LLM_EMBEDDED = True
    upstream.script(Reply("Flour, water, salt and time."), Reply("Home Bread Baking"))
    await finish(alice, "How do I bake bread at home?")
    await memory.jobs.drain()
    asked = upstream.requests[-1]
    assert (asked["temperature"], asked["seed"], asked["max_tokens"]) == (0, 0, 24)


async def test_an_unusable_title_is_asked_again_in_other_words(
    alice, searching_agent, upstream, settings
):
    settings.PARLEY_GENERATE_TITLES = True
    upstream.script(
        Reply("Flour, water, salt and time."),
        Reply("To bake bread at home, you need flour."),
        Reply("Home Bread Baking"),
    )
    run = await finish(alice, "How do I bake bread at home?")
    await memory.jobs.drain()
    session = await Session.objects.aget(pk=run.session_id)
    assert session.session_name == "Home Bread Baking"
    assert session.name_source == NameSource.MODEL
    first, second = [r["messages"] for r in upstream.requests[-2:]]
    assert first[0] != second[0] and first[-1] != second[-1]
    calls = [(c.ok, c.error) async for c in LLMCall.objects.filter(kind=CallKind.TITLE)]
    assert sorted(calls) == [(False, "The model returned no usable title."), (True, "")]


async def test_a_failing_title_keeps_the_first_message(alice, searching_agent, upstream, settings):
    settings.PARLEY_GENERATE_TITLES = True
    upstream.script(Reply("Sure."), Reply(status=500), Reply("   "))
    run = await finish(alice, "keep my words as the title")
    await memory.jobs.drain()
    session = await Session.objects.aget(pk=run.session_id)
    assert session.session_name == "keep my words as the title"
    assert await LLMCall.objects.filter(kind=CallKind.TITLE, ok=False).acount() == 2


async def test_a_title_that_reads_like_an_answer_keeps_the_first_message(
    alice, searching_agent, upstream, settings
):
    """What the embedded model once gave as the title of a first chat, then a second try."""
    settings.PARLEY_GENERATE_TITLES = True
    upstream.script(
        Reply("Happy to help with your budget."),
        Reply("It seems I've been too busy. But feel free to ask, and I'll…"),
        Reply("Sure! Here is a title for your conversation"),
    )
    run = await finish(alice, "how do I budget for a used car")
    await memory.jobs.drain()
    session = await Session.objects.aget(pk=run.session_id)
    assert session.session_name == "how do I budget for a used car"
    assert session.name_source == NameSource.FIRST_MESSAGE
    refused = [c.error async for c in LLMCall.objects.filter(kind=CallKind.TITLE, ok=False)]
    assert refused == ["The model returned no usable title."] * 2


@pytest.mark.parametrize(
    "answer,title",
    [
        ('Title: "Budgeting for a Used Car!"\nI hope this helps.', "Budgeting for a Used Car"),
        ("**Used car budget**", "Used car budget"),
        ("Car Budget Tips", "Car Budget Tips"),
        ("Car Costs", "Car Costs"),  # a short word the message says
        ("It seems I've been too busy. But feel free to ask, and I'll…", ""),
        ("Sure", ""),
        ("I'm happy to help you plan a car budget", ""),
        ("As an AI, I cannot", ""),
        ("Budget. Then buy the car", ""),  # two sentences
        ("To budget for a used car, start", ""),  # how an answer begins
        ("Planning a Trip to Lisbon", ""),  # a title, but of another conversation
        ("Careful Spending Plans", ""),  # "careful" is not "car"
        ("  \n ", ""),
        # Too long, or a word said twice: cut to the head.
        ("Budgeting for a Used Car: A Guide for First-Time Buyers", "Budgeting for a Used Car"),
        ("How to Budget for a Used Car in Your First Year", "How to Budget for a Used Car"),
        ("Used Car Budget for a Used Car", "Used Car Budget"),
        ("A careful plan for buying your first used car on a budget", ""),  # "A careful plan"
        ("Topic: Used Car Budget", "Used Car Budget"),
        # The message's own words are not a title from the model: the fallback keeps them.
        ("How do I budget for a used car?", ""),
        ("How do I budget", ""),
        ("Dear [Seller's Name]", ""),  # a template
        # Copied from the examples the model is shown.
        ("Toddler Sleep Tips", ""),
        ("Toddler Car Budget", ""),
    ],
)
def test_a_title_must_look_like_a_title_of_the_first_message(answer, title):
    assert memory.clean_title(answer, "how do I budget for a used car") == title


@pytest.mark.parametrize(
    "answer,first,title",
    [
        ("面包的做法", "怎么在家做面包?", "面包的做法"),
        ("旅行计划", "怎么在家做面包?", ""),  # another conversation's title
        ("パンの焼き方", "家でパンを焼くには?", "パンの焼き方"),
    ],
)
def test_titles_in_scripts_without_spaces_are_judged_by_shared_characters(answer, first, title):
    assert memory.clean_title(answer, first) == title
