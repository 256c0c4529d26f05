"""Collecting runs into datasets, through the real stack: runs answered by the scripted upstream,
rated through the API and the admin, snapshots compared with what the model was sent."""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from datasets_app.models import Dataset, DatasetItem, DatasetRule, ItemSource, Split
from datasets_app.services import collect
from datasets_app.services.snapshot import conversation
from sessions_app import engine
from sessions_app.models import Agent, Run, RunStatus, Session
from testkit.upstream import Reply
from tests.support.apiclient import api_client, stored_run
from tests.support.roles import grant

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def other_agent(db) -> Agent:
    return Agent.objects.create(name="Coder", model="scripted", instructions="Write code.")


@pytest.fixture
def dataset(db) -> Dataset:
    return Dataset.objects.create(name="good-answers")


async def finish(user, text: str, **kwargs) -> Run:
    run = await (await engine.start_run(user, text, **kwargs)).wait()
    assert run.status == RunStatus.COMPLETED, run.error
    return run


@sync_to_async
def add_run(dataset: Dataset, run: Run, **kwargs) -> list[DatasetItem]:
    return collect.add_run(dataset, Run.objects.get(pk=run.pk), **kwargs)


@sync_to_async
def add_session(dataset: Dataset, session_id, **kwargs) -> DatasetItem:
    return collect.add_session(dataset, Session.objects.get(pk=session_id), **kwargs)


def exported(item: DatasetItem) -> list[dict]:
    return conversation(item.messages, item.corrected_answer)


# -- what an item holds --------------------------------------------------------------------------


async def test_a_run_item_is_the_context_the_model_was_sent_and_its_answer(
    alice, brief_agent, dataset, upstream
):
    first = await finish(alice, "My name is Alice.")
    upstream.script(Reply("You are Alice."))
    run = await finish(alice, "What is my name?", session_id=first.session_id)

    (item,) = await add_run(dataset, run)
    sent = upstream.requests[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert [m["content"] for m in sent[1:]] == [
        "My name is Alice.", "Echo: My name is Alice.", "What is my name?",
    ]  # fmt: skip
    assert exported(item) == [*sent, {"role": "assistant", "content": "You are Alice."}]
    assert item.source == ItemSource.RUN and item.source_run_id == run.run_id
    assert item.source_session_id == run.session_id and item.owner_id == alice.pk
    assert item.model == "scripted" and item.tools == []


async def test_tool_calls_and_their_results_are_kept_with_the_tool_offered(
    alice, dataset, upstream
):
    await Agent.objects.aupdate_or_create(
        is_default=True,
        defaults={"name": "Recall", "model": "scripted", "search_session_history": True},
    )
    await finish(alice, "I like oolong.")
    current = await finish(alice, "Hello again.")
    lookup = {"id": "call_9", "name": "get_previous_session_messages", "arguments": {}}
    upstream.script(Reply(tool_calls=[lookup]), Reply("You like oolong."))
    run = await finish(alice, "Which tea do I like?", session_id=current.session_id)

    (item,) = await add_run(dataset, run)
    last_request = upstream.requests[-1]
    # As sent, but for an empty content written "" where the request had null.
    assert exported(item) == [
        *conversation(last_request["messages"]),
        {"role": "assistant", "content": "You like oolong."},
    ]
    roles = [m["role"] for m in item.messages]
    assert roles[-4:] == ["user", "assistant", "tool", "assistant"]
    call = item.messages[-3]["tool_calls"][0]
    assert call["id"] == "call_9" and call["function"]["name"] == "get_previous_session_messages"
    assert item.messages[-2]["tool_call_id"] == "call_9"
    assert "I like oolong." in item.messages[-2]["content"]
    offered = {t["function"]["name"]: t for t in last_request["tools"]}
    assert item.tools == [offered["get_previous_session_messages"]]


async def test_later_changes_to_the_session_leave_the_item_as_it_was(
    alice, brief_agent, dataset, upstream
):
    first = await finish(alice, "Green or black?")
    run = await finish(alice, "And for the evening?", session_id=first.session_id)
    (item,) = await add_run(dataset, run)
    kept = (item.messages, item.content_hash)

    await finish(alice, "One more question.", session_id=run.session_id)
    await Agent.objects.filter(pk=brief_agent.pk).aupdate(instructions="Be verbose.")
    client = await sync_to_async(api_client)(alice)
    renamed = await sync_to_async(client.patch)(
        f"/api/sessions/{run.session_id}", {"session_name": "renamed"},
        content_type="application/json",
    )  # fmt: skip
    assert renamed.status_code == 200
    deleted = await sync_to_async(client.delete)(f"/api/sessions/{run.session_id}")
    assert deleted.status_code == 204
    assert not await Run.objects.filter(pk=run.pk).aexists()

    again = await DatasetItem.objects.aget(pk=item.pk)
    assert (again.messages, again.content_hash) == kept
    assert again.messages[0] == {"role": "system", "content": "Be brief."}
    assert again.run_id is None and again.source_run_id == run.run_id  # provenance outlives it


async def test_the_same_run_is_added_once(alice, brief_agent, dataset, upstream):
    run = await finish(alice, "Tea?")
    await add_run(dataset, run)
    with pytest.raises(collect.AlreadyInDataset) as refused:
        await add_run(dataset, run)
    assert str(refused.value) == f"Run {run.run_id} is already in the dataset “good-answers”."
    assert await DatasetItem.objects.acount() == 1
    # Another dataset takes it all the same.
    other = await Dataset.objects.acreate(name="other")
    assert len(await add_run(other, run)) == 1


async def test_a_run_that_failed_has_nothing_to_learn_from(alice, brief_agent, dataset, upstream):
    upstream.script(Reply(status=500, error_message="model down"))
    handle = await engine.start_run(alice, "Tea?")
    failed = await handle.wait()
    assert failed.status == RunStatus.ERROR
    with pytest.raises(collect.NotCollectable, match="this run is ERROR"):
        await add_run(dataset, failed)
    assert not await DatasetItem.objects.aexists()


async def test_a_session_item_holds_every_completed_run_in_order(
    alice, brief_agent, dataset, upstream
):
    first = await finish(alice, "one")
    upstream.script(Reply(status=500, error_message="model down"))
    await (await engine.start_run(alice, "two", session_id=first.session_id)).wait()
    await finish(alice, "three", session_id=first.session_id)
    await finish(alice, "four", session_id=first.session_id)

    item = await add_session(dataset, first.session_id)
    assert exported(item) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "Echo: one"},
        {"role": "user", "content": "three"},
        {"role": "assistant", "content": "Echo: three"},
        {"role": "user", "content": "four"},
        {"role": "assistant", "content": "Echo: four"},
    ]
    assert item.source == ItemSource.SESSION and item.source_run_id is None
    with pytest.raises(collect.AlreadyInDataset, match="is already in the dataset"):
        await add_session(dataset, first.session_id)


