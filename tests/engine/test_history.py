"""The history a run is sent (CONTRACT §6), read for many sessions at once: each session as its
agent limits it, in two queries at most whatever the number of sessions."""

from __future__ import annotations

import pytest

from sessions_app.models import Agent, Message, Role, Run, RunStatus, Session
from sessions_app.services.context import Place, histories, history_messages
from testkit.querycount import count_queries
from tests.support.apiclient import stored_run

pytestmark = pytest.mark.django_db


def _session(user, agent) -> Session:
    return Session.objects.create(user=user, agent=agent, session_name="s")


def _run(session, status=RunStatus.COMPLETED) -> Run:
    """The session's next run, with what history must skip or pair: a system message, and a
    tool call with its result."""
    position = session.runs.count() + 1
    run = stored_run(session, f"q{position}", f"a{position}", status=status)
    calls = [{"id": f"c{position}", "type": "function", "function": {"name": "f"}}]
    Message.objects.create(run=run, session=session, order=2, role=Role.SYSTEM, content="sys")
    Message.objects.create(
        run=run, session=session, order=3, role=Role.ASSISTANT, content="", tool_calls=calls
    )
    Message.objects.create(
        run=run, session=session, order=4, role=Role.TOOL, content="42", tool_call_id=f"c{position}"
    )
    return run


def _texts(messages: list[Message]) -> list[str]:
    return [m.content or m.tool_calls[0]["id"] for m in messages]


def test_each_session_gets_what_its_agent_sees_in_two_queries(alice):
    two_runs = Agent.objects.create(name="Two runs", model="m", num_history_runs=2)
    three_messages = Agent.objects.create(name="Three", model="m", num_history_messages=3)
    one_message = Agent.objects.create(name="One", model="m", num_history_messages=1)
    blind = Agent.objects.create(name="Blind", model="m", add_history_to_context=False)
    first, second, third = (_session(alice, a) for a in (two_runs, three_messages, blind))
    fourth = _session(alice, one_message)
    for position in range(1, 6):
        _run(first, RunStatus.CANCELLED if position == 4 else RunStatus.COMPLETED)
    for _ in range(2):
        _run(second)
    _run(second, RunStatus.RUNNING)
    _run(third)
    _run(fourth)
    places = [
        Place(two_runs, first, 6),
        Place(three_messages, second, 4),
        Place(blind, third, 2),
        Place(one_message, fourth, 2),
    ]

    with count_queries() as queries:
        found = histories(places)

    assert queries.total == 2
    assert _texts(found[0]) == ["q3", "a3", "c3", "42", "q5", "a5", "c5", "42"], (
        "the last two completed runs (the cancelled run 4 is not history), without the system "
        "message, each tool call with its result"
    )
    assert _texts(found[1]) == ["a2", "c2", "42"], "the last three (the running run 3 is not)"
    assert found[2] == []
    assert found[3] == [], "a tool result without its call is not sent"


def test_a_past_run_is_given_the_history_it_was_sent(alice):
    agent = Agent.objects.create(name="Two runs", model="m", num_history_runs=2)
    session = _session(alice, agent)
    for _ in range(4):
        _run(session)
    before_third = ["q1", "a1", "c1", "42", "q2", "a2", "c2", "42"]
    assert _texts(history_messages(agent, session, 3)) == before_third
    assert history_messages(agent, session, 1) == []


def test_sessions_read_together_are_each_cut_at_their_agents_limit(alice):
    one = Agent.objects.create(name="One run", model="m", num_history_runs=1)
    three = Agent.objects.create(name="Three runs", model="m", num_history_runs=3)
    short, long = _session(alice, one), _session(alice, three)
    for session in (short, long):
        for _ in range(4):
            _run(session)

    found = histories([Place(one, short, 5), Place(three, long, 5)])

    assert _texts(found[0]) == ["q4", "a4", "c4", "42"]
    assert _texts(found[1]) == [t for n in (2, 3, 4) for t in (f"q{n}", f"a{n}", f"c{n}", "42")]


def test_a_past_run_limited_by_messages_sees_only_what_came_before_it(alice):
    agent = Agent.objects.create(name="Two messages", model="m", num_history_messages=2)
    session = _session(alice, agent)
    for _ in range(4):
        _run(session)
    assert _texts(history_messages(agent, session, 3)) == ["c2", "42"]
