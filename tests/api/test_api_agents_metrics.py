"""Agents (shared, edited by staff with the permission) and usage metrics (one's own; staff who
may view model calls: everyone's)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from datasets_app.models import Dataset
from sessions_app.models import Agent, RunStatus, Session
from sessions_app.services.agents import EDITABLE_FIELDS
from tests.support.apiclient import api_client, stored_run
from tests.support.roles import grant

pytestmark = pytest.mark.django_db

# An agent reads as everything staff may set on it, and what the server keeps.
AGENT_FIELDS = EDITABLE_FIELDS | {"agent_id", "version", "version_id", "created_at", "updated_at"}


def send(client, method: str, path: str, body: dict | None = None):
    data = json.dumps(body) if body is not None else ""
    return client.generic(method, path, data, content_type="application/json")


# -- agents ------------------------------------------------------------------------------------


def test_anyone_signed_in_lists_and_reads_agents(alice, agent):
    Agent.objects.create(name="Coder", model="scripted")
    client = api_client(alice)
    body = client.get("/api/agents").json()
    assert [a["name"] for a in body["data"]] == ["Assistant", "Coder"]
    assert body["meta"]["total_count"] == 2
    assert set(body["data"][0]) == AGENT_FIELDS
    one = client.get(f"/api/agents/{agent.agent_id}").json()
    assert one["add_history_to_context"] is True and one["num_history_runs"] == 3


@pytest.mark.parametrize(
    "method,path",
    [("GET", "/api/agents"), ("POST", "/api/agents"), ("GET", "/api/agents/{id}"),
     ("PATCH", "/api/agents/{id}")],
)  # fmt: skip
def test_anonymous_callers_cannot_see_or_change_agents(client, agent, method, path):
    response = send(client, method, path.format(id=agent.agent_id), {"name": "x"})
    assert response.status_code == 401


def test_an_unknown_agent_is_not_found(alice, agent):
    assert api_client(alice).get(f"/api/agents/{uuid.uuid4()}").status_code == 404


def test_staff_create_an_agent_with_agno_defaults(staff, settings):
    response = send(api_client(grant(staff, "add_agent")), "POST", "/api/agents", {"name": "Tutor"})
    assert response.status_code == 201
    body = response.json()
    assert body["model"] == settings.LLM_MODEL
    assert (body["num_history_runs"], body["num_history_sessions"]) == (3, 2)
    assert body["num_history_messages"] is None and body["session_state"] == {}
    assert Agent.objects.get(pk=body["agent_id"]).name == "Tutor"


def test_staff_change_only_the_fields_they_send(staff, agent):
    grant(staff, "change_agent")
    response = send(
        api_client(staff),
        "PATCH",
        f"/api/agents/{agent.agent_id}",
        {"instructions": "Answer in French.", "num_history_runs": 5},
    )
    assert response.status_code == 200
    agent.refresh_from_db()
    assert (agent.instructions, agent.num_history_runs, agent.name) == (
        "Answer in French.",
        5,
        "Assistant",
    )
    memory_settings = {"enable_agentic_state": True, "add_past_sessions_to_context": True}
    response = send(api_client(staff), "PATCH", f"/api/agents/{agent.agent_id}", memory_settings)
    assert response.status_code == 200
    assert {k: response.json()[k] for k in memory_settings} == memory_settings


def test_an_agent_as_read_can_be_sent_back_whole_to_make_its_copy(staff, agent):
    """Every editable field is read, accepted on creation and on change, and kept as sent."""
    client = api_client(grant(staff, "add_agent", "change_agent"))
    dataset = Dataset.objects.create(name="examples")
    unlike_defaults = {
        "instructions": "Answer in French.", "num_history_messages": 12,
        "search_session_history": True, "session_state": {"lang": "fr"},
        "fewshot_dataset_id": str(dataset.pk), "fewshot_order": "best",
        "temperature": 0.5, "top_p": 0.9, "max_tokens": 300,
    }  # fmt: skip
    path = f"/api/agents/{agent.agent_id}"
    assert send(client, "PATCH", path, unlike_defaults).status_code == 200
    original = client.get(path).json()
    editable = {name: original[name] for name in EDITABLE_FIELDS} | {"name": "Copy"}
    created = send(client, "POST", "/api/agents", editable)
    assert created.status_code == 201, created.content
    assert {name: created.json()[name] for name in EDITABLE_FIELDS} == editable
    changed = send(client, "PATCH", path, editable)
    assert changed.status_code == 200, changed.content
    assert {name: changed.json()[name] for name in EDITABLE_FIELDS} == editable


def test_other_users_may_not_create_or_change_agents(alice, agent):
    client = api_client(alice)
    created = send(client, "POST", "/api/agents", {"name": "Mine"})
    changed = send(client, "PATCH", f"/api/agents/{agent.agent_id}", {"name": "Hacked"})
    assert created.status_code == changed.status_code == 403
    assert created.json()["detail"] == "You need the “add agent” permission."
    assert changed.json()["detail"] == "You need the “change agent” permission."
    assert not Agent.objects.filter(name__in=["Mine", "Hacked"]).exists()


def test_staff_without_the_permission_may_not_create_or_change_agents(staff, support, agent):
    for user in (staff, support):  # reads runs and model calls; reads everything
        client = api_client(user)
        created = send(client, "POST", "/api/agents", {"name": "Mine"})
        changed = send(client, "PATCH", f"/api/agents/{agent.agent_id}", {"name": "Renamed"})
        assert (created.status_code, changed.status_code) == (403, 403)
        assert created.json() == {"detail": "You need the “add agent” permission."}
        assert changed.json() == {"detail": "You need the “change agent” permission."}
    agent.refresh_from_db()
    assert agent.name == "Assistant" and not Agent.objects.filter(name="Mine").exists()


def test_unlisted_agents_show_to_staff_who_may_view_agents(alice, staff, support, agent):
    hidden = Agent.objects.create(name="Imported", model="scripted", listed=False)
    path = f"/api/agents/{hidden.agent_id}"

    def names(user) -> list[str]:
        return [a["name"] for a in api_client(user).get("/api/agents").json()["data"]]

    assert names(alice) == names(staff) == ["Assistant"]
    assert names(support) == ["Assistant", "Imported"]
    assert api_client(support).get(path).status_code == 200
    assert api_client(alice).get(path).status_code == 404
    refused = api_client(staff).get(path)
    assert refused.status_code == 403
    assert refused.json() == {"detail": "You need the “view agent” permission."}


def test_an_unlisted_agent_answers_as_a_missing_one_so_agents_cannot_be_probed(alice, staff, agent):
    hidden = Agent.objects.create(name="Imported", model="scripted", listed=False)

    def answers(user, agent_id) -> list[tuple[int, str]]:
        client = api_client(user)
        read = client.get(f"/api/agents/{agent_id}")
        made = send(client, "POST", "/api/sessions", {"agent_id": str(agent_id)})
        return [(r.status_code, r.json()["detail"]) for r in (read, made)]

    refused = (403, "You need the “view agent” permission.")
    assert answers(staff, hidden.agent_id) == answers(staff, uuid.uuid4()) == [refused] * 2
    assert answers(alice, hidden.agent_id) == answers(alice, uuid.uuid4())
    assert {status for status, _ in answers(alice, hidden.agent_id)} == {404}
    assert not Session.objects.filter(agent=hidden).exists()


@pytest.mark.parametrize(
    "body",
    [
        {"name": ""},
        {"name": "x", "num_history_runs": -1},
        {"name": "x", "num_history_runs": 10**12},
        {"name": "x", "session_state": "text"},
        {"name": "x", "add_history_to_context": None},
    ],
)
def test_invalid_agent_fields_answer_422(staff, body):
    before = Agent.objects.count()
    assert (
        send(api_client(grant(staff, "add_agent")), "POST", "/api/agents", body).status_code == 422
    )
    assert Agent.objects.count() == before


# -- metrics -----------------------------------------------------------------------------------


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2025, 3, day, hour, tzinfo=UTC)


@pytest.fixture
def usage(alice, bob, agent):
    """Alice: three chat calls over two days on two models, one failed. Bob: one call."""
    coder = Agent.objects.create(name="Coder", model="big-model")
    mine = Session.objects.create(user=alice, agent=agent)
    code = Session.objects.create(user=alice, agent=coder)
    theirs = Session.objects.create(user=bob, agent=agent)
    stored_run(mine, "q1", "a1", tokens=(10, 5), at=at(1), time_to_first_token=0.2, duration=1.0)
    stored_run(mine, "q2", "", tokens=(20, 0), at=at(1, 18), status=RunStatus.ERROR,
               time_to_first_token=None, duration=3.0)  # fmt: skip
    stored_run(code, "q3", "a3", tokens=(30, 10), at=at(2), time_to_first_token=0.4,
               duration=2.0, model="big-model", cost=0.25)  # fmt: skip
    stored_run(theirs, "b1", "b", tokens=(100, 50), at=at(2))
    return {"coder": coder}


def metrics(user, query: str) -> dict:
    response = api_client(user).get(f"/api/metrics?{query}")
    assert response.status_code == 200, response.content
    return response.json()


def test_metrics_by_day_sum_tokens_count_runs_and_errors(alice, usage):
    body = metrics(alice, "group_by=day&start=2025-03-01&end=2025-03-31")
    assert body["group_by"] == "day"
    days = {row["key"]: row for row in body["data"]}
    assert list(days) == ["2025-03-01", "2025-03-02"]
    first = days["2025-03-01"]
    assert (first["runs"], first["calls"], first["errors"]) == (2, 2, 1)
    assert (first["input_tokens"], first["output_tokens"], first["total_tokens"]) == (30, 5, 35)
    assert first["cost"] is None
    assert days["2025-03-02"]["cost"] == pytest.approx(0.25)


def test_metrics_percentiles_interpolate_between_calls(alice, usage):
    body = metrics(alice, "group_by=user&start=2025-03-01&end=2025-03-31")
    (mine,) = body["data"]
    assert mine["key"] == "alice"
    assert mine["duration"]["p50"] == pytest.approx(2.0)
    assert mine["duration"]["p95"] == pytest.approx(2.9)
    # The failed call never produced a token: only two values count.
    assert mine["time_to_first_token"]["p50"] == pytest.approx(0.3)
    assert mine["time_to_first_token"]["p95"] == pytest.approx(0.39)


def test_metrics_group_by_model_and_by_agent(alice, usage, agent):
    by_model = metrics(alice, "group_by=model&start=2025-03-01")["data"]
    assert {(r["key"], r["calls"]) for r in by_model} == {("big-model", 1), ("scripted", 2)}
    by_agent = metrics(alice, "group_by=agent&start=2025-03-01")["data"]
    labels = {r["key"]: r["label"] for r in by_agent}
    assert labels == {str(agent.agent_id): "Assistant", str(usage["coder"].agent_id): "Coder"}


def test_users_see_only_their_own_metrics_and_staff_see_everyones(alice, bob, staff, usage):
    mine = metrics(alice, "group_by=user&start=2025-03-01")["data"]
    theirs = metrics(bob, "group_by=user&start=2025-03-01")["data"]
    everyone = metrics(staff, "group_by=user&start=2025-03-01")["data"]
    assert [r["key"] for r in mine] == ["alice"]
    assert [(r["key"], r["total_tokens"]) for r in theirs] == [("bob", 150)]
    assert [r["key"] for r in everyone] == ["alice", "bob"]


def test_staff_who_may_not_view_model_calls_see_only_their_own(django_user_model, alice, usage):
    reader = django_user_model.objects.create_user("reader", password="x", is_staff=True)
    grant(reader, "view_session", "view_run")
    own = Session.objects.create(user=reader, agent=usage["coder"])
    stored_run(own, "r1", "r", tokens=(1, 1), at=at(2))
    assert [r["key"] for r in metrics(reader, "group_by=user&start=2025-03-01")["data"]] == [
        "reader"
    ]


def test_a_bare_end_date_includes_that_whole_day_and_datetimes_are_exact(alice, usage):
    whole_day = metrics(alice, "start=2025-03-01&end=2025-03-01")["data"]
    assert [r["calls"] for r in whole_day] == [2]
    morning = metrics(alice, "start=2025-03-01T00:00:00&end=2025-03-01T13:00:00Z")["data"]
    assert [r["calls"] for r in morning] == [1]
    shifted = metrics(alice, "start=2025-03-01T19:00:00%2B02:00&end=2025-03-01T23:00:00")
    assert [r["calls"] for r in shifted["data"]] == [1]  # 17:00 UTC onwards: the 18:00 call


def test_without_a_start_metrics_cover_the_30_days_before_the_end(alice, usage):
    body = metrics(alice, "end=2025-03-31")
    assert body["start"] == "2025-03-01"
    assert sum(r["calls"] for r in body["data"]) == 3
    later = metrics(alice, "end=2025-04-01")
    assert later["start"] == "2025-03-02"
    assert [(r["key"], r["calls"]) for r in later["data"]] == [("2025-03-02", 1)]


@pytest.mark.parametrize(
    "query", ["group_by=week", "start=yesterday", "end=2025-02-30", "start=0001-01-01T00:00+05:00"]
)
def test_bad_metrics_parameters_answer_422(alice, query):
    assert api_client(alice).get(f"/api/metrics?{query}").status_code == 422


def test_anonymous_callers_get_no_metrics(client):
    assert client.get("/api/metrics").status_code == 401
