"""Agent versions: every configuration an agent goes through is a version of its own, runs
record theirs, and a draft is tried without users chatting with it until it is promoted.

Runs go through the API and the real engine (request_served), against the scripted upstream,
whose requests show what the model was sent."""

from __future__ import annotations

from typing import Any

import pytest

from datasets_app.models import Dataset
from sessions_app.models import Agent, AgentVersion, Run
from sessions_app.services import versions
from tests.support.apiclient import bearer
from tests.support.asgiclient import request_served
from tests.support.roles import grant

pytestmark = pytest.mark.django_db(transaction=True)


def ask(user, text: str) -> dict[str, Any]:
    """One run of the default agent, through the API, as a client starts it."""
    response = request_served("POST", "/api/runs", {"input": text}, bearer(user))
    assert response.status_code == 200, response.body
    return response.json()


def system_prompt(request: dict[str, Any]) -> str | None:
    first = request["messages"][0]
    return first["content"] if first["role"] == "system" else None


@pytest.fixture
def editor(staff):
    """A staff member who may change agents."""
    return grant(staff, "change_agent")


def test_a_changed_instruction_is_a_new_version_and_later_runs_record_it(alice, agent, upstream):
    was = agent.live_version
    first = ask(alice, "hello")
    agent.instructions = "Answer in French."
    agent.save()
    second = ask(alice, "hello again")

    assert first["agent_version_id"] == str(was.pk)
    assert (first["agent_version"], second["agent_version"]) == (was.number, was.number + 1)
    assert Run.objects.get(pk=second["run_id"]).agent_version == agent.live_version
    assert agent.live_version.config["instructions"] == "Answer in French."
    assert system_prompt(upstream.requests[-1]) == "Answer in French."


def test_a_new_name_or_listing_is_no_new_version(alice, agent, upstream):
    known = list(agent.versions.all())
    agent.name, agent.listed = "Helper", False
    agent.save()
    agent.name, agent.listed = "Assistant", True
    agent.save()

    assert list(agent.versions.all()) == known
    assert ask(alice, "hi")["agent_version_id"] == str(known[-1].pk)


def test_going_back_to_an_earlier_configuration_is_that_version_again(alice, agent, upstream):
    first = agent.live_version
    agent.temperature = 0.2
    agent.save()
    agent.temperature = None
    agent.save()

    assert agent.live_version == first
    assert agent.versions.latest("number").number == first.number + 1
    assert ask(alice, "hi")["agent_version"] == first.number


def test_a_value_read_back_from_the_database_is_the_same_version(agent):
    agent.temperature = 1  # from JSON, an int; the database gives back 1.0
    agent.save()
    reloaded = Agent.objects.get(pk=agent.pk)
    reloaded.save()
    assert reloaded.live_version_id == agent.live_version_id


def test_a_draft_does_not_change_what_users_chat_with(alice, agent, editor, upstream):
    agent.instructions = "Be brief."
    agent.save()
    live = agent.live_version
    draft = versions.create_draft(agent, {"instructions": "Be verbose."}, editor, "longer")

    answered = ask(alice, "hi")

    assert draft.number == live.number + 1
    assert (draft.is_draft, draft.note, draft.created_by) == (True, "longer", editor)
    assert answered["agent_version_id"] == str(live.pk)
    assert system_prompt(upstream.requests[-1]) == "Be brief."
    agent.refresh_from_db()
    assert (agent.instructions, agent.live_version_id) == ("Be brief.", live.pk)


def test_promoting_a_draft_makes_that_very_version_live(alice, agent, editor, upstream):
    draft = versions.create_draft(agent, {"instructions": "Be verbose.", "top_p": 0.5}, editor)

    promoted = versions.promote(draft, editor)
    answered = ask(alice, "hi")

    draft.refresh_from_db()
    assert promoted.live_version_id == draft.pk and not draft.is_draft
    assert draft.promoted_at is not None
    assert (promoted.instructions, promoted.top_p) == ("Be verbose.", 0.5)
    assert answered["agent_version_id"] == str(draft.pk)
    assert AgentVersion.objects.filter(agent=agent).latest("number") == draft
    assert system_prompt(upstream.requests[-1]) == "Be verbose."


def test_a_draft_of_a_configuration_the_agent_had_is_that_version(agent, editor):
    first = agent.live_version
    draft = versions.create_draft(agent, {"max_tokens": 50}, editor)

    assert versions.create_draft(agent, {"max_tokens": 50}, editor) == draft
    assert versions.create_draft(agent, {}, editor) == first
    assert versions.draft(agent, {"max_tokens": None}, editor) == (first, False)


def test_a_draft_is_checked_as_the_agents_form_checks_it(agent, editor):
    for changes, field in [
        ({"temperature": 2.5}, "temperature"),
        ({"top_p": -0.1}, "top_p"),
        ({"fewshot_count": 21}, "fewshot_count"),
        ({"name": "Renamed"}, "name"),  # not a versioned field
    ]:
        with pytest.raises(versions.InvalidConfig) as refused:
            versions.create_draft(agent, changes, editor)
        assert field in refused.value.problems
    assert not agent.versions.filter(is_draft=True).exists()


def test_only_staff_who_may_change_agents_draft_and_promote(agent, support, editor):
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied, match="change agent"):
        versions.create_draft(agent, {"temperature": 0.3}, support)
    draft = versions.create_draft(agent, {"temperature": 0.3}, editor)
    with pytest.raises(PermissionDenied, match="change agent"):
        versions.promote(draft, support)
    agent.refresh_from_db()
    assert agent.temperature is None


def test_the_diff_names_each_field_that_differs_with_both_values(agent, editor):
    live = agent.live_version
    draft = versions.create_draft(
        agent, {"instructions": "Be kind.", "num_history_runs": 5, "temperature": 0.7}, editor
    )
    assert versions.diff(live, draft) == [
        ("instructions", "", "Be kind."),
        ("num_history_runs", 3, 5),
        ("temperature", None, 0.7),
    ]
    assert versions.diff(draft, draft) == []


def test_the_sampling_an_agent_sets_is_sent_and_what_it_leaves_unset_is_not(alice, agent, upstream):
    ask(alice, "no settings")
    agent.temperature, agent.max_tokens = 0.3, 64
    agent.save()
    ask(alice, "some settings")

    unset, set_ = upstream.requests[-2], upstream.requests[-1]
    assert not {"temperature", "top_p", "max_tokens"} & set(unset)
    assert (set_["temperature"], set_["max_tokens"]) == (0.3, 64)
    assert "top_p" not in set_


def test_a_run_made_before_versions_has_none(alice, agent, upstream):
    answered = ask(alice, "hi")
    Run.objects.filter(pk=answered["run_id"]).update(agent_version=None)
    response = request_served("GET", f"/api/runs/{answered['run_id']}", None, bearer(alice))
    assert (response.json()["agent_version"], response.json()["agent_version_id"]) == (None, None)


def test_deleting_the_dataset_an_agent_takes_examples_from_is_a_new_version(agent):
    dataset = Dataset.objects.create(name="examples")
    agent.fewshot_dataset = dataset
    agent.save()
    with_examples = agent.live_version
    dataset.delete()
    agent.refresh_from_db()
    assert agent.fewshot_dataset_id is None
    assert agent.live_version_id != with_examples.pk
    assert agent.live_version.config["fewshot_dataset"] is None
