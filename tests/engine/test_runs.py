"""The run engine, driven as the UI and API drive it, against a real loopback upstream."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async

from sessions_app import engine, signals
from sessions_app.engine import generate
from sessions_app.engine.coalesce import Coalescer, checkpoint_interval, coalesce_interval
from sessions_app.engine.registry import registry
from sessions_app.llm import client as llm
from sessions_app.llm import pool
from sessions_app.models import Agent, LLMCall, Message, Run, RunStatus, Session
from sessions_app.services import sessions
from sessions_app.services.access import NotFound
from testkit.upstream import Reply
from tests.support.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)


async def run_to_end(user, text: str, **kwargs):
    handle = await engine.start_run(user, text, **kwargs)
    events = [event async for event in handle.events()]
    return await handle.wait(), events


def sent_dialogue(request: dict) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in request["messages"] if m["role"] != "system"]


async def test_a_run_without_session_id_creates_a_session_visible_at_once(
    alice, brief_agent, upstream
):
    upstream.script(Reply("Hello Alice.", first_delay=0.5))
    handle = await engine.start_run(alice, "Hi there")
    session = await Session.objects.aget(pk=handle.session_id)
    assert session.user_id == alice.pk and session.agent_id == brief_agent.pk
    assert (await Run.objects.aget(pk=handle.run_id)).status == RunStatus.RUNNING

    run = await handle.wait()
    assert run.status == RunStatus.COMPLETED
    assert run.content == "Hello Alice."
    assert run.position == 1
    stored = [(m.role, m.content) async for m in Message.objects.filter(run=run).order_by("order")]
    assert stored == [("user", "Hi there"), ("assistant", "Hello Alice.")]
    assert upstream.requests[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi there"},
    ]


async def test_history_is_the_last_three_completed_runs(alice, agent, upstream):
    """The Agno seed example: five runs, then the sixth sees runs 3-5 and its new message."""
    first, _ = await run_to_end(alice, "question 1")
    for n in range(2, 6):
        await run_to_end(alice, f"question {n}", session_id=first.session_id)
    await run_to_end(alice, "question 6", session_id=first.session_id)

    assert sent_dialogue(upstream.requests[-1]) == [
        ("user", "question 3"),
        ("assistant", "Echo: question 3"),
        ("user", "question 4"),
        ("assistant", "Echo: question 4"),
        ("user", "question 5"),
        ("assistant", "Echo: question 5"),
        ("user", "question 6"),
    ]
    # Each run stores only its own messages: the session grows linearly, not quadratically.
    assert await Message.objects.filter(session_id=first.session_id).acount() == 12


async def test_runs_started_together_each_see_as_much_history_as_their_agent_wants(
    alice, agent, upstream
):
    brief = await Agent.objects.acreate(name="Brief", model="scripted", num_history_runs=1)
    chats = {}
    for who in (agent, brief):
        first, _ = await run_to_end(alice, f"{who.name} 1", agent_id=who.pk)
        for n in (2, 3):
            await run_to_end(alice, f"{who.name} {n}", session_id=first.session_id)
        chats[who.name] = first.session_id
    upstream.reset()
    handles = await asyncio.gather(
        *(engine.start_run(alice, f"{name} 4", session_id=sid) for name, sid in chats.items())
    )
    for handle in handles:
        await handle.wait()
    sent = {
        sent_dialogue(r)[-1][1]: [text for _, text in sent_dialogue(r)] for r in upstream.requests
    }
    assert sent["Assistant 4"] == [
        "Assistant 1", "Echo: Assistant 1", "Assistant 2", "Echo: Assistant 2",
        "Assistant 3", "Echo: Assistant 3", "Assistant 4",
    ]  # fmt: skip
    assert sent["Brief 4"] == ["Brief 3", "Echo: Brief 3", "Brief 4"]


async def test_failed_runs_are_left_out_of_history(alice, agent, upstream):
    first, _ = await run_to_end(alice, "remember 7")
    upstream.script(Reply(status=500, error_message="boom"))
    await run_to_end(alice, "this one fails", session_id=first.session_id)
    await run_to_end(alice, "what number?", session_id=first.session_id)
    assert sent_dialogue(upstream.requests[-1]) == [
        ("user", "remember 7"),
        ("assistant", "Echo: remember 7"),
        ("user", "what number?"),
    ]


async def test_num_history_messages_takes_the_last_messages(alice, agent, upstream):
    await Agent.objects.filter(pk=agent.pk).aupdate(num_history_messages=3)
    first, _ = await run_to_end(alice, "one")
    await run_to_end(alice, "two", session_id=first.session_id)
    await run_to_end(alice, "three", session_id=first.session_id)
    assert sent_dialogue(upstream.requests[-1]) == [
        ("assistant", "Echo: one"),
        ("user", "two"),
        ("assistant", "Echo: two"),
        ("user", "three"),
    ]


async def test_history_can_be_turned_off(alice, agent, upstream):
    await Agent.objects.filter(pk=agent.pk).aupdate(add_history_to_context=False, instructions="")
    first, _ = await run_to_end(alice, "one")
    await run_to_end(alice, "two", session_id=first.session_id)
    assert upstream.requests[-1]["messages"] == [{"role": "user", "content": "two"}]


async def test_two_users_chatting_alternately_never_see_each_other(alice, bob, agent, upstream):
    sessions = {}
    for user in (alice, bob):
        for n in (1, 2):
            run, _ = await run_to_end(user, f"{user.username} session {n} turn 1")
            sessions[user.username, n] = run.session_id
    for turn in (2, 3):
        for user in (alice, bob):
            for n in (1, 2):
                text = f"{user.username} session {n} turn {turn}"
                await run_to_end(user, text, session_id=sessions[user.username, n])
                sent = " ".join(c for _, c in sent_dialogue(upstream.requests[-1]))
                other = "bob" if user.username == "alice" else "alice"
                assert other not in sent
                assert f"session {3 - n}" not in sent
                assert f"{user.username} session {n} turn {turn - 1}" in sent


async def test_someone_elses_session_is_not_found(alice, bob, agent, upstream):
    run, _ = await run_to_end(alice, "private")
    with pytest.raises(NotFound):
        await engine.start_run(bob, "let me in", session_id=run.session_id)
    with pytest.raises(NotFound):
        await engine.start_run(bob, "let me in", session_id="not-a-uuid")
    with pytest.raises(NotFound):
        await engine.cancel_run(bob, run.run_id)
    assert await Run.objects.filter(session_id=run.session_id).acount() == 1


@pytest.mark.parametrize("text,status", [("", 400), ("   \n", 400), ("x" * 32001, 413)])
async def test_empty_or_oversized_input_is_refused_and_nothing_is_saved(
    alice, agent, upstream, text, status
):
    with pytest.raises(engine.InputError) as excinfo:
        await engine.start_run(alice, text)
    assert excinfo.value.status == status
    assert await Session.objects.acount() == 0
    assert upstream.requests == []


async def test_a_second_run_in_a_busy_session_conflicts(alice, agent, upstream):
    answer = threading.Event()  # the first run is in progress until the test lets it answer
    upstream.script(Reply("slow answer", held=answer))
    handle = await engine.start_run(alice, "first")
    with pytest.raises(engine.RunConflict):
        await engine.start_run(alice, "second", session_id=handle.session_id)
    await upstream.wait_for_requests(1)
    answer.set()
    run = await handle.wait()
    assert len(upstream.requests) == 1  # the refused one never asked the model
    assert run.status == RunStatus.COMPLETED
    assert await Run.objects.filter(session_id=handle.session_id).acount() == 1
    # Once it finished, the session takes new runs again.
    second, _ = await run_to_end(alice, "second", session_id=handle.session_id)
    assert second.status == RunStatus.COMPLETED and second.position == 2


async def test_the_database_refuses_two_active_runs_in_one_session(alice, agent, upstream):
    from django.db import IntegrityError

    session = await Session.objects.acreate(user=alice, agent=agent)
    fields = {"session": session, "user": alice, "agent": agent, "input": "x"}
    await Run.objects.acreate(position=1, status=RunStatus.RUNNING, **fields)
    with pytest.raises(IntegrityError):
        await Run.objects.acreate(position=2, status=RunStatus.PENDING, **fields)


async def test_events_are_coalesced_gapless_and_add_up_to_the_answer(alice, agent, upstream):
    upstream.script(Reply(tokens=200, delay=0.002))
    run, events = await run_to_end(alice, "count")
    kinds = [e["event"] for e in events]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunCompleted"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert all(e["run_id"] == str(run.run_id) for e in events)
    pieces = [e["content"] for e in events if e["event"] == "RunContent"]
    assert "".join(pieces) == run.content == "".join(f"tok{i} " for i in range(200))
    assert 2 <= len(pieces) < 60  # 200 tokens over ~0.4 s arrive as a handful of pieces
    assert pieces[0] == "tok0 "  # the first piece is sent at once, alone
    assert events[-1]["content"] == run.content
    assert events[-1]["metrics"]["output_tokens"] == 200


async def test_a_late_subscriber_replays_without_gap_or_duplicate(alice, agent, upstream):
    upstream.script(Reply(tokens=30, delay=0.02))
    handle = await engine.start_run(alice, "stream")
    await until(lambda: handle.stream.seq >= 2, "a piece of the answer")  # and RunStarted
    seen = handle.stream.seq
    late = [e async for e in handle.events(after_seq=seen)]
    early = handle.stream.events[:seen]
    assert [e["seq"] for e in early + late] == list(range(1, len(early + late) + 1))
    run = await handle.wait()
    text = "".join(e["content"] for e in early + late if e["event"] == "RunContent")
    assert text == run.content


async def test_usage_reported_by_the_upstream_is_used(alice, agent, upstream):
    upstream.script(Reply("four words of answer", prompt_tokens=42, completion_tokens=5))
    run, events = await run_to_end(alice, "hi")
    assert (run.input_tokens, run.output_tokens, run.total_tokens) == (42, 5, 47)
    assert run.usage_estimated is False
    assert run.time_to_first_token is not None and run.duration >= run.time_to_first_token
    call = await LLMCall.objects.aget(run=run)
    assert (call.kind, call.input_tokens, call.output_tokens) == ("chat", 42, 5)
    assert events[-1]["metrics"]["total_tokens"] == 47


async def test_without_usage_tokens_are_counted_with_the_servers_tokenizer(
    alice, brief_agent, upstream
):
    upstream.script(Reply("one two three four five", usage=False))
    run, _ = await run_to_end(alice, "count these words")
    assert run.usage_estimated is True
    assert run.output_tokens == 5  # the scripted tokenizer counts words
    # system "Be brief." (2) + user (3) words, plus a per-message template overhead.
    assert run.input_tokens == 5 + 4 * 2
    session = await Session.objects.aget(pk=run.session_id)
    metrics = await sync_to_async(sessions.session_metrics)(session)
    assert metrics["total_tokens"] == run.total_tokens


async def test_cost_comes_from_the_configured_prices(alice, agent, upstream, settings):
    settings.LLM_PRICES = "scripted=1.00:2.00"
    upstream.script(Reply("ok", prompt_tokens=1_000_000, completion_tokens=500_000))
    run, _ = await run_to_end(alice, "price me")
    assert float(run.cost) == pytest.approx(2.0)
    settings.LLM_PRICES = ""
    run, _ = await run_to_end(alice, "again")
    assert run.cost is None


async def test_session_state_fills_placeholders_and_is_shown_when_asked(alice, agent, upstream):
    await Agent.objects.filter(pk=agent.pk).aupdate(
        instructions="The user is {user_name}, {age}; unknown {missing} stays.",
        session_state={"age": 30},
        add_session_state_to_context=True,
    )
    first, _ = await run_to_end(alice, "who am I?", session_state={"user_name": "John"})
    system = upstream.requests[-1]["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("The user is John, 30; unknown {missing} stays.")
    state = '<session_state>\n{"age": 30, "user_name": "John"}\n</session_state>'
    assert state in system["content"]
    # The state is kept with the session: a later run without state still sees it.
    await run_to_end(alice, "and now?", session_id=first.session_id)
    assert "The user is John, 30" in upstream.requests[-1]["messages"][0]["content"]


async def test_a_summary_is_shown_in_the_system_message(alice, agent, upstream):
    first, _ = await run_to_end(alice, "hello")
    await Session.objects.filter(pk=first.session_id).aupdate(
        summary={"summary": "The user likes hiking.", "topics": ["hiking"]}
    )
    await run_to_end(alice, "what do I like?", session_id=first.session_id)
    system = upstream.requests[-1]["messages"][0]["content"]
    assert "<summary_of_previous_interactions>\nThe user likes hiking.\n" in system


async def test_naming_the_sessions_own_agent_costs_no_query_and_another_agent_is_used(
    alice, agent, upstream
):
    from testkit.querycount import count_queries

    other = await Agent.objects.acreate(name="Other", model="other-model")
    first, _ = await run_to_end(alice, "one")
    await signals.sent()  # what its end set going (live evaluation reads its rules)
    with count_queries() as unnamed:
        await run_to_end(alice, "two", session_id=first.session_id)
    with count_queries() as named:
        same, _ = await run_to_end(alice, "three", session_id=first.session_id, agent_id=agent.pk)
    assert same.agent_id == agent.pk
    # Clients often repeat the session's agent: it was loaded with the session already.
    assert named.total == unnamed.total
    switched, _ = await run_to_end(alice, "four", session_id=first.session_id, agent_id=other.pk)
    assert switched.agent_id == other.pk and switched.model == "other-model"
    assert upstream.requests[-1]["model"] == "other-model"
    with pytest.raises(NotFound):
        await engine.start_run(alice, "five", session_id=first.session_id, agent_id="not-an-id")


async def test_the_number_of_queries_does_not_grow_with_the_answer(
    alice, agent, upstream, settings
):
    from testkit.querycount import count_queries

    # Checkpoints and the process's heartbeat come by the clock (a second, ten seconds), so on a
    # slow machine a long answer meets more of them: the count here is of everything else.
    settings.PARLEY_CHECKPOINT_INTERVAL = 3600
    settings.PARLEY_HEARTBEAT_INTERVAL = 3600
    await run_to_end(alice, "warm up")  # first-use queries (content types, etc.) aside
    await signals.sent()  # and those its end sets going (live evaluation reads its rules)
    upstream.script(Reply(tokens=20))
    with count_queries() as short:
        await run_to_end(alice, "short")
    upstream.script(Reply(tokens=2000))
    with count_queries() as long:
        await run_to_end(alice, "long")
    # Listed on failure, with their threads and times.
    listing = f"short:\n{short.described()}\nlong:\n{long.described()}"
    assert short.writes == long.writes, listing
    assert short.total == long.total, listing
    # A new session: rate check, agent, budgets, session, run, both messages; then the outcome
    # (its calls, the state, run, answer, session). Waiting for the run reads nothing back.
    assert long.total <= 13 and long.writes <= 7


async def test_runs_one_after_another_reuse_one_upstream_connection(
    alice, agent, upstream, settings
):
    # A stream read only up to `[DONE]` leaves its response unfinished, and a response closed
    # unfinished takes its connection with it: each run would connect anew.
    settings.PARLEY_GENERATE_TITLES = False
    before = upstream.connections
    first, _ = await run_to_end(alice, "one")
    for text in ("two", "three", "four"):
        run, _ = await run_to_end(alice, text, session_id=first.session_id)
        assert run.status == RunStatus.COMPLETED
    assert upstream.connections - before == 1


async def test_an_idle_upstream_connection_is_kept_for_llm_keepalive_seconds(
    alice, agent, upstream, settings
):
    async def runs_after_a_pause(keepalive: float) -> int:
        """Upstream connections opened by two runs half a second apart."""
        await pool.close_clients()  # clients read the setting when they are made
        settings.LLM_KEEPALIVE = keepalive
        before = upstream.connections
        await run_to_end(alice, "one")
        await asyncio.sleep(0.5)
        await run_to_end(alice, "two")
        return upstream.connections - before

    assert await runs_after_a_pause(60.0) == 1
    assert await runs_after_a_pause(0.1) == 2  # the idle one had expired: connected anew
    await pool.close_clients()


async def test_many_streams_at_once_fill_pools_of_bounded_size_and_keep_their_connections(
    upstream,
):
    async def answer() -> str:
        return "".join(
            [
                i.content
                async for i in llm.stream_chat("scripted", [{"role": "user", "content": "hi"}])
                if isinstance(i, llm.Delta)
            ]
        )

    wanted = pool.POOL_SIZE + 8
    before = upstream.connections
    for _ in range(2):
        upstream.script(*[Reply("at once", first_delay=0.3)] * wanted)
        assert await asyncio.gather(*[answer() for _ in range(wanted)]) == ["at once"] * wanted
    # Two clients' pools: a full one and the rest; the second burst reused every connection.
    pools = pool._endpoint.pools[id(asyncio.get_running_loop())]
    assert [p.busy for p in pools] == [0, 0]
    assert upstream.connections - before == wanted


async def test_runs_started_in_the_same_instant_are_created_together(alice, bob, agent, upstream):
    from testkit.querycount import count_queries

    a1, _ = await run_to_end(alice, "a1 first")
    await run_to_end(alice, "a1 second", session_id=a1.session_id)
    a2, _ = await run_to_end(alice, "a2 first")
    b1, _ = await run_to_end(bob, "b1 first")
    upstream.reset()
    upstream.script(*[Reply("answer", first_delay=0.5)] * 4)  # nothing finishes while we count
    asks = [
        engine.start_run(alice, "a1 third", session_id=a1.session_id),
        engine.start_run(alice, "a2 second", session_id=a2.session_id, session_state={"k": 1}),
        engine.start_run(bob, "b1 second", session_id=b1.session_id),
        engine.start_run(alice, "a brand new chat"),
        engine.start_run(bob, "not my chat", session_id=a1.session_id),
        engine.start_run(alice, "no such chat", session_id="not-an-id"),
    ]
    with count_queries() as counted:
        outcomes = await asyncio.gather(*asks, return_exceptions=True)
    # Refusals are each asker's own; the others start.
    assert isinstance(outcomes[4], NotFound) and isinstance(outcomes[5], NotFound)
    finished = [await handle.wait() for handle in outcomes[:4]]
    assert [r.status for r in finished] == [RunStatus.COMPLETED] * 4
    assert [r.position for r in finished] == [3, 2, 2, 1]
    assert [r.user_id for r in finished] == [alice.pk, alice.pk, bob.pk, alice.pk]
    # Ended together too, and stored as each would have been alone.
    assert [r.content for r in finished] == ["answer"] * 4
    assert all(r.output_tokens == 1 and r.finished_at and r.content_seq == 0 for r in finished)
    calls = LLMCall.objects.filter(run__in=[r.pk for r in finished])
    assert sorted([c.run_id async for c in calls]) == sorted(r.pk for r in finished)
    assert finished[3].session_id not in {a1.session_id, a2.session_id, b1.session_id}
    # Each run was sent its own session's history, as if it had been started alone.
    sent = {sent_dialogue(r)[-1][1]: sent_dialogue(r) for r in upstream.requests}
    assert sent["a1 third"] == [
        ("user", "a1 first"),
        ("assistant", "Echo: a1 first"),
        ("user", "a1 second"),
        ("assistant", "Echo: a1 second"),
        ("user", "a1 third"),
    ]
    assert sent["a2 second"] == [
        ("user", "a2 first"),
        ("assistant", "Echo: a2 first"),
        ("user", "a2 second"),
    ]
    assert sent["b1 second"] == [
        ("user", "b1 first"),
        ("assistant", "Echo: b1 first"),
        ("user", "b1 second"),
    ]
    assert sent["a brand new chat"] == [("user", "a brand new chat")]
    assert (await Session.objects.aget(pk=a2.session_id)).session_state == {"k": 1}
    stored = [
        (m.role, m.content) async for m in Message.objects.filter(run=finished[3]).order_by("order")
    ]
    assert stored == [("user", "a brand new chat"), ("assistant", "answer")]
    # Created with bulk statements (the budgets of every asker in one): one by one, four runs
    # take about forty queries.
    assert counted.total <= 17


async def test_two_sends_into_one_chat_in_the_same_instant_start_one_run(alice, agent, upstream):
    first, _ = await run_to_end(alice, "hello")
    upstream.script(*[Reply("answer", first_delay=0.3)] * 2)
    outcomes = await asyncio.gather(
        engine.start_run(alice, "one", session_id=first.session_id),
        engine.start_run(alice, "two", session_id=first.session_id),
        engine.start_run(alice, "elsewhere"),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], engine.RunConflict)
    done = [await outcomes[0].wait(), await outcomes[2].wait()]
    assert [(r.input, r.position, r.status) for r in done] == [
        ("one", 2, RunStatus.COMPLETED),
        ("elsewhere", 1, RunStatus.COMPLETED),
    ]
    assert await Run.objects.filter(session_id=first.session_id).acount() == 2
    assert [sent_dialogue(r)[-1][1] for r in upstream.requests] == ["hello", "one", "elsewhere"]
    assert upstream.disconnects == 0


async def test_the_model_is_asked_while_the_run_is_being_written(alice, agent, upstream):
    from django.db.backends.utils import CursorWrapper

    upstream.script(Reply("Early bird."))
    original = CursorWrapper.execute
    asked_first: list[bool] = []

    def execute(self, sql, params=None):
        if sql.startswith('INSERT INTO "sessions_app_run"'):
            # Holds the database thread until the model has the request (or 5 s pass).
            asked_first.append(upstream.wait_until(lambda: len(upstream.requests) == 1))
        return original(self, sql, params)

    CursorWrapper.execute = execute
    try:
        run, events = await run_to_end(alice, "Hello")
    finally:
        CursorWrapper.execute = original
    assert asked_first == [True]
    # Its answer was shown only once the run was stored: started, then the pieces.
    kinds = [e["event"] for e in events]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunCompleted"
    assert "".join(e["content"] for e in events if e["event"] == "RunContent") == "Early bird."
    assert run.status == RunStatus.COMPLETED and run.content == "Early bird."
    assert upstream.disconnects == 0


async def test_a_run_that_could_not_be_stored_closes_its_early_request(alice, agent, upstream):
    from django.db import DatabaseError
    from django.db.backends.utils import CursorWrapper

    upstream.script(Reply("never shown", first_delay=0.5))
    original = CursorWrapper.execute

    def execute(self, sql, params=None):
        if sql.startswith('INSERT INTO "sessions_app_message"'):
            upstream.wait_until(lambda: len(upstream.requests) == 1)
            raise DatabaseError("disk I/O error")
        return original(self, sql, params)

    CursorWrapper.execute = execute
    try:
        with pytest.raises(DatabaseError):
            await engine.start_run(alice, "Hello")
    finally:
        CursorWrapper.execute = original
    # Nothing was stored, and the model's request, already sent, was closed.
    assert await Run.objects.acount() == 0 and await Session.objects.acount() == 0
    await until(lambda: upstream.disconnects == 1, "the model's request closed")
    assert registry.ids() == []


async def test_a_streaming_answer_pauses_while_another_run_is_being_started(
    alice, agent, upstream, settings, monkeypatch
):
    """New runs first: while another run's rows are being written, an answer already streaming
    stops reading the model (for GIVE_WAY at most), then goes on and arrives whole."""
    settings.PARLEY_CHECKPOINT_INTERVAL = 60.0  # no save of its own meets the held thread
    monkeypatch.setattr(generate, "GIVE_WAY", 10.0)
    upstream.script(Reply(tokens=1000, delay=0.005), Reply("The second answer."))
    first = await engine.start_run(alice, "a long answer, please")
    events = first.events()
    assert [(await anext(events))["event"] for _ in range(2)] == ["RunStarted", "RunContent"]

    gate = threading.Event()  # holds the database thread, so the next run stays unwritten
    held = asyncio.ensure_future(sync_to_async(gate.wait, thread_sensitive=True)(10))
    second = asyncio.ensure_future(engine.start_run(alice, "and another"))
    shown, deadline = "", asyncio.get_running_loop().time() + 3
    while shown != (shown := first.stream.content_so_far()) or not shown:
        assert asyncio.get_running_loop().time() < deadline, "the first answer kept streaming"
        await asyncio.sleep(0.15)
    await asyncio.sleep(0.3)
    assert first.stream.content_so_far() == shown and not first.stream.finished
    gate.set()
    assert await held
    second_run = await (await second).wait()
    first_run = await first.wait()
    assert second_run.content == "The second answer."
    assert first_run.content == "".join(f"tok{i} " for i in range(1000))


async def test_a_piece_held_back_counts_as_sent_when_its_interval_was_up(settings):
    """A model streaming at the coalescing interval's own pace does not fall behind: a piece
    whose timer ran late counts as sent when it was due, so the next one, an interval later,
    goes out at once instead of waiting a little longer each time."""
    settings.PARLEY_COALESCE_INTERVAL = 0.05
    clock = [100.0]
    published: list[str] = []

    class Stream:
        def publish(self, kind: str, *, content: str) -> None:
            published.append(content)

    coalescer = Coalescer(Stream(), lambda: 1)  # type: ignore[arg-type]
    coalescer.clock = lambda: clock[0]  # the engine's clock, moved by hand; the loop's runs on
    coalescer.add("a")  # the first piece goes out at once
    clock[0] = 100.049
    coalescer.add("b")  # 1 ms short of the interval: held until 100.050
    assert published == ["a"]
    clock[0] = 100.056  # the timer runs 6 ms late
    await asyncio.sleep(0.05)
    assert published == ["a", "b"]
    clock[0] = 100.101  # an interval (and a little) after "b" was due
    coalescer.add("c")
    assert published == ["a", "b", "c"]


def test_pieces_grow_further_apart_as_a_process_streams_more_answers(settings):
    settings.PARLEY_WORKERS = 1
    settings.PARLEY_COALESCE_INTERVAL = 0.05
    settings.PARLEY_COALESCE_RUNS = 50
    settings.PARLEY_COALESCE_MAX_INTERVAL = 0.15
    intervals = [coalesce_interval(n) for n in (0, 1, 50, 100, 150, 1000)]
    assert intervals == pytest.approx([0.05, 0.05, 0.05, 0.10, 0.15, 0.15])
    settings.PARLEY_COALESCE_MAX_INTERVAL = 0.01  # a bound below the base: the base wins
    assert coalesce_interval(1000) == pytest.approx(0.05)


def test_a_worker_of_several_paces_pieces_by_its_host_and_saves_by_its_own_load(settings):
    """nginx spreads streams evenly: each of 2 workers streaming 50 means 100 on the host. What
    a worker dying loses goes by its own 50."""
    settings.PARLEY_COALESCE_INTERVAL, settings.PARLEY_CHECKPOINT_INTERVAL = 0.05, 1.0
    settings.PARLEY_COALESCE_RUNS, settings.PARLEY_COALESCE_MAX_INTERVAL = 50, 0.15
    settings.PARLEY_WORKERS = 2
    assert [coalesce_interval(n) for n in (1, 25, 50)] == pytest.approx([0.05, 0.05, 0.10])
    assert [checkpoint_interval(n) for n in (1, 50, 100)] == pytest.approx([1.0, 1.0, 2.0])


def test_partial_answers_are_saved_less_often_as_a_process_streams_more(settings):
    settings.PARLEY_WORKERS = 1
    settings.PARLEY_CHECKPOINT_INTERVAL = 1.0
    settings.PARLEY_COALESCE_RUNS = 50
    intervals = [checkpoint_interval(n) for n in (0, 1, 50, 100, 200)]
    assert intervals == pytest.approx([1.0, 1.0, 1.0, 2.0, 4.0])
