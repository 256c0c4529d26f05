"""Few-shot examples are other people's words shown to everyone who chats with an agent: a rule
that accepts items without review never meets a dataset that feeds an agent (on every door that
saves a rule or points an agent at a dataset), and the pages say who sees the examples."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django import forms
from django.test import Client

from datasets_app.models import Dataset, DatasetItem, DatasetRule, ItemStatus
from sessions_app.models import Agent, Session
from tests.support.apiclient import api_client, stored_run

DATASETS = "/admin/datasets_app/dataset/"
AGENTS = "/admin/sessions_app/agent/"
UNREVIEWED = "has a rule that adds items as accepted without review"

pytestmark = pytest.mark.django_db


@pytest.fixture
def examples() -> Dataset:
    return Dataset.objects.create(name="examples")


@pytest.fixture
def fed(agent: Agent, examples: Dataset) -> Agent:
    """The default agent, fed few-shot examples from the dataset."""
    agent.fewshot_dataset = examples
    agent.save(update_fields=["fewshot_dataset"])
    return agent


def rules_form(dataset: Dataset, rule: DatasetRule | None = None, **fields: str) -> dict:
    """The dataset's page as saved with one rule: a new one, or `rule` changed."""
    row = {"agent": "", "rating": "1", "rated_by": "user", "sample_percent": "100",
           "status": "pending", "active": "on", "id": str(rule.pk) if rule else "",
           "dataset": str(dataset.pk), **fields}  # fmt: skip
    return {
        "name": dataset.name, "description": "", "validation_percent": "10",
        "test_percent": "10", "rules-TOTAL_FORMS": "1", "rules-INITIAL_FORMS": "1" if rule else "0",
        **{f"rules-0-{name}": value for name, value in row.items()},
    }  # fmt: skip


def test_the_dataset_page_refuses_a_rule_accepting_items_for_a_dataset_that_feeds_an_agent(
    root, fed, examples
):
    path = f"{DATASETS}{examples.pk}/change/"
    refused = root.post(path, rules_form(examples, status="accepted"))

    assert refused.status_code == 200 and not DatasetRule.objects.exists()
    page = refused.content.decode()
    assert "A rule cannot add items as accepted here" in page
    assert "gives few-shot examples to the agent “Assistant”" in page
    assert root.post(path, rules_form(examples)).status_code == 302
    rule = DatasetRule.objects.get()
    # Changing the rule it has is the same door.
    assert root.post(path, rules_form(examples, rule, status="accepted")).status_code == 200
    rule.refresh_from_db()
    assert rule.status == ItemStatus.PENDING


def test_a_rule_accepting_items_is_kept_for_a_dataset_no_agent_takes_examples_from(
    root, agent, examples
):
    path = f"{DATASETS}{examples.pk}/change/"
    assert root.post(path, rules_form(examples, status="accepted")).status_code == 302
    assert DatasetRule.objects.get().status == ItemStatus.ACCEPTED


def send(client: Client, method: str, path: str, body: dict[str, Any]) -> Any:
    return client.generic(method, path, json.dumps(body), content_type="application/json")


def test_the_api_refuses_to_point_an_agent_at_a_dataset_with_a_rule_accepting_items(
    superuser, agent, examples
):
    rule = DatasetRule.objects.create(dataset=examples, status=ItemStatus.ACCEPTED)
    client = api_client(superuser)
    pointed = {"fewshot_dataset_id": str(examples.pk)}

    patched = send(client, "PATCH", f"/api/agents/{agent.pk}", pointed)
    created = send(client, "POST", "/api/agents", {"name": "Copycat", **pointed})

    for answer in (patched, created):
        assert answer.status_code == 409
        detail = answer.json()["detail"]
        assert f"The dataset “examples” {UNREVIEWED}" in detail
        assert "shown to everyone who chats with the agent" in detail
    agent.refresh_from_db()
    assert agent.fewshot_dataset_id is None
    assert not Agent.objects.filter(name="Copycat").exists()
    rule.status = ItemStatus.PENDING
    rule.save()
    assert send(client, "PATCH", f"/api/agents/{agent.pk}", pointed).status_code == 200