# -- splits ------------------------------------------------------------------------------------


def test_the_split_follows_from_the_id_in_the_datasets_proportions(db):
    dataset = Dataset.objects.create(name="splits", validation_percent=20, test_percent=30)
    ids = [uuid.uuid5(uuid.NAMESPACE_URL, f"item-{n}") for n in range(3000)]
    splits = [collect.split_for(dataset, item_id) for item_id in ids]
    assert splits == [collect.split_for(dataset, item_id) for item_id in ids]
    share = {name: splits.count(name) / len(ids) for name in Split.values}
    assert share[Split.TEST] == pytest.approx(0.30, abs=0.03)
    assert share[Split.VALIDATION] == pytest.approx(0.20, abs=0.03)
    assert share[Split.TRAIN] == pytest.approx(0.50, abs=0.03)


def test_items_land_in_the_split_of_their_id_unless_told(alice, brief_agent, db):
    dataset = Dataset.objects.create(name="splits", validation_percent=30, test_percent=30)
    chat = Session.objects.create(user=alice, agent=brief_agent)
    items = [collect.add_run(dataset, stored_run(chat, f"q{n}", f"a{n}"))[0] for n in range(60)]
    assert all(item.split == collect.split_for(dataset, item.item_id) for item in items)
    assert {item.split for item in items} == set(Split.values)
    chosen = collect.add_run(dataset, stored_run(chat, "q", "a"), split=Split.TEST)[0]
    assert chosen.split == Split.TEST


# -- rules -------------------------------------------------------------------------------------


def rate(client: Client, run: Run, rating: int) -> None:
    path = f"/api/runs/{run.run_id}/feedback"
    body = json.dumps({"rating": rating})
    assert client.post(path, body, content_type="application/json").status_code == 200


async def test_a_rule_adds_runs_of_its_agent_when_their_owner_rates_them_up(
    alice, brief_agent, other_agent, dataset, upstream
):
    await DatasetRule.objects.acreate(
        dataset=dataset, agent=brief_agent, rating=1, rated_by="user", sample_percent=100
    )
    good = await finish(alice, "Good question")
    bad = await finish(alice, "Bad question")
    elsewhere = await finish(alice, "Code question", agent_id=other_agent.agent_id)
    client = await sync_to_async(api_client)(alice)
    for run, rating in ((good, 1), (bad, -1), (elsewhere, 1)):
        await sync_to_async(rate)(client, run, rating)

    items = [i async for i in DatasetItem.objects.filter(dataset=dataset)]
    assert [i.source_run_id for i in items] == [good.run_id]
    assert items[0].status == "pending" and items[0].rating == 1
    assert exported(items[0])[-1] == {"role": "assistant", "content": "Echo: Good question"}
    # Rated up again: still one item.
    await sync_to_async(rate)(client, good, 1)
    assert await DatasetItem.objects.acount() == 1


