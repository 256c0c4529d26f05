"""What rating a run does to datasets: rules take it in, and a regeneration rated the other way
becomes a pair where one of its runs is curated. Ratings are given as users and staff give them."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from datasets_app.models import Dataset, DatasetItem, DatasetRule, ItemSource, ItemStatus
from datasets_app.services import collect
from sessions_app.models import Session
from tests.support.apiclient import api_client, stored_run

pytestmark = pytest.mark.django_db(transaction=True)


def rate(client: Client, run, rating: int) -> None:
    body = json.dumps({"rating": rating})
    answer = client.post(f"/api/runs/{run.run_id}/feedback", body, content_type="application/json")
    assert answer.status_code == 200


def staff_client(django_user_model) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-123456"))
    return client


def test_a_pair_is_made_when_the_regeneration_of_a_curated_run_is_rated_later(alice, agent):
    dataset = Dataset.objects.create(name="tea")
    chat = Session.objects.create(user=alice, agent=agent)
    first = stored_run(chat, "Which tea?", "Espresso.")
    again = stored_run(chat, "Which tea?", "Rooibos.")
    client = api_client(alice)
    rate(client, again, 1)
    collect.add_run(dataset, type(again).objects.get(pk=again.pk))
    assert [i.source for i in DatasetItem.objects.all()] == [ItemSource.RUN]

    rate(client, first, -1)

    pair = DatasetItem.objects.get(source=ItemSource.PAIR)
    assert (pair.source_run_id, pair.other_run_id) == (again.run_id, first.run_id)
    assert pair.rejected_answer == "Espresso." and pair.status == ItemStatus.PENDING
    # Elsewhere nothing happens: a dataset holding neither run gets no pair.
    assert not DatasetItem.objects.exclude(dataset=dataset).exists()


def test_staff_rating_a_list_filtered_to_unrated_runs_applies_the_rules(
    alice, agent, django_user_model
):
    dataset = Dataset.objects.create(name="staff-picks")
    DatasetRule.objects.create(dataset=dataset, rating=1, rated_by="staff")
    chat = Session.objects.create(user=alice, agent=agent)
    runs = [stored_run(chat, f"q{n}", f"a{n}") for n in range(3)]

    form = {"action": "rate_up", "select_across": "1", "index": "0",
            "_selected_action": [str(runs[0].run_id)]}  # fmt: skip
    answer = staff_client(django_user_model).post(
        "/admin/sessions_app/run/?staff_rating=none", form, follow=True
    )

    assert "3 runs rated good by staff." in answer.content.decode()
    taken = set(DatasetItem.objects.values_list("source_run_id", flat=True))
    assert taken == {run.run_id for run in runs}


def test_a_rated_run_is_added_once_however_often_it_is_rated(alice, agent):
    dataset = Dataset.objects.create(name="good")
    DatasetRule.objects.create(dataset=dataset, rating=1, rated_by="user")
    chat = Session.objects.create(user=alice, agent=agent)
    run = stored_run(chat, "q", "a")
    client = api_client(alice)
    for rating in (1, -1, 1):
        rate(client, run, rating)
    assert DatasetItem.objects.filter(dataset=dataset).count() == 1


def test_items_of_a_deleted_user_are_left_out_of_exports(alice, bob, agent, django_user_model):
    """A deleted account can no longer say yes: its snapshots stay for staff, not for training."""
    dataset = Dataset.objects.create(name="kept")
    for user in (alice, bob):
        chat = Session.objects.create(user=user, agent=agent)
        run = stored_run(chat, f"{user.username} asks", f"{user.username}'s answer")
        collect.add_run(dataset, run, status=ItemStatus.ACCEPTED)
    bob.delete()

    answer = staff_client(django_user_model).get(
        f"/api/datasets/{dataset.pk}/export?format=openai-chat"
    )

    lines = b"".join(answer).decode().splitlines()
    assert [json.loads(line)["messages"][-1]["content"] for line in lines] == ["alice's answer"]
    assert DatasetItem.objects.filter(dataset=dataset).count() == 2


def test_a_receiver_that_fails_loses_no_rating_and_stops_no_other(alice, agent, caplog):
    from sessions_app.models import Run
    from sessions_app.signals import run_rated

    dataset = Dataset.objects.create(name="kept")
    DatasetRule.objects.create(dataset=dataset, rating=1, rated_by="user")
    run = stored_run(Session.objects.create(user=alice, agent=agent), "q", "a")

    def broken(**kwargs):
        raise RuntimeError("a receiver that fails")

    run_rated.connect(broken, sender=Run, dispatch_uid="broken")
    try:
        rate(api_client(alice), run, 1)
    finally:
        run_rated.disconnect(dispatch_uid="broken", sender=Run)

    assert Run.objects.get(pk=run.pk).feedback_rating == 1
    assert DatasetItem.objects.filter(dataset=dataset, source_run_id=run.run_id).exists()
    assert "a receiver that fails" in caplog.text
