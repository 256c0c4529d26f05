"""POST /api/runs and friends through the real stack: the engine, a scripted upstream, SSE."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from sessions_app import signals
from sessions_app.api import sse
from sessions_app.engine.registry import registry
from sessions_app.models import Agent, Run, RunStatus, Session
from testkit.upstream import Reply
from tests.support.apiclient import asgi_client, read_events
from tests.support.asgiclient import ASGIClient
from tests.support.roles import grant

pytestmark = pytest.mark.django_db(transaction=True)

RUN_FIELDS = {
    "run_id",
    "session_id",
    "agent_id",
    "user_id",
    "status",
    "input",
    "content",
    "model",
    "model_provider",
    "source",
    "metrics",
    "error",
    "created_at",
    "finished_at",
    "feedback",
    "session_state",
    "agent_version",
    "agent_version_id",
}
METRIC_FIELDS = {
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
    "time_to_first_token",
    "duration",
    "tokens_per_second",
    "usage_estimated",
    "cost",
}


@pytest.fixture
async def as_alice(alice) -> ASGIClient:
    return await sync_to_async(asgi_client)(alice)


@pytest.fixture
async def as_bob(bob) -> ASGIClient:
    return await sync_to_async(asgi_client)(bob)


@pytest.fixture
async def as_staff(staff) -> ASGIClient:
    return await sync_to_async(asgi_client)(staff)


async def post(client: ASGIClient, path: str, body: dict | None = None):
    return await client.post(path, body or {})


async def stream(client: ASGIClient, body: dict):
    return await client.open("POST", "/api/runs", {**body, "stream": True})


async def wait_for_status(run_id: str, *statuses: str, timeout: float = 10.0) -> Run:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        run = await Run.objects.aget(pk=run_id)
        if run.status in statuses:
            return run
        assert asyncio.get_running_loop().time() < deadline, f"run stayed {run.status}"
        await asyncio.sleep(0.05)


# -- plain JSON answers ------------------------------------------------------------------------


async def test_a_run_without_session_creates_one_and_answers_the_finished_run(
    as_alice, agent, upstream, settings
):
    settings.LLM_PRICES = "scripted=1:2"
    upstream.script(Reply("Hello Alice.", prompt_tokens=7, completion_tokens=3))
    response = await post(as_alice, "/api/runs", {"input": "Hi there"})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == RUN_FIELDS
    assert set(body["metrics"]) == METRIC_FIELDS
    assert body["status"] == "COMPLETED"
    assert body["content"] == "Hello Alice."
    assert body["input"] == "Hi there"
    assert body["user_id"] == "alice"
    assert body["agent_id"] == str(agent.agent_id)
    assert body["model"] == "scripted"
    assert body["source"] == "api"
    assert body["metrics"]["total_tokens"] == 10
    assert body["metrics"]["cost"] == pytest.approx(13e-6)
    assert body["finished_at"] is not None and body["error"] == ""
    session = await Session.objects.select_related("user").aget(pk=body["session_id"])
    assert session.user.username == "alice"
    # The answer is the run as it was stored, to the last digit of its metrics.
    stored = await as_alice.get(f"/api/runs/{body['run_id']}")
    assert stored.json() == body


async def test_a_multi_turn_conversation_sends_the_history_upstream(as_alice, agent, upstream):
    first = (await post(as_alice, "/api/runs", {"input": "My name is Alice."})).json()
    second = await post(
        as_alice, "/api/runs", {"input": "What is my name?", "session_id": first["session_id"]}
    )
    assert second.json()["session_id"] == first["session_id"]
    sent = [(m["role"], m["content"]) for m in upstream.requests[-1]["messages"]]
    assert sent == [
        ("user", "My name is Alice."),
        ("assistant", "Echo: My name is Alice."),
        ("user", "What is my name?"),
    ]
    runs = (await as_alice.get(f"/api/sessions/{first['session_id']}/runs")).json()
    assert [r["input"] for r in runs["data"]] == ["My name is Alice.", "What is my name?"]


async def test_a_run_can_name_another_agent_and_pass_session_state(as_alice, agent, upstream):
    coder = await Agent.objects.acreate(
        name="Coder", model="scripted-coder", instructions="User: {who}"
    )
    response = await post(
        as_alice,
        "/api/runs",
        {"input": "hi", "agent_id": str(coder.agent_id), "session_state": {"who": "Alice"}},
    )
    body = response.json()
    assert body["agent_id"] == str(coder.agent_id) and body["model"] == "scripted-coder"
    assert upstream.requests[-1]["messages"][0] == {"role": "system", "content": "User: Alice"}


async def test_a_run_in_a_session_can_name_another_agent_but_not_an_unknown_one(
    as_alice, agent, upstream
):
    first = (await post(as_alice, "/api/runs", {"input": "hi"})).json()
    coder = await Agent.objects.acreate(name="Coder", model="scripted-coder")
    in_session = {"input": "again", "session_id": first["session_id"]}

    unknown = await post(as_alice, "/api/runs", {**in_session, "agent_id": str(uuid.uuid4())})
    assert unknown.status_code == 404 and unknown.json() == {"detail": "Not found."}
    assert await Run.objects.acount() == 1, "nothing is stored for a refused run"

    named = await post(as_alice, "/api/runs", {**in_session, "agent_id": str(coder.agent_id)})
    body = named.json()
    assert body["agent_id"] == str(coder.agent_id) and body["model"] == "scripted-coder"
    assert body["session_id"] == first["session_id"] and body["status"] == "COMPLETED"
    assert upstream.requests[-1]["model"] == "scripted-coder"


async def test_an_upstream_failure_answers_502_and_keeps_the_run_as_error(
    as_alice, agent, upstream
):
    upstream.script(Reply(status=500, error_message="the GPU caught fire"))
    response = await post(as_alice, "/api/runs", {"input": "important"})
    assert response.status_code == 502
    body = response.json()
    assert body["detail"] == "The model endpoint answered 500: the GPU caught fire"
    run = await Run.objects.aget(pk=body["run_id"])
    assert run.status == RunStatus.ERROR and str(run.session_id) == body["session_id"]


async def test_a_silent_upstream_answers_504(as_alice, agent, upstream, settings):
    settings.LLM_READ_TIMEOUT = 0.5
    upstream.script(Reply(hang=True))
    response = await post(as_alice, "/api/runs", {"input": "anyone?"})
    assert response.status_code == 504
    assert response.json()["detail"] == "The model did not answer in time."
    assert (await Run.objects.aget(pk=response.json()["run_id"])).status == RunStatus.ERROR


@pytest.mark.parametrize(
    "body,status",
    [
        ({"input": "x" * 32001}, 413),
        ({"input": "   "}, 422),
        ({"input": ""}, 422),
        ({"input": "hi", "stream": "yes"}, 422),
        ({"input": "hi", "session_id": "not a session id"}, 422),
        ({"input": "hi", "session_id": "x" * 129}, 422),
        ({"input": "hi", "surprise": 1}, 422),
        ({"input": "hi", "session_state": ["no"]}, 422),
        ({}, 422),
        ({"input": "nul\x00"}, 422),
    ],
)
async def test_bad_input_is_refused_before_anything_is_stored(
    as_alice, agent, upstream, body, status
):
    response = await post(as_alice, "/api/runs", body)
    assert response.status_code == status
    assert "detail" in response.json()
    assert await Session.objects.acount() == 0
    assert upstream.requests == []


async def test_a_second_run_while_one_is_in_progress_answers_409(as_alice, agent, upstream):
    answer = threading.Event()  # the first run is in progress until the test lets it answer
    upstream.script(Reply("slow answer", held=answer))
    streaming = await stream(as_alice, {"input": "first"})
    lines = streaming.lines()
    started = [await anext(lines) for _ in range(3)]  # event, data, blank line
    session_id = json.loads(started[1].removeprefix("data: "))["session_id"]

    response = await post(as_alice, "/api/runs", {"input": "second", "session_id": session_id})
    assert response.status_code == 409
    assert response.json() == {"detail": "A run is already in progress in this session."}
    answer.set()
    rest = [line async for line in lines]
    assert "event: RunCompleted" in rest
    assert await Run.objects.filter(session_id=session_id).acount() == 1


async def test_too_many_runs_per_minute_answer_429_with_retry_after(
    as_alice, agent, upstream, settings
):
    settings.PARLEY_RUNS_PER_MINUTE = 2
    for n in range(2):
        assert (await post(as_alice, "/api/runs", {"input": f"run {n}"})).status_code == 200
    response = await post(as_alice, "/api/runs", {"input": "one too many"})
    assert response.status_code == 429
    wait = response["Retry-After"]
    assert 1 <= int(wait) <= 60
    # The body names the same wait as the header, not one second less.
    assert response.json()["detail"] == f"Too many runs; try again in {wait} seconds."
    assert await Run.objects.acount() == 2


async def test_the_rate_limit_is_per_user_and_0_turns_it_off(
    as_alice, as_bob, agent, upstream, settings
):
    settings.PARLEY_RUNS_PER_MINUTE = 1
    assert (await post(as_alice, "/api/runs", {"input": "a"})).status_code == 200
    assert (await post(as_bob, "/api/runs", {"input": "b"})).status_code == 200
    assert (await post(as_alice, "/api/runs", {"input": "a2"})).status_code == 429
    settings.PARLEY_RUNS_PER_MINUTE = 0
    assert (await post(as_alice, "/api/runs", {"input": "a3"})).status_code == 200


# -- streaming ---------------------------------------------------------------------------------


async def test_a_streamed_run_sends_gapless_events_that_add_up_to_the_stored_run(
    as_alice, agent, upstream
):
    upstream.script(Reply(tokens=60, delay=0.002, prompt_tokens=9, completion_tokens=60))
    response = await stream(as_alice, {"input": "count"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    assert response["Cache-Control"] == "no-cache"
    assert response["X-Accel-Buffering"] == "no"
    events = await read_events(response)

    kinds = [kind for kind, _ in events]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunCompleted"
    assert set(kinds[1:-1]) == {"RunContent"}
    assert [data["seq"] for _, data in events] == list(range(1, len(events) + 1))
    run_id, session_id = events[0][1]["run_id"], events[0][1]["session_id"]
    assert all(d["run_id"] == run_id and d["session_id"] == session_id for _, d in events)
    assert all("event" not in data for _, data in events)

    pieces = "".join(d["content"] for kind, d in events if kind == "RunContent")
    final = events[-1][1]
    stored = await Run.objects.aget(pk=run_id)
    assert pieces == final["content"] == stored.content == "".join(f"tok{i} " for i in range(60))
    assert final["metrics"]["total_tokens"] == 69 == stored.total_tokens
    assert stored.status == RunStatus.COMPLETED


async def test_a_streamed_run_whose_upstream_fails_ends_with_run_error(as_alice, agent, upstream):
    upstream.script(Reply(content="partial answer that breaks", cut_after=2, delay=0.01))
    response = await stream(as_alice, {"input": "go"})
    events = await read_events(response)
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunError"
    assert "RunCompleted" not in kinds
    error = events[-1][1]
    stored = await Run.objects.aget(pk=error["run_id"])
    assert stored.status == RunStatus.ERROR and error["error"] == stored.error != ""
    assert [d["seq"] for _, d in events] == list(range(1, len(events) + 1))


async def test_a_client_that_disconnects_does_not_stop_the_run(as_alice, agent, upstream):
    upstream.script(Reply(tokens=20, first_delay=0.3, delay=0.01))
    response = await stream(as_alice, {"input": "go"})
    lines = response.lines()
    first = [await anext(lines) for _ in range(2)]
    run_id = json.loads(first[1].removeprefix("data: "))["run_id"]
    await response.disconnect()  # the client goes away after RunStarted
    run = await wait_for_status(run_id, RunStatus.COMPLETED, RunStatus.ERROR, RunStatus.CANCELLED)
    assert run.status == RunStatus.COMPLETED
    assert run.content == "".join(f"tok{i} " for i in range(20))


async def test_a_client_that_disconnects_mid_answer_leaves_it_whole_and_stored(
    as_alice, agent, upstream
):
    upstream.script(Reply(tokens=40, delay=0.02))
    response = await stream(as_alice, {"input": "go"})
    seen = []
    async for line in response.lines():
        seen.append(line)
        if "tok3 " in line:
            break
    run_id = json.loads(seen[1].removeprefix("data: "))["run_id"]
    await response.disconnect()  # gone mid-answer, after a few pieces
    run = await wait_for_status(run_id, RunStatus.COMPLETED, RunStatus.ERROR, RunStatus.CANCELLED)
    expected = "".join(f"tok{i} " for i in range(40))
    assert (run.status, run.content) == (RunStatus.COMPLETED, expected)
    stored = await as_alice.get(f"/api/sessions/{run.session_id}/messages")
    messages = [(m["role"], m["content"]) for m in stored.json()["data"]]
    assert messages == [("user", "go"), ("assistant", expected)]


async def test_a_client_that_leaves_while_its_run_is_created_still_gets_it_answered(
    as_alice, agent, upstream
):
    """The question was stored, so its answer is owed: a client gone before the response
    started does not leave a run without the task that answers it."""
    upstream.script(Reply("answered anyway"))
    gate = threading.Event()
    # The database thread all run creation shares is held, so the run is asked for but not yet
    # created when the client leaves.
    held = asyncio.ensure_future(sync_to_async(gate.wait, thread_sensitive=True)(10))
    communicator = await as_alice.send("POST", "/api/runs", {"input": "hello", "stream": True})
    deadline = asyncio.get_running_loop().time() + 5
    while not registry.starts.keys:  # its creation is waiting for the database thread
        assert asyncio.get_running_loop().time() < deadline, "the run was never asked for"
        await asyncio.sleep(0.01)
    await communicator.send_input({"type": "http.disconnect"})
    await communicator.wait(timeout=5)  # the request is over, and nothing was sent back
    assert communicator.output_queue.empty()
    gate.set()
    assert await held
    run = await Run.objects.aget()
    run = await wait_for_status(run.run_id, RunStatus.COMPLETED, RunStatus.ERROR)
    assert (run.status, run.content) == (RunStatus.COMPLETED, "answered anyway")


async def test_a_silent_model_gets_keep_alive_comments(as_alice, agent, upstream, monkeypatch):
    monkeypatch.setattr(sse, "KEEPALIVE_SECONDS", 0.05)
    upstream.script(Reply("late", first_delay=0.4))
    response = await stream(as_alice, {"input": "go"})
    lines = [line async for line in response.lines()]
    assert ": keep-alive" in lines
    assert lines.index(": keep-alive") > lines.index("event: RunStarted")


# -- one run: read, cancel, rate ---------------------------------------------------------------


async def test_cancelling_a_streaming_run_stops_it_and_answers_the_cancelled_run(
    as_alice, agent, upstream
):
    upstream.script(Reply(tokens=200, first_delay=0.05, delay=0.05))
    response = await stream(as_alice, {"input": "long"})
    lines = response.lines()
    started = [await anext(lines) for _ in range(2)]
    run_id = json.loads(started[1].removeprefix("data: "))["run_id"]
    while await anext(lines) != "event: RunContent":  # a piece of the answer is out
        pass

    cancelled = await post(as_alice, f"/api/runs/{run_id}/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "CANCELLED"
    events = [line async for line in lines]
    assert "event: RunCancelled" in events
    stored = await Run.objects.aget(pk=run_id)
    assert stored.status == RunStatus.CANCELLED
    assert cancelled.json()["content"] == stored.content != ""


async def test_cancelling_a_finished_run_changes_nothing(as_alice, agent, upstream):
    from testkit.querycount import count_queries

    run = (await post(as_alice, "/api/runs", {"input": "quick"})).json()
    await signals.sent()  # what the run's end set going (live evaluation reads its rules)
    with count_queries() as counted:
        response = await post(as_alice, f"/api/runs/{run['run_id']}/cancel")
    assert response.status_code == 200
    assert response.json() == run
    # The caller's token; the run, through the access gate; the run as it stands, with its
    # user, read once.
    assert counted.queries == 3, counted.described()


async def test_feedback_is_saved_shown_and_cleared(as_alice, agent, upstream):
    run = (await post(as_alice, "/api/runs", {"input": "rate me"})).json()
    path = f"/api/runs/{run['run_id']}/feedback"
    rated = await post(as_alice, path, {"rating": -1, "comment": " wrong year "})
    assert rated.status_code == 200
    assert rated.json()["feedback"] == {"rating": -1, "comment": "wrong year"}
    assert (await as_alice.get(f"/api/runs/{run['run_id']}")).json()["feedback"]["rating"] == -1
    cleared = await post(as_alice, path, {"rating": None})
    assert cleared.json()["feedback"] is None
    assert (await post(as_alice, path, {"rating": 5})).status_code == 422


async def test_other_users_runs_are_not_found_and_their_sessions_take_no_runs(
    as_alice, as_bob, agent, upstream
):
    run = (await post(as_alice, "/api/runs", {"input": "private"})).json()
    missing = str(uuid.uuid4())
    for run_id in (run["run_id"], missing):
        assert (await as_bob.get(f"/api/runs/{run_id}")).status_code == 404
        assert (await post(as_bob, f"/api/runs/{run_id}/cancel")).status_code == 404
        feedback = await post(as_bob, f"/api/runs/{run_id}/feedback", {"rating": 1})
        assert feedback.status_code == 404 and feedback.json() == {"detail": "Not found."}
    sneaky = await post(as_bob, "/api/runs", {"input": "hi", "session_id": run["session_id"]})
    assert sneaky.status_code == 404
    assert await Run.objects.acount() == 1


async def test_staff_read_anyones_run_but_rate_only_their_own(as_alice, as_staff, agent, upstream):
    run = (await post(as_alice, "/api/runs", {"input": "hello"})).json()
    assert (await as_staff.get(f"/api/runs/{run['run_id']}")).json()["user_id"] == "alice"
    rated = await post(as_staff, f"/api/runs/{run['run_id']}/feedback", {"rating": 1})
    assert rated.status_code == 404


async def test_staff_stop_anyones_run_only_with_the_change_run_permission(
    as_alice, as_staff, staff, agent, upstream
):
    upstream.script(Reply(tokens=60, first_delay=0.05, delay=0.05))
    lines = (await stream(as_alice, {"input": "long"})).lines()
    started = [await anext(lines) for _ in range(2)]
    run_id = json.loads(started[1].removeprefix("data: "))["run_id"]
    while await anext(lines) != "event: RunContent":
        pass

    refused = await post(as_staff, f"/api/runs/{run_id}/cancel")  # may only view runs
    assert refused.status_code == 403
    assert refused.json() == {"detail": "You need the “change run” permission."}
    run = await Run.objects.aget(pk=run_id)
    assert run.status == RunStatus.RUNNING and not run.cancel_requested

    await sync_to_async(grant)(staff, "change_run")
    stopped = await post(as_staff, f"/api/runs/{run_id}/cancel")
    assert stopped.status_code == 200 and stopped.json()["status"] == "CANCELLED"


async def test_staff_cannot_run_in_someone_elses_session(
    as_alice, as_staff, staff, agent, upstream
):
    run = (await post(as_alice, "/api/runs", {"input": "mine"})).json()
    response = await post(as_staff, "/api/runs", {"input": "x", "session_id": run["session_id"]})
    assert response.status_code == 404  # may not even view sessions
    await sync_to_async(grant)(staff, "view_session", "change_session")
    response = await post(as_staff, "/api/runs", {"input": "x", "session_id": run["session_id"]})
    assert response.status_code == 403
    assert response.json() == {"detail": "Only the owner of a session can run in it."}
    assert await Run.objects.acount() == 1


@pytest.mark.parametrize(
    "method,path",
    [
        ("post", "/api/runs"),
        ("get", "/api/runs/{id}"),
        ("post", "/api/runs/{id}/cancel"),
        ("post", "/api/runs/{id}/feedback"),
    ],
)
async def test_anonymous_callers_cannot_touch_runs(agent, upstream, method, path):
    client = ASGIClient()
    target = path.format(id=uuid.uuid4())
    response = await client.request(method, target, {"input": "hi", "rating": 1})
    assert response.status_code == 401
    assert upstream.requests == []


async def test_a_token_that_no_longer_holds_starts_no_run_and_answers_401(
    alice, bob, agent, upstream
):
    from sessions_app.accounts import create_token
    from sessions_app.models import ApiToken

    _, revoked = await sync_to_async(create_token)(alice, "revoked")
    await ApiToken.objects.filter(user=alice).adelete()
    _, inactive = await sync_to_async(create_token)(bob, "inactive")
    bob.is_active = False
    await bob.asave(update_fields=["is_active"])
    for raw in (revoked, inactive, "prl_" + "x" * 43):
        client = ASGIClient({"authorization": f"Bearer {raw}"})
        for body in ({"input": "hi"}, {"input": "hi", "stream": True}):
            response = await client.post("/api/runs", body)
            assert response.status_code == 401, raw
            assert response.json() == {
                "detail": "Authentication required: a Bearer token or a session."
            }
    assert await Run.objects.acount() == 0 and await Session.objects.acount() == 0
    assert upstream.requests == []


async def test_runs_started_together_have_each_token_checked_on_its_own(
    alice, bob, agent, upstream
):
    from sessions_app.accounts import create_token
    from sessions_app.models import ApiToken

    clients = {}
    for user in (alice, bob):
        _, raw = await sync_to_async(create_token)(user, "burst")
        clients[user.username] = ASGIClient({"authorization": f"Bearer {raw}"})
    _, gone = await sync_to_async(create_token)(alice, "gone")
    await ApiToken.objects.filter(name="gone").adelete()
    clients["gone"] = ASGIClient({"authorization": f"Bearer {gone}"})
    upstream.script(*[Reply("together", first_delay=0.2)] * 2)
    answers = await asyncio.gather(
        *(client.post("/api/runs", {"input": f"from {who}"}) for who, client in clients.items())
    )
    assert [a.status_code for a in answers] == [200, 200, 401]
    assert [a.json()["user_id"] for a in answers[:2]] == ["alice", "bob"]
    assert [a.json()["content"] for a in answers[:2]] == ["together"] * 2
    # A token used to start a run shows when it was last used, like any other call.
    used = [t async for t in ApiToken.objects.filter(name="burst")]
    assert len(used) == 2 and all(t.last_used_at is not None for t in used)


def test_a_token_claim_never_shows_the_token_it_holds():
    from sessions_app.accounts import TokenClaim

    # Claims wait in the run's creation queue, whose items may appear in logs and tracebacks.
    assert "prl_secret" not in repr(TokenClaim("prl_secret"))


async def test_starting_a_run_with_a_token_sends_no_authenticator_to_a_thread(
    as_alice, agent, upstream, monkeypatch
):
    from asgiref.sync import SyncToAsync

    sent: list[str] = []
    original = SyncToAsync.__init__

    def record(self, func, *args, **kwargs):
        sent.append(getattr(func, "__qualname__", type(func).__qualname__))
        original(self, func, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__init__", record)
    response = await stream(as_alice, {"input": "hi"})
    events = await read_events(response)
    assert events[-1][0] == "RunCompleted"
    # The token was checked in the turn that created the run: no lookup of its own.
    assert not [name for name in sent if "BearerToken" in name or "user_for_token" in name]
    assert sent  # the run's own database work did go to its thread
    listed = await as_alice.get("/api/runs/" + events[0][1]["run_id"])
    assert listed.status_code == 200


async def test_a_signed_in_browser_runs_with_its_cookie_and_csrf_token(alice, agent, upstream):
    browser = Client()
    await sync_to_async(browser.force_login)(alice)
    await sync_to_async(browser.get)("/tokens/")  # sets the CSRF cookie, as any page does
    session, csrf = browser.cookies["sessionid"].value, browser.cookies["csrftoken"].value
    cookie = {"cookie": f"sessionid={session}; csrftoken={csrf}"}

    forged = await ASGIClient(cookie).post("/api/runs", {"input": "hi"})
    assert forged.status_code == 403
    assert await Run.objects.acount() == 0
    allowed = await ASGIClient({**cookie, "x-csrftoken": csrf}).post("/api/runs", {"input": "hi"})
    assert allowed.status_code == 200
    assert allowed.json()["content"] == "Echo: hi"


async def test_a_finished_run_shows_the_session_state_it_left(as_alice, agent, upstream):
    body = (
        await post(as_alice, "/api/runs", {"input": "hi", "session_state": {"mood": "calm"}})
    ).json()
    assert body["session_state"] == {"mood": "calm"}
    again = (await as_alice.get(f"/api/runs/{body['run_id']}")).json()
    assert again["session_state"] == {"mood": "calm"}
