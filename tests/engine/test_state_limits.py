"""Session state and metadata, and an agent's initial state, are refused over
PARLEY_MAX_STATE_BYTES (compact JSON) on every door that writes them; nothing is changed."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from sessions_app.models import Agent, Run, Session
from testkit.upstream import Reply
from tests.support.apiclient import api_client, asgi_client

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 1000
BIG = {"notes": "x" * LIMIT}  # over the limit once serialized
SMALL = {"notes": "x" * 100}
TOO_LARGE = f"is too large (1012 bytes of JSON; the limit is {LIMIT} bytes)."


@pytest.fixture(autouse=True)
def small_limit(settings) -> None:
    settings.PARLEY_MAX_STATE_BYTES = LIMIT


def send(client: Client, method: str, path: str, body: dict):
    return client.generic(method, path, json.dumps(body), content_type="application/json")


def test_creating_a_session_with_too_large_state_or_metadata_answers_413(alice, agent):
    client = api_client(alice)
    for field in ("session_state", "metadata"):
        response = send(client, "POST", "/api/sessions", {field: BIG})
        assert response.status_code == 413
        assert response.json() == {"detail": f"{field} {TOO_LARGE}"}
    assert not Session.objects.exists()
    assert send(client, "POST", "/api/sessions", {"session_state": SMALL}).status_code == 201


def test_the_agents_state_counts_in_a_new_sessions_state(alice, agent):
    agent.session_state = {"base": "y" * 600}
    agent.save(update_fields=["session_state"])
    response = send(api_client(alice), "POST", "/api/sessions", {"session_state": {"a": "z" * 500}})
    assert response.status_code == 413
    assert not Session.objects.exists()


def test_patching_a_session_with_too_large_state_or_metadata_answers_413(alice, agent):
    session = Session.objects.create(user=alice, agent=agent, session_state=SMALL)
    client = api_client(alice)
    for field in ("session_state", "metadata"):
        response = send(client, "PATCH", f"/api/sessions/{session.session_id}", {field: BIG})
        assert response.status_code == 413
        assert response.json() == {"detail": f"{field} {TOO_LARGE}"}
    session.refresh_from_db()
    assert (session.session_state, session.metadata) == (SMALL, {})
    ok = send(client, "PATCH", f"/api/sessions/{session.session_id}", {"metadata": SMALL})
    assert ok.status_code == 200


async def test_a_run_with_too_large_state_answers_413_and_starts_nothing(alice, agent, upstream):
    client = await sync_to_async(asgi_client)(alice)
    response = await client.post("/api/runs", {"input": "hi", "session_state": BIG})
    assert response.status_code == 413
    assert response.json() == {"detail": f"session_state {TOO_LARGE}"}
    assert await Run.objects.acount() == 0 and upstream.requests == []


async def test_state_merged_into_a_sessions_state_is_measured_whole(alice, agent, upstream):
    session = await Session.objects.acreate(user=alice, agent=agent, session_state={"a": "y" * 600})
    client = await sync_to_async(asgi_client)(alice)
    body = {"input": "hi", "session_id": session.session_id, "session_state": {"b": "z" * 500}}
    response = await client.post("/api/runs", body)
    assert response.status_code == 413
    await session.arefresh_from_db()
    assert session.session_state == {"a": "y" * 600}
    assert await Run.objects.acount() == 0 and upstream.requests == []


def test_the_chat_pages_state_form_refuses_too_large_state(alice, agent):
    session = Session.objects.create(user=alice, agent=agent, session_state=SMALL)
    client = Client()
    client.force_login(alice)
    raw = json.dumps(BIG)
    response = client.post(f"/s/{session.session_id}/state", {"session_state": raw})
    assert response.status_code == 422  # shown in place, like the other validation errors
    page = response.content.decode()
    assert f"session_state {TOO_LARGE}" in page and "x" * LIMIT in page  # the text is kept
    session.refresh_from_db()
    assert session.session_state == SMALL


def test_an_agents_state_over_the_limit_answers_413(manager, agent):
    client = api_client(manager)
    created = send(client, "POST", "/api/agents", {"name": "Big", "session_state": BIG})
    assert created.status_code == 413
    assert created.json() == {"detail": f"session_state {TOO_LARGE}"}
    changed = send(client, "PATCH", f"/api/agents/{agent.agent_id}", {"session_state": BIG})
    assert changed.status_code == 413
    assert list(Agent.objects.values_list("session_state", flat=True)) == [{}]


def admin_form_data(client: Client, url: str) -> dict:
    """What the admin's change form would post back unchanged."""
    form = client.get(url).context["adminform"].form
    data = {}
    for name in form.fields:
        value = form[name].value()
        if value is not None and value is not False:
            data[name] = value
    return data


def test_the_admin_refuses_too_large_state_for_agents_and_sessions(root, alice, agent):
    session = Session.objects.create(user=alice, agent=agent)
    for url, fields in (
        (f"/admin/sessions_app/agent/{agent.agent_id}/change/", ["session_state"]),
        (f"/admin/sessions_app/session/{session.pk}/change/", ["session_state", "metadata"]),
    ):
        data = admin_form_data(root, url)
        for field in fields:
            response = root.post(url, {**data, field: json.dumps(BIG)})
            assert response.status_code == 200  # the form again, with its error
            assert f"{field} {TOO_LARGE}" in response.content.decode()
    session.refresh_from_db()
    agent.refresh_from_db()
    assert (agent.session_state, session.session_state, session.metadata) == ({}, {}, {})


async def test_the_state_tool_refuses_too_large_state_and_the_model_is_told(alice, agent, upstream):
    await Agent.objects.filter(pk=agent.pk).aupdate(enable_agentic_state=True)
    update = {"id": "call_1", "name": "update_session_state", "arguments": {"changes": BIG}}
    upstream.script(Reply(tool_calls=[update]), Reply("I could not store that."))
    client = await sync_to_async(asgi_client)(alice)
    response = await client.post("/api/runs", {"input": "remember", "session_state": SMALL})
    assert response.status_code == 200
    assert response.json()["content"] == "I could not store that."
    told = json.loads(upstream.requests[1]["messages"][-1]["content"])
    assert told == {"error": f"session_state {TOO_LARGE} Nothing was changed."}
    session = await Session.objects.aget(pk=response.json()["session_id"])
    assert session.session_state == SMALL
