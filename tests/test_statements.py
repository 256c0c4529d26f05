"""The run-start statements written as SQL (sessions_app.services.statements) read and write
exactly what the ORM does, on whichever database the tests run on (SQLite, and PostgreSQL in CI)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from sessions_app.models import Agent, ApiToken, Message, Role, Run, RunStatus, Session
from sessions_app.services import statements
from sessions_app.services.tokens import _digest, create_token
from testkit.querycount import count_queries
from tests.apiclient import stored_run

pytestmark = pytest.mark.django_db


def fields(obj) -> dict:
    """Every stored value of a model instance, as Python holds it."""
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


@pytest.fixture
def stateful_agent() -> Agent:
    """Not the default agent: its instructions are filled from its initial session state, which
    it adds to the context, and it keeps every message of history."""
    return Agent.objects.create(
        name="Reader",
        model="m",
        instructions="Be {mood}.",
        session_state={"mood": "calm", "list": [1, 2]},
        num_history_messages=None,
        add_session_state_to_context=True,
    )


def _session(user, agent, **extra) -> Session:
    return Session.objects.create(user=user, agent=agent, session_name="s", **extra)


def _run(session, status=RunStatus.COMPLETED, answer="a") -> Run:
    """The next run of the session, stored (`stored_run`), with what history must skip or pair:
    a system message, and a tool call with its result."""
    run = stored_run(session, "a question", answer, status=status)
    calls = [{"id": f"c{run.position}", "type": "function", "function": {"name": "f"}}]
    Message.objects.create(run=run, session=session, order=2, role=Role.SYSTEM, content="sys")
    Message.objects.create(
        run=run, session=session, order=3, role=Role.ASSISTANT, content="", tool_calls=calls
    )
    Message.objects.create(
        run=run, session=session, order=4, role=Role.TOOL, content="42", tool_call_id=calls[0]["id"]
    )
    return run


def test_tokens_come_with_their_users_as_the_orm_loads_them(alice, bob):
    token, raw = create_token(alice, "laptop")
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now() - timedelta(days=1))
    other, other_raw = create_token(bob)
    bob.is_active = False
    bob.save()

    found = statements.tokens_with_users([_digest(raw), _digest(other_raw), _digest("prl_unknown")])

    expected = ApiToken.objects.select_related("user").filter(pk__in=[token.pk, other.pk])
    by_pk = {t.pk: (fields(t), fields(t.user)) for t in expected}
    assert {t.pk: (fields(t), fields(t.user)) for t in found} == by_pk, (
        "same tokens, same users, same values (datetimes aware, booleans bool)"
    )
    assert {t.user.is_active for t in found} == {True, False}
    assert statements.tokens_with_users([]) == []


def test_sessions_come_with_their_agents_and_only_the_owners(alice, bob, stateful_agent):
    mine = _session(
        alice, stateful_agent, session_state={"mood": "glad"}, summary={"summary": "hi"}
    )
    plain = _session(alice, stateful_agent)
    theirs = _session(bob, stateful_agent)
    ids = [mine.pk, plain.pk, theirs.pk, uuid.uuid4()]

    owned = statements.sessions_with_agents(ids, alice)
    anyone = statements.sessions_with_agents(ids, None)

    assert {s.pk for s in owned} == {mine.pk, plain.pk}, "bob's session and an unknown id: absent"
    assert {s.pk for s in anyone} == {mine.pk, plain.pk, theirs.pk}
    orm = {s.pk: s for s in Session.objects.select_related("agent").filter(pk__in=ids)}
    for session in anyone:
        assert fields(session) == fields(orm[session.pk])
        assert fields(session.agent) == fields(orm[session.pk].agent)
    loaded = next(s for s in owned if s.pk == mine.pk)
    assert isinstance(loaded.pk, uuid.UUID)
    assert loaded.session_state == {"mood": "glad"} and loaded.summary == {"summary": "hi"}
    assert loaded.agent.session_state == {"mood": "calm", "list": [1, 2]}


def test_agents_come_as_the_orm_loads_them(stateful_agent):
    other = Agent.objects.create(name="Other", model="n", num_history_messages=4)

    found = statements.agents([stateful_agent.pk, other.pk, uuid.uuid4()])

    orm = {a.pk: fields(a) for a in Agent.objects.filter(pk__in=[stateful_agent.pk, other.pk])}
    assert {a.pk: fields(a) for a in found} == orm, "an unknown id is absent; values as the ORM's"
    assert next(a for a in found if a.pk == stateful_agent.pk).session_state == {
        "mood": "calm",
        "list": [1, 2],
    }
    assert statements.agents([]) == []


def test_run_state_is_each_sessions_last_position_and_whether_a_run_is_active(
    alice, stateful_agent
):
    idle, busy, empty = (_session(alice, stateful_agent) for _ in range(3))
    for position in (1, 2, 3):
        _run(idle, RunStatus.ERROR if position == 2 else RunStatus.COMPLETED)
    _run(busy)
    _run(busy, RunStatus.RUNNING)

    state = statements.run_state([idle.pk, busy.pk, empty.pk])

    assert state == {idle.pk: (3, False), busy.pk: (2, True)}, "no runs yet: not in the answer"
    assert statements.run_state([]) == {}


def test_history_is_the_messages_of_each_sessions_last_completed_runs(alice, stateful_agent):
    first, second = _session(alice, stateful_agent), _session(alice, stateful_agent)
    for position in range(1, 6):
        status = RunStatus.CANCELLED if position == 4 else RunStatus.COMPLETED
        _run(first, status, answer=f"first {position}")
    for position in (1, 2):
        _run(second, answer=f"second {position}")
    _run(second, RunStatus.RUNNING)

    with count_queries() as queries:
        found = statements.last_runs_messages([first.pk, second.pk], 2)

    assert queries.total == 1
    ranked = (
        Run.objects.filter(session_id__in=[first.pk, second.pk], status=RunStatus.COMPLETED)
        .annotate(
            rank=Window(RowNumber(), partition_by=[F("session_id")], order_by=F("position").desc())
        )
        .filter(rank__lte=2)
        .values("pk")
    )
    expected = list(
        Message.objects.filter(run_id__in=ranked)
        .exclude(role=Role.SYSTEM)
        .annotate(run_position=F("run__position"))
        .order_by("session_id", "run__position", "order")
    )
    assert [fields(m) for m in found] == [fields(m) for m in expected]
    assert [m.run_position for m in found] == [m.run_position for m in expected]
    positions = {(m.session_id, m.run_position) for m in found}
    assert positions == {(first.pk, 3), (first.pk, 5), (second.pk, 1), (second.pk, 2)}, (
        "the cancelled run 4 and the running run 3 are not history"
    )
    calls = [m.tool_calls for m in found if m.session_id == first.pk and m.tool_calls]
    assert calls[0] == [{"id": "c3", "type": "function", "function": {"name": "f"}}]
    assert statements.last_runs_messages([first.pk], 0) == []


def test_inserted_rows_read_back_as_the_orms_would_write_them(alice, stateful_agent):
    session = Session(
        user=alice, agent=stateful_agent, session_name="new", session_state={"a": [1]}
    )
    statements.insert([session])
    runs = [
        Run(
            session=session,
            user=alice,
            agent=stateful_agent,
            position=p,
            status=RunStatus.COMPLETED,
            input=f"q{p}",
            model="m",
        )
        for p in range(1, 81)  # more than one batch on SQLite (999 parameters a statement)
    ]
    statements.insert(runs)
    messages = [
        Message(run=run, session=session, order=order, role=Role.USER, content=run.input)
        for run in runs
        for order in (0, 1)
    ]
    statements.insert(messages)

    assert all(m.pk is not None for m in messages), "auto ids are read back"
    assert len({m.pk for m in messages}) == 160
    assert all(not obj._state.adding for obj in [session, *runs, *messages])
    for obj in [session, runs[0], runs[-1], messages[0], messages[-1]]:
        stored = type(obj).objects.get(pk=obj.pk)
        assert fields(stored) == fields(obj), "what was written is what the instance holds"
    assert runs[0].created_at is not None, "auto_now_add is filled in, as the ORM does"
    stored = Message.objects.get(pk=messages[-1].pk)
    assert (stored.run_id, stored.order, stored.tool_calls) == (runs[-1].pk, 1, None)
    statements.insert([])


def test_touching_sessions_sets_their_updated_at_only(alice, stateful_agent):
    touched, left = _session(alice, stateful_agent), _session(alice, stateful_agent)
    before = Session.objects.get(pk=left.pk).updated_at
    now = timezone.now() + timedelta(hours=1)

    statements.touch_sessions([touched.pk], now)

    assert Session.objects.get(pk=touched.pk).updated_at == now
    assert Session.objects.get(pk=left.pk).updated_at == before


def test_an_update_changes_one_row_only_while_its_condition_holds(alice, stateful_agent):
    session = _session(alice, stateful_agent)
    running = _run(session, RunStatus.RUNNING)
    now = timezone.now()
    values = {"content": "partial", "content_seq": 7, "heartbeat_at": now, "session_state": None}

    changed = statements.update(
        Run, running.pk, values, status=RunStatus.RUNNING, cancel_requested=False
    )
    assert changed == 1
    stored = Run.objects.get(pk=running.pk)
    assert (stored.content, stored.content_seq, stored.heartbeat_at) == ("partial", 7, now)
    assert stored.session_state is None

    Run.objects.filter(pk=running.pk).update(status=RunStatus.INTERRUPTED)
    done = {"status": RunStatus.COMPLETED, "content": "late", "cost": "0.5"}
    assert statements.update(Run, running.pk, done, status__in=["PENDING", "RUNNING"]) == 0
    assert Run.objects.get(pk=running.pk).content == "partial", "a reaped run is not overwritten"

    message = Message.objects.filter(run=running, role=Role.ASSISTANT).first()
    calls = [{"id": "x", "function": {"name": "f", "arguments": "{}"}}]
    assert statements.update(Message, message.pk, {"content": "", "tool_calls": calls}) == 1
    assert Message.objects.get(pk=message.pk).tool_calls == calls
