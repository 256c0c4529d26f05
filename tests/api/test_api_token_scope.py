"""API tokens limited to some agents: through such a token, every other agent, and the sessions
and runs of other agents, answer as missing ones do; a token limited to nothing is not widened.
Unlimited tokens and the browser are the other API tests' subject, unchanged."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from sessions_app import engine
from sessions_app.accounts import TokenClaim, create_token, users_for_tokens
from sessions_app.models import Agent, ApiToken, Run, Session, User
from testkit.upstream import Reply
from tests.support.apiclient import api_client, stored_run
from tests.support.asgiclient import ASGIClient
from tests.support.roles import grant

NOT_FOUND = {"detail": "Not found."}


def limited_to(user: User, *agents: Agent) -> dict[str, str]:
    _, raw = create_token(user, "limited", agents=agents)
    return {"Authorization": f"Bearer {raw}"}


@dataclass
class Alice:
    """Alice's conversations with Assistant (the default agent) and with Coder, one each."""

    assistant: Agent
    coder: Agent
    with_assistant: Session
    with_coder: Session
    assistant_run: Run
    coder_run: Run


@pytest.fixture
def coder(db) -> Agent:
    return Agent.objects.create(name="Coder", model="scripted-coder")


@pytest.fixture
def talks(alice, agent, coder) -> Alice:
    with_assistant = Session.objects.create(user=alice, agent=agent, session_name="Trip to Rome")
    with_coder = Session.objects.create(user=alice, agent=coder, session_name="A parser")
    return Alice(
        assistant=agent,
        coder=coder,
        with_assistant=with_assistant,
        with_coder=with_coder,
        assistant_run=stored_run(with_assistant, "Where to eat?", "Trastevere."),
        coder_run=stored_run(with_coder, "Parse this", "Done."),
    )


@pytest.fixture
def coder_only(alice, talks) -> Client:
    return Client(headers=limited_to(alice, talks.coder))


def call(client: Client, method: str, path: str, body: dict | None = None):
    data = json.dumps(body) if body is not None else ""
    return client.generic(method, path, data, content_type="application/json")


# -- reading ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_listing_agents_shows_only_the_tokens_agents(alice, talks, coder_only):
    Agent.objects.create(name="Writer", model="scripted")
    everyone = api_client(alice).get("/api/agents", {"sort_by": "name"}).json()
    assert [a["name"] for a in everyone["data"]] == ["Assistant", "Coder", "Writer"]
    limited = coder_only.get("/api/agents").json()
    assert [a["name"] for a in limited["data"]] == ["Coder"]
    assert limited["meta"]["total_count"] == 1


@pytest.mark.django_db
def test_an_agent_out_of_scope_answers_as_a_missing_one(talks, coder_only):
    for agent_id in (talks.assistant.pk, uuid.uuid4()):
        response = coder_only.get(f"/api/agents/{agent_id}")
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    assert coder_only.get(f"/api/agents/{talks.coder.pk}").json()["name"] == "Coder"


@pytest.mark.django_db
def test_sessions_of_other_agents_are_left_out_of_lists(alice, talks, coder_only):
    listed = coder_only.get("/api/sessions").json()
    assert [s["session_name"] for s in listed["data"]] == ["A parser"]
    assert listed["meta"]["total_count"] == 1
    filtered = coder_only.get("/api/sessions", {"agent_id": str(talks.assistant.pk)}).json()
    assert filtered["data"] == []
    everything = api_client(alice).get("/api/sessions").json()
    assert {s["session_name"] for s in everything["data"]} == {"Trip to Rome", "A parser"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/sessions/{session}", None),
        ("GET", "/api/sessions/{session}/runs", None),
        ("GET", "/api/sessions/{session}/messages", None),
        ("PATCH", "/api/sessions/{session}", {"session_name": "renamed"}),
        ("DELETE", "/api/sessions/{session}", None),
        ("GET", "/api/runs/{run}", None),
        ("POST", "/api/runs/{run}/feedback", {"rating": 1}),
    ],
)
def test_a_session_of_another_agent_and_its_runs_answer_as_missing_ones(
    alice, talks, coder_only, method, path, body
):
    def at(session: object, run: object) -> str:
        return path.format(session=session, run=run)

    out_of_scope = call(
        coder_only, method, at(talks.with_assistant.pk, talks.assistant_run.pk), body
    )
    missing = call(coder_only, method, at(uuid.uuid4(), uuid.uuid4()), body)
    assert (out_of_scope.status_code, out_of_scope.json()) == (404, NOT_FOUND)
    assert (missing.status_code, missing.json()) == (404, NOT_FOUND)
    assert b"Trastevere" not in out_of_scope.content
    talks.with_assistant.refresh_from_db()
    talks.assistant_run.refresh_from_db()
    assert talks.with_assistant.session_name == "Trip to Rome"
    assert talks.assistant_run.feedback_rating is None

    in_scope = call(coder_only, method, at(talks.with_coder.pk, talks.coder_run.pk), body)
    assert in_scope.status_code in (200, 204)


