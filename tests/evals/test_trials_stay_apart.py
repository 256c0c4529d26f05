"""An experiment's answers are runs of their own kind: the people whose conversations became its
items never see them in their sidebar or sessions, their agent's later runs are never sent them
as history, no dataset rule collects them, and the owners' metrics do not count them."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from datasets_app.models import Dataset, DatasetItem, DatasetRule, ItemStatus
from datasets_app.services import collect
from evals_app.experiments import create_experiment
from evals_app.runner import run_experiment
from sessions_app import engine
from sessions_app.models import Run
from testkit.upstream import Reply
from tests.evals import kit
from tests.support.apiclient import asgi_client

pytestmark = pytest.mark.django_db(transaction=True)

TRIAL_SAYS = "An experiment's answer."


@sync_to_async
def sidebar(user) -> list[str]:
    client = Client()
    client.force_login(user)
    page = client.get("/").content.decode()
    marker = 'data-testid="session-item" data-session-id="'
    return sorted(part.split('"')[0] for part in page.split(marker)[1:])


async def seen_by(user) -> dict[str, object]:
    client = await sync_to_async(asgi_client)(user)
    sessions = (await client.get("/api/sessions")).json()
    metrics = (await client.get("/api/metrics?group_by=agent")).json()
    return {
        "sidebar": await sidebar(user),
        "sessions": sorted(s["session_id"] for s in sessions["data"]),
        "metrics": metrics["data"],
    }


@sync_to_async
def experiment_on(run: Run):
    """alice's run as an accepted item of a dataset that a rule also fills from every run."""
    dataset = Dataset.objects.create(name="from-chats")
    DatasetRule.objects.create(dataset=dataset, rating=1, status=ItemStatus.ACCEPTED)
    collect.add_run(dataset, Run.objects.get(pk=run.pk), status=ItemStatus.ACCEPTED)
    baseline, draft = kit.versions()
    return create_experiment(dataset=dataset, versions=[baseline, draft], baseline=baseline)


async def test_its_answers_reach_no_sidebar_history_dataset_or_metrics(alice, agent, upstream):
    asked = await (await engine.start_run(alice, "What is tea?")).wait()
    experiment = await experiment_on(asked)
    before = await seen_by(alice)
    assert before["sidebar"] == before["sessions"] == [asked.session_id]
    items = await DatasetItem.objects.acount()

    with kit.answering(upstream, lambda request: Reply(TRIAL_SAYS)):
        ended = await run_experiment(experiment.pk)
    assert ended.status == "completed"

    assert await seen_by(alice) == before
    assert await DatasetItem.objects.acount() == items
    assert await Run.objects.acount() == 1
    follow_up = await (
        await engine.start_run(alice, "And coffee?", session_id=asked.session_id)
    ).wait()
    sent = upstream.requests[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] != "system"] == [
        "What is tea?",
        "Echo: What is tea?",
        "And coffee?",
    ]
    assert TRIAL_SAYS not in str(sent) and follow_up.status == "COMPLETED"