def agent_form(root: Client, agent: Agent, **changes: str) -> dict[str, str]:
    """The agent's page as shown, with some fields changed."""
    form = root.get(f"{AGENTS}{agent.pk}/change/").context["adminform"].form
    data = {}
    for name, field in form.fields.items():
        value = form.initial.get(name)
        if isinstance(field, forms.BooleanField):
            if value:
                data[name] = "on"
        elif isinstance(value, dict | list):
            data[name] = json.dumps(value)
        else:
            data[name] = "" if value is None else str(value)
    return {**data, **changes}


def test_the_agent_page_refuses_a_dataset_with_a_rule_accepting_items(root, agent, examples):
    DatasetRule.objects.create(dataset=examples, status=ItemStatus.ACCEPTED)
    path = f"{AGENTS}{agent.pk}/change/"

    refused = root.post(path, agent_form(root, agent, fewshot_dataset=str(examples.pk)))

    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors["fewshot_dataset"]
    assert errors[0].startswith(f"The dataset “examples” {UNREVIEWED} (“any agent, rated up")
    agent.refresh_from_db()
    assert agent.fewshot_dataset_id is None
    DatasetRule.objects.update(status=ItemStatus.PENDING)
    saved = root.post(path, agent_form(root, agent, fewshot_dataset=str(examples.pk)))
    assert saved.status_code == 302
    agent.refresh_from_db()
    assert agent.fewshot_dataset_id == examples.pk


def test_the_agent_page_says_its_examples_are_shown_to_everyone_who_chats_with_it(root, agent):
    page = root.get(f"{AGENTS}{agent.pk}/change/").content.decode()
    fewshot = page[page.index("Few-shot examples") :].split("</fieldset>")[0]
    assert "shown to everyone who chats with this agent" in fewshot
    assert "e-mail addresses, phone numbers and keys masked" in fewshot


def test_the_agent_page_keeps_every_field_beside_the_few_shot_ones(root, agent):
    page = root.get(f"{AGENTS}{agent.pk}/change/").content.decode()
    for field in ("name", "model", "instructions", "session_state", "fewshot_dataset"):
        assert f'name="{field}"' in page, field


NOTICE = 'data-testid="agent-examples-notice"'


def test_the_chat_page_says_which_agents_are_shown_other_peoples_examples(alice, agent, examples):
    Agent.objects.create(name="Plain", model="scripted")
    client = Client()
    client.force_login(alice)
    assert NOTICE not in client.get("/").content.decode()

    agent.fewshot_dataset = examples
    agent.save()
    page = client.get("/").content.decode()

    notice = page[page.index(NOTICE) :].split("</p>")[0]
    assert "Assistant is given example conversations from other people" in notice
    assert "shown to everyone who chats with it" in notice and "Plain" not in notice
    session = Session.objects.create(user=alice, agent=agent)
    panel = client.get(f"/s/{session.session_id}/settings").content.decode()
    assert NOTICE in panel and "Assistant is given example conversations" in panel


def test_accepting_again_an_item_a_rule_accepted_marks_it_reviewed_by_a_person(
    root, alice, agent, examples, django_capture_on_commit_callbacks
):
    DatasetRule.objects.create(dataset=examples, status=ItemStatus.ACCEPTED)
    run = stored_run(Session.objects.create(user=alice, agent=agent), "Tea?", "Green.")
    body = json.dumps({"rating": 1})
    with django_capture_on_commit_callbacks(execute=True):  # rules apply once it is saved
        rated = api_client(alice).post(
            f"/api/runs/{run.run_id}/feedback", body, content_type="application/json"
        )
    assert rated.status_code == 200
    item = DatasetItem.objects.get()
    assert item.status == ItemStatus.ACCEPTED and item.reviewed_at is None

    form = {"action": "accept", "_selected_action": [str(item.pk)]}
    assert root.post("/admin/datasets_app/datasetitem/", form).status_code == 302

    item.refresh_from_db()
    assert item.status == ItemStatus.ACCEPTED and item.reviewed_at is not None