@pytest.mark.django_db
def test_metrics_count_only_the_tokens_agents(alice, talks, coder_only):
    query = {"group_by": "agent"}
    limited = coder_only.get("/api/metrics", query).json()["data"]
    assert [row["key"] for row in limited] == [str(talks.coder.pk)]
    everything = api_client(alice).get("/api/metrics", query).json()["data"]
    assert {row["key"] for row in everything} == {str(talks.coder.pk), str(talks.assistant.pk)}


@pytest.mark.django_db
def test_a_staff_token_is_limited_too(alice, manager, talks):
    """The manager may view every session, but not through a token limited to Coder."""
    path = f"/api/sessions/{talks.with_assistant.pk}"
    assert api_client(manager).get(path).status_code == 200
    limited = Client(headers=limited_to(manager, talks.coder))
    assert (limited.get(path).status_code, limited.get(path).json()) == (404, NOT_FOUND)
    others = limited.get("/api/sessions", {"user_id": "alice"}).json()["data"]
    assert [s["session_name"] for s in others] == ["A parser"]


@pytest.mark.django_db
def test_a_staff_member_without_the_right_hears_the_same_for_a_missing_agent(
    django_user_model, talks
):
    """Staff who may not view agents are told so for an unlisted agent, a missing one and one
    out of their token's scope alike."""
    clerk = grant(django_user_model.objects.create_user("clerk", is_staff=True), "view_session")
    limited = Client(headers=limited_to(clerk, talks.coder))
    answers = {
        limited.get(f"/api/agents/{agent_id}").content
        for agent_id in (talks.assistant.pk, uuid.uuid4())
    }
    assert answers == {b'{"detail": "You need the \\u201cview agent\\u201d permission."}'}


# -- creating sessions --------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_new_session_is_with_the_scopes_agent_never_one_outside_it(talks, coder_only):
    made = call(coder_only, "POST", "/api/sessions", {"session_name": "new"})
    assert made.status_code == 201 and made.json()["agent_id"] == str(talks.coder.pk)
    refused = call(coder_only, "POST", "/api/sessions", {"agent_id": str(talks.assistant.pk)})
    assert (refused.status_code, refused.json()) == (404, NOT_FOUND)


@pytest.mark.django_db
def test_a_token_whose_agents_are_all_deleted_reaches_none(alice, talks):
    spare = Agent.objects.create(name="Spare", model="scripted")
    client = Client(headers=limited_to(alice, spare))
    spare.delete()
    assert ApiToken.objects.get(name="limited").scoped
    assert client.get("/api/agents").json()["data"] == []
    assert client.get("/api/sessions").json()["data"] == []
    made = call(client, "POST", "/api/sessions", {"session_name": "new"})
    assert (made.status_code, made.json()) == (404, NOT_FOUND)


@pytest.mark.django_db
def test_checking_tokens_reads_their_scopes_in_the_same_query(
    alice, bob, talks, django_assert_num_queries
):
    limited = limited_to(alice, talks.coder, talks.assistant)["Authorization"].split()[1]
    _, plain = create_token(bob, "plain")
    users_for_tokens([limited, plain])  # marks them used, which is written once a minute
    with django_assert_num_queries(1):
        found_alice, found_bob = users_for_tokens([limited, plain])
    assert (found_alice, found_bob) == (alice, bob)
    both = Client(headers={"Authorization": f"Bearer {limited}"}).get("/api/agents").json()
    assert {a["name"] for a in both["data"]} == {"Assistant", "Coder"}


# -- running ------------------------------------------------------------------------------------


@pytest.fixture
def coder_runner(alice, talks) -> ASGIClient:
    return ASGIClient(limited_to(alice, talks.coder))


@pytest.mark.django_db(transaction=True)
async def test_a_limited_token_runs_its_agent(talks, coder_runner, upstream):
    upstream.script(Reply("Parsed."))
    named = await coder_runner.post("/api/runs", {"input": "hi", "agent_id": str(talks.coder.pk)})
    assert named.status_code == 200
    assert (named.json()["agent_id"], named.json()["content"]) == (str(talks.coder.pk), "Parsed.")
    # Without agent_id: the default agent is out of scope, so the scope's first agent.
    unnamed = await coder_runner.post("/api/runs", {"input": "again"})
    assert unnamed.json()["agent_id"] == str(talks.coder.pk)
    assert upstream.requests[-1]["model"] == "scripted-coder"
    in_session = {"input": "more", "session_id": str(talks.with_coder.pk)}
    continued = await coder_runner.post("/api/runs", in_session)
    assert continued.status_code == 200 and continued.json()["status"] == "COMPLETED"


@pytest.mark.django_db(transaction=True)
async def test_without_agent_id_the_default_agent_is_taken_when_in_scope(alice, talks, upstream):
    writer = await Agent.objects.acreate(name="A writer", model="scripted-writer")
    headers = await sync_to_async(limited_to)(alice, talks.coder, talks.assistant, writer)
    response = await ASGIClient(headers).post("/api/runs", {"input": "hi"})
    assert response.json()["agent_id"] == str(talks.assistant.pk)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stream", [False, True])
