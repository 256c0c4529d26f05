"""The few-shot loop: a dataset's accepted examples reach the model before the history, and
nowhere else (not the session's messages, not its history, not a new item's snapshot). They are
other people's words: only what a person accepted, redacted, never an opted-out owner's."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from datasets_app.export.redact import Redactor
from datasets_app.models import Dataset, DatasetItem, DatasetRule, ItemStatus
from datasets_app.services import collect
from sessions_app import engine
from sessions_app.models import FewShotOrder, Message, Run
from tests.support.apiclient import api_client

pytestmark = pytest.mark.django_db(transaction=True)


async def answered(user, text: str, **kwargs) -> Run:
    handle = await engine.start_run(user, text, **kwargs)
    return await handle.wait()


@sync_to_async
def curate(dataset: Dataset, run: Run, status: str = ItemStatus.ACCEPTED, **fields):
    (item, *_) = collect.add_run(dataset, Run.objects.get(pk=run.pk), status=status)
    for name, value in fields.items():
        setattr(item, name, value)
    item.save()
    return item


@pytest.fixture
def dataset(db) -> Dataset:
    return Dataset.objects.create(name="greetings")


def examples(request: dict) -> list[tuple[str, str, str]]:
    return [
        (m["role"], m.get("name", ""), m["content"])
        for m in request["messages"]
        if m.get("name", "").startswith("example_")
    ]


async def test_accepted_examples_are_sent_after_the_system_message_and_before_history(
    alice, bob, brief_agent, dataset, upstream
):
    first = await curate(dataset, await answered(bob, "hello"))
    second = await curate(dataset, await answered(bob, "good morning"), corrected_answer="Morning!")
    await curate(dataset, await answered(bob, "pending one"), status=ItemStatus.PENDING)
    await curate(dataset, await answered(bob, "rejected one"), status=ItemStatus.REJECTED)
    brief_agent.fewshot_dataset = dataset
    brief_agent.fewshot_count = 3
    await brief_agent.asave()

    opening = await answered(alice, "hi")
    follow = await answered(alice, "and then?", session_id=opening.session_id)

    sent = upstream.requests[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    # Newest first, the reviewer's correction in place of the answer; nothing pending or rejected.
    assert sent[1:5] == [
        {"role": "user", "name": "example_user", "content": "good morning"},
        {"role": "assistant", "name": "example_assistant", "content": "Morning!"},
        {"role": "user", "name": "example_user", "content": "hello"},
        {"role": "assistant", "name": "example_assistant", "content": "Echo: hello"},
    ]
    assert sent[5:] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Echo: hi"},
        {"role": "user", "content": "and then?"},
    ]
    assert examples(upstream.requests[-2]) == examples(upstream.requests[-1])
    assert follow.fewshot_items == [str(second.item_id), str(first.item_id)]
    stored = [m.content async for m in Message.objects.filter(session_id=follow.session_id)]
    assert sorted(stored) == sorted(["hi", "Echo: hi", "and then?", "Echo: and then?"])


async def test_a_run_given_examples_is_collected_without_them(
    alice, bob, brief_agent, dataset, upstream
):
    await curate(dataset, await answered(bob, "hello"))
    brief_agent.fewshot_dataset = dataset
    await brief_agent.asave()
    run = await answered(alice, "hi")

    other = await Dataset.objects.acreate(name="second")
    item = await curate(other, run)

    assert examples(upstream.requests[-1])
    assert item.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Echo: hi"},
    ]


async def test_count_order_and_opt_out_choose_the_examples(
    alice, bob, brief_agent, dataset, upstream
):
    liked = await curate(dataset, await answered(bob, "liked"), rating=1)
    await curate(dataset, await answered(bob, "plain"))
    await curate(dataset, await answered(alice, "alice's own"), rating=1)
    alice.allow_training = False
    await alice.asave()
    brief_agent.fewshot_dataset = dataset
    brief_agent.fewshot_count = 1
    brief_agent.fewshot_order = FewShotOrder.BEST
    await brief_agent.asave()

    run = await answered(bob, "question")

    # Best rated first, one only; alice opted out, so her rated item is never shown.
    assert examples(upstream.requests[-1]) == [
        ("user", "example_user", "liked"),
        ("assistant", "example_assistant", "Echo: liked"),
    ]
    assert run.fewshot_items == [str(liked.item_id)]


async def test_an_agent_without_a_dataset_sends_no_examples(alice, brief_agent, dataset, upstream):
    await curate(dataset, await answered(alice, "hello"))
    run = await answered(alice, "hi")
    assert examples(upstream.requests[-1]) == [] and run.fewshot_items == []


async def test_a_run_item_gives_its_own_question_and_answer_not_its_history(
    alice, bob, brief_agent, dataset, upstream
):
    opening = await answered(bob, "first question")
    later = await answered(bob, "second question", session_id=opening.session_id)
    await curate(dataset, later)
    brief_agent.fewshot_dataset = dataset
    await brief_agent.asave()

    await answered(alice, "hi")

    assert examples(upstream.requests[-1]) == [
        ("user", "example_user", "second question"),
        ("assistant", "example_assistant", "Echo: second question"),
    ]


PLANTED = "Mail carol@example.org or call +44 20 7946 0958; my key is sk-proj4f9a8b7c6d5e4f3a2b1c."
PLANTED_ANSWER = "Write to dave@example.net or ring (555) 123-4567."


async def test_personal_data_in_an_example_reaches_the_model_redacted(
    alice, bob, brief_agent, dataset, upstream
):
    item = await curate(dataset, await answered(bob, PLANTED), corrected_answer=PLANTED_ANSWER)
    brief_agent.fewshot_dataset = dataset
    await brief_agent.asave()

    await answered(alice, "hi")

    sent = json.dumps(upstream.requests[-1])
    for said in ("carol@example.org", "7946 0958", "sk-proj4f9a8b7c6d5e4f3a2b1c",
                 "dave@example.net", "123-4567"):  # fmt: skip
        assert said not in sent
    assert examples(upstream.requests[-1]) == [
        ("user", "example_user", "Mail [email] or call [phone]; my key is [api-key]."),
        ("assistant", "example_assistant", "Write to [email] or ring [phone]."),
    ]
    # The dataset keeps what was said, for its reviewers; only the prompt is masked.
    stored = await DatasetItem.objects.aget(pk=item.pk)
    assert stored.messages[-2]["content"] == PLANTED


async def test_pending_and_rejected_items_never_reach_the_model(
    alice, bob, brief_agent, dataset, upstream
):
    await curate(dataset, await answered(bob, "waiting-7c1e"), status=ItemStatus.PENDING)
    await curate(dataset, await answered(bob, "turned-down-5d2a"), status=ItemStatus.REJECTED)
    await curate(dataset, await answered(bob, "approved"))
    brief_agent.fewshot_dataset = dataset
    brief_agent.fewshot_count = 20
    await brief_agent.asave()
    before = len(upstream.requests)

    await answered(alice, "hi")

    sent = json.dumps(upstream.requests[before:])
    assert "approved" in sent
    assert "waiting-7c1e" not in sent and "turned-down-5d2a" not in sent


def rate_up(user, run: Run) -> None:
    body = json.dumps({"rating": 1})
    answer = api_client(user).post(
        f"/api/runs/{run.run_id}/feedback", body, content_type="application/json"
    )
    assert answer.status_code == 200


def patch(user, path: str, body: dict) -> int:
    client = api_client(user)
    return client.patch(path, json.dumps(body), content_type="application/json").status_code


async def test_an_item_a_rule_accepted_is_no_example_until_a_person_accepts_it(
    alice, bob, brief_agent, dataset, upstream, django_user_model
):
    # A rule from before the dataset fed anyone: rated-up runs land accepted, unreviewed.
    rule = await DatasetRule.objects.acreate(dataset=dataset, status=ItemStatus.ACCEPTED)
    await sync_to_async(rate_up)(bob, await answered(bob, "rated by its owner"))
    item = await DatasetItem.objects.aget(dataset=dataset)
    assert item.status == ItemStatus.ACCEPTED
    await rule.adelete()
    root = await django_user_model.objects.acreate_superuser("root", password="root-pass-123")
    pointed = {"fewshot_dataset_id": str(dataset.pk)}
    assert await sync_to_async(patch)(root, f"/api/agents/{brief_agent.pk}", pointed) == 200

    unreviewed = await answered(alice, "hi")
    assert examples(upstream.requests[-1]) == [] and unreviewed.fewshot_items == []

    item_path = f"/api/datasets/{dataset.pk}/items/{item.pk}"
    assert await sync_to_async(patch)(root, item_path, {"status": "accepted"}) == 200
    reviewed = await answered(alice, "hi again")
    assert examples(upstream.requests[-1]) == [
        ("user", "example_user", "rated by its owner"),
        ("assistant", "example_assistant", "Echo: rated by its owner"),
    ]
    assert reviewed.fewshot_items == [str(item.pk)]


@pytest.fixture
def redacted(monkeypatch) -> list[str]:
    """Every text the redactor is given, as it runs."""
    given: list[str] = []
    real = Redactor.__call__

    def counted(self: Redactor, text: str) -> str:
        given.append(text)
        return real(self, text)

    monkeypatch.setattr(Redactor, "__call__", counted)
    return given


async def test_only_what_is_sent_is_redacted_and_only_once(
    alice, bob, brief_agent, dataset, upstream, redacted
):
    opening = await answered(bob, "first question")
    later = await answered(bob, "second question", session_id=opening.session_id)
    await curate(dataset, later)
    brief_agent.fewshot_dataset = dataset
    await brief_agent.asave()

    first = await answered(alice, "hi")
    assert redacted == ["second question", "Echo: second question"]
    await answered(alice, "and again", session_id=first.session_id)

    # The next start sends the same examples without redacting them again.
    assert redacted == ["second question", "Echo: second question"]
    assert examples(upstream.requests[-1]) == examples(upstream.requests[-2])


async def test_a_correction_made_after_an_example_was_sent_is_sent_next(
    alice, bob, superuser, brief_agent, dataset, upstream
):
    item = await curate(dataset, await answered(bob, "hello"))
    brief_agent.fewshot_dataset = dataset
    await brief_agent.asave()
    await answered(alice, "hi")

    corrected = {"corrected_answer": "Hello! Mail me at erin@example.com."}
    item_path = f"/api/datasets/{dataset.pk}/items/{item.pk}"
    assert await sync_to_async(patch)(superuser, item_path, corrected) == 200
    await answered(alice, "hi again")

    assert examples(upstream.requests[-1]) == [
        ("user", "example_user", "hello"),
        ("assistant", "example_assistant", "Hello! Mail me at [email]."),
    ]
