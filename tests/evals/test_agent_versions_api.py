"""Agent versions through the REST API: the sampling settings of an agent, its versions listed,
a draft made and promoted, with the rights and refusals of every other door."""

from __future__ import annotations

import json
import uuid

import pytest

from datasets_app.models import Dataset
from sessions_app.models import Agent
from sessions_app.services import versions
from tests.support.apiclient import api_client
from tests.support.roles import grant

pytestmark = pytest.mark.django_db


def send(client, method: str, path: str, body: dict | None = None):
    data = json.dumps(body) if body is not None else ""
    return client.generic(method, path, data, content_type="application/json")


@pytest.fixture
def editor(staff):
    return grant(staff, "change_agent")


def versions_url(agent: Agent, *rest: str) -> str:
    return "/".join([f"/api/agents/{agent.pk}/versions", *rest])


# -- the agent's sampling settings ------------------------------------------------------------


def test_staff_set_sampling_on_an_agent_and_clear_it_with_null(editor, agent):
    url = f"/api/agents/{agent.pk}"
    body = send(api_client(editor), "PATCH", url, {"temperature": 1, "max_tokens": 200}).json()
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (1.0, None, 200)
    assert (body["version"], body["version_id"]) == (
        agent.live_version.number + 1,
        str(Agent.objects.get(pk=agent.pk).live_version_id),
    )
    cleared = send(api_client(editor), "PATCH", url, {"temperature": None}).json()
    assert cleared["temperature"] is None and cleared["max_tokens"] == 200


@pytest.mark.parametrize(
    "field,value",
    [("temperature", 2.01), ("temperature", -1), ("top_p", 1.5), ("max_tokens", 0),
     ("max_tokens", 1.5), ("temperature", "0.5"), ("top_p", True)],
)  # fmt: skip
def test_sampling_out_of_bounds_is_refused(editor, agent, field, value):
    for method, url in [("PATCH", f"/api/agents/{agent.pk}"), ("POST", versions_url(agent))]:
        response = send(api_client(editor), method, url, {field: value})
        assert response.status_code == 422, (method, response.content)
        assert isinstance(response.json()["detail"], list)
    assert getattr(Agent.objects.get(pk=agent.pk), field) is None


def test_an_agent_made_with_sampling_says_its_first_version(staff, settings):
    client = api_client(grant(staff, "add_agent"))
    body = send(client, "POST", "/api/agents", {"name": "Poet", "temperature": 1.2}).json()
    assert (body["temperature"], body["version"]) == (1.2, 1)


# -- the list ---------------------------------------------------------------------------------


def test_staff_who_may_view_agents_list_its_versions_newest_first(support, editor):
    agent = Agent.objects.create(name="Coder", model="scripted")
    live = agent.live_version
    versions.create_draft(agent, {"instructions": "Be kind."}, editor, "kinder")

    body = api_client(support).get(versions_url(agent)).json()

    assert body["meta"] == {"page": 1, "limit": 20, "total_pages": 1, "total_count": 2}
    draft, current = body["data"]
    assert (draft["number"], draft["label"], draft["state"]) == (2, "v2 draft", "draft")
    assert (draft["note"], draft["created_by"], draft["runs"]) == ("kinder", "staff", 0)
    assert draft["config"]["instructions"] == "Be kind."
    assert "fewshot_dataset_id" in draft["config"] and draft["promoted_at"] is None
    assert (current["version_id"], current["state"]) == (str(live.pk), "live")
    oldest_first = api_client(support).get(versions_url(agent) + "?sort_order=asc").json()
    assert [v["number"] for v in oldest_first["data"]] == [1, 2]


def test_a_past_version_says_so(editor, agent):
    agent.instructions = "Be brief."
    agent.save()
    states = [v["state"] for v in api_client(editor).get(versions_url(agent)).json()["data"]]
    assert states[:2] == ["live", "past"]


def test_who_may_not_view_agents_is_told_the_permission(alice, staff, agent):
    for user in (alice, staff):
        response = api_client(user).get(versions_url(agent))
        assert response.status_code == 403
        assert response.json() == {"detail": "You need the “view agent” permission."}


def test_an_unknown_agent_has_no_versions(support):
    response = api_client(support).get(f"/api/agents/{uuid.uuid4()}/versions")
    assert (response.status_code, response.json()) == (404, {"detail": "Not found."})


# -- drafts -----------------------------------------------------------------------------------