async def test_running_out_of_scope_answers_as_a_missing_agent_or_session(
    talks, coder_runner, upstream, stream
):
    asks = {
        "another agent": {"agent_id": str(talks.assistant.pk)},
        "a missing agent": {"agent_id": str(uuid.uuid4())},
        "another agent's session": {"session_id": str(talks.with_assistant.pk)},
        "a missing session": {"session_id": str(uuid.uuid4())},
        "another agent in its session": {
            "session_id": str(talks.with_coder.pk),
            "agent_id": str(talks.assistant.pk),
        },
    }
    for what, ask in asks.items():
        response = await coder_runner.post("/api/runs", {"input": "hi", "stream": stream, **ask})
        assert (response.status_code, response.json()) == (404, NOT_FOUND), what
    assert await Run.objects.acount() == 2  # the two stored before
    assert upstream.requests == []


@pytest.mark.django_db(transaction=True)
async def test_stopping_a_run_of_another_agent_answers_as_a_missing_one(talks, coder_runner):
    response = await coder_runner.post(f"/api/runs/{talks.assistant_run.pk}/cancel", {})
    assert (response.status_code, response.json()) == (404, NOT_FOUND)


@pytest.mark.django_db(transaction=True)
async def test_past_sessions_shown_to_the_model_are_the_scopes_only(
    alice, talks, coder_runner, upstream
):
    await Agent.objects.filter(pk=talks.coder.pk).aupdate(
        search_session_history=True, add_past_sessions_to_context=True, num_history_sessions=5
    )
    response = await coder_runner.post("/api/runs", {"input": "What did we do?"})
    assert response.status_code == 200
    system = upstream.requests[-1]["messages"][0]["content"]
    assert "Parse this" in system and "Where to eat?" not in system
    # An unlimited token's run is shown both, as before.
    _, raw = await sync_to_async(create_token)(alice)
    everything = ASGIClient({"Authorization": f"Bearer {raw}"})
    await everything.post("/api/runs", {"input": "And now?", "agent_id": str(talks.coder.pk)})
    system = upstream.requests[-1]["messages"][0]["content"]
    assert "Parse this" in system and "Where to eat?" in system


@pytest.mark.django_db(transaction=True)
async def test_the_model_may_read_only_the_scopes_past_sessions(talks, coder_runner, upstream):
    await Agent.objects.filter(pk=talks.coder.pk).aupdate(search_session_history=True)

    def read(session: Session, call_id: str) -> Reply:
        arguments = {"session_id": str(session.pk)}
        return Reply(
            tool_calls=[{"id": call_id, "name": "read_past_session", "arguments": arguments}]
        )

    upstream.script(
        read(talks.with_assistant, "call_1"),
        Reply("I cannot see it."),
        read(talks.with_coder, "call_2"),
        Reply("Found it."),
    )
    await coder_runner.post("/api/runs", {"input": "Read the Rome one"})
    assert json.loads(upstream.requests[-1]["messages"][-1]["content"]) == {
        "error": "No such session."
    }
    await coder_runner.post("/api/runs", {"input": "Read the parser one"})
    found = json.loads(upstream.requests[-1]["messages"][-1]["content"])
    assert found["messages"][0]["content"] == "Parse this"


@pytest.mark.django_db(transaction=True)
async def test_runs_created_together_each_get_the_agent_their_own_token_allows(
    alice, bob, agent, upstream
):
    other = await Agent.objects.acreate(name="Other", model="scripted")
    _, alices = await sync_to_async(create_token)(alice, "all")
    _, bobs = await sync_to_async(create_token)(bob, "limited", agents=[other])

    # Started in the same moment, the two are created in one batch.
    handles = await asyncio.gather(
        engine.start_run(TokenClaim(alices), "Hi from alice"),
        engine.start_run(TokenClaim(bobs), "Hi from bob"),
    )
    runs = [await handle.wait() for handle in handles]

    assert [(r.user_id, r.agent_id) for r in runs] == [(alice.pk, agent.pk), (bob.pk, other.pk)]


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/api/datasets"), ("POST", "/api/datasets"), ("GET", "/api/experiments")],
)
def test_a_limited_token_reaches_no_dataset_or_experiment_even_for_staff(
    manager, agent, method, path
):
    # Datasets and experiments hold every agent's conversations: the limit cannot be kept there.
    client = Client(headers=limited_to(manager, agent))
    response = client.generic(method, path, json.dumps({"name": "x"}), "application/json")
    assert response.status_code == 403
    assert response.json() == {
        "detail": "This token is limited to some agents; datasets and experiments need a "
        "token that is not."
    }
    unlimited = api_client(manager).get(path) if method == "GET" else None
    assert unlimited is None or unlimited.status_code == 200