def test_a_rule_samples_the_same_runs_every_time(alice, brief_agent, dataset):
    DatasetRule.objects.create(dataset=dataset, rating=1, sample_percent=50)
    chat = Session.objects.create(user=alice, agent=brief_agent)
    rated = [stored_run(chat, f"q{n}", f"a{n}") for n in range(100)]
    client = api_client(alice)
    for run in rated:
        rate(client, run, 1)
    taken = set(DatasetItem.objects.values_list("source_run_id", flat=True))
    assert 25 <= len(taken) <= 75

    DatasetItem.objects.all().delete()
    for run in rated:
        rate(client, run, 1)
    assert set(DatasetItem.objects.values_list("source_run_id", flat=True)) == taken


def test_staff_ratings_in_the_admin_trigger_staff_rules_only(alice, brief_agent, dataset, db):
    for_staff = DatasetRule.objects.create(dataset=dataset, rating=1, rated_by="staff")
    users_set = Dataset.objects.create(name="users-choice")
    DatasetRule.objects.create(dataset=users_set, rating=1, rated_by="user")
    chat = Session.objects.create(user=alice, agent=brief_agent)
    picked, left = stored_run(chat, "q1", "a1"), stored_run(chat, "q2", "a2")
    root = Client()
    root.force_login(type(alice).objects.create_superuser("root", password="root-pass-123"))

    form = {"action": "rate_up", "_selected_action": [str(picked.run_id)]}
    response = root.post("/admin/sessions_app/run/", form, follow=True)
    assert "1 run rated good by staff." in response.content.decode()
    (item,) = DatasetItem.objects.all()
    assert (item.dataset_id, item.source_run_id) == (dataset.pk, picked.run_id)
    assert item.rating == 1 and item.status == for_staff.status
    # The user's own rating goes to the user's rule, not to staff's.
    rate(api_client(alice), left, 1)
    assert set(DatasetItem.objects.values_list("dataset__name", "source_run_id")) == {
        ("good-answers", picked.run_id), ("users-choice", left.run_id),
    }  # fmt: skip


# -- preference pairs --------------------------------------------------------------------------


async def regenerated(alice, upstream) -> tuple[Run, Run]:
    """A question answered, then answered again as the chat's regenerate does."""
    upstream.script(Reply("Espresso."), Reply("Rooibos: no caffeine."))
    first = await finish(alice, "Which tea for the evening?")
    second = await finish(alice, first.input, session_id=first.session_id)
    assert (first.position, second.position) == (1, 2)
    client = await sync_to_async(api_client)(alice)
    await sync_to_async(rate)(client, first, -1)
    await sync_to_async(rate)(client, second, 1)
    return first, second


@pytest.mark.parametrize("side", ["rejected", "chosen"])
async def test_a_regeneration_rated_oppositely_makes_a_pair_whichever_side_is_added(
    alice, brief_agent, dataset, upstream, side
):
    worse, better = await regenerated(alice, upstream)
    items = await add_run(dataset, worse if side == "rejected" else better)

    assert [i.source for i in items] == [ItemSource.RUN, ItemSource.PAIR]
    pair = items[1]
    assert (pair.source_run_id, pair.other_run_id) == (better.run_id, worse.run_id)
    assert pair.rejected_answer == "Espresso."
    assert exported(pair) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Which tea for the evening?"},
        {"role": "assistant", "content": "Rooibos: no caffeine."},
    ]
    # The regenerated run itself was sent the first answer as history; its item keeps that.
    sent_second = upstream.requests[-1]["messages"]
    assert [m["content"] for m in sent_second][-2:] == ["Espresso.", "Which tea for the evening?"]
    # The other side added later brings no second copy of the pair.
    other = await add_run(dataset, better if side == "rejected" else worse)
    assert [i.source for i in other] == [ItemSource.RUN]


async def test_answers_rated_alike_make_no_pair(alice, brief_agent, dataset, upstream):
    first = await finish(alice, "Tea?")
    second = await finish(alice, "Tea?", session_id=first.session_id)
    client = await sync_to_async(api_client)(alice)
    for run in (first, second):
        await sync_to_async(rate)(client, run, 1)
    assert [i.source for i in await add_run(dataset, second)] == [ItemSource.RUN]


# -- opting out --------------------------------------------------------------------------------


def test_runs_of_users_who_opted_out_are_collected_but_not_exported(
    alice, bob, brief_agent, dataset, staff
):
    bob.allow_training = False
    bob.save()
    chat_a = Session.objects.create(user=alice, agent=brief_agent)
    chat_b = Session.objects.create(user=bob, agent=brief_agent)
    collect.add_run(dataset, stored_run(chat_a, "alice asks", "alice's answer"), status="accepted")
    collect.add_run(dataset, stored_run(chat_b, "bob asks", "bob's answer"), status="accepted")
    assert DatasetItem.objects.count() == 2

    reader = grant(staff, "view_dataset", "view_datasetitem")
    response = api_client(reader).get(f"/api/datasets/{dataset.pk}/export?format=openai-chat")
    assert response.status_code == 200
    lines = b"".join(response).decode().splitlines()
    assert [json.loads(line)["messages"][-1]["content"] for line in lines] == ["alice's answer"]