def test_a_draft_changes_only_the_fields_sent_and_not_the_agent(editor, agent):
    response = send(
        api_client(editor),
        "POST",
        versions_url(agent),
        {"instructions": "Be verbose.", "top_p": 0.9, "note": "longer answers"},
    )
    assert response.status_code == 201
    body = response.json()
    assert (body["state"], body["note"], body["created_by"]) == ("draft", "longer answers", "staff")
    assert (body["config"]["instructions"], body["config"]["top_p"]) == ("Be verbose.", 0.9)
    assert body["config"]["num_history_runs"] == agent.num_history_runs
    fresh = Agent.objects.get(pk=agent.pk)
    assert (fresh.instructions, fresh.top_p) == (agent.instructions, None)
    assert fresh.live_version_id == agent.live_version_id


def test_a_draft_of_an_existing_configuration_answers_that_version(editor, agent):
    client = api_client(editor)
    first = send(client, "POST", versions_url(agent), {"temperature": 0.4})
    again = send(client, "POST", versions_url(agent), {"temperature": 0.4, "note": "same"})
    live = send(client, "POST", versions_url(agent), {})
    assert (first.status_code, again.status_code, live.status_code) == (201, 200, 200)
    assert again.json()["version_id"] == first.json()["version_id"]
    assert again.json()["note"] == ""
    assert live.json()["version_id"] == str(agent.live_version_id)


def test_a_draft_with_values_out_of_bounds_or_unknown_is_refused(editor, agent):
    client = api_client(editor)
    unknown = send(client, "POST", versions_url(agent), {"fewshot_dataset_id": str(uuid.uuid4())})
    assert (unknown.status_code, unknown.json()) == (404, {"detail": "Not found."})
    for body in ({"name": "Renamed"}, {"fewshot_count": 21}, {"note": "x" * 201}):
        response = send(client, "POST", versions_url(agent), body)
        assert response.status_code == 422 and isinstance(response.json()["detail"], list)
    assert not agent.versions.filter(is_draft=True).exists()


def test_a_version_whose_dataset_is_gone_is_not_promoted_and_says_why(editor, agent):
    dataset = Dataset.objects.create(name="examples")
    body = {"fewshot_dataset_id": str(dataset.pk)}
    draft = send(api_client(editor), "POST", versions_url(agent), body).json()
    dataset.delete()

    response = send(api_client(editor), "POST", versions_url(agent, draft["version_id"], "promote"))

    assert response.status_code == 422
    (problem,) = response.json()["detail"]
    assert problem["loc"] == ["body", "payload", "fewshot_dataset"]
    assert Agent.objects.get(pk=agent.pk).live_version_id == agent.live_version_id


def test_only_staff_who_may_change_agents_draft(alice, support, agent):
    for user in (alice, support):
        response = send(api_client(user), "POST", versions_url(agent), {"temperature": 0.1})
        assert response.status_code == 403
        assert response.json() == {"detail": "You need the “change agent” permission."}
    assert not agent.versions.filter(is_draft=True).exists()


# -- promoting --------------------------------------------------------------------------------


def test_promoting_a_draft_answers_the_agent_now_chatting_with_it(editor, agent):
    draft = versions.create_draft(agent, {"instructions": "Be verbose."}, editor)
    response = send(api_client(editor), "POST", versions_url(agent, str(draft.pk), "promote"))
    assert response.status_code == 200
    body = response.json()
    assert (body["instructions"], body["version"], body["version_id"]) == (
        "Be verbose.",
        draft.number,
        str(draft.pk),
    )
    listed = api_client(editor).get(versions_url(agent)).json()["data"]
    assert [v["state"] for v in listed[:2]] == ["live", "past"]


def test_promoting_takes_the_change_permission_and_a_version_of_that_agent(support, editor, agent):
    draft = versions.create_draft(agent, {"temperature": 0.1}, editor)
    other = Agent.objects.create(name="Other", model="scripted")
    refused = send(api_client(support), "POST", versions_url(agent, str(draft.pk), "promote"))
    elsewhere = send(api_client(editor), "POST", versions_url(other, str(draft.pk), "promote"))
    missing = send(api_client(editor), "POST", versions_url(agent, str(uuid.uuid4()), "promote"))
    assert refused.status_code == 403
    assert refused.json()["detail"] == "You need the “change agent” permission."
    assert (elsewhere.status_code, missing.status_code) == (404, 404)
    assert Agent.objects.get(pk=agent.pk).temperature is None
